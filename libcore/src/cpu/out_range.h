/* out_range.h - which output positions of a sliding window see a given input tap. */
#ifndef HL_CPU_OUT_RANGE_H
#define HL_CPU_OUT_RANGE_H

#include <stdint.h>

/* Output positions o in [0, count) whose input coordinate o * s + off lies in [0, size):
   the range [*lo, *hi). Convolutions (im2col, the depthwise loop) and the max pool's tap loop
   use it to split a row into the part a tap reads from and the padding. */
static inline void hl_out_range(int64_t off, int64_t s, int64_t size, int64_t count,
                                int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t last = size - 1 - off;
    int64_t b = last < 0 ? 0 : last / s + 1;
    if (a > count) a = count;
    if (b > count) b = count;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

#endif
