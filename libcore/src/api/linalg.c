/*
 * api/linalg.c - entry points of matmul (numpy.matmul semantics) and gemm (ONNX Gemm).
 *
 * Both hand the kernel operands it can read in place: for float32/float64 an operand whose
 * last two axes BLAS cannot take (hl_blas_layout: neither row-major with a leading dimension
 * nor a transposed view) is made contiguous first. The kernel writes a contiguous output; a
 * caller's output that is not contiguous gets a temporary, copied into it afterwards.
 */
#include "../core.h"
#include "../cpu/blas_layout.h"

/* The dtypes BLAS (and cuBLAS's GemmEx, for the half types on CUDA) reads with a layout. */
static bool is_float(hl_dtype d) {
    return d == HL_F32 || d == HL_F64 || d == HL_F16 || d == HL_BF16;
}

/* Common checks: both present, on one device, one supported dtype. */
static hl_status check_operands(const char *op, int code, const hl_tensor *a,
                                const hl_tensor *b, const hl_tensor *c) {
    if (!a || !b) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", op);
    hl_device dev = a->storage->device;
    hl_status st;
    if ((st = hl_check_device(op, dev, b)) || (st = hl_check_device(op, dev, c))) return st;
    if (a->dtype != b->dtype || (c && c->dtype != a->dtype))
        return hl_fail(HL_ERR_DTYPE, "%s: operands have different dtypes, %s and %s%s%s; cast "
                       "first", op, hl_desc(a), hl_desc(b), c ? " and " : "", c ? hl_desc(c) : "");
    return hl_check_op_dtype(op, code, dev, "operands", a);
}

/* *x replaced by a contiguous copy when BLAS cannot read its matrices (rows x cols, the last
   two axes) in place. Integer operands are read with any strides. */
static hl_status blas_ready(hl_tensor **x, int64_t rows, int64_t cols, bool transposed) {
    hl_tensor *t = *x;
    if (!is_float(t->dtype)) return HL_OK;
    int64_t s0 = t->strides[t->ndim - 2], s1 = t->strides[t->ndim - 1];
    bool trans;
    int64_t ld;
    if (transposed ? hl_blas_layout(rows, cols, s1, s0, &trans, &ld)
                   : hl_blas_layout(rows, cols, s0, s1, &trans, &ld))
        return HL_OK;
    hl_tensor *c = NULL;
    hl_status st = hl_contiguous(t, &c);
    if (st) return st;
    hl_tensor_release(t);
    *x = c;
    return HL_OK;
}

static hl_status check_blas_size(const char *op, hl_dtype dt, int64_t M, int64_t N, int64_t K) {
    if (is_float(dt) && (M > INT_MAX || N > INT_MAX || K > INT_MAX))
        return hl_fail(HL_ERR_UNSUPPORTED, "%s: a matrix dimension of %lld x %lld x %lld exceeds "
                       "what OpenBLAS's 32-bit interface takes", op, (long long)M, (long long)N,
                       (long long)K);
    return HL_OK;
}

/* Submits the call with out[0] = dst, through a contiguous temporary when dst is not
   contiguous. */
static hl_status submit_into(hl_call *c, hl_tensor *dst) {
    if (hl_tensor_is_contiguous(dst)) {
        c->out[0] = dst;
        return hl_submit(c);
    }
    hl_tensor *tmp = NULL;
    hl_status st = hl_tensor_empty(dst->dtype, dst->storage->device, dst->ndim, dst->shape, &tmp);
    if (!st) {
        c->out[0] = tmp;
        st = hl_submit(c);
    }
    if (!st) st = hl_copy(dst, tmp);
    hl_tensor_release(tmp);
    return st;
}

/* Call record: in[0] = a as (..., M, K), in[1] = b as (..., K, N), out[0] = the output viewed
   as (batch..., M, N); 1-D operands have been given their size-1 axis. */
hl_status hl_matmul(const hl_tensor *a, const hl_tensor *b, hl_tensor **out) {
    hl_status st = check_operands("matmul", HL_OP_MATMUL, a, b, NULL);
    if (st) return st;
    if (a->ndim == 0 || b->ndim == 0)
        return hl_fail(HL_ERR_SHAPE, "matmul: operands need at least one dimension, got %s and "
                       "%s; multiply by a scalar with mul", hl_desc(a), hl_desc(b));
    int na = HL_MAX(a->ndim, 2), nb = HL_MAX(b->ndim, 2);
    int64_t M = a->ndim == 1 ? 1 : a->shape[na - 2], K = a->shape[a->ndim - 1];
    int64_t Kb = b->ndim == 1 ? b->shape[0] : b->shape[nb - 2];
    int64_t N = b->ndim == 1 ? 1 : b->shape[nb - 1];
    if (K != Kb)
        return hl_fail(HL_ERR_SHAPE, "matmul: shapes %s and %s do not match: the last axis of the "
                       "first (%lld) must equal the %s axis of the second (%lld)",
                       hl_shape_str(a->ndim, a->shape), hl_shape_str(b->ndim, b->shape),
                       (long long)K, b->ndim == 1 ? "only" : "second-to-last", (long long)Kb);
    int nbd;
    int64_t shape[HL_MAX_DIMS + 2];
    if (hl_broadcast_shapes("matmul", na - 2, a->shape, nb - 2, b->shape, &nbd, shape))
        return hl_fail(HL_ERR_SHAPE, "matmul: the batch axes of %s and %s cannot be broadcast "
                       "together", hl_shape_str(a->ndim, a->shape),
                       hl_shape_str(b->ndim, b->shape));
    if ((st = check_blas_size("matmul", a->dtype, M, N, K))) return st;
    int nd = nbd;
    if (a->ndim > 1) shape[nd++] = M;
    if (b->ndim > 1) shape[nd++] = N;

    if (!out) return hl_fail(HL_ERR_VALUE, "matmul: output pointer is NULL");
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare("matmul", out, a->dtype, a->storage->device, nd, shape))) return st;
    hl_tensor *av = NULL, *bv = NULL, *ov = NULL, *t = NULL;
    if ((st = hl_check_no_overlap("matmul", *out, a, false)) ||
        (st = hl_check_no_overlap("matmul", *out, b, false)))
        goto done;
    /* Matrices everywhere: (K,) -> (1, K) for a, (K, 1) for b, and the output likewise. */
    if (a->ndim == 1) st = hl_view_unsqueeze(a, 0, &av);
    else av = hl_tensor_retain((hl_tensor *)a);
    if (!st && b->ndim == 1) st = hl_view_unsqueeze(b, 1, &bv);
    else if (!st) bv = hl_tensor_retain((hl_tensor *)b);
    if (st) goto done;
    ov = hl_tensor_retain(*out);
    if (a->ndim == 1) {
        if ((st = hl_view_unsqueeze(ov, nbd, &t))) goto done;
        hl_tensor_release(ov);
        ov = t;
    }
    if (b->ndim == 1) {
        t = NULL;
        if ((st = hl_view_unsqueeze(ov, ov->ndim, &t))) goto done;
        hl_tensor_release(ov);
        ov = t;
    }
    if ((st = blas_ready(&av, M, K, false)) || (st = blas_ready(&bv, K, N, false))) goto done;
    hl_call c = {.op = HL_OP_MATMUL, .n_in = 2, .n_out = 1, .in = {av, bv}};
    st = submit_into(&c, ov);
done:
    hl_tensor_release(av);
    hl_tensor_release(bv);
    hl_tensor_release(ov);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* Call record: in[0] = a, in[1] = b (2-D, as given), in[2] = c broadcast to (M, N) (when
   given: n_in == 3); out[0] (M, N) contiguous; i[0] = trans_a, i[1] = trans_b;
   f[0] = alpha, f[1] = beta. */
hl_status hl_gemm(const hl_tensor *a, const hl_tensor *b, const hl_tensor *c, int trans_a,
                  int trans_b, double alpha, double beta, hl_tensor **out) {
    hl_status st = check_operands("gemm", HL_OP_GEMM, a, b, c);
    if (st) return st;
    if (a->ndim != 2 || b->ndim != 2)
        return hl_fail(HL_ERR_SHAPE, "gemm: expected 2-D a and b, got %s and %s", hl_desc(a),
                       hl_desc(b));
    int64_t M = a->shape[trans_a ? 1 : 0], K = a->shape[trans_a ? 0 : 1];
    int64_t Kb = b->shape[trans_b ? 1 : 0], N = b->shape[trans_b ? 0 : 1];
    if (K != Kb)
        return hl_fail(HL_ERR_SHAPE, "gemm: a %s%s is %lld x %lld and b %s%s is %lld x %lld; the "
                       "inner dimensions %lld and %lld differ",
                       hl_shape_str(2, a->shape), trans_a ? " transposed" : "", (long long)M,
                       (long long)K, hl_shape_str(2, b->shape), trans_b ? " transposed" : "",
                       (long long)Kb, (long long)N, (long long)K, (long long)Kb);
    if ((st = check_blas_size("gemm", a->dtype, M, N, K))) return st;
    int64_t shape[2] = {M, N};
    hl_tensor *cv = NULL;
    if (c && (c->ndim > 2 || hl_view_expand(c, 2, shape, &cv)))
        return hl_fail(HL_ERR_SHAPE, "gemm: c %s cannot be broadcast to the result's shape %s",
                       hl_desc(c), hl_shape_str(2, shape));

    if (!out) return hl_fail(HL_ERR_VALUE, "gemm: output pointer is NULL");
    hl_tensor *caller = *out, *av = hl_tensor_retain((hl_tensor *)a),
              *bv = hl_tensor_retain((hl_tensor *)b);
    if ((st = hl_out_prepare("gemm", out, a->dtype, a->storage->device, 2, shape))) goto done;
    if ((st = hl_check_no_overlap("gemm", *out, a, false)) ||
        (st = hl_check_no_overlap("gemm", *out, b, false)) ||
        (st = hl_check_no_overlap("gemm", *out, cv, true)))
        goto fail;
    if ((st = blas_ready(&av, M, K, trans_a)) || (st = blas_ready(&bv, K, N, trans_b))) goto fail;
    hl_call call = {.op = HL_OP_GEMM, .n_in = cv ? 3 : 2, .n_out = 1, .in = {av, bv, cv},
                    .i = {trans_a != 0, trans_b != 0}, .f = {alpha, beta}};
    st = submit_into(&call, *out);
fail:
    if (st) hl_out_abandon(out, caller);
done:
    hl_tensor_release(av);
    hl_tensor_release(bv);
    hl_tensor_release(cv);
    return st;
}
