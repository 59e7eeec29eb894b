/*
 * alloc.c - the caching allocator behind every storage.
 *
 * Blocks are rounded up to a size class (four classes per power of two, so at most 25% slack)
 * and, when freed, kept on that class's free list for the next request of the same class.
 * Each device has its own lists; the backend's raw_alloc/raw_free do the real work, so the
 * CUDA backend reuses this file unchanged. The CPU cache is capped (HL_CPU_CACHE_MB, default
 * 2048 MB); the sanitizer build (HL_NO_CACHE) bypasses the cache so that AddressSanitizer sees
 * every use after free.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core.h"

enum { NUM_CLASSES = 256, MAX_DEVICES = 17 };

/* A cached block stays attached to the storage record that last owned it (linked through
   next_free), so a cache hit reuses record and memory without calling malloc. */
typedef hl_storage free_block;

typedef struct {
    pthread_mutex_t lock;
    free_block *lists[NUM_CLASSES];
    int64_t in_use, cached, peak, cache_limit;
} device_pool;

static device_pool pools[MAX_DEVICES];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;

static void pools_init(void) {
    int64_t limit_mb = 2048;
    const char *env = getenv("HL_CPU_CACHE_MB");
    if (env) limit_mb = atoll(env);
    for (int i = 0; i < MAX_DEVICES; i++) {
        pthread_mutex_init(&pools[i].lock, NULL);
        pools[i].cache_limit = i == 0 ? limit_mb << 20 : INT64_MAX;
    }
}

static device_pool *pool_for(hl_device d) {
    pthread_once(&pools_once, pools_init);
    int slot = d.kind == HL_DEVICE_CPU ? 0 : d.kind == HL_DEVICE_CUDA ? 1 + d.index : -1;
    if (slot < 0 || slot >= MAX_DEVICES) return NULL;
    return &pools[slot];
}

/* The size class of n bytes and the block size it stands for. */
static int size_class(size_t n, size_t *block) {
    if (n <= 64) { *block = 64; return 0; }
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
    size_t base = (size_t)1 << e, quarter = base >> 2;
    size_t steps = (n - base + quarter - 1) / quarter;           /* 1..4 */
    *block = base + steps * quarter;
    int cls = (e - 6) * 4 + (int)steps;
    return cls < NUM_CLASSES ? cls : -1;
}

/* A storage record without bytes, for a backend without memory (meta). */
static hl_status storage_without_memory(hl_device device, size_t nbytes, hl_storage **out) {
    hl_storage *s = calloc(1, sizeof *s);
    if (!s) return hl_fail(HL_ERR_MEMORY, "out of host memory for a storage record");
    s->nbytes = s->block_bytes = nbytes;
    s->device = device;
    s->refcount = 1;
    *out = s;
    return HL_OK;
}

/* exact: the block is nbytes rounded up to 64, taken from the device, not from the cache (a
   plan's arena: made once, as large as the plan needs; a size class would add up to 25%). */
static hl_status storage_new(hl_device device, size_t nbytes, bool exact, hl_storage **out) {
    const hl_backend *be = hl_backend_for(device);
    if (be && !be->has_memory) return storage_without_memory(device, nbytes, out);
    device_pool *pool = pool_for(device);
    if (!be || !pool) {
        const char *why = device.kind >= 0 && device.kind < HL_DEVICE_KINDS
                              ? hl_backend_unavailable_reason(device.kind) : "";
        return hl_fail(HL_ERR_DEVICE, "device %s is not available: %s", hl_device_str(device),
                       why[0] ? why : "this build has no backend for it, or that device is "
                       "absent");
    }
    size_t block = 0;
    int cls = exact ? -1 : size_class(nbytes ? nbytes : 1, &block);
    if (cls < 0) block = exact ? (nbytes + 63) / 64 * 64 : nbytes;
    hl_storage *s = NULL;
#ifndef HL_NO_CACHE
    if (cls >= 0) {
        pthread_mutex_lock(&pool->lock);
        s = pool->lists[cls];
        if (s) {
            pool->lists[cls] = s->next_free;
            pool->cached -= (int64_t)block;
        }
        pthread_mutex_unlock(&pool->lock);
    }
#endif
    if (!s) {
        s = malloc(sizeof *s);
        if (!s) return hl_fail(HL_ERR_MEMORY, "out of host memory for a storage record");
        s->data = be->raw_alloc(block, device.index);
        if (!s->data) {
            hl_memory_empty_cache(device);  /* free what the cache holds, then try once more */
            s->data = be->raw_alloc(block, device.index);
        }
        if (!s->data) {
            free(s);
            return hl_fail(HL_ERR_MEMORY, "out of memory allocating %zu bytes on %s", nbytes,
                           be->name);
        }
    }
    pthread_mutex_lock(&pool->lock);
    pool->in_use += (int64_t)block;
    if (pool->in_use > pool->peak) pool->peak = pool->in_use;
    pthread_mutex_unlock(&pool->lock);
    s->nbytes = nbytes;
    s->block_bytes = block;
    s->device = device;
    s->refcount = 1;
    s->next_free = NULL;
    s->written_by = 0;
    s->arena_owner = NULL;
    s->borrowed = false;
    s->plain_pages = false;
    *out = s;
    return HL_OK;
}

hl_status hl_storage_borrow(void *data, size_t nbytes, hl_storage **out) {
    hl_storage *s = calloc(1, sizeof *s);
    if (!s) return hl_fail(HL_ERR_MEMORY, "out of host memory for a storage record");
    s->data = data;
    s->nbytes = nbytes;
    s->device = (hl_device){HL_DEVICE_CPU, 0};
    s->refcount = 1;
    s->borrowed = true;
    *out = s;
    return HL_OK;
}

hl_status hl_storage_new(hl_device device, size_t nbytes, hl_storage **out) {
    return storage_new(device, nbytes, false, out);
}

hl_status hl_storage_new_exact(hl_device device, size_t nbytes, hl_storage **out) {
    return storage_new(device, nbytes, true, out);
}

static void give_back_block(hl_storage *s);

void hl_storage_release(hl_storage *s) {
    if (!s || __atomic_sub_fetch(&s->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (!s->data && s->device.kind == HL_DEVICE_META) {  /* nothing was allocated */
        free(s);
        return;
    }
    if (s->borrowed) {  /* its bytes are the caller's */
        free(s);
        return;
    }
    if (s->arena_owner) {  /* its bytes belong to a plan's arena */
        hl_storage *arena = s->arena_owner;
        free(s);
        hl_storage_release(arena);
        return;
    }
    give_back_block(s);
}

/* Returns s's block to its device's cache (or frees it) and, when it is not cached, the
   record s itself. */
static void give_back_block(hl_storage *s) {
    device_pool *pool = pool_for(s->device);
    size_t block = 0;
    int cls = size_class(s->nbytes ? s->nbytes : 1, &block);
    (void)cls;  /* unused when HL_NO_CACHE turns the cache off */
    bool kept = false;
    pthread_mutex_lock(&pool->lock);
    pool->in_use -= (int64_t)s->block_bytes;
#ifndef HL_NO_CACHE
    if (cls >= 0 && block == s->block_bytes && !s->plain_pages &&
        pool->cached + (int64_t)block <= pool->cache_limit) {
        s->next_free = pool->lists[cls];
        pool->lists[cls] = s;
        pool->cached += (int64_t)block;
        kept = true;
    }
#endif
    pthread_mutex_unlock(&pool->lock);
    if (!kept) {
        hl_backend_for(s->device)->raw_free(s->data, s->device.index);
        free(s);
    }
}

/* The block is freed, not cached: it held an intermediate of a recorded step, whose bytes are
   the plan's arena from now on, and the cache would keep a second copy of the step's memory
   resident (a ResNet-18 step: hundreds of MB) for sizes that are not asked for again. */
void hl_storage_move_to_arena(hl_storage *s, hl_storage *arena, size_t offset) {
    device_pool *pool = pool_for(s->device);
    pthread_mutex_lock(&pool->lock);
    pool->in_use -= (int64_t)s->block_bytes;
    pthread_mutex_unlock(&pool->lock);
    hl_backend_for(s->device)->raw_free(s->data, s->device.index);
    __atomic_add_fetch(&arena->refcount, 1, __ATOMIC_RELAXED);
    s->arena_owner = arena;
    s->data = (char *)arena->data + offset;
    s->block_bytes = 0;
}

hl_status hl_memory_reset_peak(hl_device device) {
    const hl_backend *be = hl_backend_for(device);
    if (be && !be->has_memory) return HL_OK;
    device_pool *pool = pool_for(device);
    if (!pool || !be) return hl_fail(HL_ERR_DEVICE, "reset_peak: no backend serves that device");
    pthread_mutex_lock(&pool->lock);
    pool->peak = pool->in_use;
    pthread_mutex_unlock(&pool->lock);
    return HL_OK;
}

hl_status hl_memory_stats(hl_device device, int64_t *in_use, int64_t *cached, int64_t *peak) {
    const hl_backend *be = hl_backend_for(device);
    if (be && !be->has_memory) {  /* meta: no memory is ever in use */
        if (in_use) *in_use = 0;
        if (cached) *cached = 0;
        if (peak) *peak = 0;
        return HL_OK;
    }
    device_pool *pool = pool_for(device);
    if (!pool || !hl_backend_for(device))
        return hl_fail(HL_ERR_DEVICE, "memory_stats: no backend serves that device");
    pthread_mutex_lock(&pool->lock);
    if (in_use) *in_use = pool->in_use;
    if (cached) *cached = pool->cached;
    if (peak) *peak = pool->peak;
    pthread_mutex_unlock(&pool->lock);
    return HL_OK;
}

hl_status hl_memory_empty_cache(hl_device device) {
    const hl_backend *be = hl_backend_for(device);
    if (be && !be->has_memory) return HL_OK;
    device_pool *pool = pool_for(device);
    if (!pool || !be) return hl_fail(HL_ERR_DEVICE, "empty_cache: no backend serves that device");
    pthread_mutex_lock(&pool->lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        free_block *fb = pool->lists[c];
        while (fb) {
            free_block *next = fb->next_free;
            be->raw_free(fb->data, device.index);
            free(fb);
            fb = next;
        }
        pool->lists[c] = NULL;
    }
    pool->cached = 0;
    pthread_mutex_unlock(&pool->lock);
    return HL_OK;
}
