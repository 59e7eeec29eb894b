/*
 * softmax.cu - softmax, log_softmax, their gradients, and softmax cross-entropy with its
 * gradient on CUDA, with the CPU's formulas (cpu/softmax.c): max-shifted exponentials summed
 * in double; cross-entropy takes class labels (int32/int64, ignore_index) or probabilities.
 * Rows along the last axis (inner size 1: classification's logits, attention's scores) take a
 * warp each (lanes over the classes, shuffles combining them: deterministic); rows strided by
 * an inner size (softmax over NCHW channels, per-pixel cross-entropy) a thread each.
 * A label outside [0, classes) that is not ignore_index fails with the CPU's message.
 * float16 and bfloat16 are read widened to float (the arithmetic the CPU does in float32),
 * summed in double like float32, and each result rounded once.
 */
#include "convert.cuh"

/* x viewed as (outer, n, inner), contiguous: row (q, t) is x[q*n*inner + j*inner + t]. */
struct rows { int64_t outer, n, inner; };

static rows rows_of(const hl_tensor *x, int64_t axis) {
    rows r = {1, 1, 1};
    if (x->ndim == 0) return r;
    for (int d = 0; d < axis; d++) r.outer *= x->shape[d];
    r.n = x->shape[axis];
    for (int d = (int)axis + 1; d < x->ndim; d++) r.inner *= x->shape[d];
    return r;
}

template <class T>
__global__ void softmax_k(rows r, const T *x, T *y, bool log_out) {
    HL_GRID_STRIDE(row, r.outer * r.inner) {
        int64_t q = row / r.inner, t = row - q * r.inner, base = q * r.n * r.inner + t;
        hl_arith<T> m = -INFINITY;
        for (int64_t j = 0; j < r.n; j++) {
            hl_arith<T> v = hl_widen(x[base + j * r.inner]);
            m = v > m || v != v ? v : m;
        }
        double s = 0;
        for (int64_t j = 0; j < r.n; j++) s += exp((double)(hl_widen(x[base + j * r.inner]) - m));
        if (log_out) {
            double ls = log(s);
            for (int64_t j = 0; j < r.n; j++)
                y[base + j * r.inner] =
                    hl_narrow<T>((double)(hl_widen(x[base + j * r.inner]) - m) - ls);
        } else {
            for (int64_t j = 0; j < r.n; j++)
                y[base + j * r.inner] =
                    hl_narrow<T>(exp((double)(hl_widen(x[base + j * r.inner]) - m)) / s);
        }
    }
}

/* softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy). */
template <class T>
__global__ void softmax_grad_k(rows r, const T *y, const T *dy, T *dx, bool log_in) {
    HL_GRID_STRIDE(row, r.outer * r.inner) {
        int64_t q = row / r.inner, t = row - q * r.inner, base = q * r.n * r.inner + t;
        double s = 0;
        for (int64_t j = 0; j < r.n; j++) {
            int64_t e = base + j * r.inner;
            double dye = (double)hl_widen(dy[e]);
            s += log_in ? dye : dye * (double)hl_widen(y[e]);
        }
        for (int64_t j = 0; j < r.n; j++) {
            int64_t e = base + j * r.inner;
            double ye = (double)hl_widen(y[e]), dye = (double)hl_widen(dy[e]);
            dx[e] = log_in ? hl_narrow<T>(dye - exp(ye) * s) : hl_narrow<T>(ye * (dye - s));
        }
    }
}

/* The same two for rows along the last axis (inner == 1, contiguous): a warp per row, each
   lane taking every 32nd class, the warp's max and sums combined by shuffles (a fixed order:
   deterministic; not the CPU's sequential sum bits). */
template <class T>
__global__ void softmax_rows_k(int64_t rows, int64_t n, const T *x, T *y, bool log_out) {
    const int lane = threadIdx.x & 31;
    HL_WARP_ROWS(row, rows) {
        const T *xr = x + row * n;
        T *yr = y + row * n;
        hl_arith<T> m = -INFINITY;
        for (int64_t j = lane; j < n; j += 32) {
            hl_arith<T> v = hl_widen(xr[j]);
            m = v > m || v != v ? v : m;
        }
        m = hl_cuda_warp_max(m);
        double s = 0;
        for (int64_t j = lane; j < n; j += 32) s += exp((double)(hl_widen(xr[j]) - m));
        s = hl_cuda_warp_sum(s);
        if (log_out) {
            double ls = log(s);
            for (int64_t j = lane; j < n; j += 32)
                yr[j] = hl_narrow<T>((double)(hl_widen(xr[j]) - m) - ls);
        } else {
            for (int64_t j = lane; j < n; j += 32)
                yr[j] = hl_narrow<T>(exp((double)(hl_widen(xr[j]) - m)) / s);
        }
    }
}

template <class T>
__global__ void softmax_grad_rows_k(int64_t rows, int64_t n, const T *y, const T *dy, T *dx,
                                    bool log_in) {
    const int lane = threadIdx.x & 31;
    HL_WARP_ROWS(row, rows) {
        int64_t base = row * n;
        double s = 0;
        for (int64_t j = lane; j < n; j += 32) {
            double dye = (double)hl_widen(dy[base + j]);
            s += log_in ? dye : dye * (double)hl_widen(y[base + j]);
        }
        s = hl_cuda_warp_sum(s);
        for (int64_t j = lane; j < n; j += 32) {
            double ye = (double)hl_widen(y[base + j]), dye = (double)hl_widen(dy[base + j]);
            dx[base + j] = log_in ? hl_narrow<T>(dye - exp(ye) * s) : hl_narrow<T>(ye * (dye - s));
        }
    }
}

template <class T>
static hl_status run_softmax(const hl_call *c) {
    rows r = rows_of(c->in[0], c->i[0]);
    if (r.outer * r.n * r.inner == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    if (r.inner == 1) {
        auto rows_kernel = softmax_rows_k<T>;
        HL_LAUNCH_COOP(rows_kernel, hl_cuda_warp_blocks(r.outer), HL_CUDA_THREADS, 0, d->stream,
                       r.outer, r.n, (const T *)hl_cuda_ptr(c->in[0]),
                       (T *)hl_cuda_ptr(c->out[0]), c->op == HL_OP_LOG_SOFTMAX);
        return hl_cuda_check_launch(HL_OPNAME(c->op));
    }
    auto softmax_kernel = softmax_k<T>;
    HL_LAUNCH(softmax_kernel, hl_cuda_blocks(r.outer * r.inner), HL_CUDA_THREADS, 0, d->stream,
              r, (const T *)hl_cuda_ptr(c->in[0]), (T *)hl_cuda_ptr(c->out[0]),
              c->op == HL_OP_LOG_SOFTMAX);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

/* in[0] = x, out[0] = y (contiguous); i[0] = axis. */
extern "C" hl_status hl_cuda_softmax(const hl_call *c) {
    if (c->in[0]->dtype == HL_F32) return run_softmax<float>(c);
    if (c->in[0]->dtype == HL_F64) return run_softmax<double>(c);
    if (c->in[0]->dtype == HL_F16) return run_softmax<hl_f16>(c);
    if (c->in[0]->dtype == HL_BF16) return run_softmax<hl_bf16>(c);
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}

template <class T>
static hl_status run_softmax_grad(const hl_call *c) {
    rows r = rows_of(c->in[0], c->i[0]);
    if (r.outer * r.n * r.inner == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    if (r.inner == 1) {
        auto rows_kernel = softmax_grad_rows_k<T>;
        HL_LAUNCH_COOP(rows_kernel, hl_cuda_warp_blocks(r.outer), HL_CUDA_THREADS, 0, d->stream,
                       r.outer, r.n, (const T *)hl_cuda_ptr(c->in[0]),
                       (const T *)hl_cuda_ptr(c->in[1]), (T *)hl_cuda_ptr(c->out[0]),
                       c->op == HL_OP_LOG_SOFTMAX_GRAD);
        return hl_cuda_check_launch(HL_OPNAME(c->op));
    }
    auto softmax_grad_kernel = softmax_grad_k<T>;
    HL_LAUNCH(softmax_grad_kernel, hl_cuda_blocks(r.outer * r.inner), HL_CUDA_THREADS, 0,
              d->stream, r, (const T *)hl_cuda_ptr(c->in[0]), (const T *)hl_cuda_ptr(c->in[1]),
              (T *)hl_cuda_ptr(c->out[0]), c->op == HL_OP_LOG_SOFTMAX_GRAD);
    return hl_cuda_check_launch(HL_OPNAME(c->op));
}

/* in[0] = y, in[1] = dy, out[0] = dx (contiguous); i[0] = axis. */
extern "C" hl_status hl_cuda_softmax_grad(const hl_call *c) {
    if (c->in[0]->dtype == HL_F32) return run_softmax_grad<float>(c);
    if (c->in[0]->dtype == HL_F64) return run_softmax_grad<double>(c);
    if (c->in[0]->dtype == HL_F16) return run_softmax_grad<hl_f16>(c);
    if (c->in[0]->dtype == HL_BF16) return run_softmax_grad<hl_bf16>(c);
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}

/* ---- cross-entropy: logits (N, C, d...) as rows (N, C, inner); one thread per sample ---- */

struct ce_args {
    rows r;
    bool labels, is64;
    int64_t ignore;
    int *flag;
};

__device__ static inline int64_t label_at(const void *p, int64_t i, bool is64) {
    return is64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

/* The sample's label, or -1 (flagging a bad one) when it is neither a class nor ignored. */
__device__ static inline bool label_ok(const ce_args &a, int64_t k, int64_t pos) {
    if (k == a.ignore || (k >= 0 && k < a.r.n)) return true;
    atomicMax(a.flag, (int)(HL_FLAG_BASE - (pos < HL_FLAG_BASE ? pos : HL_FLAG_BASE - 1)));
    return false;
}

template <class T>
__global__ void ce_k(ce_args a, const T *x, const void *tgt, T *loss, T *lp) {
    rows r = a.r;
    HL_GRID_STRIDE(pos, r.outer * r.inner) {
        int64_t q = pos / r.inner, t = pos - q * r.inner, base = q * r.n * r.inner + t;
        hl_arith<T> m = -INFINITY;
        for (int64_t j = 0; j < r.n; j++) {
            hl_arith<T> v = hl_widen(x[base + j * r.inner]);
            m = v > m ? v : m;
        }
        double s = 0;
        for (int64_t j = 0; j < r.n; j++) s += exp((double)(hl_widen(x[base + j * r.inner]) - m));
        double ls = log(s);
        if (a.labels) {
            int64_t k = label_at(tgt, pos, a.is64);
            if (!label_ok(a, k, pos)) continue;
            loss[pos] = k == a.ignore ? hl_narrow<T>(0.0)
                                      : hl_narrow<T>(ls - (double)(hl_widen(x[base + k * r.inner]) - m));
        } else {
            const T *p = (const T *)tgt;
            double acc = 0;
            for (int64_t j = 0; j < r.n; j++) {
                int64_t e = base + j * r.inner;
                acc -= (double)hl_widen(p[e]) * ((double)(hl_widen(x[e]) - m) - ls);
            }
            loss[pos] = hl_narrow<T>(acc);
        }
        if (lp)
            for (int64_t j = 0; j < r.n; j++) {
                int64_t e = base + j * r.inner;
                lp[e] = hl_narrow<T>((double)(hl_widen(x[e]) - m) - ls);
            }
    }
}

/* dlogits = (softmax * sum(target) - target) * dloss; ignored samples get exactly 0. */
template <class T>
__global__ void ce_grad_k(ce_args a, const T *lp, const void *tgt, const T *dl, T *o) {
    rows r = a.r;
    HL_GRID_STRIDE(pos, r.outer * r.inner) {
        int64_t q = pos / r.inner, t = pos - q * r.inner, base = q * r.n * r.inner + t;
        double d = (double)hl_widen(dl[pos]), ts = 1;
        int64_t k = -1;
        const T *p = (const T *)tgt;
        if (a.labels) {
            k = label_at(tgt, pos, a.is64);
            if (!label_ok(a, k, pos)) continue;
            if (k == a.ignore) {
                for (int64_t j = 0; j < r.n; j++) o[base + j * r.inner] = hl_narrow<T>(0.0);
                continue;
            }
        } else {
            ts = 0;
            for (int64_t j = 0; j < r.n; j++) ts += (double)hl_widen(p[base + j * r.inner]);
        }
        for (int64_t j = 0; j < r.n; j++) {
            int64_t e = base + j * r.inner;
            double tj = a.labels ? (double)(k == j) : (double)hl_widen(p[e]);
            o[e] = hl_narrow<T>((exp((double)hl_widen(lp[e])) * ts - tj) * d);
        }
    }
}

/* The same two for logits (N, C) (inner == 1): a warp per sample, as softmax_rows_k; lane 0
   checks the label and writes the loss. */
template <class T>
__global__ void ce_rows_k(ce_args a, const T *x, const void *tgt, T *loss, T *lp) {
    const int lane = threadIdx.x & 31;
    const int64_t n = a.r.n;
    HL_WARP_ROWS(pos, a.r.outer) {
        const T *xr = x + pos * n;
        hl_arith<T> m = -INFINITY;
        for (int64_t j = lane; j < n; j += 32) {
            hl_arith<T> v = hl_widen(xr[j]);
            m = v > m ? v : m;
        }
        m = hl_cuda_warp_max(m);
        double s = 0;
        for (int64_t j = lane; j < n; j += 32) s += exp((double)(hl_widen(xr[j]) - m));
        double ls = log(hl_cuda_warp_sum(s));
        if (a.labels) {
            int64_t k = label_at(tgt, pos, a.is64);
            if (k != a.ignore && (k < 0 || k >= n)) {
                if (lane == 0) label_ok(a, k, pos);
                continue;
            }
            if (lane == 0)
                loss[pos] = k == a.ignore ? hl_narrow<T>(0.0)
                                          : hl_narrow<T>(ls - (double)(hl_widen(xr[k]) - m));
        } else {
            const T *p = (const T *)tgt + pos * n;
            double acc = 0;
            for (int64_t j = lane; j < n; j += 32)
                acc -= (double)hl_widen(p[j]) * ((double)(hl_widen(xr[j]) - m) - ls);
            acc = hl_cuda_warp_sum(acc);
            if (lane == 0) loss[pos] = hl_narrow<T>(acc);
        }
        if (lp)
            for (int64_t j = lane; j < n; j += 32)
                lp[pos * n + j] = hl_narrow<T>((double)(hl_widen(xr[j]) - m) - ls);
    }
}

template <class T>
__global__ void ce_grad_rows_k(ce_args a, const T *lp, const void *tgt, const T *dl, T *o) {
    const int lane = threadIdx.x & 31;
    const int64_t n = a.r.n;
    HL_WARP_ROWS(pos, a.r.outer) {
        int64_t base = pos * n;
        double d = (double)hl_widen(dl[pos]), ts = 1;
        int64_t k = -1;
        const T *p = (const T *)tgt;
        if (a.labels) {
            k = label_at(tgt, pos, a.is64);
            if (k != a.ignore && (k < 0 || k >= n)) {
                if (lane == 0) label_ok(a, k, pos);
                continue;
            }
            if (k == a.ignore) {
                for (int64_t j = lane; j < n; j += 32) o[base + j] = hl_narrow<T>(0.0);
                continue;
            }
        } else {
            ts = 0;
            for (int64_t j = lane; j < n; j += 32) ts += (double)hl_widen(p[base + j]);
            ts = hl_cuda_warp_sum(ts);
        }
        for (int64_t j = lane; j < n; j += 32) {
            double tj = a.labels ? (double)(k == j) : (double)hl_widen(p[base + j]);
            o[base + j] = hl_narrow<T>((exp((double)hl_widen(lp[base + j])) * ts - tj) * d);
        }
    }
}

template <class T>
static hl_status run_ce(const hl_call *c, bool grad) {
    const hl_tensor *x = c->in[0], *target = c->in[1];
    ce_args a;
    a.r.outer = x->shape[0];
    a.r.n = x->shape[1];
    a.r.inner = 1;
    for (int d = 2; d < x->ndim; d++) a.r.inner *= x->shape[d];
    a.labels = c->i[1] != 0;
    a.is64 = target->dtype == HL_I64;
    a.ignore = c->i[0];
    const char *op = HL_OPNAME(c->op);
    if (a.r.outer * a.r.inner == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    a.flag = d->error_flag;
    int64_t n = a.r.outer * a.r.inner;
    if (a.r.inner == 1 && grad) {
        auto rows_kernel = ce_grad_rows_k<T>;
        HL_LAUNCH_COOP(rows_kernel, hl_cuda_warp_blocks(n), HL_CUDA_THREADS, 0, d->stream, a,
                       (const T *)hl_cuda_ptr(x), (const void *)hl_cuda_ptr(target),
                       (const T *)hl_cuda_ptr(c->in[2]), (T *)hl_cuda_ptr(c->out[0]));
    } else if (a.r.inner == 1) {
        auto rows_kernel = ce_rows_k<T>;
        HL_LAUNCH_COOP(rows_kernel, hl_cuda_warp_blocks(n), HL_CUDA_THREADS, 0, d->stream, a,
                       (const T *)hl_cuda_ptr(x), (const void *)hl_cuda_ptr(target),
                       (T *)hl_cuda_ptr(c->out[0]),
                       c->out[1] ? (T *)hl_cuda_ptr(c->out[1]) : (T *)0);
    } else if (grad) {
        auto ce_grad_kernel = ce_grad_k<T>;
        HL_LAUNCH(ce_grad_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, a,
                  (const T *)hl_cuda_ptr(x), (const void *)hl_cuda_ptr(target),
                  (const T *)hl_cuda_ptr(c->in[2]), (T *)hl_cuda_ptr(c->out[0]));
    } else {
        auto ce_kernel = ce_k<T>;
        HL_LAUNCH(ce_kernel, hl_cuda_blocks(n), HL_CUDA_THREADS, 0, d->stream, a,
                  (const T *)hl_cuda_ptr(x), (const void *)hl_cuda_ptr(target),
                  (T *)hl_cuda_ptr(c->out[0]), c->out[1] ? (T *)hl_cuda_ptr(c->out[1]) : (T *)0);
    }
    hl_status st = hl_cuda_check_launch(op);
    if (st || !a.labels) return st;
    int64_t pos;
    if ((st = hl_cuda_take_flag(d, op, &pos)) || pos < 0) return st;
    int64_t v = 0;
    cudaMemcpy(&v, hl_cuda_ptr(target) + pos * (a.is64 ? 8 : 4), a.is64 ? 8 : 4,
               cudaMemcpyDeviceToHost);
    if (!a.is64) v = (int64_t)(int32_t)v;
    return HL_FAIL(HL_ERR_INDEX, "%s: target label %lld (at flat position %lld of the target %s) "
                   "is out of range for %lld classes; labels must be in [0, %lld) or equal "
                   "ignore_index %lld", op, (long long)v, (long long)pos, HL_DESC(target),
                   (long long)a.r.n, (long long)a.r.n, (long long)a.ignore);
}

/* in[0] = logits, in[1] = target; out[0] = loss, out[1] = log_prob or NULL; i[0] =
   ignore_index, i[1] = labels. */
extern "C" hl_status hl_cuda_softmax_cross_entropy(const hl_call *c) {
    if (c->in[0]->dtype == HL_F32) return run_ce<float>(c, false);
    if (c->in[0]->dtype == HL_F64) return run_ce<double>(c, false);
    if (c->in[0]->dtype == HL_F16) return run_ce<hl_f16>(c, false);
    if (c->in[0]->dtype == HL_BF16) return run_ce<hl_bf16>(c, false);
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}

/* in[0] = log_prob, in[1] = target, in[2] = dloss; out[0] = dlogits. */
extern "C" hl_status hl_cuda_softmax_cross_entropy_grad(const hl_call *c) {
    if (c->in[0]->dtype == HL_F32) return run_ce<float>(c, true);
    if (c->in[0]->dtype == HL_F64) return run_ce<double>(c, true);
    if (c->in[0]->dtype == HL_F16) return run_ce<hl_f16>(c, true);
    if (c->in[0]->dtype == HL_BF16) return run_ce<hl_bf16>(c, true);
    return HL_FAIL(HL_ERR_DTYPE, "%s: no CUDA kernel for %s", HL_OPNAME(c->op), HL_DESC(c->in[0]));
}
