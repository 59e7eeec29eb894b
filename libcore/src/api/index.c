/*
 * api/index.c - entry points of the indexing family: gather, gather_grad, gather_elements,
 * scatter_elements, one_hot, nonzero, topk.
 *
 * Every argument that is known when the call is built is checked here. The VALUES of index
 * tensors are not: in graph mode the indices may be the output of an earlier record that has
 * not run yet, so the kernels check every index value when they run, before they write
 * anything, and fail with HL_ERR_INDEX naming the value, the axis and its size.
 *
 * Inputs are made contiguous here (hl_contiguous: the tensor itself when it already is, else
 * a copy, recorded like any other call in graph mode) so the kernels index flat arrays.
 * Outputs must be contiguous; a caller's non-contiguous *out is refused.
 */
#include "../core.h"

static bool is_index_dtype(hl_dtype d) { return d == HL_I32 || d == HL_I64; }

/* A tensor the caller passed: not NULL and on device dev. */
static hl_status check_input(const char *op, const char *what, const hl_tensor *t,
                             hl_device dev) {
    if (!t) return hl_fail(HL_ERR_VALUE, "%s: %s is NULL", op, what);
    return hl_check_device(op, dev, t);
}

static hl_status check_indices_dtype(const char *op, const hl_tensor *indices) {
    if (!is_index_dtype(indices->dtype))
        return hl_fail(HL_ERR_DTYPE, "%s: indices must be int32 or int64, got %s", op,
                       hl_desc(indices));
    return HL_OK;
}

/* hl_out_prepare, then: the output is contiguous and overlaps none of the inputs. On failure
   *out is as the caller left it. */
static hl_status prepare_out(const char *op, hl_tensor **out, hl_dtype dtype, hl_device dev,
                             int ndim, const int64_t *shape, const hl_tensor *const *ins,
                             int n_in, bool allow_same_as_first) {
    hl_tensor *caller = *out;
    hl_status st = hl_out_prepare(op, out, dtype, dev, ndim, shape);
    if (st) return st;
    if (!hl_tensor_is_contiguous(*out))
        st = hl_fail(HL_ERR_VALUE, "%s: the output tensor given, %s, is not contiguous; pass "
                     "a contiguous one or none", op, hl_desc(*out));
    for (int k = 0; k < n_in && !st; k++)
        st = hl_check_no_overlap(op, *out, ins[k], allow_same_as_first && k == 0);
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* Contiguous versions of n tensors (NULL entries stay NULL); all-or-nothing. */
static hl_status make_contiguous(int n, const hl_tensor *const *in, hl_tensor **c) {
    for (int k = 0; k < n; k++) c[k] = NULL;
    for (int k = 0; k < n; k++) {
        if (!in[k]) continue;
        hl_status st = hl_contiguous(in[k], &c[k]);
        if (st) {
            for (int j = 0; j < k; j++) hl_tensor_release(c[j]);
            return st;
        }
    }
    return HL_OK;
}

static void release_all(int n, hl_tensor **c) {
    for (int k = 0; k < n; k++) hl_tensor_release(c[k]);
}

/* Builds the call over contiguous copies of the inputs, submits it, releases the copies. */
static hl_status submit_contiguous(hl_call *c) {
    hl_tensor *tmp[HL_CALL_MAX_IN];
    hl_status st = make_contiguous(c->n_in, c->in, tmp);
    if (st) return st;
    for (int k = 0; k < c->n_in; k++) c->in[k] = tmp[k];
    st = hl_submit(c);
    release_all(c->n_in, tmp);
    return st;
}

/* ---- gather ---- */

/* Record: in = {x, indices}, out = {y}, i[0] = axis (normalised). */
hl_status hl_gather(const hl_tensor *x, int64_t axis, const hl_tensor *indices,
                    hl_tensor **out) {
    const char *op = "gather";
    if (!x) return hl_fail(HL_ERR_VALUE, "gather: x is NULL");
    hl_device dev = x->storage->device;
    hl_status st;
    if ((st = check_input(op, "indices", indices, dev)) || (st = check_indices_dtype(op, indices)))
        return st;
    if ((st = hl_norm_axis(op, &axis, x->ndim))) return st;
    int ond = x->ndim - 1 + indices->ndim;
    if (ond > HL_MAX_DIMS)
        return hl_fail(HL_ERR_SHAPE, "gather: gathering %s from %s along axis %lld gives %d "
                       "dimensions; hl supports at most %d", hl_desc(indices), hl_desc(x),
                       (long long)axis, ond, HL_MAX_DIMS);
    int64_t shape[HL_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < axis; d++) shape[n++] = x->shape[d];
    for (int d = 0; d < indices->ndim; d++) shape[n++] = indices->shape[d];
    for (int d = (int)axis + 1; d < x->ndim; d++) shape[n++] = x->shape[d];
    if (!out) return hl_fail(HL_ERR_VALUE, "gather: output pointer is NULL");
    hl_tensor *caller = *out;
    const hl_tensor *ins[2] = {x, indices};
    if ((st = prepare_out(op, out, x->dtype, dev, ond, shape, ins, 2, false))) return st;
    hl_call c = {.op = HL_OP_GATHER, .n_in = 2, .n_out = 1, .in = {x, indices}, .out = {*out},
                 .i = {axis}};
    if ((st = submit_contiguous(&c))) hl_out_abandon(out, caller);
    return st;
}

/* Record: in = {dy, indices}, out = {dx}, i[0] = axis (normalised). */
hl_status hl_gather_grad(const hl_tensor *dy, int64_t axis, const hl_tensor *indices,
                         int ndim, const int64_t *x_shape, hl_tensor **out) {
    const char *op = "gather_grad";
    if (!dy) return hl_fail(HL_ERR_VALUE, "gather_grad: dy is NULL");
    hl_device dev = dy->storage->device;
    hl_status st;
    if ((st = check_input(op, "indices", indices, dev)) || (st = check_indices_dtype(op, indices)))
        return st;
    if ((st = hl_check_op_dtype(op, HL_OP_GATHER_GRAD, dev, "dy", dy))) return st;
    if (ndim < 1 || ndim > HL_MAX_DIMS || !x_shape)
        return hl_fail(HL_ERR_SHAPE, "gather_grad: x_shape must have 1 to %d entries, got %d%s",
                       HL_MAX_DIMS, ndim, x_shape ? "" : " (NULL)");
    for (int d = 0; d < ndim; d++)
        if (x_shape[d] < 0)
            return hl_fail(HL_ERR_VALUE, "gather_grad: negative size in x_shape %s",
                           hl_shape_str(ndim, x_shape));
    if ((st = hl_norm_axis(op, &axis, ndim))) return st;
    /* dy must be what hl_gather gives for x_shape and indices */
    int64_t want[2 * HL_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < axis; d++) want[n++] = x_shape[d];
    for (int d = 0; d < indices->ndim; d++) want[n++] = indices->shape[d];
    for (int d = (int)axis + 1; d < ndim; d++) want[n++] = x_shape[d];
    bool ok = n == dy->ndim;
    for (int d = 0; ok && d < n; d++) ok = want[d] == dy->shape[d];
    if (!ok)
        return hl_fail(HL_ERR_SHAPE, "gather_grad: dy is %s, but gathering %s from x of shape "
                       "%s along axis %lld gives shape %s", hl_desc(dy), hl_desc(indices),
                       hl_shape_str(ndim, x_shape), (long long)axis,
                       n <= HL_MAX_DIMS ? hl_shape_str(n, want) : "(too many dimensions)");
    if (!out) return hl_fail(HL_ERR_VALUE, "gather_grad: output pointer is NULL");
    hl_tensor *caller = *out;
    const hl_tensor *ins[2] = {dy, indices};
    if ((st = prepare_out(op, out, dy->dtype, dev, ndim, x_shape, ins, 2, false))) return st;
    hl_call c = {.op = HL_OP_GATHER_GRAD, .n_in = 2, .n_out = 1, .in = {dy, indices},
                 .out = {*out}, .i = {axis}};
    if ((st = submit_contiguous(&c))) hl_out_abandon(out, caller);
    return st;
}

/* ---- gather_elements and scatter_elements ---- */

/* indices has x's rank and fits inside x on every axis but `axis` (ONNX, torch.gather). */
static hl_status check_elements_shape(const char *op, const hl_tensor *x, int64_t axis,
                                      const hl_tensor *indices) {
    if (indices->ndim != x->ndim)
        return hl_fail(HL_ERR_SHAPE, "%s: indices %s must have the rank of x %s", op,
                       hl_desc(indices), hl_desc(x));
    for (int d = 0; d < x->ndim; d++)
        if (d != axis && indices->shape[d] > x->shape[d])
            return hl_fail(HL_ERR_SHAPE, "%s: indices %s is larger than x %s on axis %d (only "
                           "axis %lld may differ)", op, hl_desc(indices), hl_desc(x), d,
                           (long long)axis);
    return HL_OK;
}

/* Record: in = {x, indices}, out = {y}, i[0] = axis. x keeps its strides (the kernel reads
   it through a table of offsets); indices are made contiguous. */
hl_status hl_gather_elements(const hl_tensor *x, int64_t axis, const hl_tensor *indices,
                             hl_tensor **out) {
    const char *op = "gather_elements";
    if (!x) return hl_fail(HL_ERR_VALUE, "gather_elements: x is NULL");
    hl_device dev = x->storage->device;
    hl_status st;
    if ((st = check_input(op, "indices", indices, dev)) || (st = check_indices_dtype(op, indices)))
        return st;
    if ((st = hl_norm_axis(op, &axis, x->ndim))) return st;
    if ((st = check_elements_shape(op, x, axis, indices))) return st;
    if (!out) return hl_fail(HL_ERR_VALUE, "gather_elements: output pointer is NULL");
    hl_tensor *caller = *out;
    const hl_tensor *ins[2] = {x, indices};
    if ((st = prepare_out(op, out, x->dtype, dev, indices->ndim, indices->shape, ins, 2, false)))
        return st;
    hl_tensor *ic = NULL;
    if (!(st = hl_contiguous(indices, &ic))) {
        hl_call c = {.op = HL_OP_GATHER_ELEMENTS, .n_in = 2, .n_out = 1, .in = {x, ic},
                     .out = {*out}, .i = {axis}};
        st = hl_submit(&c);
        hl_tensor_release(ic);
    }
    if (st) hl_out_abandon(out, caller);
    return st;
}

/* Record: in = {x, indices, updates}, out = {y}, i[0] = axis, i[1] = reduction. y may be x
   itself (the identical contiguous view): the scatter then happens in place. */
hl_status hl_scatter_elements(const hl_tensor *x, int64_t axis, const hl_tensor *indices,
                              const hl_tensor *updates, int reduction, hl_tensor **out) {
    const char *op = "scatter_elements";
    static const char *names[] = {"none", "add", "mul", "max", "min"};
    if (!x) return hl_fail(HL_ERR_VALUE, "scatter_elements: x is NULL");
    hl_device dev = x->storage->device;
    hl_status st;
    if ((st = check_input(op, "indices", indices, dev)) ||
        (st = check_input(op, "updates", updates, dev)) ||
        (st = check_indices_dtype(op, indices)))
        return st;
    if (reduction < 0 || reduction > 4)
        return hl_fail(HL_ERR_VALUE, "scatter_elements: reduction %d is not one of 0 none, "
                       "1 add, 2 mul, 3 max, 4 min", reduction);
    if (updates->dtype != x->dtype)
        return hl_fail(HL_ERR_DTYPE, "scatter_elements: updates %s must have x's dtype %s",
                       hl_desc(updates), hl_dtype_name(x->dtype));
    if (reduction != 0) {
        if (x->dtype == HL_BOOL)
            return hl_fail(HL_ERR_DTYPE, "scatter_elements: reduction '%s' needs a numeric "
                           "dtype, got %s", names[reduction], hl_desc(x));
        if ((st = hl_check_compute_dtype(op, dev, x))) return st;
    }
    if ((st = hl_norm_axis(op, &axis, x->ndim))) return st;
    if ((st = check_elements_shape(op, x, axis, indices))) return st;
    if (!hl_same_shape(indices, updates))
        return hl_fail(HL_ERR_SHAPE, "scatter_elements: updates %s must have the shape of "
                       "indices %s", hl_desc(updates), hl_desc(indices));
    if (!out) return hl_fail(HL_ERR_VALUE, "scatter_elements: output pointer is NULL");
    hl_tensor *caller = *out;
    const hl_tensor *ins[3] = {x, indices, updates};
    if ((st = prepare_out(op, out, x->dtype, dev, x->ndim, x->shape, ins, 3, true))) return st;
    hl_call c = {.op = HL_OP_SCATTER_ELEMENTS, .n_in = 3, .n_out = 1,
                 .in = {x, indices, updates}, .out = {*out}, .i = {axis, reduction}};
    if ((st = submit_contiguous(&c))) hl_out_abandon(out, caller);
    return st;
}

/* ---- one_hot ---- */

/* Record: in = {indices}, out = {y}, i[0] = depth, i[1] = axis (where the new axis sits in
   y, normalised), f[0] = on, f[1] = off. Indices outside [-depth, depth) give a row of off
   values (ONNX OneHot). */
hl_status hl_one_hot(const hl_tensor *indices, int64_t depth, int64_t axis, double on_value,
                     double off_value, hl_dtype dtype, hl_tensor **out) {
    const char *op = "one_hot";
    if (!indices) return hl_fail(HL_ERR_VALUE, "one_hot: indices is NULL");
    hl_device dev = indices->storage->device;
    hl_status st;
    if ((st = check_indices_dtype(op, indices))) return st;
    if ((unsigned)dtype >= HL_NUM_DTYPES)
        return hl_fail(HL_ERR_DTYPE, "one_hot: invalid dtype code %d", (int)dtype);
    if (depth <= 0)
        return hl_fail(HL_ERR_VALUE, "one_hot: depth must be positive, got %lld",
                       (long long)depth);
    int ond = indices->ndim + 1;
    if (ond > HL_MAX_DIMS)
        return hl_fail(HL_ERR_SHAPE, "one_hot: indices %s would give %d dimensions; hl "
                       "supports at most %d", hl_desc(indices), ond, HL_MAX_DIMS);
    if ((st = hl_norm_axis(op, &axis, ond))) return st;
    int64_t shape[HL_MAX_DIMS];
    for (int d = 0, j = 0; d < ond; d++)
        shape[d] = d == axis ? depth : indices->shape[j++];
    if (!out) return hl_fail(HL_ERR_VALUE, "one_hot: output pointer is NULL");
    hl_tensor *caller = *out;
    const hl_tensor *ins[1] = {indices};
    if ((st = prepare_out(op, out, dtype, dev, ond, shape, ins, 1, false))) return st;
    hl_call c = {.op = HL_OP_ONE_HOT, .n_in = 1, .n_out = 1, .in = {indices}, .out = {*out},
                 .i = {depth, axis}, .f = {on_value, off_value}};
    if ((st = submit_contiguous(&c))) hl_out_abandon(out, caller);
    return st;
}

/* ---- nonzero ---- */

/* The output's size depends on the data, so nonzero runs in two records: i[0] = 0 counts
   the non-zero elements of in[0] into the 0-d int64 out[0]; i[0] = 1 writes their
   coordinates into the (ndim, count) int64 out[0]. Neither can be recorded into a plan (the
   second's shape is unknown until the first has run), and a caller's *out is refused. */
hl_status hl_nonzero(const hl_tensor *x, hl_tensor **out) {
    if (!x) return hl_fail(HL_ERR_VALUE, "nonzero: x is NULL");
    if (!out) return hl_fail(HL_ERR_VALUE, "nonzero: output pointer is NULL");
    if (hl_plan_recording())
        return hl_fail(HL_ERR_UNSUPPORTED, "nonzero: the output's shape depends on the data "
                       "of %s, so it cannot be recorded into a plan; run it eagerly",
                       hl_desc(x));
    if (*out)
        return hl_fail(HL_ERR_VALUE, "nonzero: the output's shape depends on the data, so "
                       "an output tensor cannot be given; pass none");
    hl_device dev = x->storage->device;
    const hl_backend *be = hl_backend_for(dev);
    if (be && !be->has_memory)
        return hl_fail(HL_ERR_UNSUPPORTED, "nonzero: the output's shape depends on the data of "
                       "%s, and a %s tensor has none", hl_desc(x), be->name);
    hl_tensor *xc = NULL, *count = NULL;
    hl_status st = hl_contiguous(x, &xc);
    if (st) return st;
    int64_t n = 0, no_shape[1] = {0};  /* a 0-d count; never pass memcpy a NULL shape */
    if (!(st = hl_tensor_empty(HL_I64, dev, 0, no_shape, &count))) {
        hl_call c = {.op = HL_OP_NONZERO, .n_in = 1, .n_out = 1, .in = {xc}, .out = {count},
                     .i = {0}};
        if (!(st = hl_submit(&c))) st = hl_tensor_read(count, &n, sizeof n);
        hl_tensor_release(count);
    }
    if (!st) {
        int64_t shape[2] = {x->ndim, n};
        if (!(st = hl_out_prepare("nonzero", out, HL_I64, dev, 2, shape))) {
            hl_call c = {.op = HL_OP_NONZERO, .n_in = 1, .n_out = 1, .in = {xc}, .out = {*out},
                         .i = {1}};
            if ((st = hl_submit(&c))) hl_out_abandon(out, NULL);
        }
    }
    hl_tensor_release(xc);
    return st;
}

/* ---- topk ---- */

/* Record: in = {x}, out = {values, indices}, i[0] = k, i[1] = axis, i[2] = largest,
   i[3] = sorted. The result is always sorted (ties: lower index first; NaN is the largest
   value); `sorted` is kept for the record, since an unsorted order is unspecified anyway. */
hl_status hl_topk(const hl_tensor *x, int64_t k, int64_t axis, int largest, int sorted,
                  hl_tensor **values, hl_tensor **indices) {
    const char *op = "topk";
    if (!x) return hl_fail(HL_ERR_VALUE, "topk: x is NULL");
    if (!values || !indices) return hl_fail(HL_ERR_VALUE, "topk: output pointer is NULL");
    hl_device dev = x->storage->device;
    hl_status st;
    if (x->dtype == HL_BOOL)
        return hl_fail(HL_ERR_DTYPE, "topk: expected a numeric tensor, got %s", hl_desc(x));
    if ((st = hl_check_compute_dtype(op, dev, x))) return st;
    if ((st = hl_norm_axis(op, &axis, x->ndim))) return st;
    int64_t n = x->shape[axis];
    if (k < 0 || k > n)
        return hl_fail(HL_ERR_VALUE, "topk: k = %lld is out of range for axis %lld of size %lld "
                       "of %s (expected 0 <= k <= %lld)", (long long)k, (long long)axis,
                       (long long)n, hl_desc(x), (long long)n);
    int64_t shape[HL_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * x->ndim);
    shape[axis] = k;
    hl_tensor *caller_v = *values, *caller_i = *indices;
    const hl_tensor *ins[1] = {x};
    if ((st = prepare_out(op, values, x->dtype, dev, x->ndim, shape, ins, 1, false))) return st;
    const hl_tensor *ins2[2] = {x, *values};
    if ((st = prepare_out(op, indices, HL_I64, dev, x->ndim, shape, ins2, 2, false))) {
        hl_out_abandon(values, caller_v);
        return st;
    }
    hl_call c = {.op = HL_OP_TOPK, .n_in = 1, .n_out = 2, .in = {x}, .out = {*values, *indices},
                 .i = {k, axis, largest != 0, sorted != 0}};
    if ((st = submit_contiguous(&c))) {
        hl_out_abandon(values, caller_v);
        hl_out_abandon(indices, caller_i);
    }
    return st;
}
