/*
 * plan/plan.h - the plan struct and what its files share. A plan is the list of calls recorded
 * on one thread between hl_plan_begin and hl_plan_end (record.c), replayed by hl_plan_run
 * (replay.c), with inputs bound by slot (bind.c), intermediates placed in one arena (memory.c),
 * chains of element-wise calls run as one pass (fuse.c) and, for graph_alg='topological',
 * calls in dependency order (order.c).
 */
#ifndef HL_PLAN_PRIVATE_H
#define HL_PLAN_PRIVATE_H

#include <stdlib.h>

#include "../core.h"

/* An input slot: a tensor declared with hl_plan_input while recording. Binding a tensor to the
   slot redirects every tensor struct of the plan that views the slot's storage (the slot's
   tensor itself and views made of it while recording, such as a flatten) to the bound
   tensor's storage, at the same relative offsets. */
typedef struct {
    hl_tensor *t;            /* the tensor declared (the plan holds a reference) */
    hl_storage *home;        /* its storage when declared (held): target of a copying bind;
                                NULL while bound without a copy and nothing else holds it */
    int64_t home_offset;     /* t->offset when declared */
    size_t home_nbytes;      /* home's size, to make it again for a copying bind */
    hl_tensor **aliases;     /* plan tensors whose storage was home (t among them), held */
    int64_t *alias_offsets;  /* their offsets minus home_offset */
    int n_aliases, cap_aliases;
} plan_slot;

/* A fused chain of element-wise calls (fuse.c): calls[first .. first + n) run as one pass. */
typedef struct plan_group plan_group;
/* A run of convolutions replayed a slice of the batch at a time (slice.c): calls
   [first, last], for samples [0, per), then [per, 2 per), ... up to batch. */
typedef struct { int64_t first, last, batch, per; } plan_slice_run;
/* Per-record times of profiled replays (profile.c). */
typedef struct plan_profile plan_profile;
/* The plan's runs of calls replayed as device graphs (capture.c). */
typedef struct plan_capture plan_capture;

struct hl_plan {
    hl_call *calls;
    int64_t n, cap;
    uint64_t id;             /* this recording's number (hl_storage.written_by) */
    plan_slot *slots;
    int64_t n_slots, cap_slots;
    /* Recordings whose tensors joined these slots' aliases (hl_plan_link_inputs): a tensor
       they write is not bound without a copy either. */
    uint64_t *linked_ids;
    int64_t n_linked;
    /* Set up before the first replay (replay.c): kernels resolved, memory planned. */
    bool prepared;
    hl_kernel *kernels;      /* per call */
    hl_storage *arenas[HL_DEVICE_KINDS];  /* one per device kind that has planned tensors */
    int64_t arena_bytes, planned_bytes, planned_count, in_place_count, alive_peak_bytes;
    int64_t scratch_bytes;   /* kernel scratch placed in the arena (all calls together) */
    /* fuse.c: per call, the index of its fused group or -1; groups run in their first call */
    int *group_of;
    plan_group *groups;
    int64_t n_groups, fused_calls;
    int64_t conv_epilogues;  /* convolutions that took the following ReLU in (fuse.c) */
    int64_t norm_fusions;    /* batch norms that took a ReLU (+ add) or relu_grad in */
    int64_t pool_fusions;    /* max-pool gradients that took the following relu_grad in */
    int64_t expand_dw;       /* pointwise expansions that took their depthwise layer in */
    int64_t outer_updates;   /* batch-1 weight gradients formed inside their update */
    int64_t recomputed;      /* tensors made again instead of kept (recompute.c) */
    /* slice.c: per call, the index of its sliced run or -1 (NULL: no run) */
    int *slice_of;
    plan_slice_run *slice_runs;
    /* per call of a run: which batched tensors (bit 0: input, 1: residual, 2: output) hold
       one slice only, reused by every slice (memory.c gave their storage a slice's bytes) */
    unsigned char *slice_local;
    int64_t n_slice_runs, sliced_calls;
    hl_storage **fused_away;  /* intermediates a fused pass keeps in scratch: no memory */
    int64_t n_fused_away, cap_fused_away;
    int options;             /* HL_PLAN_NO_* bits */
    /* scratch.c: the first replay measures each call's kernel scratch (measuring), the memory
       plan gives it arena bytes (offset -1: none) */
    bool measuring, memory_planned;
    bool ran;                /* a replay has completed (record.c's host-read guard) */
    int64_t *scratch_need, *scratch_offset;
    int *scratch_kind;
    int busy;                /* atomic: a replay is running */
    plan_profile *profile;   /* NULL until profiling is first switched on (atomic pointer) */
    plan_capture *capture;   /* NULL: no call runs on a backend that captures graphs */
    /* take.c: storages given to outputs since the last replay (no values until the next) */
    hl_storage **fresh;
    int64_t n_fresh, cap_fresh;
};

/* replay.c: runs calls [from, to) (fused groups as one pass); reseed: advance the Philox key
   of random calls afterwards, for the next replay. */
hl_status hl_plan_replay_range(hl_plan *p, int64_t from, int64_t to, bool reseed);
/* Advances the keys of the random calls in [from, to) (a Weyl step: keys never repeat). */
void hl_plan_reseed_range(hl_plan *p, int64_t from, int64_t to);
/* capture.c: set up before the first replay (p->capture stays NULL when nothing captures);
   a plan with p->capture replays through hl_plan_replay_captured: the first replay call by
   call, noting after each call whether it could be captured (observe), the later ones with
   graphs. */
hl_status hl_plan_capture_prepare(hl_plan *p);
void hl_plan_capture_observe(hl_plan *p, int64_t i);
hl_status hl_plan_replay_captured(hl_plan *p);
void hl_plan_capture_release(hl_plan *p);
void hl_plan_capture_stats(const hl_plan *p, hl_plan_info *info);
/* bind.c: points slot's tensors back at the slot's own memory, copying the values bound. */
hl_status hl_plan_pin_slot(hl_plan *p, int64_t slot);

/* record.c: the number of the plan being recorded on this thread (0: none). */
uint64_t hl_plan_recording_id(void);
/* record.c: plan `id` has run (or is released): the host-read guard stops refusing the
   values it writes. */
void hl_plan_mark_run(uint64_t id);
/* record.c: adds every tensor of q's records viewing the slot's home storage to the slot's
   aliases (held), at its offset from the slot's. */
hl_status hl_plan_collect_aliases(const hl_plan *q, plan_slot *s);

/* order.c: reorders the calls by dependency levels (graph_alg='topological'). */
hl_status hl_plan_order_topologically(hl_plan *p);
/* scratch.c: runs call i, its kernel scratch measured or served from the arena; _as: runs c
   (call i over other views, slice.c) with call i's scratch. */
hl_status hl_plan_run_call(hl_plan *p, int64_t i);
hl_status hl_plan_run_call_as(hl_plan *p, int64_t i, const hl_call *c);
/* slice.c: finds the runs of convolutions to replay a slice of the batch at a time (before
   the memory plan, which keeps what a run touches alive over the whole run); whether call i
   starts a run that ends before call `to`; runs the run starting at call i (*last: its last
   call), timing each call into the profile when timed. */
hl_status hl_plan_find_slices(hl_plan *p);
void hl_plan_free_slices(hl_plan *p);
bool hl_plan_sliced_at(const hl_plan *p, int64_t i, int64_t to);
/* slice.c: for a planned storage used from call `first` to call `last`: when these are the
   first and last calls of a sliced run (only the run uses it), the bytes one slice of it
   takes, else -1; hl_plan_mark_slice_local: its bytes are now one slice's (memory.c placed
   it): the calls of the run holding call `call` see it at its first sample for every slice. */
int64_t hl_plan_slice_bytes(const hl_plan *p, const hl_storage *s, int64_t first, int64_t last);
void hl_plan_mark_slice_local(hl_plan *p, const hl_storage *s, int64_t call);
hl_status hl_plan_run_sliced(hl_plan *p, int64_t i, int64_t *last, bool timed);
/* memory.c: places the plan's intermediates in arenas (at the first replay). */
hl_status hl_plan_plan_memory(hl_plan *p);
/* recompute.c: makes cheap saved tensors again where the backward reads them, and lets
   max_pool_grad find the maxima again instead of reading max_pool's indices. */
hl_status hl_plan_recompute(hl_plan *p);
/* fuse.c: finds chains of element-wise calls to run as one pass; hl_plan_run_group runs one. */
hl_status hl_plan_fuse(hl_plan *p);
/* fuse.c: the first call after call `after` that views storage s, or -1. */
int64_t hl_plan_next_use(const hl_plan *p, const hl_storage *s, int64_t after);
/* fuse.c: removes call i (its record and kernel) from a plan being prepared; the caller has
   moved or released the call's references. */
void hl_plan_drop_call(hl_plan *p, int64_t i);
/* fuse.c: whether a call other than calls skip_a and skip_b views storage s. */
bool hl_plan_other_call_uses(const hl_plan *p, const hl_storage *s, int64_t skip_a,
                             int64_t skip_b);
/* fuse.c: whether any call in (from, to) views storage s (written_only: writes it). */
bool hl_plan_touched_between(const hl_plan *p, int64_t from, int64_t to, const hl_storage *s,
                             bool written_only);
/* fuse.c: intermediate t, written by call i and read by call j alone: nothing outside the plan
   holds it (its tensor is referenced by the two calls, its storage by it alone) and no other
   call sees its storage. */
bool hl_plan_private_between(const hl_plan *p, const hl_tensor *t, int64_t i, int64_t j);
/* fuse_update.c: outer-product weight gradients read only by their optimiser update are
   formed inside the update (the gemm's call goes). */
void hl_plan_fuse_outer_updates(hl_plan *p);
/* fuse_norm.c: batch_norm -> relu, batch_norm -> add -> relu and relu_grad -> batch_norm_grad
   become one batch norm call each. */
void hl_plan_fuse_norms(hl_plan *p);
/* Runs group g; *last is the index of its last call. */
hl_status hl_plan_run_group(hl_plan *p, int64_t g, int64_t *last);
void hl_plan_free_groups(hl_plan *p);
int64_t hl_plan_group_start(const hl_plan *p, int64_t g);
/* Unary and binary ops whose output has their inputs' dtype, read element i of each input
   and write element i of the output: they fuse, and may write over an input. */
bool hl_plan_element_wise(int op);

/* replay.c: runs record i, or the fused group that starts at i; *last is the last record run. */
hl_status hl_plan_run_record(hl_plan *p, int64_t i, int64_t *last);
/* profile.c: whether this replay is timed (profiling on and past the replays it skips);
   hl_plan_replay_timed replays with every record timed. */
bool hl_plan_profile_this_replay(hl_plan *p);
hl_status hl_plan_replay_timed(hl_plan *p);
/* profile.c: adds ns to record i's time (a sliced run's calls, timed one by one). */
void hl_plan_profile_add(hl_plan *p, int64_t i, int64_t ns);
/* profile.c: the monotonic clock, in ns. */
int64_t hl_plan_clock_ns(void);

/* A tensor of call c (inputs first, then outputs): k < c->n_in + c->n_out. */
static inline hl_tensor *hl_call_tensor(const hl_call *c, int k) {
    return k < c->n_in ? (hl_tensor *)hl_call_in(c, k) : c->out[k - c->n_in];
}

/* Whether call c writes storage s. */
static inline bool hl_call_writes(const hl_call *c, const hl_storage *s) {
    for (int k = 0; k < c->n_out; k++)
        if (c->out[k] && c->out[k]->storage == s) return true;
    return false;
}

/* The device call c runs on: its first output's, else its first input's (the CPU for none). */
static inline hl_device hl_plan_call_device(const hl_call *c) {
    const hl_tensor *first = c->n_out ? c->out[0] : (c->n_in ? hl_call_in(c, 0) : NULL);
    return first ? first->storage->device : (hl_device){HL_DEVICE_CPU, 0};
}

/* The same view of the same dtype: element i of one is element i of the other. */
static inline bool hl_same_view(const hl_tensor *a, const hl_tensor *b) {
    return a->dtype == b->dtype && a->offset == b->offset && a->ndim == b->ndim &&
           hl_same_shape(a, b) && memcmp(a->strides, b->strides, sizeof(int64_t) * a->ndim) == 0;
}

/* t is contiguous from its storage's first byte to its last: writing t writes it whole. */
static inline bool hl_covers_storage(const hl_tensor *t) {
    return t->offset == 0 && hl_tensor_is_contiguous(t) &&
           (size_t)hl_tensor_numel(t) * hl_dtype_size(t->dtype) == t->storage->nbytes;
}

#endif /* HL_PLAN_PRIVATE_H */
