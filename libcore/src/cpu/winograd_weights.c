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

static void check_blocks(int64_t b0, int64_t b1, void *ctx) {
    check_job *q = ctx;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t lo = b * q->block, hi = HL_MIN(q->n, lo + q->block);
        double sum_sq = 0;
        float most = 0;
        int finite = 1;
        for (int64_t i = lo; i < hi; i++) {
            const float a = fabsf(q->w[i]);
            finite &= a <= FLT_MAX;  /* false for inf and NaN */
            most = a > most ? a : most;
            sum_sq += (double)a * a;
        }
        q->sum_sq[b] = sum_sq;
        q->most[b] = most;
        q->finite[b] = finite;
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
