/*
 * linalg.cu - matmul (batched, numpy broadcasting) and gemm on CUDA through cuBLAS (OpenBLAS
 * under emulation). Operands are read in place as the entry points hand them over (row-major
 * with a leading dimension, or a transposed view: cpu/blas_layout.h decides, as on the CPU);
 * cuBLAS is column-major, so each row-major C = A B is computed as C^T = B^T A^T.
 * float16 and bfloat16 go through cublasGemmEx: half operands, products summed in float32,
 * the result rounded once (to the half type, or kept in float32 for hl_cuda_gemm_mixed).
 */
#include "hl_cuda.cuh"

#include "../src/cpu/blas_layout.h"

hl_status hl_cuda_copy_call(const hl_call *c);

typedef hl_cuda_mat mat;

static bool is_half(hl_dtype dt) { return dt == HL_F16 || dt == HL_BF16; }

hl_status hl_cuda_gemm_strided(hl_cuda_device *d, hl_dtype dt, hl_dtype ct, int64_t M,
                               int64_t N, int64_t K, double alpha, mat A, int64_t sa, mat B,
                               int64_t sb, double beta, mat C, int64_t sc, int64_t batch,
                               const char *op) {
    if (M == 0 || N == 0 || batch == 0) return HL_OK;
    bool ta, tb, tc;
    int64_t lda, ldb, ldc;
    if (!hl_blas_layout(M, K, A.s0, A.s1, &ta, &lda) || !hl_blas_layout(K, N, B.s0, B.s1, &tb, &ldb) ||
        !hl_blas_layout(M, N, C.s0, C.s1, &tc, &ldc) || tc)
        return HL_FAIL(HL_ERR_INTERNAL, "%s: operand layout cuBLAS cannot read", op);
    if (K == 0) lda = ldb = 1;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ilda = (int)(lda < 1 ? 1 : lda), ildb = (int)(ldb < 1 ? 1 : ldb);
    int m = (int)N, n = (int)M, k = (int)K, count = (int)batch;
    /* strides in elements, as cuBLAS takes them (C^T = B^T A^T: B is cuBLAS's first operand) */
    long long s1 = (long long)sb, s2 = (long long)sa, s3 = (long long)sc;
    cublasStatus_t st;
    pthread_mutex_lock(&d->blas_mutex);
    if (is_half(dt)) {  /* half operands, float32 products and sums (tensor cores' contract) */
        float a = (float)alpha, b = (float)beta;
        cudaDataType ht = dt == HL_F16 ? CUDA_R_16F : CUDA_R_16BF;
        cudaDataType cdt = ct == HL_F32 ? CUDA_R_32F : ht;
        st = batch == 1
                 ? cublasGemmEx(d->blas, opb, opa, m, n, k, &a, B.p, ht, ildb, A.p, ht, ilda, &b,
                                C.p, cdt, (int)ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
                 : cublasGemmStridedBatchedEx(d->blas, opb, opa, m, n, k, &a, B.p, ht, ildb, s1,
                                              A.p, ht, ilda, s2, &b, C.p, cdt, (int)ldc, s3,
                                              count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else if (dt == HL_F32) {
        float a = (float)alpha, b = (float)beta;
        const float *pb = (const float *)B.p, *pa = (const float *)A.p;
        st = batch == 1 ? cublasSgemm(d->blas, opb, opa, m, n, k, &a, pb, ildb, pa, ilda, &b,
                                      (float *)C.p, (int)ldc)
                        : cublasSgemmStridedBatched(d->blas, opb, opa, m, n, k, &a, pb, ildb, s1,
                                                    pa, ilda, s2, &b, (float *)C.p, (int)ldc,
                                                    s3, count);
    } else {
        const double *pb = (const double *)B.p, *pa = (const double *)A.p;
        st = batch == 1 ? cublasDgemm(d->blas, opb, opa, m, n, k, &alpha, pb, ildb, pa, ilda,
                                      &beta, (double *)C.p, (int)ldc)
                        : cublasDgemmStridedBatched(d->blas, opb, opa, m, n, k, &alpha, pb,
                                                    ildb, s1, pa, ilda, s2, &beta,
                                                    (double *)C.p, (int)ldc, s3, count);
    }
    pthread_mutex_unlock(&d->blas_mutex);
    if (st != CUBLAS_STATUS_SUCCESS)
        return HL_FAIL(HL_ERR_DEVICE, "%s: cuBLAS gemm failed (status %d)", op, (int)st);
    return HL_OK;
}

hl_status hl_cuda_gemm_mixed(hl_cuda_device *d, hl_dtype dt, hl_dtype ct, int64_t M, int64_t N,
                             int64_t K, double alpha, mat A, mat B, double beta, mat C,
                             const char *op) {
    return hl_cuda_gemm_strided(d, dt, ct, M, N, K, alpha, A, 0, B, 0, beta, C, 0, 1, op);
}

hl_status hl_cuda_gemm(hl_cuda_device *d, hl_dtype dt, int64_t M, int64_t N, int64_t K,
                       double alpha, mat A, mat B, double beta, mat C, const char *op) {
    return hl_cuda_gemm_mixed(d, dt, dt, M, N, K, alpha, A, B, beta, C, op);
}

static bool gemm_dtype(hl_dtype dt) { return dt == HL_F32 || dt == HL_F64 || is_half(dt); }

/* in[0] = a (..., M, K), in[1] = b (..., K, N), out[0] (..., M, N) contiguous. */
extern "C" hl_status hl_cuda_matmul(const hl_call *c) {
    const hl_tensor *a = c->in[0], *b = c->in[1];
    hl_tensor *o = c->out[0];
    int nd = o->ndim, na = a->ndim, nb = b->ndim, nbd = nd - 2;
    hl_dtype dt = a->dtype;
    if (!gemm_dtype(dt))
        return HL_FAIL(HL_ERR_DTYPE, "matmul: no CUDA kernel for %s", HL_DESC(a));
    int64_t M = o->shape[nd - 2], N = o->shape[nd - 1], K = a->shape[na - 1];
    int64_t esz = (int64_t)hl_cuda_dtype_size(dt), nbatch = 1;
    int64_t bshape[HL_MAX_DIMS], as[HL_MAX_DIMS], bs[HL_MAX_DIMS], cs[HL_MAX_DIMS];
    for (int d = 0; d < nbd; d++) {
        int ia = d - (nbd - (na - 2)), ib = d - (nbd - (nb - 2));
        bshape[d] = o->shape[d];
        as[d] = (ia >= 0 && a->shape[ia] != 1) ? a->strides[ia] : 0;
        bs[d] = (ib >= 0 && b->shape[ib] != 1) ? b->strides[ib] : 0;
        cs[d] = o->strides[d];
        nbatch *= o->shape[d];
    }
    hl_cuda_device *dev = hl_cuda_dev(hl_cuda_call_device(c));
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t ao = 0, bo = 0, co = 0, rest = t;
        for (int d = nbd - 1; d >= 0; d--) {
            int64_t i = rest % bshape[d];
            rest /= bshape[d];
            ao += i * as[d];
            bo += i * bs[d];
            co += i * cs[d];
        }
        hl_status st = hl_cuda_gemm(dev, dt, M, N, K, 1.0,
                                mat{hl_cuda_ptr(a) + ao * esz, a->strides[na - 2], a->strides[na - 1]},
                                mat{hl_cuda_ptr(b) + bo * esz, b->strides[nb - 2], b->strides[nb - 1]},
                                0.0, mat{hl_cuda_ptr(o) + co * esz, o->strides[nd - 2],
                                         o->strides[nd - 1]}, "matmul");
        if (st) return st;
    }
    return HL_OK;
}

/* in[0] = a, in[1] = b (2-D), in[2] = c broadcast to (M, N) when n_in == 3; out[0] (M, N);
   i[0] = trans_a, i[1] = trans_b; f[0] = alpha, f[1] = beta. */
extern "C" hl_status hl_cuda_gemm(const hl_call *c) {
    const hl_tensor *a = c->in[0], *b = c->in[1];
    hl_tensor *o = c->out[0];
    bool ta = c->i[0] != 0, tb = c->i[1] != 0;
    double beta = c->f[1];
    if (!gemm_dtype(a->dtype))
        return HL_FAIL(HL_ERR_DTYPE, "gemm: no CUDA kernel for %s", HL_DESC(a));
    if (c->n_in == 3) {
        const hl_tensor *cv = c->in[2];
        bool same = cv->storage == o->storage && cv->offset == o->offset &&
                    memcmp(cv->strides, o->strides, sizeof(int64_t) * 2) == 0;
        if (!same) {  /* out = c first; cuBLAS then scales it by beta */
            hl_call cp;
            memset(&cp, 0, sizeof cp);
            cp.op = HL_OP_COPY;
            cp.n_in = cp.n_out = 1;
            cp.in[0] = cv;
            cp.out[0] = o;
            hl_status st = hl_cuda_copy_call(&cp);
            if (st) return st;
        }
    } else {
        beta = 0;
    }
    int64_t M = o->shape[0], N = o->shape[1], K = ta ? a->shape[0] : a->shape[1];
    hl_cuda_device *dev = hl_cuda_dev(hl_cuda_call_device(c));
    return hl_cuda_gemm(dev, a->dtype, M, N, K, c->f[0],
                    mat{hl_cuda_ptr(a), ta ? a->strides[1] : a->strides[0],
                        ta ? a->strides[0] : a->strides[1]},
                    mat{hl_cuda_ptr(b), tb ? b->strides[1] : b->strides[0],
                        tb ? b->strides[0] : b->strides[1]},
                    beta, mat{hl_cuda_ptr(o), o->strides[0], o->strides[1]}, "gemm");
}
