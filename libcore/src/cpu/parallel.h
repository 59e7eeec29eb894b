/* parallel.h - small helpers for the CPU kernels' OpenMP loops. */
#ifndef HL_CPU_PARALLEL_H
#define HL_CPU_PARALLEL_H

#ifdef _OPENMP
#include <omp.h>
#endif

/* The most threads a parallel region started here would get. */
static inline int hl_max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* This thread's number in the enclosing parallel region (0 outside one). */
static inline int hl_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

#endif
