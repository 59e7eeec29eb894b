/*
 * api/attention.c - entry point of attention (cpu/attention.c): softmax(scale q k^T + mask) v
 * per (batch, head) in one pass, for inference. A gemm-family op that only the CPU runs (the
 * CUDA backend leaves its kernel NULL and the registry refuses it there).
 *
 *   attention: in {q (B, H, Sq, D), k (B, H, Sk, D), v (B, H, Sk, Dv), mask?} out {(B, Sq,
 *              H * Dv) when i[2], else (B, H, Sq, Dv); contiguous}; q, k, v float32 with their
 *              last axis contiguous (other strides as they come: the head split's views);
 *              mask a float32 view broadcast to (B, H, Sq, Sk) (zero strides); i[0] whether
 *              a mask is given, i[1] nan_to_zero, i[2] merge_heads; f[0] the scale
 */
#include <math.h>

#include "../core.h"

/* *x (a new reference), copied when its last axis is not contiguous. */
static hl_status rows_ref(const hl_tensor *x, hl_tensor **out) {
    if (x->shape[x->ndim - 1] <= 1 || x->strides[x->ndim - 1] == 1) {
        *out = hl_tensor_retain((hl_tensor *)x);
        return HL_OK;
    }
    return hl_contiguous(x, out);
}

static hl_status check_f32(const char *op, const char *what, const hl_tensor *t) {
    if (t->dtype != HL_F32)
        return hl_fail(HL_ERR_DTYPE, "%s: computes in float32, got %s %s", op, what, hl_desc(t));
    return HL_OK;
}

hl_status hl_attention(const hl_tensor *q, const hl_tensor *k, const hl_tensor *v,
                       const hl_tensor *mask, double scale, int nan_to_zero, int merge_heads,
                       hl_tensor **out) {
    const char *op = "attention";
    if (!q || !k || !v) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    hl_device dev = q->storage->device;
    hl_status st;
    if ((st = hl_check_device(op, dev, k)) || (st = hl_check_device(op, dev, v)) ||
        (st = hl_check_device(op, dev, mask)) ||
        (st = hl_check_op_dtype(op, HL_OP_ATTENTION, dev, "q", q)) ||
        (st = check_f32(op, "q", q)) || (st = check_f32(op, "k", k)) ||
        (st = check_f32(op, "v", v)) || (mask && (st = check_f32(op, "mask", mask))))
        return st;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return hl_fail(HL_ERR_SHAPE, "%s: q, k and v must be 4-D (batch, heads, sequence, "
                       "size), got q %s, k %s, v %s", op, hl_desc(q), hl_desc(k), hl_desc(v));
    const int64_t B = q->shape[0], H = q->shape[1], Sq = q->shape[2], D = q->shape[3],
                  Sk = k->shape[2], Dv = v->shape[3];
    if (k->shape[0] != B || k->shape[1] != H || k->shape[3] != D || v->shape[0] != B ||
        v->shape[1] != H || v->shape[2] != Sk)
        return hl_fail(HL_ERR_SHAPE, "%s: expected k (%lld, %lld, Sk, %lld) and v (%lld, %lld, "
                       "Sk, Dv) for q %s, got k %s and v %s", op, (long long)B, (long long)H,
                       (long long)D, (long long)B, (long long)H, hl_desc(q), hl_desc(k),
                       hl_desc(v));
    if (!isfinite(scale))
        return hl_fail(HL_ERR_VALUE, "%s: the scale must be finite, got %g", op, scale);
    const int64_t scores[4] = {B, H, Sq, Sk};
    hl_tensor *mv = NULL, *qc = NULL, *kc = NULL, *vc = NULL;
    if (mask) {
        if (mask->ndim > 4 || hl_view_expand(mask, 4, scores, &mv))  /* (its message replaced) */
            return hl_fail(HL_ERR_SHAPE, "%s: the mask %s does not broadcast to the scores' "
                           "shape %s", op, hl_desc(mask), hl_shape_str(4, scores));
    }
    const int64_t merged[3] = {B, Sq, H * Dv}, split[4] = {B, H, Sq, Dv};
    hl_tensor *caller = *out;
    if ((st = merge_heads ? hl_out_prepare(op, out, HL_F32, dev, 3, merged)
                          : hl_out_prepare(op, out, HL_F32, dev, 4, split))) {
        hl_tensor_release(mv);
        return st;
    }
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given (%s) must be contiguous", op,
                     hl_desc(*out));
    const hl_tensor *ins[4] = {q, k, v, mask};
    for (int i = 0; i < 4 && !st; i++)
        if (ins[i]) st = hl_check_no_overlap(op, *out, ins[i], false);
    if (!st && !(st = rows_ref(q, &qc)) && !(st = rows_ref(k, &kc)) && !(st = rows_ref(v, &vc))) {
        hl_call c = {.op = HL_OP_ATTENTION, .n_in = 3, .n_out = 1, .in = {qc, kc, vc},
                     .out = {*out}, .i = {mask != NULL, nan_to_zero != 0, merge_heads != 0},
                     .f = {scale}};
        if (mv) c.in[c.n_in++] = mv;
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    hl_tensor_release(mv);
    hl_tensor_release(qc);
    hl_tensor_release(kc);
    hl_tensor_release(vc);
    return st;
}
