/*
 * api/random.c - entry points of the counter-based random numbers (Philox 4x32-10; the
 * kernel is cpu/random.c).
 *
 * How many counters a draw consumes (hl/ops/random.py relies on this): each counter value
 * gives one Philox block of four 32-bit words. A float32 uniform, any normal in float32 and
 * any bernoulli takes one word per element (four elements per counter); float64 uniform and
 * normal take two words per element (two elements per counter); float16 and bfloat16 (on
 * a backend that draws them: cuda) take float32's words and round each number once. A draw
 * of n elements thus uses counters offset .. offset + ceil(n / per_counter) - 1, and element i reads counter
 * offset + i / per_counter, word i % per_counter (times two for float64): it depends only on
 * (seed, offset, i).
 *
 * Call record: out[0] = dst (contiguous); i[0] = seed, i[1] = offset (the uint64 bits);
 *   uniform f = {low, high}; normal f = {mean, std}; bernoulli f = {p}. Recorded into a plan,
 *   the record's seed moves on after each replay (hl_call.reseed_on_replay), so each run of
 *   the plan draws new numbers.
 */
#include <float.h>
#include <math.h>

#include "../core.h"

/* float_only: the draw is of real numbers (uniform, normal), so the tensor must be of a
   floating-point dtype the device computes the op in. */
static hl_status check_dst(const char *op, int code, const hl_tensor *dst, bool float_only) {
    if (!dst) return hl_fail(HL_ERR_VALUE, "%s: tensor is NULL", op);
    hl_status st = hl_check_op_dtype(op, code, dst->storage->device, "tensor", dst);
    if (st) return st;
    bool is_float = dst->dtype == HL_F32 || dst->dtype == HL_F64 || dst->dtype == HL_F16 ||
                    dst->dtype == HL_BF16;
    if (float_only && !is_float)
        return hl_fail(HL_ERR_DTYPE, "%s: needs a floating-point tensor, got %s; draw in "
                       "float32 and cast", op, hl_desc(dst));
    st = hl_check_writable(op, "the tensor", dst);
    if (st) return st;
    if (!hl_tensor_is_contiguous(dst))
        return hl_fail(HL_ERR_VALUE, "%s: the tensor %s must be contiguous (element i of a draw "
                       "is the i-th in memory order); fill a contiguous tensor and copy", op,
                       hl_desc(dst));
    return HL_OK;
}

/* A float32 (bfloat16: float32's range) or float16 result cannot reach a bound beyond its
   dtype's range. */
static bool fits(const hl_tensor *dst, double v) {
    double max = dst->dtype == HL_F16 ? 65504.0
                 : (dst->dtype == HL_F32 || dst->dtype == HL_BF16 ? FLT_MAX : INFINITY);
    return isfinite(v) && fabs(v) <= max;
}

static hl_status submit(int op, hl_tensor *dst, uint64_t seed, uint64_t offset, double a,
                        double b) {
    hl_call c = {.op = op, .n_out = 1, .out = {dst}, .f = {a, b}, .reseed_on_replay = true};
    memcpy(&c.i[0], &seed, sizeof seed);
    memcpy(&c.i[1], &offset, sizeof offset);
    return hl_submit(&c);
}

hl_status hl_random_uniform(hl_tensor *dst, uint64_t seed, uint64_t offset, double low,
                            double high) {
    hl_status st = check_dst("random_uniform", HL_OP_RANDOM_UNIFORM, dst, true);
    if (st) return st;
    if (!fits(dst, low) || !fits(dst, high) || !(low <= high))
        return hl_fail(HL_ERR_VALUE, "random_uniform: needs finite low <= high within %s's "
                       "range, got low=%g, high=%g", hl_dtype_name(dst->dtype), low, high);
    return submit(HL_OP_RANDOM_UNIFORM, dst, seed, offset, low, high);
}

hl_status hl_random_normal(hl_tensor *dst, uint64_t seed, uint64_t offset, double mean,
                           double std) {
    hl_status st = check_dst("random_normal", HL_OP_RANDOM_NORMAL, dst, true);
    if (st) return st;
    if (!fits(dst, mean) || !fits(dst, std) || !(std >= 0))
        return hl_fail(HL_ERR_VALUE, "random_normal: needs a finite mean and std >= 0 within "
                       "%s's range, got mean=%g, std=%g", hl_dtype_name(dst->dtype), mean, std);
    return submit(HL_OP_RANDOM_NORMAL, dst, seed, offset, mean, std);
}

hl_status hl_random_bernoulli(hl_tensor *dst, uint64_t seed, uint64_t offset, double p) {
    hl_status st = check_dst("random_bernoulli", HL_OP_RANDOM_BERNOULLI, dst, false);
    if (st) return st;
    if (!(p >= 0 && p <= 1))
        return hl_fail(HL_ERR_VALUE, "random_bernoulli: p must be in [0, 1], got %g", p);
    return submit(HL_OP_RANDOM_BERNOULLI, dst, seed, offset, p, 0);
}
