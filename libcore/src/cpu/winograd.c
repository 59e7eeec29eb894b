/*
 * winograd.c - 3x3, stride-1 float32 convolutions by Winograd's minimal filtering F(2x2, 3x3)
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015). Inference on
 * kernels packed once may take F(4x4, 3x3) instead (winograd43.c; hl.onnx chooses per layer).
 *
 * A 2x2 block of outputs (a tile) comes from a 4x4 patch d of the input and the 3x3 kernel g:
 *     Y = A^T [ (G g G^T) . (B^T d B) ] A          (. is element-wise: 16 products, not 36)
 * Summed over input channels, the element-wise products become 16 independent matrix
 * products, one per entry e of the transformed 4x4 tile, which OpenBLAS runs in one batched
 * call (faster than 16 calls: it spreads whole products over the threads):
 *     M[e] (C_out x tiles) = U[e] (C_out x C_in) @ V[e] (C_in x tiles)
 * The three passes of training each take this form:
 *   forward      U from w, V from x, Y from M (plus the bias)
 *   grad_input   the same convolution of dy with w rotated by 180 degrees and its two channel
 *                axes swapped, padded by 2 - pad (a transposed convolution)
 *   grad_weight  dW = G^T [ (A dy A^T) . (B^T d B) ] G summed over tiles (the forward
 *                identity transposed): 16 products DY[e] (C_out x tiles) @ V[e]^T whose inner
 *                dimension is the tiles, then a 4x4 -> 3x3 transform per (c_out, c_in)
 * Tiles go in blocks whose transformed data stays a few MiB. Results differ from im2col's by
 * rounding only (the sums are ordered differently); float64, which the gradient checks use,
 * keeps im2col. HL_WINOGRAD=0 in the environment turns this path off, for comparisons;
 * HL_WINOGRAD=1 takes it for forward calls with few tiles too (hl_winograd_pays_forward).
 *
 * Precision. The transforms add and subtract the taps of a kernel (U = G g G^T mixes all 9)
 * and the products are taken back apart by A^T . A; what cancels there is rounded at the
 * scale of the largest tap. im2col multiplies each tap by its own input only. So one large
 * weight that meets only zeros (its exact contribution is 0) still leaves an error of about
 * 2^-24 times that weight times the inputs next to it: one weight of 1e3 among N(0, 1)
 * weights made a relative error of 1e-5 to 2e-4, 1e6 made 0.01 to 0.44, 1e30 made the output
 * garbage. hl_winograd_weights_ok therefore admits a kernel to this path only when its
 * weights are finite and none exceeds HL_WINOGRAD_OUTLIER_RATIO (packed_layouts.h) times their root mean square; otherwise
 * the call takes im2col. A well-scaled layer's largest weight is 4 to 12 RMS (Gaussian and
 * heavy-tailed trained weights alike), where the error stays within a few float32 roundings
 * of the output scale (tests/ops/test_winograd_precision.py); a single outlier beyond the
 * ratio costs the layer its speed-up, never its accuracy. The check reads the weights once
 * (0.1% of a ResNet layer's time). grad_weight multiplies data by data and keeps this path.
 */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "../core.h"
#include "conv.h"
#include "parallel.h"
#include "../packed_layouts.h"
#include "winograd_tiles.h"

#define T float
#define SFX f32
#include "conv_epilogue_impl.h"
#undef T
#undef SFX

/* Below this many channels on either side the products are too thin to gain. */
enum { MIN_CHANNELS = 16 };
/* Tiles per strip of the packed path's transformed input (winograd_product.c). */
enum { NR = HL_WINOGRAD_NR };
/* A forward pass transforms all C_out x C_in kernels (16 values each) every call, a cost
   that only many tiles repay: ResNet-18's 512-channel 7x7 layers at batch 1 (16 tiles) took
   8.0 ms by Winograd and 4.7 ms by im2col + sgemm, its 256-channel 14x14 ones (49 tiles)
   3.4 ms either way, one thread (docs/performance.md, onnx_infer). With kernels transformed
   once (hl_winograd_pack) the products read them as they are (winograd_product.c), and from
   HL_WINOGRAD_PACKED_MIN_TILES (hl_core.h) that beats im2col: the 7x7 layer 2.0 against
   3.9 ms, one thread, weights in cache. */
enum { MIN_FORWARD_TILES = 32 };
/* A block of tiles: its transformed input and output side near BLOCK_BYTES, and at least
   MIN_BLOCK_TILES tiles (the products of wide layers are slow below that). Within those
   bounds the size hardly shows: ResNet-18 training steps took the same time, within the
   noise, with blocks of 1.5 to 8 MiB. */
enum { BLOCK_BYTES = 4 << 20, MIN_BLOCK_TILES = 128 };
/* Work below this many elements runs on one thread. */
enum { PAR_MIN = 32768 };
/* The most floats one of the 16 transformed matrices may span: BLAS's 32-bit indices must
   reach all 16. */
#define INDEX_MAX ((int64_t)INT32_MAX / 16)

/* F(2x2, 3x3)'s tiles: 2 x 2 outputs each. */
static wgeom wgeom_make(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                        int64_t oh, int64_t ow, int64_t pt, int64_t pl) {
    return wgeom_tiled(n, c_in, h, w, c_out, oh, ow, pt, pl, 2);
}

bool hl_winograd_fits(const conv_geom *g) {
    if (g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 ||
        g->groups != 1)
        return false;
    if (g->c_in < MIN_CHANNELS || g->c_out < MIN_CHANNELS) return false;
    /* OpenBLAS takes 32-bit sizes: all 16 transformed kernels must be indexable with them. */
    if (g->c_in > (INDEX_MAX - 2048) / g->c_out) return false;
    if (g->n == 0 || g->oh == 0 || g->ow == 0 || g->h == 0 || g->w == 0) return false;
    const char *env = getenv("HL_WINOGRAD");
    return !(env && env[0] == '0' && env[1] == '\0');
}

bool hl_winograd_pays_forward(const conv_geom *g, bool packed) {
    const int64_t tiles = g->n * ((g->oh + 1) / 2) * ((g->ow + 1) / 2);
    const char *env = getenv("HL_WINOGRAD");  /* 1: wherever it fits, for tests */
    return tiles >= (packed ? HL_WINOGRAD_PACKED_MIN_TILES : MIN_FORWARD_TILES) ||
           (env && env[0] == '1' && env[1] == '\0');
}

/* ---- the transforms of one tile -------------------------------------------------------- */

/* ---- blocks of tiles --------------------------------------------------------------------- */

/* Row r of a run's input, columns 2 tx0 - pl onwards, split into even and odd columns
   (len + 1 each; zero outside the plane), so the tile loop reads with unit stride. */
HL_CLONES
static void split_row(const float *plane, const wgeom *g, int64_t iy, int64_t tx0, int64_t len,
                      float *ev, float *od) {
    const int64_t L = len + 1;
    if (iy < 0 || iy >= g->h) {
        for (int64_t j = 0; j < L; j++) ev[j] = od[j] = 0;
        return;
    }
    const float *row = plane + iy * g->w;
    const int64_t ix0 = 2 * tx0 - g->pl, W = g->w;
    /* j in [lo, hi): both columns ix0 + 2j and ix0 + 2j + 1 inside the row */
    int64_t lo = ix0 >= 0 ? 0 : (-ix0 + 1) / 2;
    int64_t hi = W - 1 - ix0 <= 0 ? 0 : (W - 1 - ix0 + 1) / 2;
    lo = HL_MIN(lo, L);
    hi = HL_MAX(HL_MIN(hi, L), lo);
    for (int64_t j = 0; j < lo; j++) {
        ev[j] = column(row, W, ix0 + 2 * j);
        od[j] = column(row, W, ix0 + 2 * j + 1);
    }
    const float *src = row + ix0;
    for (int64_t j = lo; j < hi; j++) {
        ev[j] = src[2 * j];
        od[j] = src[2 * j + 1];
    }
    for (int64_t j = hi; j < L; j++) {
        ev[j] = column(row, W, ix0 + 2 * j);
        od[j] = column(row, W, ix0 + 2 * j + 1);
    }
}

/* V = B^T d B for the tiles [j0, j1) of a run of len tiles from the split rows (B^T =
   [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]); entry e of tile j goes to v[e * vs + j - j0]. */
HL_CLONES
static void input_run(const float *restrict rows, int64_t len, int64_t j0, int64_t j1,
                      float *restrict v, int64_t vs) {
    const int64_t L = len + 1;
    v -= j0;
    const float *restrict e0 = rows, *restrict o0 = rows + L;
    const float *restrict e1 = rows + 2 * L, *restrict o1 = rows + 3 * L;
    const float *restrict e2 = rows + 4 * L, *restrict o2 = rows + 5 * L;
    const float *restrict e3 = rows + 6 * L, *restrict o3 = rows + 7 * L;
    /* row r of d is (e_r[j], o_r[j], e_r[j + 1], o_r[j + 1]); u_r = d_r B, then B^T u */
#define HL_ROW(r, e, o)                                                                      \
    const float u##r##0 = e[j] - e[j + 1], u##r##1 = o[j] + e[j + 1];                        \
    const float u##r##2 = e[j + 1] - o[j], u##r##3 = o[j] - o[j + 1];
#define HL_COL(c)                                                                            \
    v[(0 + c) * vs + j] = u0##c - u2##c;                                                     \
    v[(4 + c) * vs + j] = u1##c + u2##c;                                                     \
    v[(8 + c) * vs + j] = u2##c - u1##c;                                                     \
    v[(12 + c) * vs + j] = u1##c - u3##c;
    for (int64_t j = j0; j < j1; j++) {
        HL_ROW(0, e0, o0)
        HL_ROW(1, e1, o1)
        HL_ROW(2, e2, o2)
        HL_ROW(3, e3, o3)
        HL_COL(0)
        HL_COL(1)
        HL_COL(2)
        HL_COL(3)
    }
#undef HL_ROW
#undef HL_COL
}

/* A block of tiles [t0, t0 + count) over channels [c0, c0 + ...): what the loops over its
   channels hand to their chunks (each thread's rows in work, work_per_thread floats apart). */
typedef struct {
    const wgeom *g;
    const float *src, *bias;
    const conv_epilogue *epi;
    float *dst, *work;
    int64_t t0, count, es, c0, work_per_thread;
    int64_t ldm;     /* output_block: M's rows ldm apart */
    bool strips;     /* input_block: V in strips of NR tiles */
} tile_block;

static void input_channels(int64_t c0, int64_t c1, void *arg);

/* V[e][c][j] for the tiles [t0, t0 + count) of every input channel c. strips: V[e] cut
   into strips of NR tiles instead (the packed products' layout, winograd_product.c), tile t
   of channel c at V[e * es + (t / NR) * C * NR + c * NR + t % NR], the last strip's columns
   past count zeros. */
static void input_block(const wgeom *g, const float *x, int64_t t0, int64_t count, float *V,
                        int64_t es, bool strips, float *work, int64_t work_per_thread) {
    const int64_t C = g->c_in;
    const tile_block q = {.g = g, .src = x, .dst = V, .work = work, .t0 = t0, .count = count,
                          .es = es, .work_per_thread = work_per_thread, .strips = strips};
    hl_parallel_for(C, C * count * 16 > PAR_MIN ? 1 : C, input_channels, (void *)&q);
}

static void input_channels(int64_t c0, int64_t c1, void *arg) {
    const tile_block *q = arg;
    const wgeom *g = q->g;
    const float *x = q->src;
    float *V = q->dst;
    const int64_t C = g->c_in, t0 = q->t0, count = q->count, es = q->es;
    const bool strips = q->strips;
    const int64_t tail = strips ? count % NR : 0, last = count / NR * C * NR;
    for (int64_t c = c0; c < c1; c++) {
        float *rows = q->work + hl_thread_num() * q->work_per_thread;
        RUNS(g, t0, count, u) {
            const float *plane = x + (u.n * C + c) * g->h * g->w;
            const int64_t L = u.len + 1;
            for (int r = 0; r < 4; r++)
                split_row(plane, g, 2 * u.ty + r - g->pt, u.tx0, u.len, rows + 2 * r * L,
                          rows + (2 * r + 1) * L);
            if (!strips) {
                input_run(rows, u.len, 0, u.len, V + c * count + u.off, es);
                continue;
            }
            for (int64_t j = 0; j < u.len;) {   /* the run's tiles, strip by strip */
                const int64_t t = u.off + j, in_strip = HL_MIN(u.len - j, NR - t % NR);
                input_run(rows, u.len, j, j + in_strip,
                          V + (t / NR) * C * NR + c * NR + t % NR, es);
                j += in_strip;
            }
        }
        for (int e = 0; tail && e < 16; e++)
            for (int64_t j = tail; j < NR; j++) V[e * es + last + c * NR + j] = 0;
    }
}

/* Y = A^T m A (A^T = [1 1 1 0; 0 1 -1 -1]) for a run of tiles, m[e] at m[e * ms + j]; the
   2x2 outputs (plus b) go to the plane, where they lie inside it. */
HL_CLONES
static void output_run(const float *restrict m, int64_t ms, int64_t len, const wgeom *g,
                       int64_t ty, int64_t tx0, float b, float *restrict ybuf,
                       float *restrict plane, const conv_epilogue *epi,
                       const float *rplane) {
    float *y00 = ybuf, *y01 = ybuf + len, *y10 = ybuf + 2 * len, *y11 = ybuf + 3 * len;
    for (int64_t j = 0; j < len; j++) {
        float s0[4], s1[4];
        for (int c = 0; c < 4; c++) {
            const float m0 = m[c * ms + j], m1 = m[(4 + c) * ms + j], m2 = m[(8 + c) * ms + j],
                        m3 = m[(12 + c) * ms + j];
            s0[c] = m0 + m1 + m2;
            s1[c] = m1 - m2 - m3;
        }
        y00[j] = s0[0] + s0[1] + s0[2] + b;
        y01[j] = s0[1] - s0[2] - s0[3] + b;
        y10[j] = s1[0] + s1[1] + s1[2] + b;
        y11[j] = s1[1] - s1[2] - s1[3] + b;
    }
    /* tiles whose two columns both lie inside the plane, then a last half tile; the
       epilogue row by row, or once where the run spans whole rows (as winograd43.c's) */
    const int64_t full = HL_MIN(len, g->ow / 2 - tx0), width = 2 * full + (full < len);
    const bool whole_rows = tx0 == 0 && width == g->ow;
    const int64_t first = 2 * ty * g->ow;
    int rows = 0;
    for (int r = 0; r < 2; r++, rows++) {
        const int64_t oy = 2 * ty + r;
        if (oy >= g->oh) break;
        float *restrict out = plane + oy * g->ow + 2 * tx0;
        const float *a = r ? y10 : y00, *c = r ? y11 : y01;
        for (int64_t j = 0; j < full; j++) {
            out[2 * j] = a[j];
            out[2 * j + 1] = c[j];
        }
        if (full < len) out[2 * full] = a[full];
        if (epi && !whole_rows)  /* the fused epilogue, while the row is in cache */
            conv_epilogue_run_f32(epi, out, rplane ? rplane + oy * g->ow + 2 * tx0 : NULL,
                                  width);
    }
    if (epi && whole_rows)
        conv_epilogue_run_f32(epi, plane + first, rplane ? rplane + first : NULL, rows * width);
}

/* The outputs of the tiles [t0, t0 + count) for every output channel, from M[e][co][j]
   (rows ldm apart). */
static void output_channels(int64_t c0, int64_t c1, void *arg);

static void output_block(const wgeom *g, const float *M, int64_t es, int64_t ldm, int64_t t0,
                         int64_t count, const float *bias, const conv_epilogue *epi, float *y,
                         float *work, int64_t work_per_thread) {
    const int64_t C = g->c_out;
    const tile_block q = {.g = g, .src = M, .bias = bias, .epi = epi, .dst = y, .work = work,
                          .t0 = t0, .count = count, .es = es, .work_per_thread = work_per_thread,
                          .ldm = ldm};
    hl_parallel_for(C, C * count * 16 > PAR_MIN ? 1 : C, output_channels, (void *)&q);
}

static void output_channels(int64_t c0, int64_t c1, void *arg) {
    const tile_block *q = arg;
    const wgeom *g = q->g;
    const float *M = q->src, *bias = q->bias;
    const conv_epilogue *epi = q->epi;
    float *y = q->dst;
    const int64_t C = g->c_out, t0 = q->t0, count = q->count, es = q->es, ldm = q->ldm;
    for (int64_t co = c0; co < c1; co++) {
        float *ybuf = q->work + hl_thread_num() * q->work_per_thread;
        const float b = bias ? bias[co] : 0;
        RUNS(g, t0, count, u) {
            const int64_t plane = (u.n * C + co) * g->oh * g->ow;
            output_run(M + co * ldm + u.off, es, u.len, g, u.ty, u.tx0, b, ybuf, y + plane,
                       epi, epi && epi->res ? (const float *)epi->res + plane : NULL);
        }
    }
}

/* DY = A dy A^T (A = [1 0; 1 1; 1 -1; 0 -1]) for a run of tiles of one dy plane (outputs
   outside the plane count as zero); entry e of tile j goes to v[e * vs + j]. */
HL_CLONES
static void grad_run(const float *restrict rows, int64_t len, float *restrict v, int64_t vs) {
    const float *a0 = rows, *a1 = rows + len, *b0 = rows + 2 * len, *b1 = rows + 3 * len;
    for (int64_t j = 0; j < len; j++) {
        const float q[4][2] = {{a0[j], a1[j]},
                               {a0[j] + b0[j], a1[j] + b1[j]},
                               {a0[j] - b0[j], a1[j] - b1[j]},
                               {-b0[j], -b1[j]}};
        for (int i = 0; i < 4; i++) {
            v[(i * 4 + 0) * vs + j] = q[i][0];
            v[(i * 4 + 1) * vs + j] = q[i][0] + q[i][1];
            v[(i * 4 + 2) * vs + j] = q[i][0] - q[i][1];
            v[(i * 4 + 3) * vs + j] = -q[i][1];
        }
    }
}

/* DY[e][co][j] for the tiles [t0, t0 + count) of every channel of dy (the output side). */
static void grad_channels(int64_t b0, int64_t b1, void *arg);

static void grad_block(const wgeom *g, const float *dy, int64_t c0, int64_t nc, int64_t t0,
                       int64_t count, float *DY, int64_t es, float *work,
                       int64_t work_per_thread) {
    const tile_block q = {.g = g, .src = dy, .dst = DY, .work = work, .t0 = t0, .count = count,
                          .es = es, .c0 = c0, .work_per_thread = work_per_thread};
    hl_parallel_for(nc, nc * count * 16 > PAR_MIN ? 1 : nc, grad_channels, (void *)&q);
}

static void grad_channels(int64_t b0, int64_t b1, void *arg) {
    const tile_block *q = arg;
    const wgeom *g = q->g;
    const float *dy = q->src;
    float *DY = q->dst;
    const int64_t C = g->c_out, OH = g->oh, OW = g->ow, c0 = q->c0, t0 = q->t0;
    const int64_t count = q->count, es = q->es;
    for (int64_t co = b0; co < b1; co++) {
        float *rows = q->work + hl_thread_num() * q->work_per_thread;
        RUNS(g, t0, count, u) {
            const float *plane = dy + (u.n * C + c0 + co) * OH * OW;
            for (int r = 0; r < 2; r++) {
                const int64_t oy = 2 * u.ty + r;
                float *ev = rows + 2 * r * u.len, *od = ev + u.len;
                for (int64_t j = 0; j < u.len; j++) {
                    const int64_t ox = 2 * (u.tx0 + j);
                    ev[j] = oy < OH ? plane[oy * OW + ox] : 0;
                    od[j] = oy < OH && ox + 1 < OW ? plane[oy * OW + ox + 1] : 0;
                }
            }
            grad_run(rows, u.len, DY + co * count + u.off, es);
        }
    }
}

/* ---- the three passes -------------------------------------------------------------------- */

/* Tiles per block: the transformed input and output side of a block near BLOCK_BYTES, but
   at least MIN_BLOCK_TILES (the products' inner or outer dimension), blocks of even size. */
static int64_t block_tiles(const wgeom *g, int64_t in_c, int64_t out_c) {
    const int64_t per_tile = 16 * (in_c + out_c) * (int64_t)sizeof(float);
    int64_t most = HL_MAX(BLOCK_BYTES / per_tile, MIN_BLOCK_TILES);
    most = HL_MIN(most, (INDEX_MAX - 2048) / HL_MAX(in_c, out_c));
    const int64_t blocks = (g->tiles + most - 1) / most;
    return (g->tiles + blocks - 1) / blocks;
}

/* Per-thread work rows for a run of at most tw tiles: 8 split input rows of tw + 1, rounded
   to whole cache lines so that threads do not share one. */
static int64_t work_floats(const wgeom *g) { return (8 * (g->tw + 1) + 15) / 16 * 16; }

/* C[e] = op(A[e]) @ op(B[e]) + beta C[e] for the 16 entries e (strides sa, sb, sc between
   them): op(A) is M x K (stored transposed when ta), op(B) K x N (transposed when tb). */
static void batched_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                         int64_t sa, const float *B, int64_t sb, float beta, float *C,
                         int64_t sc) {
    scipy_cblas_sgemm_batch_strided(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                    tb ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N,
                                    (blasint)K, 1.0f, A, ta ? (blasint)M : (blasint)K,
                                    (blasint)sa, B, tb ? (blasint)K : (blasint)N, (blasint)sb,
                                    beta, C, (blasint)N, (blasint)sc, 16);
}

/* ---- forward and grad_input: a convolution by a transformed kernel ----------------------- */

static hl_status convolve(const char *op, const wgeom *g, const float *x, const float *w,
                          bool turned, const float *bias, const conv_epilogue *epi, float *y) {
    const int64_t C0 = turned ? g->c_in : g->c_out, C1 = turned ? g->c_out : g->c_in;
    const int64_t us = entry_stride(C0 * C1);
    const int64_t tb = block_tiles(g, g->c_in, g->c_out), wpt = work_floats(g);
    const int64_t vs = entry_stride(g->c_in * tb), ms = entry_stride(g->c_out * tb);
    hl_status st;
    scratch s;
    float *U = scratch_floats(op, &s, 16 * (us + vs + ms) + wpt * hl_pool_threads(), &st);
    if (st) return st;
    float *V = U + 16 * us, *M = V + 16 * vs, *work = M + 16 * ms;
    hl_winograd_transform_weights(w, C0, C1, turned, U, us);
    for (int64_t t0 = 0; t0 < g->tiles; t0 += tb) {
        const int64_t count = HL_MIN(tb, g->tiles - t0);
        input_block(g, x, t0, count, V, vs, false, work, wpt);
        batched_gemm(turned, false, g->c_out, count, g->c_in, U, us, V, vs, 0.0f, M, ms);
        output_block(g, M, ms, count, t0, count, bias, epi, y, work, wpt);
    }
    scratch_put(&s);
    return HL_OK;
}

hl_status hl_winograd_forward(const conv_geom *cg, const float *x, const float *w,
                              const float *bias, const conv_epilogue *epi, float *y) {
    const wgeom g = wgeom_make(cg->n, cg->c_in, cg->h, cg->w, cg->c_out, cg->oh, cg->ow,
                               cg->pt, cg->pl);
    return convolve("conv", &g, x, w, false, bias, epi, y);
}

/* Tiles per block of the packed path: whole strips, the transformed input and output side
   near PACKED_BLOCK_BYTES (the product then reads V and the output transform M from L2; at
   batch 8 blocks of 64-128 tiles read 5-15% faster than the unpacked path's 256-512, one
   thread, within this host's noise), but at least PACKED_MIN_TILES, more where U is large
   (every block reads all of U again: 16 MiB for 512 channels). */
enum { PACKED_BLOCK_BYTES = 1 << 20, PACKED_MIN_TILES = 32, PACKED_MIN_TILES_LARGE_U = 128 };

static int64_t packed_block_tiles(const wgeom *g) {
    const int64_t per_tile = 16 * (g->c_in + g->c_out) * (int64_t)sizeof(float);
    const int64_t u_bytes = 16 * g->c_in * g->c_out * (int64_t)sizeof(float);
    int64_t most = HL_MAX(PACKED_BLOCK_BYTES / per_tile, u_bytes > PACKED_BLOCK_BYTES
                                                             ? PACKED_MIN_TILES_LARGE_U
                                                             : PACKED_MIN_TILES);
    most = HL_MIN(most, (INDEX_MAX - 2048) / HL_MAX(g->c_in, g->c_out)) / NR * NR;
    return HL_MAX(most, NR);
}

/* The forward pass by kernels transformed once (U, hl_winograd_pack's layout): the input
   transform writes V in strips of NR tiles and hl_winograd_product multiplies them by U as
   it is. Blocks of tiles are whole strips but the last. */
hl_status hl_winograd_forward_packed(const conv_geom *cg, const float *x, const float *U,
                                     const float *bias, const conv_epilogue *epi, float *y) {
    const wgeom g = wgeom_make(cg->n, cg->c_in, cg->h, cg->w, cg->c_out, cg->oh, cg->ow,
                               cg->pt, cg->pl);
    const int64_t tb = packed_block_tiles(&g);
    const int64_t wpt = work_floats(&g), width = HL_MIN(tb, (g.tiles + NR - 1) / NR * NR);
    const int64_t vs = entry_stride(g.c_in * width), ms = entry_stride(g.c_out * width);
    hl_status st;
    scratch s;
    float *V = scratch_floats("conv", &s, 16 * (vs + ms) + wpt * hl_pool_threads(), &st);
    if (st) return st;
    float *M = V + 16 * vs, *work = M + 16 * ms;
    for (int64_t t0 = 0; t0 < g.tiles; t0 += tb) {
        const int64_t count = HL_MIN(tb, g.tiles - t0), strips = (count + NR - 1) / NR;
        input_block(&g, x, t0, count, V, vs, true, work, wpt);
        hl_winograd_product(U, 16, g.c_out, g.c_in, V, vs, strips, M, ms, strips * NR);
        output_block(&g, M, ms, strips * NR, t0, count, bias, epi, y, work, wpt);
    }
    scratch_put(&s);
    return HL_OK;
}

/* dx is the convolution of dy by w turned 180 degrees with its channel axes swapped, over dy
   padded by 2 - pad: what a transposed convolution computes. */
hl_status hl_winograd_grad_input(const conv_geom *cg, const float *dy, const float *w,
                                 const float *bias, float *dx) {
    const wgeom g = wgeom_make(cg->n, cg->c_out, cg->oh, cg->ow, cg->c_in, cg->h, cg->w,
                               2 - cg->pt, 2 - cg->pl);
    return convolve("conv_grad_input", &g, dy, w, true, bias, NULL, dx);
}

/* ---- grad_weight ------------------------------------------------------------------------- */

/* The transformed weight gradient (16 x c_out x c_in floats) is made for at most this many
   bytes of output channels at a time: whole, the deepest ResNet layer's (512 x 512) was 16 MiB,
   two thirds of the work buffer that set a training step's peak memory (docs/performance.md).
   Each pass transforms the input again (a small cost beside the products) and multiplies the
   same rows as one pass would, each entry summed over the same tiles in the same order. */
enum { GRAD_M_BYTES = 4 << 20 };

hl_status hl_winograd_grad_weight(const conv_geom *cg, const float *dy, const float *x,
                                  float *dw) {
    const int64_t CO = cg->c_out, CI = cg->c_in;
    const wgeom g = wgeom_make(cg->n, CI, cg->h, cg->w, CO, cg->oh, cg->ow, cg->pt, cg->pl);
    const int64_t cb = HL_MAX(1, HL_MIN(CO, GRAD_M_BYTES / (16 * CI * (int64_t)sizeof(float))));
    const int64_t tb = block_tiles(&g, CI, CO), wpt = work_floats(&g);
    const int64_t vs = entry_stride(CI * tb), ds = entry_stride(cb * tb);
    const int64_t ms = entry_stride(cb * CI);
    hl_status st;
    scratch s;
    float *V = scratch_floats("conv_grad_weight", &s,
                              16 * (vs + ds + ms) + wpt * hl_pool_threads(), &st);
    if (st) return st;
    float *DY = V + 16 * vs, *M = DY + 16 * ds, *work = M + 16 * ms;
    for (int64_t c0 = 0; c0 < CO; c0 += cb) {
        const int64_t nc = HL_MIN(cb, CO - c0);
        for (int64_t t0 = 0; t0 < g.tiles; t0 += tb) {
            const int64_t count = HL_MIN(tb, g.tiles - t0);
            input_block(&g, x, t0, count, V, vs, false, work, wpt);
            grad_block(&g, dy, c0, nc, t0, count, DY, ds, work, wpt);
            /* M[e] (nc x CI) += DY[e] (nc x count) @ V[e]^T, set by the first block */
            batched_gemm(false, true, nc, CI, count, DY, ds, V, vs, t0 ? 1.0f : 0.0f, M, ms);
        }
        hl_winograd_weight_grads(M, ms, nc, CI, dw + c0 * CI * 9);
    }
    scratch_put(&s);
    return HL_OK;
}
