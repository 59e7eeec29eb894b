/*
 * tensor.c - tensor objects: creation, reference counting, accessors, and the views
 * (reshape, permute, slice, select, expand, squeeze, unsqueeze, flip, split), which build a
 * new tensor struct over the same storage and move no data.
 */
#include <stdlib.h>

#include "core.h"

int64_t hl_shape_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

bool hl_same_shape(const hl_tensor *a, const hl_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

bool hl_same_device(hl_device a, hl_device b) { return a.kind == b.kind && a.index == b.index; }

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

/* Checks a requested shape: ndim in range, no negative sizes, no int64 overflow. */
static hl_status check_shape(const char *op, int ndim, const int64_t *shape, hl_dtype dtype) {
    if (ndim < 0 || ndim > HL_MAX_DIMS)
        return hl_fail(HL_ERR_SHAPE, "%s: %d dimensions requested; hl supports 0 to %d", op, ndim,
                       HL_MAX_DIMS);
    if ((unsigned)dtype >= HL_NUM_DTYPES)
        return hl_fail(HL_ERR_DTYPE, "%s: invalid dtype code %d", op, (int)dtype);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return hl_fail(HL_ERR_VALUE, "%s: negative size %lld in shape %s", op,
                           (long long)shape[i], hl_shape_str(ndim, shape));
        if (shape[i] && n > (INT64_MAX / 16) / shape[i])
            return hl_fail(HL_ERR_MEMORY, "%s: shape %s is too large", op,
                           hl_shape_str(ndim, shape));
        n *= shape[i];
    }
    return HL_OK;
}

hl_status hl_tensor_wrap(hl_storage *s, hl_dtype dtype, int ndim, const int64_t *shape,
                         const int64_t *strides, int64_t offset, hl_tensor **out) {
    hl_tensor *t = malloc(sizeof *t);
    if (!t) return hl_fail(HL_ERR_MEMORY, "out of host memory for a tensor record");
    t->refcount = 1;
    t->dtype = dtype;
    t->ndim = ndim;
    memset(t->shape, 0, sizeof t->shape);
    memset(t->strides, 0, sizeof t->strides);
    memcpy(t->shape, shape, sizeof(int64_t) * ndim);
    if (strides) memcpy(t->strides, strides, sizeof(int64_t) * ndim);
    else contiguous_strides(ndim, shape, t->strides);
    t->offset = offset;
    t->storage = s;
    __atomic_add_fetch(&s->refcount, 1, __ATOMIC_RELAXED);
    *out = t;
    return HL_OK;
}

hl_status hl_tensor_empty(hl_dtype dtype, hl_device device, int ndim, const int64_t *shape,
                          hl_tensor **out) {
    if (!out) return hl_fail(HL_ERR_VALUE, "tensor_empty: out is NULL");
    if (ndim > 0 && !shape) return hl_fail(HL_ERR_VALUE, "tensor_empty: shape is NULL");
    hl_status st = check_shape("tensor_empty", ndim, shape, dtype);
    if (st) return st;
    hl_storage *s;
    st = hl_storage_new(device, (size_t)hl_shape_numel(ndim, shape) * hl_dtype_size(dtype), &s);
    if (st) return st;
    st = hl_tensor_wrap(s, dtype, ndim, shape, NULL, 0, out);
    hl_storage_release(s);  /* the tensor holds the only reference now */
    return st;
}

hl_status hl_tensor_borrow_host(void *data, size_t nbytes, hl_dtype dtype, int ndim,
                                const int64_t *shape, hl_tensor **out) {
    if (!out) return hl_fail(HL_ERR_VALUE, "tensor_borrow_host: out is NULL");
    if ((ndim > 0 && !shape) || !data)
        return hl_fail(HL_ERR_VALUE, "tensor_borrow_host: data or shape is NULL");
    hl_status st = check_shape("tensor_borrow_host", ndim, shape, dtype);
    if (st) return st;
    size_t need = (size_t)hl_shape_numel(ndim, shape) * hl_dtype_size(dtype);
    if (need > nbytes)
        return hl_fail(HL_ERR_VALUE, "tensor_borrow_host: %s %s needs %zu bytes, the memory "
                       "given has %zu", hl_shape_str(ndim, shape), hl_dtype_name(dtype), need,
                       nbytes);
    if ((uintptr_t)data % hl_dtype_size(dtype))
        return hl_fail(HL_ERR_VALUE, "tensor_borrow_host: memory at %p is not aligned to %s's "
                       "%zu bytes", data, hl_dtype_name(dtype), hl_dtype_size(dtype));
    hl_storage *s;
    st = hl_storage_borrow(data, nbytes, &s);
    if (st) return st;
    st = hl_tensor_wrap(s, dtype, ndim, shape, NULL, 0, out);
    hl_storage_release(s);
    return st;
}

hl_tensor *hl_tensor_retain(hl_tensor *t) {
    if (t) __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    return t;
}

void hl_tensor_release(hl_tensor *t) {
    if (!t || __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) != 0) return;
    hl_storage_release(t->storage);
    free(t);
}

/* Accessors answer something harmless for a NULL handle (0, NULL, the CPU) rather than
   crash: a binding that forgot a check gets a wrong answer, not a dead process. */
hl_dtype hl_tensor_dtype(const hl_tensor *t) { return t ? t->dtype : HL_F32; }
hl_device hl_tensor_device(const hl_tensor *t) {
    return t ? t->storage->device : (hl_device){HL_DEVICE_CPU, 0};
}
int64_t hl_tensor_device_key(const hl_tensor *t) {
    hl_device d = hl_tensor_device(t);
    return ((int64_t)d.kind << 32) + d.index;
}
int hl_tensor_ndim(const hl_tensor *t) { return t ? t->ndim : 0; }
const int64_t *hl_tensor_shape(const hl_tensor *t) { return t ? t->shape : NULL; }
const int64_t *hl_tensor_strides(const hl_tensor *t) { return t ? t->strides : NULL; }
int64_t hl_tensor_offset(const hl_tensor *t) { return t ? t->offset : 0; }
int64_t hl_tensor_numel(const hl_tensor *t) { return t ? hl_shape_numel(t->ndim, t->shape) : 0; }

int hl_tensor_is_contiguous(const hl_tensor *t) {
    if (!t) return 0;
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] == 0) return 1;
        if (t->shape[i] != 1 && t->strides[i] != s) return 0;
        s *= t->shape[i];
    }
    return 1;
}

void *hl_tensor_data(const hl_tensor *t) {
    if (!t || !t->storage->data) return NULL;
    const hl_backend *be = hl_backend_for(t->storage->device);
    return be && be->host_visible ? hl_ptr(t) : NULL;
}

/* Fails unless t's device holds memory: a meta tensor has a shape but no values. */
static hl_status check_has_memory(const char *op, const hl_tensor *t) {
    const hl_backend *be = hl_backend_for(t->storage->device);
    if (be && !be->has_memory)
        return hl_fail(HL_ERR_DEVICE, "%s: %s is a %s tensor: it has a shape and a dtype but no "
                       "values; run the computation on a real device to get numbers", op,
                       hl_desc(t), be->name);
    return HL_OK;
}

int hl_tensor_shares_storage(const hl_tensor *a, const hl_tensor *b) {
    return a && b && a->storage == b->storage;
}

/* ---- host copies ---- */

static hl_status check_host_copy(const char *op, const hl_tensor *t, const void *host,
                                 size_t nbytes) {
    if (!t) return hl_fail(HL_ERR_VALUE, "%s: tensor is NULL", op);
    if (!host && nbytes) return hl_fail(HL_ERR_VALUE, "%s: host pointer is NULL", op);
    size_t need = (size_t)hl_tensor_numel(t) * hl_dtype_size(t->dtype);
    if (!hl_tensor_is_contiguous(t))
        return hl_fail(HL_ERR_VALUE, "%s: tensor %s is not contiguous", op, hl_desc(t));
    if (nbytes != need)
        return hl_fail(HL_ERR_SHAPE, "%s: %zu bytes given for tensor %s, which holds %zu", op,
                       nbytes, hl_desc(t), need);
    return HL_OK;
}

hl_status hl_tensor_write(hl_tensor *dst, const void *src, size_t nbytes) {
    hl_status st = check_host_copy("tensor_write", dst, src, nbytes);
    if (st || !nbytes) return st;
    const hl_backend *be = hl_backend_for(dst->storage->device);
    if (!be->has_memory) return HL_OK;  /* meta keeps the shape, not the values (as PyTorch) */
    return be->memcpy(hl_ptr(dst), src, nbytes, 0, dst->storage->device.index);
}

hl_status hl_tensor_read(const hl_tensor *src, void *dst, size_t nbytes) {
    hl_status st = check_host_copy("tensor_read", src, dst, nbytes);
    if (!st) st = check_has_memory("tensor_read", src);
    if (!st) st = hl_tensor_check_host_read(src);
    if (st || !nbytes) return st;
    const hl_backend *be = hl_backend_for(src->storage->device);
    return be->memcpy(dst, hl_ptr(src), nbytes, 1, src->storage->device.index);
}

hl_status hl_tensor_to_device(const hl_tensor *x, hl_device device, hl_tensor **out) {
    if (!x || !out) return hl_fail(HL_ERR_VALUE, "to_device: tensor or output pointer is NULL");
    hl_device from = x->storage->device;
    if (hl_same_device(from, device)) {
        hl_tensor *t = NULL;
        hl_status st = hl_tensor_empty(x->dtype, device, x->ndim, x->shape, &t);
        if (st) return st;
        st = hl_copy(t, x);
        if (st) { hl_tensor_release(t); return st; }
        *out = t;
        return HL_OK;
    }
    const hl_backend *to = hl_backend_for(device);
    if (!to)
        return hl_fail(HL_ERR_DEVICE, "to_device: device %s is not available",
                       hl_device_str(device));
    if (!to->has_memory)  /* onto meta: the shape and dtype, no copy */
        return hl_tensor_empty(x->dtype, device, x->ndim, x->shape, out);
    hl_status st = check_has_memory("to_device", x);
    if (st) return st;
    /* Across devices: make x contiguous where it is, then one byte copy through the host
       side's backend (the non-CPU backend does host<->device). */
    hl_tensor *src = NULL, *dst = NULL;
    st = hl_contiguous(x, &src);
    if (st) return st;
    st = hl_tensor_empty(x->dtype, device, x->ndim, x->shape, &dst);
    if (!st) {
        size_t n = (size_t)hl_tensor_numel(x) * hl_dtype_size(x->dtype);
        if (n && from.kind == HL_DEVICE_CPU)
            st = hl_tensor_write(dst, hl_ptr(src), n);
        else if (n && device.kind == HL_DEVICE_CPU)
            st = hl_tensor_read(src, hl_ptr(dst), n);
        else if (n) {  /* between two accelerators (cuda:0 -> cuda:1): staged on the host */
            void *stage = malloc(n);
            st = stage ? hl_tensor_read(src, stage, n)
                       : hl_fail(HL_ERR_MEMORY, "to_device: out of host memory staging %zu "
                                 "bytes", n);
            if (!st) st = hl_tensor_write(dst, stage, n);
            free(stage);
        }
    }
    hl_tensor_release(src);
    if (st) { hl_tensor_release(dst); return st; }
    *out = dst;
    return HL_OK;
}

/* ---- views ---- */

/* Every view takes a tensor and an output pointer, and some an array of n numbers. */
static hl_status view_args(const char *op, const hl_tensor *x, hl_tensor **out, int n,
                           const int64_t *arr) {
    if (!x) return hl_fail(HL_ERR_VALUE, "%s: input tensor is NULL", op);
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    if (n > 0 && !arr) return hl_fail(HL_ERR_VALUE, "%s: %d values expected, got NULL", op, n);
    if (n < 0) return hl_fail(HL_ERR_VALUE, "%s: negative count %d", op, n);
    return HL_OK;
}

static hl_status view_of(const hl_tensor *x, int ndim, const int64_t *shape,
                         const int64_t *strides, int64_t offset, hl_tensor **out) {
    return hl_tensor_wrap(x->storage, x->dtype, ndim, shape, strides, offset, out);
}

/* Resolves a -1 in a requested shape against numel, checking the sizes match. */
static hl_status resolve_shape(const char *op, const hl_tensor *x, int ndim, const int64_t *in,
                               int64_t *shape) {
    if (ndim < 0 || ndim > HL_MAX_DIMS)
        return hl_fail(HL_ERR_SHAPE, "%s: %d dimensions requested; hl supports 0 to %d", op, ndim,
                       HL_MAX_DIMS);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        shape[i] = in[i];
        if (in[i] == -1) {
            if (infer >= 0)
                return hl_fail(HL_ERR_VALUE, "%s: only one dimension can be -1, got shape %s", op,
                               hl_shape_str(ndim, in));
            infer = i;
        } else if (in[i] < 0) {
            return hl_fail(HL_ERR_VALUE, "%s: negative size in shape %s", op,
                           hl_shape_str(ndim, in));
        } else if (__builtin_mul_overflow(known, in[i], &known) || known > INT64_MAX / 16) {
            return hl_fail(HL_ERR_SHAPE, "%s: shape %s is too large", op, hl_shape_str(ndim, in));
        }
    }
    int64_t numel = hl_tensor_numel(x);
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return hl_fail(HL_ERR_SHAPE, "%s: cannot reshape %s into %s", op, hl_desc(x),
                           hl_shape_str(ndim, in));
        shape[infer] = numel / known;
    } else if (known != numel) {
        return hl_fail(HL_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", op,
                       hl_desc(x), (long long)numel, hl_shape_str(ndim, in));
    }
    return HL_OK;
}

hl_status hl_view_reshape(const hl_tensor *x, int ndim, const int64_t *req, hl_tensor **out) {
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS];
    hl_status st = view_args("reshape", x, out, ndim, req);
    if (st) return st;
    st = resolve_shape("reshape", x, ndim, req, shape);
    if (st) return st;
    if (hl_tensor_numel(x) == 0 || x->ndim == 0) return view_of(x, ndim, shape, NULL, x->offset, out);
    /* Walk the old axes from the back in chunks whose elements are evenly spaced (each axis's
       stride is the next one's stride times its size). Each chunk must be covered by a run of
       new axes with the same element count; those get strides spaced over the chunk. */
    int nd = ndim - 1;
    int64_t chunk_stride = x->strides[x->ndim - 1], old_count = 1, new_count = 1;
    for (int od = x->ndim - 1; od >= 0; od--) {
        old_count *= x->shape[od];
        bool chunk_ends = od == 0 || (x->shape[od - 1] != 1 &&
                                      x->strides[od - 1] != old_count * chunk_stride);
        if (!chunk_ends) continue;
        while (nd >= 0 && (new_count < old_count || shape[nd] == 1)) {
            strides[nd] = new_count * chunk_stride;
            new_count *= shape[nd];
            nd--;
        }
        if (new_count != old_count)
            return hl_fail(HL_ERR_NOT_VIEWABLE,
                           "reshape: %s with strides %s cannot be viewed as %s", hl_desc(x),
                           hl_shape_str(x->ndim, x->strides), hl_shape_str(ndim, shape));
        if (od > 0) {
            chunk_stride = x->strides[od - 1];
            old_count = new_count = 1;
        }
    }
    if (nd != -1)
        return hl_fail(HL_ERR_NOT_VIEWABLE, "reshape: %s cannot be viewed as %s", hl_desc(x),
                       hl_shape_str(ndim, shape));
    return view_of(x, ndim, shape, strides, x->offset, out);
}

hl_status hl_reshape(const hl_tensor *x, int ndim, const int64_t *shape, hl_tensor **out) {
    hl_status st = hl_view_reshape(x, ndim, shape, out);
    if (st != HL_ERR_NOT_VIEWABLE) return st;
    hl_tensor *c = NULL;
    st = hl_contiguous(x, &c);
    if (st) return st;
    st = hl_view_reshape(c, ndim, shape, out);
    hl_tensor_release(c);
    return st;
}

hl_status hl_view_permute(const hl_tensor *x, const int64_t *perm, hl_tensor **out) {
    hl_status st = view_args("permute", x, out, x ? x->ndim : 0, perm);
    if (st) return st;
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS];
    bool seen[HL_MAX_DIMS] = {false};
    for (int i = 0; i < x->ndim; i++) {
        int64_t p = perm[i];
        if (p < -x->ndim || p >= x->ndim || seen[p < 0 ? p + x->ndim : p])
            return hl_fail(HL_ERR_INDEX, "permute: %s is not a permutation of the %d axes of %s",
                           hl_shape_str(x->ndim, perm), x->ndim, hl_desc(x));
        if (p < 0) p += x->ndim;
        seen[p] = true;
        shape[i] = x->shape[p];
        strides[i] = x->strides[p];
    }
    return view_of(x, x->ndim, shape, strides, x->offset, out);
}

hl_status hl_view_slice(const hl_tensor *x, const int64_t *start, const int64_t *length,
                        const int64_t *step, hl_tensor **out) {
    hl_status st = view_args("slice", x, out, x ? x->ndim : 0, start);
    if (!st) st = view_args("slice", x, out, x->ndim, length);
    if (!st) st = view_args("slice", x, out, x->ndim, step);
    if (st) return st;
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS], offset = x->offset;
    for (int i = 0; i < x->ndim; i++) {
        int64_t n = x->shape[i], b = start[i], len = length[i], s = step[i];
        if (s == 0) return hl_fail(HL_ERR_VALUE, "slice: step 0 on axis %d of %s", i, hl_desc(x));
        if (len < 0) return hl_fail(HL_ERR_VALUE, "slice: negative length on axis %d", i);
        if (len > 0) {
            int64_t last;  /* overflow can only come from arguments that are out of range */
            bool wraps = __builtin_mul_overflow(len - 1, s, &last) ||
                         __builtin_add_overflow(b, last, &last);
            if (wraps || b < 0 || b >= n || last < 0 || last >= n)
                return hl_fail(HL_ERR_INDEX,
                               "slice: axis %d of %s: start %lld, %lld elements, step %lld "
                               "leaves the range [0, %lld)",
                               i, hl_desc(x), (long long)b, (long long)len, (long long)s,
                               (long long)n);
            offset += b * x->strides[i];
        }
        shape[i] = len;
        strides[i] = x->strides[i] * s;
    }
    return view_of(x, x->ndim, shape, strides, offset, out);
}

hl_status hl_view_select(const hl_tensor *x, int64_t axis, int64_t index, hl_tensor **out) {
    hl_status st = view_args("select", x, out, 0, NULL);
    if (!st) st = hl_norm_axis("select", &axis, x->ndim);
    if (st) return st;
    int64_t n = x->shape[axis];
    if (index < -n || index >= n)
        return hl_fail(HL_ERR_INDEX, "select: index %lld is out of bounds for axis %lld with size %lld",
                       (long long)index, (long long)axis, (long long)n);
    if (index < 0) index += n;
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS];
    for (int i = 0, j = 0; i < x->ndim; i++) {
        if (i == axis) continue;
        shape[j] = x->shape[i];
        strides[j++] = x->strides[i];
    }
    return view_of(x, x->ndim - 1, shape, strides, x->offset + index * x->strides[axis], out);
}

hl_status hl_view_expand(const hl_tensor *x, int ndim, const int64_t *req, hl_tensor **out) {
    hl_status st = view_args("expand", x, out, ndim, req);
    if (st) return st;
    if (ndim < x->ndim || ndim > HL_MAX_DIMS)
        return hl_fail(HL_ERR_SHAPE, "expand: cannot expand %s to %d dimensions", hl_desc(x),
                       ndim);
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS];
    int lead = ndim - x->ndim;
    for (int i = 0; i < ndim; i++) {
        int64_t want = req[i];
        if (i < lead) {
            if (want < 0)
                return hl_fail(HL_ERR_VALUE, "expand: size %lld for a new axis",
                               (long long)want);
            shape[i] = want;
            strides[i] = 0;
            continue;
        }
        int64_t have = x->shape[i - lead];
        if (want == -1 || want == have) {
            shape[i] = have;
            strides[i] = x->strides[i - lead];
        } else if (have == 1 && want >= 0) {
            shape[i] = want;
            strides[i] = 0;
        } else {
            return hl_fail(HL_ERR_SHAPE, "expand: cannot broadcast %s to %s", hl_desc(x),
                           hl_shape_str(ndim, req));
        }
    }
    /* A broadcast view costs no memory, so nothing else bounds its element count. */
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(numel, shape[i], &numel) || numel > INT64_MAX / 16)
            return hl_fail(HL_ERR_SHAPE, "expand: shape %s is too large",
                           hl_shape_str(ndim, shape));
    return view_of(x, ndim, shape, strides, x->offset, out);
}

hl_status hl_view_squeeze(const hl_tensor *x, int naxes, const int64_t *axes, hl_tensor **out) {
    hl_status st0 = view_args("squeeze", x, out, naxes, axes);
    if (st0) return st0;
    bool drop[HL_MAX_DIMS] = {false};
    for (int k = 0; k < naxes; k++) {
        int64_t a = axes[k];
        hl_status st = hl_norm_axis("squeeze", &a, x->ndim);
        if (st) return st;
        if (x->shape[a] != 1)
            return hl_fail(HL_ERR_SHAPE, "squeeze: axis %lld of %s has size %lld, not 1",
                           (long long)axes[k], hl_desc(x), (long long)x->shape[a]);
        if (drop[a])
            return hl_fail(HL_ERR_VALUE, "squeeze: axis %lld is repeated in %s",
                           (long long)axes[k], hl_shape_str(naxes, axes));
        drop[a] = true;
    }
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (naxes ? drop[i] : x->shape[i] == 1) continue;
        shape[n] = x->shape[i];
        strides[n++] = x->strides[i];
    }
    return view_of(x, n, shape, strides, x->offset, out);
}

hl_status hl_view_unsqueeze(const hl_tensor *x, int64_t axis, hl_tensor **out) {
    hl_status st0 = view_args("unsqueeze", x, out, 0, NULL);
    if (st0) return st0;
    if (x->ndim >= HL_MAX_DIMS)
        return hl_fail(HL_ERR_SHAPE, "unsqueeze: %s already has the most dimensions hl supports",
                       hl_desc(x));
    hl_status st = hl_norm_axis("unsqueeze", &axis, x->ndim + 1);
    if (st) return st;
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++) {
        if (i == axis) {
            shape[i] = 1;
            strides[i] = (j < x->ndim) ? x->strides[j] * x->shape[j] : 1;
            continue;
        }
        shape[i] = x->shape[j];
        strides[i] = x->strides[j++];
    }
    return view_of(x, x->ndim + 1, shape, strides, x->offset, out);
}

hl_status hl_view_flip(const hl_tensor *x, int naxes, const int64_t *axes, hl_tensor **out) {
    hl_status st0 = view_args("flip", x, out, naxes, axes);
    if (st0) return st0;
    int64_t shape[HL_MAX_DIMS], strides[HL_MAX_DIMS], offset = x->offset;
    bool flip[HL_MAX_DIMS] = {false};
    for (int k = 0; k < naxes; k++) {
        int64_t a = axes[k];
        hl_status st = hl_norm_axis("flip", &a, x->ndim);
        if (st) return st;
        if (flip[a])
            return hl_fail(HL_ERR_VALUE, "flip: axis %lld is repeated in %s", (long long)axes[k],
                           hl_shape_str(naxes, axes));
        flip[a] = true;
    }
    for (int i = 0; i < x->ndim; i++) {
        shape[i] = x->shape[i];
        strides[i] = x->strides[i];
        if (flip[i] && x->shape[i] > 0) {
            offset += (x->shape[i] - 1) * x->strides[i];
            strides[i] = -x->strides[i];
        }
    }
    return view_of(x, x->ndim, shape, strides, offset, out);
}

hl_status hl_view_split(const hl_tensor *x, int64_t axis, int n, const int64_t *sizes,
                        hl_tensor **outs) {
    hl_status st = view_args("split", x, outs, n, sizes);
    if (st) return st;
    if ((st = hl_norm_axis("split", &axis, x->ndim))) return st;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0) return hl_fail(HL_ERR_VALUE, "split: negative size %lld",
                                         (long long)sizes[k]);
        if (__builtin_add_overflow(total, sizes[k], &total))
            return hl_fail(HL_ERR_SHAPE, "split: the sizes overflow");
    }
    if (total != x->shape[axis])
        return hl_fail(HL_ERR_SHAPE, "split: sizes sum to %lld but axis %lld of %s has %lld",
                       (long long)total, (long long)axis, hl_desc(x),
                       (long long)x->shape[axis]);
    int64_t shape[HL_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    int64_t offset = x->offset;
    for (int k = 0; k < n; k++) {
        shape[axis] = sizes[k];
        st = view_of(x, x->ndim, shape, x->strides, offset, &outs[k]);
        if (st) {
            while (k--) hl_tensor_release(outs[k]);
            return st;
        }
        offset += sizes[k] * x->strides[axis];
    }
    return HL_OK;
}
