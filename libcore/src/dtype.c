/* dtype.c - dtype names and sizes, and the float16 / bfloat16 conversions. */
#include <math.h>

#include "core.h"

static const char *dtype_names[HL_NUM_DTYPES] = {"float32", "float64", "int32", "int64",
                                                 "uint8",   "bool",    "float16", "bfloat16"};
static const size_t dtype_sizes[HL_NUM_DTYPES] = {4, 8, 4, 8, 1, 1, 2, 2};

const char *hl_dtype_name(hl_dtype d) {
    return (unsigned)d < HL_NUM_DTYPES ? dtype_names[d] : "invalid dtype";
}
size_t hl_dtype_size(hl_dtype d) { return (unsigned)d < HL_NUM_DTYPES ? dtype_sizes[d] : 0; }

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* IEEE half -> float, exact (every half is a float). */
float hl_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));      /* inf / nan */
    if (exp == 0) {                                                     /* zero / subnormal */
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

/* float -> half, round to nearest even; overflow gives inf, nan stays nan. */
uint16_t hl_float_to_half(float f) {
    uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);             /* >= 65520: inf */
    if (a < 0x38800000u) {                                              /* subnormal half */
        /* Scale so the half's unit in the last place (2^-24) is 1; nearbyintf rounds to
           nearest even. m == 0x400 is the smallest normal half, which the bits spell too. */
        float scaled = u2f(a) * 16777216.0f;                            /* * 2^24 */
        uint32_t m = (uint32_t)nearbyintf(scaled);
        return (uint16_t)(sign | m);                                    /* m <= 0x400 ok */
    }
    uint32_t mant_odd = (a >> 13) & 1;
    a += 0xfffu + mant_odd;                                              /* round to even */
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
}

float hl_bf16_to_float(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t hl_float_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  /* quiet nan */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
