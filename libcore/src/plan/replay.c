/*
 * plan/replay.c - hl_plan_run: before the first replay the kernels are looked up once per call,
 * element-wise chains are fused (fuse.c) and intermediates placed in arenas (memory.c); every
 * replay then calls the kernels in record order.
 */
#include "plan.h"

static hl_status resolve_kernels(hl_plan *p) {
    p->kernels = malloc(sizeof *p->kernels * (p->n ? p->n : 1));
    if (!p->kernels) return hl_fail(HL_ERR_MEMORY, "plan_run: out of memory");
    for (int64_t i = 0; i < p->n; i++) {
        const hl_call *c = &p->calls[i];
        hl_device d = hl_plan_call_device(c);
        const hl_backend *be = hl_backend_for(d);
        if (!be)
            return hl_fail(HL_ERR_DEVICE, "%s: no backend serves device %s", hl_op_str(c->op),
                           hl_device_str(d));
        p->kernels[i] = be->kernels[c->op];
        if (!p->kernels[i])
            return hl_fail(HL_ERR_UNSUPPORTED, "%s is not implemented on %s",
                           hl_op_str(c->op), be->name);
    }
    return HL_OK;
}

static hl_status prepare(hl_plan *p) {
    hl_status st = p->options & HL_PLAN_TOPOLOGICAL ? hl_plan_order_topologically(p) : HL_OK;
    /* not under profiling switched on before the first replay: its per-record table is sized */
    if (!st && !(p->options & (HL_PLAN_NO_RECOMPUTE | HL_PLAN_NO_MEMORY)) && !p->profile)
        st = hl_plan_recompute(p);
    if (!st) st = resolve_kernels(p);
    if (!st && !(p->options & HL_PLAN_NO_FUSION)) st = hl_plan_fuse(p);
    if (!st && !(p->options & HL_PLAN_NO_SLICES)) st = hl_plan_find_slices(p);
    if (!st && !(p->options & HL_PLAN_NO_CAPTURE)) st = hl_plan_capture_prepare(p);
    if (!st && !(p->options & HL_PLAN_NO_MEMORY)) {
        p->scratch_need = calloc((size_t)p->n + 1, sizeof *p->scratch_need);
        p->scratch_offset = malloc(sizeof *p->scratch_offset * (p->n + 1));
        p->scratch_kind = calloc((size_t)p->n + 1, sizeof *p->scratch_kind);
        if (!p->scratch_need || !p->scratch_offset || !p->scratch_kind)
            st = hl_fail(HL_ERR_MEMORY, "plan_run: out of memory");
        for (int64_t i = 0; !st && i < p->n; i++) p->scratch_offset[i] = -1;
        p->measuring = true;  /* this first replay measures kernel scratch */
    }
    if (st) {
        free(p->kernels);
        p->kernels = NULL;
        hl_plan_free_groups(p);
        hl_plan_free_slices(p);
        return st;
    }
    p->prepared = true;
    return HL_OK;
}

hl_status hl_plan_replay_range(hl_plan *p, int64_t from, int64_t to, bool reseed) {
    for (int64_t i = from; i < to; i++) {
        hl_status st;
        int g = p->group_of ? p->group_of[i] : -1;
        if (g >= 0) {
            int64_t last;
            st = hl_plan_run_group(p, g, &last);
            if (st) return st;
            i = last;
            continue;
        }
        if (hl_plan_sliced_at(p, i, to)) {  /* convolutions: no random call to reseed */
            st = hl_plan_run_sliced(p, i, &i, false);
            if (st) return st;
            continue;
        }
        st = hl_plan_run_call(p, i);
        if (st) return st;
        if (p->capture) hl_plan_capture_observe(p, i);
        if (reseed) hl_plan_reseed_range(p, i, i + 1);
    }
    return HL_OK;
}

void hl_plan_reseed_range(hl_plan *p, int64_t from, int64_t to) {
    for (int64_t i = from; i < to; i++) {
        hl_call *c = &p->calls[i];
        if (c->reseed_on_replay)  /* a Weyl step: keys of successive runs never repeat */
            c->i[0] = (int64_t)((uint64_t)c->i[0] + 0x9E3779B97F4A7C15ull);
    }
}

hl_status hl_plan_run_record(hl_plan *p, int64_t i, int64_t *last) {
    int g = p->group_of ? p->group_of[i] : -1;
    if (g >= 0) return hl_plan_run_group(p, g, last);
    *last = i;
    hl_status st = hl_plan_run_call(p, i);
    if (!st) hl_plan_reseed_range(p, i, i + 1);
    return st;
}

static hl_status replay(hl_plan *p) {
    /* profiling times record by record (profile.c); a plan replayed as captured device
       graphs has no per-record boundaries and is not timed */
    if (!p->capture && hl_plan_profile_this_replay(p)) return hl_plan_replay_timed(p);
    return p->capture ? hl_plan_replay_captured(p) : hl_plan_replay_range(p, 0, p->n, true);
}

hl_status hl_plan_run(hl_plan *p) {
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_run: plan is NULL");
    if (hl_plan_recording())
        return hl_fail(HL_ERR_VALUE, "plan_run: a plan is being recorded on this thread; a "
                       "plan cannot replay inside another's recording");
    int idle = 0;
    if (!__atomic_compare_exchange_n(&p->busy, &idle, 1, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return hl_fail(HL_ERR_VALUE, "plan_run: the plan is already running on another "
                       "thread; a plan replays on one thread at a time");
    hl_status st = p->prepared ? HL_OK : prepare(p);
    /* the memory plan, with the scratch the first replay measured, before the second */
    if (!st && p->prepared && !p->measuring && p->scratch_need && !p->memory_planned) {
        st = hl_plan_plan_memory(p);
        p->memory_planned = true;
    }
    if (!st) st = replay(p);
    if (!st && p->measuring) p->measuring = false;
    if (!st) p->n_fresh = 0;  /* outputs taken (take.c) have values again */
    if (!st && !p->ran) {
        p->ran = true;
        hl_plan_mark_run(p->id);  /* what it writes has values now */
    }
    __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE);
    return st;
}

hl_status hl_plan_set_options(hl_plan *p, int options) {
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_set_options: plan is NULL");
    if (p->prepared)
        return hl_fail(HL_ERR_VALUE, "plan_set_options: the plan has already run; options "
                       "apply before its first replay");
    if (options & ~HL_PLAN_OPTION_MASK)
        return hl_fail(HL_ERR_VALUE, "plan_set_options: unknown option bits 0x%x",
                       options & ~HL_PLAN_OPTION_MASK);
    p->options = options;
    return HL_OK;
}

hl_status hl_plan_stats(const hl_plan *p, hl_plan_info *info) {
    if (!p || !info) return hl_fail(HL_ERR_VALUE, "plan_stats: plan or info is NULL");
    memset(info, 0, sizeof *info);
    info->calls = p->n;
    info->inputs = p->n_slots;
    info->prepared = p->prepared;
    info->arena_bytes = p->arena_bytes;
    info->alive_peak_bytes = p->alive_peak_bytes;
    info->scratch_bytes = p->scratch_bytes;
    info->memory_planned = p->memory_planned;
    info->planned_tensors = p->planned_count;
    info->planned_bytes = p->planned_bytes;
    info->in_place = p->in_place_count;
    info->fused_groups = p->n_groups;
    info->fused_calls = p->fused_calls;
    info->conv_epilogues = p->conv_epilogues;
    info->norm_fusions = p->norm_fusions;
    info->pool_fusions = p->pool_fusions;
    info->expand_dw = p->expand_dw;
    info->outer_updates = p->outer_updates;
    info->recomputed = p->recomputed;
    info->sliced_runs = p->n_slice_runs;
    info->sliced_calls = p->sliced_calls;
    hl_plan_capture_stats(p, info);
    return HL_OK;
}
