/* parallel.h - small helpers for the CPU kernels' parallel loops: libcore's thread pool
   (thread_pool.h, where the caller takes unclaimed work) and the OpenMP regions not yet moved
   onto it. */
#ifndef HL_CPU_PARALLEL_H
#define HL_CPU_PARALLEL_H

#ifdef _OPENMP
#include <omp.h>
#endif

#include "thread_pool.h"

/* Hot loops (im2col and col2im, the Winograd transforms, the depthwise convolution and the
   max pool's tap loop) are compiled for AVX-512 and AVX2 too and picked at load time, since
   the default build targets baseline x86-64. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define HL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HL_CLONES
#endif

/* The most threads a parallel region started here would get. */
static inline int hl_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* The threads of the enclosing parallel region (1 outside one). */
static inline int hl_team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* This thread's number in the enclosing parallel region or pool loop (0 outside one): below
   hl_max_threads() in an OpenMP region, below hl_pool_threads() in a pool loop's chunk. */
static inline int hl_thread_num(void) {
    if (hl_pool_in_chunk()) return hl_pool_slot();
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

#endif
