/*
 * hl_cuda.cuh - what every CUDA kernel file of libhlcuda shares: the CUDA headers (or the
 * host emulation's, emu/hl_cuda_emu.h, when g++ builds the emulated library), the launch
 * macros, libcore's services, the backend's per-device state, and the strided-index helpers
 * the kernels use.
 *
 * A kernel file defines `extern "C" hl_status hl_cuda_<family>(const hl_call *c)` for the
 * families it implements (ops.h names them); backend.cu fills the kernel table from whatever
 * is defined, and the registry answers "<op> is not implemented on cuda" for the rest.
 */
#ifndef HL_CUDA_CUH
#define HL_CUDA_CUH

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <cuda_runtime.h>
#define HL_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define HL_LAUNCH_COOP HL_LAUNCH
#define HL_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#else
#include "emu/hl_cuda_emu.h"
#endif

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "../src/plugin.h"

/* ---- arithmetic rounded as the CPU's ----
 * nvcc contracts a * b + c into one fused multiply-add by default (one rounding instead of
 * two), so a kernel that promises the CPU's bits (the optimiser updates, the fused epilogues,
 * the random numbers' scaling) adds and multiplies through these, which nvcc never contracts.
 * The emulation's g++ build targets baseline x86-64, which has no FMA to contract into. The
 * first real-GPU run found the one kernel that had missed this (random.cu's scale: float64
 * uniform draws a last bit off the CPU's). */
#ifdef __CUDACC__
__device__ static inline float hl_rn_add(float a, float b) { return __fadd_rn(a, b); }
__device__ static inline double hl_rn_add(double a, double b) { return __dadd_rn(a, b); }
__device__ static inline float hl_rn_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ static inline double hl_rn_mul(double a, double b) { return __dmul_rn(a, b); }
#else
__device__ static inline float hl_rn_add(float a, float b) { return a + b; }
__device__ static inline double hl_rn_add(double a, double b) { return a + b; }
__device__ static inline float hl_rn_mul(float a, float b) { return a * b; }
__device__ static inline double hl_rn_mul(double a, double b) { return a * b; }
#endif

/* ---- libcore's services (set once by the plugin entry, backend.cu) ---- */

extern const hl_plugin_host *hl_cuda_host;
#define HL_FAIL(code, ...) hl_cuda_host->fail((code), __VA_ARGS__)
#define HL_DESC(t) hl_cuda_host->desc(t)
#define HL_OPNAME(op) hl_cuda_host->op_name(op)

/* ---- the backend's state per device ---- */

struct hl_cuda_device {
    cudaStream_t stream;     /* the one compute stream: every kernel and copy goes here */
    cublasHandle_t blas;
    int *error_flag;         /* device int a kernel sets on a bad index (checked after it) */
    void *scratch;           /* hl_cuda_scratch's buffer */
    size_t scratch_bytes;
    pthread_mutex_t scratch_mutex;
    pthread_mutex_t blas_mutex;  /* a cuBLAS handle must not be used by two threads at once */
};
/* Makes device index current on this thread and returns its state (created on first use). */
hl_cuda_device *hl_cuda_dev(int index);
/* A cuBLAS handle on stream s with a workspace of HL_CUBLAS_WORKSPACE bytes of its own.
   Every handle of the backend (each device's, each capturing thread's) is made here, because
   cuBLAS chooses a product's algorithm partly by the workspace it may use: two handles with
   different workspaces (cuBLAS's own default is larger on Hopper than the 4 MiB a capture
   handle once had) gave the same product in different bits on an H100, so a captured plan
   no longer equalled its uncaptured replay or eager mode. With a workspace set, cuBLAS also
   never allocates one itself, which a capture would refuse. False when no handle was made. */
bool hl_cuda_blas_create(cublasHandle_t *h, cudaStream_t s);
enum { HL_CUBLAS_WORKSPACE = 32 << 20 };
/* The device of the call's first output (or first input). */
int hl_cuda_call_device(const hl_call *c);
/* Fails naming the op after a launch that did not start. */
hl_status hl_cuda_check_launch(const char *op);
/* Kernels that validate indices report the first bad flat position p by atomicMax(flag,
   HL_FLAG_BASE - p) (so the largest value is the first position); 0 means none. */
#define HL_FLAG_BASE 0x7fffffff
/* Waits for the device, reads its error flag and clears it: *pos = the first bad position, or
   -1 when every index was good. Fails only when the device itself reports an error. */
hl_status hl_cuda_take_flag(hl_cuda_device *d, const char *op, int64_t *pos);

/* C = alpha A B + beta C for row-major operands: element (i, j) of a matrix at
   p + (i*s0 + j*s1) elements, each a plain matrix or a transposed view (cpu/blas_layout.h),
   through cuBLAS (linalg.cu). */
struct hl_cuda_mat { char *p; int64_t s0, s1; };
hl_status hl_cuda_gemm(hl_cuda_device *d, hl_dtype dt, int64_t M, int64_t N, int64_t K,
                       double alpha, hl_cuda_mat A, hl_cuda_mat B, double beta, hl_cuda_mat C,
                       const char *op);
/* The same with C in dtype ct: float16/bfloat16 A and B may write a float32 C (a sum kept in
   float32 across calls, conv's weight gradient). */
hl_status hl_cuda_gemm_mixed(hl_cuda_device *d, hl_dtype dt, hl_dtype ct, int64_t M, int64_t N,
                             int64_t K, double alpha, hl_cuda_mat A, hl_cuda_mat B, double beta,
                             hl_cuda_mat C, const char *op);
/* batch products at once (one cuBLAS call: cublas*StridedBatched): product b reads A + b sa,
   B + b sb and writes C + b sc (strides in elements), C in dtype ct as above. */
hl_status hl_cuda_gemm_strided(hl_cuda_device *d, hl_dtype dt, hl_dtype ct, int64_t M,
                               int64_t N, int64_t K, double alpha, hl_cuda_mat A, int64_t sa,
                               hl_cuda_mat B, int64_t sb, double beta, hl_cuda_mat C,
                               int64_t sc, int64_t batch, const char *op);
/* A device buffer of at least nbytes for one kernel family's intermediate (im2col columns),
   reused across calls; the caller holds the device's scratch lock (hl_cuda_scratch_lock)
   while it enqueues the work that uses it. Kernels on the one stream run in order, so the
   next user cannot overwrite it early. Inside a plan it is the call's block of the plan's
   arena (fixed, so a captured graph may keep it). NULL when the device is out of memory. */
void *hl_cuda_scratch(hl_cuda_device *d, size_t nbytes);
void hl_cuda_scratch_lock(hl_cuda_device *d);
void hl_cuda_scratch_unlock(hl_cuda_device *d);

/* ---- graph capture (graph.cu) and host copies (pinned.cu) ---- */

/* The device as this thread's kernels see it while it captures device index (its capture
   stream and cuBLAS handle), else NULL: hl_cuda_dev answers it. */
hl_cuda_device *hl_cuda_capture_view(int index);
bool hl_cuda_capturing(void);
/* Notes that the kernel running now cannot be captured (fmt has one %s, given op): a plan
   keeps the call out of its graphs; during a capture, the capture is discarded. */
void hl_cuda_uncapturable(const char *fmt, const char *op);
/* While capturing: a device address holding *src at every launch of the graph (a value the
   plan changes between replays, such as a Philox key); NULL when not capturing (the kernel
   takes *src by value) or when no word is left (the capture is then discarded). */
const uint64_t *hl_cuda_capture_word(const uint64_t *src);
void hl_cuda_fill_capture(hl_backend *be);
/* n bytes between the host and device memory on d's stream, through pinned buffers. */
cudaError_t hl_cuda_copy_host(hl_cuda_device *d, void *dst, const void *src, size_t n,
                              bool to_device);

/* ---- sizes and pointers (libcore's own inline helpers call into libcore: not here) ---- */

static inline size_t hl_cuda_dtype_size(hl_dtype d) {
    static const unsigned char sizes[HL_NUM_DTYPES] = {4, 8, 4, 8, 1, 1, 2, 2};
    return (unsigned)d < HL_NUM_DTYPES ? sizes[d] : 0;
}
static inline char *hl_cuda_ptr(const hl_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)hl_cuda_dtype_size(t->dtype);
}
static inline int64_t hl_cuda_numel(const hl_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}
static inline bool hl_cuda_contiguous(const hl_tensor *t) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

/* ---- launch geometry: grid-stride loops over n elements ---- */

enum { HL_CUDA_THREADS = 256 };
static inline unsigned hl_cuda_blocks(int64_t n) {
#ifdef __CUDACC__
    int64_t cap = 65535;
#else
    int64_t cap = 4;  /* emulation: fewer, longer threads (grid-stride loops cover the rest) */
#endif
    int64_t b = (n + HL_CUDA_THREADS - 1) / HL_CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}
#define HL_GRID_STRIDE(i, n)                                                                 \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
         i += (int64_t)blockDim.x * gridDim.x)

/* The sum of every thread's v over the block, returned to every thread (blockDim.x a multiple
   of 32, at most 1024): warp shuffles, then one partial per warp through shared memory. Every
   thread of the block must call it (it holds barriers): launch with HL_LAUNCH_COOP. */
__device__ static inline double hl_cuda_block_sum(double v) {
    __shared__ double partial[32];
    __shared__ double total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int d = 16; d; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int nwarps = (blockDim.x + 31) >> 5;
        v = lane < nwarps ? partial[lane] : 0.0;
        for (int d = 16; d; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
        if (lane == 0) total = v;
    }
    __syncthreads();
    double sum = total;
    __syncthreads();  /* partial and total are reused by the next call */
    return sum;
}

/* Warp-per-row kernels: lane, warp and warp count of a grid-stride loop over rows (every lane
   of a warp takes the same rows, so the warp's collectives below see all of its lanes). */
#define HL_WARP_ROWS(row, rows)                                                              \
    for (int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < (rows);  \
         row += ((int64_t)blockDim.x * gridDim.x) >> 5)
/* Blocks for a warp per row (HL_CUDA_THREADS / 32 rows a block). */
static inline unsigned hl_cuda_warp_blocks(int64_t rows) { return hl_cuda_blocks(rows * 32); }

/* The sum of every lane's v over the warp, on every lane: a butterfly of shuffles, in which
   lanes i and i^d add the same two partial sums (a + b == b + a), so every lane holds the
   same bits and a shape always sums in the same order. Launch with HL_LAUNCH_COOP. */
__device__ static inline double hl_cuda_warp_sum(double v) {
    for (int d = 16; d; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}
/* The largest lane's m, a NaN winning (the CPU's `v > m || v != v`). */
template <class A>
__device__ static inline A hl_cuda_warp_max(A m) {
    for (int d = 16; d; d >>= 1) {
        A o = __shfl_xor_sync(0xffffffffu, m, d);
        m = o > m || o != o ? o : m;
    }
    return m;
}

/* ---- strided indexing: up to 4 operands over one iteration shape ---- */

enum { HL_CUDA_MAX_OPERANDS = 4 };
struct hl_cuda_index {
    int ndim, nops;
    bool contiguous;  /* every operand contiguous in the iteration shape: offset == i */
    int64_t shape[HL_MAX_DIMS];
    int64_t strides[HL_CUDA_MAX_OPERANDS][HL_MAX_DIMS];  /* elements; 0 where broadcast */
};

/* The iteration over out's shape, each operand's strides broadcast to it (numpy rules). */
static inline hl_cuda_index hl_cuda_index_of(int nops, const hl_tensor *const *ops) {
    hl_cuda_index ix;
    memset(&ix, 0, sizeof ix);
    const hl_tensor *out = ops[0];
    ix.ndim = out->ndim;
    ix.nops = nops;
    for (int d = 0; d < out->ndim; d++) ix.shape[d] = out->shape[d];
    ix.contiguous = true;
    for (int k = 0; k < nops; k++) {
        const hl_tensor *t = ops[k];
        int lead = out->ndim - t->ndim;
        for (int d = 0; d < out->ndim; d++) {
            int td = d - lead;
            ix.strides[k][d] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
        }
        bool same_shape = t->ndim == out->ndim;
        for (int d = 0; same_shape && d < t->ndim; d++) same_shape = t->shape[d] == out->shape[d];
        if (!same_shape || !hl_cuda_contiguous(t)) ix.contiguous = false;
    }
    return ix;
}

/* Element offsets of every operand at linear position i of the iteration. */
__device__ static inline void hl_cuda_offsets(const hl_cuda_index &ix, int64_t i, int64_t *off) {
    for (int k = 0; k < ix.nops; k++) off[k] = ix.contiguous ? i : 0;
    if (ix.contiguous) return;
    for (int d = ix.ndim - 1; d >= 0; d--) {
        int64_t n = ix.shape[d], q = i / n, r = i - q * n;
        i = q;
        for (int k = 0; k < ix.nops; k++) off[k] += r * ix.strides[k][d];
    }
}

/* ---- half types (bit-level, so host, device and emulation agree) ---- */

__device__ __host__ static inline float hl_cuda_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) bits = sign;
    else {  /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
__device__ __host__ static inline uint16_t hl_cuda_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds to inf */
    if (ax < 0x38800000u) {  /* subnormal or zero in half: round the shifted mantissa */
        if (ax < 0x33000000u) return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e;  /* value = m 2^(e-150) = q 2^-24: q = m >> (126 - e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((ax >> 13) - (112u << 10)), rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;
    return (uint16_t)(sign | q);
}
__device__ __host__ static inline float hl_cuda_bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
__device__ __host__ static inline uint16_t hl_cuda_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif /* HL_CUDA_CUH */
