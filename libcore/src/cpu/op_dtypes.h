/*
 * cpu/op_dtypes.h - which dtypes the CPU kernels compute each op in, per kernel family. The
 * CPU backend's op_dtypes table is generated from it, and so is the meta backend's (meta
 * stands in for the CPU, so it accepts what the CPU computes).
 */
#ifndef HL_CPU_OP_DTYPES_H
#define HL_CPU_OP_DTYPES_H

/* Per family: every family takes the numeric dtypes
   and bool unless listed here. float16 and bfloat16 are storage and cast dtypes only on the
   CPU (hl_check_compute_dtype's message says to cast). */
enum {
    F32_F64 = (1u << HL_F32) | (1u << HL_F64),
    CPU_ALL = F32_F64 | (1u << HL_I32) | (1u << HL_I64) | (1u << HL_U8) | (1u << HL_BOOL),
    CPU_COPY = CPU_ALL | (1u << HL_F16) | (1u << HL_BF16),  /* moves bytes: every dtype */
};
#define DTYPES_unary CPU_ALL
#define DTYPES_binary CPU_ALL
#define DTYPES_copy CPU_COPY
#define DTYPES_fill CPU_COPY
#define DTYPES_arange CPU_ALL
#define DTYPES_eye CPU_ALL
#define DTYPES_triangle CPU_COPY
#define DTYPES_where CPU_COPY
#define DTYPES_reduce CPU_ALL
#define DTYPES_arg_reduce CPU_ALL
#define DTYPES_cumsum CPU_ALL
#define DTYPES_matmul (F32_F64 | (1u << HL_I32) | (1u << HL_I64))
#define DTYPES_gemm (F32_F64 | (1u << HL_I32) | (1u << HL_I64))
#define DTYPES_conv F32_F64
#define DTYPES_conv_pack (1u << HL_F32)   /* the packed products are float32 only */
#define DTYPES_conv_grad_input F32_F64
#define DTYPES_conv_grad_weight F32_F64
#define DTYPES_pool F32_F64
#define DTYPES_pool_grad F32_F64
#define DTYPES_batch_norm F32_F64
#define DTYPES_batch_norm_grad F32_F64
#define DTYPES_layer_norm F32_F64
#define DTYPES_layer_norm_grad F32_F64
#define DTYPES_softmax F32_F64
#define DTYPES_softmax_grad F32_F64
#define DTYPES_softmax_cross_entropy F32_F64
#define DTYPES_softmax_cross_entropy_grad F32_F64
#define DTYPES_gather CPU_COPY
#define DTYPES_gather_grad F32_F64
#define DTYPES_gather_elements CPU_COPY
#define DTYPES_scatter_elements CPU_ALL
#define DTYPES_one_hot CPU_ALL
#define DTYPES_nonzero CPU_ALL
#define DTYPES_topk CPU_ALL
#define DTYPES_concat CPU_COPY
#define DTYPES_pad CPU_COPY
#define DTYPES_tile CPU_COPY
#define DTYPES_resize CPU_COPY  /* nearest moves any dtype; linear: see api/resize.c */
#define DTYPES_resize_grad F32_F64
#define DTYPES_random F32_F64

#define HL_CPU_DTYPES_ROW(NAME, name, family, ...) [HL_OP_##NAME] = DTYPES_##family,
/* Ops whose dtypes differ from their family's (later designators override earlier ones):
   a Bernoulli draw writes 0 or 1, which every dtype holds. */
#define HL_CPU_DTYPES_OVERRIDES [HL_OP_RANDOM_BERNOULLI] = CPU_COPY,

#endif /* HL_CPU_OP_DTYPES_H */
