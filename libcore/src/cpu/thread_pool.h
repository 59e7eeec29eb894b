/*
 * thread_pool.h - libcore's own pool of CPU threads, in which the calling thread takes
 * whatever work nobody has claimed yet.
 *
 * An OpenMP parallel region splits its loop between a fixed team and ends in a barrier: when
 * the host deschedules one thread of the team (another process on the other core), every
 * region waits a scheduler time slice for it, and a model runs hundreds of regions (MobileNetV2
 * at batch 1 took 1,300-3,000 ms with two threads against 200 ms with one, load ~19). Here a
 * loop is cut into chunks that the caller and the pool's workers claim one at a time from a
 * shared counter; the caller runs chunks until none is left unclaimed and then waits only for
 * chunks already running on a worker. A worker that has not woken up yet simply finds nothing
 * left to do. Idle workers spin for a short while (the next loop usually follows within
 * microseconds) and then sleep, so an idle hl uses no CPU.
 *
 * Rules:
 * - The thread count is hl_set_num_threads()'s (the caller plus count - 1 workers).
 * - A loop started inside a chunk (nested), inside an OpenMP region, or while another thread
 *   has the pool (a second Python thread) runs inline on the calling thread, chunk by chunk
 *   over the same boundaries: the answers never depend on who ran a chunk.
 * - Chunk boundaries depend only on n, grain and the thread count. A kernel whose chunks
 *   write disjoint outputs gets bitwise the same results as from any other split.
 * - Inside a chunk, hl_pool_slot() names the running thread among the loop's (0 = the caller,
 *   1.. = workers, always below hl_pool_threads(); 0 throughout a loop run inline): a loop's
 *   per-thread scratch is indexed by it.
 * - After fork() the child starts a fresh pool at its first loop.
 * - hl_pool_trace_start (hl_core.h) records each loop started outside a chunk: its time and
 *   each slot's busy time (bench/pool_profile.py); off, a loop pays one load for it.
 */
#ifndef HL_CPU_THREAD_POOL_H
#define HL_CPU_THREAD_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "../core.h"

/* One chunk: items [begin, end) of the loop. */
typedef void (*hl_range_fn)(int64_t begin, int64_t end, void *ctx);
/* The same, for work that can fail: a non-HL_OK status (with its hl_fail message) stops the
   loop (chunks not yet started are skipped) and is returned to the caller with the message. */
typedef hl_status (*hl_range_try_fn)(int64_t begin, int64_t end, void *ctx);

/* Runs fn over [0, n) in chunks of at least `grain` items (grain >= 1). */
void hl_parallel_for(int64_t n, int64_t grain, hl_range_fn fn, void *ctx);
hl_status hl_parallel_try(int64_t n, int64_t grain, hl_range_try_fn fn, void *ctx);

/* Runs fn over [0, n) in lanes: lane l of the thread count T holds items [l n / T,
   (l + 1) n / T), cut into up to 4 chunks. Thread slot l runs its own lane's chunks first, in
   order, then takes chunks left at the back of the others'. Successive loops cut alike (the
   same n, or n in the same proportion to the data: channels in panels of 6, in groups of
   16, in steps of K) then mostly give each thread the data it wrote itself in the loop
   before, in its own core's cache, where plain chunks go to whichever thread comes first
   (MobileNetV2's 14x14 layers: docs/design-notes.md). Chunk boundaries depend only on n and
   the thread count; who runs a chunk never changes a result. */
void hl_parallel_lanes(int64_t n, hl_range_fn fn, void *ctx);

/* Runs items 0 .. n-1 each on its own thread at the same time (OpenBLAS's work items, which
   wait on one another): item 0 on the caller, the rest on n - 1 workers. Returns false,
   having run nothing, when that many workers are not to be had (nested, the pool busy, n
   above the thread count); the caller then runs them some other way. */
bool hl_pool_gang(int n, void (*item)(int i, void *ctx), void *ctx);

/* The thread count loops use (hl_set_num_threads; before that, the CPUs this process may run
   on as OpenMP counts them). */
int hl_pool_threads(void);
void hl_pool_set_threads(int n);

/* Inside a chunk: this thread's slot (0 .. thread count - 1); outside: 0. */
int hl_pool_slot(void);
/* Inside a chunk (nested loops run inline). */
bool hl_pool_in_chunk(void);

/* Tests only (hl_pool_probe): while held, workers wake but claim nothing, as if the host had
   descheduled them. */
void hl_pool_hold_workers(bool hold);

#endif
