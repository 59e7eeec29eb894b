/*
 * winograd_product.c - the products of a Winograd forward pass against kernels transformed
 * once (conv_pack's Winograd layouts, packed_layouts.h), for inference:
 *     M[e] (C_out x tiles) = U[e] (C_out x C_in) @ V[e] (C_in x tiles)
 * for the 16 entries e of F(2x2, 3x3) (winograd.c) or the 36 of F(4x4, 3x3) (winograd43.c);
 * both lay U and V out alike, entry after entry.
 * OpenBLAS's batched call packs all 16 U[e] again on every call; at batch 1 that is most of
 * the work (a 512-channel layer's U is 16 MiB against 0.13 GFLOP of products), so the
 * products read U as conv_pack left it: panels of HL_WINOGRAD_MR output channels, input
 * channel by input channel. The transformed input V arrives cut into strips of NR tiles
 * (winograd.c writes it so), each strip C_in rows of NR contiguous values, so that one strip
 * stays in L1 while every panel of U passes over it: an MR x NR block of M is held in 12 AVX2
 * registers for the whole of C_in, then stored once (no epilogue: the output transform after
 * it adds the bias and applies the conv's epilogue).
 *
 * At batch 1 the deep layers' U comes from memory or L3 each call (ResNet-18's 256- and
 * 512-channel layers: 9.4 and 16.8 MB a layer) and the products waited on it: U[e]'s panels
 * are two streams of 24 bytes a k step (one for the AVX2 kernel), which the hardware
 * prefetchers did not run far enough ahead of (10 GB/s from one core, 19 from two, where
 * plain reads reach 21 and 37-42). So while a block runs over its panels it fetches the
 * panels it takes next into L2, a line's worth each k step (next_panels: the entry's next
 * ones, or the next pair's first): 512 channels at 7x7 1.84 -> 1.60 ms at one thread, 0.93
 * -> 0.78-0.88 at two; 256 at 14x14 1.2 -> 0.92, 0.63 -> 0.49; the AVX2 kernel 2.8 -> 1.94 and
 * 1.7 -> 1.25 at one thread; 64 and 128 channels (U within L2) unchanged. Into L2, not L1: L1
 * holds the strip of V and the panels in use. ResNet-18 at batch 1, two threads: 1.07 -> 0.98
 * of onnxruntime (an Intel Xeon with AVX-512).
 *
 * Work is split over (entry, strip) pairs: 16 or 36 per strip, so batch 1 at 7x7 (one strip) still
 * keeps two threads busy (chunks of the thread pool, thread_pool.h). The AVX-512 kernel runs where
 * hl_cpu_avx512() says so, the AVX2 + FMA one where the CPU has those (hl_conv_avx2);
 * elsewhere a portable loop computes the same sums in the same order (k ascending per
 * output), so both give the same bits up to FMA contraction.
 */
#include "../core.h"
#include "../packed_layouts.h"
#include "conv.h"
#include "conv_avx2.h"
#include "conv_avx512.h"   /* hl_cpu_avx512 */
#include "parallel.h"
#include "thread_pool.h"

enum { MR = HL_WINOGRAD_MR, NR = HL_WINOGRAD_NR };
_Static_assert(MR == 6 && NR == 16, "the AVX2 kernel holds a 6 x 16 block");

/* C (mr x NR, rows ldc apart) = A (mr rows, K steps, mr values per step) @ B (K x NR). */
HL_CLONES
static void block_portable(const float *restrict A, const float *restrict B, int64_t K,
                           float *restrict C, int64_t ldc, int mr) {
    float acc[MR][NR] = {{0}};
    for (int64_t k = 0; k < K; k++)
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < NR; j++) acc[r][j] += A[k * mr + r] * B[k * NR + j];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < NR; j++) C[r * ldc + j] = acc[r][j];
}

#if HL_CONV_HAVE_X86
/* The same with mr a constant where inlined: named accumulators (an array of them was kept
   on the stack, at half the speed), rows past mr compiled out. */
HL_AVX2 static inline __attribute__((always_inline)) void block_rows(
    const float *restrict A, const float *restrict B, int64_t K, float *restrict C,
    int64_t ldc, const int mr, const float *next) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define ROW(r, lo, hi)                                                                        \
    if (mr > r) {                                                                             \
        const __m256 a = _mm256_broadcast_ss(A + r);                                         \
        lo = _mm256_fmadd_ps(a, b0, lo);                                                      \
        hi = _mm256_fmadd_ps(a, b1, hi);                                                      \
    }
    for (int64_t k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B), b1 = _mm256_loadu_ps(B + 8);
        if (next) _mm_prefetch((const char *)(next + k * MR), _MM_HINT_T1);
        ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21)
        ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
        A += mr;
        B += NR;
    }
#undef ROW
#define STORE(r, lo, hi)                                                                      \
    if (mr > r) _mm256_storeu_ps(C + r * ldc, lo), _mm256_storeu_ps(C + r * ldc + 8, hi);
    STORE(0, c00, c01) STORE(1, c10, c11) STORE(2, c20, c21)
    STORE(3, c30, c31) STORE(4, c40, c41) STORE(5, c50, c51)
#undef STORE
}

HL_AVX2 static void block_avx2(const float *A, const float *B, int64_t K, float *C,
                               int64_t ldc, int mr, const float *next) {
    switch (mr) {
    case 6:   /* two copies: the one without a prefetch has no test in its loop */
        if (next) block_rows(A, B, K, C, ldc, 6, next);
        else block_rows(A, B, K, C, ldc, 6, NULL);
        break;
    case 5: block_rows(A, B, K, C, ldc, 5, NULL); break;
    case 4: block_rows(A, B, K, C, ldc, 4, NULL); break;
    case 3: block_rows(A, B, K, C, ldc, 3, NULL); break;
    case 2: block_rows(A, B, K, C, ldc, 2, NULL); break;
    default: block_rows(A, B, K, C, ldc, 1, NULL); break;
    }
}
#endif

#if HL_HAVE_AVX512_KERNELS
/* With 16 tiles a register, a strip's row is one load, and a panel's 6 x 16 block 6
   accumulators (6 FMAs of 4 cycles' latency on two ports: the FMAs would wait on each other).
   So two panels pass over the strip together, 12 x 16 in 12 accumulators, one load and 12
   broadcasts a step (the strip is read from L1 half as often); a last odd or partial panel
   alone. Each output is one FMA a step, k ascending, as in the AVX2 block: the same bits. */
HL_AVX512_TARGET static inline __attribute__((always_inline)) void block512_rows(
    const float *restrict A, const float *restrict A2, const float *restrict B, int64_t K,
    float *restrict C, int64_t ldc, const int mr, const int mr2, const float *next) {
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, d0 = c0,
           d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0;
#define ROW(r, acc, P, n)                                                                     \
    if (n > r) acc = _mm512_fmadd_ps(_mm512_set1_ps(P[r]), b, acc);
    for (int64_t k = 0; k < K; k++) {
        const __m512 b = _mm512_loadu_ps(B);
        if (next) _mm_prefetch((const char *)(next + k * 2 * MR), _MM_HINT_T1);
        ROW(0, c0, A, mr) ROW(1, c1, A, mr) ROW(2, c2, A, mr)
        ROW(3, c3, A, mr) ROW(4, c4, A, mr) ROW(5, c5, A, mr)
        ROW(0, d0, A2, mr2) ROW(1, d1, A2, mr2) ROW(2, d2, A2, mr2)
        ROW(3, d3, A2, mr2) ROW(4, d4, A2, mr2) ROW(5, d5, A2, mr2)
        A += mr;
        A2 += mr2;
        B += NR;
    }
#undef ROW
    const __m512 acc[2 * MR] = {c0, c1, c2, c3, c4, c5, d0, d1, d2, d3, d4, d5};
    for (int r = 0; r < mr; r++) _mm512_storeu_ps(C + r * ldc, acc[r]);
    for (int r = 0; r < mr2; r++) _mm512_storeu_ps(C + (MR + r) * ldc, acc[MR + r]);
}

/* Panels p and p + 1 (whole) together, or panel p (mr rows) alone. */
HL_AVX512_TARGET static void block12_avx512(const float *A, const float *B, int64_t K,
                                            float *C, int64_t ldc, const float *next) {
    /* two copies: the one without a prefetch has no test in its loop */
    if (next) block512_rows(A, A + MR * K, B, K, C, ldc, MR, MR, next);
    else block512_rows(A, A + MR * K, B, K, C, ldc, MR, MR, NULL);
}
HL_AVX512_TARGET static void block6_avx512(const float *A, const float *B, int64_t K, float *C,
                                           int64_t ldc, int mr) {
    switch (mr) {
    case 6: block512_rows(A, A, B, K, C, ldc, 6, 0, NULL); break;
    case 5: block512_rows(A, A, B, K, C, ldc, 5, 0, NULL); break;
    case 4: block512_rows(A, A, B, K, C, ldc, 4, 0, NULL); break;
    case 3: block512_rows(A, A, B, K, C, ldc, 3, 0, NULL); break;
    case 2: block512_rows(A, A, B, K, C, ldc, 2, 0, NULL); break;
    default: block512_rows(A, A, B, K, C, ldc, 1, 0, NULL); break;
    }
}
#endif

/* What the chunks of one call share. */
typedef struct {
    const float *U, *V;
    float *M;
    int64_t c_out, c_in, vs, strips, ms, ldm;
    int entries;
    bool avx2, avx512;
} product;

/* What a thread reads of U after panels [p, p + n) of pair t (its chunk ends before t1): the
   entry's next panels, else the next pair's first ones (the same entry's again at its next
   strip: U[e] of 512 channels, 1 MB, is no longer in L1 or all in L2); NULL after its chunk's
   last pair, whose successor another thread may take. A block fetches one panel's span (two
   for the AVX-512 pair) from there: before an entry's odd last panel that reaches into the
   next entry, or past the end of U after the last entry's (a prefetch never faults). */
static const float *next_panels(const product *q, int64_t t, int64_t t1, int64_t p, int64_t n) {
    const int64_t panels = (q->c_out + MR - 1) / MR;
    const float *Ue = q->U + t / q->strips * q->c_out * q->c_in;
    if (p + n < panels) return Ue + (p + n) * MR * q->c_in;
    return t + 1 < t1 ? q->U + (t + 1) / q->strips * q->c_out * q->c_in : NULL;
}

/* The (entry, strip) pairs [t0, t1): every panel of U[e] over strip s of V[e]. */
static void product_pairs(int64_t t0, int64_t t1, void *arg) {
    const product *q = arg;
    const int64_t panels = (q->c_out + MR - 1) / MR;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t e = t / q->strips, s = t % q->strips;
        const float *B = q->V + e * q->vs + s * q->c_in * NR;
        const float *Ue = q->U + e * q->c_out * q->c_in;
        float *C = q->M + e * q->ms + s * NR;
        int64_t p = 0;
#if HL_HAVE_AVX512_KERNELS
        if (q->avx512) {
            for (; p < panels; p++) {
                const int mr = (int)HL_MIN(MR, q->c_out - p * MR);
                const float *A = Ue + p * MR * q->c_in;
                if (mr == MR && p + 1 < panels && q->c_out - (p + 1) * MR >= MR)
                    block12_avx512(A, B, q->c_in, C + p * MR * q->ldm, q->ldm,
                                   next_panels(q, t, t1, p, 2)), p++;
                else
                    block6_avx512(A, B, q->c_in, C + p * MR * q->ldm, q->ldm, mr);
            }
        }
#endif
        for (; p < panels; p++) {
            const int mr = (int)HL_MIN(MR, q->c_out - p * MR);
            const float *A = Ue + p * MR * q->c_in;
#if HL_CONV_HAVE_X86
            if (q->avx2) {
                block_avx2(A, B, q->c_in, C + p * MR * q->ldm, q->ldm, mr,
                           next_panels(q, t, t1, p, 1));
                continue;
            }
#endif
            block_portable(A, B, q->c_in, C + p * MR * q->ldm, q->ldm, mr);
        }
    }
}

void hl_winograd_product(const float *U, int entries, int64_t c_out, int64_t c_in,
                         const float *V, int64_t vs, int64_t strips, float *M, int64_t ms,
                         int64_t ldm) {
    const int64_t pairs = entries * strips;
    const double flops = 2.0 * entries * (double)c_out * (double)c_in * (double)(strips * NR);
    const bool avx2 = hl_conv_avx2();   /* HL_CONV_AVX2=0: the portable block (tests) */
#if HL_HAVE_AVX512_KERNELS
    const bool avx512 = avx2 && hl_cpu_avx512();
#else
    const bool avx512 = false;
#endif
    const product q = {U, V, M, c_out, c_in, vs, strips, ms, ldm, entries, avx2, avx512};
    /* one pair per chunk: a thread the host deschedules leaves the rest to the others */
    hl_parallel_for(pairs, flops > 1e6 ? 1 : pairs, product_pairs, (void *)&q);
}
