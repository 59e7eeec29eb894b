/* out_range.h - which output positions of a sliding window see a given input tap. */
#ifndef HL_CPU_OUT_RANGE_H
#define HL_CPU_OUT_RANGE_H

#include <stdint.h>

#include "../kernel_scalar.h"

/* Output positions o in [0, count) whose input coordinate o * s + off lies in [0, size):
   the range [*lo, *hi). Convolutions (im2col, the depthwise loop) and the max pool's tap loop
   use it to split a row into the part a tap reads from and the padding. It is the pooling
   window's tap range read the other way round (positions for a tap instead of taps for a
   position): the same arithmetic, kept once in kernel_scalar.h for the CPU and CUDA. */
static inline void hl_out_range(int64_t off, int64_t s, int64_t size, int64_t count,
                                int64_t *lo, int64_t *hi) {
    hl_tap_range(off, s, size, count, lo, hi);
}

#endif
