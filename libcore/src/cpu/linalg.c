/*
 * linalg.c - CPU kernels of matmul (batched, numpy broadcasting) and gemm.
 *
 * float32/float64 go to OpenBLAS, reading each operand in place: a row-major matrix with any
 * leading dimension, or a transposed view as CblasTrans. The entry points copy an operand
 * that fits neither, and hand us a contiguous output. BLAS is only ever called from here,
 * outside any OpenMP region, so its threads and ours never run at once.
 * int32/int64 use a plain loop (ikj order, int64 accumulation that wraps like numpy),
 * parallel over the rows of all batches.
 */
#include <cblas.h>
#include <stdlib.h>

#include "blas_layout.h"
#include "dtypes.h"
#include "thread_pool.h"

hl_status hl_cpu_copy(const hl_call *c);
hl_status hl_cpu_gemm_inference(const hl_call *c);

/* Element (i, j) of a matrix is at p + (i*s0 + j*s1) elements. */
typedef struct {
    char *p;
    int64_t s0, s1;
} mat_t;

/* C = beta * C, where the product adds nothing (K == 0); beta == 0 clears even NaN. */
static void scale(hl_dtype dt, int64_t M, int64_t N, double beta, mat_t C) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            int64_t k = i * C.s0 + j * C.s1;
            switch (dt) {
                case HL_F32: { float *v = (float *)C.p + k; *v = beta == 0 ? 0 : (float)(beta * *v); break; }
                case HL_F64: { double *v = (double *)C.p + k; *v = beta == 0 ? 0 : beta * *v; break; }
                case HL_I32: { int32_t *v = (int32_t *)C.p + k; *v = beta == 0 ? 0 : hl_sat_i32(beta * *v); break; }
                default: { int64_t *v = (int64_t *)C.p + k; *v = beta == 0 ? 0 : hl_sat_i64(beta * (double)*v); break; }
            }
        }
}

/* A fallback for operands BLAS cannot take; the entry points make it unreachable. */
#define NAIVE_FLOAT(sfx, T)                                                                    \
    static void naive_##sfx(int64_t M, int64_t N, int64_t K, double alpha, mat_t A, mat_t B,    \
                            double beta, mat_t C) {                                            \
        const T *a = (const T *)A.p, *b = (const T *)B.p;                                      \
        T *c = (T *)C.p;                                                                       \
        for (int64_t i = 0; i < M; i++)                                                        \
            for (int64_t j = 0; j < N; j++) {                                                  \
                double t = 0;                                                                  \
                for (int64_t k = 0; k < K; k++) t += (double)a[i * A.s0 + k * A.s1] * b[k * B.s0 + j * B.s1]; \
                T *dst = c + i * C.s0 + j * C.s1;                                              \
                *dst = (T)(alpha * t + (beta == 0 ? 0 : beta * *dst));                          \
            }                                                                                  \
    }
NAIVE_FLOAT(f32, float)
NAIVE_FLOAT(f64, double)

/* C = A @ B for K == 1 (an outer product: the weight gradient of a Linear layer at batch 1):
   each element is one rounded product, which is what gemm computes for K == 1, without gemm's
   clearing of C and packing of B. alpha == 1 and beta == 0 only. Rows split over threads
   from OUTER_PAR_MIN elements (no BLAS runs inside). */
enum { OUTER_PAR_MIN = 1 << 15 };
typedef struct {
    int64_t N;
    mat_t A, B, C;
} outer_rows;
#define OUTER(sfx, T)                                                                          \
    static void outer_rows_##sfx(int64_t begin, int64_t end, void *arg);                       \
    static void outer_##sfx(int64_t M, int64_t N, mat_t A, mat_t B, mat_t C) {                 \
        const outer_rows q = {N, A, B, C};                                                     \
        const bool par = M * N >= OUTER_PAR_MIN && M > 1;                                      \
        hl_parallel_for(M, par ? HL_MAX(1, OUTER_PAR_MIN / 4 / HL_MAX(N, 1)) : M,              \
                        outer_rows_##sfx, (void *)&q);                                         \
    }                                                                                          \
    static void outer_rows_##sfx(int64_t begin, int64_t end, void *arg) {                      \
        const outer_rows *q = arg;                                                             \
        const int64_t N = q->N;                                                                \
        const mat_t A = q->A, B = q->B, C = q->C;                                              \
        const T *a = (const T *)A.p, *b = (const T *)B.p;                                      \
        for (int64_t i = begin; i < end; i++) {                                                \
            T ai = a[i * A.s0], *c = (T *)C.p + i * C.s0;                                      \
            if (B.s1 == 1 && C.s1 == 1) for (int64_t j = 0; j < N; j++) c[j] = ai * b[j];      \
            else for (int64_t j = 0; j < N; j++) c[j * C.s1] = ai * b[j * B.s1];               \
        }                                                                                      \
    }
OUTER(f32, float)
OUTER(f64, double)

/* C (one row) = alpha * a @ B + beta * C as a matrix-vector product: at M == 1 (a Linear
   layer at batch 1) gemm would copy all of B into its packed layout for one use. */
static bool gemv_row(hl_dtype dt, int64_t N, int64_t K, double alpha, mat_t A, mat_t B,
                     double beta, mat_t C) {
    bool tb;
    int64_t ldb;
    if (!hl_blas_layout(K, N, B.s0, B.s1, &tb, &ldb) || A.s1 < 1 || A.s1 > INT_MAX ||
        C.s1 < 1 || C.s1 > INT_MAX)
        return false;
    if (beta == 0) {  /* BLAS may scale C by 0 (NaN stays NaN): clear it */
        if (C.s1 == 1) memset(C.p, 0, (size_t)N * hl_dtype_size(dt));
        else scale(dt, 1, N, 0, C);
    }
    /* y = B^T a: B row-major K x N is "Trans" of a K x N matrix; a transposed B (N x K
       row-major with leading dimension ldb) is "NoTrans" of N x K */
    enum CBLAS_TRANSPOSE op = tb ? CblasNoTrans : CblasTrans;
    int rows = (int)(tb ? N : K), cols = (int)(tb ? K : N);
    if (dt == HL_F32)
        scipy_cblas_sgemv(CblasRowMajor, op, rows, cols, (float)alpha, (const float *)B.p,
                          (int)ldb, (const float *)A.p, (int)A.s1, (float)beta, (float *)C.p,
                          (int)C.s1);
    else
        scipy_cblas_dgemv(CblasRowMajor, op, rows, cols, alpha, (const double *)B.p, (int)ldb,
                          (const double *)A.p, (int)A.s1, beta, (double *)C.p, (int)C.s1);
    return true;
}

/* C = alpha * A @ B + beta * C for one float matrix, through BLAS when the layouts allow. */
static void gemm_float(hl_dtype dt, int64_t M, int64_t N, int64_t K, double alpha, mat_t A,
                       mat_t B, double beta, mat_t C) {
    if (M == 0 || N == 0) return;
    if (K == 0) {
        scale(dt, M, N, beta, C);
        return;
    }
    if (K == 1 && alpha == 1 && beta == 0) {
        if (dt == HL_F32) outer_f32(M, N, A, B, C);
        else outer_f64(M, N, A, B, C);
        return;
    }
    if (M == 1 && gemv_row(dt, N, K, alpha, A, B, beta, C)) return;
    bool ta, tb, tc;
    int64_t lda, ldb, ldc;
    if (hl_blas_layout(M, K, A.s0, A.s1, &ta, &lda) && hl_blas_layout(K, N, B.s0, B.s1, &tb, &ldb) &&
        hl_blas_layout(M, N, C.s0, C.s1, &tc, &ldc) && !tc) {
        enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
        if (dt == HL_F32)
            scipy_cblas_sgemm(CblasRowMajor, opa, opb, (int)M, (int)N, (int)K, (float)alpha,
                              (const float *)A.p, (int)lda, (const float *)B.p, (int)ldb,
                              (float)beta, (float *)C.p, (int)ldc);
        else
            scipy_cblas_dgemm(CblasRowMajor, opa, opb, (int)M, (int)N, (int)K, alpha,
                              (const double *)A.p, (int)lda, (const double *)B.p, (int)ldb, beta,
                              (double *)C.p, (int)ldc);
        return;
    }
    if (dt == HL_F32) naive_f32(M, N, K, alpha, A, B, beta, C);
    else naive_f64(M, N, K, alpha, A, B, beta, C);
}

/* One row of C = alpha * A @ B + beta * C for integers; acc holds N int64 (wrapping). */
#define INT_ROW(sfx, T, SAT)                                                                   \
    static void introw_##sfx(int64_t N, int64_t K, double alpha, const char *ap, int64_t as1,  \
                             const char *bp, int64_t bs0, int64_t bs1, double beta, char *cp,  \
                             int64_t cs1, uint64_t *acc) {                                     \
        const T *a = (const T *)ap, *b = (const T *)bp;                                        \
        T *c = (T *)cp;                                                                        \
        for (int64_t j = 0; j < N; j++) acc[j] = 0;                                            \
        for (int64_t k = 0; k < K; k++) {                                                      \
            uint64_t av = (uint64_t)(int64_t)a[k * as1];                                       \
            if (!av) continue;                                                                 \
            const T *br = b + k * bs0;                                                         \
            if (bs1 == 1) for (int64_t j = 0; j < N; j++) acc[j] += av * (uint64_t)(int64_t)br[j]; \
            else for (int64_t j = 0; j < N; j++) acc[j] += av * (uint64_t)(int64_t)br[j * bs1]; \
        }                                                                                      \
        for (int64_t j = 0; j < N; j++) {                                                      \
            T *dst = c + j * cs1;                                                              \
            if (alpha == 1 && beta == 0) *dst = (T)acc[j];                                     \
            else if (alpha == 1 && beta == 1) *dst = (T)(acc[j] + (uint64_t)(int64_t)*dst);    \
            else *dst = SAT(alpha * (double)(int64_t)acc[j] + (beta == 0 ? 0 : beta * (double)*dst)); \
        }                                                                                      \
    }
INT_ROW(i32, int32_t, hl_sat_i32)
INT_ROW(i64, int64_t, hl_sat_i64)

typedef void (*introw_fn)(int64_t N, int64_t K, double alpha, const char *ap, int64_t as1,
                          const char *bp, int64_t bs0, int64_t bs1, double beta, char *cp,
                          int64_t cs1, uint64_t *acc);

/* A batch of matrix products: for batch index t, the matrices start at element offsets
   aoff[t], boff[t], coff[t] (computed by the caller's odometer in off()). */
typedef struct {
    hl_dtype dt;
    int64_t M, N, K, nbatch;
    double alpha, beta;
    char *a, *b, *c;
    int64_t as0, as1, bs0, bs1, cs0, cs1;
    int nbd;                                   /* batch axes */
    int64_t bshape[HL_MAX_DIMS], abs_[HL_MAX_DIMS], bbs[HL_MAX_DIMS], cbs[HL_MAX_DIMS];
} batch_t;

static void batch_offsets(const batch_t *P, int64_t t, int64_t *ao, int64_t *bo, int64_t *co) {
    *ao = *bo = *co = 0;
    for (int d = P->nbd - 1; d >= 0; d--) {
        int64_t i = t % P->bshape[d];
        t /= P->bshape[d];
        *ao += i * P->abs_[d];
        *bo += i * P->bbs[d];
        *co += i * P->cbs[d];
    }
}

typedef struct {
    const batch_t *P;
    introw_fn row;
    int64_t esz;
} int_rows_job;

/* Rows [r0, r1) of all batches' integer products, with one accumulator row per chunk. */
static hl_status int_rows(int64_t r0, int64_t r1, void *ctx) {
    const int_rows_job *q = ctx;
    const batch_t *P = q->P;
    const int64_t esz = q->esz;
    uint64_t *acc = malloc(sizeof(uint64_t) * (size_t)P->N);
    if (!acc) return hl_fail(HL_ERR_MEMORY, "matmul: out of memory for a row of %lld "
                             "accumulators", (long long)P->N);
    for (int64_t r = r0; r < r1; r++) {
        int64_t ao, bo, co, i = r % P->M;
        batch_offsets(P, r / P->M, &ao, &bo, &co);
        q->row(P->N, P->K, P->alpha, P->a + (ao + i * P->as0) * esz, P->as1, P->b + bo * esz,
               P->bs0, P->bs1, P->beta, P->c + (co + i * P->cs0) * esz, P->cs1, acc);
    }
    free(acc);
    return HL_OK;
}

static hl_status run_batches(const batch_t *P) {
    if (P->dt != HL_F32 && P->dt != HL_F64 && P->dt != HL_I32 && P->dt != HL_I64)
        return hl_fail(HL_ERR_DTYPE, "matmul: no CPU kernel for %s", hl_dtype_name(P->dt));
    int64_t esz = (int64_t)hl_dtype_size(P->dt);
    if (P->dt == HL_F32 || P->dt == HL_F64) {
        for (int64_t t = 0; t < P->nbatch; t++) {
            int64_t ao, bo, co;
            batch_offsets(P, t, &ao, &bo, &co);
            gemm_float(P->dt, P->M, P->N, P->K, P->alpha,
                       (mat_t){P->a + ao * esz, P->as0, P->as1},
                       (mat_t){P->b + bo * esz, P->bs0, P->bs1}, P->beta,
                       (mat_t){P->c + co * esz, P->cs0, P->cs1});
        }
        return HL_OK;
    }
    if (P->M == 0 || P->N == 0) return HL_OK;
    int_rows_job q = {P, P->dt == HL_I32 ? introw_i32 : introw_i64, esz};
    const int64_t rows = P->nbatch * P->M;
    /* each row of c is one item's: any split gives the same integers */
    return hl_parallel_try(rows, rows * P->N * P->K >= 32768 ? 1 : rows, int_rows, &q);
}

/* in[0] = a (..., M, K), in[1] = b (..., K, N), out[0] (..., M, N) with the broadcast batch
   axes; the entry point has turned 1-D operands into matrices. */
hl_status hl_cpu_matmul(const hl_call *c) {
    const hl_tensor *a = c->in[0], *b = c->in[1];
    hl_tensor *o = c->out[0];
    int nd = o->ndim, na = a->ndim, nb = b->ndim;
    batch_t P = {.dt = a->dtype, .M = o->shape[nd - 2], .N = o->shape[nd - 1],
                 .K = a->shape[na - 1], .alpha = 1, .beta = 0, .a = hl_ptr(a), .b = hl_ptr(b),
                 .c = hl_ptr(o), .as0 = a->strides[na - 2], .as1 = a->strides[na - 1],
                 .bs0 = b->strides[nb - 2], .bs1 = b->strides[nb - 1],
                 .cs0 = o->strides[nd - 2], .cs1 = o->strides[nd - 1], .nbd = nd - 2};
    P.nbatch = 1;
    for (int d = 0; d < P.nbd; d++) {
        int ia = d - (P.nbd - (na - 2)), ib = d - (P.nbd - (nb - 2));
        P.bshape[d] = o->shape[d];
        P.abs_[d] = (ia >= 0 && a->shape[ia] != 1) ? a->strides[ia] : 0;
        P.bbs[d] = (ib >= 0 && b->shape[ib] != 1) ? b->strides[ib] : 0;
        P.cbs[d] = o->strides[d];
        P.nbatch *= o->shape[d];
    }
    return run_batches(&P);
}

/* in[0] = a, in[1] = b (2-D), in[2] = c broadcast to (M, N) when n_in == 3; out[0] (M, N);
   i[0] = trans_a, i[1] = trans_b; f[0] = alpha, f[1] = beta. */
hl_status hl_cpu_gemm(const hl_call *c) {
    if (c->op != HL_OP_GEMM) return hl_cpu_gemm_inference(c);  /* matmul_fused.c */
    const hl_tensor *a = c->in[0], *b = c->in[1];
    hl_tensor *o = c->out[0];
    bool ta = c->i[0] != 0, tb = c->i[1] != 0;
    double beta = c->f[1];
    if (c->n_in == 3) {
        const hl_tensor *cv = c->in[2];
        bool same = cv->storage == o->storage && cv->offset == o->offset &&
                    memcmp(cv->strides, o->strides, sizeof(int64_t) * 2) == 0;
        if (!same) {  /* out = c first; BLAS then scales it by beta */
            hl_call cp = {.op = HL_OP_COPY, .n_in = 1, .n_out = 1, .in = {cv}, .out = {o}};
            hl_status st = hl_cpu_copy(&cp);
            if (st) return st;
        }
    } else {
        beta = 0;
    }
    batch_t P = {.dt = a->dtype, .M = o->shape[0], .N = o->shape[1],
                 .K = ta ? a->shape[0] : a->shape[1], .nbatch = 1, .alpha = c->f[0],
                 .beta = beta, .a = hl_ptr(a), .b = hl_ptr(b), .c = hl_ptr(o),
                 .as0 = ta ? a->strides[1] : a->strides[0], .as1 = ta ? a->strides[0] : a->strides[1],
                 .bs0 = tb ? b->strides[1] : b->strides[0], .bs1 = tb ? b->strides[0] : b->strides[1],
                 .cs0 = o->strides[0], .cs1 = o->strides[1], .nbd = 0};
    return run_batches(&P);
}
