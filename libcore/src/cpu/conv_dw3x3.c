/*
 * conv_dw3x3.c - float32 depthwise 3x3 convolutions (one input channel per group, dilation 1,
 * stride 1 or 2: MobileNet's), AVX2 + FMA, with the bias, the residual and the activation
 * applied in registers before the one store of each output.
 *
 * Each vector of 8 outputs of a row is three input rows times three taps, read straight from
 * the input: at stride 1 the taps of 8 outputs are three unaligned loads per row; at stride 2
 * two pairs of loads per row, split into even and odd positions by in-lane shuffles (taps 0 and 1
 * from the first pair, tap 2 from the second, two positions on), instead of gathers. Vectors
 * whose taps reach past the row's ends (the borders, and all of a narrow plane such as 7x7)
 * use masked loads, which read zeros there; rows above or below the input are a vector of
 * zeros. Planes with padding 1 at the left (standard_rows: MobileNetV2's 112x112 and 56x56)
 * instead shift the one zero of a row's first chunk (and, with whole vectors, of its last)
 * into a vector loaded inside the row, and read the rows above and below from a row of
 * zeros. So padding is zeros that are multiplied, as ONNX and im2col define it (an infinite
 * weight gives NaN at the border). An earlier version copied each row into a zero-padded ring
 * buffer first: on 7x7 and 14x14 planes the loads that followed those stores stalled
 * (store-to-load forwarding) and it ran slower than the portable loop.
 *
 * Each output is (bias + kernel row 0) + row 1 + row 2, each row's three taps by FMA: the
 * bits differ from the portable loop's (conv_impl.h, a multiply and an add per tap in one
 * chain) by rounding only; conv and conv_fused both take this kernel, so a fused call still
 * equals the plain conv, add and activation bit for bit. HL_CONV_AVX2=0 turns it off. On
 * AVX-512 CPUs conv_dw3x3_avx512.c's sixteen-lane kernel runs instead, with the same bits.
 */
#include "../core.h"
#include "conv.h"
#include "conv_avx2.h"
#include "cpu_features.h"
#include "parallel.h"

/* Planes with at least this many outputs x taps run in parallel (as conv_impl.h's loops). */
enum { DW_PAR_MIN = 1 << 15 };

bool hl_dw3x3_fits(const conv_geom *g) {
    return g->cg_in == 1 && g->groups > 1 && g->kh == 3 && g->kw == 3 && g->dh == 1 &&
           g->dw == 1 && g->sh == g->sw && (g->sw == 1 || g->sw == 2) &&
           hl_conv_avx2();
}

#if HL_CONV_HAVE_X86

/* Per vector of 8 outputs (a chunk of a row, the same for every row and plane of a call):
   whether all of its loads lie inside the input row, and if not, the lanes of each load that
   do (s1: the taps at q, q + 1, q + 2; s2: the pairs at q, q + 8 and q + 2, q + 10). */
typedef struct {
    int32_t lanes[4][8];
    int32_t interior;
} chunk_masks;

static const int64_t LOAD_OFFSET[2][4] = {{0, 1, 2, 0}, {0, 8, 2, 10}};

static void fill_masks(const conv_geom *g, chunk_masks *cm, int64_t chunks) {
    const int s = (int)g->sw, reach = s == 1 ? 10 : 18;   /* a chunk's loads span */
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t q = c * 8 * s - g->pl;
        cm[c].interior = q >= 0 && q + reach <= g->w;
        for (int l = 0; l < 4; l++)
            for (int j = 0; j < 8; j++) {
                const int64_t i = q + LOAD_OFFSET[s - 1][l] + j;
                cm[c].lanes[l][j] = i >= 0 && i < g->w ? -1 : 0;
            }
    }
}

/* The 8 values of row r from q on; m: NULL (all inside the row) or the lanes inside it (the
   others read as zeros; a masked load does not touch them, so q may lie outside the row). */
#define LOAD8(r, q, m)                                                                        \
    ((m) ? _mm256_maskload_ps((r) + (q), _mm256_loadu_si256((const __m256i *)(m)))          \
         : _mm256_loadu_ps((r) + (q)))

/* The even and odd positions of the 16 values (a, b), in the order one in-lane shuffle leaves
   them, [a0 a2 b0 b2 a4 a6 b4 b6] (and the odd): pairs of outputs 0-1, 4-5, 2-3, 6-7. Every
   tap vector of a chunk is in that order, so its sums are too, and unswap puts each finished
   vector in order once (a lane-crossing permute per output instead of three per input row). */
HL_AVX2 static inline __m256 evens(__m256 a, __m256 b) { return _mm256_shuffle_ps(a, b, 0x88); }
HL_AVX2 static inline __m256 odds(__m256 a, __m256 b) { return _mm256_shuffle_ps(a, b, 0xDD); }
HL_AVX2 static inline __m256 unswap(__m256 v) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8));
}

/* How a chunk reads its input rows (a constant where inlined): through its lanes masks
   (GENERIC; a row may be NULL, a padding row), plainly (INTERIOR: all loads inside the row),
   or as the first (LEFT) or last (RIGHT) chunk of a row that reaches one column past the
   row's start or end (a plane with padding 1 and whole vectors of outputs: standard_rows),
   whose one outside value comes in as a zero by a lane shift of a vector loaded inside the
   row, not by a masked load (which with the masks' loads cost an edge chunk five interior
   ones on 56x56 planes). TAIL is a partial last chunk whose outputs read only inside the row
   but whose loads reach past it (28 outputs a row at stride 2 from 56 columns: lanes 4-7 of
   the last chunk read the next row): plain loads where they stay inside the input tensor,
   and the lanes past the row's outputs, which read the next row, are never stored as
   outputs (finish stores them whole only onto outputs stored after them). The rows of
   INTERIOR, LEFT, RIGHT and TAIL chunks are never NULL. */
enum { GENERIC, INTERIOR, LEFT, RIGHT, TAIL };

/* v's lanes one up ([0, v0 .. v6]) and one down ([v1 .. v7, 0]). */
HL_AVX2 static inline __m256 shift_up(__m256 v) {
    const __m256 p = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6));
    return _mm256_blend_ps(p, _mm256_setzero_ps(), 0x01);
}
HL_AVX2 static inline __m256 shift_down(__m256 v) {
    const __m256 p = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0));
    return _mm256_blend_ps(p, _mm256_setzero_ps(), 0x80);
}

/* The three tap vectors of one input row for the chunk at input column q: xr NULL (GENERIC
   only) is a padding row, whose zeros are multiplied too. */
HL_AVX2 static inline __attribute__((always_inline)) void row_taps(
    const float *xr, int64_t q, int s, const chunk_masks *cm, __m256 t[3], const int mode) {
    const bool in = mode == INTERIOR || mode == TAIL || cm->interior;
    if (mode == GENERIC && !xr) {
        t[0] = t[1] = t[2] = _mm256_setzero_ps();
    } else if (s == 1 && mode == LEFT) {   /* q = -1 */
        t[1] = _mm256_loadu_ps(xr + q + 1);
        t[2] = _mm256_loadu_ps(xr + q + 2);
        t[0] = shift_up(t[1]);
    } else if (s == 1 && mode == RIGHT) {   /* q + 9 = W */
        t[0] = _mm256_loadu_ps(xr + q);
        t[1] = _mm256_loadu_ps(xr + q + 1);
        t[2] = shift_down(t[1]);
    } else if (s == 1) {
        t[0] = LOAD8(xr, q, in ? NULL : cm->lanes[0]);
        t[1] = LOAD8(xr, q + 1, in ? NULL : cm->lanes[1]);
        t[2] = LOAD8(xr, q + 2, in ? NULL : cm->lanes[2]);
    } else {
        __m256 a, b, c, d;
        if (mode == LEFT) {   /* q = -1 */
            a = shift_up(_mm256_loadu_ps(xr + q + 1));
            b = _mm256_loadu_ps(xr + q + 8);
            c = _mm256_loadu_ps(xr + q + 2);
            d = _mm256_loadu_ps(xr + q + 10);
        } else if (mode == RIGHT) {   /* q + 17 = W */
            a = _mm256_loadu_ps(xr + q);
            b = _mm256_loadu_ps(xr + q + 8);
            c = _mm256_loadu_ps(xr + q + 2);
            d = shift_down(_mm256_loadu_ps(xr + q + 9));
        } else {
            a = LOAD8(xr, q, in ? NULL : cm->lanes[0]);
            b = LOAD8(xr, q + 8, in ? NULL : cm->lanes[1]);
            c = LOAD8(xr, q + 2, in ? NULL : cm->lanes[2]);
            d = LOAD8(xr, q + 10, in ? NULL : cm->lanes[3]);
        }
        t[0] = evens(a, b), t[1] = odds(a, b), t[2] = evens(c, d);
    }
}
#undef LOAD8

/* start + the kernel row's three taps (w: its 3 weights). */
HL_AVX2 static inline __m256 dot3(__m256 start, const __m256 *w, const __m256 *t) {
    return _mm256_fmadd_ps(w[2], t[2], _mm256_fmadd_ps(w[1], t[1], _mm256_fmadd_ps(
                                                                      w[0], t[0], start)));
}

/* The epilogue and the store of one finished vector of 8 outputs of row oy at ox, act the
   activation (a constant where inlined; HL_CONV_ACT_NONE: none). A partial vector is stored
   whole where its extra lanes fall on outputs of this plane that are stored after it
   (plane_s's order; masked stores are slow on AMD), else lane by lane; the residual is read
   the same way. whole_known: the vector is known to be whole (an interior chunk). */
HL_AVX2 static inline __attribute__((always_inline)) void finish(
    const conv_geom *g, const conv_act8_params ap, const int act, const float *res, float *yp,
    int64_t oy, int64_t ox, __m256i tail, __m256 acc, const bool whole_known) {
    const int64_t ow = g->ow, full = ow / 8 * 8, at = oy * ow + ox;
    const bool whole = whole_known || ox < full || at + 8 <= g->P;
    if (res) acc = _mm256_add_ps(acc, whole ? _mm256_loadu_ps(res + at)
                                            : _mm256_maskload_ps(res + at, tail));
    if (act != HL_CONV_ACT_NONE) acc = hl_conv_act8_with(act, ap, acc);
    if (whole) {
        _mm256_storeu_ps(yp + at, acc);
    } else {
        float t[8];
        _mm256_storeu_ps(t, acc);
        for (int64_t j = 0; j < ow - full; j++) yp[at + j] = t[j];
    }
}

/* The outputs of chunk c of rows oy and (two) oy + 1. Each output sums its kernel rows in
   separate chains, (bias + row 0) + row 1 + row 2, so that the FMAs of a vector do not wait
   on each other; the two rows share their input rows (4 at stride 1, 5 at stride 2).
   mode (a constant where inlined, row_taps): INTERIOR, LEFT and RIGHT chunks are whole
   vectors, their rows all present (the plane's or zero rows), so such a chunk is plain
   loads, FMAs and whole stores; the second row is stored where two says it exists. */
HL_AVX2 static inline __attribute__((always_inline)) void pair_chunk(
    const conv_geom *g, const chunk_masks *cm, const float *const *rows, int64_t c,
    const __m256 (*w)[3], __m256 bv, const conv_act8_params ap, const int act,
    const float *res, float *yp, int64_t oy, bool two, __m256i tail, const int s,
    const int mode) {
    const __m256 zero = _mm256_setzero_ps();
    const int64_t ox = c * 8, q = ox * s - g->pl;
    const bool generic = mode == GENERIC;
    const bool both = !generic && two;   /* both rows stored (GENERIC: see two) */
    const chunk_masks *m = cm + c;   /* read by GENERIC chunks only */
    __m256 t[3], p0, p1, p2, r0 = zero, r1 = zero, r2 = zero;
    row_taps(rows[0], q, s, m, t, mode);
    p0 = dot3(bv, w[0], t);
    row_taps(rows[1], q, s, m, t, mode);
    p1 = dot3(zero, w[1], t);
    if (s == 1) r0 = dot3(bv, w[0], t);
    row_taps(rows[2], q, s, m, t, mode);
    p2 = dot3(zero, w[2], t);
    if (s == 1) r1 = dot3(zero, w[1], t);
    else r0 = dot3(bv, w[0], t);
    if (!generic || two) {   /* the fast modes' rows past the plane are zero rows */
        row_taps(rows[3], q, s, m, t, mode);
        if (s == 1) r2 = dot3(zero, w[2], t);
        else r1 = dot3(zero, w[1], t);
        if (s == 2) {
            row_taps(rows[4], q, s, m, t, mode);
            r2 = dot3(zero, w[2], t);
        }
    }
    __m256 y0 = _mm256_add_ps(_mm256_add_ps(p0, p1), p2);
    __m256 y1 = _mm256_add_ps(_mm256_add_ps(r0, r1), r2);
    if (s == 2) y0 = unswap(y0), y1 = unswap(y1);
    const bool whole = !generic && mode != TAIL;
    finish(g, ap, act, res, yp, oy, ox, tail, y0, whole);
    if (both || two) finish(g, ap, act, res, yp, oy + 1, ox, tail, y1, whole);
}

/* One output plane, y = act(conv + b + res) (res: the residual's plane, or NULL), at stride s
   with activation act (constants where inlined), two output rows at a time. The chunks
   [c0, c1) are interior (fill_masks): for pairs of rows whose input rows all exist they take
   pair_chunk's branch-free path. zero_row (standard_rows, else NULL): every pair of rows
   takes the LEFT, INTERIOR and RIGHT paths (or GENERIC ones for masked last chunks), rows
   outside the input read from zero_row. tail_plain: the last chunk is a TAIL one. */
HL_AVX2 static inline __attribute__((always_inline)) void plane_s(
    const conv_geom *g_call, const chunk_masks *cm, int64_t c0, int64_t c1,
    const float *zero_row, bool tail_plain, const float *xp, const float *wk, float b,
    const conv_epilogue *epi, const float *res, float *yp, const int s, const int act) {
    /* a copy the stores into yp cannot alias, so that its fields stay in registers */
    const conv_geom g_local = *g_call, *g = &g_local;
    const int64_t ow = g->ow, W = g->w, last = (ow - 1) / 8;
    __m256 w[3][3];
    for (int i = 0; i < 9; i++) w[i / 3][i % 3] = _mm256_set1_ps(wk[i]);
    const __m256 bv = _mm256_set1_ps(b);
    const __m256i tail = hl_conv_mask8(ow - ow / 8 * 8);
    const conv_act8_params ap = hl_conv_act8_params(epi);
    if (zero_row) {   /* standard_rows: the first chunk and the interior without masks */
        const bool right = c1 == last && ow % 8 == 0 && W == s * ow;   /* the last too */
        for (int64_t oy = 0; oy < g->oh; oy += 2) {
            const bool two = oy + 1 < g->oh;
            const float *rows[5];
            for (int k = 0; k < 5; k++) {
                const int64_t iy = oy * s - g->pt + k;
                rows[k] = iy >= 0 && iy < g->h ? xp + iy * W : zero_row;
            }
            if (right) {
                pair_chunk(g, cm, rows, last, w, bv, ap, act, res, yp, oy, two, tail, s, RIGHT);
            } else {   /* first, as below: a partial vector may spill onto row oy + 1 */
                int64_t c = last;
                if (tail_plain && c >= c1)
                    pair_chunk(g, cm, rows, c--, w, bv, ap, act, res, yp, oy, two, tail, s, TAIL);
                for (; c >= c1; c--)
                    pair_chunk(g, cm, rows, c, w, bv, ap, act, res, yp, oy, two, tail, s,
                               GENERIC);
            }
            pair_chunk(g, cm, rows, 0, w, bv, ap, act, res, yp, oy, two, tail, s, LEFT);
            for (int64_t c = 1; c < c1; c++)
                pair_chunk(g, cm, rows, c, w, bv, ap, act, res, yp, oy, two, tail, s, INTERIOR);
        }
        return;
    }
    for (int64_t oy = 0; oy < g->oh; oy += 2) {
        const bool two = oy + 1 < g->oh;
        const float *rows[5];
        bool all_rows = two;
        for (int k = 0; k < 5; k++) {
            const int64_t iy = oy * s - g->pt + k;
            const bool used = k < (two ? s + 3 : 3);
            rows[k] = iy >= 0 && iy < g->h && used ? xp + iy * W : NULL;
            if (used && !rows[k]) all_rows = false;
        }
        /* the chunks past the interior first, from the last down: a partial vector of row oy
           stored whole spills onto the start of row oy + 1, which its first chunk (an edge
           chunk, or an interior one stored after it) then overwrites (finish) */
        for (int64_t c = last; c >= c1 && c >= 0; c--)
            pair_chunk(g, cm, rows, c, w, bv, ap, act, res, yp, oy, two, tail, s, GENERIC);
        if (all_rows) {
            for (int64_t c = c0; c < c1; c++)
                pair_chunk(g, cm, rows, c, w, bv, ap, act, res, yp, oy, true, tail, s, INTERIOR);
        } else {
            for (int64_t c = c1 - 1; c >= c0; c--)
                pair_chunk(g, cm, rows, c, w, bv, ap, act, res, yp, oy, two, tail, s, GENERIC);
        }
        for (int64_t c = HL_MIN(c0, c1) - 1; c >= 0; c--)
            pair_chunk(g, cm, rows, c, w, bv, ap, act, res, yp, oy, two, tail, s, GENERIC);
    }
}

/* plane_s for this call's stride and activation, each a constant in its own copy (the
   common activations; the others read theirs at run time). */
HL_AVX2 static void plane(const conv_geom *g, const chunk_masks *cm, int64_t c0, int64_t c1,
                          const float *zero_row, bool tail_plain, const float *xp,
                          const float *wk, float b, const conv_epilogue *epi, const float *res,
                          float *yp) {
    const int act = epi ? epi->act : HL_CONV_ACT_NONE;
#define PLANE_ACT(S)                                                                          \
    switch (act) {                                                                            \
    case HL_CONV_ACT_NONE: plane_s(g, cm, c0, c1, zero_row, tail_plain, xp, wk, b, epi, res, yp, S, HL_CONV_ACT_NONE); break; \
    case HL_CONV_ACT_RELU: plane_s(g, cm, c0, c1, zero_row, tail_plain, xp, wk, b, epi, res, yp, S, HL_CONV_ACT_RELU); break; \
    case HL_CONV_ACT_CLIP: plane_s(g, cm, c0, c1, zero_row, tail_plain, xp, wk, b, epi, res, yp, S, HL_CONV_ACT_CLIP); break; \
    default: plane_s(g, cm, c0, c1, zero_row, tail_plain, xp, wk, b, epi, res, yp, S, act); break;                  \
    }
    if (g->sw == 1) {
        PLANE_ACT(1)
    } else {
        PLANE_ACT(2)
    }
#undef PLANE_ACT
}

/* Whether every row of the call's planes starts with a chunk that reaches one column before
   the input row (padding 1; LEFT above), followed by interior chunks, and then either one
   whole chunk that reaches one column past the row's end (RIGHT: 56x56 and 112x112 planes
   at padding 1, stride 1 or 2) or masked ones (GENERIC: e.g. 28 outputs a row). Rows above
   and below the input are then read from a row of zeros, so that the pairs of rows at the
   borders take the same paths as the others. */
static bool standard_rows(const conv_geom *g, int64_t chunks, int64_t c0, int64_t c1) {
    const int reach = g->sw == 1 ? 10 : 18;   /* fill_masks' */
    return g->pl == 1 && chunks >= 2 && c0 == 1 && c1 >= 2 && reach - 1 <= g->w &&
           (g->ow % 8 == 0 || c1 < chunks);
}

/* What each chunk of planes needs; run_planes runs them. */
typedef struct {
    const conv_geom *g;
    const chunk_masks *cm;
    int64_t c0, c1;       /* the interior chunks */
    const float *zero_row;   /* standard_rows: a row of w zeros (and more); else NULL */
    int64_t tail_reach;      /* a TAIL last chunk's loads reach this far past a row's start
                                (0: no TAIL chunk) */
    const float *x_end;      /* the input's end: a plane whose TAIL loads pass it masks them */
    int64_t done, rest;   /* per sample: the channels the blocked kernel ran, those left */
    const float *x, *w, *bias;
    const conv_epilogue *epi;
    float *y;
} dw_planes;
static void run_planes(int64_t begin, int64_t end, void *arg);

/* A TAIL last chunk's reach past a row's start (0: none): a partial last chunk of a standard
   plane (below) whose outputs read inside the row; its loads reach q + 10 (stride 1) or
   q + 18 (stride 2), past the row. */
static int64_t tail_reach_of(const conv_geom *g) {
    const int64_t s = g->sw, last = (g->ow + 7) / 8 - 1;
    return g->ow % 8 && (g->ow - 1) * s - g->pl + 2 <= g->w - 1
               ? last * 8 * s - g->pl + (s == 1 ? 10 : 18) : 0;
}

/* Floats of the row of zeros that q's standard rows read (at most). */
static int64_t zero_floats(const conv_geom *g) { return HL_MAX(g->w, tail_reach_of(g)); }

/* q's masks (into cm: (ow + 7) / 8 of them), interior run, row of zeros (into zeros:
   zero_floats(g) floats) and TAIL reach for g's planes. */
static void prepare_planes(const conv_geom *g, chunk_masks *cm, float *zeros, dw_planes *q) {
    const int64_t chunks = (g->ow + 7) / 8, tail_reach = tail_reach_of(g);
    fill_masks(g, cm, chunks);
    /* the interior chunks are one run [c0, c1) (a chunk's loads move right with it) */
    int64_t c0 = 0, c1 = 0;
    while (c0 < chunks && !cm[c0].interior) c0++;
    for (c1 = c0; c1 < chunks && cm[c1].interior;) c1++;
    float *zero_row = NULL;
    if (standard_rows(g, chunks, c0, c1)) {
        zero_row = zeros;
        for (int64_t i = 0; i < zero_floats(g); i++) zero_row[i] = 0.0f;
    }
    const bool tail = zero_row && tail_reach > 0 && c1 == chunks - 1;
    q->g = g, q->cm = cm, q->c0 = c0, q->c1 = c1, q->zero_row = zero_row;
    q->tail_reach = tail ? tail_reach : 0;
}

hl_status hl_dw3x3_forward(const conv_geom *g, const float *x, const float *w,
                           const float *bias, const conv_epilogue *epi, float *y) {
    if (g->n * g->c_out == 0 || g->P == 0) return HL_OK;
    /* small planes: the whole groups of 8 channels by the blocked kernel, the rest here */
    int64_t done = 0;
    if (hl_dw3x3_blocked_fits(g)) {
        hl_status st = hl_dw3x3_blocked_forward(g, x, w, bias, epi, y);
        if (st) return st;
        done = g->c_out / 8 * 8;
    }
#if HL_HAVE_AVX512_KERNELS
    if (hl_cpu_avx512()) return hl_dw3x3_rows_avx512(g, done, x, w, bias, epi, y);
#endif
    const int64_t rest = g->c_out - done, planes = g->n * rest, chunks = (g->ow + 7) / 8;
    if (planes == 0) return HL_OK;
    scratch sb;
    chunk_masks *cm;
    hl_status st = scratch_get("conv", &sb, (size_t)chunks * sizeof(chunk_masks) +
                                   (size_t)zero_floats(g) * sizeof(float), (void **)&cm);
    if (st) return st;
    dw_planes q = {.x_end = x + g->n * g->c_in * g->h * g->w, .done = done, .rest = rest,
                   .x = x, .w = w, .bias = bias, .epi = epi, .y = y};
    prepare_planes(g, cm, (float *)(cm + chunks), &q);
    const bool parallel = hl_pool_threads() > 1 && planes > 1 && planes * g->P * 9 > DW_PAR_MIN;
    if (parallel)   /* in lanes, as the AVX-512 kernel (conv_dw3x3_avx512.c) */
        hl_parallel_lanes(planes, run_planes, (void *)&q);
    else
        hl_parallel_for(planes, planes, run_planes, (void *)&q);
    scratch_put(&sb);
    return HL_OK;
}

/* One sample's channels [c0, c1) on the calling thread from planes one after another at xp
   (conv_expand_dw.c): the AVX-512 kernel where the CPU has it, else plane() as
   hl_dw3x3_forward runs it (the same bits either way as the unfused call's). */
hl_status hl_dw3x3_planes(const conv_geom *g, const float *xp, int64_t c0, int64_t c1,
                          const float *w, const float *bias, const conv_epilogue *epi,
                          float *y) {
#if HL_HAVE_AVX512_KERNELS
    if (hl_cpu_avx512()) return hl_dw3x3_planes_avx512(g, xp, c0, c1, w, bias, epi, y);
#endif
    enum { MAX_CHUNKS = 2 * HL_DW3X3_PLANES_MAX_CHUNKS, MAX_ZEROS = 32 * MAX_CHUNKS + 64 };
    chunk_masks cm[MAX_CHUNKS];
    float zeros[MAX_ZEROS];
    if ((g->ow + 7) / 8 > MAX_CHUNKS || zero_floats(g) > MAX_ZEROS)
        return hl_fail(HL_ERR_UNSUPPORTED, "conv: %lld outputs a row, more than the fused "
                       "depthwise kernel takes", (long long)g->ow);
    const int64_t planes = c1 - c0;
    dw_planes q = {.x_end = xp + planes * g->h * g->w, .done = 0, .rest = planes, .x = xp,
                   .w = w + c0 * 9, .bias = bias ? bias + c0 : NULL, .epi = epi,
                   .y = y + c0 * g->P};
    prepare_planes(g, cm, zeros, &q);
    /* run_planes reads plane p of q's one sample at x + p h w and writes y + p P; a conv_geom
       of those planes' count (the masks depend on the plane's size alone) */
    conv_geom gp = *g;
    gp.n = 1, gp.c_in = gp.c_out = gp.groups = planes;
    q.g = &gp;
    run_planes(0, planes, (void *)&q);
    return HL_OK;
}

static void run_planes(int64_t begin, int64_t end, void *arg) {
    const dw_planes *q = arg;
    const conv_geom *g = q->g;
    const float *x = q->x, *w = q->w, *bias = q->bias;
    const conv_epilogue *epi = q->epi;
    float *y = q->y;
    const float *res = epi ? (const float *)epi->res : NULL;
    for (int64_t pl = begin; pl < end; pl++) {
        const int64_t n = pl / q->rest, co = q->done + pl % q->rest, ci = co / g->cg_out;
        const int64_t at = (n * g->c_out + co) * g->P;
        const float *xp = x + (n * g->c_in + ci) * g->h * g->w;
        /* the last row's TAIL loads end inside the input (else masked, GENERIC) */
        const bool tail = q->tail_reach > 0 &&
                          q->tail_reach <= q->x_end - (xp + (g->h - 1) * g->w);
        plane(g, q->cm, q->c0, q->c1, q->zero_row, tail, xp, w + co * 9,
              bias ? bias[co] : 0.0f, epi, res ? res + at : NULL, y + at);
    }
}

#else

hl_status hl_dw3x3_forward(const conv_geom *g, const float *x, const float *w,
                           const float *bias, const conv_epilogue *epi, float *y) {
    (void)g, (void)x, (void)w, (void)bias, (void)epi, (void)y;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv: the AVX2 depthwise kernel is not built here");
}

hl_status hl_dw3x3_planes(const conv_geom *g, const float *xp, int64_t c0, int64_t c1,
                          const float *w, const float *bias, const conv_epilogue *epi,
                          float *y) {
    (void)g, (void)xp, (void)c0, (void)c1, (void)w, (void)bias, (void)epi, (void)y;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv: the AVX2 depthwise kernel is not built here");
}

#endif
