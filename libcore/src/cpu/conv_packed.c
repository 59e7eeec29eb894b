/*
 * conv_packed.c - float32 convolution products against weights packed once (conv_pack), for
 * inference: a prepared ONNX model packs every constant convolution weight at prepare() and
 * passes the packed copy to each call, where OpenBLAS would re-pack the weights on every call
 * (MobileNetV2's 1x1 layers at batch 1 spent as long packing as multiplying).
 *
 * The packed layout (HL_CONV_PACK_ROWS = MR rows per panel, hl_core.h): per group, the
 * group's C_out/g x K weight matrix (K = C_in/g * kh * kw) cut into panels of MR output
 * channels, each stored k-major, MR values per k, the last panel padded with zeros:
 *     packed[(grp * panels + p) * K * MR + k * MR + r] = w[grp * cg + p * MR + r][k]
 * The product reads one panel's MR weights for each k as broadcasts and the columns (x itself
 * for a 1x1 convolution, im2col's rows otherwise) NR positions at a time: an MR x NR block
 * of outputs held in 12 AVX2 registers, to which the bias, the residual and the activation
 * are applied before the one store into y (NCHW: a panel's rows are output channel planes,
 * so no scatter). A block of positions is sized so that its rows of columns stay in the L2
 * cache while every panel passes over them, copied once into strips of NR columns (per
 * call, per thread) unless the strips are better read where they are (short K, whose panels'
 * weights stay in L1, or few output channels on short rows; STRIPS_MAX_M below).
 *
 * Where hl_cpu_avx512() (cpu_features.h), AVX-512 blocks of MR x 2 NR run instead (16 floats a
 * register: two strips a step), with the AVX2 blocks' sums and epilogue, hence their bits
 * (tests/ops/test_conv_avx512.py). The AVX2 + FMA kernel is taken where the CPU has both
 * (checked once; HL_CONV_AVX2=0 in the environment turns every kernel here off, for tests);
 * elsewhere a portable loop computes the same thing. Sums are in another order than
 * OpenBLAS's, so results differ from hl_conv's by float rounding
 * (tests/ops/test_conv_packed.py checks both against float64).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core.h"
#include "conv.h"
#include "parallel.h"

#define T float
#define SFX f32
#include "conv_epilogue_impl.h"   /* conv_epilogue_run_f32: the portable path's epilogue */
#undef T
#undef SFX

#include "conv_avx2.h"     /* hl_conv_avx2, hl_conv_act8_with */
#include "conv_avx512.h"   /* hl_cpu_avx512, hl_conv_act16_with */
#define HAVE_X86 HL_CONV_HAVE_X86

enum { MR = HL_CONV_PACK_ROWS, NR = 16 };
_Static_assert((int)NR == (int)HL_CONV_STRIP_COLS, "hl_conv_packed_strip's strips are NR wide");
/* A block of positions: its K rows of columns about this many bytes (half a core's L2). */
enum { BLOCK_BYTES = 192 << 10 };
/* Steps of K per block: a panel's MR x KC weights (6 KiB) stay in L1 across a block of
   positions. */
enum { KC = 256 };
/* The weights a task may keep in L1 across strips of columns (most of a 32 KiB L1). */
enum { L1_BYTES = 20 << 10 };
/* Strips of columns read in place also for few output channels (MobileNetV2's projections:
   144->32 at 28x28, 384->64 at 14x14) when each column row is short: each strip re-reads the
   weights from L2, which costs less than copying the columns (measured 5-17% faster per
   layer on such shapes, one thread; no gain at 7x7, slower at 56x56, whose strips' rows are
   12 KiB apart). And never for many output channels on long rows, however short K: a strip
   stores into every one of the M output rows, each on its own pages (N * 4 bytes apart), more
   than the L1 TLB holds, where panel by panel over a packed block touches 6 rows at a time
   (16->96 at 112x112 1.4-1.9x faster packed, 24->144 at 56x56 1.2x; 7 alternating rounds). */
enum { STRIPS_MAX_M = 96, STRIPS_MAX_N = 1024, L2_WEIGHTS = 256 << 10 };
/* Panels a task takes at least where it reads strips of few output channels in place (at two
   threads and more): each task reads its strips of the columns again, from L2 or from the
   other core, and passes only its panels over each; in chunks of 3 panels MobileNetV2's
   28x28 projections (32 channels: 6 panels, 4 blocks of positions) ran no faster on two
   threads than on one. In whole panels there 30% faster, its 14x14 ones (64 and 96
   channels: chunks of 6 instead of 3 and 4) 5%; the model at batch 1 2% (4 alternating
   rounds, an Intel Xeon with AVX-512). */
enum { STRIPS_MIN_PANELS = 6 };

/* Rows ldb floats apart fall into how many of the L1 cache's 64 sets (64-byte lines, 8 ways,
   as on Zen and recent Intel cores): a strip read in place is one line of each of its K rows,
   and a block stores into one line of each of its output rows, all at that stride. When the
   row bytes are a multiple of 1024 (112x112 planes: 49 KiB; 16x16, 32x32, 64x64) they share
   at most 4 sets, 32 lines, which the strip's rows and the outputs overflow: every panel then
   fetches the strip again from L2. Packed blocks are contiguous (MobileNetV2 in the model,
   one thread: 32->16 at 112x112 400 -> 253 us, 16->96 634 -> 541). */
enum { L1_SETS = 64, ALIASED_SETS = 4 };
static int l1_sets_of_stride(int64_t ldb) {
    const int64_t bytes = ldb * (int64_t)sizeof(float);
    if (bytes % 64) return L1_SETS;   /* rows start at every offset in a line: spread out */
    int64_t step = (bytes / 64) % L1_SETS, g = L1_SETS;
    while (step) {   /* gcd(step, 64): the rows visit 64 / gcd sets */
        const int64_t t = g % step;
        g = step, step = t;
    }
    return (int)(L1_SETS / g);
}

/* ---- packing ---- */

typedef struct {
    const float *w;
    float *out;
    int64_t K, cg, panels;
} pack_job;

/* Panels [p0, p1) of all groups' (group, panel) pairs: each writes its own K x MR block. */
static void pack_panel_range(int64_t p0, int64_t p1, void *ctx) {
    const pack_job *q = ctx;
    const int64_t K = q->K, cg = q->cg, panels = q->panels;
    for (int64_t gp = p0; gp < p1; gp++) {
        const int64_t grp = gp / panels, p = gp % panels;
        float *d = q->out + gp * K * MR;
        for (int r = 0; r < MR; r++) {
            const int64_t row = p * MR + r;
            const float *s = q->w + (grp * cg + row) * K;
            if (row < cg)
                for (int64_t k = 0; k < K; k++) d[k * MR + r] = s[k];
            else
                for (int64_t k = 0; k < K; k++) d[k * MR + r] = 0;
        }
    }
}

/* conv_pack: in {w (C_out, C_in/g, k...)} out {packed}; i[0] groups, i[1] the layout:
   HL_CONV_PACK_PANELS (g * panels, K, MR) as above, HL_CONV_PACK_WINOGRAD (4, 4, C_out,
   C_in), the 16 transformed kernels of Winograd's F(2x2, 3x3) (winograd.c), or
   HL_CONV_PACK_WINOGRAD43 (6, 6, C_out, C_in), F(4x4, 3x3)'s 36 (winograd43.c). */
hl_status hl_cpu_conv_pack(const hl_call *c) {
    const hl_tensor *wt = c->in[0];
    const float *w = (const float *)hl_ptr(wt);
    float *out = (float *)hl_ptr(c->out[0]);
    if (c->i[1] == HL_CONV_PACK_WINOGRAD) {
        hl_winograd_pack(w, wt->shape[0], wt->shape[1], out);
        return HL_OK;
    }
    if (c->i[1] == HL_CONV_PACK_WINOGRAD43) {
        hl_winograd43_pack(w, wt->shape[0], wt->shape[1], out);
        return HL_OK;
    }
    const int64_t groups = c->i[0], cout = wt->shape[0];
    const int64_t K = c->out[0]->shape[1], cg = cout / groups, panels = (cg + MR - 1) / MR;
    pack_job q = {w, out, K, cg, panels};
    /* a copy: threads only from 4M elements, as gemm_pack_b's (matmul_fused.c, pack_b) */
    const int64_t items = groups * panels;
    hl_parallel_for(items, cout * K >= (1 << 22) ? 1 : items, pack_panel_range, &q);
    return HL_OK;
}

/* ---- the epilogue of one MR x NR block ---- */

/* What every block of a call shares. */
typedef struct {
    int64_t K;                  /* the steps of this block of K (the product's, cut in kc) */
    const conv_epilogue *epi;   /* NULL: none */
    bool first, last;           /* the first block of K starts from 0, the others from C; */
                                /* the last one adds the bias and applies the epilogue */
    bool prefetch;              /* B is a strip read in place: fetch the next strip's rows */
    const float *next_a;        /* or NULL: the next panel's weights of this block of K, */
                                /* fetched into L2 while this block runs */
} block_args;

/* ---- the portable block ---- */

/* C[r][j] (r < mr, j < nr; rows ldc apart) = sum_k A[k][r] B[k][j] + bias[r], epilogue. */
HL_CLONES
static void block_portable(const block_args *a, const float *restrict A, const float *B,
                           int64_t ldb, float *C, int64_t ldc, const float *bias,
                           const float *res, int mr, int nr) {
    float acc[MR][NR] = {{0}};
    if (!a->first)
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < nr; j++) acc[r][j] = C[r * ldc + j];
    for (int64_t k = 0; k < a->K; k++) {
        const float *restrict b = B + k * ldb;
        const float *restrict ak = A + k * MR;
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < nr; j++) acc[r][j] += ak[r] * b[j];
    }
    for (int r = 0; r < mr; r++) {
        float *y = C + r * ldc;
        const float bv = bias && a->last ? bias[r] : 0;
        for (int j = 0; j < nr; j++) y[j] = acc[r][j] + bv;
        if (a->epi && a->last) conv_epilogue_run_f32(a->epi, y, res ? res + r * ldc : NULL, nr);
    }
}

/* ---- the AVX2 + FMA block ---- */

#if HAVE_X86
#define AVX2 HL_AVX2

/* acc += the products of K steps, B's columns read by LOAD0 / LOAD1 (8 each), PF before; the
   panel's first ROWS rows only (a constant: the rows past it are neither computed nor kept). */
#define FMA_ROW(r, lo, hi)                                                                    \
    if (ROWS > r) w = _mm256_broadcast_ss(A + r), lo = _mm256_fmadd_ps(w, b0, lo),              \
                  hi = _mm256_fmadd_ps(w, b1, hi);
#define BLOCK_LOOP(LOAD0, LOAD1, PF)                                                          \
    for (int64_t k = 0; k < K; k++) {                                                         \
        PF;                                                                                   \
        const __m256 b0 = LOAD0, b1 = LOAD1;                                                  \
        __m256 w;                                                                             \
        FMA_ROW(0, c00, c01) FMA_ROW(1, c10, c11) FMA_ROW(2, c20, c21)                         \
        FMA_ROW(3, c30, c31) FMA_ROW(4, c40, c41) FMA_ROW(5, c50, c51)                         \
        A += MR;                                                                              \
        B += ldb;                                                                             \
    }

/* The last block of K of a whole MR x NR block: bias, residual (res, or NULL) and the
   activation act (a constant where inlined, so each case is straight-line code) applied to
   the accumulators, then stored. */
AVX2 static inline __attribute__((always_inline)) void finish_whole(
    const conv_epilogue *e, int act, __m256 acc[MR][2], float *C, int64_t ldc,
    const float *bias, const float *res) {
    const conv_act8_params ap = hl_conv_act8_params(e);
    for (int r = 0; r < MR; r++) {
        __m256 v0 = acc[r][0], v1 = acc[r][1];
        if (bias) {
            const __m256 b = _mm256_broadcast_ss(bias + r);
            v0 = _mm256_add_ps(v0, b), v1 = _mm256_add_ps(v1, b);
        }
        if (res) {
            v0 = _mm256_add_ps(v0, _mm256_loadu_ps(res + r * ldc));
            v1 = _mm256_add_ps(v1, _mm256_loadu_ps(res + r * ldc + 8));
        }
        if (act != HL_CONV_ACT_NONE) {
            v0 = hl_conv_act8_with(act, ap, v0);
            v1 = hl_conv_act8_with(act, ap, v1);
        }
        _mm256_storeu_ps(C + r * ldc, v0);
        _mm256_storeu_ps(C + r * ldc + 8, v1);
    }
}

/* An MR x NR block of which the first mr <= ROWS rows and nr columns are stored: the panel's
   rows from mr to ROWS are computed (their weights are zeros) and dropped, those past ROWS
   not computed (the last panel of 16 output channels: 4 rows instead of 6); columns past nr
   are neither read nor written (masked loads and stores). */
AVX2 static inline __attribute__((always_inline)) void block_rows_avx2(
    const block_args *a, const float *restrict A, const float *B, int64_t ldb, float *C,
    int64_t ldc, const float *bias, const float *res, int mr, int nr, const int ROWS) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const int64_t K = a->K;
    __m256i m0 = _mm256_set1_epi32(-1), m1 = m0;
    if (nr < NR) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
        m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
    }
    if (!a->first) {   /* rows past mr hold zeros (their weights are zeros too) */
#define LOAD_ROW(r, lo, hi)                                                                   \
    if (r < mr) lo = _mm256_maskload_ps(C + r * ldc, m0), hi = _mm256_maskload_ps(C + r * ldc + 8, m1);
        LOAD_ROW(0, c00, c01) LOAD_ROW(1, c10, c11) LOAD_ROW(2, c20, c21)
        LOAD_ROW(3, c30, c31) LOAD_ROW(4, c40, c41) LOAD_ROW(5, c50, c51)
#undef LOAD_ROW
    }
    if (nr == NR && a->prefetch) {
        BLOCK_LOOP(_mm256_loadu_ps(B), _mm256_loadu_ps(B + 8),
                   _mm_prefetch((const char *)(B + NR + 8), _MM_HINT_T0))
    } else if (nr == NR && a->next_a) {
        const float *na = a->next_a;   /* MR weights a step: a line every 2.7 steps */
        BLOCK_LOOP(_mm256_loadu_ps(B), _mm256_loadu_ps(B + 8),
                   (_mm_prefetch((const char *)na, _MM_HINT_T1), na += MR))
    } else if (nr == NR) {
        BLOCK_LOOP(_mm256_loadu_ps(B), _mm256_loadu_ps(B + 8), (void)0)
    } else {
        BLOCK_LOOP(_mm256_maskload_ps(B, m0), _mm256_maskload_ps(B + 8, m1), (void)0)
    }
    __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                         {c30, c31}, {c40, c41}, {c50, c51}};
    if (ROWS == MR && a->last && nr == NR && mr == MR) {   /* the common whole block: unrolled */
        switch (a->epi ? a->epi->act : HL_CONV_ACT_NONE) {
        case HL_CONV_ACT_NONE: finish_whole(a->epi, HL_CONV_ACT_NONE, acc, C, ldc, bias, res); break;
        case HL_CONV_ACT_RELU: finish_whole(a->epi, HL_CONV_ACT_RELU, acc, C, ldc, bias, res); break;
        case HL_CONV_ACT_CLIP: finish_whole(a->epi, HL_CONV_ACT_CLIP, acc, C, ldc, bias, res); break;
        default: finish_whole(a->epi, a->epi->act, acc, C, ldc, bias, res); break;
        }
        return;
    }
    const conv_act8_params ap = hl_conv_act8_params(a->epi);
    const int act = a->epi ? a->epi->act : HL_CONV_ACT_NONE;
    for (int r = 0; r < mr; r++) {
        float *y = C + r * ldc;
        const float *rr = res ? res + r * ldc : NULL;
        for (int h = 0; h < 2; h++) {
            const __m256i m = h ? m1 : m0;
            __m256 v = acc[r][h];
            if (bias && a->last) v = _mm256_add_ps(v, _mm256_set1_ps(bias[r]));
            if (a->epi && a->last) {
                if (rr) v = _mm256_add_ps(v, nr == NR ? _mm256_loadu_ps(rr + 8 * h)
                                                      : _mm256_maskload_ps(rr + 8 * h, m));
                v = hl_conv_act8_with(act, ap, v);
            }
            if (nr == NR) _mm256_storeu_ps(y + 8 * h, v);
            else _mm256_maskstore_ps(y + 8 * h, m, v);
        }
    }
}
#undef BLOCK_LOOP
#undef FMA_ROW

/* block_rows_avx2 for a whole panel and for the last panel's 4 or 2 rows. */
AVX2 static void block_avx2(const block_args *a, const float *restrict A, const float *B,
                            int64_t ldb, float *C, int64_t ldc, const float *bias,
                            const float *res, int mr, int nr) {
    block_rows_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr, MR);
}
AVX2 static void block4_rows_avx2(const block_args *a, const float *restrict A, const float *B,
                                  int64_t ldb, float *C, int64_t ldc, const float *bias,
                                  const float *res, int mr, int nr) {
    block_rows_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr, 4);
}
AVX2 static void block2_rows_avx2(const block_args *a, const float *restrict A, const float *B,
                                  int64_t ldb, float *C, int64_t ldc, const float *bias,
                                  const float *res, int mr, int nr) {
    block_rows_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr, 2);
}

/* The same for a block of at most 8 columns: one vector per row (the columns of a position
   count that is not a multiple of NR, e.g. the 49 of a 7x7 plane, cost half as much). */
AVX2 static void block8_avx2(const block_args *a, const float *restrict A, const float *B,
                             int64_t ldb, float *C, int64_t ldc, const float *bias,
                             const float *res, int mr, int nr) {
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const int64_t K = a->K;
    if (!a->first) {
        __m256 *cs[MR] = {&c0, &c1, &c2, &c3, &c4, &c5};
        for (int r = 0; r < mr; r++) *cs[r] = _mm256_maskload_ps(C + r * ldc, m);
    }
    for (int64_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_maskload_ps(B, m);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 0), b0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 1), b0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 2), b0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 3), b0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 4), b0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(A + 5), b0, c5);
        A += MR;
        B += ldb;
    }
    const __m256 acc[MR] = {c0, c1, c2, c3, c4, c5};
    const conv_act8_params ap = hl_conv_act8_params(a->epi);
    for (int r = 0; r < mr; r++) {
        __m256 v = acc[r];
        if (bias && a->last) v = _mm256_add_ps(v, _mm256_set1_ps(bias[r]));
        if (a->epi && a->last) {
            if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + r * ldc, m));
            v = hl_conv_act8_with(a->epi->act, ap, v);
        }
        _mm256_maskstore_ps(C + r * ldc, m, v);
    }
}

/* The same for one or two columns (nr <= TAIL_COLS, e.g. the last of a 7x7 plane's 49), turned
   around: the panel's MR weights of each k are one vector (lanes = output channels) times
   each column's value broadcast, so a column costs one FMA per k instead of block8's MR
   (block8 costs MR FMAs per k for any nr <= 8).
   Four accumulators per column (k mod 4) keep the FMAs from waiting on each other; the
   outputs are read and written lane by lane (rows ldc apart). NCOL (the columns) is a
   constant, so that the accumulators live in registers (indexed by a run-time column count
   they were kept on the stack, each FMA waiting on a store: the tail of a 7x7 plane cost a
   fifth of its product). A k's weights are loaded as 8 lanes, the last two the next k's (not
   kept), except at the block's last k, whose load stops at MR lanes (the panel's end may be
   the buffer's). */
enum { TAIL_COLS = HL_CONV_TAIL_COLS };   /* measured: 1 column 3-6% faster than block8, 4 columns 2-3% slower */

AVX2 static inline __attribute__((always_inline)) void block_tail_cols(
    const block_args *a, const float *restrict A, const float *B, int64_t ldb, float *C,
    int64_t ldc, const float *bias, const float *res, int mr, const int NCOL) {
    __m256 acc[TAIL_COLS][4];
    for (int j = 0; j < TAIL_COLS; j++)
        for (int u = 0; u < 4; u++) acc[j][u] = _mm256_setzero_ps();
    const int64_t K = a->K;
    int64_t k = 0;
    for (; k + 4 < K; k += 4)   /* k + 3 is not the block's last k: unmasked loads */
        for (int u = 0; u < 4; u++) {
            const __m256 w = _mm256_loadu_ps(A + (k + u) * MR);
            const float *b = B + (k + u) * ldb;
            for (int j = 0; j < NCOL; j++)
                acc[j][u] = _mm256_fmadd_ps(w, _mm256_broadcast_ss(b + j), acc[j][u]);
        }
    const __m256i rows = hl_conv_mask8(MR);   /* a k's MR weights; the load stops there */
    for (; k < K; k++) {
        const __m256 w = k + 1 < K ? _mm256_loadu_ps(A + k * MR)
                                   : _mm256_maskload_ps(A + k * MR, rows);
        for (int j = 0; j < NCOL; j++)
            acc[j][0] = _mm256_fmadd_ps(w, _mm256_broadcast_ss(B + k * ldb + j), acc[j][0]);
    }
    const bool last = a->last;
    __m256 bv = _mm256_setzero_ps();
    if (bias && last) bv = _mm256_maskload_ps(bias, hl_conv_mask8(mr));
    const conv_act8_params ap = hl_conv_act8_params(a->epi);
    for (int j = 0; j < NCOL; j++) {
        __m256 v = _mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]),
                                 _mm256_add_ps(acc[j][2], acc[j][3]));
        float t[8] = {0};
        if (!a->first) {
            for (int r = 0; r < mr; r++) t[r] = C[r * ldc + j];
            v = _mm256_add_ps(_mm256_loadu_ps(t), v);
        }
        v = _mm256_add_ps(v, bv);
        if (a->epi && last) {
            if (res) {
                for (int r = 0; r < mr; r++) t[r] = res[r * ldc + j];
                v = _mm256_add_ps(v, _mm256_loadu_ps(t));
            }
            v = hl_conv_act8_with(a->epi->act, ap, v);
        }
        _mm256_storeu_ps(t, v);
        for (int r = 0; r < mr; r++) C[r * ldc + j] = t[r];
    }
}

AVX2 static void block_tail_avx2(const block_args *a, const float *restrict A, const float *B,
                                 int64_t ldb, float *C, int64_t ldc, const float *bias,
                                 const float *res, int mr, int nr) {
    if (nr == 1) block_tail_cols(a, A, B, ldb, C, ldc, bias, res, mr, 1);
    else block_tail_cols(a, A, B, ldb, C, ldc, bias, res, mr, 2);
}

#endif

/* ---- the AVX-512 block ---- */

#if HL_HAVE_AVX512_KERNELS
/* With 16 floats a register, the block is MR x 2 NR: two strips of columns side by side (B
   and B + b2: a row's next 16 floats when read in place, the next strip when packed), two
   loads and MR broadcasts feeding 12 FMAs a step of K, where a 6 x 16 block (6 FMAs of 4
   cycles' latency on two ports) would wait on its accumulators. Each output is still one
   FMA a step, k ascending from zero, then the bias, the residual and the activation, so the
   bits are the AVX2 block's (tests/ops/test_conv_avx512.py). COLS (1 or 2 registers a row)
   and ROWS are constants where inlined; columns past nr are neither read nor written (masks). */
#define AVX512 HL_AVX512_TARGET
#define FMA_ROW512(r)                                                                         \
    if (ROWS > r) {                                                                           \
        const __m512 w = _mm512_set1_ps(A[r]);                                                \
        c##r##0 = _mm512_fmadd_ps(w, b0, c##r##0);                                            \
        if (PAIR) c##r##1 = _mm512_fmadd_ps(_mm512_set1_ps(A[a2 + r]), b0, c##r##1);          \
        else if (COLS > 1) c##r##1 = _mm512_fmadd_ps(w, b1, c##r##1);                         \
    }
#define BLOCK_LOOP512(LOAD0, LOAD1, PF)                                                       \
    for (int64_t k = 0; k < K; k++) {                                                         \
        PF;                                                                                   \
        const __m512 b0 = LOAD0;                                                              \
        const __m512 b1 = COLS > 1 ? LOAD1 : b0;                                              \
        FMA_ROW512(0) FMA_ROW512(1) FMA_ROW512(2) FMA_ROW512(3) FMA_ROW512(4) FMA_ROW512(5)  \
        A += MR;                                                                              \
        B += ldb;                                                                             \
    }

/* The last block of K's bias, residual and activation act (a constant where inlined) on the
   accumulators, stored under the masks; or, before the last block of K, the sums stored.
   acc[r][1] is row r's columns NR..2 NR - 1, or with PAIR row MR + r (the next panel's). */
AVX512 static inline __attribute__((always_inline)) void finish512(
    const block_args *a, int act, __m512 acc[MR][2], float *C, int64_t ldc, const float *bias,
    const float *res, int mr, __mmask16 m0, __mmask16 m1, const int ROWS, const int COLS,
    const bool PAIR) {
    const conv_act16_params ap = hl_conv_act16_params(a->epi);
    for (int h = 0; h < (PAIR ? 2 : 1); h++)
        for (int r0 = 0; r0 < ROWS; r0++) {
            const int r = r0 + h * MR;   /* the output row */
            if (r >= mr) break;
            float *y = C + r * ldc;
            const float *rr = res ? res + r * ldc : NULL;
            for (int c = 0; c < (PAIR ? 1 : COLS); c++) {
                const __mmask16 m = c ? m1 : m0;
                __m512 v = acc[r0][h + c];
                if (bias && a->last) v = _mm512_add_ps(v, _mm512_set1_ps(bias[r]));
                if (a->epi && a->last) {
                    if (rr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, rr + NR * c));
                    v = hl_conv_act16_with(act, ap, v);
                }
                _mm512_mask_storeu_ps(y + NR * c, m, v);
            }
        }
}

/* ROWS x COLS * NR outputs (B's columns past NR at B + b2); or with PAIR two panels over one
   strip, 2 MR x NR (the second panel's weights at A + a2): the block for a row's last strip
   of 16 or fewer columns, which alone (6 FMAs a step) would wait on its accumulators. */
AVX512 static inline __attribute__((always_inline)) void block_rows512(
    const block_args *a, const float *restrict A, int64_t a2, const float *B, int64_t ldb,
    int64_t b2, float *C, int64_t ldc, const float *bias, const float *res, int mr, int nr,
    const int ROWS, const int COLS, const bool PAIR) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const int64_t K = a->K;
    const __mmask16 m0 = hl_conv_mask16(nr), m1 = hl_conv_mask16(nr - NR);
    const bool whole = nr == COLS * NR;
    if (!a->first) {   /* rows past mr hold zeros (their weights are zeros too) */
#define LOAD_ROW512(r)                                                                        \
    if (ROWS > r && r < mr) c##r##0 = _mm512_maskz_loadu_ps(m0, C + r * ldc);                 \
    if (PAIR && MR + r < mr) c##r##1 = _mm512_maskz_loadu_ps(m0, C + (MR + r) * ldc);         \
    else if (!PAIR && COLS > 1 && ROWS > r && r < mr)                                         \
        c##r##1 = _mm512_maskz_loadu_ps(m1, C + r * ldc + NR);
        LOAD_ROW512(0) LOAD_ROW512(1) LOAD_ROW512(2) LOAD_ROW512(3) LOAD_ROW512(4)
        LOAD_ROW512(5)
#undef LOAD_ROW512
    }
    if (!PAIR && whole && a->prefetch) {   /* the next block's columns of this row */
        BLOCK_LOOP512(_mm512_loadu_ps(B), _mm512_loadu_ps(B + b2),
                      (_mm_prefetch((const char *)(B + COLS * NR), _MM_HINT_T0),
                       COLS > 1 ? _mm_prefetch((const char *)(B + 3 * NR), _MM_HINT_T0)
                                : (void)0))
    } else if (!PAIR && whole && a->next_a) {
        const float *na = a->next_a;
        BLOCK_LOOP512(_mm512_loadu_ps(B), _mm512_loadu_ps(B + b2),
                      (_mm_prefetch((const char *)na, _MM_HINT_T1), na += MR))
    } else if (whole) {
        BLOCK_LOOP512(_mm512_loadu_ps(B), _mm512_loadu_ps(B + b2), (void)0)
    } else {
        BLOCK_LOOP512(_mm512_maskz_loadu_ps(m0, B), _mm512_maskz_loadu_ps(m1, B + b2), (void)0)
    }
    __m512 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                         {c30, c31}, {c40, c41}, {c50, c51}};
    const int act = a->epi && a->last ? a->epi->act : HL_CONV_ACT_NONE;
    switch (act) {   /* straight-line code for the common activations */
    case HL_CONV_ACT_NONE:
        finish512(a, HL_CONV_ACT_NONE, acc, C, ldc, bias, res, mr, m0, m1, ROWS, COLS, PAIR);
        break;
    case HL_CONV_ACT_RELU:
        finish512(a, HL_CONV_ACT_RELU, acc, C, ldc, bias, res, mr, m0, m1, ROWS, COLS, PAIR);
        break;
    case HL_CONV_ACT_CLIP:
        finish512(a, HL_CONV_ACT_CLIP, acc, C, ldc, bias, res, mr, m0, m1, ROWS, COLS, PAIR);
        break;
    default: finish512(a, act, acc, C, ldc, bias, res, mr, m0, m1, ROWS, COLS, PAIR); break;
    }
}
#undef BLOCK_LOOP512
#undef FMA_ROW512

/* The tail kernel's one or two columns (block_tail_cols) for two panels at once: lanes 0-5
   the first panel's rows, 8-13 the second's (A + a2), one 16-lane FMA a step of K where the
   eight-lane kernel runs one per panel, each waiting on its four accumulators (a 7x7 plane's
   last column cost a tenth of its product's time). Each row's sums, their order and the
   epilogue are block_tail_cols's, lane for lane: the same bits. */
AVX512 static inline __attribute__((always_inline)) void block_tail2_cols(
    const block_args *a, const float *restrict A, int64_t a2, const float *B, int64_t ldb,
    float *C, int64_t ldc, const float *bias, const float *res, int mr, const int NCOL) {
    __m512 acc[TAIL_COLS][4];
    for (int j = 0; j < TAIL_COLS; j++)
        for (int u = 0; u < 4; u++) acc[j][u] = _mm512_setzero_ps();
    const int64_t K = a->K;
    int64_t k = 0;
#define TWO_PANELS(lo, hi) _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1)
    for (; k + 4 < K; k += 4)   /* k + 3 is not the block's last k: unmasked loads */
        for (int u = 0; u < 4; u++) {
            const __m512 w = TWO_PANELS(_mm256_loadu_ps(A + (k + u) * MR),
                                        _mm256_loadu_ps(A + a2 + (k + u) * MR));
            const float *b = B + (k + u) * ldb;
            for (int j = 0; j < NCOL; j++)
                acc[j][u] = _mm512_fmadd_ps(w, _mm512_set1_ps(b[j]), acc[j][u]);
        }
    const __mmask8 rows = (1u << MR) - 1;   /* a k's MR weights; the load stops there */
    for (; k < K; k++) {
        const __m512 w = k + 1 < K ? TWO_PANELS(_mm256_loadu_ps(A + k * MR),
                                                _mm256_loadu_ps(A + a2 + k * MR))
                                   : TWO_PANELS(_mm256_maskz_loadu_ps(rows, A + k * MR),
                                                _mm256_maskz_loadu_ps(rows, A + a2 + k * MR));
        for (int j = 0; j < NCOL; j++)
            acc[j][0] = _mm512_fmadd_ps(w, _mm512_set1_ps(B[k * ldb + j]), acc[j][0]);
    }
#undef TWO_PANELS
    /* output row r in lane r (first panel) or r + 2 (second) */
    int lane[2 * MR];
    for (int r = 0; r < 2 * MR; r++) lane[r] = r < MR ? r : r + 8 - MR;
    const bool last = a->last;
    float t[16] = {0};
    __m512 bv = _mm512_setzero_ps();
    if (bias && last) {
        for (int r = 0; r < mr; r++) t[lane[r]] = bias[r];
        bv = _mm512_loadu_ps(t);
    }
    const conv_act16_params ap = hl_conv_act16_params(a->epi);
    for (int j = 0; j < NCOL; j++) {
        __m512 v = _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]),
                                 _mm512_add_ps(acc[j][2], acc[j][3]));
        if (!a->first) {
            for (int r = 0; r < mr; r++) t[lane[r]] = C[r * ldc + j];
            v = _mm512_add_ps(_mm512_loadu_ps(t), v);
        }
        v = _mm512_add_ps(v, bv);
        if (a->epi && last) {
            if (res) {
                for (int r = 0; r < mr; r++) t[lane[r]] = res[r * ldc + j];
                v = _mm512_add_ps(v, _mm512_loadu_ps(t));
            }
            v = hl_conv_act16_with(a->epi->act, ap, v);
        }
        _mm512_storeu_ps(t, v);
        for (int r = 0; r < mr; r++) C[r * ldc + j] = t[lane[r]];
    }
}

AVX512 static void block_tail2_avx512(const block_args *a, const float *restrict A, int64_t a2,
                                      const float *B, int64_t ldb, float *C, int64_t ldc,
                                      const float *bias, const float *res, int mr, int nr) {
    if (nr == 1) block_tail2_cols(a, A, a2, B, ldb, C, ldc, bias, res, mr, 1);
    else block_tail2_cols(a, A, a2, B, ldb, C, ldc, bias, res, mr, 2);
}

/* block_rows512 for up to 2 NR columns (COLS 2) or NR (COLS 1), a whole panel or the last
   panel's 4 or 2 rows; and for two panels over NR columns (a whole one, then 1..6 rows). */
#define BLOCK512(name, ROWS, COLS)                                                            \
    AVX512 static void name(const block_args *a, const float *restrict A, const float *B,     \
                            int64_t ldb, int64_t b2, float *C, int64_t ldc, const float *bias, \
                            const float *res, int mr, int nr) {                               \
        block_rows512(a, A, 0, B, ldb, b2, C, ldc, bias, res, mr, nr, ROWS, COLS, false);     \
    }
BLOCK512(block6x32_avx512, 6, 2)
BLOCK512(block4x32_avx512, 4, 2)
BLOCK512(block2x32_avx512, 2, 2)
BLOCK512(block6x16_avx512, 6, 1)
BLOCK512(block4x16_avx512, 4, 1)
BLOCK512(block2x16_avx512, 2, 1)
AVX512 static void block12x16_avx512(const block_args *a, const float *restrict A, int64_t a2,
                                     const float *B, int64_t ldb, float *C, int64_t ldc,
                                     const float *bias, const float *res, int mr, int nr) {
    block_rows512(a, A, a2, B, ldb, 0, C, ldc, bias, res, mr, nr, MR, 1, true);
}
#undef BLOCK512
#endif

bool hl_conv_avx2(void) {
#if HAVE_X86
    static int known = -1;
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        const char *env = getenv("HL_CONV_AVX2");   /* 0: the portable kernels, for tests */
        k = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            !(env && env[0] == '0' && env[1] == '\0');
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
#else
    return false;
#endif
}

/* Which kernels a product runs: the AVX-512 ones take blocks up to 2 NR columns wide. */
typedef enum { KERNELS_PORTABLE, KERNELS_AVX2, KERNELS_AVX512 } kernels;

/* HL_CONV_AVX2=0 keeps the portable kernels (for tests), HL_CPU_AVX512=0 the AVX2 ones. */
static kernels kernels_here(void) {
    if (!hl_conv_avx2()) return KERNELS_PORTABLE;
#if HL_HAVE_AVX512_KERNELS
    if (hl_cpu_avx512()) return KERNELS_AVX512;
#endif
    return KERNELS_AVX2;
}

/* The columns of the next block, of `left` in a row of blocks: NR (or fewer at the end), or
   for the AVX-512 kernels up to 2 NR, except that a last strip of at most TAIL_COLS columns
   stays a block of its own (the tail kernel's sums, in the AVX2 path's order). */
static inline int cols_step(kernels kn, int64_t left) {
    const int64_t wide = kn == KERNELS_AVX512 && left > NR + TAIL_COLS ? 2 * NR : NR;
    return (int)HL_MIN(wide, left);
}

/* A block of mr x nr outputs: the AVX2 kernel where the CPU has it, else the portable one. */
static inline void block(const block_args *a, bool avx2, const float *A, const float *B,
                         int64_t ldb, float *C, int64_t ldc, const float *bias,
                         const float *res, int mr, int nr) {
#if HAVE_X86
    if (avx2 && nr <= TAIL_COLS) {
        block_tail_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr);
        return;
    }
    if (avx2 && nr <= 8) {
        block8_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr);
        return;
    }
    if (avx2) {
        if (mr > 4) block_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr);
        else if (mr > 2) block4_rows_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr);
        else block2_rows_avx2(a, A, B, ldb, C, ldc, bias, res, mr, nr);
        return;
    }
#endif
    (void)avx2;
    block_portable(a, A, B, ldb, C, ldc, bias, res, mr, nr);
}

/* Whether the AVX-512 kernels run a block of nr columns (a row's last strip of NR or fewer,
   past the tail kernel's) over two panels at once: 12 accumulators, where one panel's 6
   would wait on each other (7x7 planes' columns 32..47: MobileNetV2's 7x7 1x1 layers 5-9%
   faster, one thread). The even panel of each pair (counted from a chunk's first) runs the
   pair, the odd one skips it. */
static inline bool pairs_panels(kernels kn, int64_t nr) {
    return kn == KERNELS_AVX512 && nr <= NR && nr > TAIL_COLS;
}
/* Whether they run a row's last 1 or 2 columns over two panels at once (block_tail2_avx512). */
static inline bool pairs_tail(kernels kn, int64_t nr) {
    return kn == KERNELS_AVX512 && nr <= TAIL_COLS;
}

/* A block of mr x nr outputs (nr <= cols_step's), by the kernels kn; the columns past NR at
   B + b2 (the AVX-512 kernels only). */
static inline void block_kn(const block_args *a, kernels kn, const float *A, const float *B,
                            int64_t ldb, int64_t b2, float *C, int64_t ldc, const float *bias,
                            const float *res, int mr, int nr) {
#if HL_HAVE_AVX512_KERNELS
    if (kn == KERNELS_AVX512 && nr > TAIL_COLS) {
        if (nr > NR) {
            if (mr > 4) block6x32_avx512(a, A, B, ldb, b2, C, ldc, bias, res, mr, nr);
            else if (mr > 2) block4x32_avx512(a, A, B, ldb, b2, C, ldc, bias, res, mr, nr);
            else block2x32_avx512(a, A, B, ldb, b2, C, ldc, bias, res, mr, nr);
        } else {
            if (mr > 4) block6x16_avx512(a, A, B, ldb, b2, C, ldc, bias, res, mr, nr);
            else if (mr > 2) block4x16_avx512(a, A, B, ldb, b2, C, ldc, bias, res, mr, nr);
            else block2x16_avx512(a, A, B, ldb, b2, C, ldc, bias, res, mr, nr);
        }
        return;
    }
#endif
    (void)b2;
    block(a, kn != KERNELS_PORTABLE, A, B, ldb, C, ldc, bias, res, mr, nr);
}

/* ---- the product ---- */

/* Row k of B's columns: ldb apart, or at the offsets `rows` lists (gathered rows). */
static inline const float *b_row(const float *B, int64_t ldb, const int64_t *rows, int64_t k) {
    return B + (rows ? rows[k] : k * ldb);
}

#if HAVE_X86
/* Rows [k0, k0 + RB) of plain columns into the strips: per strip, RB rows of NR floats, one
   contiguous run of the destination (RB * 64 bytes); the strips' runs are kc * NR floats
   apart, a multiple of 1024 bytes for many kc, so one row's runs alone would all fall into
   a few L1 sets (the stores then go to L2 one line at a time). */
enum { PACK_RB = 8 };
AVX2 static void pack_rows_avx2(const float *const src[PACK_RB], int64_t whole, int64_t kc,
                                float *d) {
    for (int64_t s = 0; s < whole; s++, d += kc * NR)
        for (int r = 0; r < PACK_RB; r++) {
            const float *p = src[r] + s * NR;
            _mm256_storeu_ps(d + r * NR, _mm256_loadu_ps(p));
            _mm256_storeu_ps(d + r * NR + 8, _mm256_loadu_ps(p + 8));
        }
}

/* The partial last strip (tail < NR columns from column j of each row), zeros past them: two
   masked loads a row (which read nothing past the tail) in place of a copy and a fill. */
AVX2 static void pack_tail_avx2(const float *B, int64_t ldb, const int64_t *rows, int64_t kc,
                                int64_t j, int64_t tail, float *d) {
    const __m256i m0 = hl_conv_mask8(HL_MIN(tail, 8)), m1 = hl_conv_mask8(HL_MAX(tail - 8, 0));
    for (int64_t k = 0; k < kc; k++, d += NR) {
        const float *src = b_row(B, ldb, rows, k) + j;
        _mm256_storeu_ps(d, _mm256_maskload_ps(src, m0));
        _mm256_storeu_ps(d + 8, _mm256_maskload_ps(src + 8, m1));
    }
}
#endif

/* Columns [j0, j1) of kc rows of B (ldb apart) copied into strips of NR columns, each kc x
   NR contiguous (a partial last strip padded with zeros): the blocks then read their columns
   in sequence instead of one row (and, for wide planes, one page) per step of K. */
static void pack_columns(const float *B, int64_t ldb, const int64_t *rows, const int64_t *cols,
                         int64_t kc, int64_t j0, int64_t j1, float *dst) {
    if (!cols) {
        /* Plain columns are copied PACK_RB rows at a time, each row a run read in sequence,
           where strip by strip would read a line of every one of the kc rows in turn, more
           streams than the hardware prefetchers follow: when the rows come from memory
           every line was waited for (MobileNetV2's 32->16 at 112x112, batch 8, one thread:
           3.4 -> 1.9 ms, onnxruntime 1.35; batch 1 254 -> 204 us). */
        const int64_t strips = (j1 - j0 + NR - 1) / NR, tail = (j1 - j0) - (strips - 1) * NR;
        const int64_t whole = tail == NR ? strips : strips - 1;
        int64_t k = 0;
#if HAVE_X86
        if (hl_conv_avx2())
            for (; k + PACK_RB <= kc; k += PACK_RB) {
                const float *src[PACK_RB];
                for (int r = 0; r < PACK_RB; r++)
                    src[r] = b_row(B, ldb, rows, k + r) + j0;
                pack_rows_avx2(src, whole, kc, dst + k * NR);
            }
#endif
        for (; k < kc; k++) {
            const float *src = b_row(B, ldb, rows, k) + j0;
            float *d = dst + k * NR;
            for (int64_t s = 0; s < whole; s++, src += NR, d += kc * NR)
                memcpy(d, src, NR * sizeof(float));
        }
        if (whole == strips) return;
        /* the partial last strip, padded with zeros */
#if HAVE_X86
        if (hl_conv_avx2()) {
            pack_tail_avx2(B, ldb, rows, kc, j0 + whole * NR, tail, dst + whole * kc * NR);
            return;
        }
#endif
        for (k = 0; k < kc; k++) {
            const float *src = b_row(B, ldb, rows, k) + j0 + whole * NR;
            float *d = dst + whole * kc * NR + k * NR;
            memcpy(d, src, (size_t)tail * sizeof(float));
            for (int64_t j = tail; j < NR; j++) d[j] = 0;
        }
        return;
    }
    for (int64_t js = j0; js < j1; js += NR) {
        const int64_t w = HL_MIN(NR, j1 - js);
        /* gathered columns that lie in one run (a strip within a row of outputs) are copied
           as a run */
        const bool runs = cols && cols[js + w - 1] - cols[js] == w - 1;
        const int64_t at = cols ? cols[js] : js;
        for (int64_t k = 0; k < kc; k++) {
            const float *src = b_row(B, ldb, rows, k);
            float *d = dst + k * NR;
            if (cols && !runs)   /* a gather (pr->b_cols) */
                for (int64_t j = 0; j < w; j++) d[j] = src[cols[js + j]];
            else
                for (int64_t j = 0; j < w; j++) d[j] = src[at + j];
            for (int64_t j = w; j < NR; j++) d[j] = 0;
        }
        dst += kc * NR;
    }
}

/* K in blocks of about KC steps (a panel's block stays in L1, the columns' in L2), cut
   evenly; positions in blocks whose kc rows of columns fit BLOCK_BYTES (at most *nb_max, a
   multiple of NR), as many as that needs, cut evenly too (in multiples of NR): N = 210 at
   K = 1152 is two blocks of 112 and 98, not 208 and 2, whose tasks would be 100 times
   smaller than the first one's (uneven pieces for the threads) and re-read every panel's
   weights for two columns. */
static void blocking(int64_t K, int64_t N, int64_t *kc, int64_t *nb, int64_t *nb_max) {
    const int64_t kblocks = K > KC ? (K + KC - 1) / KC : 1;
    *kc = K > 0 ? (K + kblocks - 1) / kblocks : 0;
    const int64_t n = *kc > 0 ? BLOCK_BYTES / (*kc * (int64_t)sizeof(float)) : NR;
    *nb_max = HL_MAX(NR, n / NR * NR);
    const int64_t blocks = HL_MAX(1, (N + *nb_max - 1) / *nb_max);
    *nb = HL_MIN(*nb_max, ((N + blocks - 1) / blocks + NR - 1) / NR * NR);
}

/* Floats of packed columns one thread needs for products of at most n positions and k steps
   (a block of any n' <= n positions is at most this wide). */
static int64_t thread_work(int64_t n, int64_t k) {
    int64_t kc, nb, nb_max;
    blocking(k, n, &kc, &nb, &nb_max);
    return kc * HL_MIN(nb_max, (n + NR - 1) / NR * NR);
}

int64_t hl_conv_packed_work(int64_t n, int64_t k) { return thread_work(n, k) * hl_pool_threads(); }

/* Whether a task over `panels` panels reads its columns where they are, in strips of NR, for
   a block of kstep steps of K; else each panel passes over the whole block of positions,
   packed once for all the panels (from L2). Strips when the chunk's weights for the block
   fit in L1 (a short K: every panel passes over one strip while it is in L1), or for few
   output channels on short rows (STRIPS_MAX_M); never for columns gathered from phases or
   by strides (b_rows), nor for rows that alias in L1 (l1_sets_of_stride). */
static bool reads_in_place(const conv_packed_problem *pr, int64_t panels, int64_t kstep) {
    const int64_t wbytes = panels * kstep * MR * (int64_t)sizeof(float);
    const bool few = pr->m <= STRIPS_MAX_M, short_rows = pr->n <= STRIPS_MAX_N;
    return !pr->b_rows && (few || short_rows) && l1_sets_of_stride(pr->ldb) > ALIASED_SETS &&
           (wbytes <= L1_BYTES || (few && short_rows && wbytes <= L2_WEIGHTS));
}

/* What each task of a product needs; run_tasks runs them. */
typedef struct {
    const conv_packed_problem *pr;
    kernels kn;
    int64_t panels, kc, nb, blocks, chunks, per_chunk, per_thread, kblocks;
    float *packed_b;         /* per thread: one block of columns */
    const float *shared_b;   /* or every block's, packed before the products (prepack) */
    unsigned char *packed_once;  /* or NULL; else per thread: its block is packed already */
    bool in_place;           /* the columns read where they are, always (hl_conv_packed_lane) */
} product_tasks;

/* A product summed in two halves of K (sums_in_halves): each half's sums start from 0, the
   first half's in C, the second's in `part` (M x N); add_halves adds them, then the bias and
   the epilogue. */
typedef struct {
    const conv_packed_problem *pr;
    kernels kn;
    int64_t kc, khalf, panels, blocks, nb;
    float *part;
} halves_tasks;

/* Few output channels from many input channels (MobileNetV2's projections: 384->64 and
   576->96 at 14x14, 960->160 at 7x7) are summed in two halves of K, one a thread at two
   threads, and the halves added. In lanes (hl_parallel_lanes), each thread then reads the
   input channels that it computed itself in the depthwise layer before (and that layer those
   of the expansion before it): at two threads the data stays in each core's cache, where a
   split by positions read half of every input from the other core (docs/design-notes.md).
   Chosen by shape alone, so that any thread count gives the same bits (the halves' sums are
   added in the same order at one thread). */
enum { HALVES_MAX_M = 320, HALVES_MIN_K = 128 };
/* Under this many blocks of positions (tasks) a thread, a product's blocks are few: cut to a
   multiple of the threads, and run in lanes so that each thread gets its share. */
enum { FEW_PER_THREAD = 8 };
/* Expansions in lanes pack all their columns, once a thread, up to this many bytes (twice a
   block's: MobileNetV2's 56x56 one, 24 x 3136 floats, 294 KiB). */
enum { LANES_B_BYTES = 2 * BLOCK_BYTES };
static bool sums_in_halves(const conv_packed_problem *pr) {
    return pr->count == 1 && !pr->b_rows && !pr->b_cols && pr->m <= HALVES_MAX_M &&
           pr->k >= HALVES_MIN_K && pr->k >= 2 * pr->m && pr->n <= STRIPS_MAX_N &&
           l1_sets_of_stride(pr->ldb) > ALIASED_SETS;
}
static hl_status product_in_halves(const conv_packed_problem *pr, int64_t kc);
static void run_panel_lanes(int64_t p0, int64_t p1, void *arg);

/* The times each way ran (hl_conv_packed_runs): tests cannot tell the lanes from the bits. */
static int64_t ways_run[2];
int64_t hl_conv_packed_runs(int way) {
    return way >= 0 && way < 2 ? __atomic_load_n(&ways_run[way], __ATOMIC_RELAXED) : -1;
}
static void run_tasks(int64_t t0, int64_t t1, void *arg);

/* Gathered columns (b_rows) that several chunks of panels read are packed once for all of
   them before the products, each (sample, block of positions, block of K) by one task,
   instead of once per chunk by each task: ResNet-18's 7x7 strided layer at batch 1 is one
   block of positions cut in 8 chunks at two threads, which gathered its 2304 x 49 columns 8
   times. At most this many floats (else each task packs its own, as for one chunk). */
enum { PREPACK_MAX = 8 << 20 };

static void prepack_items(int64_t i0, int64_t i1, void *arg) {
    const product_tasks *q = arg;
    const conv_packed_problem *pr = q->pr;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t s = i / (q->blocks * q->kblocks), rem = i % (q->blocks * q->kblocks);
        const int64_t bl = rem / q->kblocks, k0 = rem % q->kblocks * q->kc;
        const int64_t j0 = bl * q->nb, j1 = HL_MIN(pr->n, j0 + q->nb);
        const float *B = pr->b + s * pr->b_step;
        pack_columns(pr->b_rows ? B : B + k0 * pr->ldb, pr->ldb,
                     pr->b_rows ? pr->b_rows + k0 : NULL, pr->b_cols, HL_MIN(q->kc, pr->k - k0),
                     j0, j1, (float *)q->shared_b + i * q->kc * q->nb);
    }
}

void hl_conv_packed_strips(const float *packed, int64_t m, int64_t k, const float *strips,
                           int64_t n, float *c, int64_t ldc, const float *bias, const float *res,
                           const conv_epilogue *epi) {
    const block_args a = {k, epi, true, true, false, NULL};
    const kernels kn = kernels_here();
    for (int64_t r0 = 0; r0 < m; r0 += MR)
        for (int64_t j = 0, nr; j < n; j += nr) {
            nr = cols_step(kn, n - j);
#if HL_HAVE_AVX512_KERNELS
            if (pairs_panels(kn, nr) && r0 / MR % 2) continue;   /* the pair took it */
            if (pairs_panels(kn, nr) && r0 + MR < m) {
                block12x16_avx512(&a, packed + r0 * k, MR * k, strips + j * k, NR,
                                  c + r0 * ldc + j, ldc, bias ? bias + r0 : NULL,
                                  res ? res + r0 * ldc + j : NULL,
                                  (int)HL_MIN(2 * MR, m - r0), (int)nr);
                continue;
            }
#endif
            block_kn(&a, kn, packed + r0 * k, strips + j * k, NR, NR * k, c + r0 * ldc + j,
                     ldc, bias ? bias + r0 : NULL, res ? res + r0 * ldc + j : NULL,
                     (int)HL_MIN(MR, m - r0), (int)nr);
        }
}

/* When `threads` threads (at most 16) claim `tasks` tasks in order, each the next one as it
   finishes (the pool's dynamic schedule, threads equally fast), a task one chunk of `per`
   of `panels` panels (a block's last chunk the rest): when the last finishes, in panels. */
static int64_t finish_time(int64_t tasks, int64_t per, int64_t panels, int threads) {
    int64_t busy[16] = {0};
    const int64_t chunks = (panels + per - 1) / per;
    for (int64_t t = 0; t < tasks; t++) {
        int first = 0;
        for (int i = 1; i < threads; i++)
            if (busy[i] < busy[first]) first = i;
        const int64_t ch = t % chunks;
        busy[first] += HL_MIN(per, panels - ch * per);
    }
    int64_t last = 0;
    for (int i = 0; i < threads; i++) last = HL_MAX(last, busy[i]);
    return last;
}

/* Panels per chunk for `have` (sample, block of positions) pairs. Enough pieces that a thread
   finishing early takes more (dynamic schedule): a thread the host deschedules then delays
   the call by one piece, not by half of it; at least 4 a thread. Among chunk sizes that give
   up to twice that many, the one whose pieces end soonest on equally fast threads (fewest
   pieces on a tie): 27 panels at 7x7 in chunks of 4 are 7 pieces, 4 on one thread and 3 on
   the other (16 panels' time against 13.5 ideal); in chunks of 2, 14 pieces end at 14. */
static int64_t panels_per_chunk(int64_t panels, int64_t have, int threads) {
    if (threads < 2) return panels;
    const int64_t want = 4 * (int64_t)threads;
    const int64_t chunks = HL_MIN(panels, HL_MAX(1, (want + have - 1) / have));
    int64_t best = (panels + chunks - 1) / chunks;
    if (threads > 16 || have * chunks > 64) return best;
    int64_t best_end = finish_time(have * chunks, best, panels, threads);
    for (int64_t per = best - 1; per >= 1; per--) {
        const int64_t c = (panels + per - 1) / per;
        if (have * c > 2 * HL_MAX(want, have * chunks)) break;
        const int64_t end = finish_time(have * c, per, panels, threads);
        if (end < best_end) best = per, best_end = end;
    }
    return best;
}

hl_status hl_conv_packed_product(const conv_packed_problem *pr) {
    const int64_t M = pr->m, N = pr->n, K = pr->k, count = pr->count;
    if (M <= 0 || N <= 0 || count <= 0) return HL_OK;
    const int64_t panels = (M + MR - 1) / MR;
    int64_t kc, nb, nb_max;
    blocking(K, N, &kc, &nb, &nb_max);
    if (sums_in_halves(pr)) {
        __atomic_add_fetch(&ways_run[0], 1, __ATOMIC_RELAXED);
        return product_in_halves(pr, kc);
    }
    const int threads = hl_pool_threads();
    const kernels kn = kernels_here();
    const int64_t n_strips = (N + NR - 1) / NR * NR;
    if (threads > 1 && count == 1 && M > STRIPS_MAX_M && K <= KC &&
        K * n_strips * (int64_t)sizeof(float) <= LANES_B_BYTES && !pr->b_rows && !pr->b_cols) {
        /* Many output channels from few (MobileNetV2's expansions at 56x56 to 7x7): the
           panels in lanes (hl_parallel_lanes), each chunk over all positions, so that each
           thread computes the same channels as the depthwise layer after it reads, and
           packs the columns once for its chunks. The same sums as any other split. */
        const int64_t per_thread = K * n_strips;   /* all the columns, packed once a thread */
        scratch sb = {NULL};
        float *packed_b;
        const size_t floats = (size_t)(per_thread * threads);
        hl_status st = scratch_get("conv", &sb, floats * sizeof(float) + (size_t)threads,
                                   (void **)&packed_b);
        if (st) return st;
        __atomic_add_fetch(&ways_run[1], 1, __ATOMIC_RELAXED);
        unsigned char *once = (unsigned char *)(packed_b + floats);
        memset(once, 0, (size_t)threads);
        product_tasks q = {.pr = pr, .kn = kn, .panels = panels, .kc = kc, .nb = n_strips,
                           .blocks = 1, .chunks = panels, .per_chunk = 1,
                           .per_thread = per_thread, .kblocks = 1, .packed_b = packed_b,
                           .packed_once = once};
        hl_parallel_lanes(panels, run_panel_lanes, (void *)&q);
        scratch_put(&sb);
        return HL_OK;
    }
    int64_t blocks = (N + nb - 1) / nb;
    /* Few blocks of positions that the threads cannot share evenly (9 at 112x112 and batch
       1: 5 on one thread, 4 on the other) are cut smaller, to a multiple of the threads */
    if (threads > 1 && count * blocks % threads && count * blocks < FEW_PER_THREAD * threads) {
        int64_t want = blocks;
        while (count * want % threads) want++;
        const int64_t nb2 = ((N + want - 1) / want + NR - 1) / NR * NR;
        if (count * ((N + nb2 - 1) / nb2) % threads == 0) nb = nb2;
        blocks = (N + nb - 1) / nb;
    }
    int64_t per_chunk = panels_per_chunk(panels, count * blocks, threads);
    if (M <= STRIPS_MAX_M && reads_in_place(pr, per_chunk, kc))
        per_chunk = HL_MAX(per_chunk, HL_MIN(panels, STRIPS_MIN_PANELS));
    const int64_t chunks = (panels + per_chunk - 1) / per_chunk;
    const int64_t tasks = count * blocks * chunks;
    const double flops = 2.0 * (double)M * (double)N * (double)K * (double)count;
    const bool parallel = threads > 1 && tasks > 1 && flops > 1e6;
    const int64_t kblocks = K > 0 ? (K + kc - 1) / kc : 0, slots = count * blocks * kblocks;
    const bool shared = chunks > 1 && !reads_in_place(pr, per_chunk, kc) && slots > 0 &&
                        slots * kc * nb <= PREPACK_MAX;
    /* each thread's packed columns: one block (kc x nb, nb a multiple of NR); or all blocks */
    const int64_t per_thread = shared ? 0 : thread_work(N, K);
    scratch sb = {NULL};
    float *packed_b = shared ? NULL : pr->work;
    if (!packed_b) {
        const int64_t floats = shared ? slots * kc * nb : per_thread * threads;
        hl_status st = scratch_get("conv", &sb, (size_t)floats * sizeof(float),
                                   (void **)&packed_b);
        if (st) return st;
    }
    product_tasks q = {pr, kn, panels, kc, nb, blocks, chunks, per_chunk, per_thread,
                       kblocks, packed_b, NULL, NULL};
    /* Several samples a thread: the tasks in lanes (numbered sample by sample), so that each
       thread keeps to the same samples from layer to layer, in its own core's cache, as the
       depthwise layers' groups do (MobileNetV2 at batch 8, two threads: 3% faster, ResNet-18
       2-4%). Few tasks that the threads can share evenly go in lanes too: the pool's plain
       chunks of them may not be even (10 tasks at two threads: 5 chunks of 2, 6 tasks on
       one thread and 4 on the other; MobileNetV2 b1's 112x112 and 56x56 projections, 22 and
       33 us of one thread's waiting a replay). */
    const bool lanes = parallel && (count >= threads ||
                                    (tasks % threads == 0 && tasks < FEW_PER_THREAD * threads));
    if (shared) {
        q.shared_b = packed_b;
        if (lanes) hl_parallel_lanes(slots, prepack_items, (void *)&q);
        else hl_parallel_for(slots, parallel ? 1 : slots, prepack_items, (void *)&q);
    }
    if (lanes) hl_parallel_lanes(tasks, run_tasks, (void *)&q);
    else hl_parallel_for(tasks, parallel ? 1 : tasks, run_tasks, (void *)&q);
    scratch_put(&sb);
    return HL_OK;
}

/* Panels [p0, p1) over columns [j0, j1) for one block of K (a.K steps from k0) into C (rows
   ldc apart; R likewise, or NULL): B's columns read in place (strips: B the product's columns,
   rows ldb apart) or from `packed` (the block's columns, packed from column j0). */
static void panel_products(const conv_packed_problem *pr, kernels kn, block_args a, int64_t k0,
                           const float *B, const float *packed, bool strips, int64_t p0,
                           int64_t p1, int64_t j0, int64_t j1, float *C, int64_t ldc,
                           const float *R, const float *bias) {
    const int64_t M = pr->m, K = pr->k;
    const int64_t jstep = !strips ? j1 - j0 : kn == KERNELS_AVX512 ? 2 * NR : NR;
    for (int64_t js = j0; js < j1; js += jstep) {
        const int64_t je = HL_MIN(j1, js + jstep);
        for (int64_t p = p0; p < p1; p++) {
            /* the first panel over a strip read in place fetches the next one's rows (K
               lines, each a row apart: 5% on MobileNetV2's projections, up to 18% at
               112x112, where the rows come from L3) */
            a.prefetch = strips && p == p0;
            const float *A = pr->a + p * K * MR + k0 * MR;
            const int64_t r0 = p * MR;
            const int mr = (int)HL_MIN(MR, M - r0);
            for (int64_t j = js, nr; j < je; j += nr) {
                nr = cols_step(kn, je - j);
                if ((pairs_panels(kn, nr) || pairs_tail(kn, nr)) && (p - p0) % 2)
                    continue;   /* the pair's */
                /* a packed block's first strip fetches the next panel's weights (from
                   memory, where a model's other layers evicted them) */
                a.next_a = !strips && j == js && p + 1 < p1 ? A + K * MR : NULL;
                const float *Bj = strips ? B + k0 * pr->ldb + j : packed + (j - j0) * a.K;
#if HL_HAVE_AVX512_KERNELS
                if ((pairs_panels(kn, nr) || pairs_tail(kn, nr)) && p + 1 < p1) {
                    (nr > TAIL_COLS ? block12x16_avx512 : block_tail2_avx512)(
                        &a, A, K * MR, Bj, strips ? pr->ldb : NR, C + r0 * ldc + j, ldc,
                        bias ? bias + r0 : NULL, R ? R + r0 * ldc + j : NULL,
                        (int)HL_MIN(2 * MR, M - r0), (int)nr);
                    continue;
                }
#endif
                block_kn(&a, kn, A, Bj, strips ? pr->ldb : NR, strips ? NR : NR * a.K,
                         C + r0 * ldc + j, ldc, bias ? bias + r0 : NULL,
                         R ? R + r0 * ldc + j : NULL, mr, (int)nr);
            }
        }
    }
}

/* One task: panels [p0, p1) of sample s over block bl of positions, all of K. */
static void run_task(const product_tasks *q, int64_t s, int64_t bl, int64_t p0, int64_t p1) {
    const conv_packed_problem *pr = q->pr;
    const int64_t N = pr->n, K = pr->k, kc = q->kc, nb = q->nb;
    const float *B = pr->b + s * pr->b_step;
    float *C = pr->c + s * pr->c_step;
    const float *R = pr->res ? pr->res + s * pr->c_step : NULL;
    const int64_t j0 = bl * nb, j1 = HL_MIN(N, j0 + nb);
    float *mine = q->packed_b + hl_thread_num() * q->per_thread;
    const float *slot = q->shared_b ? q->shared_b + (s * q->blocks + bl) * q->kblocks * kc * nb
                                    : NULL;
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
        block_args a = {HL_MIN(kc, K - k0), pr->epi, k0 == 0, k0 + kc >= K, false, NULL};
        const bool strips = q->in_place || reads_in_place(pr, p1 - p0, a.K);
        const float *packed = slot ? slot + k0 / kc * kc * nb : mine;
        if (!strips && K > 0 && !slot) {
            /* tasks in lanes (one block of positions and of K) pack it once a thread */
            unsigned char *once = q->packed_once ? q->packed_once + hl_thread_num() : NULL;
            if (!once || !*once)
                pack_columns(pr->b_rows ? B : B + k0 * pr->ldb, pr->ldb,
                             pr->b_rows ? pr->b_rows + k0 : NULL, pr->b_cols, a.K, j0, j1,
                             mine);
            if (once) *once = 1;
        }
        panel_products(pr, q->kn, a, k0, B, packed, strips, p0, p1, j0, j1, C, pr->ldc, R,
                       pr->bias);
        if (K == 0) break;
    }
}

/* Tasks [t0, t1): (sample, block of positions, chunk of panels), each written by one thread;
   which thread claims a task never changes a result. */
static void run_tasks(int64_t t0, int64_t t1, void *arg) {
    const product_tasks *q = arg;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t / (q->blocks * q->chunks), rem = t % (q->blocks * q->chunks);
        const int64_t bl = rem / q->chunks, ch = rem % q->chunks;
        const int64_t p0 = ch * q->per_chunk;
        run_task(q, s, bl, p0, HL_MIN(q->panels, p0 + q->per_chunk));
    }
}

/* Panels [p0, p1) over all positions: one task (hl_parallel_lanes' chunks). */
static void run_panel_lanes(int64_t p0, int64_t p1, void *arg) {
    run_task(arg, 0, 0, p0, p1);
}

/* ---- one thread's panels, for fused callers ---- */

bool hl_conv_packed_lane_fits(int64_t k) { return k > 0 && k <= KC; }

/* The lanes path's task (run_panel_lanes) for one caller's piece: the same blocks, so the same
   sums and bits as any hl_conv_packed_product of these rows, with the columns always read in
   place: a fused task's one or two panels use each strip once, just after reading it, so the
   L1 aliasing that makes whole products pack their columns (l1_sets_of_stride) costs less
   than a pass over them (MobileNetV2's 16 -> 96 at 112x112 in conv_expand_dw.c: 15% faster). */
void hl_conv_packed_lane(const conv_packed_problem *pr, int64_t p0, int64_t p1) {
    const product_tasks q = {.pr = pr, .kn = kernels_here(), .panels = (pr->m + MR - 1) / MR,
                             .kc = pr->k, .nb = (pr->n + NR - 1) / NR * NR, .blocks = 1,
                             .chunks = 1, .per_chunk = 1, .kblocks = 1, .in_place = true};
    run_task(&q, 0, 0, p0, p1);
}

/* ---- K in halves ---- */

/* Items [i0, i1) of a product in halves of K: (half h, block bl of positions), the half's
   sums from 0 into C (h = 0) or into its partial rows (h = 1), no bias or epilogue yet. */
static void run_halves(int64_t i0, int64_t i1, void *arg) {
    const halves_tasks *q = arg;
    const conv_packed_problem *pr = q->pr;
    const int64_t N = pr->n, K = pr->k;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t h = i / q->blocks, bl = i % q->blocks;
        const int64_t kb0 = h ? q->khalf : 0, kb1 = h ? K : q->khalf;
        const int64_t j0 = bl * q->nb, j1 = HL_MIN(N, j0 + q->nb);
        float *C = h ? q->part : pr->c;
        const int64_t ldc = h ? N : pr->ldc;
        for (int64_t k0 = kb0; k0 < kb1; k0 += q->kc) {
            const block_args a = {HL_MIN(q->kc, kb1 - k0), NULL, k0 == kb0, false, false, NULL};
            panel_products(pr, q->kn, a, k0, pr->b, NULL, true, 0, q->panels, j0, j1, C, ldc,
                           NULL, NULL);
        }
    }
}

/* Output rows [r0, r1): the halves' sums added, then the bias, the residual and the
   activation (what the blocks' last step of K applies). */
static void add_halves(int64_t r0, int64_t r1, void *arg) {
    const halves_tasks *q = arg;
    const conv_packed_problem *pr = q->pr;
    const int64_t N = pr->n;
    for (int64_t r = r0; r < r1; r++) {
        float *y = pr->c + r * pr->ldc;
        const float *other = q->part + r * N;
        if (pr->bias) {
            const float bias = pr->bias[r];
            for (int64_t j = 0; j < N; j++) y[j] = (y[j] + other[j]) + bias;
        } else {   /* no bias added, as the blocks add none (a -0 sum stays -0) */
            for (int64_t j = 0; j < N; j++) y[j] += other[j];
        }
        if (pr->epi) conv_epilogue_run_f32(pr->epi, y, pr->res ? pr->res + r * pr->ldc : NULL, N);
    }
}

static hl_status product_in_halves(const conv_packed_problem *pr, int64_t kc) {
    const int64_t M = pr->m, N = pr->n;
    /* positions in up to 4 blocks of whole strips: a thread's lane is one half of K */
    const int64_t nb = ((N + NR - 1) / NR + 3) / 4 * NR;
    scratch sb;
    float *part;
    hl_status st = scratch_get("conv", &sb, (size_t)(M * N) * sizeof(float), (void **)&part);
    if (st) return st;
    const halves_tasks q = {.pr = pr, .kn = kernels_here(), .kc = kc, .khalf = (pr->k + 1) / 2,
                            .panels = (M + MR - 1) / MR, .blocks = (N + nb - 1) / nb, .nb = nb,
                            .part = part};
    const bool parallel = 2.0 * (double)M * (double)N * (double)pr->k > 1e6;
    if (parallel)
        hl_parallel_lanes(2 * q.blocks, run_halves, (void *)&q);
    else
        hl_parallel_for(2 * q.blocks, 2 * q.blocks, run_halves, (void *)&q);
    hl_parallel_for(M, parallel ? 1 : M, add_halves, (void *)&q);
    scratch_put(&sb);
    return HL_OK;
}
