/*
 * resize.c - CPU kernels of resize and resize_grad (see api/resize.c for the call record).
 *
 * Resize is separable: along each axis, output position j reads a weighted sum of at most two
 * input positions (one for nearest). Each axis's weights are a small sparse matrix A_d (rows =
 * output positions); the whole op is out = (A_0 (x) A_1 (x) ...) x, and its adjoint, the
 * gradient, is dx = (A_0^T (x) A_1^T (x) ...) dy. Both run through one kernel that, for each
 * destination element, sums over the product of the per-axis rows: a gather, so every element
 * is written by one thread in a fixed order and the gradient is deterministic whatever the
 * thread count. Nearest resize itself moves elements (any dtype) through hl_cpu_remap.
 *
 * The per-axis matrices (and the coordinates, which follow the ONNX Resize definition) are
 * built in resize_weights.h, which the CUDA kernels share. Coordinates follow ONNX; without scales they are computed from the
 * size ratio as one division of exact integers, so ties (x.5 for the nearest rounding) are
 * exact.
 */
#include <math.h>
#include <stdlib.h>

#include "../resize_weights.h"
#include "remap.h"
#include "thread_pool.h"

/* One weighted gather: each chunk of destination rows accumulates a row in double in a
   scratch row of its own (one a pool slot). Rows write their own outputs. */
typedef struct {
    const hl_tensor *src;
    hl_tensor *dst;
    const csr *A;
    double *scratch;
    int64_t w;
} gather_job;

/* dst[j...] = sum over the product of rows A[d][j_d] of prod(weights) * src[idx...]. One
   destination row (last axis) at a time. */
#define WEIGHTED_GATHER(T)                                                                    \
    static void gather_##T(int64_t r0, int64_t r1, void *ctx) {                              \
        const gather_job *q = ctx;                                                            \
        const hl_tensor *src = q->src, *dst = q->dst;                                         \
        const csr *A = q->A;                                                                  \
        const int64_t w = q->w;                                                               \
        int nd = dst->ndim;                                                                   \
        const T *sb = (const T *)hl_ptr(src);                                                 \
        T *db = (T *)hl_ptr(dst);                                                             \
        const csr *L = &A[nd - 1];                                                            \
        int64_t ls = src->strides[nd - 1];                                                    \
        double *acc = q->scratch + (int64_t)hl_pool_slot() * w;                               \
        for (int64_t r = r0; r < r1; r++) {                                                   \
            for (int64_t j = 0; j < w; j++) acc[j] = 0;                                       \
            int64_t jd[HL_MAX_DIMS], k[HL_MAX_DIMS], rem = r, doff = 0;                       \
            bool empty = false;                                                               \
            for (int d = nd - 2; d >= 0; d--) {                                               \
                jd[d] = rem % dst->shape[d];                                                  \
                rem /= dst->shape[d];                                                         \
                doff += jd[d] * dst->strides[d];                                              \
                k[d] = A[d].ptr[jd[d]];                                                       \
                empty |= k[d] == A[d].ptr[jd[d] + 1];                                         \
            }                                                                                 \
            while (!empty) {                                                                  \
                int64_t base = 0;                                                             \
                double wt = 1;                                                                \
                for (int d = 0; d < nd - 1; d++) {                                            \
                    base += A[d].idx[k[d]] * src->strides[d];                                 \
                    wt *= A[d].w[k[d]];                                                       \
                }                                                                             \
                const T *s = sb + base;                                                       \
                for (int64_t j = 0; j < w; j++) {                                             \
                    double v = 0;                                                             \
                    for (int64_t q = L->ptr[j]; q < L->ptr[j + 1]; q++)                       \
                        v += L->w[q] * (double)s[L->idx[q] * ls];                             \
                    acc[j] += wt * v;                                                         \
                }                                                                             \
                int d = nd - 2; /* odometer over the outer axes' rows */                      \
                for (; d >= 0; d--) {                                                         \
                    if (++k[d] < A[d].ptr[jd[d] + 1]) break;                                  \
                    k[d] = A[d].ptr[jd[d]];                                                   \
                }                                                                             \
                if (d < 0) break;                                                             \
            }                                                                                 \
            T *o = db + doff;                                                                 \
            for (int64_t j = 0; j < w; j++) o[j * dst->strides[nd - 1]] = (T)acc[j];          \
        }                                                                                     \
    }

WEIGHTED_GATHER(float)
WEIGHTED_GATHER(double)

static hl_status weighted_gather(const char *op, const hl_tensor *src, hl_tensor *dst,
                                 const csr *A) {
    int nd = dst->ndim;
    int64_t total = hl_shape_numel(nd, dst->shape);
    if (total == 0) return HL_OK;
    if (nd == 0) {
        if (dst->dtype == HL_F32) *(float *)hl_ptr(dst) = *(const float *)hl_ptr(src);
        else *(double *)hl_ptr(dst) = *(const double *)hl_ptr(src);
        return HL_OK;
    }
    int64_t w = dst->shape[nd - 1], rows = total / w;
    int nt = hl_pool_threads();
    double *scratch = malloc(sizeof(double) * (size_t)(w * nt));
    if (!scratch) return hl_fail(HL_ERR_MEMORY, "%s: out of memory for %s", op, hl_desc(dst));
    gather_job q = {src, dst, A, scratch, w};
    hl_parallel_for(rows, rows * w >= 16384 ? 1 : rows,
                    dst->dtype == HL_F32 ? gather_float : gather_double, &q);
    free(scratch);
    return HL_OK;
}

/* Builds the per-axis matrices (x of shape n_in resized to n_out), transposed for the
   gradient, and runs the weighted gather from c->in[0] into c->out[0]. */
static hl_status run(const hl_call *c, const char *op, const int64_t *n_in,
                     const int64_t *n_out, bool adjoint) {
    const hl_tensor *src = c->in[0];
    hl_tensor *dst = c->out[0];
    int nd = dst->ndim;
    csr A[HL_MAX_DIMS] = {{0}};
    hl_status st = HL_OK;
    for (int d = 0; d < nd && !st; d++) {
        csr fwd = {0};
        if (!axis_matrix(&fwd, c, d, n_in[d], n_out[d])) st = HL_ERR_MEMORY;
        else if (adjoint && !transpose(&A[d], &fwd, n_out[d], n_in[d])) st = HL_ERR_MEMORY;
        if (!st && !adjoint) {
            A[d] = fwd;  /* A owns it now */
            fwd = (csr){0};
        }
        csr_free(&fwd);
    }
    if (st) st = hl_fail(HL_ERR_MEMORY, "%s: out of memory for the interpolation weights", op);
    else st = weighted_gather(op, src, dst, A);
    for (int d = 0; d < nd; d++) csr_free(&A[d]);
    return st;
}

hl_status hl_cpu_resize(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int nd = o->ndim;
    if (c->i[0] == 1) return run(c, "resize", x->shape, o->shape, false);
    if (hl_shape_numel(nd, o->shape) == 0) return HL_OK;
    /* nearest: a pure gather of elements, any dtype */
    int64_t *maps[HL_MAX_DIMS];
    int64_t *block = hl_cpu_alloc_maps(nd, o->shape, maps);
    if (!block) return hl_fail(HL_ERR_MEMORY, "resize: out of memory for index maps");
    for (int d = 0; d < nd; d++) {
        const double *scale = c->i[3] ? &c->f[d] : NULL;
        for (int64_t j = 0; j < o->shape[d]; j++)
            maps[d][j] = nearest_index(
                (int)c->i[2], src_coord((int)c->i[1], j, x->shape[d], o->shape[d], scale),
                x->shape[d]);
    }
    hl_cpu_remap(x, o, maps, NULL);
    free(block);
    return HL_OK;
}

hl_status hl_cpu_resize_grad(const hl_call *c) {
    return run(c, "resize_grad", c->out[0]->shape, c->in[0]->shape, true);
}
