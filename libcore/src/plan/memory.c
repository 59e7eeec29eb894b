/*
 * plan/memory.c - planned memory: before a plan's first replay, every storage that only the
 * plan holds and whose first use in the plan overwrites it whole (an intermediate) gets bytes
 * in one arena per device kind (allocated at its exact size, not a size class of the caching
 * allocator), at offsets chosen so that tensors whose lifetimes do not overlap share memory:
 * each block in the best-fitting gap left by the placed blocks whose lifetimes overlap its own,
 * taken greedily in a few orders (by size: TFLite's and onnxruntime's memory pattern; by
 * lifetime; by size times lifetime), then a local search over the best order until the arena
 * is down to the floor, the most bytes alive at one call. An element-wise call whose input dies
 * at that call writes its output over the input (same size and layout). Everything the caller still holds (outputs, parameters,
 * optimiser slots, input slots, constants written before recording) keeps its own storage.
 *
 * "Only the plan holds it" is read from reference counts: a storage qualifies when every
 * tensor struct viewing it is referenced only by the plan's records and the storage is
 * referenced only by those structs. Nothing outside the plan can reach such a storage later.
 */
#include <stdlib.h>

#include "plan.h"

enum { ALIGN = 64 };

/* ---- a pointer -> index map (open addressing, linear probing) ---- */

typedef struct { const void *key; int64_t val; } map_slot;
typedef struct { map_slot *tab; int64_t mask; } ptr_map;

static bool map_init(ptr_map *m, int64_t n) {
    int64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    m->tab = calloc((size_t)cap, sizeof *m->tab);
    m->mask = cap - 1;
    return m->tab != NULL;
}

/* The value of key, or -1 after inserting it with value -1 (the caller sets it). */
static int64_t *map_at(ptr_map *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    for (int64_t i = (int64_t)(h >> 20) & m->mask;; i = (i + 1) & m->mask) {
        if (m->tab[i].key == key) return &m->tab[i].val;
        if (!m->tab[i].key) {
            m->tab[i].key = key;
            m->tab[i].val = -1;
            return &m->tab[i].val;
        }
    }
}

/* The value of key, or -1 when it is absent (nothing is inserted). */
static int64_t map_find(const ptr_map *m, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    for (int64_t i = (int64_t)(h >> 20) & m->mask;; i = (i + 1) & m->mask) {
        if (m->tab[i].key == key) return m->tab[i].val;
        if (!m->tab[i].key) return -1;
    }
}

/* ---- what the plan knows of each storage ---- */

typedef struct {
    hl_storage *s;
    int64_t first, last;   /* times of first and last use (see call_span) */
    int64_t first_call, last_call; /* the same, a sliced run's calls at their own times */
    int n_structs;         /* distinct tensor structs of the plan viewing it */
    bool only_plan;        /* every one of them is referenced by the plan alone */
    bool written_whole_first;
    bool planned, handed_on; /* handed_on: its bytes went to an in-place output */
    bool slice_local;      /* only a sliced run's calls use it: one slice's bytes (slice.c) */
    int64_t size, offset;
} store_info;

typedef struct { int64_t refs, store; } tensor_info;

/* Calls of a fused group run at once: they all happen at the group's first call. */
static int64_t call_time(const hl_plan *p, int64_t i) {
    return p->group_of && p->group_of[i] >= 0 ? hl_plan_group_start(p, p->group_of[i]) : i;
}

/* When call i's tensors are in use: at its time, or over the whole of its sliced run (every
   call of the run runs again for each slice of the batch, slice.c). */
static void call_span(const hl_plan *p, int64_t i, int64_t *from, int64_t *to) {
    if (p->slice_of && p->slice_of[i] >= 0) {
        *from = p->slice_runs[p->slice_of[i]].first;
        *to = p->slice_runs[p->slice_of[i]].last;
    } else {
        *from = *to = call_time(p, i);
    }
}

/* ---- placement: greedy by size ---- */

/* A block: storages that share bytes because each writes over the one before in place. */
typedef struct {
    int64_t first, last, size, offset;
    int kind;        /* device kind: blocks of other kinds never meet */
    int64_t call;    /* a call's kernel scratch: that call; storages: -1 */
} block;

/* Orders in which the greedy placement may take the blocks (ties: earlier first). Greedy by
   size (TFLite's and onnxruntime's choice) is best when a few large blocks dominate; long-lived
   blocks first, or size times lifetime first, pack better when the large blocks are short-lived
   kernel scratch next to long-lived activations (a training step). Each is tried, the smallest
   arena kept. */
static int64_t span(const block *b) { return b->last - b->first + 1; }

static int tie(const block *x, const block *y) {
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int by_size_desc(const void *a, const void *b) {
    return tie(*(const block *const *)a, *(const block *const *)b);
}

static int by_span_desc(const void *a, const void *b) {
    const block *x = *(const block *const *)a, *y = *(const block *const *)b;
    if (span(x) != span(y)) return span(x) < span(y) ? 1 : -1;
    return tie(x, y);
}

static int by_area_desc(const void *a, const void *b) {
    const block *x = *(const block *const *)a, *y = *(const block *const *)b;
    double ax = (double)x->size * (double)span(x), ay = (double)y->size * (double)span(y);
    if (ax != ay) return ax < ay ? 1 : -1;
    return tie(x, y);
}

static int by_offset(const void *a, const void *b) {
    const block *x = *(const block *const *)a, *y = *(const block *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Blocks taken in this order, each at the best-fitting gap among the placed blocks whose
   lifetimes overlap its own. Sets each block's offset; returns the bytes of all kinds' tops. */
static int64_t place_in_order(block **order, block **near, int64_t n, int64_t *top) {
    for (int d = 0; d < HL_DEVICE_KINDS; d++) top[d] = 0;
    for (int64_t k = 0; k < n; k++) {
        block *b = order[k];
        int64_t m = 0;
        for (int64_t j = 0; j < k; j++) {
            block *o = order[j];
            if (o->kind == b->kind && o->first <= b->last && b->first <= o->last) near[m++] = o;
        }
        qsort(near, (size_t)m, sizeof *near, by_offset);
        int64_t at = 0, best = -1, best_gap = INT64_MAX;
        for (int64_t j = 0; j < m; j++) {
            int64_t gap = near[j]->offset - at;
            if (gap >= b->size && gap < best_gap) { best = at; best_gap = gap; }
            at = HL_MAX(at, near[j]->offset + near[j]->size);
        }
        b->offset = best >= 0 ? best : at;
        top[b->kind] = HL_MAX(top[b->kind], b->offset + b->size);
    }
    int64_t total = 0;
    for (int d = 0; d < HL_DEVICE_KINDS; d++) total += top[d];
    return total;
}

/* The most bytes of each kind alive at one time, summed over kinds: no placement needs less. */
static int64_t floor_bytes(const block *blocks, int64_t n, int64_t times) {
    int64_t *alive = calloc((size_t)(times + 2) * HL_DEVICE_KINDS, sizeof *alive);
    if (!alive) return 0;
    for (int64_t b = 0; b < n; b++) {
        alive[blocks[b].kind * (times + 2) + blocks[b].first] += blocks[b].size;
        alive[blocks[b].kind * (times + 2) + blocks[b].last + 1] -= blocks[b].size;
    }
    int64_t total = 0;
    for (int d = 0; d < HL_DEVICE_KINDS; d++) {
        int64_t sum = 0, most = 0;
        for (int64_t t = 0; t <= times; t++) {
            sum += alive[d * (times + 2) + t];
            most = HL_MAX(most, sum);
        }
        total += most;
    }
    free(alive);
    return total;
}

/* Work allowed to the search below, in block-pair visits (a few tenths of a second): it
   runs once per plan, before its second replay. */
enum { SEARCH_PAIR_BUDGET = 30000000, SEARCH_MOST_TRIES = 4000 };

/* The placement needing the fewest bytes: the greedy orders above, then a local search that
   swaps a few blocks of the best order so far (a fixed-seed xorshift, so a plan places its
   tensors the same way every time) and keeps any order that needs no more bytes, until the
   floor (the most bytes alive at one time) is reached or the tries run out. On the CNN of
   bench/graph_memory.py the greedy orders leave the arena 20% above the floor; a few hundred
   tries reach it. Returns each kind's top, or false when out of memory. */
static bool place_blocks(block *blocks, int64_t n, int64_t times, int64_t *top) {
    static int (*const orders[])(const void *, const void *) = {by_size_desc, by_span_desc,
                                                                by_area_desc};
    block **order = malloc(sizeof *order * (n + 1)), **near = malloc(sizeof *near * (n + 1));
    block **best = malloc(sizeof *best * (n + 1));
    int64_t *offsets = malloc(sizeof *offsets * (n + 1));
    if (!order || !near || !best || !offsets) {
        free(order); free(near); free(best); free(offsets);
        return false;
    }
    int64_t best_total = INT64_MAX, best_top[HL_DEVICE_KINDS] = {0}, t[HL_DEVICE_KINDS];
    for (size_t o = 0; o < sizeof orders / sizeof *orders; o++) {
        for (int64_t k = 0; k < n; k++) order[k] = &blocks[k];
        qsort(order, (size_t)n, sizeof *order, orders[o]);
        int64_t total = place_in_order(order, near, n, t);
        if (total < best_total) {
            best_total = total;
            memcpy(best_top, t, sizeof t);
            memcpy(best, order, sizeof *order * n);
            for (int64_t k = 0; k < n; k++) offsets[k] = blocks[k].offset;
        }
    }
    int64_t floor = floor_bytes(blocks, n, times);
    int64_t tries = n > 1 ? HL_MIN(SEARCH_MOST_TRIES, SEARCH_PAIR_BUDGET / (n * n)) : 0;
    uint64_t rng = 0x2545F4914F6CDD1Dull;
    for (int64_t i = 0; i < tries && best_total > floor; i++) {
        memcpy(order, best, sizeof *order * n);
        int swaps = 1 + (int)(i % 3);
        for (int w = 0; w < swaps; w++) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            int64_t a = (int64_t)(rng % (uint64_t)n), b = (int64_t)((rng >> 32) % (uint64_t)n);
            block *x = order[a]; order[a] = order[b]; order[b] = x;
        }
        int64_t total = place_in_order(order, near, n, t);
        if (total <= best_total) {
            best_total = total;
            memcpy(best_top, t, sizeof t);
            memcpy(best, order, sizeof *order * n);
            for (int64_t k = 0; k < n; k++) offsets[k] = blocks[k].offset;
        }
    }
    for (int64_t k = 0; k < n; k++) blocks[k].offset = offsets[k];
    for (int d = 0; d < HL_DEVICE_KINDS; d++) top[d] = HL_MAX(top[d], best_top[d]);
    free(order); free(near); free(best); free(offsets);
    return true;
}

/* ---- the analysis ---- */

typedef struct {
    ptr_map tensors, stores;
    tensor_info *t;
    store_info *s;
    const hl_tensor **t_ptr;
    int64_t nt, ns;
    int64_t top[HL_DEVICE_KINDS];       /* bytes of each kind's arena */
    int arena_index[HL_DEVICE_KINDS];   /* the device index each kind's arena serves, or -1 */
    int64_t *order;                     /* storages by first use, then by last use */
} planner;

static void planner_free(planner *pl) {
    free(pl->tensors.tab);
    free(pl->stores.tab);
    free(pl->t);
    free(pl->s);
    free(pl->t_ptr);
    free(pl->order);
}

static hl_status scan(const hl_plan *p, planner *pl) {
    int64_t total = 0;
    for (int64_t i = 0; i < p->n; i++) total += p->calls[i].n_in + p->calls[i].n_out;
    pl->t = malloc(sizeof *pl->t * (total + 1));
    pl->s = malloc(sizeof *pl->s * (total + 1));
    pl->t_ptr = malloc(sizeof *pl->t_ptr * (total + 1));
    if (!pl->t || !pl->s || !pl->t_ptr || !map_init(&pl->tensors, total) ||
        !map_init(&pl->stores, total))
        return hl_fail(HL_ERR_MEMORY, "plan: out of memory planning memory");
    for (int64_t i = 0; i < p->n; i++) {
        const hl_call *c = &p->calls[i];
        int64_t time, until, own = call_time(p, i);
        call_span(p, i, &time, &until);
        for (int k = 0; k < c->n_in + c->n_out; k++) {
            hl_tensor *t = hl_call_tensor(c, k);
            if (!t) continue;  /* an optional input not given */
            int64_t *ti = map_at(&pl->tensors, t);
            if (*ti < 0) {
                *ti = pl->nt++;
                int64_t *si = map_at(&pl->stores, t->storage);
                if (*si < 0) {
                    *si = pl->ns++;
                    pl->s[*si] = (store_info){.s = t->storage, .first = time, .last = until,
                                              .first_call = own, .last_call = own,
                                              .only_plan = true, .offset = -1,
                                              .written_whole_first = k >= c->n_in &&
                                                                     hl_covers_storage(t)};
                }
                pl->s[*si].n_structs++;
                pl->t[*ti] = (tensor_info){0, *si};
                pl->t_ptr[*ti] = t;
            }
            tensor_info *info = &pl->t[*ti];
            info->refs++;
            store_info *si = &pl->s[info->store];
            if (time < si->first) si->first = time;  /* a group's input read at its start */
            if (until > si->last) si->last = until;
            if (own > si->last_call) si->last_call = own;
        }
    }
    for (int64_t k = 0; k < pl->nt; k++)
        if (__atomic_load_n(&pl->t_ptr[k]->refcount, __ATOMIC_ACQUIRE) != pl->t[k].refs)
            pl->s[pl->t[k].store].only_plan = false;
    return HL_OK;
}

static bool plannable(planner *pl, store_info *si) {
    hl_storage *s = si->s;
    const hl_backend *be = hl_backend_for(s->device);
    if (!si->only_plan || !si->written_whole_first || !s->data || s->arena_owner || s->borrowed ||
        !s->nbytes || !be || !be->has_memory ||
        __atomic_load_n(&s->refcount, __ATOMIC_ACQUIRE) != si->n_structs)
        return false;
    int *index = &pl->arena_index[s->device.kind];
    if (*index < 0) *index = s->device.index;
    return *index == s->device.index;
}

/* The input of call c whose memory its output o may take, or NULL. */
static store_info *in_place_source(const hl_plan *p, planner *pl, const hl_call *c,
                                   const hl_tensor *o, int64_t time) {
    if (!hl_plan_element_wise(c->op) || (p->options & HL_PLAN_NO_IN_PLACE)) return NULL;
    if (p->group_of && p->group_of[time] >= 0) return NULL;
    for (int k = 0; k < c->n_in; k++) {
        const hl_tensor *x = hl_call_in(c, k);
        if (!x) continue;
        store_info *si = &pl->s[*map_at(&pl->stores, x->storage)];
        if (!si->planned || si->handed_on || si->last != time || si->size != pl->s[*map_at(
                &pl->stores, o->storage)].size || !hl_same_view(x, o))
            continue;
        bool all_same = true;  /* the other operand may be the same memory, seen alike */
        for (int j = 0; j < c->n_in; j++)
            if (hl_call_in(c, j) && hl_call_in(c, j)->storage == x->storage &&
                !hl_same_view(hl_call_in(c, j), o))
                all_same = false;
        if (all_same) return si;
    }
    return NULL;
}

static hl_status place(hl_plan *p, planner *pl) {
    pl->order = malloc(sizeof *pl->order * (pl->ns + 1));
    int64_t *by_first = pl->order, n = 0;
    ptr_map fused_away = {0};
    if (!pl->order || !map_init(&fused_away, p->n_fused_away))
        return hl_fail(HL_ERR_MEMORY, "plan: out of memory planning memory");
    for (int64_t k = 0; k < p->n_fused_away; k++) *map_at(&fused_away, p->fused_away[k]) = k;
    for (int64_t k = 0; k < pl->ns; k++)
        if (plannable(pl, &pl->s[k])) {
            pl->s[k].planned = true;
            /* a fused pass keeps it in scratch: it needs no bytes */
            bool away = map_find(&fused_away, pl->s[k].s) >= 0;
            int64_t local = hl_plan_slice_bytes(p, pl->s[k].s, pl->s[k].first, pl->s[k].last);
            pl->s[k].slice_local = local >= 0;
            if (local >= 0) {
                /* rewritten by every slice before it is read: its own calls' times, so
                   that the run's one-slice buffers share bytes as layers' tensors do */
                pl->s[k].first = pl->s[k].first_call;
                pl->s[k].last = pl->s[k].last_call;
            }
            int64_t bytes = local >= 0 ? local : (int64_t)pl->s[k].s->nbytes;
            pl->s[k].size = away ? 0 : (bytes + ALIGN - 1) / ALIGN * ALIGN;
            by_first[n++] = k;
        }
    free(fused_away.tab);
    /* by first use (counting sort over times) */
    int64_t *count = calloc((size_t)p->n + 1, sizeof *count);
    int64_t *sorted = malloc(sizeof *sorted * (n + 1));
    block *blocks = malloc(sizeof *blocks * (n + p->n + 1));  /* tensors, then scratch */
    int64_t *block_of = malloc(sizeof *block_of * (pl->ns + 1));
    if (!count || !sorted || !blocks || !block_of) {
        free(count); free(sorted); free(blocks); free(block_of);
        return hl_fail(HL_ERR_MEMORY, "plan: out of memory planning memory");
    }
    for (int64_t k = 0; k < n; k++) count[pl->s[by_first[k]].first]++;
    for (int64_t t = 0, run = 0; t <= p->n; t++) { int64_t c = count[t]; count[t] = run; run += c; }
    for (int64_t k = 0; k < n; k++) sorted[count[pl->s[by_first[k]].first]++] = by_first[k];
    memcpy(by_first, sorted, sizeof *sorted * n);
    /* blocks: an output written in place over an input that dies at that call joins the
       input's block, which then lives until the output's last use */
    int64_t nb = 0;
    for (int64_t k = 0; k < n; k++) {
        store_info *si = &pl->s[by_first[k]];
        int64_t time = si->first;
        const hl_call *c = &p->calls[time];
        store_info *src = NULL;
        if (si->size)
            for (int j = 0; j < c->n_out; j++)
                if (c->out[j] && c->out[j]->storage == si->s)
                    src = in_place_source(p, pl, c, c->out[j], time);
        if (src) {
            int64_t b = block_of[src - pl->s];
            block_of[si - pl->s] = b;
            blocks[b].last = HL_MAX(blocks[b].last, si->last);
            src->handed_on = true;
            p->in_place_count++;
        } else if (si->size) {
            block_of[si - pl->s] = nb;
            blocks[nb++] = (block){si->first, si->last, si->size, 0, si->s->device.kind, -1};
        } else {
            block_of[si - pl->s] = -1;
        }
    }
    /* each call's kernel scratch, measured by the first replay: alive for that call only */
    int64_t first_scratch = nb;
    for (int64_t i = 0; p->scratch_need && i < p->n; i++)
        if (p->scratch_need[i] > 0) {
            /* in the arena of the call's device (a cuda kernel's work buffer is device memory) */
            hl_device dev = hl_plan_call_device(&p->calls[i]);
            if (pl->arena_index[dev.kind] < 0) pl->arena_index[dev.kind] = dev.index;
            if (pl->arena_index[dev.kind] != dev.index) continue;
            int64_t t = call_time(p, i);
            blocks[nb++] = (block){t, t, p->scratch_need[i], 0, dev.kind, i};
        }
    bool ok = place_blocks(blocks, nb, p->n, pl->top);
    for (int64_t b = first_scratch; ok && b < nb; b++) {
        p->scratch_offset[blocks[b].call] = blocks[b].offset;
        p->scratch_kind[blocks[b].call] = blocks[b].kind;
        p->scratch_bytes += blocks[b].size;
    }
    /* the most bytes alive at one call: no placement can do with less */
    p->alive_peak_bytes = floor_bytes(blocks, nb, p->n);
    for (int64_t k = 0; k < n; k++) {
        int64_t b = block_of[by_first[k]];
        pl->s[by_first[k]].offset = b >= 0 ? blocks[b].offset : 0;
    }
    free(count); free(sorted); free(blocks); free(block_of);
    if (!ok) return hl_fail(HL_ERR_MEMORY, "plan: out of memory planning memory");
    /* the arenas (storages without bytes still point into one), then every planned storage
       moved into its own */
    for (int64_t k = 0; k < n; k++) {
        int64_t *top = &pl->top[pl->s[by_first[k]].s->device.kind];
        if (!*top) *top = ALIGN;
    }
    for (int d = 0; d < HL_DEVICE_KINDS; d++) {
        if (!pl->top[d]) continue;
        hl_device dev = {d, pl->arena_index[d]};
        hl_status st = hl_storage_new_exact(dev, (size_t)pl->top[d], &p->arenas[d]);
        if (st) return hl_fail(st, "plan: allocating its arena of %lld bytes: %s",
                               (long long)pl->top[d], hl_last_error());
        p->arena_bytes += pl->top[d];
    }
    for (int64_t k = 0; k < n; k++) {
        store_info *si = &pl->s[by_first[k]];
        hl_storage_move_to_arena(si->s, p->arenas[si->s->device.kind], (size_t)si->offset);
        /* from now on its run writes and reads every slice in the same bytes */
        if (si->slice_local) hl_plan_mark_slice_local(p, si->s, si->first);
        p->planned_count++;
        p->planned_bytes += si->size;
    }
    return HL_OK;
}

hl_status hl_plan_plan_memory(hl_plan *p) {
    planner pl;
    memset(&pl, 0, sizeof pl);
    for (int d = 0; d < HL_DEVICE_KINDS; d++) pl.arena_index[d] = -1;
    hl_status st = scan(p, &pl);
    if (!st) st = place(p, &pl);
    planner_free(&pl);
    return st;
}
