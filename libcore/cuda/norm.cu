/*
 * norm.cu - batch norm and layer norm, forward and backward, on CUDA with the CPU's formulas
 * (cpu/norm.c; record layouts in api/norm.c): sums in double, the running variance unbiased
 * (PyTorch), inference using the running statistics. Batch norm: several blocks per channel
 * each sum a range of it (a fixed tree of warp shuffles), a thread per channel combines the
 * ranges in order (the same result every run), then an element-wise kernel applies them.
 * Layer norm: a warp per row (and a thread per column for dscale/dbias, whose reads are
 * coalesced that way).
 * float16 and bfloat16 (every operand in the one dtype) are read widened, their statistics
 * computed in double like float32's, and each stored value rounded once.
 */
#include "convert.cuh"

/* A per-channel vector (C entries, any stride), or absent. */
template <class T> struct vec {
    T *p;
    int64_t s;
    __device__ double get(int64_t i) const { return (double)hl_widen(p[i * s]); }
    __device__ void set(int64_t i, double v) const { p[i * s] = hl_narrow<T>(v); }
};
template <class T> static vec<T> vec_of(const hl_tensor *t) {
    vec<T> v;
    v.p = t ? (T *)hl_cuda_ptr(t) : (T *)0;
    v.s = t ? t->strides[0] : 0;
    return v;
}

/* Batch norm's sums: each channel's N*S elements split into `splits` contiguous ranges, one
   block each (so that 64 channels still fill a GPU), summed by the block in a fixed tree
   (hl_cuda_block_sum); a second kernel combines a channel's ranges in range order. The same
   shape gives the same tree every run: the statistics are deterministic (not the CPU's bits:
   its sums run in element order). Element t of channel ch is x[((t / S) C + ch) S + t % S];
   I is the index type (32-bit where the tensor allows: 64-bit division is slow on a GPU). */
template <class I> struct bn_range {
    I begin, end;
};
template <class I>
__device__ static inline bn_range<I> bn_range_of(I M, I splits, I s) {
    return bn_range<I>{(I)((uint64_t)M * s / splits), (I)((uint64_t)M * (s + 1) / splits)};
}
#define BN_ELEMENTS(I, t, r) for (I t = (r).begin + threadIdx.x; t < (r).end; t += blockDim.x)
#define BN_AT(I, t, ch) ((((t) / (I)S) * (I)C + (I)(ch)) * (I)S + (t) % (I)S)

/* Training statistics, per (channel, range) block: the range's count, sum and sum of squared
   deviations from its own mean, into part[3 (ch splits + s) ...] (combined by Chan's formula:
   the two-pass variance's accuracy without a pass over the whole channel first). */
template <class T, class I>
__global__ void bn_partial_k(const T *x, double *part, I C, I S, I M, I splits) {
    for (I b = blockIdx.x; b < C * splits; b += gridDim.x) {
        I ch = b / splits, sp = b - ch * splits;
        bn_range<I> r = bn_range_of<I>(M, splits, sp);
        double s = 0, q = 0;
        BN_ELEMENTS(I, t, r) s += (double)hl_widen(x[BN_AT(I, t, ch)]);
        s = hl_cuda_block_sum(s);
        double n = (double)(r.end - r.begin), mean = n ? s / n : 0;
        BN_ELEMENTS(I, t, r) {
            double d = (double)hl_widen(x[BN_AT(I, t, ch)]) - mean;
            q += d * d;
        }
        q = hl_cuda_block_sum(q);
        if (threadIdx.x == 0) {
            part[3 * b] = n;
            part[3 * b + 1] = s;
            part[3 * b + 2] = q;
        }
    }
}

/* A thread per channel: the channel's statistics (training: its ranges combined in order;
   inference: the running ones), the running statistics' update, save_mean/save_invstd, and
   per channel mean and invstd into stats[2 ch], stats[2 ch + 1] for bn_apply_k. */
template <class T>
__global__ void bn_finish_k(const double *part, vec<T> rmean, vec<T> rvar, vec<T> smean,
                            vec<T> sinv, double *stats, int64_t C, int64_t splits, int64_t M,
                            bool training, double momentum, double eps) {
    HL_GRID_STRIDE(ch, C) {
        double mean, invstd;
        if (training) {
            const double *p = part + 3 * ch * splits;
            double s = 0, q = 0;
            for (int64_t k = 0; k < splits; k++) s += p[3 * k + 1];
            mean = M ? s / (double)M : 0;
            for (int64_t k = 0; k < splits; k++) {
                double n = p[3 * k], d = n ? p[3 * k + 1] / n - mean : 0;
                q += p[3 * k + 2] + n * d * d;
            }
            invstd = 1 / sqrt((M ? q / (double)M : 0) + eps);
            if (rmean.p && M > 1) {  /* PyTorch: unbiased running var */
                rmean.set(ch, (1 - momentum) * rmean.get(ch) + momentum * mean);
                rvar.set(ch, (1 - momentum) * rvar.get(ch) + momentum * (q / (double)(M - 1)));
            }
        } else {
            mean = rmean.get(ch);
            invstd = 1 / sqrt(rvar.get(ch) + eps);
        }
        stats[2 * ch] = mean;
        stats[2 * ch + 1] = invstd;
        if (smean.p) smean.set(ch, mean);
        if (sinv.p) sinv.set(ch, invstd);
    }
}

template <class T, class I>
__global__ void bn_apply_k(const T *x, T *y, vec<T> scale, vec<T> bias, const double *stats,
                           I C, I S, I n) {
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (I)blockDim.x * gridDim.x) {
        I ch = (e / S) % C;
        double a = (scale.p ? scale.get(ch) : 1) * stats[2 * ch + 1];
        y[e] = hl_narrow<T>(((double)hl_widen(x[e]) - stats[2 * ch]) * a + (bias.p ? bias.get(ch) : 0));
    }
}

/* Per (channel, range) block: the range's sum of dy and of dy (x - mean) into
   part[2 (ch splits + s) ...]. */
template <class T, class I>
__global__ void bn_grad_partial_k(const T *dy, const T *x, vec<T> smean, double *part, I C,
                                  I S, I M, I splits) {
    for (I b = blockIdx.x; b < C * splits; b += gridDim.x) {
        I ch = b / splits, sp = b - ch * splits;
        bn_range<I> r = bn_range_of<I>(M, splits, sp);
        double mean = smean.get(ch), sdy = 0, sdyx = 0;
        BN_ELEMENTS(I, t, r) {
            I e = BN_AT(I, t, ch);
            double g = (double)hl_widen(dy[e]);
            sdy += g;
            sdyx += g * ((double)hl_widen(x[e]) - mean);
        }
        sdy = hl_cuda_block_sum(sdy);
        sdyx = hl_cuda_block_sum(sdyx);
        if (threadIdx.x == 0) {
            part[2 * b] = sdy;
            part[2 * b + 1] = sdyx;
        }
    }
}

/* A thread per channel: the ranges' sums in order, dscale and dbias, and the two
   coefficients of dx into stats[2 ch], stats[2 ch + 1]. */
template <class T>
__global__ void bn_grad_finish_k(const double *part, vec<T> sinv, vec<T> dscale, vec<T> dbias,
                                 double *stats, int64_t C, int64_t splits, int64_t M) {
    HL_GRID_STRIDE(ch, C) {
        const double *p = part + 2 * ch * splits;
        double sdy = 0, sdyx = 0;
        for (int64_t k = 0; k < splits; k++) {
            sdy += p[2 * k];
            sdyx += p[2 * k + 1];
        }
        double invstd = sinv.get(ch);
        if (dbias.p) dbias.set(ch, sdy);
        if (dscale.p) dscale.set(ch, sdyx * invstd);
        stats[2 * ch] = M ? sdy / (double)M : 0;
        stats[2 * ch + 1] = M ? sdyx * invstd * invstd / (double)M : 0;
    }
}

/* training: the full gradient through the batch statistics; else dx = dy * scale * invstd. */
template <class T, class I>
__global__ void bn_grad_apply_k(const T *dy, const T *x, vec<T> scale, vec<T> smean,
                                vec<T> sinv, const double *stats, T *dx, I C, I S, I n,
                                bool training) {
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (I)blockDim.x * gridDim.x) {
        I ch = (e / S) % C;
        double k = (scale.p ? scale.get(ch) : 1) * sinv.get(ch);
        dx[e] = training ? hl_narrow<T>(k * ((double)hl_widen(dy[e]) - stats[2 * ch] -
                                    ((double)hl_widen(x[e]) - smean.get(ch)) * stats[2 * ch + 1]))
                         : hl_narrow<T>(k * (double)hl_widen(dy[e]));
    }
}

/* Layer norm: a warp per row (rows are contiguous), lanes over the columns, the sums combined
   by shuffles (hl_cuda_warp_sum: a fixed order, the same bits every run). */
template <class T>
__global__ void ln_forward_k(const T *x, const T *g, const T *b, T *y, T *mo, T *io,
                             int64_t rows, int64_t cols, double eps) {
    const int lane = threadIdx.x & 31;
    HL_WARP_ROWS(r, rows) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double s = 0, q = 0;
        for (int64_t j = lane; j < cols; j += 32) s += (double)hl_widen(xr[j]);
        s = hl_cuda_warp_sum(s);
        double mean = cols ? s / (double)cols : 0;
        for (int64_t j = lane; j < cols; j += 32) {
            double d = (double)hl_widen(xr[j]) - mean;
            q += d * d;
        }
        q = hl_cuda_warp_sum(q);
        double inv = cols ? 1 / sqrt(q / (double)cols + eps) : NAN;
        for (int64_t j = lane; j < cols; j += 32) {
            double v = ((double)hl_widen(xr[j]) - mean) * inv;
            if (g) v *= (double)hl_widen(g[j]);
            if (b) v += (double)hl_widen(b[j]);
            yr[j] = hl_narrow<T>(v);
        }
        if (lane == 0) {
            if (mo) mo[r] = hl_narrow<T>(mean);
            if (io) io[r] = hl_narrow<T>(inv);
        }
    }
}

template <class T>
__global__ void ln_params_grad_k(const T *dy, const T *x, const T *mean, const T *inv, T *ds,
                                 T *db, int64_t rows, int64_t cols) {
    HL_GRID_STRIDE(j, cols) {
        double as = 0, ab = 0;
        for (int64_t r = 0; r < rows; r++) {
            double d = (double)hl_widen(dy[r * cols + j]);
            ab += d;
            as += d * (((double)hl_widen(x[r * cols + j]) - (double)hl_widen(mean[r])) * (double)hl_widen(inv[r]));
        }
        if (ds) ds[j] = hl_narrow<T>(as);
        if (db) db[j] = hl_narrow<T>(ab);
    }
}

template <class T>
__global__ void ln_input_grad_k(const T *dy, const T *x, const T *g, const T *mean,
                                const T *inv, T *dx, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x & 31;
    HL_WARP_ROWS(r, rows) {
        const T *dr = dy + r * cols, *xr = x + r * cols;
        double m = (double)hl_widen(mean[r]), iv = (double)hl_widen(inv[r]), sg = 0, sgx = 0;
        for (int64_t j = lane; j < cols; j += 32) {
            double gj = g ? (double)hl_widen(dr[j]) * (double)hl_widen(g[j]) : (double)hl_widen(dr[j]);
            sg += gj;
            sgx += gj * (((double)hl_widen(xr[j]) - m) * iv);
        }
        sg = hl_cuda_warp_sum(sg);
        sgx = hl_cuda_warp_sum(sgx);
        double a = sg / (double)cols, b = sgx / (double)cols;
        for (int64_t j = lane; j < cols; j += 32) {
            double gj = g ? (double)hl_widen(dr[j]) * (double)hl_widen(g[j]) : (double)hl_widen(dr[j]);
            dx[r * cols + j] = hl_narrow<T>(iv * (gj - a - ((double)hl_widen(xr[j]) - m) * iv * b));
        }
    }
}

static int64_t prod(const int64_t *shape, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= shape[i];
    return n;
}

/* Optional outputs of the grad kernels: i[1 + k] is the position in out[] or -1. */
static hl_tensor *grad_out(const hl_call *c, int k) {
    int64_t pos = c->i[1 + k];
    return pos >= 0 ? c->out[pos] : NULL;
}

/* Ranges per channel: about 4096 elements each, at most enough for 512 blocks in all (a few
   per SM), at least one; a function of the shape only, so a shape always sums the same way. */
static int64_t bn_splits(int64_t C, int64_t M) {
    int64_t by_size = (M + 4095) / 4096, by_blocks = C ? 512 / C : 1;
    int64_t s = by_size < by_blocks ? by_size : by_blocks;
    return s < 1 ? 1 : s;
}
static unsigned bn_blocks(int64_t n) { return (unsigned)(n < 65535 ? n : 65535); }

/* 32-bit element indices where every index of the tensor (and the loop's overshoot) fits. */
static bool bn_narrow_index(int64_t n) { return n < ((int64_t)1 << 31); }

template <class T, class I>
static hl_status batch_norm_with(const hl_call *c, hl_cuda_device *d, double *stats,
                                 double *part, int64_t N, int64_t C, int64_t S, int64_t splits) {
    const hl_tensor *x = c->in[0];
    int64_t M = N * S, n = N * C * S;
    bool training = c->i[0] != 0;
    if (training && M) {
        auto partial_kernel = bn_partial_k<T, I>;
        HL_LAUNCH_COOP(partial_kernel, bn_blocks(C * splits), HL_CUDA_THREADS, 0, d->stream,
                       (const T *)hl_cuda_ptr(x), part, (I)C, (I)S, (I)M, (I)splits);
        hl_status st = hl_cuda_check_launch("batch_norm");
        if (st) return st;
    }
    auto finish_kernel = bn_finish_k<T>;
    HL_LAUNCH(finish_kernel, hl_cuda_blocks(C), HL_CUDA_THREADS, 0, d->stream,
              (const double *)part, vec_of<T>(c->in[3]), vec_of<T>(c->in[4]),
              vec_of<T>(c->out[1]), vec_of<T>(c->out[2]), stats, C, M ? splits : 0, M,
              training, c->f[0], c->f[1]);
    hl_status st = hl_cuda_check_launch("batch_norm");
    if (st || !n) return st;
    auto apply_kernel = bn_apply_k<T, I>;
    HL_LAUNCH(apply_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(x), (T *)hl_cuda_ptr(c->out[0]), vec_of<T>(c->in[1]),
              vec_of<T>(c->in[2]), (const double *)stats, (I)C, (I)S, (I)n);
    return hl_cuda_check_launch("batch_norm");
}

/* Forward: the ranges' sums (training), a thread per channel combining them, the element-wise
   normalisation: three launches whatever the channel count. */
template <class T>
static hl_status run_batch_norm(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim), n = N * C * S;
    if (!C) return HL_OK;
    int64_t splits = bn_splits(C, N * S);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_scratch_lock(d);
    double *stats = (double *)hl_cuda_scratch(d, sizeof(double) * (size_t)(2 * C + 3 * C * splits));
    hl_status st = stats ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "batch_norm: out of cuda memory");
    if (!st)
        st = bn_narrow_index(n + 65535LL * HL_CUDA_THREADS)
                 ? batch_norm_with<T, uint32_t>(c, d, stats, stats + 2 * C, N, C, S, splits)
                 : batch_norm_with<T, uint64_t>(c, d, stats, stats + 2 * C, N, C, S, splits);
    hl_cuda_scratch_unlock(d);
    return st;
}

template <class T, class I>
static hl_status batch_norm_grad_with(const hl_call *c, hl_cuda_device *d, double *stats,
                                      double *part, int64_t N, int64_t C, int64_t S,
                                      int64_t splits) {
    const hl_tensor *x = c->in[1];
    hl_tensor *dx = grad_out(c, 0);
    int64_t M = N * S, n = N * C * S;
    if (M) {
        auto partial_kernel = bn_grad_partial_k<T, I>;
        HL_LAUNCH_COOP(partial_kernel, bn_blocks(C * splits), HL_CUDA_THREADS, 0, d->stream,
                       (const T *)hl_cuda_ptr(c->in[0]), (const T *)hl_cuda_ptr(x),
                       vec_of<T>(c->in[3]), part, (I)C, (I)S, (I)M, (I)splits);
        hl_status st = hl_cuda_check_launch("batch_norm_grad");
        if (st) return st;
    }
    auto finish_kernel = bn_grad_finish_k<T>;
    HL_LAUNCH(finish_kernel, hl_cuda_blocks(C), HL_CUDA_THREADS, 0, d->stream,
              (const double *)part, vec_of<T>(c->in[4]), vec_of<T>(grad_out(c, 1)),
              vec_of<T>(grad_out(c, 2)), stats, C, M ? splits : 0, M);
    hl_status st = hl_cuda_check_launch("batch_norm_grad");
    if (st || !dx || !n) return st;
    auto apply_kernel = bn_grad_apply_k<T, I>;
    HL_LAUNCH(apply_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(c->in[0]), (const T *)hl_cuda_ptr(x), vec_of<T>(c->in[2]),
              vec_of<T>(c->in[3]), vec_of<T>(c->in[4]), (const double *)stats,
              (T *)hl_cuda_ptr(dx), (I)C, (I)S, (I)n, c->i[0] != 0);
    return hl_cuda_check_launch("batch_norm_grad");
}

template <class T>
static hl_status run_batch_norm_grad(const hl_call *c) {
    const hl_tensor *x = c->in[1];
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim), n = N * C * S;
    if (!C) return HL_OK;
    int64_t splits = bn_splits(C, N * S);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_scratch_lock(d);
    double *stats = (double *)hl_cuda_scratch(d, sizeof(double) * (size_t)(2 * C + 2 * C * splits));
    hl_status st = stats ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "batch_norm_grad: out of cuda memory");
    if (!st)
        st = bn_narrow_index(n + 65535LL * HL_CUDA_THREADS)
                 ? batch_norm_grad_with<T, uint32_t>(c, d, stats, stats + 2 * C, N, C, S, splits)
                 : batch_norm_grad_with<T, uint64_t>(c, d, stats, stats + 2 * C, N, C, S, splits);
    hl_cuda_scratch_unlock(d);
    return st;
}

template <class T> static T *ptr_or_null(const hl_tensor *t) {
    return t ? (T *)hl_cuda_ptr(t) : (T *)0;
}

template <class T>
static hl_status run_layer_norm(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int axis = (int)c->i[0];
    int64_t rows = prod(x->shape, 0, axis), cols = prod(x->shape, axis, x->ndim);
    if (!rows) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto ln_forward_kernel = ln_forward_k<T>;
    HL_LAUNCH_COOP(ln_forward_kernel, hl_cuda_warp_blocks(rows), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(x), (const T *)ptr_or_null<T>(c->in[1]),
              (const T *)ptr_or_null<T>(c->in[2]), (T *)hl_cuda_ptr(c->out[0]),
              ptr_or_null<T>(c->out[1]), ptr_or_null<T>(c->out[2]), rows, cols, c->f[0]);
    return hl_cuda_check_launch("layer_norm");
}

template <class T>
static hl_status run_layer_norm_grad(const hl_call *c) {
    const hl_tensor *x = c->in[1];
    int axis = (int)c->i[0];
    int64_t rows = prod(x->shape, 0, axis), cols = prod(x->shape, axis, x->ndim);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_tensor *dx = grad_out(c, 0), *ds = grad_out(c, 1), *db = grad_out(c, 2);
    const T *dy = (const T *)hl_cuda_ptr(c->in[0]), *xp = (const T *)hl_cuda_ptr(x);
    const T *mean = (const T *)hl_cuda_ptr(c->in[3]), *inv = (const T *)hl_cuda_ptr(c->in[4]);
    if ((ds || db) && cols) {  /* first: they read x and dy, which dx may overwrite */
        auto ln_params_grad_kernel = ln_params_grad_k<T>;
        HL_LAUNCH(ln_params_grad_kernel, hl_cuda_blocks(cols), HL_CUDA_THREADS, 0, d->stream,
                  dy, xp, mean, inv, ptr_or_null<T>(ds), ptr_or_null<T>(db), rows, cols);
        hl_status st = hl_cuda_check_launch("layer_norm_grad");
        if (st) return st;
    }
    if (!dx || !rows) return HL_OK;
    auto ln_input_grad_kernel = ln_input_grad_k<T>;
    HL_LAUNCH_COOP(ln_input_grad_kernel, hl_cuda_warp_blocks(rows), HL_CUDA_THREADS, 0, d->stream, dy, xp,
              (const T *)ptr_or_null<T>(c->in[2]), mean, inv, (T *)hl_cuda_ptr(dx), rows, cols);
    return hl_cuda_check_launch("layer_norm_grad");
}

#define FLOAT_FAMILY(family, which)                                                          \
    extern "C" hl_status hl_cuda_##family(const hl_call *c) {                                \
        hl_dtype dt = c->in[which]->dtype;                                                   \
        if (dt == HL_F32) return run_##family<float>(c);                                     \
        if (dt == HL_F64) return run_##family<double>(c);                                    \
        if (dt == HL_F16) return run_##family<hl_f16>(c);                                    \
        if (dt == HL_BF16) return run_##family<hl_bf16>(c);                                  \
        return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op),          \
                       HL_DESC(c->in[which]));                                               \
    }
FLOAT_FAMILY(batch_norm, 0)
FLOAT_FAMILY(batch_norm_grad, 1)
FLOAT_FAMILY(layer_norm, 0)
FLOAT_FAMILY(layer_norm_grad, 1)
