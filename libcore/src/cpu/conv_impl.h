/*
 * conv_impl.h - the convolution kernels for one float type. cpu/conv.c includes this file
 * once per type with T (the C type), SFX (the name suffix) and CBLAS_GEMM defined; see the
 * top of conv.c for the method.
 */
#define CONV_CAT2(a, b) a##_##b
#define CONV_CAT(a, b) CONV_CAT2(a, b)
#define FN(name) CONV_CAT(name, SFX)

#include "conv_epilogue_impl.h"

/* Work below this many elements runs on one thread: a parallel region costs more. */
#ifndef CONV_PAR_MIN
#define CONV_PAR_MIN 32768
#endif

/* C (M x N, row-major, ldc) = op(A) @ op(B) + beta * C, also for sizes BLAS does not take. */
static void FN(gemm)(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T *A,
                     int64_t lda, const T *B, int64_t ldb, T beta, T *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
        return;
    }
    CBLAS_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
               (blasint)M, (blasint)N, (blasint)K, (T)1, A, (blasint)lda, B, (blasint)ldb, beta,
               C, (blasint)ldc);
}

/* Columns of m samples from n0 and output rows oy0 .. oy0 + rows, channels c0 .. c0 + cg_in:
   row r = (c, ky, kx) holds, for each sample, its rows * ow output positions (Pt); ld = m * Pt.
   Padding reads as zero. */
/* One row of columns (tap ky, kx of one channel plane, one sample); see im2col. */
HL_CLONES
static void FN(im2col_row)(const conv_geom *g, const T *plane, T *restrict dst, int64_t ky,
                           int64_t kx, int64_t oy0, int64_t rows) {
    const int64_t H = g->h, W = g->w, ow = g->ow, sw = g->sw;
    const int64_t off = kx * g->dw - g->pl;
    int64_t lo, hi;
    hl_out_range(off, sw, W, ow, &lo, &hi);
    for (int64_t oy = 0; oy < rows; oy++) {
        T *restrict d = dst + oy * ow;
        const int64_t iy = (oy0 + oy) * g->sh - g->pt + ky * g->dh;
        if (iy < 0 || iy >= H) {
            for (int64_t ox = 0; ox < ow; ox++) d[ox] = 0;
            continue;
        }
        const T *restrict row = plane + iy * W;
        for (int64_t ox = 0; ox < lo; ox++) d[ox] = 0;
        if (sw == 1)
            for (int64_t ox = lo; ox < hi; ox++) d[ox] = row[ox + off];
        else
            for (int64_t ox = lo; ox < hi; ox++) d[ox] = row[ox * sw + off];
        for (int64_t ox = hi; ox < ow; ox++) d[ox] = 0;
    }
}

/* A band of a tile (im2col, col2im, scatter, gather): samples n0 .. n0 + m, output rows
   oy0 .. oy0 + rows, input channels from c0 or group grp; the pool's loops run its items. */
typedef struct {
    const conv_geom *g;
    const T *src, *bias;
    const conv_epilogue *epi;
    T *dst;
    int64_t n0, m, oy0, rows, c0, grp;
} FN(band);

/* Items (sample, row of the columns) [begin, end). */
static void FN(im2col_items)(int64_t begin, int64_t end, void *arg) {
    const FN(band) *q = arg;
    const conv_geom *g = q->g;
    const int64_t K = g->K, P = q->rows * g->ow, ld = q->m * P, khw = g->kh * g->kw;
    for (int64_t i = begin; i < end; i++) {
        const int64_t nl = i / K, r = i % K;
        const int64_t c = r / khw, ky = (r / g->kw) % g->kh, kx = r % g->kw;
        FN(im2col_row)(g, q->src + ((q->n0 + nl) * g->c_in + q->c0 + c) * g->h * g->w,
                       q->dst + r * ld + nl * P, ky, kx, q->oy0, q->rows);
    }
}

static void FN(im2col)(const conv_geom *g, const T *x, int64_t n0, int64_t m, int64_t oy0,
                       int64_t rows, int64_t c0, T *cols) {
    const int64_t K = g->K, ld = m * rows * g->ow;
    const FN(band) q = {.g = g, .src = x, .dst = cols, .n0 = n0, .m = m, .oy0 = oy0,
                        .rows = rows, .c0 = c0};
    hl_parallel_for(m * K, K * ld > CONV_PAR_MIN ? 1 : m * K, FN(im2col_items), (void *)&q);
}

/* One dx plane (channel c of the group) gets the columns of its taps; see col2im. */
HL_CLONES
static void FN(col2im_plane)(const conv_geom *g, const T *cols, int64_t ld, int64_t oy0,
                             int64_t rows, int64_t c, T init, bool first, T *plane) {
    const int64_t H = g->h, W = g->w, ow = g->ow, sw = g->sw;
    if (first)
        for (int64_t i = 0; i < H * W; i++) plane[i] = init;
    for (int64_t ky = 0; ky < g->kh; ky++)
        for (int64_t kx = 0; kx < g->kw; kx++) {
            const T *src = cols + ((c * g->kh + ky) * g->kw + kx) * ld;
            const int64_t off = kx * g->dw - g->pl;
            int64_t lo, hi;
            hl_out_range(off, sw, W, ow, &lo, &hi);
            for (int64_t oy = 0; oy < rows; oy++) {
                const int64_t iy = (oy0 + oy) * g->sh - g->pt + ky * g->dh;
                if (iy < 0 || iy >= H) continue;
                T *restrict row = plane + iy * W;
                const T *restrict s = src + oy * ow;
                if (sw == 1)
                    for (int64_t ox = lo; ox < hi; ox++) row[ox + off] += s[ox];
                else
                    for (int64_t ox = lo; ox < hi; ox++) row[ox * sw + off] += s[ox];
            }
        }
}

/* The inverse of im2col: dx planes of m samples from n0, channels c0 .. c0 + cg_in, get the
   sum of the columns of output rows oy0 .. oy0 + rows. The first band (oy0 == 0) sets the
   planes (to bias[c], when given, or zero); later bands add. One thread owns each plane. */
static void FN(col2im_items)(int64_t begin, int64_t end, void *arg) {
    const FN(band) *q = arg;
    const conv_geom *g = q->g;
    const int64_t P = q->rows * g->ow, ld = q->m * P;
    for (int64_t i = begin; i < end; i++) {
        const int64_t nl = i / g->cg_in, c = i % g->cg_in;
        FN(col2im_plane)(g, q->src + nl * P, ld, q->oy0, q->rows, c,
                         q->bias ? q->bias[q->c0 + c] : 0, q->oy0 == 0,
                         q->dst + ((q->n0 + nl) * g->c_in + q->c0 + c) * g->h * g->w);
    }
}

static void FN(col2im)(const conv_geom *g, const T *cols, int64_t n0, int64_t m, int64_t oy0,
                       int64_t rows, int64_t c0, const T *bias, T *dx) {
    const int64_t ld = m * rows * g->ow, items = m * g->cg_in;
    const FN(band) q = {.g = g, .src = cols, .bias = bias, .dst = dx, .n0 = n0, .m = m,
                        .oy0 = oy0, .rows = rows, .c0 = c0};
    hl_parallel_for(items, g->K * ld > CONV_PAR_MIN ? 1 : items, FN(col2im_items), (void *)&q);
}

/* y[n0 + nl, grp * cg_out + co, :] = buf[co, nl * P : (nl + 1) * P] + bias. */
static void FN(scatter_items)(int64_t begin, int64_t end, void *arg) {
    const FN(band) *q = arg;
    const conv_geom *g = q->g;
    const int64_t P = g->P, cg = g->cg_out, m = q->m, n0 = q->n0;
    T *y = q->dst;
    for (int64_t i = begin; i < end; i++) {
        const int64_t nl = i / cg, co = i % cg, ch = q->grp * cg + co;
        T *restrict d = y + ((n0 + nl) * g->c_out + ch) * P;
        const T *restrict s = q->src + co * m * P + nl * P;
        const T b = q->bias ? q->bias[ch] : 0;
        for (int64_t p = 0; p < P; p++) d[p] = s[p] + b;
        if (q->epi) FN(conv_epilogue_at)(q->epi, y, ((n0 + nl) * g->c_out + ch) * P, P);
    }
}

static void FN(scatter)(const conv_geom *g, const T *buf, int64_t n0, int64_t m, int64_t grp,
                        const T *bias, const conv_epilogue *epi, T *y) {
    const int64_t items = m * g->cg_out;
    const FN(band) q = {.g = g, .src = buf, .bias = bias, .epi = epi, .dst = y, .n0 = n0,
                        .m = m, .grp = grp};
    hl_parallel_for(items, items * g->P > CONV_PAR_MIN ? 1 : items, FN(scatter_items),
                    (void *)&q);
}

/* buf[co, nl * P + p] = dy[n0 + nl, grp * cg_out + co, p]: a group's gradient as one matrix. */
static void FN(gather_items)(int64_t begin, int64_t end, void *arg) {
    const FN(band) *q = arg;
    const conv_geom *g = q->g;
    const int64_t P = g->P, cg = g->cg_out, m = q->m;
    for (int64_t i = begin; i < end; i++) {
        const int64_t nl = i / cg, co = i % cg;
        const T *restrict s = q->src + ((q->n0 + nl) * g->c_out + q->grp * cg + co) * P;
        T *restrict d = q->dst + co * m * P + nl * P;
        for (int64_t p = 0; p < P; p++) d[p] = s[p];
    }
}

static void FN(gather)(const conv_geom *g, const T *dy, int64_t n0, int64_t m, int64_t grp,
                       T *buf) {
    const int64_t items = m * g->cg_out;
    const FN(band) q = {.g = g, .src = dy, .dst = buf, .n0 = n0, .m = m, .grp = grp};
    hl_parallel_for(items, items * g->P > CONV_PAR_MIN ? 1 : items, FN(gather_items),
                    (void *)&q);
}

/* planes[c, :] = bias[c] for channels planes of size P: a product then adds into them with
   beta = 1, which also spares BLAS its pass that zeroes the output for beta = 0. */
typedef struct {
    T *planes;
    const T *bias;
    int64_t P;
} FN(bias_planes);

static void FN(set_bias_items)(int64_t begin, int64_t end, void *arg) {
    const FN(bias_planes) *q = arg;
    for (int64_t c = begin; c < end; c++) {
        T *restrict d = q->planes + c * q->P;
        const T b = q->bias[c];
        for (int64_t p = 0; p < q->P; p++) d[p] = b;
    }
}

static void FN(set_bias)(T *planes, const T *bias, int64_t channels, int64_t P) {
    const FN(bias_planes) q = {planes, bias, P};
    hl_parallel_for(channels, channels * P > CONV_PAR_MIN ? 1 : channels, FN(set_bias_items),
                    (void *)&q);
}

/* The column source for group grp of a tile: x itself for a pointwise conv, else im2col. */
static const T *FN(columns)(const conv_geom *g, bool pw, const T *x, int64_t n0, int64_t m,
                            int64_t oy0, int64_t rows, int64_t grp, T *cols) {
    if (pw) return x + (n0 * g->c_in + grp * g->cg_in) * g->P;
    FN(im2col)(g, x, n0, m, oy0, rows, grp * g->cg_in, cols);
    return cols;
}

/* A pointwise conv skips im2col when each sample is a reasonable product on its own. */
static bool FN(direct)(const conv_geom *g) { return is_pointwise(g) && g->P >= 256; }

/* Work buffers of a tiling: columns (unless direct) and, for multi-sample tiles, the
   (cg_out x m * P) matrix that is scattered to or gathered from NCHW. */
static hl_status FN(buffers)(const char *op, const conv_geom *g, bool pw, tiling t,
                             scratch *sc, T **cols, scratch *sb, T **buf) {
    const int64_t pt = t.samples * t.rows * g->ow;
    hl_status st = scratch_get(op, sc, pw ? 0 : (size_t)(g->K * pt) * sizeof(T), (void **)cols);
    if (!st) st = scratch_get(op, sb, t.samples > 1 ? (size_t)(g->cg_out * pt) * sizeof(T) : 0,
                              (void **)buf);
    if (st) scratch_put(sc);
    return st;
}

/* One output plane of a depthwise convolution (one input channel per group): for each tap,
   the weight times the input rows it sees, added to the output rows (stride 1 vectorises).
   im2col would copy each plane kh * kw times to multiply it by a one-row matrix. */
HL_CLONES
static void FN(depthwise_plane)(const conv_geom *g, const T *restrict xp, const T *wk, T b0,
                                T *restrict yp) {
    for (int64_t i = 0; i < g->P; i++) yp[i] = b0;
    for (int64_t ky = 0; ky < g->kh; ky++) {
        const int64_t offy = ky * g->dh - g->pt;
        int64_t oy_lo, oy_hi;
        hl_out_range(offy, g->sh, g->h, g->oh, &oy_lo, &oy_hi);
        for (int64_t kx = 0; kx < g->kw; kx++) {
            const int64_t offx = kx * g->dw - g->pl;
            int64_t ox_lo, ox_hi;
            hl_out_range(offx, g->sw, g->w, g->ow, &ox_lo, &ox_hi);
            const T wv = wk[ky * g->kw + kx];
            for (int64_t oy = oy_lo; oy < oy_hi; oy++) {
                const T *restrict xr = xp + (oy * g->sh + offy) * g->w + offx;
                T *restrict yr = yp + oy * g->ow;
                if (g->sw == 1)
                    for (int64_t ox = ox_lo; ox < ox_hi; ox++) yr[ox] += wv * xr[ox];
                else
                    for (int64_t ox = ox_lo; ox < ox_hi; ox++) yr[ox] += wv * xr[ox * g->sw];
            }
        }
    }
}

/* A 3x3 depthwise kernel with dilation 1 and stride 1 or 2 (MobileNet's): row by row, the
   three taps of each kernel row in one pass over the output row while it is in L1 (three
   passes per row instead of nine over the plane), then the epilogue on the finished row.
   Small planes at stride 1 go through a zero-padded copy instead (dw3x3_flat). Padding is
   zeros that are multiplied, as ONNX and im2col define it (an infinite weight makes NaN at
   the border), and each output sums b, then its taps by kernel row, then column: both
   variants give the same bits. */
static bool FN(is_dw3x3)(const conv_geom *g) {
    return g->kh == 3 && g->kw == 3 && g->dh == 1 && g->dw == 1 && g->sh == g->sw &&
           (g->sw == 1 || g->sw == 2);
}

/* Planes whose padded copy has at most this many values take dw3x3_flat (28x28 and below). */
#ifndef DW_FLAT_MAX
#define DW_FLAT_MAX 1024
#endif

static bool FN(dw3x3_flat_fits)(const conv_geom *g) {
    return g->sw == 1 && (g->oh + 2) * (g->ow + 2) <= DW_FLAT_MAX;
}

/* Stride 1 on a small plane: the plane copied into a zero-padded (oh + 2) x (ow + 2) grid, so
   that every output is one expression over the flat grid (a vector loop as long as the
   plane, where rows of 7 or 14 are too short for one). */
HL_CLONES
static void FN(dw3x3_flat)(const conv_geom *g, const T *restrict xp, const T *wk, T b0,
                           const conv_epilogue *epi, T *yall, int64_t yoff) {
    T pad[DW_FLAT_MAX], t[DW_FLAT_MAX];
    const int64_t Wp = g->ow + 2, Hp = g->oh + 2, H = g->h, W = g->w;
    for (int64_t i = 0; i < Hp * Wp; i++) pad[i] = 0;
    for (int64_t iy = 0; iy < H && iy + g->pt < Hp; iy++)
        for (int64_t ix = 0; ix < W && ix + g->pl < Wp; ix++)
            pad[(iy + g->pt) * Wp + ix + g->pl] = xp[iy * W + ix];
    const T w00 = wk[0], w01 = wk[1], w02 = wk[2], w10 = wk[3], w11 = wk[4], w12 = wk[5],
            w20 = wk[6], w21 = wk[7], w22 = wk[8];
    const int64_t n = (g->oh - 1) * Wp + g->ow;
    const T *restrict p0 = pad, *restrict p1 = pad + Wp, *restrict p2 = pad + 2 * Wp;
    for (int64_t q = 0; q < n; q++) {
        T v = b0;
        v += w00 * p0[q];
        v += w01 * p0[q + 1];
        v += w02 * p0[q + 2];
        v += w10 * p1[q];
        v += w11 * p1[q + 1];
        v += w12 * p1[q + 2];
        v += w20 * p2[q];
        v += w21 * p2[q + 1];
        v += w22 * p2[q + 2];
        t[q] = v;
    }
    T *restrict yp = yall + yoff;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        for (int64_t ox = 0; ox < g->ow; ox++) yp[oy * g->ow + ox] = t[oy * Wp + ox];
        if (epi) FN(conv_epilogue_at)(epi, yall, yoff + oy * g->ow, g->ow);
    }
}

HL_CLONES
static void FN(dw3x3_plane)(const conv_geom *g, const T *restrict xp, const T *wk, T b0,
                            const conv_epilogue *epi, T *yall, int64_t yoff) {
    const int64_t W = g->w, ow = g->ow, s = g->sw, pl = g->pl;
    T *restrict yp = yall + yoff;
    /* columns whose three taps all lie in the row: ox * s - pl >= 0, ox * s - pl + 2 < W */
    int64_t lo = (pl + s - 1) / s, hi = W - 3 + pl >= 0 ? (W - 3 + pl) / s + 1 : 0;
    lo = HL_MIN(lo, ow);
    hi = HL_MAX(lo, HL_MIN(hi, ow));
    for (int64_t oy = 0; oy < g->oh; oy++) {
        T *restrict yr = yp + oy * ow;
        for (int64_t ox = 0; ox < ow; ox++) yr[ox] = b0;
        for (int64_t ky = 0; ky < 3; ky++) {
            const int64_t iy = oy * g->sh - g->pt + ky;
            const T w0 = wk[ky * 3], w1 = wk[ky * 3 + 1], w2 = wk[ky * 3 + 2];
            if (iy < 0 || iy >= g->h) {   /* a padding row: its zeros times the weights */
                for (int64_t ox = 0; ox < ow; ox++) {
                    T v = yr[ox];
                    v += w0 * (T)0;
                    v += w1 * (T)0;
                    v += w2 * (T)0;
                    yr[ox] = v;
                }
                continue;
            }
            const T *restrict xr = xp + iy * W;
            for (int64_t ox = 0; ox < lo; ox++)
                for (int64_t kx = 0; kx < 3; kx++) {
                    const int64_t ix = ox * s - pl + kx;
                    yr[ox] += wk[ky * 3 + kx] * (ix >= 0 && ix < W ? xr[ix] : (T)0);
                }
            const T *restrict a = xr - pl;
            if (s == 1) {
                for (int64_t ox = lo; ox < hi; ox++) {
                    T v = yr[ox];
                    v += w0 * a[ox];
                    v += w1 * a[ox + 1];
                    v += w2 * a[ox + 2];
                    yr[ox] = v;
                }
            } else {
                for (int64_t ox = lo; ox < hi; ox++) {
                    T v = yr[ox];
                    v += w0 * a[2 * ox];
                    v += w1 * a[2 * ox + 1];
                    v += w2 * a[2 * ox + 2];
                    yr[ox] = v;
                }
            }
            for (int64_t ox = hi; ox < ow; ox++)
                for (int64_t kx = 0; kx < 3; kx++) {
                    const int64_t ix = ox * s - pl + kx;
                    yr[ox] += wk[ky * 3 + kx] * (ix >= 0 && ix < W ? xr[ix] : (T)0);
                }
        }
        if (epi) FN(conv_epilogue_at)(epi, yall, yoff + oy * ow, ow);
    }
}

typedef struct {
    const conv_geom *g;
    const T *x, *w, *bias;
    const conv_epilogue *epi;
    T *y;
    bool k3, flat;
} FN(dw_planes);

static void FN(depthwise_items)(int64_t begin, int64_t end, void *arg) {
    const FN(dw_planes) *q = arg;
    const conv_geom *g = q->g;
    const conv_epilogue *epi = q->epi;
    T *y = q->y;
    for (int64_t pl = begin; pl < end; pl++) {
        const int64_t n = pl / g->c_out, co = pl % g->c_out, ci = co / g->cg_out;
        const T *xp = q->x + (n * g->c_in + ci) * g->h * g->w;
        const T *wk = q->w + co * g->kh * g->kw;
        const T b0 = q->bias ? q->bias[co] : (T)0;
        if (q->flat) {
            FN(dw3x3_flat)(g, xp, wk, b0, epi, y, pl * g->P);
            continue;
        }
        if (q->k3) {
            FN(dw3x3_plane)(g, xp, wk, b0, epi, y, pl * g->P);
            continue;
        }
        FN(depthwise_plane)(g, xp, wk, b0, y + pl * g->P);
        if (epi) FN(conv_epilogue_at)(epi, y, pl * g->P, g->P);
    }
}

static hl_status FN(conv_depthwise)(const conv_geom *g, const T *x, const T *w, const T *bias,
                                    const conv_epilogue *epi, T *y) {
    const int64_t planes = g->n * g->c_out;
    const bool k3 = FN(is_dw3x3)(g), flat = k3 && FN(dw3x3_flat_fits)(g);
    /* chunks of 4 planes claimed one at a time: a thread that the host deschedules leaves
       its planes to the others */
    const FN(dw_planes) q = {g, x, w, bias, epi, y, k3, flat};
    hl_parallel_for(planes, planes * g->P * g->kh * g->kw > CONV_PAR_MIN ? 4 : planes,
                    FN(depthwise_items), (void *)&q);
    return HL_OK;
}

/* The epilogue over a group's rows of a one-sample tile that a product has just written:
   cg channels of pt positions from off, P apart. */
typedef struct {
    const conv_epilogue *epi;
    T *y;
    int64_t off, pt, P;
} FN(epilogue_rows);

static void FN(epilogue_items)(int64_t begin, int64_t end, void *arg) {
    const FN(epilogue_rows) *q = arg;
    for (int64_t co = begin; co < end; co++)
        FN(conv_epilogue_at)(q->epi, q->y, q->off + co * q->P, q->pt);
}

static void FN(epilogue_tile)(const conv_epilogue *epi, T *y, int64_t off, int64_t cg,
                              int64_t pt, int64_t P) {
    const FN(epilogue_rows) q = {epi, y, off, pt, P};
    hl_parallel_for(cg, cg * pt > CONV_PAR_MIN ? 1 : cg, FN(epilogue_items), (void *)&q);
}

/* y = conv(x, w) + bias, then the epilogue (NULL: none) while each tile is in cache. */
static hl_status FN(conv_forward)(const conv_geom *g, const T *x, const T *w, const T *bias,
                                  const conv_epilogue *epi, T *y) {
    const int64_t P = g->P, K = g->K, CO = g->c_out, cg = g->cg_out;
    if (g->n == 0 || CO == 0 || P == 0) return HL_OK;
    if (g->cg_in == 1 && g->groups > 1) return FN(conv_depthwise)(g, x, w, bias, epi, y);
    const bool pw = FN(direct)(g);
    const tiling t = pw ? (tiling){1, g->oh} : plan_tiles(g, sizeof(T), 2);
    scratch sc, sb;
    T *cols, *obuf;
    hl_status st = FN(buffers)("conv", g, pw, t, &sc, &cols, &sb, &obuf);
    if (st) return st;
    for (int64_t n0 = 0; n0 < g->n; n0 += t.samples) {
        const int64_t m = HL_MIN(t.samples, g->n - n0);
        for (int64_t oy0 = 0; oy0 < g->oh; oy0 += t.rows) {
            const int64_t r = HL_MIN(t.rows, g->oh - oy0);
            const int64_t pt = r * g->ow;
            if (m == 1 && bias && oy0 == 0) FN(set_bias)(y + n0 * CO * P, bias, CO, P);
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const T *B = FN(columns)(g, pw, x, n0, m, oy0, r, grp, cols);
                const T *A = w + grp * cg * K;
                if (m == 1) {
                    const int64_t off = (n0 * CO + grp * cg) * P + oy0 * g->ow;
                    FN(gemm)(false, false, cg, pt, K, A, K, B, pt, bias ? 1 : 0, y + off, P);
                    if (epi) FN(epilogue_tile)(epi, y, off, cg, pt, P);
                } else {
                    FN(gemm)(false, false, cg, m * P, K, A, K, B, m * P, 0, obuf, m * P);
                    FN(scatter)(g, obuf, n0, m, grp, bias, epi, y);
                }
            }
        }
    }
    scratch_put(&sc);
    scratch_put(&sb);
    return HL_OK;
}

typedef struct {
    const T *wt;
    T *dw;
    int64_t K, CO;
} FN(transpose_job);

/* dw rows [begin, end) from the transposed wt. */
static void FN(transpose_items)(int64_t begin, int64_t end, void *arg) {
    const FN(transpose_job) *q = arg;
    for (int64_t co = begin; co < end; co++)
        for (int64_t k = 0; k < q->K; k++) q->dw[co * q->K + k] = q->wt[k * q->CO + co];
}

/* dW is accumulated transposed, dW^T (K x C_out) = cols @ dY^T: BLAS packs the large column
   matrix faster as the left operand than as a transposed right one (a quarter faster on the
   layers of bench/conv.py). */
static hl_status FN(conv_grad_weight)(const conv_geom *g, const T *dy, const T *x, T *dw) {
    const int64_t P = g->P, K = g->K, CO = g->c_out, cg = g->cg_out;
    if (CO == 0 || K == 0) return HL_OK;
    if (g->n == 0 || P == 0) {
        memset(dw, 0, (size_t)(CO * K) * sizeof(T));
        return HL_OK;
    }
    const bool pw = FN(direct)(g);
    const tiling t = pw ? (tiling){1, g->oh} : plan_tiles(g, sizeof(T), 1);
    scratch sc, sb, sw;
    T *cols, *dbuf, *wt;
    hl_status st = FN(buffers)("conv_grad_weight", g, pw, t, &sc, &cols, &sb, &dbuf);
    if (st) return st;
    if ((st = scratch_get("conv_grad_weight", &sw, (size_t)(K * CO) * sizeof(T), (void **)&wt))) {
        scratch_put(&sc);
        scratch_put(&sb);
        return st;
    }
    for (int64_t n0 = 0; n0 < g->n; n0 += t.samples) {
        const int64_t m = HL_MIN(t.samples, g->n - n0);
        for (int64_t oy0 = 0; oy0 < g->oh; oy0 += t.rows) {
            const int64_t r = HL_MIN(t.rows, g->oh - oy0);
            const int64_t ld = m * r * g->ow;   /* positions in the tile */
            const T beta = n0 == 0 && oy0 == 0 ? 0 : 1;   /* the first tile sets dW */
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const T *B = FN(columns)(g, pw, x, n0, m, oy0, r, grp, cols);
                const T *D = dy + (n0 * CO + grp * cg) * P + oy0 * g->ow;
                int64_t ldd = P;
                if (m > 1) {
                    FN(gather)(g, dy, n0, m, grp, dbuf);
                    D = dbuf;
                    ldd = ld;
                }
                FN(gemm)(false, true, K, cg, ld, B, ld, D, ldd, beta, wt + grp * cg, CO);
            }
        }
    }
    const FN(transpose_job) tq = {wt, dw, K, CO};
    hl_parallel_for(CO, CO * K > CONV_PAR_MIN ? 1 : CO, FN(transpose_items), (void *)&tq);
    scratch_put(&sc);
    scratch_put(&sb);
    scratch_put(&sw);
    return HL_OK;
}

static hl_status FN(conv_grad_input)(const conv_geom *g, const T *dy, const T *w, const T *bias,
                                     T *dx) {
    const int64_t N = g->n, P = g->P, K = g->K, CI = g->c_in, CO = g->c_out, cg = g->cg_out;
    if (N == 0 || CI == 0) return HL_OK;
    const int64_t HW = g->h * g->w;
    if (P == 0) {   /* nothing flows back: dx is the bias (or zero) */
        for (int64_t i = 0; i < N * CI; i++)
            for (int64_t j = 0; j < HW; j++) dx[i * HW + j] = bias ? bias[i % CI] : 0;
        return HL_OK;
    }
    const bool pw = FN(direct)(g);
    const tiling t = pw ? (tiling){1, g->oh} : plan_tiles(g, sizeof(T), 1);
    scratch sc, sb;
    T *cols, *dbuf;
    hl_status st = FN(buffers)("conv_grad_input", g, pw, t, &sc, &cols, &sb, &dbuf);
    if (st) return st;
    for (int64_t n0 = 0; n0 < g->n; n0 += t.samples) {
        const int64_t m = HL_MIN(t.samples, g->n - n0);
        for (int64_t oy0 = 0; oy0 < g->oh; oy0 += t.rows) {
            const int64_t r = HL_MIN(t.rows, g->oh - oy0);
            const int64_t pt = r * g->ow;
            for (int64_t grp = 0; grp < g->groups; grp++) {
                const T *A = w + grp * cg * K;
                const T *B = dy + (n0 * CO + grp * cg) * P + oy0 * g->ow;
                int64_t ldb = P;
                if (m > 1) {
                    FN(gather)(g, dy, n0, m, grp, dbuf);
                    B = dbuf;
                    ldb = m * P;
                }
                if (pw) {
                    if (bias && grp == 0) FN(set_bias)(dx + n0 * CI * P, bias, CI, P);
                    FN(gemm)(true, false, K, P, cg, A, K, B, P, bias ? 1 : 0,
                             dx + (n0 * CI + grp * g->cg_in) * P, P);
                } else {
                    FN(gemm)(true, false, K, m * pt, cg, A, K, B, ldb, 0, cols, m * pt);
                    FN(col2im)(g, cols, n0, m, oy0, r, grp * g->cg_in, bias, dx);
                }
            }
        }
    }
    scratch_put(&sc);
    scratch_put(&sb);
    return HL_OK;
}

#undef FN
#undef CONV_CAT
#undef CONV_CAT2
