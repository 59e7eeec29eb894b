/* api/pending.c - weak placeholders for entry points whose family is not written yet.
   A real definition anywhere overrides these at link time. */
#include "../core.h"

__attribute__((weak)) hl_status hl_reduce(int op, const hl_tensor *x, int naxes, const int64_t *axes, int keepdims, hl_tensor **out) {
    (void)op;
    (void)x;
    (void)naxes;
    (void)axes;
    (void)keepdims;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "reduce: not implemented yet");
}

__attribute__((weak)) hl_status hl_arg_reduce(int op, const hl_tensor *x, int64_t axis, int keepdims, int select_last, hl_tensor **out) {
    (void)op;
    (void)x;
    (void)axis;
    (void)keepdims;
    (void)select_last;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "arg_reduce: not implemented yet");
}

__attribute__((weak)) hl_status hl_cumsum(const hl_tensor *x, int64_t axis, int exclusive, int reverse, hl_tensor **out) {
    (void)x;
    (void)axis;
    (void)exclusive;
    (void)reverse;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "cumsum: not implemented yet");
}

__attribute__((weak)) hl_status hl_matmul(const hl_tensor *a, const hl_tensor *b, hl_tensor **out) {
    (void)a;
    (void)b;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "matmul: not implemented yet");
}

__attribute__((weak)) hl_status hl_gemm(const hl_tensor *a, const hl_tensor *b, const hl_tensor *c, int trans_a, int trans_b, double alpha, double beta, hl_tensor **out) {
    (void)a;
    (void)b;
    (void)c;
    (void)trans_a;
    (void)trans_b;
    (void)alpha;
    (void)beta;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "gemm: not implemented yet");
}

__attribute__((weak)) hl_status hl_conv(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias, const int64_t *stride, const int64_t *pads, const int64_t *dilation, int64_t groups, hl_tensor **out) {
    (void)x;
    (void)w;
    (void)bias;
    (void)stride;
    (void)pads;
    (void)dilation;
    (void)groups;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv: not implemented yet");
}

__attribute__((weak)) hl_status hl_conv_grad_input(const hl_tensor *dy, const hl_tensor *w, const int64_t *x_shape, const int64_t *stride, const int64_t *pads, const int64_t *dilation, int64_t groups, hl_tensor **out) {
    (void)dy;
    (void)w;
    (void)x_shape;
    (void)stride;
    (void)pads;
    (void)dilation;
    (void)groups;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv_grad_input: not implemented yet");
}

__attribute__((weak)) hl_status hl_conv_grad_weight(const hl_tensor *dy, const hl_tensor *x, const int64_t *w_shape, const int64_t *stride, const int64_t *pads, const int64_t *dilation, int64_t groups, hl_tensor **out) {
    (void)dy;
    (void)x;
    (void)w_shape;
    (void)stride;
    (void)pads;
    (void)dilation;
    (void)groups;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv_grad_weight: not implemented yet");
}

__attribute__((weak)) hl_status hl_conv_transpose(const hl_tensor *x, const hl_tensor *w, const hl_tensor *bias, const int64_t *stride, const int64_t *pads, const int64_t *dilation, const int64_t *output_padding, int64_t groups, hl_tensor **out) {
    (void)x;
    (void)w;
    (void)bias;
    (void)stride;
    (void)pads;
    (void)dilation;
    (void)output_padding;
    (void)groups;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "conv_transpose: not implemented yet");
}

__attribute__((weak)) hl_status hl_pool(int op, const hl_tensor *x, const int64_t *kernel, const int64_t *stride, const int64_t *pads, const int64_t *dilation, int ceil_mode, int count_include_pad, hl_tensor **out, hl_tensor **indices) {
    (void)op;
    (void)x;
    (void)kernel;
    (void)stride;
    (void)pads;
    (void)dilation;
    (void)ceil_mode;
    (void)count_include_pad;
    (void)out;
    (void)indices;
    return hl_fail(HL_ERR_UNSUPPORTED, "pool: not implemented yet");
}

__attribute__((weak)) hl_status hl_pool_grad(int op, const hl_tensor *dy, const hl_tensor *indices, const int64_t *x_shape, const int64_t *kernel, const int64_t *stride, const int64_t *pads, const int64_t *dilation, int ceil_mode, int count_include_pad, hl_tensor **out) {
    (void)op;
    (void)dy;
    (void)indices;
    (void)x_shape;
    (void)kernel;
    (void)stride;
    (void)pads;
    (void)dilation;
    (void)ceil_mode;
    (void)count_include_pad;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "pool_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_batch_norm(const hl_tensor *x, const hl_tensor *scale, const hl_tensor *bias, hl_tensor *running_mean, hl_tensor *running_var, int training, double momentum, double eps, hl_tensor **out, hl_tensor **save_mean, hl_tensor **save_invstd) {
    (void)x;
    (void)scale;
    (void)bias;
    (void)running_mean;
    (void)running_var;
    (void)training;
    (void)momentum;
    (void)eps;
    (void)out;
    (void)save_mean;
    (void)save_invstd;
    return hl_fail(HL_ERR_UNSUPPORTED, "batch_norm: not implemented yet");
}

__attribute__((weak)) hl_status hl_batch_norm_grad(const hl_tensor *dy, const hl_tensor *x, const hl_tensor *scale, const hl_tensor *save_mean, const hl_tensor *save_invstd, int training, hl_tensor **dx, hl_tensor **dscale, hl_tensor **dbias) {
    (void)dy;
    (void)x;
    (void)scale;
    (void)save_mean;
    (void)save_invstd;
    (void)training;
    (void)dx;
    (void)dscale;
    (void)dbias;
    return hl_fail(HL_ERR_UNSUPPORTED, "batch_norm_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_layer_norm(const hl_tensor *x, const hl_tensor *scale, const hl_tensor *bias, int64_t axis, double eps, hl_tensor **out, hl_tensor **mean, hl_tensor **invstd) {
    (void)x;
    (void)scale;
    (void)bias;
    (void)axis;
    (void)eps;
    (void)out;
    (void)mean;
    (void)invstd;
    return hl_fail(HL_ERR_UNSUPPORTED, "layer_norm: not implemented yet");
}

__attribute__((weak)) hl_status hl_layer_norm_grad(const hl_tensor *dy, const hl_tensor *x, const hl_tensor *scale, const hl_tensor *mean, const hl_tensor *invstd, int64_t axis, hl_tensor **dx, hl_tensor **dscale, hl_tensor **dbias) {
    (void)dy;
    (void)x;
    (void)scale;
    (void)mean;
    (void)invstd;
    (void)axis;
    (void)dx;
    (void)dscale;
    (void)dbias;
    return hl_fail(HL_ERR_UNSUPPORTED, "layer_norm_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_softmax(int op, const hl_tensor *x, int64_t axis, hl_tensor **out) {
    (void)op;
    (void)x;
    (void)axis;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "softmax: not implemented yet");
}

__attribute__((weak)) hl_status hl_softmax_grad(int op, const hl_tensor *y, const hl_tensor *dy, int64_t axis, hl_tensor **out) {
    (void)op;
    (void)y;
    (void)dy;
    (void)axis;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "softmax_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_softmax_cross_entropy(const hl_tensor *logits, const hl_tensor *target, int64_t ignore_index, hl_tensor **loss, hl_tensor **log_prob) {
    (void)logits;
    (void)target;
    (void)ignore_index;
    (void)loss;
    (void)log_prob;
    return hl_fail(HL_ERR_UNSUPPORTED, "softmax_cross_entropy: not implemented yet");
}

__attribute__((weak)) hl_status hl_softmax_cross_entropy_grad(const hl_tensor *log_prob, const hl_tensor *target, const hl_tensor *dloss, int64_t ignore_index, hl_tensor **out) {
    (void)log_prob;
    (void)target;
    (void)dloss;
    (void)ignore_index;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "softmax_cross_entropy_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_gather(const hl_tensor *x, int64_t axis, const hl_tensor *indices, hl_tensor **out) {
    (void)x;
    (void)axis;
    (void)indices;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "gather: not implemented yet");
}

__attribute__((weak)) hl_status hl_gather_grad(const hl_tensor *dy, int64_t axis, const hl_tensor *indices, int ndim, const int64_t *x_shape, hl_tensor **out) {
    (void)dy;
    (void)axis;
    (void)indices;
    (void)ndim;
    (void)x_shape;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "gather_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_gather_elements(const hl_tensor *x, int64_t axis, const hl_tensor *indices, hl_tensor **out) {
    (void)x;
    (void)axis;
    (void)indices;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "gather_elements: not implemented yet");
}

__attribute__((weak)) hl_status hl_scatter_elements(const hl_tensor *x, int64_t axis, const hl_tensor *indices, const hl_tensor *updates, int reduction, hl_tensor **out) {
    (void)x;
    (void)axis;
    (void)indices;
    (void)updates;
    (void)reduction;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "scatter_elements: not implemented yet");
}

__attribute__((weak)) hl_status hl_one_hot(const hl_tensor *indices, int64_t depth, int64_t axis, double on_value, double off_value, hl_dtype dtype, hl_tensor **out) {
    (void)indices;
    (void)depth;
    (void)axis;
    (void)on_value;
    (void)off_value;
    (void)dtype;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "one_hot: not implemented yet");
}

__attribute__((weak)) hl_status hl_nonzero(const hl_tensor *x, hl_tensor **out) {
    (void)x;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "nonzero: not implemented yet");
}

__attribute__((weak)) hl_status hl_topk(const hl_tensor *x, int64_t k, int64_t axis, int largest, int sorted, hl_tensor **values, hl_tensor **indices) {
    (void)x;
    (void)k;
    (void)axis;
    (void)largest;
    (void)sorted;
    (void)values;
    (void)indices;
    return hl_fail(HL_ERR_UNSUPPORTED, "topk: not implemented yet");
}

__attribute__((weak)) hl_status hl_concat(int n, hl_tensor *const *xs, int64_t axis, hl_tensor **out) {
    (void)n;
    (void)xs;
    (void)axis;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "concat: not implemented yet");
}

__attribute__((weak)) hl_status hl_pad(const hl_tensor *x, const int64_t *pads, int mode, double value, hl_tensor **out) {
    (void)x;
    (void)pads;
    (void)mode;
    (void)value;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "pad: not implemented yet");
}

__attribute__((weak)) hl_status hl_tile(const hl_tensor *x, const int64_t *repeats, hl_tensor **out) {
    (void)x;
    (void)repeats;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "tile: not implemented yet");
}

__attribute__((weak)) hl_status hl_resize(const hl_tensor *x, const int64_t *out_shape, const double *scales, int mode, int coord, int nearest, hl_tensor **out) {
    (void)x;
    (void)out_shape;
    (void)scales;
    (void)mode;
    (void)coord;
    (void)nearest;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "resize: not implemented yet");
}

__attribute__((weak)) hl_status hl_resize_grad(const hl_tensor *dy, const int64_t *x_shape, const double *scales, int mode, int coord, int nearest, hl_tensor **out) {
    (void)dy;
    (void)x_shape;
    (void)scales;
    (void)mode;
    (void)coord;
    (void)nearest;
    (void)out;
    return hl_fail(HL_ERR_UNSUPPORTED, "resize_grad: not implemented yet");
}

__attribute__((weak)) hl_status hl_random_uniform(hl_tensor *dst, uint64_t seed, uint64_t offset, double low, double high) {
    (void)dst;
    (void)seed;
    (void)offset;
    (void)low;
    (void)high;
    return hl_fail(HL_ERR_UNSUPPORTED, "random_uniform: not implemented yet");
}

__attribute__((weak)) hl_status hl_random_normal(hl_tensor *dst, uint64_t seed, uint64_t offset, double mean, double std) {
    (void)dst;
    (void)seed;
    (void)offset;
    (void)mean;
    (void)std;
    return hl_fail(HL_ERR_UNSUPPORTED, "random_normal: not implemented yet");
}

__attribute__((weak)) hl_status hl_random_bernoulli(hl_tensor *dst, uint64_t seed, uint64_t offset, double p) {
    (void)dst;
    (void)seed;
    (void)offset;
    (void)p;
    return hl_fail(HL_ERR_UNSUPPORTED, "random_bernoulli: not implemented yet");
}
