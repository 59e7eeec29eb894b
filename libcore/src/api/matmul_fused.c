/*
 * api/matmul_fused.c - entry points of gemm_pack_b and matmul_fused (cpu/matmul_fused.c):
 * matrix products for inference, with B packed once and the bias, residual and activation
 * applied in the product's output loop. Both are gemm-family ops; a backend whose gemm
 * kernel does not know them leaves their kernels NULL and the registry refuses them
 * (libcore/cuda has its own: cuda/fused.cu). The packed layout is packed_layouts.h's.
 *
 *   gemm_pack_b:  in {b as a (K, N) view} out {(P, K, 16) float32}, P = ceil(N / 16)
 *   matmul_fused: in {a (..., K) contiguous, b, bias?, residual?} out {(..., N) contiguous};
 *                 i[0] N when b is packed, else -1 (b then a (K, N) view BLAS can read:
 *                 a plain b goes to BLAS, and the epilogue follows as a pass over the rows);
 *                 i[1] the activation (HL_CONV_ACT_*), i[2] whether a bias, i[3] whether a
 *                 residual is given (bias contiguous (N,), residual contiguous, the output's
 *                 shape); f[0..1] the activation's alpha and beta
 */
#include "../core.h"
#include "../cpu/blas_layout.h"

enum { PANEL = 16 };  /* the packed layout's panel width (cpu/matmul_fused.c's NR) */

/* *x (a new reference) made contiguous when it is not. */
static hl_status contiguous_ref(const hl_tensor *x, hl_tensor **out) {
    if (hl_tensor_is_contiguous(x)) {
        *out = hl_tensor_retain((hl_tensor *)x);
        return HL_OK;
    }
    return hl_contiguous(x, out);
}

hl_status hl_gemm_pack_b(const hl_tensor *b, int trans_b, hl_tensor **out) {
    const char *op = "gemm_pack_b";
    if (!b) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    hl_status st = hl_check_op_dtype(op, HL_OP_GEMM_PACK_B, b->storage->device, "b", b);
    if (st) return st;
    if (b->dtype != HL_F32)
        return hl_fail(HL_ERR_DTYPE, "%s: packs float32 matrices, got %s", op, hl_desc(b));
    if (b->ndim != 2)
        return hl_fail(HL_ERR_SHAPE, "%s: expected a 2-D matrix, got %s", op, hl_desc(b));
    hl_tensor *view = NULL;
    if (trans_b) {
        const int64_t perm[2] = {1, 0};
        if ((st = hl_view_permute(b, perm, &view))) return st;
    } else {
        view = hl_tensor_retain((hl_tensor *)b);
    }
    const int64_t K = view->shape[0], N = view->shape[1];
    const int64_t shape[3] = {(N + PANEL - 1) / PANEL, K, PANEL};
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare(op, out, HL_F32, b->storage->device, 3, shape))) goto done;
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given (%s) must be contiguous", op,
                     hl_desc(*out));
    if (!st) st = hl_check_no_overlap(op, *out, b, false);
    if (!st) {
        hl_call c = {.op = HL_OP_GEMM_PACK_B, .n_in = 1, .n_out = 1, .in = {view},
                     .out = {*out}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
done:
    hl_tensor_release(view);
    return st;
}

/* Checks b, plain (n < 0) or packed, against K; sets *N. */
static hl_status check_b(const char *op, const hl_tensor *a, const hl_tensor *b, int64_t n,
                         int64_t K, int64_t *N) {
    if (n < 0) {
        if (b->ndim != 2)
            return hl_fail(HL_ERR_SHAPE, "%s: expected a 2-D (K, N) b, got %s", op, hl_desc(b));
        if (b->shape[0] != K)
            return hl_fail(HL_ERR_SHAPE, "%s: a %s and b %s do not match: a's last axis (%lld) "
                           "must equal b's first (%lld)", op, hl_desc(a), hl_desc(b),
                           (long long)K, (long long)b->shape[0]);
        *N = b->shape[1];
        return HL_OK;
    }
    if (b->dtype != HL_F32 || b->ndim != 3 || b->shape[2] != PANEL ||
        b->shape[0] != (n + PANEL - 1) / PANEL || b->shape[1] != K || !hl_tensor_is_contiguous(b))
        return hl_fail(HL_ERR_SHAPE, "%s: b must be what gemm_pack_b made from a (%lld, %lld) "
                       "float32 matrix, a contiguous (%lld, %lld, %d) float32 tensor; got %s",
                       op, (long long)K, (long long)n, (long long)((n + PANEL - 1) / PANEL),
                       (long long)K, PANEL, hl_desc(b));
    *N = n;
    return HL_OK;
}

hl_status hl_matmul_fused(const hl_tensor *a, const hl_tensor *b, int64_t n,
                          const hl_tensor *bias, const hl_tensor *residual, int act,
                          double alpha, double beta, hl_tensor **out) {
    const char *op = "matmul_fused";
    if (!a || !b) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    hl_device dev = a->storage->device;
    hl_status st;
    if ((st = hl_check_device(op, dev, b)) || (st = hl_check_device(op, dev, bias)) ||
        (st = hl_check_device(op, dev, residual)) ||
        (st = hl_check_op_dtype(op, HL_OP_MATMUL_FUSED, dev, "a", a)))
        return st;
    if (a->dtype != HL_F32 && a->dtype != HL_F64)
        return hl_fail(HL_ERR_DTYPE, "%s: computes in float32 and float64, got a %s", op,
                       hl_desc(a));
    if (n < 0 ? b->dtype != a->dtype : a->dtype != HL_F32)
        return hl_fail(HL_ERR_DTYPE, "%s: a %s and b %s: %s", op, hl_desc(a), hl_desc(b),
                       n < 0 ? "the operands must have one dtype; cast first"
                             : "a packed b takes a float32 a");
    if (act < HL_CONV_ACT_NONE || act > HL_CONV_ACT_GELU_TANH)
        return hl_fail(HL_ERR_VALUE, "%s: act must be one of HL_CONV_ACT_* (0 none, 1 relu, 2 "
                       "clip, 3 leaky_relu, 4 hard_sigmoid, 5 gelu, 6 gelu_tanh), got %d", op, act);
    if (a->ndim < 1)
        return hl_fail(HL_ERR_SHAPE, "%s: a needs at least one dimension, got %s", op,
                       hl_desc(a));
    const int64_t K = a->shape[a->ndim - 1];
    int64_t N = 0;
    if ((st = check_b(op, a, b, n, K, &N))) return st;
    int64_t M = 1;
    for (int d = 0; d < a->ndim - 1; d++) M = M > INT_MAX ? M : M * a->shape[d];
    if (n < 0 && (K > INT_MAX || N > INT_MAX || M > INT_MAX))
        return hl_fail(HL_ERR_UNSUPPORTED, "%s: a %lld x %lld x %lld product exceeds what "
                       "OpenBLAS's 32-bit interface takes", op, (long long)M, (long long)K,
                       (long long)N);
    int64_t shape[HL_MAX_DIMS];
    for (int d = 0; d < a->ndim - 1; d++) shape[d] = a->shape[d];
    shape[a->ndim - 1] = N;
    if (bias && (bias->dtype != a->dtype || bias->ndim != 1 || bias->shape[0] != N))
        return hl_fail(HL_ERR_SHAPE, "%s: bias must be a (%lld,) %s vector, got %s", op,
                       (long long)N, hl_dtype_name(a->dtype), hl_desc(bias));
    if (residual) {
        bool same = residual->ndim == a->ndim && residual->dtype == a->dtype;
        for (int d = 0; same && d < a->ndim; d++) same = residual->shape[d] == shape[d];
        if (!same)
            return hl_fail(HL_ERR_SHAPE, "%s: the residual must have the result's shape %s and "
                           "dtype %s, got %s", op, hl_shape_str(a->ndim, shape),
                           hl_dtype_name(a->dtype), hl_desc(residual));
    }
    hl_tensor *caller = *out, *ac = NULL, *bc = NULL, *biasc = NULL, *resc = NULL;
    if ((st = hl_out_prepare(op, out, a->dtype, dev, a->ndim, shape))) return st;
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given (%s) must be contiguous", op,
                     hl_desc(*out));
    const hl_tensor *ins[4] = {a, b, bias, residual};
    for (int k = 0; k < 4 && !st; k++)
        if (ins[k]) st = hl_check_no_overlap(op, *out, ins[k], false);
    if (st) goto fail;
    bool tb;
    int64_t ldb;
    if ((st = contiguous_ref(a, &ac))) goto fail;
    if (n < 0 && !hl_blas_layout(K, N, b->strides[0], b->strides[1], &tb, &ldb)) {
        if ((st = hl_contiguous(b, &bc))) goto fail;
    } else {
        bc = hl_tensor_retain((hl_tensor *)b);
    }
    if ((bias && (st = contiguous_ref(bias, &biasc))) ||
        (residual && (st = contiguous_ref(residual, &resc))))
        goto fail;
    hl_call c = {.op = HL_OP_MATMUL_FUSED, .n_out = 1, .out = {*out},
                 .i = {n < 0 ? -1 : n, act, bias != NULL, residual != NULL},
                 .f = {alpha, beta}};
    c.in[c.n_in++] = ac;
    c.in[c.n_in++] = bc;
    if (biasc) c.in[c.n_in++] = biasc;
    if (resc) c.in[c.n_in++] = resc;
    st = hl_submit(&c);
fail:
    if (st) hl_out_abandon(out, caller);
    hl_tensor_release(ac);
    hl_tensor_release(bc);
    hl_tensor_release(biasc);
    hl_tensor_release(resc);
    return st;
}
