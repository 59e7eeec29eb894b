/*
 * plan/profile.c - per-record times of a plan's replays (hl.graph.profile, SINGA's
 * dev.PrintTimeProfiling). Switched on, a replay past the first `skip` ones times every record
 * with the monotonic clock, after waiting for the record's device (so a queued GPU kernel is
 * counted where it runs, as SINGA does with its events), and adds the nanoseconds to that
 * record's total; a fused group is timed as one, under its first record. Switched off (the
 * default) a replay pays one pointer test: the timed loop is a separate function.
 *
 * Threads: a plan replays on one thread at a time (hl_plan_run's busy flag), so only the
 * replaying thread writes the totals; another thread may switch profiling or read the totals
 * at any moment, hence the atomics.
 */
#include <time.h>

#include "plan.h"

struct plan_profile {
    int on;              /* atomic */
    int64_t skip_left;   /* atomic: replays still to run untimed */
    int64_t timed;       /* atomic: replays timed */
    int64_t ns[];        /* per record (hl_plan.n of them) */
};

int64_t hl_plan_clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The plan's profile, made on first use (two threads switching it on race on the pointer:
   one allocation wins, the other is freed). */
static plan_profile *profile_of(hl_plan *p) {
    plan_profile *prof = __atomic_load_n(&p->profile, __ATOMIC_ACQUIRE);
    if (prof) return prof;
    plan_profile *made = calloc(1, sizeof *made + sizeof made->ns[0] * (size_t)p->n);
    if (!made) return NULL;
    plan_profile *expected = NULL;
    if (__atomic_compare_exchange_n(&p->profile, &expected, made, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return made;
    free(made);
    return expected;
}

bool hl_plan_profile_this_replay(hl_plan *p) {
    plan_profile *prof = __atomic_load_n(&p->profile, __ATOMIC_ACQUIRE);
    if (!prof || !__atomic_load_n(&prof->on, __ATOMIC_RELAXED)) return false;
    if (__atomic_load_n(&prof->skip_left, __ATOMIC_RELAXED) > 0) {
        __atomic_sub_fetch(&prof->skip_left, 1, __ATOMIC_RELAXED);
        return false;
    }
    return true;
}

/* Waits for the device of record i (NULL synchronize: its kernels are done when they return). */
static hl_status wait_for_device(const hl_plan *p, int64_t i) {
    hl_device d = hl_plan_call_device(&p->calls[i]);
    const hl_backend *be = hl_backend_for(d);
    return be && be->synchronize ? be->synchronize(d.index) : HL_OK;
}

hl_status hl_plan_replay_timed(hl_plan *p) {
    plan_profile *prof = p->profile;
    hl_status st = p->n ? wait_for_device(p, 0) : HL_OK;  /* earlier queued work is not ours */
    for (int64_t i = 0; !st && i < p->n; i++) {
        if (hl_plan_sliced_at(p, i, p->n)) {  /* each call timed, slice by slice */
            st = hl_plan_run_sliced(p, i, &i, true);
            continue;
        }
        int64_t first = i, start = hl_plan_clock_ns();
        st = hl_plan_run_record(p, i, &i);
        if (!st) st = wait_for_device(p, first);
        __atomic_add_fetch(&prof->ns[first], hl_plan_clock_ns() - start, __ATOMIC_RELAXED);
    }
    if (!st) __atomic_add_fetch(&prof->timed, 1, __ATOMIC_RELAXED);
    return st;
}

void hl_plan_profile_add(hl_plan *p, int64_t i, int64_t ns) {
    __atomic_add_fetch(&p->profile->ns[i], ns, __ATOMIC_RELAXED);
}

hl_status hl_plan_set_profiling(hl_plan *p, int on, int64_t skip) {
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_set_profiling: plan is NULL");
    if (skip < 0)
        return hl_fail(HL_ERR_VALUE, "plan_set_profiling: skip must be >= 0, got %lld",
                       (long long)skip);
    if (!on && !p->profile) return HL_OK;
    plan_profile *prof = profile_of(p);
    if (!prof) return hl_fail(HL_ERR_MEMORY, "plan_set_profiling: out of memory");
    __atomic_store_n(&prof->skip_left, on ? skip : 0, __ATOMIC_RELAXED);
    __atomic_store_n(&prof->on, on ? 1 : 0, __ATOMIC_RELEASE);
    return HL_OK;
}

hl_status hl_plan_profile_reset(hl_plan *p) {
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_profile_reset: plan is NULL");
    plan_profile *prof = __atomic_load_n(&p->profile, __ATOMIC_ACQUIRE);
    if (!prof) return HL_OK;
    for (int64_t i = 0; i < p->n; i++) __atomic_store_n(&prof->ns[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&prof->timed, 0, __ATOMIC_RELAXED);
    return HL_OK;
}

hl_status hl_plan_profile(const hl_plan *p, int64_t *timed, int32_t *ops, int64_t *first,
                          int64_t *ns, int64_t n) {
    if (!p) return hl_fail(HL_ERR_VALUE, "plan_profile: plan is NULL");
    if (n != p->n)
        return hl_fail(HL_ERR_VALUE, "plan_profile: the arrays hold %lld records, the plan has "
                       "%lld (hl_plan_size)", (long long)n, (long long)p->n);
    plan_profile *prof = __atomic_load_n(&((hl_plan *)p)->profile, __ATOMIC_ACQUIRE);
    if (timed) *timed = prof ? __atomic_load_n(&prof->timed, __ATOMIC_RELAXED) : 0;
    for (int64_t i = 0; i < n; i++) {
        if (ops) ops[i] = p->calls[i].op;
        if (first) {
            int g = p->group_of ? p->group_of[i] : -1;
            first[i] = g >= 0 ? hl_plan_group_start(p, g) : i;
        }
        if (ns) ns[i] = prof ? __atomic_load_n(&prof->ns[i], __ATOMIC_RELAXED) : 0;
    }
    return HL_OK;
}
