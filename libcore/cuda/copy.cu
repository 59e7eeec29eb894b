/*
 * copy.cu - copy with cast (every dtype to every dtype, convert.cuh's rules), fill, arange
 * and eye on CUDA.
 */
#include "convert.cuh"

template <class S, class D>
__global__ void cast_k(hl_cuda_index ix, D *o, const S *x, int64_t n) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[2];
        hl_cuda_offsets(ix, i, off);
        o[off[0]] = hl_narrow<D>(hl_widen(x[off[1]]));
    }
}

template <class T>
__global__ void move_k(hl_cuda_index ix, T *o, const T *x, int64_t n) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[2];
        hl_cuda_offsets(ix, i, off);
        o[off[0]] = x[off[1]];
    }
}

template <class T>
__global__ void fill_k(hl_cuda_index ix, T *o, T value, int64_t n) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[1];
        hl_cuda_offsets(ix, i, off);
        o[off[0]] = value;
    }
}

template <class S, class D>
static hl_status run_cast(const hl_call *c, const hl_cuda_index &ix, int64_t n, cudaStream_t s) {
    auto cast_kernel = cast_k<S, D>;
    HL_LAUNCH(cast_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, s, ix,
              (D *)hl_cuda_ptr(c->out[0]), (const S *)hl_cuda_ptr(c->in[0]), n);
    return hl_cuda_check_launch("cast");
}

template <class T>
static hl_status run_move(const hl_call *c, const hl_cuda_index &ix, int64_t n, cudaStream_t s) {
    auto copy_kernel = move_k<T>;
    HL_LAUNCH(copy_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, s, ix,
              (T *)hl_cuda_ptr(c->out[0]), (const T *)hl_cuda_ptr(c->in[0]), n);
    return hl_cuda_check_launch("copy");
}

/* in[0] = source, broadcast to out's shape. */
extern "C" hl_status hl_cuda_copy(const hl_call *c) {
    const hl_tensor *ops[2] = {c->out[0], c->in[0]};
    hl_cuda_index ix = hl_cuda_index_of(2, ops);
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_dtype sd = c->in[0]->dtype, dd = c->out[0]->dtype;
    if (sd == dd) {
        if (ix.contiguous)  /* one copy engine transfer */
            return cudaMemcpyAsync(hl_cuda_ptr(c->out[0]), hl_cuda_ptr(c->in[0]),
                                   (size_t)n * hl_cuda_dtype_size(dd), cudaMemcpyDeviceToDevice,
                                   d->stream) == cudaSuccess
                       ? HL_OK : hl_cuda_check_launch("copy");
        switch (hl_cuda_dtype_size(dd)) {
            case 1: return run_move<uint8_t>(c, ix, n, d->stream);
            case 2: return run_move<uint16_t>(c, ix, n, d->stream);
            case 4: return run_move<uint32_t>(c, ix, n, d->stream);
            default: return run_move<uint64_t>(c, ix, n, d->stream);
        }
    }
    switch (sd) {
#define DST_CASE(S, code, D) case code: return run_cast<S, D>(c, ix, n, d->stream);
#define SRC_CASE(_, code, S)                                                                 \
    case code:                                                                               \
        switch (dd) {                                                                        \
            HL_CUDA_ALL_DTYPES_INNER(DST_CASE, S)                                                  \
            default: break;                                                                  \
        }                                                                                    \
        break;
        HL_CUDA_ALL_DTYPES(SRC_CASE, _)
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "cast: no CUDA kernel from %s to %s", HL_DESC(c->in[0]),
                   HL_DESC(c->out[0]));
}

template <class T>
static hl_status run_fill(hl_tensor *o, uint64_t bits, cudaStream_t s) {
    const hl_tensor *ops[1] = {o};
    hl_cuda_index ix = hl_cuda_index_of(1, ops);
    int64_t n = hl_cuda_numel(o);
    if (!n) return HL_OK;
    T value;
    memcpy(&value, &bits, sizeof value);
    auto fill_kernel = fill_k<T>;
    HL_LAUNCH(fill_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, s, ix, (T *)hl_cuda_ptr(o),
              value, n);
    return hl_cuda_check_launch("fill");
}

static hl_status fill_bits(hl_tensor *o, uint64_t bits, cudaStream_t s) {
    switch (hl_cuda_dtype_size(o->dtype)) {
        case 1: return run_fill<uint8_t>(o, bits, s);
        case 2: return run_fill<uint16_t>(o, bits, s);
        case 4: return run_fill<uint32_t>(o, bits, s);
        default: return run_fill<uint64_t>(o, bits, s);
    }
}

/* out[...] = f[0] converted to out's dtype. */
extern "C" hl_status hl_cuda_fill(const hl_call *c) {
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    return fill_bits(c->out[0], hl_cuda_value_bits(c->out[0]->dtype, c->f[0]), d->stream);
}

/* ---- arange: out (contiguous, 1-D)[i] = f[0] + i * f[1]; integer dtypes use i[0], i[1] ---- */

template <class T>
__global__ void arange_k(T *o, int64_t n, double start, double step, int64_t istart,
                         int64_t istep, bool integer) {
    HL_GRID_STRIDE(i, n) {
        o[i] = integer ? hl_narrow<T>((int64_t)((uint64_t)istart + (uint64_t)i * (uint64_t)istep))
                       : hl_narrow<T>(start + (double)i * step);
    }
}

template <class T>
static hl_status run_arange(const hl_call *c, cudaStream_t s) {
    int64_t n = c->out[0]->shape[0];
    if (!n) return HL_OK;
    hl_dtype dt = c->out[0]->dtype;
    bool integer = dt == HL_I32 || dt == HL_I64 || dt == HL_U8;
    auto arange_kernel = arange_k<T>;
    HL_LAUNCH(arange_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, s, (T *)hl_cuda_ptr(c->out[0]),
              n, c->f[0], c->f[1], c->i[0], c->i[1], integer);
    return hl_cuda_check_launch("arange");
}

extern "C" hl_status hl_cuda_arange(const hl_call *c) {
    cudaStream_t s = hl_cuda_dev(hl_cuda_call_device(c))->stream;
    switch (c->out[0]->dtype) {
#define ARANGE_CASE(_, code, T) case code: return run_arange<T>(c, s);
        HL_CUDA_ALL_DTYPES(ARANGE_CASE, _)
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "arange: invalid dtype");
}

/* ---- eye: out (n, m) contiguous, ones on diagonal i[0] ---- */

template <class T>
__global__ void eye_k(T *o, int64_t n, int64_t m, int64_t k, T one) {
    HL_GRID_STRIDE(i, n * m) {
        int64_t r = i / m, col = i - r * m;
        o[i] = col - r == k ? one : (T)0;
    }
}

template <class T>
static hl_status run_eye(const hl_call *c, cudaStream_t s) {
    hl_tensor *o = c->out[0];
    int64_t n = o->shape[0], m = o->shape[1];
    if (!n || !m) return HL_OK;
    uint64_t bits = hl_cuda_value_bits(o->dtype, 1.0);
    T one;
    memcpy(&one, &bits, sizeof one);
    auto eye_kernel = eye_k<T>;
    HL_LAUNCH(eye_kernel, hl_cuda_blocks(n * m), HL_CUDA_THREADS, 0, s, (T *)hl_cuda_ptr(o), n,
              m, c->i[0], one);
    return hl_cuda_check_launch("eye");
}

extern "C" hl_status hl_cuda_eye(const hl_call *c) {
    cudaStream_t s = hl_cuda_dev(hl_cuda_call_device(c))->stream;
    switch (hl_cuda_dtype_size(c->out[0]->dtype)) {
        case 1: return run_eye<uint8_t>(c, s);
        case 2: return run_eye<uint16_t>(c, s);
        case 4: return run_eye<uint32_t>(c, s);
        default: return run_eye<uint64_t>(c, s);
    }
}

/* For kernels of other families that copy as a step (gemm's c). */
hl_status hl_cuda_copy_call(const hl_call *c) { return hl_cuda_copy(c); }
