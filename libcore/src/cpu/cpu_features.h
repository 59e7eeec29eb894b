/*
 * cpu_features.h - which instruction sets the CPU kernels may use, decided once per process.
 *
 * The default build targets baseline x86-64; kernels written for AVX2 + FMA or AVX-512 are
 * compiled for those targets and picked at run time through these questions, so that one
 * wheel runs everywhere and uses what the CPU has. The environment can lower the level (read
 * once, at the first question): HL_CPU_AVX512=0 keeps the AVX-512 kernels off (the AVX2 ones
 * run instead: how tests reach both paths on an AVX-512 machine, and how to compare them).
 * HL_CONV_AVX2=0 (conv_avx2.h) is the older switch for the convolution kernels' AVX2 paths.
 * Loops compiled by HL_CLONES (parallel.h: plain C, copied for AVX-512, AVX2 and baseline)
 * are picked by the loader from the CPU alone, so neither switch reaches them; with
 * -ffp-contract=off (flags.mk) their copies compute the same bits, only wider.
 */
#ifndef HL_CPU_FEATURES_H
#define HL_CPU_FEATURES_H

#include <stdbool.h>

/* AVX-512 F, VL, DQ and BW (every AVX-512 CPU since Skylake-SP has the four), with
   HL_CPU_AVX512 not 0. */
bool hl_cpu_avx512(void);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* A function compiled for AVX-512 (the four sets above, and FMA); call it only where
   hl_cpu_avx512() says so. */
#define HL_AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")))
#define HL_HAVE_AVX512_KERNELS 1
#else
#define HL_HAVE_AVX512_KERNELS 0
#endif

#endif
