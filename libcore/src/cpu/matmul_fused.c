/*
 * matmul_fused.c - CPU kernels of gemm_pack_b and matmul_fused (api/matmul_fused.c):
 * act(A @ B + bias + residual) with the epilogue applied to each output tile while it is in
 * the L1 cache, B packed once (hl_gemm_pack_b: what an inference program does with a constant
 * weight at prepare()); with a plain B, OpenBLAS's product and the epilogue as a pass after.
 *
 * Packed B: panels of NR = 16 columns (zeros past column N), cut into blocks of KC rows; the
 * blocks of rows [0, KC) of every panel come first, panel after panel, then those of rows
 * [KC, 2 KC), and so on (packed_at). hl_gemm_pack_b makes it as a (P, K, 16) float32 tensor,
 * P = ceil(N / 16) (the shape gives the size; the order is this one). The micro-kernel reads
 * a block (16 KiB, it stays in L1) from start to end, and the driver reads the blocks of one
 * KC step in memory order, a stream the hardware prefetchers follow.
 *
 * Loops: the threads share items of (a block of at most MC rows) x (a range of panels) out
 * (split_product: rows when there are enough, else panels too); an item's rows of A are
 * packed (MR rows interleaved per k) once for all of K, by one thread, which keeps them for
 * its next item of the same rows; then for each NC_PANELS panels, KC blocks of K, each
 * panel, tiles of MR = 6 rows. A tile's 6 x 16 sums live in 12 AVX2 registers; the block of
 * C (MC x 256) stays in L2 across the KC steps. Each tile of a panel prefetches its share of
 * the next panel (B streams from memory, which otherwise stalls the kernel: 78 -> 83 GF/s at
 * 60 x 256 x 4096 when the first tile fetched it all; spread over the tiles, GPT-2's
 * 512 x 768 x 50257 logits went 89 -> 92 GF/s), one line a step of its k loop (issued all
 * before the tile, a 64-row block's 85 a tile filled the core's line-fill buffers and stalled
 * it there: 14% of a 64 x 768 x 3072 product, 152 -> 174 GF/s at one thread once spread, and
 * GPT-2's batch-1 logits 19.3 -> 16.7 ms at two threads), and in the last KC block its rows
 * of the residual (rows ldr apart, one line each, which the hardware prefetchers do not
 * guess: 2-4% on the residual products). Tiles of the last KC block get the epilogue right after
 * their store.
 *
 * The AVX2/FMA micro-kernel is compiled for that target and chosen at run time (the default
 * build targets baseline x86-64); other CPUs get a portable one. Where hl_cpu_avx512()
 * (cpu_features.h), AVX-512 kernels take the full panels instead, two at a time: tiles of
 * 12 x 32 (24 zmm sums; two B loads and twelve broadcasts per k), summed in the AVX2
 * kernel's order and finished by the same epilogue on 16 lanes, so that both paths give the
 * same bits; the narrower last panel stays on the AVX2 kernel (its epilogue is the scalar
 * one either way).
 */
#include <cblas.h>
#include <stdlib.h>

#include "blas_layout.h"
#include "cpu_features.h"
#include "dtypes.h"
#include "fast_math.h"
#include "../matmul_fused_record.h"
#include "../packed_layouts.h"
#include "parallel.h"
#include "tile_rows.h"

/* MR x NR: the micro-kernel's tile; KC x NR: a B micro-panel (16 KiB, L1); MC x K: the rows
   of A packed at a time (read KC columns at a time); MC x NC_PANELS * NR: the block of C that
   the KC steps add into (L2). */
enum { NR = HL_PACK_B_NR, MR = 6, KC = HL_PACK_B_KC, MC = 144, NC_PANELS = 16 };
_Static_assert(NR == 16, "the tile kernels hold a row of 16 columns (two 8-float vectors)");
/* Elements of B from which gemm_pack_b packs on several threads (see pack_b). */
enum { PACK_PAR_MIN = 1 << 22 };

/* ---- the epilogue ---- */

typedef struct {
    int act;
    double alpha, beta;    /* the activation's parameters (HL_CONV_ACT_*) */
    const char *bias;      /* N values, or NULL */
    const char *res;       /* the residual, rows of ldr elements, or NULL */
    int64_t ldr;
} epilogue;

static inline float gelu_f32(float x) {
    return 0.5f * x * (1.0f + hl_erf_f32(x * 0.70710678118654752440f));
}
static inline float gelu_tanh_f32(float x) {
    return 0.5f * x * (1.0f + hl_tanh_f32(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
static inline double gelu_f64(double x) { return 0.5 * x * (1 + erf(x * 0.70710678118654752440)); }
static inline double gelu_tanh_f64(double x) {
    return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/* y[j] = act(y[j] + bias[j] + r[j]) for j < n (bias, r may be NULL). The activations are the
   element-wise ops' expressions (ops.h); one loop per activation so that each vectorises. */
#define EPILOGUE_ROW(SFX, T, GELU, GELU_TANH)                                                  \
    HL_CLONES static void epilogue_row_##SFX(int act, T p0, T p1, T *restrict y,               \
                                             const T *restrict bias, const T *restrict r,     \
                                             int64_t n) {                                     \
        if (bias)                                                                              \
            for (int64_t j = 0; j < n; j++) y[j] += bias[j];                                   \
        if (r)                                                                                 \
            for (int64_t j = 0; j < n; j++) y[j] += r[j];                                      \
        switch (act) {                                                                         \
        case HL_CONV_ACT_RELU:                                                                 \
            for (int64_t j = 0; j < n; j++) { const T x = y[j]; y[j] = x > 0 ? x : (x == x ? 0 : x); } \
            break;                                                                             \
        case HL_CONV_ACT_CLIP:                                                                 \
            for (int64_t j = 0; j < n; j++) {                                                  \
                const T x = y[j];                                                              \
                y[j] = (x < p0 ? p0 : x) > p1 ? p1 : (x < p0 ? p0 : x);                        \
            }                                                                                  \
            break;                                                                             \
        case HL_CONV_ACT_LEAKY_RELU:                                                           \
            for (int64_t j = 0; j < n; j++) { const T x = y[j]; y[j] = x >= 0 ? x : p0 * x; }  \
            break;                                                                             \
        case HL_CONV_ACT_HARD_SIGMOID:                                                         \
            for (int64_t j = 0; j < n; j++) {                                                  \
                const T x = y[j];                                                              \
                y[j] = x == x ? fmax(0, fmin(1, p0 * x + p1)) : x;                             \
            }                                                                                  \
            break;                                                                             \
        case HL_CONV_ACT_GELU:                                                                 \
            for (int64_t j = 0; j < n; j++) y[j] = GELU(y[j]);                                 \
            break;                                                                             \
        case HL_CONV_ACT_GELU_TANH:                                                            \
            for (int64_t j = 0; j < n; j++) y[j] = GELU_TANH(y[j]);                            \
            break;                                                                             \
        default:                                                                               \
            break;                                                                             \
        }                                                                                      \
    }
EPILOGUE_ROW(f32, float, gelu_f32, gelu_tanh_f32)
EPILOGUE_ROW(f64, double, gelu_f64, gelu_tanh_f64)

static inline bool epilogue_needed(const epilogue *e) {
    return e->act != HL_CONV_ACT_NONE || e->bias || e->res;
}

/* The epilogue over rows [i0, i0 + rows) and columns [j0, j0 + n) of C. */
static void epilogue_f32(const epilogue *e, float *c, int64_t ldc, int64_t i0, int rows,
                         int64_t j0, int64_t n) {
    const float *bias = e->bias ? (const float *)e->bias + j0 : NULL;
    for (int r = 0; r < rows; r++)
        epilogue_row_f32(e->act, (float)e->alpha, (float)e->beta, c + (i0 + r) * ldc + j0, bias,
                         e->res ? (const float *)e->res + (i0 + r) * e->ldr + j0 : NULL, n);
}

/* ---- packing ---- */

/* Where the KC rows of panel p that start at row pc begin in a packed B: KC-row blocks one
   after another, and in each, the panels one after another (kc x NR floats each). */
static inline int64_t packed_at(int64_t K, int64_t P, int64_t p, int64_t pc) {
    return hl_packed_b_at(K, P, p, pc);
}

/* Panels [p0, p1) of B (K x N, element (k, n) at b[k * s0 + n * s1]) into the packed dst
   (P panels). A row-major B is read 8 panels (512 bytes of a row) at a time, so that each
   row is read in long runs while 8 destinations fill: packing GPT-2's weights is then a pass
   at memory speed rather than one 64-byte copy per row and panel, page after page. */
static void pack_panels(const float *b, int64_t s0, int64_t s1, int64_t K, int64_t N,
                        int64_t P, int64_t p0, int64_t p1, float *dst) {
    enum { GROUP = 8 };
    if (s1 != 1) {  /* a transposed B (Gemm's transB): each column is read along k, in runs */
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = HL_MIN(KC, K - pc);
            for (int64_t p = p0; p < p1; p++) {
                float *d = dst + packed_at(K, P, p, pc);
                const int64_t j0 = p * NR, nv = HL_MIN(NR, N - j0);
                for (int64_t j = 0; j < NR; j++) {
                    const float *src = b + pc * s0 + (j0 + j) * s1;
                    if (j < nv)
                        for (int64_t k = 0; k < kc; k++) d[k * NR + j] = src[k * s0];
                    else
                        for (int64_t k = 0; k < kc; k++) d[k * NR + j] = 0.0f;
                }
            }
        }
        return;
    }
    for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = HL_MIN(KC, K - pc);
        for (int64_t g = p0; g < p1; g += GROUP) {
            const int64_t g1 = HL_MIN(p1, g + GROUP);
            for (int64_t k = 0; k < kc; k++) {
                for (int64_t p = g; p < g1; p++) {
                    float *d = dst + packed_at(K, P, p, pc) + k * NR;
                    const int64_t j0 = p * NR, nv = HL_MIN(NR, N - j0);
                    const float *src = b + (pc + k) * s0 + j0 * s1;
                    if (s1 == 1 && nv == NR) {
                        for (int j = 0; j < NR; j++) d[j] = src[j];
                    } else {
                        for (int64_t j = 0; j < NR; j++) d[j] = j < nv ? src[j * s1] : 0.0f;
                    }
                }
            }
        }
    }
}

/* ---- micro-kernels: C[R x 16] (+)= A[R x kc] @ Bpanel[kc x 16] ---- */

typedef void (*tile_fn)(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                        int64_t ldc, int acc);

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_KERNEL 1

#define AVX2 __attribute__((target("avx2,fma"), always_inline)) static inline

/* fast_math.h's float32 exp and erf, eight lanes at a time (the same formulas and error
   bounds; k is rounded half to even here, which keeps |r| <= ln2 / 2). */
AVX2 __m256 exp_v(__m256 y) {                           /* y in [-87, 80] */
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), y);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
/* NaN stays NaN: where x != x, x itself. */
AVX2 __m256 keep_nan_v(__m256 y, __m256 x) {
    return _mm256_blendv_ps(x, y, _mm256_cmp_ps(x, x, _CMP_EQ_OQ));
}
/* hl_erf_f32 (fast_math.h) on eight lanes: the same clamps, rational form and +-1 beyond the
   clamp. maxps/minps return their second operand when one is NaN, so a NaN x stays NaN. */
AVX2 __m256 erf_v(__m256 x) {
    const __m256 c = _mm256_min_ps(_mm256_set1_ps(HL_ERF_CLAMP),
                                   _mm256_max_ps(_mm256_set1_ps(-HL_ERF_CLAMP), x));
    const __m256 t = _mm256_mul_ps(c, c);
    __m256 p = _mm256_set1_ps(HL_ERF_P6);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(HL_ERF_P5));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(HL_ERF_P4));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(HL_ERF_P3));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(HL_ERF_P2));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(HL_ERF_P1));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(HL_ERF_P0));
    __m256 q = _mm256_set1_ps(HL_ERF_Q5);
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(HL_ERF_Q4));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(HL_ERF_Q3));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(HL_ERF_Q2));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(HL_ERF_Q1));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.0f));
    const __m256 y = _mm256_div_ps(_mm256_mul_ps(c, p), q), one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 sat = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(HL_ERF_CLAMP),
                                     _CMP_GE_OQ);  /* false for NaN */
    return _mm256_blendv_ps(_mm256_min_ps(one, _mm256_max_ps(_mm256_set1_ps(-1.0f), y)),
                            _mm256_or_ps(one, _mm256_and_ps(sign, x)), sat);
}

/* The epilogue's activation on eight values (the element-wise ops' expressions, ops.h;
   GELU-tanh in an equal form with fewer operations). */
AVX2 __m256 act_v(__m256 x, int act, __m256 p0, __m256 p1) {
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f),
                 half = _mm256_set1_ps(0.5f);
    switch (act) {
    case HL_CONV_ACT_RELU:  /* x > 0 ? x : (x == x ? 0 : x) */
        return _mm256_blendv_ps(_mm256_and_ps(x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)), x,
                                _mm256_cmp_ps(x, zero, _CMP_GT_OQ));
    case HL_CONV_ACT_CLIP: {  /* (x < p0 ? p0 : x) > p1 ? p1 : (x < p0 ? p0 : x) */
        const __m256 lo = _mm256_blendv_ps(x, p0, _mm256_cmp_ps(x, p0, _CMP_LT_OQ));
        return _mm256_blendv_ps(lo, p1, _mm256_cmp_ps(lo, p1, _CMP_GT_OQ));
    }
    case HL_CONV_ACT_LEAKY_RELU:
        return _mm256_blendv_ps(_mm256_mul_ps(p0, x), x, _mm256_cmp_ps(x, zero, _CMP_GE_OQ));
    case HL_CONV_ACT_HARD_SIGMOID:
        return keep_nan_v(_mm256_max_ps(zero, _mm256_min_ps(one, _mm256_fmadd_ps(p0, x, p1))), x);
    case HL_CONV_ACT_GELU:
        return _mm256_mul_ps(_mm256_mul_ps(half, x),
                             _mm256_add_ps(one, erf_v(_mm256_mul_ps(x, _mm256_set1_ps(
                                                    0.70710678118654752440f)))));
    case HL_CONV_ACT_GELU_TANH: {
        /* 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): one exp and one division where tanh_v
           takes an exp, a division and a polynomial (2.1 -> 1.1 ms a 512 x 3072 output), and
           no cancellation for x < 0. The exp's argument is clamped to exp_v's range (a NaN
           x stays NaN through the division); x = -inf gives NaN, as the unfused ops'
           -inf * (1 + tanh(-inf)) does. */
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        const __m256 m2u = _mm256_mul_ps(_mm256_set1_ps(-1.59576912160573071176f),
                                         _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
        const __m256 e = exp_v(_mm256_min_ps(_mm256_max_ps(m2u, _mm256_set1_ps(-87.0f)),
                                             _mm256_set1_ps(80.0f)));
        const __m256 y = _mm256_div_ps(x, _mm256_add_ps(one, e));
        return _mm256_blendv_ps(y, _mm256_set1_ps(NAN),
                                _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
    }
    default:
        return x;
    }
}

/* What the tile's last KC step applies (the whole epilogue, at this tile's place). */
typedef struct {
    const float *bias;     /* at the tile's first column, or NULL */
    const float *res;      /* at the tile's first element, or NULL */
    int64_t ldr;
    int act;
    float p0, p1;
} tile_epilogue;

/* A is packed: MR values per k (rows past R are zeros, their sums dropped). Named
   accumulators, which GCC keeps in registers (an array indexed by a row count it spills).
   The first npf steps of k each fetch a line of pf. */
__attribute__((target("avx2,fma"))) static void tile_avx2(int R, int64_t kc, const float *a,
                                                       const float *b, float *c, int64_t ldc,
                                                       int acc, const tile_epilogue *e,
                                                       const float *pf, int64_t npf) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define ROW(r)                                                                                 \
    av = _mm256_broadcast_ss(a + r);                                                           \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                                                \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);
    /* the loop over k around the rows' FMAs (tile_rows.h picks the rows) */
#define K_LOOP(...)                                                                            \
    _Pragma("GCC unroll 4")                                                                    \
    for (int64_t k = 0; k < kc; k++, b += NR, a += MR) {                                       \
        if (k < npf) __builtin_prefetch(pf + k * NR, 0, 3);                                    \
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);                     \
        __m256 av;                                                                             \
        __VA_ARGS__                                                                            \
    }
    HL_TILE_BY_ROWS(R, K_LOOP, ROW)  /* a tile of 4 or 2 rows computes only those */
#undef K_LOOP
#undef ROW
    __m256 bias0 = _mm256_setzero_ps(), bias1 = bias0, p0 = bias0, p1 = bias0;
    if (e && e->bias) {
        bias0 = _mm256_loadu_ps(e->bias);
        bias1 = _mm256_loadu_ps(e->bias + 8);
    }
    if (e) {
        p0 = _mm256_set1_ps(e->p0);
        p1 = _mm256_set1_ps(e->p1);
    }
#define STORE(r)                                                                               \
    if (R > r) {                                                                               \
        float *cr = c + r * ldc;                                                               \
        if (acc) {                                                                             \
            c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(cr));                             \
            c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(cr + 8));                         \
        }                                                                                      \
        if (e) {                                                                               \
            c##r##0 = _mm256_add_ps(c##r##0, bias0);                                           \
            c##r##1 = _mm256_add_ps(c##r##1, bias1);                                           \
            if (e->res) {                                                                      \
                c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(e->res + r * e->ldr));        \
                c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(e->res + r * e->ldr + 8));    \
            }                                                                                  \
            c##r##0 = act_v(c##r##0, e->act, p0, p1);                                          \
            c##r##1 = act_v(c##r##1, e->act, p0, p1);                                          \
        }                                                                                      \
        _mm256_storeu_ps(cr, c##r##0);                                                         \
        _mm256_storeu_ps(cr + 8, c##r##1);                                                     \
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
}
#endif

#if HL_HAVE_AVX512_KERNELS
#define HAVE_AVX512_KERNEL 1

#define AVX512 HL_AVX512_TARGET __attribute__((always_inline)) static inline

/* exp_v, keep_nan_v, erf_v and act_v on sixteen lanes: the same operations in the same order
   (masks where AVX2 blends on compares), so that a tile's epilogue gives the AVX2 kernel's
   bits (tests/ops/test_matmul_fused_avx512.py compares the two paths bit for bit). */
AVX512 __m512 exp16(__m512 y) {                         /* y in [-87, 80] */
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), y);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i bits = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}
AVX512 __m512 keep_nan16(__m512 y, __m512 x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_EQ_OQ), x, y);
}
AVX512 __m512 erf16(__m512 x) {
    const __m512 c = _mm512_min_ps(_mm512_set1_ps(HL_ERF_CLAMP),
                                   _mm512_max_ps(_mm512_set1_ps(-HL_ERF_CLAMP), x));
    const __m512 t = _mm512_mul_ps(c, c);
    __m512 p = _mm512_set1_ps(HL_ERF_P6);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(HL_ERF_P5));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(HL_ERF_P4));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(HL_ERF_P3));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(HL_ERF_P2));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(HL_ERF_P1));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(HL_ERF_P0));
    __m512 q = _mm512_set1_ps(HL_ERF_Q5);
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(HL_ERF_Q4));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(HL_ERF_Q3));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(HL_ERF_Q2));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(HL_ERF_Q1));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.0f));
    const __m512 y = _mm512_div_ps(_mm512_mul_ps(c, p), q), one = _mm512_set1_ps(1.0f);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __mmask16 sat = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, x),
                                             _mm512_set1_ps(HL_ERF_CLAMP), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(sat, _mm512_min_ps(one, _mm512_max_ps(_mm512_set1_ps(-1.0f), y)),
                                _mm512_or_ps(one, _mm512_and_ps(sign, x)));
}
AVX512 __m512 act16(__m512 x, int act, __m512 p0, __m512 p1) {
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f),
                 half = _mm512_set1_ps(0.5f);
    switch (act) {
    case HL_CONV_ACT_RELU:  /* x > 0 or NaN: x; else +0 */
        return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, zero, _CMP_NLE_UQ), x);
    case HL_CONV_ACT_CLIP: {
        const __m512 lo = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, p0, _CMP_LT_OQ), x, p0);
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(lo, p1, _CMP_GT_OQ), lo, p1);
    }
    case HL_CONV_ACT_LEAKY_RELU:
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_GE_OQ),
                                    _mm512_mul_ps(p0, x), x);
    case HL_CONV_ACT_HARD_SIGMOID:
        return keep_nan16(_mm512_max_ps(zero, _mm512_min_ps(one, _mm512_fmadd_ps(p0, x, p1))), x);
    case HL_CONV_ACT_GELU:
        return _mm512_mul_ps(_mm512_mul_ps(half, x),
                             _mm512_add_ps(one, erf16(_mm512_mul_ps(x, _mm512_set1_ps(
                                                    0.70710678118654752440f)))));
    case HL_CONV_ACT_GELU_TANH: {  /* act_v's form: x / (1 + exp(-2u)) */
        const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        const __m512 m2u = _mm512_mul_ps(_mm512_set1_ps(-1.59576912160573071176f),
                                         _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
        const __m512 e = exp16(_mm512_min_ps(_mm512_max_ps(m2u, _mm512_set1_ps(-87.0f)),
                                             _mm512_set1_ps(80.0f)));
        const __m512 y = _mm512_div_ps(x, _mm512_add_ps(one, e));
        return _mm512_mask_blend_ps(
            _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), y,
            _mm512_set1_ps(NAN));
    }
    default:
        return x;
    }
}

/* One row of 16 sums into C at cr: + C (acc), then tile_avx2's epilogue (bias, residual res,
   activation) in the same order. */
AVX512 void store16(__m512 s, float *cr, int acc, const tile_epilogue *e, __m512 bias,
                    const float *res, __m512 p0, __m512 p1) {
    if (acc) s = _mm512_add_ps(s, _mm512_loadu_ps(cr));
    if (e) {
        s = _mm512_add_ps(s, bias);
        if (res) s = _mm512_add_ps(s, _mm512_loadu_ps(res));
        s = act16(s, e->act, p0, p1);
    }
    _mm512_storeu_ps(cr, s);
}

/* C[R x 16 W] (+)= A @ B, then the epilogue if e: W adjacent full panels of one KC block
   (panel w's block at b + w * kc * NR), the rows in one or two groups of MR packed rows
   (group g at a + g * MR * kc), ROWS0 rows of the first computed and ROWS1 of the second
   (6, 4 or 2, or 0: no second group), the first R rows stored. Sixteen columns are one zmm
   register: (ROWS0 + ROWS1) x W accumulators (at most 24 of the 32), the W B vectors loaded
   once per k for every row, each A value broadcast once for the W panels. ROWS0, ROWS1 and
   W are constants in each instance below, so that the arrays live in registers. The first
   npf steps of k each fetch a line of pf. */
AVX512 void tile512(const int ROWS0, const int ROWS1, const int W, int R, int64_t kc,
                    const float *a, const float *b, float *c, int64_t ldc, int acc,
                    const tile_epilogue *e, const float *pf, int64_t npf) {
    const int rows[2] = {ROWS0, ROWS1};
    __m512 s[2][MR][2];
    for (int g = 0; g < 2; g++)
        for (int r = 0; r < rows[g]; r++)
            for (int w = 0; w < W; w++) s[g][r][w] = _mm512_setzero_ps();
    const int64_t bstep = kc * NR, astep = MR * kc;
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++, b += NR, a += MR) {
        if (k < npf) __builtin_prefetch(pf + k * NR, 0, 3);
        __m512 bv[2];
        for (int w = 0; w < W; w++) bv[w] = _mm512_loadu_ps(b + w * bstep);
        for (int g = 0; g < 2; g++)
            for (int r = 0; r < rows[g]; r++) {
                const __m512 av = _mm512_set1_ps(a[g * astep + r]);
                for (int w = 0; w < W; w++) s[g][r][w] = _mm512_fmadd_ps(av, bv[w], s[g][r][w]);
            }
    }
    __m512 bias[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, p0 = bias[0], p1 = bias[0];
    if (e) {
        for (int w = 0; w < W; w++)
            if (e->bias) bias[w] = _mm512_loadu_ps(e->bias + w * NR);
        p0 = _mm512_set1_ps(e->p0);
        p1 = _mm512_set1_ps(e->p1);
    }
    for (int g = 0; g < 2; g++)
        for (int r = 0; r < rows[g]; r++) {
            const int row = g * MR + r;
            if (row >= R) break;
            for (int w = 0; w < W; w++)
                store16(s[g][r][w], c + row * ldc + w * NR, acc, e, bias[w],
                        e && e->res ? e->res + row * e->ldr + w * NR : NULL, p0, p1);
        }
}

typedef void (*tile512_fn)(int R, int64_t kc, const float *a, const float *b, float *c,
                           int64_t ldc, int acc, const tile_epilogue *e, const float *pf,
                           int64_t npf);
#define TILE512(ROWS0, ROWS1, W)                                                              \
    HL_AVX512_TARGET static void tile512_##ROWS0##_##ROWS1##_##W(                             \
        int R, int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc,     \
        const tile_epilogue *e, const float *pf, int64_t npf) {                               \
        tile512(ROWS0, ROWS1, W, R, kc, a, b, c, ldc, acc, e, pf, npf);                       \
    }
TILE512(6, 6, 2) TILE512(6, 4, 2) TILE512(6, 2, 2) TILE512(6, 0, 2) TILE512(4, 0, 2)
TILE512(2, 0, 2)
TILE512(6, 6, 1) TILE512(6, 4, 1) TILE512(6, 2, 1) TILE512(6, 0, 1) TILE512(4, 0, 1)
TILE512(2, 0, 1)
#undef TILE512

/* The instance for a tile of R rows (at most 2 MR) of W panels: the rows of each group that
   R needs, 6, 4 or 2 (tile_rows.h's steps). */
static tile512_fn tile512_for(int R, int W) {
    static const tile512_fn by_rows[2][6] = {
        {tile512_2_0_1, tile512_4_0_1, tile512_6_0_1, tile512_6_2_1, tile512_6_4_1,
         tile512_6_6_1},
        {tile512_2_0_2, tile512_4_0_2, tile512_6_0_2, tile512_6_2_2, tile512_6_4_2,
         tile512_6_6_2}};
    return by_rows[W - 1][(R + 1) / 2 - 1];   /* R = 1-2, 3-4, ..., 11-12 */
}
#endif

/* The portable micro-kernel (A packed as for tile_avx2). */
static void tile_portable(int R, int64_t kc, const float *a, const float *b, float *c,
                          int64_t ldc, int acc) {
    float s[MR][NR] = {{0}};
    for (int64_t k = 0; k < kc; k++, b += NR, a += MR)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) s[r][j] += a[r] * b[j];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NR; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + s[r][j] : s[r][j];
}

static bool use_avx2(void) {
#ifdef HAVE_AVX2_KERNEL
    static int known = -1;  /* a benign race: every thread computes the same answer */
    if (known < 0) known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return known;
#else
    return false;
#endif
}

/* Returns whether the tile got its epilogue (only the AVX2 kernel applies it, from e). */
static inline bool run_tile(bool avx2, int R, int64_t kc, const float *a, const float *b,
                            float *c, int64_t ldc, int acc, const tile_epilogue *e,
                            const float *pf, int64_t npf) {
#ifdef HAVE_AVX2_KERNEL
    if (avx2) {
        tile_avx2(R, kc, a, b, c, ldc, acc, e, pf, npf);
        return e != NULL;
    }
#endif
    (void)avx2;
    (void)e;
    (void)pf;
    (void)npf;
    tile_portable(R, kc, a, b, c, ldc, acc);
    return false;
}

#ifdef HAVE_AVX2_KERNEL
/* pack_a for one tile of 6 rows: eight k at a time, the 6 x 8 block transposed in registers
   (as an 8 x 8 transpose whose two spare rows are never stored) and written as 48 floats in
   order, each column's 8-float store overlapping the next one's first two, the last column's
   cut to 6. The scalar loop wrote one float per instruction, 24 bytes apart: 0.64 ms of a
   512 x 3072 x 768 product's 26.5 at one thread. */
__attribute__((target("avx2,fma"))) static void pack_a_tile_avx2(const float *src,
                                                              int64_t lda, int64_t kc,
                                                              float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8, dst += 8 * MR) {
        const __m256 r0 = _mm256_loadu_ps(src + k), r1 = _mm256_loadu_ps(src + lda + k),
                     r2 = _mm256_loadu_ps(src + 2 * lda + k),
                     r3 = _mm256_loadu_ps(src + 3 * lda + k),
                     r4 = _mm256_loadu_ps(src + 4 * lda + k),
                     r5 = _mm256_loadu_ps(src + 5 * lda + k);
        const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                     t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                     t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        /* s_j: rows 0-3 (resp. 4-5 and two spares) of columns j and j + 4 */
        const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                     s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                     s4 = _mm256_shuffle_ps(t4, t4, 0x44), s5 = _mm256_shuffle_ps(t4, t4, 0xEE),
                     s6 = _mm256_shuffle_ps(t5, t5, 0x44), s7 = _mm256_shuffle_ps(t5, t5, 0xEE);
        _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
        _mm256_storeu_ps(dst + 6, _mm256_permute2f128_ps(s1, s5, 0x20));
        _mm256_storeu_ps(dst + 12, _mm256_permute2f128_ps(s2, s6, 0x20));
        _mm256_storeu_ps(dst + 18, _mm256_permute2f128_ps(s3, s7, 0x20));
        _mm256_storeu_ps(dst + 24, _mm256_permute2f128_ps(s0, s4, 0x31));
        _mm256_storeu_ps(dst + 30, _mm256_permute2f128_ps(s1, s5, 0x31));
        _mm256_storeu_ps(dst + 36, _mm256_permute2f128_ps(s2, s6, 0x31));
        const __m256 c7 = _mm256_permute2f128_ps(s3, s7, 0x31);
        _mm_storeu_ps(dst + 42, _mm256_castps256_ps128(c7));
        _mm_storel_pi((__m64 *)(dst + 46), _mm256_extractf128_ps(c7, 1));
    }
    for (; k < kc; k++, dst += MR)
        for (int r = 0; r < MR; r++) dst[r] = src[r * lda + k];
}
#endif

/* Rows [i0, i1) and columns [k0, k0 + kc) of A (rows lda apart) into dst: for each group of
   MR rows, MR values per k (zeros past i1). */
static void pack_a(const float *a, int64_t lda, int64_t i0, int64_t i1, int64_t k0,
                   int64_t kc, float *dst) {
    for (int64_t i = i0; i < i1; i += MR, dst += MR * kc) {
        const int R = (int)HL_MIN(MR, i1 - i);
#ifdef HAVE_AVX2_KERNEL
        if (R == MR && use_avx2()) {
            pack_a_tile_avx2(a + i * lda + k0, lda, kc, dst);
            continue;
        }
#endif
        for (int r = 0; r < MR; r++) {
            const float *src = a + (i + r) * lda + k0;
            if (r < R)
                for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = src[k];
            else
                for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = 0;
        }
    }
}

/* ---- the driver ---- */

/* n 64-byte lines from at: the packed panels a call of the tiles runs next (next_panels), or
   a tile's share of them, which its kernel fetches one a step of its k loop. */
typedef struct {
    const float *at;
    int64_t n;
} fetch_lines;

/* Tile t of a block of `tiles`: its share of the next panels' lines, or none for a block of
   one tile (see panel_rows). At most kc lines for next.n <= 2 kc and tiles >= 2, one a step
   of k (a share past the tile's kc, where a short last KC block comes before a full one, is
   left to the hardware). */
static inline fetch_lines share_of_next(fetch_lines next, int64_t tiles, int64_t t) {
    if (!next.at || tiles < 2) return (fetch_lines){NULL, 0};
    const int64_t l0 = t * next.n / tiles;
    return (fetch_lines){next.at + l0 * NR, (t + 1) * next.n / tiles - l0};
}

typedef struct {
    int64_t M, N, K, P;
    const float *a;        /* M x K, rows lda apart */
    int64_t lda;
    const float *bp;       /* packed B (P, K, NR) */
    float *c;              /* M x N, rows ldc apart */
    int64_t ldc;
    epilogue epi;
} product;

/* Rows [ic, mend) of panel p for the KC block at pc (A's block packed in apack); the tiles
   fetch `next`, the panels that follow these. */
static void panel_rows(const product *g, bool avx2, bool epi, const float *apack, int64_t p,
                       int64_t pc, int64_t kc, int acc, int last, int64_t ic, int64_t mend,
                       fetch_lines next) {
    const float *panel = g->bp + packed_at(g->K, g->P, p, pc);
    const int64_t j0 = p * NR, nv = HL_MIN(NR, g->N - j0);
    float tmp[MR * NR];
    const int64_t tiles = (mend - ic + MR - 1) / MR;
    for (int64_t i = ic; i < mend; i += MR) {
        const int R = (int)HL_MIN(MR, mend - i);
        const float *a = apack + (i - ic) * kc;
        if (nv == NR && last && g->epi.res)  /* this tile's rows of the residual */
            for (int r = 0; r < R; r++)
                __builtin_prefetch((const float *)g->epi.res + (i + r) * g->epi.ldr + j0, 0, 3);
        /* this tile's share of the next panel (share_of_next). Not for a block
           of one tile (M <= 6: a batch-1 classifier): its k loop is bound by loads, and the
           whole panel's prefetches at its head took as many load slots as the loop itself
           (1 x 1280 x 1000, B in cache: 140 -> 110 us; MobileNetV2's classifier 320 -> 275 us
           in the model, one thread) */
        const fetch_lines f = share_of_next(next, tiles, (i - ic) / MR);
        float *c = g->c + i * g->ldc + j0;
        bool done = false;
        if (nv == NR) {
            tile_epilogue te = {
                .bias = g->epi.bias ? (const float *)g->epi.bias + j0 : NULL,
                .res = g->epi.res ? (const float *)g->epi.res + i * g->epi.ldr + j0 : NULL,
                .ldr = g->epi.ldr, .act = g->epi.act, .p0 = (float)g->epi.alpha,
                .p1 = (float)g->epi.beta};
            done = run_tile(avx2, R, kc, a, panel, c, g->ldc, acc, last && epi ? &te : NULL,
                            f.at, f.n);
        } else {  /* the last, narrower panel: through a full-width tile */
            for (int r = 0; r < R && acc; r++)
                memcpy(tmp + r * NR, c + r * g->ldc, sizeof(float) * (size_t)nv);
            run_tile(avx2, R, kc, a, panel, tmp, NR, acc, NULL, f.at, f.n);
            for (int r = 0; r < R; r++)
                memcpy(c + r * g->ldc, tmp + r * NR, sizeof(float) * (size_t)nv);
        }
        if (last && epi && !done) epilogue_f32(&g->epi, g->c, g->ldc, i, R, j0, nv);
    }
}

#ifdef HAVE_AVX512_KERNEL
/* Rows [ic, mend) of W (1 or 2) adjacent full panels p.. for the KC block at pc, on the
   AVX-512 kernels: tiles of TILE512_ROWS rows (two packed groups of MR). The prefetches are
   panel_rows': each tile fetches its share of the next panels (none in a block of one
   tile) and, in the last KC block, its rows of the residual. (12 x 32 and 6 x 32 tiles ran
   alike, ~180 GF/s with A and B in L1 against a measured 184 GF/s FMA peak of one core, and
   155-162 GF/s on the transformers' products; 12 x 32 takes fewer loads per FMA.) */
enum { TILE512_ROWS = 2 * MR };
static void panel_rows512(const product *g, bool epi, const float *apack, int64_t p, int W,
                          int64_t pc, int64_t kc, int acc, int last, int64_t ic, int64_t mend,
                          fetch_lines next) {
    const float *panel = g->bp + packed_at(g->K, g->P, p, pc);
    const int64_t j0 = p * NR;
    /* tiles of 2 MR rows while that many rows are left, then one of the rows left, each
       group of it computing the rows it needs: a 128-row block ends in a tile of 6 + 2 rows
       (16 sums, 8 a B vector: the tiles of 6 and then of 2 it took before held the FMAs'
       latency with 4 sums; BERT-base's batch-1 products 1-2% faster, one thread), a 64-row
       one in a tile of 4 */
    const int64_t rows = mend - ic,
                  tiles = rows / TILE512_ROWS + (rows % TILE512_ROWS > 0);
    const tile_epilogue te = {
        .bias = g->epi.bias ? (const float *)g->epi.bias + j0 : NULL,
        .res = NULL, .ldr = g->epi.ldr, .act = g->epi.act, .p0 = (float)g->epi.alpha,
        .p1 = (float)g->epi.beta};
    int R;
    for (int64_t i = ic, t = 0; i < mend; i += R, t++) {
        R = (int)HL_MIN(TILE512_ROWS, mend - i);
        if (last && g->epi.res)
            for (int r = 0; r < R; r++) {
                const float *rr = (const float *)g->epi.res + (i + r) * g->epi.ldr + j0;
                for (int w = 0; w < W; w++) __builtin_prefetch(rr + w * NR, 0, 3);
            }
        const fetch_lines f = share_of_next(next, tiles, t);
        tile_epilogue e = te;
        if (g->epi.res) e.res = (const float *)g->epi.res + i * g->epi.ldr + j0;
        tile512_for(R, W)(R, kc, apack + (i - ic) * kc, panel, g->c + i * g->ldc + j0, g->ldc,
                          acc, last && epi ? &e : NULL, f.at, f.n);
    }
}
#endif

/* How many panels from p (< q1, the end of the range) one call of the tiles takes: on the
   AVX-512 kernels full panels two at a time (one of 16 columns when it is the range's last);
   the narrower last panel of C, and every panel elsewhere, one at a time (panel_rows). */
static int panels_at(const product *g, bool avx512, int64_t p, int64_t q1) {
    if (!avx512 || (p + 1) * NR > g->N) return 1;
    return p + 1 < q1 && (p + 2) * NR <= g->N ? 2 : 1;
}

/* The packed panels run_block's next call of the tiles reads, after those of KC block pc that
   end before panel e, in the range [q0, q1) of the item's panels [.., p1): the rest of this
   KC block's range, else the range's first panels in the next KC block, else the next
   range's in the first; none at the item's end. Each is W panels' kc x NR floats in a row
   (packed_at). Fetched during the calls before, the first panels of a KC block or a range
   wait less on memory when B is cold (a model's weights, read once a run: 128 x 3072 x 768
   at one thread over 40 such weights in turn 3.79-3.84 -> 3.72-3.77 ms, the fastest of 240
   calls, CPU time; the tiles fetched the panels after these in the same KC block before,
   another thread's at a range's end). */
static fetch_lines next_panels(const product *g, bool avx512, int64_t e, int64_t pc,
                               int64_t q0, int64_t q1, int64_t p1) {
    if (e >= q1) {
        e = q0;
        pc += KC;
        if (pc >= g->K) {
            e = q1;
            pc = 0;
            if (e >= p1) return (fetch_lines){NULL, 0};
            q1 = HL_MIN(p1, e + NC_PANELS);
        }
    }
    const int64_t kc = HL_MIN(KC, g->K - pc);
    return (fetch_lines){g->bp + packed_at(g->K, g->P, e, pc), panels_at(g, avx512, e, q1) * kc};
}

/* One item of the split: rows [r0, r1) (at most MC, one block of A) and panels [p0, p1) of C,
   finished. apack holds this thread's packed block of A: *held names the row block it holds
   (-1: none), so that a thread whose next item has the same rows does not pack them again. */
static void run_block(const product *g, int64_t rb, int64_t r0, int64_t r1, int64_t p0,
                      int64_t p1, float *apack, int64_t *held) {
    if (p0 >= p1 || r0 >= r1) return;
    const bool avx2 = use_avx2(), epi = epilogue_needed(&g->epi);
#ifdef HAVE_AVX512_KERNEL
    const bool avx512 = hl_cpu_avx512();
#else
    const bool avx512 = false;
#endif
    const int64_t j0 = p0 * NR, j1 = HL_MIN(p1 * NR, g->N);
    if (g->K == 0) {
        for (int64_t i = r0; i < r1; i++)
            for (int64_t j = j0; j < j1; j++) g->c[i * g->ldc + j] = 0;
        if (epi)
            for (int64_t i = r0; i < r1; i += MR)
                epilogue_f32(&g->epi, g->c, g->ldc, i, (int)HL_MIN(MR, r1 - i), j0, j1 - j0);
        return;
    }
    const int64_t group = (r1 - r0 + MR - 1) / MR * MR;
    if (*held != rb)
        for (int64_t pc = 0; pc < g->K; pc += KC)  /* block pc at apack + group * pc */
            pack_a(g->a, g->lda, r0, r1, pc, HL_MIN(KC, g->K - pc), apack + group * pc);
    *held = rb;
    for (int64_t q0 = p0; q0 < p1; q0 += NC_PANELS) {
        const int64_t q1 = HL_MIN(p1, q0 + NC_PANELS);
        for (int64_t pc = 0; pc < g->K; pc += KC) {
            const int64_t kc = HL_MIN(KC, g->K - pc);
            const float *ablock = apack + group * pc;
            const int acc = pc > 0, last = pc + kc >= g->K;
            for (int64_t p = q0; p < q1;) {
                const int W = panels_at(g, avx512, p, q1);
                const fetch_lines next = next_panels(g, avx512, p + W, pc, q0, q1, p1);
#ifdef HAVE_AVX512_KERNEL
                if (avx512 && (p + 1) * NR <= g->N) {
                    panel_rows512(g, epi, ablock, p, W, pc, kc, acc, last, r0, r1, next);
                    p += W;
                    continue;
                }
#endif
                panel_rows(g, avx2, epi, ablock, p, pc, kc, acc, last, r0, r1, next);
                p++;
            }
        }
    }
}

/* How a product is cut between threads: `blocks` blocks of rows (whole MR-row tiles, at most
   MC rows, as even as tiles allow, larger first) times `groups` ranges of panels; item i is
   row block i / groups, panel range i % groups, or with panel_major, panel range i / blocks,
   row block i % blocks. Every element of C is one item's, summed in the same order whatever the cut
   (k ascending in KC blocks, each tile's rows independent): any thread count gives the same
   bits. */
typedef struct {
    const product *g;
    int64_t tiles, blocks, groups;
    bool panel_major;
    float *apack;
    size_t stride;  /* floats of apack per thread */
    int64_t *held;  /* per thread (and row block, panel_major): the row block packed there */
} product_split;

/* A packed B above this size is a wide one (GPT-2's 768 x 50257 logits: 154 MB), which the
   row-first cut would stream from memory once per row block (8 times at two threads, 4 at
   one); it is cut into panel ranges of about WIDE_GROUP_BYTES instead, each range run for
   every row block while it is in cache, so that B is read from memory once. The products of
   a transformer layer (at most 9.4 MB, FC1/FC2) stay in the L3 cache across row blocks. */
enum { WIDE_B_BYTES = 16 << 20, WIDE_GROUP_BYTES = 1 << 19 };

/* Row blocks of at least this many tiles when rows are split between threads: a B micro-panel
   loaded into L1 serves that many tiles (48 rows) before the next is needed. */
enum { MIN_BLOCK_TILES = 8, ITEMS_PER_THREAD = 4 };

/* The cut for `threads` threads. One thread: blocks of up to MC rows, all panels each (A
   packed once, B streamed once per block). Several, with rows for at least two blocks a
   thread: rows only, ITEMS_PER_THREAD blocks a thread (the pool's chunk count, so that a
   thread left alone by a busy core still finds work), each row of A packed by one thread
   once. Fewer rows (batch-1 transformers: 64-128): panels as well, item order row block
   first, so that each thread packs each block of A once and keeps it for its next items
   (at two threads 8 items, each of which used to pack all of A again for M > MC: GPT-2's
   FC2 at batch 8 scaled 1.65x, against 1.9x for the shapes with N >= 2304). */
static void split_product(product_split *s, int threads) {
    const product *g = s->g;
    s->tiles = (g->M + MR - 1) / MR;
    s->blocks = (s->tiles + MC / MR - 1) / (MC / MR);
    s->groups = 1;
    s->panel_major = false;
    const double bbytes = (double)g->P * (double)g->K * NR * sizeof(float);
    if (bbytes > WIDE_B_BYTES && (s->blocks > 1 || threads > 1)) {
        /* panel ranges first; with at least ITEMS_PER_THREAD items a thread */
        s->panel_major = true;
        s->groups = HL_MIN(g->P, HL_MAX((int64_t)(bbytes / WIDE_GROUP_BYTES),
                                        (int64_t)threads * ITEMS_PER_THREAD));
        return;
    }
    if (threads < 2) return;
    /* The AVX-512 kernels finish a block twice as fast, and a smaller block re-reads all of
       B once more from L3: there, two blocks a thread (GPT-2's 512 rows in 4 blocks of 128
       rather than 8 of 64: 290-305 -> 318-335 GF/s on its products at two threads, quiet
       host; BERT's 1024 rows keep 8 blocks of MC) */
    const int64_t want = (int64_t)threads * (hl_cpu_avx512() ? 2 : ITEMS_PER_THREAD);
    if (s->tiles / MIN_BLOCK_TILES >= 2 * (int64_t)threads)
        s->blocks = HL_MAX(s->blocks, HL_MIN(want, s->tiles / MIN_BLOCK_TILES));
    else
        s->groups = HL_MIN(g->P, (want + s->blocks - 1) / s->blocks);
}

/* Rows [*r0, *r1) of row block rb: tiles / blocks tiles each, the tiles / blocks remainder
   going one each to the first blocks. Larger items first, smaller last: the threads, which
   claim items as they finish, then end closer together (GPT-2 at batch 8: 86 tiles in 8
   blocks, which read 10, 11, 11, 11, 10, 11, 11, 11 tiles before; a thread that got both
   10s and the other three 11s and the 2-row tail waited ~1.5% of the product for it). */
static void block_rows(const product_split *s, int64_t rb, int64_t *r0, int64_t *r1) {
    const int64_t q = s->tiles / s->blocks, rem = s->tiles % s->blocks;
    *r0 = (rb * q + HL_MIN(rb, rem)) * MR;
    *r1 = HL_MIN(s->g->M, *r0 + (q + (rb < rem)) * MR);
}

static void run_items(int64_t i0, int64_t i1, void *arg) {
    const product_split *s = arg;
    const product *g = s->g;
    const int slot = hl_thread_num();
    for (int64_t i = i0; i < i1; i++) {
        const int64_t rb = s->panel_major ? i % s->blocks : i / s->groups,
                      pg = s->panel_major ? i / s->blocks : i % s->groups;
        int64_t r0, r1;
        block_rows(s, rb, &r0, &r1);
        /* panel_major: each thread keeps every row block packed, block rb at row r0 */
        float *apack = s->apack + (size_t)slot * s->stride +
                       (s->panel_major ? (size_t)(r0 * HL_MAX(g->K, 1)) : 0);
        int64_t *held = s->panel_major ? &s->held[slot * s->blocks + rb] : &s->held[slot];
        run_block(g, rb, r0, r1, pg * g->P / s->groups, (pg + 1) * g->P / s->groups, apack,
                  held);
    }
}

static hl_status run_product(const product *g) {
    /* below ~1 MFLOP a second thread costs more than it saves */
    const double flops = 2.0 * (double)g->M * (double)g->N * (double)HL_MAX(g->K, 1);
    const int threads = flops < 1e6 ? 1 : hl_pool_threads();
    product_split s = {.g = g};
    split_product(&s, threads);
    /* the largest block, or all rows (panel_major) */
    const int64_t rows = s.panel_major ? s.tiles * MR : ((s.tiles + s.blocks - 1) / s.blocks) * MR;
    const size_t abytes = sizeof(float) * (size_t)(rows * HL_MAX(g->K, 1));
    const int64_t helds = s.panel_major ? (int64_t)threads * s.blocks : threads;
    s.stride = ((abytes + 63) & ~(size_t)63) / sizeof(float);
    s.apack = aligned_alloc(64, s.stride * sizeof(float) * (size_t)threads);
    s.held = malloc(sizeof(int64_t) * (size_t)helds);
    if (!s.apack || !s.held) {
        free(s.apack);
        free(s.held);
        return hl_fail(HL_ERR_MEMORY, "matmul_fused: out of memory for a %lld x %lld block of "
                       "a", (long long)rows, (long long)g->K);
    }
    for (int64_t t = 0; t < helds; t++) s.held[t] = -1;
    const int64_t items = s.blocks * s.groups;
    hl_parallel_for(items, threads > 1 ? 1 : items, run_items, &s);
    free(s.apack);
    free(s.held);
    return HL_OK;
}

/* ---- a plain B (float32 or float64): BLAS, then the epilogue over the rows ---- */

typedef struct {
    hl_dtype dt;
    const epilogue *e;
    char *c;
    int64_t N;
} epilogue_rows;
static void run_epilogue_rows(int64_t begin, int64_t end, void *arg);

static void epilogue_pass(hl_dtype dt, const epilogue *e, char *c, int64_t M, int64_t N) {
    if (!epilogue_needed(e)) return;
    const epilogue_rows q = {dt, e, c, N};
    hl_parallel_for(M, M * N >= 32768 ? HL_MAX(1, 8192 / HL_MAX(N, 1)) : M, run_epilogue_rows,
                    (void *)&q);
}

static void run_epilogue_rows(int64_t begin, int64_t end, void *arg) {
    const epilogue_rows *q = arg;
    const hl_dtype dt = q->dt;
    const epilogue *e = q->e;
    char *c = q->c;
    const int64_t N = q->N;
    for (int64_t i = begin; i < end; i++) {
        if (dt == HL_F32)
            epilogue_row_f32(e->act, (float)e->alpha, (float)e->beta, (float *)c + i * N,
                             (const float *)e->bias, e->res ? (const float *)e->res + i * e->ldr : NULL,
                             N);
        else
            epilogue_row_f64(e->act, e->alpha, e->beta, (double *)c + i * N,
                             (const double *)e->bias,
                             e->res ? (const double *)e->res + i * e->ldr : NULL, N);
    }
}

/* ---- kernels ---- */

enum { PACK_GROUP = 8 };  /* panels a pack_b item packs: each thread takes whole groups */

typedef struct {
    const float *b;
    int64_t sk, sn, K, N, P;
    float *dst;
} pack_b_job;

static void pack_b_groups(int64_t g0, int64_t g1, void *ctx) {
    const pack_b_job *q = ctx;
    for (int64_t g = g0; g < g1; g++)
        pack_panels(q->b, q->sk, q->sn, q->K, q->N, q->P, g * PACK_GROUP,
                    HL_MIN(q->P, (g + 1) * PACK_GROUP), q->dst);
}

/* in[0] = b, 2-D (K, N) view (any strides), out[0] = (P, K, 16) float32, contiguous. */
static hl_status pack_b(const hl_call *c) {
    const hl_tensor *b = c->in[0];
    hl_tensor *o = c->out[0];
    int64_t K = b->shape[0], N = b->shape[1], P = o->shape[0];
    pack_b_job q = {(const float *)hl_ptr(b), b->strides[0], b->strides[1], K, N, P,
                    (float *)hl_ptr(o)};
    const int64_t groups = (P + PACK_GROUP - 1) / PACK_GROUP;
    /* A copy: one core runs it at memory speed up to a few MB, so below PACK_PAR_MIN it stays
       on the caller. Each group writes its own panels: any split packs the same bytes. */
    hl_parallel_for(groups, K * N >= PACK_PAR_MIN ? 1 : groups, pack_b_groups, &q);
    return HL_OK;
}

/* The record: matmul_fused_record.h. A plain b is a 2-D view BLAS can read (float64) or of
   any strides (float32). */
static hl_status matmul_fused(const hl_call *c) {
    const hl_matmul_fused_args r = hl_matmul_fused_decode(c);
    const hl_tensor *a = r.a, *b = r.b;
    hl_tensor *o = r.out;
    const int64_t M = r.M, N = r.N, K = r.K;
    epilogue e = {.act = r.act, .alpha = r.alpha, .beta = r.beta,
                  .bias = r.bias ? hl_ptr(r.bias) : NULL, .res = r.res ? hl_ptr(r.res) : NULL,
                  .ldr = N};
    if (M == 0 || N == 0) return HL_OK;
    if (r.packed) {
        product g = {.M = M, .N = N, .K = K, .P = (N + NR - 1) / NR, .a = (const float *)hl_ptr(a),
                     .lda = K, .bp = (const float *)hl_ptr(b), .c = (float *)hl_ptr(o),
                     .ldc = N, .epi = e};
        return run_product(&g);
    }
    /* A plain b: BLAS (which packs it, well, for any number of rows), then the epilogue as a
       pass over the rows. b's layout is one BLAS takes (the entry point saw to it). */
    bool tb = false;
    int64_t ldb = N;
    hl_blas_layout(K, N, b->strides[0], b->strides[1], &tb, &ldb);
    const enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (K == 0) memset(hl_ptr(o), 0, hl_dtype_size(a->dtype) * (size_t)(M * N));
    else if (a->dtype == HL_F32)
        scipy_cblas_sgemm(CblasRowMajor, CblasNoTrans, opb, (int)M, (int)N, (int)K, 1.0f,
                          (const float *)hl_ptr(a), (int)K, (const float *)hl_ptr(b), (int)ldb,
                          0.0f, (float *)hl_ptr(o), (int)N);
    else
        scipy_cblas_dgemm(CblasRowMajor, CblasNoTrans, opb, (int)M, (int)N, (int)K, 1.0,
                          (const double *)hl_ptr(a), (int)K, (const double *)hl_ptr(b), (int)ldb,
                          0.0, (double *)hl_ptr(o), (int)N);
    epilogue_pass(a->dtype, &e, hl_ptr(o), M, N);
    return HL_OK;
}

hl_status hl_cpu_attention(const hl_call *c);  /* attention.c */

/* The gemm family's kernels added for inference (linalg.c's hl_cpu_gemm hands them here). */
hl_status hl_cpu_gemm_inference(const hl_call *c) {
    if (c->op == HL_OP_ATTENTION) return hl_cpu_attention(c);
    return c->op == HL_OP_GEMM_PACK_B ? pack_b(c) : matmul_fused(c);
}
