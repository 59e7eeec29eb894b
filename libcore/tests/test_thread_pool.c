/*
 * test_thread_pool.c - libcore's thread pool (src/cpu/thread_pool.c) on its own, built with
 * ThreadSanitizer by `make test-tsan` (docs/sanitizers.md): loops at several thread counts,
 * in plain chunks and in lanes (hl_parallel_lanes: each thread its own lane's chunks, then
 * the others'), more threads than CPUs, nested loops, failures, gangs whose items wait on one
 * another, and
 * three threads starting loops at once, and all of that again while the loops are recorded
 * (hl_pool_trace_start). Every item must run exactly once, every record add up, and TSan must
 * find no data race in the pool's hand-over of jobs (the claim word, the done count, the
 * sleep) or in the records (workers add their chunks' time to the caller's record).
 *
 * Built from the pool's sources alone, without OpenMP (whose runtime TSan cannot see into):
 * the pool then counts CPUs itself.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core.h"
#include "../src/cpu/thread_pool.h"
#include "check.h"

enum { MAX_ITEMS = 1 << 16 };

typedef struct {
    atomic_int ran[MAX_ITEMS];
    int64_t fail_at;
    int nested;
} counts;

static void nested_items(int64_t begin, int64_t end, void *arg) {
    atomic_int *sum = arg;
    atomic_fetch_add(sum, (int)(end - begin));
}

static hl_status count_items(int64_t begin, int64_t end, void *arg) {
    counts *c = arg;
    for (int64_t i = begin; i < end; i++) {
        if (i == c->fail_at) return hl_fail(HL_ERR_VALUE, "item %lld failed", (long long)i);
        if (c->nested) {
            atomic_int sum = 0;
            hl_parallel_for(c->nested, 1, nested_items, &sum);
            if (atomic_load(&sum) != c->nested) return hl_fail(HL_ERR_INTERNAL, "nested lost");
        }
        atomic_fetch_add(&c->ran[i], 1);
    }
    return HL_OK;
}

static void count_lane_items(int64_t begin, int64_t end, void *arg) {
    (void)count_items(begin, end, arg);
}

/* Runs n items in chunks of grain (0: in lanes); every one must have run once (or, on
   failure, none twice). */
static hl_status run_and_check(counts *c, int64_t n, int64_t grain) {
    for (int64_t i = 0; i < n; i++) atomic_store(&c->ran[i], 0);
    hl_status st = HL_OK;
    if (grain > 0)
        st = hl_parallel_try(n, grain, count_items, c);
    else
        hl_parallel_lanes(n, count_lane_items, c);
    for (int64_t i = 0; i < n; i++) {
        int r = atomic_load(&c->ran[i]);
        if (r > 1 || (!st && r != 1)) {
            fprintf(stderr, "item %lld ran %d times (n %lld, grain %lld)\n", (long long)i, r,
                    (long long)n, (long long)grain);
            exit(1);
        }
    }
    return st;
}

static void loops_at_thread_counts(void) {
    static counts c;
    const int threads[] = {1, 2, 3, 4, 8};  /* 4 and 8: more than a small host's CPUs */
    const int64_t sizes[][2] = {{1, 1},    {7, 3},         {1000, 1}, {MAX_ITEMS, 64},
                                {MAX_ITEMS, 1}, {1, 0}, {3, 0}, {7, 0},
                                {1000, 0}, {MAX_ITEMS, 0}};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        hl_pool_set_threads(threads[t]);
        for (int rep = 0; rep < 6; rep++)
            for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
                c.fail_at = -1;
                c.nested = rep % 4 == 0 ? 5 : 0;
                CHECK(run_and_check(&c, sizes[s][0], sizes[s][1]) == HL_OK);
            }
    }
}

static void failures_come_back(void) {
    static counts c;
    hl_pool_set_threads(3);
    for (int64_t at = 0; at < 1000; at += 97) {
        c.fail_at = at;
        c.nested = 0;
        CHECK(run_and_check(&c, 1000, 1) == HL_ERR_VALUE);
        char want[64];
        snprintf(want, sizeof want, "item %lld failed", (long long)at);
        CHECK(strcmp(hl_last_error(), want) == 0);
    }
}

static void held_workers_leave_it_to_the_caller(void) {
    static counts c;
    hl_pool_set_threads(2);
    c.fail_at = -1;
    c.nested = 0;
    hl_pool_hold_workers(true);
    CHECK(run_and_check(&c, 5000, 1) == HL_OK);
    CHECK(run_and_check(&c, 5000, 0) == HL_OK);   /* the caller takes the worker's lane */
    hl_pool_hold_workers(false);
    CHECK(run_and_check(&c, 5000, 1) == HL_OK);
    CHECK(run_and_check(&c, 5000, 0) == HL_OK);
}

/* A gang's items wait for one another: they only finish if all run at once. */
typedef struct {
    atomic_int arrived;
    int n;
} gang_barrier;

static void gang_item(int i, void *arg) {
    (void)i;
    gang_barrier *b = arg;
    atomic_fetch_add(&b->arrived, 1);
    while (atomic_load(&b->arrived) < b->n) {
    }
}

static void gangs_run_together(void) {
    hl_pool_set_threads(3);
    for (int rep = 0; rep < 60; rep++) {
        gang_barrier b = {0, 1 + rep % 3};
        if (hl_pool_gang(b.n, gang_item, &b)) CHECK(atomic_load(&b.arrived) == b.n);
    }
}

/* Three threads start loops at once: one has the pool, the others run theirs inline. */
static void *caller_thread(void *arg) {
    counts *c = arg;
    for (int rep = 0; rep < 30; rep++) {
        c->fail_at = -1;
        c->nested = rep % 5 == 0 ? 3 : 0;
        if (run_and_check(c, 4000, rep % 2 ? 0 : 16) != HL_OK) {
            fprintf(stderr, "a caller's loop failed: %s\n", hl_last_error());
            exit(1);
        }
    }
    return NULL;
}

static void three_callers_at_once(void) {
    static counts c[3];
    pthread_t t[3];
    hl_pool_set_threads(2);
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, caller_thread, &c[i]) == 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
}

/* The same loops recorded: one record a loop started outside a chunk, each with all its
   chunks counted on the loop's slots. */
static void recorded(void) {
    enum { CAP = 4096 };
    static hl_pool_region regions[CAP];
    CHECK(hl_pool_trace_start(regions, CAP) == HL_OK);
    CHECK(hl_pool_trace_start(regions, CAP) == HL_ERR_VALUE);   /* on already */
    gangs_run_together();
    three_callers_at_once();
    loops_at_thread_counts();
    const int64_t n = hl_pool_trace_stop();
    CHECK(n > 0 && n <= CAP);
    CHECK(hl_pool_trace_stop() == 0);
    for (int64_t i = 0; i < n; i++) {
        const hl_pool_region *r = &regions[i];
        int64_t ran = 0;
        for (int s = 0; s < HL_POOL_TRACE_SLOTS; s++) ran += r->chunks_run[s];
        CHECK(ran == r->chunks && r->end_ns >= r->start_ns && r->threads >= 1);
    }
}

int main(void) {
    loops_at_thread_counts();
    failures_come_back();
    held_workers_leave_it_to_the_caller();
    gangs_run_together();
    three_callers_at_once();
    recorded();
    printf("test_thread_pool: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
