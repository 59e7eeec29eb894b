/*
 * core.h - libcore's private header: the tensor and storage structs, the call record that
 * every op entry point builds, the backend interface, and the helpers entry points share.
 * Nothing here is visible through hl_core.h.
 */
#ifndef HL_CORE_PRIVATE_H
#define HL_CORE_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hl_core.h"
#include "ops.h"

/* ---- storage and tensors ---- */

typedef struct hl_storage {
    void *data;          /* 64-byte aligned; device memory for non-CPU devices */
    size_t nbytes;       /* bytes usable by tensors */
    size_t block_bytes;  /* size of the block the allocator handed out */
    hl_device device;
    int refcount;        /* atomic */
    struct hl_storage *next_free;  /* link while the block sits in the allocator's cache */
    /* The number of the plan recording whose calls write this storage last (0: none): its
       values do not exist until that plan runs, so host reads are refused while recording. */
    uint64_t written_by;
    /* Set when a plan placed this storage in its arena (plan/memory.c): data points into the
       arena, which this storage holds a reference to, and owns no block of its own. */
    struct hl_storage *arena_owner;
    /* Set for memory hl does not own (hl_tensor_borrow_host: a caller's numpy buffer): the
       last release frees the record only, never the bytes, and the allocator never sees it. */
    bool borrowed;
    /* Set by hl_tensor_plain_pages: the block's pages are ordinary ones, so it is freed, not
       cached, when released (the next tensor of its size class did not ask for them). */
    bool plain_pages;
} hl_storage;

struct hl_tensor {
    int refcount;        /* atomic */
    hl_dtype dtype;
    int ndim;
    int64_t shape[HL_MAX_DIMS];
    int64_t strides[HL_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements */
    hl_storage *storage;
};

/* Bytes from storage->data to element 0 of t. */
static inline char *hl_ptr(const hl_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)hl_dtype_size(t->dtype);
}
int64_t hl_shape_numel(int ndim, const int64_t *shape);
bool hl_same_shape(const hl_tensor *a, const hl_tensor *b);
bool hl_same_device(hl_device a, hl_device b);
/* A fresh tensor struct over storage (retained). */
hl_status hl_tensor_wrap(hl_storage *s, hl_dtype dtype, int ndim, const int64_t *shape,
                         const int64_t *strides, int64_t offset, hl_tensor **out);
void hl_storage_release(hl_storage *s);

/* ---- errors ---- */

/* Records the message for hl_last_error() and returns code. printf-style. */
hl_status hl_fail(hl_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "(2, 3) float32": the shape and dtype of t, for messages. Returns one of a ring of
   thread-local buffers, so up to eight may appear in one message. */
const char *hl_desc(const hl_tensor *t);
const char *hl_shape_str(int ndim, const int64_t *shape);
const char *hl_op_str(int op);

/* Normalises axis (may be negative) against ndim, or fails naming the op. */
hl_status hl_norm_axis(const char *op, int64_t *axis, int ndim);

/* ---- the call record ---- */

enum { HL_CALL_MAX_IN = 6, HL_CALL_MAX_OUT = 4, HL_CALL_INTS = 32, HL_CALL_FLOATS = 8 };

/* One kernel invocation: what graph mode records and replays. Inputs beyond HL_CALL_MAX_IN
   (concat) go through in_many. Attributes are plain numbers; each op documents its layout
   beside its entry point. */
typedef struct hl_call {
    int op;
    int n_in, n_out;
    const hl_tensor *in[HL_CALL_MAX_IN];
    const hl_tensor **in_many;   /* when n_in > HL_CALL_MAX_IN, else NULL */
    hl_tensor *out[HL_CALL_MAX_OUT];
    int64_t i[HL_CALL_INTS];
    double f[HL_CALL_FLOATS];
    /* Random ops set this: after each replay of a plan, i[0] (the generator key) moves on
       by a fixed odd constant, so every run of a plan draws fresh, independent numbers
       (a dropout mask must change from step to step) and runs stay reproducible. */
    bool reseed_on_replay;
} hl_call;

/* Record variants that only plan/recompute.c makes (no entry point records them), read by the
   CPU kernels:
   - batch_norm with i[1] = HL_BN_GIVEN_STATS: in[3], in[4] are the mean and invstd a training
     call saved, out = {y} only; y is that call's y bit for bit, no statistic is updated.
   - max_pool_grad with i[HL_POOL_GRAD_MODE] = HL_POOL_GRAD_FROM_INPUT: in[1] is the pooled
     input x instead of the indices; each window's maximum is found again, as max_pool did.
   and that plan/fuse_norm.c makes (CPU only):
   - batch_norm with i[HL_BN_EPILOGUE] = HL_BN_EPI_RELU: out[0] is relu(y); HL_BN_EPI_ADD_RELU
     / HL_BN_EPI_RES_ADD_RELU: in[5] is a residual r of y's shape, out[0] is relu(y + r)
     (relu(r + y)); each bit for bit the calls it replaced.
   - batch_norm_grad with i[HL_BN_GRAD_PROLOGUE] = HL_BN_GRAD_RELU: in[0] is the gradient of
     a ReLU's output and in[5] that output z; dy is relu_grad's (z > 0 ? in[0] : 0).
   - max_pool_grad (HL_POOL_GRAD_FROM_INPUT) with i[HL_POOL_GRAD_EPILOGUE] = HL_POOL_GRAD_RELU:
     the pooled input in[1] is a ReLU's output z, and out[0] is relu_grad(dx, z), z > 0 ? dx : 0
     (the relu_grad that followed is gone).
   and that plan/fuse.c makes (CPU only):
   - conv_fused with i[HL_CONV_DW] = 1: a pointwise expansion (packed weights, no residual)
     and the depthwise 3x3 conv that alone read its output, as one call (cpu/conv_expand_dw.c):
     after the expansion's inputs come the depthwise weight (C, 1, 3, 3) and, with
     i[HL_CONV_DW + 5], its bias; i[HL_CONV_DW + 1] its stride, i[HL_CONV_DW + 2 ..
     HL_CONV_DW + 3] its pads at the top and left, i[HL_CONV_DW + 4] its activation, f[2..3]
     that activation's alpha and beta; out[0] is the depthwise layer's output. */
enum { HL_CONV_DW = 13 };
enum { HL_BN_GIVEN_STATS = 1, HL_POOL_GRAD_MODE = 11, HL_POOL_GRAD_FROM_INPUT = 1 };
enum { HL_POOL_GRAD_EPILOGUE = 12, HL_POOL_GRAD_RELU = 1 };
enum { HL_BN_EPILOGUE = 2, HL_BN_EPI_NONE = 0, HL_BN_EPI_RELU = 1, HL_BN_EPI_ADD_RELU = 2,
       HL_BN_EPI_RES_ADD_RELU = 3 };
enum { HL_BN_GRAD_PROLOGUE = 4, HL_BN_GRAD_RELU = 1 };

static inline const hl_tensor *hl_call_in(const hl_call *c, int k) {
    return c->in_many ? c->in_many[k] : c->in[k];
}

typedef hl_status (*hl_kernel)(const hl_call *c);

/* Runs the call on the device of its first output (or first input), or appends it to the
   plan being recorded on this thread. */
hl_status hl_submit(const hl_call *c);

/* ---- backends ---- */

/* The interface a backend implements: one struct per device kind, registered with libcore
   (hl_backend_register), private to libcore and to backends built beside it (cuda/). Entry
   points check arguments once for every backend and ask the backend what it computes
   (op_dtypes) instead of hard-coding dtypes. A new field goes at the end, with a new ABI
   number: registration refuses a struct of another ABI. */
enum { HL_BACKEND_ABI = 3 };  /* 3: graph capture */

typedef struct hl_backend {
    int abi;                 /* HL_BACKEND_ABI */
    const char *name;        /* "cpu", "meta", "cuda": in messages */
    int kind;                /* the HL_DEVICE_* it serves */
    int (*device_count)(void);
    /* Memory. A backend without memory (meta) has has_memory false: its storages hold no
       bytes, raw_alloc/raw_free/memcpy are never called and data pointers stay NULL.
       host_visible: tensors' data pointers can be read and written by the host (numpy views). */
    bool has_memory, host_visible;
    void *(*raw_alloc)(size_t nbytes, int index);   /* 64-byte aligned */
    void (*raw_free)(void *p, int index);
    /* Byte copies; kind 0 host->device, 1 device->host, 2 device->device. */
    hl_status (*memcpy)(void *dst, const void *src, size_t nbytes, int kind, int index);
    /* Waits for the device's queued work (NULL: work is done when a kernel returns). */
    hl_status (*synchronize)(int index);
    /* Threads the backend's kernels use on the host (NULL: it uses none of its own). */
    void (*set_num_threads)(int n);
    /* Per op, bit (1 << dtype) for each dtype the kernel computes in. */
    uint32_t op_dtypes[HL_OP_COUNT];
    hl_kernel kernels[HL_OP_COUNT];
    /* Graph capture (plan/capture.c; NULL where the backend has none). Between capture_begin
       and capture_end the kernels this thread calls for device index are recorded, not run;
       capture_end gives the graph, or NULL and why when the capture failed. graph_launch runs
       it on the device's compute stream. uncapturable: why a kernel this thread ran since the
       last question cannot be captured (it waited for or read the device on the host, or used
       memory a later call may free), or NULL; asking clears it. */
    hl_status (*capture_begin)(int index);
    hl_status (*capture_end)(int index, void **graph, char *why, size_t why_len);
    hl_status (*graph_launch)(void *graph, int index);
    void (*graph_free)(void *graph, int index);
    const char *(*uncapturable)(void);
} hl_backend;

/* Makes be serve be->kind (replacing what served it). Checks the ABI and that every required
   function is there. The CPU and meta backends register themselves on first use. */
hl_status hl_backend_register(const hl_backend *be);
/* The backend serving device d (its index checked against device_count), or NULL. */
const hl_backend *hl_backend_for(hl_device device);
extern const hl_backend hl_cpu_backend, hl_meta_backend;
/* "cpu", "cuda:1", "meta": a device for messages (from a ring of thread-local buffers). */
const char *hl_device_str(hl_device d);

/* Fails with a DTypeError unless the device's backend does arithmetic in t's dtype (the
   dtypes it computes `add` in): for entry points whose dtype rule is "any dtype the device
   computes in". */
hl_status hl_check_compute_dtype(const char *op, hl_device device, const hl_tensor *t);
/* Fails with a DTypeError unless the backend of device computes `op` in t's dtype; the
   message names op, `what` the tensor is ("x", "dy", "operands"), the dtypes that would do
   and t. */
hl_status hl_check_op_dtype(const char *opname, int op, hl_device device, const char *what,
                            const hl_tensor *t);
/* Fails unless t (called `what` in the message) is a floating-point tensor its device
   computes in. */
hl_status hl_check_float(const char *op, const char *what, const hl_tensor *t);

/* ---- allocator ---- */

hl_status hl_storage_new(hl_device device, size_t nbytes, hl_storage **out);
/* The same with a block of nbytes (rounded up to 64) taken from the device, never from the
   cache's size classes: for one large buffer made once, such as a plan's arena. */
hl_status hl_storage_new_exact(hl_device device, size_t nbytes, hl_storage **out);
/* A CPU storage record over nbytes at data, which the caller owns (see hl_storage.borrowed). */
hl_status hl_storage_borrow(void *data, size_t nbytes, hl_storage **out);

/* ---- output preparation ---- */

/* Gives the op an output of (dtype, device, shape): allocates one when *out is NULL, else
   checks the caller's tensor matches and can be written (hl_check_writable) and takes a
   reference to it. Either way, on success the
   caller of the entry point will own one reference. */
hl_status hl_out_prepare(const char *op, hl_tensor **out, hl_dtype dtype, hl_device device,
                         int ndim, const int64_t *shape);
/* Undoes hl_out_prepare after a later failure: drops the reference and restores *out. */
void hl_out_abandon(hl_tensor **out, hl_tensor *caller_value);
/* Fails unless every element of t has memory of its own, so a write touches each memory
   element once: t (called `what` in the message: "the output", "running_mean"...) must have
   no zero stride on an axis of size > 1 (a broadcast view). hl_out_prepare, hl_submit (for
   every out[] of a call) and the entry points that write into a tensor they are given
   (copy, fill, the random fills, batch norm's running statistics) all call it. */
hl_status hl_check_writable(const char *op, const char *what, const hl_tensor *t);
/* Fails when out overlaps in, unless allow_same and they are the identical view. */
hl_status hl_check_no_overlap(const char *op, const hl_tensor *out, const hl_tensor *in,
                              bool allow_same);
/* Fails unless every tensor given is on device d. */
hl_status hl_check_device(const char *op, hl_device d, const hl_tensor *t);
/* Broadcasts two shapes (numpy rules) or fails naming the op. */
hl_status hl_broadcast_shapes(const char *op, int na, const int64_t *a, int nb,
                              const int64_t *b, int *nout, int64_t *out);

/* Appends the call to the plan recorded on this thread (plan/record.c). */
hl_status hl_plan_record(const hl_call *c);
/* Runs one call now on its device's backend (dispatch.c). */
hl_status hl_run_call(const hl_call *c);
/* Gives s's block back to the allocator and points s at arena bytes [offset, offset + s's
   size) instead; s holds a reference to the arena from then on (alloc.c). */
void hl_storage_move_to_arena(hl_storage *s, hl_storage *arena, size_t offset);

/* ---- kernel scratch in a plan's arena ---- */

/* A kernel's work buffer of nbytes for the call a plan is replaying on this thread: a pointer
   into the plan's arena (where the memory plan gave this call its scratch), or NULL, and then
   the kernel allocates as usual. While a plan measures its calls (its first replay), the
   request is counted toward the call's scratch. plan/scratch.c. */
void *hl_plan_scratch(size_t nbytes);
/* Whether the call running now is in a plan's first replay, which measures scratch
   (hl_plan_scratch answers NULL then, and gives arena memory from the next replay on). */
bool hl_plan_scratch_measuring(void);

/* hl_optim_update's record keeps its per-step values from f[HL_OPTIM_VALUES] on, after the
   rule's constants (api/optim.c). */
enum { HL_OPTIM_VALUES = 5 };
/* i[HL_OPTIM_SKIP] = 1 when the last input is hl.amp's skip flag (api/optim.c).
   A plan may have an update form its gradient as an outer product (plan/fuse_update.c):
   i[HL_OPTIM_OUTER] = 1, then the column vector's element stride, the row vector's, and the
   row length; in[0] is the column vector and in[n_in - 1] the row vector. The two never meet:
   an update with a skip flag is not fused. */
enum { HL_OPTIM_SKIP = 5, HL_OPTIM_OUTER = 6 };

/* ---- fused element-wise passes (graph mode: plan/fuse.c builds them, cpu/fused.c runs) ---- */

enum { HL_FUSED_MAX_STEPS = 16, HL_FUSED_MAX_OPERANDS = 16, HL_FUSED_MAX_SCRATCH = 8 };

/* A chain of element-wise calls run as one pass over the elements: the pass walks the first
   operand's shape in short runs, and each run goes through every step in order, intermediates
   that only the chain reads staying in small scratch buffers (never in memory). Each step is
   the call's own row function, so results are bit for bit those of the calls one by one. */
typedef struct {
    int op, n_in;
    /* arg[0] the output, arg[1..n_in] the inputs: an operand index >= 0, or -1 - s for
       scratch buffer s */
    int arg[3];
    const double *params;  /* the call's f[] (alpha, beta of unary ops) */
} hl_fused_step;

typedef struct {
    hl_dtype dtype;        /* every step's */
    int n_steps, n_operands;
    const hl_tensor *operands[HL_FUSED_MAX_OPERANDS];  /* [0] an output of the pass's shape */
    hl_fused_step steps[HL_FUSED_MAX_STEPS];
} hl_fused;

/* 1 when the CPU has a row function for element-wise op in dtype d. */
int hl_cpu_fusible(int op, hl_dtype d);
/* Whether conv_fused call `expand` and conv call `dw` (reading its output) may run as one
   (cpu/conv.c, HL_CONV_DW above). */
bool hl_cpu_expand_dw_fusible(const hl_call *expand, const hl_call *dw);
hl_status hl_cpu_fused_run(const hl_fused *f);

/* ---- numbers ---- */

float hl_half_to_float(uint16_t h);
uint16_t hl_float_to_half(float f);
float hl_bf16_to_float(uint16_t h);
uint16_t hl_float_to_bf16(float f);

#define HL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HL_MAX(a, b) ((a) > (b) ? (a) : (b))

/* One name per dtype: HL_F32 float, etc. Element-wise kernels instantiate over these. */
typedef uint16_t hl_half_bits;

#endif /* HL_CORE_PRIVATE_H */
