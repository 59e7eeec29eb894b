/*
 * reduce_loops.h - the inner loops of the CPU reductions (included by reduce.c only): for each
 * storage type and each kind of accumulation, a row function (many elements into one
 * accumulator) and a column function (rows of elements into a buffer of accumulators, one per
 * column).
 *
 * Accumulators are double for float inputs and 64-bit integers for integer inputs (unsigned
 * arithmetic for sums and products, so overflow wraps as in numpy and is defined). A row is
 * accumulated in LANES independent accumulators, so the loop vectorises and is not bound by the
 * latency of one chain of additions; float sums of long rows also combine blocks pairwise,
 * which keeps float64 rounding error growing with log(n) rather than n. max and min propagate
 * NaN as numpy.max does: x > NaN is false, so a NaN, once in an accumulator, stays.
 */
#ifndef HL_CPU_REDUCE_LOOPS_H
#define HL_CPU_REDUCE_LOOPS_H

#include "dtypes.h"
#include "minmax.h"

typedef union {
    double f;
    int64_t i;
} acc_t;

/* What is accumulated per element. */
enum { K_ADD, K_SQ, K_MUL, K_MAX, K_MIN, K_EXP, K_COUNT };

/* *a = *a (+) x[0], x[s], ..., x[(n-1)s]; shift is the max subtracted before exp (K_EXP). */
typedef void (*row_fn)(const char *p, int64_t n, int64_t s, acc_t *a, double shift);
/* buf[j] = buf[j] (+) x[r*rs + j*s] for j < n, r < nrows; shift[j] for K_EXP. */
typedef void (*col_fn)(acc_t *buf, const char *p, int64_t n, int64_t s, int64_t nrows,
                       int64_t rs, const acc_t *shift);

static inline double max_nan(double a, double b) { return (a > b || a != a) ? a : b; }
static inline double min_nan(double a, double b) { return (a < b || a != a) ? a : b; }
static inline double finite_or_zero(double v) { return isfinite(v) ? v : 0.0; }

enum { LANES = 16, PAIRWISE_LEAF = 2048 };

/* Accumulation expressions: the accumulator a, the element v (already converted to the
   accumulator type), and the per-column shift m for K_EXP. */
#define UP_ADD(a, v, m) ((a) + (v))
#define UP_SQ(a, v, m) ((a) + (v) * (v))
#define UP_MUL(a, v, m) ((a) * (v))
/* | rather than ||: no branch, so the column loops vectorise */
#define UP_MAX(a, v, m) ((((v) > (a)) | ((v) != (v))) ? (v) : (a))
#define UP_MIN(a, v, m) ((((v) < (a)) | ((v) != (v))) ? (v) : (a))
#define UP_EXP(a, v, m) ((a) + exp((v) - (m)))
/* Combining two accumulators of the same kind. */
#define CB_ADD(a, b) ((a) + (b))
#define CB_MUL(a, b) ((a) * (b))
#define CB_MAX(a, b) UP_MAX(a, b, 0)
#define CB_MIN(a, b) UP_MIN(a, b, 0)

/* One leaf of a row in LANES accumulators; AT the accumulator type, init its identity. */
#define ROW_LEAF(name, T, AT, init, UP, CB)                                                     \
    static AT name(const T *x, int64_t n, int64_t s, AT t, AT m) {                              \
        (void)m;                                                                                \
        int64_t i = 0;                                                                          \
        if (s == 1 && n >= LANES) {                                                             \
            AT acc[LANES];                                                                      \
            for (int j = 0; j < LANES; j++) acc[j] = init;                                      \
            for (; i + LANES <= n; i += LANES)                                                  \
                for (int j = 0; j < LANES; j++) {                                               \
                    AT v = (AT)x[i + j];                                                        \
                    acc[j] = UP(acc[j], v, m);                                                  \
                }                                                                               \
            for (int j = 0; j < LANES; j++) t = CB(t, acc[j]);                                  \
        }                                                                                       \
        for (; i < n; i++) {                                                                    \
            AT v = (AT)x[i * s];                                                                \
            t = UP(t, v, m);                                                                    \
        }                                                                                       \
        return t;                                                                               \
    }

/* Four rows at a time where the columns are contiguous: each accumulator is loaded and stored
   once per four elements (the same order of operations, so the same result). */
#define COL_FN(name, T, AT, UP)                                                                 \
    static void name(acc_t *buf, const char *p, int64_t n, int64_t s, int64_t nrows,            \
                     int64_t rs, const acc_t *sh) {                                             \
        AT *restrict b = (AT *)buf;                                                             \
        const T *restrict x = (const T *)p;                                                     \
        int64_t r = 0;                                                                          \
        if (s == 1)                                                                             \
            for (; r + 4 <= nrows; r += 4, x += 4 * rs)                                         \
                for (int64_t j = 0; j < n; j++) {                                               \
                    AT c = b[j], m = sh ? (AT)finite_or_zero(sh[j].f) : 0;                      \
                    (void)m;                                                                    \
                    c = UP(c, (AT)x[j], m);                                                     \
                    c = UP(c, (AT)x[j + rs], m);                                                \
                    c = UP(c, (AT)x[j + 2 * rs], m);                                            \
                    c = UP(c, (AT)x[j + 3 * rs], m);                                            \
                    b[j] = c;                                                                   \
                }                                                                               \
        for (; r < nrows; r++, x += rs)                                                         \
            for (int64_t j = 0; j < n; j++) {                                                   \
                AT v = (AT)x[j * s];                                                            \
                b[j] = UP(b[j], v, sh ? (AT)finite_or_zero(sh[j].f) : 0);                       \
            }                                                                                   \
    }

/* Float types: leaves for every kind, pairwise sums over leaves, row wrappers. */
#define FLOAT_FNS(sfx, T)                                                                       \
    ROW_LEAF(leaf_add_##sfx, T, double, 0.0, UP_ADD, CB_ADD)                                    \
    ROW_LEAF(leaf_sq_##sfx, T, double, 0.0, UP_SQ, CB_ADD)                                      \
    ROW_LEAF(leaf_mul_##sfx, T, double, 1.0, UP_MUL, CB_MUL)                                    \
    ROW_LEAF(leaf_max_##sfx, T, double, -INFINITY, UP_MAX, CB_MAX)                              \
    ROW_LEAF(leaf_min_##sfx, T, double, INFINITY, UP_MIN, CB_MIN)                               \
    static double pairwise_##sfx(const T *x, int64_t n, bool sq) {                              \
        if (n <= PAIRWISE_LEAF) return sq ? leaf_sq_##sfx(x, n, 1, 0, 0) : leaf_add_##sfx(x, n, 1, 0, 0); \
        int64_t h = (n / 2) & ~(int64_t)(LANES - 1);                                            \
        return pairwise_##sfx(x, h, sq) + pairwise_##sfx(x + h, n - h, sq);                     \
    }                                                                                           \
    static void row_add_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        (void)m;                                                                                \
        a->f += s == 1 ? pairwise_##sfx((const T *)p, n, false)                                 \
                       : leaf_add_##sfx((const T *)p, n, s, 0, 0);                              \
    }                                                                                           \
    static void row_sq_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {         \
        (void)m;                                                                                \
        a->f += s == 1 ? pairwise_##sfx((const T *)p, n, true)                                  \
                       : leaf_sq_##sfx((const T *)p, n, s, 0, 0);                               \
    }                                                                                           \
    static void row_mul_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        a->f = leaf_mul_##sfx((const T *)p, n, s, a->f, m);                                     \
    }                                                                                           \
    static void row_max_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        if (s != 1) {                                                                           \
            a->f = leaf_max_##sfx((const T *)p, n, s, a->f, m);                                 \
            return;                                                                             \
        }                                                                                       \
        bool nan;                                                                               \
        T t = hl_vmax_##sfx((const T *)p, n, &nan);                                             \
        a->f = max_nan(a->f, nan ? NAN : t);                                                    \
    }                                                                                           \
    static void row_min_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        if (s != 1) {                                                                           \
            a->f = leaf_min_##sfx((const T *)p, n, s, a->f, m);                                 \
            return;                                                                             \
        }                                                                                       \
        bool nan;                                                                               \
        T t = hl_vmin_##sfx((const T *)p, n, &nan);                                             \
        a->f = min_nan(a->f, nan ? NAN : t);                                                    \
    }                                                                                           \
    static void row_exp_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        const T *x = (const T *)p;                                                              \
        double t = 0, shift = finite_or_zero(m);                                                \
        for (int64_t i = 0; i < n; i++) t += exp((double)x[i * s] - shift);                     \
        a->f += t;                                                                              \
    }                                                                                           \
    COL_FN(col_add_##sfx, T, double, UP_ADD)                                                    \
    COL_FN(col_sq_##sfx, T, double, UP_SQ)                                                      \
    COL_FN(col_mul_##sfx, T, double, UP_MUL)                                                    \
    COL_FN(col_max_##sfx, T, double, UP_MAX)                                                    \
    COL_FN(col_min_##sfx, T, double, UP_MIN)                                                    \
    COL_FN(col_exp_##sfx, T, double, UP_EXP)

FLOAT_FNS(f32, float)
FLOAT_FNS(f64, double)

/* Integer types: sums and products in uint64 (wrapping), max and min in int64. */
#define INT_FNS(sfx, T)                                                                         \
    ROW_LEAF(leaf_add_##sfx, T, uint64_t, 0, UP_ADD, CB_ADD)                                    \
    ROW_LEAF(leaf_mul_##sfx, T, uint64_t, 1, UP_MUL, CB_MUL)                                    \
    ROW_LEAF(leaf_max_##sfx, T, int64_t, INT64_MIN, UP_MAX, CB_MAX)                             \
    ROW_LEAF(leaf_min_##sfx, T, int64_t, INT64_MAX, UP_MIN, CB_MIN)                             \
    static void row_add_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        (void)m;                                                                                \
        a->i = (int64_t)leaf_add_##sfx((const T *)p, n, s, (uint64_t)a->i, 0);                  \
    }                                                                                           \
    static void row_mul_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        (void)m;                                                                                \
        a->i = (int64_t)leaf_mul_##sfx((const T *)p, n, s, (uint64_t)a->i, 0);                  \
    }                                                                                           \
    static void row_max_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        (void)m;                                                                                \
        a->i = leaf_max_##sfx((const T *)p, n, s, a->i, 0);                                     \
    }                                                                                           \
    static void row_min_##sfx(const char *p, int64_t n, int64_t s, acc_t *a, double m) {        \
        (void)m;                                                                                \
        a->i = leaf_min_##sfx((const T *)p, n, s, a->i, 0);                                     \
    }                                                                                           \
    COL_FN(col_add_##sfx, T, uint64_t, UP_ADD)                                                  \
    COL_FN(col_mul_##sfx, T, uint64_t, UP_MUL)                                                  \
    COL_FN(col_max_##sfx, T, int64_t, UP_MAX)                                                   \
    COL_FN(col_min_##sfx, T, int64_t, UP_MIN)

INT_FNS(i32, int32_t)
INT_FNS(i64, int64_t)
INT_FNS(u8, uint8_t)

/* Tables by storage type (bool shares uint8's loops) and kind. */
enum { T_F32, T_F64, T_I32, T_I64, T_U8, T_COUNT };

static const row_fn row_fns[T_COUNT][K_COUNT] = {
    [T_F32] = {row_add_f32, row_sq_f32, row_mul_f32, row_max_f32, row_min_f32, row_exp_f32},
    [T_F64] = {row_add_f64, row_sq_f64, row_mul_f64, row_max_f64, row_min_f64, row_exp_f64},
    [T_I32] = {row_add_i32, NULL, row_mul_i32, row_max_i32, row_min_i32, NULL},
    [T_I64] = {row_add_i64, NULL, row_mul_i64, row_max_i64, row_min_i64, NULL},
    [T_U8] = {row_add_u8, NULL, row_mul_u8, row_max_u8, row_min_u8, NULL},
};
static const col_fn col_fns[T_COUNT][K_COUNT] = {
    [T_F32] = {col_add_f32, col_sq_f32, col_mul_f32, col_max_f32, col_min_f32, col_exp_f32},
    [T_F64] = {col_add_f64, col_sq_f64, col_mul_f64, col_max_f64, col_min_f64, col_exp_f64},
    [T_I32] = {col_add_i32, NULL, col_mul_i32, col_max_i32, col_min_i32, NULL},
    [T_I64] = {col_add_i64, NULL, col_mul_i64, col_max_i64, col_min_i64, NULL},
    [T_U8] = {col_add_u8, NULL, col_mul_u8, col_max_u8, col_min_u8, NULL},
};

static int type_index(hl_dtype d) {
    switch (d) {
        case HL_F32: return T_F32;
        case HL_F64: return T_F64;
        case HL_I32: return T_I32;
        case HL_I64: return T_I64;
        case HL_U8: case HL_BOOL: return T_U8;
        default: return -1;
    }
}

#endif
