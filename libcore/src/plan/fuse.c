/*
 * plan/fuse.c - fusion of element-wise chains (not yet: every call runs its own kernel).
 */
#include <stdlib.h>

#include "plan.h"

struct plan_group { int64_t first, last; };

hl_status hl_plan_fuse(hl_plan *p) { (void)p; return HL_OK; }

int64_t hl_plan_group_start(const hl_plan *p, int64_t g) { return p->groups[g].first; }

hl_status hl_plan_run_group(hl_plan *p, int64_t g, int64_t *last) {
    for (int64_t i = p->groups[g].first; i <= p->groups[g].last; i++) {
        hl_status st = p->kernels[i](&p->calls[i]);
        if (st) return st;
    }
    *last = p->groups[g].last;
    return HL_OK;
}

void hl_plan_free_groups(hl_plan *p) {
    free(p->group_of);
    free(p->groups);
    p->group_of = NULL;
    p->groups = NULL;
    p->n_groups = p->fused_calls = 0;
}
