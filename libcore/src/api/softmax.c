/*
 * api/softmax.c - entry points of softmax / log_softmax (forward and backward) and of the
 * softmax cross-entropy loss (forward and backward). Inputs reach the kernels (cpu/softmax.c)
 * contiguous (copied here when they are not); outputs are contiguous. Label values are
 * data, so their range is checked by the kernel when the call runs (which also covers
 * graph mode, where the values are not known yet at this point).
 */
#include "../core.h"

/* Prepares a contiguous output of shape (ndim, shape) and x's dtype that must not overlap
   any of ins (except as an identical view when allow_same). */
static hl_status prepare(const char *op, hl_tensor **out, const hl_tensor *x, int ndim,
                         const int64_t *shape, const hl_tensor *const *ins, int nin,
                         bool allow_same) {
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare(op, out, x->dtype, x->storage->device, ndim, shape);
    if (st) return st;
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given, %s, must be contiguous", op,
                     hl_desc(*out));
    for (int k = 0; k < nin && !st; k++) st = hl_check_no_overlap(op, *out, ins[k], allow_same);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* A 0-d tensor is a single row of one element: axis 0 or -1 are accepted, as in PyTorch. */
static hl_status softmax_axis(const char *op, int64_t *axis, const hl_tensor *x) {
    if (x->ndim == 0 && (*axis == 0 || *axis == -1)) {
        *axis = 0;
        return HL_OK;
    }
    return hl_norm_axis(op, axis, x->ndim);
}

/* Record: in[0] = x (contiguous), out[0] = y (contiguous); i[0] = axis (non-negative). The
   op (softmax or log_softmax) is the record's op. */
hl_status hl_softmax(int op, const hl_tensor *x, int64_t axis, hl_tensor **out) {
    if (op != HL_OP_SOFTMAX && op != HL_OP_LOG_SOFTMAX)
        return hl_fail(HL_ERR_VALUE, "softmax: op %d (%s) is not softmax or log_softmax", op,
                       hl_op_str(op));
    const char *name = hl_op_str(op);
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: x is NULL", name);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", name);
    hl_status st = hl_check_float(name, "x", x);
    if (!st) st = softmax_axis(name, &axis, x);
    if (st) return st;
    const hl_tensor *ins[1] = {x};
    hl_tensor *caller = *out, *xc = NULL;
    if ((st = prepare(name, out, x, x->ndim, x->shape, ins, 1, true))) return st;
    st = hl_contiguous(x, &xc);
    if (!st) {
        hl_call c = {.op = op, .n_in = 1, .n_out = 1, .in = {xc}, .out = {*out}, .i = {axis}};
        st = hl_submit(&c);
    }
    hl_tensor_release(xc);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* Record: in[0] = y, in[1] = dy (contiguous), out[0] = dx (contiguous); i[0] = axis. The op
   is softmax_grad or log_softmax_grad; either the forward or the grad op names it here. */
hl_status hl_softmax_grad(int op, const hl_tensor *y, const hl_tensor *dy, int64_t axis,
                          hl_tensor **out) {
    int gop;
    if (op == HL_OP_SOFTMAX || op == HL_OP_SOFTMAX_GRAD) gop = HL_OP_SOFTMAX_GRAD;
    else if (op == HL_OP_LOG_SOFTMAX || op == HL_OP_LOG_SOFTMAX_GRAD) gop = HL_OP_LOG_SOFTMAX_GRAD;
    else
        return hl_fail(HL_ERR_VALUE, "softmax_grad: op %d (%s) is not softmax or log_softmax",
                       op, hl_op_str(op));
    const char *name = hl_op_str(gop);
    if (!y || !dy) return hl_fail(HL_ERR_VALUE, "%s: y and dy are required", name);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", name);
    hl_status st = hl_check_float(name, "y", y);
    if (!st) st = hl_check_device(name, y->storage->device, dy);
    if (st) return st;
    if (dy->dtype != y->dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: dy %s and y %s must have the same dtype", name,
                       hl_desc(dy), hl_desc(y));
    if (!hl_same_shape(y, dy))
        return hl_fail(HL_ERR_SHAPE, "%s: dy %s must have the shape of y %s", name, hl_desc(dy),
                       hl_desc(y));
    if ((st = softmax_axis(name, &axis, y))) return st;
    const hl_tensor *ins[2] = {y, dy};
    hl_tensor *caller = *out, *yc = NULL, *dyc = NULL;
    if ((st = prepare(name, out, y, y->ndim, y->shape, ins, 2, true))) return st;
    st = hl_contiguous(y, &yc);
    if (!st) st = hl_contiguous(dy, &dyc);
    if (!st) {
        hl_call c = {.op = gop, .n_in = 2, .n_out = 1, .in = {yc, dyc}, .out = {*out},
                     .i = {axis}};
        st = hl_submit(&c);
    }
    hl_tensor_release(yc);
    hl_tensor_release(dyc);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* Checks logits (N, C, d...) and target (labels (N, d...) or probabilities like logits);
   fills the per-sample shape (N, d...) and tells which kind the target is. */
static hl_status check_ce(const char *op, const hl_tensor *logits, const hl_tensor *target,
                          int64_t *sample_shape, bool *labels) {
    if (!logits || !target) return hl_fail(HL_ERR_VALUE, "%s: logits and target are required", op);
    hl_status st = hl_check_float(op, "logits", logits);
    if (!st) st = hl_check_device(op, logits->storage->device, target);
    if (st) return st;
    if (logits->ndim < 2)
        return hl_fail(HL_ERR_SHAPE, "%s: expected logits of shape (N, C, d...) with the classes "
                       "on axis 1, got %s", op, hl_desc(logits));
    for (int i = 0, j = 0; i < logits->ndim; i++)
        if (i != 1) sample_shape[j++] = logits->shape[i];
    int ns = logits->ndim - 1;
    if (target->dtype == HL_I32 || target->dtype == HL_I64) {
        *labels = true;
        bool same = target->ndim == ns;
        for (int i = 0; same && i < ns; i++) same = target->shape[i] == sample_shape[i];
        if (!same)
            return hl_fail(HL_ERR_SHAPE, "%s: class-label target must have shape %s (logits %s "
                           "without the class axis 1), got %s", op, hl_shape_str(ns, sample_shape),
                           hl_desc(logits), hl_desc(target));
        return HL_OK;
    }
    *labels = false;
    if (target->dtype != logits->dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: target %s must be int32/int64 class labels or "
                       "probabilities of the logits' dtype (%s)", op, hl_desc(target),
                       hl_desc(logits));
    if (!hl_same_shape(target, logits))
        return hl_fail(HL_ERR_SHAPE, "%s: a probability target must have the logits' shape %s, "
                       "got %s (class labels are int32/int64 of shape %s)", op, hl_desc(logits),
                       hl_desc(target), hl_shape_str(ns, sample_shape));
    return HL_OK;
}

/* Record: in[0] = logits, in[1] = target (contiguous); out[0] = loss (N, d...), out[1] =
   log_prob (logits' shape, or NULL). i[0] = ignore_index, i[1] = 1 for class labels, 0 for
   probabilities. */
hl_status hl_softmax_cross_entropy(const hl_tensor *logits, const hl_tensor *target,
                                   int64_t ignore_index, hl_tensor **loss,
                                   hl_tensor **log_prob) {
    const char *op = "softmax_cross_entropy";
    int64_t sshape[HL_MAX_DIMS];
    bool labels;
    hl_status st = check_ce(op, logits, target, sshape, &labels);
    if (st) return st;
    if (!loss) return hl_fail(HL_ERR_VALUE, "%s: loss output pointer is NULL", op);
    const hl_tensor *ins[2] = {logits, target};
    if (!loss) return hl_fail(HL_ERR_VALUE, "softmax_cross_entropy: loss pointer is NULL");
    hl_tensor *loss_caller = *loss, *lp_caller = log_prob ? *log_prob : NULL;
    if ((st = prepare(op, loss, logits, logits->ndim - 1, sshape, ins, 2, false))) return st;
    if (log_prob) {
        if ((st = prepare(op, log_prob, logits, logits->ndim, logits->shape, ins, 2, false))) {
            hl_out_abandon(loss, loss_caller);
            return st;
        }
        st = hl_check_no_overlap(op, *log_prob, *loss, false);
    }
    hl_tensor *lc = NULL, *tc = NULL;
    if (!st) st = hl_contiguous(logits, &lc);
    if (!st) st = hl_contiguous(target, &tc);
    if (!st) {
        hl_call c = {.op = HL_OP_SOFTMAX_CROSS_ENTROPY, .n_in = 2, .n_out = 2, .in = {lc, tc},
                     .out = {*loss, log_prob ? *log_prob : NULL}, .i = {ignore_index, labels}};
        st = hl_submit(&c);
    }
    hl_tensor_release(lc);
    hl_tensor_release(tc);
    if (st) {
        if (log_prob) hl_out_abandon(log_prob, lp_caller);
        hl_out_abandon(loss, loss_caller);
    }
    return st;
}

/* Record: in[0] = log_prob, in[1] = target, in[2] = dloss (contiguous); out[0] = dlogits
   (contiguous). i[0] = ignore_index, i[1] = 1 for class labels, 0 for probabilities. */
hl_status hl_softmax_cross_entropy_grad(const hl_tensor *log_prob, const hl_tensor *target,
                                        const hl_tensor *dloss, int64_t ignore_index,
                                        hl_tensor **out) {
    const char *op = "softmax_cross_entropy_grad";
    int64_t sshape[HL_MAX_DIMS];
    bool labels;
    hl_status st = check_ce(op, log_prob, target, sshape, &labels);
    if (st) return st;
    if (!dloss) return hl_fail(HL_ERR_VALUE, "%s: dloss is required", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    if ((st = hl_check_device(op, log_prob->storage->device, dloss))) return st;
    if (dloss->dtype != log_prob->dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: dloss %s must have the dtype of log_prob %s", op,
                       hl_desc(dloss), hl_desc(log_prob));
    int ns = log_prob->ndim - 1;
    bool same = dloss->ndim == ns;
    for (int i = 0; same && i < ns; i++) same = dloss->shape[i] == sshape[i];
    if (!same)
        return hl_fail(HL_ERR_SHAPE, "%s: dloss must have the per-sample loss shape %s, got %s",
                       op, hl_shape_str(ns, sshape), hl_desc(dloss));
    const hl_tensor *ins[3] = {log_prob, target, dloss};
    hl_tensor *caller = *out;
    if ((st = prepare(op, out, log_prob, log_prob->ndim, log_prob->shape, ins, 3, true)))
        return st;
    hl_tensor *cont[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3 && !st; k++) st = hl_contiguous(ins[k], &cont[k]);
    if (!st) {
        hl_call c = {.op = HL_OP_SOFTMAX_CROSS_ENTROPY_GRAD, .n_in = 3, .n_out = 1,
                     .in = {cont[0], cont[1], cont[2]}, .out = {*out},
                     .i = {ignore_index, labels}};
        st = hl_submit(&c);
    }
    for (int k = 0; k < 3; k++) hl_tensor_release(cont[k]);
    if (st) hl_out_abandon(out, caller);
    return st;
}
