/*
 * norm.cu - batch norm and layer norm, forward and backward, on CUDA with the CPU's formulas
 * (cpu/norm.c; record layouts in api/norm.c): sums in double, the running variance unbiased
 * (PyTorch), inference using the running statistics. Batch norm: a thread per channel; layer
 * norm: a thread per row (and per column for dscale/dbias). Each statistic is summed in one
 * fixed order, so results do not depend on the launch shape.
 */
#include "hl_cuda.cuh"

/* A per-channel vector (C entries, any stride), or absent. */
template <class T> struct vec {
    T *p;
    int64_t s;
    __device__ double get(int64_t i) const { return (double)p[i * s]; }
    __device__ void set(int64_t i, double v) const { p[i * s] = (T)v; }
};
template <class T> static vec<T> vec_of(const hl_tensor *t) {
    vec<T> v;
    v.p = t ? (T *)hl_cuda_ptr(t) : (T *)0;
    v.s = t ? t->strides[0] : 0;
    return v;
}

template <class T>
__global__ void bn_forward_k(const T *x, T *y, vec<T> scale, vec<T> bias, vec<T> rmean,
                             vec<T> rvar, vec<T> smean, vec<T> sinv, int64_t N, int64_t C,
                             int64_t S, bool training, double momentum, double eps) {
    int64_t M = N * S;
    HL_GRID_STRIDE(ch, C) {
        double mean, invstd;
        if (training) {
            double s = 0, q = 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) s += (double)x[(n * C + ch) * S + i];
            mean = M ? s / (double)M : 0;
            for (int64_t n = 0; n < N; n++)
                for (int64_t i = 0; i < S; i++) {
                    double d = (double)x[(n * C + ch) * S + i] - mean;
                    q += d * d;
                }
            double var = M ? q / (double)M : 0;
            invstd = 1 / sqrt(var + eps);
            if (rmean.p && M > 1) {
                rmean.set(ch, (1 - momentum) * rmean.get(ch) + momentum * mean);
                rvar.set(ch, (1 - momentum) * rvar.get(ch) + momentum * (q / (double)(M - 1)));
            }
        } else {
            mean = rmean.get(ch);
            invstd = 1 / sqrt(rvar.get(ch) + eps);
        }
        double a = (scale.p ? scale.get(ch) : 1) * invstd, b = bias.p ? bias.get(ch) : 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t e = (n * C + ch) * S + i;
                y[e] = (T)(((double)x[e] - mean) * a + b);
            }
        if (smean.p) smean.set(ch, mean);
        if (sinv.p) sinv.set(ch, invstd);
    }
}

template <class T>
__global__ void bn_backward_k(const T *dy, const T *x, vec<T> scale, vec<T> smean, vec<T> sinv,
                              T *dx, vec<T> dscale, vec<T> dbias, int64_t N, int64_t C,
                              int64_t S, bool training) {
    int64_t M = N * S;
    HL_GRID_STRIDE(ch, C) {
        double mean = smean.get(ch), invstd = sinv.get(ch), g = scale.p ? scale.get(ch) : 1;
        double sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t e = (n * C + ch) * S + i;
                sdy += (double)dy[e];
                sdyx += (double)dy[e] * ((double)x[e] - mean);
            }
        if (dbias.p) dbias.set(ch, sdy);
        if (dscale.p) dscale.set(ch, sdyx * invstd);
        if (!dx) continue;
        double k = g * invstd;
        double a = training && M ? sdy / (double)M : 0;
        double b = training && M ? sdyx * invstd * invstd / (double)M : 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                int64_t e = (n * C + ch) * S + i;
                dx[e] = training ? (T)(k * ((double)dy[e] - a - ((double)x[e] - mean) * b))
                                 : (T)(k * (double)dy[e]);
            }
    }
}

template <class T>
__global__ void ln_forward_k(const T *x, const T *g, const T *b, T *y, T *mo, T *io,
                             int64_t rows, int64_t cols, double eps) {
    HL_GRID_STRIDE(r, rows) {
        const T *xr = x + r * cols;
        T *yr = y + r * cols;
        double s = 0, q = 0;
        for (int64_t j = 0; j < cols; j++) s += (double)xr[j];
        double mean = cols ? s / (double)cols : 0;
        for (int64_t j = 0; j < cols; j++) {
            double d = (double)xr[j] - mean;
            q += d * d;
        }
        double inv = cols ? 1 / sqrt(q / (double)cols + eps) : NAN;
        for (int64_t j = 0; j < cols; j++) {
            double v = ((double)xr[j] - mean) * inv;
            if (g) v *= (double)g[j];
            if (b) v += (double)b[j];
            yr[j] = (T)v;
        }
        if (mo) mo[r] = (T)mean;
        if (io) io[r] = (T)inv;
    }
}

template <class T>
__global__ void ln_params_grad_k(const T *dy, const T *x, const T *mean, const T *inv, T *ds,
                                 T *db, int64_t rows, int64_t cols) {
    HL_GRID_STRIDE(j, cols) {
        double as = 0, ab = 0;
        for (int64_t r = 0; r < rows; r++) {
            double d = (double)dy[r * cols + j];
            ab += d;
            as += d * (((double)x[r * cols + j] - (double)mean[r]) * (double)inv[r]);
        }
        if (ds) ds[j] = (T)as;
        if (db) db[j] = (T)ab;
    }
}

template <class T>
__global__ void ln_input_grad_k(const T *dy, const T *x, const T *g, const T *mean,
                                const T *inv, T *dx, int64_t rows, int64_t cols) {
    HL_GRID_STRIDE(r, rows) {
        const T *dr = dy + r * cols, *xr = x + r * cols;
        double m = (double)mean[r], iv = (double)inv[r], sg = 0, sgx = 0;
        for (int64_t j = 0; j < cols; j++) {
            double gj = g ? (double)dr[j] * (double)g[j] : (double)dr[j];
            sg += gj;
            sgx += gj * (((double)xr[j] - m) * iv);
        }
        double a = sg / (double)cols, b = sgx / (double)cols;
        for (int64_t j = 0; j < cols; j++) {
            double gj = g ? (double)dr[j] * (double)g[j] : (double)dr[j];
            dx[r * cols + j] = (T)(iv * (gj - a - ((double)xr[j] - m) * iv * b));
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

template <class T>
static hl_status run_batch_norm(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim);
    if (!C) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto bn_forward_kernel = bn_forward_k<T>;
    HL_LAUNCH(bn_forward_kernel, hl_cuda_blocks(C), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(x), (T *)hl_cuda_ptr(c->out[0]), vec_of<T>(c->in[1]),
              vec_of<T>(c->in[2]), vec_of<T>(c->in[3]), vec_of<T>(c->in[4]),
              vec_of<T>(c->out[1]), vec_of<T>(c->out[2]), N, C, S, c->i[0] != 0, c->f[0],
              c->f[1]);
    return hl_cuda_check_launch("batch_norm");
}

template <class T>
static hl_status run_batch_norm_grad(const hl_call *c) {
    const hl_tensor *x = c->in[1];
    int64_t N = x->shape[0], C = x->shape[1], S = prod(x->shape, 2, x->ndim);
    if (!C) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    hl_tensor *dx = grad_out(c, 0);
    auto bn_backward_kernel = bn_backward_k<T>;
    HL_LAUNCH(bn_backward_kernel, hl_cuda_blocks(C), HL_CUDA_THREADS, 0, d->stream,
              (const T *)hl_cuda_ptr(c->in[0]), (const T *)hl_cuda_ptr(x), vec_of<T>(c->in[2]),
              vec_of<T>(c->in[3]), vec_of<T>(c->in[4]), dx ? (T *)hl_cuda_ptr(dx) : (T *)0,
              vec_of<T>(grad_out(c, 1)), vec_of<T>(grad_out(c, 2)), N, C, S, c->i[0] != 0);
    return hl_cuda_check_launch("batch_norm_grad");
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
    HL_LAUNCH(ln_forward_kernel, hl_cuda_blocks(rows), HL_CUDA_THREADS, 0, d->stream,
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
    HL_LAUNCH(ln_input_grad_kernel, hl_cuda_blocks(rows), HL_CUDA_THREADS, 0, d->stream, dy, xp,
              (const T *)ptr_or_null<T>(c->in[2]), mean, inv, (T *)hl_cuda_ptr(dx), rows, cols);
    return hl_cuda_check_launch("layer_norm_grad");
}

#define FLOAT_FAMILY(family, which)                                                          \
    extern "C" hl_status hl_cuda_##family(const hl_call *c) {                                \
        hl_dtype dt = c->in[which]->dtype;                                                   \
        if (dt == HL_F32) return run_##family<float>(c);                                     \
        if (dt == HL_F64) return run_##family<double>(c);                                    \
        return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op),          \
                       HL_DESC(c->in[which]));                                               \
    }
FLOAT_FAMILY(batch_norm, 0)
FLOAT_FAMILY(batch_norm_grad, 1)
FLOAT_FAMILY(layer_norm, 0)
FLOAT_FAMILY(layer_norm_grad, 1)
