/*
 * plan/take.c - hl_plan_take_output: after a replay, the caller gets the memory an output was
 * written into and the plan gets fresh memory for the next replay, so an output is not copied
 * once more on every run (GPT-2's logits at batch 8 are 103 MB: ~7 ms a copy). When anything
 * outside the plan may still see that memory, or the plan does not write it whole, the caller
 * gets a copy instead: handing the memory over must never change what anyone else reads.
 */
#include "plan.h"

typedef struct {
    hl_tensor **views;   /* distinct plan tensors viewing the storage */
    int *uses;           /* how many times the calls name each (one reference per naming) */
    int n, cap;
} view_list;

static bool add_use(view_list *v, hl_tensor *t) {
    for (int k = 0; k < v->n; k++)
        if (v->views[k] == t) { v->uses[k]++; return true; }
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 8;
        hl_tensor **views = realloc(v->views, sizeof *views * cap);
        if (views) v->views = views;
        int *uses = realloc(v->uses, sizeof *uses * cap);
        if (uses) v->uses = uses;
        if (!views || !uses) return false;
        v->cap = cap;
    }
    v->views[v->n] = t;
    v->uses[v->n++] = 1;
    return true;
}

/* The plan's tensors viewing s, and whether its first call viewing s writes it whole without
   reading it (so fresh memory gets every byte the caller would have seen). */
static hl_status collect_views(const hl_plan *p, const hl_storage *s, view_list *v,
                               bool *written_whole_first) {
    *written_whole_first = false;
    bool first = true;
    for (int64_t i = 0; i < p->n; i++) {
        const hl_call *c = &p->calls[i];
        bool reads = false, covers = false, views = false;
        for (int k = 0; k < c->n_in + c->n_out; k++) {
            hl_tensor *t = hl_call_tensor(c, k);
            if (!t || t->storage != s) continue;
            views = true;
            if (k < c->n_in) reads = true;
            else if (hl_covers_storage(t)) covers = true;
            if (!add_use(v, t)) return hl_fail(HL_ERR_MEMORY, "plan_take_output: out of memory");
        }
        if (views && first) {
            *written_whole_first = covers && !reads;
            first = false;
        }
    }
    return HL_OK;
}

/* Whether only the plan's calls hold the tensors viewing s (t may be held outside too: it is
   the output as the caller sees it), and only those tensors hold s. */
static bool only_plan_holds(const view_list *v, const hl_tensor *t, const hl_storage *s) {
    if (__atomic_load_n(&s->refcount, __ATOMIC_ACQUIRE) != v->n) return false;
    for (int k = 0; k < v->n; k++) {
        int refs = __atomic_load_n(&v->views[k]->refcount, __ATOMIC_ACQUIRE);
        if (v->views[k] == t ? refs < v->uses[k] : refs != v->uses[k]) return false;
    }
    return true;
}

static hl_status copy_out(const hl_tensor *t, hl_tensor **out) {
    hl_status st = hl_tensor_empty(t->dtype, t->storage->device, t->ndim, t->shape, out);
    if (st) return st;
    st = hl_copy(*out, t);
    if (st) {
        hl_tensor_release(*out);
        *out = NULL;
    }
    return st;
}

static bool taken_since_replay(const hl_plan *p, const hl_storage *s) {
    for (int64_t k = 0; k < p->n_fresh; k++)
        if (p->fresh[k] == s) return true;
    return false;
}

/* Room for one more entry in p->fresh, made before anything changes. */
static hl_status reserve_fresh(hl_plan *p) {
    if (p->n_fresh < p->cap_fresh) return HL_OK;
    int64_t cap = p->cap_fresh ? 2 * p->cap_fresh : 4;
    hl_storage **grown = realloc(p->fresh, sizeof *grown * cap);
    if (!grown) return hl_fail(HL_ERR_MEMORY, "plan_take_output: out of memory");
    p->fresh = grown;
    p->cap_fresh = cap;
    return HL_OK;
}

/* Gives every tensor of the list storage fresh (same size, uninitialised: the plan's first
   use writes it whole) and the caller a tensor over the old one, viewed as t was. */
static hl_status hand_over(const view_list *v, const hl_tensor *t, hl_tensor **out) {
    hl_storage *old = t->storage, *fresh;
    hl_status st = hl_storage_new(old->device, old->nbytes, &fresh);
    if (st) return st;
    fresh->written_by = old->written_by;
    st = hl_tensor_wrap(old, t->dtype, t->ndim, t->shape, t->strides, t->offset, out);
    if (st) {
        hl_storage_release(fresh);
        return st;
    }
    for (int k = 0; k < v->n; k++) {
        __atomic_add_fetch(&fresh->refcount, 1, __ATOMIC_RELAXED);
        v->views[k]->storage = fresh;
        hl_storage_release(old);
    }
    hl_storage_release(fresh);  /* the plan's tensors hold it now */
    return HL_OK;
}

hl_status hl_plan_take_output(hl_plan *p, hl_tensor *t, hl_tensor **out, int *handed_over) {
    if (!p || !t || !out) return hl_fail(HL_ERR_VALUE, "plan_take_output: an argument is NULL");
    if (handed_over) *handed_over = 0;
    if (!p->ran)
        return hl_fail(HL_ERR_VALUE, "plan_take_output: the plan has not run yet: its outputs "
                       "have no values");
    int idle = 0;  /* the plan stays still while its tensors are redirected */
    if (!__atomic_compare_exchange_n(&p->busy, &idle, 1, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return hl_fail(HL_ERR_VALUE, "plan_take_output: the plan is running on another thread");
    hl_storage *s = t->storage;
    const hl_backend *be = hl_backend_for(s->device);
    view_list v = {0};
    bool whole = false;
    hl_status st = HL_OK;
    /* a device replaying captured graphs reads and writes fixed addresses (capture.c) */
    bool may_hand_over = s->written_by == p->id && !s->arena_owner && !s->borrowed &&
                         s->data && be && be->has_memory && !be->capture_begin && !p->capture;
    if (taken_since_replay(p, s))
        st = hl_fail(HL_ERR_VALUE, "plan_take_output: %s was taken already since the last "
                     "replay; it has no values until the plan runs again", hl_desc(t));
    else if (may_hand_over && !(st = reserve_fresh(p)))
        st = collect_views(p, s, &v, &whole);
    if (!st) {
        if (may_hand_over && whole && only_plan_holds(&v, t, s)) {
            st = hand_over(&v, t, out);
            if (!st) p->fresh[p->n_fresh++] = t->storage;
            if (!st && handed_over) *handed_over = 1;
        } else {
            st = copy_out(t, out);
        }
    }
    free(v.views);
    free(v.uses);
    __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE);
    return st;
}

hl_status hl_plan_take_outputs(hl_plan *p, int64_t n, hl_tensor *const *ts, hl_tensor **out,
                               int *handed_over) {
    if (n > 0 && (!ts || !out || !handed_over))
        return hl_fail(HL_ERR_VALUE, "plan_take_outputs: an array is NULL");
    for (int64_t i = 0; i < n; i++) out[i] = NULL;
    for (int64_t i = 0; i < n; i++) {
        hl_status st = hl_plan_take_output(p, ts[i], &out[i], &handed_over[i]);
        if (st) return st;
    }
    return HL_OK;
}

hl_status hl_plan_run_copy(hl_plan *p, int64_t n, hl_tensor *const *ts, void *const *dst,
                           const size_t *nbytes) {
    if (n > 0 && (!ts || !dst || !nbytes))
        return hl_fail(HL_ERR_VALUE, "plan_run_copy: an array is NULL");
    for (int64_t i = 0; i < n; i++) {
        const hl_tensor *t = ts[i];
        if (!t || !dst[i])
            return hl_fail(HL_ERR_VALUE, "plan_run_copy: output %lld or its destination is NULL",
                           (long long)i);
        const size_t have = (size_t)hl_tensor_numel(t) * hl_dtype_size(t->dtype);
        if (t->storage->device.kind != HL_DEVICE_CPU || !hl_tensor_is_contiguous(t) ||
            have != nbytes[i])
            return hl_fail(HL_ERR_VALUE, "plan_run_copy: output %lld: expected a contiguous CPU "
                           "tensor of %zu bytes, got %s%s of %zu bytes", (long long)i, nbytes[i],
                           t->storage->device.kind == HL_DEVICE_CPU ? "a" : "a non-CPU",
                           hl_tensor_is_contiguous(t) ? " tensor" : " strided tensor", have);
    }
    hl_status st = hl_plan_run(p);
    if (st) return st;
    for (int64_t i = 0; i < n; i++) memcpy(dst[i], hl_tensor_data(ts[i]), nbytes[i]);
    return HL_OK;
}
