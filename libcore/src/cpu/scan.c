/*
 * scan.c - CPU kernels that walk one axis: argmax/argmin (the arg_reduce family) and cumsum.
 *
 * argmax/argmin follow numpy: the first extreme wins (the last with select_last, as ONNX's
 * select_last_index), and a NaN counts as the extreme, so the first NaN wins. The input may be
 * strided; as for the reductions, when a kept axis is closer in memory than the scanned axis
 * (argmax over axis 0 of an (N, C) matrix) a block of columns is scanned row by row.
 *
 * cumsum takes a contiguous input and output (the entry point sees to it), viewed as
 * (outer, axis, inner); a block of the inner axis is carried down the axis at once. Floats add
 * in double, integers in int64 (wrapping, as numpy).
 */
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dtypes.h"
#include "parallel.h"
#include "minmax.h"

enum { BLOCK = 256, PARALLEL_MIN = 32768 };

/* ---- argmax / argmin ---- */

/* take: does v (at a later position) replace the best so far, bv? Written with bitwise
   operators, without branches: the outcome depends on the data and would mispredict. */
#define ARG_FNS(sfx, T, nm, CMP)                                                                  \
    static inline int take_##nm##_##sfx(T v, T bv, int last) {                                   \
        int bn = bv != bv, vn = v != v;                                                          \
        return (bn & last & vn) | ((bn ^ 1) & (vn | (v CMP bv) | (last & (v == bv))));          \
    }                                                                                            \
    /* Best index in [lo, hi) along an axis of stride s, starting from best b (-1: none). */    \
    static int64_t row_##nm##_##sfx(const char *p, int64_t s, int64_t lo, int64_t hi,           \
                                    int64_t b, int last) {                                      \
        const T *x = (const T *)p;                                                               \
        int64_t i = lo;                                                                          \
        if (i >= hi) return b;                                                                   \
        if (b < 0) b = i++;                                                                      \
        T bv = x[b * s];                                                                         \
        for (; i < hi; i++) {                                                                    \
            T v = x[i * s];                                                                      \
            if (take_##nm##_##sfx(v, bv, last)) { bv = v; b = i; }                              \
        }                                                                                        \
        return b;                                                                                \
    }                                                                                            \
    /* Best indices along the axis (length L, stride s) of n columns spaced cs apart. */        \
    static void col_##nm##_##sfx(const char *p, int64_t s, int64_t L, int64_t n, int64_t cs,    \
                                 int64_t *bi, int last) {                                       \
        const T *x = (const T *)p;                                                               \
        T bv[BLOCK];                                                                             \
        for (int64_t j = 0; j < n; j++) { bv[j] = x[j * cs]; bi[j] = 0; }                       \
        for (int64_t i = 1; i < L; i++) {                                                        \
            const T *r = x + i * s;                                                              \
            for (int64_t j = 0; j < n; j++) {                                                    \
                T v = r[j * cs];                                                                 \
                int t = take_##nm##_##sfx(v, bv[j], last);                                       \
                bv[j] = t ? v : bv[j];                                                           \
                bi[j] = t ? i : bi[j];                                                           \
            }                                                                                    \
        }                                                                                        \
    }

#define ARG_TYPE(sfx, T, code) ARG_FNS(sfx, T, max, >) ARG_FNS(sfx, T, min, <)
HL_NUMERIC_TYPES(ARG_TYPE)

/* Floats, contiguous, from scratch: find the extreme with the vectorised loop of minmax.h,
   then the first (or last) position holding it, or holding a NaN when there is one. Two
   passes over the row, both at memory speed, beat one pass whose branches mispredict. */
#define ARG_FAST(sfx, T, nm)                                                                     \
    static int64_t fast_##nm##_##sfx(const char *p, int64_t s, int64_t lo, int64_t hi,          \
                                     int64_t b, int last) {                                     \
        if (b >= 0 || s != 1 || hi - lo < 64) return row_##nm##_##sfx(p, s, lo, hi, b, last);  \
        const T *x = (const T *)p;                                                               \
        bool nan;                                                                                \
        T m = hl_v##nm##_##sfx(x + lo, hi - lo, &nan);                                           \
        int64_t i = hl_vfind_##sfx(x + lo, hi - lo, m, nan, last);                              \
        return i < 0 ? lo : lo + i;                                                              \
    }
ARG_FAST(f32, float, max)
ARG_FAST(f32, float, min)
ARG_FAST(f64, double, max)
ARG_FAST(f64, double, min)

typedef int64_t (*arg_row_fn)(const char *p, int64_t s, int64_t lo, int64_t hi, int64_t b,
                              int last);
typedef void (*arg_col_fn)(const char *p, int64_t s, int64_t L, int64_t n, int64_t cs,
                           int64_t *bi, int last);

static void arg_fns(hl_dtype d, bool mx, arg_row_fn *row, arg_col_fn *col) {
    switch (d) {
#define ARG_CASE(sfx, T, code)                                                                  \
    case code: *row = mx ? row_max_##sfx : row_min_##sfx; *col = mx ? col_max_##sfx : col_min_##sfx; break;
        HL_NUMERIC_TYPES(ARG_CASE)
#undef ARG_CASE
        default: *row = mx ? row_max_u8 : row_min_u8; *col = mx ? col_max_u8 : col_min_u8; break;  /* bool */
    }
    if (d == HL_F32) *row = mx ? fast_max_f32 : fast_min_f32;
    if (d == HL_F64) *row = mx ? fast_max_f64 : fast_min_f64;
}


/* in[0] = x, out[0] (int64); i[0] = axis, i[1] = keepdims, i[2] = select_last. */
hl_status hl_cpu_arg_reduce(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int ax = (int)c->i[0], last = (int)c->i[2];
    bool keep = c->i[1] != 0;
    if (x->dtype == HL_F16 || x->dtype == HL_BF16)
        return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op), hl_desc(x));
    arg_row_fn row;
    arg_col_fn col;
    arg_fns(x->dtype, c->op == HL_OP_ARGMAX, &row, &col);
    int64_t L = x->shape[ax], s = x->strides[ax];
    /* The kept axes (size 1 dropped, evenly spaced neighbours merged), in and out strides. */
    int nk = 0;
    int64_t ks[HL_MAX_DIMS], kx[HL_MAX_DIMS], ko[HL_MAX_DIMS];
    for (int d = 0, oa = 0; d < x->ndim; d++) {
        if (d == ax) {
            oa += keep;
            continue;
        }
        if (x->shape[d] != 1) {
            if (nk > 0 && kx[nk - 1] == x->strides[d] * x->shape[d] &&
                ko[nk - 1] == o->strides[oa] * x->shape[d]) {
                ks[nk - 1] *= x->shape[d];
            } else {
                ks[nk] = x->shape[d];
                nk++;
            }
            kx[nk - 1] = x->strides[d];
            ko[nk - 1] = o->strides[oa];
        }
        oa++;
    }
    int64_t nout = hl_shape_numel(nk, ks);
    if (nout == 0 || L == 0) return HL_OK;
    const char *xb = hl_ptr(x);
    int64_t *ob = (int64_t *)hl_ptr(o), esz = (int64_t)hl_dtype_size(x->dtype);
    int nt = hl_max_threads();
    bool parallel = nout * L >= PARALLEL_MIN && nt > 1;

    if (nk > 0 && ks[nk - 1] >= 4 && llabs(kx[nk - 1]) < llabs(s)) {
        /* Columns: blocks of the innermost kept axis scanned down the axis together. */
        int64_t C = ks[nk - 1], nblk = (C + BLOCK - 1) / BLOCK, items = nout / C * nblk;
#pragma omp parallel for schedule(static) if (parallel && items > 1)
        for (int64_t it = 0; it < items; it++) {
            int64_t j0 = (it % nblk) * BLOCK, n = HL_MIN(BLOCK, C - j0), rem = it / nblk;
            int64_t xo = j0 * kx[nk - 1], oo = j0 * ko[nk - 1];
            for (int d = nk - 2; d >= 0; d--) {
                xo += (rem % ks[d]) * kx[d];
                oo += (rem % ks[d]) * ko[d];
                rem /= ks[d];
            }
            int64_t bi[BLOCK];
            col(xb + xo * esz, s, L, n, kx[nk - 1], bi, last);
            for (int64_t j = 0; j < n; j++) ob[oo + j * ko[nk - 1]] = bi[j];
        }
        return HL_OK;
    }
    if (!parallel || nout >= 4 * nt) {
#pragma omp parallel for schedule(static) if (parallel && nout > 1)
        for (int64_t k = 0; k < nout; k++) {
            int64_t rem = k, xo = 0, oo = 0;
            for (int d = nk - 1; d >= 0; d--) {
                xo += (rem % ks[d]) * kx[d];
                oo += (rem % ks[d]) * ko[d];
                rem /= ks[d];
            }
            ob[oo] = row(xb + xo * esz, s, 0, L, -1, last);
        }
        return HL_OK;
    }
    /* Few outputs, long axis: threads scan parts of each; their winners are then compared in
       position order, which gives the same answer as one scan. */
    int64_t *part = malloc(sizeof(int64_t) * (size_t)(nt * nout));
    if (!part) return hl_fail(HL_ERR_MEMORY, "%s: out of memory", hl_op_str(c->op));
    for (int64_t k = 0; k < nt * nout; k++) part[k] = -1;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0, n = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        n = omp_get_num_threads();
#endif
        int64_t lo = L * tid / n, hi = L * (tid + 1) / n;
        for (int64_t k = 0; k < nout; k++) {
            int64_t rem = k, xo = 0;
            for (int d = nk - 1; d >= 0; d--) {
                xo += (rem % ks[d]) * kx[d];
                rem /= ks[d];
            }
            part[tid * nout + k] = row(xb + xo * esz, s, lo, hi, -1, last);
        }
    }
    for (int64_t k = 0; k < nout; k++) {
        int64_t rem = k, xo = 0, oo = 0, b = -1;
        for (int d = nk - 1; d >= 0; d--) {
            xo += (rem % ks[d]) * kx[d];
            oo += (rem % ks[d]) * ko[d];
            rem /= ks[d];
        }
        for (int t = 0; t < nt; t++) {
            int64_t cand = part[t * nout + k];
            if (cand >= 0) b = row(xb + xo * esz, s, cand, cand + 1, b, last);
        }
        ob[oo] = b;
    }
    free(part);
    return HL_OK;
}

/* ---- cumsum ---- */

/* n columns spaced 1 apart, carried down L rows spaced I apart. AT is the accumulator. */
#define CUMSUM_FN(sfx, T, OT, AT)                                                                \
    static void cum_##sfx(const char *xp, char *op, int64_t L, int64_t I, int64_t n, int excl,  \
                          int rev) {                                                             \
        const T *x = (const T *)xp;                                                              \
        OT *o = (OT *)op;                                                                        \
        AT acc[BLOCK];                                                                           \
        for (int64_t j = 0; j < n; j++) acc[j] = 0;                                              \
        for (int64_t k = 0; k < L; k++) {                                                        \
            int64_t i = rev ? L - 1 - k : k;                                                     \
            const T *xr = x + i * I;                                                             \
            OT *orow = o + i * I;                                                                \
            if (excl) {                                                                          \
                for (int64_t j = 0; j < n; j++) {                                                \
                    AT v = (AT)xr[j]; /* read before the write: out may be x */                  \
                    orow[j] = (OT)acc[j];                                                        \
                    acc[j] += v;                                                                 \
                }                                                                                \
            } else {                                                                             \
                for (int64_t j = 0; j < n; j++) {                                                \
                    acc[j] += (AT)xr[j];                                                         \
                    orow[j] = (OT)acc[j];                                                        \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }

CUMSUM_FN(f32, float, float, double)
CUMSUM_FN(f64, double, double, double)
CUMSUM_FN(i32, int32_t, int64_t, uint64_t)
CUMSUM_FN(i64, int64_t, int64_t, uint64_t)
CUMSUM_FN(u8, uint8_t, int64_t, uint64_t)

typedef void (*cum_fn)(const char *xp, char *op, int64_t L, int64_t I, int64_t n, int excl,
                       int rev);

/* in[0] = x (contiguous), out[0] (contiguous); i[0] = axis, i[1] = exclusive, i[2] = reverse. */
hl_status hl_cpu_cumsum(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int ax = (int)c->i[0], excl = (int)c->i[1], rev = (int)c->i[2];
    cum_fn fn;
    if (x->dtype == HL_F16 || x->dtype == HL_BF16)
        return hl_fail(HL_ERR_DTYPE, "cumsum: no CPU kernel for %s", hl_desc(x));
    switch (x->dtype) {
        case HL_F32: fn = cum_f32; break;
        case HL_F64: fn = cum_f64; break;
        case HL_I32: fn = cum_i32; break;
        case HL_I64: fn = cum_i64; break;
        default: fn = cum_u8; break;  /* uint8, bool */
    }
    int64_t outer = hl_shape_numel(ax, x->shape), L = x->shape[ax];
    int64_t inner = hl_shape_numel(x->ndim - ax - 1, x->shape + ax + 1);
    if (outer * L * inner == 0) return HL_OK;
    const char *xb = hl_ptr(x);
    char *ob = hl_ptr(o);
    int64_t xsz = (int64_t)hl_dtype_size(x->dtype), osz = (int64_t)hl_dtype_size(o->dtype);
    int64_t nblk = (inner + BLOCK - 1) / BLOCK, items = outer * nblk;
#pragma omp parallel for schedule(static) if (outer * L * inner >= PARALLEL_MIN && items > 1)
    for (int64_t it = 0; it < items; it++) {
        int64_t j0 = (it % nblk) * BLOCK, start = (it / nblk) * L * inner + j0;
        fn(xb + start * xsz, ob + start * osz, L, inner, HL_MIN(BLOCK, inner - j0), excl, rev);
    }
    return HL_OK;
}
