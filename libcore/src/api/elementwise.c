/*
 * api/elementwise.c - entry points of the unary, binary and where families: check the
 * arguments, prepare the output, build the call record and submit it.
 */
#include "../core.h"

enum { NOT_UNARY = 0, FLOAT_ONLY, NUMERIC, PREDICATE };
enum { NOT_BINARY = 0, ARITH, BOOL_RESULT };

static const unsigned char unary_kind[HL_OP_COUNT] = {
#define KIND_FLOAT(NAME, ...) [HL_OP_##NAME] = FLOAT_ONLY,
#define KIND_NUMERIC(NAME, ...) [HL_OP_##NAME] = NUMERIC,
#define KIND_PRED(NAME, ...) [HL_OP_##NAME] = PREDICATE,
    HL_UNARY_FLOAT_OPS(KIND_FLOAT) HL_UNARY_NUMERIC_OPS(KIND_NUMERIC)
    HL_UNARY_PREDICATE_OPS(KIND_PRED)
};

static const unsigned char binary_kind[HL_OP_COUNT] = {
#define KIND_ARITH(NAME, ...) [HL_OP_##NAME] = ARITH,
#define KIND_BOOL(NAME, ...) [HL_OP_##NAME] = BOOL_RESULT,
    HL_BINARY_ARITH_OPS(KIND_ARITH) HL_BINARY_BOOL_OPS(KIND_BOOL)
};

static bool is_float(hl_dtype d) { return d == HL_F32 || d == HL_F64 || d == HL_F16 || d == HL_BF16; }

hl_status hl_unary(int op, const hl_tensor *x, double alpha, double beta, hl_tensor **out) {
    if (op < 0 || op >= HL_OP_COUNT || !unary_kind[op])
        return hl_fail(HL_ERR_VALUE, "unary: op %d (%s) is not a unary op", op, hl_op_str(op));
    const char *name = hl_op_str(op);
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", name);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", name);
    int kind = unary_kind[op];
    if (kind == FLOAT_ONLY && !is_float(x->dtype))
        return hl_fail(HL_ERR_DTYPE, "%s: expected a floating-point tensor, got %s", name,
                       hl_desc(x));
    if (kind == NUMERIC && x->dtype == HL_BOOL)
        return hl_fail(HL_ERR_DTYPE, "%s: expected a numeric tensor, got %s", name, hl_desc(x));
    hl_device dev = x->storage->device;
    hl_status st = hl_check_compute_dtype(name, dev, x);
    if (st) return st;
    hl_tensor *caller = *out;
    st = hl_out_prepare(name, out, kind == PREDICATE ? HL_BOOL : x->dtype, dev, x->ndim, x->shape);
    if (st) return st;
    st = hl_check_no_overlap(name, *out, x, true);
    if (!st) {
        hl_call c = {.op = op, .n_in = 1, .n_out = 1, .in = {x}, .out = {*out}, .f = {alpha, beta}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_binary(int op, const hl_tensor *a, const hl_tensor *b, hl_tensor **out) {
    if (op < 0 || op >= HL_OP_COUNT || !binary_kind[op])
        return hl_fail(HL_ERR_VALUE, "binary: op %d (%s) is not a binary op", op, hl_op_str(op));
    const char *name = hl_op_str(op);
    if (!a || !b) return hl_fail(HL_ERR_VALUE, "%s: input is NULL", name);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", name);
    hl_device dev = a->storage->device;
    hl_status st = hl_check_device(name, dev, b);
    if (st) return st;
    if (a->dtype != b->dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: operands have different dtypes, %s and %s; cast one "
                       "first", name, hl_desc(a), hl_desc(b));
    if (binary_kind[op] == ARITH && a->dtype == HL_BOOL)
        return hl_fail(HL_ERR_DTYPE, "%s: arithmetic on bool tensors %s; cast to an integer or "
                       "float dtype first", name, hl_desc(a));
    if ((st = hl_check_compute_dtype(name, dev, a))) return st;
    int nd;
    int64_t shape[HL_MAX_DIMS];
    if ((st = hl_broadcast_shapes(name, a->ndim, a->shape, b->ndim, b->shape, &nd, shape)))
        return st;
    hl_tensor *caller = *out;
    hl_dtype odt = binary_kind[op] == BOOL_RESULT ? HL_BOOL : a->dtype;
    if ((st = hl_out_prepare(name, out, odt, dev, nd, shape))) return st;
    st = hl_check_no_overlap(name, *out, a, true);
    if (!st) st = hl_check_no_overlap(name, *out, b, true);
    if (!st) {
        hl_call c = {.op = op, .n_in = 2, .n_out = 1, .in = {a, b}, .out = {*out}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

hl_status hl_where(const hl_tensor *cond, const hl_tensor *a, const hl_tensor *b,
                   hl_tensor **out) {
    if (!cond || !a || !b) return hl_fail(HL_ERR_VALUE, "where: input is NULL");
    if (!out) return hl_fail(HL_ERR_VALUE, "where: output pointer is NULL");
    hl_device dev = a->storage->device;
    hl_status st;
    if ((st = hl_check_device("where", dev, b)) || (st = hl_check_device("where", dev, cond)))
        return st;
    if (cond->dtype != HL_BOOL && cond->dtype != HL_U8)
        return hl_fail(HL_ERR_DTYPE, "where: the condition must be bool, got %s", hl_desc(cond));
    if (a->dtype != b->dtype)
        return hl_fail(HL_ERR_DTYPE, "where: the two branches have different dtypes, %s and %s",
                       hl_desc(a), hl_desc(b));
    int nd, nd2;
    int64_t s1[HL_MAX_DIMS], shape[HL_MAX_DIMS];
    if ((st = hl_broadcast_shapes("where", a->ndim, a->shape, b->ndim, b->shape, &nd, s1)) ||
        (st = hl_broadcast_shapes("where", cond->ndim, cond->shape, nd, s1, &nd2, shape)))
        return st;
    hl_tensor *caller = *out;
    if ((st = hl_out_prepare("where", out, a->dtype, dev, nd2, shape))) return st;
    const hl_tensor *ins[3] = {cond, a, b};
    for (int k = 0; k < 3 && !st; k++) st = hl_check_no_overlap("where", *out, ins[k], true);
    if (!st) {
        hl_call c = {.op = HL_OP_WHERE, .n_in = 3, .n_out = 1, .in = {cond, a, b}, .out = {*out}};
        st = hl_submit(&c);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}
