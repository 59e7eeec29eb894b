/*
 * optim.cu - hl_optim_update on CUDA (api/optim.c's record; the rules are in hl_core.h): one
 * kernel per rule family, one pass reading param, grad and the states once, as
 * cpu/optim.c does on the CPU.
 *
 * Each element goes through the CPU's float operations in the CPU's order, in the
 * parameter's dtype (the constants rounded to it first), so the fused update is bit for bit
 * the rule's sequence of element-wise ops (hl/opt/rules.py), which is what hl.opt ran on cuda
 * before this kernel existed and what it still runs for a parameter this kernel cannot take.
 * That needs every product rounded before it is added: hl_rn_add/hl_rn_mul (epilogue.cuh)
 * keep nvcc from contracting them into fused multiply-adds, and hl_rn_div/hl_rn_sqrt pin
 * division and square root to IEEE rounding whatever the build's flags.
 *
 * The per-step values (learning rate, bias corrections) come from 0-d device tensors read by
 * the kernel when it runs (a recorded plan, a captured graph: the plan writes them before
 * each replay), or, in an eager step, from the record's numbers, passed by value.
 *
 * hl.amp's skip flag (a 0-d bool on the device, i[HL_OPTIM_SKIP]) is read by every thread
 * when the kernel runs, and a set flag returns before anything is written: the decision
 * stays on the device (no host read, nothing to synchronise), as cpu/optim.c's does.
 */
#include "epilogue.cuh"

#ifdef __CUDACC__
__device__ static inline float hl_rn_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ static inline double hl_rn_div(double a, double b) { return __ddiv_rn(a, b); }
__device__ static inline float hl_rn_sqrt(float a) { return __fsqrt_rn(a); }
__device__ static inline double hl_rn_sqrt(double a) { return __dsqrt_rn(a); }
#else
__device__ static inline float hl_rn_div(float a, float b) { return a / b; }
__device__ static inline double hl_rn_div(double a, double b) { return a / b; }
__device__ static inline float hl_rn_sqrt(float a) { return sqrtf(a); }
__device__ static inline double hl_rn_sqrt(double a) { return sqrt(a); }
#endif

/* What one launch reads: the arrays, the per-step values, the rule's constants. */
template <class T>
struct optim_args {
    T *p, *s[3];              /* param, states (in the rule's order) */
    const T *g;
    const T *step_ptr[3];     /* 0-d device tensors, or NULL: step_val then */
    const bool *skip;         /* hl.amp's skip flag (0-d, on the device), or NULL */
    T step_val[3];
    T hyper[5];               /* f[0..4] rounded to T */
    int flags, n_states;
};

template <class T>
__device__ static inline T step_value(const optim_args<T> &a, int k) {
    return a.step_ptr[k] ? *a.step_ptr[k] : a.step_val[k];
}

/* Whether this launch is a skipped step: every thread reads the one flag (a broadcast read). */
template <class T>
__device__ static inline bool skipped(const optim_args<T> &a) { return a.skip && *a.skip; }

#define ADD hl_rn_add
#define MUL hl_rn_mul
#define DIV hl_rn_div
#define SQRT hl_rn_sqrt

/* d = grad (+ wd * param, when wd != 0): with_l2 in rules.py */
template <class T>
__device__ static inline T decayed(T g, T p, T wd) { return wd != 0 ? ADD(g, MUL(p, wd)) : g; }

template <class T>
__global__ void sgd_k(optim_args<T> a, int64_t n) {
    if (skipped(a)) return;
    const T neg_lr = step_value(a, 0), wd = a.hyper[0], mom = a.hyper[1], keep = a.hyper[2];
    const bool init = a.flags & HL_OPTIM_INIT, nesterov = a.flags & HL_OPTIM_NESTEROV;
    T *b = a.s[0];
    HL_GRID_STRIDE(i, n) {
        const T d = decayed(a.g[i], a.p[i], wd);
        if (!a.n_states) {
            a.p[i] = ADD(a.p[i], MUL(d, neg_lr));
            continue;
        }
        const T buf = init ? d : ADD(MUL(b[i], mom), keep != 1 ? MUL(d, keep) : d);
        b[i] = buf;
        const T dir = nesterov ? ADD(d, MUL(buf, mom)) : buf;
        a.p[i] = ADD(a.p[i], MUL(dir, neg_lr));
    }
}

template <class T>
__global__ void adam_k(optim_args<T> a, int64_t n) {
    if (skipped(a)) return;
    const bool decoupled = a.flags & HL_OPTIM_DECOUPLED;
    const T neg_step = step_value(a, 0), bc2 = step_value(a, 1);
    const T decay = decoupled ? step_value(a, 2) : T(1);
    const T wd = decoupled ? T(0) : a.hyper[0], w1 = a.hyper[1], b2 = a.hyper[2];
    const T w2 = a.hyper[3], eps = a.hyper[4];
    T *m = a.s[0], *v = a.s[1], *vmax = a.n_states > 2 ? a.s[2] : NULL;
    HL_GRID_STRIDE(i, n) {
        const T pi = decoupled ? MUL(a.p[i], decay) : a.p[i];
        const T d = wd != 0 ? ADD(a.g[i], MUL(pi, wd)) : a.g[i];
        const T mi = ADD(m[i], MUL(d - m[i], w1));
        T vi = ADD(MUL(v[i], b2), MUL(MUL(d, d), w2));
        m[i] = mi;
        v[i] = vi;
        if (vmax) {
            const T old = vmax[i];
            vi = (old > vi || old != old) ? old : vi;  /* maximum(vmax, v), NaN kept */
            vmax[i] = vi;
        }
        const T denom = ADD(DIV(SQRT(vi), bc2), eps);
        a.p[i] = ADD(pi, MUL(DIV(mi, denom), neg_step));
    }
}

template <class T>
__global__ void rmsprop_k(optim_args<T> a, int64_t n) {
    if (skipped(a)) return;
    const T neg_lr = step_value(a, 0), wd = a.hyper[0], alpha = a.hyper[1], w = a.hyper[2];
    const T eps = a.hyper[3], mom = a.hyper[4];
    int k = 0;
    T *s = a.s[k++];
    T *ga = a.flags & HL_OPTIM_CENTERED ? a.s[k++] : NULL;
    T *b = a.flags & HL_OPTIM_MOMENTUM ? a.s[k++] : NULL;
    HL_GRID_STRIDE(i, n) {
        const T d = decayed(a.g[i], a.p[i], wd);
        const T si = ADD(MUL(s[i], alpha), MUL(MUL(d, d), w));
        s[i] = si;
        T avg;
        if (ga) {
            const T gi = ADD(ga[i], MUL(d - ga[i], w));
            ga[i] = gi;
            avg = ADD(SQRT(si - MUL(gi, gi)), eps);
        } else {
            avg = ADD(SQRT(si), eps);
        }
        T dir = DIV(d, avg);
        if (b) {
            dir = ADD(MUL(b[i], mom), dir);
            b[i] = dir;
        }
        a.p[i] = ADD(a.p[i], MUL(dir, neg_lr));
    }
}

template <class T>
__global__ void adagrad_k(optim_args<T> a, int64_t n) {
    if (skipped(a)) return;
    const T neg_lr = step_value(a, 0), wd = a.hyper[0], eps = a.hyper[1];
    T *s = a.s[0];
    HL_GRID_STRIDE(i, n) {
        const T d = decayed(a.g[i], a.p[i], wd);
        const T si = ADD(s[i], MUL(d, d));
        s[i] = si;
        a.p[i] = ADD(a.p[i], MUL(DIV(d, ADD(SQRT(si), eps)), neg_lr));
    }
}

template <class T>
__global__ void v2_momentum_k(optim_args<T> a, int64_t n) {
    if (skipped(a)) return;
    const T neg_lr = step_value(a, 0), wd = a.hyper[0], mom = a.hyper[1];
    T *b = a.s[0];
    HL_GRID_STRIDE(i, n) {
        const T d = decayed(a.g[i], a.p[i], wd);
        const T bi = ADD(MUL(b[i], mom), MUL(d, neg_lr));
        b[i] = bi;
        a.p[i] = ADD(a.p[i], bi);
    }
}

template <class T>
__global__ void v2_adam_k(optim_args<T> a, int64_t n) {
    if (skipped(a)) return;
    const T neg_alpha = step_value(a, 0), b1 = a.hyper[0], w1 = a.hyper[1], b2 = a.hyper[2];
    const T w2 = a.hyper[3], eps = a.hyper[4];
    T *m = a.s[0], *v = a.s[1];
    HL_GRID_STRIDE(i, n) {
        const T g = a.g[i];
        const T mi = ADD(MUL(m[i], b1), MUL(g, w1));
        const T vi = ADD(MUL(v[i], b2), MUL(MUL(g, g), w2));
        m[i] = mi;
        v[i] = vi;
        a.p[i] = ADD(a.p[i], MUL(DIV(mi, ADD(SQRT(vi), eps)), neg_alpha));
    }
}

template <class T>
static hl_status run_update(const hl_call *c) {
    optim_args<T> a;
    memset(&a, 0, sizeof a);
    a.p = (T *)hl_cuda_ptr(c->out[0]);
    a.g = (const T *)hl_cuda_ptr(c->in[0]);
    a.n_states = (int)c->i[2];
    a.flags = (int)c->i[1];
    for (int k = 0; k < a.n_states; k++) a.s[k] = (T *)hl_cuda_ptr(c->out[1 + k]);
    for (int k = 0; k < (int)c->i[3] && k < 3; k++) {
        if (c->i[4]) a.step_ptr[k] = (const T *)hl_cuda_ptr(c->in[1 + k]);
        else a.step_val[k] = (T)c->f[HL_OPTIM_VALUES + k];
    }
    for (int k = 0; k < 5; k++) a.hyper[k] = (T)c->f[k];
    if (c->i[HL_OPTIM_SKIP]) a.skip = (const bool *)hl_cuda_ptr(c->in[c->n_in - 1]);
    const int64_t n = hl_cuda_numel(c->out[0]);
    if (n == 0) return HL_OK;
    hl_cuda_device *d = hl_cuda_dev(hl_cuda_call_device(c));
    const unsigned blocks = hl_cuda_blocks(n);
    switch (c->i[0]) {
    case HL_OPTIM_SGD: HL_LAUNCH(sgd_k<T>, blocks, HL_CUDA_THREADS, 0, d->stream, a, n); break;
    case HL_OPTIM_ADAM: HL_LAUNCH(adam_k<T>, blocks, HL_CUDA_THREADS, 0, d->stream, a, n); break;
    case HL_OPTIM_RMSPROP:
        HL_LAUNCH(rmsprop_k<T>, blocks, HL_CUDA_THREADS, 0, d->stream, a, n);
        break;
    case HL_OPTIM_ADAGRAD:
        HL_LAUNCH(adagrad_k<T>, blocks, HL_CUDA_THREADS, 0, d->stream, a, n);
        break;
    case HL_OPTIM_V2_MOMENTUM:
        HL_LAUNCH(v2_momentum_k<T>, blocks, HL_CUDA_THREADS, 0, d->stream, a, n);
        break;
    default: HL_LAUNCH(v2_adam_k<T>, blocks, HL_CUDA_THREADS, 0, d->stream, a, n); break;
    }
    return hl_cuda_check_launch("optim_update");
}

extern "C" hl_status hl_cuda_optim_update(const hl_call *c) {
    const hl_dtype dt = c->out[0]->dtype;
    if (dt == HL_F32) return run_update<float>(c);
    if (dt == HL_F64) return run_update<double>(c);
    return HL_FAIL(HL_ERR_DTYPE, "optim_update: no CUDA kernel for %s", HL_DESC(c->out[0]));
}
