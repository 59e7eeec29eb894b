/*
 * index.cu - gather, gather_grad, gather_elements, scatter_elements and one_hot on CUDA, with the CPU's range rules
 * (cpu/index.c): an index must lie in [-n, n) (negative ones count from the end). Every index
 * is checked by a first kernel, before anything is written, and a bad one fails with the
 * CPU's message naming the first bad value: never a read outside the tensor.
 * gather_grad is deterministic like the CPU's: a thread owns one (outer, inner) column of dx
 * and adds the contributions in index order (no atomics). Half-type gradients (gather_grad,
 * scatter_elements' reductions: embedding's and topk's backward) sum in a float32 buffer and
 * round once.
 */
#include <type_traits>

#include "convert.cuh"

__device__ static inline int64_t load_index(const void *p, bool wide, int64_t k) {
    return wide ? ((const int64_t *)p)[k] : (int64_t)((const int32_t *)p)[k];
}

__global__ void check_indices_k(const void *ix, bool wide, int64_t count, int64_t n, int *flag) {
    HL_GRID_STRIDE(k, count) {
        int64_t v = load_index(ix, wide, k);
        if (v < -n || v >= n)
            atomicMax(flag, (int)(HL_FLAG_BASE - (k < HL_FLAG_BASE ? k : HL_FLAG_BASE - 1)));
    }
}

/* Fails with the CPU's message unless every index of ix lies in [-n, n). */
static hl_status check_indices(hl_cuda_device *d, const char *op, const hl_tensor *ix, int64_t n,
                               int64_t axis) {
    int64_t count = hl_cuda_numel(ix);
    if (!count) return HL_OK;
    bool wide = ix->dtype == HL_I64;
    HL_LAUNCH(check_indices_k, hl_cuda_blocks(count), HL_CUDA_THREADS, 0, d->stream,
              (const void *)hl_cuda_ptr(ix), wide, count, n, d->error_flag);
    hl_status st = hl_cuda_check_launch(op);
    int64_t pos;
    if (st || (st = hl_cuda_take_flag(d, op, &pos)) || pos < 0) return st;
    int64_t v = 0;
    cudaMemcpy(&v, hl_cuda_ptr(ix) + pos * (wide ? 8 : 4), wide ? 8 : 4, cudaMemcpyDeviceToHost);
    if (!wide) v = (int64_t)(int32_t)v;
    if (n == 0)
        return HL_FAIL(HL_ERR_INDEX, "%s: index %lld is out of range: axis %lld has size 0", op,
                       (long long)v, (long long)axis);
    return HL_FAIL(HL_ERR_INDEX, "%s: index %lld is out of range for axis %lld of size %lld "
                   "(valid indices are %lld to %lld)", op, (long long)v, (long long)axis,
                   (long long)n, (long long)-n, (long long)(n - 1));
}

static int64_t prod(const int64_t *s, int from, int to) {
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= s[d];
    return p;
}

/* y[o, j, i] = x[o, wrap(ix[j]), i]; x, ix, y contiguous. */
template <class T>
__global__ void gather_k(const T *x, const void *ix, bool wide, T *y, int64_t outer, int64_t n,
                         int64_t m, int64_t inner) {
    HL_GRID_STRIDE(e, outer * m * inner) {
        int64_t i = e % inner, oj = e / inner, j = oj % m, o = oj / m;
        int64_t k = load_index(ix, wide, j);
        k = k < 0 ? k + n : k;
        y[e] = x[(o * n + k) * inner + i];
    }
}

template <class T>
static hl_status run_gather(hl_cuda_device *d, const hl_call *c, int64_t outer, int64_t n,
                            int64_t m, int64_t inner) {
    auto gather_kernel = gather_k<T>;
    HL_LAUNCH(gather_kernel, hl_cuda_blocks(outer * m * inner), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(c->in[0]), (const void *)hl_cuda_ptr(c->in[1]),
              c->in[1]->dtype == HL_I64, (T *)hl_cuda_ptr(c->out[0]), outer, n, m, inner);
    return hl_cuda_check_launch("gather");
}

/* in = {x, indices}, out = {y}, i[0] = axis; all contiguous. */
extern "C" hl_status hl_cuda_gather(const hl_call *c) {
    const hl_tensor *x = c->in[0], *ix = c->in[1];
    int axis = (int)c->i[0];
    int64_t n = x->shape[axis], m = hl_cuda_numel(ix);
    int64_t outer = prod(x->shape, 0, axis), inner = prod(x->shape, axis + 1, x->ndim);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_status st = check_indices(d, "gather", ix, n, axis);
    if (st || outer * m * inner == 0) return st;
    switch (hl_cuda_dtype_size(x->dtype)) {
        case 1: return run_gather<uint8_t>(d, c, outer, n, m, inner);
        case 2: return run_gather<uint16_t>(d, c, outer, n, m, inner);
        case 4: return run_gather<uint32_t>(d, c, outer, n, m, inner);
        default: return run_gather<uint64_t>(d, c, outer, n, m, inner);
    }
}

/* dx[o, k, i] = sum over j with wrap(ix[j]) == k of dy[o, j, i], summed in A (float for
   float16/bfloat16 dy: into a float32 buffer, rounded once afterwards). */
template <class T, class A>
__global__ void gather_grad_k(const T *dy, const void *ix, bool wide, A *dx, int64_t outer,
                              int64_t n, int64_t m, int64_t inner) {
    HL_GRID_STRIDE(col, outer * inner) {
        int64_t o = col / inner, i = col - o * inner;
        for (int64_t k = 0; k < n; k++) dx[(o * n + k) * inner + i] = 0;
        for (int64_t j = 0; j < m; j++) {
            int64_t k = load_index(ix, wide, j);
            k = k < 0 ? k + n : k;
            dx[(o * n + k) * inner + i] += (A)hl_widen(dy[(o * m + j) * inner + i]);
        }
    }
}

/* A float32 buffer of n elements from the device's scratch (the caller holds its lock), or a
   failure naming op. */
static hl_status float_buffer(hl_cuda_device *d, int64_t n, const char *op, float **buf) {
    *buf = (float *)hl_cuda_scratch(d, (size_t)(n > 0 ? n : 1) * sizeof(float));
    return *buf ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "%s: out of cuda memory for a float32 "
                                  "buffer of %lld elements", op, (long long)n);
}

template <class T>
static hl_status narrow_from(hl_cuda_device *d, T *dst, const float *buf, int64_t n,
                             const char *op) {
    auto narrow_kernel = narrow_k<T>;
    HL_LAUNCH(narrow_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, dst, buf, n);
    return hl_cuda_check_launch(op);
}

template <class T>
static hl_status run_gather_grad(hl_cuda_device *d, const hl_call *c, int64_t outer, int64_t n,
                                 int64_t m, int64_t inner) {
    const T *dy = (const T *)hl_cuda_ptr(c->in[0]);
    const void *ix = (const void *)hl_cuda_ptr(c->in[1]);
    bool wide = c->in[1]->dtype == HL_I64;
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
        auto gather_grad_kernel = gather_grad_k<T, T>;
        HL_LAUNCH(gather_grad_kernel, hl_cuda_blocks(outer * inner), HL_CUDA_THREADS, 0,
                  d->stream, dy, ix, wide, (T *)hl_cuda_ptr(c->out[0]), outer, n, m, inner);
        return hl_cuda_check_launch("gather_grad");
    } else {
        hl_cuda_scratch_lock(d);
        float *acc;
        hl_status st = float_buffer(d, outer * n * inner, "gather_grad", &acc);
        if (!st) {
            auto gather_grad_kernel = gather_grad_k<T, float>;
            HL_LAUNCH(gather_grad_kernel, hl_cuda_blocks(outer * inner), HL_CUDA_THREADS, 0,
                      d->stream, dy, ix, wide, acc, outer, n, m, inner);
            st = hl_cuda_check_launch("gather_grad");
        }
        if (!st) st = narrow_from<T>(d, (T *)hl_cuda_ptr(c->out[0]), acc, outer * n * inner,
                                     "gather_grad");
        hl_cuda_scratch_unlock(d);
        return st;
    }
}

/* in = {dy, indices}, out = {dx}, i[0] = axis; all contiguous. */
extern "C" hl_status hl_cuda_gather_grad(const hl_call *c) {
    const hl_tensor *ix = c->in[1];
    hl_tensor *dx = c->out[0];
    int axis = (int)c->i[0];
    int64_t n = dx->shape[axis], m = hl_cuda_numel(ix);
    int64_t outer = prod(dx->shape, 0, axis), inner = prod(dx->shape, axis + 1, dx->ndim);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_status st = check_indices(d, "gather_grad", ix, n, axis);
    if (st || outer * n * inner == 0) return st;
    switch (dx->dtype) {
        case HL_F32: return run_gather_grad<float>(d, c, outer, n, m, inner);
        case HL_F64: return run_gather_grad<double>(d, c, outer, n, m, inner);
        case HL_F16: return run_gather_grad<hl_f16>(d, c, outer, n, m, inner);
        case HL_BF16: return run_gather_grad<hl_bf16>(d, c, outer, n, m, inner);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "gather_grad: no CUDA kernel for %s", HL_DESC(dx));
}

/* y[o, d, i] = on when ix[o, i] (negative counting from depth) == d, else off. */
template <class T>
__global__ void one_hot_k(const void *ix, bool wide, T *y, int64_t outer, int64_t depth,
                          int64_t inner, T on, T off) {
    HL_GRID_STRIDE(e, outer * depth * inner) {
        int64_t i = e % inner, od = e / inner, dd = od % depth, o = od / depth;
        int64_t v = load_index(ix, wide, o * inner + i);
        y[e] = (v < 0 ? v + depth : v) == dd ? on : off;
    }
}

template <class T>
static hl_status run_one_hot(hl_cuda_device *d, const hl_call *c, int64_t outer, int64_t depth,
                             int64_t inner) {
    hl_tensor *y = c->out[0];
    uint64_t on_bits = hl_cuda_value_bits(y->dtype, c->f[0]);
    uint64_t off_bits = hl_cuda_value_bits(y->dtype, c->f[1]);
    T on, off;
    memcpy(&on, &on_bits, sizeof on);
    memcpy(&off, &off_bits, sizeof off);
    auto one_hot_kernel = one_hot_k<T>;
    HL_LAUNCH(one_hot_kernel, hl_cuda_blocks(outer * depth * inner), HL_CUDA_THREADS, 0,
              d->stream, (const void *)hl_cuda_ptr(c->in[0]), c->in[0]->dtype == HL_I64,
              (T *)hl_cuda_ptr(y), outer, depth, inner, on, off);
    return hl_cuda_check_launch("one_hot");
}

/* in = {indices}, out = {y}; i[0] = depth, i[1] = axis; f = {on_value, off_value}. */
extern "C" hl_status hl_cuda_one_hot(const hl_call *c) {
    hl_tensor *y = c->out[0];
    int64_t depth = c->i[0];
    int axis = (int)c->i[1];
    int64_t outer = prod(y->shape, 0, axis), inner = prod(y->shape, axis + 1, y->ndim);
    if (outer * depth * inner == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    switch (hl_cuda_dtype_size(y->dtype)) {
        case 1: return run_one_hot<uint8_t>(d, c, outer, depth, inner);
        case 2: return run_one_hot<uint16_t>(d, c, outer, depth, inner);
        case 4: return run_one_hot<uint32_t>(d, c, outer, depth, inner);
        default: return run_one_hot<uint64_t>(d, c, outer, depth, inner);
    }
}

/* ---- gather_elements and scatter_elements ----
   With indices' shape split at the axis into (outer, K, inner), element (o, k, i) names the
   data element with o's and i's coordinates and the index value on the axis. A thread owns
   one (o, i) column and walks k in order: columns never touch the same data element, so the
   scatter is race-free and its repeated indices resolve in k order, as on the CPU. */

struct elem_geom {
    int nd, axis;
    int64_t outer, K, inner, n;            /* n: the data's size along the axis */
    int64_t ishape[HL_MAX_DIMS];           /* indices' shape */
    int64_t dstrides[HL_MAX_DIMS];         /* the data's strides */
};

static elem_geom elem_geom_of(const hl_tensor *ix, const hl_tensor *data, int axis) {
    elem_geom g;
    memset(&g, 0, sizeof g);
    g.nd = ix->ndim;
    g.axis = axis;
    g.outer = prod(ix->shape, 0, axis);
    g.K = ix->shape[axis];
    g.inner = prod(ix->shape, axis + 1, ix->ndim);
    g.n = data->shape[axis];
    for (int d = 0; d < ix->ndim; d++) {
        g.ishape[d] = ix->shape[d];
        g.dstrides[d] = data->strides[d];
    }
    return g;
}

/* The data offset of (o, i) with 0 on the axis. */
__device__ static inline int64_t column_base(const elem_geom &g, int64_t o, int64_t i) {
    int64_t off = 0;
    for (int d = g.nd - 1; d > g.axis; d--) {
        int64_t q = i / g.ishape[d];
        off += (i - q * g.ishape[d]) * g.dstrides[d];
        i = q;
    }
    for (int d = g.axis - 1; d >= 0; d--) {
        int64_t q = o / g.ishape[d];
        off += (o - q * g.ishape[d]) * g.dstrides[d];
        o = q;
    }
    return off;
}

template <class T>
__global__ void gather_elements_k(elem_geom g, const T *x, const void *ix, bool wide, T *y) {
    HL_GRID_STRIDE(col, g.outer * g.inner) {
        int64_t o = col / g.inner, i = col - o * g.inner, base = column_base(g, o, i);
        for (int64_t k = 0; k < g.K; k++) {
            int64_t e = (o * g.K + k) * g.inner + i, v = load_index(ix, wide, e);
            y[e] = x[base + (v < 0 ? v + g.n : v) * g.dstrides[g.axis]];
        }
    }
}

template <class T>
static hl_status run_gather_elements(hl_cuda_device *d, const hl_call *c, const elem_geom &g) {
    auto gather_elements_kernel = gather_elements_k<T>;
    HL_LAUNCH(gather_elements_kernel, hl_cuda_blocks(g.outer * g.inner), HL_CUDA_THREADS, 0,
              d->stream, g, (const T *)hl_cuda_ptr(c->in[0]), (const void *)hl_cuda_ptr(c->in[1]),
              c->in[1]->dtype == HL_I64, (T *)hl_cuda_ptr(c->out[0]));
    return hl_cuda_check_launch("gather_elements");
}

/* in = {x (any strides), indices (contiguous)}, out = {y}; i[0] = axis. */
extern "C" hl_status hl_cuda_gather_elements(const hl_call *c) {
    const hl_tensor *x = c->in[0], *ix = c->in[1];
    int axis = (int)c->i[0];
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_status st = check_indices(d, "gather_elements", ix, x->shape[axis], axis);
    if (st || hl_cuda_numel(ix) == 0) return st;
    elem_geom g = elem_geom_of(ix, x, axis);
    switch (hl_cuda_dtype_size(x->dtype)) {
        case 1: return run_gather_elements<uint8_t>(d, c, g);
        case 2: return run_gather_elements<uint16_t>(d, c, g);
        case 4: return run_gather_elements<uint32_t>(d, c, g);
        default: return run_gather_elements<uint64_t>(d, c, g);
    }
}

/* reduction: 0 none, 1 add, 2 mul, 3 max, 4 min (NaN-propagating; integers wrap). */
template <class T>
__device__ static inline T scatter_combine(int reduction, T a, T b) {
    switch (reduction) {
        case 1:
            if constexpr (std::is_floating_point<T>::value) return a + b;
            else return (T)((uint64_t)a + (uint64_t)b);
        case 2:
            if constexpr (std::is_floating_point<T>::value) return a * b;
            else return (T)((uint64_t)a * (uint64_t)b);
        case 3: return (a > b || a != a) ? a : b;
        case 4: return (a < b || a != a) ? a : b;
        default: return b;
    }
}

/* T: the data's type (float for float16/bfloat16 data, summed in a float32 buffer);
   U: the updates' (T itself, or the half type widened on reading). */
template <class T, class U>
__global__ void scatter_elements_k(elem_geom g, T *y, const void *ix, bool wide, const U *upd,
                                   int reduction) {
    HL_GRID_STRIDE(col, g.outer * g.inner) {
        int64_t o = col / g.inner, i = col - o * g.inner, base = column_base(g, o, i);
        for (int64_t k = 0; k < g.K; k++) {
            int64_t e = (o * g.K + k) * g.inner + i, v = load_index(ix, wide, e);
            T *dst = y + base + (v < 0 ? v + g.n : v) * g.dstrides[g.axis];
            *dst = scatter_combine<T>(reduction, *dst, (T)hl_widen(upd[e]));
        }
    }
}

template <class T>
static hl_status run_scatter(hl_cuda_device *d, const hl_call *c, const elem_geom &g) {
    auto scatter_elements_kernel = scatter_elements_k<T, T>;
    HL_LAUNCH(scatter_elements_kernel, hl_cuda_blocks(g.outer * g.inner), HL_CUDA_THREADS, 0,
              d->stream, g, (T *)hl_cuda_ptr(c->out[0]), (const void *)hl_cuda_ptr(c->in[1]),
              c->in[1]->dtype == HL_I64, (const T *)hl_cuda_ptr(c->in[2]), (int)c->i[1]);
    return hl_cuda_check_launch("scatter_elements");
}

/* A reduction into float16/bfloat16 data: y widened into a float32 buffer, every update
   combined there in index order, the buffer rounded once into y (a sum of repeated indices
   is not rounded after each addition). */
template <class T>
static hl_status run_scatter_half(hl_cuda_device *d, const hl_call *c, const elem_geom &g) {
    hl_tensor *y = c->out[0];
    int64_t n = hl_cuda_numel(y);
    hl_cuda_scratch_lock(d);
    float *acc;
    hl_status st = float_buffer(d, n, "scatter_elements", &acc);
    if (!st) {
        auto widen_kernel = widen_k<T>;
        HL_LAUNCH(widen_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, acc,
                  (const T *)hl_cuda_ptr(y), n);
        st = hl_cuda_check_launch("scatter_elements");
    }
    if (!st) {
        auto scatter_elements_kernel = scatter_elements_k<float, T>;
        HL_LAUNCH(scatter_elements_kernel, hl_cuda_blocks(g.outer * g.inner), HL_CUDA_THREADS,
                  0, d->stream, g, acc, (const void *)hl_cuda_ptr(c->in[1]),
                  c->in[1]->dtype == HL_I64, (const T *)hl_cuda_ptr(c->in[2]), (int)c->i[1]);
        st = hl_cuda_check_launch("scatter_elements");
    }
    if (!st) st = narrow_from<T>(d, (T *)hl_cuda_ptr(y), acc, n, "scatter_elements");
    hl_cuda_scratch_unlock(d);
    return st;
}

/* in = {x, indices, updates} (contiguous), out = {y} (may be x itself); i[0] = axis,
   i[1] = reduction. */
extern "C" hl_status hl_cuda_scatter_elements(const hl_call *c) {
    const hl_tensor *x = c->in[0], *ix = c->in[1];
    hl_tensor *y = c->out[0];
    int axis = (int)c->i[0], reduction = (int)c->i[1];
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_status st = check_indices(d, "scatter_elements", ix, x->shape[axis], axis);
    if (st) return st;
    size_t esz = hl_cuda_dtype_size(x->dtype);
    if (hl_cuda_ptr(y) != hl_cuda_ptr(x) && hl_cuda_numel(x) &&
        cudaMemcpyAsync(hl_cuda_ptr(y), hl_cuda_ptr(x), (size_t)hl_cuda_numel(x) * esz,
                        cudaMemcpyDeviceToDevice, d->stream) != cudaSuccess)
        return hl_cuda_check_launch("scatter_elements");
    if (hl_cuda_numel(ix) == 0) return HL_OK;
    elem_geom g = elem_geom_of(ix, y, axis);
    if (reduction == 0) {  /* moves by size: every dtype */
        switch (esz) {
            case 1: return run_scatter<uint8_t>(d, c, g);
            case 2: return run_scatter<uint16_t>(d, c, g);
            case 4: return run_scatter<uint32_t>(d, c, g);
            default: return run_scatter<uint64_t>(d, c, g);
        }
    }
    switch (x->dtype) {
        case HL_F32: return run_scatter<float>(d, c, g);
        case HL_F64: return run_scatter<double>(d, c, g);
        case HL_F16: return run_scatter_half<hl_f16>(d, c, g);
        case HL_BF16: return run_scatter_half<hl_bf16>(d, c, g);
        case HL_I32: return run_scatter<int32_t>(d, c, g);
        case HL_I64: return run_scatter<int64_t>(d, c, g);
        case HL_U8: return run_scatter<uint8_t>(d, c, g);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "scatter_elements: no CUDA kernel for %s", HL_DESC(x));
}
