/* loops.c - see loops.h. */
#include "loops.h"
#include "thread_pool.h"

void hl_loop_init(hl_loop *L, int nop, const hl_tensor *const *ops) {
    const hl_tensor *out = ops[0];
    int nd = out->ndim;
    L->nop = nop;
    /* Byte strides aligned to the output's axes; broadcast axes get stride 0. */
    int64_t st[HL_LOOP_MAX_OPS][HL_MAX_DIMS];
    for (int k = 0; k < nop; k++) {
        const hl_tensor *t = ops[k];
        int lead = nd - t->ndim;
        int64_t esz = (int64_t)hl_dtype_size(t->dtype);
        for (int i = 0; i < nd; i++) {
            int64_t s = 0;
            if (i >= lead && t->shape[i - lead] != 1) s = t->strides[i - lead] * esz;
            st[k][i] = s;
        }
        L->base[k] = hl_ptr(t);
    }
    /* Drop size-1 axes, and merge axis i into the kept axis before it when, for every
       operand, a step along that outer axis is exactly shape[i] steps along axis i (then the
       two axes walk one evenly spaced run, and the merged axis takes axis i's stride). */
    int n = 0;
    for (int i = 0; i < nd; i++) {
        if (out->shape[i] == 1) continue;
        bool merge = n > 0;
        for (int k = 0; merge && k < nop; k++)
            merge = L->strides[k][n - 1] == st[k][i] * out->shape[i];
        if (merge) {
            L->shape[n - 1] *= out->shape[i];
            for (int k = 0; k < nop; k++) L->strides[k][n - 1] = st[k][i];
        } else {
            L->shape[n] = out->shape[i];
            for (int k = 0; k < nop; k++) L->strides[k][n] = st[k][i];
            n++;
        }
    }
    if (n == 0) {  /* a single element */
        L->shape[0] = 1;
        for (int k = 0; k < nop; k++) L->strides[k][0] = 0;
        n = 1;
    }
    L->ndim = n;
}

/* Rows of the inner axis are split into chunks so that one long row still parallelises. */
enum { CHUNK = 16384, PARALLEL_MIN = 32768 };

/* Every row in order on the calling thread. */
static void serial_rows(const hl_loop *L, hl_row_fn fn, const void *ctx, int64_t rows,
                        int64_t inner) {
    int nd = L->ndim, nop = L->nop;
    int64_t idx[HL_MAX_DIMS] = {0};
    char *p[HL_LOOP_MAX_OPS];
    int64_t s[HL_LOOP_MAX_OPS];
    for (int k = 0; k < nop; k++) s[k] = L->strides[k][nd - 1];
    for (int64_t r = 0; r < rows; r++) {
        for (int k = 0; k < nop; k++) {
            char *q = L->base[k];
            for (int i = 0; i < nd - 1; i++) q += idx[i] * L->strides[k][i];
            p[k] = q;
        }
        fn(p, s, inner, ctx);
        for (int i = nd - 2; i >= 0; i--) {
            if (++idx[i] < L->shape[i]) break;
            idx[i] = 0;
        }
    }
}

/* What each chunk of the pool's loop needs: items are (row, piece of the row) pairs. */
typedef struct {
    const hl_loop *L;
    hl_row_fn fn;
    const void *ctx;
    int64_t inner, chunks_per_row, chunk_len;
} loop_items;

/* Items [begin, end): whole rows or CHUNK-long pieces of them, in order. */
static void run_items(int64_t begin, int64_t end, void *arg) {
    const loop_items *it = arg;
    const hl_loop *L = it->L;
    const int nd = L->ndim, nop = L->nop;
    const int64_t chunks_per_row = it->chunks_per_row, chunk_len = it->chunk_len;
    /* multi-index of the first row this chunk takes */
    int64_t idx[HL_MAX_DIMS] = {0};
    int64_t row = begin / chunks_per_row, r = row;
    for (int i = nd - 2; i >= 0; i--) {
        idx[i] = r % L->shape[i];
        r /= L->shape[i];
    }
    int64_t chunk = begin % chunks_per_row;
    char *p[HL_LOOP_MAX_OPS];
    int64_t s[HL_LOOP_MAX_OPS];
    for (int k = 0; k < nop; k++) s[k] = L->strides[k][nd - 1];
    for (int64_t item = begin; item < end; item++) {
        int64_t lo = chunk * chunk_len, hi = HL_MIN(it->inner, lo + chunk_len);
        for (int k = 0; k < nop; k++) {
            char *q = L->base[k] + lo * s[k];
            for (int i = 0; i < nd - 1; i++) q += idx[i] * L->strides[k][i];
            p[k] = q;
        }
        it->fn(p, s, hi - lo, it->ctx);
        if (++chunk == chunks_per_row) {
            chunk = 0;
            for (int i = nd - 2; i >= 0; i--) {
                if (++idx[i] < L->shape[i]) break;
                idx[i] = 0;
            }
        }
    }
}

void hl_loop_run(const hl_loop *L, hl_row_fn fn, const void *ctx) {
    int nd = L->ndim;
    int64_t inner = L->shape[nd - 1], rows = 1;
    for (int i = 0; i < nd - 1; i++) rows *= L->shape[i];
    if (rows == 0 || inner == 0) return;
    int64_t chunks_per_row = (inner + CHUNK - 1) / CHUNK;
    int64_t chunk_len = (inner + chunks_per_row - 1) / chunks_per_row;
    int64_t total = rows * inner;
    if (total < PARALLEL_MIN) {  /* small: no parallel region at all (it costs ~1 us) */
        serial_rows(L, fn, ctx, rows, inner);
        return;
    }
    loop_items it = {L, fn, ctx, inner, chunks_per_row, chunk_len};
    hl_parallel_for(rows * chunks_per_row, 1, run_items, &it);
}
