/*
 * plan/recompute.c - recomputation instead of saving (issue 20, planned memory). A training
 * step peaks at the turn from forward to backward, where every tensor the backward reads is
 * alive. Some of them are cheap to make again from tensors that are alive then anyway, and
 * graph mode, which sees the whole step, makes them again where the backward needs them, so
 * that they are not alive across the turn. Eager autograd cannot: it saves what each op's
 * backward reads when the op runs.
 *
 * Two rewrites, before the first replay (after topological ordering, before fusion and the
 * memory plan, which then see the shorter lifetimes):
 *
 * - A tensor written by an element-wise call (ReLU's output: the next convolution's weight
 *   gradient and ReLU's backward read it) whose reads are split by a long gap is made again,
 *   before the first read after the gap, by copies of the calls that made it, back to tensors
 *   available there. Batch norm's output counts as cheap when the training call saved its
 *   mean and invstd: the copy normalises with them (HL_BN_GIVEN_STATS, bit for bit the
 *   training call's y) and updates no running statistic. Available: unchanged since it was
 *   read, and either held outside the plan (a parameter not yet updated) or read by the plan
 *   at that point or later anyway (a convolution's output, which batch norm's backward reads).
 *   So ResNet's relu(bn(conv(x))) and relu(bn(conv(x)) + shortcut) are made again from the
 *   convolution outputs, block by block during the backward.
 * - max_pool's indices, when only max_pool_grad reads them and the pooled input is alive at
 *   that grad anyway (ReLU's backward reads it later): max_pool writes no indices and
 *   max_pool_grad finds each window's maximum again in the input
 *   (HL_POOL_GRAD_FROM_INPUT), the same tap max_pool chose.
 *
 * Results are the unrewritten plan's bit for bit (tests/plan/test_plan_recompute.py); the
 * cost is one more element-wise pass per recomputed tensor, and one more pass over each
 * window. Only calls on the CPU are rewritten (the variants are CPU kernels), and tensors
 * another plan or Python still holds are left alone (the refcount rule of memory.c).
 */
#include "plan.h"

/* A gap between two reads shorter than this many calls is not worth a recomputation. */
enum { MIN_GAP_CALLS = 16, GAP_PLAN_FRACTION = 16, MAX_DEPTH = 4, MAX_NEW = 8 };

static bool reads(const hl_call *c, const hl_storage *s) {
    for (int k = 0; k < c->n_in; k++)
        if (hl_call_in(c, k) && hl_call_in(c, k)->storage == s) return true;
    return false;
}

static bool writes(const hl_call *c, const hl_storage *s) {
    for (int k = 0; k < c->n_out; k++)
        if (c->out[k] && c->out[k]->storage == s) return true;
    return false;
}

static bool on_cpu(const hl_call *c) {
    for (int k = 0; k < c->n_in + c->n_out; k++) {
        const hl_tensor *t = hl_call_tensor(c, k);
        if (t && t->storage->device.kind != HL_DEVICE_CPU) return false;
    }
    return true;
}

static bool float_dtype(hl_dtype d) { return d == HL_F32 || d == HL_F64; }

/* Only the plan's records reach s: every tensor struct of the records viewing it is referenced
   by them alone and s by those structs alone (memory.c's rule). */
static bool plan_only(const hl_plan *p, const hl_storage *s) {
    enum { MOST_VIEWS = 16 };
    const hl_tensor *views[MOST_VIEWS];
    int64_t refs[MOST_VIEWS];
    int n = 0;
    for (int64_t i = 0; i < p->n; i++)
        for (int k = 0; k < p->calls[i].n_in + p->calls[i].n_out; k++) {
            const hl_tensor *t = hl_call_tensor(&p->calls[i], k);
            if (!t || t->storage != s) continue;
            int v = 0;
            while (v < n && views[v] != t) v++;
            if (v == n) {
                if (n == MOST_VIEWS) return false;
                views[n] = t;
                refs[n++] = 0;
            }
            refs[v]++;
        }
    for (int v = 0; v < n; v++)
        if (__atomic_load_n(&views[v]->refcount, __ATOMIC_ACQUIRE) != refs[v]) return false;
    return n > 0 && __atomic_load_n(&((hl_storage *)s)->refcount, __ATOMIC_ACQUIRE) == n;
}

/* The only call that writes s, or -1 when none or several do. */
static int64_t sole_writer(const hl_plan *p, const hl_storage *s) {
    int64_t at = -1;
    for (int64_t i = 0; i < p->n; i++)
        if (writes(&p->calls[i], s)) {
            if (at >= 0) return -1;
            at = i;
        }
    return at;
}

static int64_t last_use(const hl_plan *p, const hl_storage *s) {
    for (int64_t i = p->n - 1; i >= 0; i--)
        if (reads(&p->calls[i], s) || writes(&p->calls[i], s)) return i;
    return -1;
}

/* t, as read at call `from`, still holds those values at call u and will be there: nothing
   writes it in between, and the plan reads it at u or later anyway, or keeps it (not only the
   plan's: a parameter, an input, a constant). */
static bool available(const hl_plan *p, const hl_tensor *t, int64_t from, int64_t u) {
    for (int64_t i = from + 1; i < u; i++)
        if (writes(&p->calls[i], t->storage)) return false;
    return !plan_only(p, t->storage) || last_use(p, t->storage) >= u;
}

/* ---- recipes: the calls that make a tensor again ---- */

typedef struct {
    int64_t src;           /* the call copied */
    const hl_tensor *of;   /* the tensor of src it makes again (its out[0]) */
} step;

typedef struct {
    step steps[MAX_NEW];   /* in the order they run (inputs first) */
    int n;
} recipe;

static int find_step(const recipe *r, const hl_tensor *t) {
    for (int k = 0; k < r->n; k++)
        if (r->steps[k].of == t) return k;
    return -1;
}

/* Adds to r the calls that make t again at call u, with the values call `reader` read in t
   (the value its one writer, before `reader`, gave it); false when t cannot be made there. */
static bool plan_remake(const hl_plan *p, const hl_tensor *t, int64_t reader, int64_t u,
                        int depth, recipe *r) {
    if (find_step(r, t) >= 0) return true;
    if (depth > MAX_DEPTH || r->n == MAX_NEW || !float_dtype(t->dtype) ||
        !hl_covers_storage(t))
        return false;
    int64_t w = sole_writer(p, t->storage);
    if (w < 0 || w >= reader) return false;
    const hl_call *c = &p->calls[w];
    if (c->out[0] != t || c->in_many || c->reseed_on_replay || !on_cpu(c)) return false;
    if (c->op == HL_OP_BATCH_NORM) {
        /* training with its statistics saved, or a copy made here from those */
        bool given = c->i[1] == HL_BN_GIVEN_STATS;
        if (!given && (!c->i[0] || c->n_out != 3 || !c->out[1] || !c->out[2])) return false;
        const hl_tensor *need[5] = {c->in[0], c->in[1], c->in[2], given ? c->in[3] : c->out[1],
                                    given ? c->in[4] : c->out[2]};
        for (int k = 0; k < 5; k++)
            if (need[k] && !available(p, need[k], w, u) &&
                (need[k]->storage == t->storage || !plan_remake(p, need[k], w, u, depth + 1, r)))
                return false;
    } else if (hl_plan_element_wise(c->op) && c->n_out == 1) {
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k] && c->in[k]->storage == t->storage) return false;  /* in place */
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k] && !available(p, c->in[k], w, u) &&
                !plan_remake(p, c->in[k], w, u, depth + 1, r))
                return false;
    } else {
        return false;
    }
    if (r->n == MAX_NEW) return false;
    r->steps[r->n++] = (step){w, t};
    return true;
}

static hl_status insert_call(hl_plan *p, int64_t at, const hl_call *c) {
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 16;
        hl_call *grown = realloc(p->calls, sizeof *grown * cap);
        if (!grown) return hl_fail(HL_ERR_MEMORY, "plan: out of memory recomputing");
        p->calls = grown;
        p->cap = cap;
    }
    memmove(&p->calls[at + 1], &p->calls[at], sizeof *p->calls * (size_t)(p->n - at));
    p->calls[at] = *c;
    p->n++;
    return HL_OK;
}

/* Runs recipe r as new calls before call u; every call from u on that reads t reads the
   made-again copy instead (then t itself dies at its last read before u). */
static hl_status apply_recipe(hl_plan *p, const recipe *r, int64_t u, const hl_tensor *t,
                              const hl_tensor **copy) {
    hl_tensor *made[MAX_NEW] = {0};
    hl_status st = HL_OK;
    for (int k = 0; k < r->n && !st; k++) {
        const hl_tensor *of = r->steps[k].of;
        st = hl_tensor_empty(of->dtype, of->storage->device, of->ndim, of->shape, &made[k]);
    }
    if (st) {
        for (int k = 0; k < r->n; k++) hl_tensor_release(made[k]);
        return st;
    }
    for (int k = 0; k < r->n; k++) {
        const hl_call *src = &p->calls[r->steps[k].src];
        hl_call c = *src;
        for (int j = 0; j < c.n_in; j++) {
            int from = c.in[j] ? find_step(r, c.in[j]) : -1;
            if (from >= 0) c.in[j] = made[from];
        }
        if (src->op == HL_OP_BATCH_NORM && src->i[1] != HL_BN_GIVEN_STATS) {
            /* normalise with the statistics it saved */
            c.in[3] = src->out[1];
            c.in[4] = src->out[2];
            c.i[1] = HL_BN_GIVEN_STATS;
            c.n_out = 1;
        }
        memset(c.out, 0, sizeof c.out);
        c.out[0] = made[k];
        for (int j = 0; j < c.n_in; j++) hl_tensor_retain((hl_tensor *)c.in[j]);
        hl_tensor_retain(made[k]);
        st = insert_call(p, u + k, &c);
        if (st) {
            for (int j = 0; j < c.n_in; j++) hl_tensor_release((hl_tensor *)c.in[j]);
            hl_tensor_release(made[k]);
            break;
        }
    }
    /* later reads of t (the same view: plan_remake asked that t covers its storage) */
    int last = find_step(r, t);
    for (int64_t i = u + r->n; !st && i < p->n; i++) {
        hl_call *c = &p->calls[i];
        for (int j = 0; j < c->n_in; j++)
            if (c->in_many ? c->in_many[j] == t : c->in[j] == t) {
                hl_tensor_release((hl_tensor *)t);
                hl_tensor_retain(made[last]);
                if (c->in_many) c->in_many[j] = made[last];
                else c->in[j] = made[last];
            }
    }
    *copy = made[last];
    for (int k = 0; k < r->n; k++) hl_tensor_release(made[k]);  /* the records hold them */
    return st;
}

/* The first read of t after the longest gap between two of its reads, or -1 when no gap is
   long enough or a read after it sees t through another view. */
static int64_t split_point(const hl_plan *p, const hl_tensor *t, int64_t writer) {
    int64_t prev = -1, best = -1, best_gap = 0;
    int64_t min_gap = HL_MAX((int64_t)MIN_GAP_CALLS, p->n / GAP_PLAN_FRACTION);
    for (int64_t i = writer + 1; i < p->n; i++) {
        if (!reads(&p->calls[i], t->storage)) continue;
        if (prev >= 0 && i - prev >= min_gap && i - prev > best_gap) {
            best = i;
            best_gap = i - prev;
        }
        prev = i;
    }
    for (int64_t i = best; best >= 0 && i < p->n; i++) {
        const hl_call *c = &p->calls[i];
        for (int j = 0; j < c->n_in; j++) {
            const hl_tensor *x = hl_call_in(c, j);
            if (x && x->storage == t->storage && x != t) return -1;
        }
    }
    return best;
}

/* t made again at each long gap between its reads, the longest first: the copy made at a gap
   serves the reads after it and is split in turn at its own gaps, so that a copy made to feed
   another recipe (a block's input, for the block's output made again) dies there instead of
   living on to its own late reads, where it is made once more. */
static hl_status split_at_gaps(hl_plan *p, const hl_tensor *t, int64_t *count) {
    enum { MOST_PENDING = 64 };
    const hl_tensor *pending[MOST_PENDING];
    int n = 0;
    pending[n++] = t;
    while (n) {
        const hl_tensor *x = pending[--n];
        for (;;) {
            int64_t w = sole_writer(p, x->storage);
            int64_t u = w >= 0 ? split_point(p, x, w) : -1;
            recipe r = {.n = 0};
            if (u < 0 || !plan_remake(p, x, u, u, 0, &r)) break;
            const hl_tensor *copy = NULL;
            hl_status st = apply_recipe(p, &r, u, x, &copy);
            if (st) return st;
            ++*count;
            if (n < MOST_PENDING) pending[n++] = copy;
        }
    }
    return HL_OK;
}

/* Element-wise outputs, deepest first: a block's output made again during the backward reads
   the block's input, which the block before then makes again just before it. */
static hl_status recompute_saved(hl_plan *p, int64_t *count) {
    for (int64_t w = p->n - 1; w >= 0; w--) {
        const hl_call *c = &p->calls[w];
        if (!hl_plan_element_wise(c->op) || c->n_out != 1 || !on_cpu(c)) continue;
        const hl_tensor *t = c->out[0];
        if (!hl_covers_storage(t) || !plan_only(p, t->storage) ||
            sole_writer(p, t->storage) != w)
            continue;
        hl_status st = split_at_gaps(p, t, count);
        if (st) return st;
    }
    return HL_OK;
}

/* ---- max_pool's indices ---- */

static bool same_window(const hl_call *pool, const hl_call *grad) {
    return memcmp(pool->i, grad->i, sizeof(int64_t) * 11) == 0;
}

static hl_status pool_indices(hl_plan *p, int64_t *count) {
    for (int64_t w = 0; w < p->n; w++) {
        hl_call *c = &p->calls[w];
        if (c->op != HL_OP_MAX_POOL || c->n_out != 2 || !on_cpu(c) ||
            !float_dtype(c->in[0]->dtype))
            continue;
        hl_tensor *idx = c->out[1];
        const hl_tensor *x = c->in[0];
        if (!plan_only(p, idx->storage) || sole_writer(p, idx->storage) != w) continue;
        bool ok = true;
        for (int64_t i = w + 1; ok && i < p->n; i++) {
            const hl_call *g = &p->calls[i];
            if (!reads(g, idx->storage)) continue;
            ok = g->op == HL_OP_MAX_POOL_GRAD && g->in[1] == idx && g->in[0]->storage !=
                 idx->storage && same_window(c, g) && available(p, x, w, i) && on_cpu(g);
        }
        if (!ok) continue;
        for (int64_t i = w + 1; i < p->n; i++) {
            hl_call *g = &p->calls[i];
            if (g->op != HL_OP_MAX_POOL_GRAD || g->in[1] != idx) continue;
            g->in[1] = hl_tensor_retain((hl_tensor *)x);
            g->i[HL_POOL_GRAD_MODE] = HL_POOL_GRAD_FROM_INPUT;
            hl_tensor_release(idx);
        }
        c->out[1] = NULL;
        c->n_out = 1;
        hl_tensor_release(idx);
        ++*count;
    }
    return HL_OK;
}

hl_status hl_plan_recompute(hl_plan *p) {
    int64_t n = 0;
    hl_status st = pool_indices(p, &n);
    if (!st) st = recompute_saved(p, &n);
    p->recomputed += n;
    return st;
}
