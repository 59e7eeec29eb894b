/*
 * resize.cu - resize (ONNX Resize: nearest, n-linear) and its gradient on CUDA. The per-axis
 * weight matrices are built on the host by resize_weights.h, exactly as for the CPU, copied
 * to the device, and one kernel computes each destination element as the sum over the
 * product of its rows (a gather: one thread per element, a fixed order, so the gradient is
 * deterministic). Nearest forward moves elements by size (any dtype); the weighted form runs
 * in float32/float64 with double accumulators (float16/bfloat16 read widened, each result
 * rounded once: the gradient's sums too).
 */
#include "convert.cuh"
#include "../src/resize_weights.h"

/* Offsets into the device buffer of every axis's ptr, idx and w arrays. */
struct axes {
    int nd;
    int64_t dshape[HL_MAX_DIMS], dstrides[HL_MAX_DIMS], sstrides[HL_MAX_DIMS];
    int64_t ptr[HL_MAX_DIMS], idx[HL_MAX_DIMS], w[HL_MAX_DIMS];  /* int64 / double offsets */
};

template <class T, bool PICK>
__global__ void resize_k(axes a, const char *buf, const T *src, T *dst, int64_t n) {
    const int64_t *ints = (const int64_t *)buf;
    const double *dbl = (const double *)buf;
    HL_GRID_STRIDE(e, n) {
        int64_t jd[HL_MAX_DIMS], k[HL_MAX_DIMS], rest = e, doff = 0;
        bool empty = false;
        for (int d = a.nd - 1; d >= 0; d--) {
            jd[d] = rest % a.dshape[d];
            rest /= a.dshape[d];
            doff += jd[d] * a.dstrides[d];
            k[d] = ints[a.ptr[d] + jd[d]];
            empty |= k[d] == ints[a.ptr[d] + jd[d] + 1];
        }
        if (PICK) {  /* nearest: one input position per axis */
            int64_t soff = 0;
            for (int d = 0; d < a.nd; d++) soff += ints[a.idx[d] + k[d]] * a.sstrides[d];
            dst[doff] = src[soff];
            continue;
        }
        double acc = 0;
        while (!empty) {
            int64_t soff = 0;
            double wt = 1;
            for (int d = 0; d < a.nd; d++) {
                soff += ints[a.idx[d] + k[d]] * a.sstrides[d];
                wt *= dbl[a.w[d] + k[d]];
            }
            acc += wt * (double)hl_widen(src[soff]);
            int d = a.nd - 1;  /* odometer over the axes' rows */
            for (; d >= 0; d--) {
                if (++k[d] < ints[a.ptr[d] + jd[d] + 1]) break;
                k[d] = ints[a.ptr[d] + jd[d]];
            }
            if (d < 0) break;
        }
        dst[doff] = hl_narrow<T>(acc);
    }
}

template <class T, bool PICK>
static hl_status launch(hl_cuda_device *d, const axes &a, const char *buf, const hl_tensor *src,
                        hl_tensor *dst, int64_t n, const char *op) {
    auto resize_kernel = resize_k<T, PICK>;
    HL_LAUNCH(resize_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, a, buf,
              (const T *)hl_cuda_ptr(src), (T *)hl_cuda_ptr(dst), n);
    return hl_cuda_check_launch(op);
}

/* The matrices of every axis (transposed for the gradient), packed into one host block
   [ints..., doubles...] and copied to the scratch buffer; then the kernel. */
static hl_status run(const hl_call *c, const char *op, const int64_t *n_in, const int64_t *n_out,
                     bool adjoint) {
    const hl_tensor *src = c->in[0];
    hl_tensor *dst = c->out[0];
    int nd = dst->ndim;
    int64_t n = hl_cuda_numel(dst);
    if (n == 0) return HL_OK;
    csr A[HL_MAX_DIMS];
    memset(A, 0, sizeof A);
    bool ok = true;
    int64_t rows[HL_MAX_DIMS], nints = 0, ndbl = 0;
    for (int d = 0; d < nd && ok; d++) {
        csr fwd;
        memset(&fwd, 0, sizeof fwd);
        ok = axis_matrix(&fwd, c, d, n_in[d], n_out[d]);
        if (ok && adjoint) ok = transpose(&A[d], &fwd, n_out[d], n_in[d]);
        if (ok && !adjoint) {
            A[d] = fwd;
            memset(&fwd, 0, sizeof fwd);
        }
        csr_free(&fwd);
        rows[d] = adjoint ? n_in[d] : n_out[d];
        if (ok) {
            nints += rows[d] + 1 + A[d].ptr[rows[d]];
            ndbl += A[d].ptr[rows[d]];
        }
    }
    axes a;
    memset(&a, 0, sizeof a);
    a.nd = nd;
    char *host = ok ? (char *)malloc((size_t)(nints + ndbl) * 8 + 8) : NULL;
    hl_status st = host ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "%s: out of memory for the "
                                          "interpolation weights", op);
    if (!st) {
        int64_t *ints = (int64_t *)host, at = 0;
        double *dbl = (double *)host;
        int64_t dat = nints;  /* doubles after the ints, in 8-byte units */
        for (int d = 0; d < nd; d++) {
            int64_t nnz = A[d].ptr[rows[d]];
            a.dshape[d] = dst->shape[d];
            a.dstrides[d] = dst->strides[d];
            a.sstrides[d] = src->strides[d];
            a.ptr[d] = at;
            memcpy(ints + at, A[d].ptr, sizeof(int64_t) * (size_t)(rows[d] + 1));
            at += rows[d] + 1;
            a.idx[d] = at;
            memcpy(ints + at, A[d].idx, sizeof(int64_t) * (size_t)nnz);
            at += nnz;
            a.w[d] = dat;
            memcpy(dbl + dat, A[d].w, sizeof(double) * (size_t)nnz);
            dat += nnz;
        }
    }
    for (int d = 0; d < nd; d++) csr_free(&A[d]);
    if (st) return st;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_uncapturable("%s: uploads its interpolation weights from the host", op);
    hl_cuda_scratch_lock(d);
    size_t bytes = (size_t)(nints + ndbl) * 8 + 8;
    char *buf = (char *)hl_cuda_scratch(d, bytes);
    if (!buf) st = HL_FAIL(HL_ERR_MEMORY, "%s: out of cuda memory for the weights", op);
    else if (cudaMemcpyAsync(buf, host, bytes, cudaMemcpyHostToDevice, d->stream) != cudaSuccess ||
             cudaStreamSynchronize(d->stream) != cudaSuccess)  /* host is freed below */
        st = hl_cuda_check_launch(op);
    if (!st) {
        bool pick = !adjoint && c->i[0] == 0;
        if (pick) {
            switch (hl_cuda_dtype_size(dst->dtype)) {
                case 1: st = launch<uint8_t, true>(d, a, buf, src, dst, n, op); break;
                case 2: st = launch<uint16_t, true>(d, a, buf, src, dst, n, op); break;
                case 4: st = launch<uint32_t, true>(d, a, buf, src, dst, n, op); break;
                default: st = launch<uint64_t, true>(d, a, buf, src, dst, n, op); break;
            }
        } else if (dst->dtype == HL_F32) {
            st = launch<float, false>(d, a, buf, src, dst, n, op);
        } else if (dst->dtype == HL_F64) {
            st = launch<double, false>(d, a, buf, src, dst, n, op);
        } else if (dst->dtype == HL_F16) {
            st = launch<hl_f16, false>(d, a, buf, src, dst, n, op);
        } else if (dst->dtype == HL_BF16) {
            st = launch<hl_bf16, false>(d, a, buf, src, dst, n, op);
        } else {
            st = HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", op, HL_DESC(dst));
        }
    }
    hl_cuda_scratch_unlock(d);
    free(host);
    return st;
}

/* in[0] = x, out[0]; i[0] mode, i[1] coordinates, i[2] nearest rule, i[3] scales given. */
extern "C" hl_status hl_cuda_resize(const hl_call *c) {
    return run(c, "resize", c->in[0]->shape, c->out[0]->shape, false);
}

/* in[0] = dy, out[0] = dx. */
extern "C" hl_status hl_cuda_resize_grad(const hl_call *c) {
    return run(c, "resize_grad", c->out[0]->shape, c->in[0]->shape, true);
}
