/*
 * epilogue.cuh - the epilogue of the fused inference products on CUDA (conv_fused in conv.cu,
 * matmul_fused in fused.cu): y = act(y + bias + residual), one pass over the product's
 * output in place, in the dtype's own arithmetic and in the CPU's order (the bias, then the
 * residual, then the activation: cpu/conv_epilogue_impl.h, cpu/matmul_fused.c), so that a
 * fused call equals the product, add and activation ops one after another on cuda.
 *
 * Sums and products go through hl_rn_add/hl_rn_mul (hl_cuda.cuh says why).
 */
#ifndef HL_CUDA_EPILOGUE_CUH
#define HL_CUDA_EPILOGUE_CUH

#include "convert.cuh"

__device__ static inline float hl_cuda_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}
__device__ static inline double hl_cuda_gelu(double x) {
    return 0.5 * x * (1 + erf(x * 0.70710678118654752440));
}
__device__ static inline float hl_cuda_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
__device__ static inline double hl_cuda_gelu_tanh(double x) {
    return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* The activation HL_CONV_ACT_* of x, with parameters p0 (alpha) and p1 (beta): the
   element-wise ops' expressions (ops.h), NaN passing through. */
template <class T>
__device__ static inline T hl_cuda_act(int act, T x, T p0, T p1) {
    switch (act) {
    case HL_CONV_ACT_RELU: return x > 0 ? x : (x == x ? T(0) : x);
    case HL_CONV_ACT_CLIP: {
        const T lo = x < p0 ? p0 : x;
        return lo > p1 ? p1 : lo;
    }
    case HL_CONV_ACT_LEAKY_RELU: return x >= 0 ? x : hl_rn_mul(p0, x);
    case HL_CONV_ACT_HARD_SIGMOID: {
        if (x != x) return x;
        const T v = hl_rn_add(hl_rn_mul(p0, x), p1);
        const T m = v < T(1) ? v : T(1);  /* fmin(1, v): 1 for a NaN v */
        return m > T(0) ? m : T(0);
    }
    case HL_CONV_ACT_GELU: return hl_cuda_gelu(x);
    case HL_CONV_ACT_GELU_TANH: return hl_cuda_gelu_tanh(x);
    default: return x;
    }
}

/* What the epilogue applies: bias[(i / bias_div) % bias_mod] (NCHW channels: div the plane,
   mod the channels; rows of a product: div 1, mod N), the residual at i, the activation. */
struct hl_cuda_epilogue {
    int act;
    double alpha, beta;
    const void *bias, *res;
    int64_t bias_div, bias_mod;
};

template <class T>
__global__ void hl_cuda_epilogue_k(hl_cuda_epilogue e, T *y, int64_t n) {
    const T *bias = (const T *)e.bias, *res = (const T *)e.res;
    const T p0 = (T)e.alpha, p1 = (T)e.beta;
    HL_GRID_STRIDE(i, n) {
        T v = y[i];
        if (bias) v = hl_rn_add(v, bias[(i / e.bias_div) % e.bias_mod]);
        if (res) v = hl_rn_add(v, res[i]);
        y[i] = hl_cuda_act(e.act, v, p0, p1);
    }
}

/* Launches the epilogue over y's n elements on d's stream (nothing when it has nothing to
   do). float32 and float64 only: the fused ops compute in those. */
template <class T>
static hl_status hl_cuda_run_epilogue(hl_cuda_device *d, const hl_cuda_epilogue &e, T *y,
                                      int64_t n, const char *op) {
    if (n == 0 || (!e.bias && !e.res && e.act == HL_CONV_ACT_NONE)) return HL_OK;
    auto kernel = hl_cuda_epilogue_k<T>;
    HL_LAUNCH(kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, e, y, n);
    return hl_cuda_check_launch(op);
}

#endif /* HL_CUDA_EPILOGUE_CUH */
