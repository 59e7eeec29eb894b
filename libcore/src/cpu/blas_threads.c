/*
 * blas_threads.c - OpenBLAS runs its parallel work on libcore's threads.
 *
 * Left to itself, OpenBLAS (a pthreads build) keeps its own pool of threads, while libcore's
 * threads keep spinning for a while after each parallel loop ends. When a loop (im2col, an
 * element-wise op) is followed by a BLAS call, the two pools fight over the same cores: on
 * a 2-core machine a convolution ran 3 to 30 times slower than the sum of its parts. OpenBLAS
 * lets the caller supply the threading (openblas_set_threads_callback_function): its work
 * items go to libcore's thread pool (thread_pool.c, hl_pool_gang), or where that is busy to an
 * OpenMP team, so one set of threads does everything.
 *
 * OpenBLAS's threaded level-3 routines make their work items wait on one another, so all
 * items must run at the same time. Where an OpenMP team of that size is not to be had (a
 * call from inside a parallel region, dynamic thread adjustment, a thread limit, a smaller
 * team than asked for), the missing items run on plain threads started for the call.
 *
 * Buffer slots. OpenBLAS runs item k as exec_threads(cpu, item), and an item that brings no
 * packing buffer of its own (every item but the first of a GEMM, every item of a batched
 * GEMM) packs into OpenBLAS's global per-"cpu" buffer blas_thread_buffer[cpu]. Passing the
 * item's index as cpu, as OpenBLAS's own server does for its one caller at a time, made two
 * BLAS calls from two application threads pack into the same buffers at once: wrong results
 * (Winograd convolutions, whose batched GEMM has no item with its own buffer, were off in a
 * third of the calls). Each call therefore takes distinct slots from a process-wide set for
 * its items, and gives them back when its items are done; a call finding too few free slots
 * waits for some. The slot count is OpenBLAS's MAX_THREADS, read from its configuration
 * string (the size of blas_thread_buffer).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cblas.h>

#include "thread_pool.h"

typedef struct {
    openblas_dojob_callback dojob;
    int index, data;
    void *item;
    pthread_t tid;
    bool started;
} job;

/* ---- buffer slots ------------------------------------------------------------------------ */

#define MAX_SLOTS 64
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slot_freed = PTHREAD_COND_INITIALIZER;
static uint64_t slots_used;  /* bit k: slot k is some call's */
static int slot_count = 1;   /* set at load from OpenBLAS's MAX_THREADS */

/* n distinct free slots into out[] (lowest first, so few buffers are ever allocated). */
static void take_slots(int n, int *out) {
    pthread_mutex_lock(&slot_lock);
    for (;;) {
        int got = 0;
        for (int k = 0; k < slot_count && got < n; k++)
            if (!(slots_used >> k & 1)) out[got++] = k;
        if (got == n) break;
        pthread_cond_wait(&slot_freed, &slot_lock);
    }
    for (int i = 0; i < n; i++) slots_used |= (uint64_t)1 << out[i];
    pthread_mutex_unlock(&slot_lock);
}

static void give_slots(int n, const int *slots) {
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < n; i++) slots_used &= ~((uint64_t)1 << slots[i]);
    pthread_cond_broadcast(&slot_freed);
    pthread_mutex_unlock(&slot_lock);
}

/* OpenBLAS's MAX_THREADS (its configuration string says "MAX_THREADS=64"), at most 64. */
static int openblas_max_threads(void) {
    const char *cfg = scipy_openblas_get_config();
    const char *at = cfg ? strstr(cfg, "MAX_THREADS=") : NULL;
    int n = at ? atoi(at + strlen("MAX_THREADS=")) : 0;
    return n < 1 ? 1 : n > MAX_SLOTS ? MAX_SLOTS : n;
}

/* ---- running the items --------------------------------------------------------------------- */

static void *run_job(void *p) {
    job *j = p;
    j->dojob(j->index, j->item, j->data);
    return NULL;
}

/* Starts items first .. n - 1 on threads of their own; an item whose thread cannot be
   started runs here and now (correct for the items that do not wait on others). */
static job *start_items(openblas_dojob_callback dojob, int first, int n, size_t elsize,
                        char *items, int data, const int *slot) {
    int count = n - first;
    job *jobs = calloc((size_t)(count > 0 ? count : 1), sizeof *jobs);
    for (int k = 0; k < count; k++) {
        job j = {.dojob = dojob, .index = slot[first + k], .data = data,
                 .item = items + (size_t)(first + k) * elsize};
        if (!jobs) {
            run_job(&j);
            continue;
        }
        jobs[k] = j;
        jobs[k].started = !pthread_create(&jobs[k].tid, NULL, run_job, &jobs[k]);
        if (!jobs[k].started) run_job(&jobs[k]);
    }
    return jobs;
}

static void join_items(job *jobs, int count) {
    if (!jobs) return;
    for (int k = 0; k < count; k++)
        if (jobs[k].started) pthread_join(jobs[k].tid, NULL);
    free(jobs);
}

typedef struct {
    openblas_dojob_callback dojob;
    size_t elsize;
    char *base;
    int data;
    const int *slot;
} gang_items;

static void run_gang_item(int i, void *ctx) {
    const gang_items *g = ctx;
    g->dojob(g->slot[i], g->base + (size_t)i * g->elsize, g->data);
}

static void run_slotted(openblas_dojob_callback dojob, int n, size_t elsize, char *base,
                        int data, const int *slot) {
    if (n == 1) {
        dojob(slot[0], base, data);
        return;
    }
    /* The pool's threads first: the same threads as libcore's own loops, which idle briefly
       and then sleep (thread_pool.c). */
    gang_items g = {dojob, elsize, base, data, slot};
    if (hl_pool_gang(n, run_gang_item, &g)) return;
#ifdef _OPENMP
    if (!omp_in_parallel() && !hl_pool_in_chunk() && !omp_get_dynamic() &&
        n <= omp_get_thread_limit()) {
#pragma omp parallel num_threads(n)
        {
            int i = omp_get_thread_num(), team = omp_get_num_threads();
            job *extra = NULL;
            if (i == 0 && team < n) extra = start_items(dojob, team, n, elsize, base, data, slot);
            dojob(slot[i], base + (size_t)i * elsize, data);
            if (i == 0 && team < n) join_items(extra, n - team);
        }
        return;
    }
#endif
    job *extra = start_items(dojob, 1, n, elsize, base, data, slot);
    dojob(slot[0], base, data);
    join_items(extra, n - 1);
}

static void run_items(int sync, openblas_dojob_callback dojob, int n, size_t elsize,
                      void *items, int data) {
    (void)sync;
    if (n <= 0) return;
    int slot[MAX_SLOTS];
    /* more items than slots cannot happen (OpenBLAS never uses more threads than
       MAX_THREADS); run them in rounds of slot_count if it ever did */
    for (int first = 0; first < n; first += slot_count) {
        int m = n - first < slot_count ? n - first : slot_count;
        take_slots(m, slot);
        run_slotted(dojob, m, elsize, (char *)items + (size_t)first * elsize, data, slot);
        give_slots(m, slot);
    }
}

/* Not static: the link flags name it (flags.mk's HL_LDFLAGS) so that this object is taken
   from the archive although nothing calls it. */
void hl_cpu_use_openmp_for_blas(void);
__attribute__((constructor)) void hl_cpu_use_openmp_for_blas(void) {
    slot_count = openblas_max_threads();
    scipy_openblas_set_threads_callback_function(run_items);
}
