/*
 * pool_2x2_impl.h - max pooling and its gradient for 2x2 windows at stride 2 that all lie
 * inside the input (no padding, dilation 1): LeNet's, the MNIST CNN's and VGG's pool, whose
 * windows neither overlap nor leave the input. pool_impl.h includes this file (once per type,
 * with T, SFX and TI, the signed integer as wide as T, defined) before its dispatchers.
 *
 * Each output row reads one pair of input rows in a single pass, and every window's four taps
 * are compared as the general loops compare them (row_window_max, max_pool_inside_planes): the
 * first tap starts, a later tap wins when greater or NaN, so NaN wins (the last NaN), else the
 * first of equal maxima, and the picked tap, the value and the gradient are bit for bit the
 * general loops'. The loops are chains of selects on lanes of T's width, which GCC vectorises
 * (deinterleaving the taps) in the AVX-512 and AVX2 clones HL_CLONES builds; the default clone
 * is the same code for baseline x86-64.
 */
/* The tap the general loops pick in window (a b / c d), 0..3 in row-major order, and its
   value in *best. */
static inline __attribute__((always_inline)) TI FN(pick2x2)(T a, T b, T c, T d, T *best) {
    T m = a;
    TI at = 0;
    const bool tb = b > m || b != b;
    m = tb ? b : m;
    at = tb ? 1 : at;
    const bool tc = c > m || c != c;
    m = tc ? c : m;
    at = tc ? 2 : at;
    const bool td = d > m || d != d;
    m = td ? d : m;
    at = td ? 3 : at;
    *best = m;
    return at;
}

/* One plane's outputs (values only: inference and graph mode's forward, which keeps no
   indices). */
HL_CLONES
static void FN(max_pool_2x2_values_plane)(const T *restrict x, T *restrict y, int64_t w,
                                           int64_t oh, int64_t ow) {
    for (int64_t oy = 0; oy < oh; oy++) {
        const T *restrict r0 = x + 2 * oy * w, *restrict r1 = r0 + w;
        T *restrict yr = y + oy * ow;
        for (int64_t ox = 0; ox < ow; ox++) {
            T m;
            (void)FN(pick2x2)(r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1], &m);
            yr[ox] = m;
        }
    }
}

/* One plane's outputs and their flat indices in the plane (training's eager forward). */
HL_CLONES
static void FN(max_pool_2x2_indexed_plane)(const T *restrict x, T *restrict y,
                                            int64_t *restrict idx, int64_t w, int64_t oh,
                                            int64_t ow) {
    for (int64_t oy = 0; oy < oh; oy++) {
        const T *restrict r0 = x + 2 * oy * w, *restrict r1 = r0 + w;
        T *restrict yr = y + oy * ow;
        int64_t *restrict ir = idx + oy * ow;
        const int64_t top = 2 * oy * w;
        for (int64_t ox = 0; ox < ow; ox++) {
            T m;
            const TI at = FN(pick2x2)(r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1], &m);
            yr[ox] = m;
            /* taps 0..3 sit at +0, +1, +w, +w+1 from the window's top left */
            ir[ox] = top + 2 * ox + (int64_t)(at & 1) + (at >> 1) * w;
        }
    }
}

/* One output row's input gradient found from the pooled input rows r0, r1 (HL_POOL_GRAD_FROM_
   INPUT): each window's picked tap gets 0 + dy, as the indexed gradient adds dy onto a zeroed
   plane (so a dy of -0 gives +0 there too), its other taps 0. With RELU (a constant) the
   pooled input is a ReLU's output and each tap's value then goes through relu_grad's
   expression, tap > 0 ? value : 0 (ops.h), as the relu_grad call that followed did. */
static inline __attribute__((always_inline)) void FN(max_pool_grad_2x2_row)(
    const T *restrict r0, const T *restrict r1, const T *restrict g, T *restrict d0,
    T *restrict d1, int64_t ow, const bool RELU) {
    const T zero = 0;
    for (int64_t ox = 0; ox < ow; ox++) {
        T m;
        const T a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
        const TI at = FN(pick2x2)(a, b, c, d, &m);
        const T v = zero + g[ox];
        T e0 = at == 0 ? v : zero, e1 = at == 1 ? v : zero, e2 = at == 2 ? v : zero,
          e3 = at == 3 ? v : zero;
        if (RELU) {
            e0 = a > 0 ? e0 : 0;
            e1 = b > 0 ? e1 : 0;
            e2 = c > 0 ? e2 : 0;
            e3 = d > 0 ? e3 : 0;
        }
        d0[2 * ox] = e0;
        d0[2 * ox + 1] = e1;
        d1[2 * ox] = e2;
        d1[2 * ox + 1] = e3;
    }
}

/* One plane's input gradient; rows and columns no window covers are 0 (relu_grad's too). */
HL_CLONES
static void FN(max_pool_grad_2x2_plane)(const T *restrict x, const T *restrict dy,
                                        T *restrict dx, int64_t h, int64_t w, int64_t oh,
                                        int64_t ow, bool relu) {
    for (int64_t oy = 0; oy < oh; oy++) {
        T *d0 = dx + 2 * oy * w;
        const T *r0 = x + 2 * oy * w, *r1 = r0 + w, *g = dy + oy * ow;
        if (relu) FN(max_pool_grad_2x2_row)(r0, r1, g, d0, d0 + w, ow, true);
        else FN(max_pool_grad_2x2_row)(r0, r1, g, d0, d0 + w, ow, false);
        for (int64_t i = 2 * ow; i < w; i++) d0[i] = d0[w + i] = 0;
    }
    for (int64_t i = 2 * oh * w; i < h * w; i++) dx[i] = 0;
}

static void FN(max_pool_2x2_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++) {
        if (idx)
            FN(max_pool_2x2_indexed_plane)(x + p * HW, y + p * OP, idx + p * OP, w, g->oh,
                                            g->ow);
        else
            FN(max_pool_2x2_values_plane)(x + p * HW, y + p * OP, w, g->oh, g->ow);
    }
}

static void FN(max_pool_grad_2x2_planes)(int64_t p0, int64_t p1, void *arg) {
    POOL_UNPACK(arg);
    for (int64_t p = p0; p < p1; p++)
        FN(max_pool_grad_2x2_plane)(x + p * HW, dy + p * OP, dx + p * HW, g->h, w, g->oh, g->ow,
                                    relu);
}
