/*
 * api/window.h - the sliding-window attributes convolution and pooling share: stride,
 * dilation and begin/end pads per spatial axis, read from the caller's arrays (S entries;
 * pads 2*S, all begins then all ends) into the 2-D form both families' records use, where
 * index 0 is H (a unit axis for a 1-D problem) and index 1 is W.
 */
#ifndef HL_API_WINDOW_H
#define HL_API_WINDOW_H

#include "../core.h"

/* Attribute values from here on are refused: they keep every size computation far from
   int64 overflow. */
#define HL_WINDOW_LIMIT ((int64_t)1 << 31)

typedef struct {
    int S;                                     /* spatial axes: 1 or 2 */
    int64_t stride[2], dil[2], pb[2], pe[2];
} hl_window;

/* stride NULL takes stride_default (NULL there too: 1), pads NULL 0, dilation NULL 1. */
hl_status hl_window_read(const char *op, int S, const int64_t *stride,
                         const int64_t *stride_default, const int64_t *pads,
                         const int64_t *dilation, hl_window *w);

/* "(1, 2)" for an attribute array of n entries; "(default)" when it is NULL. */
const char *hl_window_ints_str(int n, const int64_t *v);

#endif
