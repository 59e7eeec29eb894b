/*
 * dtypes.h - the C type behind each dtype, and X-macro lists of dtypes that CPU kernels
 * instantiate over: X(suffix, C type, dtype code).
 */
#ifndef HL_CPU_DTYPES_H
#define HL_CPU_DTYPES_H

#include <math.h>
#include "../core.h"

#define HL_FLOAT_TYPES(X) X(f32, float, HL_F32) X(f64, double, HL_F64)
#define HL_INT_TYPES(X) X(i32, int32_t, HL_I32) X(i64, int64_t, HL_I64) X(u8, uint8_t, HL_U8)
#define HL_NUMERIC_TYPES(X) HL_FLOAT_TYPES(X) HL_INT_TYPES(X)
/* bool is stored as one byte holding 0 or 1 */
#define HL_COMPUTE_TYPES(X) HL_NUMERIC_TYPES(X) X(b8, uint8_t, HL_BOOL)

/* Float -> integer conversions saturate and send NaN to 0, so that no input is undefined
   behaviour (C leaves out-of-range float->int conversions undefined). */
static inline int64_t hl_sat_i64(double v) {
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}
static inline int32_t hl_sat_i32(double v) {
    if (v != v) return 0;
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)v;
}
static inline uint8_t hl_sat_u8(double v) {
    if (v != v || v <= 0) return 0;
    if (v >= 255.0) return 255;
    return (uint8_t)v;
}

#endif
