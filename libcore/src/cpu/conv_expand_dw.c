/*
 * conv_expand_dw.c - a pointwise expansion and the depthwise 3x3 convolution after it as one
 * pass: MobileNetV2's inverted residual blocks, 1x1 conv (16 -> 96 channels at 112x112) then
 * depthwise 3x3. Layer by layer the expansion writes its whole output (4.8 MB at 112x112, more
 * than a core's L2) and the depthwise layer reads it back from L3 or memory. Here each task
 * computes a group of GROUP expanded channels into a buffer of its thread (12 planes of
 * 112x112: 588 KiB, in L2) and runs the depthwise kernel over those planes at once: the
 * expanded tensor never reaches memory.
 *
 * Only graph mode makes these calls (plan/fuse.c's fuse_expand_dw: a conv_fused with packed
 * 1x1 weights whose output only a depthwise conv reads, on the CPU); the record keeps the
 * expansion's layout with the depthwise layer's operands and attributes after it (core.h,
 * HL_CONV_DW). The expansion runs the packed product's own blocks on the input read in place
 * (hl_conv_packed_lane: no pass to pack it, which at 112x112 cost 15%) and
 * the planes the depthwise kernel the unfused call would take (hl_dw3x3_planes: AVX-512's
 * sixteen lanes or AVX2's eight), so a fused replay is bit for bit the two calls it replaced
 * (tests/plan/test_plan_expand_dw.py, also under HL_CPU_AVX512=0).
 */
#include <stdlib.h>
#include <string.h>

#include "../core.h"
#include "conv.h"
#include "conv_avx2.h"
#include "cpu_features.h"
#include "parallel.h"

enum {
    /* Expanded channels a task: two panels (the product's AVX-512 blocks pair panels). 6, 24
       and 48 ran as fast (MobileNetV2's three fused pairs at one thread, within 2-6%). */
    GROUP = 2 * HL_CONV_PACK_ROWS,
    /* The same where the depthwise layer takes the blocked kernel: whole panels and whole
       groups of sixteen channels (the blocked kernel's AVX-512 cells). */
    GROUP_BLOCKED = 8 * HL_CONV_PACK_ROWS,
    /* Fused where one sample's expanded tensor takes at least this many bytes: MobileNetV2's
       112x112 (4.8 MB) and 56x56 (1.8 MB) layers. Smaller ones stay in each core's L2 from
       one layer to the next already (the products and the depthwise planes run in lanes):
       fusing its 28x28 ones too changed nothing measurable. */
    FUSE_MIN_BYTES = 1 << 20,
};

/* Pairs whose depthwise layer takes the blocked kernel (14x14 and 7x7 planes with AVX-512)
   fuse too, for another reason: at two threads, layer by layer, each thread's expansion
   output went to memory the other core wrote last, the depthwise loop read it back, and
   the two loops each paid a fork and a join; fused, the expanded planes stay in one thread's
   buffer and the pair is one loop. HL_CONV_EXPAND_DW=large keeps them apart (comparisons). */
static bool blocked_pairs_fuse(void) {
    const char *env = getenv("HL_CONV_EXPAND_DW");
    return !(env && strcmp(env, "large") == 0);
}

bool hl_conv_expand_dw_fits(const conv_geom *g1, const conv_geom *g2) {
#if HL_CONV_HAVE_X86
    const char *env = getenv("HL_CONV_EXPAND_DW");   /* 0: never (for comparisons) */
    if (env && env[0] == '0') return false;
    const bool pair = hl_conv_avx2() && g1->groups == 1 && g1->kh == 1 &&
           g1->kw == 1 && g1->sh == 1 && g1->sw == 1 && g1->pt == 0 && g1->pl == 0 &&
           g1->oh == g1->h && g1->ow == g1->w && hl_conv_packed_lane_fits(g1->K) &&
           hl_dw3x3_fits(g2) && g2->c_in == g1->c_out && g2->c_out == g2->c_in &&
           g2->h == g1->oh && g2->w == g1->ow && g2->n == g1->n;
    if (!pair) return false;
    if (hl_dw3x3_blocked_fits(g2))   /* small planes: every channel in the blocked kernel */
        return blocked_pairs_fuse() && g2->c_out % 8 == 0;
    return (g2->ow + 15) / 16 <= HL_DW3X3_PLANES_MAX_CHUNKS &&
           g1->c_out * g1->P * (int64_t)sizeof(float) >= FUSE_MIN_BYTES;
#else
    (void)g1, (void)g2;
    return false;
#endif
}

#if HL_CONV_HAVE_X86

typedef struct {
    const conv_geom *g1, *g2;
    const float *x, *packed, *b1, *w2, *b2;
    const conv_epilogue *e1, *e2;
    float *y;
    int64_t group, groups;   /* expanded channels a task, tasks a sample and band */
    int64_t bands;           /* each plane's output rows in this many bands (band-major) */
    float *planes;           /* per thread: `group` expanded planes, thread_floats apart, */
    int64_t thread_floats;   /* then (blocked) the depthwise kernel's cells and outputs */
    const dw3x3_blocked *blocked;   /* or NULL: the planes kernel */
    hl_status *failed;
} expand_dw;

/* Band b of `bands` of a plane: its output rows, and the input rows they read (the padding
   rows excluded), which the band's expansion computes. */
static dw3x3_rows band_rows(const conv_geom *g2, int64_t b, int64_t bands) {
    const int64_t oy0 = g2->oh * b / bands, oy1 = g2->oh * (b + 1) / bands;
    return (dw3x3_rows){HL_MAX(0, oy0 * g2->sh - g2->pt),
                        HL_MIN(g2->h, (oy1 - 1) * g2->sh - g2->pt + 3), oy0, oy1};
}

/* Bands of rows for the threads (one sample, large planes: hl_dw3x3_bands) where the CPU has
   AVX-512 (the kernel that takes rows), and where every band's expansion gives each position
   the bits the whole plane's does: the product's last strip of 1 or 2 positions runs the
   tail kernel, whose sums go in another order, so no band may end with one unless the plane
   does (and then only there). With bands the stem, the depthwise layers and the products of
   batch 1's large planes all split the positions alike, and each thread reads the rows it
   wrote (the expansion's input) and writes those the projection after it reads. */
static int64_t bands_of(const conv_geom *g1, const conv_geom *g2) {
    const int64_t bands = hl_cpu_avx512() ? hl_dw3x3_bands(g2) : 1;
    const int64_t tail = g1->P % HL_CONV_STRIP_COLS;
    for (int64_t b = 0; b < bands; b++) {
        const dw3x3_rows r = band_rows(g2, b, bands);
        const int64_t left = (r.row1 - r.row0) * g1->w % HL_CONV_STRIP_COLS;
        if (left >= 1 && left <= HL_CONV_TAIL_COLS && !(r.row1 == g2->h && left == tail))
            return 1;
    }
    return bands;
}

static void run_expand_dw(int64_t t0, int64_t t1, void *arg) {
    const expand_dw *q = arg;
    const conv_geom *g1 = q->g1, *g2 = q->g2;
    float *planes = q->planes + hl_thread_num() * q->thread_floats;
    const int64_t per_band = g1->n * q->groups;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t band = t / per_band, rem = t % per_band;
        const int64_t s = rem / q->groups, c0 = rem % q->groups * q->group;
        const int64_t c1 = HL_MIN(g1->c_out, c0 + q->group);
        /* whole planes, or a band's rows (only those its outputs read) */
        const dw3x3_rows r = q->bands > 1 ? band_rows(g2, band, q->bands)
                                          : (dw3x3_rows){0, g2->h, 0, g2->oh};
        const int64_t n = (r.row1 - r.row0) * g1->w;   /* the expanded positions */
        const conv_packed_problem pr = {
            .m = c1 - c0, .n = n, .k = g1->K, .count = 1,
            .a = q->packed + c0 / HL_CONV_PACK_ROWS * g1->K * HL_CONV_PACK_ROWS,
            .b = q->x + s * g1->c_in * g1->P + r.row0 * g1->w, .ldb = g1->P, .c = planes,
            .ldc = n, .bias = q->b1 ? q->b1 + c0 : NULL, .epi = q->e1};
        hl_conv_packed_lane(&pr, 0, (c1 - c0 + HL_CONV_PACK_ROWS - 1) / HL_CONV_PACK_ROWS);
        float *y = q->y + s * g2->c_out * g2->P;
        if (q->blocked) {
            hl_dw3x3_blocked_planes(q->blocked, planes + q->group * g1->P, planes, c0, c1, q->w2,
                                    q->b2, y);
            continue;
        }
        hl_status st = q->bands > 1 ? hl_dw3x3_plane_rows_avx512(g2, planes, r, c0, c1, q->w2,
                                                                 q->b2, q->e2, y)
                                    : hl_dw3x3_planes(g2, planes, c0, c1, q->w2, q->b2, q->e2, y);
        if (st) __atomic_store_n(q->failed, st, __ATOMIC_RELAXED);
    }
}

hl_status hl_conv_expand_dw_forward(const conv_geom *g1, const float *x, const float *packed,
                                    const float *b1, const conv_epilogue *e1,
                                    const conv_geom *g2, const float *w2, const float *b2,
                                    const conv_epilogue *e2, float *y) {
    if (g1->n == 0 || g1->c_out == 0 || g2->P == 0) return HL_OK;
    const int threads = hl_pool_threads();
    const bool blocked = hl_dw3x3_blocked_fits(g2);
    const int64_t group = blocked ? GROUP_BLOCKED : GROUP;
    const int64_t bands = blocked || threads < 2 ? 1 : bands_of(g1, g2);
    const int64_t groups = (g1->c_out + group - 1) / group, tasks = bands * g1->n * groups;
    /* a thread's planes (and the blocked kernel's work) in whole cache lines; the blocked
       kernel's tables after the threads' buffers */
    const int64_t dw_work = blocked ? (int64_t)hl_dw3x3_blocked_work_bytes(g2) / 4 : 0;
    const int64_t thread_floats = (group * g1->P + dw_work + 15) / 16 * 16;
    const size_t tables = blocked ? hl_dw3x3_blocked_table_bytes(g2) : 0;
    scratch sb;
    float *planes;
    hl_status st = scratch_get("conv", &sb,
                               (size_t)(thread_floats * threads) * sizeof(float) + tables,
                               (void **)&planes);
    if (st) return st;
    dw3x3_blocked dw;
    if (blocked) hl_dw3x3_blocked_setup(g2, e2, planes + thread_floats * threads, &dw);
    hl_status failed = HL_OK;
    const expand_dw q = {g1, g2, x, packed, b1, w2, b2, e1, e2, y, group, groups, bands,
                         planes, thread_floats, blocked ? &dw : NULL, &failed};
    if (threads > 1 && tasks > 1)
        hl_parallel_lanes(tasks, run_expand_dw, (void *)&q);
    else
        hl_parallel_for(tasks, tasks, run_expand_dw, (void *)&q);
    scratch_put(&sb);
    return failed ? hl_fail(failed, "conv: the fused expansion and depthwise layer failed")
                  : HL_OK;
}

#else

hl_status hl_conv_expand_dw_forward(const conv_geom *g1, const float *x, const float *packed,
                                    const float *b1, const conv_epilogue *e1,
                                    const conv_geom *g2, const float *w2, const float *b2,
                                    const conv_epilogue *e2, float *y) {
    (void)g1, (void)x, (void)packed, (void)b1, (void)e1, (void)g2, (void)w2, (void)b2;
    (void)e2, (void)y;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv: the fused expansion kernel is not built here");
}

#endif
