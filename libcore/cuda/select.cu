/*
 * select.cu - topk and nonzero on CUDA, with the CPU's results (cpu/topk.c, cpu/index.c).
 *
 * topk: the CPU's total order (by value, NaN above every number, equal values by lower index
 * first), so the output does not depend on the algorithm. A thread per row selects the k
 * best one after another: the next is the best of the elements that come after the previous
 * one in that order (O(n k) per row: no heap memory on the device).
 * nonzero: counts per chunk of the (contiguous) input, a prefix sum of the chunk counts, then
 * each chunk writes its coordinates at its offset: row-major order, as on the CPU.
 */
#include "convert.cuh"

template <class T> struct cand {
    T v;
    int64_t i;
};

template <class T> __device__ static inline bool is_nan(T v) { return v != v; }

/* a comes before b in the output order. */
template <class T> __device__ static inline bool first(const cand<T> &a, const cand<T> &b,
                                                       bool largest) {
    if (largest)
        return a.v > b.v || (a.v == b.v && a.i < b.i) ||
               (is_nan(a.v) && (!is_nan(b.v) || a.i < b.i));
    return a.v < b.v || (a.v == b.v && a.i < b.i) ||
           (is_nan(b.v) && (!is_nan(a.v) || a.i < b.i));
}

template <class T>
__global__ void topk_k(const T *x, T *vals, int64_t *idxs, int64_t outer, int64_t n,
                       int64_t inner, int64_t k, bool largest) {
    HL_GRID_STRIDE(r, outer * inner) {
        int64_t o = r / inner, in = r - o * inner;
        const T *row = x + o * n * inner + in;
        typedef hl_arith<T> A;  /* float16/bfloat16 compared widened (exact), stored as read */
        cand<A> prev = {hl_widen(row[0]), -1};
        for (int64_t q = 0; q < k; q++) {
            cand<A> best = {hl_widen(row[0]), -1};
            for (int64_t j = 0; j < n; j++) {
                cand<A> e = {hl_widen(row[j * inner]), j};
                if (prev.i >= 0 && !first(prev, e, largest)) continue;
                if (best.i < 0 || first(e, best, largest)) best = e;
            }
            vals[(o * k + q) * inner + in] = row[best.i * inner];
            idxs[(o * k + q) * inner + in] = best.i;
            prev = best;
        }
    }
}

template <class T>
static hl_status run_topk(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int64_t k = c->i[0];
    int axis = (int)c->i[1];
    int64_t n = x->shape[axis], outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) inner *= x->shape[d];
    if (outer * inner * k == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto topk_kernel = topk_k<T>;
    HL_LAUNCH(topk_kernel, hl_cuda_blocks(outer * inner), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(x), (T *)hl_cuda_ptr(c->out[0]),
              (int64_t *)hl_cuda_ptr(c->out[1]), outer, n, inner, k, c->i[2] != 0);
    return hl_cuda_check_launch("topk");
}

/* in = {x} (contiguous), out = {values, indices}; i[0] = k, i[1] = axis, i[2] = largest. */
extern "C" hl_status hl_cuda_topk(const hl_call *c) {
    switch (c->in[0]->dtype) {
        case HL_F32: return run_topk<float>(c);
        case HL_F64: return run_topk<double>(c);
        case HL_F16: return run_topk<hl_f16>(c);
        case HL_BF16: return run_topk<hl_bf16>(c);
        case HL_I32: return run_topk<int32_t>(c);
        case HL_I64: return run_topk<int64_t>(c);
        case HL_U8: case HL_BOOL: return run_topk<uint8_t>(c);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "topk: no CUDA kernel for %s", HL_DESC(c->in[0]));
}

/* ---- nonzero ---- */

enum { NZ_CHUNK = 4096 };

template <class T> __device__ static inline bool nonzero(T v) { return v != 0; }  /* NaN: yes */
__device__ static inline bool nonzero(hl_f16 v) { return (v.v & 0x7fffu) != 0; }  /* not +-0 */
__device__ static inline bool nonzero(hl_bf16 v) { return (v.v & 0x7fffu) != 0; }

template <class T>
__global__ void nz_count_k(const T *x, int64_t total, int64_t *counts, int64_t chunks) {
    HL_GRID_STRIDE(b, chunks) {
        int64_t lo = b * NZ_CHUNK, hi = lo + NZ_CHUNK < total ? lo + NZ_CHUNK : total, n = 0;
        for (int64_t e = lo; e < hi; e++) n += nonzero(x[e]);
        counts[b + 1] = n;
    }
}

/* counts[0] = 0, counts[b + 1] = chunk b's count -> starts (inclusive prefix sums). */
__global__ void nz_scan_k(int64_t *counts, int64_t chunks, int64_t *total_out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    counts[0] = 0;
    for (int64_t b = 0; b < chunks; b++) counts[b + 1] += counts[b];
    if (total_out) *total_out = counts[chunks];
}

struct nz_shape {
    int nd;
    int64_t shape[HL_MAX_DIMS];
};

template <class T>
__global__ void nz_write_k(const T *x, int64_t total, const int64_t *starts, int64_t chunks,
                           nz_shape s, int64_t *out, int64_t count) {
    HL_GRID_STRIDE(b, chunks) {
        int64_t lo = b * NZ_CHUNK, hi = lo + NZ_CHUNK < total ? lo + NZ_CHUNK : total;
        int64_t j = starts[b];
        for (int64_t e = lo; e < hi; e++) {
            if (!nonzero(x[e])) continue;
            int64_t rest = e;
            for (int d = s.nd - 1; d >= 0; d--) {
                int64_t q = rest / s.shape[d];
                out[d * count + j] = rest - q * s.shape[d];
                rest = q;
            }
            j++;
        }
    }
}

template <class T>
static hl_status run_nonzero(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *y = c->out[0];
    int64_t total = hl_cuda_numel(x), chunks = (total + NZ_CHUNK - 1) / NZ_CHUNK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    bool counting = c->i[0] == 0;
    if (!counting && (x->ndim == 0 || y->shape[1] == 0)) return HL_OK;
    hl_cuda_scratch_lock(d);
    int64_t *counts = (int64_t *)hl_cuda_scratch(d, sizeof(int64_t) * (size_t)(chunks + 1));
    hl_status st = counts ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "nonzero: out of cuda memory");
    if (!st && chunks) {
        auto nz_count_kernel = nz_count_k<T>;
        HL_LAUNCH(nz_count_kernel, hl_cuda_blocks(chunks), HL_CUDA_THREADS, 0, d->stream,
                  (const T *)hl_cuda_ptr(x), total, counts, chunks);
        st = hl_cuda_check_launch("nonzero");
    }
    if (!st) {
        HL_LAUNCH(nz_scan_k, 1, 1, 0, d->stream, counts, chunks,
                  counting ? (int64_t *)hl_cuda_ptr(y) : (int64_t *)0);
        st = hl_cuda_check_launch("nonzero");
    }
    if (!st && !counting) {
        nz_shape s;
        memset(&s, 0, sizeof s);
        s.nd = x->ndim;
        for (int k = 0; k < x->ndim; k++) s.shape[k] = x->shape[k];
        auto nz_write_kernel = nz_write_k<T>;
        HL_LAUNCH(nz_write_kernel, hl_cuda_blocks(chunks), HL_CUDA_THREADS, 0, d->stream,
                  (const T *)hl_cuda_ptr(x), total, (const int64_t *)counts, chunks, s,
                  (int64_t *)hl_cuda_ptr(y), y->shape[1]);
        st = hl_cuda_check_launch("nonzero");
    }
    hl_cuda_scratch_unlock(d);
    return st;
}

/* in = {x} (contiguous), out = {y}; i[0] = 0: count into the 0-d int64 y; 1: coordinates
   into the (ndim, count) int64 y. */
extern "C" hl_status hl_cuda_nonzero(const hl_call *c) {
    switch (c->in[0]->dtype) {
        case HL_F32: return run_nonzero<float>(c);
        case HL_F64: return run_nonzero<double>(c);
        case HL_F16: return run_nonzero<hl_f16>(c);
        case HL_BF16: return run_nonzero<hl_bf16>(c);
        case HL_I32: return run_nonzero<int32_t>(c);
        case HL_I64: return run_nonzero<int64_t>(c);
        case HL_U8: case HL_BOOL: return run_nonzero<uint8_t>(c);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "nonzero: no CUDA kernel for %s", HL_DESC(c->in[0]));
}
