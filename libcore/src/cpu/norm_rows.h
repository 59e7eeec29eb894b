/*
 * norm_rows.h - batch norm's float32 output rows, 8 values at a time (cpu/norm_rows.c), for
 * cpu/norm.c's forward pass.
 */
#ifndef HL_CPU_NORM_ROWS_H
#define HL_CPU_NORM_ROWS_H

#include "../core.h"

/* y[i] = epilogue((float)((x[i] - mean) * a + b)) for i < S, r the residual (or NULL), the
   epilogue HL_BN_EPI_* (core.h): exactly norm.c's scalar expressions, in AVX2 where the CPU
   has it (returns true), else nothing done (returns false: the caller's scalar loop runs). */
bool hl_bn_row_f32(const float *x, float *y, const float *r, int64_t S, double mean, double a,
                   double b, int epilogue);

#endif
