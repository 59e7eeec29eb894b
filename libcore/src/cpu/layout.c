/*
 * layout.c - CPU kernels of the shape-changing copies. concat copies each part into its slice
 * of the output with the strided copy loop; pad and tile build one index map per axis and
 * gather through hl_cpu_remap (remap.h). See api/layout.c for the call records.
 */
#include <stdlib.h>

#include "loops.h"
#include "remap.h"

static void copy_row(char **p, const int64_t *s, int64_t n, const void *ctx) {
    int64_t esz = *(const int64_t *)ctx;
    if (s[0] == esz && s[1] == esz) {
        memcpy(p[0], p[1], (size_t)(n * esz));
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], p[1] + i * s[1], (size_t)esz);
}

hl_status hl_cpu_concat(const hl_call *c) {
    hl_tensor *o = c->out[0];
    int axis = (int)c->i[0];
    int64_t esz = (int64_t)hl_dtype_size(o->dtype), at = 0;
    for (int k = 0; k < c->n_in; k++) {
        const hl_tensor *x = hl_call_in(c, k);
        int64_t len = x->shape[axis];
        if (hl_shape_numel(x->ndim, x->shape) > 0) {
            /* The part's slice of the output, as a tensor struct on the stack: no allocation
               and no reference counting, it lives only for this loop. */
            hl_tensor part = *o;
            part.shape[axis] = len;
            part.offset += at * o->strides[axis];
            const hl_tensor *ops[2] = {&part, x};
            hl_loop L;
            hl_loop_init(&L, 2, ops);
            hl_loop_run(&L, copy_row, &esz);
        }
        at += len;
    }
    return HL_OK;
}

/* Axis d of pad: output position o reads input position o - begin, inside the kept (cropped)
   range [lo, hi); outside it, constant mode takes the fill value, edge clamps to the range,
   and reflect mirrors about its end elements (the entry point checked pad < hi - lo). */
static void pad_map(int64_t *map, int64_t n_out, int64_t n, int64_t begin, int64_t end,
                    int mode) {
    int64_t lo = begin < 0 ? -begin : 0, hi = n - (end < 0 ? -end : 0);
    for (int64_t o = 0; o < n_out; o++) {
        int64_t i = o - begin;
        if (i < lo) i = mode == 0 ? HL_REMAP_FILL : mode == 2 ? lo : 2 * lo - i;
        else if (i >= hi) i = mode == 0 ? HL_REMAP_FILL : mode == 2 ? hi - 1 : 2 * (hi - 1) - i;
        map[o] = i;
    }
}

hl_status hl_cpu_pad(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int nd = o->ndim, mode = (int)c->i[0];
    int64_t *maps[HL_MAX_DIMS];
    int64_t *block = hl_cpu_alloc_maps(nd, o->shape, maps);
    if (!block) return hl_fail(HL_ERR_MEMORY, "pad: out of memory for the index maps of %s",
                               hl_desc(o));
    for (int d = 0; d < nd; d++)
        pad_map(maps[d], o->shape[d], x->shape[d], c->i[1 + d], c->i[1 + nd + d], mode);
    uint64_t fill;
    hl_cpu_value_bits(o->dtype, c->f[0], &fill);
    hl_cpu_remap(x, o, maps, &fill);
    free(block);
    return HL_OK;
}

hl_status hl_cpu_tile(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int nd = o->ndim;
    if (hl_shape_numel(nd, o->shape) == 0) return HL_OK;
    int64_t *maps[HL_MAX_DIMS];
    int64_t *block = hl_cpu_alloc_maps(nd, o->shape, maps);
    if (!block) return hl_fail(HL_ERR_MEMORY, "tile: out of memory for the index maps of %s",
                               hl_desc(o));
    for (int d = 0; d < nd; d++)
        for (int64_t k = 0; k < o->shape[d]; k++) maps[d][k] = k % x->shape[d];
    hl_cpu_remap(x, o, maps, NULL);
    free(block);
    return HL_OK;
}
