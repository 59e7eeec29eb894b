/*
 * winograd_tiles.h - what both Winograd forward paths share (winograd.c's F(2x2, 3x3) and
 * winograd43.c's F(4x4, 3x3)): the geometry of a layer cut into m x m output tiles, the
 * walk over a block of tiles as runs along tile rows, and the spacing of the transformed
 * matrices. Included by those two files only (static inline).
 */
#ifndef HL_WINOGRAD_TILES_H
#define HL_WINOGRAD_TILES_H

#include "../core.h"

/* The convolution as the tile loops see it: input planes (c_in of h x w per sample) give
   output planes (c_out of oh x ow); tile (ty, tx) covers outputs from (m ty, m tx) and reads
   inputs from (m ty - pt, m tx - pl). Tiles are numbered t = (n * th + ty) * tw + tx. */
typedef struct {
    int64_t n, c_in, h, w;
    int64_t c_out, oh, ow;
    int64_t pt, pl;
    int64_t th, tw, tiles;
} wgeom;

static inline wgeom wgeom_tiled(int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t c_out,
                                int64_t oh, int64_t ow, int64_t pt, int64_t pl, int64_t m) {
    wgeom g = {n, c_in, h, w, c_out, oh, ow, pt, pl, (oh + m - 1) / m, (ow + m - 1) / m, 0};
    g.tiles = n * g.th * g.tw;
    return g;
}

/* The tiles [t0, t0 + count) of a block, taken as runs along a tile row: sample n, tile row
   ty, tile columns tx0 .. tx0 + len, at offset off in the block. */
typedef struct {
    int64_t n, ty, tx0, len, off;
} run;

static inline bool next_run(const wgeom *g, int64_t t0, int64_t count, run *r) {
    r->off += r->len;
    if (r->off >= count) return false;
    const int64_t t = t0 + r->off, per = g->th * g->tw;
    r->n = t / per;
    r->ty = (t % per) / g->tw;
    r->tx0 = t % g->tw;
    r->len = HL_MIN(g->tw - r->tx0, count - r->off);
    return true;
}

#define RUNS(g, t0, count, r) for (run r = {0}; next_run(g, t0, count, &r);)

/* Column a of a row of W values, zero outside it (the padding). */
static inline float column(const float *row, int64_t W, int64_t a) {
    return a >= 0 && a < W ? row[a] : 0;
}

/* The distance between the transformed matrices of a block (n floats each): the values of
   one tile are written (or read) together, and matrices a multiple of 4 KiB apart would put
   them all in one set of the L1 cache (more than its ways; the input transform ran at a
   third of its speed). Starting them 64 bytes apart modulo 4 KiB spreads them out. */
static inline int64_t entry_stride(int64_t n) { return (n + 1023) / 1024 * 1024 + 16; }

/* n floats of scratch; NULL (and *st set) when there is no memory. */
static inline float *scratch_floats(const char *op, scratch *s, int64_t n, hl_status *st) {
    void *data = NULL;
    *st = scratch_get(op, s, (size_t)n * sizeof(float), &data);
    return data;
}

#endif /* HL_WINOGRAD_TILES_H */
