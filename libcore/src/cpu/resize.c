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
 * Coordinates follow the ONNX Resize definition; without scales they are computed from the
 * size ratio as one division of exact integers, so ties (x.5 for the nearest rounding) are
 * exact.
 */
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "remap.h"

enum { HALF_PIXEL = 0, ASYMMETRIC = 1, ALIGN_CORNERS = 2, PYTORCH_HALF_PIXEL = 3 };

/* Input coordinate of output position o, along an axis resized from n_in to n_out. */
static double src_coord(int coord, int64_t o, int64_t n_in, int64_t n_out, const double *scale) {
    double od = (double)o;
    switch (coord) {
        case ALIGN_CORNERS:
            return n_out > 1 ? od * (double)(n_in - 1) / (double)(n_out - 1) : 0.0;
        case ASYMMETRIC:
            return scale ? od / *scale : od * (double)n_in / (double)n_out;
        case PYTORCH_HALF_PIXEL:
            if (n_out <= 1) return 0.0;
            /* fall through */
        default: {
            if (scale) return (od + 0.5) / *scale - 0.5;
            double in = (double)n_in, out = (double)n_out;
            return ((2.0 * od + 1.0) * in - out) / (2.0 * out);
        }
    }
}

static int64_t clamp_index(double v, int64_t n) {
    if (!(v > 0)) return 0;  /* also NaN */
    if (v >= (double)(n - 1)) return n - 1;
    return (int64_t)v;
}

static int64_t nearest_index(int rule, double x, int64_t n_in) {
    double r;
    switch (rule) {
        case 0: r = ceil(x - 0.5); break;   /* round, halves down */
        case 1: r = floor(x + 0.5); break;  /* round, halves up */
        case 2: r = floor(x); break;
        default: r = ceil(x); break;
    }
    return clamp_index(r, n_in);
}

/* A sparse matrix in compressed rows: row j has entries ptr[j] .. ptr[j+1]-1. */
typedef struct {
    int64_t *ptr, *idx;
    double *w;
} csr;

static void csr_free(csr *m) {
    free(m->ptr);
    free(m->idx);
    free(m->w);
}

static bool csr_alloc(csr *m, int64_t rows, int64_t nnz) {
    m->ptr = malloc(sizeof(int64_t) * (size_t)(rows + 1));
    m->idx = malloc(sizeof(int64_t) * (size_t)(nnz > 0 ? nnz : 1));
    m->w = malloc(sizeof(double) * (size_t)(nnz > 0 ? nnz : 1));
    return m->ptr && m->idx && m->w;
}

/* The forward matrix of one axis: n_out rows over n_in columns. */
static bool axis_matrix(csr *m, const hl_call *c, int d, int64_t n_in, int64_t n_out) {
    int mode = (int)c->i[0], coord = (int)c->i[1], rule = (int)c->i[2];
    const double *scale = c->i[3] ? &c->f[d] : NULL;
    if (!csr_alloc(m, n_out, 2 * n_out)) return false;
    int64_t nnz = 0;
    for (int64_t j = 0; j < n_out; j++) {
        m->ptr[j] = nnz;
        double x = src_coord(coord, j, n_in, n_out, scale);
        if (mode == 0) {
            m->idx[nnz] = nearest_index(rule, x, n_in);
            m->w[nnz++] = 1.0;
            continue;
        }
        /* linear: coordinates outside [0, n_in - 1] take the edge value */
        x = x > 0 ? x : 0.0;
        x = x < (double)(n_in - 1) ? x : (double)(n_in - 1);
        int64_t i0 = clamp_index(floor(x), n_in), i1 = i0 + 1 < n_in ? i0 + 1 : i0;
        double w1 = x - (double)i0;
        if (w1 == 0 || i1 == i0) {
            m->idx[nnz] = i0;
            m->w[nnz++] = 1.0;
        } else {
            m->idx[nnz] = i0;
            m->w[nnz++] = 1.0 - w1;
            m->idx[nnz] = i1;
            m->w[nnz++] = w1;
        }
    }
    m->ptr[n_out] = nnz;
    return true;
}

/* t = m^T, with n_cols rows; entries of each row stay in increasing order of m's rows. */
static bool transpose(csr *t, const csr *m, int64_t n_rows, int64_t n_cols) {
    int64_t nnz = m->ptr[n_rows];
    if (!csr_alloc(t, n_cols, nnz)) return false;
    memset(t->ptr, 0, sizeof(int64_t) * (size_t)(n_cols + 1));
    for (int64_t k = 0; k < nnz; k++) t->ptr[m->idx[k] + 1]++;
    for (int64_t i = 0; i < n_cols; i++) t->ptr[i + 1] += t->ptr[i];
    int64_t *fill = malloc(sizeof(int64_t) * (size_t)(n_cols > 0 ? n_cols : 1));
    if (!fill) return false;
    memcpy(fill, t->ptr, sizeof(int64_t) * (size_t)n_cols);
    for (int64_t j = 0; j < n_rows; j++)
        for (int64_t k = m->ptr[j]; k < m->ptr[j + 1]; k++) {
            int64_t at = fill[m->idx[k]]++;
            t->idx[at] = j;
            t->w[at] = m->w[k];
        }
    free(fill);
    return true;
}

/* dst[j...] = sum over the product of rows A[d][j_d] of prod(weights) * src[idx...]. One
   destination row (last axis) at a time, accumulated in double in that thread's scratch. */
#define WEIGHTED_GATHER(T)                                                                    \
    static void gather_##T(const hl_tensor *src, hl_tensor *dst, const csr *A, double *scratch, \
                           int64_t rows, int64_t w) {                                         \
        int nd = dst->ndim;                                                                   \
        const T *sb = (const T *)hl_ptr(src);                                                 \
        T *db = (T *)hl_ptr(dst);                                                             \
        const csr *L = &A[nd - 1];                                                            \
        int64_t ls = src->strides[nd - 1];                                                    \
        _Pragma("omp parallel for schedule(static) if (rows * w >= 16384 && rows > 1)")       \
        for (int64_t r = 0; r < rows; r++) {                                                  \
            int tid = 0;                                                                      \
            IF_OPENMP(tid = omp_get_thread_num());                                            \
            double *acc = scratch + (int64_t)tid * w;                                         \
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

#ifdef _OPENMP
#define IF_OPENMP(stmt) stmt
#else
#define IF_OPENMP(stmt)
#endif

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
    int nt = 1;
    IF_OPENMP(nt = omp_get_max_threads());
    double *scratch = malloc(sizeof(double) * (size_t)(w * nt));
    if (!scratch) return hl_fail(HL_ERR_MEMORY, "%s: out of memory for %s", op, hl_desc(dst));
    if (dst->dtype == HL_F32) gather_float(src, dst, A, scratch, rows, w);
    else gather_double(src, dst, A, scratch, rows, w);
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
