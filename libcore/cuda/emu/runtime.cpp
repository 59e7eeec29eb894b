/*
 * emu/runtime.cpp - the host side of the CUDA emulation (hl_cuda_emu.h says what it models):
 * the launcher with its fibers, device memory bookkeeping, streams, events and cuBLAS's gemm
 * served by OpenBLAS.
 */
#include "hl_cuda_emu.h"
#include "../hl_cuda.cuh"  /* the half/bfloat16 conversions cublasGemmEx uses */

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

thread_local hl_emu_thread *hl_emu_self;

/* ---- errors ---- */

static thread_local cudaError_t last_error = cudaSuccess;
static thread_local char launch_message[256];

static cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration:
            return launch_message[0] ? launch_message : "invalid configuration argument";
        case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorLaunchFailure:
            return launch_message[0] ? launch_message : "unspecified launch failure";
        case cudaErrorStreamCaptureUnsupported:
            return "operation not permitted when stream is capturing";
        case cudaErrorStreamCaptureInvalidated:
            return "operation failed due to a previous error during capture";
    }
    return "unknown error";
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

/* ---- devices ---- */

static int device_count(void) {
    const char *env = getenv("HL_CUDA_EMU_DEVICES");
    int n = env ? atoi(env) : 1;
    return n < 1 ? 1 : (n > 16 ? 16 : n);
}
static thread_local int current_device;

cudaError_t cudaGetDeviceCount(int *n) {
    *n = device_count();
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= device_count()) return fail(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
    *d = current_device;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }

/* ---- streams: kernels run when launched; copies through pinned memory wait in the stream's
   queue until something orders them (the next work on the stream, a synchronisation, an event
   waited for), so host code that reads or reuses a pinned buffer before synchronising sees
   what a GPU would let it see: the copy not done yet ---- */

struct hl_emu_graph {
    std::vector<std::function<void()>> nodes;
};

struct hl_emu_stream {
    int device;
    /* held while the stream's work runs: work given to one stream by several threads runs
       one piece at a time, in the order it was given, as on a GPU */
    std::recursive_mutex exec;
    std::mutex lock;
    std::vector<std::function<void()>> pending;  /* queued async copies, in order */
    hl_emu_graph *capture = nullptr;  /* the graph being recorded, while capturing */
    bool invalidated = false;
};

namespace {
std::mutex streams_lock;
std::vector<hl_emu_stream *> all_streams;
thread_local hl_emu_stream *capturing_here;  /* the stream this thread captures (ThreadLocal) */

void flush(hl_emu_stream *s) {
    if (!s) return;
    std::lock_guard<std::recursive_mutex> order(s->exec);
    std::vector<std::function<void()>> work;
    {
        std::lock_guard<std::mutex> g(s->lock);
        work.swap(s->pending);
    }
    for (auto &w : work) w();
}

void flush_all(void) {
    std::vector<hl_emu_stream *> streams;
    {
        std::lock_guard<std::mutex> g(streams_lock);
        streams = all_streams;
    }
    for (hl_emu_stream *s : streams) flush(s);
}

/* A call CUDA refuses while this thread captures (ThreadLocal mode): invalidates the capture. */
bool refused_in_capture(void) {
    if (!capturing_here) return false;
    capturing_here->invalidated = true;
    fail(cudaErrorStreamCaptureUnsupported);
    return true;
}

/* Where work given to stream s goes: true when it is recorded into s's capture (or refused
   because the capture is already invalid: *err set). */
bool recording(cudaStream_t s, std::function<void()> node, cudaError_t *err) {
    *err = cudaSuccess;
    if (!s || !s->capture) return false;
    if (s->invalidated) *err = fail(cudaErrorStreamCaptureInvalidated);
    else s->capture->nodes.push_back(std::move(node));
    return true;
}
}  // namespace

cudaError_t cudaDeviceSynchronize(void) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    flush_all();
    return cudaSuccess;
}

/* ---- memory: host blocks recorded as device memory, per device, under a limit ---- */

namespace {
struct allocation {
    size_t bytes;
    int device;
};
std::mutex memory_lock;
std::map<uintptr_t, allocation> device_blocks;  /* by start address */
size_t used[16];

size_t memory_limit(void) {
    const char *env = getenv("HL_CUDA_EMU_MEMORY_MB");
    long long mb = env ? atoll(env) : 4096;
    return (size_t)(mb < 0 ? 0 : mb) << 20;
}

/* Whether [p, p + n) lies inside one device allocation. */
bool is_device(const void *p, size_t n) {
    std::lock_guard<std::mutex> g(memory_lock);
    uintptr_t a = (uintptr_t)p;
    auto it = device_blocks.upper_bound(a);
    if (it == device_blocks.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second.bytes;
}

std::map<uintptr_t, size_t> pinned_blocks;  /* cudaMallocHost/cudaHostAlloc: start, bytes */

bool is_pinned(const void *p, size_t n) {
    std::lock_guard<std::mutex> g(memory_lock);
    uintptr_t a = (uintptr_t)p;
    auto it = pinned_blocks.upper_bound(a);
    if (it == pinned_blocks.begin()) return false;
    --it;
    return a >= it->first && a + n <= it->first + it->second;
}
}  // namespace

cudaError_t cudaMalloc(void **p, size_t n) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    size_t rounded = ((n ? n : 1) + 255) & ~(size_t)255;
    std::lock_guard<std::mutex> g(memory_lock);
    if (used[current_device] + rounded > memory_limit()) {
        *p = NULL;
        return fail(cudaErrorMemoryAllocation);
    }
    void *q = aligned_alloc(256, rounded);
    if (!q) return fail(cudaErrorMemoryAllocation);
    /* fresh device memory holds garbage on a GPU: poison it so a kernel that reads what it
       never wrote shows NaNs here too */
    memset(q, 0xff, rounded);
    device_blocks[(uintptr_t)q] = allocation{rounded, current_device};
    used[current_device] += rounded;
    *p = q;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    if (!p) return cudaSuccess;
    flush_all();  /* cudaFree synchronises the device */
    std::lock_guard<std::mutex> g(memory_lock);
    auto it = device_blocks.find((uintptr_t)p);
    if (it == device_blocks.end()) return fail(cudaErrorInvalidValue);
    used[it->second.device] -= it->second.bytes;
    /* poisoned: a graph or kernel that still reads the block (a stale pointer) reads NaNs
       until the memory is reused */
    memset(p, 0xff, it->second.bytes);
    device_blocks.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;  /* the host's memory is the device's here: every pinned block is mapped */
    size_t rounded = ((n ? n : 1) + 63) & ~(size_t)63;
    *p = aligned_alloc(64, rounded);
    if (!*p) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> g(memory_lock);
    pinned_blocks[(uintptr_t)*p] = rounded;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaHostAlloc(p, n, 0); }
cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    flush_all();  /* as cudaFree, it waits for the device */
    std::lock_guard<std::mutex> g(memory_lock);
    auto it = pinned_blocks.find((uintptr_t)p);
    if (it == pinned_blocks.end()) return fail(cudaErrorInvalidValue);
    pinned_blocks.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void **device, void *host, unsigned flags) {
    (void)flags;
    if (!is_pinned(host, 1)) return fail(cudaErrorInvalidValue);
    *device = host;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    std::lock_guard<std::mutex> g(memory_lock);
    size_t limit = memory_limit();
    *total_bytes = limit;
    *free_bytes = limit > used[current_device] ? limit - used[current_device] : 0;
    return cudaSuccess;
}

namespace {
cudaError_t copy_now(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    if (n == 0) return cudaSuccess;
    bool dst_dev = is_device(dst, n), src_dev = is_device(src, n);
    bool ok = kind == cudaMemcpyDefault ||
              (kind == cudaMemcpyHostToDevice && dst_dev && !src_dev) ||
              (kind == cudaMemcpyDeviceToHost && !dst_dev && src_dev) ||
              (kind == cudaMemcpyDeviceToDevice && dst_dev && src_dev) ||
              (kind == cudaMemcpyHostToHost && !dst_dev && !src_dev);
    if (!ok) return fail(cudaErrorInvalidValue);  /* a GPU would fault or copy garbage */
    memmove(dst, src, n);
    return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
    if (refused_in_capture()) return cudaErrorStreamCaptureUnsupported;
    return copy_now(dst, src, n, kind);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
    bool host_side = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToHost;
    const void *host = kind == cudaMemcpyHostToDevice ? src : dst;
    bool pinned = host_side && n && is_pinned(host, n);
    if (s && s->capture && host_side && !pinned) {  /* pageable memory cannot be captured */
        s->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    cudaError_t err;
    if (recording(s, [=]() { copy_now(dst, src, n, kind); }, &err)) return err;
    if (!s) return copy_now(dst, src, n, kind);
    std::lock_guard<std::recursive_mutex> order(s->exec);
    flush(s);  /* in stream order after what was queued before */
    if (!pinned) return copy_now(dst, src, n, kind);  /* pageable: synchronous */
    /* checked now (the direction, device memory), done when the stream is next ordered */
    bool dev_ok = kind == cudaMemcpyHostToDevice ? is_device(dst, n) : is_device(src, n);
    if (!dev_ok) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> g(s->lock);
    s->pending.push_back([=]() { memmove(dst, src, n); });
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    if (n && !is_device(p, n)) return fail(cudaErrorInvalidValue);
    cudaError_t err;
    if (recording(s, [=]() { memset(p, value, n); }, &err)) return err;
    if (s) s->exec.lock();
    flush(s);
    memset(p, value, n);
    if (s) s->exec.unlock();
    return cudaSuccess;
}

/* ---- streams and events ---- */

struct hl_emu_event {
    double seconds;
    cudaStream_t stream;  /* where it was recorded: waiting for it orders that stream */
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = new hl_emu_stream();
    (*s)->device = current_device;
    std::lock_guard<std::mutex> g(streams_lock);
    all_streams.push_back(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    flush(s);
    {
        std::lock_guard<std::mutex> g(streams_lock);
        for (size_t i = 0; i < all_streams.size(); i++)
            if (all_streams[i] == s) all_streams.erase(all_streams.begin() + (long)i);
    }
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (s && s->capture) {  /* waiting for a capturing stream: CUDA refuses and invalidates */
        s->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    flush(s);
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new hl_emu_event{0, nullptr};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    e->stream = s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->seconds = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    flush(e->stream);
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {  /* the work before it runs when asked about */
    flush(e->stream);
    return cudaSuccess;
}

/* ---- capture and graphs ---- */

namespace { int spoil_next_capture; }  /* test hook */

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    (void)mode;  /* hl captures in ThreadLocal mode */
    if (!s || s->capture || capturing_here) return fail(cudaErrorInvalidValue);
    flush(s);
    s->capture = new hl_emu_graph();
    s->invalidated = __atomic_exchange_n(&spoil_next_capture, 0, __ATOMIC_RELAXED) != 0;
    capturing_here = s;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
    *graph = nullptr;
    if (!s || !s->capture) return fail(cudaErrorInvalidValue);
    hl_emu_graph *g = s->capture;
    bool bad = s->invalidated;
    s->capture = nullptr;
    s->invalidated = false;
    if (capturing_here == s) capturing_here = nullptr;
    if (bad) {
        delete g;
        return fail(cudaErrorStreamCaptureInvalidated);
    }
    *graph = g;
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status) {
    *status = !s || !s->capture ? cudaStreamCaptureStatusNone
              : s->invalidated ? cudaStreamCaptureStatusInvalidated
                               : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags) {
    (void)flags;
    if (!graph) return fail(cudaErrorInvalidValue);
    *exec = new hl_emu_graph(*graph);  /* the nodes with their arguments, copied */
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    delete graph;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    delete exec;
    return cudaSuccess;
}

namespace { long long graph_launches; }

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (!exec) return fail(cudaErrorInvalidValue);
    if (s && s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    std::unique_lock<std::recursive_mutex> order;
    if (s) order = std::unique_lock<std::recursive_mutex>(s->exec);
    flush(s);
    __atomic_add_fetch(&graph_launches, 1, __ATOMIC_RELAXED);
    for (auto &node : exec->nodes) {
        node();
        /* a node that fails stops the graph; the error stays for cudaGetLastError */
        if (cudaPeekAtLastError() != cudaSuccess) return cudaPeekAtLastError();
    }
    return cudaSuccess;
}

extern "C" void hl_cuda_emu_spoil_next_capture(void) {
    __atomic_store_n(&spoil_next_capture, 1, __ATOMIC_RELAXED);
}

extern "C" long long hl_cuda_emu_graph_launches(void) {
    return __atomic_load_n(&graph_launches, __ATOMIC_RELAXED);
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    *ms = (float)((end->seconds - start->seconds) * 1e3);
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d < 0 || d >= device_count()) return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "hl CUDA emulation (host CPU)");
    p->totalGlobalMem = memory_limit();
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    return cudaSuccess;
}

/* ---- the launcher ---- */

namespace {
enum { FIBER_STACK = 64 << 10, MAX_THREADS = 1024 };
enum fiber_state { RUNNING, AT_BARRIER, AT_WARP, DONE };

struct fiber {
    ucontext_t context;
    fiber_state state;
    uint64_t slot;  /* a shuffle's deposited value */
    hl_emu_thread self;
};

/* One launcher per host thread: its fibers, their stacks (mapped once, reused by every
   launch) and the running block's dynamic shared memory. */
struct launcher {
    ucontext_t scheduler;
    fiber fibers[MAX_THREADS];
    char *stacks = nullptr;
    char *dynamic_shared = nullptr;  /* the launch's shmem bytes (grown, never shrunk) */
    size_t dynamic_bytes = 0;
    hl_emu_body body;
    void *closure;
    const char *kernel;
    bool failed;
};
thread_local launcher *current;
thread_local launcher *mine;

void fiber_main(void) {
    launcher *L = current;
    L->body(L->closure);
    L->fibers[hl_emu_self->fiber].state = DONE;
    /* returning resumes uc_link: the scheduler */
}

int failing_launches;  /* test hook: the next launch fails with this code */
int failing_skip;      /* test hook: ... after this many launches have run */
long long launches;

void launch_failed(cudaError_t code, const char *fmt, const char *kernel) {
    snprintf(launch_message, sizeof launch_message, fmt, kernel);
    last_error = code;
}

/* Runs the fibers of one block until all are done; false on a barrier that cannot complete. */
bool run_block_fibers(launcher *L, int nthreads) {
    for (;;) {
        for (int t = 0; t < nthreads; t++) {
            fiber *f = &L->fibers[t];
            if (f->state != RUNNING) continue;
            hl_emu_self = &f->self;
            swapcontext(&L->scheduler, &f->context);
        }
        int live = 0, at_barrier = 0;
        for (int t = 0; t < nthreads; t++) {
            live += L->fibers[t].state != DONE;
            at_barrier += L->fibers[t].state == AT_BARRIER;
        }
        if (!live) return true;
        bool released = false;
        /* a warp whose live lanes all wait at a warp collective goes on */
        for (int w = 0; w * 32 < nthreads; w++) {
            int lo = w * 32, hi = lo + 32 < nthreads ? lo + 32 : nthreads, waiting = 0, alive = 0;
            for (int t = lo; t < hi; t++) {
                alive += L->fibers[t].state != DONE;
                waiting += L->fibers[t].state == AT_WARP;
            }
            if (waiting && waiting == alive) {
                for (int t = lo; t < hi; t++)
                    if (L->fibers[t].state == AT_WARP) L->fibers[t].state = RUNNING;
                released = true;
            }
        }
        if (released) continue;
        if (at_barrier == live) {
            for (int t = 0; t < nthreads; t++)
                if (L->fibers[t].state == AT_BARRIER) L->fibers[t].state = RUNNING;
            continue;
        }
        return false;  /* some wait at __syncthreads, others at a warp collective: deadlock */
    }
}

void park(fiber_state why) {
    launcher *L = current;
    if (!L || hl_emu_self->fiber < 0) {
        /* a barrier in a kernel launched without fibers: fail the launch loudly */
        if (L) L->failed = true;
        launch_failed(cudaErrorLaunchFailure, "kernel %s uses a barrier or warp collective: "
                      "launch it with HL_LAUNCH_COOP", L ? L->kernel : "?");
        fprintf(stderr, "hl cuda emulation: %s\n", launch_message);
        abort();  /* cannot unwind the thread's other work safely; a programming error */
    }
    fiber *f = &L->fibers[hl_emu_self->fiber];
    f->state = why;
    hl_emu_thread *self = hl_emu_self;
    swapcontext(&f->context, &L->scheduler);
    hl_emu_self = self;
}
}  // namespace

void hl_emu_syncthreads(void) { park(AT_BARRIER); }
void hl_emu_syncwarp(void) { park(AT_WARP); }

uint64_t hl_emu_shfl(uint64_t v, int src_lane) {
    launcher *L = current;
    int me = hl_emu_self ? hl_emu_self->fiber : -1;
    if (me < 0) park(AT_WARP);  /* fails loudly */
    L->fibers[me].slot = v;
    park(AT_WARP);              /* every live lane has deposited */
    int src = (me & ~31) + src_lane;
    uint64_t out = (src_lane >= 0 && src_lane < 32 && L->fibers[src].state != DONE &&
                    src < MAX_THREADS) ? L->fibers[src].slot : v;
    park(AT_WARP);              /* every lane has read before any deposits again */
    return out;
}

void *hl_emu_dynamic_shared(void) { return current ? current->dynamic_shared : nullptr; }

namespace {
bool bad_configuration(dim3 grid, dim3 block, size_t shmem, const char *kernel) {
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    if (nthreads == 0 || nthreads > MAX_THREADS || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.y > 65535 || grid.z > 65535 || shmem > (228u << 10)) {
        launch_failed(cudaErrorInvalidConfiguration, "kernel %s: invalid launch configuration "
                      "(grid or block size out of range, or too much shared memory)", kernel);
        return true;
    }
    return false;
}

/* Runs one launch now: directly, or as a node of a graph being launched. */
void run_launch(dim3 grid, dim3 block, size_t shmem, bool coop, const char *kernel,
                hl_emu_body body, void *closure) {
    __atomic_add_fetch(&launches, 1, __ATOMIC_RELAXED);
    launch_message[0] = 0;
    int injected = 0;
    if (__atomic_load_n(&failing_launches, __ATOMIC_RELAXED) &&
        __atomic_fetch_sub(&failing_skip, 1, __ATOMIC_RELAXED) <= 0)
        injected = __atomic_exchange_n(&failing_launches, 0, __ATOMIC_RELAXED);
    if (injected) {
        launch_failed((cudaError_t)injected, "kernel %s failed (injected by "
                      "hl_cuda_emu_fail_next_launch)", kernel);
        return;
    }
    if (bad_configuration(grid, block, shmem, kernel)) return;
    unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    if (!mine) mine = new launcher();
    launcher *L = mine, *outer = current;
    hl_emu_thread *outer_self = hl_emu_self;
    current = L;
    L->body = body;
    L->closure = closure;
    L->kernel = kernel;
    L->failed = false;
    if (shmem > L->dynamic_bytes) {
        char *grown = (char *)realloc(L->dynamic_shared, shmem);
        if (!grown) {
            launch_failed(cudaErrorMemoryAllocation, "kernel %s: no memory for the emulated "
                          "shared memory", kernel);
            current = outer;
            return;
        }
        L->dynamic_shared = grown;
        L->dynamic_bytes = shmem;
    }
    if (shmem) memset(L->dynamic_shared, 0, shmem);
    if (coop && !L->stacks) {
        L->stacks = (char *)mmap(nullptr, (size_t)FIBER_STACK * MAX_THREADS,
                                 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
                                 MAP_NORESERVE, -1, 0);
        if (L->stacks == MAP_FAILED) {
            L->stacks = nullptr;
            launch_failed(cudaErrorMemoryAllocation, "kernel %s: no memory for the emulated "
                          "threads' stacks", kernel);
            current = outer;
            return;
        }
    }
    hl_emu_thread direct;
    direct.block_dim = block;
    direct.grid_dim = grid;
    direct.fiber = -1;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                dim3 b(bx, by, bz);
                if (!coop) {
                    direct.block = b;
                    hl_emu_self = &direct;
                    for (unsigned tz = 0; tz < block.z; tz++)
                        for (unsigned ty = 0; ty < block.y; ty++)
                            for (unsigned tx = 0; tx < block.x; tx++) {
                                direct.thread = dim3(tx, ty, tz);
                                body(closure);
                            }
                    continue;
                }
                int t = 0;
                for (unsigned tz = 0; tz < block.z; tz++)
                    for (unsigned ty = 0; ty < block.y; ty++)
                        for (unsigned tx = 0; tx < block.x; tx++, t++) {
                            fiber *f = &L->fibers[t];
                            f->state = RUNNING;
                            f->self = hl_emu_thread{dim3(tx, ty, tz), b, block, grid, t};
                            getcontext(&f->context);
                            f->context.uc_stack.ss_sp = L->stacks + (size_t)t * FIBER_STACK;
                            f->context.uc_stack.ss_size = FIBER_STACK;
                            f->context.uc_link = &L->scheduler;
                            makecontext(&f->context, fiber_main, 0);
                        }
                if (!run_block_fibers(L, (int)nthreads)) {
                    launch_failed(cudaErrorLaunchFailure, "kernel %s: threads of a block wait "
                                  "at different barriers (__syncthreads in divergent code)",
                                  kernel);
                    current = outer;
                    hl_emu_self = outer_self;
                    return;
                }
            }
    current = outer;
    hl_emu_self = outer_self;
}
}  // namespace

void hl_emu_launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t s, bool coop,
                   const char *kernel, hl_emu_body body, void *closure,
                   const hl_emu_closure_ops *ops) {
    if (s && s->capture) {
        /* a configuration CUDA refuses fails at the capture, as at a launch */
        if (bad_configuration(grid, block, shmem, kernel)) {
            s->invalidated = true;
            return;
        }
        std::shared_ptr<void> kept(ops->clone(closure), ops->destroy);
        cudaError_t err;
        recording(s, [=]() { run_launch(grid, block, shmem, coop, kernel, body, kept.get()); },
                  &err);
        return;
    }
    if (s) s->exec.lock();
    flush(s);
    run_launch(grid, block, shmem, coop, kernel, body, closure);
    if (s) s->exec.unlock();
}

extern "C" void hl_cuda_emu_fail_next_launch(int code) {
    __atomic_store_n(&failing_skip, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&failing_launches, code ? code : (int)cudaErrorLaunchFailure,
                     __ATOMIC_RELAXED);
}
/* The launch after the next `skip` ones fails (a kernel in the middle of an op's sequence). */
extern "C" void hl_cuda_emu_fail_launch_after(int skip, int code) {
    __atomic_store_n(&failing_skip, skip, __ATOMIC_RELAXED);
    __atomic_store_n(&failing_launches, code ? code : (int)cudaErrorLaunchFailure,
                     __ATOMIC_RELAXED);
}
extern "C" long long hl_cuda_emu_launch_count(void) {
    return __atomic_load_n(&launches, __ATOMIC_RELAXED);
}

/* ---- cuBLAS: column-major gemm through OpenBLAS ---- */

struct hl_emu_cublas { cudaStream_t stream; };

/* cuBLAS calls that ran (hl_cuda_emu_gemm_count); the products of a strided-batched call run
   nested and count as that one call. */
namespace {
long long gemm_calls;
thread_local bool gemm_nested;
void count_gemm() {
    if (!gemm_nested) __atomic_add_fetch(&gemm_calls, 1, __ATOMIC_RELAXED);
}
}  // namespace
extern "C" long long hl_cuda_emu_gemm_count(void) {
    return __atomic_load_n(&gemm_calls, __ATOMIC_RELAXED);
}

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new hl_emu_cublas{nullptr};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS reads and writes device memory only: check the operands are (part of) it, as a
   GPU would fault on a host pointer. */
static bool gemm_operands_ok(const void *A, size_t a_bytes, const void *B, size_t b_bytes,
                             const void *C, size_t c_bytes) {
    return (!a_bytes || is_device(A, a_bytes)) && (!b_bytes || is_device(B, b_bytes)) &&
           (!c_bytes || is_device(C, c_bytes));
}

static size_t span(int rows, int cols, int ld, size_t esz) {
    return rows && cols ? ((size_t)(cols - 1) * ld + rows) * esz : 0;
}

#define EMU_GEMM(NAME, T, BLAS)                                                                \
    cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,    \
                        int n, int k, const T *alpha, const T *A, int lda, const T *B, int ldb, \
                        const T *beta, T *C, int ldc) {                                        \
        if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;                                          \
        if (m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;                       \
        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;               \
        if (!gemm_operands_ok(A, span(ar, ac, lda, sizeof(T)), B, span(br, bc, ldb, sizeof(T)), \
                              C, span(m, n, ldc, sizeof(T))))                                  \
            return CUBLAS_STATUS_EXECUTION_FAILED;                                             \
        if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;                                    \
        T a_ = *alpha, b_ = *beta; /* host scalars: read at the call, as cuBLAS does */        \
        cudaError_t err_;                                                                      \
        if (recording(h->stream, [=]() { NAME(h, ta, tb, m, n, k, &a_, A, lda, B, ldb, &b_,   \
                                             C, ldc); }, &err_))                              \
            return err_ ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;              \
        std::unique_lock<std::recursive_mutex> order_;                                         \
        if (h->stream) order_ = std::unique_lock<std::recursive_mutex>(h->stream->exec);       \
        flush(h->stream);                                                                      \
        count_gemm();                                                                          \
        if (k == 0) {                                                                          \
            for (int j = 0; j < n; j++)                                                        \
                for (int i = 0; i < m; i++)                                                    \
                    C[(size_t)j * ldc + i] = *beta == 0 ? 0 : *beta * C[(size_t)j * ldc + i];  \
            return CUBLAS_STATUS_SUCCESS;                                                      \
        }                                                                                      \
        BLAS(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, \
             n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);                                     \
        return CUBLAS_STATUS_SUCCESS;                                                          \
    }
EMU_GEMM(cublasSgemm, float, scipy_cblas_sgemm)
EMU_GEMM(cublasDgemm, double, scipy_cblas_dgemm)

/* cublasGemmEx: each half operand widened to float over the span it covers, OpenBLAS's sgemm
   (so products are summed in float32, as CUBLAS_COMPUTE_32F does), C rounded back once. */
static size_t emu_type_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static float emu_widen(const void *p, cudaDataType t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == CUDA_R_16F ? hl_cuda_half_to_float(h) : hl_cuda_bf16_to_float(h);
}
static float *emu_widened(const void *p, cudaDataType t, size_t n) {
    float *w = (float *)malloc((n ? n : 1) * sizeof(float));
    if (w)
        for (size_t i = 0; i < n; i++) w[i] = emu_widen(p, t, i);
    return w;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType atype,
                            int lda, const void *B, cudaDataType btype, int ldb,
                            const void *beta, void *C, cudaDataType ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)algo;
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || compute != CUBLAS_COMPUTE_32F || atype != btype)
        return CUBLAS_STATUS_INVALID_VALUE;
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t an = span(ar, ac, lda, 1), bn = span(br, bc, ldb, 1), cn = span(m, n, ldc, 1);
    if (!gemm_operands_ok(A, an * emu_type_size(atype), B, bn * emu_type_size(btype), C,
                          cn * emu_type_size(ctype)))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    float a = *(const float *)alpha, b = *(const float *)beta; /* host scalars, read now */
    cudaError_t err;
    if (recording(h->stream, [=]() { cublasGemmEx(h, ta, tb, m, n, k, &a, A, atype, lda, B,
                                                  btype, ldb, &b, C, ctype, ldc, compute,
                                                  algo); }, &err))
        return err ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
    /* in stream order, as cublasSgemm: earlier work (an upload still in flight) runs first */
    std::unique_lock<std::recursive_mutex> order;
    if (h->stream) order = std::unique_lock<std::recursive_mutex>(h->stream->exec);
    flush(h->stream);
    count_gemm();
    float *wa = emu_widened(A, atype, an), *wb = emu_widened(B, btype, bn);
    float *wc = b == 0 ? (float *)calloc(cn, sizeof(float)) : emu_widened(C, ctype, cn);
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (!wa || !wb || !wc) {
        st = CUBLAS_STATUS_EXECUTION_FAILED;
    } else {
        if (k == 0)
            for (size_t i = 0; i < cn; i++) wc[i] *= b;
        else
            scipy_cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans,
                              tb ? CblasTrans : CblasNoTrans, m, n, k, a, wa, lda, wb, ldb, b,
                              wc, ldc);
        for (int j = 0; j < n; j++)  /* only C's own elements: the gaps between columns stay */
            for (int i = 0; i < m; i++) {
                size_t at = (size_t)j * ldc + i;
                if (ctype == CUDA_R_32F) ((float *)C)[at] = wc[at];
                else if (ctype == CUDA_R_16F) ((uint16_t *)C)[at] = hl_cuda_float_to_half(wc[at]);
                else ((uint16_t *)C)[at] = hl_cuda_float_to_bf16(wc[at]);
            }
    }
    free(wa);
    free(wb);
    free(wc);
    return st;
}

/* The strided-batched forms: recorded as one node while capturing, else one counted call
   whose products run one after another through the single-product functions. */
template <class Product>
static cublasStatus_t emu_strided(cublasHandle_t h, int batch, Product product,
                                  std::function<void()> again) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    cudaError_t err;
    if (recording(h->stream, again, &err))
        return err ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
    count_gemm();
    bool was = gemm_nested;
    gemm_nested = true;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < batch && st == CUBLAS_STATUS_SUCCESS; i++) st = product(i);
    gemm_nested = was;
    return st;
}

#define EMU_STRIDED(NAME, SINGLE, T)                                                           \
    cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,    \
                        int n, int k, const T *alpha, const T *A, int lda, long long sA,       \
                        const T *B, int ldb, long long sB, const T *beta, T *C, int ldc,       \
                        long long sC, int batch) {                                             \
        T a_ = *alpha, b_ = *beta; /* host scalars: read at the call */                        \
        return emu_strided(                                                                    \
            h, batch,                                                                          \
            [&](int i) {                                                                       \
                return SINGLE(h, ta, tb, m, n, k, &a_, A + i * sA, lda, B + i * sB, ldb, &b_,  \
                              C + i * sC, ldc);                                                \
            },                                                                                 \
            [=]() { NAME(h, ta, tb, m, n, k, &a_, A, lda, sA, B, ldb, sB, &b_, C, ldc, sC,     \
                         batch); });                                                           \
    }
EMU_STRIDED(cublasSgemmStridedBatched, cublasSgemm, float)
EMU_STRIDED(cublasDgemmStridedBatched, cublasDgemm, double)

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType atype,
                                          int lda, long long sA, const void *B,
                                          cudaDataType btype, int ldb, long long sB,
                                          const void *beta, void *C, cudaDataType ctype, int ldc,
                                          long long sC, int batch, cublasComputeType_t compute,
                                          cublasGemmAlgo_t algo) {
    float a = *(const float *)alpha, b = *(const float *)beta;
    size_t ea = emu_type_size(atype), eb = emu_type_size(btype), ec = emu_type_size(ctype);
    return emu_strided(
        h, batch,
        [&](int i) {
            return cublasGemmEx(h, ta, tb, m, n, k, &a, (const char *)A + i * sA * ea, atype,
                                lda, (const char *)B + i * sB * eb, btype, ldb, &b,
                                (char *)C + i * sC * ec, ctype, ldc, compute, algo);
        },
        [=]() { cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &a, A, atype, lda, sA, B, btype,
                                           ldb, sB, &b, C, ctype, ldc, sC, batch, compute,
                                           algo); });
}
