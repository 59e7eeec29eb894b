/*
 * minmax.h - the max and min of a contiguous float32/float64 run, written with GCC vector
 * extensions (16-byte vectors, four in flight) because GCC does not vectorise a select-based
 * max over an array of lanes by itself, and the scalar loop runs at a twentieth of memory
 * speed. Used by the reductions (reduce.c) and by argmax/argmin (scan.c) to find the extreme
 * before looking for its index.
 *
 * A NaN never wins a comparison (x > NaN and NaN > x are both false), so NaNs are counted on
 * the side and *has_nan reports whether there was one.
 */
#ifndef HL_CPU_MINMAX_H
#define HL_CPU_MINMAX_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../core.h"

typedef float hl_vf32 __attribute__((vector_size(16)));
typedef int32_t hl_vi32 __attribute__((vector_size(16)));
typedef double hl_vf64 __attribute__((vector_size(16)));
typedef int64_t hl_vi64 __attribute__((vector_size(16)));

/* T name(const T *x, int64_t n, bool *has_nan): the extreme (init when n == 0) of x[0..n). */
#define HL_VEC_EXTREME(name, T, VT, IT, CMP, init)                                              \
    static inline T name(const T *x, int64_t n, bool *has_nan) {                                \
        enum { W = (int)(sizeof(VT) / sizeof(T)), NV = 4 };                                     \
        VT acc[NV];                                                                             \
        IT bad[NV];                                                                             \
        for (int k = 0; k < NV; k++)                                                            \
            for (int j = 0; j < W; j++) {                                                       \
                acc[k][j] = (init);                                                             \
                bad[k][j] = 0;                                                                  \
            }                                                                                   \
        int64_t i = 0;                                                                          \
        for (; i + W * NV <= n; i += W * NV)                                                    \
            for (int k = 0; k < NV; k++) {                                                      \
                VT v;                                                                           \
                memcpy(&v, x + i + k * W, sizeof v);                                            \
                IT take = v CMP acc[k];                                                         \
                acc[k] = (VT)(((IT)v & take) | ((IT)acc[k] & ~take));                           \
                bad[k] |= v != v;                                                               \
            }                                                                                   \
        T t = (init);                                                                           \
        bool nan = false;                                                                       \
        for (int k = 0; k < NV; k++)                                                            \
            for (int j = 0; j < W; j++) {                                                       \
                t = acc[k][j] CMP t ? acc[k][j] : t;                                            \
                nan |= bad[k][j] != 0;                                                          \
            }                                                                                   \
        for (; i < n; i++) {                                                                    \
            t = x[i] CMP t ? x[i] : t;                                                          \
            nan |= x[i] != x[i];                                                                \
        }                                                                                       \
        *has_nan = nan;                                                                         \
        return t;                                                                               \
    }

HL_VEC_EXTREME(hl_vmax_f32, float, hl_vf32, hl_vi32, >, -INFINITY)
HL_VEC_EXTREME(hl_vmin_f32, float, hl_vf32, hl_vi32, <, INFINITY)
HL_VEC_EXTREME(hl_vmax_f64, double, hl_vf64, hl_vi64, >, -INFINITY)
HL_VEC_EXTREME(hl_vmin_f64, double, hl_vf64, hl_vi64, <, INFINITY)

/* int64_t name(const T *x, int64_t n, T m, bool nan, bool last): the first (or last) i with
   x[i] == m, or with x[i] a NaN when nan; -1 when there is none. Blocks of four vectors are
   tested at once, then the block that hits is searched element by element. */
#define HL_VEC_FIND(name, T, VT, IT)                                                             \
    static inline int64_t name(const T *x, int64_t n, T m, bool nan, bool last) {              \
        enum { W = (int)(sizeof(VT) / sizeof(T)), B = 4 * W };                                  \
        int64_t nblk = n / B;                                                                   \
        for (int64_t q = 0; q <= nblk; q++) {                                                   \
            /* blocks in order of the search; the partial block (index nblk) at its end */      \
            int64_t blk = last ? nblk - q : q, lo = blk * B, hi = HL_MIN(n, lo + B);            \
            if (blk < nblk) {                                                                   \
                IT any = {0};                                                                   \
                for (int k = 0; k < 4; k++) {                                                   \
                    VT v;                                                                       \
                    memcpy(&v, x + lo + k * W, sizeof v);                                       \
                    any |= nan ? (IT)(v != v) : (IT)(v == m);                                   \
                }                                                                               \
                bool hit = false;                                                               \
                for (int j = 0; j < W; j++) hit |= any[j] != 0;                                 \
                if (!hit) continue;                                                             \
            }                                                                                   \
            for (int64_t c = 0; c < hi - lo; c++) {                                             \
                int64_t i = last ? hi - 1 - c : lo + c;                                         \
                if (nan ? x[i] != x[i] : x[i] == m) return i;                                   \
            }                                                                                   \
        }                                                                                       \
        return -1;                                                                              \
    }

HL_VEC_FIND(hl_vfind_f32, float, hl_vf32, hl_vi32)
HL_VEC_FIND(hl_vfind_f64, double, hl_vf64, hl_vi64)

#endif
