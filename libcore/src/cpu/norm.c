/*
 * cpu/norm.c - CPU kernels of batch norm and layer norm, forward and backward (record layouts
 * in api/norm.c). Sums accumulate in double whatever the dtype, and each statistic is summed
 * in a fixed order by one thread, so results do not depend on the thread count.
 *
 * Batch norm sees x as (N, C, S) with S the product of the spatial axes and runs one channel
 * per OpenMP iteration. Layer norm sees x as (rows, cols) and runs one row per iteration;
 * its dscale/dbias sum over rows, so that pass runs one block of columns per iteration.
 * In-place use (y over x, dx over dy or x) is safe: every element position is read before
 * it is written, and sums over a channel/row finish before its outputs are written.
 */
#include <math.h>
#include <string.h>

#include "dtypes.h"
#include "parallel.h"

enum { PAR_MIN = 16384, COL_BLOCK = 256 };

/* Element i of a 1-D (possibly strided) tensor of C type T. */
#define VGET(T, t, i) ((double)((const T *)hl_ptr(t))[(i) * (t)->strides[0]])
#define VSET(T, t, i, v) (((T *)hl_ptr(t))[(i) * (t)->strides[0]] = (T)(v))

/* Optional outputs of the grad kernels: i[1 + k] is the position in out[] or -1. */
static hl_tensor *grad_out(const hl_call *c, int k) {
    int64_t pos = c->i[1 + k];
    return pos >= 0 ? c->out[pos] : NULL;
}

static int64_t prod(const int64_t *shape, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= shape[i];
    return n;
}

/* Sum and sum of squared deviations of a contiguous row, four accumulators for speed. */
#define ROW_HELPERS(T, sfx)                                                                  \
    static inline double row_sum_##sfx(const T *p, int64_t n) {                              \
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                               \
        int64_t i = 0;                                                                       \
        for (; i + 4 <= n; i += 4) {                                                         \
            a0 += p[i]; a1 += p[i + 1]; a2 += p[i + 2]; a3 += p[i + 3];                      \
        }                                                                                    \
        for (; i < n; i++) a0 += p[i];                                                       \
        return (a0 + a1) + (a2 + a3);                                                        \
    }                                                                                        \
    static inline double row_sqdev_##sfx(const T *p, int64_t n, double mean) {               \
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                               \
        int64_t i = 0;                                                                       \
        for (; i + 4 <= n; i += 4) {                                                         \
            double d0 = p[i] - mean, d1 = p[i + 1] - mean, d2 = p[i + 2] - mean,             \
                   d3 = p[i + 3] - mean;                                                     \
            a0 += d0 * d0; a1 += d1 * d1; a2 += d2 * d2; a3 += d3 * d3;                      \
        }                                                                                    \
        for (; i < n; i++) { double d = p[i] - mean; a0 += d * d; }                          \
        return (a0 + a1) + (a2 + a3);                                                        \
    }

/* A float32 layer-norm row, y = (x - mean) inv g + b: the statistics in double (as for every
   dtype; the same sums in another order), the output in float32, rounded a few ulp apart
   from a double computation and vectorised 8 wide by the clones (a double output loop is
   2 wide in the baseline build: BERT's 128 x 768 rows took 134 us, onnxruntime's 73). */
HL_CLONES static void ln_row_f32(const float *restrict x, float *restrict y,
                                 const float *restrict g, const float *restrict b, int64_t n,
                                 double eps, double *mean_out, double *inv_out) {
    enum { L = 8 };
    double s[L] = {0}, q[L] = {0};
    int64_t i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) s[l] += x[i + l];
    double sum = 0;
    for (; i < n; i++) sum += x[i];
    for (int l = 0; l < L; l++) sum += s[l];
    const double mean = n ? sum / (double)n : 0;
    for (i = 0; i + L <= n; i += L)
        for (int l = 0; l < L; l++) {
            const double d = x[i + l] - mean;
            q[l] += d * d;
        }
    double sq = 0;
    for (; i < n; i++) sq += (x[i] - mean) * (x[i] - mean);
    for (int l = 0; l < L; l++) sq += q[l];
    /* an empty row has no statistics: mean 0, invstd NaN (as PyTorch) */
    const double inv = n ? 1 / sqrt(sq / (double)n + eps) : NAN;
    const float m = (float)mean, v = (float)inv;
    if (g && b)
        for (i = 0; i < n; i++) y[i] = (x[i] - m) * v * g[i] + b[i];
    else if (g)
        for (i = 0; i < n; i++) y[i] = (x[i] - m) * v * g[i];
    else if (b)
        for (i = 0; i < n; i++) y[i] = (x[i] - m) * v + b[i];
    else
        for (i = 0; i < n; i++) y[i] = (x[i] - m) * v;
    *mean_out = mean;
    *inv_out = inv;
}

/* ---- batch norm ---- */

/* The gradient reaching batch norm's output with a ReLU's output z fused in (HL_BN_GRAD_RELU):
   relu_grad's z > 0 ? dy : 0 (ops.h), so that the fused call sums exactly the values
   relu_grad would have written. The select is a mask on the bits (+0.0 where z <= 0), not
   a branch (half the masks are 0 and a branch on them mispredicts: the fused
   gradient took 15.6 ms against 4.4 ms unfused at 32x64x32x32). */
#define BN_RELU_DY(dr, zr, i) bn_select((zr)[i] > 0, (dr)[i])

static inline float bn_select_f32(bool keep, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= -(uint32_t)keep;  /* all ones or +0.0's bits */
    memcpy(&v, &bits, sizeof v);
    return v;
}
static inline double bn_select_f64(bool keep, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= -(uint64_t)keep;
    memcpy(&v, &bits, sizeof v);
    return v;
}
#define bn_select(keep, v) _Generic((v), float: bn_select_f32, double: bn_select_f64)(keep, v)

/* A row of y = act((x - mean) a + b [+ r]) for a fused epilogue (plan/fuse_norm.c): each
   value is rounded to T as batch_norm writes it, then added to the residual and rectified
   in T, as the add and relu calls it replaces did (ops.h's expressions), so the fused row is
   bit for bit the three calls. */
#define BN_EPILOGUE_ROW(T, sfx)                                                              \
    static inline T bn_relu_##sfx(T v) { return v > 0 ? v : (v == v ? 0 : v); }              \
    static void bn_epilogue_row_##sfx(const T *xr, T *yr, const T *rr, int64_t S,           \
                                      double mean, double a, double b, int epilogue) {       \
        if (epilogue == HL_BN_EPI_RELU)                                                      \
            for (int64_t i = 0; i < S; i++) yr[i] = bn_relu_##sfx((T)((xr[i] - mean) * a + b)); \
        else if (epilogue == HL_BN_EPI_ADD_RELU)                                             \
            for (int64_t i = 0; i < S; i++) {                                                \
                const T v = (T)((xr[i] - mean) * a + b);                                     \
                yr[i] = bn_relu_##sfx((T)(v + rr[i]));                                       \
            }                                                                                \
        else /* HL_BN_EPI_RES_ADD_RELU: the add's operands the other way round */           \
            for (int64_t i = 0; i < S; i++) {                                                \
                const T v = (T)((xr[i] - mean) * a + b);                                     \
                yr[i] = bn_relu_##sfx((T)(rr[i] + v));                                       \
            }                                                                                \
    }

#define BN_FORWARD(T, sfx)                                                                   \
    static void bn_forward_##sfx(const hl_call *c, int64_t N, int64_t C, int64_t S) {        \
        const T *x = (const T *)hl_ptr(c->in[0]);                                            \
        T *y = (T *)hl_ptr(c->out[0]);                                                       \
        const hl_tensor *scale = c->in[1], *bias = c->in[2];                                 \
        hl_tensor *rmean = (hl_tensor *)c->in[3], *rvar = (hl_tensor *)c->in[4];             \
        hl_tensor *smean = c->out[1], *sinv = c->out[2];                                     \
        const bool training = c->i[0], given = c->i[1] == HL_BN_GIVEN_STATS;                 \
        const double momentum = c->f[0], eps = c->f[1];                                      \
        const int epilogue = (int)c->i[HL_BN_EPILOGUE];                                      \
        const T *res = epilogue >= HL_BN_EPI_ADD_RELU ? (const T *)hl_ptr(c->in[5]) : NULL;  \
        const int64_t M = N * S;                                                             \
        _Pragma("omp parallel for schedule(dynamic, 1) if (C > 1 && M * C >= PAR_MIN)")      \
        for (int64_t ch = 0; ch < C; ch++) {                                                 \
            double mean, invstd;                                                             \
            if (given) { /* in[3], in[4]: the mean and invstd a training call saved */       \
                mean = VGET(T, rmean, ch);                                                   \
                invstd = VGET(T, rvar, ch);                                                  \
            } else if (training) {                                                           \
                double s = 0, q = 0;                                                         \
                for (int64_t n = 0; n < N; n++) s += row_sum_##sfx(x + (n * C + ch) * S, S); \
                mean = M ? s / (double)M : 0;                                                \
                for (int64_t n = 0; n < N; n++)                                              \
                    q += row_sqdev_##sfx(x + (n * C + ch) * S, S, mean);                     \
                double var = M ? q / (double)M : 0;                                          \
                invstd = 1 / sqrt(var + eps);                                                \
                if (rmean && M > 1) { /* PyTorch: the running variance is unbiased */        \
                    VSET(T, rmean, ch, (1 - momentum) * VGET(T, rmean, ch) + momentum * mean); \
                    VSET(T, rvar, ch, (1 - momentum) * VGET(T, rvar, ch) +                   \
                                          momentum * (q / (double)(M - 1)));                 \
                }                                                                            \
                /* y is normalised by the statistics as saved (T), so that a plan can      \
                   recompute it bit for bit from them (HL_BN_GIVEN_STATS) */                 \
                mean = (T)mean;                                                              \
                invstd = (T)invstd;                                                          \
            } else {                                                                         \
                mean = VGET(T, rmean, ch);                                                   \
                invstd = 1 / sqrt(VGET(T, rvar, ch) + eps);                                  \
            }                                                                                \
            const double a = (scale ? VGET(T, scale, ch) : 1) * invstd;                      \
            const double b = bias ? VGET(T, bias, ch) : 0;                                   \
            for (int64_t n = 0; n < N; n++) {                                                \
                const T *xr = x + (n * C + ch) * S;                                          \
                T *yr = y + (n * C + ch) * S;                                                \
                if (epilogue == HL_BN_EPI_NONE)                                              \
                    for (int64_t i = 0; i < S; i++) yr[i] = (T)((xr[i] - mean) * a + b);     \
                else                                                                         \
                    bn_epilogue_row_##sfx(xr, yr, res ? res + (n * C + ch) * S : NULL, S,    \
                                          mean, a, b, epilogue);                             \
            }                                                                                \
            if (smean) VSET(T, smean, ch, mean);                                             \
            if (sinv) VSET(T, sinv, ch, invstd);                                             \
        }                                                                                    \
    }

/* training: the full gradient through the batch statistics; else the statistics are
   constants (inference): dx = dy * scale * invstd. */
#define BN_BACKWARD(T, sfx)                                                                  \
    static void bn_backward_##sfx(const hl_call *c, int64_t N, int64_t C, int64_t S) {       \
        const T *dy = (const T *)hl_ptr(c->in[0]), *x = (const T *)hl_ptr(c->in[1]);         \
        /* HL_BN_GRAD_RELU: in[0] is the gradient of a ReLU's output, in[5] that output */   \
        const T *relu_out = c->i[HL_BN_GRAD_PROLOGUE] == HL_BN_GRAD_RELU                      \
                                ? (const T *)hl_ptr(c->in[5]) : NULL;                        \
        const hl_tensor *scale = c->in[2], *smean = c->in[3], *sinv = c->in[4];              \
        hl_tensor *dx = grad_out(c, 0), *dscale = grad_out(c, 1), *dbias = grad_out(c, 2);   \
        T *dxp = dx ? (T *)hl_ptr(dx) : NULL;                                                \
        const bool training = c->i[0];                                                       \
        const int64_t M = N * S;                                                             \
        const bool need_sums = dscale || dbias || (dx && training);                          \
        _Pragma("omp parallel for schedule(dynamic, 1) if (C > 1 && M * C >= PAR_MIN)")      \
        for (int64_t ch = 0; ch < C; ch++) {                                                 \
            const double mean = VGET(T, smean, ch), invstd = VGET(T, sinv, ch);              \
            const double g = scale ? VGET(T, scale, ch) : 1;                                 \
            double sdy = 0, sdyx = 0; /* sum dy, sum dy * (x - mean) */                      \
            if (need_sums)                                                                   \
                for (int64_t n = 0; n < N; n++) {                                            \
                    const T *dr = dy + (n * C + ch) * S, *xr = x + (n * C + ch) * S;         \
                    if (relu_out) {                                                          \
                        const T *zr = relu_out + (n * C + ch) * S;                           \
                        for (int64_t i = 0; i < S; i++) {                                    \
                            const T d = BN_RELU_DY(dr, zr, i);                               \
                            sdy += d;                                                        \
                            sdyx += d * (xr[i] - mean);                                      \
                        }                                                                    \
                        continue;                                                            \
                    }                                                                        \
                    for (int64_t i = 0; i < S; i++) {                                        \
                        sdy += dr[i];                                                        \
                        sdyx += dr[i] * (xr[i] - mean);                                      \
                    }                                                                        \
                }                                                                            \
            if (dbias) VSET(T, dbias, ch, sdy);                                              \
            if (dscale) VSET(T, dscale, ch, sdyx * invstd);                                  \
            if (!dxp) continue;                                                              \
            const double k = g * invstd;                                                     \
            const double a = training && M ? sdy / (double)M : 0;                            \
            const double b = training && M ? sdyx * invstd * invstd / (double)M : 0;         \
            for (int64_t n = 0; n < N; n++) {                                                \
                const T *dr = dy + (n * C + ch) * S, *xr = x + (n * C + ch) * S;             \
                const T *zr = relu_out ? relu_out + (n * C + ch) * S : NULL;                 \
                T *o = dxp + (n * C + ch) * S;                                               \
                if (training && zr)                                                          \
                    for (int64_t i = 0; i < S; i++)                                          \
                        o[i] = (T)(k * (BN_RELU_DY(dr, zr, i) - a - (xr[i] - mean) * b));    \
                else if (training)                                                           \
                    for (int64_t i = 0; i < S; i++)                                          \
                        o[i] = (T)(k * (dr[i] - a - (xr[i] - mean) * b));                    \
                else if (zr)                                                                 \
                    for (int64_t i = 0; i < S; i++) o[i] = (T)(k * BN_RELU_DY(dr, zr, i));   \
                else                                                                         \
                    for (int64_t i = 0; i < S; i++) o[i] = (T)(k * dr[i]);                   \
            }                                                                                \
        }                                                                                    \
    }

/* ---- layer norm ---- */

#define LN_FORWARD(T, sfx)                                                                   \
    static void ln_forward_##sfx(const hl_call *c, int64_t rows, int64_t cols) {             \
        const T *x = (const T *)hl_ptr(c->in[0]);                                            \
        const T *g = c->in[1] ? (const T *)hl_ptr(c->in[1]) : NULL;                          \
        const T *b = c->in[2] ? (const T *)hl_ptr(c->in[2]) : NULL;                          \
        T *y = (T *)hl_ptr(c->out[0]);                                                       \
        T *mo = c->out[1] ? (T *)hl_ptr(c->out[1]) : NULL;                                   \
        T *io = c->out[2] ? (T *)hl_ptr(c->out[2]) : NULL;                                   \
        const double eps = c->f[0];                                                          \
        _Pragma("omp parallel for schedule(static) if (rows > 1 && rows * cols >= PAR_MIN)") \
        for (int64_t r = 0; r < rows; r++) {                                                 \
            const T *xr = x + r * cols;                                                      \
            T *yr = y + r * cols;                                                            \
            if (sizeof(T) == sizeof(float)) {                                                \
                double mean, inv;                                                            \
                ln_row_f32((const float *)xr, (float *)yr, (const float *)g,                 \
                           (const float *)b, cols, eps, &mean, &inv);                        \
                if (mo) mo[r] = (T)mean;                                                     \
                if (io) io[r] = (T)inv;                                                      \
                continue;                                                                    \
            }                                                                                \
            /* an empty row has no statistics: mean 0, invstd NaN (as PyTorch) */           \
            const double mean = cols ? row_sum_##sfx(xr, cols) / (double)cols : 0;           \
            const double inv =                                                               \
                cols ? 1 / sqrt(row_sqdev_##sfx(xr, cols, mean) / (double)cols + eps) : NAN; \
            if (g && b)                                                                      \
                for (int64_t j = 0; j < cols; j++)                                           \
                    yr[j] = (T)((xr[j] - mean) * inv * g[j] + b[j]);                         \
            else if (g)                                                                      \
                for (int64_t j = 0; j < cols; j++) yr[j] = (T)((xr[j] - mean) * inv * g[j]); \
            else if (b)                                                                      \
                for (int64_t j = 0; j < cols; j++) yr[j] = (T)((xr[j] - mean) * inv + b[j]); \
            else                                                                             \
                for (int64_t j = 0; j < cols; j++) yr[j] = (T)((xr[j] - mean) * inv);        \
            if (mo) mo[r] = (T)mean;                                                         \
            if (io) io[r] = (T)inv;                                                          \
        }                                                                                    \
    }

#define LN_BACKWARD(T, sfx)                                                                  \
    static void ln_backward_##sfx(const hl_call *c, int64_t rows, int64_t cols) {            \
        const T *dy = (const T *)hl_ptr(c->in[0]), *x = (const T *)hl_ptr(c->in[1]);         \
        const T *g = c->in[2] ? (const T *)hl_ptr(c->in[2]) : NULL;                          \
        const T *mean = (const T *)hl_ptr(c->in[3]), *inv = (const T *)hl_ptr(c->in[4]);     \
        hl_tensor *dx = grad_out(c, 0), *dscale = grad_out(c, 1), *dbias = grad_out(c, 2);   \
        /* dscale and dbias first: they read x and dy, which dx may overwrite. */            \
        if (dscale || dbias) {                                                               \
            T *ds = dscale ? (T *)hl_ptr(dscale) : NULL;                                     \
            T *db = dbias ? (T *)hl_ptr(dbias) : NULL;                                       \
            int64_t nblk = (cols + COL_BLOCK - 1) / COL_BLOCK;                               \
            _Pragma("omp parallel for schedule(static) if (nblk > 1 && rows * cols >= PAR_MIN)") \
            for (int64_t blk = 0; blk < nblk; blk++) {                                       \
                const int64_t j0 = blk * COL_BLOCK, w = HL_MIN(COL_BLOCK, cols - j0);        \
                double as[COL_BLOCK], ab[COL_BLOCK];                                         \
                for (int64_t j = 0; j < w; j++) as[j] = ab[j] = 0;                           \
                for (int64_t r = 0; r < rows; r++) {                                         \
                    const T *dr = dy + r * cols + j0, *xr = x + r * cols + j0;               \
                    const double m = mean[r], iv = inv[r];                                   \
                    for (int64_t j = 0; j < w; j++) {                                        \
                        ab[j] += dr[j];                                                      \
                        as[j] += dr[j] * ((xr[j] - m) * iv);                                 \
                    }                                                                        \
                }                                                                            \
                for (int64_t j = 0; j < w; j++) {                                            \
                    if (ds) ds[j0 + j] = (T)as[j];                                           \
                    if (db) db[j0 + j] = (T)ab[j];                                           \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        if (!dx) return;                                                                     \
        T *dxp = (T *)hl_ptr(dx);                                                            \
        _Pragma("omp parallel for schedule(static) if (rows > 1 && rows * cols >= PAR_MIN)") \
        for (int64_t r = 0; r < rows; r++) {                                                 \
            const T *dr = dy + r * cols, *xr = x + r * cols;                                 \
            T *o = dxp + r * cols;                                                           \
            const double m = mean[r], iv = inv[r];                                           \
            double sg = 0, sgx = 0; /* sums of dy * g and dy * g * xhat */                   \
            for (int64_t j = 0; j < cols; j++) {                                             \
                const double gj = g ? dr[j] * (double)g[j] : dr[j];                          \
                sg += gj;                                                                    \
                sgx += gj * ((xr[j] - m) * iv);                                              \
            }                                                                                \
            const double a = sg / (double)cols, b = sgx / (double)cols;                      \
            for (int64_t j = 0; j < cols; j++) {                                             \
                const double gj = g ? dr[j] * (double)g[j] : dr[j];                          \
                o[j] = (T)(iv * (gj - a - (xr[j] - m) * iv * b));                            \
            }                                                                                \
        }                                                                                    \
    }

#define NORM_KERNELS(sfx, T, code) ROW_HELPERS(T, sfx) BN_EPILOGUE_ROW(T, sfx)                \
    BN_FORWARD(T, sfx) BN_BACKWARD(T, sfx) LN_FORWARD(T, sfx) LN_BACKWARD(T, sfx)
HL_FLOAT_TYPES(NORM_KERNELS)

/* ---- dispatch ---- */

static hl_status bad_dtype(const hl_call *c, const hl_tensor *t) {
    return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op), hl_desc(t));
}

hl_status hl_cpu_batch_norm(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim);
    if (x->dtype == HL_F32) bn_forward_f32(c, N, C, S);
    else if (x->dtype == HL_F64) bn_forward_f64(c, N, C, S);
    else return bad_dtype(c, x);
    return HL_OK;
}

hl_status hl_cpu_batch_norm_grad(const hl_call *c) {
    const hl_tensor *x = c->in[1];
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim);
    if (x->dtype == HL_F32) bn_backward_f32(c, N, C, S);
    else if (x->dtype == HL_F64) bn_backward_f64(c, N, C, S);
    else return bad_dtype(c, x);
    return HL_OK;
}

hl_status hl_cpu_layer_norm(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int axis = (int)c->i[0];
    int64_t rows = prod(x->shape, 0, axis), cols = prod(x->shape, axis, x->ndim);
    if (x->dtype == HL_F32) ln_forward_f32(c, rows, cols);
    else if (x->dtype == HL_F64) ln_forward_f64(c, rows, cols);
    else return bad_dtype(c, x);
    return HL_OK;
}

hl_status hl_cpu_layer_norm_grad(const hl_call *c) {
    const hl_tensor *x = c->in[1];
    int axis = (int)c->i[0];
    int64_t rows = prod(x->shape, 0, axis), cols = prod(x->shape, axis, x->ndim);
    if (x->dtype == HL_F32) ln_backward_f32(c, rows, cols);
    else if (x->dtype == HL_F64) ln_backward_f64(c, rows, cols);
    else return bad_dtype(c, x);
    return HL_OK;
}
