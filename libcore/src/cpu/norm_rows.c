/*
 * cpu/norm_rows.c - batch norm's float32 output rows in AVX2: y = (x - mean) a + b in double,
 * rounded to float, then the fused ReLU or residual add + ReLU of plan/fuse_norm.c.
 *
 * The scalar loop (cpu/norm.c) converts each float to double and back, two values a vector in
 * the baseline build (SSE2): ~1 cycle a value, the whole of a recomputed batch norm's cost.
 * Graph mode runs this pass more often than eager: plan/recompute.c makes the ReLU(batch
 * norm) outputs again during the backward from the saved statistics (ResNet-18 CIFAR's
 * training plan: 30 such calls beside the forward's 20 batch norms; batch_norm was 5.4% of
 * the replayed step against 2.0% of the eager one). Here four doubles a vector, with the same
 * operations in the same order as the scalar expression: subtract, multiply, add (no FMA:
 * the target has none, so nothing contracts), round to float; the add of the residual in
 * float in the fused call's operand order, and ReLU as norm.c's (NaN passes, -0 and
 * negatives become +0). So every value is the scalar loop's bit for bit, and a fused, a
 * recomputed and an eager batch norm still agree bit for bit.
 */
/* (x - mean) * a + b as two roundings in every build (an -march=native one has FMA) */
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "norm_rows.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* v > 0 ? v : (v == v ? 0 : v): the bits of v where it is positive or NaN, else +0. */
__attribute__((target("avx2"))) static inline __m256 relu8(__m256 v) {
    const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ),
                                     _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_and_ps(v, keep);
}

static inline float relu1(float v) { return v > 0 ? v : (v == v ? 0 : v); }

__attribute__((target("avx2"))) static void row_avx2(const float *x, float *y, const float *r,
                                                     int64_t S, double mean, double a,
                                                     double b, int epilogue) {
    const __m256d vm = _mm256_set1_pd(mean), va = _mm256_set1_pd(a), vb = _mm256_set1_pd(b);
    int64_t i = 0;
    for (; i + 8 <= S; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        const __m256d lo = _mm256_add_pd(
            _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), vm), va),
            vb);
        const __m256d hi = _mm256_add_pd(
            _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), vm), va),
            vb);
        __m256 v = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
        if (epilogue == HL_BN_EPI_RELU) v = relu8(v);
        else if (epilogue == HL_BN_EPI_ADD_RELU) v = relu8(_mm256_add_ps(v, _mm256_loadu_ps(r + i)));
        else if (epilogue == HL_BN_EPI_RES_ADD_RELU)
            v = relu8(_mm256_add_ps(_mm256_loadu_ps(r + i), v));
        _mm256_storeu_ps(y + i, v);
    }
    for (; i < S; i++) {
        const float v = (float)(((double)x[i] - mean) * a + b);
        if (epilogue == HL_BN_EPI_NONE) y[i] = v;
        else if (epilogue == HL_BN_EPI_RELU) y[i] = relu1(v);
        else if (epilogue == HL_BN_EPI_ADD_RELU) y[i] = relu1((float)(v + r[i]));
        else y[i] = relu1((float)(r[i] + v));
    }
}

static int have_avx2(void) {
    static int known = -1;
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2");
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

bool hl_bn_row_f32(const float *x, float *y, const float *r, int64_t S, double mean, double a,
                   double b, int epilogue) {
    if (!have_avx2()) return false;
    row_avx2(x, y, r, S, mean, a, b, epilogue);
    return true;
}

#else

bool hl_bn_row_f32(const float *x, float *y, const float *r, int64_t S, double mean, double a,
                   double b, int epilogue) {
    (void)x, (void)y, (void)r, (void)S, (void)mean, (void)a, (void)b, (void)epilogue;
    return false;
}

#endif
