/*
 * random.c - CPU kernel of the random family: Philox 4x32-10 (kernel_scalar.h, shared with
 * the CUDA kernels, so both devices draw one stream). Every block is computed on its own, so the
 * numbers are the same for any thread count. Layout of elements over counters: see
 * api/random.c.
 */
#include <math.h>

#include "../kernel_scalar.h"
#include "remap.h"
#include "thread_pool.h"

static const double TWO_PI = 6.283185307179586476925;

/* Box-Muller: two normals from one u1 in (0, 1] (never log(0)) and one u2 in [0, 1). */
static inline void box_muller(double u1, double u2, double *z0, double *z1) {
    double r = sqrt(-2.0 * log(u1));
    *z0 = r * cos(TWO_PI * u2);
    *z1 = r * sin(TWO_PI * u2);
}

/* Maps u in [0, 1) onto [low, high) in T, rounding never reaching high. */
#define SCALE_UNIFORM(T, NEXT)                                                              \
    static inline T scale_##T(double u, double low, double high, T lo, T hi) {             \
        double range = high - low;                                                          \
        double v = isfinite(range) ? low + range * u : low * (1.0 - u) + high * u;          \
        T r = (T)v;                                                                         \
        if (r >= hi) r = NEXT(hi, lo);                                                      \
        if (r < lo) r = lo;                                                                 \
        return r;                                                                           \
    }
SCALE_UNIFORM(float, nextafterf)
SCALE_UNIFORM(double, nextafter)

/* Runs BODY once per counter block of [b0, b1); vals[] holds the block's per-element values,
   N_PER of them, and the loop stores the ones that fall inside the tensor. */
#define FOR_BLOCKS(T, N_PER, BODY)                                                          \
    do {                                                                                    \
        for (int64_t b = b0; b < b1; b++) {                                                 \
            uint32_t w[4];                                                                  \
            T vals[4];                                                                      \
            hl_philox_block(seed, offset, (uint64_t)b, w);                                  \
            BODY;                                                                           \
            int64_t first = b * (N_PER);                                                    \
            int64_t cnt = n - first < (N_PER) ? n - first : (N_PER);                        \
            for (int64_t k = 0; k < cnt; k++) out[first + k] = vals[k];                     \
        }                                                                                   \
    } while (0)

static void uniform_f32(float *out, int64_t n, int64_t b0, int64_t b1, uint64_t seed, uint64_t offset, double low,
                        double high) {
    float lo = (float)low, hi = (float)high;
    FOR_BLOCKS(float, 4, for (int k = 0; k < 4; k++)
                             vals[k] = scale_float(hl_u24(w[k]), low, high, lo, hi));
}

static void uniform_f64(double *out, int64_t n, int64_t b0, int64_t b1, uint64_t seed, uint64_t offset, double low,
                        double high) {
    FOR_BLOCKS(double, 2, for (int k = 0; k < 2; k++) vals[k] =
                              scale_double(hl_u53(w[2 * k], w[2 * k + 1]), low, high, low, high));
}

/* The float32 version computes in float: the 24-bit uniforms are exact in float, and the
   result is rounded to float anyway (several times faster than the double functions). */
static inline void box_muller_f(float u1, float u2, float *z0, float *z1) {
    float r = sqrtf(-2.0f * logf(u1)), t = (float)TWO_PI * u2;
    *z0 = r * cosf(t);
    *z1 = r * sinf(t);
}

static void normal_f32(float *out, int64_t n, int64_t b0, int64_t b1, uint64_t seed, uint64_t offset, double mean,
                       double std) {
    float m = (float)mean, s = (float)std;
    FOR_BLOCKS(float, 4, {
        float z[4];
        box_muller_f((float)hl_u24_open0(w[0]), (float)hl_u24(w[1]), &z[0], &z[1]);
        box_muller_f((float)hl_u24_open0(w[2]), (float)hl_u24(w[3]), &z[2], &z[3]);
        for (int k = 0; k < 4; k++) vals[k] = m + s * z[k];
    });
}

static void normal_f64(double *out, int64_t n, int64_t b0, int64_t b1, uint64_t seed, uint64_t offset, double mean,
                       double std) {
    FOR_BLOCKS(double, 2, {
        double z[2];
        box_muller(hl_u53_open0(w[0], w[1]), hl_u53(w[2], w[3]), &z[0], &z[1]);
        for (int k = 0; k < 2; k++) vals[k] = mean + std * z[k];
    });
}

/* 1 (in the tensor's dtype) where a 32-bit uniform u = word / 2^32 is below p. */
#define BERNOULLI(T)                                                                       \
    static void bernoulli_##T(T *out, int64_t n, int64_t b0, int64_t b1, uint64_t seed,   \
                              uint64_t offset, double p, T zero, T one) {                                             \
        FOR_BLOCKS(T, 4, for (int k = 0; k < 4; k++) vals[k] =                             \
                             (double)w[k] * 0x1p-32 < p ? one : zero);                     \
    }
BERNOULLI(uint8_t)
BERNOULLI(uint16_t)
BERNOULLI(uint32_t)
BERNOULLI(uint64_t)

/* One draw: which, into what, its two parameters (low/high, mean/std, p) and bernoulli's
   values of 0 and 1 as bytes of the element size. */
typedef struct {
    int op;
    bool f64;
    size_t esz;
    void *out;
    int64_t n;
    uint64_t seed, offset;
    double a, b;
    unsigned char zero[8], one[8];
} draw_job;

static void draw_blocks(int64_t b0, int64_t b1, void *ctx) {
    const draw_job *q = ctx;
    void *p = q->out;
    const int64_t n = q->n;
    if (q->op == HL_OP_RANDOM_UNIFORM) {
        if (q->f64) uniform_f64(p, n, b0, b1, q->seed, q->offset, q->a, q->b);
        else uniform_f32(p, n, b0, b1, q->seed, q->offset, q->a, q->b);
    } else if (q->op == HL_OP_RANDOM_NORMAL) {
        if (q->f64) normal_f64(p, n, b0, b1, q->seed, q->offset, q->a, q->b);
        else normal_f32(p, n, b0, b1, q->seed, q->offset, q->a, q->b);
    } else {
        switch (q->esz) {
#define BERNOULLI_CASE(T)                                                     \
    case sizeof(T): {                                                         \
        T z, o;                                                               \
        memcpy(&z, q->zero, sizeof z);                                        \
        memcpy(&o, q->one, sizeof o);                                         \
        bernoulli_##T(p, n, b0, b1, q->seed, q->offset, q->a, z, o);          \
        break;                                                                \
    }
            BERNOULLI_CASE(uint8_t)
            BERNOULLI_CASE(uint16_t)
            BERNOULLI_CASE(uint32_t)
            BERNOULLI_CASE(uint64_t)
#undef BERNOULLI_CASE
            default: break;
        }
    }
}

hl_status hl_cpu_random(const hl_call *c) {
    hl_tensor *dst = c->out[0];
    int64_t n = hl_shape_numel(dst->ndim, dst->shape);
    if (n == 0) return HL_OK;
    draw_job q = {.op = c->op, .f64 = dst->dtype == HL_F64, .esz = hl_dtype_size(dst->dtype),
                  .out = hl_ptr(dst), .n = n, .a = c->f[0], .b = c->f[1]};
    memcpy(&q.seed, &c->i[0], sizeof q.seed);
    memcpy(&q.offset, &c->i[1], sizeof q.offset);
    bool known = c->op == HL_OP_RANDOM_UNIFORM || c->op == HL_OP_RANDOM_NORMAL ||
                 (c->op == HL_OP_RANDOM_BERNOULLI &&
                  (q.esz == 1 || q.esz == 2 || q.esz == 4 || q.esz == 8));
    if (!known)
        return hl_fail(HL_ERR_INTERNAL, "random: op %s with %s", hl_op_str(c->op),
                       hl_desc(dst));
    if (c->op == HL_OP_RANDOM_BERNOULLI) {
        uint64_t zero, one;
        hl_cpu_value_bits(dst->dtype, 0.0, &zero);
        hl_cpu_value_bits(dst->dtype, 1.0, &one);
        memcpy(q.zero, &zero, sizeof zero);
        memcpy(q.one, &one, sizeof one);
    }
    /* float64 draws take 2 values a counter block, the others 4; every block is its own */
    const int64_t per = q.f64 && c->op != HL_OP_RANDOM_BERNOULLI ? 2 : 4;
    const int64_t blocks = (n + per - 1) / per;
    hl_parallel_for(blocks, blocks >= 4096 ? 1024 : blocks, draw_blocks, &q);
    return HL_OK;
}
