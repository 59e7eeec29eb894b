/*
 * reduce.c - CPU kernel of the reduce family: sum, mean, max, min, prod, l2 and logsumexp over
 * any set of axes.
 *
 * The input's axes are split into kept axes (one output element per index) and reduced axes;
 * size-1 axes are dropped and neighbouring axes that are evenly spaced in memory merge, so most
 * reductions become one of two shapes, each with its own loop:
 *  - rows: the innermost reduced axis is the innermost in memory. Each output element reduces
 *    rows of its sub-space; a contiguous row goes through a vectorised (pairwise for sums)
 *    loop. Threads take output elements, or, when there are few outputs (a full sum), each
 *    output's sub-space is cut into slices whose partial results are combined in order.
 *  - columns: a kept axis is innermost in memory (sum over axis 0 of an (N, C) matrix). Outputs
 *    are accumulated row after row in a buffer, so memory is read in order. When the outputs
 *    are not too many (SPLIT_MAX), the rows are cut into slices, each with a buffer of all
 *    of them, and the buffers are combined in order; otherwise threads take blocks of outputs.
 *
 * Threads run on libcore's pool (thread_pool.h). The slices depend on the shapes alone, never
 * on the thread count, so a reduction gives bitwise the same answer at any thread count (the
 * OpenMP regions of before cut one slice a thread, and took the sliced path only from two).
 *
 * Accumulators are double for float inputs (float32 sums are accurate to float32 rounding)
 * and int64 for integer inputs (wrapping like numpy); the loops are in reduce_loops.h.
 * logsumexp runs two passes: the max, then the sum of exp(x - max).
 */
#include <stdlib.h>

#include "parallel.h"
#include "reduce_loops.h"

static acc_t identity(int kind, bool fl) {
    acc_t a;
    switch (kind) {
        case K_MUL: if (fl) a.f = 1; else a.i = 1; break;
        case K_MAX: if (fl) a.f = -INFINITY; else a.i = INT64_MIN; break;
        case K_MIN: if (fl) a.f = INFINITY; else a.i = INT64_MAX; break;
        default: if (fl) a.f = 0; else a.i = 0; break;
    }
    return a;
}

static void combine(int kind, bool fl, acc_t *a, acc_t b) {
    switch (kind) {
        case K_MUL:
            if (fl) a->f *= b.f; else a->i = (int64_t)((uint64_t)a->i * (uint64_t)b.i);
            break;
        case K_MAX:
            if (fl) a->f = max_nan(a->f, b.f); else a->i = HL_MAX(a->i, b.i);
            break;
        case K_MIN:
            if (fl) a->f = min_nan(a->f, b.f); else a->i = HL_MIN(a->i, b.i);
            break;
        default:
            if (fl) a->f += b.f; else a->i = (int64_t)((uint64_t)a->i + (uint64_t)b.i);
            break;
    }
}

/* ---- the reduction plan ---- */

typedef struct {
    int op;
    bool fl;              /* float accumulation (double) rather than int64 */
    int kinds[2], npass;  /* logsumexp: K_MAX then K_EXP; the others one pass */
    row_fn row[2];
    col_fn col[2];
    int nk, nr;
    int64_t kshape[HL_MAX_DIMS], kxs[HL_MAX_DIMS], kos[HL_MAX_DIMS];  /* elements */
    int64_t rshape[HL_MAX_DIMS], rxs[HL_MAX_DIMS];
    int64_t nout, rcount;
    const char *x;
    char *o;
    int64_t xsz, osz;
    hl_dtype odt;
} plan_t;

static void make_plan(const hl_call *c, plan_t *P) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    uint64_t mask = (uint64_t)c->i[0];
    bool keep = c->i[1] != 0;
    int t = type_index(x->dtype);
    P->op = c->op;
    P->fl = t == T_F32 || t == T_F64;
    P->npass = 1;
    switch (c->op) {
        case HL_OP_SUM: case HL_OP_MEAN: P->kinds[0] = K_ADD; break;
        case HL_OP_L2: P->kinds[0] = K_SQ; break;
        case HL_OP_PROD: P->kinds[0] = K_MUL; break;
        case HL_OP_MAX: P->kinds[0] = K_MAX; break;
        case HL_OP_MIN: P->kinds[0] = K_MIN; break;
        default: P->kinds[0] = K_MAX; P->kinds[1] = K_EXP; P->npass = 2; break;  /* logsumexp */
    }
    for (int k = 0; k < P->npass; k++) {
        P->row[k] = row_fns[t][P->kinds[k]];
        P->col[k] = col_fns[t][P->kinds[k]];
    }
    /* Split the axes; size-1 axes change no address and are left out. */
    int nk = 0, nr = 0, oaxis = 0;
    P->rcount = 1;
    for (int d = 0; d < x->ndim; d++) {
        bool red = (mask >> d) & 1;
        if (red) {
            P->rcount *= x->shape[d];
            if (x->shape[d] != 1) {
                P->rshape[nr] = x->shape[d];
                P->rxs[nr++] = x->strides[d];
            }
            if (keep) oaxis++;
        } else {
            if (x->shape[d] != 1) {
                P->kshape[nk] = x->shape[d];
                P->kxs[nk] = x->strides[d];
                P->kos[nk++] = o->strides[oaxis];
            }
            oaxis++;
        }
    }
    /* Merge kept axes that are evenly spaced in both the input and the output. */
    int m = 0;
    for (int i = 0; i < nk; i++) {
        if (m > 0 && P->kxs[m - 1] == P->kxs[i] * P->kshape[i] &&
            P->kos[m - 1] == P->kos[i] * P->kshape[i]) {
            P->kshape[m - 1] *= P->kshape[i];
            P->kxs[m - 1] = P->kxs[i];
            P->kos[m - 1] = P->kos[i];
        } else {
            P->kshape[m] = P->kshape[i];
            P->kxs[m] = P->kxs[i];
            P->kos[m++] = P->kos[i];
        }
    }
    nk = m;
    /* The order of the reduced axes is free: sort them by decreasing |stride| so the innermost
       is the closest in memory, then merge evenly spaced ones. */
    for (int i = 1; i < nr; i++)
        for (int j = i; j > 0 && llabs(P->rxs[j - 1]) < llabs(P->rxs[j]); j--) {
            int64_t ts = P->rshape[j], tx = P->rxs[j];
            P->rshape[j] = P->rshape[j - 1];
            P->rxs[j] = P->rxs[j - 1];
            P->rshape[j - 1] = ts;
            P->rxs[j - 1] = tx;
        }
    m = 0;
    for (int i = 0; i < nr; i++) {
        if (m > 0 && P->rxs[m - 1] == P->rxs[i] * P->rshape[i]) {
            P->rshape[m - 1] *= P->rshape[i];
            P->rxs[m - 1] = P->rxs[i];
        } else {
            P->rshape[m] = P->rshape[i];
            P->rxs[m++] = P->rxs[i];
        }
    }
    nr = m;
    if (nr == 0) {  /* every reduced axis had size 1: one element per output */
        P->rshape[0] = 1;
        P->rxs[0] = 0;
        nr = 1;
    }
    P->nk = nk;
    P->nr = nr;
    P->nout = hl_shape_numel(nk, P->kshape);
    P->x = hl_ptr(x);
    P->o = hl_ptr(o);
    P->xsz = (int64_t)hl_dtype_size(x->dtype);
    P->osz = (int64_t)hl_dtype_size(o->dtype);
    P->odt = o->dtype;
}

/* Writes the finished accumulator a (with the logsumexp shift m) to dst. */
static void store(const plan_t *P, acc_t a, double m, char *dst) {
    if (P->fl) {
        double v = a.f;
        switch (P->op) {
            case HL_OP_MEAN: v = a.f / (double)P->rcount; break;
            case HL_OP_L2: v = sqrt(a.f); break;
            case HL_OP_LOGSUMEXP: v = isfinite(m) ? m + log(a.f) : m; break;
            default: break;
        }
        if (P->odt == HL_F32) *(float *)dst = (float)v;
        else *(double *)dst = v;
        return;
    }
    switch (P->odt) {
        case HL_I32: *(int32_t *)dst = (int32_t)a.i; break;
        case HL_I64: *(int64_t *)dst = a.i; break;
        default: *(uint8_t *)dst = (uint8_t)a.i; break;
    }
}

/* ---- odometers over a set of axes ---- */

typedef struct {
    int64_t idx[HL_MAX_DIMS];
    int64_t off, off2;  /* offsets in elements along two stride sets */
} odo_t;

static void odo_set(odo_t *it, int n, const int64_t *shape, const int64_t *s1,
                    const int64_t *s2, int64_t lin) {
    it->off = it->off2 = 0;
    for (int d = n - 1; d >= 0; d--) {
        it->idx[d] = lin % shape[d];
        lin /= shape[d];
        it->off += it->idx[d] * s1[d];
        if (s2) it->off2 += it->idx[d] * s2[d];
    }
}

static void odo_next(odo_t *it, int n, const int64_t *shape, const int64_t *s1,
                     const int64_t *s2) {
    for (int d = n - 1; d >= 0; d--) {
        it->off += s1[d];
        if (s2) it->off2 += s2[d];
        if (++it->idx[d] < shape[d]) return;
        it->off -= shape[d] * s1[d];
        if (s2) it->off2 -= shape[d] * s2[d];
        it->idx[d] = 0;
    }
}

/* Reduces positions [lo, hi) of the reduced sub-space (row-major over the reduced axes) that
   starts at base into *a, one row of the innermost axis at a time. */
static void reduce_range(const plan_t *P, row_fn fn, const char *base, int64_t lo, int64_t hi,
                         acc_t *a, double shift) {
    int nr = P->nr;
    int64_t len = P->rshape[nr - 1], s = P->rxs[nr - 1];
    if (lo >= hi) return;
    odo_t it;
    odo_set(&it, nr - 1, P->rshape, P->rxs, NULL, lo / len);
    int64_t col = lo % len, pos = lo;
    while (pos < hi) {
        int64_t take = HL_MIN(len - col, hi - pos);
        fn(base + (it.off + col * s) * P->xsz, take, s, a, shift);
        pos += take;
        col = 0;
        odo_next(&it, nr - 1, P->rshape, P->rxs, NULL);
    }
}

/* PARALLEL_MIN: elements below which one thread does it all. BLOCK: outputs a column block
   holds. SPLIT_MAX: outputs up to which, in the column layout, every slice keeps a buffer of
   all of them and takes a share of the rows (reading memory in order). Rows: the sliced path
   is for fewer than SPLIT_ROWS_MAX outputs (below, threads take whole outputs). Slices: at
   most SLICES_MAX, of at least SLICE_MIN elements, at least SLICE_MIN_ROWS reduced rows in
   the column layout, and SLICE_ACCS accumulators in all. */
enum {
    PARALLEL_MIN = 32768, BLOCK = 1024, SPLIT_MAX = 32768, SPLIT_ROWS_MAX = 16,
    SLICES_MAX = 16, SLICE_MIN = 8192, SLICE_MIN_ROWS = 4, SLICE_ACCS = 1 << 18
};

/* How many slices a sliced reduction cuts its work into: a function of the shapes alone. */
static int64_t slice_count(const plan_t *P, bool columns) {
    int64_t total = P->nout * P->rcount;
    if (total < PARALLEL_MIN) return 1;
    int64_t n = HL_MIN(SLICES_MAX, total / SLICE_MIN);
    n = HL_MIN(n, SLICE_ACCS / P->nout);
    if (columns) n = HL_MIN(n, P->rcount / SLICE_MIN_ROWS);
    else n = HL_MIN(n, P->rcount);
    return HL_MAX(n, 1);
}


/* ---- rows ---- */

/* Outputs [begin, end), each reduced whole. */
static void rows_outputs(int64_t begin, int64_t end, void *ctx) {
    const plan_t *P = ctx;
    odo_t it;
    odo_set(&it, P->nk, P->kshape, P->kxs, P->kos, begin);
    for (int64_t o = begin; o < end; o++) {
        const char *base = P->x + it.off * P->xsz;
        acc_t a = identity(P->kinds[0], P->fl);
        reduce_range(P, P->row[0], base, 0, P->rcount, &a, 0);
        double m = a.f;
        if (P->npass == 2) {
            a = identity(P->kinds[1], P->fl);
            reduce_range(P, P->row[1], base, 0, P->rcount, &a, m);
        }
        store(P, a, m, P->o + it.off2 * P->osz);
        odo_next(&it, P->nk, P->kshape, P->kxs, P->kos);
    }
}

/* Threads take whole outputs. */
static void rows_by_output(const plan_t *P) {
    int64_t total = P->nout * P->rcount;
    int64_t grain = HL_MAX(1, PARALLEL_MIN / 4 / HL_MAX(P->rcount, 1));
    hl_parallel_for(P->nout, total >= PARALLEL_MIN ? grain : P->nout, rows_outputs, (void *)P);
}

/* Partial results, one row of nout a slice, each set to the reduction's identity. */
static acc_t *partials_new(const plan_t *P, int kind, int64_t slices) {
    acc_t *part = malloc(sizeof(acc_t) * (size_t)(slices * P->nout));
    if (part)
        for (int64_t k = 0; k < slices * P->nout; k++) part[k] = identity(kind, P->fl);
    return part;
}

/* result[o] = the slices' partials for o combined in slice order (a repeatable answer);
   frees part. */
static void partials_combine(const plan_t *P, int kind, int64_t slices, acc_t *part,
                             acc_t *result) {
    for (int64_t o = 0; o < P->nout; o++) {
        result[o] = identity(kind, P->fl);
        for (int64_t t = 0; t < slices; t++)
            combine(kind, P->fl, &result[o], part[t * P->nout + o]);
    }
    free(part);
}

/* A pass of a sliced reduction: the plan, the pass, its shift (logsumexp's second pass),
   the partials and the slice count; the column layout's geometry when it is the one. */
typedef struct cols_t cols_t;
typedef struct {
    const plan_t *P;
    const cols_t *Q;
    int pass;
    const acc_t *shift;
    acc_t *part;
    int64_t slices;
} slice_job;

/* Slices [s0, s1) of every output's sub-space, each into its own row of partials. */
static void rows_slices(int64_t s0, int64_t s1, void *ctx) {
    const slice_job *q = ctx;
    const plan_t *P = q->P;
    for (int64_t t = s0; t < s1; t++) {
        int64_t lo = P->rcount * t / q->slices, hi = P->rcount * (t + 1) / q->slices;
        odo_t it;
        odo_set(&it, P->nk, P->kshape, P->kxs, NULL, 0);
        for (int64_t o = 0; o < P->nout; o++) {
            reduce_range(P, P->row[q->pass], P->x + it.off * P->xsz, lo, hi,
                         &q->part[t * P->nout + o], q->shift ? q->shift[o].f : 0);
            odo_next(&it, P->nk, P->kshape, P->kxs, NULL);
        }
    }
}

/* Runs one pass of a sliced reduction with `each` (rows_slices or cols_slices); result gets
   the slices' partials combined in slice order. */
static hl_status sliced_pass(slice_job *q, hl_range_fn each, acc_t *result) {
    const plan_t *P = q->P;
    int kind = P->kinds[q->pass];
    q->part = partials_new(P, kind, q->slices);
    if (!q->part) return hl_fail(HL_ERR_MEMORY, "%s: out of memory", hl_op_str(P->op));
    hl_parallel_for(q->slices, 1, each, q);
    partials_combine(P, kind, q->slices, q->part, result);
    return HL_OK;
}

/* ---- columns ---- */

/* Axis kin of the kept axes is innermost in memory; the others are the "outer" kept axes. */
struct cols_t {
    int kin, no;
    int64_t C, cxs, cos;
    int64_t oshape[HL_MAX_DIMS], oxs[HL_MAX_DIMS], oos[HL_MAX_DIMS];
    int64_t nouter;
};

static void make_cols(const plan_t *P, int kin, cols_t *Q) {
    Q->kin = kin;
    Q->C = P->kshape[kin];
    Q->cxs = P->kxs[kin];
    Q->cos = P->kos[kin];
    Q->no = 0;
    for (int k = 0; k < P->nk; k++)
        if (k != kin) {
            Q->oshape[Q->no] = P->kshape[k];
            Q->oxs[Q->no] = P->kxs[k];
            Q->oos[Q->no++] = P->kos[k];
        }
    Q->nouter = hl_shape_numel(Q->no, Q->oshape);
}

/* Accumulates reduced rows [lo, hi) (row-major over the reduced axes) of the block of n
   columns starting at base into buf, a run of the innermost reduced axis per call. */
static void col_range(const plan_t *P, col_fn fn, const cols_t *Q, const char *base, int64_t n,
                      int64_t lo, int64_t hi, acc_t *buf, const acc_t *shift) {
    int nr = P->nr;
    int64_t len = P->rshape[nr - 1], rs = P->rxs[nr - 1];
    if (lo >= hi) return;
    odo_t it;
    odo_set(&it, nr - 1, P->rshape, P->rxs, NULL, lo / len);
    int64_t r0 = lo % len, pos = lo;
    while (pos < hi) {
        int64_t take = HL_MIN(len - r0, hi - pos);
        fn(buf, base + (it.off + r0 * rs) * P->xsz, n, Q->cxs, take, rs, shift);
        pos += take;
        r0 = 0;
        odo_next(&it, nr - 1, P->rshape, P->rxs, NULL);
    }
}

typedef struct {
    const plan_t *P;
    const cols_t *Q;
    int64_t nblk;
} block_job;

/* Items [i0, i1) of (outer index, block of BLOCK adjacent outputs). */
static void cols_blocks(int64_t i0, int64_t i1, void *ctx) {
    const block_job *q = ctx;
    const plan_t *P = q->P;
    const cols_t *Q = q->Q;
    for (int64_t item = i0; item < i1; item++) {
        acc_t buf[2][BLOCK];
        int64_t j0 = (item % q->nblk) * BLOCK, n = HL_MIN(BLOCK, Q->C - j0);
        odo_t it;
        odo_set(&it, Q->no, Q->oshape, Q->oxs, Q->oos, item / q->nblk);
        const char *base = P->x + (it.off + j0 * Q->cxs) * P->xsz;
        for (int pass = 0; pass < P->npass; pass++) {
            for (int64_t j = 0; j < n; j++) buf[pass][j] = identity(P->kinds[pass], P->fl);
            col_range(P, P->col[pass], Q, base, n, 0, P->rcount, buf[pass], pass ? buf[0] : NULL);
        }
        char *dst = P->o + (it.off2 + j0 * Q->cos) * P->osz;
        for (int64_t j = 0; j < n; j++)
            store(P, buf[P->npass - 1][j], buf[0][j].f, dst + j * Q->cos * P->osz);
    }
}

/* Threads take blocks of BLOCK adjacent outputs. */
static void cols_by_block(const plan_t *P, const cols_t *Q) {
    block_job q = {P, Q, (Q->C + BLOCK - 1) / BLOCK};
    int64_t items = Q->nouter * q.nblk;
    hl_parallel_for(items, P->nout * P->rcount >= PARALLEL_MIN ? 1 : items, cols_blocks, &q);
}

/* Slices [s0, s1) of the reduced rows, each with its own buffer of every output. */
static void cols_slices(int64_t s0, int64_t s1, void *ctx) {
    const slice_job *q = ctx;
    const plan_t *P = q->P;
    const cols_t *Q = q->Q;
    for (int64_t t = s0; t < s1; t++) {
        int64_t lo = P->rcount * t / q->slices, hi = P->rcount * (t + 1) / q->slices;
        odo_t it;
        odo_set(&it, Q->no, Q->oshape, Q->oxs, NULL, 0);
        for (int64_t o = 0; o < Q->nouter; o++) {
            col_range(P, P->col[q->pass], Q, P->x + it.off * P->xsz, Q->C, lo, hi,
                      &q->part[t * P->nout + o * Q->C], q->shift ? q->shift + o * Q->C : NULL);
            odo_next(&it, Q->no, Q->oshape, Q->oxs, NULL);
        }
    }
}

/* ---- the kernel ---- */

/* Writes results (laid out row-major over the kept axes, the column axis of Q last when Q is
   given) to the output. */
static void store_all(const plan_t *P, const cols_t *Q, const acc_t *res, const acc_t *shift) {
    if (Q) {
        odo_t it;
        odo_set(&it, Q->no, Q->oshape, Q->oos, NULL, 0);
        for (int64_t o = 0; o < Q->nouter; o++) {
            for (int64_t j = 0; j < Q->C; j++) {
                int64_t k = o * Q->C + j;
                store(P, res[k], shift ? shift[k].f : 0, P->o + (it.off + j * Q->cos) * P->osz);
            }
            odo_next(&it, Q->no, Q->oshape, Q->oos, NULL);
        }
        return;
    }
    odo_t it;
    odo_set(&it, P->nk, P->kshape, P->kos, NULL, 0);
    for (int64_t o = 0; o < P->nout; o++) {
        store(P, res[o], shift ? shift[o].f : 0, P->o + it.off * P->osz);
        odo_next(&it, P->nk, P->kshape, P->kos, NULL);
    }
}

/* in[0] = x; out[0]; i[0] = bit mask of the reduced axes of x, i[1] = keepdims. The entry
   point has checked the dtypes and that max/min do not reduce an empty set. */
hl_status hl_cpu_reduce(const hl_call *c) {
    int t = type_index(c->in[0]->dtype);
    bool fl = t == T_F32 || t == T_F64;
    if (t < 0 || (!fl && c->op != HL_OP_SUM && c->op != HL_OP_PROD && c->op != HL_OP_MAX &&
                  c->op != HL_OP_MIN))
        return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op),
                       hl_desc(c->in[0]));
    plan_t P;
    make_plan(c, &P);
    if (P.nout == 0) return HL_OK;
    /* The kept axis closest in memory, and whether it is closer than the reduced rows. A
       reduction over axes of size 1 alone (a bias gradient at batch 1) has one row: the
       column loop maps it in one vectorised pass, not an odometer step per output. */
    int kin = -1;
    for (int k = 0; k < P.nk; k++)
        if (kin < 0 || llabs(P.kxs[k]) < llabs(P.kxs[kin])) kin = k;
    bool columns = kin >= 0 && P.rcount > 0 && P.kshape[kin] >= 4 &&
                   (P.rcount == 1 || llabs(P.kxs[kin]) < llabs(P.rxs[P.nr - 1]));
    /* the choice of path and the slices depend on the shapes alone: the same answer at any
       thread count */
    const int64_t slices = slice_count(&P, columns);
    cols_t Q;
    if (!columns) {
        if (slices < 2 || P.nout >= SPLIT_ROWS_MAX) {
            rows_by_output(&P);
            return HL_OK;
        }
    } else {
        make_cols(&P, kin, &Q);
        if (slices < 2 || P.nout > SPLIT_MAX) {
            cols_by_block(&P, &Q);
            return HL_OK;
        }
    }
    /* Few outputs, much to reduce: the slices share each output's work. */
    acc_t *res = malloc(sizeof(acc_t) * (size_t)(2 * P.nout));
    if (!res) return hl_fail(HL_ERR_MEMORY, "%s: out of memory", hl_op_str(P.op));
    acc_t *shift = P.npass == 2 ? res + P.nout : NULL;
    hl_status st = HL_OK;
    for (int pass = 0; pass < P.npass && !st; pass++) {
        acc_t *dst = (pass == 0 && shift) ? shift : res;
        slice_job q = {&P, columns ? &Q : NULL, pass, pass ? shift : NULL, NULL, slices};
        st = sliced_pass(&q, columns ? cols_slices : rows_slices, dst);
    }
    if (!st) store_all(&P, columns ? &Q : NULL, res, shift);
    free(res);
    return st;
}
