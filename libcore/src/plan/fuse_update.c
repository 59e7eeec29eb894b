/*
 * plan/fuse_update.c - a Linear layer's weight gradient at batch 1 computed inside its
 * optimiser update. At batch 1 the weight gradient is an outer product (a gemm with K == 1:
 * x^T dy), written whole to memory and then read once by the parameter's optimiser update.
 * When nothing else sees that gradient, the plan drops the gemm and hands its two vectors to
 * the update, which forms each element of the gradient (the same one rounded product the
 * gemm's outer-product path computes, cpu/linalg.c) in a small buffer just before using it
 * (cpu/optim.c): the gradient never reaches memory, and the step streams the weight and its
 * optimiser slots once instead of writing and re-reading a gradient as large as the weight.
 * The result is bit for bit the unfused replay's.
 *
 * The update's record then reads (api/optim.c): in[0] = the column vector (the gemm's A),
 * in[n_in - 1] = the row vector (the gemm's B), i[HL_OPTIM_OUTER] = 1 and the strides and the
 * row length after it.
 */
#include "plan.h"

/* The update call that alone reads gemm i's output, or -1. */
static int64_t sole_update_reading(const hl_plan *p, int64_t i) {
    const hl_tensor *g = p->calls[i].out[0];
    /* the next call touching g's storage must be the update, reading g as its gradient */
    int64_t j = hl_plan_next_use(p, g->storage, i);
    if (j < 0) return -1;
    const hl_call *u = &p->calls[j];
    if (u->op != HL_OP_OPTIM_UPDATE || u->in_many || u->n_in >= HL_CALL_MAX_IN ||
        u->in[0] != g || u->i[HL_OPTIM_OUTER] || u->i[HL_OPTIM_SKIP] ||
        hl_plan_other_call_uses(p, g->storage, i, j))
        return -1;
    for (int k = 1; k < u->n_in; k++)
        if (u->in[k]->storage == g->storage) return -1;
    for (int k = 0; k < u->n_out; k++)
        if (u->out[k]->storage == g->storage) return -1;
    return j;
}

/* Gemm call i is an outer product (K == 1, alpha 1, no C) of floats on the CPU whose output
   nothing outside the plan holds (its tensor is referenced by the gemm and the update alone,
   its storage by that tensor alone) and covers its storage. */
static bool outer_product_gradient(const hl_call *c) {
    if (c->op != HL_OP_GEMM || c->n_in != 2 || c->n_out != 1 || c->f[0] != 1) return false;
    const hl_tensor *a = c->in[0], *b = c->in[1], *g = c->out[0];
    bool ta = c->i[0] != 0;
    if ((ta ? a->shape[0] : a->shape[1]) != 1) return false;
    return (g->dtype == HL_F32 || g->dtype == HL_F64) && a->dtype == g->dtype &&
           b->dtype == g->dtype && g->storage->device.kind == HL_DEVICE_CPU &&
           g->ndim == 2 && hl_covers_storage(g) &&
           __atomic_load_n(&g->refcount, __ATOMIC_ACQUIRE) == 2 &&
           __atomic_load_n(&g->storage->refcount, __ATOMIC_ACQUIRE) == 1;
}

void hl_plan_fuse_outer_updates(hl_plan *p) {
    for (int64_t i = 0; i + 1 < p->n; i++) {
        hl_call *c = &p->calls[i];
        if (!outer_product_gradient(c)) continue;
        int64_t j = sole_update_reading(p, i);
        if (j < 0 || hl_plan_call_device(&p->calls[j]).kind != HL_DEVICE_CPU) continue;
        /* the update now reads the vectors where it runs: no call from the gemm to it (the
           update included) may write them */
        const hl_tensor *a = c->in[0], *b = c->in[1];
        bool moved_safely = true;
        for (int64_t k = i + 1; k <= j && moved_safely; k++)
            moved_safely = !hl_call_writes(&p->calls[k], a->storage) &&
                           !hl_call_writes(&p->calls[k], b->storage);
        if (!moved_safely) continue;
        hl_call *u = &p->calls[j];
        hl_tensor *g = c->out[0];
        bool ta = c->i[0] != 0, tb = c->i[1] != 0;
        u->in[0] = a;                 /* the gemm's references to a and b move here */
        u->in[u->n_in++] = b;
        u->i[HL_OPTIM_OUTER] = 1;
        u->i[HL_OPTIM_OUTER + 1] = ta ? a->strides[1] : a->strides[0];  /* a's rows */
        u->i[HL_OPTIM_OUTER + 2] = tb ? b->strides[0] : b->strides[1];  /* b's columns */
        u->i[HL_OPTIM_OUTER + 3] = g->shape[1];
        hl_tensor_release(g);         /* the gemm's */
        hl_tensor_release(g);         /* the update's */
        hl_plan_drop_call(p, i);
        p->outer_updates++;
        i--;  /* the call now at i is the one after the gemm */
    }
}
