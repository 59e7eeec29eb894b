/*
 * conv_dw3x3_avx512.c - the depthwise 3x3 row kernel (conv_dw3x3.c) on sixteen lanes, for
 * AVX-512 CPUs (hl_cpu_avx512): MobileNetV2's 112x112 and 56x56 planes, and whatever channels
 * of a small plane the blocked kernel leaves.
 *
 * A vector holds 16 outputs of a row; each input row gives it three tap vectors: at stride 1
 * loads at q, q + 1, q + 2; at stride 2 two pairs of loads (q, q + 16 and q + 2, q + 18)
 * whose even and odd positions one two-source permute each picks out, in order. Every load
 * is masked to the lanes inside the input row (AVX-512's masked loads read zeros elsewhere,
 * fault nothing and cost what a plain load does on Intel's cores), so the borders, narrow
 * planes and the last partial vector of a row all take the one path that the interior does:
 * none of the AVX2 kernel's edge modes. Rows above or below the input are zero vectors.
 * So padding is zeros that are multiplied, as ONNX and im2col define it.
 *
 * Each output sums as the AVX2 kernel's does, (bias + kernel row 0) + row 1 + row 2, each
 * row's three taps by FMA in order, and the epilogue is hl_conv_act16_with (the eight-lane
 * activation's bits): the two kernels give the same bits, and conv and conv_fused still agree.
 */
#include "../core.h"
#include "conv.h"
#include "conv_avx512.h"
#include "parallel.h"

#if HL_HAVE_AVX512_KERNELS

/* Planes with at least this many outputs x taps run in parallel (as conv_dw3x3.c). */
enum { DW_PAR_MIN = 1 << 15 };

/* Per vector of 16 outputs (chunk c of every row): the lanes of each of its loads that lie
   inside the input row (stride 1: at q, q + 1, q + 2; stride 2: q, q + 16, q + 2, q + 18). */
typedef struct {
    __mmask16 m[4];
    bool inside;   /* every load whole and all 16 outputs stored: plain loads and stores */
} chunk16;

static const int64_t LOAD_AT[2][4] = {{0, 1, 2, 0}, {0, 16, 2, 18}};

/* The lanes j of a load at column p with 0 <= p + j < w. */
static __mmask16 lanes_inside(int64_t p, int64_t w) {
    const int64_t lo = HL_MAX(0, -p), hi = HL_MIN(16, w - p);
    if (hi <= lo) return 0;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

static void fill_chunks(const conv_geom *g, chunk16 *cm, int64_t chunks) {
    const int s = (int)g->sw;
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t q = c * 16 * s - g->pl;
        bool inside = (c + 1) * 16 <= g->ow;
        for (int l = 0; l < 4; l++) {
            cm[c].m[l] = lanes_inside(q + LOAD_AT[s - 1][l], g->w);
            if (l < (s == 1 ? 3 : 4))   /* the loads this stride uses */
                inside = inside && cm[c].m[l] == 0xFFFF;
        }
        cm[c].inside = inside;
    }
}

/* A load of 16 values at p: plain where the chunk's loads all lie inside the row (INSIDE, a
   constant where inlined), else under its mask (zeros outside the row). */
#define LOAD16(mask, p) (INSIDE ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask, p))

/* The three tap vectors of input row xr (NULL: a padding row) for the chunk at column q. */
HL_AVX512_INLINE void taps16(const float *xr, int64_t q, const chunk16 *m, const int s,
                             const bool INSIDE, __m512 t[3]) {
    if (!xr) {
        t[0] = t[1] = t[2] = _mm512_setzero_ps();
    } else if (s == 1) {
        t[0] = LOAD16(m->m[0], xr + q);
        t[1] = LOAD16(m->m[1], xr + q + 1);
        t[2] = LOAD16(m->m[2], xr + q + 2);
    } else {
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24,
                                               26, 28, 30);
        const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        const __m512 a = LOAD16(m->m[0], xr + q), b = LOAD16(m->m[1], xr + q + 16),
                     c = LOAD16(m->m[2], xr + q + 2), d = LOAD16(m->m[3], xr + q + 18);
        t[0] = _mm512_permutex2var_ps(a, even, b);
        t[1] = _mm512_permutex2var_ps(a, odd, b);
        t[2] = _mm512_permutex2var_ps(c, even, d);
    }
}

/* start + the kernel row's three taps (w: its 3 weights), in the AVX2 kernel's order. */
HL_AVX512_INLINE __m512 dot3_16(__m512 start, const __m512 *w, const __m512 *t) {
    return _mm512_fmadd_ps(w[2], t[2], _mm512_fmadd_ps(w[1], t[1], _mm512_fmadd_ps(
                                                                      w[0], t[0], start)));
}

/* The residual, the activation and the store of one finished vector (n of its lanes; all
   16 where INSIDE). */
HL_AVX512_INLINE void finish16(__m512 acc, const float *res, float *y, __mmask16 n,
                               const int act, const conv_act16_params ap, const bool INSIDE) {
    if (res) acc = _mm512_add_ps(acc, LOAD16(n, res));
    if (act != HL_CONV_ACT_NONE) acc = hl_conv_act16_with(act, ap, acc);
    if (INSIDE) _mm512_storeu_ps(y, acc);
    else _mm512_mask_storeu_ps(y, n, acc);
}
#undef LOAD16

/* Chunk c (16 outputs) of output rows oy and, with `two`, oy + 1, from the input rows `rows`
   (NULL: padding): plain loads and stores where INSIDE (the row's interior chunks), masked
   ones at its ends. The same sums either way. */
HL_AVX512_INLINE void chunk_rows(const conv_geom *g, const chunk16 *m, int64_t c,
                                 const float *const rows[5], const __m512 w[3][3], __m512 bv,
                                 const float *res, float *yp, int64_t oy, bool two,
                                 __mmask16 last, int64_t chunks, const conv_act16_params ap,
                                 const int s, const int act, const bool INSIDE) {
    const __m512 zero = _mm512_setzero_ps();
    const int64_t ow = g->ow, ox = c * 16, q = ox * s - g->pl;
    __m512 t[3], p0, p1, p2, r0 = zero, r1 = zero, r2 = zero;
    taps16(rows[0], q, m, s, INSIDE, t);
    p0 = dot3_16(bv, w[0], t);
    taps16(rows[1], q, m, s, INSIDE, t);
    p1 = dot3_16(zero, w[1], t);
    if (s == 1) r0 = dot3_16(bv, w[0], t);
    taps16(rows[2], q, m, s, INSIDE, t);
    p2 = dot3_16(zero, w[2], t);
    if (s == 1) r1 = dot3_16(zero, w[1], t);
    else r0 = dot3_16(bv, w[0], t);
    if (two) {
        taps16(rows[3], q, m, s, INSIDE, t);
        if (s == 1) r2 = dot3_16(zero, w[2], t);
        else r1 = dot3_16(zero, w[1], t);
        if (s == 2) {
            taps16(rows[4], q, m, s, INSIDE, t);
            r2 = dot3_16(zero, w[2], t);
        }
    }
    const __mmask16 n = c + 1 < chunks ? (__mmask16)0xFFFF : last;
    const int64_t at = oy * ow + ox;
    finish16(_mm512_add_ps(_mm512_add_ps(p0, p1), p2), res ? res + at : NULL, yp + at, n, act,
             ap, INSIDE);
    if (two)
        finish16(_mm512_add_ps(_mm512_add_ps(r0, r1), r2), res ? res + at + ow : NULL,
                 yp + at + ow, n, act, ap, INSIDE);
}

/* Output rows [r.oy0, r.oy1) of one plane (xp its input rows from row r.row0 on, wk its 9
   weights, b its bias, res its residual plane or NULL, yp its output plane), two output rows a
   pass: they share their input rows (4 at stride 1, 5 at 2). Each output's sums are the same
   whichever rows a call takes. s and act are constants where inlined. */
HL_AVX512_INLINE void plane16_s(const conv_geom *g_call, const chunk16 *cm, const float *xp,
                                dw3x3_rows r, const float *wk, float b,
                                const conv_epilogue *epi, const float *res, float *yp,
                                const int s, const int act) {
    const conv_geom g_local = *g_call, *g = &g_local;   /* not aliased by the stores */
    const int64_t ow = g->ow, W = g->w, chunks = (ow + 15) / 16;
    __m512 w[3][3];
    for (int i = 0; i < 9; i++) w[i / 3][i % 3] = _mm512_set1_ps(wk[i]);
    const __m512 bv = _mm512_set1_ps(b);
    const conv_act16_params ap = hl_conv_act16_params(epi);
    const __mmask16 last = hl_conv_mask16(ow - (chunks - 1) * 16);
    for (int64_t oy = r.oy0; oy < r.oy1; oy += 2) {
        const bool two = oy + 1 < r.oy1;
        const float *rows[5];
        for (int k = 0; k < 5; k++) {
            const int64_t iy = oy * s - g->pt + k;
            rows[k] = iy >= 0 && iy < g->h && k < (two ? s + 3 : 3) ? xp + (iy - r.row0) * W
                                                                      : NULL;
        }
        for (int64_t c = 0; c < chunks; c++) {
            if (s == 1 && cm[c].inside)   /* at stride 2 the plain copy ran 2-10% slower */
                chunk_rows(g, cm + c, c, rows, w, bv, res, yp, oy, two, last, chunks, ap, s,
                           act, true);
            else
                chunk_rows(g, cm + c, c, rows, w, bv, res, yp, oy, two, last, chunks, ap, s,
                           act, false);
        }
    }
}

/* plane16_s for this call's stride and activation, each a constant in its own copy (the
   common activations; the others read theirs at run time). */
HL_AVX512_TARGET static void plane16(const conv_geom *g, const chunk16 *cm, const float *xp,
                                     dw3x3_rows r, const float *wk, float b,
                                     const conv_epilogue *epi, const float *res, float *yp) {
    const int act = epi ? epi->act : HL_CONV_ACT_NONE;
#define PLANE_ACT(S)                                                                          \
    switch (act) {                                                                            \
    case HL_CONV_ACT_NONE: plane16_s(g, cm, xp, r, wk, b, epi, res, yp, S, HL_CONV_ACT_NONE); break; \
    case HL_CONV_ACT_RELU: plane16_s(g, cm, xp, r, wk, b, epi, res, yp, S, HL_CONV_ACT_RELU); break; \
    case HL_CONV_ACT_CLIP: plane16_s(g, cm, xp, r, wk, b, epi, res, yp, S, HL_CONV_ACT_CLIP); break; \
    default: plane16_s(g, cm, xp, r, wk, b, epi, res, yp, S, act); break;                    \
    }
    if (g->sw == 1) {
        PLANE_ACT(1)
    } else {
        PLANE_ACT(2)
    }
#undef PLANE_ACT
}

typedef struct {
    const conv_geom *g;
    const chunk16 *cm;
    int64_t done, rest;   /* per sample: the channels already done, those left */
    int64_t bands;        /* each plane's rows in this many bands, band-major items */
    const float *x, *w, *bias;
    const conv_epilogue *epi;
    float *y;
} planes16;

static void run_planes16(int64_t begin, int64_t end, void *arg) {
    const planes16 *q = arg;
    const conv_geom *g = q->g;
    const float *res = q->epi ? (const float *)q->epi->res : NULL;
    const int64_t planes = g->n * q->rest;
    for (int64_t it = begin; it < end; it++) {
        const int64_t band = it / planes, pl = it % planes;
        const int64_t n = pl / q->rest, co = q->done + pl % q->rest, ci = co / g->cg_out;
        const int64_t at = (n * g->c_out + co) * g->P;
        const dw3x3_rows r = {0, g->h, g->oh * band / q->bands, g->oh * (band + 1) / q->bands};
        plane16(g, q->cm, q->x + (n * g->c_in + ci) * g->h * g->w, r, q->w + co * 9,
                q->bias ? q->bias[co] : 0.0f, q->epi, res ? res + at : NULL, q->y + at);
    }
}

/* Planes of at least this many outputs are cut into bands of rows, one a thread, where there
   are fewer samples than threads (batch 1's 112x112 and 56x56 planes): the layers around them
   (the stem's rows, the products' blocks of positions) split their planes by positions too,
   so each thread reads the rows it wrote, where whole planes a thread read half of every
   plane from the other core's cache (MobileNetV2 b1 at two threads: 112x112's depthwise layer
   and the projection after it ~N us faster). */
enum { BANDS_MIN_P = 56 * 56 };

int64_t hl_dw3x3_bands(const conv_geom *g) {
    const int threads = hl_pool_threads();
    return threads > 1 && g->n < threads && g->P >= BANDS_MIN_P && g->oh >= 4 * threads
               ? threads : 1;
}

hl_status hl_dw3x3_rows_avx512(const conv_geom *g, int64_t done, const float *x,
                               const float *w, const float *bias, const conv_epilogue *epi,
                               float *y) {
    const int64_t rest = g->c_out - done, planes = g->n * rest, chunks = (g->ow + 15) / 16;
    if (planes <= 0 || g->P == 0) return HL_OK;
    scratch sb;
    chunk16 *cm;
    hl_status st = scratch_get("conv", &sb, (size_t)chunks * sizeof(chunk16), (void **)&cm);
    if (st) return st;
    fill_chunks(g, cm, chunks);
    const bool parallel = hl_pool_threads() > 1 && planes > 1 && planes * g->P * 9 > DW_PAR_MIN;
    const int64_t bands = parallel ? hl_dw3x3_bands(g) : 1;
    const planes16 q = {g, cm, done, rest, bands, x, w, bias, epi, y};
    /* planes (or bands of them) in lanes (hl_parallel_lanes): each thread takes the channels
       (or the rows) it computed in the layer before; a thread the host deschedules leaves its
       planes to others */
    if (parallel)
        hl_parallel_lanes(bands * planes, run_planes16, (void *)&q);
    else
        hl_parallel_for(planes, planes, run_planes16, (void *)&q);
    scratch_put(&sb);
    return HL_OK;
}

hl_status hl_dw3x3_plane_rows_avx512(const conv_geom *g, const float *xp, dw3x3_rows r,
                                     int64_t c0, int64_t c1, const float *w, const float *bias,
                                     const conv_epilogue *epi, float *y) {
    const int64_t chunks = (g->ow + 15) / 16;
    chunk16 cm[HL_DW3X3_PLANES_MAX_CHUNKS];
    if (chunks > HL_DW3X3_PLANES_MAX_CHUNKS)
        return hl_fail(HL_ERR_UNSUPPORTED, "conv: %lld outputs a row, more than the fused "
                       "depthwise kernel takes", (long long)g->ow);
    fill_chunks(g, cm, chunks);
    const int64_t held = r.row1 - r.row0;
    for (int64_t c = c0; c < c1; c++)
        plane16(g, cm, xp + (c - c0) * held * g->w, r, w + c * 9, bias ? bias[c] : 0.0f, epi,
                NULL, y + c * g->P);
    return HL_OK;
}

/* One sample's output channels [c0, c1) on the calling thread, channel c's input plane at
   xp + (c - c0) * h * w (conv_expand_dw.c's planes, just computed), weights at w + 9 c, its
   output plane at y + c * P: plane16 as above, so the same bits. */
hl_status hl_dw3x3_planes_avx512(const conv_geom *g, const float *xp, int64_t c0, int64_t c1,
                                 const float *w, const float *bias, const conv_epilogue *epi,
                                 float *y) {
    const dw3x3_rows all = {0, g->h, 0, g->oh};
    return hl_dw3x3_plane_rows_avx512(g, xp, all, c0, c1, w, bias, epi, y);
}

#endif
