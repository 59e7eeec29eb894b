/*
 * plan/bind.c - hl_plan_bind: a tensor given to an input slot is what the next replays read.
 * When its layout matches the slot's, every plan tensor viewing the slot's memory is redirected
 * to the bound tensor's storage (no copy); otherwise (other strides, or memory the plan itself
 * writes) its values are copied into the slot's own memory.
 *
 * The slots are a table shared with the plans linked to the slots' plan (hl_plan_link_inputs):
 * a training step recorded as two plans (forward and loss, then backward and update, so that
 * the loss is seen before the update) reads the batch in both, and one bind retargets both.
 */
#include "plan.h"

static bool same_layout(const hl_tensor *a, const hl_tensor *b) {
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return false;
    return true;
}

/* Points every alias of the slot at storage s, the slot's tensor starting at element base. */
static void redirect(plan_slot *slot, hl_storage *s, int64_t base) {
    for (int a = 0; a < slot->n_aliases; a++) {
        hl_tensor *t = slot->aliases[a];
        if (t->storage != s) {
            __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
            hl_storage_release(t->storage);
            t->storage = s;
        }
        t->offset = base + slot->alias_offsets[a];
    }
}

/* Whether s holds the output of a call of p or of a plan linked to its slots. */
static bool written_by_plans(const hl_plan *p, const hl_storage *s) {
    if (s->written_by == p->id) return true;
    for (int64_t k = 0; k < p->n_linked; k++)
        if (s->written_by == p->linked_ids[k]) return true;
    return false;
}

hl_status hl_plan_bind(hl_plan *p, int64_t slot, hl_tensor *t) {
    if (!p || !t) return hl_fail(HL_ERR_VALUE, "plan_bind: plan or tensor is NULL");
    if (slot < 0 || slot >= p->n_slots)
        return hl_fail(HL_ERR_INDEX, "plan_bind: slot %lld is out of range: the plan has %lld "
                       "input slot%s", (long long)slot, (long long)p->n_slots,
                       p->n_slots == 1 ? "" : "s");
    if (hl_plan_recording())
        return hl_fail(HL_ERR_VALUE, "plan_bind: a plan is being recorded on this thread; bind "
                       "inputs after hl_plan_end");
    plan_slot *s = &p->slots[slot];
    const hl_tensor *x = s->t;
    if (x->ndim != t->ndim || !hl_same_shape(x, t))
        return hl_fail(HL_ERR_SHAPE, "plan_bind: input slot %lld was recorded with shape %s, "
                       "got %s; a plan replays one input signature (record another plan for "
                       "this shape)", (long long)slot, hl_shape_str(x->ndim, x->shape),
                       hl_desc(t));
    if (x->dtype != t->dtype)
        return hl_fail(HL_ERR_DTYPE, "plan_bind: input slot %lld was recorded as %s, got %s",
                       (long long)slot, hl_desc(x), hl_desc(t));
    if (!hl_same_device(x->storage->device, t->storage->device))
        return hl_fail(HL_ERR_DEVICE, "plan_bind: input slot %lld was recorded on %s, got a "
                       "tensor on %s", (long long)slot, hl_device_str(x->storage->device),
                       hl_device_str(t->storage->device));
    if (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE))
        return hl_fail(HL_ERR_VALUE, "plan_bind: the plan is running on another thread");
    if (t->storage == x->storage && t->offset == x->offset && same_layout(x, t)) return HL_OK;
    /* On a device that captures graphs (CUDA), a graph of this plan or of one linked to its
       slots reads the slot's memory at fixed addresses (plan/capture.c): the values bound are
       copied there. */
    const hl_backend *be = hl_backend_for(x->storage->device);
    if (be && be->capture_begin) goto copy;
    if (t->storage == s->home && same_layout(x, t)) {  /* back to the slot's own memory */
        redirect(s, s->home, t->offset);
        return HL_OK;
    }
    /* Memory the plan writes (one of its outputs fed back) would be overwritten while the
       replay still reads it: those values are copied. */
    if (same_layout(x, t) && !written_by_plans(p, t->storage) && !t->storage->arena_owner) {
        redirect(s, t->storage, t->offset);
        /* the slot's own memory is idle now: given back unless something else views it (made
           again by a bind that must copy), so a plan does not hold a second batch */
        if (s->home && __atomic_load_n(&s->home->refcount, __ATOMIC_ACQUIRE) == 1) {
            hl_storage_release(s->home);
            s->home = NULL;
        }
        return HL_OK;
    }
copy:
    if (!s->home) {
        hl_status st = hl_storage_new(x->storage->device, s->home_nbytes, &s->home);
        if (st) return hl_fail(st, "plan_bind: memory for input slot %lld: %s", (long long)slot,
                               hl_last_error());
    }
    redirect(s, s->home, s->home_offset);
    hl_status st = hl_copy(s->t, t);
    return st ? hl_fail(st, "plan_bind: copying into input slot %lld: %s", (long long)slot,
                        hl_last_error()) : HL_OK;
}

hl_status hl_plan_bind_host(hl_plan *p, int64_t slot, void *data, size_t nbytes) {
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_bind_host: plan is NULL");
    if (slot < 0 || slot >= p->n_slots)
        return hl_fail(HL_ERR_INDEX, "plan_bind_host: slot %lld is out of range: the plan has "
                       "%lld input slot%s", (long long)slot, (long long)p->n_slots,
                       p->n_slots == 1 ? "" : "s");
    const hl_tensor *x = p->slots[slot].t;
    if (x->storage->device.kind != HL_DEVICE_CPU)
        return hl_fail(HL_ERR_DEVICE, "plan_bind_host: input slot %lld is on %s; host memory "
                       "binds to a CPU slot only", (long long)slot,
                       hl_device_str(x->storage->device));
    hl_tensor *t;
    hl_status st = hl_tensor_borrow_host(data, nbytes, x->dtype, x->ndim, x->shape, &t);
    if (st) return st;
    st = hl_plan_bind(p, slot, t);
    hl_tensor_release(t);  /* the slot's tensors hold the storage now */
    return st;
}

hl_status hl_plan_link_inputs(hl_plan *p, hl_plan *later) {
    if (!p || !later) return hl_fail(HL_ERR_VALUE, "plan_link_inputs: a plan is NULL");
    if (p == later)
        return hl_fail(HL_ERR_VALUE, "plan_link_inputs: a plan reads its own slots already");
    if (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&later->busy, __ATOMIC_ACQUIRE))
        return hl_fail(HL_ERR_VALUE, "plan_link_inputs: a plan is running on another thread");
    for (int64_t k = 0; k < p->n_slots; k++)
        if (p->slots[k].t->storage != p->slots[k].home)
            return hl_fail(HL_ERR_VALUE, "plan_link_inputs: input slot %lld is bound to another "
                           "tensor already; link the plans before binding their inputs",
                           (long long)k);
    uint64_t *ids = realloc(p->linked_ids, sizeof *ids * (p->n_linked + 1));
    if (!ids) return hl_fail(HL_ERR_MEMORY, "plan_link_inputs: out of memory");
    p->linked_ids = ids;
    p->linked_ids[p->n_linked++] = later->id;
    for (int64_t k = 0; k < p->n_slots; k++) {
        hl_status st = hl_plan_collect_aliases(later, &p->slots[k]);
        if (st) return st;
    }
    return HL_OK;
}

hl_status hl_plan_pin_slot(hl_plan *p, int64_t slot) {
    plan_slot *s = &p->slots[slot];
    hl_tensor *x = s->t;
    if (x->storage == s->home && x->offset == s->home_offset) return HL_OK;
    hl_status st = s->home ? HL_OK : hl_storage_new(x->storage->device, s->home_nbytes, &s->home);
    if (st) return st;
    hl_tensor *bound;
    st = hl_tensor_wrap(x->storage, x->dtype, x->ndim, x->shape, x->strides, x->offset, &bound);
    if (st) return st;
    redirect(s, s->home, s->home_offset);
    st = hl_copy(s->t, bound);
    hl_tensor_release(bound);
    return st;
}
