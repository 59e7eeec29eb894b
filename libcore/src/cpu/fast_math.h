/*
 * fast_math.h - float32 exp, tanh and erf from arithmetic alone, shared by the element-wise
 * kernels (elementwise.c: the Tanh and Erf ops) and the fused matrix product's GELU epilogues
 * (matmul_fused.c), so that both compute the same values; and softmax's exp (softmax.c,
 * attention.c).
 */
#ifndef HL_CPU_FAST_MATH_H
#define HL_CPU_FAST_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* libm's tanhf is a call per element (about 8 ns); this form has no calls and no branches, so
 * the contiguous loop below vectorises (about 2.4 ns per element with SSE2). |x| < 0.3: the odd
 * Taylor series to x^11 (the next term is below 1e-9 relative). Beyond: 1 - 2 / (e^(2|x|) + 1),
 * e^y by range reduction y = k ln2 + r, |r| <= ln2 / 2 (ln2 split in two so k ln2 is exact),
 * a degree-6 Taylor polynomial in r and 2^k built from its exponent bits. Measured against
 * float64 tanh over [-20, 20] and 1e-30..30: relative error under 2.4e-7 (libm's: 1.6e-7).
 * 2|x| is capped at 80, where the result is 1 in float32 already; NaN stays NaN.
 * erf: |x| < 0.5 by its Taylor series to x^13; beyond, Abramowitz and Stegun's 7.1.26,
 * 1 - (a1 t + ... + a5 t^5) e^(-x^2) with t = 1 / (1 + p|x|), absolute error under 1.5e-7
 * (relative under 3e-7 there, as |erf| >= 0.52). */
static inline float hl_exp_f32(float y) {           /* y in [-87, 80] */
    float t = y * 1.44269504088896341f;
    int32_t k = (int32_t)(t + copysignf(0.5f, t));
    float r = y - (float)k * 0.693145751953125f - (float)k * 1.42860682030941723212e-6f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
              r * (1.0f / 120 + r * (1.0f / 720))))));
    int32_t bits = (k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
static inline float hl_tanh_f32(float x) {
    float a = fabsf(x), y2 = 2.0f * a;
    float big = 1.0f - 2.0f / (hl_exp_f32(y2 < 80.0f ? y2 : 80.0f) + 1.0f);
    float x2 = x * x;
    float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 +
                  x2 * (62.0f / 2835 + x2 * (-1382.0f / 155925))))));
    float y = a < 0.3f ? small : copysignf(big, x);
    return x == x ? y : x;
}
static inline float hl_erf_f32(float x) {
    float a = fabsf(x), x2 = x * x;
    float small = x * 1.12837916709551257f * (1.0f + x2 * (-1.0f / 3 + x2 * (1.0f / 10 +
                  x2 * (-1.0f / 42 + x2 * (1.0f / 216 + x2 * (-1.0f / 1320 +
                  x2 * (1.0f / 9360)))))));
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
                 t * (-1.453152027f + t * 1.061405429f))));
    float e = hl_exp_f32(x2 < 87.0f ? -x2 : -87.0f);
    float y = a < 0.5f ? small : copysignf(1.0f - poly * e, x);
    return x == x ? y : x;
}

/*
 * exp(x) for x <= 0 in float32, written so that loops over it vectorise (glibc's expf does
 * not, short of -ffast-math, and neither does anything with a float comparison in it, so
 * the range tests work on the bits). Softmax (softmax.c, attention.c) only takes exp of
 * x - max <= 0. Range
 * reduction x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so n ln2 is exact), a
 * degree-6 polynomial for exp(r) (Cephes' coefficients; measured error under 1.5 ulp), and
 * 2^n built in the exponent bits. Below -87 the result is 0 (the true value is under
 * 1.7e-38, nothing next to the row maximum's exp(0) = 1); -inf gives 0 and NaN stays NaN.
 */
static inline float hl_exp_nonpos_f32(float x) {
    uint32_t xb;
    memcpy(&xb, &x, sizeof xb);
    const uint32_t mag = xb & 0x7FFFFFFFu;
    /* all ones when x < -87 (x negative, |x| > 87, not NaN): clamp the input, zero the result */
    const uint32_t under =
        0u - (uint32_t)((xb >> 31) & (mag > 0x42AE0000u) & (mag <= 0x7F800000u));
    const uint32_t xcb = (xb & ~under) | (0xC2AE0000u & under); /* 0xC2AE0000 is -87.0f */
    float xc;
    memcpy(&xc, &xcb, sizeof xc);
    const float shift = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    const float t = xc * 1.44269504088896341f + shift;
    const float n = t - shift;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const uint32_t sb = (tb - 0x4B400000u + 127u) << 23; /* 2^n: n sits in t's low bits */
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    const float res = p * scale;
    uint32_t rb;
    memcpy(&rb, &res, sizeof rb);
    rb &= ~under;
    float out;
    memcpy(&out, &rb, sizeof out);
    return out;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define HL_HAVE_EXP_NONPOS_AVX2 1
/* hl_exp_nonpos_f32 on 8 lanes with AVX2/FMA intrinsics, step for step (the same clamp,
 * reduction, Cephes polynomial and exponent bits; the multiply-adds fused, as GCC contracts
 * the scalar form in an AVX2 build), for the kernels whose loops around exp do not vectorise
 * on their own (attention.c's rows: max, exp and sum in registers). -inf gives 0, NaN stays
 * NaN: max(-87, x) keeps a NaN x (maxps returns its second operand when one is NaN). */
__attribute__((target("avx2,fma"))) static inline __m256 hl_exp_nonpos_avx2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.0f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ); /* false for NaN */
    const __m256 xc = _mm256_max_ps(lo, x);
    const __m256 shift = _mm256_set1_ps(12582912.0f);
    const __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), shift);
    const __m256 n = _mm256_sub_ps(t, shift);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    const __m256i sb = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000)),
                         _mm256_set1_epi32(127)), 23);
    const __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(sb));
    return _mm256_andnot_ps(under, res);
}
#endif
#endif
