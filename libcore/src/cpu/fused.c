/*
 * fused.c - runs a fused element-wise pass (core.h's hl_fused, built by plan/fuse.c): one
 * strided, parallel loop (loops.c) over every operand of the chain; each row is cut into short
 * runs that go through every step while they are in the L1 cache, intermediates in scratch.
 */
#include "loops.h"

enum { RUN = 256 };  /* elements per run: 8 scratch buffers of 2 KiB stay in L1 */

int hl_cpu_fusible(int op, hl_dtype d) { return hl_cpu_elementwise_row(op, d) != NULL; }

static void fused_row(char **p, const int64_t *s, int64_t n, const void *ctx) {
    const hl_fused *f = ctx;
    _Alignas(64) char scratch[HL_FUSED_MAX_SCRATCH][RUN * 8];
    const int64_t esz = (int64_t)hl_dtype_size(f->dtype);
    hl_row_fn fns[HL_FUSED_MAX_STEPS];
    for (int k = 0; k < f->n_steps; k++) fns[k] = hl_cpu_elementwise_row(f->steps[k].op, f->dtype);
    for (int64_t lo = 0; lo < n; lo += RUN) {
        int64_t m = HL_MIN(RUN, n - lo);
        for (int k = 0; k < f->n_steps; k++) {
            const hl_fused_step *st = &f->steps[k];
            char *q[3];
            int64_t qs[3];
            for (int a = 0; a <= st->n_in; a++) {
                int arg = st->arg[a];
                if (arg >= 0) {
                    q[a] = p[arg] + lo * s[arg];
                    qs[a] = s[arg];
                } else {
                    q[a] = scratch[-1 - arg];
                    qs[a] = esz;
                }
            }
            fns[k](q, qs, m, st->params);
        }
    }
}

hl_status hl_cpu_fused_run(const hl_fused *f) {
    hl_loop L;
    hl_loop_init(&L, f->n_operands, f->operands);
    hl_loop_run(&L, fused_row, f);
    return HL_OK;
}
