/*
 * matmul_fused_record.h - api/matmul_fused.c's record decoded in one place, for the kernels
 * that run it (cpu/matmul_fused.c, cuda/fused.cu): C and CUDA C++ alike.
 *
 * Record: in[0] = a (..., K), contiguous; in[1] = b: packed (P, K, HL_PACK_B_NR) when
 * i[0] >= 0 (i[0] = N), else a 2-D (K, N) view; then bias (N,) contiguous when i[2] and
 * residual (the output's shape, contiguous) when i[3]; out[0] (..., N), contiguous. i[1] is
 * the activation (HL_CONV_ACT_*), f[0] and f[1] its alpha and beta.
 */
#ifndef HL_MATMUL_FUSED_RECORD_H
#define HL_MATMUL_FUSED_RECORD_H

#include "core.h"

typedef struct {
    const hl_tensor *a, *b, *bias, *res;  /* bias and res NULL when not given */
    hl_tensor *out;
    bool packed;
    int act;
    double alpha, beta;
    int64_t M, N, K;  /* out is M x N and a M x K, a's leading dimensions folded into M */
} hl_matmul_fused_args;

static inline hl_matmul_fused_args hl_matmul_fused_decode(const hl_call *c) {
    hl_matmul_fused_args r;
    int k = 2;
    r.a = c->in[0];
    r.b = c->in[1];
    r.bias = c->i[2] ? c->in[k++] : NULL;
    r.res = c->i[3] ? c->in[k++] : NULL;
    r.out = c->out[0];
    r.packed = c->i[0] >= 0;
    r.act = (int)c->i[1];
    r.alpha = c->f[0];
    r.beta = c->f[1];
    r.K = r.a->shape[r.a->ndim - 1];
    r.N = r.out->shape[r.out->ndim - 1];
    r.M = 1;
    for (int d = 0; d < r.a->ndim - 1; d++) r.M *= r.a->shape[d];
    return r;
}

#endif
