/*
 * conv_dw3x3_blocked.c - float32 depthwise 3x3 convolutions on small planes (28x28 and below,
 * 14x14 where the CPU has AVX-512: MobileNetV2's later layers), eight channels at a time with
 * the channels in a vector's lanes, AVX2 + FMA.
 *
 * On a small plane the row kernel (conv_dw3x3.c) spends its time at the borders: a 7x7 or 14x14
 * row is one or two vectors, every one of them masked, and each pass pays its setup for a few
 * outputs. Here each group of eight planes is first turned around (8 x 8 transposes) into a
 * zero-padded block of cells in L1, one cell a vector of the eight channels at one input
 * position; each output is then nine plain loads and FMAs against the taps' weight vectors, no
 * masks and no borders (onnxruntime keeps its whole graph in this layout, NCHWc; here it lasts
 * one call), and the outputs are turned back by the same transposes, the residual and the
 * activation applied to each finished vector of eight positions before its store.
 *
 * Each output sums as the row kernel's does, (bias + kernel row 0) + row 1 + row 2, each row's
 * three taps by FMA in order and the padding cells' zeros multiplied, so the two kernels give
 * the same bits and plain conv and conv_fused still agree bit for bit.
 *
 * On an AVX-512 CPU (hl_cpu_avx512) a cell holds sixteen channels: the nine FMAs of an output
 * then serve sixteen channels, half the instructions per output. The turns in and out stay
 * 8 x 8 transposes, each filling or reading one half of the cells, and the epilogue stays the
 * eight-lane one, so both widths give the same bits. Calls take groups of sixteen channels
 * first, then one of eight where eight or more remain (one thread, MobileNetV2's layers at
 * batch 1: 14x14 and 7x7 planes 12-16% faster, 28x28 ~5%; at 56x56 and above this kernel is
 * twice the row kernel's time at either width, so MAX_CELLS stays; at 28x28 the sixteen-lane
 * row kernel is the faster: MAX_CELLS_AVX512).
 */
#include "../core.h"
#include "conv.h"
#include "conv_avx2.h"
#include "cpu_features.h"
#include "parallel.h"

enum { LANES = 8, WIDE = 16 };   /* channels a cell holds: AVX2, AVX-512 */
/* Padded planes of at most this many cells take this kernel: 28x28 at stride 1 (30 x 30) and
   below; a group's cells and outputs then stay within L1 and L2 (64 KiB at most). At 56x56
   it measured as fast as the row kernel, at 112x112 slower (one thread, 7 alternating rounds).
   Where the CPU has AVX-512 the row kernel has sixteen lanes too (conv_dw3x3_avx512.c), and
   at 28x28 it is the faster: MobileNetV2's 192 channels 62 against 75 us at stride 1, 28.5
   against 39 at stride 2 (one thread; two: 36 against 45, 18 against 24), while at 14x14
   and 7x7 the blocked kernel stays ahead at one thread (51 against 58 us at 14x14, 576
   channels). There it takes planes up to 14x14 at stride 1 (16 x 16 cells); the model at
   batch 1 1.7% faster at one thread, 1.2% at two (4 alternating rounds, Intel Xeon). */
enum { MAX_CELLS = 32 * 32, MAX_CELLS_AVX512 = 16 * 16 };
/* Calls with at least this many outputs x taps run in parallel (as the row kernel). */
enum { PAR_MIN = 1 << 15 };

/* The padded block's rows and columns: what the outputs read, from the top-left padding on. */
static void padded_dims(const conv_geom *g, int64_t *hp, int64_t *wp) {
    *hp = (g->oh - 1) * g->sh + 3;
    *wp = (g->ow - 1) * g->sw + 3;
}

bool hl_dw3x3_blocked_fits(const conv_geom *g) {
    if (g->cg_out != 1 || g->c_out < LANES || g->oh <= 0 || g->ow <= 0) return false;
    int64_t hp, wp;
    padded_dims(g, &hp, &wp);
    return hp * wp <= (hl_cpu_avx512() ? MAX_CELLS_AVX512 : MAX_CELLS);
}

#if HL_CONV_HAVE_X86

/* r[i][j] <- r[j][i] for 8 x 8 floats. */
HL_AVX2 static inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
}

/* What every group of a call shares (conv.h's dw3x3_blocked). */
typedef dw3x3_blocked blocked_args;

/* The lines of a group's outputs fetched for writing (PREFETCHW) before it starts, so that
   their ownership arrives while it computes: at two threads a plane's lines were often last
   written by the other core (the plan's arena hands one block of memory to tensors written by
   either thread), and each store then waited for the line to be taken from that core's cache
   (the turn out took 1.5-2.4x its one-thread time; after this at par; MobileNetV2's blocked
   loops at batch 1 ~30 us faster a replay at two threads). A CPU without the instruction
   takes it as a no-op. */
__attribute__((target("prfchw"))) static void fetch_for_write(const float *p, int64_t floats) {
    const char *b = (const char *)p, *end = (const char *)(p + floats);
    for (; b < end; b += 64) __builtin_prefetch(b, 1, 3);
}

/* Channels c..c+7 of one sample: xg, yg and resg (or NULL) their first planes, wg their 9
   weights each, bg their biases (or NULL); cells and out this thread's work. s and act are
   constants where inlined. */
HL_AVX2 static inline __attribute__((always_inline)) void group_s(
    const blocked_args *a, const float *xg, const float *wg, const float *bg,
    const float *resg, float *yg, float *cells, float *out, const int s, const int act) {
    const conv_geom *g = a->g;
    const int64_t pin = g->h * g->w, P = g->P, ow = g->ow, wp = a->wp;
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t i = 0; i < a->nborder; i++) _mm256_storeu_ps(cells + a->border[i] * LANES, zero);
    /* in: eight positions of the eight planes at a time, turned into eight cells */
    for (int64_t p0 = 0; p0 < pin; p0 += 8) {
        __m256 r[8];
        const int64_t n = HL_MIN(8, pin - p0);
        if (n == 8) {
            for (int c = 0; c < 8; c++) r[c] = _mm256_loadu_ps(xg + c * pin + p0);
        } else {
            const __m256i m = hl_conv_mask8(n);
            for (int c = 0; c < 8; c++) r[c] = _mm256_maskload_ps(xg + c * pin + p0, m);
        }
        transpose8(r);
        for (int64_t j = 0; j < n; j++) {
            const int32_t cell = a->cell_of[p0 + j];
            if (cell >= 0) _mm256_storeu_ps(cells + (int64_t)cell * LANES, r[j]);
        }
    }
    /* each tap's weights of the eight channels */
    __m256 w[9];
    for (int t = 0; t < 9; t++) {
        float v[8];
        for (int c = 0; c < 8; c++) v[c] = wg[c * 9 + t];
        w[t] = _mm256_loadu_ps(v);
    }
    const __m256 bv = bg ? _mm256_loadu_ps(bg) : zero;
    const int64_t row = wp * LANES;
#define TAP(k, d) _mm256_loadu_ps(c + (k) * row + (d) * LANES)
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const float *c = cells + oy * s * row;
        float *o = out + oy * ow * LANES;
        for (int64_t ox = 0; ox < ow; ox++, c += s * LANES, o += LANES) {
            const __m256 p0 = _mm256_fmadd_ps(w[2], TAP(0, 2), _mm256_fmadd_ps(
                                  w[1], TAP(0, 1), _mm256_fmadd_ps(w[0], TAP(0, 0), bv)));
            const __m256 p1 = _mm256_fmadd_ps(w[5], TAP(1, 2), _mm256_fmadd_ps(
                                  w[4], TAP(1, 1), _mm256_fmadd_ps(w[3], TAP(1, 0), zero)));
            const __m256 p2 = _mm256_fmadd_ps(w[8], TAP(2, 2), _mm256_fmadd_ps(
                                  w[7], TAP(2, 1), _mm256_fmadd_ps(w[6], TAP(2, 0), zero)));
            _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(p0, p1), p2));
        }
    }
#undef TAP
    /* out: eight positions at a time turned back into the eight planes (out has room for the
       last block's positions past P, which are not stored), the epilogue, the store */
    const conv_act8_params ap = hl_conv_act8_params(a->epi);
    for (int64_t q0 = 0; q0 < P; q0 += 8) {
        __m256 r[8];
        for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(out + (q0 + j) * LANES);
        transpose8(r);
        const int64_t n = HL_MIN(8, P - q0);
        const __m256i m = hl_conv_mask8(n);
        for (int c = 0; c < 8; c++) {
            __m256 v = r[c];
            const int64_t at = c * P + q0;
            if (resg) v = _mm256_add_ps(v, n == 8 ? _mm256_loadu_ps(resg + at)
                                                  : _mm256_maskload_ps(resg + at, m));
            if (act != HL_CONV_ACT_NONE) v = hl_conv_act8_with(act, ap, v);
            if (n == 8) _mm256_storeu_ps(yg + at, v);
            else _mm256_maskstore_ps(yg + at, m, v);
        }
    }
}

/* group_s for this call's stride and activation, each a constant in its own copy. */
HL_AVX2 static void group(const blocked_args *a, const float *xg, const float *wg,
                          const float *bg, const float *resg, float *yg, float *cells,
                          float *out) {
    const int act = a->epi ? a->epi->act : HL_CONV_ACT_NONE;
#define GROUP_ACT(S)                                                                          \
    switch (act) {                                                                            \
    case HL_CONV_ACT_NONE: group_s(a, xg, wg, bg, resg, yg, cells, out, S, HL_CONV_ACT_NONE); break; \
    case HL_CONV_ACT_RELU: group_s(a, xg, wg, bg, resg, yg, cells, out, S, HL_CONV_ACT_RELU); break; \
    case HL_CONV_ACT_CLIP: group_s(a, xg, wg, bg, resg, yg, cells, out, S, HL_CONV_ACT_CLIP); break; \
    default: group_s(a, xg, wg, bg, resg, yg, cells, out, S, act); break;                     \
    }
    if (a->g->sw == 1) {
        GROUP_ACT(1)
    } else {
        GROUP_ACT(2)
    }
#undef GROUP_ACT
}

#if HL_HAVE_AVX512_KERNELS
/* group_s on sixteen channels (xg..: the first of them), cells of sixteen floats: the turn in
   fills each cell's halves (channels 0-7, then 8-15) by the eight-lane transposes, the
   outputs are nine loads and FMAs on sixteen lanes, the turn out reads the halves back. */
HL_AVX512_TARGET static inline __attribute__((always_inline)) void group16_s(
    const blocked_args *a, const float *xg, const float *wg, const float *bg,
    const float *resg, float *yg, float *cells, float *out, const int s, const int act) {
    const conv_geom *g = a->g;
    const int64_t pin = g->h * g->w, P = g->P, ow = g->ow, wp = a->wp;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t i = 0; i < a->nborder; i++) _mm512_storeu_ps(cells + a->border[i] * WIDE, zero);
    for (int64_t p0 = 0; p0 < pin; p0 += 8) {
        const int64_t n = HL_MIN(8, pin - p0);
        for (int half = 0; half < 2; half++) {
            const float *xh = xg + half * LANES * pin;
            __m256 r[8];
            if (n == 8) {
                for (int c = 0; c < 8; c++) r[c] = _mm256_loadu_ps(xh + c * pin + p0);
            } else {
                const __m256i m = hl_conv_mask8(n);
                for (int c = 0; c < 8; c++) r[c] = _mm256_maskload_ps(xh + c * pin + p0, m);
            }
            transpose8(r);
            for (int64_t j = 0; j < n; j++) {
                const int32_t cell = a->cell_of[p0 + j];
                if (cell >= 0) _mm256_storeu_ps(cells + (int64_t)cell * WIDE + half * LANES, r[j]);
            }
        }
    }
    __m512 w[9];
    for (int t = 0; t < 9; t++) {
        float v[WIDE];
        for (int c = 0; c < WIDE; c++) v[c] = wg[c * 9 + t];
        w[t] = _mm512_loadu_ps(v);
    }
    const __m512 bv = bg ? _mm512_loadu_ps(bg) : zero;
    const int64_t row = wp * WIDE;
#define TAP(k, d) _mm512_loadu_ps(c + (k) * row + (d) * WIDE)
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const float *c = cells + oy * s * row;
        float *o = out + oy * ow * WIDE;
        for (int64_t ox = 0; ox < ow; ox++, c += s * WIDE, o += WIDE) {
            const __m512 p0 = _mm512_fmadd_ps(w[2], TAP(0, 2), _mm512_fmadd_ps(
                                  w[1], TAP(0, 1), _mm512_fmadd_ps(w[0], TAP(0, 0), bv)));
            const __m512 p1 = _mm512_fmadd_ps(w[5], TAP(1, 2), _mm512_fmadd_ps(
                                  w[4], TAP(1, 1), _mm512_fmadd_ps(w[3], TAP(1, 0), zero)));
            const __m512 p2 = _mm512_fmadd_ps(w[8], TAP(2, 2), _mm512_fmadd_ps(
                                  w[7], TAP(2, 1), _mm512_fmadd_ps(w[6], TAP(2, 0), zero)));
            _mm512_storeu_ps(o, _mm512_add_ps(_mm512_add_ps(p0, p1), p2));
        }
    }
#undef TAP
    const conv_act8_params ap = hl_conv_act8_params(a->epi);
    for (int64_t q0 = 0; q0 < P; q0 += 8) {
        const int64_t n = HL_MIN(8, P - q0);
        const __m256i m = hl_conv_mask8(n);
        for (int half = 0; half < 2; half++) {
            __m256 r[8];
            for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(out + (q0 + j) * WIDE + half * LANES);
            transpose8(r);
            for (int c = 0; c < 8; c++) {
                __m256 v = r[c];
                const int64_t at = (half * LANES + c) * P + q0;
                if (resg) v = _mm256_add_ps(v, n == 8 ? _mm256_loadu_ps(resg + at)
                                                      : _mm256_maskload_ps(resg + at, m));
                if (act != HL_CONV_ACT_NONE) v = hl_conv_act8_with(act, ap, v);
                if (n == 8) _mm256_storeu_ps(yg + at, v);
                else _mm256_maskstore_ps(yg + at, m, v);
            }
        }
    }
}

/* group16_s for this call's stride and activation, each a constant in its own copy. */
HL_AVX512_TARGET static void group16(const blocked_args *a, const float *xg, const float *wg,
                                     const float *bg, const float *resg, float *yg,
                                     float *cells, float *out) {
    const int act = a->epi ? a->epi->act : HL_CONV_ACT_NONE;
#define GROUP_ACT(S)                                                                          \
    switch (act) {                                                                            \
    case HL_CONV_ACT_NONE: group16_s(a, xg, wg, bg, resg, yg, cells, out, S, HL_CONV_ACT_NONE); break; \
    case HL_CONV_ACT_RELU: group16_s(a, xg, wg, bg, resg, yg, cells, out, S, HL_CONV_ACT_RELU); break; \
    case HL_CONV_ACT_CLIP: group16_s(a, xg, wg, bg, resg, yg, cells, out, S, HL_CONV_ACT_CLIP); break; \
    default: group16_s(a, xg, wg, bg, resg, yg, cells, out, S, act); break;                   \
    }
    if (a->g->sw == 1) {
        GROUP_ACT(1)
    } else {
        GROUP_ACT(2)
    }
#undef GROUP_ACT
}
#endif

/* Channels [c0, c1) of one sample (c0 a multiple of WIDE where the CPU has AVX-512, c1 - c0
   of LANES): groups of sixteen first (AVX-512), then of eight. xs, ys and rs (or NULL) are
   channel c0's planes; work is this thread's cells, then its outputs. Each channel's bits are
   the same whichever width runs it. */
static void run_channels(const blocked_args *a, const float *xs, const float *w,
                         const float *bias, const float *rs, float *ys, int64_t c0, int64_t c1,
                         float *work) {
    const conv_geom *g = a->g;
    const int64_t ncells = a->ncells;
    const int64_t pin = g->h * g->w, P = g->P;
    for (int64_t c = c0; c < c1;) {
        const int64_t at = c - c0;
        const float *bg = bias ? bias + c : NULL, *resg = rs ? rs + at * P : NULL;
#if HL_HAVE_AVX512_KERNELS
        if (hl_cpu_avx512() && c + WIDE <= c1) {
            fetch_for_write(ys + at * P, WIDE * P);
            group16(a, xs + at * pin, w + c * 9, bg, resg, ys + at * P, work,
                    work + ncells * WIDE);
            c += WIDE;
            continue;
        }
#endif
        fetch_for_write(ys + at * P, LANES * P);
        group(a, xs + at * pin, w + c * 9, bg, resg, ys + at * P, work, work + ncells * LANES);
        c += LANES;
    }
}

/* The tables every group reads (hl_dw3x3_blocked_setup): int32s, rounded up to 16 (64 bytes). */
static int64_t table_ints(const conv_geom *g) {
    int64_t hp, wp;
    padded_dims(g, &hp, &wp);
    return (g->h * g->w + hp * wp + 15) / 16 * 16;
}

size_t hl_dw3x3_blocked_table_bytes(const conv_geom *g) {
    return (size_t)table_ints(g) * sizeof(int32_t);
}

size_t hl_dw3x3_blocked_work_bytes(const conv_geom *g) {
    int64_t hp, wp;
    padded_dims(g, &hp, &wp);
    const int lanes = hl_cpu_avx512() ? WIDE : LANES;   /* the widest cell */
    return (size_t)((hp * wp + (g->P + 7) / 8 * 8) * lanes) * sizeof(float);
}

void hl_dw3x3_blocked_setup(const conv_geom *g, const conv_epilogue *epi, void *tables,
                            dw3x3_blocked *a) {
    int64_t hp, wp;
    padded_dims(g, &hp, &wp);
    const int64_t pin = g->h * g->w;
    int32_t *cell_of = tables, *border = cell_of + pin;
    for (int64_t iy = 0, p = 0; iy < g->h; iy++)
        for (int64_t ix = 0; ix < g->w; ix++, p++) {
            const int64_t cy = iy + g->pt, cx = ix + g->pl;
            cell_of[p] = cy < hp && cx < wp ? (int32_t)(cy * wp + cx) : -1;
        }
    int64_t nborder = 0;
    for (int64_t cy = 0; cy < hp; cy++)
        for (int64_t cx = 0; cx < wp; cx++)
            if (cy < g->pt || cy >= g->pt + g->h || cx < g->pl || cx >= g->pl + g->w)
                border[nborder++] = (int32_t)(cy * wp + cx);
    *a = (dw3x3_blocked){g, wp, hp * wp, nborder, cell_of, border, epi};
}

void hl_dw3x3_blocked_planes(const dw3x3_blocked *a, float *work, const float *xp, int64_t c0,
                             int64_t c1, const float *w, const float *bias, float *y) {
    run_channels(a, xp, w, bias, NULL, y + c0 * a->g->P, c0, c1, work);
}

/* What each chunk of groups needs; run_groups runs them. */
typedef struct {
    const blocked_args *a;
    const float *x, *w, *bias, *res;
    float *y, *work;
    int64_t per_sample, wide, per_thread;
} group_tasks;

/* Groups [t0, t1): sample t / per_sample, its group t % per_sample: the first `wide` groups of
   sixteen channels (AVX-512), then groups of eight, in this thread's cells and outputs. */
static void run_groups(int64_t t0, int64_t t1, void *arg) {
    const group_tasks *q = arg;
    const conv_geom *g = q->a->g;
    const int64_t pin = g->h * g->w;
    float *work = q->work + hl_thread_num() * q->per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t n = t / q->per_sample, k = t % q->per_sample;
        const bool wide = k < q->wide;
        const int64_t c = wide ? k * WIDE : q->wide * WIDE + (k - q->wide) * LANES;
        const int64_t plane0 = n * g->c_out + c;
        run_channels(q->a, q->x + plane0 * pin, q->w, q->bias,
                     q->res ? q->res + plane0 * g->P : NULL, q->y + plane0 * g->P, c,
                     c + (wide ? WIDE : LANES), work);
    }
}

hl_status hl_dw3x3_blocked_forward(const conv_geom *g, const float *x, const float *w,
                                   const float *bias, const conv_epilogue *epi, float *y) {
    /* groups of sixteen channels where the CPU has AVX-512, then (at most one) of eight */
    const int64_t wide = hl_cpu_avx512() ? g->c_out / WIDE : 0;
    const int64_t per_sample = wide + (g->c_out - wide * WIDE) / LANES, tasks = g->n * per_sample;
    if (tasks == 0 || g->P == 0) return HL_OK;
    /* the tables, then each thread's cells and outputs */
    const size_t table = hl_dw3x3_blocked_table_bytes(g);
    const size_t per_thread = hl_dw3x3_blocked_work_bytes(g);
    const int threads = hl_pool_threads();
    const bool parallel = threads > 1 && tasks > 1 &&
                          g->n * (g->c_out / LANES * LANES) * g->P * 9 > PAR_MIN;
    scratch sb;
    void *work;
    hl_status st = scratch_get("conv", &sb, table + per_thread * (size_t)threads, &work);
    if (st) return st;
    blocked_args a;
    hl_dw3x3_blocked_setup(g, epi, work, &a);
    const group_tasks q = {&a, x, w, bias, epi ? (const float *)epi->res : NULL, y,
                           (float *)((char *)work + table), per_sample, wide,
                           (int64_t)(per_thread / sizeof(float))};
    /* groups in lanes: each thread takes the channels it computed in the layer before (an
       expansion's panels in lanes, conv_packed.c) and that the projection after takes from
       it (its halves of K) */
    if (parallel)
        hl_parallel_lanes(tasks, run_groups, (void *)&q);
    else
        hl_parallel_for(tasks, tasks, run_groups, (void *)&q);
    scratch_put(&sb);
    return HL_OK;
}

#else

hl_status hl_dw3x3_blocked_forward(const conv_geom *g, const float *x, const float *w,
                                   const float *bias, const conv_epilogue *epi, float *y) {
    (void)g, (void)x, (void)w, (void)bias, (void)epi, (void)y;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv: the AVX2 depthwise kernel is not built here");
}

#endif
