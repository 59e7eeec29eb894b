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
 * erf: x P(x^2) / Q(x^2) with P of degree 6 and Q of degree 5 on x clamped to [-3.92, 3.92]
 * (erf(3.92) = 1 - 5e-9, 1 in float32), the result clamped to [-1, 1] and +-1 exactly from
 * the clamp on: one division, no exp and no second branch. (Before: the Taylor series for
 * |x| < 0.5 and Abramowitz and Stegun's 7.1.26 beyond, both evaluated; BERT's GELU epilogue
 * on a 1024 x 3072 output took 4.3 ms at one thread, now 2.1-2.4.) The coefficients are a
 * weighted least-squares (Lawson) fit of erf(x) / x in x^2 made for hl (the fit's own error
 * under 2e-9; the rest is float32 rounding). Measured against float64 erf: absolute error
 * under 3.6e-7 over all x (A&S's was 1.5e-7), relative under 2.6e-7 for |x| < 0.5 down to
 * 1e-30; NaN stays NaN (tests/ops/test_fast_erf.py). */
#define HL_ERF_CLAMP 3.92f
#define HL_ERF_P0 1.128379225730896f
#define HL_ERF_P1 0.18470042943954468f
#define HL_ERF_P2 0.05427846312522888f
#define HL_ERF_P3 0.0038323760963976383f
#define HL_ERF_P4 0.00038038016646169126f
#define HL_ERF_P5 4.71806242785533e-06f
#define HL_ERF_P6 -1.3337284165970686e-08f
#define HL_ERF_Q1 0.49702003598213196f
#define HL_ERF_Q2 0.11377546936273575f
#define HL_ERF_Q3 0.01543097198009491f
#define HL_ERF_Q4 0.0013050403213128448f
#define HL_ERF_Q5 6.342146662063897e-05f
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
    /* comparisons with a NaN are false: a NaN x goes through unchanged */
    const float c = x < -HL_ERF_CLAMP ? -HL_ERF_CLAMP : (x > HL_ERF_CLAMP ? HL_ERF_CLAMP : x);
    const float t = c * c;
    const float p = HL_ERF_P0 + t * (HL_ERF_P1 + t * (HL_ERF_P2 + t * (HL_ERF_P3 +
                    t * (HL_ERF_P4 + t * (HL_ERF_P5 + t * HL_ERF_P6)))));
    const float q = 1.0f + t * (HL_ERF_Q1 + t * (HL_ERF_Q2 + t * (HL_ERF_Q3 +
                    t * (HL_ERF_Q4 + t * HL_ERF_Q5))));
    const float y = c * p / q;
    /* +-1 exactly from the clamp on (the correctly rounded value; 1 + erf(-inf) must be 0,
       whatever the rounding of the last steps): -inf * (1 + erf(-inf)) is NaN in GELU, as
       in the unfused ops */
    return fabsf(x) >= HL_ERF_CLAMP ? copysignf(1.0f, x) : (y > 1.0f ? 1.0f : (y < -1.0f ? -1.0f : y));
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
