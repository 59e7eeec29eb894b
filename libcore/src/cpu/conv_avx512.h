/*
 * conv_avx512.h - conv_avx2.h's fused activation on 16 values, for the AVX-512 convolution
 * kernels (picked where hl_cpu_avx512(), cpu_features.h). Each case computes what
 * hl_conv_act8_with computes, lane for lane, so that a kernel's AVX-512 path gives the bits of
 * its AVX2 path (and of the portable epilogue): masks stand where AVX2 blends on compares.
 */
#ifndef HL_CPU_CONV_AVX512_H
#define HL_CPU_CONV_AVX512_H

#include "conv.h"
#include "cpu_features.h"

#if HL_HAVE_AVX512_KERNELS
#include <immintrin.h>

#define HL_AVX512_INLINE HL_AVX512_TARGET static inline __attribute__((always_inline))

/* An epilogue's activation parameters as vectors, made once per block or plane (see
   conv_act8_params for why not at each use). */
typedef struct {
    __m512 alpha, beta;
} conv_act16_params;

HL_AVX512_INLINE conv_act16_params hl_conv_act16_params(const conv_epilogue *e) {
    const conv_act16_params p = {_mm512_set1_ps(e ? (float)e->alpha : 0.0f),
                                 _mm512_set1_ps(e ? (float)e->beta : 0.0f)};
    return p;
}

/* The activation act on 16 values, with its parameters p. */
HL_AVX512_INLINE __m512 hl_conv_act16_with(int act, conv_act16_params p, __m512 x) {
    const __m512 zero = _mm512_setzero_ps();
    switch (act) {
    case HL_CONV_ACT_RELU:   /* x > 0 or NaN: x; else +0 */
        return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, zero, _CMP_NLE_UQ), x);
    case HL_CONV_ACT_CLIP: {   /* max(a, b) = a > b ? a : b, so NaN x stays */
        const __m512 t = _mm512_max_ps(p.alpha, x);
        return _mm512_min_ps(p.beta, t);
    }
    case HL_CONV_ACT_LEAKY_RELU: {
        const __m512 neg = _mm512_mul_ps(p.alpha, x);
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_GE_OQ), neg, x);
    }
    case HL_CONV_ACT_HARD_SIGMOID: {
        /* alpha * x rounded before beta is added, as the element-wise op does (the empty asm
           keeps the compiler from contracting the two into one FMA) */
        __m512 ax = _mm512_mul_ps(p.alpha, x);
        __asm__("" : "+v"(ax));
        const __m512 v = _mm512_add_ps(ax, p.beta);
        const __m512 u = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(1)), zero);
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), x, u);
    }
    default: return x;
    }
}

/* The lanes below n (0..16) as a mask for masked loads and stores. */
HL_AVX512_INLINE __mmask16 hl_conv_mask16(int64_t n) {
    return (__mmask16)(n >= 16 ? 0xFFFF : (1u << (n < 0 ? 0 : n)) - 1);
}
#endif

#endif
