/*
 * conv_avx2.h - what the float32 AVX2 + FMA convolution kernels share (conv_packed.c, the
 * packed product; conv_dw3x3.c, the depthwise 3x3): whether the CPU has AVX2 and FMA (checked
 * once; HL_CONV_AVX2=0 in the environment turns the kernels off, for tests), and the fused
 * activation on 8 values, computed as conv_epilogue_impl.h computes each value so that a
 * kernel's epilogue in registers gives the bits of the portable one (NaN passes through).
 */
#ifndef HL_CPU_CONV_AVX2_H
#define HL_CPU_CONV_AVX2_H

#include "conv.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HL_CONV_HAVE_X86 1
#define HL_AVX2 __attribute__((target("avx2,fma")))
#else
#define HL_CONV_HAVE_X86 0
#endif

/* Whether the AVX2 + FMA kernels run (the CPU has both, HL_CONV_AVX2 is not 0). */
bool hl_conv_avx2(void);

#if HL_CONV_HAVE_X86
/* An epilogue's activation parameters as vectors, made once per block or plane: made at each
   use they are reloaded (as doubles) and converted for every vector, because a store into the
   outputs may alias the epilogue as far as the compiler knows (-fno-strict-aliasing). */
typedef struct {
    __m256 alpha, beta;
} conv_act8_params;

HL_AVX2 static inline __attribute__((always_inline)) conv_act8_params hl_conv_act8_params(
    const conv_epilogue *e) {
    const conv_act8_params p = {_mm256_set1_ps(e ? (float)e->alpha : 0.0f),
                                _mm256_set1_ps(e ? (float)e->beta : 0.0f)};
    return p;
}

/* The activation act (e's, or a constant where a kernel is specialised for one) on 8 values,
   with its parameters p. */
HL_AVX2 static inline __attribute__((always_inline)) __m256 hl_conv_act8_with(
    int act, conv_act8_params p, __m256 x) {
    const __m256 zero = _mm256_setzero_ps();
    switch (act) {
    case HL_CONV_ACT_RELU:   /* x > 0 or NaN: x; else +0 */
        return _mm256_and_ps(x, _mm256_cmp_ps(x, zero, _CMP_NLE_UQ));
    case HL_CONV_ACT_CLIP: {   /* max_ps(a, b) = a > b ? a : b, so NaN x stays */
        const __m256 t = _mm256_max_ps(p.alpha, x);
        return _mm256_min_ps(p.beta, t);
    }
    case HL_CONV_ACT_LEAKY_RELU: {
        const __m256 neg = _mm256_mul_ps(p.alpha, x);
        return _mm256_blendv_ps(neg, x, _mm256_cmp_ps(x, zero, _CMP_GE_OQ));
    }
    case HL_CONV_ACT_HARD_SIGMOID: {
        /* alpha * x rounded before beta is added, as the element-wise op does: the empty
           asm keeps the compiler from contracting the two into one FMA */
        __m256 ax = _mm256_mul_ps(p.alpha, x);
        __asm__("" : "+x"(ax));
        const __m256 v = _mm256_add_ps(ax, p.beta);
        /* fminf(1, v): 1 when v is NaN; fmaxf(0, u) */
        const __m256 u = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(1)), zero);
        return _mm256_blendv_ps(x, u, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
    }
    default: return x;
    }
}

/* The same with e's parameters made here (outside loops that store). */
HL_AVX2 static inline __attribute__((always_inline)) __m256 hl_conv_act8_as(
    int act, const conv_epilogue *e, __m256 x) {
    return hl_conv_act8_with(act, hl_conv_act8_params(e), x);
}

/* The lanes below n (0..8) of a vector, as a mask for maskload / maskstore. */
HL_AVX2 static inline __m256i hl_conv_mask8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

#endif
