/*
 * pool_impl.h - the pooling kernels for one float type. cpu/pool.c includes this file once
 * per type with T (the C type) and SFX (the name suffix) defined.
 */
#define POOL_CAT2(a, b) a##_##b
#define POOL_CAT(a, b) POOL_CAT2(a, b)
#define FN(name) POOL_CAT(name, SFX)

/* The arguments of every pooling kernel: a loop over planes hands them to its chunks, which
   unpack them under the kernel's own names. */
typedef struct {
    const pool_geom *g;
    const T *x;
    T *y;
    int64_t *idx;
    const T *dy;
    T *dx;
    const void *vidx;
    bool i64;
    bool relu;   /* max_pool_grad from the input: x is a ReLU's output, dx relu_grad'ed by it */
} FN(pool_job);

#define POOL_UNPACK(arg)                                                                    \
    const FN(pool_job) *q_ = (arg);                                                         \
    const pool_geom *g = q_->g;                                                             \
    __attribute__((unused)) const T *x = q_->x;                                             \
    __attribute__((unused)) T *y = q_->y;                                                   \
    __attribute__((unused)) int64_t *idx = q_->idx;                                         \
    __attribute__((unused)) const T *dy = q_->dy;                                           \
    __attribute__((unused)) T *dx = q_->dx;                                                 \
    __attribute__((unused)) const void *vidx = q_->vidx;                                    \
    __attribute__((unused)) const bool i64 = q_->i64;                                       \
    __attribute__((unused)) const bool relu = q_->relu;                                     \
    __attribute__((unused)) const int64_t HW = g->h * g->w, OP = g->oh * g->ow;             \
    __attribute__((unused)) const int64_t kh = g->kh, kw = g->kw, w = g->w

/* Every window lies inside the input and its taps are adjacent (dilation 1, no padding
   reaching in): the common 2x2 / stride 2 case. Same result and indices as the general loop
   below, without computing each window's bounds. */
static void FN(max_pool_inside_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++) {
        const T *plane = x + p * HW;
        T *yp = y + p * OP;
        int64_t *ip = idx ? idx + p * OP : NULL;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const int64_t top = oy * g->sh * w;
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t first = top + ox * g->sw;
                T best = plane[first];
                int64_t at = first;
                if (kh == 2 && kw == 2) { /* unrolled: the taps in the general loop's order */
                    const int64_t t1 = first + 1, t2 = first + w, t3 = first + w + 1;
                    if (plane[t1] > best || plane[t1] != plane[t1]) best = plane[at = t1];
                    if (plane[t2] > best || plane[t2] != plane[t2]) best = plane[at = t2];
                    if (plane[t3] > best || plane[t3] != plane[t3]) best = plane[at = t3];
                    yp[oy * g->ow + ox] = best;
                    if (ip) ip[oy * g->ow + ox] = at;
                    continue;
                }
                for (int64_t ty = 0; ty < kh; ty++) {
                    const int64_t r = first + ty * w;
                    for (int64_t tx = 0; tx < kw; tx++) {
                        const T v = plane[r + tx];
                        if (v > best || v != v) { /* NaN wins, the last one as below */
                            best = v;
                            at = r + tx;
                        }
                    }
                }
                yp[oy * g->ow + ox] = best;
                if (ip) ip[oy * g->ow + ox] = at;
            }
        }
    }
}

static void FN(max_pool_inside)(const pool_geom *g, const T *x, T *y, int64_t *idx) {
    const int64_t OP = g->oh * g->ow, kh = g->kh, kw = g->kw;
    const FN(pool_job) q = {.g = g, .x = x, .y = y, .idx = idx};
    hl_parallel_for(g->planes, g->planes * OP * kh * kw > POOL_PAR_MIN ? 1 : g->planes,
                    FN(max_pool_inside_planes), (void *)&q);
}

/* Without indices (inference): tap by tap, the running maximum of whole output rows, so the
   inner loop is a vectorisable select. Same values as the loops here: a NaN tap wins, a
   window of padding alone gives -inf. */
HL_CLONES
static void FN(max_pool_plane_values)(const pool_geom *g, const T *restrict plane,
                                      T *restrict yp) {
    const int64_t OP = g->oh * g->ow;
    for (int64_t i = 0; i < OP; i++) yp[i] = -INFINITY;
    for (int64_t ty = 0; ty < g->kh; ty++) {
        int64_t oy_lo, oy_hi;
        hl_out_range(ty * g->dh - g->pt, g->sh, g->h, g->oh, &oy_lo, &oy_hi);
        for (int64_t tx = 0; tx < g->kw; tx++) {
            const int64_t offx = tx * g->dw - g->pl;
            int64_t ox_lo, ox_hi;
            hl_out_range(offx, g->sw, g->w, g->ow, &ox_lo, &ox_hi);
            for (int64_t oy = oy_lo; oy < oy_hi; oy++) {
                const T *restrict xr = plane + (oy * g->sh + ty * g->dh - g->pt) * g->w + offx;
                T *restrict yr = yp + oy * g->ow;
                if (g->sw == 1)
                    for (int64_t ox = ox_lo; ox < ox_hi; ox++) {
                        const T v = xr[ox];
                        yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];
                    }
                else
                    for (int64_t ox = ox_lo; ox < ox_hi; ox++) {
                        const T v = xr[ox * g->sw];
                        yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];
                    }
            }
        }
    }
}

/* The maxima of output row oy's windows ox0 .. ox1-1 (at most POOL_TILE, pool.c) in plane, into
   best[], and their flat indices in the plane, into at[]: NaN wins (the last NaN), as in
   PyTorch, else the first of equal maxima; -1 and -inf for a window of padding only. The taps
   are swept in row-major order, each over the whole run of windows it falls in: a select per
   window that the compiler vectorises, instead of one window's bounds and taps at a time.
   The sweep keeps the tap's number (ty * kw + tx, in TI: lanes as wide as T's) and starts
   every window at -inf, so a window whose taps are all -inf picks none there and is given
   its first tap inside the input afterwards: as if the first tap had started it (a later
   tap wins only when greater or NaN either way). max_pool (with indices) and
   max_pool_grad_from_input both ask it, so they pick one tap. */
HL_CLONES
static void FN(row_window_max)(const pool_geom *g, const T *restrict plane, int64_t oy,
                               int64_t ox0, int64_t ox1, T *restrict best,
                               int64_t *restrict at) {
    const int64_t y0 = oy * g->sh - g->pt, n = ox1 - ox0;
    TI tap[POOL_TILE];
    for (int64_t j = 0; j < n; j++) {
        best[j] = -INFINITY;
        tap[j] = -1;
    }
    int64_t ylo, yhi;
    hl_tap_range(y0, g->dh, g->h, g->kh, &ylo, &yhi);
    for (int64_t ty = ylo; ty < yhi; ty++) {
        const T *restrict row = plane + (y0 + ty * g->dh) * g->w;
        for (int64_t tx = 0; tx < g->kw; tx++) {
            const int64_t offx = tx * g->dw - g->pl;
            const TI t = (TI)(ty * g->kw + tx);
            int64_t lo, hi;
            hl_out_range(offx, g->sw, g->w, g->ow, &lo, &hi);
            lo = lo > ox0 ? lo : ox0;
            hi = hi < ox1 ? hi : ox1;
            const T *restrict src = row + offx;
            if (g->sw == 1)
                for (int64_t ox = lo; ox < hi; ox++) {
                    const T v = src[ox];
                    const bool take = v > best[ox - ox0] || v != v;
                    best[ox - ox0] = take ? v : best[ox - ox0];
                    tap[ox - ox0] = take ? t : tap[ox - ox0];
                }
            else
                for (int64_t ox = lo; ox < hi; ox++) {
                    const T v = src[ox * g->sw];
                    const bool take = v > best[ox - ox0] || v != v;
                    best[ox - ox0] = take ? v : best[ox - ox0];
                    tap[ox - ox0] = take ? t : tap[ox - ox0];
                }
        }
    }
    for (int64_t j = 0; j < n; j++) {
        const int64_t x0 = (ox0 + j) * g->sw - g->pl;
        int64_t ty, tx;
        if (tap[j] >= 0) {
            ty = tap[j] / g->kw;
            tx = tap[j] % g->kw;
        } else { /* every tap -inf, or none inside the input */
            int64_t xlo, xhi;
            hl_tap_range(x0, g->dw, g->w, g->kw, &xlo, &xhi);
            if (ylo >= yhi || xlo >= xhi) {
                at[j] = -1;
                continue;
            }
            ty = ylo;
            tx = xlo;
        }
        at[j] = (y0 + ty * g->dh) * g->w + x0 + tx * g->dw;
    }
}

/* The same values for dilation 1 by separable maxima: for each output row, the maximum of
   its window's input rows column by column (contiguous, vectorised), then tap by tap of
   each window's kw columns of that row: kh - 1 contiguous passes and kw strided ones per
   output row instead of kh * kw strided ones (ResNet's 3x3 stride-2 pool on 64 planes of
   112x112: 0.73 -> 0.32 ms, one thread).
   A NaN tap still wins and a window of padding alone gives -inf; among equal values (+0 and
   -0) another one may be kept than above, since the taps are visited in another order.
   With stride 2 the column maxima are split by parity first (one de-interleave, which GCC
   vectorises), so that each tap reads its columns contiguously: the taps at stride 2 ran
   element by element (ResNet-18's pool at batch 1: 369-374 -> 280 us at one thread, 206-210
   -> 167-168 at two).
   Rows up to POOL_ROW_MAX long (its row of column maxima is on the stack). */
HL_CLONES
static void FN(max_pool_plane_separable)(const pool_geom *g, const T *restrict plane,
                                         T *restrict yp) {
    T col[POOL_ROW_MAX], even[POOL_ROW_MAX / 2], odd[POOL_ROW_MAX / 2];
    const int64_t W = g->w;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        T *restrict yr = yp + oy * g->ow;
        for (int64_t ox = 0; ox < g->ow; ox++) yr[ox] = -INFINITY;
        const int64_t top = oy * g->sh - g->pt;
        const int64_t r0 = HL_MAX(top, 0), r1 = HL_MIN(top + g->kh, g->h);
        if (r0 >= r1) continue;   /* a row of padding windows */
        for (int64_t i = 0; i < W; i++) col[i] = plane[r0 * W + i];
        for (int64_t r = r0 + 1; r < r1; r++) {
            const T *restrict xr = plane + r * W;
            for (int64_t i = 0; i < W; i++) {
                const T v = xr[i];
                col[i] = (v > col[i] || v != v) ? v : col[i];
            }
        }
        if (g->sw == 2) {   /* even[i] = col[2 i], odd[i] = col[2 i + 1] */
            for (int64_t i = 0; i < W / 2; i++) {
                even[i] = col[2 * i];
                odd[i] = col[2 * i + 1];
            }
            if (W % 2) even[W / 2] = col[W - 1];
        }
        for (int64_t tx = 0; tx < g->kw; tx++) {   /* tap by tap, as max_pool_plane_values */
            const int64_t offx = tx - g->pl;
            int64_t lo, hi;
            hl_out_range(offx, g->sw, W, g->ow, &lo, &hi);
            const T *restrict c = col + offx;
            if (g->sw == 1)
                for (int64_t ox = lo; ox < hi; ox++) {
                    const T v = c[ox];
                    yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];
                }
            else if (g->sw == 2) {   /* col[2 ox + offx], offx = 2 m + parity */
                const int64_t parity = offx & 1, m = (offx - parity) / 2;
                const T *restrict h = (parity ? odd : even) + m;
                for (int64_t ox = lo; ox < hi; ox++) {
                    const T v = h[ox];
                    yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];
                }
            } else
                for (int64_t ox = lo; ox < hi; ox++) {
                    const T v = c[ox * g->sw];
                    yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];
                }
        }
    }
}

static void FN(max_pool_value_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    const bool separable = g->dh == 1 && g->dw == 1 && g->w <= POOL_ROW_MAX;
    for (int64_t p = p0; p < p1; p++) {
        if (separable)
            FN(max_pool_plane_separable)(g, x + p * HW, y + p * OP);
        else
            FN(max_pool_plane_values)(g, x + p * HW, y + p * OP);
    }
}

static void FN(max_pool_indexed_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    T best[POOL_TILE];
    int64_t at[POOL_TILE];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox0 = 0; ox0 < g->ow; ox0 += POOL_TILE) {
                const int64_t ox1 = ox0 + POOL_TILE < g->ow ? ox0 + POOL_TILE : g->ow,
                              o = p * OP + oy * g->ow + ox0;
                FN(row_window_max)(g, x + p * HW, oy, ox0, ox1, best, at);
                for (int64_t j = 0; j < ox1 - ox0; j++) {
                    y[o + j] = best[j];
                    if (idx) idx[o + j] = at[j];
                }
            }
}

#include "pool_2x2_impl.h"

static void FN(max_pool)(const pool_geom *g, const T *x, T *y, int64_t *idx) {
    const int64_t OP = g->oh * g->ow;
    if (pool_2x2_inside(g)) {
        const FN(pool_job) q = {.g = g, .x = x, .y = y, .idx = idx};
        hl_parallel_for(g->planes, g->planes * OP * 4 > POOL_PAR_MIN ? 1 : g->planes,
                        FN(max_pool_2x2_planes), (void *)&q);
        return;
    }
    if (!idx) {
        const FN(pool_job) q = {.g = g, .x = x, .y = y, .idx = idx};
        hl_parallel_for(g->planes, g->planes * OP * g->kh * g->kw > POOL_PAR_MIN ? 1 : g->planes,
                        FN(max_pool_value_planes), (void *)&q);
        return;
    }
    if (g->dh == 1 && g->dw == 1 && g->pt == 0 && g->pl == 0 && g->oh > 0 && g->ow > 0 &&
        (g->oh - 1) * g->sh + g->kh <= g->h && (g->ow - 1) * g->sw + g->kw <= g->w) {
        FN(max_pool_inside)(g, x, y, idx);
        return;
    }
    const FN(pool_job) q = {.g = g, .x = x, .y = y, .idx = idx};
    hl_parallel_for(g->planes, g->planes * OP * g->kh * g->kw > POOL_PAR_MIN ? 1 : g->planes,
                    FN(max_pool_indexed_planes), (void *)&q);
}

static void FN(avg_pool_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++) {
        const T *plane = x + p * HW;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const int64_t y0 = oy * g->sh - g->pt;
            int64_t ylo, yhi;
            hl_tap_range(y0, g->dh, g->h, g->kh, &ylo, &yhi);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t x0 = ox * g->sw - g->pl;
                int64_t xlo, xhi;
                hl_tap_range(x0, g->dw, g->w, g->kw, &xlo, &xhi);
                T sum = 0;
                for (int64_t ty = ylo; ty < yhi; ty++) {
                    const T *row = plane + (y0 + ty * g->dh) * g->w;
                    for (int64_t tx = xlo; tx < xhi; tx++) sum += row[x0 + tx * g->dw];
                }
                const int64_t div = avg_divisor(g, y0, x0, ylo, yhi, xlo, xhi);
                y[p * OP + oy * g->ow + ox] = div > 0 ? sum / (T)div : 0;
            }
        }
    }
}

/* Global average pooling (one window, the whole plane, no padding: MobileNetV2's last 7x7):
   each plane's sum in 8 running partial sums, combined pairwise, instead of one chain of
   adds each waiting on the last (1280 planes of 49: 60 us against 8). */
static void FN(avg_pool_global_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++) {
        const T *plane = x + p * HW;
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 8 <= HW; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += plane[i + j];
        for (int j = 0; i < HW; i++, j++) acc[j] += plane[i];
        const T sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                      ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        y[p * OP] = HW > 0 ? sum / (T)HW : 0;
    }
}

static void FN(avg_pool)(const pool_geom *g, const T *x, T *y) {
    const int64_t OP = g->oh * g->ow;
    const FN(pool_job) q = {.g = g, .x = x, .y = y};
    const bool global = g->oh == 1 && g->ow == 1 && g->kh == g->h && g->kw == g->w &&
                        g->pt == 0 && g->pl == 0 && g->dh == 1 && g->dw == 1;
    hl_parallel_for(g->planes, g->planes * OP * g->kh * g->kw > POOL_PAR_MIN ? 1 : g->planes,
                    global ? FN(avg_pool_global_planes) : FN(avg_pool_planes), (void *)&q);
}

static void FN(max_pool_grad_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++) {
        T *plane = dx + p * HW;
        for (int64_t i = 0; i < HW; i++) plane[i] = 0;
        for (int64_t o = p * OP; o < (p + 1) * OP; o++) {
            const int64_t i = i64 ? ((const int64_t *)vidx)[o] : ((const int32_t *)vidx)[o];
            if (i >= 0) plane[i] += dy[o];
        }
    }
}

static void FN(max_pool_grad)(const pool_geom *g, const T *dy, const void *idx, bool i64,
                              T *dx) {
    const int64_t HW = g->h * g->w, OP = g->oh * g->ow;
    const FN(pool_job) q = {.g = g, .dy = dy, .vidx = idx, .i64 = i64, .dx = dx};
    hl_parallel_for(g->planes, g->planes * (OP + HW) > POOL_PAR_MIN ? 1 : g->planes,
                    FN(max_pool_grad_planes), (void *)&q);
}

/* max_pool_grad without indices (HL_POOL_GRAD_FROM_INPUT): each window's maximum found
   again in the pooled input x, by max_pool's comparisons in max_pool's tap order (so the same
   tap wins: NaN, then the first of equal maxima), then dy added to it in output order, as
   max_pool_grad adds through the indices. */
static void FN(max_pool_grad_from_input_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    T best[POOL_TILE];
    int64_t at[POOL_TILE];
    for (int64_t p = p0; p < p1; p++) {
        T *dplane = dx + p * HW;
        for (int64_t i = 0; i < HW; i++) dplane[i] = 0;
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox0 = 0; ox0 < g->ow; ox0 += POOL_TILE) {
                const int64_t ox1 = ox0 + POOL_TILE < g->ow ? ox0 + POOL_TILE : g->ow;
                const T *drow = dy + p * OP + oy * g->ow + ox0;
                FN(row_window_max)(g, x + p * HW, oy, ox0, ox1, best, at);
                for (int64_t j = 0; j < ox1 - ox0; j++) /* in output order, as max_pool_grad */
                    if (at[j] >= 0) dplane[at[j]] += drow[j];
            }
        if (relu) {   /* relu_grad's own expression (ops.h), on the plane while in cache */
            const T *zp = x + p * HW;
            for (int64_t i = 0; i < HW; i++) dplane[i] = zp[i] > 0 ? dplane[i] : 0;
        }
    }
}

static void FN(max_pool_grad_from_input)(const pool_geom *g, const T *dy, const T *x, bool relu,
                                         T *dx) {
    const int64_t OP = g->oh * g->ow;
    const FN(pool_job) q = {.g = g, .dy = dy, .x = x, .dx = dx, .relu = relu};
    if (pool_2x2_inside(g)) {
        hl_parallel_for(g->planes, g->planes * OP * 4 > POOL_PAR_MIN ? 1 : g->planes,
                        FN(max_pool_grad_2x2_planes), (void *)&q);
        return;
    }
    hl_parallel_for(g->planes, g->planes * OP * g->kh * g->kw > POOL_PAR_MIN ? 1 : g->planes,
                    FN(max_pool_grad_from_input_planes), (void *)&q);
}

static void FN(avg_pool_grad_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++) {
        T *plane = dx + p * HW;
        for (int64_t i = 0; i < HW; i++) plane[i] = 0;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const int64_t y0 = oy * g->sh - g->pt;
            int64_t ylo, yhi;
            hl_tap_range(y0, g->dh, g->h, g->kh, &ylo, &yhi);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t x0 = ox * g->sw - g->pl;
                int64_t xlo, xhi;
                hl_tap_range(x0, g->dw, g->w, g->kw, &xlo, &xhi);
                const int64_t div = avg_divisor(g, y0, x0, ylo, yhi, xlo, xhi);
                if (div <= 0) continue;
                const T v = dy[p * OP + oy * g->ow + ox] / (T)div;
                for (int64_t ty = ylo; ty < yhi; ty++) {
                    T *row = plane + (y0 + ty * g->dh) * g->w;
                    for (int64_t tx = xlo; tx < xhi; tx++) row[x0 + tx * g->dw] += v;
                }
            }
        }
    }
}

static void FN(avg_pool_grad)(const pool_geom *g, const T *dy, T *dx) {
    const int64_t OP = g->oh * g->ow;
    const FN(pool_job) q = {.g = g, .dy = dy, .dx = dx};
    hl_parallel_for(g->planes, g->planes * OP * g->kh * g->kw > POOL_PAR_MIN ? 1 : g->planes,
                    FN(avg_pool_grad_planes), (void *)&q);
}

#undef FN
#undef POOL_UNPACK
#undef POOL_CAT
#undef POOL_CAT2
