/* remap.c - see remap.h. */
#include <stdlib.h>

#include "dtypes.h"
#include "remap.h"
#include "thread_pool.h"

void hl_cpu_value_bits(hl_dtype d, double v, uint64_t *bits) {
    *bits = 0;
    switch (d) {
        case HL_F32: { float x = (float)v; memcpy(bits, &x, sizeof x); break; }
        case HL_F64: memcpy(bits, &v, sizeof v); break;
        case HL_I32: { int32_t x = hl_sat_i32(v); memcpy(bits, &x, sizeof x); break; }
        case HL_I64: { int64_t x = hl_sat_i64(v); memcpy(bits, &x, sizeof x); break; }
        case HL_U8: { uint8_t x = hl_sat_u8(v); memcpy(bits, &x, sizeof x); break; }
        case HL_BOOL: { uint8_t x = v != 0; memcpy(bits, &x, sizeof x); break; }
        case HL_F16: { uint16_t x = hl_float_to_half((float)v); memcpy(bits, &x, sizeof x); break; }
        case HL_BF16: {
            uint16_t x = hl_float_to_bf16((float)v);
            memcpy(bits, &x, sizeof x);
            break;
        }
        default: break;
    }
}

int64_t *hl_cpu_alloc_maps(int ndim, const int64_t *n, int64_t **maps) {
    int64_t total = 0;
    for (int d = 0; d < ndim; d++) total += n[d];
    int64_t *block = malloc(sizeof(int64_t) * (size_t)(total > 0 ? total : 1));
    if (!block) return NULL;
    int64_t at = 0;
    for (int d = 0; d < ndim; d++) {
        maps[d] = block + at;
        at += n[d];
    }
    return block;
}

/* One output row (the last axis): `hole` says an outer axis already chose the fill value. */
#define REMAP_ROW(T)                                                                     \
    do {                                                                                 \
        T fv = 0;                                                                        \
        if (fill) memcpy(&fv, fill, sizeof fv);                                          \
        if (hole) {                                                                      \
            for (int64_t o = 0; o < w; o++) *(T *)(orow + o * os) = fv;                  \
        } else {                                                                         \
            for (int64_t o = 0; o < w; o++) {                                            \
                int64_t m = inner[o];                                                    \
                *(T *)(orow + o * os) = m == HL_REMAP_FILL ? fv : *(const T *)(xrow + m); \
            }                                                                            \
        }                                                                                \
    } while (0)

typedef struct {
    const hl_tensor *x, *out;
    int64_t *const *maps;
    const void *fill;
    const char *xbase;
    char *obase;
    int64_t esz, w, os;
} remap_job;

static void remap_rows(int64_t r0, int64_t r1, void *ctx) {
    const remap_job *q = ctx;
    const hl_tensor *out = q->out;
    int64_t *const *maps = q->maps;
    const void *fill = q->fill;
    const int nd = out->ndim;
    const int64_t esz = q->esz, w = q->w, os = q->os;
    const int64_t *inner = maps[nd - 1];
    for (int64_t r = r0; r < r1; r++) {
        int64_t rem = r, src = 0, dst = 0;
        bool hole = false;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t o = rem % out->shape[d];
            rem /= out->shape[d];
            int64_t m = maps[d][o];
            if (m == HL_REMAP_FILL) hole = true;
            else src += m;
            dst += o * out->strides[d] * esz;
        }
        char *orow = q->obase + dst;
        const char *xrow = q->xbase + src;
        switch (esz) {
            case 1: REMAP_ROW(uint8_t); break;
            case 2: REMAP_ROW(uint16_t); break;
            case 4: REMAP_ROW(uint32_t); break;
            default: REMAP_ROW(uint64_t); break;
        }
    }
}

void hl_cpu_remap(const hl_tensor *x, hl_tensor *out, int64_t *const *maps, const void *fill) {
    int nd = out->ndim;
    int64_t esz = (int64_t)hl_dtype_size(out->dtype);
    int64_t total = hl_shape_numel(nd, out->shape);
    if (total == 0) return;
    const char *xbase = hl_ptr(x);
    char *obase = hl_ptr(out);
    if (nd == 0) {
        memcpy(obase, xbase, (size_t)esz);
        return;
    }
    /* Indices become byte offsets once, so the inner loop is one load and one store. */
    for (int d = 0; d < nd; d++)
        for (int64_t o = 0; o < out->shape[d]; o++)
            if (maps[d][o] != HL_REMAP_FILL) maps[d][o] *= x->strides[d] * esz;
    int64_t w = out->shape[nd - 1], rows = total / w;
    remap_job q = {x, out, maps, fill, xbase, obase, esz, w, out->strides[nd - 1] * esz};
    /* rows write disjoint output: any split gives the same bytes */
    hl_parallel_for(rows, total >= 32768 ? 1 : rows, remap_rows, &q);
}
