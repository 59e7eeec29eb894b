/*
 * kernel_scalar.h - scalar helpers that the CPU kernels (cpu/) and the CUDA kernels
 * (libcore/cuda/) share, so that each rule has one definition: integer division and modulo
 * that never trap (ops.h's integer expressions call them), the taps of a pooling window, and
 * the Philox 4x32-10 block with its uniform conversions (the same stream on every device).
 *
 * Read as C by gcc (cpu/) and as C++ by nvcc and by g++ for the CUDA emulation; HL_HD marks
 * the functions for both host and device under nvcc.
 */
#ifndef HL_KERNEL_SCALAR_H
#define HL_KERNEL_SCALAR_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define HL_HD __host__ __device__
#else
#define HL_HD
#endif

/* ---- integer helpers that keep every input defined (no trap on a zero divisor) ---- */

static inline HL_HD int64_t hl_int_div(int64_t a, int64_t b) {  /* floor division; x // 0 == 0 */
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);                /* INT64_MIN // -1 wraps */
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline HL_HD int64_t hl_int_mod(int64_t a, int64_t b) {  /* sign of the divisor, x % 0 == 0 */
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline HL_HD int64_t hl_int_fmod(int64_t a, int64_t b) {  /* sign of the dividend */
    return (b == 0 || b == -1) ? 0 : a % b;
}
static inline HL_HD int64_t hl_int_pow(int64_t a, int64_t b) {   /* negative powers truncate */
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    uint64_t r = 1, base = (uint64_t)a;                            /* wraps like numpy */
    while (b) {
        if (b & 1) r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}
static inline HL_HD double hl_float_mod(double a, double b) {
    double r = fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* ---- sliding windows (pooling): taps t in [0, k) whose coordinate start + t * d lies in
   [0, size), as the range [*lo, *hi) ---- */
static inline HL_HD void hl_tap_range(int64_t start, int64_t d, int64_t size, int64_t k,
                                      int64_t *lo, int64_t *hi) {
    int64_t a = start >= 0 ? 0 : (-start + d - 1) / d;
    int64_t last = size - 1 - start;
    int64_t b = last < 0 ? 0 : last / d + 1;
    if (a > k) a = k;
    if (b > k) b = k;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* ---- Philox 4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as
   1, 2, 3", SC 2011), written from the paper's description. The key is the 64-bit seed (low
   word first); the 128-bit counter is offset + block (carry into the third word). ---- */

#define HL_PHILOX_M0 0xD2511F53u
#define HL_PHILOX_M1 0xCD9E8D57u
#define HL_PHILOX_W0 0x9E3779B9u /* key increments (Weyl sequence): golden ratio, sqrt(3) - 1 */
#define HL_PHILOX_W1 0xBB67AE85u

static inline HL_HD void hl_philox_block(uint64_t seed, uint64_t offset, uint64_t block,
                                         uint32_t w[4]) {
    uint64_t ctr = offset + block;
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = ctr < offset, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += HL_PHILOX_W0;
            k1 += HL_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)HL_PHILOX_M0 * c0, p1 = (uint64_t)HL_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    w[0] = c0, w[1] = c1, w[2] = c2, w[3] = c3;
}

/* Uniform doubles in [0, 1) with 24 and 53 random bits, and in (0, 1] for logarithms. */
static inline HL_HD double hl_u24(uint32_t a) { return (double)(a >> 8) * 0x1p-24; }
static inline HL_HD double hl_u53(uint32_t a, uint32_t b) {
    return (double)(((uint64_t)a << 21) | (b >> 11)) * 0x1p-53;
}
static inline HL_HD double hl_u24_open0(uint32_t a) { return (double)((a >> 8) + 1) * 0x1p-24; }
static inline HL_HD double hl_u53_open0(uint32_t a, uint32_t b) {
    return (double)((((uint64_t)a << 21) | (b >> 11)) + 1) * 0x1p-53;
}

#endif /* HL_KERNEL_SCALAR_H */
