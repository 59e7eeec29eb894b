/*
 * api/norm.c - entry points of the normalisation family: batch norm and layer norm, forward
 * and backward. They check every tensor (dtypes, devices, shapes of the per-channel and
 * per-row tensors, overlaps), make the large inputs contiguous, prepare the outputs and
 * submit one call record. The kernels (cpu/norm.c) trust the record.
 *
 * Large tensors (x, dy, out, dx) reach the kernel contiguous: inputs are copied here when
 * they are not, and caller-given outputs must be contiguous. Per-channel vectors of batch
 * norm (C entries) may be strided; the kernel reads them through their stride.
 */
#include <math.h>

#include "../core.h"

/* An optional tensor (NULL passes) with x's dtype and device and exactly the given shape. */
static hl_status check_like(const char *op, const char *what, const hl_tensor *t,
                            const hl_tensor *x, int ndim, const int64_t *shape) {
    if (!t) return HL_OK;
    hl_status st = hl_check_device(op, x->storage->device, t);
    if (st) return st;
    if (t->dtype != x->dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: %s is %s but x is %s; the dtypes must match", op, what,
                       hl_desc(t), hl_desc(x));
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same)
        return hl_fail(HL_ERR_SHAPE, "%s: expected %s of shape %s for x %s, got %s", op, what,
                       hl_shape_str(ndim, shape), hl_desc(x), hl_desc(t));
    return HL_OK;
}

/* Prepares an optional output (out may be NULL: not wanted) and checks it against the
   inputs. allow_same lets it be an input's identical view: the kernels read each element
   position before they write it (in-place use). */
static hl_status prepare_out(const char *op, hl_tensor **out, hl_tensor **saved,
                             const hl_tensor *like, int ndim, const int64_t *shape,
                             bool need_contiguous, const hl_tensor *const *ins, int nin,
                             bool allow_same) {
    if (!out) return HL_OK;
    *saved = *out;
    hl_status st = hl_out_prepare(op, out, like->dtype, like->storage->device, ndim, shape);
    if (st) return st;
    if (need_contiguous && !hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given, %s, must be contiguous", op,
                     hl_desc(*out));
    for (int k = 0; k < nin && !st; k++)
        st = hl_check_no_overlap(op, *out, ins[k], allow_same);
    if (st) hl_out_abandon(out, *saved);
    return st;
}

static void abandon(hl_tensor **out, hl_tensor *saved) {
    if (out) hl_out_abandon(out, saved);
}

/* Two outputs must not share memory with each other either. */
static hl_status outs_disjoint(const char *op, hl_tensor **a, hl_tensor **b) {
    if (!a || !b) return HL_OK;
    return hl_check_no_overlap(op, *a, *b, false);
}

/* ---- batch norm ---- */

/*
 * Record: in[0] = x (contiguous, (N, C, ...)), in[1] = scale, in[2] = bias (C or NULL),
 * in[3] = running_mean, in[4] = running_var (C or NULL; read, and written in place when
 * training). out[0] = y (contiguous), out[1] = save_mean, out[2] = save_invstd (C or NULL).
 * i[0] = training; f[0] = momentum, f[1] = eps.
 */
hl_status hl_batch_norm(const hl_tensor *x, const hl_tensor *scale, const hl_tensor *bias,
                        hl_tensor *running_mean, hl_tensor *running_var, int training,
                        double momentum, double eps, hl_tensor **out, hl_tensor **save_mean,
                        hl_tensor **save_invstd) {
    const char *op = "batch_norm";
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: x is NULL", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    hl_status st = hl_check_float(op, "x", x);
    if (st) return st;
    if (x->ndim < 2)
        return hl_fail(HL_ERR_SHAPE, "%s: expected x of shape (N, C, ...) with at least 2 "
                       "dimensions, got %s", op, hl_desc(x));
    if (!(eps >= 0) || !isfinite(eps))
        return hl_fail(HL_ERR_VALUE, "%s: eps must be finite and >= 0, got %g", op, eps);
    if (!(momentum >= 0 && momentum <= 1))
        return hl_fail(HL_ERR_VALUE, "%s: momentum must be in [0, 1], got %g", op, momentum);
    int64_t C = x->shape[1], per_channel = hl_tensor_numel(x) / (C ? C : 1);
    const char *names[4] = {"scale", "bias", "running_mean", "running_var"};
    const hl_tensor *vecs[4] = {scale, bias, running_mean, running_var};
    for (int k = 0; k < 4; k++)
        if ((st = check_like(op, names[k], vecs[k], x, 1, &C))) return st;
    if (!running_mean != !running_var)
        return hl_fail(HL_ERR_VALUE, "%s: give both running_mean and running_var, or neither",
                       op);
    if (!training && !running_mean)
        return hl_fail(HL_ERR_VALUE, "%s: inference mode (training=0) needs running_mean and "
                       "running_var", op);
    if (training && per_channel == 1 && C > 0)
        return hl_fail(HL_ERR_VALUE, "%s: expected more than 1 value per channel when training, "
                       "got x %s", op, hl_desc(x));
    /* The running statistics are written in place when training: each of their elements
       must have its own memory, and they must not alias anything read. */
    if (training && running_mean) {
        st = hl_check_writable(op, "running_mean", running_mean);
        if (!st) st = hl_check_writable(op, "running_var", running_var);
        if (st) return st;
    }
    const hl_tensor *reads[3] = {x, scale, bias};
    for (int k = 0; k < 3 && running_mean && !st; k++) {
        st = hl_check_no_overlap(op, running_mean, reads[k], false);
        if (!st) st = hl_check_no_overlap(op, running_var, reads[k], false);
    }
    if (!st && running_mean) st = hl_check_no_overlap(op, running_mean, running_var, false);
    if (st) return st;

    hl_tensor *saved[3] = {NULL, NULL, NULL};
    const hl_tensor *ins[5] = {x, scale, bias, running_mean, running_var};
    if ((st = prepare_out(op, out, &saved[0], x, x->ndim, x->shape, true, ins, 5, true)))
        return st;
    if ((st = prepare_out(op, save_mean, &saved[1], x, 1, &C, false, ins, 5, false))) {
        abandon(out, saved[0]);
        return st;
    }
    if ((st = prepare_out(op, save_invstd, &saved[2], x, 1, &C, false, ins, 5, false))) {
        abandon(save_mean, saved[1]);
        abandon(out, saved[0]);
        return st;
    }
    st = outs_disjoint(op, out, save_mean);
    if (!st) st = outs_disjoint(op, out, save_invstd);
    if (!st) st = outs_disjoint(op, save_mean, save_invstd);
    hl_tensor *xc = NULL;
    if (!st) st = hl_contiguous(x, &xc);
    if (!st) {
        hl_call c = {.op = HL_OP_BATCH_NORM, .n_in = 5, .n_out = 3,
                     .in = {xc, scale, bias, running_mean, running_var},
                     .out = {*out, save_mean ? *save_mean : NULL,
                             save_invstd ? *save_invstd : NULL},
                     .i = {training != 0}, .f = {momentum, eps}};
        st = hl_submit(&c);
    }
    hl_tensor_release(xc);
    if (st) {
        abandon(save_invstd, saved[2]);
        abandon(save_mean, saved[1]);
        abandon(out, saved[0]);
    }
    return st;
}

/*
 * Outputs are optional, so the record lists only the wanted ones: out[0..n_out-1] in the
 * order dx, dscale, dbias, and i[1], i[2], i[3] give the position of dx, dscale, dbias in
 * out[] (-1 when not wanted). Keeping out[0] non-NULL lets hl_submit find the device.
 */
static int compact_outs(hl_tensor **outs[3], hl_call *c) {
    int n = 0;
    for (int k = 0; k < 3; k++) {
        if (outs[k]) {
            c->out[n] = *outs[k];
            c->i[1 + k] = n++;
        } else {
            c->i[1 + k] = -1;
        }
    }
    c->n_out = n;
    return n;
}

/*
 * Record: in[0] = dy, in[1] = x (both contiguous, (N, C, ...)), in[2] = scale (C or NULL),
 * in[3] = save_mean, in[4] = save_invstd (C). Outputs as compact_outs says: dx contiguous,
 * dscale and dbias (C). i[0] = training.
 */
hl_status hl_batch_norm_grad(const hl_tensor *dy, const hl_tensor *x, const hl_tensor *scale,
                             const hl_tensor *save_mean, const hl_tensor *save_invstd,
                             int training, hl_tensor **dx, hl_tensor **dscale,
                             hl_tensor **dbias) {
    const char *op = "batch_norm_grad";
    if (!dy || !x || !save_mean || !save_invstd)
        return hl_fail(HL_ERR_VALUE, "%s: dy, x, save_mean and save_invstd are required", op);
    hl_status st = hl_check_float(op, "x", x);
    if (st) return st;
    if (x->ndim < 2)
        return hl_fail(HL_ERR_SHAPE, "%s: expected x of shape (N, C, ...) with at least 2 "
                       "dimensions, got %s", op, hl_desc(x));
    if ((st = check_like(op, "dy", dy, x, x->ndim, x->shape))) return st;
    int64_t C = x->shape[1];
    const char *names[3] = {"scale", "save_mean", "save_invstd"};
    const hl_tensor *vecs[3] = {scale, save_mean, save_invstd};
    for (int k = 0; k < 3; k++)
        if ((st = check_like(op, names[k], vecs[k], x, 1, &C))) return st;
    if (!dx && !dscale && !dbias) return HL_OK;

    const hl_tensor *ins[5] = {dy, x, scale, save_mean, save_invstd};
    hl_tensor **outs[3] = {dx, dscale, dbias};
    hl_tensor *saved[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3 && !st; k++) {
        bool big = k == 0;
        st = prepare_out(op, outs[k], &saved[k], x, big ? x->ndim : 1, big ? x->shape : &C, big,
                         ins, 5, big);
        if (st) {
            while (k--) abandon(outs[k], saved[k]);
            return st;
        }
    }
    st = outs_disjoint(op, dx, dscale);
    if (!st) st = outs_disjoint(op, dx, dbias);
    if (!st) st = outs_disjoint(op, dscale, dbias);
    hl_tensor *dyc = NULL, *xc = NULL;
    if (!st) st = hl_contiguous(dy, &dyc);
    if (!st) st = hl_contiguous(x, &xc);
    if (!st) {
        hl_call c = {.op = HL_OP_BATCH_NORM_GRAD, .n_in = 5,
                     .in = {dyc, xc, scale, save_mean, save_invstd}, .i = {training != 0}};
        compact_outs(outs, &c);
        st = hl_submit(&c);
    }
    hl_tensor_release(dyc);
    hl_tensor_release(xc);
    if (st)
        for (int k = 2; k >= 0; k--) abandon(outs[k], saved[k]);
    return st;
}

/* ---- layer norm ---- */

/* Shared checks of layer norm and its gradient: x, axis, and scale/bias of x's trailing
   shape. Sets *axis to its non-negative form. */
static hl_status check_layer(const char *op, const hl_tensor *x, int64_t *axis,
                             const hl_tensor *scale, const hl_tensor *bias) {
    hl_status st = hl_check_float(op, "x", x);
    if (st) return st;
    if ((st = hl_norm_axis(op, axis, x->ndim))) return st;
    int nt = x->ndim - (int)*axis;
    if ((st = check_like(op, "scale", scale, x, nt, x->shape + *axis))) return st;
    return check_like(op, "bias", bias, x, nt, x->shape + *axis);
}

/*
 * Record: in[0] = x (contiguous), in[1] = scale, in[2] = bias (contiguous, x's trailing shape,
 * or NULL). out[0] = y (contiguous), out[1] = mean, out[2] = invstd (x's leading shape,
 * contiguous, or NULL). i[0] = axis; f[0] = eps.
 */
hl_status hl_layer_norm(const hl_tensor *x, const hl_tensor *scale, const hl_tensor *bias,
                        int64_t axis, double eps, hl_tensor **out, hl_tensor **mean,
                        hl_tensor **invstd) {
    const char *op = "layer_norm";
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: x is NULL", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    if (!(eps >= 0) || !isfinite(eps))
        return hl_fail(HL_ERR_VALUE, "%s: eps must be finite and >= 0, got %g", op, eps);
    hl_status st = check_layer(op, x, &axis, scale, bias);
    if (st) return st;
    const hl_tensor *ins[3] = {x, scale, bias};
    hl_tensor *saved[3] = {NULL, NULL, NULL};
    hl_tensor **outs[3] = {out, mean, invstd};
    for (int k = 0; k < 3 && !st; k++) {
        bool big = k == 0;
        st = prepare_out(op, outs[k], &saved[k], x, big ? x->ndim : (int)axis, x->shape, true,
                         ins, 3, big);
        if (st) {
            while (k--) abandon(outs[k], saved[k]);
            return st;
        }
    }
    st = outs_disjoint(op, out, mean);
    if (!st) st = outs_disjoint(op, out, invstd);
    if (!st) st = outs_disjoint(op, mean, invstd);
    hl_tensor *xc = NULL, *sc = NULL, *bc = NULL;
    if (!st) st = hl_contiguous(x, &xc);
    if (!st && scale) st = hl_contiguous(scale, &sc);
    if (!st && bias) st = hl_contiguous(bias, &bc);
    if (!st) {
        hl_call c = {.op = HL_OP_LAYER_NORM, .n_in = 3, .n_out = 3, .in = {xc, sc, bc},
                     .out = {*out, mean ? *mean : NULL, invstd ? *invstd : NULL},
                     .i = {axis}, .f = {eps}};
        st = hl_submit(&c);
    }
    hl_tensor_release(xc);
    hl_tensor_release(sc);
    hl_tensor_release(bc);
    if (st)
        for (int k = 2; k >= 0; k--) abandon(outs[k], saved[k]);
    return st;
}

/*
 * Record: in[0] = dy, in[1] = x (contiguous), in[2] = scale (contiguous or NULL), in[3] =
 * mean, in[4] = invstd (contiguous, x's leading shape). Outputs as compact_outs says: dx
 * (x's shape), dscale, dbias (x's trailing shape), all contiguous. i[0] = axis.
 */
hl_status hl_layer_norm_grad(const hl_tensor *dy, const hl_tensor *x, const hl_tensor *scale,
                             const hl_tensor *mean, const hl_tensor *invstd, int64_t axis,
                             hl_tensor **dx, hl_tensor **dscale, hl_tensor **dbias) {
    const char *op = "layer_norm_grad";
    if (!dy || !x || !mean || !invstd)
        return hl_fail(HL_ERR_VALUE, "%s: dy, x, mean and invstd are required", op);
    hl_status st = check_layer(op, x, &axis, scale, NULL);
    if (st) return st;
    if ((st = check_like(op, "dy", dy, x, x->ndim, x->shape)) ||
        (st = check_like(op, "mean", mean, x, (int)axis, x->shape)) ||
        (st = check_like(op, "invstd", invstd, x, (int)axis, x->shape)))
        return st;
    if (!dx && !dscale && !dbias) return HL_OK;
    const hl_tensor *ins[5] = {dy, x, scale, mean, invstd};
    hl_tensor **outs[3] = {dx, dscale, dbias};
    hl_tensor *saved[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3 && !st; k++) {
        bool big = k == 0;
        st = prepare_out(op, outs[k], &saved[k], x, big ? x->ndim : x->ndim - (int)axis,
                         big ? x->shape : x->shape + axis, true, ins, 5, big);
        if (st) {
            while (k--) abandon(outs[k], saved[k]);
            return st;
        }
    }
    st = outs_disjoint(op, dx, dscale);
    if (!st) st = outs_disjoint(op, dx, dbias);
    if (!st) st = outs_disjoint(op, dscale, dbias);
    const hl_tensor *src[5] = {dy, x, scale, mean, invstd};
    hl_tensor *cont[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int k = 0; k < 5 && !st; k++)
        if (src[k]) st = hl_contiguous(src[k], &cont[k]);
    if (!st) {
        hl_call c = {.op = HL_OP_LAYER_NORM_GRAD, .n_in = 5,
                     .in = {cont[0], cont[1], cont[2], cont[3], cont[4]}, .i = {axis}};
        compact_outs(outs, &c);
        st = hl_submit(&c);
    }
    for (int k = 0; k < 5; k++) hl_tensor_release(cont[k]);
    if (st)
        for (int k = 2; k >= 0; k--) abandon(outs[k], saved[k]);
    return st;
}
