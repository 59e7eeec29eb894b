/*
 * fused.cu - the inference products' ops on CUDA: matmul_fused (cuBLAS's GEMM, then the
 * epilogue kernel of epilogue.cuh over its output), gemm_pack_b and conv_pack.
 *
 * What "packed" means on cuda. The packed tensors have one layout on every device, the
 * CPU's (packed_layouts.h, hl_core.h): packing on cuda writes the same bytes the CPU would,
 * so a pack made on one device and moved to the other stays what it claims to be (a layout
 * per device under one shape would let a moved pack be read wrongly without a sound). The
 * CUDA consumers read that layout knowingly:
 *   - matmul_fused with a packed B unpacks it on the device into the (K, N) matrix cuBLAS
 *     reads (one pass over B, in the call's work buffer), then runs the plain product. On
 *     cuda packing buys nothing, cuBLAS reads a plain weight in place: prepare() on cuda
 *     passes the plain weight (hl/onnx/fuse_matmul.py); the packed form is served so that a
 *     program written for the CPU runs unchanged.
 *   - conv_fused does not read a packed weight at all: w (C_out, C_in/g * kh * kw) is already
 *     the matrix its im2col GEMM reads (conv.cu), as the CPU's depthwise path ignores one.
 */
#include "epilogue.cuh"

#include "../src/cpu/blas_layout.h"
#include "../src/matmul_fused_record.h"
#include "../src/packed_layouts.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

enum { NR = HL_PACK_B_NR, KC = HL_PACK_B_KC };

/* ---- gemm_pack_b: in {b, a (K, N) view} out {(P, K, NR) float32 contiguous} ---- */

/* One thread per packed value: which (k, n) of B it holds (packed_layouts.h's order: blocks
   of KC rows, in each the P panels of kc x NR). */
__global__ void pack_b_k(const float *b, int64_t s0, int64_t s1, int64_t K, int64_t N,
                         int64_t P, float *dst) {
    HL_GRID_STRIDE(e, P * K * NR) {
        const int64_t pc = e / (P * KC * NR) * KC;            /* the block's first row */
        const int64_t r = e - hl_packed_b_at(K, P, 0, pc);
        const int64_t kc = K - pc < KC ? K - pc : KC;
        const int64_t p = r / (kc * NR), q = r - p * kc * NR, k = pc + q / NR;
        const int64_t n = p * NR + q % NR;
        dst[e] = n < N ? b[k * s0 + n * s1] : 0.0f;
    }
}

/* The inverse: the (K, N) row-major matrix a packed B holds. */
__global__ void unpack_b_k(const float *packed, int64_t K, int64_t N, int64_t P, float *b) {
    HL_GRID_STRIDE(e, K * N) {
        const int64_t k = e / N, n = e - k * N, pc = k / KC * KC;
        b[e] = packed[hl_packed_b_at(K, P, n / NR, pc) + (k - pc) * NR + n % NR];
    }
}

extern "C" hl_status hl_cuda_gemm_pack_b(const hl_call *c) {
    const hl_tensor *b = c->in[0];
    hl_tensor *o = c->out[0];
    const int64_t K = b->shape[0], N = b->shape[1], P = o->shape[0];
    if (P * K == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    HL_LAUNCH(pack_b_k, hl_cuda_blocks(P * K * NR), HL_CUDA_THREADS, 0, d->stream,
              (const float *)hl_cuda_ptr(b), b->strides[0], b->strides[1], K, N, P,
              (float *)hl_cuda_ptr(o));
    return hl_cuda_check_launch("gemm_pack_b");
}

/* ---- matmul_fused (api/matmul_fused.c's record) ---- */

/* The record: matmul_fused_record.h (a plain b is a 2-D view cuBLAS can read). */
template <class T>
static hl_status run_matmul_fused(const hl_call *c) {
    const hl_matmul_fused_args r = hl_matmul_fused_decode(c);
    const hl_tensor *a = r.a, *b = r.b, *bias = r.bias, *res = r.res;
    hl_tensor *o = r.out;
    const bool packed = r.packed;
    const int64_t M = r.M, N = r.N, K = r.K;
    if (M == 0 || N == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    const hl_dtype dt = a->dtype;
    hl_cuda_mat A = {hl_cuda_ptr(a), K, 1}, C = {hl_cuda_ptr(o), N, 1};
    hl_status st;
    if (K == 0) {  /* an empty sum: zeros (cuBLAS takes no zero-width operands) */
        st = cudaMemsetAsync(hl_cuda_ptr(o), 0, (size_t)(M * N) * sizeof(T), d->stream) ==
                     cudaSuccess
                 ? HL_OK : hl_cuda_check_launch("matmul_fused");
    } else if (packed) {  /* float32 (the entry point checked): unpack into the work buffer */
        const int64_t P = b->shape[0];
        hl_cuda_scratch_lock(d);
        float *plain = (float *)hl_cuda_scratch(d, (size_t)(K * N > 0 ? K * N : 1) * sizeof(float));
        st = plain ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "matmul_fused: out of cuda memory to "
                                     "unpack a %lld x %lld packed b", (long long)K, (long long)N);
        if (!st) {
            HL_LAUNCH(unpack_b_k, hl_cuda_blocks(K * N), HL_CUDA_THREADS, 0, d->stream,
                      (const float *)hl_cuda_ptr(b), K, N, P, plain);
            st = hl_cuda_check_launch("matmul_fused");
        }
        if (!st)
            st = hl_cuda_gemm(d, dt, M, N, K, 1.0, A, hl_cuda_mat{(char *)plain, N, 1}, 0.0, C,
                              "matmul_fused");
        hl_cuda_scratch_unlock(d);
    } else {
        st = hl_cuda_gemm(d, dt, M, N, K, 1.0, A, hl_cuda_mat{hl_cuda_ptr(b), b->strides[0],
                                                              b->strides[1]}, 0.0, C,
                          "matmul_fused");
    }
    if (st) return st;
    hl_cuda_epilogue e = {r.act, r.alpha, r.beta, bias ? hl_cuda_ptr(bias) : NULL,
                          res ? hl_cuda_ptr(res) : NULL, 1, N};
    return hl_cuda_run_epilogue(d, e, (T *)hl_cuda_ptr(o), M * N, "matmul_fused");
}

extern "C" hl_status hl_cuda_matmul_fused(const hl_call *c) {
    const hl_dtype dt = c->out[0]->dtype;
    if (dt == HL_F32) return run_matmul_fused<float>(c);
    if (dt == HL_F64) return run_matmul_fused<double>(c);
    return HL_FAIL(HL_ERR_DTYPE, "matmul_fused: no CUDA kernel for %s", HL_DESC(c->out[0]));
}

/* ---- conv_pack: in {w (C_out, C_in/g, k...) contiguous} out {packed}; i[0] groups,
   i[1] the layout (hl_core.h) ---- */

/* HL_CONV_PACK_PANELS: packed[(grp * panels + p) * K * MR + k * MR + r] =
   w[grp * cg + p * MR + r][k], zeros past the group's channels. */
__global__ void conv_pack_panels_k(const float *w, int64_t cg, int64_t panels, int64_t K,
                                   int64_t total, float *out) {
    const int64_t MR = HL_CONV_PACK_ROWS;
    HL_GRID_STRIDE(e, total) {
        const int64_t gp = e / (K * MR), q = e - gp * K * MR, k = q / MR, r = q - k * MR;
        const int64_t grp = gp / panels, row = (gp - grp * panels) * MR + r;
        out[e] = row < cg ? w[(grp * cg + row) * K + k] : 0.0f;
    }
}

/* HL_CONV_PACK_WINOGRAD (f43 false) and HL_CONV_PACK_WINOGRAD43: the 16 or 36 transformed
   kernels, one thread per (c_out, c_in) pair, in packed_layouts.h's panels; NaN everywhere
   for weights the Winograd path refuses. */
__global__ void conv_pack_winograd_k(const float *w, int64_t c_out, int64_t c_in, bool f43,
                                     bool admit, float *out) {
    const int64_t pairs = c_out * c_in;
    HL_GRID_STRIDE(e, pairs) {
        float *u = out + hl_winograd_packed_at(e / c_in, e % c_in, c_out, c_in);
        if (!admit) {
            for (int i = 0; i < (f43 ? 36 : 16); i++) u[i * pairs] = nanf("");
        } else if (f43) {
            hl_winograd43_weight_tile(w + e * 9, u, pairs);
        } else {
            hl_winograd_weight_tile(w + e * 9, 3, 1, u, pairs);
        }
    }
}

/* Whether the Winograd path admits the n weights at w (packed_layouts.h; f43: by
   F(4x4, 3x3)'s rule), judged on the host from a copy, as the CPU judges them: once per
   pack, not per call. */
static hl_status winograd_admits(hl_cuda_device *d, const float *w, int64_t n, bool f43,
                                 bool *admit) {
    hl_cuda_uncapturable("%s: checks the weights on the host", "conv_pack");
    if (hl_cuda_capturing())
        return HL_FAIL(HL_ERR_DEVICE, "conv_pack: cannot be captured in a graph");
    float *h = (float *)malloc((size_t)n * sizeof(float));
    if (!h) return HL_FAIL(HL_ERR_MEMORY, "conv_pack: no host memory for %lld weights",
                           (long long)n);
    cudaMemcpyAsync(h, w, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, d->stream);
    cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e != cudaSuccess) {
        free(h);
        return HL_FAIL(HL_ERR_DEVICE, "conv_pack: reading the weights failed: %s",
                       cudaGetErrorString(e));
    }
    bool finite = true;
    double most = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; i++) {
        const double a = fabs((double)h[i]);
        finite = finite && a <= FLT_MAX;
        most = a > most ? a : most;
        sum_sq += a * a;
    }
    free(h);
    *admit = f43 ? hl_winograd43_admits(finite, most, sum_sq, n)
                 : hl_winograd_admits(finite, most, sum_sq, n);
    return HL_OK;
}

extern "C" hl_status hl_cuda_conv_pack(const hl_call *c) {
    const hl_tensor *w = c->in[0];
    hl_tensor *o = c->out[0];
    const float *wp = (const float *)hl_cuda_ptr(w);
    float *op = (float *)hl_cuda_ptr(o);
    const int64_t total = hl_cuda_numel(o);
    if (total == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    if (c->i[1] == HL_CONV_PACK_WINOGRAD || c->i[1] == HL_CONV_PACK_WINOGRAD43) {
        const bool f43 = c->i[1] == HL_CONV_PACK_WINOGRAD43;
        const int64_t pairs = w->shape[0] * w->shape[1];
        bool admit = false;
        hl_status st = winograd_admits(d, wp, pairs * 9, f43, &admit);
        if (st) return st;
        HL_LAUNCH(conv_pack_winograd_k, hl_cuda_blocks(pairs), HL_CUDA_THREADS, 0, d->stream,
                  wp, w->shape[0], w->shape[1], f43, admit, op);
    } else {
        const int64_t groups = c->i[0], cg = w->shape[0] / groups, K = o->shape[1];
        const int64_t panels = (cg + HL_CONV_PACK_ROWS - 1) / HL_CONV_PACK_ROWS;
        HL_LAUNCH(conv_pack_panels_k, hl_cuda_blocks(total), HL_CUDA_THREADS, 0, d->stream,
                  wp, cg, panels, K, total, op);
    }
    return hl_cuda_check_launch("conv_pack");
}
