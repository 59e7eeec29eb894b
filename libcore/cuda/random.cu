/*
 * random.cu - the random family on CUDA: Philox 4x32-10 (kernel_scalar.h, the CPU's one
 * definition) with the CPU's word layout (cpu/random.c, api/random.c), so a draw with the same (seed, offset) gives the same
 * 32-bit words on both devices, hence the same numbers (uniform and bernoulli bit for bit;
 * normal up to the last bits of the device's log, sin and cos). One thread per counter block.
 * float16 and bfloat16 draw float32's numbers from the same words, each rounded once.
 */
#include "convert.cuh"
#include "../src/kernel_scalar.h"

/* u in [0, 1) onto [low, high), never reaching high (the CPU's scale_float/scale_double),
   rounded step by step as the CPU rounds (hl_rn_*: no fused multiply-add). */
template <class T>
__device__ static inline T scale(double u, double low, double high) {
    T lo = (T)low, hi = (T)high;
    double range = high - low;
    double v = isfinite(range) ? hl_rn_add(low, hl_rn_mul(range, u))
                                : hl_rn_add(hl_rn_mul(low, 1.0 - u), hl_rn_mul(high, u));
    T r = (T)v;
    if (r >= hi) r = nextafter(hi, lo);
    if (r < lo) r = lo;
    return r;
}

enum { R_UNIFORM, R_NORMAL, R_BERNOULLI };

/* The next value of a half type (float16, bfloat16: sign bit 15, magnitude in the rest, so
   one step of the bits is one step of the value) below h. */
__device__ static inline uint16_t half_bits_below(uint16_t h) {
    if (!(h & 0x7fffu)) return 0x8001u;  /* below +-0: the negative subnormal */
    return (h & 0x8000u) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

/* v (the float32 or float64 draw) stored as T. A uniform draw in a half type keeps the
   float's contract [low, high) with the bounds rounded to T, as scale() does with them
   rounded to float: a value rounding up to high becomes the half value below it. */
template <class T, class C>
__device__ static inline T store(C v, bool uniform, double low, double high) {
    T r = hl_narrow<T>(v);
    if constexpr (std::is_same<T, hl_f16>::value || std::is_same<T, hl_bf16>::value) {
        if (uniform) {
            T lo = hl_narrow<T>(low), hi = hl_narrow<T>(high);
            if (hl_widen(r) >= hl_widen(hi)) r.v = half_bits_below(hi.v);
            if (hl_widen(r) < hl_widen(lo)) r = lo;
        }
    }
    return r;
}

/* T: the stored type; C: the type the draw computes in (float for float32, float16 and
   bfloat16, which take float32's words and formulas and round each result once). */
template <class T, class C>
__global__ void random_float_k(T *out, int64_t n, uint64_t seed_value, const uint64_t *seed_at,
                               uint64_t offset, int kind, double a, double b) {
    uint64_t seed = seed_at ? *seed_at : seed_value;  /* seed_at: a captured graph's key */
    const int per = sizeof(C) == 4 ? 4 : 2;
    int64_t nblocks = (n + per - 1) / per;
    HL_GRID_STRIDE(blk, nblocks) {
        uint32_t w[4];
        C vals[4];
        hl_philox_block(seed, offset, (uint64_t)blk, w);
        if (sizeof(C) == 4) {
            if (kind == R_UNIFORM) {
                for (int k = 0; k < 4; k++) vals[k] = scale<C>(hl_u24(w[k]), a, b);
            } else {
                for (int h = 0; h < 2; h++) {
                    float u1 = (float)hl_u24_open0(w[2 * h]), u2 = (float)hl_u24(w[2 * h + 1]);
                    float r = sqrtf(-2.0f * logf(u1)), t = (float)6.283185307179586476925 * u2;
                    float fa = (float)a, fb = (float)b;
                    vals[2 * h] = (C)hl_rn_add(fa, hl_rn_mul(fb, hl_rn_mul(r, cosf(t))));
                    vals[2 * h + 1] = (C)hl_rn_add(fa, hl_rn_mul(fb, hl_rn_mul(r, sinf(t))));
                }
            }
        } else {
            if (kind == R_UNIFORM) {
                for (int k = 0; k < 2; k++)
                    vals[k] = scale<C>(hl_u53(w[2 * k], w[2 * k + 1]), a, b);
            } else {
                double u1 = hl_u53_open0(w[0], w[1]), u2 = hl_u53(w[2], w[3]);
                double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586476925 * u2;
                vals[0] = (C)hl_rn_add(a, hl_rn_mul(b, hl_rn_mul(r, cos(t))));
                vals[1] = (C)hl_rn_add(a, hl_rn_mul(b, hl_rn_mul(r, sin(t))));
            }
        }
        int64_t first = blk * per, cnt = n - first < per ? n - first : per;
        for (int64_t k = 0; k < cnt; k++)
            out[first + k] = store<T, C>(vals[k], kind == R_UNIFORM, a, b);
    }
}

/* 1 (in the tensor's dtype: `one`) where word / 2^32 < p, else 0. */
template <class T>
__global__ void bernoulli_k(T *out, int64_t n, uint64_t seed_value, const uint64_t *seed_at,
                            uint64_t offset, double p, T one) {
    uint64_t seed = seed_at ? *seed_at : seed_value;
    int64_t nblocks = (n + 3) / 4;
    HL_GRID_STRIDE(blk, nblocks) {
        uint32_t w[4];
        hl_philox_block(seed, offset, (uint64_t)blk, w);
        int64_t first = blk * 4, cnt = n - first < 4 ? n - first : 4;
        for (int64_t k = 0; k < cnt; k++) out[first + k] = (double)w[k] * 0x1p-32 < p ? one : (T)0;
    }
}

template <class T>
static hl_status run_bernoulli(hl_cuda_device *d, hl_tensor *dst, int64_t n, uint64_t seed,
                               const uint64_t *seed_at,
                               uint64_t offset, double p) {
    uint64_t bits = hl_cuda_value_bits(dst->dtype, 1.0);
    T one;
    memcpy(&one, &bits, sizeof one);
    auto bernoulli_kernel = bernoulli_k<T>;
    HL_LAUNCH(bernoulli_kernel, hl_cuda_blocks((n + 3) / 4), HL_CUDA_THREADS, 0, d->stream,
              (T *)hl_cuda_ptr(dst), n, seed, seed_at, offset, p, one);
    return hl_cuda_check_launch("random_bernoulli");
}

template <class T, class C>
static hl_status run_random(hl_cuda_device *d, hl_tensor *dst, int64_t n, uint64_t seed,
                            const uint64_t *seed_at, uint64_t offset, int kind, const hl_call *c,
                            const char *op) {
    const int per = sizeof(C) == 4 ? 4 : 2;
    auto random_kernel = random_float_k<T, C>;
    HL_LAUNCH(random_kernel, hl_cuda_blocks((n + per - 1) / per), HL_CUDA_THREADS, 0, d->stream,
              (T *)hl_cuda_ptr(dst), n, seed, seed_at, offset, kind, c->f[0], c->f[1]);
    return hl_cuda_check_launch(op);
}

/* out[0] = dst (contiguous); i[0] = seed, i[1] = offset; f = the distribution's parameters. */
extern "C" hl_status hl_cuda_random(const hl_call *c) {
    hl_tensor *dst = c->out[0];
    int64_t n = hl_cuda_numel(dst);
    if (n == 0) return HL_OK;
    uint64_t seed, offset;
    memcpy(&seed, &c->i[0], sizeof seed);
    memcpy(&offset, &c->i[1], sizeof offset);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    /* a plan advances the key between replays: a captured kernel reads it from a word the
       graph's launch refreshes */
    const uint64_t *seed_at = hl_cuda_capture_word((const uint64_t *)&c->i[0]);
    if (c->op == HL_OP_RANDOM_BERNOULLI) {
        switch (hl_cuda_dtype_size(dst->dtype)) {
            case 1: return run_bernoulli<uint8_t>(d, dst, n, seed, seed_at, offset, c->f[0]);
            case 2: return run_bernoulli<uint16_t>(d, dst, n, seed, seed_at, offset, c->f[0]);
            case 4: return run_bernoulli<uint32_t>(d, dst, n, seed, seed_at, offset, c->f[0]);
            default: return run_bernoulli<uint64_t>(d, dst, n, seed, seed_at, offset, c->f[0]);
        }
    }
    int kind = c->op == HL_OP_RANDOM_UNIFORM ? R_UNIFORM : R_NORMAL;
    const char *op = HL_OPNAME(c->op);
#define RANDOM_CASE(code, T, C) \
    case code: return run_random<T, C>(d, dst, n, seed, seed_at, offset, kind, c, op);
    switch (dst->dtype) {
        RANDOM_CASE(HL_F32, float, float)
        RANDOM_CASE(HL_F64, double, double)
        RANDOM_CASE(HL_F16, hl_f16, float)  /* float32's words and formulas, rounded once */
        RANDOM_CASE(HL_BF16, hl_bf16, float)
        default: break;
    }
#undef RANDOM_CASE
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", op, HL_DESC(dst));
}
