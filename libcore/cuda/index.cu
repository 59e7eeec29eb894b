/*
 * index.cu - gather, gather_grad and one_hot on CUDA, with the CPU's range rules
 * (cpu/index.c): an index must lie in [-n, n) (negative ones count from the end). Every index
 * is checked by a first kernel, before anything is written, and a bad one fails with the
 * CPU's message naming the first bad value: never a read outside the tensor.
 * gather_grad is deterministic like the CPU's: a thread owns one (outer, inner) column of dx
 * and adds the contributions in index order (no atomics).
 */
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

/* dx[o, k, i] = sum over j with wrap(ix[j]) == k of dy[o, j, i]. */
template <class T>
__global__ void gather_grad_k(const T *dy, const void *ix, bool wide, T *dx, int64_t outer,
                              int64_t n, int64_t m, int64_t inner) {
    HL_GRID_STRIDE(col, outer * inner) {
        int64_t o = col / inner, i = col - o * inner;
        for (int64_t k = 0; k < n; k++) dx[(o * n + k) * inner + i] = 0;
        for (int64_t j = 0; j < m; j++) {
            int64_t k = load_index(ix, wide, j);
            k = k < 0 ? k + n : k;
            dx[(o * n + k) * inner + i] += dy[(o * m + j) * inner + i];
        }
    }
}

template <class T>
static hl_status run_gather_grad(hl_cuda_device *d, const hl_call *c, int64_t outer, int64_t n,
                                 int64_t m, int64_t inner) {
    auto gather_grad_kernel = gather_grad_k<T>;
    HL_LAUNCH(gather_grad_kernel, hl_cuda_blocks(outer * inner), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(c->in[0]), (const void *)hl_cuda_ptr(c->in[1]),
              c->in[1]->dtype == HL_I64, (T *)hl_cuda_ptr(c->out[0]), outer, n, m, inner);
    return hl_cuda_check_launch("gather_grad");
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
    if (dx->dtype == HL_F32) return run_gather_grad<float>(d, c, outer, n, m, inner);
    if (dx->dtype == HL_F64) return run_gather_grad<double>(d, c, outer, n, m, inner);
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
