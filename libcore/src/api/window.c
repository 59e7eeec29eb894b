/* api/window.c - see window.h. */
#include "window.h"

const char *hl_window_ints_str(int n, const int64_t *v) {
    return v ? hl_shape_str(n, v) : "(default)";
}

hl_status hl_window_read(const char *op, int S, const int64_t *stride,
                         const int64_t *stride_default, const int64_t *pads,
                         const int64_t *dilation, hl_window *w) {
    w->S = S;
    for (int d = 0; d < 2; d++) {
        w->stride[d] = w->dil[d] = 1;
        w->pb[d] = w->pe[d] = 0;
    }
    const int64_t *strides = stride ? stride : stride_default;
    for (int d = 0; d < S; d++) {
        int j = d + 2 - S;
        int64_t s = strides ? strides[d] : 1, dl = dilation ? dilation[d] : 1;
        int64_t b = pads ? pads[d] : 0, e = pads ? pads[S + d] : 0;
        if (s < 1 || s >= HL_WINDOW_LIMIT)
            return hl_fail(HL_ERR_VALUE, "%s: stride must be positive, got %s", op,
                           hl_window_ints_str(S, strides));
        if (dl < 1 || dl >= HL_WINDOW_LIMIT)
            return hl_fail(HL_ERR_VALUE, "%s: dilation must be positive, got %s", op,
                           hl_window_ints_str(S, dilation));
        if (b < 0 || e < 0 || b >= HL_WINDOW_LIMIT || e >= HL_WINDOW_LIMIT)
            return hl_fail(HL_ERR_VALUE, "%s: pads must be non-negative (and below 2^31), got "
                           "%s (all begins, then all ends)", op,
                           hl_window_ints_str(2 * S, pads));
        w->stride[j] = s;
        w->dil[j] = dl;
        w->pb[j] = b;
        w->pe[j] = e;
    }
    return HL_OK;
}
