/*
 * plan/slice.c - runs of consecutive convolutions over activations larger than the cache,
 * replayed a slice of the batch at a time: every convolution of the run for samples [0, per),
 * then every one for [per, 2 per), ... so that what one layer writes is still in L3 when the
 * next reads it. Replayed layer by layer, MobileNetV2 at batch 8 writes a 38.5 MB tensor
 * (96 x 112 x 112 x 8) that the next layer reads back from memory: its first eleven layers
 * took 1.2-2.2x eight times their batch-1 time (docs/performance.md, "Issue 21: MobileNetV2,
 * sixth pass").
 *
 * A convolution's output for sample s reads only sample s of its input (and of its residual),
 * and its kernels' sums do not depend on the batch (the packed product's blocks and K steps
 * follow the positions of one sample; the depthwise and stem kernels work plane by plane), so
 * a sliced replay is bit for bit the layer-by-layer one. A run only holds calls whose
 * batched tensors (input, residual, output) are contiguous over one batch size, and where a
 * storage one call of the run writes is seen by the run's calls only through that same view
 * (so every slice of it is one sample range). The memory plan (memory.c) keeps every storage
 * a run touches alive over the whole run: a later layer's output never takes the bytes of an
 * earlier layer's output that later slices still read.
 */
#include "plan.h"

enum {
    /* A call joins a run when its input and output over the batch take at least this many
       bytes: more than the share of L3 (32 MiB, shared with the host's other guests) that
       survives from one layer to the next. MobileNetV2 at 224 and batch 8: its first eleven
       layers, up to the 56x56 -> 28x28 depthwise (12-45 MB each); at batch 1, none. */
    SLICE_MIN_BYTES = 8 << 20,
    /* A slice holds as many samples as keep its largest call's input and output within this
       (MobileNetV2: one sample, 5.6 MB at most; two a slice were 3% slower at one thread). */
    SLICE_BYTES = 6 << 20,
};

/* The inputs of conv call c holding one sample per index of their first dimension: x and,
   for conv_fused with a residual, the residual (api/conv.c's order: x, w, bias, residual,
   packed). Returns how many. */
static int batched_inputs(const hl_call *c, int idx[2]) {
    int n = 0;
    idx[n++] = 0;
    if (c->op == HL_OP_CONV_FUSED && c->i[11]) idx[n++] = c->i[10] ? 3 : 2;
    return n;
}

/* Whether tensor k of call c (inputs first, then outputs) is one of its batched tensors. */
static bool is_batched(const hl_call *c, int k) {
    if (k >= c->n_in) return true;  /* a convolution's one output */
    int idx[2], n = batched_inputs(c, idx);
    for (int j = 0; j < n; j++)
        if (idx[j] == k) return true;
    return false;
}

static int64_t tensor_bytes(const hl_tensor *t) {
    return hl_tensor_numel(t) * (int64_t)hl_dtype_size(t->dtype);
}

/* Call i's batch when it may join a run (a CPU convolution outside a fused group whose
   batched tensors are contiguous over one batch of at least 2 and large: SLICE_MIN_BYTES);
   else 0. *sample_bytes: its input's and output's bytes per sample. */
static int64_t sliceable(const hl_plan *p, int64_t i, int64_t *sample_bytes) {
    const hl_call *c = &p->calls[i];
    if ((c->op != HL_OP_CONV && c->op != HL_OP_CONV_FUSED) || c->in_many || c->n_out != 1 ||
        c->n_in < 2 || (p->group_of && p->group_of[i] >= 0))
        return 0;
    const hl_tensor *y = c->out[0];
    if (!y || y->storage->device.kind != HL_DEVICE_CPU || y->ndim < 3) return 0;
    const int64_t batch = y->shape[0];
    if (batch < 2) return 0;
    int idx[2], n = batched_inputs(c, idx);
    for (int j = 0; j < n; j++) {
        const hl_tensor *t = idx[j] < c->n_in ? c->in[idx[j]] : NULL;
        if (!t || t->ndim != y->ndim || t->shape[0] != batch || !hl_tensor_is_contiguous(t))
            return 0;
    }
    if (!hl_tensor_is_contiguous(y)) return 0;
    const int64_t bytes = tensor_bytes(c->in[0]) + tensor_bytes(y);
    if (bytes < SLICE_MIN_BYTES) return 0;
    *sample_bytes = bytes / batch;
    return batch;
}

/* Whether call j may join the run [first, j): every storage that a call of [first, j] writes
   is seen by these calls only as batched tensors with one view. */
static bool views_agree(const hl_plan *p, int64_t first, int64_t j) {
    const hl_call *c = &p->calls[j];
    for (int64_t d = first; d <= j; d++) {
        const hl_call *e = &p->calls[d];
        for (int a = 0; a < c->n_in + c->n_out; a++) {
            const hl_tensor *t = hl_call_tensor(c, a);
            if (!t) continue;
            for (int b = 0; b < e->n_in + e->n_out; b++) {
                const hl_tensor *u = hl_call_tensor(e, b);
                if (!u || (d == j && a == b) || t->storage != u->storage) continue;
                if (a < c->n_in && b < e->n_in) continue;  /* both read: any views */
                if (!is_batched(c, a) || !is_batched(e, b) || !hl_same_view(t, u)) return false;
            }
        }
    }
    return true;
}

static hl_status add_run(hl_plan *p, int64_t first, int64_t last, int64_t batch,
                         int64_t sample_bytes) {
    const int64_t per = HL_MAX(1, SLICE_BYTES / HL_MAX(1, sample_bytes));
    if (last <= first || per >= batch) return HL_OK;  /* one call, or one slice: nothing won */
    if (!p->slice_of) {
        p->slice_of = malloc(sizeof *p->slice_of * (size_t)p->n);
        p->slice_local = calloc((size_t)p->n, 1);
        if (!p->slice_of || !p->slice_local)
            return hl_fail(HL_ERR_MEMORY, "plan_run: out of memory");
        for (int64_t i = 0; i < p->n; i++) p->slice_of[i] = -1;
    }
    plan_slice_run *runs = realloc(p->slice_runs, sizeof *runs * (size_t)(p->n_slice_runs + 1));
    if (!runs) return hl_fail(HL_ERR_MEMORY, "plan_run: out of memory");
    p->slice_runs = runs;
    runs[p->n_slice_runs] = (plan_slice_run){first, last, batch, per};
    for (int64_t i = first; i <= last; i++) p->slice_of[i] = (int)p->n_slice_runs;
    p->n_slice_runs++;
    p->sliced_calls += last - first + 1;
    return HL_OK;
}

hl_status hl_plan_find_slices(hl_plan *p) {
    int64_t first = -1, batch = 0, most = 0;
    for (int64_t i = 0; i <= p->n; i++) {
        int64_t bytes = 0, b = i < p->n ? sliceable(p, i, &bytes) : 0;
        if (first >= 0 && b == batch && views_agree(p, first, i)) {
            most = HL_MAX(most, bytes);
            continue;
        }
        if (first >= 0) {
            hl_status st = add_run(p, first, i - 1, batch, most);
            if (st) return st;
        }
        first = b ? i : -1;
        batch = b;
        most = bytes;
    }
    return HL_OK;
}

void hl_plan_free_slices(hl_plan *p) {
    free(p->slice_of);
    free(p->slice_runs);
    free(p->slice_local);
    p->slice_local = NULL;
    p->slice_of = NULL;
    p->slice_runs = NULL;
    p->n_slice_runs = p->sliced_calls = 0;
}

bool hl_plan_sliced_at(const hl_plan *p, int64_t i, int64_t to) {
    if (!p->slice_of || p->slice_of[i] < 0) return false;
    const plan_slice_run *r = &p->slice_runs[p->slice_of[i]];
    return r->first == i && r->last < to;
}

/* The sliced run that starts at call `first`, or NULL. */
static const plan_slice_run *run_from(const hl_plan *p, int64_t first) {
    if (!p->slice_of || first < 0 || first >= p->n || p->slice_of[first] < 0) return NULL;
    const plan_slice_run *r = &p->slice_runs[p->slice_of[first]];
    return r->first == first ? r : NULL;
}

/* The batched tensor `bit` of call c (bit 0: input, 1: residual, 2: output), or NULL. */
static const hl_tensor *batched(const hl_call *c, int bit) {
    int idx[2], n = batched_inputs(c, idx);
    return bit == 2 ? c->out[0] : bit < n ? c->in[idx[bit]] : NULL;
}

int64_t hl_plan_slice_bytes(const hl_plan *p, const hl_storage *s, int64_t first, int64_t last) {
    const plan_slice_run *r = run_from(p, first);
    if (!r || r->last != last) return -1;
    for (int64_t k = r->first; k <= r->last; k++)
        for (int bit = 0; bit < 3; bit++) {
            const hl_tensor *t = batched(&p->calls[k], bit);
            if (t && t->storage == s)  /* views_agree: every one of them alike */
                return (t->offset + r->per * t->strides[0]) * (int64_t)hl_dtype_size(t->dtype);
        }
    return -1;
}

void hl_plan_mark_slice_local(hl_plan *p, const hl_storage *s, int64_t call) {
    const plan_slice_run *r = p->slice_of && p->slice_of[call] >= 0
                                  ? &p->slice_runs[p->slice_of[call]] : NULL;
    for (int64_t k = r ? r->first : 0; r && k <= r->last; k++)
        for (int bit = 0; bit < 3; bit++) {
            const hl_tensor *t = batched(&p->calls[k], bit);
            if (t && t->storage == s) p->slice_local[k] |= (unsigned char)(1u << bit);
        }
}

/* A view of t holding samples [s0, s0 + n) of its first dimension. */
static const hl_tensor *sample_view(hl_tensor *view, const hl_tensor *t, int64_t s0, int64_t n) {
    *view = *t;
    view->shape[0] = n;
    view->offset += s0 * t->strides[0];
    return view;
}

hl_status hl_plan_run_sliced(hl_plan *p, int64_t i, int64_t *last, bool timed) {
    const plan_slice_run *r = &p->slice_runs[p->slice_of[i]];
    *last = r->last;
    for (int64_t s0 = 0; s0 < r->batch; s0 += r->per) {
        const int64_t n = HL_MIN(r->per, r->batch - s0);
        for (int64_t k = r->first; k <= r->last; k++) {
            hl_call c = p->calls[k];
            hl_tensor views[3];
            int idx[2], nb = batched_inputs(&c, idx);
            const unsigned local = p->slice_local[k];
            for (int j = 0; j < nb; j++)
                c.in[idx[j]] = sample_view(&views[j], c.in[idx[j]], local >> j & 1 ? 0 : s0, n);
            c.out[0] = (hl_tensor *)sample_view(&views[2], c.out[0], local >> 2 & 1 ? 0 : s0, n);
            const int64_t start = timed ? hl_plan_clock_ns() : 0;
            hl_status st = hl_plan_run_call_as(p, k, &c);
            if (st) return st;
            if (timed) hl_plan_profile_add(p, k, hl_plan_clock_ns() - start);
        }
    }
    return HL_OK;
}
