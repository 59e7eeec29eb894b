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


/* An arg_reduce: the kept axes' shape and strides (in x and out), the scanned axis. Any
   split of the work gives the same indices: winners are compared in position order. */
typedef struct {
    arg_row_fn row;
    arg_col_fn col;
    int nk, last;
    int64_t ks[HL_MAX_DIMS], kx[HL_MAX_DIMS], ko[HL_MAX_DIMS];
    int64_t L, s, nout, esz, nblk, slices;
    const char *xb;
    int64_t *ob, *part;
} arg_job;

/* Offsets in x and out of kept position k (row-major over the kept axes from axis `from`
   down), k counting from 0 over those axes. */
static void arg_offsets(const arg_job *q, int from, int64_t k, int64_t *xo, int64_t *oo) {
    for (int d = from; d >= 0; d--) {
        *xo += (k % q->ks[d]) * q->kx[d];
        *oo += (k % q->ks[d]) * q->ko[d];
        k /= q->ks[d];
    }
}

/* Items [i0, i1): (outer position, block of BLOCK columns), scanned down the axis together. */
static void arg_col_blocks(int64_t i0, int64_t i1, void *ctx) {
    const arg_job *q = ctx;
    const int nk = q->nk;
    for (int64_t it = i0; it < i1; it++) {
        int64_t j0 = (it % q->nblk) * BLOCK, n = HL_MIN(BLOCK, q->ks[nk - 1] - j0);
        int64_t xo = j0 * q->kx[nk - 1], oo = j0 * q->ko[nk - 1];
        arg_offsets(q, nk - 2, it / q->nblk, &xo, &oo);
        int64_t bi[BLOCK];
        q->col(q->xb + xo * q->esz, q->s, q->L, n, q->kx[nk - 1], bi, q->last);
        for (int64_t j = 0; j < n; j++) q->ob[oo + j * q->ko[nk - 1]] = bi[j];
    }
}

/* Outputs [k0, k1), each a whole scan. */
static void arg_outputs(int64_t k0, int64_t k1, void *ctx) {
    const arg_job *q = ctx;
    for (int64_t k = k0; k < k1; k++) {
        int64_t xo = 0, oo = 0;
        arg_offsets(q, q->nk - 1, k, &xo, &oo);
        q->ob[oo] = q->row(q->xb + xo * q->esz, q->s, 0, q->L, -1, q->last);
    }
}

/* Slices [t0, t1) of the axis: each slice's winner of every output. */
static void arg_slices(int64_t t0, int64_t t1, void *ctx) {
    const arg_job *q = ctx;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = q->L * t / q->slices, hi = q->L * (t + 1) / q->slices;
        for (int64_t k = 0; k < q->nout; k++) {
            int64_t xo = 0, oo = 0;
            arg_offsets(q, q->nk - 1, k, &xo, &oo);
            q->part[t * q->nout + k] = q->row(q->xb + xo * q->esz, q->s, lo, hi, -1, q->last);
        }
    }
}

/* in[0] = x, out[0] (int64); i[0] = axis, i[1] = keepdims, i[2] = select_last. */
hl_status hl_cpu_arg_reduce(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int ax = (int)c->i[0];
    bool keep = c->i[1] != 0;
    if (x->dtype == HL_F16 || x->dtype == HL_BF16)
        return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op), hl_desc(x));
    arg_job q = {.last = (int)c->i[2], .L = x->shape[ax], .s = x->strides[ax]};
    arg_fns(x->dtype, c->op == HL_OP_ARGMAX, &q.row, &q.col);
    /* The kept axes (size 1 dropped, evenly spaced neighbours merged), in and out strides. */
    int nk = 0;
    int64_t *ks = q.ks, *kx = q.kx, *ko = q.ko;
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
    q.nk = nk;
    const int64_t nout = q.nout = hl_shape_numel(nk, ks), L = q.L;
    if (nout == 0 || L == 0) return HL_OK;
    q.xb = hl_ptr(x);
    q.ob = (int64_t *)hl_ptr(o);
    q.esz = (int64_t)hl_dtype_size(x->dtype);
    const int nt = hl_pool_threads();
    const bool parallel = nout * L >= PARALLEL_MIN && nt > 1;

    if (nk > 0 && ks[nk - 1] >= 4 && llabs(kx[nk - 1]) < llabs(q.s)) {
        /* Columns: blocks of the innermost kept axis scanned down the axis together. */
        q.nblk = (ks[nk - 1] + BLOCK - 1) / BLOCK;
        const int64_t items = nout / ks[nk - 1] * q.nblk;
        hl_parallel_for(items, parallel ? 1 : items, arg_col_blocks, &q);
        return HL_OK;
    }
    if (!parallel || nout >= 4 * nt) {
        hl_parallel_for(nout, parallel ? 1 : nout, arg_outputs, &q);
        return HL_OK;
    }
    /* Few outputs, long axis: slices of the axis scan parts of each; their winners are then
       compared in position order, which gives the same answer as one scan. */
    q.slices = HL_MIN(4 * (int64_t)nt, L);
    q.part = malloc(sizeof(int64_t) * (size_t)(q.slices * nout));
    if (!q.part) return hl_fail(HL_ERR_MEMORY, "%s: out of memory", hl_op_str(c->op));
    hl_parallel_for(q.slices, 1, arg_slices, &q);
    for (int64_t k = 0; k < nout; k++) {
        int64_t xo = 0, oo = 0, b = -1;
        arg_offsets(&q, nk - 1, k, &xo, &oo);
        for (int64_t t = 0; t < q.slices; t++) {
            int64_t cand = q.part[t * nout + k];
            if (cand >= 0) b = q.row(q.xb + xo * q.esz, q.s, cand, cand + 1, b, q.last);
        }
        q.ob[oo] = b;
    }
    free(q.part);
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

typedef struct {
    cum_fn fn;
    const char *xb;
    char *ob;
    int64_t xsz, osz, L, inner, nblk;
    int excl, rev;
} cum_job;

/* Items [i0, i1): (outer position, block of BLOCK inner columns), each carried down the axis. */
static void cum_blocks(int64_t i0, int64_t i1, void *ctx) {
    const cum_job *q = ctx;
    for (int64_t it = i0; it < i1; it++) {
        int64_t j0 = (it % q->nblk) * BLOCK, start = (it / q->nblk) * q->L * q->inner + j0;
        q->fn(q->xb + start * q->xsz, q->ob + start * q->osz, q->L, q->inner,
              HL_MIN(BLOCK, q->inner - j0), q->excl, q->rev);
    }
}

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
    cum_job q = {fn, xb, ob, xsz, osz, L, inner, (inner + BLOCK - 1) / BLOCK, excl, rev};
    const int64_t items = outer * q.nblk;
    hl_parallel_for(items, outer * L * inner >= PARALLEL_MIN ? 1 : items, cum_blocks, &q);
    return HL_OK;
}
