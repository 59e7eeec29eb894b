/*
 * api/layout.c - entry points of the shape-changing copies: concat, pad, tile. They move
 * elements without arithmetic, so every dtype is accepted (float16 and bfloat16 included).
 *
 * Call records:
 *   concat: in = the n parts (in_many when n > HL_CALL_MAX_IN), out[0]; i[0] = axis.
 *   pad:    in[0] = x, out[0]; i[0] = mode (0 constant, 1 reflect, 2 edge),
 *           i[1 .. 2*ndim] = pads (begins then ends); f[0] = the constant value.
 *   tile:   in[0] = x, out[0]; i[0 .. ndim-1] = repeats.
 */
#include "../core.h"

hl_status hl_concat(int n, hl_tensor *const *xs, int64_t axis, hl_tensor **out) {
    if (n < 1) return hl_fail(HL_ERR_VALUE, "concat: needs at least one tensor, got %d", n);
    if (!xs || !out)
        return hl_fail(HL_ERR_VALUE, "concat: the tensor array or output pointer is NULL");
    for (int k = 0; k < n; k++)
        if (!xs[k]) return hl_fail(HL_ERR_VALUE, "concat: tensor %d of %d is NULL", k, n);
    const hl_tensor *x0 = xs[0];
    hl_device dev = x0->storage->device;
    if (x0->ndim == 0)
        return hl_fail(HL_ERR_SHAPE, "concat: zero-dimensional tensors cannot be concatenated "
                       "(got %s); use stack", hl_desc(x0));
    hl_status st = hl_norm_axis("concat", &axis, x0->ndim);
    if (st) return st;
    int64_t shape[HL_MAX_DIMS];
    memcpy(shape, x0->shape, sizeof(int64_t) * x0->ndim);
    shape[axis] = 0;
    for (int k = 0; k < n; k++) {
        const hl_tensor *x = xs[k];
        if ((st = hl_check_device("concat", dev, x))) return st;
        if (x->dtype != x0->dtype)
            return hl_fail(HL_ERR_DTYPE, "concat: tensor %d is %s but tensor 0 is %s; cast them "
                           "to one dtype first", k, hl_desc(x), hl_desc(x0));
        if (x->ndim != x0->ndim)
            return hl_fail(HL_ERR_SHAPE, "concat: tensor %d is %s but tensor 0 is %s; every "
                           "tensor needs the same number of dimensions", k, hl_desc(x),
                           hl_desc(x0));
        for (int d = 0; d < x->ndim; d++)
            if (d != axis && x->shape[d] != x0->shape[d])
                return hl_fail(HL_ERR_SHAPE, "concat: along axis %lld, tensor %d is %s but "
                               "tensor 0 is %s; sizes must match on every other axis "
                               "(axis %d differs)", (long long)axis, k, hl_desc(x), hl_desc(x0), d);
        if (__builtin_add_overflow(shape[axis], x->shape[axis], &shape[axis]))
            return hl_fail(HL_ERR_MEMORY, "concat: the result is too large along axis %lld",
                           (long long)axis);
    }
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare("concat", out, x0->dtype, dev, x0->ndim, shape))) return st;
    for (int k = 0; k < n && !st; k++) st = hl_check_no_overlap("concat", *out, xs[k], false);
    if (!st) {
        hl_call c = {.op = HL_OP_CONCAT, .n_in = n, .n_out = 1, .out = {*out}, .i = {axis}};
        if (n > HL_CALL_MAX_IN) c.in_many = (const hl_tensor **)xs;
        else
            for (int k = 0; k < n; k++) c.in[k] = xs[k];
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_pad(const hl_tensor *x, const int64_t *pads, int mode, double value,
                 hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "pad: tensor or output pointer is NULL");
    if (mode < 0 || mode > 2)
        return hl_fail(HL_ERR_VALUE, "pad: mode %d is not 0 (constant), 1 (reflect) or 2 (edge)",
                       mode);
    int nd = x->ndim;
    if (nd > 0 && !pads) return hl_fail(HL_ERR_VALUE, "pad: pads is NULL for %s", hl_desc(x));
    int64_t shape[HL_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int64_t n = x->shape[d], b = pads[d], e = pads[nd + d];
        /* Negative pads crop first; reflect and edge then pad from what is left. */
        int64_t crop_b = b < 0 ? b : 0, crop_e = e < 0 ? e : 0, kept = n;
        if (__builtin_add_overflow(kept, crop_b, &kept) ||
            __builtin_add_overflow(kept, crop_e, &kept) || kept < 0)
            return hl_fail(HL_ERR_SHAPE, "pad: pads (%lld, %lld) on axis %d crop more than the "
                           "%lld elements of %s", (long long)b, (long long)e, d, (long long)n,
                           hl_desc(x));
        int64_t grow_b = b > 0 ? b : 0, grow_e = e > 0 ? e : 0;
        if (mode == 1 && (grow_b >= kept || grow_e >= kept) && (grow_b || grow_e))
            return hl_fail(HL_ERR_VALUE, "pad: reflect padding (%lld, %lld) on axis %d needs "
                           "pads smaller than the axis size %lld (after cropping) of %s",
                           (long long)b, (long long)e, d, (long long)kept, hl_desc(x));
        if (mode == 2 && kept == 0 && (grow_b || grow_e))
            return hl_fail(HL_ERR_VALUE, "pad: edge padding cannot extend empty axis %d of %s",
                           d, hl_desc(x));
        if (__builtin_add_overflow(kept, grow_b, &shape[d]) ||
            __builtin_add_overflow(shape[d], grow_e, &shape[d]))
            return hl_fail(HL_ERR_MEMORY, "pad: pads (%lld, %lld) on axis %d make the result too "
                           "large", (long long)b, (long long)e, d);
    }
    hl_device dev = x->storage->device;
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare("pad", out, x->dtype, dev, nd, shape);
    if (st) return st;
    st = hl_check_no_overlap("pad", *out, x, false);
    if (!st) {
        hl_call c = {.op = HL_OP_PAD, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out},
                     .i = {mode}, .f = {value}};
        for (int d = 0; d < 2 * nd; d++) c.i[1 + d] = pads[d];
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_tile(const hl_tensor *x, const int64_t *repeats, hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "tile: tensor or output pointer is NULL");
    int nd = x->ndim;
    if (nd > 0 && !repeats)
        return hl_fail(HL_ERR_VALUE, "tile: repeats is NULL for %s", hl_desc(x));
    int64_t shape[HL_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        if (repeats[d] < 0)
            return hl_fail(HL_ERR_VALUE, "tile: negative repeat count %lld on axis %d of %s",
                           (long long)repeats[d], d, hl_desc(x));
        if (__builtin_mul_overflow(x->shape[d], repeats[d], &shape[d]))
            return hl_fail(HL_ERR_MEMORY, "tile: %lld repeats of axis %d of %s is too large",
                           (long long)repeats[d], d, hl_desc(x));
    }
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare("tile", out, x->dtype, x->storage->device, nd, shape);
    if (st) return st;
    st = hl_check_no_overlap("tile", *out, x, false);
    if (!st) {
        hl_call c = {.op = HL_OP_TILE, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out}};
        for (int d = 0; d < nd; d++) c.i[d] = repeats[d];
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}
