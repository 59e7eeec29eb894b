/* gemm_tile.h - matmul_fused.c's micro-kernel (AVX2/FMA where the CPU has it, chosen at run
   time), for other kernels that run small products on operands they pack themselves
   (attention.c). */
#ifndef HL_CPU_GEMM_TILE_H
#define HL_CPU_GEMM_TILE_H

#include <stdint.h>

enum { HL_TILE_MR = 6, HL_TILE_NR = 16 };

/* C[R x 16] = A[R x kc] @ B[kc x 16], R <= 6: A packed HL_TILE_MR values per k (rows past R
   zeros, their sums dropped), B a panel of kc rows of 16 floats; C's rows ldc floats apart. */
void hl_gemm_tile_f32(int R, int64_t kc, const float *a, const float *b, float *c, int64_t ldc);

#endif
