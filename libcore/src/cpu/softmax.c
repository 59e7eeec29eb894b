/*
 * cpu/softmax.c - CPU kernels of softmax / log_softmax, their gradients, and the softmax
 * cross-entropy loss and its gradient (record layouts in api/softmax.c).
 *
 * A contiguous tensor reduced along one axis is (outer, n, inner): n values per row, rows
 * `inner` elements apart. When inner == 1 each row is contiguous and one item of the thread
 * pool's loop takes a row. Otherwise an item is a tile of up to LANES neighbouring rows
 * (same outer index, consecutive inner indices): it walks the n positions once per pass and
 * treats the tile's rows side by side, so every memory access is a short contiguous run.
 *
 * Numerics: the maximum is subtracted before exp; sums accumulate in double. A row whose
 * maximum is -inf or +inf, or that holds a NaN, gives NaN throughout, as in PyTorch.
 */
#include <tgmath.h>

#include "dtypes.h"
#include "fast_math.h"
#include "parallel.h"

enum { PAR_MIN = 16384, LANES = 64, ROW_CHUNK = 256 };

/* The parallel loops (libcore's thread pool): an item is a contiguous row or a tile of
   LANES side-by-side rows, computed by one thread in a fixed order, so any split of the
   items gives the same bits. */
typedef struct {
    const void *a, *b;
    void *o;
    int64_t n, inner;
    bool lg, grad;
} sm_loop;
typedef struct {
    const hl_call *c;
    bool grad;
    int64_t n, inner;
} ce_loop;

/* Items per chunk for items of `size` elements: about 8192 elements a chunk. */
static int64_t item_grain(int64_t size) { return HL_MAX(1, 8192 / HL_MAX(size, 1)); }

#define EXP_NONPOS(v) _Generic((v), float: hl_exp_nonpos_f32((float)(v)), default: exp(v))

/* Sum of a contiguous run in double, with four accumulators. */
#define SUM_HELPER(sfx, T, code)                                                             \
    static inline double sum_##sfx(const T *p, int64_t n) {                                  \
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                               \
        int64_t i = 0;                                                                       \
        for (; i + 4 <= n; i += 4) {                                                         \
            a0 += p[i]; a1 += p[i + 1]; a2 += p[i + 2]; a3 += p[i + 3];                      \
        }                                                                                    \
        for (; i < n; i++) a0 += p[i];                                                       \
        return (a0 + a1) + (a2 + a3);                                                        \
    }                                                                                        \
    /* Maximum of a contiguous run (-inf when empty; NaNs are skipped, the sum of exps     \
       catches them). Eight running maxima let the compiler use vector max instructions. */ \
    static inline T max_##sfx(const T *p, int64_t n) {                                       \
        T mm[8], m = -INFINITY;                                                              \
        for (int k = 0; k < 8; k++) mm[k] = -INFINITY;                                       \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8)                                                           \
            for (int k = 0; k < 8; k++) mm[k] = p[i + k] > mm[k] ? p[i + k] : mm[k];         \
        for (; i < n; i++) m = p[i] > m ? p[i] : m;                                          \
        for (int k = 0; k < 8; k++) m = mm[k] > m ? mm[k] : m;                               \
        return m;                                                                            \
    }
HL_FLOAT_TYPES(SUM_HELPER)

static int64_t prod(const int64_t *shape, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= shape[i];
    return n;
}

/* (outer, n, inner) of a tensor reduced along axis (a 0-d tensor is one row of one). */
static void split_dims(const hl_tensor *t, int axis, int64_t *outer, int64_t *n,
                       int64_t *inner) {
    *outer = prod(t->shape, 0, axis);
    *n = t->ndim ? t->shape[axis] : 1;
    *inner = prod(t->shape, axis + 1, t->ndim);
}

/* ---- softmax, log_softmax and their gradients ---- */

#define SOFTMAX_KERNELS(sfx, T, code)                                                        \
    /* One contiguous row. exp values go through a buffer (y itself for softmax, a stack   \
       chunk for log_softmax, whose y may be x) so the exp loop vectorises on its own. */   \
    static void sm_row_##sfx(const T *x, T *y, int64_t n, bool lg) {                         \
        const T m = max_##sfx(x, n);                                                         \
        double s = 0;                                                                        \
        if (lg) {                                                                            \
            T e[ROW_CHUNK];                                                                  \
            for (int64_t j0 = 0; j0 < n; j0 += ROW_CHUNK) {                                  \
                const int64_t w = HL_MIN(ROW_CHUNK, n - j0);                                 \
                for (int64_t t = 0; t < w; t++) e[t] = EXP_NONPOS(x[j0 + t] - m);            \
                s += sum_##sfx(e, w);                                                        \
            }                                                                                \
            /* (x - m) <= 0 and ls >= 0: no cancellation, so T arithmetic is accurate */    \
            const T ls = (T)log(s);                                                          \
            for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) - ls;                          \
        } else {                                                                             \
            for (int64_t j = 0; j < n; j++) y[j] = EXP_NONPOS(x[j] - m);                     \
            const T r = (T)(1 / sum_##sfx(y, n));                                            \
            for (int64_t j = 0; j < n; j++) y[j] *= r;                                       \
        }                                                                                    \
    }                                                                                        \
    /* w rows side by side, positions `stride` apart. */                                     \
    static void sm_lanes_##sfx(const T *x, T *y, int64_t n, int64_t stride, int64_t w,       \
                               bool lg) {                                                    \
        T m[LANES];                                                                          \
        double s[LANES];                                                                     \
        for (int64_t t = 0; t < w; t++) { m[t] = -INFINITY; s[t] = 0; }                      \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const T *xr = x + j * stride;                                                    \
            for (int64_t t = 0; t < w; t++) m[t] = xr[t] > m[t] ? xr[t] : m[t];              \
        }                                                                                    \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const T *xr = x + j * stride;                                                    \
            T *yr = y + j * stride;                                                          \
            if (lg) /* two loops: a store under a condition would stop vectorisation */      \
                for (int64_t t = 0; t < w; t++) s[t] += EXP_NONPOS(xr[t] - m[t]);            \
            else                                                                             \
                for (int64_t t = 0; t < w; t++) {                                            \
                    yr[t] = EXP_NONPOS(xr[t] - m[t]);                                        \
                    s[t] += yr[t];                                                           \
                }                                                                            \
        }                                                                                    \
        T f[LANES]; /* log of the sum, or its reciprocal */                                  \
        for (int64_t t = 0; t < w; t++) f[t] = (T)(lg ? log(s[t]) : 1 / s[t]);               \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const T *xr = x + j * stride;                                                    \
            T *yr = y + j * stride;                                                          \
            if (lg)                                                                          \
                for (int64_t t = 0; t < w; t++) yr[t] = (xr[t] - m[t]) - f[t];               \
            else                                                                             \
                for (int64_t t = 0; t < w; t++) yr[t] *= f[t];                               \
        }                                                                                    \
    }                                                                                        \
    /* softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy). */     \
    static void smg_row_##sfx(const T *y, const T *dy, T *dx, int64_t n, bool lg) {          \
        double s = 0;                                                                        \
        if (lg) {                                                                            \
            for (int64_t j = 0; j < n; j++) s += dy[j];                                      \
            for (int64_t j = 0; j < n; j++) dx[j] = (T)(dy[j] - exp(y[j]) * s);              \
        } else {                                                                             \
            for (int64_t j = 0; j < n; j++) s += (double)dy[j] * y[j];                       \
            for (int64_t j = 0; j < n; j++) dx[j] = (T)(y[j] * (dy[j] - s));                 \
        }                                                                                    \
    }                                                                                        \
    static void smg_lanes_##sfx(const T *y, const T *dy, T *dx, int64_t n, int64_t stride,   \
                                int64_t w, bool lg) {                                        \
        double s[LANES];                                                                     \
        for (int64_t t = 0; t < w; t++) s[t] = 0;                                            \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const T *yr = y + j * stride, *dr = dy + j * stride;                             \
            if (lg)                                                                          \
                for (int64_t t = 0; t < w; t++) s[t] += dr[t];                               \
            else                                                                             \
                for (int64_t t = 0; t < w; t++) s[t] += (double)dr[t] * yr[t];               \
        }                                                                                    \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const T *yr = y + j * stride, *dr = dy + j * stride;                             \
            T *o = dx + j * stride;                                                          \
            if (lg)                                                                          \
                for (int64_t t = 0; t < w; t++) o[t] = (T)(dr[t] - exp(yr[t]) * s[t]);       \
            else                                                                             \
                for (int64_t t = 0; t < w; t++) o[t] = (T)(yr[t] * (dr[t] - s[t]));          \
        }                                                                                    \
    }                                                                                        \
    /* grad: 0 runs softmax (a = x, b unused, o = y), 1 runs its gradient (a = y, b = dy,   \
       o = dx). Items: contiguous rows (inner == 1), else tiles of LANES side by side. */    \
    static void sm_items_##sfx(int64_t i0, int64_t i1, void *arg) {                          \
        const sm_loop *lp = arg;                                                             \
        const T *a = (const T *)lp->a, *b = (const T *)lp->b;                                \
        T *o = (T *)lp->o;                                                                   \
        const int64_t n = lp->n, inner = lp->inner, tiles = (inner + LANES - 1) / LANES;     \
        for (int64_t it = i0; it < i1; it++) {                                               \
        if (inner == 1) {                                                                    \
                if (lp->grad) smg_row_##sfx(a + it * n, b + it * n, o + it * n, n, lp->lg);  \
                else sm_row_##sfx(a + it * n, o + it * n, n, lp->lg);                        \
                continue;                                                                    \
            }                                                                                \
            const int64_t q = it / tiles, t0 = (it % tiles) * LANES;                         \
            const int64_t w = HL_MIN(LANES, inner - t0), base = q * n * inner + t0;          \
            if (lp->grad)                                                                    \
                smg_lanes_##sfx(a + base, b + base, o + base, n, inner, w, lp->lg);          \
            else                                                                             \
                sm_lanes_##sfx(a + base, o + base, n, inner, w, lp->lg);                     \
        }                                                                                    \
    }                                                                                        \
    static void sm_run_##sfx(const T *a, const T *b, T *o, int64_t outer, int64_t n,         \
                             int64_t inner, bool lg, bool grad) {                            \
        if (outer == 0 || n == 0 || inner == 0) return;                                      \
        const sm_loop lp = {a, b, o, n, inner, lg, grad};                                    \
        const int64_t items = inner == 1 ? outer : outer * ((inner + LANES - 1) / LANES);    \
        const int64_t per_item = inner == 1 ? n : n * HL_MIN(inner, LANES);                  \
        hl_parallel_for(items, outer * n * inner >= PAR_MIN ? item_grain(per_item) : items,  \
                        sm_items_##sfx, (void *)&lp);                                        \
    }
HL_FLOAT_TYPES(SOFTMAX_KERNELS)

#define VP(t) ((void *)hl_ptr(t))

static hl_status bad_dtype(const hl_call *c, const hl_tensor *t) {
    return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op), hl_desc(t));
}

/* in[0] = x, out[0] = y; i[0] = axis. */
hl_status hl_cpu_softmax(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    int64_t outer, n, inner;
    split_dims(x, (int)c->i[0], &outer, &n, &inner);
    bool lg = c->op == HL_OP_LOG_SOFTMAX;
    if (x->dtype == HL_F32)
        sm_run_f32(VP(x), NULL, VP(c->out[0]), outer, n, inner, lg, false);
    else if (x->dtype == HL_F64)
        sm_run_f64(VP(x), NULL, VP(c->out[0]), outer, n, inner, lg, false);
    else
        return bad_dtype(c, x);
    return HL_OK;
}

/* in[0] = y, in[1] = dy, out[0] = dx; i[0] = axis. */
hl_status hl_cpu_softmax_grad(const hl_call *c) {
    const hl_tensor *y = c->in[0];
    int64_t outer, n, inner;
    split_dims(y, (int)c->i[0], &outer, &n, &inner);
    bool lg = c->op == HL_OP_LOG_SOFTMAX_GRAD;
    if (y->dtype == HL_F32)
        sm_run_f32(VP(y), VP(c->in[1]), VP(c->out[0]), outer, n, inner, lg, true);
    else if (y->dtype == HL_F64)
        sm_run_f64(VP(y), VP(c->in[1]), VP(c->out[0]), outer, n, inner, lg, true);
    else
        return bad_dtype(c, y);
    return HL_OK;
}

/* ---- softmax cross-entropy ---- */

static inline int64_t label_at(const void *p, int64_t i, bool is64) {
    return is64 ? ((const int64_t *)p)[i] : (int64_t)((const int32_t *)p)[i];
}

/* Every label must be a class index or ignore_index; reports the first that is not. */
static hl_status check_labels(const hl_call *c, const hl_tensor *target, int64_t classes) {
    const void *p = hl_ptr(target);
    const bool is64 = target->dtype == HL_I64;
    const int64_t count = hl_tensor_numel(target), ignore = c->i[0];
    for (int64_t i = 0; i < count; i++) {
        const int64_t v = label_at(p, i, is64);
        if (v != ignore && (v < 0 || v >= classes))
            return hl_fail(HL_ERR_INDEX, "%s: target label %lld (at flat position %lld of the "
                           "target %s) is out of range for %lld classes; labels must be in "
                           "[0, %lld) or equal ignore_index %lld", hl_op_str(c->op),
                           (long long)v, (long long)i, hl_desc(target), (long long)classes,
                           (long long)classes, (long long)ignore);
    }
    return HL_OK;
}

/*
 * Kernels over a tile of w samples side by side (the class axis has `stride` between
 * classes; with inner == 1 a tile is one sample). `pos` is the flat index of the tile's
 * first sample in the loss / label arrays. Labels: loss = -log_prob[label] (0 when ignored).
 * Probabilities: loss = -sum_j target_j * log_prob_j.
 */
#define CE_KERNELS(sfx, T, code)                                                             \
    /* One sample whose classes are contiguous (inner == 1). */                              \
    static void ce_row_##sfx(const T *x, const void *tgt, T *loss, T *lp, int64_t pos,       \
                             int64_t n, bool labels, bool is64, int64_t ignore) {            \
        const T m = max_##sfx(x, n);                                                         \
        T e[ROW_CHUNK];                                                                      \
        double s = 0;                                                                        \
        for (int64_t j0 = 0; j0 < n; j0 += ROW_CHUNK) {                                      \
            const int64_t w = HL_MIN(ROW_CHUNK, n - j0);                                     \
            for (int64_t t = 0; t < w; t++) e[t] = EXP_NONPOS(x[j0 + t] - m);                \
            s += sum_##sfx(e, w);                                                            \
        }                                                                                    \
        const double ls = log(s);                                                            \
        if (labels) {                                                                        \
            const int64_t k = label_at(tgt, pos, is64);                                      \
            loss[pos] = k == ignore ? 0 : (T)(ls - (double)(x[k] - m));                      \
        } else {                                                                             \
            const T *p = (const T *)tgt;                                                     \
            double acc = 0;                                                                  \
            for (int64_t j = 0; j < n; j++) acc -= p[j] * ((double)(x[j] - m) - ls);         \
            loss[pos] = (T)acc;                                                              \
        }                                                                                    \
        if (lp) {                                                                            \
            const T lsT = (T)ls;                                                             \
            for (int64_t j = 0; j < n; j++) lp[j] = (x[j] - m) - lsT;                        \
        }                                                                                    \
    }                                                                                        \
    static void ceg_row_##sfx(const T *lp, const void *tgt, const T *dl, T *o, int64_t pos,  \
                              int64_t n, bool labels, bool is64, int64_t ignore) {           \
        const double d = dl[pos];                                                            \
        if (labels) {                                                                        \
            const int64_t k = label_at(tgt, pos, is64);                                      \
            if (k == ignore) {                                                               \
                for (int64_t j = 0; j < n; j++) o[j] = 0;                                    \
                return;                                                                      \
            }                                                                                \
            const double pk = exp((double)lp[k]); /* read before o (maybe lp) is written */  \
            for (int64_t j = 0; j < n; j++) o[j] = (T)(exp(lp[j]) * d);                      \
            o[k] = (T)((pk - 1) * d);                                                        \
        } else {                                                                             \
            const T *p = (const T *)tgt;                                                     \
            const double ts = sum_##sfx(p, n);                                               \
            for (int64_t j = 0; j < n; j++) o[j] = (T)(((double)exp(lp[j]) * ts - p[j]) * d); \
        }                                                                                    \
    }                                                                                        \
    static void ce_lanes_##sfx(const T *x, const void *tgt, T *loss, T *lp, int64_t pos,     \
                               int64_t n, int64_t stride, int64_t w, bool labels, bool is64, \
                               int64_t ignore) {                                             \
        T m[LANES];                                                                          \
        double ls[LANES];                                                                    \
        for (int64_t t = 0; t < w; t++) { m[t] = -INFINITY; ls[t] = 0; }                     \
        for (int64_t j = 0; j < n; j++)                                                      \
            for (int64_t t = 0; t < w; t++) {                                                \
                const T v = x[j * stride + t];                                               \
                m[t] = v > m[t] ? v : m[t];                                                  \
            }                                                                                \
        for (int64_t j = 0; j < n; j++)                                                      \
            for (int64_t t = 0; t < w; t++) ls[t] += EXP_NONPOS(x[j * stride + t] - m[t]);   \
        for (int64_t t = 0; t < w; t++) ls[t] = log(ls[t]);                                  \
        if (labels) {                                                                        \
            for (int64_t t = 0; t < w; t++) {                                                \
                const int64_t k = label_at(tgt, pos + t, is64);                              \
                loss[pos + t] =                                                              \
                    k == ignore ? 0 : (T)(ls[t] - (double)(x[k * stride + t] - m[t]));       \
            }                                                                                \
        } else {                                                                             \
            const T *p = (const T *)tgt;                                                     \
            double acc[LANES];                                                               \
            for (int64_t t = 0; t < w; t++) acc[t] = 0;                                      \
            for (int64_t j = 0; j < n; j++)                                                  \
                for (int64_t t = 0; t < w; t++) {                                            \
                    const int64_t e = j * stride + t;                                        \
                    acc[t] -= p[e] * ((double)(x[e] - m[t]) - ls[t]);                        \
                }                                                                            \
            for (int64_t t = 0; t < w; t++) loss[pos + t] = (T)acc[t];                       \
        }                                                                                    \
        if (lp)                                                                              \
            for (int64_t j = 0; j < n; j++)                                                  \
                for (int64_t t = 0; t < w; t++) {                                            \
                    const int64_t e = j * stride + t;                                        \
                    lp[e] = (T)((double)(x[e] - m[t]) - ls[t]);                              \
                }                                                                            \
    }                                                                                        \
    /* dlogits = (softmax * sum(target) - target) * dloss: the exact gradient, which is     \
       softmax - target for a target that sums to 1 (one-hot labels always do). */           \
    static void ceg_lanes_##sfx(const T *lp, const void *tgt, const T *dl, T *o, int64_t pos, \
                                int64_t n, int64_t stride, int64_t w, bool labels, bool is64, \
                                int64_t ignore) {                                            \
        double d[LANES], ts[LANES];                                                          \
        int64_t k[LANES];                                                                    \
        const T *p = (const T *)tgt;                                                         \
        for (int64_t t = 0; t < w; t++) {                                                    \
            d[t] = dl[pos + t];                                                              \
            ts[t] = 0;                                                                       \
            if (labels) {                                                                    \
                k[t] = label_at(tgt, pos + t, is64);                                         \
                if (k[t] == ignore) d[t] = 0;                                                \
                ts[t] = 1;                                                                   \
            }                                                                                \
        }                                                                                    \
        if (!labels)                                                                         \
            for (int64_t j = 0; j < n; j++)                                                  \
                for (int64_t t = 0; t < w; t++) ts[t] += p[j * stride + t];                  \
        for (int64_t j = 0; j < n; j++)                                                      \
            for (int64_t t = 0; t < w; t++) {                                                \
                const int64_t e = j * stride + t;                                            \
                const double tj = labels ? (double)(k[t] == j) : (double)p[e];               \
                /* ignored samples get exactly 0, even where log_prob is NaN */              \
                o[e] = labels && k[t] == ignore                                              \
                           ? 0                                                               \
                           : (T)(((double)exp(lp[e]) * ts[t] - tj) * d[t]);                  \
            }                                                                                \
    }                                                                                        \
    static void ce_items_##sfx(int64_t i0, int64_t i1, void *arg) {                          \
        const ce_loop *job = arg;                                                            \
        const hl_call *c = job->c;                                                           \
        const bool grad = job->grad;                                                         \
        const int64_t n = job->n, inner = job->inner;                                        \
        const hl_tensor *target = c->in[1];                                                  \
        const void *tgt = hl_ptr(target);                                                    \
        const bool labels = c->i[1], is64 = target->dtype == HL_I64;                         \
        const int64_t ignore = c->i[0];                                                      \
        const T *a = (const T *)hl_ptr(c->in[0]);                                            \
        const T *dl = grad ? (const T *)hl_ptr(c->in[2]) : NULL;                             \
        T *o = (T *)hl_ptr(c->out[0]);                                                       \
        T *lp = !grad && c->out[1] ? (T *)hl_ptr(c->out[1]) : NULL;                          \
        const int64_t lanes = inner == 1 ? 1 : LANES, tiles = (inner + lanes - 1) / lanes;   \
        for (int64_t it = i0; it < i1; it++) {                                               \
            const int64_t q = it / tiles, t0 = (it % tiles) * lanes;                         \
            const int64_t w = HL_MIN(lanes, inner - t0), base = q * n * inner + t0;          \
            const int64_t pos = q * inner + t0;                                              \
            /* labels are indexed by sample (pos), probabilities like the logits (base) */  \
            const void *tg = labels ? tgt : (const void *)((const T *)tgt + base);           \
            if (inner == 1 && grad)                                                          \
                ceg_row_##sfx(a + base, tg, dl, o + base, pos, n, labels, is64, ignore);     \
            else if (inner == 1)                                                             \
                ce_row_##sfx(a + base, tg, o, lp ? lp + base : NULL, pos, n, labels, is64,   \
                             ignore);                                                        \
            else if (grad)                                                                   \
                ceg_lanes_##sfx(a + base, tg, dl, o + base, pos, n, inner, w, labels, is64,  \
                                ignore);                                                     \
            else                                                                             \
                ce_lanes_##sfx(a + base, tg, o, lp ? lp + base : NULL, pos, n, inner, w,     \
                               labels, is64, ignore);                                        \
        }                                                                                    \
    }                                                                                        \
    static void ce_run_##sfx(const hl_call *c, bool grad, int64_t outer, int64_t n,          \
                             int64_t inner) {                                                \
        const ce_loop lp = {c, grad, n, inner};                                              \
        const int64_t lanes = inner == 1 ? 1 : LANES, tiles = (inner + lanes - 1) / lanes;   \
        const int64_t items = outer * tiles;                                                 \
        hl_parallel_for(items, outer * n * inner >= PAR_MIN ? item_grain(n * lanes) : items, \
                        ce_items_##sfx, (void *)&lp);                                        \
    }
HL_FLOAT_TYPES(CE_KERNELS)

static hl_status ce_dispatch(const hl_call *c, bool grad) {
    const hl_tensor *x = c->in[0];
    int64_t outer = x->shape[0], n = x->shape[1], inner = prod(x->shape, 2, x->ndim);
    if (c->i[1]) {
        hl_status st = check_labels(c, c->in[1], n);
        if (st) return st;
    }
    if (outer == 0 || inner == 0) return HL_OK;
    if (x->dtype == HL_F32) ce_run_f32(c, grad, outer, n, inner);
    else if (x->dtype == HL_F64) ce_run_f64(c, grad, outer, n, inner);
    else return bad_dtype(c, x);
    return HL_OK;
}

/* in[0] = logits, in[1] = target; out[0] = loss, out[1] = log_prob or NULL; i[0] =
   ignore_index, i[1] = labels. */
hl_status hl_cpu_softmax_cross_entropy(const hl_call *c) { return ce_dispatch(c, false); }

/* in[0] = log_prob, in[1] = target, in[2] = dloss; out[0] = dlogits. */
hl_status hl_cpu_softmax_cross_entropy_grad(const hl_call *c) { return ce_dispatch(c, true); }
