/*
 * ops.h - the one list of libcore's ops.
 *
 * Every row is X(NAME, name, family, ...): NAME gives the enum value HL_OP_NAME, name is the
 * string bindings and error messages use, family names the kernel that runs it on each device
 * (hl_cpu_<family> on the CPU; the CUDA backend fills its own table the same way), and the
 * element-wise families carry their scalar expressions after that. The op enum, the name table
 * and each backend's dispatch table are all generated from this list; adding an op adds a row.
 *
 * Element-wise expressions are written in terms of x (unary) or a and b (binary), and the op
 * parameters p0 and p1 (alpha, beta). Float expressions use <tgmath.h>, so one expression serves
 * float32 and float64.
 */
#ifndef HL_OPS_H
#define HL_OPS_H

/* A backend may give tanh and erf faster float32 forms (the CPU's, in elementwise.c). */
#ifndef HL_TANH
#define HL_TANH(v) tanh(v)
#endif
#ifndef HL_ERF
#define HL_ERF(v) erf(v)
#endif

/* Unary ops on float32/float64 only. */
#define HL_UNARY_FLOAT_OPS(X) \
    X(EXP, exp, unary, exp(x)) \
    X(LOG, log, unary, log(x)) \
    X(SQRT, sqrt, unary, sqrt(x)) \
    X(RSQRT, rsqrt, unary, 1 / sqrt(x)) \
    X(RECIPROCAL, reciprocal, unary, 1 / x) \
    X(SIN, sin, unary, sin(x)) \
    X(COS, cos, unary, cos(x)) \
    X(TAN, tan, unary, tan(x)) \
    X(ASIN, asin, unary, asin(x)) \
    X(ACOS, acos, unary, acos(x)) \
    X(ATAN, atan, unary, atan(x)) \
    X(SINH, sinh, unary, sinh(x)) \
    X(COSH, cosh, unary, cosh(x)) \
    X(TANH, tanh, unary, HL_TANH(x)) \
    X(ASINH, asinh, unary, asinh(x)) \
    X(ACOSH, acosh, unary, acosh(x)) \
    X(ATANH, atanh, unary, atanh(x)) \
    X(ERF, erf, unary, HL_ERF(x)) \
    X(EXPM1, expm1, unary, expm1(x)) \
    X(LOG1P, log1p, unary, log1p(x)) \
    X(SIGMOID, sigmoid, unary, x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x))) \
    X(RELU, relu, unary, x > 0 ? x : (x == x ? 0 : x)) \
    X(LEAKY_RELU, leaky_relu, unary, x >= 0 ? x : p0 * x) \
    X(ELU, elu, unary, x > 0 ? x : p0 * expm1(x)) \
    X(CELU, celu, unary, x > 0 ? x : p0 * expm1(x / p0)) \
    X(THRESHOLDED_RELU, thresholded_relu, unary, x > p0 ? x : (x == x ? 0 : x)) \
    X(SELU, selu, unary, p1 * (x > 0 ? x : p0 * expm1(x))) \
    X(GELU, gelu, unary, 0.5 * x * (1 + erf(x * 0.70710678118654752440))) \
    X(GELU_TANH, gelu_tanh, unary, \
      0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)))) \
    X(SOFTPLUS, softplus, unary, x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))) \
    X(SOFTSIGN, softsign, unary, x / (1 + fabs(x))) \
    X(HARD_SIGMOID, hard_sigmoid, unary, x == x ? fmax(0, fmin(1, p0 * x + p1)) : x) \
    X(CLIP, clip, unary, (x < p0 ? p0 : x) > p1 ? p1 : (x < p0 ? p0 : x)) /* NaN stays */ \
    X(HARD_SWISH, hard_swish, unary, x * fmax(0, fmin(1, x / 6 + 0.5))) \
    X(MISH, mish, unary, x * tanh(x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))) \
    X(FLOOR, floor, unary, floor(x)) \
    X(CEIL, ceil, unary, ceil(x)) \
    X(ROUND, round, unary, nearbyint(x)) \
    X(TRUNC, trunc, unary, trunc(x))

/* Unary ops on every numeric dtype: a float expression and an integer one. */
#define HL_UNARY_NUMERIC_OPS(X) \
    X(NEG, neg, unary, -x, -x) \
    X(ABS, abs, unary, fabs(x), x < 0 ? -x : x) \
    X(SIGN, sign, unary, x > 0 ? 1 : (x < 0 ? -1 : (x == x ? 0 : x)), (x > 0) - (x < 0)) \
    X(SQUARE, square, unary, x * x, x * x)

/* Unary predicates: any numeric or bool dtype in, bool out. */
#define HL_UNARY_PREDICATE_OPS(X) \
    X(LOGICAL_NOT, logical_not, unary, !(x != 0)) \
    X(ISNAN, isnan, unary, x != x) \
    X(ISINF, isinf, unary, (x == x) && (x - x != x - x)) \
    X(ISFINITE, isfinite, unary, x - x == x - x)

/* Binary arithmetic: a float expression and an integer one (integer division, where needed,
   is written out in the kernel file so that a zero divisor never traps). */
#define HL_BINARY_ARITH_OPS(X) \
    X(ADD, add, binary, a + b, a + b) \
    X(SUB, sub, binary, a - b, a - b) \
    X(MUL, mul, binary, a * b, a * b) \
    X(DIV, div, binary, a / b, hl_int_div(a, b)) \
    X(POW, pow, binary, pow(a, b), hl_int_pow(a, b)) \
    X(MAXIMUM, maximum, binary, (a > b || a != a) ? a : b, a > b ? a : b) \
    X(MINIMUM, minimum, binary, (a < b || a != a) ? a : b, a < b ? a : b) \
    X(MOD, mod, binary, hl_float_mod(a, b), hl_int_mod(a, b)) \
    X(FMOD, fmod, binary, fmod(a, b), hl_int_fmod(a, b)) \
    X(RELU_GRAD, relu_grad, binary, b > 0 ? a : 0, b > 0 ? a : 0)

/* Binary comparisons and logic: any dtype in (both the same), bool out. */
#define HL_BINARY_BOOL_OPS(X) \
    X(EQ, eq, binary, a == b) \
    X(NE, ne, binary, a != b) \
    X(LT, lt, binary, a < b) \
    X(LE, le, binary, a <= b) \
    X(GT, gt, binary, a > b) \
    X(GE, ge, binary, a >= b) \
    X(LOGICAL_AND, logical_and, binary, (a != 0) && (b != 0)) \
    X(LOGICAL_OR, logical_or, binary, (a != 0) || (b != 0)) \
    X(LOGICAL_XOR, logical_xor, binary, (a != 0) != (b != 0))

/* Everything else: one row per op, family last. */
#define HL_OTHER_OPS(X) \
    X(COPY, copy, copy) \
    X(FILL, fill, fill) \
    X(ARANGE, arange, arange) \
    X(EYE, eye, eye) \
    X(TRIANGLE, triangle, triangle) \
    X(WHERE, where, where) \
    X(SUM, sum, reduce) \
    X(MEAN, mean, reduce) \
    X(MAX, max, reduce) \
    X(MIN, min, reduce) \
    X(PROD, prod, reduce) \
    X(L2, l2, reduce) \
    X(LOGSUMEXP, logsumexp, reduce) \
    X(ARGMAX, argmax, arg_reduce) \
    X(ARGMIN, argmin, arg_reduce) \
    X(CUMSUM, cumsum, cumsum) \
    X(MATMUL, matmul, matmul) \
    X(GEMM, gemm, gemm) \
    X(GEMM_PACK_B, gemm_pack_b, gemm) \
    X(MATMUL_FUSED, matmul_fused, gemm) \
    X(ATTENTION, attention, gemm) \
    X(CONV, conv, conv) \
    X(CONV_FUSED, conv_fused, conv) \
    X(CONV_PACK, conv_pack, conv_pack) \
    X(CONV_GRAD_INPUT, conv_grad_input, conv_grad_input) \
    X(CONV_GRAD_WEIGHT, conv_grad_weight, conv_grad_weight) \
    X(MAX_POOL, max_pool, pool) \
    X(AVG_POOL, avg_pool, pool) \
    X(MAX_POOL_GRAD, max_pool_grad, pool_grad) \
    X(AVG_POOL_GRAD, avg_pool_grad, pool_grad) \
    X(BATCH_NORM, batch_norm, batch_norm) \
    X(BATCH_NORM_GRAD, batch_norm_grad, batch_norm_grad) \
    X(LAYER_NORM, layer_norm, layer_norm) \
    X(LAYER_NORM_GRAD, layer_norm_grad, layer_norm_grad) \
    X(SOFTMAX, softmax, softmax) \
    X(LOG_SOFTMAX, log_softmax, softmax) \
    X(SOFTMAX_GRAD, softmax_grad, softmax_grad) \
    X(LOG_SOFTMAX_GRAD, log_softmax_grad, softmax_grad) \
    X(SOFTMAX_CROSS_ENTROPY, softmax_cross_entropy, softmax_cross_entropy) \
    X(SOFTMAX_CROSS_ENTROPY_GRAD, softmax_cross_entropy_grad, softmax_cross_entropy_grad) \
    X(GATHER, gather, gather) \
    X(GATHER_GRAD, gather_grad, gather_grad) \
    X(GATHER_ELEMENTS, gather_elements, gather_elements) \
    X(SCATTER_ELEMENTS, scatter_elements, scatter_elements) \
    X(ONE_HOT, one_hot, one_hot) \
    X(NONZERO, nonzero, nonzero) \
    X(TOPK, topk, topk) \
    X(CONCAT, concat, concat) \
    X(PAD, pad, pad) \
    X(TILE, tile, tile) \
    X(RESIZE, resize, resize) \
    X(RESIZE_GRAD, resize_grad, resize_grad) \
    X(RANDOM_UNIFORM, random_uniform, random) \
    X(RANDOM_NORMAL, random_normal, random) \
    X(RANDOM_BERNOULLI, random_bernoulli, random) \
    X(OPTIM_UPDATE, optim_update, optim_update)

#define HL_OPS(X) \
    HL_UNARY_FLOAT_OPS(X) HL_UNARY_NUMERIC_OPS(X) HL_UNARY_PREDICATE_OPS(X) \
    HL_BINARY_ARITH_OPS(X) HL_BINARY_BOOL_OPS(X) HL_OTHER_OPS(X)

#define HL_OP_ENUM_ROW(NAME, name, family, ...) HL_OP_##NAME,
typedef enum { HL_OPS(HL_OP_ENUM_ROW) HL_OP_COUNT } hl_op;
#undef HL_OP_ENUM_ROW

/* Every kernel family a backend implements. */
#define HL_KERNEL_FAMILIES(F) \
    F(unary) F(binary) F(copy) F(fill) F(arange) F(eye) F(triangle) F(where) F(reduce) \
    F(arg_reduce) F(cumsum) F(matmul) F(gemm) F(conv) F(conv_pack) F(conv_grad_input) \
    F(conv_grad_weight) \
    F(pool) F(pool_grad) F(batch_norm) F(batch_norm_grad) F(layer_norm) F(layer_norm_grad) \
    F(softmax) F(softmax_grad) F(softmax_cross_entropy) F(softmax_cross_entropy_grad) \
    F(gather) F(gather_grad) F(gather_elements) F(scatter_elements) F(one_hot) F(nonzero) \
    F(topk) F(concat) F(pad) F(tile) F(resize) F(resize_grad) F(random) F(optim_update)

#endif /* HL_OPS_H */
