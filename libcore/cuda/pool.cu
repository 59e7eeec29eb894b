/*
 * pool.cu - max and average pooling and their gradients on CUDA, with the CPU's windows
 * (cpu/pool.c, api/pool.c: PyTorch's rules): padding never wins a max and a window of padding
 * alone gives -inf and index -1; a NaN tap wins; the average divides by the taps inside the
 * padded input (count_include_pad) or inside the input. Forward: a thread per output element.
 * Gradients: a thread per input element gathering from the windows that hold it, adding in
 * the CPU's order (the CPU's bits; deterministic, no atomics); max_pool_grad first checks
 * every index like the CPU (indices outside their own windows, which no forward makes, fall
 * back to a thread per plane scattering them). float16/bfloat16: read widened to
 * float, results rounded once (a gradient element that several windows reach is rounded
 * after each addition).
 */
#include "convert.cuh"
#include "../src/kernel_scalar.h"

struct pgeom {
    int64_t planes, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    bool count_include_pad;
};

static pgeom pgeom_of(const hl_call *c, const hl_tensor *x, const hl_tensor *y) {
    pgeom g;
    g.planes = x->shape[0] * x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.oh = y->shape[2];
    g.ow = y->shape[3];
    g.kh = c->i[0], g.kw = c->i[1], g.sh = c->i[2], g.sw = c->i[3], g.dh = c->i[4];
    g.dw = c->i[5], g.pt = c->i[6], g.pl = c->i[7], g.pb = c->i[8], g.pr = c->i[9];
    g.count_include_pad = c->i[10] != 0;
    return g;
}

__device__ static inline int64_t avg_divisor(const pgeom &g, int64_t y0, int64_t x0, int64_t ylo,
                                             int64_t yhi, int64_t xlo, int64_t xhi) {
    if (!g.count_include_pad) return (yhi - ylo) * (xhi - xlo);
    int64_t a, by, bx;
    hl_tap_range(y0 + g.pt, g.dh, g.h + g.pt + g.pb, g.kh, &a, &by);
    by -= a;
    hl_tap_range(x0 + g.pl, g.dw, g.w + g.pl + g.pr, g.kw, &a, &bx);
    bx -= a;
    return by * bx;
}

template <class T>
__global__ void pool_k(pgeom g, const T *x, T *y, int64_t *idx, bool is_max) {
    int64_t OP = g.oh * g.ow;
    HL_GRID_STRIDE(o, g.planes * OP) {
        int64_t p = o / OP, q = o - p * OP, oy = q / g.ow, ox = q - oy * g.ow;
        const T *plane = x + p * g.h * g.w;
        int64_t y0 = oy * g.sh - g.pt, x0 = ox * g.sw - g.pl, ylo, yhi, xlo, xhi;
        hl_tap_range(y0, g.dh, g.h, g.kh, &ylo, &yhi);
        hl_tap_range(x0, g.dw, g.w, g.kw, &xlo, &xhi);
        if (is_max) {
            hl_arith<T> best = -INFINITY;
            int64_t at = -1;
            for (int64_t ty = ylo; ty < yhi; ty++)
                for (int64_t tx = xlo; tx < xhi; tx++) {
                    int64_t i = (y0 + ty * g.dh) * g.w + x0 + tx * g.dw;
                    hl_arith<T> v = hl_widen(plane[i]);
                    if (at < 0 || v > best || v != v) {
                        best = v;
                        at = i;
                    }
                }
            y[o] = hl_narrow<T>(best);
            if (idx) idx[o] = at;
        } else {
            hl_arith<T> sum = 0;
            for (int64_t ty = ylo; ty < yhi; ty++)
                for (int64_t tx = xlo; tx < xhi; tx++)
                    sum += hl_widen(plane[(y0 + ty * g.dh) * g.w + x0 + tx * g.dw]);
            int64_t div = avg_divisor(g, y0, x0, ylo, yhi, xlo, xhi);
            y[o] = hl_narrow<T>(div > 0 ? sum / (hl_arith<T>)div : (hl_arith<T>)0);
        }
    }
}

/* The scatter form of max_pool_grad: a thread per plane, adding dy at each output's index in
   output order (the CPU's loop). Only for indices that do not all lie in their own windows
   (indices the caller made some other way): the gather below cannot find those. */
template <class T>
__global__ void max_pool_scatter_k(pgeom g, const T *dy, const void *idx, bool i64, T *dx) {
    int64_t HW = g.h * g.w, OP = g.oh * g.ow;
    HL_GRID_STRIDE(p, g.planes) {
        T *plane = dx + p * HW;
        for (int64_t i = 0; i < HW; i++) plane[i] = T{};
        for (int64_t o = p * OP; o < (p + 1) * OP; o++) {
            int64_t i = i64 ? ((const int64_t *)idx)[o] : ((const int32_t *)idx)[o];
            if (i >= 0) plane[i] = hl_narrow<T>(hl_widen(plane[i]) + hl_widen(dy[o]));
        }
    }
}

/* The gradients as gathers: a thread per input element visits the outputs whose windows
   hold it in output order (oy, then ox, ascending: the tap index descending) and adds their
   contributions rounding after each addition, as the CPU's scatter loop does, so the result
   is the CPU's bit for bit; no atomics. max: an output contributes when its index is this
   element; avg: dy over the output's divisor. */
template <class T>
__global__ void pool_gather_k(pgeom g, const T *dy, const void *idx, bool i64, T *dx,
                              bool is_max) {
    int64_t HW = g.h * g.w, OP = g.oh * g.ow;
    HL_GRID_STRIDE(e, g.planes * HW) {
        int64_t p = e / HW, i = e - p * HW, iy = i / g.w, ix = i - iy * g.w;
        const T *dyp = dy + p * OP;
        T q = T{};
        for (int64_t ty = g.kh - 1; ty >= 0; ty--) {
            int64_t ny = iy + g.pt - ty * g.dh;
            if (ny < 0 || ny % g.sh) continue;
            int64_t oy = ny / g.sh;
            if (oy >= g.oh) continue;
            int64_t y0 = oy * g.sh - g.pt, ylo, yhi;
            hl_tap_range(y0, g.dh, g.h, g.kh, &ylo, &yhi);
            for (int64_t tx = g.kw - 1; tx >= 0; tx--) {
                int64_t nx = ix + g.pl - tx * g.dw;
                if (nx < 0 || nx % g.sw) continue;
                int64_t ox = nx / g.sw;
                if (ox >= g.ow) continue;
                int64_t o = oy * g.ow + ox;
                if (is_max) {
                    int64_t at = i64 ? ((const int64_t *)idx)[p * OP + o]
                                     : ((const int32_t *)idx)[p * OP + o];
                    if (at == i) q = hl_narrow<T>(hl_widen(q) + hl_widen(dyp[o]));
                } else {
                    int64_t x0 = ox * g.sw - g.pl, xlo, xhi;
                    hl_tap_range(x0, g.dw, g.w, g.kw, &xlo, &xhi);
                    int64_t div = avg_divisor(g, y0, x0, ylo, yhi, xlo, xhi);
                    if (div <= 0) continue;
                    q = hl_narrow<T>(hl_widen(q) + hl_widen(dyp[o]) / (hl_arith<T>)div);
                }
            }
        }
        dx[e] = q;
    }
}

/* Flags the first index outside [-1, plane) as HL_FLAG_BASE - k (at least 2), and an index
   in range but outside its own output's window (not the forward's: the scatter kernel
   serves those) as 1. */
__global__ void check_pool_indices_k(pgeom g, const void *idx, bool i64, int64_t n,
                                     int64_t plane, int *flag) {
    int64_t OP = g.oh * g.ow;
    HL_GRID_STRIDE(k, n) {
        int64_t v = i64 ? ((const int64_t *)idx)[k] : ((const int32_t *)idx)[k];
        if (v < -1 || v >= plane) {
            atomicMax(flag, (int)(HL_FLAG_BASE - (k < HL_FLAG_BASE - 2 ? k : HL_FLAG_BASE - 2)));
        } else if (v >= 0) {
            int64_t o = k % OP, oy = o / g.ow, ox = o - oy * g.ow;
            int64_t ny = v / g.w - (oy * g.sh - g.pt), nx = v % g.w - (ox * g.sw - g.pl);
            if (ny < 0 || ny % g.dh || ny / g.dh >= g.kh || nx < 0 || nx % g.dw ||
                nx / g.dw >= g.kw)
                atomicMax(flag, 1);
        }
    }
}

template <class T>
static hl_status run_pool(const hl_call *c) {
    pgeom g = pgeom_of(c, c->in[0], c->out[0]);
    int64_t n = g.planes * g.oh * g.ow;
    if (!n) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    auto pool_kernel = pool_k<T>;
    HL_LAUNCH(pool_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, g,
              (const T *)hl_cuda_ptr(c->in[0]), (T *)hl_cuda_ptr(c->out[0]),
              c->n_out > 1 && c->out[1] ? (int64_t *)hl_cuda_ptr(c->out[1]) : (int64_t *)0,
              c->op == HL_OP_MAX_POOL);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

template <class T>
static hl_status run_pool_grad(const hl_call *c) {
    const hl_tensor *dy = c->in[0];
    hl_tensor *dx = c->out[0];
    pgeom g = pgeom_of(c, dx, dy);
    if (g.planes == 0 || g.h * g.w == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    const void *ip = NULL;
    bool i64 = false, gather = true;
    if (c->op == HL_OP_MAX_POOL_GRAD) {
        const hl_tensor *it = c->in[1];
        i64 = it->dtype == HL_I64;
        ip = (const void *)hl_cuda_ptr(it);
        int64_t count = hl_cuda_numel(it), plane = g.h * g.w, pos;
        if (count) {
            HL_LAUNCH(check_pool_indices_k, hl_cuda_blocks(count), HL_CUDA_THREADS, 0, d->stream,
                      g, ip, i64, count, plane, d->error_flag);
            hl_status st = hl_cuda_check_launch("max_pool_grad");
            if (st || (st = hl_cuda_take_flag(d, "max_pool_grad", &pos))) return st;
            gather = pos != HL_FLAG_BASE - 1;  /* 1: some index outside its window */
            if (pos >= 0 && gather) {
                int64_t v = 0;
                cudaMemcpy(&v, hl_cuda_ptr(it) + pos * (i64 ? 8 : 4), i64 ? 8 : 4,
                           cudaMemcpyDeviceToHost);
                if (!i64) v = (int64_t)(int32_t)v;
                return HL_FAIL(HL_ERR_INDEX, "max_pool_grad: index %lld is out of range for "
                               "input planes of %lld elements (valid: 0 to %lld, or -1 for a "
                               "window of padding only)", (long long)v, (long long)plane,
                               (long long)plane - 1);
            }
        }
    }
    if (gather) {
        auto gather_kernel = pool_gather_k<T>;
        HL_LAUNCH(gather_kernel, hl_cuda_blocks(g.planes * g.h * g.w), HL_CUDA_THREADS, 0,
                  d->stream, g, (const T *)hl_cuda_ptr(dy), ip, i64, (T *)hl_cuda_ptr(dx),
                  c->op == HL_OP_MAX_POOL_GRAD);
    } else {
        auto scatter_kernel = max_pool_scatter_k<T>;
        HL_LAUNCH(scatter_kernel, hl_cuda_blocks(g.planes), HL_CUDA_THREADS, 0, d->stream, g,
                  (const T *)hl_cuda_ptr(dy), ip, i64, (T *)hl_cuda_ptr(dx));
    }
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

extern "C" hl_status hl_cuda_pool(const hl_call *c) {
    if (c->in[0]->dtype == HL_F32) return run_pool<float>(c);
    if (c->in[0]->dtype == HL_F64) return run_pool<double>(c);
    if (c->in[0]->dtype == HL_F16) return run_pool<hl_f16>(c);
    if (c->in[0]->dtype == HL_BF16) return run_pool<hl_bf16>(c);
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}

extern "C" hl_status hl_cuda_pool_grad(const hl_call *c) {
    if (c->out[0]->dtype == HL_F32) return run_pool_grad<float>(c);
    if (c->out[0]->dtype == HL_F64) return run_pool_grad<double>(c);
    if (c->out[0]->dtype == HL_F16) return run_pool_grad<hl_f16>(c);
    if (c->out[0]->dtype == HL_BF16) return run_pool_grad<hl_bf16>(c);
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->out[0]));
}
