/*
 * conv_phases.c - stride-2 float32 convolutions (ResNet's 7x7 stem and its strided 3x3
 * layers) against packed panels (conv_pack), without im2col.
 *
 * im2col writes kh * kw copies of the input (9x for a 3x3 layer, 49 / 4 for the 7x7 stem)
 * for the product to read back. At stride 2 the input splits instead into four phases, the
 * zero-padded input's even and odd rows crossed with its even and odd columns, each a plane of
 * Hh x Wh values: phase (ry, rx)[i][j] = x_padded[2 i + ry][2 j + rx]. Output (oy, ox) at tap
 * (ky, kx) reads phase (ky % 2, kx % 2) at [oy + ky / 2][ox + kx / 2], so over the positions
 * p = oy * Wh + ox the column row of a tap is one contiguous run of its phase, starting
 * (ky / 2) * Wh + kx / 2 in: the packed product (conv_packed.c) reads its column rows where
 * they lie (b_rows), one copy of the input (a quarter per phase) instead of kh * kw.
 * With Wh = ow + (kw - 1) / 2 every row of outputs is followed by (kw - 1) / 2 positions that
 * are no output (they read into the next phase row); the product writes them to a buffer of
 * oh x Wh positions per channel, and a last pass copies the ow real ones of each row into y.
 * The bias and the activation are applied in the product's registers, a residual (shaped like
 * y) in that copy. Padding is zeros that are multiplied, as ONNX and im2col define it; the sums
 * are the packed product's.
 *
 * A strided 1x1 layer without padding (ResNet's downsample: stride 2, a quarter of the positions
 * read) needs no phases: its column row k is channel k's plane read at (oy * sh, ox * sw), which
 * the product gathers straight into its packed block (b_rows: each channel's plane, b_cols: each
 * output's offset in it) and writes y in place (hl_conv_gather_forward), where im2col would first
 * copy the quarter plane of every channel for the product to copy again.
 */
#include <math.h>

#include "../core.h"
#include "conv.h"
#include "parallel.h"
#include "thread_pool.h"

#define T float
#define SFX f32
#include "conv_epilogue_impl.h"   /* conv_epilogue_run_f32 */
#undef T
#undef SFX

/* Work below this many values runs on one thread. */
enum { PAR_MIN = 32768 };

bool hl_conv_phases_fits(const conv_geom *g) {
    return g->groups == 1 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 &&
           g->kh * g->kw > 1 && g->oh > 0 && g->ow > 0;
}

typedef struct {
    int64_t hh, wh, plane;   /* a phase's rows and columns, and its values */
} phases;

static phases phases_of(const conv_geom *g) {
    /* one row more than the outputs read: the positions past each row's ow read on */
    phases p = {g->oh + (g->kh - 1) / 2 + 1, g->ow + (g->kw - 1) / 2, 0};
    p.plane = p.hh * p.wh;
    return p;
}

/* The four phases of channel plane x (h x w) into dst (4 planes, (ry, rx) order). */
HL_CLONES
static void split_phases(const conv_geom *g, const phases *ph, const float *restrict x,
                         float *restrict dst) {
    for (int ry = 0; ry < 2; ry++)
        for (int64_t i = 0; i < ph->hh; i++) {
            const int64_t iy = 2 * i + ry - g->pt;
            float *restrict ev = dst + (2 * ry) * ph->plane + i * ph->wh;
            float *restrict od = ev + ph->plane;
            if (iy < 0 || iy >= g->h) {
                for (int64_t j = 0; j < ph->wh; j++) ev[j] = od[j] = 0;
                continue;
            }
            const float *restrict row = x + iy * g->w;
            for (int64_t j = 0; j < ph->wh; j++) {
                const int64_t ix = 2 * j - g->pl;
                ev[j] = ix >= 0 && ix < g->w ? row[ix] : 0;
                od[j] = ix + 1 >= 0 && ix + 1 < g->w ? row[ix + 1] : 0;
            }
        }
}

/* What the chunks of one call share. */
typedef struct {
    const conv_geom *g;
    const phases *ph;
    const float *x, *out, *res;
    const conv_epilogue *epi;
    float *split, *y;
} phase_call;

/* Planes [p0, p1) (sample x input channel) split into their phases. */
static void split_planes(int64_t p0, int64_t p1, void *arg) {
    const phase_call *q = arg;
    for (int64_t sc = p0; sc < p1; sc++)
        split_phases(q->g, q->ph, q->x + sc * q->g->h * q->g->w, q->split + sc * 4 * q->ph->plane);
}

/* Output planes [p0, p1) (sample x output channel): each row's ow real positions into y, then
   the residual and the activation when the product could not apply them. */
static void compact_planes(int64_t p0, int64_t p1, void *arg) {
    const phase_call *q = arg;
    const conv_geom *g = q->g;
    const int64_t N = g->oh * q->ph->wh;
    for (int64_t sc = p0; sc < p1; sc++)
        for (int64_t oy = 0; oy < g->oh; oy++) {
            float *d = q->y + (sc * g->oh + oy) * g->ow;
            const float *src = q->out + sc * N + oy * q->ph->wh;
            for (int64_t ox = 0; ox < g->ow; ox++) d[ox] = src[ox];
            if (q->res)
                conv_epilogue_run_f32(q->epi, d, q->res + (sc * g->oh + oy) * g->ow, g->ow);
        }
}

hl_status hl_conv_phases_forward(const conv_geom *g, const float *x, const float *packed,
                                 const float *bias, const conv_epilogue *epi, float *y) {
    const phases ph = phases_of(g);
    const int64_t N = g->oh * ph.wh, CI = g->c_in, CO = g->c_out, K = g->K;
    const int64_t per_sample = CI * 4 * ph.plane;
    const float *res = epi ? (const float *)epi->res : NULL;
    scratch s;
    int64_t *rows;   /* then the phases, then the product's output */
    hl_status st = scratch_get("conv", &s, (size_t)K * sizeof(int64_t) +
                                               (size_t)(g->n * (per_sample + CO * N)) *
                                                   sizeof(float),
                               (void **)&rows);
    if (st) return st;
    float *split = (float *)(rows + K), *out = split + g->n * per_sample;
    for (int64_t k = 0; k < K; k++) {
        const int64_t c = k / (g->kh * g->kw), ky = k / g->kw % g->kh, kx = k % g->kw;
        rows[k] = (c * 4 + (ky & 1) * 2 + (kx & 1)) * ph.plane + (ky >> 1) * ph.wh + (kx >> 1);
    }
    const phase_call q = {g, &ph, x, out, res, epi, split, y};
    const int64_t planes_in = g->n * CI, planes_out = g->n * CO;
    hl_parallel_for(planes_in, planes_in * 4 * ph.plane > PAR_MIN ? 1 : planes_in,
                    split_planes, (void *)&q);
    /* the activation in the product's registers unless a residual must come first */
    const conv_epilogue act_only = {epi ? epi->act : HL_CONV_ACT_NONE, epi ? epi->alpha : 0,
                                    epi ? epi->beta : 0, NULL};
    const conv_packed_problem pr = {
        .m = CO, .n = N, .k = K, .count = g->n, .a = packed, .b = split, .b_step = per_sample,
        .c = out, .ldc = N, .c_step = CO * N, .bias = bias,
        .epi = epi && !res && conv_epilogue_active(&act_only) ? &act_only : NULL,
        .b_rows = rows};
    st = hl_conv_packed_product(&pr);
    if (!st)
        hl_parallel_for(planes_out, planes_out * N > PAR_MIN ? 1 : planes_out, compact_planes,
                        (void *)&q);
    scratch_put(&s);
    return st;
}

bool hl_conv_gather_fits(const conv_geom *g) {
    return g->groups == 1 && g->kh == 1 && g->kw == 1 && g->pt == 0 && g->pl == 0 &&
           g->oh > 0 && g->ow > 0 && (g->oh - 1) * g->sh < g->h && (g->ow - 1) * g->sw < g->w;
}

hl_status hl_conv_gather_forward(const conv_geom *g, const float *x, const float *packed,
                                 const float *bias, const conv_epilogue *epi, float *y) {
    const int64_t P = g->P, CI = g->c_in, CO = g->c_out, HW = g->h * g->w;
    scratch s;
    int64_t *rows;   /* then the columns' offsets */
    hl_status st = scratch_get("conv", &s, (size_t)(CI + P) * sizeof(int64_t), (void **)&rows);
    if (st) return st;
    int64_t *cols = rows + CI;
    for (int64_t c = 0; c < CI; c++) rows[c] = c * HW;
    for (int64_t p = 0; p < P; p++) cols[p] = p / g->ow * g->sh * g->w + p % g->ow * g->sw;
    const conv_packed_problem pr = {
        .m = CO, .n = P, .k = CI, .count = g->n, .a = packed, .b = x, .b_step = CI * HW,
        .c = y, .ldc = P, .c_step = CO * P, .bias = bias, .res = epi ? epi->res : NULL,
        .epi = epi, .b_rows = rows, .b_cols = cols};
    st = hl_conv_packed_product(&pr);
    scratch_put(&s);
    return st;
}
