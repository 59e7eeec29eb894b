/*
 * api/pool.c - entry points of the pooling family: pool (max_pool, avg_pool) and pool_grad.
 *
 * Record layout: tensors are 4-D (N, C, H, W) and contiguous (a 1-D problem (N, C, L)
 * arrives as a view with H = 1); output spatial sizes come from the output tensors.
 *   i[0..1] kernel (h, w), i[2..3] stride, i[4..5] dilation, i[6..7] pads at the start
 *   (top, left), i[8..9] pads at the end, i[10] count_include_pad (avg_pool).
 *   max_pool:      in {x}            out {y, indices?}  (indices int64, flat within a plane)
 *   avg_pool:      in {x}            out {y}
 *   max_pool_grad: in {dy, indices}  out {dx}           (indices int32 or int64)
 *   avg_pool_grad: in {dy}           out {dx}
 * Windows follow PyTorch: padding never wins a max; with count_include_pad the average
 * divides by the taps inside the padded input, else by the taps inside the input; with
 * ceil_mode the last window must start inside the input or its leading padding.
 * A max window that covers padding only (possible with dilation) gives -inf and index -1;
 * max_pool_grad skips index -1 and refuses every other index outside the plane.
 */
#include "window.h"


typedef struct {
    int S;
    int64_t k[2], stride[2], dil[2], pb[2], pe[2];   /* 2-D form: [0] H (unit for 1-D), [1] W */
    int ceil_mode, count_include_pad;
} pool_attrs;


/* Kernel (required); stride (NULL: the kernel), pads (NULL: 0), dilation (NULL: 1). */
static hl_status read_attrs(const char *op, int S, const int64_t *kernel, const int64_t *stride,
                            const int64_t *pads, const int64_t *dilation, int ceil_mode,
                            int count_include_pad, pool_attrs *a) {
    a->S = S;
    a->ceil_mode = ceil_mode != 0;
    a->count_include_pad = count_include_pad != 0;
    if (!kernel) return hl_fail(HL_ERR_VALUE, "%s: the kernel size is NULL", op);
    a->k[0] = a->k[1] = 1;
    for (int d = 0; d < S; d++) {
        if (kernel[d] < 1 || kernel[d] >= HL_WINDOW_LIMIT)
            return hl_fail(HL_ERR_VALUE, "%s: kernel size must be positive, got %s", op,
                           hl_window_ints_str(S, kernel));
        a->k[d + 2 - S] = kernel[d];
    }
    hl_window w;
    hl_status st = hl_window_read(op, S, stride, kernel, pads, dilation, &w);
    if (st) return st;
    memcpy(a->stride, w.stride, sizeof a->stride);
    memcpy(a->dil, w.dil, sizeof a->dil);
    memcpy(a->pb, w.pb, sizeof a->pb);
    memcpy(a->pe, w.pe, sizeof a->pe);
    return HL_OK;
}

/* Output spatial sizes for input spatial sizes in[] (S entries). */
static hl_status out_sizes(const char *op, const pool_attrs *a, const int64_t *in,
                           int64_t *out) {
    for (int d = 0; d < a->S; d++) {
        int j = d + 2 - a->S;
        int64_t ext = a->dil[j] * (a->k[j] - 1) + 1, padded;
        if (__builtin_add_overflow(in[d], a->pb[j] + a->pe[j], &padded))
            return hl_fail(HL_ERR_SHAPE, "%s: input size %s too large", op, hl_shape_str(a->S, in));
        if (padded < ext)
            return hl_fail(HL_ERR_SHAPE, "%s: along spatial axis %d the window spans %lld "
                           "(kernel %lld, dilation %lld) but the padded input is only %lld "
                           "(size %lld + pads %lld + %lld): no output", op, d, (long long)ext,
                           (long long)a->k[j], (long long)a->dil[j], (long long)padded,
                           (long long)in[d], (long long)a->pb[j], (long long)a->pe[j]);
        int64_t span = padded - ext, s = a->stride[j];
        int64_t o = span / s + (a->ceil_mode && span % s != 0) + 1;
        /* the last window must start inside the input or the leading padding */
        if (a->ceil_mode && (o - 1) * s >= in[d] + a->pb[j]) o--;
        out[d] = o;
    }
    return HL_OK;
}

static hl_status check_lead(const char *op, int code, const char *role, const hl_tensor *t,
                            int *S) {
    if (t->ndim != 3 && t->ndim != 4)
        return hl_fail(HL_ERR_SHAPE, "%s: expected %s of shape (N, C, L) or (N, C, H, W), got "
                       "%s", op, role, hl_desc(t));
    *S = t->ndim - 2;
    return hl_check_op_dtype(op, code, t->storage->device, role, t);
}

/* Makes a contiguous 4-D version of t (a new reference). */
static hl_status as_4d(const hl_tensor *t, hl_tensor **out) {
    hl_tensor *c = NULL;
    hl_status st = hl_contiguous(t, &c);
    if (st) return st;
    if (c->ndim == 4) {
        *out = c;
        return HL_OK;
    }
    st = hl_view_unsqueeze(c, 2, out);
    hl_tensor_release(c);
    return st;
}

static void fill_ints(hl_call *c, const pool_attrs *a) {
    int64_t v[11] = {a->k[0], a->k[1], a->stride[0], a->stride[1], a->dil[0], a->dil[1],
                     a->pb[0], a->pb[1], a->pe[0], a->pe[1], a->count_include_pad};
    memcpy(c->i, v, sizeof v);
}

static hl_status check_out(const char *op, const hl_tensor *out, const hl_tensor *in) {
    if (!hl_tensor_is_contiguous(out))
        return hl_fail(HL_ERR_VALUE, "%s: the output tensor given (%s) must be contiguous", op,
                       hl_desc(out));
    return hl_check_no_overlap(op, out, in, false);
}

hl_status hl_pool(int op, const hl_tensor *x, const int64_t *kernel, const int64_t *stride,
                  const int64_t *pads, const int64_t *dilation, int ceil_mode,
                  int count_include_pad, hl_tensor **out, hl_tensor **indices) {
    if (op != HL_OP_MAX_POOL && op != HL_OP_AVG_POOL)
        return hl_fail(HL_ERR_VALUE, "pool: op %d (%s) is not max_pool or avg_pool", op,
                       hl_op_str(op));
    const char *name = hl_op_str(op);
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "%s: input or output is NULL", name);
    if (indices && op != HL_OP_MAX_POOL)
        return hl_fail(HL_ERR_VALUE, "%s: only max_pool gives indices; pass NULL", name);
    int S = 2;
    hl_status st = check_lead(name, op, "input", x, &S);
    if (st) return st;
    pool_attrs a;
    if ((st = read_attrs(name, S, kernel, stride, pads, dilation, ceil_mode, count_include_pad,
                         &a)))
        return st;
    int64_t oshape[4] = {x->shape[0], x->shape[1]};
    if ((st = out_sizes(name, &a, x->shape + 2, oshape + 2))) return st;
    hl_device dev = x->storage->device;
    hl_tensor *caller = *out, *caller_idx = indices ? *indices : NULL;
    if ((st = hl_out_prepare(name, out, x->dtype, dev, x->ndim, oshape))) return st;
    st = check_out(name, *out, x);
    bool have_idx = false;
    if (!st && indices) {
        st = hl_out_prepare(name, indices, HL_I64, dev, x->ndim, oshape);
        have_idx = !st;
        if (!st) st = check_out(name, *indices, x);
        if (!st) st = hl_check_no_overlap(name, *indices, *out, false);
    }
    hl_tensor *x4 = NULL, *y4 = NULL, *i4 = NULL;
    if (!st) st = as_4d(x, &x4);
    if (!st) st = as_4d(*out, &y4);
    if (!st && have_idx) st = as_4d(*indices, &i4);
    if (!st) {
        hl_call c = {.op = op, .n_in = 1, .n_out = have_idx ? 2 : 1, .in = {x4},
                     .out = {y4, i4}};
        fill_ints(&c, &a);
        st = hl_submit(&c);
    }
    hl_tensor_release(x4);
    hl_tensor_release(y4);
    hl_tensor_release(i4);
    if (st) {
        if (have_idx) hl_out_abandon(indices, caller_idx);
        hl_out_abandon(out, caller);
    }
    return st;
}

hl_status hl_pool_grad(int op, const hl_tensor *dy, const hl_tensor *indices,
                       const int64_t *x_shape, const int64_t *kernel, const int64_t *stride,
                       const int64_t *pads, const int64_t *dilation, int ceil_mode,
                       int count_include_pad, hl_tensor **out) {
    if (op != HL_OP_MAX_POOL && op != HL_OP_AVG_POOL)
        return hl_fail(HL_ERR_VALUE, "pool_grad: op %d (%s) is not max_pool or avg_pool", op,
                       hl_op_str(op));
    bool is_max = op == HL_OP_MAX_POOL;
    const char *name = is_max ? "max_pool_grad" : "avg_pool_grad";
    if (!dy || !x_shape || !out)
        return hl_fail(HL_ERR_VALUE, "%s: gradient, input shape or output is NULL", name);
    int S = 2;
    hl_status st = check_lead(name, is_max ? HL_OP_MAX_POOL_GRAD : HL_OP_AVG_POOL_GRAD,
                              "gradient", dy, &S);
    if (st) return st;
    hl_device dev = dy->storage->device;
    if (is_max) {
        if (!indices)
            return hl_fail(HL_ERR_VALUE, "%s: needs the indices max_pool gave", name);
        if ((st = hl_check_device(name, dev, indices))) return st;
        if (indices->dtype != HL_I64 && indices->dtype != HL_I32)
            return hl_fail(HL_ERR_DTYPE, "%s: indices must be int64 or int32, got %s", name,
                           hl_desc(indices));
        if (!hl_same_shape(indices, dy))
            return hl_fail(HL_ERR_SHAPE, "%s: indices %s and gradient %s must have one shape",
                           name, hl_desc(indices), hl_desc(dy));
    }
    for (int d = 0; d < S + 2; d++)
        if (x_shape[d] < 0)
            return hl_fail(HL_ERR_VALUE, "%s: negative size in input shape %s", name,
                           hl_shape_str(S + 2, x_shape));
    if (x_shape[0] != dy->shape[0] || x_shape[1] != dy->shape[1])
        return hl_fail(HL_ERR_SHAPE, "%s: input shape %s and gradient %s differ in batch or "
                       "channels", name, hl_shape_str(S + 2, x_shape), hl_desc(dy));
    pool_attrs a;
    if ((st = read_attrs(name, S, kernel, stride, pads, dilation, ceil_mode, count_include_pad,
                         &a)))
        return st;
    int64_t osz[2];
    if ((st = out_sizes(name, &a, x_shape + 2, osz))) return st;
    for (int d = 0; d < S; d++)
        if (osz[d] != dy->shape[2 + d])
            return hl_fail(HL_ERR_SHAPE, "%s: pooling input %s gives spatial size %s, but the "
                           "gradient is %s", name, hl_shape_str(S + 2, x_shape),
                           hl_shape_str(S, osz), hl_desc(dy));
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare(name, out, dy->dtype, dev, S + 2, x_shape))) return st;
    st = check_out(name, *out, dy);
    if (!st && is_max) st = hl_check_no_overlap(name, *out, indices, false);
    hl_tensor *d4 = NULL, *i4 = NULL, *o4 = NULL;
    if (!st) st = as_4d(dy, &d4);
    if (!st && is_max) st = as_4d(indices, &i4);
    if (!st) st = as_4d(*out, &o4);
    if (!st) {
        hl_call c = {.op = is_max ? HL_OP_MAX_POOL_GRAD : HL_OP_AVG_POOL_GRAD,
                     .n_in = is_max ? 2 : 1, .n_out = 1, .in = {d4, i4}, .out = {o4}};
        fill_ints(&c, &a);
        st = hl_submit(&c);
    }
    hl_tensor_release(d4);
    hl_tensor_release(i4);
    hl_tensor_release(o4);
    if (st) hl_out_abandon(out, caller);
    return st;
}
