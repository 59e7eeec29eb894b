/*
 * pool.c - CPU kernels of the pooling family: max and average pooling and their gradients,
 * direct loops over each (sample, channel) plane, planes split between the thread pool's
 * chunks (so the gradients scatter into a plane without races). The record layout is in api/pool.c.
 */
#include <math.h>

#include "../core.h"
#include "../kernel_scalar.h"
#include "out_range.h"
#include "parallel.h"

typedef struct {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    int count_include_pad;
} pool_geom;

static void geom_from(const hl_call *c, const hl_tensor *x, const hl_tensor *y, pool_geom *g) {
    g->planes = x->shape[0] * x->shape[1];
    g->h = x->shape[2];
    g->w = x->shape[3];
    g->oh = y->shape[2];
    g->ow = y->shape[3];
    g->kh = c->i[0];
    g->kw = c->i[1];
    g->sh = c->i[2];
    g->sw = c->i[3];
    g->dh = c->i[4];
    g->dw = c->i[5];
    g->pt = c->i[6];
    g->pl = c->i[7];
    g->pb = c->i[8];
    g->pr = c->i[9];
    g->count_include_pad = c->i[10] != 0;
}

/* The divisor of the average at one output position: taps inside the padded input
   (count_include_pad) or inside the input. */
static int64_t avg_divisor(const pool_geom *g, int64_t y0, int64_t x0, int64_t ylo, int64_t yhi,
                           int64_t xlo, int64_t xhi) {
    if (!g->count_include_pad) return (yhi - ylo) * (xhi - xlo);
    int64_t a, by, bx;
    hl_tap_range(y0 + g->pt, g->dh, g->h + g->pt + g->pb, g->kh, &a, &by);
    by -= a;
    hl_tap_range(x0 + g->pl, g->dw, g->w + g->pl + g->pr, g->kw, &a, &bx);
    bx -= a;
    return by * bx;
}

/* POOL_TILE: the windows of one row whose maxima pool_impl.h's row_window_max finds at once
   (its buffers are on the stack). */
enum { POOL_PAR_MIN = 16384, POOL_TILE = 256 };
/* Rows up to this long take max pooling's separable loop without indices (pool_impl.h). */
enum { POOL_ROW_MAX = 2048 };

/* 2x2 windows at stride 2, dilation 1, none reaching padding: pool_2x2_impl.h's kernels. */
static bool pool_2x2_inside(const pool_geom *g) {
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->dh == 1 && g->dw == 1 &&
           g->pt == 0 && g->pl == 0 && g->oh > 0 && g->ow > 0 && 2 * g->oh <= g->h &&
           2 * g->ow <= g->w;
}

#define T float
#define SFX f32
#define TI int32_t
#include "pool_impl.h"
#undef T
#undef SFX
#undef TI

#define T double
#define SFX f64
#define TI int64_t
#include "pool_impl.h"
#undef T
#undef SFX
#undef TI

hl_status hl_cpu_pool(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *y = c->out[0];
    int64_t *idx = c->n_out > 1 ? (int64_t *)hl_ptr(c->out[1]) : NULL;
    pool_geom g;
    geom_from(c, x, y, &g);
    bool is_max = c->op == HL_OP_MAX_POOL;
    if (x->dtype == HL_F64) {
        if (is_max) max_pool_f64(&g, (const double *)hl_ptr(x), (double *)hl_ptr(y), idx);
        else avg_pool_f64(&g, (const double *)hl_ptr(x), (double *)hl_ptr(y));
    } else {
        if (is_max) max_pool_f32(&g, (const float *)hl_ptr(x), (float *)hl_ptr(y), idx);
        else avg_pool_f32(&g, (const float *)hl_ptr(x), (float *)hl_ptr(y));
    }
    return HL_OK;
}

/* The least and greatest of max_pool_grad's indices, found on the thread pool in at most
   INDEX_BLOCKS blocks (of at least POOL_PAR_MIN, sized by n alone): each block's extremes into
   its own slot, then combined, so the answer does not depend on the thread count. */
enum { INDEX_BLOCKS = 64 };

typedef struct {
    const void *v;
    bool i64;
    int64_t n, block, *lo, *hi;
} index_range_job;

HL_CLONES
static void index_range_blocks(int64_t b0, int64_t b1, void *arg) {
    const index_range_job *q = arg;
    for (int64_t b = b0; b < b1; b++) {
        const int64_t i0 = b * q->block, i1 = i0 + q->block < q->n ? i0 + q->block : q->n;
        int64_t lo, hi;
        if (q->i64) {
            const int64_t *v = q->v;
            lo = hi = v[i0];
            for (int64_t i = i0; i < i1; i++) {
                lo = v[i] < lo ? v[i] : lo;
                hi = v[i] > hi ? v[i] : hi;
            }
        } else {
            const int32_t *v = q->v;
            lo = hi = v[i0];
            for (int64_t i = i0; i < i1; i++) {
                lo = v[i] < lo ? v[i] : lo;
                hi = v[i] > hi ? v[i] : hi;
            }
        }
        q->lo[b] = lo;
        q->hi[b] = hi;
    }
}

/* Every index must point into its plane (or be -1, a window of padding only). */
static hl_status check_indices(const hl_tensor *t, int64_t plane_size) {
    const int64_t n = hl_tensor_numel(t);
    if (n == 0) return HL_OK;
    int64_t lo_of[INDEX_BLOCKS], hi_of[INDEX_BLOCKS], block = (n + INDEX_BLOCKS - 1) / INDEX_BLOCKS;
    if (block < POOL_PAR_MIN) block = POOL_PAR_MIN;
    const int64_t blocks = (n + block - 1) / block;
    const index_range_job q = {.v = hl_ptr(t), .i64 = t->dtype == HL_I64, .n = n,
                               .block = block, .lo = lo_of, .hi = hi_of};
    hl_parallel_for(blocks, 1, index_range_blocks, (void *)&q);
    int64_t lo = lo_of[0], hi = hi_of[0];
    for (int64_t b = 1; b < blocks; b++) {
        lo = lo_of[b] < lo ? lo_of[b] : lo;
        hi = hi_of[b] > hi ? hi_of[b] : hi;
    }
    if (lo < -1 || hi >= plane_size)
        return hl_fail(HL_ERR_INDEX, "max_pool_grad: index %lld is out of range for input planes "
                       "of %lld elements (valid: 0 to %lld, or -1 for a window of padding only)",
                       (long long)(lo < -1 ? lo : hi), (long long)plane_size,
                       (long long)plane_size - 1);
    return HL_OK;
}

hl_status hl_cpu_pool_grad(const hl_call *c) {
    const hl_tensor *dy = c->in[0];
    hl_tensor *dx = c->out[0];
    pool_geom g;
    geom_from(c, dx, dy, &g);
    if (c->op == HL_OP_MAX_POOL_GRAD && c->i[HL_POOL_GRAD_MODE] == HL_POOL_GRAD_FROM_INPUT) {
        const hl_tensor *x = c->in[1];
        const bool relu = c->i[HL_POOL_GRAD_EPILOGUE] == HL_POOL_GRAD_RELU;   /* fuse_norm.c */
        if (dy->dtype == HL_F64)
            max_pool_grad_from_input_f64(&g, (const double *)hl_ptr(dy),
                                         (const double *)hl_ptr(x), relu, (double *)hl_ptr(dx));
        else
            max_pool_grad_from_input_f32(&g, (const float *)hl_ptr(dy), (const float *)hl_ptr(x),
                                         relu, (float *)hl_ptr(dx));
    } else if (c->op == HL_OP_MAX_POOL_GRAD) {
        const hl_tensor *it = c->in[1];
        hl_status st = check_indices(it, g.h * g.w);
        if (st) return st;
        const void *idx = hl_ptr(it);
        bool i64 = it->dtype == HL_I64;
        if (dy->dtype == HL_F64)
            max_pool_grad_f64(&g, (const double *)hl_ptr(dy), idx, i64, (double *)hl_ptr(dx));
        else
            max_pool_grad_f32(&g, (const float *)hl_ptr(dy), idx, i64, (float *)hl_ptr(dx));
    } else {
        if (dy->dtype == HL_F64)
            avg_pool_grad_f64(&g, (const double *)hl_ptr(dy), (double *)hl_ptr(dx));
        else
            avg_pool_grad_f32(&g, (const float *)hl_ptr(dy), (float *)hl_ptr(dx));
    }
    return HL_OK;
}
