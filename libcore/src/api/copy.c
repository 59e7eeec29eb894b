/*
 * api/copy.c - entry points that copy, cast and fill: contiguous, copy, cast, fill, arange,
 * eye, triangle.
 */
#include <math.h>

#include "../core.h"

static bool is_int(hl_dtype d) { return d == HL_I32 || d == HL_I64 || d == HL_U8; }

hl_status hl_copy(hl_tensor *dst, const hl_tensor *src) {
    if (!dst || !src) return hl_fail(HL_ERR_VALUE, "copy: tensor is NULL");
    hl_status st = hl_check_writable("copy", "the destination", dst);
    if (!st) st = hl_check_device("copy", dst->storage->device, src);
    if (st) return st;
    /* Leading size-1 axes of src beyond dst's rank broadcast away, as in numpy's copyto. */
    int drop = src->ndim > dst->ndim ? src->ndim - dst->ndim : 0;
    for (int i = 0; i < drop; i++)
        if (src->shape[i] != 1) drop = 0;
    hl_tensor *trimmed = NULL, *view = NULL;
    if ((st = hl_tensor_wrap(src->storage, src->dtype, src->ndim - drop, src->shape + drop,
                             src->strides + drop, src->offset, &trimmed)))
        return st;
    st = hl_view_expand(trimmed, dst->ndim, dst->shape, &view);
    hl_tensor_release(trimmed);
    if (st) return hl_fail(st, "copy: cannot assign %s to %s", hl_desc(src), hl_desc(dst));
    st = hl_check_no_overlap("copy", dst, src, true);
    if (!st) {
        hl_call c = {.op = HL_OP_COPY, .n_in = 1, .n_out = 1, .in = {view}, .out = {dst}};
        st = hl_submit(&c);
    }
    hl_tensor_release(view);
    return st;
}

hl_status hl_contiguous(const hl_tensor *x, hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "contiguous: tensor is NULL");
    if (hl_tensor_is_contiguous(x) && !*out) {
        *out = hl_tensor_retain((hl_tensor *)x);
        return HL_OK;
    }
    return hl_cast(x, x->dtype, out);
}

hl_status hl_cast(const hl_tensor *x, hl_dtype dtype, hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "cast: tensor or output pointer is NULL");
    if ((unsigned)dtype >= HL_NUM_DTYPES)
        return hl_fail(HL_ERR_DTYPE, "cast: invalid dtype code %d", (int)dtype);
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare("cast", out, dtype, x->storage->device, x->ndim, x->shape);
    if (st) return st;
    st = hl_check_no_overlap("cast", *out, x, true);
    if (!st) {
        hl_call c = {.op = HL_OP_COPY, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_fill(hl_tensor *dst, double value) {
    if (!dst) return hl_fail(HL_ERR_VALUE, "fill: tensor is NULL");
    hl_status st = hl_check_writable("fill", "the tensor", dst);
    if (st) return st;
    hl_call c = {.op = HL_OP_FILL, .n_in = 0, .n_out = 1, .out = {dst}, .f = {value}};
    return hl_submit(&c);
}

hl_status hl_arange(double start, double step, int64_t n, hl_dtype dtype, hl_device device,
                    hl_tensor **out) {
    if (!out) return hl_fail(HL_ERR_VALUE, "arange: output pointer is NULL");
    if (n < 0) return hl_fail(HL_ERR_VALUE, "arange: negative length %lld", (long long)n);
    if (!isfinite(start) || !isfinite(step))
        return hl_fail(HL_ERR_VALUE, "arange: start %g and step %g must be finite", start, step);
    if (is_int(dtype) && (start != floor(start) || step != floor(step) || fabs(start) > 9e15 ||
                          fabs(step) > 9e15))
        return hl_fail(HL_ERR_VALUE, "arange: integer dtype %s needs integer start and step, "
                       "got %g and %g", hl_dtype_name(dtype), start, step);
    /* The kernel computes start + i * step in int64 for integer dtypes: keep it in range. */
    if (is_int(dtype) && n > 1 && fabs(start) + (double)(n - 1) * fabs(step) > 9e18)
        return hl_fail(HL_ERR_VALUE, "arange: %lld values from %g by %g overflow int64",
                       (long long)n, start, step);
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare("arange", out, dtype, device, 1, &n);
    if (st) return st;
    if (!hl_tensor_is_contiguous(*out)) st = hl_fail(HL_ERR_VALUE, "arange: output must be contiguous");
    if (!st) {
        hl_call c = {.op = HL_OP_ARANGE, .n_out = 1, .out = {*out}, .f = {start, step}};
        if (is_int(dtype)) {  /* checked above to be whole numbers within int64 */
            c.i[0] = (int64_t)start;
            c.i[1] = (int64_t)step;
        }
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_eye(int64_t n, int64_t m, int64_t k, hl_dtype dtype, hl_device device,
                 hl_tensor **out) {
    if (!out) return hl_fail(HL_ERR_VALUE, "eye: output pointer is NULL");
    if (n < 0 || m < 0)
        return hl_fail(HL_ERR_VALUE, "eye: negative size %lld x %lld", (long long)n, (long long)m);
    k = HL_MAX(-n, HL_MIN(k, m));  /* past either edge the diagonal is empty; r + k can't wrap */
    int64_t shape[2] = {n, m};
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare("eye", out, dtype, device, 2, shape);
    if (st) return st;
    if (!hl_tensor_is_contiguous(*out)) st = hl_fail(HL_ERR_VALUE, "eye: output must be contiguous");
    if (!st) {
        hl_call c = {.op = HL_OP_EYE, .n_out = 1, .out = {*out}, .i = {k}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_triangle(const hl_tensor *x, int64_t k, int upper, hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "triangle: tensor or output pointer is NULL");
    if (x->ndim < 2)
        return hl_fail(HL_ERR_SHAPE, "triangle: expected at least 2 dimensions, got %s", hl_desc(x));
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare("triangle", out, x->dtype, x->storage->device, x->ndim, x->shape);
    if (st) return st;
    if (!hl_tensor_is_contiguous(*out)) st = hl_fail(HL_ERR_VALUE, "triangle: output must be contiguous");
    if (!st) st = hl_check_no_overlap("triangle", *out, x, false);
    if (!st) {
        hl_call c = {.op = HL_OP_TRIANGLE, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out},
                     .i = {k, upper != 0}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}
