/*
 * blas_threads.c - OpenBLAS runs its parallel work on libcore's OpenMP threads.
 *
 * Left to itself, OpenBLAS (a pthreads build) keeps its own thread pool, and libgomp's worker
 * threads keep spinning for a while after each OpenMP loop ends. When an OpenMP loop (im2col,
 * an element-wise op) is followed by a BLAS call, the two pools then fight over the same
 * cores: on a 2-core machine a convolution ran 3 to 30 times slower than the sum of its
 * parts. OpenBLAS lets the caller supply the threading (openblas_set_threads_callback_function):
 * we hand its work items to an OpenMP team, so one set of threads does everything.
 *
 * OpenBLAS's threaded level-3 routines synchronise their work items with one another, so
 * all items must run at the same time. An OpenMP team that cannot be that large (nested in a
 * parallel region, dynamic adjustment, a thread limit) is not used: the items then run on
 * plain threads created for the call.
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
} job;

static void *run_job(void *p) {
    job *j = p;
    j->dojob(j->index, j->item, j->data);
    return NULL;
}

/* Every item on its own thread (the calling thread runs item 0). */
static void run_on_pthreads(openblas_dojob_callback dojob, int n, size_t elsize, char *items,
                            int data) {
    job stack_jobs[64];
    pthread_t stack_tids[64];
    job *jobs = n <= 64 ? stack_jobs : malloc(sizeof *jobs * (size_t)n);
    pthread_t *tids = n <= 64 ? stack_tids : malloc(sizeof *tids * (size_t)n);
    bool *started = calloc((size_t)n, sizeof *started);
    if (!jobs || !tids || !started) {
        /* nothing else can be done here: run them in order (correct for OpenBLAS's level-1
           and level-2 items, which do not wait on each other) */
        for (int i = 0; i < n; i++) dojob(i, items + (size_t)i * elsize, data);
    } else {
        for (int i = 0; i < n; i++) jobs[i] = (job){dojob, i, data, items + (size_t)i * elsize};
        for (int i = 1; i < n; i++) started[i] = !pthread_create(&tids[i], NULL, run_job, &jobs[i]);
        for (int i = 1; i < n; i++)
            if (!started[i]) run_job(&jobs[i]);
        run_job(&jobs[0]);
        for (int i = 1; i < n; i++)
            if (started[i]) pthread_join(tids[i], NULL);
    }
    if (jobs != stack_jobs) free(jobs);
    if (tids != stack_tids) free(tids);
    free(started);
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
            int i = omp_get_thread_num();
            dojob(i, base + (size_t)i * elsize, data);
        }
        return;
    }
#endif
    run_on_pthreads(dojob, n, elsize, base, data);
}

__attribute__((constructor)) static void use_openmp_for_blas(void) {
    scipy_openblas_set_threads_callback_function(run_items);
}
