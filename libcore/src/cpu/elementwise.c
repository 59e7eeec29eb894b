/*
 * elementwise.c - CPU kernels of the unary, binary and where families. Each op's scalar
 * expression comes from ops.h; the macros below wrap it in a row function per dtype (with a
 * contiguous fast path the compiler vectorises) and put the row functions in tables indexed
 * by op code. hl_loop_run does the striding, broadcasting and threading.
 */
#include <string.h>
#include <tgmath.h>

#include "../kernel_scalar.h"  /* hl_int_div and friends, which ops.h's expressions call */
#include "dtypes.h"
#include "loops.h"

#include "fast_math.h"  /* hl_tanh_f32, hl_erf_f32: float32 tanh and erf without libm */
#undef HL_TANH
#define HL_TANH(v) _Generic((v), float: hl_tanh_f32, default: tanh)(v)
#undef HL_ERF
#define HL_ERF(v) _Generic((v), float: hl_erf_f32, default: erf)(v)

/* ---- row functions ---- */

/* out (TO) = expr(x: TI); p0, p1 are the op's parameters. */
#define UNARY_ROW(fname, TI, TO, expr)                                                    \
    static void fname(char **p, const int64_t *s, int64_t n, const void *ctx) {           \
        const double *prm = ctx;                                                          \
        const TI p0 = (TI)prm[0], p1 = (TI)prm[1];                                        \
        (void)p0; (void)p1;                                                               \
        if (s[0] == sizeof(TO) && s[1] == sizeof(TI)) {                                   \
            TO *restrict o = (TO *)p[0];                                                  \
            const TI *restrict in = (const TI *)p[1];                                     \
            for (int64_t i = 0; i < n; i++) { const TI x = in[i]; o[i] = (TO)(expr); }    \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) {                                             \
                const TI x = *(const TI *)(p[1] + i * s[1]);                              \
                *(TO *)(p[0] + i * s[0]) = (TO)(expr);                                    \
            }                                                                             \
        }                                                                                 \
    }

/* out (TO) = expr(a, b: TI), with fast paths for two contiguous inputs and for a scalar b. */
#define BINARY_ROW(fname, TI, TO, expr)                                                   \
    static void fname(char **p, const int64_t *s, int64_t n, const void *ctx) {           \
        (void)ctx;                                                                        \
        TO *restrict o = (TO *)p[0];                                                      \
        const TI *restrict pa = (const TI *)p[1], *restrict pb = (const TI *)p[2];        \
        if (s[0] == sizeof(TO) && s[1] == sizeof(TI) && s[2] == sizeof(TI)) {             \
            for (int64_t i = 0; i < n; i++) { const TI a = pa[i], b = pb[i]; o[i] = (TO)(expr); } \
        } else if (s[0] == sizeof(TO) && s[1] == sizeof(TI) && s[2] == 0) {               \
            const TI b = pb[0];                                                           \
            for (int64_t i = 0; i < n; i++) { const TI a = pa[i]; o[i] = (TO)(expr); }    \
        } else {                                                                          \
            for (int64_t i = 0; i < n; i++) {                                             \
                const TI a = *(const TI *)(p[1] + i * s[1]);                              \
                const TI b = *(const TI *)(p[2] + i * s[2]);                              \
                *(TO *)(p[0] + i * s[0]) = (TO)(expr);                                    \
            }                                                                             \
        }                                                                                 \
    }

/* Tables: row function per op code, per dtype. */
static hl_row_fn unary_rows[HL_NUM_DTYPES][HL_OP_COUNT];
static hl_row_fn binary_rows[HL_NUM_DTYPES][HL_OP_COUNT];

/* Instantiate every (op, dtype) row function. */
#define FLOAT_UNARY(NAME, name, family, expr) \
    UNARY_ROW(u_##name##_f32, float, float, expr) UNARY_ROW(u_##name##_f64, double, double, expr)
HL_UNARY_FLOAT_OPS(FLOAT_UNARY)

#define NUMERIC_UNARY(NAME, name, family, fexpr, iexpr)                                      \
    UNARY_ROW(u_##name##_f32, float, float, fexpr) UNARY_ROW(u_##name##_f64, double, double, fexpr) \
    UNARY_ROW(u_##name##_i32, int32_t, int32_t, iexpr)                                       \
    UNARY_ROW(u_##name##_i64, int64_t, int64_t, iexpr)                                       \
    UNARY_ROW(u_##name##_u8, uint8_t, uint8_t, (uint8_t)(iexpr))
HL_UNARY_NUMERIC_OPS(NUMERIC_UNARY)

#define PRED_ONE(suffix, T, code, name, expr) UNARY_ROW(u_##name##_##suffix, T, uint8_t, expr)
#define PRED_UNARY(NAME, name, family, expr)                                                 \
    PRED_ONE(f32, float, HL_F32, name, expr) PRED_ONE(f64, double, HL_F64, name, expr)       \
    PRED_ONE(i32, int32_t, HL_I32, name, expr) PRED_ONE(i64, int64_t, HL_I64, name, expr)    \
    PRED_ONE(u8, uint8_t, HL_U8, name, expr) PRED_ONE(b8, uint8_t, HL_BOOL, name, expr)
HL_UNARY_PREDICATE_OPS(PRED_UNARY)

#define ARITH_BINARY(NAME, name, family, fexpr, iexpr)                                       \
    BINARY_ROW(b_##name##_f32, float, float, fexpr) BINARY_ROW(b_##name##_f64, double, double, fexpr) \
    BINARY_ROW(b_##name##_i32, int32_t, int32_t, iexpr)                                      \
    BINARY_ROW(b_##name##_i64, int64_t, int64_t, iexpr)                                      \
    BINARY_ROW(b_##name##_u8, uint8_t, uint8_t, iexpr)
HL_BINARY_ARITH_OPS(ARITH_BINARY)

#define BOOL_BINARY(NAME, name, family, expr)                                                \
    BINARY_ROW(b_##name##_f32, float, uint8_t, expr) BINARY_ROW(b_##name##_f64, double, uint8_t, expr) \
    BINARY_ROW(b_##name##_i32, int32_t, uint8_t, expr)                                       \
    BINARY_ROW(b_##name##_i64, int64_t, uint8_t, expr)                                       \
    BINARY_ROW(b_##name##_u8, uint8_t, uint8_t, expr)                                        \
    BINARY_ROW(b_##name##_b8, uint8_t, uint8_t, expr)
HL_BINARY_BOOL_OPS(BOOL_BINARY)

static void fill_tables(void) {
#define SET_FLOAT(NAME, name, family, ...)                                                   \
    unary_rows[HL_F32][HL_OP_##NAME] = u_##name##_f32;                                       \
    unary_rows[HL_F64][HL_OP_##NAME] = u_##name##_f64;
    HL_UNARY_FLOAT_OPS(SET_FLOAT)
#define SET_NUMERIC(NAME, name, family, ...)                                                 \
    SET_FLOAT(NAME, name, family)                                                            \
    unary_rows[HL_I32][HL_OP_##NAME] = u_##name##_i32;                                       \
    unary_rows[HL_I64][HL_OP_##NAME] = u_##name##_i64;                                       \
    unary_rows[HL_U8][HL_OP_##NAME] = u_##name##_u8;
    HL_UNARY_NUMERIC_OPS(SET_NUMERIC)
#define SET_PRED(NAME, name, family, ...)                                                    \
    SET_NUMERIC(NAME, name, family) unary_rows[HL_BOOL][HL_OP_##NAME] = u_##name##_b8;
    HL_UNARY_PREDICATE_OPS(SET_PRED)
#define SET_ARITH(NAME, name, family, ...)                                                   \
    binary_rows[HL_F32][HL_OP_##NAME] = b_##name##_f32;                                      \
    binary_rows[HL_F64][HL_OP_##NAME] = b_##name##_f64;                                      \
    binary_rows[HL_I32][HL_OP_##NAME] = b_##name##_i32;                                      \
    binary_rows[HL_I64][HL_OP_##NAME] = b_##name##_i64;                                      \
    binary_rows[HL_U8][HL_OP_##NAME] = b_##name##_u8;
    HL_BINARY_ARITH_OPS(SET_ARITH)
#define SET_BOOL(NAME, name, family, ...)                                                    \
    SET_ARITH(NAME, name, family) binary_rows[HL_BOOL][HL_OP_##NAME] = b_##name##_b8;
    HL_BINARY_BOOL_OPS(SET_BOOL)
}

static void tables_once(void) {
    static int ready;  /* the tables are the same whoever fills them, so a race is harmless */
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        fill_tables();
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
}

/* Lets the entry points ask whether (op, dtype) has a CPU kernel. */
bool hl_cpu_unary_supports(int op, hl_dtype d) {
    tables_once();
    return (unsigned)d < HL_NUM_DTYPES && unary_rows[d][op] != NULL;
}
bool hl_cpu_binary_supports(int op, hl_dtype d) {
    tables_once();
    return (unsigned)d < HL_NUM_DTYPES && binary_rows[d][op] != NULL;
}

/* The row function of a unary or binary op in dtype d (NULL when there is none): what a
   fused pass (fused.c) runs for each of its steps. */
hl_row_fn hl_cpu_elementwise_row(int op, hl_dtype d) {
    tables_once();
    if ((unsigned)d >= HL_NUM_DTYPES || op < 0 || op >= HL_OP_COUNT) return NULL;
    return unary_rows[d][op] ? unary_rows[d][op] : binary_rows[d][op];
}

/* ---- kernels ---- */

/* in[0] = x; f[0], f[1] = alpha, beta. */
hl_status hl_cpu_unary(const hl_call *c) {
    tables_once();
    const hl_tensor *x = c->in[0];
    hl_row_fn fn = unary_rows[x->dtype][c->op];
    if (!fn)
        return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op), hl_desc(x));
    const hl_tensor *ops[2] = {c->out[0], x};
    hl_loop L;
    hl_loop_init(&L, 2, ops);
    hl_loop_run(&L, fn, c->f);
    return HL_OK;
}

/* in[0] = a, in[1] = b, both broadcast to out. */
hl_status hl_cpu_binary(const hl_call *c) {
    tables_once();
    const hl_tensor *a = c->in[0];
    hl_row_fn fn = binary_rows[a->dtype][c->op];
    if (!fn)
        return hl_fail(HL_ERR_DTYPE, "%s: no CPU kernel for %s", hl_op_str(c->op), hl_desc(a));
    const hl_tensor *ops[3] = {c->out[0], a, c->in[1]};
    hl_loop L;
    hl_loop_init(&L, 3, ops);
    hl_loop_run(&L, fn, NULL);
    return HL_OK;
}

/* where: in[0] = cond (bool or uint8), in[1] = a, in[2] = b; moves elements by size alone. */
#define WHERE_ROW(fname, T)                                                              \
    static void fname(char **p, const int64_t *s, int64_t n, const void *ctx) {          \
        (void)ctx;                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                \
            const uint8_t c = *(const uint8_t *)(p[1] + i * s[1]);                       \
            *(T *)(p[0] + i * s[0]) = c ? *(const T *)(p[2] + i * s[2])                  \
                                        : *(const T *)(p[3] + i * s[3]);                 \
        }                                                                                \
    }
WHERE_ROW(where_1, uint8_t)
WHERE_ROW(where_2, uint16_t)
WHERE_ROW(where_4, uint32_t)
WHERE_ROW(where_8, uint64_t)

hl_status hl_cpu_where(const hl_call *c) {
    hl_row_fn fns[9] = {NULL, where_1, where_2, NULL, where_4, NULL, NULL, NULL, where_8};
    const hl_tensor *ops[4] = {c->out[0], c->in[0], c->in[1], c->in[2]};
    hl_loop L;
    hl_loop_init(&L, 4, ops);
    hl_loop_run(&L, fns[hl_dtype_size(c->out[0]->dtype)], NULL);
    return HL_OK;
}
