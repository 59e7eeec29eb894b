/*
 * thread_pool.c - see thread_pool.h.
 *
 * One job at a time. Its state is one 64-bit word, `claim`, beside the job's parameters:
 *   bits 63..40  the job's generation (24 bits of `gen`),
 *   bits 39..32  the highest worker slot that may take part,
 *   bits 31..0   the chunks not yet claimed.
 * A thread claims a chunk by decrementing the count with a compare-and-swap that also checks
 * the generation, so a worker that wakes up late, after its job has ended and perhaps after the
 * next one has begun writing its parameters, claims nothing: it sees a count of zero or another
 * generation. Once a claim succeeds the job's parameters are stable, since its caller waits for
 * that chunk before it returns. `done` counts the workers' finished chunks, each worker adding
 * its count once it claims no more; the caller waits for it to reach the chunks it did not run
 * itself, which is waiting only for chunks some thread is running.
 *
 * A job in lanes (hl_parallel_lanes) leaves `claim` at zero and hands out its chunks from one
 * word per lane instead, on a cache line of its own: bits 63..40 the generation, 39..20 the
 * next chunk from the front, 19..0 one past the last from the back. Slot s takes lane s's
 * chunks from the front; a thread whose lane is empty takes other lanes' chunks from the back,
 * so a descheduled thread still delays a job by one chunk at most.
 *
 * Workers watch `gen`. They spin on it for SPIN_NS after their last chunk (loops follow one
 * another within microseconds in a model), yielding the core now and then, and then sleep on a
 * condition variable; the caller signals it only when some worker sleeps.
 */
#define _GNU_SOURCE
#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum {
    MAX_WORKERS = 255,       /* slots fit 8 bits of the claim word */
    MAX_LANES = 64,          /* hl_parallel_lanes with more threads runs in plain chunks */
    CHUNKS_PER_THREAD = 4,   /* spare chunks let the threads that run take over the work */
    SPIN_NS = 200 * 1000,    /* how long an idle worker watches for the next job */
    OVER_SPIN_NS = 10 * 1000, /* the same with more threads than CPUs (see spin_ns) */
    YIELD_EVERY = 256,       /* spins between sched_yield()s while waiting */
};

typedef struct {
    /* the job, written by its caller before `claim` is published, read by every thread */
    hl_range_try_fn fn;
    void *ctx;
    void (*item)(int, void *);  /* a gang job's item function (fn is NULL then) */
    int64_t n, len, chunks;
    atomic_int lanes;           /* a job in lanes: their count (0: plain chunks); written
                                   before `gen`, read after it */
    atomic_int failed;
    hl_pool_region *_Atomic trace;  /* the job's record while recording (hl_pool_trace_*) */
    /* The state, each word that threads write during a job on a cache line of its own:
       workers spin on `gen`, the caller on `done`, every thread that ran chunks adds to
       `done`, and all read the job's line at each chunk; sharing lines, each add took the
       others' lines away from the threads reading them (a loop's fork and join cost ~1 us
       more at two threads). */
    _Alignas(64) _Atomic uint64_t claim;
    _Alignas(64) _Atomic uint32_t gen;
    _Alignas(64) _Atomic int64_t done;   /* chunks finished: each thread adds its count once */
    _Alignas(64) atomic_int sleepers;
    atomic_flag busy;           /* some thread runs a job */
    hl_status status;
    char message[1024];
    pthread_mutex_t lock;       /* guards the sleep and worker creation */
    pthread_cond_t wake;
    int started;                /* workers running: slots 1 .. started */
} pool_state;

static pool_state pool = {.busy = ATOMIC_FLAG_INIT,
                          .lock = PTHREAD_MUTEX_INITIALIZER,
                          .wake = PTHREAD_COND_INITIALIZER};
static atomic_int want_threads;  /* 0: not set yet */
static atomic_bool workers_held; /* tests: workers claim nothing, as if descheduled */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* A lanes job's claim words (see the top of this file), each on its own cache line. */
typedef struct {
    _Alignas(64) _Atomic uint64_t word;
} lane_claim;
static lane_claim lane_claims[MAX_LANES];

static _Thread_local int my_slot;
static _Thread_local bool in_chunk;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline uint64_t claim_word(uint32_t gen, int max_slot, int64_t left) {
    return (uint64_t)(gen & 0xffffff) << 40 | (uint64_t)max_slot << 32 | (uint64_t)left;
}

/* ---- thread count ---------------------------------------------------------------------- */

/* The CPUs this process may run on (its affinity mask), counted once. */
static int cpus_available(void) {
    static atomic_int cached;
    int n = atomic_load_explicit(&cached, memory_order_relaxed);
    if (n > 0) return n;
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    atomic_store_explicit(&cached, n, memory_order_relaxed);
    return n;
}

/* More threads than CPUs: a spinning worker then takes a core from a thread with work (the
   caller, or a worker mid-chunk), so idle workers spin only OVER_SPIN_NS (enough for a loop
   that follows at once, as a model's do) before they sleep, and waiting threads yield on
   every round: libgomp throttles its spin the same way when its team outnumbers the CPUs. */
static inline bool oversubscribed(void) { return hl_pool_threads() > cpus_available(); }

static int64_t spin_ns(void) {
    /* HL_POOL_SPIN_NS (ns) overrides both, for measurements (bench/thread_pool.py) */
    static _Atomic int64_t forced = -2;
    if (forced == -2) {
        const char *e = getenv("HL_POOL_SPIN_NS");
        forced = e && *e ? atoll(e) : -1;
    }
    if (forced >= 0) return forced;
    return oversubscribed() ? OVER_SPIN_NS : SPIN_NS;
}

int hl_pool_threads(void) {
    int n = atomic_load_explicit(&want_threads, memory_order_relaxed);
    if (n > 0) return n;
#ifdef _OPENMP
    n = omp_get_max_threads();
#else
    n = (int)sysconf(_SC_NPROCESSORS_ONLN);
#endif
    return n < 1 ? 1 : n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : n;
}

void hl_pool_set_threads(int n) {
    atomic_store(&want_threads, n < 1 ? 1 : n > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : n);
}

void hl_pool_hold_workers(bool hold) { atomic_store(&workers_held, hold); }

int hl_pool_slot(void) { return in_chunk ? my_slot : 0; }
bool hl_pool_in_chunk(void) { return in_chunk; }

/* ---- recording loops (hl_pool_trace_start) --------------------------------------------- */

/* The caller's records, the next one to hand out, and the loops still writing one: stop waits
   for them before the caller may free the records. */
static hl_pool_region *_Atomic trace_regions;
static int64_t trace_capacity;
static _Atomic int64_t trace_next, trace_writing;

hl_status hl_pool_trace_start(hl_pool_region *regions, int64_t capacity) {
    if (!regions || capacity < 1)
        return hl_fail(HL_ERR_VALUE, "pool_trace_start: expected records and a capacity >= 1, "
                       "got capacity %lld", (long long)capacity);
    hl_pool_region *none = NULL;
    if (atomic_load(&trace_regions))
        return hl_fail(HL_ERR_VALUE, "pool_trace_start: recording is on already");
    trace_capacity = capacity;
    atomic_store(&trace_next, 0);
    if (!atomic_compare_exchange_strong(&trace_regions, &none, regions))
        return hl_fail(HL_ERR_VALUE, "pool_trace_start: recording is on already");
    return HL_OK;
}

int64_t hl_pool_trace_stop(void) {
    if (!atomic_exchange(&trace_regions, NULL)) return 0;
    while (atomic_load(&trace_writing) > 0) sched_yield();
    const int64_t n = atomic_load(&trace_next);
    return n < trace_capacity ? n : trace_capacity;
}

/* The next record for a loop of n items in `chunks` chunks, or NULL (recording off, or the
   records full); a non-NULL record must be given back by trace_end. */
static hl_pool_region *trace_begin(void *fn, int64_t n, int64_t chunks, int threads) {
    if (!atomic_load_explicit(&trace_regions, memory_order_relaxed)) return NULL;
    atomic_fetch_add(&trace_writing, 1);
    hl_pool_region *regions = atomic_load(&trace_regions);
    const int64_t i = regions ? atomic_fetch_add(&trace_next, 1) : 0;
    if (!regions || i >= trace_capacity) {
        atomic_fetch_sub(&trace_writing, 1);
        return NULL;
    }
    hl_pool_region *r = &regions[i];
    memset(r, 0, sizeof *r);
    r->fn = (uint64_t)(uintptr_t)fn;
    r->items = n;
    r->chunks = chunks;
    r->threads = threads;
    r->start_ns = now_ns();
    return r;
}

static void trace_end(hl_pool_region *r, int64_t end_ns) {
    r->end_ns = end_ns;
    atomic_fetch_sub(&trace_writing, 1);
}

/* A chunk's time on its slot's counters (workers and the caller add to one record). */
static void trace_chunk(hl_pool_region *r, int64_t ns) {
    const int s = my_slot < HL_POOL_TRACE_SLOTS ? my_slot : HL_POOL_TRACE_SLOTS - 1;
    __atomic_fetch_add(&r->busy_ns[s], ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->chunks_run[s], 1, __ATOMIC_RELAXED);
}

/* ---- running chunks -------------------------------------------------------------------- */

/* Claims one chunk of generation gen for slot `slot`; its index, or -1 when none is left. */
static int64_t claim_chunk(uint32_t gen, int slot) {
    uint64_t w = atomic_load_explicit(&pool.claim, memory_order_acquire);
    for (;;) {
        if ((w >> 40) != (gen & 0xffffff) || slot > (int)(w >> 32 & 0xff)) return -1;
        uint64_t left = w & 0xffffffffu;
        if (left == 0) return -1;
        if (atomic_compare_exchange_weak_explicit(&pool.claim, &w, w - 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return pool.chunks - (int64_t)left;
    }
}

/* ---- jobs in lanes (hl_parallel_lanes) ---- */

/* Lane l of `lanes` over n items: [first, first + count), cut into lane_chunks(count) chunks
   of lane_len(count) items (the last the rest). Chunk c of the job is lane c / CHUNKS_PER_THREAD's
   chunk c % CHUNKS_PER_THREAD. */
static inline int64_t lane_first(int64_t n, int lanes, int l) { return n * l / lanes; }
static inline int64_t lane_chunks(int64_t count) {
    return count < CHUNKS_PER_THREAD ? count : CHUNKS_PER_THREAD;
}
static inline int64_t lane_len(int64_t count) {
    const int64_t c = lane_chunks(count);
    return c ? (count + c - 1) / c : 0;
}
/* The items of job chunk c (lane_chunks' numbering); false when the lane has no such chunk. */
static bool lane_chunk_items(int64_t n, int lanes, int64_t c, int64_t *begin, int64_t *end) {
    const int l = (int)(c / CHUNKS_PER_THREAD);
    const int64_t k = c % CHUNKS_PER_THREAD, first = lane_first(n, lanes, l);
    const int64_t count = lane_first(n, lanes, l + 1) - first, len = lane_len(count);
    if (k >= lane_chunks(count)) return false;
    *begin = first + k * len;
    *end = HL_MIN(first + count, *begin + len);
    return true;
}

static inline uint64_t lane_word(uint32_t gen, uint64_t front, uint64_t back) {
    return (uint64_t)(gen & 0xffffff) << 40 | front << 20 | back;
}

/* Takes one chunk of lane l for generation gen: from the front (the lane's own slot) or the
   back (another); its job chunk number, or -1 when the lane has none left. */
static int64_t claim_in_lane(uint32_t gen, int l, bool front) {
    _Atomic uint64_t *word = &lane_claims[l].word;
    uint64_t w = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        const uint64_t f = w >> 20 & 0xfffff, b = w & 0xfffff;
        if ((w >> 40) != (gen & 0xffffff) || f >= b) return -1;
        const uint64_t next = front ? lane_word(gen, f + 1, b) : lane_word(gen, f, b - 1);
        if (atomic_compare_exchange_weak_explicit(word, &w, next, memory_order_acq_rel,
                                                  memory_order_acquire))
            return (int64_t)l * CHUNKS_PER_THREAD + (int64_t)(front ? f : b - 1);
    }
}

/* The next chunk for `slot` in a lanes job: its own lane's, then the others' (the next lanes
   first). */
static int64_t claim_lane_chunk(uint32_t gen, int slot, int lanes) {
    int64_t c = slot < lanes ? claim_in_lane(gen, slot, true) : -1;
    for (int i = 1; c < 0 && i <= lanes; i++) {
        const int l = (slot + i) % lanes;
        if (l != slot) c = claim_in_lane(gen, l, false);
    }
    return c;
}

/* The next chunk of the job of generation gen for `slot`, plain or in lanes (where the claim
   word still names the job's highest slot). */
static int64_t claim_next(uint32_t gen, int slot) {
    const int lanes = atomic_load_explicit(&pool.lanes, memory_order_relaxed);
    if (!lanes) return claim_chunk(gen, slot);
    const uint64_t w = atomic_load_explicit(&pool.claim, memory_order_acquire);
    if ((w >> 40) != (gen & 0xffffff) || slot > (int)(w >> 32 & 0xff)) return -1;
    return claim_lane_chunk(gen, slot, lanes);
}

static void record_failure(hl_status st) {
    if (!atomic_exchange(&pool.failed, 1)) {
        pool.status = st;
        strncpy(pool.message, hl_last_error(), sizeof pool.message - 1);
        pool.message[sizeof pool.message - 1] = 0;
    }
}

/* Runs chunk c of the current job (or skips it once the job has failed); its thread counts
   it in `done` with the others it ran (done_by). */
static void run_chunk(int64_t c) {
    hl_pool_region *trace = atomic_load_explicit(&pool.trace, memory_order_relaxed);
    const int64_t t0 = trace ? now_ns() : 0;
    if (pool.item) {
        pool.item((int)c, pool.ctx);
    } else if (!atomic_load_explicit(&pool.failed, memory_order_relaxed)) {
        int64_t begin = c * pool.len, end = HL_MIN(pool.n, begin + pool.len);
        const int lanes = atomic_load_explicit(&pool.lanes, memory_order_relaxed);
        if (lanes) lane_chunk_items(pool.n, lanes, c, &begin, &end);
        hl_status st = pool.fn(begin, end, pool.ctx);
        if (st) record_failure(st);
    }
    if (trace) trace_chunk(trace, now_ns() - t0);
}

/* A thread's chunks of the job counted as finished, once it claims no more. */
static void done_by(int64_t ran) {
    if (ran) atomic_fetch_add_explicit(&pool.done, ran, memory_order_release);
}

/* ---- workers --------------------------------------------------------------------------- */

/* The next generation after `seen`: spin for a while, then sleep. */
static uint32_t wait_for_job(uint32_t seen, bool spin) {
    uint32_t g;
    const int64_t budget = spin ? spin_ns() : 0;
    if (budget > 0) {
        int64_t start = now_ns();
        for (unsigned i = 1;; i++) {
            g = atomic_load_explicit(&pool.gen, memory_order_acquire);
            if (g != seen) return g;
            cpu_relax();
            if (i % YIELD_EVERY == 0) {
                if (now_ns() - start > budget) break;
                sched_yield();
            }
        }
    }
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.sleepers, 1);
    while ((g = atomic_load(&pool.gen)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
    atomic_fetch_sub(&pool.sleepers, 1);
    pthread_mutex_unlock(&pool.lock);
    return g;
}

static void *worker_main(void *arg) {
    uintptr_t a = (uintptr_t)arg;
    my_slot = (int)(a & 0xff);
    uint32_t seen = (uint32_t)(a >> 8);
#ifdef _OPENMP
    omp_set_num_threads(1);  /* an OpenMP loop inside a chunk stays on this thread */
#endif
    bool active = true;
    for (;;) {
        seen = wait_for_job(seen, active);
        active = my_slot < hl_pool_threads();
        if (atomic_load_explicit(&workers_held, memory_order_relaxed)) continue;
        int64_t c, ran = 0;
        in_chunk = true;
        while ((c = claim_next(seen, my_slot)) >= 0) {
            bool gang = pool.item != NULL;
            run_chunk(c);
            ran++;
            if (gang) break;  /* one item per thread: the items wait on one another */
        }
        in_chunk = false;
        done_by(ran);
    }
    return NULL;
}

static void after_fork_in_child(void) {
    /* the child has no workers; the next job starts them again */
    pool.started = 0;
    atomic_store(&pool.sleepers, 0);
    atomic_flag_clear(&pool.busy);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

/* Starts workers up to slot `want`; the number running (may be fewer if threads cannot be
   created). Called with the pool held, before the job's generation is published. */
static int ensure_workers(int want, uint32_t gen) {
    if (pool.started >= want) return want;
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&pool.lock);
    while (pool.started < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        uintptr_t arg = (uintptr_t)gen << 8 | (uintptr_t)(pool.started + 1);
        int err = pthread_create(&tid, &attr, worker_main, (void *)arg);
        pthread_attr_destroy(&attr);
        if (err) break;
        pool.started++;
    }
    int have = pool.started;
    pthread_mutex_unlock(&pool.lock);
    return have < want ? have : want;
}

/* Publishes a job of `chunks` chunks for slots 1 .. workers, runs chunks on the caller (all
   of them it can claim, or only item 0 of a gang), and waits for the rest to finish. */
static void run_job(int workers, int64_t chunks, bool gang, int lanes) {
    uint32_t gen = atomic_load_explicit(&pool.gen, memory_order_relaxed) + 1;
    pool.chunks = chunks;
    atomic_store_explicit(&pool.lanes, lanes, memory_order_relaxed);
    atomic_store_explicit(&pool.failed, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    for (int l = 0; l < lanes; l++) {
        const int64_t count = lane_first(pool.n, lanes, l + 1) - lane_first(pool.n, lanes, l);
        atomic_store_explicit(&lane_claims[l].word, lane_word(gen, 0, (uint64_t)lane_chunks(count)),
                              memory_order_release);
    }
    /* a gang's item 0 is the caller's; the claims hand out 1 .. chunks - 1 (none: lanes) */
    atomic_store_explicit(&pool.claim,
                          claim_word(gen, workers, lanes ? 0 : gang ? chunks - 1 : chunks),
                          memory_order_release);
    atomic_store(&pool.gen, gen);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    my_slot = 0;
    in_chunk = true;
    int64_t mine = 0;   /* the caller's chunks: it waits for the others' */
    if (gang) {
        run_chunk(0);
        mine = 1;
    } else {
        int64_t c;
        while ((c = lanes ? claim_lane_chunk(gen, 0, lanes) : claim_chunk(gen, 0)) >= 0) {
            run_chunk(c);
            mine++;
        }
    }
    in_chunk = false;
    /* a worker mid-chunk may need this core: yield now and then, or at once when the threads
       outnumber the CPUs */
    const unsigned yield_every = oversubscribed() ? 1 : YIELD_EVERY;
    for (unsigned i = 1; atomic_load_explicit(&pool.done, memory_order_acquire) < chunks - mine;
         i++) {
        cpu_relax();
        if (i % yield_every == 0) sched_yield();
    }
}

/* The chunk length for n items: at least grain, at most CHUNKS_PER_THREAD chunks a thread. */
static int64_t chunk_len(int64_t n, int64_t grain, int threads) {
    if (grain < 1) grain = 1;
    int64_t most = (int64_t)threads * CHUNKS_PER_THREAD;
    int64_t len = (n + most - 1) / most;
    return len < grain ? grain : len;
}

/* A loop run inline on its caller, as slot 0 of that loop (its per-thread buffers are its
   own), then back to the enclosing chunk's slot; recorded unless nested. */
typedef struct {
    bool was_in_chunk;
    int was_slot;
    hl_pool_region *trace;
} inline_scope;

static inline_scope inline_begin(void *fn, int64_t n, int64_t chunks) {
    inline_scope s = {in_chunk, my_slot, NULL};
    in_chunk = true;
    my_slot = 0;
    if (!s.was_in_chunk) s.trace = trace_begin(fn, n, chunks, 1);
    return s;
}

static void inline_end(inline_scope s) {
    if (s.trace) {   /* one thread ran every chunk: busy all along */
        const int64_t end = now_ns();
        s.trace->busy_ns[0] = end - s.trace->start_ns;
        s.trace->chunks_run[0] = (int32_t)s.trace->chunks;
        trace_end(s.trace, end);
    }
    in_chunk = s.was_in_chunk;
    my_slot = s.was_slot;
}

/* hl_parallel_for's loop as a hl_parallel_try one (run_plain, below). */
typedef struct {
    hl_range_fn fn;
    void *ctx;
} plain_range;
static hl_status run_plain(int64_t begin, int64_t end, void *ctx);

/* The function a record names: the caller's, not the wrapper hl_parallel_for puts around it. */
static void *trace_fn(hl_range_try_fn fn, void *ctx) {
    return fn == run_plain ? (void *)((const plain_range *)ctx)->fn : (void *)fn;
}

/* Whether a loop of `chunks` chunks goes to the pool, which it then holds; else it runs inline
   on its caller (one chunk or one thread, nested in a chunk or an OpenMP region, or another
   thread's job holding the pool: this one runs here, in the same chunks). */
static bool takes_pool(int64_t chunks, int threads) {
    bool inline_run = chunks < 2 || threads < 2 || in_chunk;
#ifdef _OPENMP
    inline_run = inline_run || omp_in_parallel();
#endif
    return !inline_run && !atomic_flag_test_and_set_explicit(&pool.busy, memory_order_acquire);
}

/* Runs fn over n items on the pool that takes_pool gave this caller, in `lanes` lanes or (0)
   in plain chunks of len, records it, gives the pool back; the first failure's status. */
static hl_status run_on_pool(hl_range_try_fn fn, void *ctx, int64_t n, int64_t len,
                             int64_t chunks, int threads, int lanes) {
    const int workers = ensure_workers(threads - 1, atomic_load(&pool.gen));
    pool.fn = fn;
    pool.ctx = ctx;
    pool.item = NULL;
    pool.n = n;
    pool.len = len;
    hl_pool_region *trace = trace_begin(trace_fn(fn, ctx), n, chunks, workers + 1);
    atomic_store_explicit(&pool.trace, trace, memory_order_relaxed);
    run_job(workers, chunks, false, lanes);
    atomic_store_explicit(&pool.trace, NULL, memory_order_relaxed);
    if (trace) trace_end(trace, now_ns());
    hl_status st = atomic_load(&pool.failed) ? pool.status : HL_OK;
    if (st) hl_fail(st, "%s", pool.message);
    atomic_flag_clear_explicit(&pool.busy, memory_order_release);
    return st;
}

hl_status hl_parallel_try(int64_t n, int64_t grain, hl_range_try_fn fn, void *ctx) {
    if (n <= 0) return HL_OK;
    const int threads = hl_pool_threads();
    const int64_t len = chunk_len(n, grain, threads), chunks = (n + len - 1) / len;
    if (takes_pool(chunks, threads)) return run_on_pool(fn, ctx, n, len, chunks, threads, 0);
    inline_scope scope = inline_begin(trace_fn(fn, ctx), n, chunks);
    hl_status st = HL_OK;
    for (int64_t b = 0; b < n && !st; b += len) st = fn(b, HL_MIN(n, b + len), ctx);
    inline_end(scope);
    return st;
}

static hl_status run_plain(int64_t begin, int64_t end, void *ctx) {
    const plain_range *p = ctx;
    p->fn(begin, end, p->ctx);
    return HL_OK;
}

void hl_parallel_for(int64_t n, int64_t grain, hl_range_fn fn, void *ctx) {
    plain_range p = {fn, ctx};
    hl_parallel_try(n, grain, run_plain, &p);
}

void hl_parallel_lanes(int64_t n, hl_range_fn fn, void *ctx) {
    if (n <= 0) return;
    const int threads = hl_pool_threads();
    if (threads > MAX_LANES) {
        hl_parallel_for(n, 1, fn, ctx);
        return;
    }
    int64_t chunks = 0;
    for (int l = 0; l < threads; l++)
        chunks += lane_chunks(lane_first(n, threads, l + 1) - lane_first(n, threads, l));
    if (takes_pool(chunks, threads)) {
        plain_range p = {fn, ctx};
        run_on_pool(run_plain, &p, n, 0, chunks, threads, threads);
        return;
    }
    inline_scope scope = inline_begin((void *)fn, n, chunks);   /* lane after lane */
    for (int64_t c = 0; c < (int64_t)threads * CHUNKS_PER_THREAD; c++) {
        int64_t begin, end;
        if (lane_chunk_items(n, threads, c, &begin, &end)) fn(begin, end, ctx);
    }
    inline_end(scope);
}

bool hl_pool_gang(int n, void (*item)(int i, void *ctx), void *ctx) {
    if (n < 1 || n > hl_pool_threads() || in_chunk) return false;
#ifdef _OPENMP
    if (omp_in_parallel()) return false;
#endif
    if (n == 1) {
        item(0, ctx);
        return true;
    }
    if (atomic_flag_test_and_set_explicit(&pool.busy, memory_order_acquire)) return false;
    if (ensure_workers(n - 1, atomic_load(&pool.gen)) < n - 1) {
        atomic_flag_clear_explicit(&pool.busy, memory_order_release);
        return false;
    }
    pool.fn = NULL;
    pool.item = item;
    pool.ctx = ctx;
    hl_pool_region *trace = trace_begin((void *)item, n, n, n);
    atomic_store_explicit(&pool.trace, trace, memory_order_relaxed);
    run_job(n - 1, n, true, 0);
    atomic_store_explicit(&pool.trace, NULL, memory_order_relaxed);
    if (trace) trace_end(trace, now_ns());
    atomic_flag_clear_explicit(&pool.busy, memory_order_release);
    return true;
}
