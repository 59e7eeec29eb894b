/*
 * dispatch.c - op names, the backend registry, hl_submit (run a call now or record it into
 * the current plan: plan/), threads, and the output/argument checks entry points share.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core.h"

/* ---- op names, generated from the op list ---- */

#define HL_OP_NAME_ROW(NAME, name, family, ...) #name,
static const char *op_names[] = {HL_OPS(HL_OP_NAME_ROW)};
#undef HL_OP_NAME_ROW
_Static_assert(sizeof op_names / sizeof op_names[0] == HL_OP_COUNT,
               "op name table and op enum disagree");

int hl_op_count(void) { return HL_OP_COUNT; }
const char *hl_op_name(int op) { return (op >= 0 && op < HL_OP_COUNT) ? op_names[op] : NULL; }
const char *hl_op_str(int op) { return (op >= 0 && op < HL_OP_COUNT) ? op_names[op] : "?"; }

int hl_op_lookup(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < HL_OP_COUNT; i++)
        if (strcmp(op_names[i], name) == 0) return i;
    return -1;
}

const char *hl_version(void) { return "0.1.0"; }

/* ---- the backend registry ---- */

static const hl_backend *registry[HL_DEVICE_KINDS];
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static int num_threads = 0;  /* 0: each backend's default */

static void register_builtin(void) {
    registry[HL_DEVICE_CPU] = &hl_cpu_backend;
    registry[HL_DEVICE_META] = &hl_meta_backend;
}

hl_status hl_backend_register(const hl_backend *be) {
    if (!be) return hl_fail(HL_ERR_VALUE, "backend_register: backend is NULL");
    if (be->abi != HL_BACKEND_ABI)
        return hl_fail(HL_ERR_UNSUPPORTED, "backend_register: backend '%s' was built for "
                       "interface version %d, this libcore has %d; rebuild it against this hl",
                       be->name ? be->name : "?", be->abi, HL_BACKEND_ABI);
    if (be->kind < 0 || be->kind >= HL_DEVICE_KINDS || !be->name || !be->device_count)
        return hl_fail(HL_ERR_VALUE, "backend_register: backend '%s' has no name, device kind "
                       "%d or device_count", be->name ? be->name : "?", be->kind);
    if (be->has_memory && (!be->raw_alloc || !be->raw_free || !be->memcpy))
        return hl_fail(HL_ERR_VALUE, "backend_register: backend '%s' has memory but no "
                       "raw_alloc, raw_free or memcpy", be->name);
    pthread_once(&registry_once, register_builtin);
    pthread_mutex_lock(&registry_lock);
    __atomic_store_n(&registry[be->kind], be, __ATOMIC_RELEASE);
    int n = num_threads;
    pthread_mutex_unlock(&registry_lock);
    if (n && be->set_num_threads) be->set_num_threads(n);
    return HL_OK;
}

const hl_backend *hl_backend_for(hl_device d) {
    if (d.kind < 0 || d.kind >= HL_DEVICE_KINDS || d.index < 0) return NULL;
    pthread_once(&registry_once, register_builtin);
    const hl_backend *be = __atomic_load_n(&registry[d.kind], __ATOMIC_ACQUIRE);
    return be && d.index < be->device_count() ? be : NULL;
}

int hl_device_available(hl_device d) { return hl_backend_for(d) != NULL; }

const char *hl_device_backend(hl_device d) {
    const hl_backend *be = hl_backend_for(d);
    return be ? be->name : NULL;
}

int hl_device_computes(hl_device d, int op, hl_dtype dtype) {
    const hl_backend *be = hl_backend_for(d);
    return be && op >= 0 && op < HL_OP_COUNT && (unsigned)dtype < HL_NUM_DTYPES &&
           be->kernels[op] && (be->op_dtypes[op] >> dtype & 1u);
}

hl_status hl_device_synchronize(hl_device d) {
    const hl_backend *be = hl_backend_for(d);
    if (!be) return hl_fail(HL_ERR_DEVICE, "synchronize: device %s is not available",
                            hl_device_str(d));
    return be->synchronize ? be->synchronize(d.index) : HL_OK;
}

const char *hl_device_str(hl_device d) {
    static _Thread_local char ring[4][24];
    static _Thread_local int next;
    char *buf = ring[next++ & 3];
    static const char *const kinds[] = {"cpu", "cuda", "meta"};
    const char *kind = d.kind >= 0 && d.kind < HL_DEVICE_KINDS ? kinds[d.kind] : "?";
    if (d.kind == HL_DEVICE_CUDA || d.index != 0)
        snprintf(buf, sizeof ring[0], "%s:%d", kind, d.index);
    else snprintf(buf, sizeof ring[0], "%s", kind);
    return buf;
}

/* ---- threads ---- */

/* Every backend that runs work on host threads gets the same count: the CPU's OpenMP loops and
   OpenBLAS never run at once, so one number serves both (cpu/backend.c). */
void hl_set_num_threads(int n) {
    if (n < 1) n = 1;
    pthread_once(&registry_once, register_builtin);
    pthread_mutex_lock(&registry_lock);
    num_threads = n;
    const hl_backend *all[HL_DEVICE_KINDS];
    memcpy(all, registry, sizeof all);
    pthread_mutex_unlock(&registry_lock);
    for (int k = 0; k < HL_DEVICE_KINDS; k++)
        if (all[k] && all[k]->set_num_threads) all[k]->set_num_threads(n);
}

int hl_get_num_threads(void) {
#ifdef _OPENMP
    if (!num_threads) return omp_get_max_threads();
#endif
    return num_threads ? num_threads : 1;
}

/* ---- running a call ---- */

hl_status hl_run_call(const hl_call *c) {
    const hl_tensor *first = c->n_out ? c->out[0] : (c->n_in ? hl_call_in(c, 0) : NULL);
    hl_device d = first ? first->storage->device : (hl_device){HL_DEVICE_CPU, 0};
    const hl_backend *be = hl_backend_for(d);
    if (!be)
        return hl_fail(HL_ERR_DEVICE, "%s: no backend serves device %s", hl_op_str(c->op),
                       hl_device_str(d));
    hl_kernel k = be->kernels[c->op];
    if (!k)
        return hl_fail(HL_ERR_UNSUPPORTED, "%s is not implemented on %s", hl_op_str(c->op),
                       be->name);
    return k(c);
}

hl_status hl_submit(const hl_call *c) {
    /* A backstop: entry points check the tensors they are given with their own op's name, so
       this only fires if one forgot; a kernel writing through a broadcast view would hit
       one element several times (and race with itself across threads). */
    for (int k = 0; k < c->n_out; k++) {
        hl_status st = hl_check_writable(hl_op_str(c->op), "the output", c->out[k]);
        if (st) return st;
    }
    return hl_plan_recording() ? hl_plan_record(c) : hl_run_call(c);
}

/* ---- shared checks ---- */

hl_status hl_out_prepare(const char *op, hl_tensor **out, hl_dtype dtype, hl_device device,
                         int ndim, const int64_t *shape) {
    if (!out) return hl_fail(HL_ERR_VALUE, "%s: output pointer is NULL", op);
    hl_tensor *t = *out;
    if (!t) {
        hl_status st = hl_tensor_empty(dtype, device, ndim, shape, out);
        if (st) return hl_fail(st, "%s: %s", op, hl_last_error());
        return HL_OK;
    }
    bool same_shape = t->ndim == ndim;
    for (int i = 0; same_shape && i < ndim; i++) same_shape = t->shape[i] == shape[i];
    if (!same_shape || t->dtype != dtype)
        return hl_fail(same_shape ? HL_ERR_DTYPE : HL_ERR_SHAPE,
                       "%s: the output tensor given is %s, but the result is %s %s", op,
                       hl_desc(t), hl_shape_str(ndim, shape), hl_dtype_name(dtype));
    if (!hl_same_device(t->storage->device, device))
        return hl_fail(HL_ERR_DEVICE, "%s: the output tensor given is on another device than "
                       "the inputs", op);
    hl_status st = hl_check_writable(op, "the output", t);
    if (st) return st;
    hl_tensor_retain(t);
    return HL_OK;
}

void hl_out_abandon(hl_tensor **out, hl_tensor *caller_value) {
    if (!out) return;
    hl_tensor_release(*out);
    *out = caller_value;
}

/* Only a zero stride can make two positions of one hl tensor share memory: every view hl
   offers (reshape, permute, slice, select, flip, squeeze, unsqueeze, split) keeps each axis's
   elements inside one step of the next-larger axis, and there is no as_strided. A tensor
   without elements writes nothing, so it passes. */
hl_status hl_check_writable(const char *op, const char *what, const hl_tensor *t) {
    if (!t || hl_tensor_numel(t) == 0) return HL_OK;
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] == 0 && t->shape[i] > 1)
            return hl_fail(HL_ERR_VALUE, "%s: %s is a broadcast view (shape %s, strides %s): "
                           "writing would hit one element several times; write into a "
                           "contiguous tensor (x.contiguous()) instead", op, what,
                           hl_shape_str(t->ndim, t->shape), hl_shape_str(t->ndim, t->strides));
    return HL_OK;
}

/* Byte range [lo, hi) a tensor's elements can touch. */
static void byte_span(const hl_tensor *t, int64_t *lo, int64_t *hi) {
    int64_t sz = (int64_t)hl_dtype_size(t->dtype), a = t->offset, b = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) { *lo = *hi = 0; return; }
        int64_t ext = (t->shape[i] - 1) * t->strides[i];
        if (ext > 0) b += ext; else a += ext;
    }
    *lo = a * sz;
    *hi = (b + 1) * sz;
}

hl_status hl_check_no_overlap(const char *op, const hl_tensor *out, const hl_tensor *in,
                              bool allow_same) {
    if (!in || !out || out->storage != in->storage) return HL_OK;
    if (allow_same && out->offset == in->offset && hl_same_shape(out, in) &&
        memcmp(out->strides, in->strides, sizeof(int64_t) * out->ndim) == 0 &&
        out->dtype == in->dtype)
        return HL_OK;
    int64_t a0, a1, b0, b1;
    byte_span(out, &a0, &a1);
    byte_span(in, &b0, &b1);
    if (a0 < b1 && b0 < a1)
        return hl_fail(HL_ERR_VALUE, "%s: the output %s overlaps an input %s", op, hl_desc(out),
                       hl_desc(in));
    return HL_OK;
}

hl_status hl_check_device(const char *op, hl_device d, const hl_tensor *t) {
    if (t && !hl_same_device(t->storage->device, d))
        return hl_fail(HL_ERR_DEVICE, "%s: tensors are on different devices (%s and %s)", op,
                       hl_device_str(d), hl_device_str(t->storage->device));
    return HL_OK;
}

hl_status hl_check_compute_dtype(const char *op, hl_device device, const hl_tensor *t) {
    const hl_backend *be = hl_backend_for(device);
    if (!be) return hl_fail(HL_ERR_DEVICE, "%s: no backend serves device %s", op,
                            hl_device_str(device));
    /* "computes in": does arithmetic in, which add stands for (copies and casts move every
       dtype, so the union over all ops would include storage-only dtypes) */
    if (!(be->op_dtypes[HL_OP_ADD] >> t->dtype & 1u))
        return hl_fail(HL_ERR_DTYPE, "%s: %s computes on %s are not available; cast %s to "
                       "float32 first", op, hl_dtype_name(t->dtype), be->name, hl_desc(t));
    return HL_OK;
}

/* "float32 or float64", "float32, float64, int32 or int64": the dtypes of a mask. */
static const char *dtype_list(uint32_t mask) {
    static _Thread_local char buf[128];
    size_t n = 0;
    int count = __builtin_popcount(mask), seen = 0;
    buf[0] = 0;
    for (int d = 0; d < HL_NUM_DTYPES; d++) {
        if (!(mask >> d & 1u)) continue;
        seen++;
        const char *sep = seen == 1 ? "" : (seen == count ? " or " : ", ");
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", sep, hl_dtype_name((hl_dtype)d));
        if (n >= sizeof buf) break;
    }
    return buf;
}

hl_status hl_check_op_dtype(const char *opname, int op, hl_device device, const char *what,
                            const hl_tensor *t) {
    const hl_backend *be = hl_backend_for(device);
    if (!be) return hl_fail(HL_ERR_DEVICE, "%s: no backend serves device %s", opname,
                            hl_device_str(device));
    uint32_t mask = be->kernels[op] ? be->op_dtypes[op] : 0;
    if (!mask)
        return hl_fail(HL_ERR_UNSUPPORTED, "%s is not implemented on %s", opname, be->name);
    if (!(mask >> t->dtype & 1u))
        return hl_fail(HL_ERR_DTYPE, "%s: expected a %s %s, got %s%s", opname, dtype_list(mask),
                       what, hl_desc(t),
                       t->dtype == HL_F16 || t->dtype == HL_BF16 ? "; cast to float32 first" : "");
    return HL_OK;
}

hl_status hl_check_float(const char *op, const char *what, const hl_tensor *t) {
    hl_status st = hl_check_compute_dtype(op, t->storage->device, t);
    if (st) return st;
    if (t->dtype != HL_F32 && t->dtype != HL_F64 && t->dtype != HL_F16 && t->dtype != HL_BF16)
        return hl_fail(HL_ERR_DTYPE, "%s: %s must be a floating-point tensor, got %s", op, what,
                       hl_desc(t));
    return HL_OK;
}

hl_status hl_broadcast_shapes(const char *op, int na, const int64_t *a, int nb,
                              const int64_t *b, int *nout, int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1)
            return hl_fail(HL_ERR_SHAPE,
                           "%s: shapes %s and %s cannot be broadcast together (axis %d: %lld vs "
                           "%lld)", op, hl_shape_str(na, a), hl_shape_str(nb, b), i,
                           (long long)da, (long long)db);
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return HL_OK;
}
