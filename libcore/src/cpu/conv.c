/*
 * conv.c - CPU kernels of the convolution family, by im2col and OpenBLAS.
 *
 * The record layout is described in api/conv.c: 4-D contiguous tensors (1-D problems have
 * H = 1) and the attributes in i[0..8]. The work goes by tiles (several whole samples, or a
 * band of output rows of one sample; see plan_tiles) and, within a tile, by group:
 *   forward      cols = im2col(x)  (K rows = C_in/g * kh * kw, one column per output position)
 *                y_g = W_g (C_out/g x K) @ cols, on top of the bias
 *   grad_weight  dW_g^T += cols @ dY_g^T  (accumulated transposed, then transposed once)
 *   grad_input   cols = W_g^T @ dY_g, then col2im adds the columns back into dx planes
 * With one sample per tile the products read dy and write y in place; tiles of several
 * samples go through a (C_out/g x positions) buffer (scatter, gather). A 1x1 kernel with
 * stride 1 and no padding needs no im2col at all: x's channel-by-position block is already
 * the column matrix. OpenMP loops (im2col, col2im, scatter) and BLAS calls alternate; BLAS is
 * never called from inside a parallel region (and runs on the same OpenMP threads, see
 * blas_threads.c).
 * 3x3 stride-1 float32 convolutions with enough channels go to winograd.c instead, and
 * depthwise ones (one input channel per group) to a direct loop (conv_impl.h).
 */
#include <cblas.h>

#include "../core.h"
#include <math.h>
#include <stdlib.h>

#include "conv.h"
#include "out_range.h"

/* The geometry of a call record (layout in api/conv.c). */
static void geom_from(const hl_call *c, const hl_tensor *x, const hl_tensor *y,
                      const int64_t *wshape, conv_geom *g) {
    g->n = x->shape[0];
    g->c_in = x->shape[1];
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->c_out = y->shape[1];
    g->oh = y->shape[2];
    g->ow = y->shape[3];
    g->kh = wshape[2];
    g->kw = wshape[3];
    g->groups = c->i[0];
    g->cg_in = g->c_in / g->groups;
    g->cg_out = g->c_out / g->groups;
    g->sh = c->i[1];
    g->sw = c->i[2];
    g->dh = c->i[3];
    g->dw = c->i[4];
    g->pt = c->i[5];
    g->pl = c->i[6];
    g->K = g->cg_in * g->kh * g->kw;
    g->P = g->oh * g->ow;
}

/* A 1x1 kernel at stride 1 without padding: the input block is the column matrix. */
static bool is_pointwise(const conv_geom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->pt == 0 && g->pl == 0 &&
           g->oh == g->h && g->ow == g->w;
}

/* Work is cut into tiles whose column buffer stays near a core's L2 cache per thread (so
   that the product reads the columns im2col has just written from cache): several whole
   samples when a sample's columns are small, else a band of output rows of one sample. The
   tiles of a call are made even, as a small last tile makes a slow product. Bands may be
   band_scale times larger: the forward product (a short, wide matrix times the columns)
   splits better over threads when it is long, while col2im wants its columns in cache. */
enum { COL_BUDGET_PER_THREAD = 1 << 20, COL_BUDGET_MAX = 8 << 20 };

typedef struct {
    int64_t samples;   /* samples per tile (more than 1 only with whole samples) */
    int64_t rows;      /* output rows per tile (oh unless samples == 1) */
} tiling;

/* count split into pieces of at most most, as even as can be: the size of the largest. */
static int64_t even_split(int64_t count, int64_t most) {
    if (most < 1) most = 1;
    if (count <= most) return count > 0 ? count : 1;
    int64_t pieces = (count + most - 1) / most;
    return (count + pieces - 1) / pieces;
}

static tiling plan_tiles(const conv_geom *g, size_t esz, int64_t band_scale) {
    int64_t budget = HL_MIN((int64_t)COL_BUDGET_PER_THREAD * hl_get_num_threads(),
                            (int64_t)COL_BUDGET_MAX);
    int64_t per_sample = g->K * g->P * (int64_t)esz;
    tiling t = {1, g->oh};
    if (per_sample <= budget) {
        int64_t most = per_sample > 0 ? budget / per_sample : g->n;
        if (g->P > 0 && most > (INT32_MAX - 1) / g->P) most = (INT32_MAX - 1) / g->P;
        t.samples = even_split(g->n, most);
    } else {
        int64_t per_row = g->K * g->ow * (int64_t)esz;
        t.rows = even_split(g->oh, per_row > 0 ? budget * band_scale / per_row : g->oh);
    }
    return t;
}

#define T float
#define SFX f32
#define CBLAS_GEMM scipy_cblas_sgemm
#include "conv_impl.h"
#undef T
#undef SFX
#undef CBLAS_GEMM

#define T double
#define SFX f64
#define CBLAS_GEMM scipy_cblas_dgemm
#include "conv_impl.h"
#undef T
#undef SFX
#undef CBLAS_GEMM

/* Whether a call with packed weights takes them rather than Winograd (when that fits). */
static bool packed_beats_winograd(const conv_geom *g) {
    const char *env = getenv("HL_CONV_PACKED");   /* 0: never (for comparisons), 1: always */
    if (env && env[0] && !env[1]) return env[0] == '1';
    return !(hl_winograd_fits(g) && hl_winograd_pays_forward(g, false));
}

/* y = conv(x, w) + bias, then the epilogue, by products against packed weights
   (conv_packed.c): x itself is the column matrix of a pointwise convolution, im2col's tiles
   are the others' (each sample's outputs written in place, NCHW, by the product). */
static hl_status conv_forward_packed(const conv_geom *g, const float *x, const float *packed,
                                     const float *bias, const conv_epilogue *e, float *y) {
    const int64_t P = g->P, K = g->K, CO = g->c_out, cg = g->cg_out;
    const int64_t panel_floats = (cg + HL_CONV_PACK_ROWS - 1) / HL_CONV_PACK_ROWS * K *
                                 HL_CONV_PACK_ROWS;
    if (g->n == 0 || CO == 0 || P == 0) return HL_OK;
    const float *res = e ? e->res : NULL;
    conv_packed_problem pr = {.m = cg, .k = K, .bias = NULL, .epi = e, .ldc = P,
                              .c_step = CO * P};
    if (is_pointwise(g)) {
        for (int64_t grp = 0; grp < g->groups; grp++) {
            pr.n = P, pr.count = g->n;
            pr.a = packed + grp * panel_floats;
            pr.b = x + grp * g->cg_in * P, pr.ldb = P, pr.b_step = g->c_in * P;
            pr.c = y + grp * cg * P;
            pr.res = res ? res + grp * cg * P : NULL;
            pr.bias = bias ? bias + grp * cg : NULL;
            hl_conv_packed_product(&pr);
        }
        return HL_OK;
    }
    if (hl_conv_phases_fits(g)) return hl_conv_phases_forward(g, x, packed, bias, e, y);
    if (hl_conv_gather_fits(g)) return hl_conv_gather_forward(g, x, packed, bias, e, y);
    const tiling t = plan_tiles(g, sizeof(float), 2);
    const int64_t col_floats = K * t.samples * t.rows * g->ow;
    scratch sc;
    float *cols;   /* im2col's columns, then the product's work (one block for all tiles) */
    hl_status st = scratch_get("conv", &sc, (size_t)(col_floats + hl_conv_packed_work(
                                   t.rows * g->ow, K)) * sizeof(float), (void **)&cols);
    if (st) return st;
    pr.work = cols + col_floats;
    for (int64_t n0 = 0; n0 < g->n; n0 += t.samples) {
        const int64_t m = HL_MIN(t.samples, g->n - n0);
        for (int64_t oy0 = 0; oy0 < g->oh; oy0 += t.rows) {
            const int64_t r = HL_MIN(t.rows, g->oh - oy0), pt = r * g->ow;
            for (int64_t grp = 0; grp < g->groups; grp++) {
                im2col_f32(g, x, n0, m, oy0, r, grp * g->cg_in, cols);
                const int64_t off = (n0 * CO + grp * cg) * P + oy0 * g->ow;
                pr.n = pt, pr.count = m;
                pr.a = packed + grp * panel_floats;
                pr.b = cols, pr.ldb = m * pt, pr.b_step = pt;
                pr.c = y + off;
                pr.res = res ? res + off : NULL;
                pr.bias = bias ? bias + grp * cg : NULL;
                hl_conv_packed_product(&pr);
            }
        }
    }
    scratch_put(&sc);
    return HL_OK;
}

/* conv and conv_fused (whose record says which optional inputs it has, api/conv.c). */
hl_status hl_cpu_conv(const hl_call *c) {
    const hl_tensor *x = c->in[0], *w = c->in[1], *b = NULL, *packed = NULL;
    conv_epilogue epi = {HL_CONV_ACT_NONE, 0, 0, NULL};
    if (c->op == HL_OP_CONV_FUSED) {
        int k = 2;
        if (c->i[10]) b = c->in[k++];
        if (c->i[11]) epi.res = hl_ptr(c->in[k++]);
        if (c->i[12]) packed = c->in[k++];
        epi.act = (int)c->i[9];
        epi.alpha = c->f[0];
        epi.beta = c->f[1];
    } else if (c->n_in > 2) {
        b = c->in[2];
    }
    const conv_epilogue *e = conv_epilogue_active(&epi) ? &epi : NULL;
    hl_tensor *y = c->out[0];
    conv_geom g;
    geom_from(c, x, y, w->shape, &g);
    if (packed && c->i[12] == 1 + HL_CONV_PACK_WINOGRAD) {
        /* conv_pack checked the weights: NaN where it refused them (packed_layouts.h) */
        const float *U = (const float *)hl_ptr(packed);
        if (x->dtype == HL_F32 && hl_winograd_fits(&g) && hl_winograd_pays_forward(&g, true) &&
            g.c_out * g.c_in > 0 && !isnan(U[0]))
            return hl_winograd_forward_packed(&g, (const float *)hl_ptr(x),
                                              (const float *)hl_ptr(packed),
                                              b ? (const float *)hl_ptr(b) : NULL, e,
                                              (float *)hl_ptr(y));
        packed = NULL;   /* the unpacked paths below (im2col and OpenBLAS) */
    }
    if (packed && c->i[12] == 1 + HL_CONV_PACK_WINOGRAD43) {
        /* F(4x4, 3x3): the caller chose it for this layer's tiles (hl.onnx); NaN where
           conv_pack's precision guard refused the weights */
        const float *U = (const float *)hl_ptr(packed);
        if (x->dtype == HL_F32 && hl_winograd_fits(&g) && !isnan(U[0]))
            return hl_winograd43_forward_packed(&g, (const float *)hl_ptr(x), U,
                                                b ? (const float *)hl_ptr(b) : NULL, e,
                                                (float *)hl_ptr(y));
        packed = NULL;
    }
    if (packed && x->dtype == HL_F32 && hl_conv_stem_fits(&g))   /* RGB stems */
        return hl_conv_stem_forward(&g, (const float *)hl_ptr(x), (const float *)hl_ptr(packed),
                                    b ? (const float *)hl_ptr(b) : NULL, e, (float *)hl_ptr(y));
    if (packed && x->dtype == HL_F32 && !(g.cg_in == 1 && g.groups > 1) &&
        packed_beats_winograd(&g))
        return conv_forward_packed(&g, (const float *)hl_ptr(x), (const float *)hl_ptr(packed),
                                   b ? (const float *)hl_ptr(b) : NULL, e, (float *)hl_ptr(y));
    if (x->dtype == HL_F32 && hl_winograd_fits(&g) && hl_winograd_pays_forward(&g, false) &&
        hl_winograd_weights_ok((const float *)hl_ptr(w), hl_shape_numel(w->ndim, w->shape)))
        return hl_winograd_forward(&g, (const float *)hl_ptr(x), (const float *)hl_ptr(w),
                                   b ? (const float *)hl_ptr(b) : NULL, e, (float *)hl_ptr(y));
    if (x->dtype == HL_F32 && hl_dw3x3_fits(&g))
        return hl_dw3x3_forward(&g, (const float *)hl_ptr(x), (const float *)hl_ptr(w),
                                b ? (const float *)hl_ptr(b) : NULL, e, (float *)hl_ptr(y));
    if (x->dtype == HL_F64)
        return conv_forward_f64(&g, (const double *)hl_ptr(x), (const double *)hl_ptr(w),
                                b ? (const double *)hl_ptr(b) : NULL, e, (double *)hl_ptr(y));
    return conv_forward_f32(&g, (const float *)hl_ptr(x), (const float *)hl_ptr(w),
                            b ? (const float *)hl_ptr(b) : NULL, e, (float *)hl_ptr(y));
}

hl_status hl_cpu_conv_grad_input(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
    hl_tensor *dx = c->out[0];
    conv_geom g;
    geom_from(c, dx, dy, w->shape, &g);
    if (dy->dtype == HL_F32 && hl_winograd_fits(&g) &&
        hl_winograd_weights_ok((const float *)hl_ptr(w), hl_shape_numel(w->ndim, w->shape)))
        return hl_winograd_grad_input(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(w),
                                      b ? (const float *)hl_ptr(b) : NULL,
                                      (float *)hl_ptr(dx));
    if (dy->dtype == HL_F64)
        return conv_grad_input_f64(&g, (const double *)hl_ptr(dy), (const double *)hl_ptr(w),
                                   b ? (const double *)hl_ptr(b) : NULL, (double *)hl_ptr(dx));
    return conv_grad_input_f32(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(w),
                               b ? (const float *)hl_ptr(b) : NULL, (float *)hl_ptr(dx));
}

hl_status hl_cpu_conv_grad_weight(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *x = c->in[1];
    hl_tensor *dw = c->out[0];
    conv_geom g;
    geom_from(c, x, dy, dw->shape, &g);
    if (dy->dtype == HL_F32 && hl_winograd_fits(&g))
        return hl_winograd_grad_weight(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(x),
                                       (float *)hl_ptr(dw));
    if (dy->dtype == HL_F64)
        return conv_grad_weight_f64(&g, (const double *)hl_ptr(dy), (const double *)hl_ptr(x),
                                    (double *)hl_ptr(dw));
    return conv_grad_weight_f32(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(x),
                                (float *)hl_ptr(dw));
}
