/*
 * thread_pool_probe.c - hl_pool_probe, the thread pool under test (tests/test_thread_pool.py):
 * which thread ran which item, whether nested loops stayed on their thread, whether a failure
 * inside a chunk comes back to the caller, and whether a loop finishes while the workers claim
 * nothing.
 */
#include <pthread.h>
#include <time.h>

#include "../core.h"
#include "thread_pool.h"

typedef struct {
    int32_t *slot_of;
    int64_t fail_at, spin_ns;
    int nested;
} probe;

typedef struct {
    pthread_t owner;
    bool strayed;
} nested_probe;

static void spin_for(int64_t ns) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < ns);
}

static void nested_items(int64_t begin, int64_t end, void *arg) {
    nested_probe *q = arg;
    for (int64_t i = begin; i < end; i++)
        if (!pthread_equal(pthread_self(), q->owner) || hl_pool_slot() != 0) q->strayed = true;
}

static hl_status probe_items(int64_t begin, int64_t end, void *arg) {
    const probe *q = arg;
    for (int64_t i = begin; i < end; i++) {
        if (i == q->fail_at)
            return hl_fail(HL_ERR_VALUE, "pool probe: item %lld failed on slot %d",
                           (long long)i, hl_pool_slot());
        if (q->spin_ns > 0) spin_for(q->spin_ns);
        const int slot = hl_pool_slot();
        nested_probe np = {pthread_self(), false};
        if (q->nested > 0) hl_parallel_for(q->nested, 1, nested_items, &np);
        /* the slot must be back to this chunk's after the nested loop */
        q->slot_of[i] = np.strayed || hl_pool_slot() != slot ? -1 : slot;
    }
    return HL_OK;
}

hl_status hl_pool_probe(int64_t n, int64_t grain, int32_t *slot_of, int64_t fail_at,
                        int nested, int64_t spin_ns, int hold_workers) {
    if (n < 0 || grain < 1 || (n > 0 && !slot_of))
        return hl_fail(HL_ERR_VALUE, "pool_probe: n %lld, grain %lld: expected n >= 0, "
                       "grain >= 1 and an output of n items", (long long)n, (long long)grain);
    probe q = {slot_of, fail_at, spin_ns, nested};
    if (hold_workers) hl_pool_hold_workers(true);
    hl_status st = hl_parallel_try(n, grain, probe_items, &q);
    if (hold_workers) hl_pool_hold_workers(false);
    return st;
}

/* The same items in lanes (hl_parallel_lanes): no failure to report there. */
static void probe_lane_items(int64_t begin, int64_t end, void *arg) {
    (void)probe_items(begin, end, arg);
}

hl_status hl_pool_probe_lanes(int64_t n, int32_t *slot_of, int nested, int64_t spin_ns,
                              int hold_workers) {
    if (n < 0 || (n > 0 && !slot_of))
        return hl_fail(HL_ERR_VALUE, "pool_probe_lanes: n %lld: expected n >= 0 and an output "
                       "of n items", (long long)n);
    probe q = {slot_of, -1, spin_ns, nested};
    if (hold_workers) hl_pool_hold_workers(true);
    hl_parallel_lanes(n, probe_lane_items, &q);
    if (hold_workers) hl_pool_hold_workers(false);
    return HL_OK;
}
