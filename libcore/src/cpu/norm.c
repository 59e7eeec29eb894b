/*
 * cpu/norm.c - CPU kernels of batch norm and layer norm, forward and backward (record layouts
 * in api/norm.c). Sums accumulate in double whatever the dtype, and each statistic is summed
 * in a fixed order by one thread, so results do not depend on the thread count.
 *
 * Batch norm sees x as (N, C, S) with S the product of the spatial axes and runs one channel
 * per item of libcore's thread pool. Layer norm sees x as (rows, cols) and runs one row per
 * item; its dscale/dbias sum over rows, so that pass runs one block of columns per item.
 * In-place use (y over x, dx over dy or x) is safe: every element position is read before
 * it is written, and sums over a channel/row finish before its outputs are written.
 */
#include <math.h>
#include <string.h>

#include "dtypes.h"
#include "norm_rows.h"
#include "parallel.h"

enum { PAR_MIN = 16384, COL_BLOCK = 256 };

/* A kernel's parallel loop (libcore's thread pool): the call and its extents (N, C, S for
   batch norm; rows, cols for layer norm). Every item (channel, row, block of columns) is
   computed by one thread in a fixed order, so any split gives the same bits. */
typedef struct {
    const hl_call *c;
    int64_t a, b, s;
} norm_loop;

/* Rows per chunk: about 8192 elements, so a chunk outweighs claiming it. */
static int64_t row_grain(int64_t cols) { return HL_MAX(1, 8192 / HL_MAX(cols, 1)); }

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
   dtype), the output in float32, rounded a few ulp apart from a double computation and
   vectorised 8 wide by the clones (a double output loop is 2 wide in the baseline build:
   BERT's 128 x 768 rows took 134 us, onnxruntime's 73). Mean and variance in one pass over
   x, as sums of d = x - k and d^2 with k = x[0] (when finite): var = E[d^2] - E[d]^2 loses
   only about (mean - k)^2 / var <= cols ulp of double to cancellation (x[0] is within
   sqrt(cols) standard deviations of the mean), far below float32's resolution, where the
   unshifted E[x^2] - mean^2 would lose everything on rows far from 0 (a mean of 1e4, a
   deviation of 1e-2). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
/* The sums of d = x - k and d^2 over x[0, n - n % 16) in double, 16 elements an iteration
   in four accumulators each (the compiler's vectorisation of the loop below kept one chain of
   adds per 8 elements: latency-bound at ~1.2 cycles an element with the output pass). */
__attribute__((target("avx2,fma"))) static void ln_sums_avx2(const float *x, int64_t n,
                                                             double k, double *sum,
                                                             double *sq) {
    const __m256d vk = _mm256_set1_pd(k);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, q0 = s0, q1 = s0, q2 = s0,
            q3 = s0;
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), vk);
        const __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)), vk);
        const __m256d d2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 8)), vk);
        const __m256d d3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 12)), vk);
        s0 = _mm256_add_pd(s0, d0);
        s1 = _mm256_add_pd(s1, d1);
        s2 = _mm256_add_pd(s2, d2);
        s3 = _mm256_add_pd(s3, d3);
        q0 = _mm256_fmadd_pd(d0, d0, q0);
        q1 = _mm256_fmadd_pd(d1, d1, q1);
        q2 = _mm256_fmadd_pd(d2, d2, q2);
        q3 = _mm256_fmadd_pd(d3, d3, q3);
    }
    double a[4], b[4];
    _mm256_storeu_pd(a, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    _mm256_storeu_pd(b, _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3)));
    *sum = (a[0] + a[1]) + (a[2] + a[3]);
    *sq = (b[0] + b[1]) + (b[2] + b[3]);
}
#define HAVE_LN_SUMS_AVX2 1
#endif

HL_CLONES static void ln_row_f32(const float *restrict x, float *restrict y,
                                 const float *restrict g, const float *restrict b, int64_t n,
                                 double eps, double *mean_out, double *inv_out) {
    enum { L = 8 };
    const double k = n && isfinite(x[0]) ? x[0] : 0;
    double s[L] = {0}, q[L] = {0}, sum = 0, sq = 0;
    int64_t i = 0;
#ifdef HAVE_LN_SUMS_AVX2
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        ln_sums_avx2(x, n, k, &sum, &sq);
        i = n - n % 16;
    }
#endif
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) {
            const double d = x[i + l] - k;
            s[l] += d;
            q[l] += d * d;
        }
    for (; i < n; i++) {
        const double d = x[i] - k;
        sum += d;
        sq += d * d;
    }
        for (int l = 0; l < L; l++) {
        sum += s[l];
        sq += q[l];
    }
    const double dm = n ? sum / (double)n : 0, mean = k + dm;
    double var = n ? sq / (double)n - dm * dm : 0;
    var = var < 0 ? 0 : var;  /* rounding; NaN stays NaN */
    /* an empty row has no statistics: mean 0, invstd NaN (as PyTorch) */
    const double inv = n ? 1 / sqrt(var + eps) : NAN;
    /* the mean as float32 m plus its rounding error lo: x - m is exact for x near m
       (Sterbenz), so x - m - lo keeps a row's deviations where m's half-ulp error alone
       would swamp them (a mean of 1e4 with a spread of 1e-2: 5% wrong) */
    const float m = (float)mean, lo = (float)(mean - (double)m), v = (float)inv;
    if (g && b)
        for (i = 0; i < n; i++) y[i] = ((x[i] - m) - lo) * v * g[i] + b[i];
    else if (g)
        for (i = 0; i < n; i++) y[i] = ((x[i] - m) - lo) * v * g[i];
    else if (b)
        for (i = 0; i < n; i++) y[i] = ((x[i] - m) - lo) * v + b[i];
    else
        for (i = 0; i < n; i++) y[i] = ((x[i] - m) - lo) * v;
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

/* A float32 output row by cpu/norm_rows.c (true), or by the scalar loop (float64). */
static inline bool bn_row_fast_f32(const float *x, float *y, const float *r, int64_t S,
                                   double mean, double a, double b, int epilogue) {
    return hl_bn_row_f32(x, y, r, S, mean, a, b, epilogue);
}
static inline bool bn_row_fast_f64(const double *x, double *y, const double *r, int64_t S,
                                   double mean, double a, double b, int epilogue) {
    (void)x, (void)y, (void)r, (void)S, (void)mean, (void)a, (void)b, (void)epilogue;
    return false;
}

#define BN_FORWARD(T, sfx)                                                                   \
    static void bn_forward_channels_##sfx(int64_t ch0, int64_t ch1, void *arg) {             \
        const norm_loop *lp = arg;                                                           \
        const hl_call *c = lp->c;                                                            \
        const int64_t N = lp->a, C = lp->b, S = lp->s;                                       \
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
        for (int64_t ch = ch0; ch < ch1; ch++) {                                             \
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
                if (bn_row_fast_##sfx(xr, yr, res ? res + (n * C + ch) * S : NULL, S, mean,  \
                                      a, b, epilogue))                                       \
                    continue; /* float32 in AVX2: the same bits (cpu/norm_rows.c) */         \
                if (epilogue == HL_BN_EPI_NONE)                                              \
                    for (int64_t i = 0; i < S; i++) yr[i] = (T)((xr[i] - mean) * a + b);     \
                else                                                                         \
                    bn_epilogue_row_##sfx(xr, yr, res ? res + (n * C + ch) * S : NULL, S,    \
                                          mean, a, b, epilogue);                             \
            }                                                                                \
            if (smean) VSET(T, smean, ch, mean);                                             \
            if (sinv) VSET(T, sinv, ch, invstd);                                             \
        }                                                                                    \
    }                                                                                        \
    static void bn_forward_##sfx(const hl_call *c, int64_t N, int64_t C, int64_t S) {        \
        norm_loop lp = {c, N, C, S};                                                         \
        hl_parallel_for(C, C > 1 && N * S * C >= PAR_MIN ? 1 : C, bn_forward_channels_##sfx, \
                        &lp);                                                                \
    }

/* training: the full gradient through the batch statistics; else the statistics are
   constants (inference): dx = dy * scale * invstd. */
#define BN_BACKWARD(T, sfx)                                                                  \
    static void bn_backward_channels_##sfx(int64_t ch0, int64_t ch1, void *arg) {            \
        const norm_loop *lp = arg;                                                           \
        const hl_call *c = lp->c;                                                            \
        const int64_t N = lp->a, C = lp->b, S = lp->s;                                       \
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
        for (int64_t ch = ch0; ch < ch1; ch++) {                                             \
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
    }                                                                                        \
    static void bn_backward_##sfx(const hl_call *c, int64_t N, int64_t C, int64_t S) {       \
        norm_loop lp = {c, N, C, S};                                                         \
        hl_parallel_for(C, C > 1 && N * S * C >= PAR_MIN ? 1 : C, bn_backward_channels_##sfx, \
                        &lp);                                                                \
    }

/* ---- layer norm ---- */

#define LN_FORWARD(T, sfx)                                                                   \
    static void ln_forward_rows_##sfx(int64_t r0, int64_t r1, void *arg) {                   \
        const norm_loop *lp = arg;                                                           \
        const hl_call *c = lp->c;                                                            \
        const int64_t cols = lp->b;                                                          \
        const T *x = (const T *)hl_ptr(c->in[0]);                                            \
        const T *g = c->in[1] ? (const T *)hl_ptr(c->in[1]) : NULL;                          \
        const T *b = c->in[2] ? (const T *)hl_ptr(c->in[2]) : NULL;                          \
        T *y = (T *)hl_ptr(c->out[0]);                                                       \
        T *mo = c->out[1] ? (T *)hl_ptr(c->out[1]) : NULL;                                   \
        T *io = c->out[2] ? (T *)hl_ptr(c->out[2]) : NULL;                                   \
        const double eps = c->f[0];                                                          \
        for (int64_t r = r0; r < r1; r++) {                                                  \
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
    }                                                                                        \
    static void ln_forward_##sfx(const hl_call *c, int64_t rows, int64_t cols) {             \
        norm_loop lp = {c, rows, cols, 0};                                                   \
        hl_parallel_for(rows, rows * cols >= PAR_MIN ? row_grain(cols) : rows,               \
                        ln_forward_rows_##sfx, &lp);                                         \
    }

#define LN_BACKWARD(T, sfx)                                                                  \
    /* dscale and dbias, a block of COL_BLOCK columns an item, each summed over the rows */  \
    static void ln_param_grads_##sfx(int64_t blk0, int64_t blk1, void *arg) {                \
        const norm_loop *lp = arg;                                                           \
        const hl_call *c = lp->c;                                                            \
        const int64_t rows = lp->a, cols = lp->b;                                            \
        const T *dy = (const T *)hl_ptr(c->in[0]), *x = (const T *)hl_ptr(c->in[1]);         \
        const T *mean = (const T *)hl_ptr(c->in[3]), *inv = (const T *)hl_ptr(c->in[4]);     \
        hl_tensor *dscale = grad_out(c, 1), *dbias = grad_out(c, 2);                         \
            T *ds = dscale ? (T *)hl_ptr(dscale) : NULL;                                     \
            T *db = dbias ? (T *)hl_ptr(dbias) : NULL;                                       \
        for (int64_t blk = blk0; blk < blk1; blk++) {                                        \
                const int64_t j0 = blk * COL_BLOCK, w = HL_MIN(COL_BLOCK, cols - j0);        \
                double as[COL_BLOCK], ab[COL_BLOCK];                                         \
                for (int64_t j = 0; j < w; j++) as[j] = ab[j] = 0;                           \
            for (int64_t r = 0; r < rows; r++) {                                             \
                    const T *dr = dy + r * cols + j0, *xr = x + r * cols + j0;               \
                const double m = mean[r], iv = inv[r];                                       \
                for (int64_t j = 0; j < w; j++) {                                            \
                        ab[j] += dr[j];                                                      \
                        as[j] += dr[j] * ((xr[j] - m) * iv);                                 \
                }                                                                            \
            }                                                                                \
            for (int64_t j = 0; j < w; j++) {                                                \
                    if (ds) ds[j0 + j] = (T)as[j];                                           \
                    if (db) db[j0 + j] = (T)ab[j];                                           \
            }                                                                                \
        }                                                                                    \
    }                                                                                        \
    static void ln_input_grad_##sfx(int64_t r0, int64_t r1, void *arg) {                     \
        const norm_loop *lp = arg;                                                           \
        const hl_call *c = lp->c;                                                            \
        const int64_t cols = lp->b;                                                          \
        const T *dy = (const T *)hl_ptr(c->in[0]), *x = (const T *)hl_ptr(c->in[1]);         \
        const T *g = c->in[2] ? (const T *)hl_ptr(c->in[2]) : NULL;                          \
        const T *mean = (const T *)hl_ptr(c->in[3]), *inv = (const T *)hl_ptr(c->in[4]);     \
        T *dxp = (T *)hl_ptr(grad_out(c, 0));                                                \
        for (int64_t r = r0; r < r1; r++) {                                                  \
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
    }                                                                                        \
    static void ln_backward_##sfx(const hl_call *c, int64_t rows, int64_t cols) {            \
        norm_loop lp = {c, rows, cols, 0};                                                   \
        const bool par = rows * cols >= PAR_MIN;                                             \
        /* dscale and dbias first: they read x and dy, which dx may overwrite. */            \
        if (grad_out(c, 1) || grad_out(c, 2)) {                                              \
            const int64_t nblk = (cols + COL_BLOCK - 1) / COL_BLOCK;                         \
            hl_parallel_for(nblk, par ? 1 : nblk, ln_param_grads_##sfx, &lp);                \
        }                                                                                    \
        if (grad_out(c, 0))                                                                  \
            hl_parallel_for(rows, par ? row_grain(cols) : rows, ln_input_grad_##sfx, &lp);   \
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
