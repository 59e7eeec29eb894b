/*
 * conv.cu - convolution and its two gradients on CUDA as GEMMs (the record layout is
 * api/conv.c's: 4-D contiguous NCHW tensors, i[0] groups, i[1..2] stride, i[3..4] dilation,
 * i[5..6] leading pads, i[7..8] trailing pads). Per sample and group:
 *   conv:             y = W_g (Cout_g x Cin_g*kh*kw) @ cols (Cin_g*kh*kw x OH*OW), + bias
 *   conv_grad_weight: dW_g += dy_g @ cols^T (summed over the batch in sample order)
 *   conv_grad_input:  dcols = W_g^T @ dy_g, then each dx element gathers its taps (no
 *                     atomics: deterministic), + bias (conv_transpose)
 * The columns (im2col) live in the device's scratch buffer; the products go to cuBLAS.
 * float16 and bfloat16: the columns are half, the GEMMs sum in float32 (cublasGemmEx), col2im
 * and the bias sum in double/float and round once, and the weight gradient is summed over the
 * batch in a float32 buffer, rounded to the half type at the end.
 */
#include "epilogue.cuh"

struct geom {
    int64_t n, c, h, w, oc, oh, ow, kh, kw, groups, sh, sw, dh, dw, pt, pl;
};

static geom geom_of(const hl_call *c, const hl_tensor *x, const hl_tensor *w,
                    const hl_tensor *y) {
    geom g;
    g.n = x->shape[0];
    g.c = x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.oc = y->shape[1];
    g.oh = y->shape[2];
    g.ow = y->shape[3];
    g.kh = w->shape[2];
    g.kw = w->shape[3];
    g.groups = c->i[0];
    g.sh = c->i[1];
    g.sw = c->i[2];
    g.dh = c->i[3];
    g.dw = c->i[4];
    g.pt = c->i[5];
    g.pl = c->i[6];
    return g;
}

/* cols[r, p] for r = (ci, ty, tx) over the group's channels and p = (oy, ox). */
template <class T>
__global__ void im2col_k(geom g, const T *x, T *cols) {
    int64_t cg = g.c / g.groups, K = cg * g.kh * g.kw, P = g.oh * g.ow;
    HL_GRID_STRIDE(e, K * P) {
        int64_t r = e / P, p = e - r * P;
        int64_t ci = r / (g.kh * g.kw), t = r - ci * g.kh * g.kw, ty = t / g.kw, tx = t - ty * g.kw;
        int64_t oy = p / g.ow, ox = p - oy * g.ow;
        int64_t iy = oy * g.sh - g.pt + ty * g.dh, ix = ox * g.sw - g.pl + tx * g.dw;
        cols[e] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[(ci * g.h + iy) * g.w + ix]
                                                              : T{};
    }
}

/* dx[ci, iy, ix] (one sample, one group) = sum of dcols over the taps that read it. */
template <class T>
__global__ void col2im_k(geom g, const T *dcols, T *dx, const T *bias) {
    int64_t cg = g.c / g.groups, P = g.oh * g.ow;
    HL_GRID_STRIDE(e, cg * g.h * g.w) {
        int64_t ci = e / (g.h * g.w), rest = e - ci * g.h * g.w, iy = rest / g.w,
                ix = rest - iy * g.w;
        double s = 0;
        for (int64_t ty = 0; ty < g.kh; ty++) {
            int64_t ny = iy + g.pt - ty * g.dh;
            if (ny < 0 || ny % g.sh) continue;
            int64_t oy = ny / g.sh;
            if (oy >= g.oh) continue;
            for (int64_t tx = 0; tx < g.kw; tx++) {
                int64_t nx = ix + g.pl - tx * g.dw;
                if (nx < 0 || nx % g.sw) continue;
                int64_t ox = nx / g.sw;
                if (ox >= g.ow) continue;
                s += (double)hl_widen(dcols[((ci * g.kh + ty) * g.kw + tx) * P + oy * g.ow + ox]);
            }
        }
        dx[e] = hl_narrow<T>(s + (bias ? (double)hl_widen(bias[ci]) : 0.0));
    }
}

template <class T>
__global__ void add_bias_k(T *y, const T *bias, int64_t n, int64_t c, int64_t plane) {
    HL_GRID_STRIDE(e, n * c * plane) y[e] = hl_narrow<T>(hl_widen(y[e]) + hl_widen(bias[(e / plane) % c]));
}

template <class T>
__global__ void narrow_k(T *o, const float *x, int64_t n) {
    HL_GRID_STRIDE(e, n) o[e] = hl_narrow<T>(x[e]);
}

template <class T>
static hl_status run_conv(const hl_call *c) {
    /* conv_fused (api/conv.c): i[10] whether a bias, i[11] whether a residual follows it;
       a packed weight (i[12], last) is not read: w itself is the GEMM's im2col-ready matrix */
    const bool fused = c->op == HL_OP_CONV_FUSED;
    const hl_tensor *x = c->in[0], *w = c->in[1];
    const hl_tensor *bias = (fused ? c->i[10] != 0 : c->n_in > 2) ? c->in[2] : NULL;
    hl_tensor *y = c->out[0];
    geom g = geom_of(c, x, w, y);
    int64_t cg = g.c / g.groups, og = g.oc / g.groups, K = cg * g.kh * g.kw, P = g.oh * g.ow;
    if (g.n * g.oc * P == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_scratch_lock(d);
    T *cols = (T *)hl_cuda_scratch(d, (size_t)(K * P > 0 ? K * P : 1) * sizeof(T));
    hl_status st = cols ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "conv: out of cuda memory for %lld "
                                          "im2col columns", (long long)(K * P));
    const T *xp = (const T *)hl_cuda_ptr(x), *wp = (const T *)hl_cuda_ptr(w);
    T *yp = (T *)hl_cuda_ptr(y);
    for (int64_t n = 0; n < g.n && !st; n++)
        for (int64_t gi = 0; gi < g.groups && !st; gi++) {
            auto im2col_kernel = im2col_k<T>;
            HL_LAUNCH(im2col_kernel, hl_cuda_blocks(K * P), HL_CUDA_THREADS, 0, d->stream, g,
                      xp + (n * g.c + gi * cg) * g.h * g.w, cols);
            if ((st = hl_cuda_check_launch("conv"))) break;
            st = hl_cuda_gemm(d, x->dtype, og, P, K, 1.0,
                              hl_cuda_mat{(char *)(wp + gi * og * K), K, 1},
                              hl_cuda_mat{(char *)cols, P, 1}, 0.0,
                              hl_cuda_mat{(char *)(yp + (n * g.oc + gi * og) * P), P, 1}, "conv");
        }
    hl_cuda_scratch_unlock(d);
    if (st) return st;
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value)
        if (fused) {
            const hl_tensor *res = c->i[11] ? c->in[bias ? 3 : 2] : NULL;
            hl_cuda_epilogue e = {(int)c->i[9], c->f[0], c->f[1],
                                  bias ? hl_cuda_ptr(bias) : NULL, res ? hl_cuda_ptr(res) : NULL,
                                  P, g.oc};
            return hl_cuda_run_epilogue(d, e, yp, g.n * g.oc * P, "conv_fused");
        }
    if (!bias) return st;
    auto add_bias_kernel = add_bias_k<T>;
    HL_LAUNCH(add_bias_kernel, hl_cuda_blocks(g.n * g.oc * P), HL_CUDA_THREADS, 0, d->stream, yp,
              (const T *)hl_cuda_ptr(bias), g.n, g.oc, P);
    return hl_cuda_check_launch("conv");
}

/* in {dy, w, bias?} out {dx}. */
template <class T>
static hl_status run_conv_grad_input(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *w = c->in[1], *bias = c->n_in > 2 ? c->in[2] : NULL;
    hl_tensor *dx = c->out[0];
    geom g = geom_of(c, dx, w, dy);
    int64_t cg = g.c / g.groups, og = g.oc / g.groups, K = cg * g.kh * g.kw, P = g.oh * g.ow;
    if (g.n * g.c * g.h * g.w == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_cuda_scratch_lock(d);
    T *dcols = (T *)hl_cuda_scratch(d, (size_t)(K * P > 0 ? K * P : 1) * sizeof(T));
    hl_status st = dcols ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "conv_grad_input: out of cuda "
                                           "memory for %lld columns", (long long)(K * P));
    const T *dyp = (const T *)hl_cuda_ptr(dy), *wp = (const T *)hl_cuda_ptr(w);
    T *dxp = (T *)hl_cuda_ptr(dx);
    for (int64_t n = 0; n < g.n && !st; n++)
        for (int64_t gi = 0; gi < g.groups && !st; gi++) {
            if (P && og)
                st = hl_cuda_gemm(d, dx->dtype, K, P, og, 1.0,
                                  hl_cuda_mat{(char *)(wp + gi * og * K), 1, K},
                                  hl_cuda_mat{(char *)(dyp + (n * g.oc + gi * og) * P), P, 1},
                                  0.0, hl_cuda_mat{(char *)dcols, P, 1}, "conv_grad_input");
            else
                cudaMemsetAsync(dcols, 0, (size_t)(K * P) * sizeof(T), d->stream);
            if (st) break;
            auto col2im_kernel = col2im_k<T>;
            HL_LAUNCH(col2im_kernel, hl_cuda_blocks(cg * g.h * g.w), HL_CUDA_THREADS, 0,
                      d->stream, g, (const T *)dcols, dxp + (n * g.c + gi * cg) * g.h * g.w,
                      bias ? (const T *)hl_cuda_ptr(bias) + gi * cg : (const T *)0);
            st = hl_cuda_check_launch("conv_grad_input");
        }
    hl_cuda_scratch_unlock(d);
    return st;
}

/* in {dy, x} out {dw}. */
template <class T>
static hl_status run_conv_grad_weight(const hl_call *c) {
    const hl_tensor *dy = c->in[0], *x = c->in[1];
    hl_tensor *dw = c->out[0];
    geom g = geom_of(c, x, dw, dy);
    int64_t cg = g.c / g.groups, og = g.oc / g.groups, K = cg * g.kh * g.kw, P = g.oh * g.ow;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    T *dwp = (T *)hl_cuda_ptr(dw);
    if (g.oc * K == 0) return HL_OK;
    if (g.n * P == 0)  /* nothing contributes */
        return cudaMemsetAsync(dwp, 0, (size_t)(g.oc * K) * sizeof(T), d->stream) == cudaSuccess
                   ? HL_OK : hl_cuda_check_launch("conv_grad_weight");
    /* half types: the sum over the batch goes to a float32 buffer after the columns */
    const bool half = !std::is_same<T, float>::value && !std::is_same<T, double>::value;
    size_t cols_bytes = ((size_t)(K * P) * sizeof(T) + 15) & ~(size_t)15;
    size_t acc_bytes = half ? (size_t)(g.oc * K) * sizeof(float) : 0;
    hl_cuda_scratch_lock(d);
    char *buf = (char *)hl_cuda_scratch(d, cols_bytes + acc_bytes);
    hl_status st = buf ? HL_OK : HL_FAIL(HL_ERR_MEMORY, "conv_grad_weight: out of cuda memory "
                                         "for %lld im2col columns", (long long)(K * P));
    T *cols = (T *)buf;
    char *acc = half ? buf + cols_bytes : (char *)dwp;
    size_t acc_esz = half ? sizeof(float) : sizeof(T);
    const T *xp = (const T *)hl_cuda_ptr(x), *dyp = (const T *)hl_cuda_ptr(dy);
    for (int64_t n = 0; n < g.n && !st; n++)
        for (int64_t gi = 0; gi < g.groups && !st; gi++) {
            auto im2col_kernel = im2col_k<T>;
            HL_LAUNCH(im2col_kernel, hl_cuda_blocks(K * P), HL_CUDA_THREADS, 0, d->stream, g,
                      xp + (n * g.c + gi * cg) * g.h * g.w, cols);
            if ((st = hl_cuda_check_launch("conv_grad_weight"))) break;
            st = hl_cuda_gemm_mixed(d, x->dtype, half ? HL_F32 : x->dtype, og, K, P, 1.0,
                                    hl_cuda_mat{(char *)(dyp + (n * g.oc + gi * og) * P), P, 1},
                                    hl_cuda_mat{(char *)cols, 1, P}, n ? 1.0 : 0.0,
                                    hl_cuda_mat{acc + (size_t)(gi * og * K) * acc_esz, K, 1},
                                    "conv_grad_weight");
        }
    if (!st && half) {
        auto narrow_kernel = narrow_k<T>;
        HL_LAUNCH(narrow_kernel, hl_cuda_blocks(g.oc * K), HL_CUDA_THREADS, 0, d->stream, dwp,
                  (const float *)acc, g.oc * K);
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
