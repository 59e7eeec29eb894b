/*
 * convert.cuh - dtype conversions with the CPU's rules (cpu/copy.c, cpu/dtypes.h): floats
 * saturate into integers and NaN becomes 0, bool is `!= 0`, float16 and bfloat16 round to
 * nearest even once (a double is first rounded to float "to odd", so the second rounding is
 * exact). Storage types: each dtype's C type, with tags for bool, float16 and bfloat16.
 */
#ifndef HL_CUDA_CONVERT_CUH
#define HL_CUDA_CONVERT_CUH

#include <type_traits>

#include "hl_cuda.cuh"

struct hl_b8 { uint8_t v; };
struct hl_f16 { uint16_t v; };
struct hl_bf16 { uint16_t v; };

/* Storage -> a C arithmetic value. */
template <class T> __device__ __host__ static inline T hl_widen(T x) { return x; }
__device__ __host__ static inline uint8_t hl_widen(hl_b8 x) { return x.v; }
__device__ __host__ static inline float hl_widen(hl_f16 x) { return hl_cuda_half_to_float(x.v); }
__device__ __host__ static inline float hl_widen(hl_bf16 x) { return hl_cuda_bf16_to_float(x.v); }
/* The type a kernel computes a storage type in: itself, float for float16 and bfloat16. */
template <class T> using hl_arith = decltype(hl_widen(T{}));

__device__ __host__ static inline float hl_f64_to_f32_odd(double d) {
    float f = (float)d;
    if ((double)f == d || f != f) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1;
    memcpy(&f, &u, 4);
    return f;
}
__device__ __host__ static inline float hl_i64_to_f32_odd(int64_t v) {
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (a >> 24) {
        int top = 63;
        while (!(a >> top)) top--;
        int shift = top + 1 - 24;
        uint64_t kept = a >> shift;
        if (a & ((UINT64_C(1) << shift) - 1)) kept |= 1;
        a = kept << shift;
    }
    float f = (float)a;
    return v < 0 ? -f : f;
}
template <class V> __device__ __host__ static inline float hl_to_f32_odd(V v) {
    if constexpr (std::is_same<V, float>::value) return v;
    else if constexpr (std::is_same<V, double>::value) return hl_f64_to_f32_odd(v);
    else return hl_i64_to_f32_odd((int64_t)v);
}

template <class I, class V> __device__ __host__ static inline I hl_saturate(V v) {
    if constexpr (std::is_floating_point<V>::value) {
        double d = (double)v;
        if (d != d) return 0;
        if (std::is_same<I, uint8_t>::value) return d <= 0 ? 0 : (d >= 255.0 ? 255 : (I)d);
        if (std::is_same<I, int32_t>::value)
            return d >= 2147483647.0 ? (I)INT32_MAX : (d <= -2147483648.0 ? (I)INT32_MIN : (I)d);
        return d >= 9223372036854775807.0 ? (I)INT64_MAX
                                           : (d <= -9223372036854775808.0 ? (I)INT64_MIN : (I)d);
    } else {
        return (I)v;
    }
}

/* A C arithmetic value -> storage of type D. */
template <class D, class V> __device__ __host__ static inline D hl_narrow(V v) {
    if constexpr (std::is_same<D, float>::value || std::is_same<D, double>::value) return (D)v;
    else if constexpr (std::is_same<D, hl_b8>::value) return hl_b8{(uint8_t)(v != 0)};
    else if constexpr (std::is_same<D, hl_f16>::value)
        return hl_f16{hl_cuda_float_to_half(hl_to_f32_odd(v))};
    else if constexpr (std::is_same<D, hl_bf16>::value)
        return hl_bf16{hl_cuda_float_to_bf16(hl_to_f32_odd(v))};
    else return hl_saturate<D>(v);
}

/* Every dtype with its storage type: X(code, type). */
#define HL_CUDA_ALL_DTYPES(X, ...)                                                           \
    X(__VA_ARGS__, HL_F32, float) X(__VA_ARGS__, HL_F64, double)                             \
    X(__VA_ARGS__, HL_I32, int32_t) X(__VA_ARGS__, HL_I64, int64_t)                          \
    X(__VA_ARGS__, HL_U8, uint8_t) X(__VA_ARGS__, HL_BOOL, hl_b8)                            \
    X(__VA_ARGS__, HL_F16, hl_f16) X(__VA_ARGS__, HL_BF16, hl_bf16)

/* The same list again: a macro cannot expand inside itself (the cast switch nests two). */
#define HL_CUDA_ALL_DTYPES_INNER(X, ...)                                                     \
    X(__VA_ARGS__, HL_F32, float) X(__VA_ARGS__, HL_F64, double)                             \
    X(__VA_ARGS__, HL_I32, int32_t) X(__VA_ARGS__, HL_I64, int64_t)                          \
    X(__VA_ARGS__, HL_U8, uint8_t) X(__VA_ARGS__, HL_BOOL, hl_b8)                            \
    X(__VA_ARGS__, HL_F16, hl_f16) X(__VA_ARGS__, HL_BF16, hl_bf16)

/* Element-wise widening into float32 and the single rounding back: the half-type kernels
   that sum (conv's weight gradient, gather_grad, scatter_elements' reductions) accumulate in a
   float32 buffer and round once at the end. */
template <class T>
__global__ void widen_k(float *o, const T *x, int64_t n) {
    HL_GRID_STRIDE(e, n) o[e] = (float)hl_widen(x[e]);
}
template <class T>
__global__ void narrow_k(T *o, const float *x, int64_t n) {
    HL_GRID_STRIDE(e, n) o[e] = hl_narrow<T>(x[e]);
}

/* value's bytes in dtype d (fill, eye, bernoulli's one). */
static inline uint64_t hl_cuda_value_bits(hl_dtype d, double value) {
    uint64_t bits = 0;
    switch (d) {
#define HL_BITS_CASE(_, code, T) \
    case code: { T x = hl_narrow<T>(value); memcpy(&bits, &x, sizeof x); break; }
        HL_CUDA_ALL_DTYPES(HL_BITS_CASE, _)
#undef HL_BITS_CASE
        default: break;
    }
    return bits;
}

#endif
