/*
 * blas_layout.h - whether a strided matrix can go to BLAS in place. Shared by the linear-algebra
 * entry points (which copy an operand that cannot) and the CPU kernel (which picks the
 * transpose flag and leading dimension).
 */
#ifndef HL_CPU_BLAS_LAYOUT_H
#define HL_CPU_BLAS_LAYOUT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

/* A rows x cols matrix with element (i, j) at i*s0 + j*s1 is, for row-major BLAS, either a
   plain matrix with leading dimension ld (*trans = false: s1 == 1) or the transpose of one
   (*trans = true: s0 == 1, as in a transposed view). The stride of a size-1 axis never
   matters. ld must fit BLAS's 32-bit int and be at least the row length. */
static inline bool hl_blas_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1,
                                  bool *trans, int64_t *ld) {
    int64_t rmin = rows > 1 ? rows : 1, cmin = cols > 1 ? cols : 1;
    if (cols <= 1 || s1 == 1) {
        int64_t l = rows <= 1 ? cmin : s0;
        if (l >= cmin && l <= INT_MAX) {
            *trans = false;
            *ld = l;
            return true;
        }
    }
    if (rows <= 1 || s0 == 1) {
        int64_t l = cols <= 1 ? rmin : s1;
        if (l >= rmin && l <= INT_MAX) {
            *trans = true;
            *ld = l;
            return true;
        }
    }
    return false;
}

#endif
