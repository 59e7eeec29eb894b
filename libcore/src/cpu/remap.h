/*
 * remap.h - the gather that pad, tile and nearest resize share: every output element is the
 * input element named by one index per axis (a separate map for each axis), or a fill value.
 * Elements move as bytes, so every dtype works.
 */
#ifndef HL_CPU_REMAP_H
#define HL_CPU_REMAP_H

#include "../core.h"

/* Marks a map entry whose output elements take the fill value (constant padding). */
#define HL_REMAP_FILL INT64_MIN

/* out[o_0, ..., o_n-1] = x[maps[0][o_0], ..., maps[n-1][o_n-1]]; an entry HL_REMAP_FILL on any
   axis gives the fill value instead. maps[d] has out->shape[d] entries, each HL_REMAP_FILL or in
   [0, x->shape[d]); x and out have the same ndim and dtype. The maps are rewritten in place
   (into byte offsets). fill (may be NULL when no entry is HL_REMAP_FILL) holds the value's
   bytes in out's dtype. */
void hl_cpu_remap(const hl_tensor *x, hl_tensor *out, int64_t *const *maps, const void *fill);

/* The bytes of v converted to dtype d (floats saturate into integers, NaN becomes 0), in the
   first hl_dtype_size(d) bytes of *bits. */
void hl_cpu_value_bits(hl_dtype d, double v, uint64_t *bits);

/* Space for one map per axis, all in one block: maps[d] gets n[d] entries. Returns the block
   to free, or NULL when out of memory. */
int64_t *hl_cpu_alloc_maps(int ndim, const int64_t *n, int64_t **maps);

#endif
