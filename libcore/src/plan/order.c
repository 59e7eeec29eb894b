/*
 * plan/order.c - graph_alg='topological': before the first replay the calls are put in
 * dependency order by levels (Kahn's algorithm: a call's level is one more than that of every
 * call it depends on), calls of one level in record order. Dependencies are read from the
 * storages each call reads and writes: a read depends on the last write, a write on the last
 * write and on every read since. Fusion and the memory plan then work on that order.
 *
 * Calls of one level are independent and could run concurrently; they run one after the
 * other, because a kernel's reductions split their work by thread count, so running
 * branches on fewer threads each would change results in the last bits, and the promise is
 * that 'topological' gives exactly what 'sequence' gives.
 */
#include "plan.h"

typedef struct { const void *key; int64_t write_level, read_level; } storage_levels;

static storage_levels *slot_for(storage_levels *tab, int64_t mask, const void *key) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    for (int64_t i = (int64_t)(h >> 20) & mask;; i = (i + 1) & mask) {
        if (tab[i].key == key) return &tab[i];
        if (!tab[i].key) {
            tab[i].key = key;
            return &tab[i];
        }
    }
}

hl_status hl_plan_order_topologically(hl_plan *p) {
    int64_t total = 0;
    for (int64_t i = 0; i < p->n; i++) total += p->calls[i].n_in + p->calls[i].n_out;
    int64_t cap = 16;
    while (cap < 2 * total) cap *= 2;
    storage_levels *tab = calloc((size_t)cap, sizeof *tab);
    int64_t *level = malloc(sizeof *level * (p->n + 1));
    int64_t *count = calloc((size_t)p->n + 2, sizeof *count);
    hl_call *sorted = malloc(sizeof *sorted * (p->n + 1));
    if (!tab || !level || !count || !sorted) {
        free(tab); free(level); free(count); free(sorted);
        return hl_fail(HL_ERR_MEMORY, "plan: out of memory ordering calls");
    }
    /* levels start at 1; 0 in the table means "never touched" */
    for (int64_t i = 0; i < p->n; i++) {
        const hl_call *c = &p->calls[i];
        int64_t lv = 1;
        for (int k = 0; k < c->n_in + c->n_out; k++) {
            const hl_tensor *t = hl_call_tensor(c, k);
            if (!t) continue;
            storage_levels *s = slot_for(tab, cap - 1, t->storage);
            int64_t after = k < c->n_in ? s->write_level : HL_MAX(s->write_level, s->read_level);
            lv = HL_MAX(lv, after + 1);
        }
        level[i] = lv;
        for (int k = 0; k < c->n_in + c->n_out; k++) {
            const hl_tensor *t = hl_call_tensor(c, k);
            if (!t) continue;
            storage_levels *s = slot_for(tab, cap - 1, t->storage);
            if (k < c->n_in) s->read_level = HL_MAX(s->read_level, lv);
            else s->write_level = lv;
        }
    }
    /* stable counting sort by level */
    for (int64_t i = 0; i < p->n; i++) count[level[i]]++;
    for (int64_t l = 0, run = 0; l <= p->n + 1; l++) { int64_t c = count[l]; count[l] = run; run += c; }
    for (int64_t i = 0; i < p->n; i++) sorted[count[level[i]]++] = p->calls[i];
    memcpy(p->calls, sorted, sizeof *sorted * p->n);
    free(tab); free(level); free(count); free(sorted);
    return HL_OK;
}
