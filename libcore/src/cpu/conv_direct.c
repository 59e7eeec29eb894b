/*
 * conv_direct.c - float32 stride-1 convolutions with large kernels (5x5 and up, one group,
 * no dilation) on small planes, straight from the planes: no im2col columns, no col2im, no
 * gather or scatter (the MNIST CNN's two 5x5 layers; issue 20). im2col copies each input
 * value kh * kw times into columns of 8- or 24-wide rows and OpenBLAS then packs them again;
 * on these layers that cost as much as the products (about 50 GFLOP/s of ~85 on one core).
 *
 * Forward: the output of one sample is cut into vectors of 8 positions along a row (a row
 * of ow % 8 != 0 ends on a vector that overlaps the previous one: its lanes are the same
 * sums, stored twice with the same bits); a block of DNV vectors times a panel of DMR output
 * channels is 12 accumulators. For each (input channel, ky, kx) each vector's inputs are one
 * unaligned load from the (padded) input plane and the panel's DMR weights broadcasts: the
 * sample's planes stay in L1 (conv2's 20 x 12 x 12 are 11.5 KiB) while every panel passes
 * over them. Weights are packed per call (k-major, DMR per k; 100 KiB for conv2, 14 us) since
 * training changes them. Sums run over k in order from zero, then the bias, the residual and
 * the activation are applied in registers (conv_fused equals conv then its element-wise ops
 * bit for bit, as both take this kernel).
 *
 * grad_input (5-wide kernels, dy rows a multiple of 8): per pair of dx rows, sums of dy rows
 * times weight broadcasts, one per kx, then shifted and added along the row; see gi_items.
 *
 * grad_weight: dW[co][k] = sum over samples and positions of dy[co] times the input shifted
 * by tap k. Vectors of 8 positions of dy and of the shifted input are both loaded (no
 * broadcast); DGC output channels x DGT taps are 12 accumulators, kept across a block of
 * samples (about 256 KiB of x and dy: L2), then summed across lanes and added to dW. Each
 * dW entry is summed by one task in a fixed order: results do not depend on the thread count.
 *
 * Only with AVX2 + FMA (hl_conv_avx2); HL_CONV_DIRECT=0 in the environment turns the path
 * off (for A/B runs and tests: it is read at each call). Sums run in another order than
 * OpenBLAS's, so results differ from the im2col path's by float rounding
 * (tests/ops/test_conv_direct.py checks both against float64 PyTorch).
 */
#include <stdlib.h>
#include <string.h>

#include "../core.h"
#include "conv.h"
#include "conv_avx2.h"
#include "parallel.h"

enum { DMR = 4, DNV = 3 };   /* forward: output channels per panel x vectors per block */
enum { DGC = 3, DGT = 4 };   /* grad_weight: output channels x taps per task */
enum { GI_KW = 5 };          /* grad_input: the kernel width it is written for */
enum { GI_ROW_MAX = 512 };   /* grad_input: dy rows at most this wide */
/* An input sample's planes larger than this take im2col (they would not stay in cache). */
enum { PLANES_MAX_BYTES = 128 << 10 };
/* A grad_weight block of samples: about this many bytes of x and dy. */
enum { GW_BLOCK_BYTES = 256 << 10 };

static bool direct_enabled(void) {
    const char *env = getenv("HL_CONV_DIRECT");
    return hl_conv_avx2() && !(env && env[0] == '0' && env[1] == '\0');
}

static bool plain_stride1(const conv_geom *g) {
    return g->groups == 1 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 &&
           g->kh >= 4 && g->kw >= 4 && g->kh <= 16 && g->kw <= 16 && g->n > 0 && g->c_in > 0 &&
           g->c_out > 0;
}

bool hl_conv_direct_fits(const conv_geom *g, const conv_epilogue *e) {
    if (!plain_stride1(g) || g->ow < 8 || g->oh < 1) return false;
    const int64_t hp = g->oh + g->kh - 1, wp = g->ow + g->kw - 1;
    if (g->c_in * hp * wp * (int64_t)sizeof(float) > PLANES_MAX_BYTES) return false;
    /* an overlapping last vector re-reads the residual it may have overwritten in place */
    if (e && e->res && g->ow % 8) return false;
    return direct_enabled();
}

bool hl_conv_direct_grad_input_fits(const conv_geom *g) {
    /* dx column ix is entry ix + pl of a row buffer of ow + kw - 1 */
    return plain_stride1(g) && g->kw == GI_KW && g->ow % 8 == 0 && g->ow <= GI_ROW_MAX &&
           g->oh > 0 && g->w > 0 && g->pl <= g->kw - 1 && g->ow + g->kw - 1 - g->pl >= g->w &&
           direct_enabled();
}

bool hl_conv_direct_grad_weight_fits(const conv_geom *g) {
    if (!plain_stride1(g) || g->ow % 8 || g->oh < 1) return false;
    const int64_t hp = g->oh + g->kh - 1, wp = g->ow + g->kw - 1;
    if (g->c_in * hp * wp * (int64_t)sizeof(float) > PLANES_MAX_BYTES) return false;
    return direct_enabled();
}

#if HL_CONV_HAVE_X86
#define AVX2 HL_AVX2

/* ---- forward ---- */

/* A stride-1 "valid" correlation of samples whose ci planes are hp x wp (padded already, or
   copied into a padded buffer per task: src_h x src_w planes placed at (top, left)), by
   panels of DMR output channels, into co planes of oh x ow. */
typedef struct {
    int64_t n, ci, co, oh, ow, kh, kw, hp, wp;
    const float *x;           /* n samples of ci planes src_h x src_w */
    int64_t src_h, src_w, top, left;
    bool copy;                /* false: x already is hp x wp */
    const float *packed;      /* panels x K x DMR */
    const float *bias;        /* co values, or NULL */
    const conv_epilogue *epi; /* act and residual (shaped like y), or NULL */
    float *y;
    float *pad;               /* per thread: ci * hp * wp floats, when copy */
    int64_t panels, pchunks;
} direct_job;

/* acc[r][v] += panel weight (k, r) times vector v's inputs at tap k (offset o): the inputs
   loaded first, then one weight broadcast at a time, so that 12 accumulators, 3 inputs and a
   weight fill the 16 registers without spilling. */
#define FWD_ROW(r)                                                                            \
    do {                                                                                      \
        const __m256 w = _mm256_broadcast_ss(A + r);                                          \
        a##r##0 = _mm256_fmadd_ps(w, b0, a##r##0);                                            \
        if (NV > 1) a##r##1 = _mm256_fmadd_ps(w, b1, a##r##1);                                \
        if (NV > 2) a##r##2 = _mm256_fmadd_ps(w, b2, a##r##2);                                \
    } while (0)
#define FWD_STEP(NV)                                                                          \
    do {                                                                                      \
        const __m256 b0 = _mm256_loadu_ps(p0 + o);                                            \
        const __m256 b1 = NV > 1 ? _mm256_loadu_ps(p1 + o) : b0;                              \
        const __m256 b2 = NV > 2 ? _mm256_loadu_ps(p2 + o) : b0;                              \
        FWD_ROW(0);                                                                           \
        FWD_ROW(1);                                                                           \
        FWD_ROW(2);                                                                           \
        FWD_ROW(3);                                                                           \
        A += DMR;                                                                             \
    } while (0)

/* One block: NV (1..3, a constant) vectors whose top-left inputs are in[v] and outputs
   out[v] (offsets into a plane), panel rows mr <= DMR stored. */
AVX2 static inline __attribute__((always_inline)) void fwd_block(
    const direct_job *q, const float *A, const float *xs, const int64_t *in,
    const int64_t *out, int64_t co0, int mr, float *ys, const float *rs, const int NV) {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00,
           a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    const float *p0 = xs + in[0], *p1 = xs + in[NV > 1 ? 1 : 0], *p2 = xs + in[NV > 2 ? 2 : 0];
    const int64_t plane = q->hp * q->wp, kh = q->kh, kw = q->kw, wp = q->wp;
    for (int64_t c = 0; c < q->ci; c++)
        for (int64_t ky = 0; ky < kh; ky++) {
            const int64_t row = c * plane + ky * wp;
            int64_t kx = 0;
            for (; kx + 5 <= kw; kx += 5) {   /* a 5-wide kernel row unrolled */
                int64_t o = row + kx;
                FWD_STEP(NV); o++;
                FWD_STEP(NV); o++;
                FWD_STEP(NV); o++;
                FWD_STEP(NV); o++;
                FWD_STEP(NV);
            }
            for (; kx < kw; kx++) {
                const int64_t o = row + kx;
                FWD_STEP(NV);
            }
        }
    const __m256 acc[DMR][DNV] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22},
                                  {a30, a31, a32}};
    const int64_t P = q->oh * q->ow;
    const int act = q->epi ? q->epi->act : HL_CONV_ACT_NONE;
    const conv_act8_params ap = hl_conv_act8_params(q->epi);
    for (int r = 0; r < mr; r++) {
        const __m256 b = _mm256_set1_ps(q->bias ? q->bias[co0 + r] : 0.0f);
        for (int v = 0; v < NV; v++) {
            __m256 s = acc[r][v];
            if (q->bias) s = _mm256_add_ps(s, b);
            if (rs) s = _mm256_add_ps(s, _mm256_loadu_ps(rs + (co0 + r) * P + out[v]));
            if (act != HL_CONV_ACT_NONE) s = hl_conv_act8_with(act, ap, s);
            _mm256_storeu_ps(ys + (co0 + r) * P + out[v], s);
        }
    }
}
#undef FWD_STEP
#undef FWD_ROW

AVX2 static void fwd_block3(const direct_job *q, const float *A, const float *xs,
                            const int64_t *in, const int64_t *out, int64_t co0, int mr,
                            float *ys, const float *rs) {
    fwd_block(q, A, xs, in, out, co0, mr, ys, rs, 3);
}
AVX2 static void fwd_block2(const direct_job *q, const float *A, const float *xs,
                            const int64_t *in, const int64_t *out, int64_t co0, int mr,
                            float *ys, const float *rs) {
    fwd_block(q, A, xs, in, out, co0, mr, ys, rs, 2);
}
AVX2 static void fwd_block1(const direct_job *q, const float *A, const float *xs,
                            const int64_t *in, const int64_t *out, int64_t co0, int mr,
                            float *ys, const float *rs) {
    fwd_block(q, A, xs, in, out, co0, mr, ys, rs, 1);
}

/* ci planes src_h x src_w at src into zero-padded hp x wp planes at dst, placed at (top,
   left). */
static void pad_planes(const float *src, int64_t ci, int64_t src_h, int64_t src_w, int64_t top,
                       int64_t left, int64_t hp, int64_t wp, float *dst) {
    const int64_t plane = hp * wp;
    memset(dst, 0, (size_t)(ci * plane) * sizeof(float));
    const int64_t x0 = HL_MAX(0, -left), x1 = HL_MIN(src_w, wp - left);
    if (x1 <= x0) return;
    for (int64_t c = 0; c < ci; c++)
        for (int64_t iy = 0; iy < src_h; iy++) {
            const int64_t ty = iy + top;
            if (ty < 0 || ty >= hp) continue;
            memcpy(dst + c * plane + ty * wp + x0 + left, src + (c * src_h + iy) * src_w + x0,
                   (size_t)(x1 - x0) * sizeof(float));
        }
}

/* Tasks (sample, chunk of panels). */
static void fwd_items(int64_t t0, int64_t t1, void *arg) {
    const direct_job *q = arg;
    const int64_t per = (q->panels + q->pchunks - 1) / q->pchunks;
    const int64_t K = q->ci * q->kh * q->kw, P = q->oh * q->ow, nvr = (q->ow + 7) / 8;
    const int64_t V = q->oh * nvr;
    const float *res = q->epi ? (const float *)q->epi->res : NULL;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t / q->pchunks, ch = t % q->pchunks;
        const float *xs = q->x + s * q->ci * q->src_h * q->src_w;
        if (q->copy) {
            float *buf = q->pad + hl_thread_num() * q->ci * q->hp * q->wp;
            pad_planes(xs, q->ci, q->src_h, q->src_w, q->top, q->left, q->hp, q->wp, buf);
            xs = buf;
        }
        float *ys = q->y + s * q->co * P;
        const float *rs = res ? res + s * q->co * P : NULL;
        const int64_t p1 = HL_MIN(q->panels, (ch + 1) * per);
        for (int64_t p = ch * per; p < p1; p++) {
            const float *A = q->packed + p * K * DMR;
            const int64_t co0 = p * DMR;
            const int mr = (int)HL_MIN(DMR, q->co - co0);
            for (int64_t v0 = 0; v0 < V; v0 += DNV) {
                int64_t in[DNV], out[DNV];
                const int nv = (int)HL_MIN(DNV, V - v0);
                for (int v = 0; v < nv; v++) {
                    const int64_t oy = (v0 + v) / nvr, ox = HL_MIN((v0 + v) % nvr * 8, q->ow - 8);
                    in[v] = oy * q->wp + ox;
                    out[v] = oy * q->ow + ox;
                }
                if (nv == 3) fwd_block3(q, A, xs, in, out, co0, mr, ys, rs);
                else if (nv == 2) fwd_block2(q, A, xs, in, out, co0, mr, ys, rs);
                else fwd_block1(q, A, xs, in, out, co0, mr, ys, rs);
            }
        }
    }
}

/* packed[p][k][r] = w[p * DMR + r][k] for k < K (w: rows x K), zeros past the last row. */
static void pack_weights(const float *w, int64_t rows, int64_t K, float *packed) {
    const int64_t panels = (rows + DMR - 1) / DMR;
    for (int64_t p = 0; p < panels; p++)
        for (int64_t k = 0; k < K; k++)
            for (int r = 0; r < DMR; r++) {
                const int64_t row = p * DMR + r;
                packed[(p * K + k) * DMR + r] = row < rows ? w[row * K + k] : 0.0f;
            }
}



/* ---- grad_weight ---- */

/* One block of samples: x's (ci planes of hp x wp each, x_step floats apart) and dy's. */
typedef struct {
    int64_t ci, co, ow, oh, kh, kw, hp, wp, K, P, x_step, m;
    const float *x, *dy;
    bool first;   /* the first block sets dw, the others add */
    float *dw;
    int64_t tblocks;
} gw_job;

AVX2 static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define GW_TAP(i, xp, in)                                                                     \
    {                                                                                         \
        const __m256 xv = _mm256_loadu_ps(xp + (in));                                         \
        a0##i = _mm256_fmadd_ps(dv0, xv, a0##i), a1##i = _mm256_fmadd_ps(dv1, xv, a1##i);     \
        a2##i = _mm256_fmadd_ps(dv2, xv, a2##i);                                              \
    }

/* Tasks (block of DGC output channels, block of DGT taps); a partial block computes its last
   channel or tap again and stores it once. */
AVX2 static void gw_items(int64_t t0, int64_t t1, void *arg) {
    const gw_job *q = arg;
    const int64_t khw = q->kh * q->kw, plane = q->hp * q->wp, nvr = q->ow / 8, P = q->P;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t c0 = t / q->tblocks * DGC, k0 = t % q->tblocks * DGT;
        int64_t co[DGC], tap[DGT];
        for (int j = 0; j < DGC; j++) co[j] = HL_MIN(c0 + j, q->co - 1) * P;
        for (int i = 0; i < DGT; i++) {
            const int64_t k = HL_MIN(k0 + i, q->K - 1);
            tap[i] = k / khw * plane + k % khw / q->kw * q->wp + k % q->kw;
        }
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00,
               a11 = a00, a12 = a00, a13 = a00, a20 = a00, a21 = a00, a22 = a00, a23 = a00;
        for (int64_t s = 0; s < q->m; s++) {
            const float *xs = q->x + s * q->x_step, *ds = q->dy + s * q->co * P;
            const float *d0 = ds + co[0], *d1 = ds + co[1], *d2 = ds + co[2];
            const float *x0 = xs + tap[0], *x1 = xs + tap[1], *x2 = xs + tap[2],
                        *x3 = xs + tap[3];
            /* dy's three vectors, then one tap's inputs at a time: 12 accumulators, 3 + 1
               operands (no spills) */
#define GW_STEP(pos, in)                                                                      \
    {                                                                                         \
        const __m256 dv0 = _mm256_loadu_ps(d0 + (pos)), dv1 = _mm256_loadu_ps(d1 + (pos)),    \
                     dv2 = _mm256_loadu_ps(d2 + (pos));                                       \
        GW_TAP(0, x0, in) GW_TAP(1, x1, in) GW_TAP(2, x2, in) GW_TAP(3, x3, in)               \
    }
            if (nvr == 1) {   /* rows of 8 (conv2 of the MNIST CNN): one loop, two rows a step */
                int64_t oy = 0;
                for (; oy + 2 <= q->oh; oy += 2) {
                    GW_STEP(oy * 8, oy * q->wp)
                    GW_STEP(oy * 8 + 8, oy * q->wp + q->wp)
                }
                if (oy < q->oh) GW_STEP(oy * 8, oy * q->wp)
            } else {
                for (int64_t oy = 0; oy < q->oh; oy++)
                    for (int64_t v = 0; v < nvr; v++) GW_STEP(oy * q->ow + v * 8, oy * q->wp + v * 8)
            }
#undef GW_STEP
        }
        const __m256 acc[DGC][DGT] = {{a00, a01, a02, a03}, {a10, a11, a12, a13},
                                      {a20, a21, a22, a23}};
        for (int j = 0; j < DGC && c0 + j < q->co; j++)
            for (int i = 0; i < DGT && k0 + i < q->K; i++) {
                float *d = q->dw + (c0 + j) * q->K + k0 + i;
                const float v = hsum8(acc[j][i]);
                *d = q->first ? v : *d + v;
            }
    }
}
#undef GW_TAP

typedef struct {
    const float *x;
    float *dst;
    int64_t ci, h, w, pt, pl, hp, wp;
} gw_pad_job;

static void gw_pad_items(int64_t s0, int64_t s1, void *arg) {
    const gw_pad_job *q = arg;
    for (int64_t s = s0; s < s1; s++)
        pad_planes(q->x + s * q->ci * q->h * q->w, q->ci, q->h, q->w, q->pt, q->pl, q->hp, q->wp,
                   q->dst + s * q->ci * q->hp * q->wp);
}

/* ---- grad_input ---- */

/* dx[ci][iy][ix] = sum over co, ky, kx of w[co][ci][ky][kx] dy[co][iy + pt - ky][ix + pl - kx]:
   for two dx rows at a time and each vector v of 8 dy positions along a dy row, the 5 sums
   T[r][kx] = sum over ky and co of w[co][ci][ky][kx] * (dy row iy_r + pt - ky), 10
   accumulators, each weight broadcast feeding both rows (w is copied per call as (ci, ky,
   co, kx), so that a task reads its weights in sequence: 2000 bytes apart in w, they took
   a line each); each dx row is
   then the sum of its T[kx] shifted by kx. Only the products that reach dx are computed (a
   padded full correlation of 8x8 dy planes would multiply 2.25 times as many zeros as
   values); at the plane's top and bottom edges a ky reaches one row of the pair only. */
typedef struct {
    const conv_geom *g;
    const float *dy, *wt, *bias;   /* wt: w as (ci, ky, co, kx), each task's weights in a row */
    float *dx;
} gi_job;

#define GI_FMA(kx)                                                                            \
    {                                                                                         \
        const __m256 wv = _mm256_broadcast_ss(wc + kx);                                       \
        t0##kx = _mm256_fmadd_ps(wv, d0, t0##kx), t1##kx = _mm256_fmadd_ps(wv, d1, t1##kx);   \
    }
#define GI_FMA1(r, kx) t##r##kx = _mm256_fmadd_ps(_mm256_broadcast_ss(wc + kx), d##r, t##r##kx);
AVX2 static void gi_items(int64_t t0, int64_t t1, void *arg) {
    const gi_job *q = arg;
    const conv_geom *g = q->g;
    const int64_t CI = g->c_in, CO = g->c_out, P = g->P, ow = g->ow;
    const int64_t nvr = ow / 8;
    float rb[2][GI_ROW_MAX + GI_KW - 1];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t s = t / CI, ci = t % CI;
        const float *dys = q->dy + s * CO * P;
        for (int64_t iy0 = 0; iy0 < g->h; iy0 += 2) {
            const bool two = iy0 + 1 < g->h;
            /* the ky whose dy row iy + pt - ky lies in [0, oh) for one of the rows */
            const int64_t ky0 = HL_MAX(0, iy0 + g->pt - (g->oh - 1)),
                          ky1 = HL_MIN(g->kh - 1, iy0 + (two ? 1 : 0) + g->pt);
            for (int r = 0; r < 2; r++) memset(rb[r], 0, (size_t)(ow + GI_KW - 1) * sizeof(float));
            for (int64_t v = 0; v < nvr; v++) {
                __m256 t00 = _mm256_setzero_ps(), t01 = t00, t02 = t00, t03 = t00, t04 = t00,
                       t10 = t00, t11 = t00, t12 = t00, t13 = t00, t14 = t00;
                for (int64_t ky = ky0; ky <= ky1; ky++) {
                    const float *wc = q->wt + (ci * g->kh + ky) * CO * GI_KW;
                    /* the dy rows of both dx rows, or of the one that this ky reaches (no
                       product with a row that is not there: an inf weight times it would
                       make NaN where im2col's and PyTorch's gradients have none) */
                    const int64_t oy0 = iy0 + g->pt - ky, oy1 = oy0 + 1;
                    const bool ok0 = oy0 >= 0 && oy0 < g->oh, ok1 = two && oy1 >= 0 && oy1 < g->oh;
                    const float *p0 = dys + (ok0 ? oy0 : 0) * ow + v * 8,
                                *p1 = dys + (ok1 ? oy1 : 0) * ow + v * 8;
                    if (ok0 && ok1) {
                        for (int64_t co = 0; co < CO; co++) {
                            const __m256 d0 = _mm256_loadu_ps(p0), d1 = _mm256_loadu_ps(p1);
                            GI_FMA(0) GI_FMA(1) GI_FMA(2) GI_FMA(3) GI_FMA(4)
                            p0 += P, p1 += P, wc += GI_KW;
                        }
                    } else if (ok0) {
                        for (int64_t co = 0; co < CO; co++) {
                            const __m256 d0 = _mm256_loadu_ps(p0);
                            GI_FMA1(0, 0) GI_FMA1(0, 1) GI_FMA1(0, 2) GI_FMA1(0, 3) GI_FMA1(0, 4)
                            p0 += P, wc += GI_KW;
                        }
                    } else if (ok1) {
                        for (int64_t co = 0; co < CO; co++) {
                            const __m256 d1 = _mm256_loadu_ps(p1);
                            GI_FMA1(1, 0) GI_FMA1(1, 1) GI_FMA1(1, 2) GI_FMA1(1, 3) GI_FMA1(1, 4)
                            p1 += P, wc += GI_KW;
                        }
                    }
                }
                /* the shifted sum position by position: vectors added into the row at
                   offsets kx and kx + 1 would each wait for the previous store */
                float tb[2][GI_KW][8] __attribute__((aligned(32)));
                const __m256 tt[2][GI_KW] = {{t00, t01, t02, t03, t04},
                                             {t10, t11, t12, t13, t14}};
                for (int r = 0; r < 2; r++)
                    for (int kx = 0; kx < GI_KW; kx++) _mm256_store_ps(tb[r][kx], tt[r][kx]);
                for (int r = 0; r < 2; r++) {
                    float *x = rb[r] + v * 8;
                    for (int j = 0; j < 8 + GI_KW - 1; j++) {
                        float a = x[j];
                        for (int kx = j < 8 ? 0 : j - 7; kx <= HL_MIN(j, GI_KW - 1); kx++)
                            a += tb[r][kx][j - kx];
                        x[j] = a;
                    }
                }
            }
            /* dx column ix is row buffer entry ix + pl */
            const float b = q->bias ? q->bias[ci] : 0.0f;
            for (int r = 0; r < (two ? 2 : 1); r++) {
                float *d = q->dx + ((s * CI + ci) * g->h + iy0 + r) * g->w;
                for (int64_t ix = 0; ix < g->w; ix++) d[ix] = rb[r][ix + g->pl] + b;
            }
        }
    }
}
#undef GI_FMA
#undef GI_FMA1

#endif /* HL_CONV_HAVE_X86 */

/* How many times each pass (0 forward, 1 grad_input, 2 grad_weight) ran here: for tests, which
   cannot always tell by the bits (an im2col product may sum in the same order; OpenBLAS's
   AVX-512 kernel does for the forward pass). */
static int64_t runs[3];

int64_t hl_conv_direct_runs(int pass) {
    return pass >= 0 && pass < 3 ? __atomic_load_n(&runs[pass], __ATOMIC_RELAXED) : -1;
}

hl_status hl_conv_direct_forward(const conv_geom *g, const float *x, const float *w,
                                 const float *bias, const conv_epilogue *epi, float *y) {
#if HL_CONV_HAVE_X86
    __atomic_add_fetch(&runs[0], 1, __ATOMIC_RELAXED);
    const int64_t hp = g->oh + g->kh - 1, wp = g->ow + g->kw - 1;
    direct_job q = {.n = g->n, .ci = g->c_in, .co = g->c_out, .oh = g->oh, .ow = g->ow,
                    .kh = g->kh, .kw = g->kw, .hp = hp, .wp = wp, .x = x, .src_h = g->h,
                    .src_w = g->w, .top = g->pt, .left = g->pl, .bias = bias, .epi = epi,
                    .y = y};
    q.copy = !(g->pt == 0 && g->pl == 0 && g->h == hp && g->w == wp);
    const int64_t K = g->c_in * g->kh * g->kw;
    scratch sp, sb = {NULL};
    q.panels = (q.co + DMR - 1) / DMR;
    const int threads = hl_pool_threads();
    q.pchunks = q.n >= 4 * (int64_t)threads ? 1 : q.panels;
    float *packed, *pad = NULL;
    hl_status st = scratch_get("conv", &sp, (size_t)(q.panels * K * DMR) * sizeof(float),
                               (void **)&packed);
    if (st) return st;
    if (q.copy && (st = scratch_get("conv", &sb,
                                    (size_t)(threads * q.ci * hp * wp) * sizeof(float),
                                    (void **)&pad))) {
        scratch_put(&sp);
        return st;
    }
    pack_weights(w, g->c_out, K, packed);
    q.packed = packed, q.pad = pad;
    const int64_t tasks = q.n * q.pchunks;
    const double flops = 2.0 * (double)K * (double)g->P * (double)q.co * (double)q.n;
    hl_parallel_for(tasks, flops > 1e6 ? 1 : tasks, fwd_items, &q);
    scratch_put(&sp);
    scratch_put(&sb);
    return HL_OK;
#else
    (void)g, (void)x, (void)w, (void)bias, (void)epi, (void)y;
    return hl_fail(HL_ERR_INTERNAL, "conv: the direct kernel needs AVX2");
#endif
}

/* dw = the correlation of x (zero-padded) with dy, summed over the samples; see the top. */
hl_status hl_conv_direct_grad_weight(const conv_geom *g, const float *dy, const float *x,
                                     float *dw) {
#if HL_CONV_HAVE_X86
    __atomic_add_fetch(&runs[2], 1, __ATOMIC_RELAXED);
    const int64_t hp = g->oh + g->kh - 1, wp = g->ow + g->kw - 1, P = g->P;
    const bool copy = !(g->pt == 0 && g->pl == 0 && g->h == hp && g->w == wp);
    gw_job q = {.ci = g->c_in, .co = g->c_out, .ow = g->ow, .oh = g->oh, .kh = g->kh,
                .kw = g->kw, .hp = hp, .wp = wp, .K = g->K, .P = P, .x_step = g->c_in * hp * wp,
                .dw = dw};
    const int64_t per_sample = (q.x_step + g->c_out * P) * (int64_t)sizeof(float);
    int64_t m = HL_MAX(1, GW_BLOCK_BYTES / per_sample);
    const int64_t blocks = (g->n + m - 1) / m;
    m = (g->n + blocks - 1) / blocks;   /* even blocks */
    scratch sb = {NULL};
    float *buf = NULL;
    if (copy) {
        hl_status st = scratch_get("conv_grad_weight", &sb,
                                   (size_t)(m * q.x_step) * sizeof(float), (void **)&buf);
        if (st) return st;
    }
    q.tblocks = (g->K + DGT - 1) / DGT;
    const int64_t tasks = (g->c_out + DGC - 1) / DGC * q.tblocks;
    for (int64_t s0 = 0; s0 < g->n; s0 += m) {
        q.m = HL_MIN(m, g->n - s0);
        q.first = s0 == 0;
        q.dy = dy + s0 * g->c_out * P;
        if (copy) {
            gw_pad_job pj = {x + s0 * g->c_in * g->h * g->w, buf, g->c_in, g->h, g->w, g->pt,
                             g->pl, hp, wp};
            hl_parallel_for(q.m, q.m * q.x_step > 32768 ? 1 : q.m, gw_pad_items, &pj);
            q.x = buf;
        } else {
            q.x = x + s0 * q.x_step;
        }
        const double flops = 2.0 * (double)(q.m * P) * (double)(g->K * g->c_out);
        hl_parallel_for(tasks, flops > 1e6 ? 1 : tasks, gw_items, &q);
    }
    scratch_put(&sb);
    return HL_OK;
#else
    (void)g, (void)dy, (void)x, (void)dw;
    return hl_fail(HL_ERR_INTERNAL, "conv_grad_weight: the direct kernel needs AVX2");
#endif
}

hl_status hl_conv_direct_grad_input(const conv_geom *g, const float *dy, const float *w,
                                    const float *bias, float *dx) {
#if HL_CONV_HAVE_X86
    __atomic_add_fetch(&runs[1], 1, __ATOMIC_RELAXED);
    const int64_t CI = g->c_in, CO = g->c_out, kh = g->kh;
    scratch sw;
    float *wt;
    hl_status st = scratch_get("conv_grad_input", &sw,
                               (size_t)(CI * kh * CO * GI_KW) * sizeof(float), (void **)&wt);
    if (st) return st;
    for (int64_t ci = 0; ci < CI; ci++)
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t co = 0; co < CO; co++)
                memcpy(wt + ((ci * kh + ky) * CO + co) * GI_KW,
                       w + ((co * CI + ci) * kh + ky) * GI_KW, GI_KW * sizeof(float));
    gi_job q = {g, dy, wt, bias, dx};
    const int64_t tasks = g->n * g->c_in;
    const double flops = 2.0 * (double)(g->K * g->P) * (double)(g->c_out * g->n);
    hl_parallel_for(tasks, flops > 1e6 ? 1 : tasks, gi_items, &q);
    scratch_put(&sw);
    return HL_OK;
#else
    (void)g, (void)dy, (void)w, (void)bias, (void)dx;
    return hl_fail(HL_ERR_INTERNAL, "conv_grad_input: the direct kernel needs AVX2");
#endif
}
