/*
 * copy.c - CPU kernels that move or produce values without arithmetic between elements:
 * copy with cast (every dtype to every dtype), fill, arange, eye and triangle.
 */
#include "dtypes.h"
#include "loops.h"
#include "thread_pool.h"

/* Loading a stored value as a C value: half types widen to float. */
#define LOAD_f32(v) (v)
#define LOAD_f64(v) (v)
#define LOAD_i32(v) (v)
#define LOAD_i64(v) (v)
#define LOAD_u8(v) (v)
#define LOAD_b8(v) (v)
#define LOAD_f16(v) hl_half_to_float(v)
#define LOAD_bf16(v) hl_bf16_to_float(v)

/* Converting any C arithmetic value to a stored value. Floats saturate into integers. */
#define STORE_f32(v) ((float)(v))
#define STORE_f64(v) ((double)(v))
#define STORE_i32(v) _Generic((v), float: hl_sat_i32((double)(v)), double: hl_sat_i32((double)(v)), default: (int32_t)(v))
#define STORE_i64(v) _Generic((v), float: hl_sat_i64((double)(v)), double: hl_sat_i64((double)(v)), default: (int64_t)(v))
#define STORE_u8(v) _Generic((v), float: hl_sat_u8((double)(v)), double: hl_sat_u8((double)(v)), default: (uint8_t)(v))
#define STORE_b8(v) ((uint8_t)((v) != 0))
#define STORE_f16(v) hl_float_to_half(TO_F32_ODD(v))
#define STORE_bf16(v) hl_float_to_bf16(TO_F32_ODD(v))

/* float16 and bfloat16 are produced from a float. Rounding a double (or a wide integer) to
   float first and then to the half type would round twice, and a value just above a halfway
   point of the half type can land exactly on it and then go to even: 1 + 2^-11 + 2^-40 would
   give 1.0 instead of 1 + 2^-10. Rounding to float "to odd" (truncate, and set the last bit
   when anything was cut off) keeps that information, and with 24 bits against at most 11 the
   second rounding is then exact (Boldo & Melquiond). */
static inline float f64_to_f32_odd(double d) {
    float f = (float)d;
    if ((double)f == d || f != f) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);  /* rounded away: step back */
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1;
    memcpy(&f, &u, 4);
    return f;
}
static inline float i64_to_f32_odd(int64_t v) {
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (a >> 24) {
        int shift = 64 - __builtin_clzll(a) - 24;   /* keep the top 24 significant bits */
        uint64_t kept = a >> shift;
        if (a & ((UINT64_C(1) << shift) - 1)) kept |= 1;
        a = kept << shift;
    }
    float f = (float)a;                              /* exact: 24 significant bits */
    return v < 0 ? -f : f;
}
#define TO_F32_ODD(v) \
    _Generic((v), float: (v), double: f64_to_f32_odd(v), default: i64_to_f32_odd((int64_t)(v)))

#define ALL_TYPES_A(X) \
    X(f32, float, HL_F32) X(f64, double, HL_F64) X(i32, int32_t, HL_I32) X(i64, int64_t, HL_I64) \
    X(u8, uint8_t, HL_U8) X(b8, uint8_t, HL_BOOL) X(f16, uint16_t, HL_F16) X(bf16, uint16_t, HL_BF16)
#define ALL_TYPES_B(X, ...) \
    X(__VA_ARGS__, f32, float, HL_F32) X(__VA_ARGS__, f64, double, HL_F64) \
    X(__VA_ARGS__, i32, int32_t, HL_I32) X(__VA_ARGS__, i64, int64_t, HL_I64) \
    X(__VA_ARGS__, u8, uint8_t, HL_U8) X(__VA_ARGS__, b8, uint8_t, HL_BOOL) \
    X(__VA_ARGS__, f16, uint16_t, HL_F16) X(__VA_ARGS__, bf16, uint16_t, HL_BF16)

#define CAST_ROW(sn, ST, SC, dn, DT, DC)                                                   \
    static void cast_##sn##_##dn(char **p, const int64_t *s, int64_t n, const void *ctx) { \
        (void)ctx;                                                                         \
        if (s[0] == sizeof(DT) && s[1] == sizeof(ST)) {                                    \
            DT *restrict o = (DT *)p[0];                                                   \
            const ST *restrict in = (const ST *)p[1];                                      \
            for (int64_t i = 0; i < n; i++) o[i] = STORE_##dn(LOAD_##sn(in[i]));           \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++)                                                \
                *(DT *)(p[0] + i * s[0]) = STORE_##dn(LOAD_##sn(*(const ST *)(p[1] + i * s[1]))); \
        }                                                                                  \
    }
#define CAST_FROM(sn, ST, SC) ALL_TYPES_B(CAST_ROW, sn, ST, SC)
ALL_TYPES_A(CAST_FROM)

#define CAST_ENTRY(sn, ST, SC, dn, DT, DC) [SC][DC] = cast_##sn##_##dn,
#define CAST_ENTRIES_FROM(sn, ST, SC) ALL_TYPES_B(CAST_ENTRY, sn, ST, SC)
static const hl_row_fn cast_rows[HL_NUM_DTYPES][HL_NUM_DTYPES] = {ALL_TYPES_A(CAST_ENTRIES_FROM)};

/* Same-dtype copies move bytes: one memcpy per contiguous row. */
static void copy_bytes(char **p, const int64_t *s, int64_t n, const void *ctx) {
    int64_t esz = *(const int64_t *)ctx;
    if (s[0] == esz && s[1] == esz) {
        memcpy(p[0], p[1], (size_t)(n * esz));
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], p[1] + i * s[1], (size_t)esz);
}

/* in[0] = source, broadcast to out's shape. */
hl_status hl_cpu_copy(const hl_call *c) {
    const hl_tensor *ops[2] = {c->out[0], c->in[0]};
    hl_loop L;
    hl_loop_init(&L, 2, ops);
    if (ops[0]->dtype == ops[1]->dtype) {
        int64_t esz = (int64_t)hl_dtype_size(ops[0]->dtype);
        hl_loop_run(&L, copy_bytes, &esz);
    } else {
        hl_loop_run(&L, cast_rows[ops[1]->dtype][ops[0]->dtype], NULL);
    }
    return HL_OK;
}

/* ---- fill: out[...] = f[0] converted to out's dtype ---- */

static void fill_row(char **p, const int64_t *s, int64_t n, const void *ctx) {
    const uint64_t *pattern = ctx;  /* the value's bytes, in the first esz bytes */
    int64_t esz = (int64_t)pattern[1];
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], &pattern[0], (size_t)esz);
}

/* Converts v to dtype d and stores its bytes in *bits. */
static void value_bits(hl_dtype d, double v, uint64_t *bits) {
    *bits = 0;
    switch (d) {
#define BITS_CASE(sn, T, code) case code: { T x = STORE_##sn(v); memcpy(bits, &x, sizeof x); break; }
        ALL_TYPES_A(BITS_CASE)
#undef BITS_CASE
        default: break;
    }
}

hl_status hl_cpu_fill(const hl_call *c) {
    uint64_t pattern[2];
    value_bits(c->out[0]->dtype, c->f[0], &pattern[0]);
    pattern[1] = hl_dtype_size(c->out[0]->dtype);
    const hl_tensor *ops[1] = {c->out[0]};
    hl_loop L;
    hl_loop_init(&L, 1, ops);
    hl_loop_run(&L, fill_row, pattern);
    return HL_OK;
}

/* ---- arange: out (contiguous, 1-D)[i] = f[0] + i * f[1]; integer dtypes use i[0], i[1] ---- */

hl_status hl_cpu_arange(const hl_call *c) {
    hl_tensor *o = c->out[0];
    int64_t n = o->shape[0];
    char *base = hl_ptr(o);
    switch (o->dtype) {
#define ARANGE_CASE(sn, T, code)                                                             \
    case code: {                                                                             \
        T *out = (T *)base;                                                                  \
        if (code == HL_I32 || code == HL_I64 || code == HL_U8)                              \
            for (int64_t i = 0; i < n; i++) out[i] = STORE_##sn(c->i[0] + i * c->i[1]);     \
        else                                                                                 \
            for (int64_t i = 0; i < n; i++) out[i] = STORE_##sn(c->f[0] + (double)i * c->f[1]); \
        break;                                                                               \
    }
        ALL_TYPES_A(ARANGE_CASE)
#undef ARANGE_CASE
        default: return hl_fail(HL_ERR_DTYPE, "arange: invalid dtype");
    }
    return HL_OK;
}

/* ---- eye: out (contiguous n x m) = 1 on diagonal i[0] ---- */

hl_status hl_cpu_eye(const hl_call *c) {
    hl_tensor *o = c->out[0];
    int64_t n = o->shape[0], m = o->shape[1], k = c->i[0];
    size_t esz = hl_dtype_size(o->dtype);
    uint64_t one;
    value_bits(o->dtype, 1.0, &one);
    char *base = hl_ptr(o);
    memset(base, 0, (size_t)(n * m) * esz);
    for (int64_t r = 0; r < n; r++) {
        int64_t col = r + k;
        if (col >= 0 && col < m) memcpy(base + (size_t)(r * m + col) * esz, &one, esz);
    }
    return HL_OK;
}

/* ---- triangle: out = x with the elements off the kept triangle of the last two axes set to
   zero. i[0] = k, i[1] = upper. out is contiguous; x may be strided. ---- */

typedef struct {
    const hl_tensor *x, *o;
    int64_t rows, cols, k;
    bool upper;
    size_t esz;
} triangle_job;

static void triangle_batches(int64_t b0, int64_t b1, void *ctx) {
    const triangle_job *q = ctx;
    const hl_tensor *x = q->x, *o = q->o;
    const int nd = o->ndim;
    const int64_t rows = q->rows, cols = q->cols, k = q->k;
    const size_t esz = q->esz;
    char *obase = hl_ptr(o);
    const char *xbase = hl_ptr(x);
    for (int64_t b = b0; b < b1; b++) {
        int64_t xoff = 0, rem = b;
        for (int d = nd - 3; d >= 0; d--) {
            xoff += (rem % o->shape[d]) * x->strides[d];
            rem /= o->shape[d];
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                char *dst = obase + (size_t)((b * rows + r) * cols + c) * esz;
                bool keep = q->upper ? (c - r >= k) : (c - r <= k);
                if (keep)
                    memcpy(dst, xbase + (xoff + r * x->strides[nd - 2] + c * x->strides[nd - 1]) *
                                            (int64_t)esz, esz);
                else
                    memset(dst, 0, esz);
            }
    }
}

hl_status hl_cpu_triangle(const hl_call *c) {
    const hl_tensor *x = c->in[0];
    hl_tensor *o = c->out[0];
    int nd = o->ndim;
    triangle_job q = {x, o, o->shape[nd - 2], o->shape[nd - 1], c->i[0], c->i[1] != 0,
                      hl_dtype_size(o->dtype)};
    int64_t batches = hl_shape_numel(nd - 2, o->shape);
    /* each batch writes its own matrix */
    hl_parallel_for(batches, batches * q.rows * q.cols > 65536 ? 1 : batches, triangle_batches,
                    &q);
    return HL_OK;
}
