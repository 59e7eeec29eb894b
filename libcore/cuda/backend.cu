/*
 * backend.cu - libhlcuda's backend: devices, memory, the compute stream, and the kernel table
 * generated from ops.h (op NAME of family F runs hl_cuda_F when a kernel file defines it;
 * the rest stay NULL, which the registry reports as "<op> is not implemented on cuda").
 * libcore loads this library at run time (plugin.h) and registers what HL_PLUGIN_ENTRY gives.
 * The same file builds the real library (nvcc) and the emulated one (g++ with
 * emu/hl_cuda_emu.h).
 */
#include <pthread.h>
#include <stdio.h>

#include "hl_cuda.cuh"
#include "../src/cpu/op_dtypes.h"

const hl_plugin_host *hl_cuda_host;

/* Every family, weak: a family no kernel file defines resolves to NULL. */
#define DECLARE_FAMILY(family) \
    extern "C" hl_status hl_cuda_##family(const hl_call *c) __attribute__((weak));
HL_KERNEL_FAMILIES(DECLARE_FAMILY)
extern "C" hl_status hl_cuda_gemm_pack_b(const hl_call *c);
extern "C" hl_status hl_cuda_matmul_fused(const hl_call *c);

enum { MAX_DEVICES = 16 };
static hl_cuda_device devices[MAX_DEVICES];
static bool device_ready[MAX_DEVICES];
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;
static int count;

bool hl_cuda_blas_create(cublasHandle_t *h, cudaStream_t s) {
    if (cublasCreate(h) != CUBLAS_STATUS_SUCCESS) return false;
    cublasSetStream(*h, s);
#ifdef __CUDACC__  /* (the emulation's products need no workspace) */
    void *workspace = NULL;  /* kept for the handle's life */
    if (cudaMalloc(&workspace, HL_CUBLAS_WORKSPACE) == cudaSuccess)
        cublasSetWorkspace(*h, workspace, HL_CUBLAS_WORKSPACE);
    else  /* out of memory already: cuBLAS's own default serves (and a capture may fail) */
        cudaGetLastError();
#endif
    return true;
}

hl_cuda_device *hl_cuda_dev(int index) {
    cudaSetDevice(index);
    if (hl_cuda_device *view = hl_cuda_capture_view(index)) return view;
    if (__atomic_load_n(&device_ready[index], __ATOMIC_ACQUIRE)) return &devices[index];
    pthread_mutex_lock(&device_lock);
    if (!device_ready[index]) {
        hl_cuda_device *d = &devices[index];
        cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
        hl_cuda_blas_create(&d->blas, d->stream);  /* a failure shows at the first product */
        pthread_mutex_init(&d->scratch_mutex, NULL);
        pthread_mutex_init(&d->blas_mutex, NULL);
        cudaMalloc((void **)&d->error_flag, sizeof(int));
        cudaMemsetAsync(d->error_flag, 0, sizeof(int), d->stream);
        cudaStreamSynchronize(d->stream);
        __atomic_store_n(&device_ready[index], true, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&device_lock);
    return &devices[index];
}

void hl_cuda_scratch_lock(hl_cuda_device *d) { pthread_mutex_lock(&d->scratch_mutex); }
void hl_cuda_scratch_unlock(hl_cuda_device *d) { pthread_mutex_unlock(&d->scratch_mutex); }

void *hl_cuda_scratch(hl_cuda_device *d, size_t nbytes) {
    void *planned = hl_cuda_host->plan_scratch(nbytes);
    if (planned) return planned;
    /* (a plan's first replay measures what it asks for: the next replays get arena memory) */
    if (!hl_cuda_host->plan_scratch_measuring())
        hl_cuda_uncapturable("%s: its work buffer is the device's shared one, which a later "
                             "call may reallocate", "a kernel");
    if (hl_cuda_capturing()) return NULL;
    if (nbytes <= d->scratch_bytes) return d->scratch;
    if (d->scratch) {
        cudaStreamSynchronize(d->stream);  /* queued kernels may still read the old one */
        cudaFree(d->scratch);
    }
    d->scratch = NULL;
    d->scratch_bytes = 0;
    if (cudaMalloc(&d->scratch, nbytes) != cudaSuccess) {
        cudaGetLastError();
        d->scratch = NULL;
        return NULL;
    }
    d->scratch_bytes = nbytes;
    return d->scratch;
}

int hl_cuda_call_device(const hl_call *c) {
    const hl_tensor *t = c->n_out && c->out[0] ? c->out[0] : hl_call_in(c, 0);
    return t->storage->device.index;
}

hl_status hl_cuda_check_launch(const char *op) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return HL_OK;
    return HL_FAIL(HL_ERR_DEVICE, "%s: the CUDA kernel launch failed: %s", op,
                   cudaGetErrorString(e));
}

hl_status hl_cuda_take_flag(hl_cuda_device *d, const char *op, int64_t *pos) {
    hl_cuda_uncapturable("%s: checks its indices on the host (reads the device's error flag)",
                         op);
    if (hl_cuda_capturing())
        return HL_FAIL(HL_ERR_DEVICE, "%s: cannot be captured in a graph", op);
    int flag = 0;
    cudaMemcpyAsync(&flag, d->error_flag, sizeof flag, cudaMemcpyDeviceToHost, d->stream);
    cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e != cudaSuccess)
        return HL_FAIL(HL_ERR_DEVICE, "%s: the kernel failed: %s", op, cudaGetErrorString(e));
    *pos = flag ? (int64_t)(HL_FLAG_BASE - flag) : -1;
    if (flag) cudaMemsetAsync(d->error_flag, 0, sizeof(int), d->stream);
    return HL_OK;
}

/* ---- the backend interface ---- */

static int cuda_device_count(void) { return count; }

static void *cuda_alloc(size_t nbytes, int index) {
    hl_cuda_dev(index);
    void *p = NULL;
    if (cudaMalloc(&p, nbytes ? nbytes : 1) != cudaSuccess) {
        cudaGetLastError();  /* an allocation failure is not sticky: clear it */
        return NULL;
    }
    return p;
}

static void cuda_free(void *p, int index) {
    hl_cuda_device *d = hl_cuda_dev(index);
    cudaStreamSynchronize(d->stream);  /* queued kernels may still use the block */
    cudaFree(p);
}

static hl_status cuda_memcpy(void *dst, const void *src, size_t nbytes, int kind, int index) {
    hl_cuda_device *d = hl_cuda_dev(index);
    static const cudaMemcpyKind kinds[3] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice};
    if (kind < 0 || kind > 2) return HL_FAIL(HL_ERR_VALUE, "cuda memcpy: bad kind %d", kind);
    if (hl_cuda_capturing() && kind != 2) {
        hl_cuda_uncapturable("%s: copies between the host and the device", "a copy");
        return HL_FAIL(HL_ERR_DEVICE, "a copy between the host and cuda:%d cannot be captured",
                       index);
    }
    /* host copies stage through pinned buffers; device copies stay queued on the stream */
    cudaError_t e = kind == 2 ? cudaMemcpyAsync(dst, src, nbytes, kinds[kind], d->stream)
                              : hl_cuda_copy_host(d, dst, src, nbytes, kind == 0);
    if (e != cudaSuccess)
        return HL_FAIL(HL_ERR_DEVICE, "copy %s cuda:%d failed: %s",
                       kind == 0 ? "to" : kind == 1 ? "from" : "within", index,
                       cudaGetErrorString(e));
    return HL_OK;
}

static hl_status cuda_synchronize(int index) {
    hl_cuda_device *d = hl_cuda_dev(index);
    cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess)
        return HL_FAIL(HL_ERR_DEVICE, "synchronize: cuda:%d reported an error: %s", index,
                       cudaGetErrorString(e));
    return HL_OK;
}

/* What the CUDA kernels compute in: the CPU's dtypes (so results compare one to one), except
   matmul and gemm, which cuBLAS does in floats only, and the element-wise ops, which also
   compute in float16 and bfloat16. */
#define CUDA_DTYPES_ROW(NAME, name, family, ...) \
    be.op_dtypes[HL_OP_##NAME] = DTYPES_##family; be.kernels[HL_OP_##NAME] = hl_cuda_##family;

static hl_backend be;

static void fill_backend(void) {
    be.abi = HL_BACKEND_ABI;
    be.name = "cuda";
    be.kind = HL_DEVICE_CUDA;
    be.device_count = cuda_device_count;
    be.has_memory = true;
    be.host_visible = false;
    be.raw_alloc = cuda_alloc;
    be.raw_free = cuda_free;
    be.memcpy = cuda_memcpy;
    be.synchronize = cuda_synchronize;
    hl_cuda_fill_capture(&be);
    HL_OPS(CUDA_DTYPES_ROW)
    /* the gemm family's packing and fused product have kernels of their own (fused.cu);
       conv_fused is conv's kernel reading the epilogue (conv.cu) */
    be.kernels[HL_OP_GEMM_PACK_B] = hl_cuda_gemm_pack_b;
    be.kernels[HL_OP_MATMUL_FUSED] = hl_cuda_matmul_fused;
    /* fused attention is the CPU's (cpu/attention.c): the registry refuses it here */
    be.kernels[HL_OP_ATTENTION] = NULL;
    be.op_dtypes[HL_OP_RANDOM_BERNOULLI] = CPU_COPY;
    be.op_dtypes[HL_OP_MATMUL] = be.op_dtypes[HL_OP_GEMM] = F32_F64;
    /* element-wise kernels compute in float16 and bfloat16 too (in float, rounded once) */
    const uint32_t halves = (1u << HL_F16) | (1u << HL_BF16);
#define CUDA_HALF_ROW(NAME, ...) be.op_dtypes[HL_OP_##NAME] |= halves;
    HL_UNARY_FLOAT_OPS(CUDA_HALF_ROW) HL_UNARY_NUMERIC_OPS(CUDA_HALF_ROW)
    HL_UNARY_PREDICATE_OPS(CUDA_HALF_ROW) HL_BINARY_ARITH_OPS(CUDA_HALF_ROW)
    HL_BINARY_BOOL_OPS(CUDA_HALF_ROW)
    /* so do the GEMMs (half operands, float32 sums), convolution, the reductions, softmax
       and cross-entropy, the norms and pooling (float or double arithmetic, rounded once) */
    static const int half_ops[] = {
        HL_OP_MATMUL, HL_OP_GEMM, HL_OP_CONV, HL_OP_CONV_GRAD_INPUT, HL_OP_CONV_GRAD_WEIGHT,
        HL_OP_SUM, HL_OP_MEAN, HL_OP_MAX, HL_OP_MIN, HL_OP_PROD, HL_OP_L2, HL_OP_LOGSUMEXP,
        HL_OP_SOFTMAX, HL_OP_LOG_SOFTMAX, HL_OP_SOFTMAX_GRAD, HL_OP_LOG_SOFTMAX_GRAD,
        HL_OP_SOFTMAX_CROSS_ENTROPY, HL_OP_SOFTMAX_CROSS_ENTROPY_GRAD, HL_OP_BATCH_NORM,
        HL_OP_BATCH_NORM_GRAD, HL_OP_LAYER_NORM, HL_OP_LAYER_NORM_GRAD, HL_OP_MAX_POOL,
        HL_OP_AVG_POOL, HL_OP_MAX_POOL_GRAD, HL_OP_AVG_POOL_GRAD,
        /* and the selections (compared widened), cumsum (double sums), the indexing
           gradients (float32 sums, rounded once), the draws (float32's Philox words and
           formulas, rounded once), arange/eye/one_hot (values rounded once), resize and
           its gradient (double sums, rounded once) */
        HL_OP_ARGMAX, HL_OP_ARGMIN, HL_OP_TOPK, HL_OP_NONZERO, HL_OP_CUMSUM, HL_OP_GATHER_GRAD,
        HL_OP_SCATTER_ELEMENTS, HL_OP_RANDOM_UNIFORM, HL_OP_RANDOM_NORMAL, HL_OP_ARANGE,
        HL_OP_EYE, HL_OP_ONE_HOT, HL_OP_RESIZE, HL_OP_RESIZE_GRAD};
    for (int op : half_ops) be.op_dtypes[op] |= halves;
}

extern "C" __attribute__((visibility("default"))) const hl_backend *
hl_plugin_backend(const hl_plugin_host *host, char *why, size_t why_len) {
    if (!host || host->abi != HL_PLUGIN_ABI || host->backend_abi != HL_BACKEND_ABI ||
        host->tensor_size != sizeof(hl_tensor) || host->storage_size != sizeof(hl_storage) ||
        host->call_size != sizeof(hl_call)) {
        snprintf(why, why_len, "libhlcuda was built for another version of hl's core "
                 "(plugin interface %d, backend interface %d, other tensor/storage/call "
                 "layouts); rebuild it with hl", HL_PLUGIN_ABI, HL_BACKEND_ABI);
        return NULL;
    }
    hl_cuda_host = host;
    int driver = 0;
    cudaError_t e = cudaDriverGetVersion(&driver);
    if (e != cudaSuccess || driver == 0) {
        snprintf(why, why_len, "no NVIDIA driver was found (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "driver version 0");
        return NULL;
    }
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    if (driver < runtime) {
        snprintf(why, why_len, "the NVIDIA driver supports CUDA %d.%d but hl's CUDA runtime is "
                 "%d.%d: update the driver", driver / 1000, driver % 1000 / 10, runtime / 1000,
                 runtime % 1000 / 10);
        return NULL;
    }
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(why, why_len, "no CUDA device answers (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
        count = 0;
        return NULL;
    }
    if (count > MAX_DEVICES) count = MAX_DEVICES;
    fill_backend();
    return &be;
}
