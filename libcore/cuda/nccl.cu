/*
 * nccl.cu - NCCL for hl.distributed on cuda devices: one communicator per rank on its GPU,
 * collectives on the device's compute stream (so they run in order with the kernels that
 * fill and read the buckets, without events), and the error paths hl needs to stop instead
 * of hanging (a non-blocking query of the enqueued work, NCCL's asynchronous error, abort).
 *
 * The real library dlopens libnccl.so.2 from the path Python found (the nvidia-nccl-cu13
 * wheel: hl/distributed/nccl.py), so nothing links against NCCL and a machine without it
 * loads libhlcuda as before. The emulated library (g++) calls emu/nccl.cpp instead, which
 * serves the same entry points over shared host memory between the processes of one
 * machine, so that the mpiexec tests run this file's code under HL_CUDA_EMULATE=1.
 *
 * Python calls these through ctypes (hl/_nccl.py). Every function returns an ncclResult_t;
 * hl_nccl_describe gives the sentence for a failure (NCCL's string, its last error, or the
 * CUDA error that stopped the glue).
 */
#include "hl_cuda.cuh"
#include "nccl_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

namespace {

struct nccl_table {
#define HL_NCCL_POINTER(name, ret, args) ret(*name) args;
    HL_NCCL_ENTRY_POINTS(HL_NCCL_POINTER)
#undef HL_NCCL_POINTER
};
nccl_table nccl;
bool nccl_loaded;
pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
thread_local char glue_error[512];  /* why the glue itself failed (a CUDA call, an argument) */

struct hl_nccl_comm {
    ncclComm_t comm;
    int device;
    cudaEvent_t done;  /* recorded after the last collective enqueued (hl_nccl_mark) */
    bool marked;
};

ncclResult_t glue_fail(ncclResult_t code, const char *fmt, const char *detail) {
    snprintf(glue_error, sizeof glue_error, fmt, detail);
    return code;
}

ncclResult_t cuda_fail(cudaError_t e, const char *what) {
    snprintf(glue_error, sizeof glue_error, "%s failed: %s", what, cudaGetErrorString(e));
    return ncclUnhandledCudaError;
}

bool nccl_dtype(hl_dtype dt, ncclDataType_t *out) {
    switch (dt) {
    case HL_F32: *out = ncclFloat32; return true;
    case HL_F64: *out = ncclFloat64; return true;
    case HL_F16: *out = ncclFloat16; return true;
    case HL_BF16: *out = ncclBfloat16; return true;
    case HL_I32: *out = ncclInt32; return true;
    case HL_I64: *out = ncclInt64; return true;
    case HL_U8: *out = ncclUint8; return true;
    default: return false;
    }
}

/* A tensor a collective may use as its buffer: contiguous, on the communicator's device. */
ncclResult_t buffer_of(const hl_nccl_comm *c, const hl_tensor *t, void **p, size_t *count,
                       ncclDataType_t *type) {
    glue_error[0] = 0;
    if (!nccl_loaded) return glue_fail(ncclInvalidUsage, "%s", "NCCL is not loaded");
    if (!c->comm) return glue_fail(ncclInvalidUsage, "%s", "the communicator was aborted");
    if (!nccl_dtype(t->dtype, type))
        return glue_fail(ncclInvalidArgument, "a %s tensor cannot be reduced by NCCL",
                         HL_DESC(t));
    if (!hl_cuda_contiguous(t))
        return glue_fail(ncclInvalidArgument, "%s is not contiguous (NCCL needs one buffer)",
                         HL_DESC(t));
    if (t->storage->device.kind != HL_DEVICE_CUDA || t->storage->device.index != c->device)
        return glue_fail(ncclInvalidArgument,
                         "%s is not on the communicator's device", HL_DESC(t));
    *p = hl_cuda_ptr(t);
    *count = (size_t)hl_cuda_numel(t);
    return ncclSuccess;
}

/* Runs collective(comm, buffer, count, type, stream) on t's memory, in place, on the
   device's compute stream, once t is known to be a buffer NCCL can take. */
template <class Collective>
ncclResult_t on_buffer(void *comm, const hl_tensor *t, Collective collective) {
    hl_nccl_comm *c = (hl_nccl_comm *)comm;
    void *p;
    size_t n;
    ncclDataType_t type;
    ncclResult_t r = buffer_of(c, t, &p, &n, &type);
    if (r != ncclSuccess) return r;
    hl_cuda_device *d = hl_cuda_dev(c->device);
    return collective(c->comm, p, n, type, d->stream);
}

}  // namespace

/* exported (the version script lets hl_nccl_* out; the build hides everything by default) */
#define HL_NCCL_EXPORT __attribute__((visibility("default")))

extern "C" {

/* Loads NCCL: the real library from `path` (libnccl.so.2 of the wheel, or a soname the
   loader finds); the emulated library ignores the path. 0, or why in `why`. */
HL_NCCL_EXPORT int hl_nccl_open(const char *path, char *why, size_t why_len) {
    pthread_mutex_lock(&load_lock);
    int status = 0;
    if (!nccl_loaded) {
#ifdef __CUDACC__
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            snprintf(why, why_len, "%s", dlerror());
            status = 1;
        }
#define HL_NCCL_LOOKUP(name, ret, args)                                                    \
        if (!status) {                                                                     \
            nccl.name = (ret(*) args)dlsym(lib, #name);                                    \
            if (!nccl.name) {                                                              \
                snprintf(why, why_len, "%s has no %s (NCCL older than 2.13?)", path, #name); \
                status = 1;                                                                \
            }                                                                              \
        }
        HL_NCCL_ENTRY_POINTS(HL_NCCL_LOOKUP)
#undef HL_NCCL_LOOKUP
#else
        (void)path; (void)why; (void)why_len;
#define HL_NCCL_EMULATED(name, ret, args) nccl.name = hl_emu_##name;
        HL_NCCL_ENTRY_POINTS(HL_NCCL_EMULATED)
#undef HL_NCCL_EMULATED
#endif
        nccl_loaded = status == 0;
    }
    pthread_mutex_unlock(&load_lock);
    return status;
}

/* NCCL's version as a number (2.32.3 is 23203), or 0 when not loaded. */
HL_NCCL_EXPORT int hl_nccl_version(void) {
    int v = 0;
    if (nccl_loaded && nccl.ncclGetVersion(&v) != ncclSuccess) v = 0;
    return v;
}

/* Rank 0's part of the start: the id every rank's communicator joins (128 bytes). */
HL_NCCL_EXPORT int hl_nccl_unique_id(unsigned char *out) {
    glue_error[0] = 0;
    if (!nccl_loaded) return glue_fail(ncclInvalidUsage, "%s", "NCCL is not loaded");
    ncclUniqueId id;
    ncclResult_t r = nccl.ncclGetUniqueId(&id);
    if (r == ncclSuccess) memcpy(out, id.internal, sizeof id.internal);
    return r;
}

/* Joins the communicator of `nranks` ranks named by `id` as `rank`, on cuda device `device`
   (made current first, as NCCL requires). Blocks until every rank has joined. */
HL_NCCL_EXPORT int hl_nccl_init(void **out, int nranks, const unsigned char *id_bytes, int rank,
                                int device) {
    glue_error[0] = 0;
    *out = NULL;
    if (!nccl_loaded) return glue_fail(ncclInvalidUsage, "%s", "NCCL is not loaded");
    hl_cuda_dev(device);  /* the device's compute stream exists, and the device is current */
    hl_nccl_comm *c = (hl_nccl_comm *)calloc(1, sizeof *c);
    if (!c) return glue_fail(ncclSystemError, "%s", "out of host memory");
    c->device = device;
    cudaError_t e = cudaEventCreate(&c->done);
    if (e != cudaSuccess) {
        free(c);
        return cuda_fail(e, "cudaEventCreate");
    }
    ncclUniqueId id;
    memcpy(id.internal, id_bytes, sizeof id.internal);
    ncclResult_t r = nccl.ncclCommInitRank(&c->comm, nranks, id, rank);
    if (r != ncclSuccess) {
        cudaEventDestroy(c->done);
        free(c);
        return r;
    }
    *out = c;
    return ncclSuccess;
}

/* Sums tensor t over the ranks, in place, on its device's compute stream (enqueued: the
   kernels given to the stream afterwards see the sum; the host does not wait). */
HL_NCCL_EXPORT int hl_nccl_all_reduce(void *comm, const hl_tensor *t) {
    return on_buffer(comm, t, [](ncclComm_t nc, void *p, size_t n, ncclDataType_t type,
                                 cudaStream_t s) {
        return nccl.ncclAllReduce(p, p, n, type, ncclSum, nc, s);
    });
}

/* Copies root's values of t into every rank's t, on the compute stream (enqueued). */
HL_NCCL_EXPORT int hl_nccl_broadcast(void *comm, const hl_tensor *t, int root) {
    return on_buffer(comm, t, [root](ncclComm_t nc, void *p, size_t n, ncclDataType_t type,
                                     cudaStream_t s) {
        return nccl.ncclBroadcast(p, p, n, type, root, nc, s);
    });
}

/* Marks the end of the work enqueued so far on the compute stream; hl_nccl_query then says
   whether the device has got there. */
HL_NCCL_EXPORT int hl_nccl_mark(void *comm) {
    hl_nccl_comm *c = (hl_nccl_comm *)comm;
    glue_error[0] = 0;
    if (!c->comm) return glue_fail(ncclInvalidUsage, "%s", "the communicator was aborted");
    hl_cuda_device *d = hl_cuda_dev(c->device);
    cudaError_t e = cudaEventRecord(c->done, d->stream);
    if (e != cudaSuccess) return cuda_fail(e, "cudaEventRecord after a collective");
    c->marked = true;
    return ncclSuccess;
}

/* Without blocking: ncclSuccess when the device has passed the mark (or nothing is marked),
   ncclInProgress while it has not, or the error that stopped it: NCCL's asynchronous error
   (a peer gone, a network failure) or a CUDA error. */
HL_NCCL_EXPORT int hl_nccl_query(void *comm) {
    hl_nccl_comm *c = (hl_nccl_comm *)comm;
    glue_error[0] = 0;
    if (!c->comm) return glue_fail(ncclInvalidUsage, "%s", "the communicator was aborted");
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = nccl.ncclCommGetAsyncError(c->comm, &async);
    if (r != ncclSuccess) return r;
    if (async != ncclSuccess && async != ncclInProgress) return async;
    if (!c->marked) return ncclSuccess;
    cudaError_t e = cudaEventQuery(c->done);
    if (e == cudaErrorNotReady) return ncclInProgress;
    if (e != cudaSuccess) return cuda_fail(e, "the device, while NCCL's collectives ran");
    c->marked = false;
    return ncclSuccess;
}

/* Ends the communicator at once, even with collectives stuck on the device (a peer that
   died): what hl does before raising, so the stream does not stay blocked. It may come from
   another thread while one waits in a collective (hl's watchdog), so the glue's record
   stays (a few bytes, once per failure): later calls on it fail as invalid usage. */
HL_NCCL_EXPORT int hl_nccl_abort(void *comm) {
    hl_nccl_comm *c = (hl_nccl_comm *)comm;
    ncclComm_t nc = __atomic_exchange_n(&c->comm, (ncclComm_t)NULL, __ATOMIC_ACQ_REL);
    return nc ? nccl.ncclCommAbort(nc) : ncclSuccess;
}

/* Ends the communicator after its work (the normal end). */
HL_NCCL_EXPORT int hl_nccl_destroy(void *comm) {
    hl_nccl_comm *c = (hl_nccl_comm *)comm;
    ncclResult_t r = c->comm ? nccl.ncclCommDestroy(c->comm) : ncclSuccess;
    cudaEventDestroy(c->done);
    free(c);
    return r;
}

/* The sentence for a failure `code` of the last call on this thread (comm may be NULL). */
HL_NCCL_EXPORT const char *hl_nccl_describe(void *comm, int code) {
    static thread_local char text[1024];
    const char *name = nccl_loaded ? nccl.ncclGetErrorString((ncclResult_t)code) : "";
    const char *last = "";
    if (glue_error[0]) last = glue_error;
    else if (nccl_loaded && comm && ((hl_nccl_comm *)comm)->comm)
        last = nccl.ncclGetLastError(((hl_nccl_comm *)comm)->comm);
    else if (nccl_loaded) last = nccl.ncclGetLastError(NULL);
    snprintf(text, sizeof text, "%s%s%s (NCCL error %d)", name ? name : "",
             last && last[0] ? ": " : "", last ? last : "", code);
    return text;
}

}  // extern "C"
