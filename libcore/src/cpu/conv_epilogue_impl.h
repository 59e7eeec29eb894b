/*
 * conv_epilogue_impl.h - a fused convolution's epilogue (conv.h, conv_epilogue) over a run of
 * outputs, for one float type: included with T and SFX defined, by conv_impl.h (float32 and
 * float64) and winograd.c (float32). The activations are the element-wise ops' own
 * expressions (ops.h), so a fused convolution gives bit for bit what conv, add and the
 * activation give one after another (NaN included).
 */
#define EPI_CAT2(a, b) a##_##b
#define EPI_CAT(a, b) EPI_CAT2(a, b)

/* y[i] = act(y[i] + r[i]) for i < n (r may be NULL). One loop per activation, so that each
   vectorises. */
HL_CLONES
static void EPI_CAT(conv_epilogue_run, SFX)(const conv_epilogue *e, T *restrict y,
                                            const T *restrict r, int64_t n) {
    if (r)
        for (int64_t i = 0; i < n; i++) y[i] += r[i];
    const T p0 = (T)e->alpha, p1 = (T)e->beta;
    switch (e->act) {
    case HL_CONV_ACT_RELU:
        for (int64_t i = 0; i < n; i++) {
            const T x = y[i];
            y[i] = x > 0 ? x : (x == x ? 0 : x);
        }
        break;
    case HL_CONV_ACT_CLIP:
        for (int64_t i = 0; i < n; i++) {
            const T x = y[i];
            y[i] = (x < p0 ? p0 : x) > p1 ? p1 : (x < p0 ? p0 : x);
        }
        break;
    case HL_CONV_ACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++) {
            const T x = y[i];
            y[i] = x >= 0 ? x : p0 * x;
        }
        break;
    case HL_CONV_ACT_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            const T x = y[i];
            y[i] = x == x ? fmax(0, fmin(1, p0 * x + p1)) : x;
        }
        break;
    default:
        break;
    }
}

/* The epilogue over the output run that starts off elements into y (the residual at the
   same offset). */
static inline void EPI_CAT(conv_epilogue_at, SFX)(const conv_epilogue *e, T *y, int64_t off,
                                                  int64_t n) {
    EPI_CAT(conv_epilogue_run, SFX)(e, y + off, e->res ? (const T *)e->res + off : NULL, n);
}

#undef EPI_CAT
#undef EPI_CAT2
