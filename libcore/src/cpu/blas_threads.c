/*
 * blas_threads.c - OpenBLAS runs its parallel work on libcore's OpenMP threads.
 *
 * Left to itself, OpenBLAS (a pthreads build) keeps its own pool of threads, while libgomp's
 * threads keep spinning for a while after each OpenMP loop ends. When an OpenMP loop (im2col,
 * an element-wise op) is followed by a BLAS call, the two pools fight over the same cores: on
 * a 2-core machine a convolution ran 3 to 30 times slower than the sum of its parts. OpenBLAS
 * lets the caller supply the threading (openblas_set_threads_callback_function): its work
 * items go to an OpenMP team, so one set of threads does everything.
 *
 * OpenBLAS's threaded level-3 routines make their work items wait on one another, so all
 * items must run at the same time. Where an OpenMP team of that size is not to be had (a
 * call from inside a parallel region, dynamic thread adjustment, a thread limit, a smaller
 * team than asked for), the missing items run on plain threads started for the call.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cblas.h>

typedef struct {
    openblas_dojob_callback dojob;
    int index, data;
    void *item;
    pthread_t tid;
    bool started;
} job;

static void *run_job(void *p) {
    job *j = p;
    j->dojob(j->index, j->item, j->data);
    return NULL;
}

/* Starts items first .. n - 1 on threads of their own; an item whose thread cannot be
   started runs here and now (correct for the items that do not wait on others). */
static job *start_items(openblas_dojob_callback dojob, int first, int n, size_t elsize,
                        char *items, int data) {
    int count = n - first;
    job *jobs = calloc((size_t)(count > 0 ? count : 1), sizeof *jobs);
    for (int k = 0; k < count; k++) {
        job j = {.dojob = dojob, .index = first + k, .data = data,
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

static void run_items(int sync, openblas_dojob_callback dojob, int n, size_t elsize,
                      void *items, int data) {
    (void)sync;
    char *base = items;
    if (n <= 1) {
        if (n == 1) dojob(0, base, data);
        return;
    }
#ifdef _OPENMP
    if (!omp_in_parallel() && !omp_get_dynamic() && n <= omp_get_thread_limit()) {
#pragma omp parallel num_threads(n)
        {
            int i = omp_get_thread_num(), team = omp_get_num_threads();
            job *extra = NULL;
            if (i == 0 && team < n) extra = start_items(dojob, team, n, elsize, base, data);
            dojob(i, base + (size_t)i * elsize, data);
            if (i == 0 && team < n) join_items(extra, n - team);
        }
        return;
    }
#endif
    job *extra = start_items(dojob, 1, n, elsize, base, data);
    dojob(0, base, data);
    join_items(extra, n - 1);
}

/* Not static: the link flags name it (flags.mk's HL_LDFLAGS) so that this object is taken
   from the archive although nothing calls it. */
void hl_cpu_use_openmp_for_blas(void);
__attribute__((constructor)) void hl_cpu_use_openmp_for_blas(void) {
    scipy_openblas_set_threads_callback_function(run_items);
}
