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
 * (ky / 2) * Wh + kx / 2 in: the packed product (conv_packed.c) gathers its column rows where
 * they lie (b_rows: each tap's start, b_cols: output p = oy * ow + ox at oy * Wh + ox), one
 * copy of the input (a quarter per phase) instead of kh * kw, and writes y in place with the
 * bias, the residual and the activation in its registers. (A first version multiplied all
 * oh x Wh positions, the (kw - 1) / 2 past each row's ow too, into a buffer that a last pass
 * copied into y: 7% of the stem's time.) Padding is zeros that are multiplied, as ONNX and
 * im2col define it; the sums are the packed product's.
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
    const float *x;
    float *split;
} phase_call;

/* Planes [p0, p1) (sample x input channel) split into their phases. */
static void split_planes(int64_t p0, int64_t p1, void *arg) {
    const phase_call *q = arg;
    for (int64_t sc = p0; sc < p1; sc++)
        split_phases(q->g, q->ph, q->x + sc * q->g->h * q->g->w, q->split + sc * 4 * q->ph->plane);
}

hl_status hl_conv_phases_forward(const conv_geom *g, const float *x, const float *packed,
                                 const float *bias, const conv_epilogue *epi, float *y) {
    const phases ph = phases_of(g);
    const int64_t P = g->P, CI = g->c_in, CO = g->c_out, K = g->K;
    const int64_t per_sample = CI * 4 * ph.plane;
    scratch s;
    int64_t *rows;   /* then the columns' offsets, then the phases */
    hl_status st = scratch_get("conv", &s, (size_t)(K + P) * sizeof(int64_t) +
                                               (size_t)(g->n * per_sample) * sizeof(float),
                               (void **)&rows);
    if (st) return st;
    int64_t *cols = rows + K;
    float *split = (float *)(cols + P);
    for (int64_t k = 0; k < K; k++) {
        const int64_t c = k / (g->kh * g->kw), ky = k / g->kw % g->kh, kx = k % g->kw;
        rows[k] = (c * 4 + (ky & 1) * 2 + (kx & 1)) * ph.plane + (ky >> 1) * ph.wh + (kx >> 1);
    }
    for (int64_t p = 0; p < P; p++) cols[p] = p / g->ow * ph.wh + p % g->ow;
    const phase_call q = {g, &ph, x, split};
    const int64_t planes_in = g->n * CI;
    hl_parallel_for(planes_in, planes_in * 4 * ph.plane > PAR_MIN ? 1 : planes_in,
                    split_planes, (void *)&q);
    const conv_packed_problem pr = {
        .m = CO, .n = P, .k = K, .count = g->n, .a = packed, .b = split, .b_step = per_sample,
        .c = y, .ldc = P, .c_step = CO * P, .bias = bias, .res = epi ? epi->res : NULL,
        .epi = epi, .b_rows = rows, .b_cols = cols};
    st = hl_conv_packed_product(&pr);
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
