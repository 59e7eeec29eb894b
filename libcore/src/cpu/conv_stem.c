/*
 * conv_stem.c - float32 3x3 convolutions with few input channels (the RGB stem of MobileNet and
 * its kin: 3 -> 32 channels, stride 2, on a 224x224 image) against weights packed once into
 * the product's panels (conv_pack, conv_packed.c).
 *
 * im2col would write all K = C_in * 9 rows of columns for the whole image (1.35 MB for
 * MobileNetV2's stem) and the product read them back. Here each task builds the K x 16 columns
 * of 16 outputs of one output row in a buffer on its stack (L1), up to ROW_STRIPS strips (a
 * 112-wide row's 7), and runs every panel of the weights over them (hl_conv_packed_strips: the
 * product's 6 x 16 block, bias, residual and activation in registers, one store into y), so
 * each output channel's row is stored as one run of up to 128 floats rather than 16 at a
 * time alternating between all 32 channel planes (MobileNetV2's stem at batch 8, whose 12.8
 * MB of outputs go to memory, one thread: 4.7 -> 3.7 ms, onnxruntime 3.1-3.2; bits
 * unchanged). Inside the image the columns are vector loads (at stride 2 split into even and
 * odd positions by shuffles), masked loads where they reach past the row, so the padding is
 * zeros that are multiplied, as ONNX and im2col define it. The sums are the packed product's
 * (its order, not OpenBLAS's).
 */
#include "../core.h"
#include "conv.h"
#include "conv_avx2.h"
#include "parallel.h"

/* At most this many column rows (C_in <= 7): the strip (K x 16 floats, 4 KiB) and the weights
   (C_out x K) stay in L1. */
enum { STEM_MAX_K = 64, COLS = HL_CONV_STRIP_COLS };
/* Strips of one row built before the panels run over them: 8 x K x 16 floats (13.5 KiB for
   K = 27, 32 KiB at most) stay in L1 and L2. */
enum { ROW_STRIPS = 8 };
/* Calls with at least this many multiply-adds run in parallel. */
enum { PAR_MIN = 1 << 16 };

bool hl_conv_stem_fits(const conv_geom *g) {
    return g->groups == 1 && g->kh == 3 && g->kw == 3 && g->dh == 1 && g->dw == 1 &&
           g->sh == g->sw && (g->sw == 1 || g->sw == 2) && g->K <= STEM_MAX_K &&
           g->oh > 0 && g->ow > 0 && hl_conv_avx2();
}

#if HL_CONV_HAVE_X86

/* 8 values of row r (W long) from q on: a plain load inside the row, else a masked one
   that reads zeros outside it (and touches no memory there). */
HL_AVX2 static inline __m256 load8(const float *r, int64_t q, int64_t W, bool inside) {
    if (inside) return _mm256_loadu_ps(r + q);
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)q),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), idx),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32((int)W), idx));
    return _mm256_maskload_ps(r + q, in);
}

/* 16 values of row r from q on, every s-th (s 1 or 2), zeros outside the row. */
HL_AVX2 static inline void load16(const float *r, int64_t q, int64_t W, int s, bool inside,
                                  __m256 *lo, __m256 *hi) {
    if (s == 1) {
        *lo = load8(r, q, W, inside), *hi = load8(r, q + 8, W, inside);
        return;
    }
    const __m256 a = load8(r, q, W, inside), b = load8(r, q + 8, W, inside);
    const __m256 c = load8(r, q + 16, W, inside), d = load8(r, q + 24, W, inside);
    /* evens of (a, b) and of (c, d), put in order by a lane-crossing permute */
    *lo = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *hi = _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(c, d, 0x88)), 0xD8));
}

/* The K x COLS columns of outputs (oy, ox0 .. ox0 + 15) of sample xs (C_in planes), row
   k = (ci * 3 + ky) * 3 + kx as the weights' K. */
HL_AVX2 static void fill_strip(const conv_geom *g, const float *xs, int64_t oy, int64_t ox0,
                               float *strip) {
    const int s = (int)g->sw;
    const int64_t H = g->h, W = g->w, q0 = ox0 * s - g->pl;
    /* the loads of all COLS columns (s * 16 values from q0 + kx) lie inside the row; else
       masked loads (columns past nr read what they read: no output takes them) */
    const bool inside = q0 >= 0 && q0 + 2 + s * COLS <= W;
    for (int64_t ci = 0; ci < g->c_in; ci++)
        for (int ky = 0; ky < 3; ky++) {
            const int64_t iy = oy * s - g->pt + ky;
            float *d = strip + (ci * 3 + ky) * 3 * COLS;
            if (iy < 0 || iy >= H) {
                for (int j = 0; j < 3 * COLS; j++) d[j] = 0;
                continue;
            }
            const float *row = xs + (ci * H + iy) * W;
            for (int kx = 0; kx < 3; kx++) {
                __m256 lo, hi;
                load16(row, q0 + kx, W, s, inside, &lo, &hi);
                _mm256_storeu_ps(d + kx * COLS, lo);
                _mm256_storeu_ps(d + kx * COLS + 8, hi);
            }
        }
}

/* What each chunk of output rows needs; run_rows runs them. */
typedef struct {
    const conv_geom *g;
    const float *x, *packed, *bias;
    const conv_epilogue *epi;
    float *y;
} stem_rows;

/* Output rows [t0, t1) (of all samples, t = n * oh + oy). */
static void run_rows(int64_t t0, int64_t t1, void *arg) {
    const stem_rows *q = arg;
    const conv_geom *g = q->g;
    const int64_t P = g->P, CO = g->c_out;
    const float *res = q->epi ? (const float *)q->epi->res : NULL;
    float strips[ROW_STRIPS * STEM_MAX_K * COLS] __attribute__((aligned(32)));
    for (int64_t t = t0; t < t1; t++) {
        const int64_t n = t / g->oh, oy = t % g->oh;
        const float *xs = q->x + n * g->c_in * g->h * g->w;
        for (int64_t ox0 = 0; ox0 < g->ow; ox0 += ROW_STRIPS * COLS) {
            const int64_t cols = HL_MIN(ROW_STRIPS * COLS, g->ow - ox0);
            for (int64_t j = 0; j < cols; j += COLS)
                fill_strip(g, xs, oy, ox0 + j, strips + j * g->K);
            const int64_t at = n * CO * P + oy * g->ow + ox0;
            hl_conv_packed_strips(q->packed, CO, g->K, strips, cols, q->y + at, P, q->bias,
                                  res ? res + at : NULL, q->epi);
        }
    }
}

hl_status hl_conv_stem_forward(const conv_geom *g, const float *x, const float *packed,
                               const float *bias, const conv_epilogue *epi, float *y) {
    const int64_t rows = g->n * g->oh;
    if (rows == 0 || g->c_out == 0) return HL_OK;
    const bool parallel = hl_pool_threads() > 1 && rows > 1 &&
                          g->c_out * g->P * g->K * g->n > PAR_MIN;
    const stem_rows q = {g, x, packed, bias, epi, y};
    /* rows in lanes (hl_parallel_lanes): each thread the band of rows (or the samples) that
       the layer after reads on it (the depthwise kernel's bands of rows, the products' blocks
       of positions), a thread the host deschedules leaving its rows to the other */
    if (parallel)
        hl_parallel_lanes(rows, run_rows, (void *)&q);
    else
        hl_parallel_for(rows, rows, run_rows, (void *)&q);
    return HL_OK;
}

#else

hl_status hl_conv_stem_forward(const conv_geom *g, const float *x, const float *packed,
                               const float *bias, const conv_epilogue *epi, float *y) {
    (void)g, (void)x, (void)packed, (void)bias, (void)epi, (void)y;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv: the AVX2 stem kernel is not built here");
}

#endif
