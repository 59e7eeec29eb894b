/*
 * hl_core.h - the one public header of libcore, hl's C core.
 *
 * Conventions (read these once, they hold for every function below):
 *  - Every entry point returns an hl_status. HL_OK is 0; anything else is a failure whose
 *    human-readable message (naming the op, the shapes and dtypes) is in hl_last_error(),
 *    which is thread-local. The core never aborts, never prints, and checks shapes, dtypes,
 *    devices and index ranges itself before touching memory.
 *  - Tensors are opaque, reference-counted handles. A function that produces a tensor takes
 *    `hl_tensor **out`: if *out is NULL the core allocates the result (the caller owns one
 *    reference); if *out is a tensor, the result is written into it after checking its shape,
 *    dtype and device (it must not overlap the inputs), and the caller still owns one new
 *    reference to it. Release every reference with hl_tensor_release().
 *  - Shapes, strides and offsets are in elements, int64_t. Strides may be zero (broadcast) or
 *    negative (flipped views). Axes may be negative (counted from the end) wherever an axis
 *    is taken.
 *  - Ops are named by an op code. The op list lives in libcore/src/ops.h; hl_op_lookup()
 *    maps a name ("add", "conv", ...) to its code, so bindings never hard-code numbers.
 *
 * The block between HL_CDEF_BEGIN and HL_CDEF_END is what cffi parses: keep it free of
 * preprocessor lines and of anything cffi cannot read.
 */
#ifndef HL_CORE_H
#define HL_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libcore is compiled with -fvisibility=hidden: what is declared here is all it exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* HL_CDEF_BEGIN */

/* ---- status codes, dtypes, devices ----------------------------------------------------- */

typedef int hl_status;
enum {
    HL_OK = 0,
    HL_ERR_SHAPE = 1,       /* incompatible or invalid shapes */
    HL_ERR_DTYPE = 2,       /* dtype not supported by the op, or dtypes that differ */
    HL_ERR_DEVICE = 3,      /* tensors on different devices, or a device that is absent */
    HL_ERR_INDEX = 4,       /* an axis or an index out of range */
    HL_ERR_VALUE = 5,       /* an invalid argument value (negative size, zero step...) */
    HL_ERR_UNSUPPORTED = 6, /* a valid request this build cannot do */
    HL_ERR_MEMORY = 7,      /* allocation failed */
    HL_ERR_NOT_VIEWABLE = 8,/* a view was asked for but the strides do not allow one */
    HL_ERR_INTERNAL = 9
};

typedef enum {
    HL_F32 = 0, HL_F64 = 1, HL_I32 = 2, HL_I64 = 3, HL_U8 = 4, HL_BOOL = 5,
    HL_F16 = 6, HL_BF16 = 7,
    HL_NUM_DTYPES = 8
} hl_dtype;

enum { HL_MAX_DIMS = 8 };

/* meta: tensors with a shape, a dtype and strides but no memory. Entry points check their
   arguments and compute output shapes and dtypes as on any device; nothing is allocated and
   no kernel runs (compile with placeholders, symbolic tensors, plan recording). */
enum { HL_DEVICE_CPU = 0, HL_DEVICE_CUDA = 1, HL_DEVICE_META = 2, HL_DEVICE_KINDS = 3 };
typedef struct { int kind; int index; } hl_device;

typedef struct hl_tensor hl_tensor;
typedef struct hl_plan hl_plan;

/* ---- library information and errors ------------------------------------------------------ */

const char *hl_version(void);
const char *hl_last_error(void);          /* message of the last failure on this thread */
hl_status hl_last_status(void);
const char *hl_status_name(hl_status s);
const char *hl_dtype_name(hl_dtype dtype);
size_t hl_dtype_size(hl_dtype dtype);
int hl_op_count(void);
const char *hl_op_name(int op);           /* NULL when op is out of range */
int hl_op_lookup(const char *name);       /* -1 when no op has that name */

/* Threads used by libcore's parallel loops (its thread pool, cpu/thread_pool.h, and the
   OpenMP loops not yet moved onto it) and by OpenBLAS (set together, so they never
   oversubscribe the cores). */
void hl_set_num_threads(int n);
int hl_get_num_threads(void);

/* The instruction set the CPU kernels use on this machine: "avx512", "avx2" or "portable"
   (the CPU's, lowered by HL_CPU_AVX512=0 or HL_CONV_AVX2=0 in the environment; see
   cpu/cpu_features.h). */
const char *hl_cpu_kernels(void);

/* How many times the direct convolution kernels (cpu/conv_direct.c) ran a pass (0 forward,
   1 grad_input, 2 grad_weight) in this process: for tests, which cannot always tell from the
   bits which kernel ran. -1 for another pass number. */
int64_t hl_conv_direct_runs(int pass);
/* How many times a product against packed weights (cpu/conv_packed.c) took one of its ways
   for few samples: 0 summed in two halves of K, 1 its panels in lanes. -1 for another. */
int64_t hl_conv_packed_runs(int way);

/* libcore's thread pool under test (tests/test_thread_pool.py): a loop over n items in chunks
   of at least grain items; item i writes to slot_of[i] the slot of the thread that ran it (0:
   the caller; -1: a nested loop of `nested` items it ran left its thread, or its slot was not
   restored). Item fail_at (if in range) fails with HL_ERR_VALUE, which the call returns; each
   item first spins spin_ns; with hold_workers the workers claim nothing, as if descheduled. */
hl_status hl_pool_probe(int64_t n, int64_t grain, int32_t *slot_of, int64_t fail_at,
                        int nested, int64_t spin_ns, int hold_workers);
/* The same in lanes (the pool's hl_parallel_lanes: lane l of T threads holds items
   [l n / T, (l + 1) n / T), which slot l runs first). */
hl_status hl_pool_probe_lanes(int64_t n, int32_t *slot_of, int nested, int64_t spin_ns,
                              int hold_workers);

/* The pool's loops, recorded for profiling (bench/pool_profile.py): while recording is on,
   every loop started outside a chunk (run by the pool, or inline on its caller) takes the
   next record. busy_ns[s] is the time slot s spent inside the loop's chunks (slots past the
   last in the last), so busy time beside end - start says whether threads waited or worked
   slower. */
enum { HL_POOL_TRACE_SLOTS = 4 };
typedef struct {
    int64_t start_ns, end_ns;     /* CLOCK_MONOTONIC */
    uint64_t fn;                  /* the loop's chunk function (an address in libcore) */
    int64_t items, chunks;
    int64_t busy_ns[HL_POOL_TRACE_SLOTS];
    int32_t chunks_run[HL_POOL_TRACE_SLOTS];
    int32_t threads;              /* the threads that could take part: 1 for a loop inline */
    int32_t pad;
} hl_pool_region;
/* Starts recording into regions[0 .. capacity), which the caller keeps until
   hl_pool_trace_stop; HL_ERR_VALUE when recording is on already. */
hl_status hl_pool_trace_start(hl_pool_region *regions, int64_t capacity);
/* Stops recording, once every loop writing a record has finished: the records written (loops
   past capacity are not recorded). 0 when recording was off. */
int64_t hl_pool_trace_stop(void);

/* CRC-32 as zip, gzip and zlib.crc32 compute it, continuing from crc (0 to start). Checkpoint
   archives check every member with it; carry-less multiplication where the CPU has it. */
uint32_t hl_crc32(uint32_t crc, const void *data, size_t n);
int hl_crc32_accelerated(void);          /* 1 when the PCLMULQDQ path is in use */
/* The CRC-32 of A followed by B, from crc(A), crc(B) and B's length. */
uint32_t hl_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* ---- devices and memory ---------------------------------------------------------------------- */

int hl_device_available(hl_device device);           /* 1 when a backend serves it */
/* The name of the backend serving device ("cpu", "meta", "cuda"), or NULL when none does. */
const char *hl_device_backend(hl_device device);
/* 1 when the device's backend computes op in dtype (what entry points ask before submitting). */
int hl_device_computes(hl_device device, int op, hl_dtype dtype);
/* Waits until the device has finished the work submitted to it (a no-op on the CPU). */
hl_status hl_device_synchronize(hl_device device);
/* Bytes handed to tensors now, held in the cache, and the high-water mark of the first. */
hl_status hl_memory_stats(hl_device device, int64_t *in_use, int64_t *cached, int64_t *peak);
hl_status hl_memory_empty_cache(hl_device device);
/* Loads a backend built as a library of its own (libhlcuda: libcore/src/plugin.h) and
   registers it. On failure the reason is kept for messages about that device kind. */
hl_status hl_backend_load(const char *path);
/* Why no backend serves devices of this kind ("" when one does, or none was ever tried). */
const char *hl_backend_unavailable_reason(int kind);
/* Records why a backend of this kind is absent (the Python side that looks for libhlcuda
   says which file is missing); the reason shows in every DeviceError about such a device. */
void hl_backend_set_unavailable_reason(int kind, const char *why);
/* Restarts the high-water mark from the bytes in use now (PyTorch's reset_peak_memory_stats). */
hl_status hl_memory_reset_peak(hl_device device);

/* ---- tensors ------------------------------------------------------------------------------------ */

hl_status hl_tensor_empty(hl_dtype dtype, hl_device device, int ndim, const int64_t *shape,
                          hl_tensor **out);
/* A contiguous CPU tensor over nbytes at data: memory hl does not own (a numpy array's
   buffer). Nothing is copied and no release frees it: the caller keeps the memory alive and
   unchanged while anything may read the tensor (hl.onnx keeps the array until its plan's
   slot is bound again). data must be aligned to the dtype's size; nbytes must cover shape. */
hl_status hl_tensor_borrow_host(void *data, size_t nbytes, hl_dtype dtype, int ndim,
                                const int64_t *shape, hl_tensor **out);
/* Asks that the memory of t's storage, not yet touched, come in ordinary pages rather than
   the transparent huge pages the CPU backend asks for large blocks: for bytes written once
   from a file and then read a few times (weights before packing). Such a block is freed,
   not cached, when released. A no-op off the CPU, for blocks the backend did not ask huge
   pages for, and for a view that does not start its storage. Call it before the first
   write. */
void hl_tensor_plain_pages(hl_tensor *t);
hl_tensor *hl_tensor_retain(hl_tensor *t);
void hl_tensor_release(hl_tensor *t);

hl_dtype hl_tensor_dtype(const hl_tensor *t);
hl_device hl_tensor_device(const hl_tensor *t);
/* kind * 2^32 + index: the device as one number (a cheap key for signatures, hl.graph) */
int64_t hl_tensor_device_key(const hl_tensor *t);
int hl_tensor_ndim(const hl_tensor *t);
const int64_t *hl_tensor_shape(const hl_tensor *t);
const int64_t *hl_tensor_strides(const hl_tensor *t);   /* in elements */
int64_t hl_tensor_offset(const hl_tensor *t);           /* in elements, into the storage */
int64_t hl_tensor_numel(const hl_tensor *t);
int hl_tensor_is_contiguous(const hl_tensor *t);        /* row-major, no gaps */
void *hl_tensor_data(const hl_tensor *t);               /* first element; NULL off the CPU */
int hl_tensor_shares_storage(const hl_tensor *a, const hl_tensor *b);

/* Host <-> tensor copies of a contiguous tensor's bytes (any device). A meta tensor has no
   values: writing to one checks the sizes and keeps nothing, reading from one fails. */
hl_status hl_tensor_write(hl_tensor *dst, const void *src, size_t nbytes);
hl_status hl_tensor_read(const hl_tensor *src, void *dst, size_t nbytes);
/* A contiguous copy on another device (a plain copy when the device is the same). */
hl_status hl_tensor_to_device(const hl_tensor *x, hl_device device, hl_tensor **out);

/* ---- views: no data moves; the result shares the input's storage ------------------------ */

/* One entry of shape may be -1 (inferred). Fails with HL_ERR_NOT_VIEWABLE when the strides
   do not allow a view; hl_reshape then copies. */
hl_status hl_view_reshape(const hl_tensor *x, int ndim, const int64_t *shape, hl_tensor **out);
hl_status hl_reshape(const hl_tensor *x, int ndim, const int64_t *shape, hl_tensor **out);
hl_status hl_view_permute(const hl_tensor *x, const int64_t *perm, hl_tensor **out);
/* Per axis: the first index, the number of elements taken and the step (may be negative). */
hl_status hl_view_slice(const hl_tensor *x, const int64_t *start, const int64_t *length,
                        const int64_t *step, hl_tensor **out);
hl_status hl_view_select(const hl_tensor *x, int64_t axis, int64_t index, hl_tensor **out);
/* Broadcast to shape (numpy rules; -1 keeps a dimension). */
hl_status hl_view_expand(const hl_tensor *x, int ndim, const int64_t *shape, hl_tensor **out);
/* naxes == 0 squeezes every size-1 axis. */
hl_status hl_view_squeeze(const hl_tensor *x, int naxes, const int64_t *axes, hl_tensor **out);
hl_status hl_view_unsqueeze(const hl_tensor *x, int64_t axis, hl_tensor **out);
hl_status hl_view_flip(const hl_tensor *x, int naxes, const int64_t *axes, hl_tensor **out);
/* Splits along axis into n views of the given sizes (they must sum to the axis length). */
hl_status hl_view_split(const hl_tensor *x, int64_t axis, int n, const int64_t *sizes,
                        hl_tensor **outs);

/* ---- copies, casts, fills ------------------------------------------------------------------ */

hl_status hl_contiguous(const hl_tensor *x, hl_tensor **out);  /* x itself when contiguous */
/* dst[...] = src, broadcasting src to dst's shape and casting to dst's dtype. */
hl_status hl_copy(hl_tensor *dst, const hl_tensor *src);
hl_status hl_cast(const hl_tensor *x, hl_dtype dtype, hl_tensor **out);
hl_status hl_fill(hl_tensor *dst, double value);
hl_status hl_arange(double start, double step, int64_t n, hl_dtype dtype, hl_device device,
                    hl_tensor **out);
/* n x m with ones on diagonal k. */
hl_status hl_eye(int64_t n, int64_t m, int64_t k, hl_dtype dtype, hl_device device,
                 hl_tensor **out);
/* Keeps the lower (upper = 0) or upper triangle of the last two axes, from diagonal k; zeroes
   the rest (ONNX Trilu). */
hl_status hl_triangle(const hl_tensor *x, int64_t k, int upper, hl_tensor **out);

/* ---- element-wise ------------------------------------------------------------------------ */

/* op: a unary op code ("neg", "exp", "leaky_relu", ...). alpha and beta are the op's
   parameters where it has them (leaky_relu/elu/celu: alpha; selu: alpha, gamma=beta;
   hard_sigmoid: alpha, beta) and are ignored otherwise. */
hl_status hl_unary(int op, const hl_tensor *x, double alpha, double beta, hl_tensor **out);
/* op: a binary op code ("add", ..., "eq", ..., "logical_and", ...). a and b broadcast (numpy
   rules) and must share a dtype; comparisons and logical ops give bool. */
hl_status hl_binary(int op, const hl_tensor *a, const hl_tensor *b, hl_tensor **out);
/* cond (bool) ? a : b, all three broadcast together. */
hl_status hl_where(const hl_tensor *cond, const hl_tensor *a, const hl_tensor *b,
                   hl_tensor **out);

/* ---- reductions -------------------------------------------------------------------------- */

/* op: "sum", "mean", "max", "min", "prod", "l2", "logsumexp". naxes == 0 reduces nothing. */
hl_status hl_reduce(int op, const hl_tensor *x, int naxes, const int64_t *axes, int keepdims,
                    hl_tensor **out);
/* op: "argmax", "argmin"; result int64. select_last picks the last of equal extremes. */
hl_status hl_arg_reduce(int op, const hl_tensor *x, int64_t axis, int keepdims,
                        int select_last, hl_tensor **out);
hl_status hl_cumsum(const hl_tensor *x, int64_t axis, int exclusive, int reverse,
                    hl_tensor **out);

/* ---- linear algebra ------------------------------------------------------------------------ */

/* numpy.matmul: 1-D operands promoted and the added axis removed, batch axes broadcast. */
hl_status hl_matmul(const hl_tensor *a, const hl_tensor *b, hl_tensor **out);
/* alpha * op(a) @ op(b) + beta * c, a and b 2-D, c (may be NULL) broadcast to (M, N). */
hl_status hl_gemm(const hl_tensor *a, const hl_tensor *b, const hl_tensor *c, int trans_a,
                  int trans_b, double alpha, double beta, hl_tensor **out);

/* float32 b (K, N), or b (N, K) read as its transpose when trans_b, in the layout
   hl_matmul_fused's kernel reads: a contiguous float32 (ceil(N / 16), K, 16) tensor holding
   16-column panels (zeros past column N) in blocks of rows (cpu/matmul_fused.c describes the
   order). Made once for a constant weight (an inference program does it at prepare()), it
   saves repacking B on every product. */
hl_status hl_gemm_pack_b(const hl_tensor *b, int trans_b, hl_tensor **out);
/* act(a @ b + bias + residual), each output tile finished while it is in cache (the
   inference epilogue of MatMul/Gemm + Add + Add/Gelu). a is (..., K); b is either a 2-D
   (K, N) matrix (n < 0) or what hl_gemm_pack_b made from a (K, n) one (n >= 0, float32).
   bias (N,) and residual (the output's shape, (..., N)) may be NULL; act is HL_CONV_ACT_*
   with alpha and beta as listed there. float32 and float64 (plain b only). The result
   equals matmul, add, add and the activation's op to float rounding (a different order of
   the sums). */
hl_status hl_matmul_fused(const hl_tensor *a, const hl_tensor *b, int64_t n,
                          const hl_tensor *bias, const hl_tensor *residual, int act,
                          double alpha, double beta, hl_tensor **out);

/* softmax(scale * q @ k^T + mask) @ v for each (batch, head): a transformer's attention
   block in one pass for inference (no gradient), the scores of a few query rows at a time
   kept in cache instead of written out. q (B, H, Sq, D), k (B, H, Sk, D), v (B, H, Sk, Dv),
   float32, any strides (views of a head split are read in place when their last axis is
   contiguous; others are copied). mask: NULL, or float32 broadcastable to (B, H, Sq, Sk),
   added to the scaled scores (-inf hides a key). A row whose scores are all -inf, or that
   holds a NaN or +inf, has NaN probabilities as in softmax; nan_to_zero takes NaN
   probabilities as 0 (the IsNaN/Where that PyTorch's scaled_dot_product_attention exports
   after its softmax), so such a row's output is 0. merge_heads: out is (B, Sq, H * Dv), the
   heads merged back as the Transpose + Reshape after the block would, else (B, H, Sq, Dv).
   Equal to the unfused ops to float rounding (the scale is applied to q). */
hl_status hl_attention(const hl_tensor *q, const hl_tensor *k, const hl_tensor *v,
                       const hl_tensor *mask, double scale, int nan_to_zero, int merge_heads,
                       hl_tensor **out);

/* ---- convolution (1-D and 2-D, NC[H]W) ---------------------------------------------------- */
/* S = number of spatial axes = x's ndim - 2. stride, dilation: S entries; pads: 2*S entries,
   all begins then all ends (ONNX order); NULL gives the defaults (1, 0, 1). w is (C_out,
   C_in / groups, k...). bias may be NULL. float32 and float64. */

hl_status hl_conv(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias,
                  const int64_t *stride, const int64_t *pads, const int64_t *dilation,
                  int64_t groups, hl_tensor **out);
/* Activations a fused convolution applies to its outputs (hl_conv_fused). */
enum {
    HL_CONV_ACT_NONE = 0,
    HL_CONV_ACT_RELU = 1,          /* max(x, 0) */
    HL_CONV_ACT_CLIP = 2,          /* min(max(x, alpha), beta) */
    HL_CONV_ACT_LEAKY_RELU = 3,    /* x >= 0 ? x : alpha * x */
    HL_CONV_ACT_HARD_SIGMOID = 4,  /* max(0, min(1, alpha * x + beta)) */
    HL_CONV_ACT_GELU = 5,          /* x/2 (1 + erf(x / sqrt 2)); hl_matmul_fused only */
    HL_CONV_ACT_GELU_TANH = 6      /* GELU's tanh form (gelu_tanh); hl_matmul_fused only */
};
/* act(conv(x, w, bias) + residual), with every output finished while it is in cache (the
   inference epilogue ONNX importers fuse: Conv + Add + Relu and the like). residual may be
   NULL, else it has the output's shape and dtype; act is one of HL_CONV_ACT_*, with alpha
   and beta as listed there. The other arguments are hl_conv's. The result equals hl_conv,
   then hl_add, then the activation's own op, NaN and infinities included. packed (float32
   only, may be NULL) is hl_conv_pack's copy of w for these groups, in either layout: the CPU
   then takes it where that is its fastest way (no re-packing or transforming per call), and
   the result differs from the unpacked one by float rounding only. The caller keeps packed
   equal to w's packing. */
hl_status hl_conv_fused(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias,
                        const hl_tensor *residual, const hl_tensor *packed,
                        const int64_t *stride, const int64_t *pads,
                        const int64_t *dilation, int64_t groups, int act, double alpha,
                        double beta, hl_tensor **out);
/* w (C_out, C_in / groups, k...) repacked, once, into a layout hl_conv_fused's CPU kernels
   read (float32): HL_CONV_PACK_PANELS, for its products, is (groups * panels, C_in / groups *
   k..., HL_CONV_PACK_ROWS), each panel HL_CONV_PACK_ROWS output channels of a group (the last
   padded with zeros); HL_CONV_PACK_WINOGRAD, for a 3x3 kernel of one group, is (4, 4, C_out,
   C_in), the kernels transformed for Winograd's F(2x2, 3x3); HL_CONV_PACK_WINOGRAD43 is
   (6, 6, C_out, C_in), transformed for F(4x4, 3x3), which a 3x3 stride-1 float32 conv_fused
   given it takes wherever Winograd fits (the caller picks the layout by tile count; weights
   the precision guard refuses are packed as NaN and take the unpacked paths). */
enum { HL_CONV_PACK_ROWS = 6 };
enum { HL_CONV_PACK_PANELS = 0, HL_CONV_PACK_WINOGRAD = 1, HL_CONV_PACK_WINOGRAD43 = 2 };
/* From this many 2x2 output tiles (batch x ceil(oh / 2) x ceil(ow / 2)) a 3x3 stride-1
   float32 conv_fused with its kernels in the Winograd layout takes Winograd (cpu/winograd.c);
   below, the weights' other paths. hl.onnx packs them at the first call that has as many. */
enum { HL_WINOGRAD_PACKED_MIN_TILES = 16 };
/* The Winograd layout's panels: HL_WINOGRAD_MR output channels each (packed_layouts.h).
   The packed products take the tiles in strips of HL_WINOGRAD_NR (a strip's product costs
   the same however many of its tiles are real), which is what hl.onnx's choice between
   F(2x2, 3x3) and F(4x4, 3x3) counts. */
enum { HL_WINOGRAD_MR = 6, HL_WINOGRAD_NR = 16 };
hl_status hl_conv_pack(const hl_tensor *w, int64_t groups, int layout, hl_tensor **out);
/* Gradient of hl_conv with respect to x, whose shape is x_shape (S + 2 entries). */
hl_status hl_conv_grad_input(const hl_tensor *dy, const hl_tensor *w, const int64_t *x_shape,
                             const int64_t *stride, const int64_t *pads,
                             const int64_t *dilation, int64_t groups, hl_tensor **out);
/* Gradient of hl_conv with respect to w, whose shape is w_shape (S + 2 entries). */
hl_status hl_conv_grad_weight(const hl_tensor *dy, const hl_tensor *x, const int64_t *w_shape,
                              const int64_t *stride, const int64_t *pads,
                              const int64_t *dilation, int64_t groups, hl_tensor **out);
/* Transposed convolution; w is (C_in, C_out / groups, k...) as in ONNX and PyTorch.
   output_padding: S entries added to the end of each output spatial axis. */
hl_status hl_conv_transpose(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias,
                            const int64_t *stride, const int64_t *pads,
                            const int64_t *dilation, const int64_t *output_padding,
                            int64_t groups, hl_tensor **out);

/* ---- pooling (1-D and 2-D, NC[H]W) -------------------------------------------------------- */
/* op: "max_pool" or "avg_pool". kernel, stride, dilation: S entries; pads: 2*S (begins, ends);
   stride NULL means the kernel, pads NULL 0, dilation NULL 1. Windows follow PyTorch (ceil_mode:
   the last window starts inside the input or its leading padding). For max_pool, *indices (may
   be NULL) receives int64 flat indices into each input plane (h * W + w), -1 for a window that
   covers padding only (its output is -inf). */

hl_status hl_pool(int op, const hl_tensor *x, const int64_t *kernel, const int64_t *stride,
                  const int64_t *pads, const int64_t *dilation, int ceil_mode,
                  int count_include_pad, hl_tensor **out, hl_tensor **indices);
/* Gradient of hl_pool with respect to x (shape x_shape). max_pool needs the indices it gave
   (int64 or int32; each is range-checked, -1 contributes nothing). */
hl_status hl_pool_grad(int op, const hl_tensor *dy, const hl_tensor *indices,
                       const int64_t *x_shape, const int64_t *kernel, const int64_t *stride,
                       const int64_t *pads, const int64_t *dilation, int ceil_mode,
                       int count_include_pad, hl_tensor **out);

/* ---- normalisation -------------------------------------------------------------------------- */

/* x is (N, C, ...), float32 or float64; scale, bias (C entries) may be NULL (1 and 0).
   training: normalise with the batch statistics (biased variance) and, when running_mean /
   running_var are given (both or neither), update them in place: running = (1 - momentum) *
   running + momentum * batch, with the unbiased batch variance (PyTorch convention; an
   empty batch leaves them alone; one value per channel is refused, as in PyTorch).
   Otherwise (inference) normalise with the running statistics, which are then required.
   momentum in [0, 1], eps >= 0. save_mean and save_invstd (C entries; either pointer may be
   NULL) receive the mean and 1 / sqrt(var + eps) that normalised x: the batch's when
   training, the running ones otherwise. All tensors share x's dtype. */
hl_status hl_batch_norm(const hl_tensor *x, const hl_tensor *scale, const hl_tensor *bias,
                        hl_tensor *running_mean, hl_tensor *running_var, int training,
                        double momentum, double eps, hl_tensor **out, hl_tensor **save_mean,
                        hl_tensor **save_invstd);
/* Takes the save_mean / save_invstd that hl_batch_norm gave for the same training flag.
   training = 1: the full gradient through the batch statistics. training = 0: the statistics
   are constants (inference), dx = dy * scale * save_invstd, where save_invstd is then
   1 / sqrt(running_var + eps) and save_mean the running mean (what hl_batch_norm with
   training = 0 returns). dscale = sum(dy * (x - save_mean) * save_invstd), dbias = sum(dy)
   over every axis but 1. Any of dx, dscale, dbias may be NULL (not wanted). */
hl_status hl_batch_norm_grad(const hl_tensor *dy, const hl_tensor *x, const hl_tensor *scale,
                             const hl_tensor *save_mean, const hl_tensor *save_invstd,
                             int training, hl_tensor **dx, hl_tensor **dscale,
                             hl_tensor **dbias);
/* Normalises over the axes from `axis` to the end; scale and bias have those axes' shape (or
   are NULL). mean and invstd (may be NULL) get x's leading shape (x.shape[:axis]); an
   empty row gives mean 0 and invstd NaN, as in PyTorch. The grad takes them back; any of
   dx, dscale, dbias may be NULL (not wanted). */
hl_status hl_layer_norm(const hl_tensor *x, const hl_tensor *scale, const hl_tensor *bias,
                        int64_t axis, double eps, hl_tensor **out, hl_tensor **mean,
                        hl_tensor **invstd);
hl_status hl_layer_norm_grad(const hl_tensor *dy, const hl_tensor *x, const hl_tensor *scale,
                             const hl_tensor *mean, const hl_tensor *invstd, int64_t axis,
                             hl_tensor **dx, hl_tensor **dscale, hl_tensor **dbias);

/* ---- softmax and cross-entropy ---------------------------------------------------------- */

/* op: "softmax" or "log_softmax". A row holding NaN or +inf, or only -inf, gives NaN (as
   in PyTorch). A 0-d x is one row of one element (axis 0 or -1). */
hl_status hl_softmax(int op, const hl_tensor *x, int64_t axis, hl_tensor **out);
/* Gradient from the forward output y and its gradient dy; op names the forward op (or its
   _grad op). softmax: y * (dy - sum(dy * y)); log_softmax: dy - exp(y) * sum(dy). */
hl_status hl_softmax_grad(int op, const hl_tensor *y, const hl_tensor *dy, int64_t axis,
                          hl_tensor **out);
/* logits (N, C, d...) with the class axis 1. target: int32/int64 labels (N, d...), or
   probabilities with the logits' shape (one-hot or soft). Labels equal to ignore_index give
   loss 0 and no gradient; any other label outside [0, C) fails with HL_ERR_INDEX (checked
   when the call runs). loss: per-sample losses (N, d...); log_prob: log_softmax(logits)
   (may be NULL). */
hl_status hl_softmax_cross_entropy(const hl_tensor *logits, const hl_tensor *target,
                                   int64_t ignore_index, hl_tensor **loss,
                                   hl_tensor **log_prob);
/* dlogits from log_prob, target and dloss (per-sample gradient, the loss's shape):
   (exp(log_prob) * sum(target) - target) * dloss, the exact gradient (softmax - target when
   the target sums to 1, as one-hot labels do); ignored labels give 0. */
hl_status hl_softmax_cross_entropy_grad(const hl_tensor *log_prob, const hl_tensor *target,
                                        const hl_tensor *dloss, int64_t ignore_index,
                                        hl_tensor **out);

/* ---- indexing ------------------------------------------------------------------------------- */

/* ONNX Gather: out = x[:axis] + indices.shape + x[axis+1:]; negative indices count from the end.
   index_select is gather with 1-D indices. */
hl_status hl_gather(const hl_tensor *x, int64_t axis, const hl_tensor *indices,
                    hl_tensor **out);
/* Gradient of hl_gather: dy scattered (added) into zeros of shape x_shape. */
hl_status hl_gather_grad(const hl_tensor *dy, int64_t axis, const hl_tensor *indices,
                         int ndim, const int64_t *x_shape, hl_tensor **out);
hl_status hl_gather_elements(const hl_tensor *x, int64_t axis, const hl_tensor *indices,
                             hl_tensor **out);
/* reduction: 0 none (replace), 1 add, 2 mul, 3 max, 4 min (ONNX ScatterElements). out is a
   copy of x with the updates applied in row-major order of indices (repeated indices: the
   last one wins for none); *out may be x itself (contiguous) to scatter in place. */
hl_status hl_scatter_elements(const hl_tensor *x, int64_t axis, const hl_tensor *indices,
                              const hl_tensor *updates, int reduction, hl_tensor **out);
/* out[..., i, ...] = on if indices[...] == i else off; negative indices count from depth;
   indices outside [-depth, depth) give a row of off values (ONNX). axis: where the new axis
   of size depth goes in out (-1: last). */
hl_status hl_one_hot(const hl_tensor *indices, int64_t depth, int64_t axis, double on_value,
                     double off_value, hl_dtype dtype, hl_tensor **out);
/* int64 (ndim, count) coordinates of the non-zero elements, row-major order (ONNX NonZero).
   The shape depends on the data: refused (HL_ERR_UNSUPPORTED) while a plan is recorded, and
   *out must be NULL. */
hl_status hl_nonzero(const hl_tensor *x, hl_tensor **out);
/* The k largest (smallest) along axis, best first, with int64 positions; 0 <= k <= the axis
   size. Ties: lower index first (ONNX); NaN counts as the largest value. The result is sorted
   whatever `sorted` says. */
hl_status hl_topk(const hl_tensor *x, int64_t k, int64_t axis, int largest, int sorted,
                  hl_tensor **values, hl_tensor **indices);

/* ---- shape-changing copies ------------------------------------------------------------------- */

hl_status hl_concat(int n, hl_tensor *const *xs, int64_t axis, hl_tensor **out);
/* pads: 2*ndim entries, all begins then all ends (ONNX order); negative pads crop.
   mode: 0 constant, 1 reflect, 2 edge. */
hl_status hl_pad(const hl_tensor *x, const int64_t *pads, int mode, double value,
                 hl_tensor **out);
hl_status hl_tile(const hl_tensor *x, const int64_t *repeats, hl_tensor **out);
/* Resize to out_shape (same ndim as x). mode: 0 nearest, 1 linear (n-linear over the axes
   whose size changes). coord: 0 half_pixel, 1 asymmetric, 2 align_corners,
   3 pytorch_half_pixel. nearest: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
   scales (ndim entries, may be NULL) override out/in for the coordinate mapping. */
hl_status hl_resize(const hl_tensor *x, const int64_t *out_shape, const double *scales,
                    int mode, int coord, int nearest, hl_tensor **out);
hl_status hl_resize_grad(const hl_tensor *dy, const int64_t *x_shape, const double *scales,
                         int mode, int coord, int nearest, hl_tensor **out);

/* ---- random numbers ---------------------------------------------------------------------- */
/* Counter-based (Philox 4x32-10): element i of the output is a function of (seed, offset, i)
   alone, so the numbers do not depend on the thread count. Each counter value gives four
   32-bit words; a draw of n elements uses counters offset .. offset + ceil(n / k) - 1, with
   k = 2 for float64 uniform and normal and k = 4 otherwise (bernoulli, float32), so the next
   draw should start at offset + ceil(n / k). dst must be contiguous. */

hl_status hl_random_uniform(hl_tensor *dst, uint64_t seed, uint64_t offset, double low,
                            double high);
hl_status hl_random_normal(hl_tensor *dst, uint64_t seed, uint64_t offset, double mean,
                           double std);
hl_status hl_random_bernoulli(hl_tensor *dst, uint64_t seed, uint64_t offset, double p);

/* ---- optimiser updates ------------------------------------------------------------------ */
/* One optimiser step of one parameter in one pass over its elements (hl.opt's and hl.v2's
   rules): param and the state tensors are read and written in place, grad is read. Every
   tensor has param's shape and dtype (float32 or float64); param and states are contiguous and
   do not overlap each other or grad (grad may be any view). The n_scalars per-step values
   (learning rates, bias corrections) are either scalars, 0-d tensors of param's dtype and
   device read when the call runs (so a replayed plan uses each step's values), or, when
   scalars is NULL, the numbers in values. hyper are the rule's constants. Each element is computed with the same float operations, in the same
   order and in param's dtype, as the rule's sequence of element-wise ops (hl/opt/rules.py),
   so the result is bitwise that sequence's. d below is grad, plus weight_decay * param when
   weight_decay != 0 (L2).
   HL_OPTIM_SGD: states {} or {buf}; scalars {neg_lr}; hyper {weight_decay, momentum,
     1 - dampening}. With buf: buf = d (HL_OPTIM_INIT) or momentum * buf + (1 - dampening) * d;
     the direction is d + momentum * buf (HL_OPTIM_NESTEROV) or buf. param += neg_lr * dir.
   HL_OPTIM_ADAM: states {m, v} or {m, v, vmax} (amsgrad); scalars {neg_step_size,
     bias_correction2_sqrt} and, with HL_OPTIM_DECOUPLED, {decay_factor}; hyper
     {weight_decay, 1 - beta1, beta2, 1 - beta2, eps}. Decoupled: param *= decay_factor and d
     is grad. m += (1 - beta1) * (d - m); v = beta2 * v + (1 - beta2) * d * d; vmax =
     max(vmax, v); param += neg_step_size * m / (sqrt(v or vmax) / bias_correction2_sqrt + eps).
   HL_OPTIM_RMSPROP: states {square_avg}, then grad_avg (HL_OPTIM_CENTERED), then buf
     (HL_OPTIM_MOMENTUM); scalars {neg_lr}; hyper {weight_decay, alpha, 1 - alpha, eps,
     momentum}. s = alpha * s + (1 - alpha) * d * d; centered: a += (1 - alpha) * (d - a),
     r = d / (sqrt(s - a * a) + eps), else r = d / (sqrt(s) + eps); momentum: buf =
     momentum * buf + r, param += neg_lr * buf, else param += neg_lr * r.
   HL_OPTIM_ADAGRAD: states {sum}; scalars {neg_lr}; hyper {weight_decay, eps}.
     sum += d * d; param += neg_lr * d / (sqrt(sum) + eps).
   HL_OPTIM_V2_MOMENTUM (PaddlePaddle v2's momentum): states {mom}; scalars {neg_lr}; hyper
     {weight_decay, momentum}. mom = momentum * mom + neg_lr * d; param += mom.
   HL_OPTIM_V2_ADAM (v2's Adam: no L2, bias corrections folded into neg_alpha): states {m, v};
     scalars {neg_alpha}; hyper {beta1, 1 - beta1, beta2, 1 - beta2, eps}. m = beta1 * m +
     (1 - beta1) * grad; v = beta2 * v + (1 - beta2) * grad * grad;
     param += neg_alpha * m / (sqrt(v) + eps).
   skip (any rule; NULL for none): a 0-d bool tensor on param's device, read when the call
   runs; when true the call writes nothing (hl.amp's loss scaling: a step whose gradients
   overflowed leaves the parameter and its state unchanged, decided on the device at each
   replay of a plan). The CPU and cuda kernels both read it on the device (no host read). */
enum {
    HL_OPTIM_SGD = 0, HL_OPTIM_ADAM = 1, HL_OPTIM_RMSPROP = 2, HL_OPTIM_ADAGRAD = 3,
    HL_OPTIM_V2_MOMENTUM = 4, HL_OPTIM_V2_ADAM = 5
};
enum {
    HL_OPTIM_NESTEROV = 1,   /* SGD */
    HL_OPTIM_INIT = 2,       /* SGD: the momentum buffer's first update sets it to d */
    HL_OPTIM_DECOUPLED = 4,  /* Adam: decoupled weight decay (AdamW) */
    HL_OPTIM_CENTERED = 8,   /* RMSProp */
    HL_OPTIM_MOMENTUM = 16   /* RMSProp */
};
hl_status hl_optim_update(int rule, int flags, hl_tensor *param, const hl_tensor *grad,
                          hl_tensor *const *states, int n_states,
                          const hl_tensor *const *scalars, const double *values, int n_scalars,
                          const double *hyper, int n_hyper, const hl_tensor *skip);

/* ---- plans (graph mode) ---------------------------------------------------------------------- */
/* Between hl_plan_begin() and hl_plan_end() on a thread, op entry points check their
   arguments, allocate their outputs and append a record to the plan instead of running.
   hl_plan_run() replays the records in order, in one call. Before the first replay the plan
   looks its kernels up once and fuses chains of element-wise calls into one pass; that first
   replay also measures the kernels' work buffers, and before the second the plan places every
   intermediate that only the plan holds (nothing outside it has a reference: outputs, inputs,
   parameters and optimiser slots the caller keeps are left alone) in one arena per device,
   reusing memory between tensors whose lifetimes do not overlap, kernels' work buffers
   included. A plan replays on one thread
   at a time (a second concurrent hl_plan_run fails). */

hl_status hl_plan_begin(void);
hl_status hl_plan_end(hl_plan **out);
hl_status hl_plan_run(hl_plan *plan);
int64_t hl_plan_size(const hl_plan *plan);
void hl_plan_release(hl_plan *plan);
/* 1 while a plan is being recorded on this thread. */
int hl_plan_recording(void);
/* While recording: declares t, a tensor from outside the plan, as input slot *slot (numbered
   from 0 in declaration order). Until the recording ends its values count as not computed yet
   (host reads fail): they are not the values later replays will read. */
hl_status hl_plan_input(hl_tensor *t, int64_t *slot);
int64_t hl_plan_num_inputs(const hl_plan *plan);
/* Makes the next replays read t in place of the slot's tensor: t must have the slot's shape,
   dtype and device (else a ShapeError/DTypeError/DeviceError naming the slot and both shapes).
   With the same strides nothing is copied: the plan's tensors viewing the slot's memory (the
   slot's tensor itself, as the caller sees it, included) are pointed at t's storage; otherwise,
   or when t is memory the plan writes, t's values are copied into the slot's own memory. */
hl_status hl_plan_bind(hl_plan *plan, int64_t slot, hl_tensor *t);
/* hl_plan_bind of a borrowed tensor (hl_tensor_borrow_host) over nbytes at data, a caller's
   C-contiguous buffer of the slot's shape and dtype, on a CPU slot: the replays read it in
   place. The caller keeps the memory alive and unchanged until the slot is bound again or the
   plan is released. */
hl_status hl_plan_bind_host(hl_plan *plan, int64_t slot, void *data, size_t nbytes);
/* The values t (a tensor the plan writes and the caller holds: one of its outputs) has after
   the last replay, as a new tensor the caller owns. When no tensor outside the plan but t
   views t's memory, that memory is handed over (no copy) and t, with every tensor of the plan
   viewing the same memory, gets fresh memory for the next replays; otherwise *out is a copy.
   *handed_over (may be NULL) says which. */
hl_status hl_plan_take_output(hl_plan *plan, hl_tensor *t, hl_tensor **out, int *handed_over);
/* hl_plan_take_output for n outputs at once: out[i] and handed_over[i] for ts[i]. Stops at
   the first failure (the outputs before it are taken; out[j] is NULL from it on). */
hl_status hl_plan_take_outputs(hl_plan *plan, int64_t n, hl_tensor *const *ts, hl_tensor **out,
                               int *handed_over);
/* hl_plan_run, then each output ts[i]'s values (a contiguous CPU tensor of nbytes[i] bytes)
   copied to dst[i]: for small outputs, which the caller's new arrays (made before the call)
   receive right after the replay, with nothing run in between (a language binding's steps
   after a replay run from cold caches). Before the replay each tensor is checked; a wrong one
   fails naming its index and both sizes, and nothing runs. */
hl_status hl_plan_run_copy(hl_plan *plan, int64_t n, hl_tensor *const *ts, void *const *dst,
                           const size_t *nbytes);
/* Makes `later` (a plan recorded after `plan`, reading some of its input slots' tensors: the
   backward of a step whose forward is `plan`) follow plan's binds: each later bind of plan's
   slots retargets later's reads of them too. Call it before the first bind. Both plans keep
   their own references; either may be released first. */
hl_status hl_plan_link_inputs(hl_plan *plan, hl_plan *later);
/* Options, set before the first replay: turn the plan's optimisations off one by one (tests
   compare against the plain replay) or choose the dependency-order scheduler. */
enum {
    HL_PLAN_NO_MEMORY = 1,   /* intermediates keep their own storage */
    HL_PLAN_NO_IN_PLACE = 2, /* planned memory, but no element-wise op writes over its input */
    HL_PLAN_NO_FUSION = 4,   /* every call runs its own kernel */
    HL_PLAN_TOPOLOGICAL = 8, /* run in dependency order (levels), same results as record order */
    HL_PLAN_NO_CAPTURE = 16, /* calls on a graph-capturing device (cuda) run one by one */
    HL_PLAN_NO_RECOMPUTE = 32, /* keep every saved tensor (plan/recompute.c); NO_MEMORY too */
    HL_PLAN_NO_NORM_FUSION = 64, /* batch norms run apart from their ReLU / add (fuse_norm.c) */
    HL_PLAN_NO_SLICES = 128, /* large convolutions run layer by layer, never a batch slice at a
                                time through a run of them (plan/slice.c) */
    HL_PLAN_OPTION_MASK = 255
};
hl_status hl_plan_set_options(hl_plan *plan, int options);
typedef struct {
    int64_t calls, inputs, prepared;
    int64_t arena_bytes;       /* bytes of the plan's arenas */
    int64_t alive_peak_bytes;  /* most planned bytes alive at one call (arena_bytes' floor) */
    int64_t scratch_bytes;     /* kernels' work buffers placed in the arena, all calls */
    int64_t memory_planned;    /* 1 from the second replay: the first measures the calls */
    int64_t planned_tensors;   /* storages placed in an arena */
    int64_t planned_bytes;     /* their bytes, before sharing */
    int64_t in_place;          /* element-wise calls writing over their input */
    int64_t fused_groups, fused_calls;
    int64_t conv_epilogues;    /* convolutions that took the ReLU after them in (conv_fused) */
    int64_t outer_updates;     /* batch-1 weight gradients formed inside their optimiser update */
    int64_t recomputed;        /* saved tensors made again where read instead of kept */
    /* Device graphs (CUDA Graphs, plan/capture.c): runs of calls captured, the calls in them,
       graph launches so far, calls on a capturing device that run one by one, and why the
       first of those could not be captured ("" when every such call is in a graph). */
    int64_t graphs, graph_calls, graph_launches, uncaptured_calls;
    char capture_note[200];
    int64_t norm_fusions;      /* batch norms that took a ReLU (+ residual add) or relu_grad in */
    int64_t pool_fusions;      /* max-pool gradients that took the following relu_grad in */
    int64_t sliced_runs;       /* runs of convolutions replayed a batch slice at a time */
    int64_t sliced_calls;      /* the convolutions in them */
    int64_t expand_dw;         /* pointwise expansions that took their depthwise layer in */
} hl_plan_info;
hl_status hl_plan_stats(const hl_plan *plan, hl_plan_info *info);
/* Profiling (SINGA's dev.PrintTimeProfiling, hl.graph.profile). Switched on, every replay after
   the next `skip` ones times each record with a monotonic clock, waiting for the record's
   device after it, and adds the nanoseconds to the record's total (a fused group is timed as
   one, under its first record). Off (the default) costs one test per replay. May be switched
   and read from any thread at any time. */
hl_status hl_plan_set_profiling(hl_plan *plan, int on, int64_t skip);
/* The totals so far: *timed, the replays timed; per record i < n (n must be hl_plan_size):
   ops[i] its op, first[i] the first record of its fused group (i itself when not fused; known
   from the first replay), ns[i] its nanoseconds over the timed replays. Arrays may be NULL. */
hl_status hl_plan_profile(const hl_plan *plan, int64_t *timed, int32_t *ops, int64_t *first,
                          int64_t *ns, int64_t n);
hl_status hl_plan_profile_reset(hl_plan *plan);
/* Fails with HL_ERR_UNSUPPORTED when t's values are to be computed by the plan being recorded
   on this thread (they do not exist yet); every host read (hl_tensor_read, numpy views in the
   bindings) asks this first. */
hl_status hl_tensor_check_host_read(const hl_tensor *t);

/* HL_CDEF_END */

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* HL_CORE_H */
