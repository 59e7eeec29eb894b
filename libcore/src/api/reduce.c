/*
 * api/reduce.c - entry points of the reduction family: hl_reduce (sum, mean, max, min, prod,
 * l2, logsumexp over any set of axes), hl_arg_reduce (argmax, argmin) and hl_cumsum.
 *
 * Result dtypes follow numpy: sums and products of int32, uint8 and bool give int64 (as do
 * their cumulative sums); max and min keep the input's dtype; mean, l2 and logsumexp take
 * float32 or float64 only (the Python layer casts integers first).
 */
#include "../core.h"

static bool is_float(hl_dtype d) { return d == HL_F32 || d == HL_F64; }

/* The dtype numpy gives a sum (or cumulative sum, or product) of d (float16 and bfloat16
   keep theirs: backends that reduce them accumulate in a wider type). */
static hl_dtype sum_dtype(hl_dtype d) {
    return is_float(d) || d == HL_F16 || d == HL_BF16 ? d : HL_I64;
}

/* *target is the contiguous tensor a kernel writes: out itself, or a new temporary when out is
   not contiguous (the caller copies the temporary into out afterwards). */
static hl_status contiguous_target(hl_tensor *out, hl_tensor **target) {
    if (hl_tensor_is_contiguous(out)) {
        *target = hl_tensor_retain(out);
        return HL_OK;
    }
    *target = NULL;
    return hl_tensor_empty(out->dtype, out->storage->device, out->ndim, out->shape, target);
}

/* ---- hl_reduce ---- */

/* Call record: in[0] = x, out[0]; i[0] = bit mask of the reduced axes, i[1] = keepdims. */
hl_status hl_reduce(int op, const hl_tensor *x, int naxes, const int64_t *axes, int keepdims,
                    hl_tensor **out) {
    bool float_only;
    switch (op) {
        case HL_OP_SUM: case HL_OP_MAX: case HL_OP_MIN: case HL_OP_PROD: float_only = false; break;
        case HL_OP_MEAN: case HL_OP_L2: case HL_OP_LOGSUMEXP: float_only = true; break;
        default:
            return hl_fail(HL_ERR_VALUE, "reduce: op %d (%s) is not a reduction; expected sum, "
                           "mean, max, min, prod, l2 or logsumexp", op, hl_op_str(op));
    }
    const char *name = hl_op_str(op);
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", name);
    if (naxes < 0 || naxes > x->ndim)
        return hl_fail(HL_ERR_VALUE, "%s: %d axes given for %s, which has %d", name, naxes,
                       hl_desc(x), x->ndim);
    if (naxes > 0 && !axes) return hl_fail(HL_ERR_VALUE, "%s: the axes array is NULL", name);
    uint64_t mask = 0;
    for (int k = 0; k < naxes; k++) {
        int64_t a = axes[k];
        hl_status st = hl_norm_axis(name, &a, x->ndim);
        if (st) return st;
        if ((mask >> a) & 1)
            return hl_fail(HL_ERR_VALUE, "%s: axis %lld is repeated in axes %s", name,
                           (long long)axes[k], hl_shape_str(naxes, axes));
        mask |= 1ull << a;
    }
    /* mean, l2 and logsumexp are of real numbers; float16 and bfloat16 go on to the
       backend's check, whose message says to cast where it does not compute in them */
    if (float_only && !is_float(x->dtype) && x->dtype != HL_F16 && x->dtype != HL_BF16)
        return hl_fail(HL_ERR_DTYPE, "%s: expected a floating-point tensor, got %s", name,
                       hl_desc(x));
    hl_device dev = x->storage->device;
    hl_status st = hl_check_op_dtype(name, op, dev, "tensor", x);
    if (st) return st;

    int nd = 0;
    int64_t shape[HL_MAX_DIMS], rcount = 1;
    for (int d = 0; d < x->ndim; d++) {
        if ((mask >> d) & 1) {
            rcount *= x->shape[d];
            if (keepdims) shape[nd++] = 1;
        } else {
            shape[nd++] = x->shape[d];
        }
    }
    if (rcount == 0 && (op == HL_OP_MAX || op == HL_OP_MIN))
        return hl_fail(HL_ERR_VALUE, "zero-size array to reduction operation %s which has no "
                       "identity (input %s, axes %s)", name, hl_desc(x),
                       hl_shape_str(naxes, axes));
    hl_dtype odt = (op == HL_OP_SUM || op == HL_OP_PROD) ? sum_dtype(x->dtype) : x->dtype;

    if (!out) return hl_fail(HL_ERR_VALUE, "reduce: output pointer is NULL");
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare(name, out, odt, dev, nd, shape))) return st;
    /* Reducing nothing is element-wise, so writing over the input itself is safe then. */
    st = hl_check_no_overlap(name, *out, x, naxes == 0);
    if (!st) {
        hl_call c = {.op = op, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out},
                     .i = {(int64_t)mask, keepdims != 0}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* ---- hl_arg_reduce ---- */

/* Call record: in[0] = x, out[0] (int64); i[0] = axis (normalised), i[1] = keepdims,
   i[2] = select_last. */
hl_status hl_arg_reduce(int op, const hl_tensor *x, int64_t axis, int keepdims,
                        int select_last, hl_tensor **out) {
    if (op != HL_OP_ARGMAX && op != HL_OP_ARGMIN)
        return hl_fail(HL_ERR_VALUE, "arg_reduce: op %d (%s) is not argmax or argmin", op,
                       hl_op_str(op));
    const char *name = hl_op_str(op);
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", name);
    hl_device dev = x->storage->device;
    hl_status st = hl_check_compute_dtype(name, dev, x);
    if (st) return st;
    int64_t ax = axis;
    if ((st = hl_norm_axis(name, &ax, x->ndim))) return st;
    if (x->shape[ax] == 0)
        return hl_fail(HL_ERR_VALUE, "%s: attempt to get %s of an empty sequence (axis %lld of "
                       "%s)", name, name, (long long)axis, hl_desc(x));
    int nd = 0;
    int64_t shape[HL_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (d != ax) shape[nd++] = x->shape[d];
        else if (keepdims) shape[nd++] = 1;
    }
    if (!out) return hl_fail(HL_ERR_VALUE, "arg_reduce: output pointer is NULL");
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare(name, out, HL_I64, dev, nd, shape))) return st;
    st = hl_check_no_overlap(name, *out, x, false);
    if (!st) {
        hl_call c = {.op = op, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out},
                     .i = {ax, keepdims != 0, select_last != 0}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* ---- hl_cumsum ---- */

/* Call record: in[0] = x (contiguous), out[0] (contiguous, x's shape); i[0] = axis
   (normalised), i[1] = exclusive, i[2] = reverse. */
hl_status hl_cumsum(const hl_tensor *x, int64_t axis, int exclusive, int reverse,
                    hl_tensor **out) {
    if (!x) return hl_fail(HL_ERR_VALUE, "cumsum: input is NULL");
    hl_device dev = x->storage->device;
    hl_status st = hl_check_compute_dtype("cumsum", dev, x);
    if (st) return st;
    int64_t ax = axis;
    if ((st = hl_norm_axis("cumsum", &ax, x->ndim))) return st;
    if (!out) return hl_fail(HL_ERR_VALUE, "cumsum: output pointer is NULL");
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare("cumsum", out, sum_dtype(x->dtype), dev, x->ndim, x->shape)))
        return st;
    /* Each element is read before its own position is written, so out may be x itself. */
    hl_tensor *xc = NULL, *target = NULL;
    st = hl_check_no_overlap("cumsum", *out, x, true);
    if (!st) st = hl_contiguous(x, &xc);
    if (!st) st = contiguous_target(*out, &target);
    if (!st) {
        hl_call c = {.op = HL_OP_CUMSUM, .n_in = 1, .n_out = 1, .in = {xc}, .out = {target},
                     .i = {ax, exclusive != 0, reverse != 0}};
        st = hl_submit(&c);
    }
    if (!st && target != *out) st = hl_copy(*out, target);
    hl_tensor_release(xc);
    hl_tensor_release(target);
    if (st) hl_out_abandon(out, caller);
    return st;
}
