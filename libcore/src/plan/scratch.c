/*
 * plan/scratch.c - kernel scratch declared to the memory plan. A plan's first replay measures
 * the work buffers each call's kernel asks for (cpu/conv.h's scratch_get asks
 * hl_plan_scratch first); the memory plan, made before the second replay, gives each call that
 * asked a block of the arena alive for that call alone, and later replays hand the kernel
 * pointers into it. So the peak of a replay is the arena's size, scratch included, instead of
 * the arena plus the largest work buffer.
 */
#include "plan.h"

typedef struct {
    char *base;       /* the call's scratch block, or NULL */
    size_t size, used;
    bool measuring;
} call_scratch;

static _Thread_local call_scratch *current;

enum { SCRATCH_ALIGN = 64 };

void *hl_plan_scratch(size_t nbytes) {
    call_scratch *c = current;
    if (!c) return NULL;
    size_t need = (nbytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    if (c->measuring) {
        c->used += need;
        return NULL;
    }
    if (!c->base || c->used + need > c->size) return NULL;
    void *p = c->base + c->used;
    c->used += need;
    return p;
}

bool hl_plan_scratch_measuring(void) { return current && current->measuring; }

hl_status hl_plan_run_call(hl_plan *p, int64_t i) { return hl_plan_run_call_as(p, i, &p->calls[i]); }

hl_status hl_plan_run_call_as(hl_plan *p, int64_t i, const hl_call *c) {
    call_scratch cs = {0};
    bool track = p->scratch_need && (p->measuring || p->scratch_offset[i] >= 0);
    if (track) {
        cs.measuring = p->measuring;
        if (!p->measuring) {
            cs.base = (char *)p->arenas[p->scratch_kind[i]]->data + p->scratch_offset[i];
            cs.size = (size_t)p->scratch_need[i];
        }
        current = &cs;
    }
    hl_status st = p->kernels[i](c);
    if (track) {
        current = NULL;
        if (p->measuring && (int64_t)cs.used > p->scratch_need[i])
            p->scratch_need[i] = (int64_t)cs.used;
    }
    return st;
}
