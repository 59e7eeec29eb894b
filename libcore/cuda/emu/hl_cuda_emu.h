/*
 * hl_cuda_emu.h - CUDA on the host: the subset of CUDA C++ that hl's kernels use, mapped onto
 * a host launcher and a fake runtime (emu/runtime.cpp), so that the same kernel sources
 * (libcore/cuda/ *.cu files) build with nvcc for a GPU and with g++ for the emulated backend that
 * serves cuda:0 under HL_CUDA_EMULATE=1 on machines without one.
 *
 * C++, not C: the .cu files are C++ to nvcc (templates instantiate one kernel per dtype and
 * op), so the emulated build compiles the very same text as C++; a C build would need a
 * second, macro-only form of every kernel.
 *
 * The model:
 * - a grid runs block after block on the calling thread (blocks of one launch never run at
 *   once, so a launch costs no thread hand-off);
 * - HL_LAUNCH runs a block's threads one after another to completion: the cheap form, for
 *   kernels without barriers or warp collectives. Such a kernel calling __syncthreads() or a
 *   shuffle fails the launch ("kernel K uses a barrier: launch it with HL_LAUNCH_COOP"), so a
 *   wrong choice shows on the first test, never as a silent wrong answer;
 * - HL_LAUNCH_COOP runs each thread of a block as a fiber (ucontext) with its own stack:
 *   __syncthreads() parks the fiber until every live thread of the block reaches a barrier,
 *   warp collectives (__shfl_*_sync, __syncwarp) until every live thread of its warp of 32
 *   does, so shared memory, barriers and shuffles keep CUDA's meaning. A barrier that can
 *   never complete (divergent __syncthreads) fails the launch instead of hanging;
 * - __shared__ variables are function-static and thread_local: one copy per block at a time;
 * - device memory is host memory that the runtime records as device memory, so copies check
 *   the direction they are told; a memory limit (HL_CUDA_EMU_MEMORY_MB, default 4096) makes
 *   out-of-memory testable; streams and events are synchronous; cuBLAS is OpenBLAS.
 */
#ifndef HL_CUDA_EMU_H
#define HL_CUDA_EMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <tuple>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* What a running emulated thread sees. */
struct hl_emu_thread {
    dim3 thread, block, block_dim, grid_dim;
    int fiber;  /* index into the block's fibers; -1 when the block runs without fibers */
};
extern thread_local hl_emu_thread *hl_emu_self;

#define threadIdx (hl_emu_self->thread)
#define blockIdx (hl_emu_self->block)
#define blockDim (hl_emu_self->block_dim)
#define gridDim (hl_emu_self->grid_dim)
#define warpSize 32

/* ---- barriers and warp collectives ---- */

void hl_emu_syncthreads(void);
void hl_emu_syncwarp(void);
/* Deposits this lane's 8 bytes, waits for the warp, returns lane src's (own when src is out of
   the warp or the lane has exited). */
uint64_t hl_emu_shfl(uint64_t v, int src_lane);

static inline void __syncthreads(void) { hl_emu_syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; hl_emu_syncwarp(); }

template <class T>
static inline T hl_emu_shfl_t(T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = hl_emu_shfl(bits, src);
    T out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
static inline int hl_emu_lane(void) { return (int)(threadIdx.x + blockDim.x * (threadIdx.y +
                                                   blockDim.y * threadIdx.z)) & 31; }
template <class T> static inline T __shfl_sync(unsigned m, T v, int src, int w = 32) {
    (void)m;
    int lane = hl_emu_lane();
    return hl_emu_shfl_t(v, (lane & ~(w - 1)) + (src & (w - 1)));
}
template <class T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) {
    (void)m;
    int lane = hl_emu_lane(), seg = lane & ~(w - 1);
    int src = lane + (int)d;
    return hl_emu_shfl_t(v, src < seg + w ? src : lane);
}
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int mask, int w = 32) {
    (void)m;
    int lane = hl_emu_lane(), seg = lane & ~(w - 1);
    int src = lane ^ mask;
    return hl_emu_shfl_t(v, src < seg + w ? src : lane);
}

/* ---- atomics (blocks may one day run on several host threads: real atomics) ---- */

template <class T> static inline T hl_emu_atomic_float_add(T *p, T v) {
    T old, want;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do want = old + v;
    while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return old;
}
static inline float atomicAdd(float *p, float v) { return hl_emu_atomic_float_add(p, v); }
static inline double atomicAdd(double *p, double v) { return hl_emu_atomic_float_add(p, v); }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
static inline int atomicMax(int *p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {}
    return old;
}
static inline int atomicMin(int *p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {}
    return old;
}
static inline int atomicCAS(int *p, int cmp, int v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }

/* ---- the runtime API subset ---- */

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorNotReady = 600,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;

typedef struct hl_emu_stream *cudaStream_t;
typedef struct hl_emu_event *cudaEvent_t;
typedef struct hl_emu_graph *cudaGraph_t;
typedef struct hl_emu_graph *cudaGraphExec_t;  /* instantiation keeps the recorded nodes */
enum { cudaStreamNonBlocking = 1 };
enum { cudaHostAllocDefault = 0, cudaHostAllocPortable = 1, cudaHostAllocMapped = 2 };
typedef enum { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
               cudaStreamCaptureModeRelaxed = 2 } cudaStreamCaptureMode;
typedef enum { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1,
               cudaStreamCaptureStatusInvalidated = 2 } cudaStreamCaptureStatus;

const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned flags);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s = 0);
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s = 0);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
/* Stream capture and graphs. While a stream captures, the work given to it is recorded, not
   run (kernels keep their arguments by value, as a CUDA graph's kernel nodes do); what CUDA
   refuses during a capture fails here too and invalidates it: synchronising the stream, a copy
   to or from pageable host memory, and, from the capturing thread (ThreadLocal mode),
   cudaMalloc, cudaFree, cudaMemcpy and cudaDeviceSynchronize. */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int major, minor, multiProcessorCount;
};
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);

/* ---- launching ---- */

typedef void (*hl_emu_body)(void *closure);
/* How a capturing stream keeps a launch: a copy of its closure (the kernel's arguments, by
   value), and how to destroy that copy. */
struct hl_emu_closure_ops {
    void *(*clone)(const void *closure);
    void (*destroy)(void *closure);
};
/* Runs closure once per thread of the grid (see the model above), or records it when s is
   capturing. Errors land where cudaGetLastError finds them, as with a real launch. */
void hl_emu_launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, bool coop,
                   const char *kernel, hl_emu_body body, void *closure,
                   const hl_emu_closure_ops *ops);
/* Dynamic shared memory of the running block (the launch's shmem bytes). */
void *hl_emu_dynamic_shared(void);

template <class F> static void hl_emu_call(void *f) { (*(F *)f)(); }
template <class F> static void *hl_emu_clone(const void *f) { return new F(*(const F *)f); }
template <class F> static void hl_emu_destroy(void *f) { delete (F *)f; }
template <class F> static const hl_emu_closure_ops *hl_emu_ops_of(const F &) {
    static const hl_emu_closure_ops ops = {hl_emu_clone<F>, hl_emu_destroy<F>};
    return &ops;
}

/* The arguments are evaluated at the launch and kept by value, as a kernel launch takes
   them: a captured launch replays with the values of its capture, never with what the
   launching code holds (or has freed) later. */
#define HL_EMU_LAUNCH(coop, kernel, grid, block, shmem, stream, ...)                         \
    do {                                                                                     \
        auto hl_args_ = std::make_tuple(__VA_ARGS__);                                        \
        auto hl_body_ = [=]() { std::apply([=](const auto &...a) { kernel(a...); }, hl_args_); }; \
        hl_emu_launch(dim3(grid), dim3(block), (shmem), (stream), (coop), #kernel,           \
                      hl_emu_call<decltype(hl_body_)>, &hl_body_, hl_emu_ops_of(hl_body_));  \
    } while (0)
#define HL_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    HL_EMU_LAUNCH(false, kernel, grid, block, shmem, stream, __VA_ARGS__)
#define HL_LAUNCH_COOP(kernel, grid, block, shmem, stream, ...) \
    HL_EMU_LAUNCH(true, kernel, grid, block, shmem, stream, __VA_ARGS__)
#define HL_DYNAMIC_SHARED(T, name) T *name = (T *)hl_emu_dynamic_shared()

/* ---- cuBLAS (served by OpenBLAS) ---- */

typedef struct hl_emu_cublas *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1,
               CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_EXECUTION_FAILED = 13 }
    cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const double *alpha, const double *A, int lda,
                           const double *B, int ldb, const double *beta, double *C, int ldc);

/* cublasGemmEx, for half operands: float16/bfloat16 A and B, C in their type or float32,
   computed in float32 (CUBLAS_COMPUTE_32F; alpha and beta are floats), as tensor cores do. */
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType atype,
                            int lda, const void *B, cudaDataType btype, int ldb,
                            const void *beta, void *C, cudaDataType ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);

/* The strided-batched forms: product i reads A + i strideA, B + i strideB and writes
   C + i strideC (elements), one call for batchCount products (served one product at a time). */
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batchCount);
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const double *alpha, const double *A, int lda,
                                         long long strideA, const double *B, int ldb,
                                         long long strideB, const double *beta, double *C,
                                         int ldc, long long strideC, int batchCount);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo);

/* ---- hooks for tests (exported from the emulated library only) ---- */

extern "C" __attribute__((visibility("default"))) void hl_cuda_emu_fail_next_launch(int code);
extern "C" __attribute__((visibility("default"))) void hl_cuda_emu_fail_launch_after(int skip,
                                                                                   int code);
extern "C" __attribute__((visibility("default"))) long long hl_cuda_emu_launch_count(void);
/* cuBLAS calls run so far (a strided-batched call is one, as on a GPU it is one launch). */
extern "C" __attribute__((visibility("default"))) long long hl_cuda_emu_gemm_count(void);
/* Graphs launched so far, and nodes those launches ran. */
extern "C" __attribute__((visibility("default"))) long long hl_cuda_emu_graph_launches(void);
/* The next stream capture ends invalidated (as after an API call CUDA refuses in a capture). */
extern "C" __attribute__((visibility("default"))) void hl_cuda_emu_spoil_next_capture(void);

#endif /* HL_CUDA_EMU_H */
