/*
 * api/conv.c - entry points of the convolution family: conv, conv_grad_input,
 * conv_grad_weight and conv_transpose (which is conv_grad_input plus a bias).
 *
 * Every entry point checks its arguments, then hands the kernel a record in one layout:
 *   tensors are 4-D (N, C, H, W) and contiguous; a 1-D problem (N, C, L) arrives as a view
 *   with H = 1 (and kernel height 1, stride 1, no padding along H), so kernels have one case.
 *   i[0] groups, i[1..2] stride (h, w), i[3..4] dilation (h, w), i[5..6] pads at the start
 *   (top, left), i[7..8] pads at the end (bottom, right).
 *   conv:             in {x, w, bias?}  out {y}
 *   conv_fused:       in {x, w, bias?, residual?, packed?} out {y}; i[9] the activation
 *                     (HL_CONV_ACT_*), i[10] whether a bias, i[11] whether a residual, i[12]
 *                     packed weights (conv_pack's of w): 0 none, 1 + their HL_CONV_PACK_*
 *                     layout; f[0..1] the activation's alpha and beta
 *   conv_pack:        in {w} out {packed}; i[0] groups, i[1] the layout (HL_CONV_PACK_*;
 *                     cpu/conv_packed.c)
 *   conv_grad_input:  in {dy, w, bias?} out {dx}  (bias is added to dx: conv_transpose)
 *   conv_grad_weight: in {dy, x}        out {dw}
 * The kernels take spatial sizes from the tensors: for conv_grad_input they loop over dy's
 * positions and drop taps that fall outside dx, so the output_padding of conv_transpose
 * needs nothing special.
 */
#include <limits.h>

#include "window.h"


typedef struct {
    int S;               /* spatial axes: 1 or 2 */
    int64_t groups;
    int64_t stride[2], dil[2], pb[2], pe[2];   /* 2-D form: [0] is H (unit for 1-D), [1] W */
} conv_attrs;


static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

/* a * b, or INT64_MAX when that overflows (then it matches no real size). */
static int64_t mul_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* Reads stride, pads, dilation (NULL: the defaults 1, 0, 1) and groups into a. */
static hl_status read_attrs(const char *op, int S, const int64_t *stride, const int64_t *pads,
                            const int64_t *dilation, int64_t groups, conv_attrs *a) {
    a->S = S;
    a->groups = groups;
    if (groups < 1 || groups >= HL_WINDOW_LIMIT)
        return hl_fail(HL_ERR_VALUE, "%s: groups must be a positive number, got %lld", op,
                       (long long)groups);
    hl_window w;
    hl_status st = hl_window_read(op, S, stride, NULL, pads, dilation, &w);
    if (st) return st;
    memcpy(a->stride, w.stride, sizeof a->stride);
    memcpy(a->dil, w.dil, sizeof a->dil);
    memcpy(a->pb, w.pb, sizeof a->pb);
    memcpy(a->pe, w.pe, sizeof a->pe);
    return HL_OK;
}

/* Output sizes of a convolution of spatial sizes in[] with kernel k[] (S entries each). */
static hl_status out_sizes(const char *op, const conv_attrs *a, const int64_t *in,
                           const int64_t *k, int64_t *out) {
    int S = a->S;
    for (int d = 0; d < S; d++) {
        int j = d + 2 - S;
        int64_t ext, padded;
        if (k[d] < 1)
            return hl_fail(HL_ERR_SHAPE, "%s: the kernel's spatial sizes must be positive, got "
                           "%s", op, hl_shape_str(S, k));
        if (__builtin_mul_overflow(a->dil[j], k[d] - 1, &ext) ||
            __builtin_add_overflow(in[d], a->pb[j] + a->pe[j], &padded))
            return hl_fail(HL_ERR_SHAPE, "%s: sizes too large (input %s, kernel %s)", op,
                           hl_shape_str(S, in), hl_shape_str(S, k));
        ext += 1;
        if (padded < ext)
            return hl_fail(HL_ERR_SHAPE,
                           "%s: along spatial axis %d the kernel spans %lld (size %lld, dilation "
                           "%lld) but the padded input is only %lld (size %lld + pads %lld + "
                           "%lld), so the output size would be %lld; use a smaller kernel or "
                           "more padding", op, d, (long long)ext, (long long)k[d],
                           (long long)a->dil[j], (long long)padded, (long long)in[d],
                           (long long)a->pb[j], (long long)a->pe[j],
                           (long long)(floor_div(padded - ext, a->stride[j]) + 1));
        out[d] = (padded - ext) / a->stride[j] + 1;
    }
    return HL_OK;
}

/* The BLAS behind the kernels takes 32-bit sizes: a problem whose matrices exceed them is
   refused rather than silently wrapped. */
static hl_status check_gemm_sizes(const char *op, int64_t cg_in, const int64_t *k, int S,
                                  int64_t cg_out, const int64_t *osz) {
    int64_t K = cg_in, P = 1;
    for (int d = 0; d < S; d++) {
        if (__builtin_mul_overflow(K, k[d], &K)) K = INT64_MAX;
        if (__builtin_mul_overflow(P, osz[d], &P)) P = INT64_MAX;
    }
    if (K >= INT_MAX || P >= INT_MAX || cg_out >= INT_MAX)
        return hl_fail(HL_ERR_UNSUPPORTED, "%s: the problem is too large for 32-bit BLAS "
                       "(channels x kernel = %lld, output positions = %lld)", op,
                       (long long)K, (long long)P);
    return HL_OK;
}

/* t must be on dev and of the lead operand's dtype. */
static hl_status check_tensor(const char *op, const char *role, const hl_tensor *t,
                              hl_device dev, hl_dtype dtype) {
    hl_status st = hl_check_device(op, dev, t);
    if (st) return st;
    if (t->dtype != dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: %s is %s but the other operands are %s; cast them to "
                       "one dtype", op, role, hl_desc(t), hl_dtype_name(dtype));
    return HL_OK;
}

/* Checks the leading operand (x or dy): 3-D or 4-D, of a dtype the device computes `code`
   in. Sets S and dev. */
static hl_status check_lead(const char *op, int code, const char *role, const hl_tensor *t,
                            int *S, hl_device *dev) {
    if (t->ndim != 3 && t->ndim != 4)
        return hl_fail(HL_ERR_SHAPE, "%s: expected %s of shape (N, C, L) or (N, C, H, W), got "
                       "%s", op, role, hl_desc(t));
    *S = t->ndim - 2;
    *dev = t->storage->device;
    return hl_check_op_dtype(op, code, *dev, role, t);
}

static hl_status check_bias(const char *op, const hl_tensor *bias, int64_t channels,
                            hl_device dev, hl_dtype dtype) {
    if (!bias) return HL_OK;
    hl_status st = check_tensor(op, "the bias", bias, dev, dtype);
    if (st) return st;
    if (bias->ndim != 1 || bias->shape[0] != channels)
        return hl_fail(HL_ERR_SHAPE, "%s: expected a bias of shape (%lld,), one per output "
                       "channel, got %s", op, (long long)channels, hl_desc(bias));
    return HL_OK;
}

/* Prepares *out (contiguous, not overlapping the inputs), makes contiguous 4-D views of the
   inputs and submits the record. On failure *out is restored to caller. */
/* What conv_fused adds to the record (i[9..12], f[0..1]); NULL for the other ops. */
typedef struct {
    int act;
    double alpha, beta;
    bool bias, residual;
    int packed;   /* 0, or 1 + the packed weight's HL_CONV_PACK_* layout */
} fused_attrs;

static hl_status submit(const char *opname, int op, const conv_attrs *a,
                        const hl_tensor *const *ins, int n_in, hl_dtype dtype, hl_device dev,
                        int ndim, const int64_t *oshape, const fused_attrs *fu,
                        hl_tensor **out) {
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare(opname, out, dtype, dev, ndim, oshape);
    if (st) return st;
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given (%s) must be contiguous", opname,
                     hl_desc(*out));
    for (int k = 0; k < n_in && !st; k++)
        if (ins[k]) st = hl_check_no_overlap(opname, *out, ins[k], false);
    hl_tensor *held[HL_CALL_MAX_IN + 1] = {0};
    for (int k = 0; k < n_in && !st; k++) {
        if (!ins[k]) continue;
        hl_tensor *c = NULL;
        st = hl_contiguous(ins[k], &c);
        if (!st && c->ndim == 3) {
            hl_tensor *v = NULL;
            st = hl_view_unsqueeze(c, 2, &v);
            hl_tensor_release(c);
            c = v;
        }
        held[k] = c;
    }
    hl_tensor *o4 = NULL;
    if (!st) {
        if ((*out)->ndim == 3) st = hl_view_unsqueeze(*out, 2, &o4);
        else o4 = hl_tensor_retain(*out);
    }
    if (!st) {
        hl_call c = {.op = op, .n_in = n_in, .n_out = 1, .out = {o4},
                     .i = {a->groups, a->stride[0], a->stride[1], a->dil[0], a->dil[1], a->pb[0],
                           a->pb[1], a->pe[0], a->pe[1]}};
        for (int k = 0; k < n_in; k++) c.in[k] = held[k];
        if (fu) {
            c.i[9] = fu->act;
            c.i[10] = fu->bias;
            c.i[11] = fu->residual;
            c.i[12] = fu->packed;
            c.f[0] = fu->alpha;
            c.f[1] = fu->beta;
        }
        st = hl_submit(&c);
    }
    for (int k = 0; k < n_in; k++) hl_tensor_release(held[k]);
    hl_tensor_release(o4);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* The shape conv_pack gives weights w (C_out, C_in / groups, k...) in a layout: PANELS
   (groups * panels, K, HL_CONV_PACK_ROWS), panels of HL_CONV_PACK_ROWS output channels of a
   group; WINOGRAD (4, 4, C_out, C_in); WINOGRAD43 (6, 6, C_out, C_in). Returns the number
   of axes. */
static int packed_shape(const hl_tensor *w, int64_t groups, int layout, int64_t shape[4]) {
    if (layout == HL_CONV_PACK_WINOGRAD || layout == HL_CONV_PACK_WINOGRAD43) {
        shape[0] = shape[1] = layout == HL_CONV_PACK_WINOGRAD ? 4 : 6;
        shape[2] = w->shape[0];
        shape[3] = w->shape[1];
        return 4;
    }
    int64_t k = 1;
    for (int d = 1; d < w->ndim; d++) k = mul_sat(k, w->shape[d]);
    const int64_t cg = w->shape[0] / groups;
    shape[0] = groups * ((cg + HL_CONV_PACK_ROWS - 1) / HL_CONV_PACK_ROWS);
    shape[1] = k;
    shape[2] = HL_CONV_PACK_ROWS;
    return 3;
}

/* Whether w (groups) can be packed in Winograd's layout: a 2-D 3x3 kernel, one group. */
static bool winograd_packable(const hl_tensor *w, int64_t groups) {
    return w->ndim == 4 && w->shape[2] == 3 && w->shape[3] == 3 && groups == 1;
}

/* packed (may be NULL) must be conv_pack's layout of w for these groups, float32 as x: a
   3-D tensor is the panels, a 4-D one Winograd's kernels (F(4x4, 3x3)'s when its first axis
   is 6). Sets *layout (HL_CONV_PACK_*). */
static hl_status check_packed(const char *op, const hl_tensor *packed, const hl_tensor *x,
                              const hl_tensor *w, int64_t groups, hl_device dev, int *layout) {
    if (!packed) return HL_OK;
    if (x->dtype != HL_F32)
        return hl_fail(HL_ERR_DTYPE, "%s: packed weights are float32 only, but the input is %s; "
                       "pass packed=None", op, hl_desc(x));
    hl_status st = check_tensor(op, "the packed weight", packed, dev, HL_F32);
    if (st) return st;
    *layout = !(packed->ndim == 4 && winograd_packable(w, groups)) ? HL_CONV_PACK_PANELS
              : packed->shape[0] == 6                               ? HL_CONV_PACK_WINOGRAD43
                                                                    : HL_CONV_PACK_WINOGRAD;
    int64_t want[4];
    const int nd = packed_shape(w, groups, *layout, want);
    bool same = packed->ndim == nd;
    for (int d = 0; same && d < nd; d++) same = packed->shape[d] == want[d];
    if (!same)
        return hl_fail(HL_ERR_SHAPE, "%s: the packed weight must be conv_pack's layout of weight "
                       "%s with groups=%lld, shape %s, got %s", op, hl_desc(w), (long long)groups,
                       hl_shape_str(nd, want), hl_desc(packed));
    return HL_OK;
}

/* conv and conv_fused (fu NULL for conv). */
static hl_status conv_entry(const char *op, int code, const hl_tensor *x, const hl_tensor *w,
                            const hl_tensor *bias, const hl_tensor *residual,
                            const hl_tensor *packed, const int64_t *stride, const int64_t *pads,
                            const int64_t *dilation, int64_t groups, const fused_attrs *fu,
                            hl_tensor **out) {
    if (!x || !w || !out) return hl_fail(HL_ERR_VALUE, "%s: input, weight or output is NULL", op);
    int S = 2;
    hl_device dev = {HL_DEVICE_CPU, 0};
    hl_status st = check_lead(op, code, "input", x, &S, &dev);
    if (st || (st = check_tensor(op, "the weight", w, dev, x->dtype))) return st;
    /* conv_fused's epilogue (i[9..11]) is read only by kernels written for it: a backend
       whose conv kernel does not read it leaves HL_OP_CONV_FUSED NULL, so check_lead has
       already refused the call through the registry. */
    if (w->ndim != x->ndim)
        return hl_fail(HL_ERR_SHAPE, "%s: the weight must be (C_out, C_in / groups%s) for input "
                       "%s, got %s", op, S == 1 ? ", k" : ", kh, kw", hl_desc(x), hl_desc(w));
    conv_attrs a;
    if ((st = read_attrs(op, S, stride, pads, dilation, groups, &a))) return st;
    int64_t c_in = x->shape[1], c_out = w->shape[0];
    if (mul_sat(w->shape[1], groups) != c_in) {
        /* The usual cause: channels-last data (N, H, W, C) where NCHW is expected. */
        bool channels_last = x->shape[x->ndim - 1] == mul_sat(w->shape[1], groups);
        return hl_fail(HL_ERR_SHAPE, "%s: input %s has %lld channels but weight %s with "
                       "groups=%lld expects C_in = %lld x %lld = %lld%s", op, hl_desc(x),
                       (long long)c_in, hl_desc(w), (long long)groups, (long long)w->shape[1],
                       (long long)groups, (long long)mul_sat(w->shape[1], groups),
                       !channels_last ? "" : S == 2
                           ? "; is the input channels-last (N, H, W, C)? hl expects (N, C, H, W): "
                             "transpose it with x.permute(0, 3, 1, 2)"
                           : "; is the input channels-last (N, L, C)? hl expects (N, C, L): "
                             "transpose it with x.permute(0, 2, 1)");
    }
    if (c_out % groups)
        return hl_fail(HL_ERR_SHAPE, "%s: weight %s has %lld output channels, not divisible by "
                       "groups=%lld", op, hl_desc(w), (long long)c_out, (long long)groups);
    if ((st = check_bias(op, bias, c_out, dev, x->dtype))) return st;
    int64_t oshape[4] = {x->shape[0], c_out};
    if ((st = out_sizes(op, &a, x->shape + 2, w->shape + 2, oshape + 2)) ||
        (st = check_gemm_sizes(op, w->shape[1], w->shape + 2, S, c_out / groups, oshape + 2)))
        return st;
    const hl_tensor *ins[5] = {x, w};
    int n_in = 2;
    if (bias) ins[n_in++] = bias;
    if (residual) {
        if ((st = check_tensor(op, "the residual", residual, dev, x->dtype))) return st;
        bool same = residual->ndim == x->ndim;
        for (int d = 0; same && d < x->ndim; d++) same = residual->shape[d] == oshape[d];
        if (!same)
            return hl_fail(HL_ERR_SHAPE, "%s: the residual must have the output's shape %s, got "
                           "%s", op, hl_shape_str(x->ndim, oshape), hl_desc(residual));
        ins[n_in++] = residual;
    }
    int layout = 0;
    if ((st = check_packed(op, packed, x, w, groups, dev, &layout))) return st;
    fused_attrs f;
    if (packed) {
        ins[n_in++] = packed;
        f = *fu;
        f.packed = 1 + layout;
        fu = &f;
    }
    return submit(op, code, &a, ins, n_in, x->dtype, dev, x->ndim, oshape, fu, out);
}

hl_status hl_conv(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias,
                  const int64_t *stride, const int64_t *pads, const int64_t *dilation,
                  int64_t groups, hl_tensor **out) {
    return conv_entry("conv", HL_OP_CONV, x, w, bias, NULL, NULL, stride, pads, dilation,
                      groups, NULL, out);
}

hl_status hl_conv_fused(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias,
                        const hl_tensor *residual, const hl_tensor *packed,
                        const int64_t *stride, const int64_t *pads,
                        const int64_t *dilation, int64_t groups, int act, double alpha,
                        double beta, hl_tensor **out) {
    const char *op = "conv_fused";
    if (act < HL_CONV_ACT_NONE || act > HL_CONV_ACT_HARD_SIGMOID)
        return hl_fail(HL_ERR_VALUE, "%s: act must be one of HL_CONV_ACT_* (0 none, 1 relu, "
                       "2 clip, 3 leaky_relu, 4 hard_sigmoid), got %d", op, act);
    const fused_attrs fu = {act, alpha, beta, bias != NULL, residual != NULL, 0};
    return conv_entry(op, HL_OP_CONV_FUSED, x, w, bias, residual, packed, stride, pads,
                      dilation, groups, &fu, out);
}

hl_status hl_conv_pack(const hl_tensor *w, int64_t groups, int layout, hl_tensor **out) {
    const char *op = "conv_pack";
    if (!w || !out) return hl_fail(HL_ERR_VALUE, "%s: weight or output is NULL", op);
    hl_device dev = w->storage->device;
    hl_status st = hl_check_op_dtype(op, HL_OP_CONV_PACK, dev, "the weight", w);
    if (st) return st;
    if (w->ndim < 3 || w->ndim > 4)
        return hl_fail(HL_ERR_SHAPE, "%s: expected a weight of shape (C_out, C_in / groups, k) or "
                       "(C_out, C_in / groups, kh, kw), got %s", op, hl_desc(w));
    if (groups < 1 || groups >= HL_WINDOW_LIMIT || w->shape[0] % groups)
        return hl_fail(HL_ERR_VALUE, "%s: groups must be a positive number that divides the "
                       "weight's %lld output channels, got %lld", op, (long long)w->shape[0],
                       (long long)groups);
    if (layout != HL_CONV_PACK_PANELS && layout != HL_CONV_PACK_WINOGRAD &&
        layout != HL_CONV_PACK_WINOGRAD43)
        return hl_fail(HL_ERR_VALUE, "%s: layout must be HL_CONV_PACK_PANELS (0), "
                       "HL_CONV_PACK_WINOGRAD (1) or HL_CONV_PACK_WINOGRAD43 (2), got %d", op,
                       layout);
    if (layout != HL_CONV_PACK_PANELS && !winograd_packable(w, groups))
        return hl_fail(HL_ERR_VALUE, "%s: the Winograd layout is for 3x3 kernels of one "
                       "group, got weight %s with groups=%lld", op, hl_desc(w),
                       (long long)groups);
    int64_t shape[4];
    const int nd = packed_shape(w, groups, layout, shape);
    if (shape[1] >= INT_MAX)
        return hl_fail(HL_ERR_SHAPE, "%s: weight %s is too large", op, hl_desc(w));
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare(op, out, HL_F32, dev, nd, shape))) return st;
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given (%s) must be contiguous", op,
                     hl_desc(*out));
    if (!st) st = hl_check_no_overlap(op, *out, w, false);
    hl_tensor *wc = NULL;
    if (!st) st = hl_contiguous(w, &wc);
    if (!st) {
        hl_call c = {.op = HL_OP_CONV_PACK, .n_in = 1, .n_out = 1, .in = {wc}, .out = {*out},
                     .i = {groups, layout}};
        st = hl_submit(&c);
    }
    hl_tensor_release(wc);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* Shared by conv_grad_input and conv_transpose: dy (N, C_out, out...) and w (C_out,
   C_in / groups, k...) to dx of shape xs. When exact, xs must be the shape that conv maps to
   dy's; conv_transpose passes xs already derived from dy (with output_padding). */
static hl_status grad_input(const char *op, const hl_tensor *dy, const hl_tensor *w,
                            const hl_tensor *bias, const int64_t *xs, const conv_attrs *a,
                            bool exact, hl_device dev, hl_tensor **out) {
    int S = a->S;
    int64_t groups = a->groups;
    hl_status st;
    if (w->shape[0] != dy->shape[1])
        return hl_fail(HL_ERR_SHAPE, "%s: the gradient %s has %lld channels but the weight %s "
                       "has %lld output channels", op, hl_desc(dy), (long long)dy->shape[1],
                       hl_desc(w), (long long)w->shape[0]);
    if (w->shape[0] % groups)
        return hl_fail(HL_ERR_SHAPE, "%s: weight %s: %lld channels are not divisible by "
                       "groups=%lld", op, hl_desc(w), (long long)w->shape[0], (long long)groups);
    if (xs[0] != dy->shape[0] || xs[1] != mul_sat(w->shape[1], groups))
        return hl_fail(HL_ERR_SHAPE, "%s: input shape %s does not fit the gradient %s and weight "
                       "%s with groups=%lld (expected N = %lld and C = %lld)", op,
                       hl_shape_str(S + 2, xs), hl_desc(dy), hl_desc(w), (long long)groups,
                       (long long)dy->shape[0], (long long)mul_sat(w->shape[1], groups));
    for (int d = 0; d < S + 2; d++)
        if (xs[d] < 0)
            return hl_fail(HL_ERR_VALUE, "%s: negative size in input shape %s", op,
                           hl_shape_str(S + 2, xs));
    if ((st = check_bias(op, bias, xs[1], dev, dy->dtype))) return st;
    if (exact) {
        int64_t osz[2];
        if ((st = out_sizes(op, a, xs + 2, w->shape + 2, osz))) return st;
        for (int d = 0; d < S; d++)
            if (osz[d] != dy->shape[2 + d])
                return hl_fail(HL_ERR_SHAPE, "%s: a convolution of input %s by weight %s gives "
                               "spatial size %s, but the gradient is %s", op,
                               hl_shape_str(S + 2, xs), hl_desc(w), hl_shape_str(S, osz),
                               hl_desc(dy));
    } else {
        for (int d = 0; d < S; d++)
            if (w->shape[2 + d] < 1)
                return hl_fail(HL_ERR_SHAPE, "%s: the kernel's spatial sizes must be positive, "
                               "got %s", op, hl_desc(w));
    }
    if ((st = check_gemm_sizes(op, w->shape[1], w->shape + 2, S, w->shape[0] / groups,
                               dy->shape + 2)))
        return st;
    const hl_tensor *ins[3] = {dy, w, bias};
    return submit(op, HL_OP_CONV_GRAD_INPUT, a, ins, bias ? 3 : 2, dy->dtype, dev, S + 2, xs,
                  NULL, out);
}

hl_status hl_conv_grad_input(const hl_tensor *dy, const hl_tensor *w, const int64_t *x_shape,
                             const int64_t *stride, const int64_t *pads,
                             const int64_t *dilation, int64_t groups, hl_tensor **out) {
    const char *op = "conv_grad_input";
    if (!dy || !w || !x_shape || !out)
        return hl_fail(HL_ERR_VALUE, "%s: gradient, weight, input shape or output is NULL", op);
    int S = 2;
    hl_device dev = {HL_DEVICE_CPU, 0};
    hl_status st = check_lead(op, HL_OP_CONV_GRAD_INPUT, "gradient", dy, &S, &dev);
    if (st || (st = check_tensor(op, "the weight", w, dev, dy->dtype))) return st;
    if (w->ndim != dy->ndim)
        return hl_fail(HL_ERR_SHAPE, "%s: weight %s and gradient %s differ in rank", op,
                       hl_desc(w), hl_desc(dy));
    conv_attrs a;
    if ((st = read_attrs(op, S, stride, pads, dilation, groups, &a))) return st;
    return grad_input(op, dy, w, NULL, x_shape, &a, true, dev, out);
}

hl_status hl_conv_grad_weight(const hl_tensor *dy, const hl_tensor *x, const int64_t *w_shape,
                              const int64_t *stride, const int64_t *pads,
                              const int64_t *dilation, int64_t groups, hl_tensor **out) {
    const char *op = "conv_grad_weight";
    if (!dy || !x || !w_shape || !out)
        return hl_fail(HL_ERR_VALUE, "%s: gradient, input, weight shape or output is NULL", op);
    int S = 2;
    hl_device dev = {HL_DEVICE_CPU, 0};
    hl_status st = check_lead(op, HL_OP_CONV_GRAD_WEIGHT, "gradient", dy, &S, &dev);
    if (st || (st = check_tensor(op, "the input", x, dev, dy->dtype))) return st;
    if (x->ndim != dy->ndim)
        return hl_fail(HL_ERR_SHAPE, "%s: input %s and gradient %s differ in rank", op,
                       hl_desc(x), hl_desc(dy));
    conv_attrs a;
    if ((st = read_attrs(op, S, stride, pads, dilation, groups, &a))) return st;
    const int64_t *ws = w_shape;
    for (int d = 0; d < S + 2; d++)
        if (ws[d] < 0)
            return hl_fail(HL_ERR_VALUE, "%s: negative size in weight shape %s", op,
                           hl_shape_str(S + 2, ws));
    if (ws[0] != dy->shape[1] || ws[0] % groups || mul_sat(ws[1], groups) != x->shape[1] ||
        x->shape[0] != dy->shape[0])
        return hl_fail(HL_ERR_SHAPE, "%s: weight shape %s with groups=%lld does not fit input %s "
                       "and gradient %s (expected (%lld, %lld / %lld, ...) with C_out divisible "
                       "by groups, and equal batch sizes)", op, hl_shape_str(S + 2, ws),
                       (long long)groups, hl_desc(x), hl_desc(dy), (long long)dy->shape[1],
                       (long long)x->shape[1], (long long)groups);
    int64_t osz[2];
    if ((st = out_sizes(op, &a, x->shape + 2, ws + 2, osz))) return st;
    for (int d = 0; d < S; d++)
        if (osz[d] != dy->shape[2 + d])
            return hl_fail(HL_ERR_SHAPE, "%s: a convolution of input %s by a %s kernel gives "
                           "spatial size %s, but the gradient is %s", op, hl_desc(x),
                           hl_shape_str(S, ws + 2), hl_shape_str(S, osz), hl_desc(dy));
    if ((st = check_gemm_sizes(op, ws[1], ws + 2, S, ws[0] / groups, osz))) return st;
    const hl_tensor *ins[2] = {dy, x};
    return submit(op, HL_OP_CONV_GRAD_WEIGHT, &a, ins, 2, dy->dtype, dev, S + 2, ws, NULL,
                  out);
}

hl_status hl_conv_transpose(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias,
                            const int64_t *stride, const int64_t *pads,
                            const int64_t *dilation, const int64_t *output_padding,
                            int64_t groups, hl_tensor **out) {
    const char *op = "conv_transpose";
    if (!x || !w || !out) return hl_fail(HL_ERR_VALUE, "%s: input, weight or output is NULL", op);
    int S = 2;
    hl_device dev = {HL_DEVICE_CPU, 0};
    hl_status st = check_lead(op, HL_OP_CONV_GRAD_INPUT, "input", x, &S, &dev);
    if (st || (st = check_tensor(op, "the weight", w, dev, x->dtype))) return st;
    if (w->ndim != x->ndim)
        return hl_fail(HL_ERR_SHAPE, "%s: the weight must be (C_in, C_out / groups%s) for input "
                       "%s, got %s", op, S == 1 ? ", k" : ", kh, kw", hl_desc(x), hl_desc(w));
    conv_attrs a;
    if ((st = read_attrs(op, S, stride, pads, dilation, groups, &a))) return st;
    if (w->shape[0] != x->shape[1])
        return hl_fail(HL_ERR_SHAPE, "%s: input %s has %lld channels but the weight %s (C_in, "
                       "C_out / groups, k...) expects %lld", op, hl_desc(x),
                       (long long)x->shape[1], hl_desc(w), (long long)w->shape[0]);
    int64_t xs[4] = {x->shape[0], mul_sat(w->shape[1], groups)};
    if (xs[1] == INT64_MAX)
        return hl_fail(HL_ERR_SHAPE, "%s: weight %s with groups=%lld gives too many channels", op,
                       hl_desc(w), (long long)groups);
    for (int d = 0; d < S; d++) {
        int j = d + 2 - S;
        int64_t opad = output_padding ? output_padding[d] : 0;
        if (opad < 0 || (opad >= a.stride[j] && opad >= a.dil[j]))
            return hl_fail(HL_ERR_VALUE, "%s: output_padding %s must be non-negative and smaller "
                           "than the stride %s or the dilation %s", op,
                           hl_window_ints_str(S, output_padding), hl_window_ints_str(S, stride),
                           hl_window_ints_str(S, dilation));
        int64_t k = w->shape[2 + d], in = x->shape[2 + d];
        if (k < 1)
            return hl_fail(HL_ERR_SHAPE, "%s: the kernel's spatial sizes must be positive, got "
                           "%s", op, hl_desc(w));
        /* (in - 1) * stride - pads + dilation * (k - 1) + 1 + output_padding, checked */
        int64_t span, ext, size;
        if (__builtin_mul_overflow(in > 0 ? in - 1 : 0, a.stride[j], &span) ||
            __builtin_mul_overflow(a.dil[j], k - 1, &ext) ||
            __builtin_add_overflow(ext, 1 + opad, &ext) ||
            __builtin_add_overflow(span, ext, &size))
            return hl_fail(HL_ERR_SHAPE, "%s: sizes too large (input %s, weight %s)", op,
                           hl_desc(x), hl_desc(w));
        size -= a.pb[j] + a.pe[j];
        if (in < 1 || size < 1)
            return hl_fail(HL_ERR_SHAPE, "%s: input %s with weight %s, stride %s and pads %s "
                           "gives output size %lld along spatial axis %d; it must be positive",
                           op, hl_desc(x), hl_desc(w), hl_window_ints_str(S, stride),
                           hl_window_ints_str(2 * S, pads), (long long)(in < 1 ? 0 : size), d);
        xs[2 + d] = size;
    }
    return grad_input(op, x, w, bias, xs, &a, false, dev, out);
}
