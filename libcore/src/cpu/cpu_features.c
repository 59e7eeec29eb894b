/* cpu_features.c - see cpu_features.h. */
#include "cpu_features.h"

#include <stdlib.h>

#include "../core.h"
#include "conv_avx2.h"

bool hl_cpu_avx512(void) {
#if HL_HAVE_AVX512_KERNELS
    static int known = -1;  /* every thread computes the same answer: a benign race */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        const char *env = getenv("HL_CPU_AVX512");  /* 0: the AVX2 kernels instead */
        k = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("fma") && !(env && env[0] == '0' && env[1] == '\0');
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
#else
    return false;
#endif
}

const char *hl_cpu_kernels(void) {
    if (hl_cpu_avx512()) return "avx512";
    return hl_conv_avx2() ? "avx2" : "portable";
}
