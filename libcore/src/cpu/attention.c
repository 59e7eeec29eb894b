/*
 * attention.c - the CPU kernel of attention (api/attention.c): softmax(scale q k^T + mask) v
 * for each (batch, head), the scores never leaving the cache.
 *
 * Work items are (batch, head, block of QBLOCK query rows). A thread packs the head's K (as
 * panels of 16 keys, D rows each: the B of q k^T) and V (panels of 16 columns, Sk rows each)
 * once for all the blocks of that head it runs; then, 6 query rows at a time (the
 * micro-kernel's tile), it packs the rows of q times the scale, computes their 6 x Sk scores
 * with matmul_fused.c's micro-kernel (gemm_tile.h), adds the mask, takes the softmax of each
 * row, packs the probabilities as the A of the second product and multiplies them by V's
 * panels, storing straight into the output rows (the merged-heads layout is only other
 * strides). Per tile the scores are 6 x Sk floats (3 KiB at 128 keys): the unfused graph
 * writes and re-reads B x H x Sq x Sk scores four times (product, scale, mask, softmax).
 *
 * Numerics are softmax.c's: the row maximum is subtracted before exp (fast_math.h's
 * hl_exp_nonpos_f32), so a row whose maximum is -inf or +inf, or that holds a NaN, gives NaN
 * probabilities; nan_to_zero then takes them as 0. Sums are float32 in 8 lanes (Sk terms
 * of at most 1 each).
 */
#include <stdlib.h>

#include "dtypes.h"
#include "fast_math.h"
#include "gemm_tile.h"
#include "parallel.h"

enum { MR = HL_TILE_MR, NR = HL_TILE_NR, QBLOCK = 64, LANES = 8 };

typedef struct {
    int64_t B, H, Sq, Sk, D, Dv;
    const float *q, *k, *v, *mask;  /* mask may be NULL */
    int64_t qs[4], ks[4], vs[4], ms[4], os[4];  /* element strides; the last axis's of q, k,
                                                   v and out is 1 */
    float *out;
    float scale;
    bool nan_to_zero;
} attn;

/* Per-thread buffers: K and V of one head packed, a tile's scores, a tile's packed A. */
typedef struct {
    float *kp, *vp, *scores, *ap, *tmp;
    int64_t skp;  /* Sk rounded up to 16: the scores' row length */
} scratch;

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

/* One row of scores: + mask (elements ms apart, or none), softmax, NaN -> 0 if asked.
   Plain loops over arrays of LANES partial results, which the clones vectorise. */
HL_CLONES static void softmax_row(float *restrict x, const float *restrict m, int64_t ms,
                                  int64_t n, bool nan_to_zero) {
    if (m && ms == 1)
        for (int64_t j = 0; j < n; j++) x[j] += m[j];
    else if (m)
        for (int64_t j = 0; j < n; j++) x[j] += m[j * ms];
    float mm[LANES];
    for (int l = 0; l < LANES; l++) mm[l] = -INFINITY;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) mm[l] = x[j + l] > mm[l] ? x[j + l] : mm[l];
    for (; j < n; j++) mm[0] = x[j] > mm[0] ? x[j] : mm[0];  /* NaNs are skipped here; */
    float mx = mm[0];                                        /* the sum catches them */
    for (int l = 1; l < LANES; l++) mx = mm[l] > mx ? mm[l] : mx;
    for (j = 0; j < n; j++) x[j] = hl_exp_nonpos_f32(x[j] - mx);
    float acc[LANES] = {0};
    for (j = 0; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += x[j + l];
    for (; j < n; j++) acc[0] += x[j];
    float sum = 0;
    for (int l = 0; l < LANES; l++) sum += acc[l];
    const float inv = 1.0f / sum;
    for (j = 0; j < n; j++) x[j] *= inv;
    if (nan_to_zero)
        for (j = 0; j < n; j++) x[j] = x[j] == x[j] ? x[j] : 0.0f;
}

/* Query rows [i0, i0 + R) of head (b, h), R <= MR; the head is packed in s. */
static void tile_rows(const attn *g, int64_t b, int64_t h, int64_t i0, int R, scratch *s) {
    const float *q = g->q + b * g->qs[0] + h * g->qs[1] + i0 * g->qs[2];
    for (int64_t d = 0; d < g->D; d++)  /* q's rows, scaled, as the A of q k^T */
        for (int r = 0; r < MR; r++) s->ap[d * MR + r] = r < R ? g->scale * q[r * g->qs[2] + d] : 0;
    for (int64_t p = 0; p < s->skp / NR; p++)
        hl_gemm_tile_f32(R, g->D, s->ap, s->kp + p * g->D * NR, s->scores + p * NR, s->skp);
    for (int r = 0; r < R; r++) {
        float *row = s->scores + r * s->skp;
        const float *m = g->mask ? g->mask + b * g->ms[0] + h * g->ms[1] + (i0 + r) * g->ms[2]
                                 : NULL;
        softmax_row(row, m, g->ms[3], g->Sk, g->nan_to_zero);
        for (int64_t j = 0; j < g->Sk; j++) s->ap[j * MR + r] = row[j];  /* the A of p v */
    }
    for (int r = R; r < MR; r++)
        for (int64_t j = 0; j < g->Sk; j++) s->ap[j * MR + r] = 0;
    float *o = g->out + b * g->os[0] + h * g->os[1] + i0 * g->os[2];
    for (int64_t p = 0; p * NR < g->Dv; p++) {
        const int64_t j0 = p * NR, nv = HL_MIN(NR, g->Dv - j0);
        const float *panel = s->vp + p * g->Sk * NR;
        if (nv == NR) {
            hl_gemm_tile_f32(R, g->Sk, s->ap, panel, o + j0, g->os[2]);
        } else {  /* the last, narrower panel: through a full-width tile */
            hl_gemm_tile_f32(R, g->Sk, s->ap, panel, s->tmp, NR);
            for (int r = 0; r < R; r++)
                memcpy(o + r * g->os[2] + j0, s->tmp + r * NR, sizeof(float) * (size_t)nv);
        }
    }
}

static bool scratch_alloc(const attn *g, scratch *s) {
    s->skp = (g->Sk + NR - 1) / NR * NR;
    const int64_t dvp = (g->Dv + NR - 1) / NR * NR;
    const size_t kp = (size_t)(s->skp * HL_MAX(g->D, 1)), vp = (size_t)(HL_MAX(g->Sk, 1) * dvp),
                 sc = (size_t)(MR * HL_MAX(s->skp, NR)),
                 ap = (size_t)(MR * HL_MAX(HL_MAX(g->D, g->Sk), 1)), tmp = MR * NR;
    /* one block, each part on a 64-byte boundary */
    const size_t parts[5] = {kp, vp, sc, ap, tmp};
    size_t total = 0;
    for (int i = 0; i < 5; i++) total += (parts[i] + 15) / 16 * 16;
    float *base = aligned_alloc(64, total * sizeof(float));
    if (!base) return false;
    float **dst[5] = {&s->kp, &s->vp, &s->scores, &s->ap, &s->tmp};
    for (int i = 0; i < 5; i++) {
        *dst[i] = base;
        base += (parts[i] + 15) / 16 * 16;
    }
    return true;
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
              .nan_to_zero = c->i[1] != 0};
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
    const int64_t blocks = (Sq + QBLOCK - 1) / QBLOCK, items = g.B * H * blocks;
    const double flops = 2.0 * (double)(g.B * H * Sq) * (double)g.Sk * (double)(g.D + Dv);
    const int threads = flops < 1e6 ? 1 : (int)HL_MIN(hl_max_threads(), items);
    bool failed = false;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        scratch s;
        const bool ok = scratch_alloc(&g, &s);
        if (!ok) failed = true;  /* any thread that sets it sets true */
        int64_t packed = -1;     /* the head (b * H + h) packed in s */
#pragma omp for schedule(static)
        for (int64_t it = 0; it < items; it++) {
            if (!ok) continue;
            const int64_t head = it / blocks, b = head / H, h = head % H;
            if (head != packed) {
                pack_head(&g, g.k + b * g.ks[0] + h * g.ks[1], g.v + b * g.vs[0] + h * g.vs[1],
                          &s);
                packed = head;
            }
            const int64_t i1 = HL_MIN(Sq, (it % blocks + 1) * QBLOCK);
            for (int64_t i = it % blocks * QBLOCK; i < i1; i += MR)
                tile_rows(&g, b, h, i, (int)HL_MIN(MR, i1 - i), &s);
        }
        if (ok) free(s.kp);
    }
    return failed ? hl_fail(HL_ERR_MEMORY, "attention: out of memory for the packed keys and "
                            "values of a head (%lld keys)", (long long)g.Sk)
                  : HL_OK;
}
