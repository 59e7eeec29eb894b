/*
 * conv.h - what the convolution kernels share: the geometry of one call, scratch buffers
 * from the caching allocator, and the Winograd path for 3x3 stride-1 float32 convolutions
 * (winograd.c), which conv.c takes where it applies.
 */
#ifndef HL_CPU_CONV_H
#define HL_CPU_CONV_H

#include "../core.h"

#include "parallel.h"  /* HL_CLONES */

/* Geometry of one convolution, in the 2-D form (1-D has h = kh = 1). x is the conv's input
   (dx for grad_input), y its output (dy). */
typedef struct {
    int64_t n, c_in, h, w;      /* input */
    int64_t c_out, oh, ow;      /* output */
    int64_t kh, kw, groups, cg_in, cg_out;
    int64_t sh, sw, dh, dw, pt, pl;
    int64_t K, P;               /* column rows (cg_in * kh * kw) and positions (oh * ow) */
} conv_geom;

/* What conv_fused does to each output after its bias, while the output is still in cache
   (api/conv.c): adds the residual (an array shaped like y, or NULL) at the same position,
   then applies the activation act (HL_CONV_ACT_*, hl_core.h) with parameters alpha, beta.
   Plain conv calls pass NULL or an epilogue with act NONE and no residual. */
typedef struct {
    int act;
    double alpha, beta;
    const void *res;
} conv_epilogue;

static inline bool conv_epilogue_active(const conv_epilogue *e) {
    return e && (e->act != HL_CONV_ACT_NONE || e->res);
}

/* A float32 product against packed weights (conv_packed.c), for count samples at once:
   c[s][i][j] = act(sum_k A[i][k] b[s][k][j] + bias[i] + res[s][i][j]) for i < m, j < n, where
   A is m x k packed by conv_pack, b[s] the k rows of n columns from b + s * b_step (rows ldb
   apart), c[s] and res[s] the m rows from c + s * c_step (ldc apart; res likewise, or NULL). */
typedef struct {
    int64_t m, n, k, count;
    const float *a;
    const float *b;
    int64_t ldb, b_step;
    float *c;
    int64_t ldc, c_step;
    const float *bias;           /* m values, or NULL */
    const float *res;            /* shaped like c, or NULL */
    const conv_epilogue *epi;    /* its act (and res above); NULL: none */
    float *work;                 /* hl_conv_packed_work(n, k) floats, or NULL: the product
                                    takes its own */
    const int64_t *b_rows;       /* or NULL; else row k of b[s] starts at b[s] + b_rows[k]
                                    (ldb unused): columns read in place from another layout
                                    (conv_phases.c) */
    const int64_t *b_cols;       /* or NULL; else (with b_rows) column j of each row is the
                                    value b_cols[j] past its start: a strided gather (a 1x1
                                    stride-2 layer's columns, conv_phases.c) */
} conv_packed_problem;

hl_status hl_conv_packed_product(const conv_packed_problem *pr);
/* The product of all m rows of packed weights (k steps, one group) with n columns stored as
   consecutive strips of 16, each k x 16 contiguous (the last strip's columns past n are not
   read into any output), into c (rows ldc apart), the bias, residual (rows ldc apart, or NULL)
   and activation applied. Panel by panel over all the strips: each of a panel's output rows
   is stored as one run of n floats (not 16 at a time, alternating between all m rows). */
enum { HL_CONV_STRIP_COLS = 16 };
/* A row of positions' last strip of at most this many columns runs the tail kernel, whose
   sums go in another order than the blocks' (conv_packed.c, block_tail_cols): where a product's
   positions are cut changes those positions' bits. */
enum { HL_CONV_TAIL_COLS = 2 };
void hl_conv_packed_strips(const float *packed, int64_t m, int64_t k, const float *strips,
                           int64_t n, float *c, int64_t ldc, const float *bias, const float *res,
                           const conv_epilogue *epi);

/* One thread's share of a product, for a fused caller (conv_expand_dw.c): panels [p0, p1) of
   pr's one sample over all its n columns, read in place, by the blocks hl_conv_packed_product
   runs (the same bits). Only for k <= the product's block of K (hl_conv_packed_lane_fits). */
bool hl_conv_packed_lane_fits(int64_t k);
void hl_conv_packed_lane(const conv_packed_problem *pr, int64_t p0, int64_t p1);

/* A pointwise expansion (g1, packed weights) and the depthwise 3x3 layer after it (g2) as one
   pass, the expanded planes kept in a thread's buffer (conv_expand_dw.c): whether the two fit,
   and the pass. */
bool hl_conv_expand_dw_fits(const conv_geom *g1, const conv_geom *g2);
hl_status hl_conv_expand_dw_forward(const conv_geom *g1, const float *x, const float *packed,
                                    const float *b1, const conv_epilogue *e1,
                                    const conv_geom *g2, const float *w2, const float *b2,
                                    const conv_epilogue *e2, float *y);

/* Small-C_in 3x3 convolutions (RGB stems; conv_stem.c) against packed panels: the columns of
   one row of 16 outputs built in L1 and multiplied there, no im2col buffer. */
bool hl_conv_stem_fits(const conv_geom *g);
hl_status hl_conv_stem_forward(const conv_geom *g, const float *x, const float *packed,
                               const float *bias, const conv_epilogue *epi, float *y);
/* The work floats of a product of n positions and k steps (for the threads of this call). */
int64_t hl_conv_packed_work(int64_t n, int64_t k);

/* Stride-2 convolutions (one group, dilation 1, kernels larger than 1x1) against packed
   panels, reading their columns from the input split into four phases instead of im2col's
   (conv_phases.c). */
bool hl_conv_phases_fits(const conv_geom *g);
/* A 1x1 convolution with a stride and no padding (ResNet's downsample layers): the product
   gathers its columns straight from x, no im2col (conv_phases.c). */
bool hl_conv_gather_fits(const conv_geom *g);
hl_status hl_conv_gather_forward(const conv_geom *g, const float *x, const float *packed,
                                 const float *bias, const conv_epilogue *epi, float *y);
hl_status hl_conv_phases_forward(const conv_geom *g, const float *x, const float *packed,
                                 const float *bias, const conv_epilogue *epi, float *y);

/* Depthwise 3x3 convolutions (stride 1 or 2, dilation 1), float32, AVX2 + FMA
   (conv_dw3x3.c): whether a call fits (and the CPU has the instructions), and the forward
   pass with the epilogue (NULL: none) in registers. */
bool hl_dw3x3_fits(const conv_geom *g);
hl_status hl_dw3x3_forward(const conv_geom *g, const float *x, const float *w,
                           const float *bias, const conv_epilogue *epi, float *y);
/* One sample's output channels [c0, c1) on the calling thread, their input planes one after
   another from xp (a fused caller's buffer, conv_expand_dw.c), no residual, by the kernel
   hl_dw3x3_forward runs on planes too large for the blocked one: the same bits. Rows of at
   most 16 * HL_DW3X3_PLANES_MAX_CHUNKS outputs. */
hl_status hl_dw3x3_planes(const conv_geom *g, const float *xp, int64_t c0, int64_t c1,
                          const float *w, const float *bias, const conv_epilogue *epi,
                          float *y);
/* The same on small planes, eight channels at a time in the lanes (conv_dw3x3_blocked.c; one
   output channel per input channel): whether a call's planes are small enough, and the forward
   pass of each sample's first c_out / 8 * 8 channels (hl_dw3x3_forward runs the rest). */
bool hl_dw3x3_blocked_fits(const conv_geom *g);
hl_status hl_dw3x3_blocked_forward(const conv_geom *g, const float *x, const float *w,
                                   const float *bias, const conv_epilogue *epi, float *y);
/* What every group of channels of a blocked call shares: the geometry, the padded block's
   width and cells, where each input position lands in it (cell_of, -1: read by no output),
   the cells no input lands on (border), the epilogue (NULL: none). */
typedef struct {
    const conv_geom *g;
    int64_t wp, ncells, nborder;
    const int32_t *cell_of, *border;
    const conv_epilogue *epi;
} dw3x3_blocked;
/* The blocked kernel for a fused caller (conv_expand_dw.c), on the calling thread: the bytes of
   a call's tables and of a thread's work buffer (cells and outputs); the tables filled once a
   call; one sample's channels [c0, c1) (c0 a multiple of 16, c1 - c0 of 8) from xp (their
   planes one after another) into y (the sample's output), no residual: the bits
   hl_dw3x3_blocked_forward gives them. */
size_t hl_dw3x3_blocked_table_bytes(const conv_geom *g);
size_t hl_dw3x3_blocked_work_bytes(const conv_geom *g);
void hl_dw3x3_blocked_setup(const conv_geom *g, const conv_epilogue *epi, void *tables,
                            dw3x3_blocked *b);
void hl_dw3x3_blocked_planes(const dw3x3_blocked *b, float *work, const float *xp, int64_t c0,
                             int64_t c1, const float *w, const float *bias, float *y);
/* The row kernel on sixteen lanes (conv_dw3x3_avx512.c; hl_dw3x3_forward takes it where
   hl_cpu_avx512()): channels [done, c_out) of every sample. */
hl_status hl_dw3x3_rows_avx512(const conv_geom *g, int64_t done, const float *x,
                               const float *w, const float *bias, const conv_epilogue *epi,
                               float *y);
/* hl_dw3x3_planes on this kernel. */
enum { HL_DW3X3_PLANES_MAX_CHUNKS = 64 };
hl_status hl_dw3x3_planes_avx512(const conv_geom *g, const float *xp, int64_t c0, int64_t c1,
                                 const float *w, const float *bias, const conv_epilogue *epi,
                                 float *y);
/* Rows of a plane: the input rows a buffer holds, [row0, row1), and the output rows a call
   computes, [oy0, oy1). */
typedef struct {
    int64_t row0, row1, oy0, oy1;
} dw3x3_rows;
/* The same for output rows r.oy0 .. r.oy1 - 1 of each plane, channel c's input rows r.row0 ..
   r.row1 - 1 at xp + (c - c0) * (r.row1 - r.row0) * w: each output's bits as above. */
hl_status hl_dw3x3_plane_rows_avx512(const conv_geom *g, const float *xp, dw3x3_rows r,
                                     int64_t c0, int64_t c1, const float *w, const float *bias,
                                     const conv_epilogue *epi, float *y);
/* The bands of rows each plane of a call is cut into for the threads (1: whole planes). */
int64_t hl_dw3x3_bands(const conv_geom *g);

/* Stride-1 convolutions with 5x5-class kernels (one group, no dilation) on small planes,
   straight from the planes by AVX2 + FMA (conv_direct.c): whether each pass fits (the CPU
   has the instructions, HL_CONV_DIRECT is not 0), and the passes. */
bool hl_conv_direct_fits(const conv_geom *g, const conv_epilogue *e);
bool hl_conv_direct_grad_input_fits(const conv_geom *g);
bool hl_conv_direct_grad_weight_fits(const conv_geom *g);
hl_status hl_conv_direct_forward(const conv_geom *g, const float *x, const float *w,
                                 const float *bias, const conv_epilogue *epi, float *y);
hl_status hl_conv_direct_grad_input(const conv_geom *g, const float *dy, const float *w,
                                    const float *bias, float *dx);
hl_status hl_conv_direct_grad_weight(const conv_geom *g, const float *dy, const float *x,
                                     float *dw);

/* Scratch memory from the plan being replayed (its arena: the memory plan counted it) or from
   the caching allocator, so repeated calls do not fault fresh pages. */
typedef struct {
    hl_storage *s;
} scratch;

static inline hl_status scratch_get(const char *op, scratch *b, size_t nbytes, void **data) {
    b->s = NULL;
    *data = NULL;
    if (nbytes == 0) return HL_OK;
    if ((*data = hl_plan_scratch(nbytes))) return HL_OK;
    hl_status st = hl_storage_new((hl_device){HL_DEVICE_CPU, 0}, nbytes, &b->s);
    if (st) return hl_fail(st, "%s: no memory for a %zu-byte work buffer", op, nbytes);
    *data = b->s->data;
    return HL_OK;
}

static inline void scratch_put(scratch *b) {
    if (b->s) hl_storage_release(b->s);
    b->s = NULL;
}

/* Winograd F(2x2, 3x3), float32 (winograd.c). `fits` says whether a call may take it. */
bool hl_winograd_fits(const conv_geom *g);
/* Whether a forward call has tiles enough to repay transforming the kernels (packed: they
   were transformed once, by hl_winograd_pack). */
bool hl_winograd_pays_forward(const conv_geom *g, bool packed);
/* Whether n weights may take the Winograd path: finite, and no outlier the transforms'
   cancellation would round at its own scale (winograd.c, "Precision"). */
bool hl_winograd_weights_ok(const float *w, int64_t n);
/* The same figures judged by another rule (F(4x4, 3x3)'s hl_winograd43_admits,
   packed_layouts.h). */
bool hl_winograd_weights_judged(const float *w, int64_t n,
                                bool (*admits)(bool, double, double, int64_t));
hl_status hl_winograd_forward(const conv_geom *g, const float *x, const float *w,
                              const float *bias, const conv_epilogue *epi, float *y);
/* w's 16 transformed kernels (conv_pack's Winograd layout, (4, 4, c_out, c_in) in panels,
   packed_layouts.h), made once
   for a constant weight, and the forward pass that takes them instead of transforming w. */
void hl_winograd_pack(const float *w, int64_t c_out, int64_t c_in, float *U);
/* winograd_weights.c: the C0 x C1 3x3 kernels w as 16 transformed matrices (entry e at
   U + e * us, row-major C0 x C1; turned: grad_input's kernel, turned by 180 degrees), and
   the nc x CI transformed weight gradients M (entry stride ms) back as 3x3 kernels in dw. */
void hl_winograd_transform_weights(const float *w, int64_t C0, int64_t C1, bool turned,
                                   float *U, int64_t us);
void hl_winograd_weight_grads(const float *M, int64_t ms, int64_t nc, int64_t CI, float *dw);
hl_status hl_winograd_forward_packed(const conv_geom *g, const float *x, const float *U,
                                     const float *bias, const conv_epilogue *epi, float *y);
/* The products M[e] = U[e] @ V[e] (e < entries: 16 or 36) of a packed forward pass
   (winograd_product.c): U in conv_pack's Winograd layout, V[e] (from V + e * vs) in strips
   of HL_WINOGRAD_NR tiles (hl_core.h), each c_in rows of NR values, M[e] (from M + e * ms)
   c_out rows of strips * NR, ldm apart. */
void hl_winograd_product(const float *U, int entries, int64_t c_out, int64_t c_in,
                         const float *V, int64_t vs, int64_t strips, float *M, int64_t ms,
                         int64_t ldm);
/* Winograd F(4x4, 3x3) against kernels transformed once (winograd43.c), for inference: the
   36 transformed kernels of conv_pack's HL_CONV_PACK_WINOGRAD43 layout ((6, 6, c_out, c_in)
   in the same panels; NaN everywhere where the precision guard refuses w), and the forward
   pass that reads them (it fits where hl_winograd_fits does). */
void hl_winograd43_pack(const float *w, int64_t c_out, int64_t c_in, float *U);
hl_status hl_winograd43_forward_packed(const conv_geom *g, const float *x, const float *U,
                                       const float *bias, const conv_epilogue *epi, float *y);
hl_status hl_winograd_grad_input(const conv_geom *g, const float *dy, const float *w,
                                 const float *bias, float *dx);
hl_status hl_winograd_grad_weight(const conv_geom *g, const float *dy, const float *x,
                                  float *dw);

#endif
