/*
 * winograd_weights.c - the kernel side of Winograd's F(2x2, 3x3) (winograd.c): checking that
 * weights may take it, transforming 3x3 kernels into 4x4 ones (per call, or once into the
 * packed layout), and turning transformed weight gradients back into 3x3 ones.
 *
 * Every loop runs on libcore's pool; each kernel is one item, written by one thread, so any
 * split gives the same bytes. The weight check sums squares in fixed blocks (their number a
 * function of n alone) and adds the blocks' sums in order: its answer does not depend on the
 * thread count either (the OpenMP reduction it replaced summed per thread).
 */
#include <float.h>
#include <math.h>

#include "../core.h"
#include "conv.h"
#include "conv_avx2.h"
#include "parallel.h"
#include "../packed_layouts.h"

/* Work below this many floats runs on the caller. */
enum { PAR_MIN = 32768 };

/* ---- the check --------------------------------------------------------------------------- */

enum { CHECK_BLOCKS_MAX = 256, CHECK_BLOCK_MIN = 1 << 16 };

typedef struct {
    const float *w;
    int64_t n, block;
    double sum_sq[CHECK_BLOCKS_MAX];
    float most[CHECK_BLOCKS_MAX];
    bool finite[CHECK_BLOCKS_MAX];
} check_job;

/* One block: CHECK_LANES running sums, maxima and finiteness flags, value i of the block in
   lane i % CHECK_LANES, the lanes combined in order at the end. One running sum made this a
   chain of dependent double additions (4 cycles a weight: 1.7% of a ResNet-18 training step,
   whose forward and grad_input passes check every 3x3 weight); independent lanes do not wait
   for each other. The answer is a function of the block's values alone (not of the thread
   count or the CPU: (double)a * a is exact, so the AVX2 lanes and the portable ones add the
   same numbers in the same order); its sum differs from the one chain's by rounding only. */
enum { CHECK_LANES = 16 };

typedef struct {
    double sum[CHECK_LANES];
    float most[CHECK_LANES];
    int finite[CHECK_LANES];
} check_lanes;

/* Values [i, n) of w into the lanes (the tail, or all of a block on a CPU without AVX2). */
static void check_tail(const float *w, int64_t i, int64_t n, check_lanes *l) {
    for (; i < n; i++) {
        const int j = (int)(i % CHECK_LANES);
        const float a = fabsf(w[i]);
        l->finite[j] &= a <= FLT_MAX;  /* false for inf and NaN */
        l->most[j] = a > l->most[j] ? a : l->most[j];
        l->sum[j] += (double)a * a;
    }
}

#if HL_CONV_HAVE_X86
/* The whole multiples of CHECK_LANES: the values [0, return) of w. */
HL_AVX2 static int64_t check_avx2(const float *w, int64_t n, check_lanes *l) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 big = _mm256_set1_ps(FLT_MAX);
    __m256d s[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
    __m256 m0 = _mm256_setzero_ps(), m1 = m0, bad0 = m0, bad1 = m0;
    int64_t i = 0;
    for (; i + CHECK_LANES <= n; i += CHECK_LANES) {
        const __m256 v0 = _mm256_and_ps(_mm256_loadu_ps(w + i), abs_mask);
        const __m256 v1 = _mm256_and_ps(_mm256_loadu_ps(w + i + 8), abs_mask);
        bad0 = _mm256_or_ps(bad0, _mm256_cmp_ps(v0, big, _CMP_NLE_UQ));  /* inf, NaN */
        bad1 = _mm256_or_ps(bad1, _mm256_cmp_ps(v1, big, _CMP_NLE_UQ));
        m0 = _mm256_max_ps(v0, m0);   /* as a > m ? a : m (a NaN lane is flagged above) */
        m1 = _mm256_max_ps(v1, m1);
        const __m256d d[4] = {_mm256_cvtps_pd(_mm256_castps256_ps128(v0)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)),
                              _mm256_cvtps_pd(_mm256_castps256_ps128(v1)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1))};
        for (int k = 0; k < 4; k++) s[k] = _mm256_fmadd_pd(d[k], d[k], s[k]);
    }
    for (int k = 0; k < 4; k++) _mm256_storeu_pd(l->sum + 4 * k, s[k]);
    _mm256_storeu_ps(l->most, m0);
    _mm256_storeu_ps(l->most + 8, m1);
    float bad[CHECK_LANES];
    _mm256_storeu_ps(bad, bad0);
    _mm256_storeu_ps(bad + 8, bad1);
    for (int j = 0; j < CHECK_LANES; j++) l->finite[j] = bad[j] == 0;
    return i;
}
#endif

static void check_block(const float *w, int64_t n, double *sum_out, float *most_out,
                        bool *finite_out) {
    check_lanes l;
    for (int j = 0; j < CHECK_LANES; j++) l.sum[j] = 0, l.most[j] = 0, l.finite[j] = 1;
    int64_t done = 0;
#if HL_CONV_HAVE_X86
    if (hl_conv_avx2()) done = check_avx2(w, n, &l);
#endif
    check_tail(w, done, n, &l);
    double s = 0;
    float m = 0;
    int f = 1;
    for (int j = 0; j < CHECK_LANES; j++) {
        s += l.sum[j];
        m = l.most[j] > m ? l.most[j] : m;
        f &= l.finite[j];
    }
    *sum_out = s;
    *most_out = m;
    *finite_out = f;
}

static void check_blocks(int64_t b0, int64_t b1, void *ctx) {
    check_job *q = ctx;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t lo = b * q->block, hi = HL_MIN(q->n, lo + q->block);
        check_block(q->w + lo, hi - lo, &q->sum_sq[b], &q->most[b], &q->finite[b]);
    }
}

bool hl_winograd_weights_ok(const float *w, int64_t n) {
    return hl_winograd_weights_judged(w, n, hl_winograd_admits);
}

bool hl_winograd_weights_judged(const float *w, int64_t n,
                                bool (*admits)(bool, double, double, int64_t)) {
    if (n <= 0) return true;
    check_job q;
    q.w = w;
    q.n = n;
    q.block = HL_MAX(CHECK_BLOCK_MIN, (n + CHECK_BLOCKS_MAX - 1) / CHECK_BLOCKS_MAX);
    const int64_t blocks = (n + q.block - 1) / q.block;
    hl_parallel_for(blocks, n > 4 * PAR_MIN ? 1 : blocks, check_blocks, &q);
    double sum_sq = 0;
    float most = 0;
    bool finite = true;
    for (int64_t b = 0; b < blocks; b++) {
        sum_sq += q.sum_sq[b];
        most = q.most[b] > most ? q.most[b] : most;
        finite = finite && q.finite[b];
    }
    return admits(finite, most, sum_sq, n);
}

/* ---- 3x3 -> 4x4 -------------------------------------------------------------------------- */

typedef struct {
    const float *w;
    int64_t C0, C1, first, row, col, us;
    float *U;
    bool packed;  /* hl_winograd_pack's layout (C0 = c_out, C1 = c_in) */
} transform_job;

static void transform_rows(int64_t i0, int64_t i1, void *ctx) {
    const transform_job *q = ctx;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = 0; j < q->C1; j++) {
            const int64_t at = q->packed ? hl_winograd_packed_at(i, j, q->C0, q->C1)
                                         : i * q->C1 + j;
            hl_winograd_weight_tile(q->w + (i * q->C1 + j) * 9 + q->first, q->row, q->col,
                                    q->U + at, q->us);
        }
}

static void transform(transform_job *q) {
    hl_parallel_for(q->C0, q->C0 * q->C1 * 16 > PAR_MIN ? 1 : q->C0, transform_rows, q);
}

/* A turned kernel (grad_input's) is read from tap (2, 2) backwards. Kernels are transformed
   in w's own order either way, which reads and writes memory in sequence (read the other way
   round, a 512 x 512 kernel took 3 ms); the products read U transposed when turned. */
void hl_winograd_transform_weights(const float *w, int64_t C0, int64_t C1, bool turned,
                                   float *U, int64_t us) {
    transform_job q = {w, C0, C1, turned ? 8 : 0, turned ? -3 : 3, turned ? -1 : 1, us, U,
                       false};
    transform(&q);
}

void hl_winograd_pack(const float *w, int64_t c_out, int64_t c_in, float *U) {
    const int64_t us = c_out * c_in;
    if (!hl_winograd_weights_ok(w, us * 9)) {   /* refused: NaN, packed_layouts.h */
        for (int64_t i = 0; i < 16 * us; i++) U[i] = NAN;
        return;
    }
    transform_job q = {w, c_out, c_in, 0, 3, 1, us, U, true};
    transform(&q);
}

/* ---- 4x4 gradients -> 3x3 ---------------------------------------------------------------- */

/* dW = G^T m G for the 4x4 m[e * ms]: a 3x3 kernel, written to w (row stride 3). */
static void weight_grad_tile(const float *m, int64_t ms, float *w) {
    float t[3][4];
    for (int c = 0; c < 4; c++) {
        const float m0 = m[c * ms], m1 = m[(4 + c) * ms], m2 = m[(8 + c) * ms],
                    m3 = m[(12 + c) * ms];
        t[0][c] = m0 + 0.5f * (m1 + m2);
        t[1][c] = 0.5f * (m1 - m2);
        t[2][c] = 0.5f * (m1 + m2) + m3;
    }
    for (int i = 0; i < 3; i++) {
        const float q0 = t[i][0], q1 = t[i][1], q2 = t[i][2], q3 = t[i][3];
        w[i * 3 + 0] = q0 + 0.5f * (q1 + q2);
        w[i * 3 + 1] = 0.5f * (q1 - q2);
        w[i * 3 + 2] = 0.5f * (q1 + q2) + q3;
    }
}

typedef struct {
    const float *M;
    int64_t ms, CI;
    float *dw;
} grad_job;

static void grad_rows(int64_t c0, int64_t c1, void *ctx) {
    const grad_job *q = ctx;
    for (int64_t co = c0; co < c1; co++)
        for (int64_t ci = 0; ci < q->CI; ci++)
            weight_grad_tile(q->M + co * q->CI + ci, q->ms, q->dw + (co * q->CI + ci) * 9);
}

void hl_winograd_weight_grads(const float *M, int64_t ms, int64_t nc, int64_t CI, float *dw) {
    grad_job q = {M, ms, CI, dw};
    hl_parallel_for(nc, nc * CI * 16 > PAR_MIN ? 1 : nc, grad_rows, &q);
}
