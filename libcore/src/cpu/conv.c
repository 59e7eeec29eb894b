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
 * 3x3 stride-1 float32 convolutions with enough channels go to winograd.c instead,
 * depthwise ones (one input channel per group) to a direct loop (conv_impl.h), and stride-1
 * ones with 5x5-class kernels on small planes to conv_direct.c.
 */
#include <cblas.h>

#include "../core.h"
#include <math.h>
#include <stdlib.h>

#include "conv.h"
#include "out_range.h"

/* The geometry of a call record (layout in api/conv.c) whose output has shape yshape. */
static void geom_of(const hl_call *c, const hl_tensor *x, const int64_t *yshape,
                    const int64_t *wshape, conv_geom *g) {
    g->n = x->shape[0];
    g->c_in = x->shape[1];
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->c_out = yshape[1];
    g->oh = yshape[2];
    g->ow = yshape[3];
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

static void geom_from(const hl_call *c, const hl_tensor *x, const hl_tensor *y,
                      const int64_t *wshape, conv_geom *g) {
    geom_of(c, x, y->shape, wshape, g);
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

/* ---- a pointwise expansion and its depthwise layer as one call (plan/fuse.c) ---- */

/* The depthwise layer's geometry for expanded tensor t's shape (n, c, h, w) and output
   (oh, ow), from the fused record's HL_CONV_DW fields (core.h). */
static void dw_geom(const int64_t *t_shape, const hl_tensor *y, const hl_call *c, conv_geom *g) {
    *g = (conv_geom){.n = t_shape[0], .c_in = t_shape[1], .h = t_shape[2], .w = t_shape[3],
                     .c_out = t_shape[1], .oh = y->shape[2], .ow = y->shape[3], .kh = 3,
                     .kw = 3, .groups = t_shape[1], .cg_in = 1, .cg_out = 1,
                     .sh = c->i[HL_CONV_DW + 1], .sw = c->i[HL_CONV_DW + 1], .dh = 1, .dw = 1,
                     .pt = c->i[HL_CONV_DW + 2], .pl = c->i[HL_CONV_DW + 3], .K = 9};
    g->P = g->oh * g->ow;
}

bool hl_cpu_expand_dw_fusible(const hl_call *c, const hl_call *d) {
    if (c->op != HL_OP_CONV_FUSED || c->in_many || d->in_many || c->n_out != 1 ||
        d->n_out != 1 || c->i[HL_CONV_DW] || c->i[11] || c->i[12] != 1 + HL_CONV_PACK_PANELS ||
        c->n_in != 3 + (c->i[10] != 0))
        return false;
    const hl_tensor *x = c->in[0], *w = c->in[1], *t = c->out[0];
    if (d->in[0] != t || x->dtype != HL_F32 || t->dtype != HL_F32 || x->ndim != 4) return false;
    bool bias;
    if (d->op == HL_OP_CONV) {
        bias = d->n_in == 3;
        if (d->n_in != 2 && !bias) return false;
    } else if (d->op == HL_OP_CONV_FUSED) {
        bias = d->i[10] != 0;
        if (d->i[HL_CONV_DW] || d->i[11] || d->i[12] || d->n_in != 2 + bias) return false;
    } else {
        return false;
    }
    const hl_tensor *w2 = d->in[1], *y = d->out[0];
    if (y->dtype != HL_F32 || w2->dtype != HL_F32 || w2->ndim != 4 || y->ndim != 4 ||
        d->i[0] != t->shape[1] || d->i[5] != d->i[7] || d->i[6] != d->i[8])
        return false;
    conv_geom g1, g2;
    geom_from(c, x, t, w->shape, &g1);
    geom_from(d, t, y, w2->shape, &g2);
    return hl_conv_expand_dw_fits(&g1, &g2);
}

static hl_status expand_dw(const hl_call *c) {
    const hl_tensor *x = c->in[0], *w = c->in[1], *b1 = NULL, *b2 = NULL;
    int k = 2;
    if (c->i[10]) b1 = c->in[k++];
    const hl_tensor *packed = c->in[k++], *w2 = c->in[k++];
    if (c->i[HL_CONV_DW + 5]) b2 = c->in[k++];
    hl_tensor *y = c->out[0];
    /* the expanded tensor's shape: the record's attributes up to i[12] are the expansion's */
    const int64_t t_shape[4] = {x->shape[0], w->shape[0], x->shape[2], x->shape[3]};
    conv_geom g1, g2;
    geom_of(c, x, t_shape, w->shape, &g1);
    dw_geom(t_shape, y, c, &g2);
    const conv_epilogue e1 = {(int)c->i[9], c->f[0], c->f[1], NULL};
    const conv_epilogue e2 = {(int)c->i[HL_CONV_DW + 4], c->f[2], c->f[3], NULL};
    return hl_conv_expand_dw_forward(
        &g1, (const float *)hl_ptr(x), (const float *)hl_ptr(packed),
        b1 ? (const float *)hl_ptr(b1) : NULL, conv_epilogue_active(&e1) ? &e1 : NULL, &g2,
        (const float *)hl_ptr(w2), b2 ? (const float *)hl_ptr(b2) : NULL,
        conv_epilogue_active(&e2) ? &e2 : NULL, (float *)hl_ptr(y));
}

/* conv and conv_fused (whose record says which optional inputs it has, api/conv.c). */
hl_status hl_cpu_conv(const hl_call *c) {
    if (c->op == HL_OP_CONV_FUSED && c->i[HL_CONV_DW]) return expand_dw(c);
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
    if (x->dtype == HL_F32 && hl_conv_direct_fits(&g, e))
        return hl_conv_direct_forward(&g, (const float *)hl_ptr(x), (const float *)hl_ptr(w),
                                      b ? (const float *)hl_ptr(b) : NULL, e,
                                      (float *)hl_ptr(y));
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
    if (dy->dtype == HL_F32 && hl_conv_direct_grad_input_fits(&g))
        return hl_conv_direct_grad_input(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(w),
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
    if (dy->dtype == HL_F32 && hl_conv_direct_grad_weight_fits(&g))
        return hl_conv_direct_grad_weight(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(x),
                                          (float *)hl_ptr(dw));
    if (dy->dtype == HL_F64)
        return conv_grad_weight_f64(&g, (const double *)hl_ptr(dy), (const double *)hl_ptr(x),
                                    (double *)hl_ptr(dw));
    return conv_grad_weight_f32(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(x),
                                (float *)hl_ptr(dw));
}
