/*
 * elementwise.cu - the unary, binary and where families on CUDA. Each op's scalar expression
 * comes from ops.h, exactly as the CPU's does: the X-macros below wrap it in a functor per op,
 * one kernel template runs any functor over any strides and broadcasting (hl_cuda_index), and
 * a switch generated from the same lists picks the instantiation for (op, dtype).
 * float16 and bfloat16 compute here (unlike on the CPU): each element is widened to float, the
 * expression runs in float, and the result is rounded back once.
 */
#include <type_traits>

#include "convert.cuh"
#include "../src/kernel_scalar.h"  /* hl_int_div and friends, as on the CPU */

/* fmax/fmin of an integer literal and a float (ops.h's hard_sigmoid, hard_swish): the
   float's type, as <tgmath.h> gives the CPU. */
__device__ static inline float fmax(int a, float b) { return fmaxf((float)a, b); }
__device__ static inline float fmin(int a, float b) { return fminf((float)a, b); }
__device__ static inline double fmax(int a, double b) { return ::fmax((double)a, b); }
__device__ static inline double fmin(int a, double b) { return ::fmin((double)a, b); }

/* ---- one functor per op, from ops.h ---- */

#define FLOAT_UNARY_OP(NAME, name, family, expr)                                             \
    struct Op_##NAME {                                                                       \
        template <class T> __device__ static T apply(T x, T p0, T p1) {                      \
            (void)p0; (void)p1;                                                              \
            return (T)(expr);                                                                \
        }                                                                                    \
    };
HL_UNARY_FLOAT_OPS(FLOAT_UNARY_OP)

#define NUMERIC_UNARY_OP(NAME, name, family, fexpr, iexpr)                                   \
    struct Op_##NAME {                                                                       \
        template <class T> __device__ static T apply(T x, T p0, T p1) {                      \
            (void)p0; (void)p1;                                                              \
            if constexpr (std::is_floating_point<T>::value) return (T)(fexpr);               \
            else return (T)(iexpr);                                                          \
        }                                                                                    \
    };
HL_UNARY_NUMERIC_OPS(NUMERIC_UNARY_OP)

#define PREDICATE_OP(NAME, name, family, expr)                                               \
    struct Op_##NAME {                                                                       \
        template <class T> __device__ static uint8_t apply(T x, T p0, T p1) {                \
            (void)p0; (void)p1;                                                              \
            return (uint8_t)(expr);                                                          \
        }                                                                                    \
    };
HL_UNARY_PREDICATE_OPS(PREDICATE_OP)

#define ARITH_OP(NAME, name, family, fexpr, iexpr)                                           \
    struct Op_##NAME {                                                                       \
        template <class T> __device__ static T apply(T a, T b) {                             \
            if constexpr (std::is_floating_point<T>::value) return (T)(fexpr);               \
            else return (T)(iexpr);                                                          \
        }                                                                                    \
    };
HL_BINARY_ARITH_OPS(ARITH_OP)

#define BOOL_OP(NAME, name, family, expr)                                                    \
    struct Op_##NAME {                                                                       \
        template <class T> __device__ static uint8_t apply(T a, T b) { return (uint8_t)(expr); } \
    };
HL_BINARY_BOOL_OPS(BOOL_OP)

/* ---- kernels ---- */

template <class F, class TI, class TO>
__global__ void unary_k(hl_cuda_index ix, TO *o, const TI *x, int64_t n, double p0, double p1) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[2];
        hl_cuda_offsets(ix, i, off);
        o[off[0]] = (TO)F::template apply<TI>(x[off[1]], (TI)p0, (TI)p1);
    }
}

template <class F, class TI, class TO>
__global__ void binary_k(hl_cuda_index ix, TO *o, const TI *a, const TI *b, int64_t n) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[3];
        hl_cuda_offsets(ix, i, off);
        o[off[0]] = (TO)F::template apply<TI>(a[off[1]], b[off[2]]);
    }
}

template <class T>
__global__ void where_k(hl_cuda_index ix, T *o, const uint8_t *cond, const T *a, const T *b,
                        int64_t n) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[4];
        hl_cuda_offsets(ix, i, off);
        o[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
}

/* Half types: S is the storage (hl_f16, hl_bf16), the expression runs in float; predicates
   (OUT_BOOL) store uint8. */
template <class F, class S, bool OUT_BOOL>
__global__ void unary_half_k(hl_cuda_index ix, void *o, const S *x, int64_t n, double p0,
                             double p1) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[2];
        hl_cuda_offsets(ix, i, off);
        auto r = F::template apply<float>(hl_widen(x[off[1]]), (float)p0, (float)p1);
        if (OUT_BOOL) ((uint8_t *)o)[off[0]] = (uint8_t)r;
        else ((S *)o)[off[0]] = hl_narrow<S>((float)r);
    }
}

template <class F, class S, bool OUT_BOOL>
__global__ void binary_half_k(hl_cuda_index ix, void *o, const S *a, const S *b, int64_t n) {
    HL_GRID_STRIDE(i, n) {
        int64_t off[3];
        hl_cuda_offsets(ix, i, off);
        auto r = F::template apply<float>(hl_widen(a[off[1]]), hl_widen(b[off[2]]));
        if (OUT_BOOL) ((uint8_t *)o)[off[0]] = (uint8_t)r;
        else ((S *)o)[off[0]] = hl_narrow<S>((float)r);
    }
}

template <class F, class S, bool OUT_BOOL>
static hl_status run_unary_half(const hl_call *c) {
    const hl_tensor *ops[2] = {c->out[0], c->in[0]};
    hl_cuda_index ix = hl_cuda_index_of(2, ops);
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto unary_kernel = unary_half_k<F, S, OUT_BOOL>;
    HL_LAUNCH(unary_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, ix,
              (void *)hl_cuda_ptr(c->out[0]), (const S *)hl_cuda_ptr(c->in[0]), n, c->f[0],
              c->f[1]);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

template <class F, class S, bool OUT_BOOL>
static hl_status run_binary_half(const hl_call *c) {
    const hl_tensor *ops[3] = {c->out[0], c->in[0], c->in[1]};
    hl_cuda_index ix = hl_cuda_index_of(3, ops);
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto binary_kernel = binary_half_k<F, S, OUT_BOOL>;
    HL_LAUNCH(binary_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, ix,
              (void *)hl_cuda_ptr(c->out[0]), (const S *)hl_cuda_ptr(c->in[0]),
              (const S *)hl_cuda_ptr(c->in[1]), n);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

#define HALF_CASES(run, NAME, OUT_BOOL)                                                      \
    if (dt == HL_F16) return run<Op_##NAME, hl_f16, OUT_BOOL>(c);                            \
    if (dt == HL_BF16) return run<Op_##NAME, hl_bf16, OUT_BOOL>(c);

/* ---- launching one instantiation ---- */

template <class F, class TI, class TO>
static hl_status run_unary(const hl_call *c) {
    const hl_tensor *ops[2] = {c->out[0], c->in[0]};
    hl_cuda_index ix = hl_cuda_index_of(2, ops);
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto unary_kernel = unary_k<F, TI, TO>;
    HL_LAUNCH(unary_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, ix,
              (TO *)hl_cuda_ptr(c->out[0]), (const TI *)hl_cuda_ptr(c->in[0]), n, c->f[0],
              c->f[1]);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

template <class F, class TI, class TO>
static hl_status run_binary(const hl_call *c) {
    const hl_tensor *ops[3] = {c->out[0], c->in[0], c->in[1]};
    hl_cuda_index ix = hl_cuda_index_of(3, ops);
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto binary_kernel = binary_k<F, TI, TO>;
    HL_LAUNCH(binary_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, ix,
              (TO *)hl_cuda_ptr(c->out[0]), (const TI *)hl_cuda_ptr(c->in[0]),
              (const TI *)hl_cuda_ptr(c->in[1]), n);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

static hl_status no_kernel(const hl_call *c, const hl_tensor *t) {
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(t));
}

/* in[0] = x; f[0], f[1] = alpha, beta. */
extern "C" hl_status hl_cuda_unary(const hl_call *c) {
    hl_dtype dt = c->in[0]->dtype;
    switch (c->op) {
#define CASE_FLOAT(NAME, ...)                                                                \
    case HL_OP_##NAME:                                                                       \
        if (dt == HL_F32) return run_unary<Op_##NAME, float, float>(c);                      \
        if (dt == HL_F64) return run_unary<Op_##NAME, double, double>(c);                    \
        HALF_CASES(run_unary_half, NAME, false)                                              \
        break;
        HL_UNARY_FLOAT_OPS(CASE_FLOAT)
#define CASE_NUMERIC(NAME, ...)                                                              \
    case HL_OP_##NAME:                                                                       \
        switch (dt) {                                                                        \
            case HL_F32: return run_unary<Op_##NAME, float, float>(c);                       \
            case HL_F64: return run_unary<Op_##NAME, double, double>(c);                     \
            case HL_I32: return run_unary<Op_##NAME, int32_t, int32_t>(c);                   \
            case HL_I64: return run_unary<Op_##NAME, int64_t, int64_t>(c);                   \
            case HL_U8: return run_unary<Op_##NAME, uint8_t, uint8_t>(c);                    \
            default: break;                                                                  \
        }                                                                                    \
        HALF_CASES(run_unary_half, NAME, false)                                              \
        break;
        HL_UNARY_NUMERIC_OPS(CASE_NUMERIC)
#define CASE_PRED(NAME, ...)                                                                 \
    case HL_OP_##NAME:                                                                       \
        switch (dt) {                                                                        \
            case HL_F32: return run_unary<Op_##NAME, float, uint8_t>(c);                     \
            case HL_F64: return run_unary<Op_##NAME, double, uint8_t>(c);                    \
            case HL_I32: return run_unary<Op_##NAME, int32_t, uint8_t>(c);                   \
            case HL_I64: return run_unary<Op_##NAME, int64_t, uint8_t>(c);                   \
            case HL_U8: case HL_BOOL: return run_unary<Op_##NAME, uint8_t, uint8_t>(c);      \
            default: break;                                                                  \
        }                                                                                    \
        HALF_CASES(run_unary_half, NAME, true)                                               \
        break;
        HL_UNARY_PREDICATE_OPS(CASE_PRED)
        default: break;
    }
    return no_kernel(c, c->in[0]);
}

/* in[0] = a, in[1] = b, both broadcast to out. */
extern "C" hl_status hl_cuda_binary(const hl_call *c) {
    hl_dtype dt = c->in[0]->dtype;
    switch (c->op) {
#define CASE_ARITH(NAME, ...)                                                                \
    case HL_OP_##NAME:                                                                       \
        switch (dt) {                                                                        \
            case HL_F32: return run_binary<Op_##NAME, float, float>(c);                      \
            case HL_F64: return run_binary<Op_##NAME, double, double>(c);                    \
            case HL_I32: return run_binary<Op_##NAME, int32_t, int32_t>(c);                  \
            case HL_I64: return run_binary<Op_##NAME, int64_t, int64_t>(c);                  \
            case HL_U8: return run_binary<Op_##NAME, uint8_t, uint8_t>(c);                   \
            default: break;                                                                  \
        }                                                                                    \
        HALF_CASES(run_binary_half, NAME, false)                                             \
        break;
        HL_BINARY_ARITH_OPS(CASE_ARITH)
#define CASE_BOOL(NAME, ...)                                                                 \
    case HL_OP_##NAME:                                                                       \
        switch (dt) {                                                                        \
            case HL_F32: return run_binary<Op_##NAME, float, uint8_t>(c);                    \
            case HL_F64: return run_binary<Op_##NAME, double, uint8_t>(c);                   \
            case HL_I32: return run_binary<Op_##NAME, int32_t, uint8_t>(c);                  \
            case HL_I64: return run_binary<Op_##NAME, int64_t, uint8_t>(c);                  \
            case HL_U8: case HL_BOOL: return run_binary<Op_##NAME, uint8_t, uint8_t>(c);     \
            default: break;                                                                  \
        }                                                                                    \
        HALF_CASES(run_binary_half, NAME, true)                                              \
        break;
        HL_BINARY_BOOL_OPS(CASE_BOOL)
        default: break;
    }
    return no_kernel(c, c->in[0]);
}

template <class T>
static hl_status run_where(const hl_call *c, const hl_cuda_index &ix, int64_t n, cudaStream_t s) {
    auto where_kernel = where_k<T>;
    HL_LAUNCH(where_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, s, ix,
              (T *)hl_cuda_ptr(c->out[0]), (const uint8_t *)hl_cuda_ptr(c->in[0]),
              (const T *)hl_cuda_ptr(c->in[1]), (const T *)hl_cuda_ptr(c->in[2]), n);
    return hl_cuda_check_launch("where");
}

/* in[0] = cond (bool or uint8), in[1] = a, in[2] = b; moves elements by size alone. */
extern "C" hl_status hl_cuda_where(const hl_call *c) {
    const hl_tensor *ops[4] = {c->out[0], c->in[0], c->in[1], c->in[2]};
    hl_cuda_index ix = hl_cuda_index_of(4, ops);
    int64_t n = hl_cuda_numel(c->out[0]);
    if (!n) return HL_OK;
    cudaStream_t s = hl_cuda_dev(hl_cuda_call_device(c))->stream;
    switch (hl_cuda_dtype_size(c->out[0]->dtype)) {
        case 1: return run_where<uint8_t>(c, ix, n, s);
        case 2: return run_where<uint16_t>(c, ix, n, s);
        case 4: return run_where<uint32_t>(c, ix, n, s);
        default: return run_where<uint64_t>(c, ix, n, s);
    }
}
