/*
 * plan/fuse.c - fusion: runs of consecutive element-wise calls (unary and binary ops that keep
 * their dtype) with outputs of one shape on the CPU become one pass over the elements
 * (cpu/fused.c). An intermediate that only the run reads, and that nothing outside the plan
 * holds, never reaches memory: it lives in a scratch buffer of the pass, and the memory plan
 * gives it no bytes. Each step is the call's own row function, so a fused replay is bit for bit
 * the unfused one.
 *
 * A run stops where a call would break that equality: a call whose output has another shape
 * or dtype, or that writes memory another call of the run sees through a different view
 * (element i of one would not be element i of the other).
 *
 * Before that, batch norms take the ReLU (and residual add) after them and the relu_grad
 * before their gradient in (fuse_norm.c), a convolution followed by a ReLU that alone reads
 * its output becomes one conv_fused call (fuse_conv_relu), and a batch-1 weight gradient whose only reader is its
 * optimiser update is computed inside the update (fuse_update.c).
 */
#include "plan.h"

struct plan_group {
    int64_t first, last;
    hl_fused pass;
};

#define FUSIBLE_ROW(NAME, ...) [HL_OP_##NAME] = true,
static const bool keeps_dtype[HL_OP_COUNT] = {
    HL_UNARY_FLOAT_OPS(FUSIBLE_ROW) HL_UNARY_NUMERIC_OPS(FUSIBLE_ROW)
    HL_BINARY_ARITH_OPS(FUSIBLE_ROW)
};
#undef FUSIBLE_ROW

bool hl_plan_element_wise(int op) { return op >= 0 && op < HL_OP_COUNT && keeps_dtype[op]; }

static bool fusible(const hl_call *c) {
    if (!hl_plan_element_wise(c->op) || c->n_out != 1 || c->in_many) return false;
    const hl_tensor *o = c->out[0];
    if (o->storage->device.kind != HL_DEVICE_CPU || !hl_cpu_fusible(c->op, o->dtype)) return false;
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k]->dtype != o->dtype) return false;
    return true;
}

/* Would adding call c to a run of calls [first, i) keep every written memory seen alike? */
static bool views_agree(const hl_plan *p, int64_t first, int64_t i) {
    const hl_call *c = &p->calls[i];
    for (int64_t j = first; j < i; j++) {
        const hl_call *d = &p->calls[j];
        for (int a = 0; a < c->n_in + c->n_out; a++) {
            const hl_tensor *t = hl_call_tensor(c, a);
            for (int b = 0; b < d->n_in + d->n_out; b++) {
                const hl_tensor *u = hl_call_tensor(d, b);
                bool written = a >= c->n_in || b >= d->n_in;
                if (written && t->storage == u->storage && !hl_same_view(t, u)) return false;
            }
        }
    }
    return true;
}

/* The run's operand for tensor t, added if new; -1 when the pass is full. */
static int operand_of(hl_fused *f, const hl_tensor *t) {
    for (int k = 0; k < f->n_operands; k++)
        if (f->operands[k] == t) return k;
    if (f->n_operands == HL_FUSED_MAX_OPERANDS) return -1;
    f->operands[f->n_operands] = t;
    return f->n_operands++;
}

/* Whether the output of call k of the run [first, last] can stay in scratch: the plan's
   references from inside the run are the only ones to it and to its storage, the run writes
   it once and whole before reading it. */
static bool stays_in_scratch(const hl_plan *p, int64_t first, int64_t last, int64_t k) {
    const hl_tensor *o = p->calls[k].out[0];
    if (__atomic_load_n(&o->storage->refcount, __ATOMIC_ACQUIRE) != 1 || !hl_covers_storage(o))
        return false;
    int refs = 0;
    for (int64_t j = first; j <= last; j++) {
        const hl_call *c = &p->calls[j];
        for (int a = 0; a < c->n_in + c->n_out; a++) {
            if (hl_call_tensor(c, a) != o) continue;
            if (j < k || (j > k && a >= c->n_in) || (j == k && a < c->n_in)) return false;
            refs++;
        }
    }
    return __atomic_load_n(&o->refcount, __ATOMIC_ACQUIRE) == refs;
}

/* Builds the pass of calls [first, last]; false when it does not fit its limits. */
static bool build_pass(hl_plan *p, int64_t first, int64_t last, hl_fused *f,
                       hl_storage **scratch_of, int *n_scratch_storages) {
    memset(f, 0, sizeof *f);
    f->dtype = p->calls[first].out[0]->dtype;
    f->n_steps = (int)(last - first + 1);
    /* scratch: each intermediate kept there takes a buffer until its last reader */
    const hl_tensor *in_scratch[HL_FUSED_MAX_SCRATCH] = {0};
    int64_t free_after[HL_FUSED_MAX_SCRATCH];
    /* operand 0: the last output that reaches memory (the pass walks its shape) */
    bool scratch[HL_FUSED_MAX_STEPS] = {0};
    int64_t anchor = -1;
    for (int64_t k = first; k <= last; k++) {
        scratch[k - first] = stays_in_scratch(p, first, last, k);
        if (!scratch[k - first]) anchor = k;
    }
    if (anchor < 0) { scratch[last - first] = false; anchor = last; }
    operand_of(f, p->calls[anchor].out[0]);
    for (int64_t k = first; k <= last; k++) {
        const hl_call *c = &p->calls[k];
        hl_fused_step *st = &f->steps[k - first];
        st->op = c->op;
        st->n_in = c->n_in;
        st->params = c->f;
        for (int a = 0; a < c->n_in; a++) {
            const hl_tensor *t = c->in[a];
            int arg = 0;
            bool found = false;
            for (int s = 0; s < HL_FUSED_MAX_SCRATCH; s++)
                if (in_scratch[s] == t) { arg = -1 - s; found = true; }
            if (!found && (arg = operand_of(f, t)) < 0) return false;
            st->arg[1 + a] = arg;
        }
        /* buffers whose last reader was an earlier step are free again */
        for (int s = 0; s < HL_FUSED_MAX_SCRATCH; s++)
            if (in_scratch[s] && free_after[s] < k) in_scratch[s] = NULL;
        if (scratch[k - first]) {
            int s = 0;
            while (s < HL_FUSED_MAX_SCRATCH && in_scratch[s]) s++;
            if (s == HL_FUSED_MAX_SCRATCH) return false;
            in_scratch[s] = c->out[0];
            free_after[s] = k;
            for (int64_t j = k + 1; j <= last; j++)
                for (int a = 0; a < p->calls[j].n_in; a++)
                    if (p->calls[j].in[a] == c->out[0]) free_after[s] = j;
            st->arg[0] = -1 - s;
            scratch_of[(*n_scratch_storages)++] = c->out[0]->storage;
        } else {
            st->arg[0] = operand_of(f, c->out[0]);
            if (st->arg[0] < 0) return false;
        }
    }
    return true;
}

static hl_status add_group(hl_plan *p, int64_t first, int64_t last, int64_t *cap) {
    if (p->n_groups == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        plan_group *grown = realloc(p->groups, sizeof *grown * *cap);
        if (!grown) return hl_fail(HL_ERR_MEMORY, "plan: out of memory fusing");
        p->groups = grown;
    }
    hl_storage *scratch_of[HL_FUSED_MAX_STEPS];
    int n_scratch = 0;
    plan_group *g = &p->groups[p->n_groups];
    if (!build_pass(p, first, last, &g->pass, scratch_of, &n_scratch)) return HL_OK;
    for (int k = 0; k < n_scratch; k++) {
        if (p->n_fused_away == p->cap_fused_away) {
            int64_t c = p->cap_fused_away ? 2 * p->cap_fused_away : 16;
            hl_storage **grown = realloc(p->fused_away, sizeof *grown * c);
            if (!grown) return hl_fail(HL_ERR_MEMORY, "plan: out of memory fusing");
            p->fused_away = grown;
            p->cap_fused_away = c;
        }
        p->fused_away[p->n_fused_away++] = scratch_of[k];
    }
    g->first = first;
    g->last = last;
    for (int64_t i = first; i <= last; i++) p->group_of[i] = (int)p->n_groups;
    p->n_groups++;
    p->fused_calls += last - first + 1;
    return HL_OK;
}

/* ---- convolution epilogues ---- */

int64_t hl_plan_next_use(const hl_plan *p, const hl_storage *s, int64_t after) {
    for (int64_t j = after + 1; j < p->n; j++) {
        const hl_call *d = &p->calls[j];
        for (int a = 0; a < d->n_in + d->n_out; a++) {
            const hl_tensor *t = hl_call_tensor(d, a);
            if (t && t->storage == s) return j;
        }
    }
    return -1;
}

void hl_plan_drop_call(hl_plan *p, int64_t i) {
    memmove(&p->calls[i], &p->calls[i + 1], sizeof *p->calls * (size_t)(p->n - i - 1));
    memmove(&p->kernels[i], &p->kernels[i + 1], sizeof *p->kernels * (size_t)(p->n - i - 1));
    p->n--;
}

bool hl_plan_other_call_uses(const hl_plan *p, const hl_storage *s, int64_t skip_a,
                             int64_t skip_b) {
    for (int64_t j = 0; j < p->n; j++) {
        if (j == skip_a || j == skip_b) continue;
        const hl_call *c = &p->calls[j];
        for (int a = 0; a < c->n_in + c->n_out; a++) {
            const hl_tensor *t = hl_call_tensor(c, a);
            if (t && t->storage == s) return true;
        }
    }
    return false;
}

bool hl_plan_touched_between(const hl_plan *p, int64_t from, int64_t to, const hl_storage *s,
                             bool written_only) {
    for (int64_t k = from + 1; k < to; k++) {
        const hl_call *c = &p->calls[k];
        if (hl_call_writes(c, s)) return true;
        if (written_only) continue;
        for (int a = 0; a < c->n_in; a++)
            if (hl_call_in(c, a) && hl_call_in(c, a)->storage == s) return true;
    }
    return false;
}

bool hl_plan_private_between(const hl_plan *p, const hl_tensor *t, int64_t i, int64_t j) {
    return hl_covers_storage(t) && __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) == 2 &&
           __atomic_load_n(&t->storage->refcount, __ATOMIC_ACQUIRE) == 1 &&
           !hl_plan_other_call_uses(p, t->storage, i, j);
}

/* A convolution whose output only a ReLU reads (training's Conv -> ReLU: the ReLU's backward
   reads the ReLU's output, the convolution's backward neither) becomes one conv_fused call
   with the ReLU as its epilogue, writing the ReLU's output: the convolution's output never
   reaches memory and the ReLU's pass goes. conv_fused equals conv then relu bit for bit
   (api/conv.c). Only where nothing outside the plan holds the convolution's output (its
   tensor is referenced by these two calls alone, its storage by that tensor alone) and the
   device has a conv_fused kernel. The ReLU's call is removed from the plan. */
static void fuse_conv_relu(hl_plan *p) {
    for (int64_t i = 0; i + 1 < p->n; i++) {
        hl_call *c = &p->calls[i];
        if (c->op != HL_OP_CONV) continue;
        hl_tensor *o = c->out[0];
        int64_t j = hl_plan_next_use(p, o->storage, i);  /* must be the ReLU */
        if (j < 0) continue;
        hl_call *r = &p->calls[j];
        if (r->op != HL_OP_RELU || r->n_in != 1 || r->n_out != 1 || r->in[0] != o) continue;
        hl_tensor *y = r->out[0];
        const hl_backend *be = hl_backend_for(o->storage->device);
        if (!be || !be->kernels[HL_OP_CONV_FUSED] ||
            !(be->op_dtypes[HL_OP_CONV_FUSED] >> o->dtype & 1u) || y->dtype != o->dtype ||
            y->ndim != o->ndim || !hl_same_shape(y, o) || !hl_tensor_is_contiguous(y) ||
            y->storage == o->storage ||
            __atomic_load_n(&o->refcount, __ATOMIC_ACQUIRE) != 2 ||
            __atomic_load_n(&o->storage->refcount, __ATOMIC_ACQUIRE) != 1 ||
            hl_plan_other_call_uses(p, o->storage, i, j))
            continue;
        /* calls between i and j must not touch y either: its write moves to i */
        bool y_used_between = false;
        for (int64_t k = i + 1; k < j && !y_used_between; k++)
            for (int a = 0; a < p->calls[k].n_in + p->calls[k].n_out; a++) {
                const hl_tensor *t = hl_call_tensor(&p->calls[k], a);
                if (t && t->storage == y->storage) y_used_between = true;
            }
        if (y_used_between) continue;
        c->op = HL_OP_CONV_FUSED;
        c->i[9] = HL_CONV_ACT_RELU;
        c->i[10] = c->n_in > 2;  /* the bias */
        c->i[11] = 0;            /* no residual */
        c->f[0] = c->f[1] = 0;
        c->out[0] = y;           /* the ReLU's reference to y moves here, its to o goes */
        p->kernels[i] = be->kernels[HL_OP_CONV_FUSED];
        hl_tensor_release(o);    /* the convolution's */
        hl_tensor_release(o);    /* the ReLU's */
        hl_plan_drop_call(p, j);
        p->conv_epilogues++;
    }
}

/* A pointwise expansion (conv_fused, packed weights) whose output t only a depthwise 3x3
   convolution reads: one call (core.h's HL_CONV_DW record) that writes the depthwise layer's
   output y and never t (cpu/conv_expand_dw.c), where the CPU's kernels take the pair
   (hl_cpu_expand_dw_fusible). The depthwise call's weight and bias references move to the
   expansion's call, as its output's does. */
static void fuse_expand_dw(hl_plan *p) {
    for (int64_t i = 0; i + 1 < p->n; i++) {
        hl_call *c = &p->calls[i];
        if (c->op != HL_OP_CONV_FUSED || c->in_many || c->n_out != 1 ||
            hl_plan_call_device(c).kind != HL_DEVICE_CPU)
            continue;
        hl_tensor *t = c->out[0];
        const int64_t j = hl_plan_next_use(p, t->storage, i);
        if (j < 0) continue;
        hl_call *d = &p->calls[j];
        if (!hl_cpu_expand_dw_fusible(c, d) || c->n_in + d->n_in - 1 > HL_CALL_MAX_IN) continue;
        hl_tensor *y = d->out[0];
        if (y->storage == t->storage || !hl_plan_private_between(p, t, i, j)) continue;
        /* y's write moves to i, and the depthwise weights are read there: no call between may
           touch y or write those */
        bool clash = hl_plan_touched_between(p, i, j, y->storage, false);
        for (int a = 1; a < d->n_in && !clash; a++)
            clash = hl_plan_touched_between(p, i, j, d->in[a]->storage, true);
        if (clash) continue;
        const bool fused_dw = d->op == HL_OP_CONV_FUSED;
        for (int a = 1; a < d->n_in; a++) c->in[c->n_in++] = d->in[a];
        c->i[HL_CONV_DW] = 1;
        c->i[HL_CONV_DW + 1] = d->i[1];   /* stride */
        c->i[HL_CONV_DW + 2] = d->i[5];   /* pads at the top and left */
        c->i[HL_CONV_DW + 3] = d->i[6];
        c->i[HL_CONV_DW + 4] = fused_dw ? d->i[9] : HL_CONV_ACT_NONE;
        c->i[HL_CONV_DW + 5] = fused_dw ? d->i[10] : d->n_in > 2;
        c->f[2] = fused_dw ? d->f[0] : 0;
        c->f[3] = fused_dw ? d->f[1] : 0;
        c->out[0] = y;            /* the depthwise call's reference to y moves here */
        hl_tensor_release(t);     /* the expansion's */
        hl_tensor_release(t);     /* the depthwise call's */
        hl_plan_drop_call(p, j);
        p->expand_dw++;
    }
}

hl_status hl_plan_fuse(hl_plan *p) {
    if (!(p->options & HL_PLAN_NO_NORM_FUSION)) hl_plan_fuse_norms(p);
    fuse_conv_relu(p);
    fuse_expand_dw(p);
    hl_plan_fuse_outer_updates(p);
    p->group_of = malloc(sizeof *p->group_of * (p->n ? p->n : 1));
    if (!p->group_of) return hl_fail(HL_ERR_MEMORY, "plan: out of memory fusing");
    for (int64_t i = 0; i < p->n; i++) p->group_of[i] = -1;
    int64_t cap = 0;
    for (int64_t i = 0; i < p->n;) {
        if (!fusible(&p->calls[i])) { i++; continue; }
        const hl_tensor *o = p->calls[i].out[0];
        int64_t j = i + 1;
        while (j < p->n && j - i < HL_FUSED_MAX_STEPS && fusible(&p->calls[j]) &&
               p->calls[j].out[0]->dtype == o->dtype && p->calls[j].out[0]->ndim == o->ndim &&
               hl_same_shape(p->calls[j].out[0], o) && views_agree(p, i, j))
            j++;
        if (j - i >= 2) {
            hl_status st = add_group(p, i, j - 1, &cap);
            if (st) return st;
        }
        i = j;
    }
    return HL_OK;
}

int64_t hl_plan_group_start(const hl_plan *p, int64_t g) { return p->groups[g].first; }

hl_status hl_plan_run_group(hl_plan *p, int64_t g, int64_t *last) {
    *last = p->groups[g].last;
    return hl_cpu_fused_run(&p->groups[g].pass);
}

void hl_plan_free_groups(hl_plan *p) {
    free(p->group_of);
    free(p->groups);
    free(p->fused_away);
    p->group_of = NULL;
    p->groups = NULL;
    p->fused_away = NULL;
    p->n_groups = p->fused_calls = p->n_fused_away = p->cap_fused_away = 0;
}
