/*
 * cpu/optim.c - the optimiser updates of hl_optim_update (api/optim.c; the rules are in
 * hl_core.h), one pass over the elements reading param, grad and the states once.
 *
 * Each element goes through the same float operations, in the same order and in the
 * parameter's dtype, as the rule's sequence of element-wise ops in hl/opt/rules.py (constants
 * are rounded to the dtype first, as a Python scalar operand is), so the fused update is
 * bitwise that sequence: eager steps, replayed plans and the composed fallback on other
 * backends agree exactly. Contracting a * b + c into one fused multiply-add would round
 * once instead of twice and break that, so contraction is off in this file.
 */
#include <math.h>

#include "../core.h"
#include "parallel.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* Below this many elements one thread does the pass: a parallel region costs a few
   microseconds of fork and join, more than it saves on a small tensor. */
enum { PARALLEL_MIN = 1 << 15 };
/* A gradient formed from an outer product (plan/fuse_update.c) whose row vector is strided is
   written this many elements at a time into a buffer on the stack (it stays in the L1 cache),
   then read by the rule; a contiguous row vector needs no buffer (the rules' outer passes). */
enum { OUTER_CHUNK = 1024 };

/* The loop of a rule over its n elements (pointers already at the range's first element). */
#define FOR_EACH(n, body) for (int64_t i = 0; i < (n); i++) { body; }

/* Per-step value k: from its 0-d tensor (a recorded call) or the record's numbers (eager). */
#define STEP_VALUE(T, c, k) \
    ((c)->i[4] ? *(const T *)hl_ptr((c)->in[1 + (k)]) : (T)(c)->f[HL_OPTIM_VALUES + (k)])

/* Each rule is written once, as the body of a pass over n elements whose gradient at element
   i is the expression GRAD: g[i] from a gradient in memory, or ar * bv[i] on one row of a
   batch-1 outer product (plan/fuse_update.c), formed where it is used: the one rounded product
   the gemm computes (contraction is off), so both passes give the same bits. p is the
   parameter, st its states. d = grad (+ wd * param, when wd != 0) is with_l2 in rules.py. */
#define SGD_BODY(T, SQRT, GRAD)                                                             \
    const T neg_lr = STEP_VALUE(T, c, 0);                                                   \
    const T wd = (T)c->f[0], mom = (T)c->f[1], keep = (T)c->f[2];                           \
    int flags = (int)c->i[1];                                                               \
    if (c->i[2] == 0) {                                                                     \
        FOR_EACH(n, T gi = GRAD; T d = wd != 0 ? gi + p[i] * wd : gi;                       \
                 p[i] = p[i] + d * neg_lr);                                                 \
        return;                                                                             \
    }                                                                                       \
    T *b = st[0];                                                                           \
    bool init = flags & HL_OPTIM_INIT, nesterov = flags & HL_OPTIM_NESTEROV;                \
    FOR_EACH(n,                                                                             \
        T gi = GRAD;                                                                        \
        T d = wd != 0 ? gi + p[i] * wd : gi;                                                \
        T buf;                                                                              \
        if (init) buf = d;                                                                  \
        else buf = b[i] * mom + (keep != 1 ? d * keep : d);                                 \
        b[i] = buf;                                                                         \
        T dir = nesterov ? d + buf * mom : buf;                                             \
        p[i] = p[i] + dir * neg_lr);

#define ADAM_BODY(T, SQRT, GRAD)                                                            \
    T *m = st[0], *v = st[1], *vmax = c->i[2] > 2 ? st[2] : NULL;                           \
    const T neg_step = STEP_VALUE(T, c, 0);                                                 \
    const T bc2 = STEP_VALUE(T, c, 1);                                                      \
    bool decoupled = c->i[1] & HL_OPTIM_DECOUPLED;                                          \
    const T decay = decoupled ? STEP_VALUE(T, c, 2) : 1;                                    \
    const T wd = decoupled ? 0 : (T)c->f[0], w1 = (T)c->f[1], b2 = (T)c->f[2];              \
    const T w2 = (T)c->f[3], eps = (T)c->f[4];                                              \
    FOR_EACH(n,                                                                             \
        T gi = GRAD;                                                                        \
        T pi = decoupled ? p[i] * decay : p[i];                                             \
        T d = wd != 0 ? gi + pi * wd : gi;                                                  \
        T mi = m[i] + (d - m[i]) * w1;                                                      \
        T vi = v[i] * b2 + (d * d) * w2;                                                    \
        m[i] = mi;                                                                          \
        v[i] = vi;                                                                          \
        if (vmax) {                                                                         \
            T a = vmax[i];                                                                  \
            vi = (a > vi || a != a) ? a : vi; /* maximum(vmax, v), NaN kept */              \
            vmax[i] = vi;                                                                   \
        }                                                                                   \
        T denom = SQRT(vi) / bc2 + eps;                                                     \
        p[i] = pi + (mi / denom) * neg_step);

#define RMSPROP_BODY(T, SQRT, GRAD)                                                         \
    int flags = (int)c->i[1], k = 0;                                                        \
    T *s = st[k++];                                                                         \
    T *ga = flags & HL_OPTIM_CENTERED ? st[k++] : NULL;                                     \
    T *b = flags & HL_OPTIM_MOMENTUM ? st[k++] : NULL;                                      \
    const T neg_lr = STEP_VALUE(T, c, 0);                                                   \
    const T wd = (T)c->f[0], alpha = (T)c->f[1], w = (T)c->f[2], eps = (T)c->f[3];          \
    const T mom = (T)c->f[4];                                                               \
    FOR_EACH(n,                                                                             \
        T gi = GRAD;                                                                        \
        T d = wd != 0 ? gi + p[i] * wd : gi;                                                \
        T si = s[i] * alpha + (d * d) * w;                                                  \
        s[i] = si;                                                                          \
        T avg;                                                                              \
        if (ga) {                                                                           \
            T a = ga[i] + (d - ga[i]) * w;                                                  \
            ga[i] = a;                                                                      \
            avg = SQRT(si - a * a) + eps;                                                   \
        } else {                                                                            \
            avg = SQRT(si) + eps;                                                           \
        }                                                                                   \
        T dir = d / avg;                                                                    \
        if (b) {                                                                            \
            dir = b[i] * mom + dir;                                                         \
            b[i] = dir;                                                                     \
        }                                                                                   \
        p[i] = p[i] + dir * neg_lr);

#define ADAGRAD_BODY(T, SQRT, GRAD)                                                         \
    T *s = st[0];                                                                           \
    const T neg_lr = STEP_VALUE(T, c, 0);                                                   \
    const T wd = (T)c->f[0], eps = (T)c->f[1];                                              \
    FOR_EACH(n,                                                                             \
        T gi = GRAD;                                                                        \
        T d = wd != 0 ? gi + p[i] * wd : gi;                                                \
        T si = s[i] + d * d;                                                                \
        s[i] = si;                                                                          \
        p[i] = p[i] + (d / (SQRT(si) + eps)) * neg_lr);

#define V2_MOMENTUM_BODY(T, SQRT, GRAD)                                                     \
    T *b = st[0];                                                                           \
    const T neg_lr = STEP_VALUE(T, c, 0);                                                   \
    const T wd = (T)c->f[0], mom = (T)c->f[1];                                              \
    FOR_EACH(n,                                                                             \
        T gi = GRAD;                                                                        \
        T d = wd != 0 ? gi + p[i] * wd : gi;                                                \
        T bi = b[i] * mom + d * neg_lr;                                                     \
        b[i] = bi;                                                                          \
        p[i] = p[i] + bi);

#define V2_ADAM_BODY(T, SQRT, GRAD)                                                         \
    T *m = st[0], *v = st[1];                                                               \
    const T neg_alpha = STEP_VALUE(T, c, 0);                                                \
    const T b1 = (T)c->f[0], w1 = (T)c->f[1], b2 = (T)c->f[2], w2 = (T)c->f[3];             \
    const T eps = (T)c->f[4];                                                               \
    FOR_EACH(n,                                                                             \
        T gi = GRAD;                                                                        \
        T mi = m[i] * b1 + gi * w1;                                                         \
        T vi = v[i] * b2 + (gi * gi) * w2;                                                  \
        m[i] = mi;                                                                          \
        v[i] = vi;                                                                          \
        p[i] = p[i] + (mi / (SQRT(vi) + eps)) * neg_alpha);

/* A rule's two passes: from a gradient in memory, and from ar times a contiguous row bv. */
#define RULE(name, BODY, T, SQRT, SUFFIX)                                                   \
HL_CLONES                                                                                   \
static void name##_##SUFFIX(const hl_call *c, T *p, T *const *st, const T *g, int64_t n) {  \
    BODY(T, SQRT, g[i])                                                                     \
}                                                                                           \
HL_CLONES                                                                                   \
static void name##_outer_##SUFFIX(const hl_call *c, T *p, T *const *st, T ar,               \
                                  const T *restrict bv, int64_t n) {                        \
    BODY(T, SQRT, ar * bv[i])                                                               \
}

#define DEFINE_RULES(T, SQRT, SUFFIX)                                                       \
RULE(sgd, SGD_BODY, T, SQRT, SUFFIX)                                                        \
RULE(adam, ADAM_BODY, T, SQRT, SUFFIX)                                                      \
RULE(rmsprop, RMSPROP_BODY, T, SQRT, SUFFIX)                                                \
RULE(adagrad, ADAGRAD_BODY, T, SQRT, SUFFIX)                                                \
RULE(v2_momentum, V2_MOMENTUM_BODY, T, SQRT, SUFFIX)                                        \
RULE(v2_adam, V2_ADAM_BODY, T, SQRT, SUFFIX)                                                \
                                                                                            \
typedef void (*rule_##SUFFIX)(const hl_call *, T *, T *const *, const T *, int64_t);      \
typedef void (*outer_rule_##SUFFIX)(const hl_call *, T *, T *const *, T, const T *,       \
                                    int64_t);                                               \
                                                                                            \
static rule_##SUFFIX pick_##SUFFIX(const hl_call *c) {                                      \
    switch (c->i[0]) {                                                                      \
    case HL_OPTIM_SGD: return sgd_##SUFFIX;                                                 \
    case HL_OPTIM_ADAM: return adam_##SUFFIX;                                               \
    case HL_OPTIM_RMSPROP: return rmsprop_##SUFFIX;                                         \
    case HL_OPTIM_ADAGRAD: return adagrad_##SUFFIX;                                         \
    case HL_OPTIM_V2_MOMENTUM: return v2_momentum_##SUFFIX;                                 \
    default: return v2_adam_##SUFFIX;                                                       \
    }                                                                                       \
}                                                                                           \
                                                                                            \
static outer_rule_##SUFFIX pick_outer_##SUFFIX(const hl_call *c) {                          \
    switch (c->i[0]) {                                                                      \
    case HL_OPTIM_SGD: return sgd_outer_##SUFFIX;                                           \
    case HL_OPTIM_ADAM: return adam_outer_##SUFFIX;                                         \
    case HL_OPTIM_RMSPROP: return rmsprop_outer_##SUFFIX;                                   \
    case HL_OPTIM_ADAGRAD: return adagrad_outer_##SUFFIX;                                   \
    case HL_OPTIM_V2_MOMENTUM: return v2_momentum_outer_##SUFFIX;                           \
    default: return v2_adam_outer_##SUFFIX;                                                 \
    }                                                                                       \
}                                                                                           \
                                                                                            \
/* g[k] = a[r] * b[col] for the elements [at, at + len) of the row-major outer product whose \
   rows are n long: the one rounded product the gemm's outer-product path computes. */      \
HL_CLONES                                                                                   \
static void outer_rows_##SUFFIX(T *g, const T *a, int64_t as, const T *b, int64_t bs,       \
                                int64_t n, int64_t at, int64_t len) {                       \
    int64_t r = at / n, col = at % n;                                                       \
    for (int64_t k = 0; k < len; r++, col = 0) {                                            \
        int64_t seg = n - col < len - k ? n - col : len - k;                                \
        T ar = a[r * as];                                                                   \
        if (bs == 1) for (int64_t t = 0; t < seg; t++) g[k + t] = ar * b[col + t];          \
        else for (int64_t t = 0; t < seg; t++) g[k + t] = ar * b[(col + t) * bs];           \
        k += seg;                                                                           \
    }                                                                                       \
}                                                                                           \
                                                                                            \
/* The update of elements [lo, hi). */                                                      \
static void update_range_##SUFFIX(const hl_call *c, rule_##SUFFIX rule, int64_t lo,        \
                                  int64_t hi) {                                             \
    T *p = (T *)hl_ptr(c->out[0]) + lo, *s[3] = {0};                                        \
    for (int k = 0; k < c->i[2]; k++) s[k] = (T *)hl_ptr(c->out[1 + k]) + lo;               \
    if (!c->i[HL_OPTIM_OUTER]) {                                                            \
        rule(c, p, s, (const T *)hl_ptr(c->in[0]) + lo, hi - lo);                           \
        return;                                                                             \
    }                                                                                       \
    const T *a = (const T *)hl_ptr(c->in[0]), *b = (const T *)hl_ptr(c->in[c->n_in - 1]);   \
    int64_t as = c->i[HL_OPTIM_OUTER + 1], bs = c->i[HL_OPTIM_OUTER + 2];                   \
    int64_t rowlen = c->i[HL_OPTIM_OUTER + 3];                                              \
    if (bs == 1) {  /* contiguous rows of b: each product is formed where it is used */   \
        outer_rule_##SUFFIX orule = pick_outer_##SUFFIX(c);                                 \
        for (int64_t at = lo; at < hi;) {                                                   \
            int64_t r = at / rowlen, col = at % rowlen, off = at - lo;                      \
            int64_t seg = rowlen - col < hi - at ? rowlen - col : hi - at;                  \
            T *so[3] = {s[0] ? s[0] + off : NULL, s[1] ? s[1] + off : NULL,                 \
                        s[2] ? s[2] + off : NULL};                                          \
            orule(c, p + off, so, a[r * as], b + col, seg);                                 \
            at += seg;                                                                      \
        }                                                                                   \
        return;                                                                             \
    }                                                                                       \
    /* strided b: the products of a chunk go through a small buffer in the L1 cache */      \
    T g[OUTER_CHUNK];                                                                       \
    for (int64_t at = lo; at < hi; at += OUTER_CHUNK) {                                     \
        int64_t len = hi - at < OUTER_CHUNK ? hi - at : OUTER_CHUNK, off = at - lo;         \
        outer_rows_##SUFFIX(g, a, as, b, bs, rowlen, at, len);                              \
        T *so[3] = {s[0] ? s[0] + off : NULL, s[1] ? s[1] + off : NULL,                     \
                    s[2] ? s[2] + off : NULL};                                              \
        rule(c, p + off, so, g, len);                                                       \
    }                                                                                       \
}                                                                                           \
                                                                                            \
typedef struct {                                                                            \
    const hl_call *c;                                                                       \
    rule_##SUFFIX rule;                                                                     \
} update_job_##SUFFIX;                                                                      \
                                                                                            \
static void update_chunk_##SUFFIX(int64_t lo, int64_t hi, void *arg) {                     \
    const update_job_##SUFFIX *u = arg;                                                     \
    update_range_##SUFFIX(u->c, u->rule, lo, hi);                                           \
}                                                                                           \
                                                                                            \
/* Large tensors split into contiguous ranges that the pool's threads claim: elements are    \
   independent, so the split never changes a result. */                                     \
static void update_##SUFFIX(const hl_call *c, int64_t n) {                                 \
    const update_job_##SUFFIX u = {c, pick_##SUFFIX(c)};                                    \
    hl_parallel_for(n, n >= PARALLEL_MIN ? PARALLEL_MIN / 4 : n, update_chunk_##SUFFIX,     \
                    (void *)&u);                                                            \
}

DEFINE_RULES(float, sqrtf, f32)
DEFINE_RULES(double, sqrt, f64)

hl_status hl_cpu_optim_update(const hl_call *c) {
    if (c->i[HL_OPTIM_SKIP] && *(const bool *)hl_ptr(c->in[c->n_in - 1]))
        return HL_OK;  /* a skipped step (hl.amp): nothing is written */
    int64_t n = hl_tensor_numel(c->out[0]);
    if (c->out[0]->dtype == HL_F32) update_f32(c, n);
    else update_f64(c, n);
    return HL_OK;
}
