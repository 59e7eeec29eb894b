/*
 * conv_impl.h - the convolution kernels for one float type. cpu/conv.c includes this file
 * once per type with T (the C type), SFX (the name suffix) and CBLAS_GEMM defined; see the
 * top of conv.c for the method.
 */
#define CONV_CAT2(a, b) a##_##b
#define CONV_CAT(a, b) CONV_CAT2(a, b)
#define FN(name) CONV_CAT(name, SFX)

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

/* Columns of m samples from n0, channels c0 .. c0 + cg_in: row r = (c, ky, kx) holds, for
   each sample, its P output positions; ld = m * P. Padding reads as zero. */
static void FN(im2col)(const conv_geom *g, const T *x, int64_t n0, int64_t m, int64_t c0,
                       T *cols) {
    const int64_t K = g->K, P = g->P, ld = m * P, khw = g->kh * g->kw;
    const int64_t H = g->h, W = g->w, oh = g->oh, ow = g->ow, sw = g->sw;
#pragma omp parallel for collapse(2) schedule(static) if (K * ld > CONV_PAR_MIN)
    for (int64_t nl = 0; nl < m; nl++)
        for (int64_t r = 0; r < K; r++) {
            const int64_t c = r / khw, ky = (r / g->kw) % g->kh, kx = r % g->kw;
            const T *plane = x + ((n0 + nl) * g->c_in + c0 + c) * H * W;
            T *restrict dst = cols + r * ld + nl * P;
            const int64_t off = kx * g->dw - g->pl;
            int64_t lo, hi;
            valid_range(off, sw, W, ow, &lo, &hi);
            for (int64_t oy = 0; oy < oh; oy++) {
                T *restrict d = dst + oy * ow;
                const int64_t iy = oy * g->sh - g->pt + ky * g->dh;
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
}

/* The inverse of im2col: dx planes of m samples from n0, channels c0 .. c0 + cg_in, get the
   sum of their columns (plus bias[c], when given). One thread owns each plane. */
static void FN(col2im)(const conv_geom *g, const T *cols, int64_t n0, int64_t m, int64_t c0,
                       const T *bias, T *dx) {
    const int64_t P = g->P, ld = m * P, H = g->h, W = g->w, oh = g->oh, ow = g->ow;
    const int64_t sw = g->sw, cg = g->cg_in;
#pragma omp parallel for collapse(2) schedule(static) if (g->K * ld > CONV_PAR_MIN)
    for (int64_t nl = 0; nl < m; nl++)
        for (int64_t c = 0; c < cg; c++) {
            T *plane = dx + ((n0 + nl) * g->c_in + c0 + c) * H * W;
            const T init = bias ? bias[c0 + c] : 0;
            for (int64_t i = 0; i < H * W; i++) plane[i] = init;
            for (int64_t ky = 0; ky < g->kh; ky++)
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    const T *src = cols + ((c * g->kh + ky) * g->kw + kx) * ld + nl * P;
                    const int64_t off = kx * g->dw - g->pl;
                    int64_t lo, hi;
                    valid_range(off, sw, W, ow, &lo, &hi);
                    for (int64_t oy = 0; oy < oh; oy++) {
                        const int64_t iy = oy * g->sh - g->pt + ky * g->dh;
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
}

/* y[n0 + nl, grp * cg_out + co, :] = buf[co, nl * P : (nl + 1) * P] + bias. */
static void FN(scatter)(const conv_geom *g, const T *buf, int64_t n0, int64_t m, int64_t grp,
                        const T *bias, T *y) {
    const int64_t P = g->P, cg = g->cg_out;
#pragma omp parallel for collapse(2) schedule(static) if (cg * m * P > CONV_PAR_MIN)
    for (int64_t nl = 0; nl < m; nl++)
        for (int64_t co = 0; co < cg; co++) {
            const int64_t ch = grp * cg + co;
            T *restrict d = y + ((n0 + nl) * g->c_out + ch) * P;
            const T *restrict s = buf + co * m * P + nl * P;
            const T b = bias ? bias[ch] : 0;
            for (int64_t p = 0; p < P; p++) d[p] = s[p] + b;
        }
}

/* buf[co, nl * P + p] = dy[n0 + nl, grp * cg_out + co, p]: a group's gradient as one matrix. */
static void FN(gather)(const conv_geom *g, const T *dy, int64_t n0, int64_t m, int64_t grp,
                       T *buf) {
    const int64_t P = g->P, cg = g->cg_out;
#pragma omp parallel for collapse(2) schedule(static) if (cg * m * P > CONV_PAR_MIN)
    for (int64_t nl = 0; nl < m; nl++)
        for (int64_t co = 0; co < cg; co++) {
            const T *restrict s = dy + ((n0 + nl) * g->c_out + grp * cg + co) * P;
            T *restrict d = buf + co * m * P + nl * P;
            for (int64_t p = 0; p < P; p++) d[p] = s[p];
        }
}

/* planes[n, c, :] += bias[c] for count planes of size P starting at channel 0. */
static void FN(add_bias)(T *planes, const T *bias, int64_t channels, int64_t P) {
#pragma omp parallel for schedule(static) if (channels * P > CONV_PAR_MIN)
    for (int64_t c = 0; c < channels; c++) {
        T *restrict d = planes + c * P;
        const T b = bias[c];
        for (int64_t p = 0; p < P; p++) d[p] += b;
    }
}

/* The column source for group grp of a chunk: x itself for a pointwise conv, else im2col. */
static const T *FN(columns)(const conv_geom *g, bool pw, const T *x, int64_t n0, int64_t m,
                            int64_t grp, T *cols) {
    if (pw) return x + (n0 * g->c_in + grp * g->cg_in) * g->P;
    FN(im2col)(g, x, n0, m, grp * g->cg_in, cols);
    return cols;
}

/* A pointwise conv skips im2col when each sample is a reasonable product on its own. */
static bool FN(direct)(const conv_geom *g) { return is_pointwise(g) && g->P >= 256; }

static hl_status FN(conv_forward)(const conv_geom *g, const T *x, const T *w, const T *bias,
                                  T *y) {
    const int64_t N = g->n, P = g->P, K = g->K, CO = g->c_out, cg = g->cg_out;
    if (N == 0 || CO == 0 || P == 0) return HL_OK;
    const bool pw = FN(direct)(g);
    const int64_t nc = pw ? 1 : chunk_samples(g, sizeof(T));
    scratch sc, so;
    T *cols = NULL, *obuf = NULL;
    hl_status st = scratch_get("conv", &sc, pw ? 0 : (size_t)(K * nc * P) * sizeof(T),
                               (void **)&cols);
    if (!st) st = scratch_get("conv", &so, nc > 1 ? (size_t)(cg * nc * P) * sizeof(T) : 0,
                              (void **)&obuf);
    if (st) {
        scratch_put(&sc);
        return st;
    }
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        const int64_t m = HL_MIN(nc, N - n0);
        for (int64_t grp = 0; grp < g->groups; grp++) {
            const T *B = FN(columns)(g, pw, x, n0, m, grp, cols);
            const T *A = w + grp * cg * K;
            if (m == 1) {
                FN(gemm)(false, false, cg, P, K, A, K, B, P, 0, y + (n0 * CO + grp * cg) * P, P);
            } else {
                FN(gemm)(false, false, cg, m * P, K, A, K, B, m * P, 0, obuf, m * P);
                FN(scatter)(g, obuf, n0, m, grp, bias, y);
            }
        }
        if (m == 1 && bias) FN(add_bias)(y + n0 * CO * P, bias, CO, P);
    }
    scratch_put(&sc);
    scratch_put(&so);
    return HL_OK;
}

static hl_status FN(conv_grad_weight)(const conv_geom *g, const T *dy, const T *x, T *dw) {
    const int64_t N = g->n, P = g->P, K = g->K, CO = g->c_out, cg = g->cg_out;
    if (CO == 0 || K == 0) return HL_OK;
    if (N == 0 || P == 0) {
        memset(dw, 0, (size_t)(CO * K) * sizeof(T));
        return HL_OK;
    }
    const bool pw = FN(direct)(g);
    const int64_t nc = pw ? 1 : chunk_samples(g, sizeof(T));
    scratch sc, sd;
    T *cols = NULL, *dbuf = NULL;
    hl_status st = scratch_get("conv_grad_weight", &sc,
                               pw ? 0 : (size_t)(K * nc * P) * sizeof(T), (void **)&cols);
    if (!st) st = scratch_get("conv_grad_weight", &sd,
                              nc > 1 ? (size_t)(cg * nc * P) * sizeof(T) : 0, (void **)&dbuf);
    if (st) {
        scratch_put(&sc);
        return st;
    }
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        const int64_t m = HL_MIN(nc, N - n0);
        for (int64_t grp = 0; grp < g->groups; grp++) {
            const T *B = FN(columns)(g, pw, x, n0, m, grp, cols);
            const T *A = dy + (n0 * CO + grp * cg) * P;
            if (m > 1) {
                FN(gather)(g, dy, n0, m, grp, dbuf);
                A = dbuf;
            }
            FN(gemm)(false, true, cg, K, m * P, A, m * P, B, m * P, n0 == 0 ? 0 : 1,
                     dw + grp * cg * K, K);
        }
    }
    scratch_put(&sc);
    scratch_put(&sd);
    return HL_OK;
}

static hl_status FN(conv_grad_input)(const conv_geom *g, const T *dy, const T *w, const T *bias,
                                     T *dx) {
    const int64_t N = g->n, P = g->P, K = g->K, CI = g->c_in, cg = g->cg_out;
    if (N == 0 || CI == 0) return HL_OK;
    const int64_t HW = g->h * g->w;
    if (P == 0) {   /* nothing flows back: dx is the bias (or zero) */
        for (int64_t i = 0; i < N * CI; i++)
            for (int64_t j = 0; j < HW; j++) dx[i * HW + j] = bias ? bias[i % CI] : 0;
        return HL_OK;
    }
    const bool pw = FN(direct)(g);
    const int64_t nc = pw ? 1 : chunk_samples(g, sizeof(T));
    scratch sc, sd;
    T *cols = NULL, *dbuf = NULL;
    hl_status st = scratch_get("conv_grad_input", &sc,
                               pw ? 0 : (size_t)(K * nc * P) * sizeof(T), (void **)&cols);
    if (!st) st = scratch_get("conv_grad_input", &sd,
                              nc > 1 ? (size_t)(cg * nc * P) * sizeof(T) : 0, (void **)&dbuf);
    if (st) {
        scratch_put(&sc);
        return st;
    }
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        const int64_t m = HL_MIN(nc, N - n0);
        for (int64_t grp = 0; grp < g->groups; grp++) {
            const T *A = w + grp * cg * K;
            const T *B = dy + (n0 * g->c_out + grp * cg) * P;
            if (m > 1) {
                FN(gather)(g, dy, n0, m, grp, dbuf);
                B = dbuf;
            }
            if (pw) {
                FN(gemm)(true, false, K, P, cg, A, K, B, P, 0,
                         dx + (n0 * CI + grp * g->cg_in) * P, P);
            } else {
                FN(gemm)(true, false, K, m * P, cg, A, K, B, m * P, 0, cols, m * P);
                FN(col2im)(g, cols, n0, m, grp * g->cg_in, bias, dx);
            }
        }
        if (pw && bias) FN(add_bias)(dx + n0 * CI * P, bias, CI, P);
    }
    scratch_put(&sc);
    scratch_put(&sd);
    return HL_OK;
}

#undef FN
#undef CONV_CAT
#undef CONV_CAT2
