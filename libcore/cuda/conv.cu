/*
 * conv.cu - convolution and its two gradients on CUDA as GEMMs over chunks of the batch (the
 * record layout is api/conv.c's: 4-D contiguous NCHW tensors, i[0] groups, i[1..2] stride,
 * i[3..4] dilation, i[5..6] leading pads, i[7..8] trailing pads).
 *
 * A chunk is nb samples (as many as the work buffer's budget holds, conv_workspace below;
 * the chunks of a call are balanced, the last one may be smaller). Per chunk, with Q = nb*OH*OW
 * and K = Cin_g*kh*kw:
 *   columns  cols[g][K][Q]      one im2col launch for every sample and group of the chunk
 *   conv              Y[g] (Cout_g x Q) = W_g (Cout_g x K) @ cols[g], one strided-batched
 *                     GEMM over the groups; one launch moves Y ([Cout][nb][P]) to y's NCHW
 *                     layout, adding the bias (conv_fused: its whole epilogue)
 *   conv_grad_input   dyT ([Cout][nb][P]) from dy, dcols[g] = W_g^T @ dyT[g] (one GEMM), then
 *                     each dx element gathers its taps from dcols (no atomics: deterministic),
 *                     + bias (conv_transpose)
 *   conv_grad_weight  dW_g += dyT[g] (Cout_g x Q) @ cols[g]^T: the sum over the chunk's samples
 *                     and positions runs inside the GEMM (its K is nb*OH*OW), chunks
 *                     accumulate in order (beta 1 after the first)
 * So a call costs 3-4 launches per chunk whatever its batch and groups (it was 2 per sample and
 * group). cuBLAS gives the same bits every run (no atomics mode), so results are deterministic;
 * they are not the CPU's bits (a different summation order), which the op cases' tolerances
 * state (tests/opcases: float64 1e-6 relative, float32 2e-5).
 * float16 and bfloat16: the columns are half, the GEMMs sum in float32 (cublasGemmEx), col2im
 * and the bias sum in double/float and round once, and the weight gradient is summed over the
 * chunks in a float32 buffer, rounded to the half type at the end.
 */
#include "epilogue.cuh"

#include <type_traits>

/* ---- the work buffer's budget ---- */

/* 256 MiB: ResNet-18 (CIFAR, batch 128) float32 takes its widest layer (64 channels, 32x32,
   3x3: 2.6 MB of columns and product per sample) in two chunks and every other layer in one;
   in a plan (graph mode) it is one block of the arena, alive for one call at a time. */
static size_t conv_workspace_budget = (size_t)256 << 20;

#ifndef __CUDACC__
/* Test hook (emulation only): the budget in bytes (0: the default), so that small tensors
   split into several chunks and the tests can cross chunk boundaries. */
extern "C" __attribute__((visibility("default"))) void hl_cuda_emu_conv_workspace(size_t bytes) {
    __atomic_store_n(&conv_workspace_budget, bytes ? bytes : (size_t)256 << 20,
                     __ATOMIC_RELAXED);
}
#endif

struct geom {
    int64_t n, c, oc, groups, cg, og, K, P;    /* K = cg kh kw, P = oh ow */
    int h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
};

static geom geom_of(const hl_call *c, const hl_tensor *x, const hl_tensor *w,
                    const hl_tensor *y) {
    geom g;
    g.n = x->shape[0];
    g.c = x->shape[1];
    g.h = (int)x->shape[2];
    g.w = (int)x->shape[3];
    g.oc = y->shape[1];
    g.oh = (int)y->shape[2];
    g.ow = (int)y->shape[3];
    g.kh = (int)w->shape[2];
    g.kw = (int)w->shape[3];
    g.groups = c->i[0];
    g.sh = (int)c->i[1];
    g.sw = (int)c->i[2];
    g.dh = (int)c->i[3];
    g.dw = (int)c->i[4];
    g.pt = (int)c->i[5];
    g.pl = (int)c->i[6];
    g.cg = g.c / g.groups;
    g.og = g.oc / g.groups;
    g.K = g.cg * g.kh * g.kw;
    g.P = (int64_t)g.oh * g.ow;
    return g;
}

/* The chunk's buffers: columns (groups K Q elements) and the product or dy in [Cout][nb][P]
   (Cout Q), each 256-byte aligned, plus extra bytes (conv_grad_weight's float32 sum). */
struct chunking {
    int64_t nb;            /* samples per chunk */
    size_t cols_bytes, prod_bytes;
    bool wide;             /* 64-bit element indices (a chunk past 2^31 elements) */
};

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static chunking chunking_of(const geom &g, size_t esz, size_t budget) {
    size_t per_sample = (size_t)(g.groups * g.K * g.P + g.oc * g.P) * esz;
    int64_t fit = per_sample ? (int64_t)(budget / per_sample) : g.n;
    if (fit < 1) fit = 1;
    if (fit > g.n) fit = g.n;
    chunking ch;
    int64_t chunks = fit ? (g.n + fit - 1) / fit : 0;
    ch.nb = chunks ? (g.n + chunks - 1) / chunks : 0;  /* balanced: 64 + 64, not 102 + 26 */
    int64_t q = ch.nb * g.P;
    ch.cols_bytes = align256((size_t)(g.groups * g.K * q) * esz);
    ch.prod_bytes = align256((size_t)(g.oc * q) * esz);
    int64_t most = g.groups * g.K * q;
    if (g.oc * q > most) most = g.oc * q;
    if (ch.nb * g.c * g.h * g.w > most) most = ch.nb * g.c * g.h * g.w;
    ch.wide = most >= ((int64_t)1 << 31);
    return ch;
}

/* The chunks (*ch) and their work buffer (columns + product + extra bytes) from the device's
   scratch. When the budget's buffer cannot be had, fewer samples a chunk, halving down to
   one (what the per-sample kernels before chunking needed), so a model that fit then still
   runs, only slower; conv_grad_weight's sums then also group differently (other last bits).
   NULL when even one sample's buffer cannot be had. */
static char *chunk_buffer(hl_cuda_device *d, const geom &g, size_t esz, size_t extra,
                          chunking *ch) {
    size_t budget = __atomic_load_n(&conv_workspace_budget, __ATOMIC_RELAXED);
    for (;;) {
        *ch = chunking_of(g, esz, budget);
        char *buf = (char *)hl_cuda_scratch(d, ch->cols_bytes + ch->prod_bytes + extra);
        if (buf || ch->nb <= 1) return buf;
        budget = (ch->cols_bytes + ch->prod_bytes) / 2;
    }
}

/* Grid-stride loop over [0, n) in index type I (32-bit where the chunk allows: GPU 64-bit
   division is several times slower, and these kernels divide per element). */
#define CHUNK_STRIDE(I, e, n)                                                                \
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < (I)(n); e += (I)blockDim.x * gridDim.x)

/* cols[(g K + r) Q + n P + p] for r = (ci, ty, tx), p = (oy, ox), over the chunk's nb samples
   (x: the chunk's first sample). */
template <class T, class I>
__global__ void im2col_k(geom g, I nb, const T *x, T *cols) {
    const I K = (I)g.K, P = (I)g.P, Q = nb * P, taps = (I)(g.kh * g.kw);
    CHUNK_STRIDE(I, e, (I)g.groups * K * Q) {
        I row = e / Q, q = e - row * Q, n = q / P, p = q - n * P;
        I gi = row / K, r = row - gi * K, ci = r / taps, t = r - ci * taps;
        int ty = (int)(t / (I)g.kw), tx = (int)(t - (I)ty * (I)g.kw);
        int oy = (int)(p / (I)g.ow), ox = (int)(p - (I)oy * (I)g.ow);
        int iy = oy * g.sh - g.pt + ty * g.dh, ix = ox * g.sw - g.pl + tx * g.dw;
        cols[e] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w
                      ? x[((n * (I)g.c + gi * (I)g.cg + ci) * (I)g.h + (I)iy) * (I)g.w + (I)ix]
                      : T{};
    }
}

/* y (the chunk's first sample, NCHW) from prod [Cout][nb][P]: the bias, the residual, the
   activation (float32/float64: hl_cuda_epilogue's operations in its order, so conv_fused
   equals conv, add and the activation op; half types: the bias only, summed in float and
   rounded once). */
template <class T, class I>
__global__ void from_chunk_k(geom g, I nb, const T *prod, T *y, hl_cuda_epilogue e) {
    const I P = (I)g.P, OCP = (I)g.oc * P;
    const T *bias = (const T *)e.bias, *res = (const T *)e.res;
    CHUNK_STRIDE(I, i, nb * OCP) {
        I n = i / OCP, rest = i - n * OCP, o = rest / P, p = rest - o * P;
        T v = prod[(o * nb + n) * P + p];
        if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
            if (bias) v = hl_rn_add(v, bias[o]);
            if (res) v = hl_rn_add(v, res[i]);
            y[i] = hl_cuda_act(e.act, v, (T)e.alpha, (T)e.beta);
        } else {
            y[i] = bias ? hl_narrow<T>(hl_widen(v) + hl_widen(bias[o])) : v;
        }
    }
}

/* dyT [Cout][nb][P] from dy (the chunk's first sample, NCHW). */
template <class T, class I>
__global__ void to_chunk_k(geom g, I nb, const T *dy, T *dyT) {
    const I P = (I)g.P, Q = nb * P, OC = (I)g.oc;
    CHUNK_STRIDE(I, e, OC * Q) {
        I o = e / Q, q = e - o * Q, n = q / P, p = q - n * P;
        dyT[e] = dy[(n * OC + o) * P + p];
    }
}

/* dx (the chunk's first sample) = sum of dcols over the taps that read each element, in tap
   order (one thread per element: no atomics), + bias[channel]. */
template <class T, class I>
__global__ void col2im_k(geom g, I nb, const T *dcols, T *dx, const T *bias) {
    const I HW = (I)g.h * (I)g.w, CHW = (I)g.c * HW, P = (I)g.P, Q = nb * P, K = (I)g.K;
    CHUNK_STRIDE(I, e, nb * CHW) {
        I n = e / CHW, rest = e - n * CHW, ch = rest / HW, pix = rest - ch * HW;
        int iy = (int)(pix / (I)g.w), ix = (int)(pix - (I)iy * (I)g.w);
        I gi = ch / (I)g.cg, ci = ch - gi * (I)g.cg;
        const T *base = dcols + (gi * K + ci * (I)(g.kh * g.kw)) * Q + n * P;
        double s = 0;
        for (int ty = 0; ty < g.kh; ty++) {
            int ny = iy + g.pt - ty * g.dh;
            if (ny < 0 || ny % g.sh) continue;
            int oy = ny / g.sh;
            if (oy >= g.oh) continue;
            for (int tx = 0; tx < g.kw; tx++) {
                int nx = ix + g.pl - tx * g.dw;
                if (nx < 0 || nx % g.sw) continue;
                int ox = nx / g.sw;
                if (ox >= g.ow) continue;
                s += (double)hl_widen(base[(I)(ty * g.kw + tx) * Q + (I)(oy * g.ow + ox)]);
            }
        }
        dx[e] = hl_narrow<T>(s + (bias ? (double)hl_widen(bias[ch]) : 0.0));
    }
}

/* ---- the three ops, chunk by chunk ---- */

template <class T, class I>
static hl_status conv_chunks(hl_cuda_device *d, const hl_call *c, const geom &g,
                             const chunking &ch, char *buf, hl_cuda_epilogue epi, const T *xp,
                             const T *wp, T *yp) {
    T *cols = (T *)buf, *prod = (T *)(buf + ch.cols_bytes);
    const hl_dtype dt = c->in[0]->dtype;
    const T *res = (const T *)epi.res;
    for (int64_t n0 = 0; n0 < g.n; n0 += ch.nb) {
        int64_t nb = g.n - n0 < ch.nb ? g.n - n0 : ch.nb, q = nb * g.P;
        auto im2col_kernel = im2col_k<T, I>;
        HL_LAUNCH(im2col_kernel, hl_cuda_blocks(g.groups * g.K * q), HL_CUDA_THREADS, 0,
                  d->stream, g, (I)nb, xp + n0 * g.c * g.h * g.w, cols);
        hl_status st = hl_cuda_check_launch(HL_OPNAME(c->op));
        if (!st)
            st = hl_cuda_gemm_strided(d, dt, dt, g.og, q, g.K, 1.0,
                                      hl_cuda_mat{(char *)wp, g.K, 1}, g.og * g.K,
                                      hl_cuda_mat{(char *)cols, q, 1}, g.K * q, 0.0,
                                      hl_cuda_mat{(char *)prod, q, 1}, g.og * q, g.groups,
                                      HL_OPNAME(c->op));
        if (st) return st;
        hl_cuda_epilogue e = epi;
        e.res = res ? res + n0 * g.oc * g.P : NULL;
        auto from_chunk_kernel = from_chunk_k<T, I>;
        HL_LAUNCH(from_chunk_kernel, hl_cuda_blocks(g.oc * q), HL_CUDA_THREADS, 0, d->stream, g,
                  (I)nb, (const T *)prod, yp + n0 * g.oc * g.P, e);
        if ((st = hl_cuda_check_launch(HL_OPNAME(c->op)))) return st;
    }
    return HL_OK;
}

template <class T>
static hl_status run_conv(const hl_call *c) {
    /* conv_fused (api/conv.c): i[10] whether a bias, i[11] whether a residual follows it;
       a packed weight (i[12], last) is not read: w itself is the GEMM's im2col-ready matrix */
    const bool fused = c->op == HL_OP_CONV_FUSED;
    const hl_tensor *x = c->in[0], *w = c->in[1];
    const hl_tensor *bias = (fused ? c->i[10] != 0 : c->n_in > 2) ? c->in[2] : NULL;
    const hl_tensor *res = fused && c->i[11] ? c->in[bias ? 3 : 2] : NULL;
    hl_tensor *y = c->out[0];
    geom g = geom_of(c, x, w, y);
    if (g.n * g.oc * g.P == 0) return HL_OK;
    hl_cuda_epilogue epi = {fused ? (int)c->i[9] : HL_CONV_ACT_NONE, fused ? c->f[0] : 0.0,
                            fused ? c->f[1] : 0.0, bias ? hl_cuda_ptr(bias) : NULL,
                            res ? hl_cuda_ptr(res) : NULL, g.P, g.oc};
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_scratch_lock(d);
    chunking ch;
    char *buf = chunk_buffer(d, g, sizeof(T), 0, &ch);
    hl_status st = buf ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "%s: out of cuda memory for a %lld-byte "
                                         "work buffer (im2col columns of %lld samples)",
                                         HL_OPNAME(c->op),
                                         (long long)(ch.cols_bytes + ch.prod_bytes),
                                         (long long)ch.nb);
    const T *xp = (const T *)hl_cuda_ptr(x), *wp = (const T *)hl_cuda_ptr(w);
    if (!st)
        st = ch.wide ? conv_chunks<T, uint64_t>(d, c, g, ch, buf, epi, xp, wp, (T *)hl_cuda_ptr(y))
                     : conv_chunks<T, uint32_t>(d, c, g, ch, buf, epi, xp, wp, (T *)hl_cuda_ptr(y));
    hl_cuda_scratch_unlock(d);
    return st;
}

template <class T, class I>
static hl_status grad_input_chunks(hl_cuda_device *d, const geom &g, const chunking &ch,
                                   char *buf, hl_dtype dt, const T *dyp, const T *wp, T *dxp,
                                   const T *bias) {
    T *dcols = (T *)buf, *dyT = (T *)(buf + ch.cols_bytes);
    const char *op = "conv_grad_input";
    for (int64_t n0 = 0; n0 < g.n; n0 += ch.nb) {
        int64_t nb = g.n - n0 < ch.nb ? g.n - n0 : ch.nb, q = nb * g.P;
        hl_status st = HL_OK;
        if (g.og && q) {
            auto to_chunk_kernel = to_chunk_k<T, I>;
            HL_LAUNCH(to_chunk_kernel, hl_cuda_blocks(g.oc * q), HL_CUDA_THREADS, 0, d->stream,
                      g, (I)nb, dyp + n0 * g.oc * g.P, dyT);
            st = hl_cuda_check_launch(op);
            if (!st)
                st = hl_cuda_gemm_strided(d, dt, dt, g.K, q, g.og, 1.0,
                                          hl_cuda_mat{(char *)wp, 1, g.K}, g.og * g.K,
                                          hl_cuda_mat{(char *)dyT, q, 1}, g.og * q, 0.0,
                                          hl_cuda_mat{(char *)dcols, q, 1}, g.K * q, g.groups,
                                          op);
        } else if (q && cudaMemsetAsync(dcols, 0, (size_t)(g.groups * g.K * q) * sizeof(T),
                                        d->stream) != cudaSuccess) {
            st = hl_cuda_check_launch(op);
        }
        if (st) return st;
        auto col2im_kernel = col2im_k<T, I>;
        HL_LAUNCH(col2im_kernel, hl_cuda_blocks(nb * g.c * g.h * g.w), HL_CUDA_THREADS, 0,
                  d->stream, g, (I)nb, (const T *)dcols, dxp + n0 * g.c * g.h * g.w, bias);
        if ((st = hl_cuda_check_launch(op))) return st;
    }
    return HL_OK;
}

/* in {dy, w, bias?} out {dx}. */
template <class T>
static hl_status run_conv_grad_input(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *w = c->in[1], *bias = c->n_in > 2 ? c->in[2] : NULL;
    hl_tensor *dx = c->out[0];
    geom g = geom_of(c, dx, w, dy);
    if (g.n * g.c * g.h * g.w == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_scratch_lock(d);
    chunking ch;
    char *buf = chunk_buffer(d, g, sizeof(T), 0, &ch);
    hl_status st = buf ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "conv_grad_input: out of cuda memory "
                                         "for a %lld-byte work buffer (columns of %lld samples)",
                                         (long long)(ch.cols_bytes + ch.prod_bytes),
                                         (long long)ch.nb);
    const T *dyp = (const T *)hl_cuda_ptr(dy), *wp = (const T *)hl_cuda_ptr(w);
    const T *bp = bias ? (const T *)hl_cuda_ptr(bias) : (const T *)0;
    T *dxp = (T *)hl_cuda_ptr(dx);
    if (!st)
        st = ch.wide ? grad_input_chunks<T, uint64_t>(d, g, ch, buf, dx->dtype, dyp, wp, dxp, bp)
                     : grad_input_chunks<T, uint32_t>(d, g, ch, buf, dx->dtype, dyp, wp, dxp, bp);
    hl_cuda_scratch_unlock(d);
    return st;
}

template <class T, class I>
static hl_status grad_weight_chunks(hl_cuda_device *d, const geom &g, const chunking &ch,
                                    char *buf, hl_dtype dt, const T *dyp, const T *xp,
                                    char *acc, bool half) {
    T *cols = (T *)buf, *dyT = (T *)(buf + ch.cols_bytes);
    const char *op = "conv_grad_weight";
    for (int64_t n0 = 0; n0 < g.n; n0 += ch.nb) {
        int64_t nb = g.n - n0 < ch.nb ? g.n - n0 : ch.nb, q = nb * g.P;
        auto im2col_kernel = im2col_k<T, I>;
        HL_LAUNCH(im2col_kernel, hl_cuda_blocks(g.groups * g.K * q), HL_CUDA_THREADS, 0,
                  d->stream, g, (I)nb, xp + n0 * g.c * g.h * g.w, cols);
        hl_status st = hl_cuda_check_launch(op);
        if (st) return st;
        auto to_chunk_kernel = to_chunk_k<T, I>;
        HL_LAUNCH(to_chunk_kernel, hl_cuda_blocks(g.oc * q), HL_CUDA_THREADS, 0, d->stream, g,
                  (I)nb, dyp + n0 * g.oc * g.P, dyT);
        if ((st = hl_cuda_check_launch(op))) return st;
        st = hl_cuda_gemm_strided(d, dt, half ? HL_F32 : dt, g.og, g.K, q, 1.0,
                                  hl_cuda_mat{(char *)dyT, q, 1}, g.og * q,
                                  hl_cuda_mat{(char *)cols, 1, q}, g.K * q, n0 ? 1.0 : 0.0,
                                  hl_cuda_mat{acc, g.K, 1}, g.og * g.K, g.groups, op);
        if (st) return st;
    }
    return HL_OK;
}

/* in {dy, x} out {dw}. */
template <class T>
static hl_status run_conv_grad_weight(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *x = c->in[1];
    hl_tensor *dw = c->out[0];
    geom g = geom_of(c, x, dw, dy);
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    T *dwp = (T *)hl_cuda_ptr(dw);
    if (g.oc * g.K == 0) return HL_OK;
    if (g.n * g.P == 0)  /* nothing contributes */
        return cudaMemsetAsync(dwp, 0, (size_t)(g.oc * g.K) * sizeof(T), d->stream) == cudaSuccess
                   ? HL_OK : hl_cuda_check_launch("conv_grad_weight");
    /* half types: the sum over the chunks goes to a float32 buffer after the chunk's own */
    const bool half = !std::is_same<T, float>::value && !std::is_same<T, double>::value;
    size_t acc_bytes = half ? (size_t)(g.oc * g.K) * sizeof(float) : 0;
    hl_cuda_scratch_lock(d);
    chunking ch;
    char *buf = chunk_buffer(d, g, sizeof(T), acc_bytes, &ch);
    hl_status st = buf ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "conv_grad_weight: out of cuda memory "
                                         "for a %lld-byte work buffer (columns of %lld samples)",
                                         (long long)(ch.cols_bytes + ch.prod_bytes + acc_bytes),
                                         (long long)ch.nb);
    char *acc = half ? buf + ch.cols_bytes + ch.prod_bytes : (char *)dwp;
    const T *xp = (const T *)hl_cuda_ptr(x), *dyp = (const T *)hl_cuda_ptr(dy);
    if (!st)
        st = ch.wide ? grad_weight_chunks<T, uint64_t>(d, g, ch, buf, x->dtype, dyp, xp, acc, half)
                     : grad_weight_chunks<T, uint32_t>(d, g, ch, buf, x->dtype, dyp, xp, acc, half);
    if (!st && half) {
        auto narrow_kernel = narrow_k<T>;
        HL_LAUNCH(narrow_kernel, hl_cuda_blocks(g.oc * g.K), HL_CUDA_THREADS, 0, d->stream, dwp,
                  (const float *)acc, g.oc * g.K);
        st = hl_cuda_check_launch("conv_grad_weight");
    }
    hl_cuda_scratch_unlock(d);
    return st;
}

#define FLOAT_FAMILY(family)                                                                 \
    extern "C" hl_status hl_cuda_##family(const hl_call *c) {                                \
        hl_dtype dt = c->out[0]->dtype;                                                      \
        if (dt == HL_F32) return run_##family<float>(c);                                     \
        if (dt == HL_F64) return run_##family<double>(c);                                    \
        if (dt == HL_F16) return run_##family<hl_f16>(c);                                    \
        if (dt == HL_BF16) return run_##family<hl_bf16>(c);                                  \
        return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op),          \
                       HL_DESC(c->out[0]));                                                  \
    }
FLOAT_FAMILY(conv)
FLOAT_FAMILY(conv_grad_input)
FLOAT_FAMILY(conv_grad_weight)
