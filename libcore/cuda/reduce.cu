/*
 * reduce.cu - the reduce (sum, mean, max, min, prod, l2, logsumexp over any axes) and
 * arg_reduce (argmax, argmin) families on CUDA, with the CPU's rules: double accumulators for
 * floats and wrapping int64 ones for integers, NaN winning max and min (numpy), logsumexp in
 * two passes (the max, then the sum of exp(x - max)), argmax/argmin returning the first (or
 * last) NaN when there is one. float16 and bfloat16 are read widened, accumulated in double
 * like float32, and the result rounded once to the input's type (argmax/argmin compare the
 * widened values: exact).
 *
 * The input's axes are split into kept axes (one output each) and reduced ones
 * (hl_cuda_split). Many outputs: a thread per output loops over its reduced elements. Few
 * outputs with many elements each (a full sum): a block per output, its threads striding
 * over the elements and combining through warp shuffles and shared memory.
 */
#include "convert.cuh"

struct hl_cuda_split {
    int nk, nr;
    int64_t kshape[HL_MAX_DIMS], kx[HL_MAX_DIMS], ko[HL_MAX_DIMS];  /* kept: x, out strides */
    int64_t rshape[HL_MAX_DIMS], rx[HL_MAX_DIMS];                   /* reduced: x strides */
    int64_t nout, count;
};

/* mask: the reduced axes of x; out has x's kept axes (and size-1 ones when keepdims). */
static hl_cuda_split split_of(const hl_tensor *x, const hl_tensor *out, uint64_t mask,
                              bool keepdims) {
    hl_cuda_split s;
    memset(&s, 0, sizeof s);
    s.nout = s.count = 1;
    int od = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask >> d & 1) {
            s.rshape[s.nr] = x->shape[d];
            s.rx[s.nr++] = x->strides[d];
            s.count *= x->shape[d];
            if (keepdims) od++;
        } else {
            s.kshape[s.nk] = x->shape[d];
            s.kx[s.nk] = x->strides[d];
            s.ko[s.nk++] = out->strides[od++];
            s.nout *= x->shape[d];
        }
    }
    return s;
}

__device__ static inline void kept_offsets(const hl_cuda_split &s, int64_t o, int64_t *xo,
                                           int64_t *oo) {
    *xo = *oo = 0;
    for (int d = s.nk - 1; d >= 0; d--) {
        int64_t q = o / s.kshape[d], r = o - q * s.kshape[d];
        o = q;
        *xo += r * s.kx[d];
        *oo += r * s.ko[d];
    }
}
__device__ static inline int64_t reduced_offset(const hl_cuda_split &s, int64_t r) {
    int64_t off = 0;
    for (int d = s.nr - 1; d >= 0; d--) {
        int64_t q = r / s.rshape[d], k = r - q * s.rshape[d];
        r = q;
        off += k * s.rx[d];
    }
    return off;
}

enum { K_SUM, K_MAX, K_MIN, K_MUL, K_SQ, K_EXP };

/* The accumulator: double for floats, wrapping int64 for integers. */
template <bool FL> struct acc_of { typedef int64_t type; };
template <> struct acc_of<true> { typedef double type; };

template <class A> __device__ static inline A identity(int kind) {
    if (kind == K_MUL) return (A)1;
    if constexpr (std::is_same<A, double>::value) {
        if (kind == K_MAX) return -INFINITY;
        if (kind == K_MIN) return INFINITY;
    } else {
        if (kind == K_MAX) return INT64_MIN;
        if (kind == K_MIN) return INT64_MAX;
    }
    return (A)0;
}

template <class A> __device__ static inline A combine(int kind, A a, A b) {
    switch (kind) {
        case K_MUL:
            if constexpr (std::is_same<A, double>::value) return a * b;
            else return (A)((uint64_t)a * (uint64_t)b);
        case K_MAX: return (a > b || a != a) ? a : b;
        case K_MIN: return (a < b || a != a) ? a : b;
        default:
            if constexpr (std::is_same<A, double>::value) return a + b;
            else return (A)((uint64_t)a + (uint64_t)b);
    }
}

/* One element's contribution: x, x*x or exp(x - m). */
template <class A, class T> __device__ static inline A term(int kind, T v, double m) {
    if constexpr (std::is_same<A, double>::value) {
        double x = (double)hl_widen(v);
        return kind == K_SQ ? x * x : (kind == K_EXP ? exp(x - m) : x);
    } else {
        return (A)v;
    }
}

/* The pass's accumulation over output o's elements, by threads [t0, count) step dt. */
template <class T, class A>
__device__ static inline A accumulate(const hl_cuda_split &s, const T *x, int64_t xo, int kind,
                                      double m, int64_t t0, int64_t dt) {
    A a = identity<A>(kind == K_SQ || kind == K_EXP ? K_SUM : kind);
    int ck = kind == K_SQ || kind == K_EXP ? K_SUM : kind;
    for (int64_t r = t0; r < s.count; r += dt)
        a = combine<A>(ck, a, term<A>(kind, x[xo + reduced_offset(s, r)], m));
    return a;
}

template <class A> __device__ static inline A shfl_down(A v, int d) {
    return __shfl_down_sync(0xffffffffu, v, d);
}

/* Block-wide combine of every thread's a; the result is valid in thread 0. */
template <class A> __device__ static inline A block_combine(int kind, A a) {
    __shared__ A partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int d = 16; d; d >>= 1) a = combine<A>(kind, a, shfl_down(a, d));
    if (lane == 0) partial[warp] = a;
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    if (warp == 0) {
        a = lane < nwarps ? partial[lane] : identity<A>(kind);
        for (int d = 16; d; d >>= 1) a = combine<A>(kind, a, shfl_down(a, d));
    }
    __syncthreads();  /* partial is reused by the next pass */
    return a;
}

/* Writes the finished value: the op's last step, then the output's dtype. */
template <class T, class A>
__device__ static inline void finish(int op, const hl_cuda_split &s, A a, double m, void *out,
                                     int64_t oo) {
    if constexpr (std::is_same<A, double>::value) {
        double v = a;
        switch (op) {
            case HL_OP_MEAN: v = a / (double)s.count; break;
            case HL_OP_L2: v = sqrt(a); break;
            case HL_OP_LOGSUMEXP: v = isfinite(m) ? m + log(a) : m; break;
            default: break;
        }
        ((T *)out)[oo] = hl_narrow<T>(v);
    } else {
        if (op == HL_OP_SUM || op == HL_OP_PROD) ((int64_t *)out)[oo] = a;
        else ((T *)out)[oo] = (T)a;
    }
}

static inline int first_kind(int op) {
    switch (op) {
        case HL_OP_MAX: case HL_OP_LOGSUMEXP: return K_MAX;
        case HL_OP_MIN: return K_MIN;
        case HL_OP_PROD: return K_MUL;
        case HL_OP_L2: return K_SQ;
        default: return K_SUM;
    }
}

template <class T, bool FL>
__global__ void reduce_thread_k(hl_cuda_split s, const T *x, void *out, int op, int kind) {
    typedef typename acc_of<FL>::type A;
    HL_GRID_STRIDE(o, s.nout) {
        int64_t xo, oo;
        kept_offsets(s, o, &xo, &oo);
        A a = accumulate<T, A>(s, x, xo, kind, 0, 0, 1);
        double m = 0;
        if (op == HL_OP_LOGSUMEXP) {
            m = (double)a;
            a = accumulate<T, A>(s, x, xo, K_EXP, m, 0, 1);
        }
        finish<T, A>(op, s, a, m, out, oo);
    }
}

template <class T, bool FL>
__global__ void reduce_block_k(hl_cuda_split s, const T *x, void *out, int op, int kind) {
    typedef typename acc_of<FL>::type A;
    __shared__ double shift;
    for (int64_t o = blockIdx.x; o < s.nout; o += gridDim.x) {
        int64_t xo, oo;
        kept_offsets(s, o, &xo, &oo);
        int ck = kind == K_SQ ? K_SUM : kind;
        A a = block_combine<A>(ck, accumulate<T, A>(s, x, xo, kind, 0, threadIdx.x, blockDim.x));
        double m = 0;
        if (op == HL_OP_LOGSUMEXP) {
            if (threadIdx.x == 0) shift = (double)a;
            __syncthreads();
            m = shift;
            a = block_combine<A>(K_SUM, accumulate<T, A>(s, x, xo, K_EXP, m, threadIdx.x,
                                                         blockDim.x));
        }
        if (threadIdx.x == 0) finish<T, A>(op, s, a, m, out, oo);
        __syncthreads();
    }
}

template <class T, bool FL>
static hl_status run_reduce(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *out = c->out[0];
    hl_cuda_split s = split_of(x, out, (uint64_t)c->i[0], c->i[1] != 0);
    if (!s.nout) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    int kind = first_kind(c->op);
    if (s.nout >= 1024 || s.count < 4096) {
        auto reduce_kernel = reduce_thread_k<T, FL>;
        HL_LAUNCH(reduce_kernel, hl_cuda_blocks(s.nout), HL_CUDA_THREADS, 0, d->stream, s,
                  (const T *)hl_cuda_ptr(x), (void *)hl_cuda_ptr(out), c->op, kind);
    } else {
        auto reduce_block_kernel = reduce_block_k<T, FL>;
        HL_LAUNCH_COOP(reduce_block_kernel, (unsigned)s.nout, HL_CUDA_THREADS, 0, d->stream, s,
                       (const T *)hl_cuda_ptr(x), (void *)hl_cuda_ptr(out), c->op, kind);
    }
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

/* in[0] = x, out[0]; i[0] = bit mask of the reduced axes, i[1] = keepdims. */
extern "C" hl_status hl_cuda_reduce(const hl_call *c) {
    switch (c->in[0]->dtype) {
        case HL_F32: return run_reduce<float, true>(c);
        case HL_F64: return run_reduce<double, true>(c);
        case HL_F16: return run_reduce<hl_f16, true>(c);  /* summed in double, rounded once */
        case HL_BF16: return run_reduce<hl_bf16, true>(c);
        case HL_I32: return run_reduce<int32_t, false>(c);
        case HL_I64: return run_reduce<int64_t, false>(c);
        case HL_U8: case HL_BOOL: return run_reduce<uint8_t, false>(c);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}

/* ---- argmax / argmin along one axis ---- */

template <class T>
__global__ void arg_reduce_k(hl_cuda_split s, const T *x, int64_t *out, bool is_max,
                             bool last) {
    HL_GRID_STRIDE(o, s.nout) {
        int64_t xo, oo;
        kept_offsets(s, o, &xo, &oo);
        int64_t best = 0, nan_at = -1;
        hl_arith<T> bv = hl_widen(x[xo]);  /* float16/bfloat16 compared as floats (exact) */
        for (int64_t r = 0; r < s.count; r++) {
            hl_arith<T> v = hl_widen(x[xo + r * s.rx[0]]);
            if (v != v) {  /* NaN wins: the first one, or the last with select_last */
                nan_at = r;
                if (!last) break;
                continue;
            }
            bool better = is_max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv));
            if (better || bv != bv) {
                bv = v;
                best = r;
            }
        }
        out[oo] = nan_at >= 0 ? nan_at : best;
    }
}

template <class T>
static hl_status run_arg_reduce(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_cuda_split s = split_of(x, c->out[0], 1ull << c->i[0], c->i[1] != 0);
    if (!s.nout) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto arg_reduce_kernel = arg_reduce_k<T>;
    HL_LAUNCH(arg_reduce_kernel, hl_cuda_blocks(s.nout), HL_CUDA_THREADS, 0, d->stream, s,
              (const T *)hl_cuda_ptr(x), (int64_t *)hl_cuda_ptr(c->out[0]),
              c->op == HL_OP_ARGMAX, c->i[2] != 0);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

/* in[0] = x, out[0] (int64); i[0] = axis, i[1] = keepdims, i[2] = select_last. */
extern "C" hl_status hl_cuda_arg_reduce(const hl_call *c) {
    switch (c->in[0]->dtype) {
        case HL_F32: return run_arg_reduce<float>(c);
        case HL_F64: return run_arg_reduce<double>(c);
        case HL_F16: return run_arg_reduce<hl_f16>(c);
        case HL_BF16: return run_arg_reduce<hl_bf16>(c);
        case HL_I32: return run_arg_reduce<int32_t>(c);
        case HL_I64: return run_arg_reduce<int64_t>(c);
        case HL_U8: case HL_BOOL: return run_arg_reduce<uint8_t>(c);
        default: break;
    }
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}
