/*
 * attention.c - the CPU kernel of attention (api/attention.c): softmax(scale q k^T + mask) v
 * for each (batch, head), the scores never leaving the cache.
 *
 * Work items are (batch, head, block of QBLOCK query rows), run on libcore's thread pool
 * (thread_pool.h) a head per chunk. A thread packs the head's K as
 * panels of 16 keys, D rows each (the B of q k^T), and V as panels of 16 columns, Sk rows
 * each, once for all the blocks of that head it runs. Then, 6 query rows at a time: their
 * 6 x Sk scores (q's rows read in place), scale and mask added, the row maximum subtracted
 * and exp taken in place; the unnormalised rows times V's panels, each output row multiplied
 * by 1 / its sum as it is stored (straight into the output rows: the merged-heads layout is
 * only other strides). Per tile the scores are 6 x Sk floats (3 KiB at 128 keys), where the
 * unfused graph writes and re-reads B x H x Sq x Sk scores four times (product, scale, mask,
 * softmax). The 6 x 16 micro-kernel reads A's 6 rows in place (no packing: at D = 64 and
 * Sk = 128 packing cost as much as the products) and keeps its sums in 12 AVX2 registers.
 * Where hl_cpu_avx512() (cpu_features.h), rows512 takes two adjacent panels at a time instead
 * (6 x 32: 12 zmm sums, each q or score value broadcast once for both), summing and scaling
 * each column as rows_avx2 does, so both paths give the same bits (BERT-base's heads,
 * 1 x 12 x 128 x 64 at one thread: 0.74 -> 0.50 ms).
 *
 * Numerics are softmax.c's: the row maximum is subtracted before exp (fast_math.h's
 * hl_exp_nonpos_f32). A row whose maximum is -inf or +inf, or that holds a NaN, has a NaN
 * sum and so NaN probabilities, all of them (every exp is at most 1, so no other row's sum
 * is NaN or infinite); nan_to_zero makes such a row's output 0, as IsNaN/Where on its
 * probabilities would. Sums are float32 in 8 lanes (Sk terms of at most 1 each).
 */
#include <stdlib.h>

#include "cpu_features.h"
#include "dtypes.h"
#include "fast_math.h"
#include "parallel.h"
#include "tile_rows.h"

enum { MR = 6, NR = 16, QBLOCK = 64, LANES = 8 };

typedef struct {
    int64_t B, H, Sq, Sk, D, Dv;
    const float *q, *k, *v, *mask;  /* mask may be NULL */
    int64_t qs[4], ks[4], vs[4], ms[4], os[4];  /* element strides; the last axis's of q, k,
                                                   v and out is 1 */
    float *out;
    float scale;
    bool nan_to_zero, avx2, avx512;
} attn;

/* Per-thread buffers: K and V of one head packed, a tile's scores, a narrow output tile. */
typedef struct {
    float *kp, *vp, *scores, *tmp;
    int64_t skp;  /* Sk rounded up to 16: the scores' row length */
} scratch;

/* ---- C[R x 16] = diag(scale) A[R x kc] @ B[kc x 16]: A's rows lda apart, B a panel ---- */

typedef void (*rows_fn)(int R, int64_t kc, const float *a, int64_t lda, const float *b,
                        float *c, int64_t ldc, const float *row_scale);

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2_KERNEL 1
/* Rows past R read row 0 again (their sums are dropped): one loop for every R. */
__attribute__((target("avx2,fma"))) static void rows_avx2(int R, int64_t kc, const float *a,
                                                        int64_t lda, const float *b, float *c,
                                                        int64_t ldc, const float *row_scale) {
    const float *a0 = a, *a1 = a + (R > 1) * lda, *a2 = a + (R > 2) * 2 * lda,
                *a3 = a + (R > 3) * 3 * lda, *a4 = a + (R > 4) * 4 * lda,
                *a5 = a + (R > 5) * 5 * lda;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define ROW(r)                                                                                 \
    av = _mm256_broadcast_ss(a##r + k);                                                        \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                                                \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);
#define K_LOOP(...)                                                                            \
    _Pragma("GCC unroll 4")                                                                    \
    for (int64_t k = 0; k < kc; k++, b += NR) {                                                \
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);                     \
        __m256 av;                                                                             \
        __VA_ARGS__                                                                            \
    }
    HL_TILE_BY_ROWS(R, K_LOOP, ROW)  /* a tile of 4 or 2 rows computes only those */
#undef K_LOOP
#undef ROW
#define STORE(r)                                                                               \
    if (R > r) {                                                                               \
        if (row_scale) {                                                                       \
            const __m256 s = _mm256_set1_ps(row_scale[r]);                                     \
            c##r##0 = _mm256_mul_ps(c##r##0, s);                                               \
            c##r##1 = _mm256_mul_ps(c##r##1, s);                                               \
        }                                                                                      \
        _mm256_storeu_ps(c + r * ldc, c##r##0);                                                \
        _mm256_storeu_ps(c + r * ldc + 8, c##r##1);                                            \
    }
    STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
}
#endif

#if HL_HAVE_AVX512_KERNELS
#define HAVE_AVX512_KERNEL 1
/* rows_avx2 on AVX-512, over W (1 or 2) adjacent panels (panel w at b + w * bstep): ROWS of
   the 6 rows computed (6, 4 or 2; rows past R read row 0 again, their sums dropped), W zmm
   sums a row, each A value broadcast once for both panels. Each column is summed in
   rows_avx2's order and scaled the same way, so the two give the same bits. */
HL_AVX512_TARGET static inline __attribute__((always_inline)) void rows512(
    const int ROWS, const int W, int R, int64_t kc, const float *a, int64_t lda,
    const float *b, int64_t bstep, float *c, int64_t ldc, const float *row_scale) {
    const float *ar[MR];
    __m512 s[MR][2];
    for (int r = 0; r < ROWS; r++) {
        ar[r] = a + (r < R ? r : 0) * lda;
        for (int w = 0; w < W; w++) s[r][w] = _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++, b += NR) {
        __m512 bv[2];
        for (int w = 0; w < W; w++) bv[w] = _mm512_loadu_ps(b + w * bstep);
        for (int r = 0; r < ROWS; r++) {
            const __m512 av = _mm512_set1_ps(ar[r][k]);
            for (int w = 0; w < W; w++) s[r][w] = _mm512_fmadd_ps(av, bv[w], s[r][w]);
        }
    }
    for (int r = 0; r < ROWS && r < R; r++)
        for (int w = 0; w < W; w++) {
            __m512 v = s[r][w];
            if (row_scale) v = _mm512_mul_ps(v, _mm512_set1_ps(row_scale[r]));
            _mm512_storeu_ps(c + r * ldc + w * NR, v);
        }
}
typedef void (*rows512_fn)(int R, int64_t kc, const float *a, int64_t lda, const float *b,
                           int64_t bstep, float *c, int64_t ldc, const float *row_scale);
#define ROWS512(ROWS, W)                                                                      \
    HL_AVX512_TARGET static void rows512_##ROWS##_##W(int R, int64_t kc, const float *a,       \
                                                      int64_t lda, const float *b,            \
                                                      int64_t bstep, float *c, int64_t ldc,   \
                                                      const float *row_scale) {               \
        rows512(ROWS, W, R, kc, a, lda, b, bstep, c, ldc, row_scale);                         \
    }
ROWS512(6, 2) ROWS512(4, 2) ROWS512(2, 2) ROWS512(6, 1) ROWS512(4, 1) ROWS512(2, 1)
#undef ROWS512
/* The instance for R rows (tile_rows.h's 6 / 4 / 2) of W panels. */
static rows512_fn rows512_for(int R, int W) {
    if (R > 4) return W == 2 ? rows512_6_2 : rows512_6_1;
    if (R > 2) return W == 2 ? rows512_4_2 : rows512_4_1;
    return W == 2 ? rows512_2_2 : rows512_2_1;
}
#endif

static void rows_portable(int R, int64_t kc, const float *a, int64_t lda, const float *b,
                          float *c, int64_t ldc, const float *row_scale) {
    for (int r = 0; r < R; r++) {
        float s[NR] = {0};
        for (int64_t k = 0; k < kc; k++)
            for (int j = 0; j < NR; j++) s[j] += a[r * lda + k] * b[k * NR + j];
        for (int j = 0; j < NR; j++) c[r * ldc + j] = row_scale ? s[j] * row_scale[r] : s[j];
    }
}

static void rows_x_panel(const attn *g, int R, int64_t kc, const float *a, int64_t lda,
                         const float *b, float *c, int64_t ldc, const float *row_scale) {
#ifdef HAVE_AVX2_KERNEL
    if (g->avx2) {
        rows_avx2(R, kc, a, lda, b, c, ldc, row_scale);
        return;
    }
#endif
    rows_portable(R, kc, a, lda, b, c, ldc, row_scale);
}

static bool cpu_has_avx2(void) {
#ifdef HAVE_AVX2_KERNEL
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/* ---- the steps ---- */

/* K (Sk x D, rows ks apart) as the B of q k^T: panels of 16 keys, D rows of 16 each, zeros
   past key Sk. V (Sk x Dv) as the B of p v: panels of 16 columns, Sk rows each. */
static void pack_head(const attn *g, const float *k, const float *v, scratch *s) {
    const int64_t kpanels = s->skp / NR, vpanels = (g->Dv + NR - 1) / NR;
    for (int64_t p = 0; p < kpanels; p++) {
        float *dst = s->kp + p * g->D * NR;
        for (int64_t j = 0; j < NR; j++) {
            const int64_t key = p * NR + j;
            if (key < g->Sk) {
                const float *src = k + key * g->ks[2];
                for (int64_t d = 0; d < g->D; d++) dst[d * NR + j] = src[d];
            } else {
                for (int64_t d = 0; d < g->D; d++) dst[d * NR + j] = 0;
            }
        }
    }
    for (int64_t p = 0; p < vpanels; p++) {
        float *dst = s->vp + p * g->Sk * NR;
        const int64_t j0 = p * NR, nv = HL_MIN(NR, g->Dv - j0);
        for (int64_t r = 0; r < g->Sk; r++) {
            const float *src = v + r * g->vs[2] + j0;
            for (int64_t j = 0; j < NR; j++) dst[r * NR + j] = j < nv ? src[j] : 0;
        }
    }
}

/* The end of a row's exp pass: exp(x - mx) for keys [j, n) into lane 0's sum, the lanes'
   sums added, and 1 / the sum returned (0, with the row zeroed, for a NaN row under
   nan_to_zero). */
static float finish_row(float *x, int64_t j, int64_t n, float mx, float acc[LANES],
                        bool nan_to_zero) {
    for (; j < n; j++) {
        x[j] = hl_exp_nonpos_f32(x[j] - mx);
        acc[0] += x[j];
    }
    float sum = 0;
    for (int l = 0; l < LANES; l++) sum += acc[l];
    if (sum != sum && nan_to_zero) {
        for (j = 0; j < n; j++) x[j] = 0;
        return 0;
    }
    return 1.0f / sum;
}

/* One row of scores x: scale, + mask (elements ms apart, or none), exp(x - max) in place.
   Returns 1 / the sum of the exps: NaN for a row softmax makes NaN (see the top), and then
   0, with the row zeroed, under nan_to_zero. Loops over LANES partial results, which the
   clones vectorise. */
HL_CLONES static float exp_row(float *restrict x, float scale, const float *restrict m,
                               int64_t ms, int64_t n, bool nan_to_zero) {
    float mm[LANES];
    for (int l = 0; l < LANES; l++) mm[l] = -INFINITY;
    int64_t j = 0;
    /* x = x scale + m and its maximum in one pass (NaNs are skipped here; the sum catches
       them) */
#define SCALE_MAX(M)  /* M: the mask at element t */                                      \
    for (j = 0; j + LANES <= n; j += LANES)                                                    \
        for (int l = 0; l < LANES; l++) {                                                      \
            const int64_t t = j + l;                                                           \
            x[t] = x[t] * scale + (M);                                                         \
            mm[l] = x[t] > mm[l] ? x[t] : mm[l];                                               \
        }                                                                                      \
    for (int64_t t = j; t < n; t++) {                                                          \
        x[t] = x[t] * scale + (M);                                                             \
        mm[0] = x[t] > mm[0] ? x[t] : mm[0];                                                   \
    }
    if (m && ms == 1) {
        SCALE_MAX(m[t])
    } else if (m) {
        SCALE_MAX(m[t * ms])
    } else {
        SCALE_MAX(0.0f)
    }
#undef SCALE_MAX
    float mx = mm[0];
    for (int l = 1; l < LANES; l++) mx = mm[l] > mx ? mm[l] : mx;
    float acc[LANES] = {0};
    for (j = 0; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) {
            x[j + l] = hl_exp_nonpos_f32(x[j + l] - mx);
            acc[l] += x[j + l];
        }
    return finish_row(x, j, n, mx, acc, nan_to_zero);
}

#ifdef HAVE_AVX2_KERNEL
/* exp_row for a mask that is contiguous along the keys, or none, with AVX2: the scale, mask
   and running maximum in one pass, exp(x - max) and its sum in the next, each 8 keys to a
   register (the portable loops took ~5 cycles an element: their exp did not vectorise
   alongside the sum). The same exp, sum lanes and NaN rule as exp_row; keys past the last
   full 8 go through hl_exp_nonpos_f32 into lane 0's sum. */
__attribute__((target("avx2,fma"))) static float exp_row_avx2(float *restrict x, float scale,
                                                              const float *restrict m,
                                                              int64_t n, bool nan_to_zero) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    float mx = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES) {  /* maxps keeps vmax where x is NaN: skipped */
        __m256 v = _mm256_loadu_ps(x + j);
        v = m ? _mm256_fmadd_ps(v, vs, _mm256_loadu_ps(m + j)) : _mm256_mul_ps(v, vs);
        _mm256_storeu_ps(x + j, v);
        vmax = _mm256_max_ps(v, vmax);
    }
    for (int64_t t = j; t < n; t++) {
        x[t] = x[t] * scale + (m ? m[t] : 0.0f);
        mx = x[t] > mx ? x[t] : mx;
    }
    float lanes[LANES];
    _mm256_storeu_ps(lanes, vmax);
    for (int l = 0; l < LANES; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 acc = _mm256_setzero_ps();
    for (j = 0; j + LANES <= n; j += LANES) {
        const __m256 e = hl_exp_nonpos_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
        _mm256_storeu_ps(x + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    _mm256_storeu_ps(lanes, acc);
    return finish_row(x, j, n, mx, lanes, nan_to_zero);
}
#endif

static float scores_to_exp(const attn *g, float *x, const float *m, int64_t ms) {
#ifdef HAVE_AVX2_KERNEL
    if (g->avx2 && (!m || ms == 1)) return exp_row_avx2(x, g->scale, m, g->Sk, g->nan_to_zero);
#endif
    return exp_row(x, g->scale, m, ms, g->Sk, g->nan_to_zero);
}

/* Query rows [i0, i0 + R) of head (b, h), R <= MR; the head is packed in s. */
static void tile_rows(const attn *g, int64_t b, int64_t h, int64_t i0, int R, scratch *s) {
    const float *q = g->q + b * g->qs[0] + h * g->qs[1] + i0 * g->qs[2];
    const int64_t kpanels = s->skp / NR;
    for (int64_t p = 0; p < kpanels;) {
#ifdef HAVE_AVX512_KERNEL
        if (g->avx512) {  /* two key panels at a time (the scores are padded to whole panels) */
            const int W = p + 1 < kpanels ? 2 : 1;
            rows512_for(R, W)(R, g->D, q, g->qs[2], s->kp + p * g->D * NR, g->D * NR,
                              s->scores + p * NR, s->skp, NULL);
            p += W;
            continue;
        }
#endif
        rows_x_panel(g, R, g->D, q, g->qs[2], s->kp + p * g->D * NR, s->scores + p * NR, s->skp,
                     NULL);
        p++;
    }
    float inv[MR];
    for (int r = 0; r < R; r++) {
        const float *m = g->mask ? g->mask + b * g->ms[0] + h * g->ms[1] + (i0 + r) * g->ms[2]
                                 : NULL;
        inv[r] = scores_to_exp(g, s->scores + r * s->skp, m, g->ms[3]);
    }
    float *o = g->out + b * g->os[0] + h * g->os[1] + i0 * g->os[2];
    for (int64_t p = 0; p * NR < g->Dv; p++) {
        const int64_t j0 = p * NR, nv = HL_MIN(NR, g->Dv - j0);
        const float *panel = s->vp + p * g->Sk * NR;
#ifdef HAVE_AVX512_KERNEL
        if (g->avx512 && nv == NR) {  /* full value panels two at a time */
            const int W = j0 + 2 * NR <= g->Dv ? 2 : 1;
            rows512_for(R, W)(R, g->Sk, s->scores, s->skp, panel, g->Sk * NR, o + j0, g->os[2],
                              inv);
            p += W - 1;
            continue;
        }
#endif
        if (nv == NR) {
            rows_x_panel(g, R, g->Sk, s->scores, s->skp, panel, o + j0, g->os[2], inv);
        } else {  /* the last, narrower panel: through a full-width tile */
            rows_x_panel(g, R, g->Sk, s->scores, s->skp, panel, s->tmp, NR, inv);
            for (int r = 0; r < R; r++)
                memcpy(o + r * g->os[2] + j0, s->tmp + r * NR, sizeof(float) * (size_t)nv);
        }
    }
}

static bool scratch_alloc(const attn *g, scratch *s) {
    s->skp = (g->Sk + NR - 1) / NR * NR;
    const int64_t dvp = (g->Dv + NR - 1) / NR * NR;
    const size_t kp = (size_t)(s->skp * HL_MAX(g->D, 1)), vp = (size_t)(HL_MAX(g->Sk, 1) * dvp),
                 sc = (size_t)(MR * HL_MAX(s->skp, NR)), tmp = MR * NR;
    /* one block, each part on a 64-byte boundary */
    const size_t parts[4] = {kp, vp, sc, tmp};
    size_t total = 0;
    for (int i = 0; i < 4; i++) total += (parts[i] + 15) / 16 * 16;
    float *base = aligned_alloc(64, total * sizeof(float));
    if (!base) return false;
    float **dst[4] = {&s->kp, &s->vp, &s->scores, &s->tmp};
    for (int i = 0; i < 4; i++) {
        *dst[i] = base;
        base += (parts[i] + 15) / 16 * 16;
    }
    return true;
}

/* Work items [begin, end) of one chunk: (batch, head, block of QBLOCK query rows), head
   major; the pool slot running them picks its scratch. */
enum { HL_MAX_ATTN_SLOTS = 64 };
typedef struct {
    const attn *g;
    scratch *s;
    int64_t *packed;  /* per slot: the head (b * H + h) packed in its scratch, or -1 */
    int64_t blocks;
} attn_items;

static void run_items(int64_t begin, int64_t end, void *arg) {
    const attn_items *w = arg;
    const attn *g = w->g;
    const int slot = hl_pool_slot();
    scratch *s = &w->s[slot];
    for (int64_t it = begin; it < end; it++) {
        const int64_t head = it / w->blocks, b = head / g->H, h = head % g->H;
        if (head != w->packed[slot]) {
            pack_head(g, g->k + b * g->ks[0] + h * g->ks[1], g->v + b * g->vs[0] + h * g->vs[1],
                      s);
            w->packed[slot] = head;
        }
        const int64_t i1 = HL_MIN(g->Sq, (it % w->blocks + 1) * QBLOCK);
        for (int64_t i = it % w->blocks * QBLOCK; i < i1; i += MR)
            tile_rows(g, b, h, i, (int)HL_MIN(MR, i1 - i), s);
    }
}

/* in {q, k, v, mask (broadcast to (B, H, Sq, Sk)) when i[0]}; out[0] contiguous, (B, Sq,
   H * Dv) when i[2] else (B, H, Sq, Dv); i[1] nan_to_zero; f[0] scale. q, k, v: 4-D, their
   last axis contiguous (api/attention.c sees to it). */
hl_status hl_cpu_attention(const hl_call *c) {
    const hl_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    const hl_tensor *mask = c->i[0] ? c->in[3] : NULL;
    attn g = {.B = q->shape[0], .H = q->shape[1], .Sq = q->shape[2], .Sk = k->shape[2],
              .D = q->shape[3], .Dv = v->shape[3], .q = (const float *)hl_ptr(q),
              .k = (const float *)hl_ptr(k), .v = (const float *)hl_ptr(v),
              .mask = mask ? (const float *)hl_ptr(mask) : NULL,
              .out = (float *)hl_ptr(c->out[0]), .scale = (float)c->f[0],
              .nan_to_zero = c->i[1] != 0, .avx2 = cpu_has_avx2(),
              .avx512 = hl_cpu_avx512()};
    for (int d = 0; d < 4; d++) {
        g.qs[d] = q->strides[d];
        g.ks[d] = k->strides[d];
        g.vs[d] = v->strides[d];
        g.ms[d] = mask ? mask->strides[d] : 0;
    }
    const int64_t Sq = g.Sq, H = g.H, Dv = g.Dv;
    if (c->i[2]) {  /* (B, Sq, H, Dv) */
        g.os[0] = Sq * H * Dv, g.os[1] = Dv, g.os[2] = H * Dv;
    } else {
        g.os[0] = H * Sq * Dv, g.os[1] = Sq * Dv, g.os[2] = Dv;
    }
    g.os[3] = 1;
    if (g.B == 0 || H == 0 || Sq == 0 || Dv == 0) return HL_OK;
    if (g.Sk == 0) {  /* no keys: the product with an empty v, as unfused (out is contiguous) */
        memset(g.out, 0, sizeof(float) * (size_t)(g.B * H * Sq * Dv));
        return HL_OK;
    }
    const int64_t blocks = (Sq + QBLOCK - 1) / QBLOCK, items = g.B * H * blocks;
    const double flops = 2.0 * (double)(g.B * H * Sq) * (double)g.Sk * (double)(g.D + Dv);
    const int threads = flops < 1e6 ? 1 : hl_pool_threads();
    /* one scratch per pool slot (each remembers the head it holds packed) */
    scratch s[HL_MAX_ATTN_SLOTS];
    int64_t packed[HL_MAX_ATTN_SLOTS];
    const int slots = HL_MIN(threads, HL_MAX_ATTN_SLOTS);
    for (int t = 0; t < slots; t++) {
        packed[t] = -1;
        if (!scratch_alloc(&g, &s[t])) {
            for (int u = 0; u < t; u++) free(s[u].kp);
            return hl_fail(HL_ERR_MEMORY, "attention: out of memory for the packed keys and "
                           "values of a head (%lld keys)", (long long)g.Sk);
        }
    }
    attn_items work = {&g, s, packed, blocks};
    if (slots < threads || threads == 1)  /* on this thread alone: slot 0 */
        run_items(0, items, &work);
    else  /* a head's blocks in one chunk, so that its K and V are packed once */
        hl_parallel_for(items, blocks, run_items, &work);
    for (int t = 0; t < slots; t++) free(s[t].kp);
    return HL_OK;
}
