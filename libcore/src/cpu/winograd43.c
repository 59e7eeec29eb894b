/*
 * winograd43.c - 3x3, stride-1 float32 convolutions by Winograd's F(4x4, 3x3), for inference
 * against kernels transformed once (conv_pack's HL_CONV_PACK_WINOGRAD43 layout).
 *
 * A 4x4 block of outputs (a tile) comes from a 6x6 patch d of the input (patches step by 4)
 * and the 3x3 kernel g:
 *     Y = A^T [ (G g G^T) . (B^T d B) ] A
 * 36 products per tile, 2.25 per output, where F(2x2, 3x3) (winograd.c) takes 16 per 2x2
 * tile, 4 per output: 1.78 times fewer in the part that dominates, the 36 products
 *     M[e] (C_out x tiles) = U[e] (C_out x C_in) @ V[e] (C_in x tiles)
 * that winograd_product.c runs as it does F(2x2, 3x3)'s 16. The matrices are those of the
 * Toom-Cook construction over the points 0, 1, -1, 2, -2 and infinity: with
 * M(x) = x (x - 1)(x + 1)(x - 2)(x + 2),
 *     A^T  row i: p^i at each finite point p, and 1 at infinity in the last row only;
 *     G    row p: (1, p, p^2) / prod_{q != p} (p - q), and (0, 0, 1) at infinity;
 *     B^T  row p: the coefficients of M(x) / (x - p), and of M(x) itself at infinity:
 *     A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 *     B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
 *            0 4 0 -5 0 1]
 * (tests/ops/test_winograd43.py checks the 1-D identity in float64 from these same rules).
 * G g G^T is packed_layouts.h's (both backends pack it).
 *
 * Precision. The transforms mix values with weights up to 8 (A^T) and 5 (B^T), and G's
 * 1/6 and 1/24 are rounded, so the products' rounding is amplified more than F(2x2, 3x3)'s:
 * on N(0, 1) data and weights the largest error relative to the output's largest magnitude
 * was 2.5e-6 to 1.6e-5, 10 to 25 times F(2x2, 3x3)'s (docs/design-notes.md has the figures;
 * tests/ops/test_winograd43.py bounds it at 4e-5). A lone large weight costs more too, so
 * conv_pack admits kernels here within HL_WINOGRAD43_OUTLIER_RATIO (packed_layouts.h) of
 * their root mean square, half F(2x2, 3x3)'s ratio; kernels it refuses are packed as NaN and
 * hl.onnx keeps F(2x2, 3x3) for them. (Other points would round less: a float32 simulation
 * with 0, +-1, 1/2, -2 gave about half the error, +-1/2 for +-2 none less; not done.)
 *
 * Each output is summed by one thread in a fixed order (the transforms run per channel, the
 * products per (entry, strip) pair): any thread count gives the same bits.
 */
#include <math.h>

#include "../core.h"
#include "conv.h"
#include "conv_avx512.h"   /* hl_cpu_avx512, hl_conv_mask16 */
#include "parallel.h"
#include "../packed_layouts.h"
#include "winograd_tiles.h"

#define T float
#define SFX f32
#include "conv_epilogue_impl.h"
#undef T
#undef SFX

enum { NR = HL_WINOGRAD_NR, ENTRIES = 36 };
/* Work below this many elements runs on one thread. */
enum { PAR_MIN = 32768 };
/* Tiles per block: whole strips, the block's transformed input and output near BLOCK_BYTES
   (read from L2 by the products and the output transform), at least MIN_TILES, more where U
   is large (every block reads all of U again). winograd.c's packed path chose these sizes. */
enum { BLOCK_BYTES = 1 << 20, MIN_TILES = 32, MIN_TILES_LARGE_U = 128 };

static int64_t block_tiles(const wgeom *g) {
    const int64_t per_tile = ENTRIES * (g->c_in + g->c_out) * (int64_t)sizeof(float);
    const int64_t u_bytes = ENTRIES * g->c_in * g->c_out * (int64_t)sizeof(float);
    const int64_t most = HL_MAX(BLOCK_BYTES / per_tile,
                                u_bytes > BLOCK_BYTES ? MIN_TILES_LARGE_U : MIN_TILES);
    return HL_MAX(most / NR * NR, NR);
}

/* ---- the kernels, once ------------------------------------------------------------------- */

typedef struct {
    const float *w;
    float *U;
    int64_t c_out, c_in;
} pack_job;

static void pack_rows(int64_t c0, int64_t c1, void *arg) {
    const pack_job *q = arg;
    const int64_t us = q->c_out * q->c_in;
    for (int64_t co = c0; co < c1; co++)
        for (int64_t ci = 0; ci < q->c_in; ci++)
            hl_winograd43_weight_tile(q->w + (co * q->c_in + ci) * 9,
                                      q->U + hl_winograd_packed_at(co, ci, q->c_out, q->c_in),
                                      us);
}

void hl_winograd43_pack(const float *w, int64_t c_out, int64_t c_in, float *U) {
    const int64_t us = c_out * c_in;
    if (!hl_winograd_weights_judged(w, us * 9, hl_winograd43_admits)) {
        for (int64_t i = 0; i < ENTRIES * us; i++) U[i] = NAN;
        return;
    }
    const pack_job q = {w, U, c_out, c_in};
    hl_parallel_for(c_out, us * ENTRIES > PAR_MIN ? 1 : c_out, pack_rows, (void *)&q);
}

/* ---- the input transform ----------------------------------------------------------------- */

/* Row iy of the input, columns ix0 = 4 tx0 - pl onwards, split into its four phases:
   ph[k * L + j] = x[iy][ix0 + 4 j + k] for j < L = len + 1 (zero outside the plane), so that
   tile j reads ph0[j], ph1[j], ph2[j], ph3[j], ph0[j + 1], ph1[j + 1] with unit stride. */
HL_CLONES
static void split_row(const float *plane, const wgeom *g, int64_t iy, int64_t tx0, int64_t len,
                      float *restrict ph) {
    const int64_t L = len + 1, W = g->w, ix0 = 4 * tx0 - g->pl;
    if (iy < 0 || iy >= g->h) {
        for (int64_t j = 0; j < 4 * L; j++) ph[j] = 0;
        return;
    }
    const float *row = plane + iy * W;
    /* j in [lo, hi): all four columns ix0 + 4 j .. ix0 + 4 j + 3 inside the row */
    int64_t lo = ix0 >= 0 ? 0 : (-ix0 + 3) / 4;
    int64_t hi = W - ix0 < 4 ? 0 : (W - ix0 - 4) / 4 + 1;
    lo = HL_MIN(lo, L);
    hi = HL_MAX(HL_MIN(hi, L), lo);
    float *restrict q0 = ph, *restrict q1 = ph + L, *restrict q2 = ph + 2 * L;
    float *restrict q3 = ph + 3 * L;
    for (int64_t j = 0; j < lo; j++) {
        const int64_t a = ix0 + 4 * j;
        q0[j] = column(row, W, a), q1[j] = column(row, W, a + 1);
        q2[j] = column(row, W, a + 2), q3[j] = column(row, W, a + 3);
    }
    /* one pass, four values in a row to four phases: vectorised as a de-interleave (four
       passes at stride 4 took as long as the rest of the input transform) */
    const float *restrict src = row + ix0;
    for (int64_t j = lo; j < hi; j++) {
        q0[j] = src[4 * j], q1[j] = src[4 * j + 1];
        q2[j] = src[4 * j + 2], q3[j] = src[4 * j + 3];
    }
    for (int64_t j = hi; j < L; j++) {
        const int64_t a = ix0 + 4 * j;
        q0[j] = column(row, W, a), q1[j] = column(row, W, a + 1);
        q2[j] = column(row, W, a + 2), q3[j] = column(row, W, a + 3);
    }
}

/* u = B^T d for the six values d0..d5 of one line of a patch (rows or columns alike). */
#define HL_BT(d0, d1, d2, d3, d4, d5, u0, u1, u2, u3, u4, u5)                                \
    do {                                                                                     \
        typedef __typeof__((d0) + 0.0f) bt_t_;  /* float, or a vector of them */            \
        const bt_t_ a_ = (d4) - 4.0f * (d2), b_ = (d3) - 4.0f * (d1);                        \
        const bt_t_ c_ = (d4) - (d2), e_ = 2.0f * ((d3) - (d1));                             \
        u0 = 4.0f * (d0) - 5.0f * (d2) + (d4);                                               \
        u1 = a_ + b_;                                                                        \
        u2 = a_ - b_;                                                                        \
        u3 = c_ + e_;                                                                        \
        u4 = c_ - e_;                                                                        \
        u5 = 4.0f * (d1) - 5.0f * (d3) + (d5);                                               \
    } while (0)

/* u_i = (B^T d)_i for n lines at once, line j's six values d0[j]..d5[j]: one function with
   every stream a restrict parameter, so that the loop is vectorised (with the streams rs or
   vs apart in the callers' arrays GCC could not tell that they do not overlap, and left
   input_rows and input_columns scalar in every clone: a fifth of ResNet-18's 56x56 layers). */
HL_CLONES
static void bt_lines(const float *restrict d0, const float *restrict d1,
                     const float *restrict d2, const float *restrict d3,
                     const float *restrict d4, const float *restrict d5, float *restrict u0,
                     float *restrict u1, float *restrict u2, float *restrict u3,
                     float *restrict u4, float *restrict u5, int64_t n) {
    for (int64_t j = 0; j < n; j++)
        HL_BT(d0[j], d1[j], d2[j], d3[j], d4[j], d5[j], u0[j], u1[j], u2[j], u3[j], u4[j],
              u5[j]);
}

#if HL_HAVE_AVX512_KERNELS
/* bt_lines sixteen lines a step, the last step's loads masked to the n lines there are and its
   stores to the n_out >= n lines wanted: lines [n, n_out) get B^T of zeros, zeros. The same
   operations in the same order on each lane (HL_BT on vectors; no contraction into FMAs,
   flags.mk), so the same bits as bt_lines. Rows of tiles are 2-14 long at ResNet-18's
   sizes, and a 16-lane loop left them to the scalar remainder: 7% of its batch-1 time. */
HL_AVX512_TARGET static void bt_lines512(const float *d0, const float *d1, const float *d2,
                                         const float *d3, const float *d4, const float *d5,
                                         float *u0, float *u1, float *u2, float *u3, float *u4,
                                         float *u5, int64_t n, int64_t n_out) {
    for (int64_t j = 0; j < n_out; j += 16) {
        const __mmask16 in = hl_conv_mask16(n - j), out = hl_conv_mask16(n_out - j);
        const __m512 a0 = _mm512_maskz_loadu_ps(in, d0 + j), a1 = _mm512_maskz_loadu_ps(in, d1 + j),
                     a2 = _mm512_maskz_loadu_ps(in, d2 + j), a3 = _mm512_maskz_loadu_ps(in, d3 + j),
                     a4 = _mm512_maskz_loadu_ps(in, d4 + j), a5 = _mm512_maskz_loadu_ps(in, d5 + j);
        __m512 v0, v1, v2, v3, v4, v5;
        HL_BT(a0, a1, a2, a3, a4, a5, v0, v1, v2, v3, v4, v5);
        _mm512_mask_storeu_ps(u0 + j, out, v0);
        _mm512_mask_storeu_ps(u1 + j, out, v1);
        _mm512_mask_storeu_ps(u2 + j, out, v2);
        _mm512_mask_storeu_ps(u3 + j, out, v3);
        _mm512_mask_storeu_ps(u4 + j, out, v4);
        _mm512_mask_storeu_ps(u5 + j, out, v5);
    }
}
#endif

/* B^T for n lines into n_out >= n (lines past n: zeros), on the AVX-512 kernel where the CPU
   has it (avx512), else bt_lines and zeros. */
static void bt_run(bool avx512, const float *d0, const float *d1, const float *d2,
                   const float *d3, const float *d4, const float *d5, float *u0, float *u1,
                   float *u2, float *u3, float *u4, float *u5, int64_t n, int64_t n_out) {
#if HL_HAVE_AVX512_KERNELS
    if (avx512) {
        bt_lines512(d0, d1, d2, d3, d4, d5, u0, u1, u2, u3, u4, u5, n, n_out);
        return;
    }
#endif
    (void)avx512;
    bt_lines(d0, d1, d2, d3, d4, d5, u0, u1, u2, u3, u4, u5, n);
    float *u[6] = {u0, u1, u2, u3, u4, u5};
    for (int i = 0; i < 6; i++)
        for (int64_t j = n; j < n_out; j++) u[i][j] = 0;
}

/* The row halves d B of a run's six split rows (ph: six rows of 4 L phases) for its len
   tiles: r[(row * 6 + i) * rs + j], rs apart (the block's tile count: the column halves then
   run over the whole block at once, in vectors a short run would not fill). */
static void input_rows(bool avx512, const float *restrict ph, int64_t len, float *restrict r,
                       int64_t rs) {
    const int64_t L = len + 1;
    for (int row = 0; row < 6; row++) {
        const float *p0 = ph + row * 4 * L, *p1 = p0 + L, *p2 = p1 + L, *p3 = p2 + L;
        float *o = r + row * 6 * rs;
        bt_run(avx512, p0, p1, p2, p3, p0 + 1, p1 + 1, o, o + rs, o + 2 * rs, o + 3 * rs,
               o + 4 * rs, o + 5 * rs, len, len);
    }
}

/* V = B^T (d B) for the block's tiles [j0, j1) (row halves r, rs apart): entry (i, k) of
   tile j to v[(i * 6 + k) * vs + j - j0], and zeros for j in [j1, j0 + NR) (a last strip's
   columns past the block's tiles). */
static void input_columns(bool avx512, const float *restrict r, int64_t rs, int64_t j0,
                          int64_t j1, float *restrict v, int64_t vs) {
    for (int k = 0; k < 6; k++) {
        const float *c0 = r + k * rs + j0, *c1 = c0 + 6 * rs, *c2 = c1 + 6 * rs;
        const float *c3 = c2 + 6 * rs, *c4 = c3 + 6 * rs, *c5 = c4 + 6 * rs;
        bt_run(avx512, c0, c1, c2, c3, c4, c5, v + k * vs, v + (6 + k) * vs,
               v + (12 + k) * vs, v + (18 + k) * vs, v + (24 + k) * vs, v + (30 + k) * vs,
               j1 - j0, NR);
    }
}
#undef HL_BT

/* What the loops over a block's channels hand to their chunks. */
typedef struct {
    const wgeom *g;
    const float *src, *bias;
    const conv_epilogue *epi;
    float *dst, *work;
    int64_t t0, count, es, work_per_thread, ldm;
} tile_block;

/* V[e] for the tiles [t0, t0 + count) of input channels [c0, c1), in strips of NR tiles:
   tile t of channel c at V[e * es + (t / NR) * C * NR + c * NR + t % NR], the last strip's
   columns past count zeros. */
static void input_channels(int64_t c0, int64_t c1, void *arg) {
    const tile_block *q = arg;
    const wgeom *g = q->g;
    const int64_t C = g->c_in, count = q->count, es = q->es;
    const bool avx512 = hl_cpu_avx512();
    float *ph = q->work + hl_thread_num() * q->work_per_thread;
    float *rows = ph + 24 * (g->tw + 1);
    for (int64_t c = c0; c < c1; c++) {
        RUNS(g, q->t0, count, u) {
            const float *plane = q->src + (u.n * C + c) * g->h * g->w;
            const int64_t L = u.len + 1;
            for (int r = 0; r < 6; r++)
                split_row(plane, g, 4 * u.ty + r - g->pt, u.tx0, u.len, ph + r * 4 * L);
            input_rows(avx512, ph, u.len, rows + u.off, count);
        }
        for (int64_t j = 0; j < count; j += NR)   /* the block's tiles, strip by strip */
            input_columns(avx512, rows, count, j, HL_MIN(count, j + NR),
                          q->dst + j / NR * C * NR + c * NR, es);
    }
}

/* ---- the output transform ---------------------------------------------------------------- */

/* y = A^T m for the six values m0..m5 of one line of a transformed tile. */
#define HL_AT(m0, m1, m2, m3, m4, m5, y0, y1, y2, y3)                                         \
    do {                                                                                     \
        typedef __typeof__((m0) + 0.0f) at_t_;  /* float, or a vector of them */            \
        const at_t_ p_ = (m1) + (m2), q_ = (m1) - (m2), r_ = (m3) + (m4), s_ = (m3) - (m4);  \
        y0 = (m0) + p_ + r_;                                                                 \
        y1 = q_ + 2.0f * s_;                                                                 \
        y2 = p_ + 4.0f * r_;                                                                 \
        y3 = q_ + 8.0f * s_ + (m5);                                                          \
    } while (0)

/* Y = A^T m A (+ b) for len tiles (the whole block), m[e] at m[e * ms + j]: first s = A^T m
   (four rows of six, s[(a * 6 + k) * len + j]), then y[(a * 4 + c) * len + j], output (a, c)
   of each tile. */
HL_CLONES
static void output_tiles(const float *restrict m, int64_t ms, int64_t len, float b,
                         float *restrict s, float *restrict y) {
    for (int k = 0; k < 6; k++)
        for (int64_t j = 0; j < len; j++)
            HL_AT(m[k * ms + j], m[(6 + k) * ms + j], m[(12 + k) * ms + j],
                  m[(18 + k) * ms + j], m[(24 + k) * ms + j], m[(30 + k) * ms + j],
                  s[k * len + j], s[(6 + k) * len + j], s[(12 + k) * len + j],
                  s[(18 + k) * len + j]);
    for (int a = 0; a < 4; a++) {
        const float *r = s + a * 6 * len;
        float *o = y + a * 4 * len;
        for (int64_t j = 0; j < len; j++) {
            float y0, y1, y2, y3;
            HL_AT(r[j], r[len + j], r[2 * len + j], r[3 * len + j], r[4 * len + j],
                  r[5 * len + j], y0, y1, y2, y3);
            o[j] = y0 + b;
            o[len + j] = y1 + b;
            o[2 * len + j] = y2 + b;
            o[3 * len + j] = y3 + b;
        }
    }
}

#if HL_HAVE_AVX512_KERNELS
/* output_tiles sixteen tiles a step (the last step's loads and stores masked to the tiles
   there are), s kept in registers: HL_AT on vectors, each lane the same operations in the same
   order, so the same bits. A block at ResNet-18's 7x7 and 14x14 layers has 4-16 tiles, which a
   16-lane loop left to the scalar remainder. */
HL_AVX512_TARGET static void output_tiles512(const float *m, int64_t ms, int64_t len, float b,
                                             float *y) {
    const __m512 bv = _mm512_set1_ps(b);
    for (int64_t j = 0; j < len; j += 16) {
        const __mmask16 in = hl_conv_mask16(len - j);
        __m512 sv[4][6];
        for (int k = 0; k < 6; k++) {
            const float *mk = m + k * ms + j;
            HL_AT(_mm512_maskz_loadu_ps(in, mk), _mm512_maskz_loadu_ps(in, mk + 6 * ms),
                  _mm512_maskz_loadu_ps(in, mk + 12 * ms), _mm512_maskz_loadu_ps(in, mk + 18 * ms),
                  _mm512_maskz_loadu_ps(in, mk + 24 * ms), _mm512_maskz_loadu_ps(in, mk + 30 * ms),
                  sv[0][k], sv[1][k], sv[2][k], sv[3][k]);
        }
        for (int a = 0; a < 4; a++) {
            __m512 y0, y1, y2, y3;
            HL_AT(sv[a][0], sv[a][1], sv[a][2], sv[a][3], sv[a][4], sv[a][5], y0, y1, y2, y3);
            float *o = y + a * 4 * len + j;
            _mm512_mask_storeu_ps(o, in, _mm512_add_ps(y0, bv));
            _mm512_mask_storeu_ps(o + len, in, _mm512_add_ps(y1, bv));
            _mm512_mask_storeu_ps(o + 2 * len, in, _mm512_add_ps(y2, bv));
            _mm512_mask_storeu_ps(o + 3 * len, in, _mm512_add_ps(y3, bv));
        }
    }
}
#endif
#undef HL_AT

/* The outputs of a run of len tiles (y from output_tiles, ys apart) into its rows of the
   plane, where they lie inside it, then through the fused epilogue while they are in cache:
   row by row, or where the run spans whole rows (they lie end to end) all of them in one
   call, which runs whole vectors where a row of 7, 14 or 28 left most in the remainder. */
HL_CLONES
static void output_store(const float *restrict y, int64_t ys, int64_t len, const wgeom *g,
                         int64_t ty, int64_t tx0, float *restrict plane,
                         const conv_epilogue *epi, const float *rplane) {
    const int64_t ox0 = 4 * tx0, width = HL_MIN(4 * len, g->ow - ox0), full = width / 4;
    const bool whole_rows = ox0 == 0 && width == g->ow;
    const int64_t first = 4 * ty * g->ow;   /* the run's first row, at ox0 == 0 */
    int rows = 0;
    for (int a = 0; a < 4; a++, rows++) {
        const int64_t oy = 4 * ty + a;
        if (oy >= g->oh) break;
        float *restrict out = plane + oy * g->ow + ox0;
        const float *y0 = y + a * 4 * ys, *y1 = y0 + ys, *y2 = y1 + ys, *y3 = y2 + ys;
        for (int64_t j = 0; j < full; j++) {   /* an interleave of four: vectorised */
            out[4 * j] = y0[j];
            out[4 * j + 1] = y1[j];
            out[4 * j + 2] = y2[j];
            out[4 * j + 3] = y3[j];
        }
        for (int64_t x = 4 * full; x < width; x++) out[x] = y0[(x & 3) * ys + full];
        if (epi && !whole_rows)
            conv_epilogue_run_f32(epi, out, rplane ? rplane + oy * g->ow + ox0 : NULL, width);
    }
    if (epi && whole_rows)
        conv_epilogue_run_f32(epi, plane + first, rplane ? rplane + first : NULL, rows * width);
}

static void output_channels(int64_t c0, int64_t c1, void *arg) {
    const tile_block *q = arg;
    const wgeom *g = q->g;
    const int64_t C = g->c_out;
    const int64_t count = q->count;
    float *s = q->work + hl_thread_num() * q->work_per_thread, *y = s + 24 * count;
    const bool avx512 = hl_cpu_avx512();
    for (int64_t co = c0; co < c1; co++) {
        const float b = q->bias ? q->bias[co] : 0;
#if HL_HAVE_AVX512_KERNELS
        if (avx512) output_tiles512(q->src + co * q->ldm, q->es, count, b, y);
        else
#endif
            output_tiles(q->src + co * q->ldm, q->es, count, b, s, y);
        RUNS(g, q->t0, count, u) {
            const int64_t plane = (u.n * C + co) * g->oh * g->ow;
            output_store(y + u.off, count, u.len, g, u.ty, u.tx0, q->dst + plane, q->epi,
                         q->epi && q->epi->res ? (const float *)q->epi->res + plane : NULL);
        }
    }
}

/* ---- the forward pass -------------------------------------------------------------------- */

/* Per-thread work floats for blocks of at most tb tiles: the input side's 6 split rows
   (4 (tw + 1) each) and 36 rows of tb transformed halves, or the output side's 24 + 16 rows
   of tb (more than the input side's where a block holds many runs). Whole cache lines. */
static int64_t work_floats(const wgeom *g, int64_t tb) {
    return (HL_MAX(24 * (g->tw + 1) + 36 * tb, 40 * tb) + 15) / 16 * 16;
}

/* Blocks of tiles that one thread takes through all three steps (see below): the block's V
   and M (its strips' 36 transformed inputs and outputs) stay in that core's L2. */
enum { THREAD_BLOCK_BYTES = 1 << 20, THREAD_U_MAX = 1 << 20 };

/* Whether a call's blocks go one thread each through all three steps, rather than each step
   split over the threads by channel or by (entry, strip). The step-by-step split hands V and
   M from core to core (the input transform writes a channel's 36 rows, the products read an
   entry's rows of every channel, the output transform an output channel's 36 rows): at two
   threads ResNet-18's 56x56 layers (batch 1) ran 1.37 times faster than at one, where its
   other layers ran 1.75-1.9 times faster. A thread taking whole blocks reads only its tiles'
   input rows (and U, which every thread reads, so only where U is small: 0.6 MB at 64
   channels) and writes only its tiles' outputs. Needs a few strips a thread to share. */
static bool blocks_per_thread(const wgeom *g, int threads) {
    const int64_t u_bytes = ENTRIES * g->c_in * g->c_out * (int64_t)sizeof(float);
    return threads > 1 && u_bytes <= THREAD_U_MAX && g->tiles >= 4 * (int64_t)threads * NR;
}

/* Tiles per block on that path for a call of `strips` strips: whole strips, V and M within
   THREAD_BLOCK_BYTES (beside U in L2: the products read U[e] from L2 once per block, so
   blocks of one strip read U three times as often as blocks of three, 10-20% of the block's
   time at 64 channels), and at least two blocks a thread. */
static int64_t thread_block_tiles(const wgeom *g, int64_t strips, int threads) {
    const int64_t per_strip = ENTRIES * (g->c_in + g->c_out) * NR * (int64_t)sizeof(float);
    const int64_t most = HL_MAX(1, THREAD_BLOCK_BYTES / per_strip);
    const int64_t blocks = HL_MAX(2 * (int64_t)threads, (strips + most - 1) / most);
    return (strips + blocks - 1) / blocks * NR;
}

/* What each block on that path needs: the call, and each thread's V, M and work. */
typedef struct {
    const wgeom *g;
    const float *x, *U, *bias;
    const conv_epilogue *epi;
    float *y, *buffers;
    int64_t tiles, tb, vs, ms, per_thread;
} thread_blocks;

/* Blocks [b0, b1): the input transform, the products and the output transform of each, in
   this thread's buffers (the steps' loops run inline: this is a chunk of the pool's). The
   same sums in the same order as the split steps: the same bits. */
static void run_blocks(int64_t b0, int64_t b1, void *arg) {
    const thread_blocks *q = arg;
    const wgeom *g = q->g;
    float *V = q->buffers + hl_thread_num() * q->per_thread;
    float *M = V + ENTRIES * q->vs, *work = M + ENTRIES * q->ms;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t t0 = b * q->tb, count = HL_MIN(q->tb, q->tiles - t0);
        const int64_t strips = (count + NR - 1) / NR;
        const tile_block in = {.g = g, .src = q->x, .dst = V, .work = work, .t0 = t0,
                               .count = count, .es = q->vs};
        input_channels(0, g->c_in, (void *)&in);
        hl_winograd_product(q->U, ENTRIES, g->c_out, g->c_in, V, q->vs, strips, M, q->ms,
                            strips * NR);
        const tile_block out = {.g = g, .src = M, .bias = q->bias, .epi = q->epi,
                                .dst = q->y, .work = work, .t0 = t0, .count = count,
                                .es = q->ms, .ldm = strips * NR};
        output_channels(0, g->c_out, (void *)&out);
    }
}

hl_status hl_winograd43_forward_packed(const conv_geom *cg, const float *x, const float *U,
                                       const float *bias, const conv_epilogue *epi, float *y) {
    const wgeom g = wgeom_tiled(cg->n, cg->c_in, cg->h, cg->w, cg->c_out, cg->oh, cg->ow,
                                cg->pt, cg->pl, 4);
    const int threads = hl_pool_threads();
    hl_status st;
    scratch s;
    if (blocks_per_thread(&g, threads)) {
        /* (ResNet-18's 56x56 layers at batch 1: 13 strips, the last of 4 tiles, in blocks of
           3, 3, 3, 2 and 2: 7 strips' products on one thread against 6.5 even; running the
           last strip step by step instead cost as much in its transforms on one thread) */
        const int64_t tb = thread_block_tiles(&g, (g.tiles + NR - 1) / NR, threads);
        const int64_t vs = entry_stride(g.c_in * tb), ms = entry_stride(g.c_out * tb);
        const int64_t per_thread = ENTRIES * (vs + ms) + work_floats(&g, tb);
        float *buffers = scratch_floats("conv", &s, per_thread * threads, &st);
        if (st) return st;
        const thread_blocks q = {&g, x, U, bias, epi, y, buffers, g.tiles, tb, vs, ms,
                                 per_thread};
        hl_parallel_for((g.tiles + tb - 1) / tb, 1, run_blocks, (void *)&q);
        scratch_put(&s);
        return HL_OK;
    }
    const int64_t tb = block_tiles(&g), wpt = work_floats(&g, tb);
    const int64_t width = HL_MIN(tb, (g.tiles + NR - 1) / NR * NR);
    const int64_t vs = entry_stride(g.c_in * width), ms = entry_stride(g.c_out * width);
    float *V = scratch_floats("conv", &s, ENTRIES * (vs + ms) + wpt * threads, &st);
    if (st) return st;
    float *M = V + ENTRIES * vs, *work = M + ENTRIES * ms;
    for (int64_t t0 = 0; t0 < g.tiles; t0 += tb) {
        const int64_t count = HL_MIN(tb, g.tiles - t0), strips = (count + NR - 1) / NR;
        const tile_block in = {.g = &g, .src = x, .dst = V, .work = work, .t0 = t0,
                               .count = count, .es = vs, .work_per_thread = wpt};
        hl_parallel_for(g.c_in, g.c_in * count * ENTRIES > PAR_MIN ? 1 : g.c_in,
                        input_channels, (void *)&in);
        hl_winograd_product(U, ENTRIES, g.c_out, g.c_in, V, vs, strips, M, ms, strips * NR);
        const tile_block out = {.g = &g, .src = M, .bias = bias, .epi = epi, .dst = y,
                                .work = work, .t0 = t0, .count = count, .es = ms,
                                .work_per_thread = wpt, .ldm = strips * NR};
        hl_parallel_for(g.c_out, g.c_out * count * ENTRIES > PAR_MIN ? 1 : g.c_out,
                        output_channels, (void *)&out);
    }
    scratch_put(&s);
    return HL_OK;
}
