/*
 * topk.c - CPU kernel of topk: the k largest (or smallest) elements along an axis, sorted,
 * with their int64 positions.
 *
 * The order is total, so the result does not depend on the algorithm or the threads: by
 * value (descending for largest, ascending for smallest), NaN counted as larger than every
 * number (numpy's sort puts NaN last; so it comes first for largest and last for smallest),
 * and equal values (-0.0 == 0.0, NaN == NaN) by lower index first, as ONNX TopK asks.
 *
 * Each row keeps its best k candidates in a binary heap whose root is the worst of them
 * (O(n log k)), then pops the heap from the back of the output to the front.
 * x is contiguous (the entry point sees to it) and viewed as (outer, n, inner); a row is
 * (o, i) with elements at stride inner. Rows are independent and run in parallel.
 */
#include <stdlib.h>

#include "dtypes.h"
#include "thread_pool.h"

enum { PARALLEL_MIN = 32768 };

/* FIRST(a, b): element a comes before element b in the output order. */
#define IS_NAN(v) ((v) != (v))
#define FIRST_LARGEST(a, b)                                                                   \
    ((a).v > (b).v || ((a).v == (b).v && (a).i < (b).i) ||                                    \
     (IS_NAN((a).v) && (!IS_NAN((b).v) || (a).i < (b).i)))
#define FIRST_SMALLEST(a, b)                                                                  \
    ((a).v < (b).v || ((a).v == (b).v && (a).i < (b).i) ||                                    \
     (IS_NAN((b).v) && (!IS_NAN((a).v) || (a).i < (b).i)))

/* Heap of k candidates (type P, values T), root = the one that comes last in FIRST's order.
   row_<name> writes the row's top k, best first, at stride ostride. */
#define TOPK_ROW(name, P, T, FIRST)                                                           \
    static void sift_##name(P *h, int64_t size, int64_t p) {                                  \
        for (;;) {                                                                            \
            int64_t l = 2 * p + 1, r = l + 1, last = p;                                       \
            if (l < size && FIRST(h[last], h[l])) last = l;                                   \
            if (r < size && FIRST(h[last], h[r])) last = r;                                   \
            if (last == p) return;                                                            \
            P t = h[p];                                                                       \
            h[p] = h[last];                                                                   \
            h[last] = t;                                                                      \
            p = last;                                                                         \
        }                                                                                     \
    }                                                                                         \
    static void row_##name(const T *x, int64_t n, int64_t stride, int64_t k, P *h, T *vals,   \
                           int64_t *idxs, int64_t ostride) {                                  \
        for (int64_t j = 0; j < k; j++) h[j] = (P){x[j * stride], j};                         \
        for (int64_t p = k / 2 - 1; p >= 0; p--) sift_##name(h, k, p);                        \
        for (int64_t j = k; j < n; j++) {                                                     \
            P e = {x[j * stride], j};                                                         \
            if (FIRST(e, h[0])) {                                                             \
                h[0] = e;                                                                     \
                sift_##name(h, k, 0);                                                         \
            }                                                                                 \
        }                                                                                     \
        for (int64_t r = k - 1; r >= 0; r--) {                                                \
            vals[r * ostride] = h[0].v;                                                       \
            idxs[r * ostride] = h[0].i;                                                       \
            h[0] = h[r];                                                                      \
            sift_##name(h, r, 0);                                                             \
        }                                                                                     \
    }

/* One topk call; each chunk of rows allocates one heap of k pairs and reuses it. Rows write
   their own outputs: any split gives the same answer. */
typedef struct {
    const void *x;
    void *v;
    int64_t *ix;
    int64_t n, k, inner;
    bool largest;
} topk_job;

#define TOPK_TYPED(sn, T, code)                                                               \
    typedef struct { T v; int64_t i; } pair_##sn;                                             \
    TOPK_ROW(sn##_max, pair_##sn, T, FIRST_LARGEST)                                           \
    TOPK_ROW(sn##_min, pair_##sn, T, FIRST_SMALLEST)                                          \
    static hl_status topk_rows_##sn(int64_t r0, int64_t r1, void *ctx) {                      \
        const topk_job *q = ctx;                                                              \
        const int64_t n = q->n, k = q->k, inner = q->inner;                                   \
        pair_##sn *h = malloc(sizeof *h * (size_t)k);                                         \
        if (!h)                                                                               \
            return hl_fail(HL_ERR_MEMORY, "topk: out of host memory for a row of k = %lld",   \
                           (long long)k);                                                     \
        for (int64_t r = r0; r < r1; r++) {                                                   \
            int64_t o = r / inner, i = r % inner;                                             \
            const T *row = (const T *)q->x + o * n * inner + i;                               \
            T *v = (T *)q->v + o * k * inner + i;                                             \
            int64_t *ix = q->ix + o * k * inner + i;                                          \
            if (q->largest)                                                                   \
                row_##sn##_max(row, n, inner, k, h, v, ix, inner);                            \
            else                                                                              \
                row_##sn##_min(row, n, inner, k, h, v, ix, inner);                            \
        }                                                                                     \
        free(h);                                                                              \
        return HL_OK;                                                                         \
    }

#define TOPK_TYPES(X) \
    X(f32, float, HL_F32) X(f64, double, HL_F64) X(i32, int32_t, HL_I32) \
    X(i64, int64_t, HL_I64) X(u8, uint8_t, HL_U8)

TOPK_TYPES(TOPK_TYPED)

hl_status hl_cpu_topk(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int64_t k = c->i[0];
    if (k == 0 || hl_tensor_numel(c->out[0]) == 0) return HL_OK;
    hl_range_try_fn rows_fn;
    switch (x->dtype) {
#define TOPK_CASE(sn, T, code) case code: rows_fn = topk_rows_##sn; break;
        TOPK_TYPES(TOPK_CASE)
#undef TOPK_CASE
        default: return hl_fail(HL_ERR_INTERNAL, "topk: dtype %s", hl_dtype_name(x->dtype));
    }
    const int axis = (int)c->i[1];
    topk_job q = {hl_ptr(x), hl_ptr(c->out[0]), (int64_t *)hl_ptr(c->out[1]), x->shape[axis], k,
                  hl_shape_numel(x->ndim - axis - 1, x->shape + axis + 1), c->i[2] != 0};
    const int64_t rows = hl_shape_numel(axis, x->shape) * q.inner;
    return hl_parallel_try(rows, rows * q.n >= PARALLEL_MIN ? 1 : rows, rows_fn, &q);
}
