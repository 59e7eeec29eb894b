/*
 * index.c - CPU kernels of the indexing family: gather, gather_grad, gather_elements,
 * scatter_elements, one_hot and nonzero (topk lives in topk.c).
 *
 * The entry points (api/index.c) hand over contiguous indices (and contiguous data, except
 * for gather_elements' x, read through offset tables). The kernels check every index value
 * first and fail before writing anything: the values are data, which the entry point could
 * not see when a plan was recorded. Moves that do no arithmetic go by element size, so they
 * serve every dtype (bool and float16 included).
 *
 * Determinism: every output element is written by one thread, and the contributions to it
 * arrive in index order, so results do not depend on the thread count (gather_grad's sums
 * included).
 */
#include <stdlib.h>

#include "dtypes.h"
#include "parallel.h"

enum { PARALLEL_MIN = 32768, CHUNK = 4096 };


static inline int64_t load_index(const void *base, bool wide, int64_t k) {
    return wide ? ((const int64_t *)base)[k] : (int64_t)((const int32_t *)base)[k];
}

/* An index in [-n, n) as a position in [0, n). */
static inline int64_t wrap_index(int64_t v, int64_t n) { return v < 0 ? v + n : v; }

/* Fails naming the first index outside [-n, n). The scan without an early exit vectorises;
   the second pass only runs when something is wrong. */
static hl_status check_indices(const char *op, const hl_tensor *ix, int64_t n, int64_t axis) {
    int64_t count = hl_tensor_numel(ix);
    const void *p = hl_ptr(ix);
    bool wide = ix->dtype == HL_I64, ok = true;
    if (wide) {
        const int64_t *q = p;
        for (int64_t k = 0; k < count; k++) ok &= (q[k] >= -n) & (q[k] < n);
    } else {
        const int32_t *q = p;
        for (int64_t k = 0; k < count; k++) ok &= (q[k] >= -n) & (q[k] < n);
    }
    if (ok) return HL_OK;
    for (int64_t k = 0; k < count; k++) {
        int64_t v = load_index(p, wide, k);
        if (v >= -n && v < n) continue;
        if (n == 0)
            return hl_fail(HL_ERR_INDEX, "%s: index %lld is out of range: axis %lld has size 0",
                           op, (long long)v, (long long)axis);
        return hl_fail(HL_ERR_INDEX, "%s: index %lld is out of range for axis %lld of size %lld "
                       "(valid indices are %lld to %lld)", op, (long long)v, (long long)axis,
                       (long long)n, (long long)-n, (long long)(n - 1));
    }
    return HL_OK;
}

/* The unsigned type of each element size, for moves that do not look at the value. */
#define MOVE_SIZES(X) X(1, uint8_t) X(2, uint16_t) X(4, uint32_t) X(8, uint64_t)

/* ---- gather: y[o, j, i] = x[o, idx[j], i]; x (outer, n, inner), y (outer, m, inner) ---- */

typedef struct {
    const char *xb;
    char *yb;
    const void *ib;
    bool wide;
    int64_t n, m;
    size_t esz, row;  /* row: bytes of one index's slice (inner elements) */
} gather_job;

/* Items [t0, t1) of (o, j) = (t / m, t % m): y[o, j, :] = x[o, idx[j], :]. With one element
   an index (inner == 1) the moves are typed rather than tiny memcpys. */
static void gather_items(int64_t t0, int64_t t1, void *ctx) {
    const gather_job *q = ctx;
    const int64_t n = q->n, m = q->m;
    if (q->row == q->esz) {
        switch (q->esz) {
#define GATHER_ONE(size, T)                                                                 \
        case size: {                                                                        \
            const T *xs = (const T *)q->xb;                                                 \
            T *ys = (T *)q->yb;                                                             \
            for (int64_t t = t0, o = t0 / m, j = t0 % m; t < t1; t++) {                     \
                ys[t] = xs[o * n + wrap_index(load_index(q->ib, q->wide, j), n)];           \
                if (++j == m) j = 0, o++;                                                   \
            }                                                                               \
            return;                                                                         \
        }
            MOVE_SIZES(GATHER_ONE)
#undef GATHER_ONE
            default: break;
        }
    }
    for (int64_t t = t0, o = t0 / m, j = t0 % m; t < t1; t++) {
        int64_t k = wrap_index(load_index(q->ib, q->wide, j), n);
        memcpy(q->yb + (size_t)t * q->row, q->xb + (size_t)(o * n + k) * q->row, q->row);
        if (++j == m) j = 0, o++;
    }
}

hl_status hl_cpu_gather(const hl_call *c) {
    const hl_tensor *x = c->in[0], *ix = c->in[1];
    hl_tensor *y = c->out[0];
    int axis = (int)c->i[0];
    int64_t n = x->shape[axis], m = hl_tensor_numel(ix);
    int64_t outer = hl_shape_numel(axis, x->shape);
    int64_t inner = hl_shape_numel(x->ndim - axis - 1, x->shape + axis + 1);
    hl_status st = check_indices("gather", ix, n, axis);
    if (st || outer * m * inner == 0) return st;
    size_t esz = hl_dtype_size(x->dtype);
    gather_job q = {hl_ptr(x), hl_ptr(y), hl_ptr(ix), ix->dtype == HL_I64, n, m, esz,
                    (size_t)inner * esz};
    const int64_t items = outer * m;
    /* every (o, j) writes its own slice of y */
    hl_parallel_for(items,
                    outer * m * inner >= PARALLEL_MIN ? HL_MAX(1, CHUNK / HL_MAX(inner, 1))
                                                      : items,
                    gather_items, &q);
    return HL_OK;
}

/* ---- gather_grad: dx = zeros(outer, n, inner); dx[o, idx[j], :] += dy[o, j, :] ----
   Work is split over (o, a block of destination rows): a task owns its rows of dx, zeroes
   them, then walks every j in order and adds the ones that land in its rows. Repeated
   indices are summed in j order whatever the thread count. With few o, the rows are split
   into enough blocks to keep every thread busy. */

typedef struct {
    void *dx;
    const void *dy, *ib;
    bool wide;
    int64_t n, m, inner, blocks;
} gather_grad_job;

#define GATHER_GRAD(T)                                                                       \
    static void gather_grad_##T(int64_t t0, int64_t t1, void *ctx) {                         \
        const gather_grad_job *q = ctx;                                                      \
        const int64_t n = q->n, m = q->m, inner = q->inner, blocks = q->blocks;              \
        for (int64_t t = t0; t < t1; t++) {                                                  \
            int64_t o = t / blocks, b = t % blocks;                                          \
            int64_t lo = n * b / blocks, hi = n * (b + 1) / blocks;                          \
            T *dxo = (T *)q->dx + o * n * inner;                                             \
            const T *dyo = (const T *)q->dy + o * m * inner;                                 \
            memset(dxo + lo * inner, 0, sizeof(T) * (size_t)((hi - lo) * inner));            \
            for (int64_t j = 0; j < m; j++) {                                                \
                int64_t k = wrap_index(load_index(q->ib, q->wide, j), n);                    \
                if (k < lo || k >= hi) continue;                                             \
                T *restrict d = dxo + k * inner;                                             \
                const T *restrict s = dyo + j * inner;                                       \
                for (int64_t i = 0; i < inner; i++) d[i] += s[i];                            \
            }                                                                                \
        }                                                                                    \
    }
GATHER_GRAD(float)
GATHER_GRAD(double)

hl_status hl_cpu_gather_grad(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *ix = c->in[1];
    hl_tensor *dx = c->out[0];
    int axis = (int)c->i[0];
    int64_t n = dx->shape[axis], m = hl_tensor_numel(ix);
    int64_t outer = hl_shape_numel(axis, dx->shape);
    int64_t inner = hl_shape_numel(dx->ndim - axis - 1, dx->shape + axis + 1);
    hl_status st = check_indices("gather_grad", ix, n, axis);
    if (st || outer * n * inner == 0) return st;
    bool par = outer * (n + m) * inner >= PARALLEL_MIN;
    int64_t blocks = 1, want = 4 * (int64_t)hl_max_threads();
    if (par && outer < want) blocks = HL_MIN(n, (want + outer - 1) / outer);
    gather_grad_job q = {hl_ptr(dx), hl_ptr(dy), hl_ptr(ix), ix->dtype == HL_I64, n, m, inner,
                         blocks};
    const int64_t tasks = outer * blocks;
    hl_parallel_for(tasks, par ? 1 : tasks, dx->dtype == HL_F32 ? gather_grad_float
                                                                 : gather_grad_double, &q);
    return HL_OK;
}

/* ---- gather_elements and scatter_elements ----
   With s = indices' shape split at the axis into (outer, K, inner), element (o, k, i) of
   indices names the data element whose coordinates are o's and i's, with the index value on
   the axis. Its offset is otab[o] + value * stride[axis] + itab[i], the tables holding the
   data tensor's offsets of every outer and inner coordinate (indices may be smaller than the
   data on those axes). Tasks are (o, a chunk of i); each walks k in order. Two tasks never
   touch the same data element, so scatter is race-free and its repeated indices resolve in
   k order (the last update wins, or the reduction runs in that order). */

typedef struct {
    int64_t outer, K, inner, chunk, chunks;
    int64_t *otab, *itab;
    int64_t astride;  /* the data's stride along the axis */
} elem_geom;

/* Offsets of every coordinate of shape[0..nd) under strides, in row-major order. */
static void offset_table(int nd, const int64_t *shape, const int64_t *strides, int64_t *tab) {
    int64_t count = hl_shape_numel(nd, shape), idx[HL_MAX_DIMS] = {0}, off = 0;
    for (int64_t f = 0; f < count; f++) {
        tab[f] = off;
        for (int d = nd - 1; d >= 0; d--) {
            off += strides[d];
            if (++idx[d] < shape[d]) break;
            off -= strides[d] * shape[d];
            idx[d] = 0;
        }
    }
}

static hl_status elem_geom_init(elem_geom *g, const hl_tensor *ix, const int64_t *data_strides,
                                int axis) {
    const int64_t *s = ix->shape;
    g->outer = hl_shape_numel(axis, s);
    g->K = s[axis];
    g->inner = hl_shape_numel(ix->ndim - axis - 1, s + axis + 1);
    /* chunks of i small enough that outer * chunks keeps every thread busy, but not tiny */
    int64_t want = 4 * (int64_t)hl_max_threads(), split = (want + g->outer - 1) / g->outer;
    g->chunk = HL_MAX(HL_MIN(CHUNK, (g->inner + split - 1) / split), 64);
    g->chunks = (g->inner + g->chunk - 1) / g->chunk;
    g->astride = data_strides[axis];
    g->otab = malloc(sizeof(int64_t) * (size_t)(g->outer + g->inner));
    if (!g->otab) return hl_fail(HL_ERR_MEMORY, "out of host memory for an offset table");
    g->itab = g->otab + g->outer;
    offset_table(axis, s, data_strides, g->otab);
    offset_table(ix->ndim - axis - 1, s + axis + 1, data_strides + axis + 1, g->itab);
    return HL_OK;
}

/* One gather_elements or scatter_elements call: the geometry, the indices, the destination
   and the source (x for a gather, the updates for a scatter). */
typedef struct {
    elem_geom g;
    const void *ib;
    bool wide;
    int64_t n;
    void *y;
    const void *src;
} elem_job;

/* Runs BODY for every element of indices in tasks [t0, t1) of (o, a chunk of i), with e = its
   flat position in indices (and in updates / the gather output) and pos = the data element it
   names. The loop is written once per index width so the width test stays out of it. */
#define ELEM_LOOP_AS(IT, q, t0, t1, BODY)                                                    \
    for (int64_t t = t0; t < t1; t++) {                                                      \
        const IT *ip = (const IT *)(q)->ib;                                                  \
        const elem_geom *g = &(q)->g;                                                        \
        const int64_t n = (q)->n;                                                            \
        int64_t o = t / g->chunks, i0 = (t % g->chunks) * g->chunk;                          \
        int64_t i1 = HL_MIN(g->inner, i0 + g->chunk), base = g->otab[o];                     \
        if (g->inner == 1) { /* the axis is the last: a plain loop over k */                 \
            base += g->itab[0];                                                              \
            for (int64_t e = o * g->K; e < (o + 1) * g->K; e++) {                            \
                int64_t pos = base + wrap_index(ip[e], n) * g->astride;                      \
                BODY;                                                                        \
            }                                                                                \
            continue;                                                                        \
        }                                                                                    \
        for (int64_t k = 0; k < g->K; k++) {                                                 \
            int64_t row = (o * g->K + k) * g->inner;                                         \
            for (int64_t i = i0; i < i1; i++) {                                              \
                int64_t e = row + i;                                                         \
                int64_t pos = base + wrap_index(ip[e], n) * g->astride + g->itab[i];         \
                BODY;                                                                        \
            }                                                                                \
        }                                                                                    \
    }
/* A pool range function `name` running BODY with ys (the destination) and src as T. */
#define ELEM_RANGE(name, T, BODY)                                                            \
    static void name(int64_t t0, int64_t t1, void *ctx) {                                    \
        const elem_job *q = ctx;                                                             \
        T *ys = (T *)q->y;                                                                   \
        const T *src = (const T *)q->src;                                                    \
        if (q->wide) {                                                                       \
            ELEM_LOOP_AS(int64_t, q, t0, t1, BODY)                                           \
        } else {                                                                             \
            ELEM_LOOP_AS(int32_t, q, t0, t1, BODY)                                           \
        }                                                                                    \
    }

/* Every task writes only data elements no other task touches (see above). */
static void elem_run(elem_job *q, bool par, hl_range_fn fn) {
    const int64_t tasks = q->g.outer * q->g.chunks;
    hl_parallel_for(tasks, par ? 1 : tasks, fn, q);
}

#define GATHER_ELEMENTS_FN(size, T) ELEM_RANGE(gather_elements_##size, T, ys[e] = src[pos])
#define SCATTER_MOVE_FN(size, T) ELEM_RANGE(scatter_move_##size, T, ys[pos] = src[e])
MOVE_SIZES(GATHER_ELEMENTS_FN)
MOVE_SIZES(SCATTER_MOVE_FN)

hl_status hl_cpu_gather_elements(const hl_call *c) {
    const hl_tensor *x = c->in[0], *ix = c->in[1];
    hl_tensor *y = c->out[0];
    int axis = (int)c->i[0];
    int64_t n = x->shape[axis];
    hl_status st = check_indices("gather_elements", ix, n, axis);
    if (st || hl_tensor_numel(ix) == 0) return st;
    hl_range_fn fn;
    switch (hl_dtype_size(x->dtype)) {
#define GATHER_ELEMENTS_CASE(size, T) case size: fn = gather_elements_##size; break;
        MOVE_SIZES(GATHER_ELEMENTS_CASE)
#undef GATHER_ELEMENTS_CASE
        default: return hl_fail(HL_ERR_INTERNAL, "gather_elements: element size %zu",
                                hl_dtype_size(x->dtype));
    }
    elem_job q = {.ib = hl_ptr(ix), .wide = ix->dtype == HL_I64, .n = n, .y = hl_ptr(y),
                  .src = hl_ptr(x)};
    if ((st = elem_geom_init(&q.g, ix, x->strides, axis))) return st;
    elem_run(&q, hl_tensor_numel(ix) >= PARALLEL_MIN, fn);
    free(q.g.otab);
    return HL_OK;
}

/* NaN-propagating max and min, as numpy's maximum and minimum. */
#define SC_MAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define SC_MIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

/* Integer sums and products wrap (as numpy's do) by computing in uint64_t, since signed
   overflow is undefined in C. */
#define FLOAT_ADD(T, a, b) ((a) + (b))
#define FLOAT_MUL(T, a, b) ((a) * (b))
#define INT_ADD(T, a, b) ((T)((uint64_t)(a) + (uint64_t)(b)))
#define INT_MUL(T, a, b) ((T)((uint64_t)(a) * (uint64_t)(b)))

/* scatter_<reduction>_<dtype>: reduction 1 add, 2 mul, 3 max, 4 min. */
#define SCATTER_TYPED(sn, T, ADD, MUL)                                                       \
    ELEM_RANGE(scatter_add_##sn, T, ys[pos] = ADD(T, ys[pos], src[e]))                       \
    ELEM_RANGE(scatter_mul_##sn, T, ys[pos] = MUL(T, ys[pos], src[e]))                       \
    ELEM_RANGE(scatter_max_##sn, T, ys[pos] = SC_MAX(ys[pos], src[e]))                       \
    ELEM_RANGE(scatter_min_##sn, T, ys[pos] = SC_MIN(ys[pos], src[e]))
#define SCATTER_FLOAT(sn, T, code) SCATTER_TYPED(sn, T, FLOAT_ADD, FLOAT_MUL)
#define SCATTER_INT(sn, T, code) SCATTER_TYPED(sn, T, INT_ADD, INT_MUL)
HL_FLOAT_TYPES(SCATTER_FLOAT)
HL_INT_TYPES(SCATTER_INT)

/* The range function of a scatter with a reduction, or NULL for a dtype without one. */
static hl_range_fn scatter_reduce_fn(hl_dtype dt, int reduction) {
    switch (dt) {
#define SCATTER_CASE(sn, T, code)                                                            \
        case code:                                                                           \
            return reduction == 1 ? scatter_add_##sn : reduction == 2 ? scatter_mul_##sn     \
                   : reduction == 3 ? scatter_max_##sn : scatter_min_##sn;
        HL_NUMERIC_TYPES(SCATTER_CASE)
#undef SCATTER_CASE
        default: return NULL;
    }
}

hl_status hl_cpu_scatter_elements(const hl_call *c) {
    const hl_tensor *x = c->in[0], *ix = c->in[1], *upd = c->in[2];
    hl_tensor *y = c->out[0];
    int axis = (int)c->i[0], reduction = (int)c->i[1];
    int64_t n = x->shape[axis];
    hl_status st = check_indices("scatter_elements", ix, n, axis);
    if (st) return st;
    size_t esz = hl_dtype_size(x->dtype);
    hl_range_fn fn = NULL;
    if (reduction == 0) {
        switch (esz) {
#define SCATTER_MOVE_CASE(size, T) case size: fn = scatter_move_##size; break;
            MOVE_SIZES(SCATTER_MOVE_CASE)
#undef SCATTER_MOVE_CASE
            default: return hl_fail(HL_ERR_INTERNAL, "scatter_elements: element size %zu", esz);
        }
    } else if (!(fn = scatter_reduce_fn(x->dtype, reduction))) {
        return hl_fail(HL_ERR_INTERNAL, "scatter_elements: dtype %s", hl_dtype_name(x->dtype));
    }
    if (hl_ptr(y) != hl_ptr(x))  /* y is x itself for an in-place scatter */
        memcpy(hl_ptr(y), hl_ptr(x), (size_t)hl_tensor_numel(x) * esz);
    if (hl_tensor_numel(ix) == 0) return HL_OK;
    elem_job q = {.ib = hl_ptr(ix), .wide = ix->dtype == HL_I64, .n = n, .y = hl_ptr(y),
                  .src = hl_ptr(upd)};
    if ((st = elem_geom_init(&q.g, ix, y->strides, axis))) return st;
    elem_run(&q, hl_tensor_numel(ix) >= PARALLEL_MIN, fn);
    free(q.g.otab);
    return HL_OK;
}

/* ---- one_hot: y (outer, depth, inner)[o, d, i] = idx[o, i] == d ? on : off ---- */

/* The bytes of v stored as dtype d (floats saturate into integers, NaN -> 0). */
static void scalar_bits(hl_dtype d, double v, void *bits) {
    switch (d) {
        case HL_F32: { float t = (float)v; memcpy(bits, &t, 4); break; }
        case HL_F64: memcpy(bits, &v, 8); break;
        case HL_I32: { int32_t t = hl_sat_i32(v); memcpy(bits, &t, 4); break; }
        case HL_I64: { int64_t t = hl_sat_i64(v); memcpy(bits, &t, 8); break; }
        case HL_U8: { uint8_t t = hl_sat_u8(v); memcpy(bits, &t, 1); break; }
        case HL_BOOL: { uint8_t t = v != 0; memcpy(bits, &t, 1); break; }
        case HL_F16: { uint16_t t = hl_float_to_half((float)v); memcpy(bits, &t, 2); break; }
        case HL_BF16: { uint16_t t = hl_float_to_bf16((float)v); memcpy(bits, &t, 2); break; }
        default: break;
    }
}

typedef struct {
    const void *ib;
    bool wide;
    int64_t depth, inner;
    void *y;
    unsigned char on[8], off[8];  /* the values' bytes, as scalar_bits writes them */
} one_hot_job;

/* Rows [r0, r1) of y as (outer * depth) rows of inner: row (o, d) marks where index == d. */
#define ONE_HOT_ROWS(size, T)                                                                \
    static void one_hot_rows_##size(int64_t r0, int64_t r1, void *ctx) {                     \
        const one_hot_job *q = ctx;                                                          \
        T on, off;                                                                           \
        memcpy(&on, q->on, sizeof on);                                                       \
        memcpy(&off, q->off, sizeof off);                                                    \
        for (int64_t r = r0; r < r1; r++) {                                                  \
            const int64_t o = r / q->depth, d = r % q->depth, inner = q->inner;              \
            T *row = (T *)q->y + r * inner;                                                  \
            for (int64_t i = 0; i < inner; i++) {                                            \
                int64_t v = load_index(q->ib, q->wide, o * inner + i);                       \
                row[i] = (v < 0 ? v + q->depth : v) == d ? on : off;                         \
            }                                                                                \
        }                                                                                    \
    }
ONE_HOT_ROWS(1, uint8_t)
ONE_HOT_ROWS(2, uint16_t)
ONE_HOT_ROWS(4, uint32_t)
ONE_HOT_ROWS(8, uint64_t)

hl_status hl_cpu_one_hot(const hl_call *c) {
    const hl_tensor *ix = c->in[0];
    hl_tensor *y = c->out[0];
    int64_t depth = c->i[0];
    int axis = (int)c->i[1];
    int64_t outer = hl_shape_numel(axis, y->shape);
    int64_t inner = hl_shape_numel(y->ndim - axis - 1, y->shape + axis + 1);
    if (outer * depth * inner == 0) return HL_OK;
    one_hot_job q = {hl_ptr(ix), ix->dtype == HL_I64, depth, inner, hl_ptr(y), {0}, {0}};
    scalar_bits(y->dtype, c->f[0], q.on);
    scalar_bits(y->dtype, c->f[1], q.off);
    hl_range_fn rows;
    switch (hl_dtype_size(y->dtype)) {
        case 1: rows = one_hot_rows_1; break;
        case 2: rows = one_hot_rows_2; break;
        case 4: rows = one_hot_rows_4; break;
        case 8: rows = one_hot_rows_8; break;
        default: return hl_fail(HL_ERR_INTERNAL, "one_hot: dtype %s", hl_dtype_name(y->dtype));
    }
    const int64_t items = outer * depth;
    /* each (o, d) row is written by one item */
    hl_parallel_for(items, outer * depth * inner >= PARALLEL_MIN
                               ? HL_MAX(1, CHUNK / HL_MAX(inner, 1)) : items, rows, &q);
    return HL_OK;
}

/* ---- nonzero ----
   i[0] = 0: out[0] (0-d int64) = the number of non-zero elements of x.
   i[0] = 1: out[0] (ndim, count) = their coordinates in row-major order. x is split into
   blocks; each block's count gives where its coordinates start, so the blocks fill the
   output in parallel and in order. float -0.0 counts as zero and NaN as non-zero. */

enum { NZ_BLOCK = 1 << 16 };

#define NZ_TEST_f32(v) ((v) != 0)
#define NZ_TEST_f64(v) ((v) != 0)
#define NZ_TEST_int(v) ((v) != 0)
#define NZ_TEST_half(v) (((v) & 0x7fff) != 0)   /* float16 and bfloat16: all but the sign */

#define NONZERO_TYPED(sn, T, TEST)                                                           \
    static int64_t nz_count_##sn(const T *x, int64_t lo, int64_t hi) {                       \
        int64_t k = 0;                                                                       \
        for (int64_t f = lo; f < hi; f++) k += TEST(x[f]) ? 1 : 0;                           \
        return k;                                                                            \
    }                                                                                        \
    static void nz_write_##sn(const T *x, int nd, const int64_t *shape, int64_t lo,          \
                              int64_t hi, int64_t *out, int64_t pos, int64_t count) {        \
        int64_t idx[HL_MAX_DIMS], rem = lo;                                                  \
        for (int d = nd - 1; d >= 0; d--) {                                                  \
            idx[d] = rem % shape[d];                                                         \
            rem /= shape[d];                                                                 \
        }                                                                                    \
        for (int64_t f = lo; f < hi; f++) {                                                  \
            if (TEST(x[f]) && pos < count) {                                                 \
                for (int d = 0; d < nd; d++) out[d * count + pos] = idx[d];                  \
                pos++;                                                                       \
            }                                                                                \
            for (int d = nd - 1; d >= 0; d--) {                                              \
                if (++idx[d] < shape[d]) break;                                              \
                idx[d] = 0;                                                                  \
            }                                                                                \
        }                                                                                    \
    }
NONZERO_TYPED(f32, float, NZ_TEST_f32)
NONZERO_TYPED(f64, double, NZ_TEST_f64)
NONZERO_TYPED(i32, int32_t, NZ_TEST_int)
NONZERO_TYPED(i64, int64_t, NZ_TEST_int)
NONZERO_TYPED(b8, uint8_t, NZ_TEST_int)
NONZERO_TYPED(h16, uint16_t, NZ_TEST_half)

typedef enum { NZ_F32, NZ_F64, NZ_I32, NZ_I64, NZ_B8, NZ_H16 } nz_kind;

static nz_kind nz_kind_of(hl_dtype d) {
    switch (d) {
        case HL_F32: return NZ_F32;
        case HL_F64: return NZ_F64;
        case HL_I32: return NZ_I32;
        case HL_I64: return NZ_I64;
        case HL_F16: case HL_BF16: return NZ_H16;
        default: return NZ_B8;   /* uint8 and bool */
    }
}

static int64_t nz_count(nz_kind kind, const void *x, int64_t lo, int64_t hi) {
    switch (kind) {
        case NZ_F32: return nz_count_f32(x, lo, hi);
        case NZ_F64: return nz_count_f64(x, lo, hi);
        case NZ_I32: return nz_count_i32(x, lo, hi);
        case NZ_I64: return nz_count_i64(x, lo, hi);
        case NZ_H16: return nz_count_h16(x, lo, hi);
        default: return nz_count_b8(x, lo, hi);
    }
}

static void nz_write(nz_kind kind, const void *x, int nd, const int64_t *shape, int64_t lo,
                     int64_t hi, int64_t *out, int64_t pos, int64_t count) {
    switch (kind) {
        case NZ_F32: nz_write_f32(x, nd, shape, lo, hi, out, pos, count); break;
        case NZ_F64: nz_write_f64(x, nd, shape, lo, hi, out, pos, count); break;
        case NZ_I32: nz_write_i32(x, nd, shape, lo, hi, out, pos, count); break;
        case NZ_I64: nz_write_i64(x, nd, shape, lo, hi, out, pos, count); break;
        case NZ_H16: nz_write_h16(x, nd, shape, lo, hi, out, pos, count); break;
        default: nz_write_b8(x, nd, shape, lo, hi, out, pos, count); break;
    }
}

/* Blocks of NZ_BLOCK elements: each counts its own (start[b + 1]), then writes its own
   coordinates from start[b] on. */
typedef struct {
    nz_kind kind;
    const void *x;
    int nd;
    const int64_t *shape;
    int64_t total, *start, *out, count;
} nz_job;

static void nz_count_blocks(int64_t b0, int64_t b1, void *ctx) {
    const nz_job *q = ctx;
    for (int64_t b = b0; b < b1; b++)
        q->start[b + 1] = nz_count(q->kind, q->x, b * NZ_BLOCK,
                                   HL_MIN(q->total, (b + 1) * NZ_BLOCK));
}

static void nz_write_blocks(int64_t b0, int64_t b1, void *ctx) {
    const nz_job *q = ctx;
    for (int64_t b = b0; b < b1; b++)
        nz_write(q->kind, q->x, q->nd, q->shape, b * NZ_BLOCK,
                 HL_MIN(q->total, (b + 1) * NZ_BLOCK), q->out, q->start[b], q->count);
}

hl_status hl_cpu_nonzero(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *y = c->out[0];
    int64_t total = hl_tensor_numel(x);
    int64_t blocks = (total + NZ_BLOCK - 1) / NZ_BLOCK;
    nz_kind kind = nz_kind_of(x->dtype);
    const void *xb = hl_ptr(x);
    int64_t *start = calloc((size_t)blocks + 1, sizeof(int64_t));
    if (!start) return hl_fail(HL_ERR_MEMORY, "nonzero: out of host memory");
    nz_job q = {kind, xb, x->ndim, x->shape, total, start, NULL, 0};
    hl_parallel_for(blocks, 1, nz_count_blocks, &q);
    for (int64_t b = 0; b < blocks; b++) start[b + 1] += start[b];
    int64_t count = start[blocks];
    hl_status st = HL_OK;
    if (c->i[0] == 0) {
        *(int64_t *)hl_ptr(y) = count;
    } else if (y->shape[1] != count) {
        st = hl_fail(HL_ERR_INTERNAL, "nonzero: counted %lld non-zero elements, but the output "
                     "holds %lld", (long long)count, (long long)y->shape[1]);
    } else if (x->ndim > 0) {
        q.out = (int64_t *)hl_ptr(y);
        q.count = count;
        hl_parallel_for(blocks, 1, nz_write_blocks, &q);
    }
    free(start);
    return st;
}
