/*
 * plan/fuse_norm.c - training's batch norm and the ReLU (and residual add) around it as one
 * pass over memory, forward and backward. Eagerly a ResNet block runs batch_norm (writes y),
 * relu (reads y, writes z) and, at the block's end, add and relu; its backward runs relu_grad
 * (reads dz and z, writes dy) and then batch_norm_grad (reads dy twice). In a plan:
 *
 * - batch_norm -> relu, where only the relu reads y: the batch norm writes relu(y) itself
 *   (i[HL_BN_EPILOGUE] = HL_BN_EPI_RELU) and the relu's call goes; y never reaches memory.
 * - batch_norm -> add(y, r) -> relu, where only the add reads y and only the relu the sum:
 *   the batch norm reads r and writes relu(y + r) (HL_BN_EPI_ADD_RELU, or RES_ADD_RELU for
 *   add(r, y)); the add and the relu go. This is also the recomputed forward of a block's end
 *   (plan/recompute.c's batch norms with given statistics), which the backward runs again.
 * - relu_grad(dz, z) -> batch_norm_grad, where only the batch norm's gradient reads dy: it
 *   reads dz and z and forms dy = z > 0 ? dz : 0 as it goes (HL_BN_GRAD_RELU); the
 *   relu_grad's call goes and dy never reaches memory.
 *
 * - max_pool_grad (from the pooled input) -> relu_grad of that same input, where only the
 *   relu_grad reads the pool's gradient (the MNIST CNN's Conv -> ReLU -> MaxPool, issue 20):
 *   the pool gradient applies relu_grad's select to each tap it writes (HL_POOL_GRAD_RELU,
 *   cpu/pool_2x2_impl.h); it reads the ReLU's output already, so the pass over dx goes
 *   (`plan_stats()['pool_fusions']`).
 *
 * Each fused kernel rounds every intermediate to the dtype exactly where the calls it replaces
 * stored it and applies their own expressions (cpu/norm.c), so a fused replay is bit for bit
 * the unfused one; the tests compare them bitwise. CPU only (the record variants are the CPU
 * kernels'), contiguous operands of one shape, and only where nothing outside the plan holds
 * the intermediate (its tensor is referenced by the two calls alone, its storage by it alone),
 * as for the convolution epilogues (fuse.c).
 */
#include "plan.h"

/* t can stand where `like` stood in a fused kernel: same dtype and shape, contiguous, CPU. */
static bool same_layout(const hl_tensor *t, const hl_tensor *like) {
    return t && t->dtype == like->dtype && t->ndim == like->ndim && hl_same_shape(t, like) &&
           hl_tensor_is_contiguous(t) && t->storage->device.kind == HL_DEVICE_CPU;
}

/* The unary relu call j reading t as its only input, else NULL. */
static hl_call *relu_of(hl_plan *p, int64_t j, const hl_tensor *t) {
    if (j < 0) return NULL;
    hl_call *r = &p->calls[j];
    return r->op == HL_OP_RELU && !r->in_many && r->n_in == 1 && r->n_out == 1 &&
           r->in[0] == t && same_layout(r->out[0], t) && r->out[0]->storage != t->storage
               ? r : NULL;
}

static void release(const hl_tensor *t) { hl_tensor_release((hl_tensor *)t); }

/* batch_norm i -> relu: the relu's output moves to the batch norm. */
static bool fuse_relu_epilogue(hl_plan *p, int64_t i) {
    hl_call *c = &p->calls[i];
    hl_tensor *y = c->out[0];
    int64_t j = hl_plan_next_use(p, y->storage, i);
    hl_call *r = relu_of(p, j, y);
    if (!r || !hl_plan_private_between(p, y, i, j) ||
        hl_plan_touched_between(p, i, j, r->out[0]->storage, false))
        return false;
    c->out[0] = r->out[0];  /* the relu's reference moves here */
    c->i[HL_BN_EPILOGUE] = HL_BN_EPI_RELU;
    release(y);              /* the batch norm's */
    release(y);              /* the relu's */
    hl_plan_drop_call(p, j);
    return true;
}

/* batch_norm i -> add(y, r) or add(r, y) -> relu: r and the relu's output move to the batch
   norm. */
static bool fuse_add_relu_epilogue(hl_plan *p, int64_t i) {
    hl_call *c = &p->calls[i];
    hl_tensor *y = c->out[0];
    int64_t j = hl_plan_next_use(p, y->storage, i);
    if (j < 0) return false;
    hl_call *a = &p->calls[j];
    if (a->op != HL_OP_ADD || a->in_many || a->n_in != 2 || a->n_out != 1 ||
        (a->in[0] == y) == (a->in[1] == y))
        return false;
    bool y_first = a->in[0] == y;
    const hl_tensor *res = a->in[y_first ? 1 : 0];
    hl_tensor *sum = a->out[0];
    if (!same_layout(res, y) || !same_layout(sum, y) || res->storage == y->storage ||
        sum->storage == y->storage || !hl_plan_private_between(p, y, i, j))
        return false;
    int64_t k = hl_plan_next_use(p, sum->storage, j);
    hl_call *r = relu_of(p, k, sum);
    if (!r || !hl_plan_private_between(p, sum, j, k)) return false;
    hl_tensor *z = r->out[0];
    /* r is read at i now (no call before the add may write it); z is written at i (no call
       before the relu may see it) */
    if (z->storage == res->storage || hl_plan_touched_between(p, i, j, res->storage, true) ||
        hl_plan_touched_between(p, i, k, z->storage, false))
        return false;
    c->in[5] = res;          /* the add's reference to r moves here */
    c->n_in = 6;
    c->out[0] = z;           /* the relu's reference moves here */
    c->i[HL_BN_EPILOGUE] = y_first ? HL_BN_EPI_ADD_RELU : HL_BN_EPI_RES_ADD_RELU;
    release(y);              /* the batch norm's and the add's */
    release(y);
    release(sum);            /* the add's and the relu's */
    release(sum);
    hl_plan_drop_call(p, k);
    hl_plan_drop_call(p, j);
    return true;
}

/* relu_grad i -> batch_norm_grad: dz and z move to the batch norm's gradient. */
static bool fuse_relu_grad_prologue(hl_plan *p, int64_t i) {
    hl_call *r = &p->calls[i];
    if (r->in_many || r->n_in != 2 || r->n_out != 1) return false;
    hl_tensor *dy = r->out[0];
    const hl_tensor *dz = r->in[0], *z = r->in[1];
    if (!same_layout(dy, dy) || !same_layout(dz, dy) || !same_layout(z, dy) ||
        dz->storage == dy->storage || z->storage == dy->storage)
        return false;
    int64_t j = hl_plan_next_use(p, dy->storage, i);
    if (j < 0) return false;
    hl_call *g = &p->calls[j];
    if (g->op != HL_OP_BATCH_NORM_GRAD || g->in_many || g->n_in != 5 || g->in[0] != dy ||
        g->i[HL_BN_GRAD_PROLOGUE] || !hl_plan_private_between(p, dy, i, j))
        return false;
    for (int k = 1; k < g->n_in; k++)
        if (g->in[k] && g->in[k]->storage == dy->storage) return false;
    /* dz and z are read at j now: nothing up to it (its own outputs included) may write them */
    for (int64_t k = i + 1; k <= j; k++)
        if (hl_call_writes(&p->calls[k], dz->storage) || hl_call_writes(&p->calls[k], z->storage))
            return false;
    g->in[0] = dz;           /* the relu_grad's references move here */
    g->in[5] = z;
    g->n_in = 6;
    g->i[HL_BN_GRAD_PROLOGUE] = HL_BN_GRAD_RELU;
    release(dy);             /* the relu_grad's and the batch norm gradient's */
    release(dy);
    hl_plan_drop_call(p, i);
    return true;
}

/* max_pool_grad i (from the input, recompute.c) -> relu_grad(dx, z) of the very z it pooled:
   the pool gradient writes relu_grad's output (HL_POOL_GRAD_RELU; it reads z anyway) and the
   relu_grad's call goes. Not where a batch norm's gradient reads that output next: the
   batch norm takes the relu_grad in itself (above). */
static bool fuse_pool_relu_grad(hl_plan *p, int64_t i) {
    hl_call *c = &p->calls[i];
    if (c->n_in != 2 || c->n_out != 1 || c->i[HL_POOL_GRAD_MODE] != HL_POOL_GRAD_FROM_INPUT ||
        c->i[HL_POOL_GRAD_EPILOGUE])
        return false;
    hl_tensor *dx = c->out[0];
    const hl_tensor *z = c->in[1];
    if (!same_layout(dx, dx) || !same_layout(z, dx)) return false;
    int64_t j = hl_plan_next_use(p, dx->storage, i);
    if (j < 0) return false;
    hl_call *r = &p->calls[j];
    if (r->op != HL_OP_RELU_GRAD || r->in_many || r->n_in != 2 || r->n_out != 1 ||
        r->in[0] != dx || r->in[1] != z)
        return false;
    hl_tensor *out = r->out[0];
    if (!same_layout(out, dx) || out->storage == dx->storage || out->storage == z->storage ||
        out->storage == c->in[0]->storage || !hl_plan_private_between(p, dx, i, j))
        return false;
    int64_t k = hl_plan_next_use(p, out->storage, j);
    if (k >= 0 && p->calls[k].op == HL_OP_BATCH_NORM_GRAD) return false;
    /* out is written at i now: no call up to the relu_grad may see it; z, read at j, must
       hold at i what it held there */
    if (hl_plan_touched_between(p, i, j, out->storage, false) || hl_plan_touched_between(p, i, j, z->storage, true))
        return false;
    c->out[0] = out;         /* the relu_grad's reference moves here */
    c->i[HL_POOL_GRAD_EPILOGUE] = HL_POOL_GRAD_RELU;
    release(dx);             /* the pool gradient's and the relu_grad's */
    release(dx);
    release(z);              /* the relu_grad's */
    hl_plan_drop_call(p, j);
    return true;
}

void hl_plan_fuse_norms(hl_plan *p) {
    for (int64_t i = 0; i < p->n; i++) {
        hl_call *c = &p->calls[i];
        if (hl_plan_call_device(c).kind != HL_DEVICE_CPU || c->in_many) continue;
        if (c->op == HL_OP_BATCH_NORM && c->n_in == 5 && c->n_out >= 1 &&
            !c->i[HL_BN_EPILOGUE] && (c->out[0]->dtype == HL_F32 || c->out[0]->dtype == HL_F64)) {
            if (fuse_relu_epilogue(p, i) || fuse_add_relu_epilogue(p, i)) p->norm_fusions++;
        } else if (c->op == HL_OP_MAX_POOL_GRAD && (c->out[0]->dtype == HL_F32 ||
                                                    c->out[0]->dtype == HL_F64) &&
                   fuse_pool_relu_grad(p, i)) {
            p->pool_fusions++;
        } else if (c->op == HL_OP_RELU_GRAD && fuse_relu_grad_prologue(p, i)) {
            p->norm_fusions++;
            i--;  /* the call now at i is the one after the relu_grad */
        }
    }
}
