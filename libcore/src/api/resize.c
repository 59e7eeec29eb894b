/*
 * api/resize.c - entry points of resize (ONNX Resize: nearest and n-linear) and its
 * gradient.
 *
 * Call record (both ops): in[0] = x (resize) or dy (resize_grad), out[0];
 *   i[0] = mode (0 nearest, 1 linear), i[1] = coordinate transformation (0 half_pixel,
 *   1 asymmetric, 2 align_corners, 3 pytorch_half_pixel), i[2] = nearest rounding (0
 *   round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil), i[3] = 1 when scales are given;
 *   f[0 .. ndim-1] = the scales (output size / input size per axis, used by the coordinate
 *   mapping instead of the size ratio).
 */
#include <math.h>

#include "../core.h"

static hl_status check_args(const char *op, int nd, const double *scales, int mode, int coord,
                            int nearest) {
    if (mode < 0 || mode > 1)
        return hl_fail(HL_ERR_VALUE, "%s: mode %d is not 0 (nearest) or 1 (linear)", op, mode);
    if (coord < 0 || coord > 3)
        return hl_fail(HL_ERR_VALUE, "%s: coordinate transformation %d is not 0 (half_pixel), 1 "
                       "(asymmetric), 2 (align_corners) or 3 (pytorch_half_pixel)", op, coord);
    if (nearest < 0 || nearest > 3)
        return hl_fail(HL_ERR_VALUE, "%s: nearest mode %d is not 0 (round_prefer_floor), 1 "
                       "(round_prefer_ceil), 2 (floor) or 3 (ceil)", op, nearest);
    for (int d = 0; scales && d < nd; d++)
        if (!(scales[d] > 0) || !isfinite(scales[d]))
            return hl_fail(HL_ERR_VALUE, "%s: scale %g on axis %d must be finite and > 0", op,
                           scales[d], d);
    return HL_OK;
}

/* Sizes of the small side (input of resize, output of resize_grad) and the large side. */
static hl_status check_sizes(const char *op, int nd, const int64_t *in_shape,
                             const int64_t *out_shape) {
    for (int d = 0; d < nd; d++) {
        if (out_shape[d] < 0 || in_shape[d] < 0)
            return hl_fail(HL_ERR_VALUE, "%s: negative size on axis %d (input %s, output %s)", op,
                           d, hl_shape_str(nd, in_shape), hl_shape_str(nd, out_shape));
        if (in_shape[d] == 0 && out_shape[d] > 0)
            return hl_fail(HL_ERR_SHAPE, "%s: cannot resize empty axis %d to %lld elements "
                           "(input %s, output %s)", op, d, (long long)out_shape[d],
                           hl_shape_str(nd, in_shape), hl_shape_str(nd, out_shape));
    }
    return HL_OK;
}

static hl_status submit(int op, const hl_tensor *in, hl_tensor *out, const double *scales,
                        int mode, int coord, int nearest) {
    hl_call c = {.op = op, .n_in = 1, .n_out = 1, .in = {in}, .out = {out},
                 .i = {mode, coord, nearest, scales != NULL}};
    for (int d = 0; scales && d < in->ndim; d++) c.f[d] = scales[d];
    return hl_submit(&c);
}

hl_status hl_resize(const hl_tensor *x, const int64_t *out_shape, const double *scales,
                    int mode, int coord, int nearest, hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "resize: tensor or output pointer is NULL");
    int nd = x->ndim;
    if (nd > 0 && !out_shape)
        return hl_fail(HL_ERR_VALUE, "resize: out_shape is NULL for %s", hl_desc(x));
    hl_status st = check_args("resize", nd, scales, mode, coord, nearest);
    if (st) return st;
    /* nearest moves elements (any dtype the device moves); linear interpolates, so it needs
       a floating-point dtype the device does arithmetic in */
    bool is_float = x->dtype == HL_F32 || x->dtype == HL_F64 || x->dtype == HL_F16 ||
                    x->dtype == HL_BF16;
    if (mode == 1 && !is_float)
        return hl_fail(HL_ERR_DTYPE, "resize: linear mode needs a floating-point tensor, got "
                       "%s; cast first", hl_desc(x));
    if (mode == 1 && (st = hl_check_compute_dtype("resize", x->storage->device, x))) return st;
    if ((st = hl_check_op_dtype("resize", HL_OP_RESIZE, x->storage->device, "tensor", x)))
        return st;
    if ((st = check_sizes("resize", nd, x->shape, out_shape))) return st;
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare("resize", out, x->dtype, x->storage->device, nd, out_shape)))
        return st;
    st = hl_check_no_overlap("resize", *out, x, false);
    if (!st) st = submit(HL_OP_RESIZE, x, *out, scales, mode, coord, nearest);
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_resize_grad(const hl_tensor *dy, const int64_t *x_shape, const double *scales,
                         int mode, int coord, int nearest, hl_tensor **out) {
    if (!dy || !out)
        return hl_fail(HL_ERR_VALUE, "resize_grad: tensor or output pointer is NULL");
    int nd = dy->ndim;
    if (nd > 0 && !x_shape)
        return hl_fail(HL_ERR_VALUE, "resize_grad: x_shape is NULL for dy %s", hl_desc(dy));
    hl_status st = check_args("resize_grad", nd, scales, mode, coord, nearest);
    if (st) return st;
    if ((st = hl_check_op_dtype("resize_grad", HL_OP_RESIZE_GRAD, dy->storage->device,
                                "gradient", dy)))
        return st;
    if ((st = check_sizes("resize_grad", nd, x_shape, dy->shape))) return st;
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare("resize_grad", out, dy->dtype, dy->storage->device, nd, x_shape)))
        return st;
    st = hl_check_no_overlap("resize_grad", *out, dy, false);
    if (!st) st = submit(HL_OP_RESIZE_GRAD, dy, *out, scales, mode, coord, nearest);
    if (st) hl_out_abandon(out, caller);
    return st;
}
