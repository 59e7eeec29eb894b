/*
 * plan/record.c - recording: hl_plan_begin/end, the record every hl_submit appends while a
 * plan is recorded on this thread, input slots, and the guard that refuses host reads of
 * values a recording has not computed yet.
 */
#include <pthread.h>
#include <stdlib.h>

#include "plan.h"

static _Thread_local hl_plan *recording;
/* Recordings are numbered from 1 across threads, so that a storage's written_by names one
   recording for good (a pointer could be reused by the next plan). */
static uint64_t next_id;

/* Plans recorded and not yet run (SINGA's dev.EnableGraph buffers a graph and runs it later):
   the values of what they write do not exist yet, and the host-read guard refuses them too.
   Usually empty (graph mode runs a plan as soon as it is recorded): reads test one counter. */
static pthread_mutex_t unrun_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *unrun;
static int64_t n_unrun, cap_unrun;

static void unrun_add(uint64_t id) {
    pthread_mutex_lock(&unrun_lock);
    if (n_unrun == cap_unrun) {
        int64_t cap = cap_unrun ? 2 * cap_unrun : 16;
        uint64_t *grown = realloc(unrun, sizeof *grown * cap);
        if (grown) unrun = grown, cap_unrun = cap;
    }
    if (n_unrun < cap_unrun)  /* out of memory: the guard forgets this plan, nothing worse */
        unrun[n_unrun] = id, __atomic_store_n(&n_unrun, n_unrun + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&unrun_lock);
}

void hl_plan_mark_run(uint64_t id) {
    if (!__atomic_load_n(&n_unrun, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&unrun_lock);
    for (int64_t k = 0; k < n_unrun; k++)
        if (unrun[k] == id) {
            unrun[k] = unrun[n_unrun - 1];
            __atomic_store_n(&n_unrun, n_unrun - 1, __ATOMIC_RELEASE);
            break;
        }
    pthread_mutex_unlock(&unrun_lock);
}

static bool written_by_unrun_plan(uint64_t id) {
    if (!id || !__atomic_load_n(&n_unrun, __ATOMIC_ACQUIRE)) return false;
    bool found = false;
    pthread_mutex_lock(&unrun_lock);
    for (int64_t k = 0; k < n_unrun && !found; k++) found = unrun[k] == id;
    pthread_mutex_unlock(&unrun_lock);
    return found;
}

int hl_plan_recording(void) { return recording != NULL; }
uint64_t hl_plan_recording_id(void) { return recording ? recording->id : 0; }

hl_status hl_plan_begin(void) {
    if (recording) return hl_fail(HL_ERR_VALUE, "plan_begin: a plan is already being recorded "
                                  "on this thread; end it (hl_plan_end) first");
    recording = calloc(1, sizeof *recording);
    if (!recording) return hl_fail(HL_ERR_MEMORY, "plan_begin: out of memory");
    recording->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
    return HL_OK;
}

/* Every tensor of q's records that views the slot's storage, so that a bind can redirect
   them all (q: the slot's own plan, or one linked to it). */
hl_status hl_plan_collect_aliases(const hl_plan *q, plan_slot *s) {
    if (!s->aliases) {
        s->cap_aliases = 4;
        s->aliases = malloc(sizeof *s->aliases * s->cap_aliases);
        s->alias_offsets = malloc(sizeof *s->alias_offsets * s->cap_aliases);
        if (!s->aliases || !s->alias_offsets)
            return hl_fail(HL_ERR_MEMORY, "plan_end: out of memory");
        s->aliases[0] = hl_tensor_retain(s->t);
        s->alias_offsets[0] = 0;
        s->n_aliases = 1;
    }
    for (int64_t i = 0; i < q->n; i++) {
        const hl_call *c = &q->calls[i];
        for (int k = 0; k < c->n_in + c->n_out; k++) {
            hl_tensor *t = hl_call_tensor(c, k);
            if (!t || t->storage != s->home) continue;  /* optional inputs may be NULL */
            bool seen = false;
            for (int a = 0; a < s->n_aliases && !seen; a++) seen = s->aliases[a] == t;
            if (seen) continue;
            if (s->n_aliases == s->cap_aliases) {
                int cap = 2 * s->cap_aliases;
                hl_tensor **ga = realloc(s->aliases, sizeof *ga * cap);
                if (ga) s->aliases = ga;
                int64_t *go = realloc(s->alias_offsets, sizeof *go * cap);
                if (go) s->alias_offsets = go;
                if (!ga || !go) return hl_fail(HL_ERR_MEMORY, "plan: out of memory");
                s->cap_aliases = cap;
            }
            s->aliases[s->n_aliases] = hl_tensor_retain(t);
            s->alias_offsets[s->n_aliases++] = t->offset - s->home_offset;
        }
    }
    return HL_OK;
}

hl_status hl_plan_end(hl_plan **out) {
    if (!out) return hl_fail(HL_ERR_VALUE, "plan_end: output pointer is NULL");
    if (!recording) return hl_fail(HL_ERR_VALUE, "plan_end: no plan is being recorded");
    hl_plan *p = recording;
    recording = NULL;
    for (int64_t k = 0; k < p->n_slots; k++) {
        hl_status st = hl_plan_collect_aliases(p, &p->slots[k]);
        if (st) { hl_plan_release(p); return st; }
    }
    unrun_add(p->id);
    *out = p;
    return HL_OK;
}

int64_t hl_plan_size(const hl_plan *p) { return p ? p->n : 0; }
int64_t hl_plan_num_inputs(const hl_plan *p) { return p ? p->n_slots : 0; }

hl_status hl_plan_input(hl_tensor *t, int64_t *slot) {
    if (!t || !slot) return hl_fail(HL_ERR_VALUE, "plan_input: tensor or slot pointer is NULL");
    hl_plan *p = recording;
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_input: no plan is being recorded on this thread");
    for (int64_t k = 0; k < p->n_slots; k++)
        if (p->slots[k].home == t->storage)
            return hl_fail(HL_ERR_VALUE, "plan_input: %s shares its memory with input slot "
                           "%lld; each input slot needs memory of its own", hl_desc(t),
                           (long long)k);
    if (t->storage->written_by == p->id)
        return hl_fail(HL_ERR_VALUE, "plan_input: %s was computed by this recording; an input "
                       "slot must be a tensor given to the plan from outside", hl_desc(t));
    if (p->n_slots == p->cap_slots) {
        int64_t cap = p->cap_slots ? 2 * p->cap_slots : 4;
        plan_slot *grown = realloc(p->slots, sizeof *grown * cap);
        if (!grown) return hl_fail(HL_ERR_MEMORY, "plan_input: out of memory");
        p->slots = grown;
        p->cap_slots = cap;
    }
    plan_slot *s = &p->slots[p->n_slots];
    memset(s, 0, sizeof *s);
    s->t = hl_tensor_retain(t);
    s->home = t->storage;
    __atomic_add_fetch(&s->home->refcount, 1, __ATOMIC_RELAXED);
    s->home_offset = t->offset;
    s->home_nbytes = t->storage->nbytes;
    /* Its values while recording are not those of the replays: reading them now (to decide
       something in Python) would bake this batch into the plan, so the guard refuses it. */
    t->storage->written_by = p->id;
    *slot = p->n_slots++;
    return HL_OK;
}

/* The plan keeps its own references to every tensor a call names. */
hl_status hl_plan_record(const hl_call *c) {
    hl_plan *p = recording;
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 64;
        hl_call *grown = realloc(p->calls, sizeof *grown * cap);
        if (!grown) return hl_fail(HL_ERR_MEMORY, "plan: out of memory recording a call");
        p->calls = grown;
        p->cap = cap;
    }
    hl_call *r = &p->calls[p->n];
    *r = *c;
    if (c->in_many) {
        r->in_many = malloc(sizeof *r->in_many * c->n_in);
        if (!r->in_many) return hl_fail(HL_ERR_MEMORY, "plan: out of memory recording a call");
        memcpy(r->in_many, c->in_many, sizeof *r->in_many * c->n_in);
    }
    for (int k = 0; k < c->n_in; k++) hl_tensor_retain((hl_tensor *)hl_call_in(r, k));
    for (int k = 0; k < c->n_out; k++) {
        hl_tensor_retain(r->out[k]);
        if (r->out[k]) r->out[k]->storage->written_by = p->id;  /* no value until it runs */
    }
    p->n++;
    return HL_OK;
}

hl_status hl_tensor_check_host_read(const hl_tensor *t) {
    if (!t) return hl_fail(HL_ERR_VALUE, "tensor_read: tensor is NULL");
    uint64_t id = hl_plan_recording_id();
    if (id && t->storage->written_by == id)
        return hl_fail(HL_ERR_UNSUPPORTED, "reading %s to the host while a plan is recorded: "
                       "its value is computed only when the plan runs (graph mode records "
                       "ops, it does not run them); read it after the plan has run, or run "
                       "this step eagerly", hl_desc(t));
    if (written_by_unrun_plan(t->storage->written_by))
        return hl_fail(HL_ERR_UNSUPPORTED, "reading %s to the host before the plan that "
                       "computes it has run (a recorded plan, such as SINGA's buffered graph "
                       "before dev.RunGraph(), has not computed it yet)", hl_desc(t));
    return HL_OK;
}

void hl_plan_release(hl_plan *p) {
    if (p) hl_plan_mark_run(p->id);  /* never run: its values never will exist */
    if (!p) return;
    if (p == recording) recording = NULL;
    for (int64_t i = 0; i < p->n; i++) {
        hl_call *c = &p->calls[i];
        for (int k = 0; k < c->n_in; k++) hl_tensor_release((hl_tensor *)hl_call_in(c, k));
        for (int k = 0; k < c->n_out; k++) hl_tensor_release(c->out[k]);
        free(c->in_many);
    }
    for (int64_t k = 0; k < p->n_slots; k++) {
        plan_slot *s = &p->slots[k];
        for (int a = 0; a < s->n_aliases; a++) hl_tensor_release(s->aliases[a]);
        free(s->aliases);
        free(s->alias_offsets);
        hl_tensor_release(s->t);
        hl_storage_release(s->home);
    }
    hl_plan_capture_release(p);  /* graphs first: they read the arenas */
    for (int d = 0; d < HL_DEVICE_KINDS; d++) hl_storage_release(p->arenas[d]);
    hl_plan_free_groups(p);
    hl_plan_free_slices(p);
    free(p->slots);
    free(p->linked_ids);
    free(p->kernels);
    free(p->scratch_need);
    free(p->scratch_offset);
    free(p->scratch_kind);
    free(p->profile);
    free(p->fresh);
    free(p->calls);
    free(p);
}
