/*
 * pool_impl.h - the pooling kernels for one float type. cpu/pool.c includes this file once
 * per type with T (the C type) and SFX (the name suffix) defined.
 */
#define POOL_CAT2(a, b) a##_##b
#define POOL_CAT(a, b) POOL_CAT2(a, b)
#define FN(name) POOL_CAT(name, SFX)

static void FN(max_pool)(const pool_geom *g, const T *x, T *y, int64_t *idx) {
    const int64_t HW = g->h * g->w, OP = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->planes * OP * g->kh * g->kw > POOL_PAR_MIN)
    for (int64_t p = 0; p < g->planes; p++) {
        const T *plane = x + p * HW;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const int64_t y0 = oy * g->sh - g->pt;
            int64_t ylo, yhi;
            tap_range(y0, g->dh, g->h, g->kh, &ylo, &yhi);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t x0 = ox * g->sw - g->pl;
                int64_t xlo, xhi;
                tap_range(x0, g->dw, g->w, g->kw, &xlo, &xhi);
                T best = -INFINITY;
                int64_t at = -1;
                for (int64_t ty = ylo; ty < yhi; ty++) {
                    const int64_t row = (y0 + ty * g->dh) * g->w;
                    for (int64_t tx = xlo; tx < xhi; tx++) {
                        const int64_t i = row + x0 + tx * g->dw;
                        const T v = plane[i];
                        /* NaN wins, as in PyTorch; the first tap sets the starting point */
                        if (at < 0 || v > best || v != v) {
                            best = v;
                            at = i;
                        }
                    }
                }
                const int64_t o = p * OP + oy * g->ow + ox;
                y[o] = best;
                if (idx) idx[o] = at;
            }
        }
    }
}

static void FN(avg_pool)(const pool_geom *g, const T *x, T *y) {
    const int64_t HW = g->h * g->w, OP = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->planes * OP * g->kh * g->kw > POOL_PAR_MIN)
    for (int64_t p = 0; p < g->planes; p++) {
        const T *plane = x + p * HW;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const int64_t y0 = oy * g->sh - g->pt;
            int64_t ylo, yhi;
            tap_range(y0, g->dh, g->h, g->kh, &ylo, &yhi);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t x0 = ox * g->sw - g->pl;
                int64_t xlo, xhi;
                tap_range(x0, g->dw, g->w, g->kw, &xlo, &xhi);
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

static void FN(max_pool_grad)(const pool_geom *g, const T *dy, const void *idx, bool i64,
                              T *dx) {
    const int64_t HW = g->h * g->w, OP = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->planes * (OP + HW) > POOL_PAR_MIN)
    for (int64_t p = 0; p < g->planes; p++) {
        T *plane = dx + p * HW;
        for (int64_t i = 0; i < HW; i++) plane[i] = 0;
        for (int64_t o = p * OP; o < (p + 1) * OP; o++) {
            const int64_t i = i64 ? ((const int64_t *)idx)[o] : ((const int32_t *)idx)[o];
            if (i >= 0) plane[i] += dy[o];
        }
    }
}

static void FN(avg_pool_grad)(const pool_geom *g, const T *dy, T *dx) {
    const int64_t HW = g->h * g->w, OP = g->oh * g->ow;
#pragma omp parallel for schedule(static) if (g->planes * OP * g->kh * g->kw > POOL_PAR_MIN)
    for (int64_t p = 0; p < g->planes; p++) {
        T *plane = dx + p * HW;
        for (int64_t i = 0; i < HW; i++) plane[i] = 0;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            const int64_t y0 = oy * g->sh - g->pt;
            int64_t ylo, yhi;
            tap_range(y0, g->dh, g->h, g->kh, &ylo, &yhi);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                const int64_t x0 = ox * g->sw - g->pl;
                int64_t xlo, xhi;
                tap_range(x0, g->dw, g->w, g->kw, &xlo, &xhi);
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

#undef FN
#undef POOL_CAT
#undef POOL_CAT2
