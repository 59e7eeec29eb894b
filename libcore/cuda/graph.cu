/*
 * graph.cu - plans captured as CUDA Graphs (the backend's capture hooks, core.h; the plan side
 * is plan/capture.c). A capture runs on a stream of the capturing thread's own, so that other
 * threads' work on the device's compute stream never lands in the graph: while this thread
 * captures device i, hl_cuda_dev(i) answers a view of the device whose stream and cuBLAS
 * handle are that stream's (hl_cuda_capture_view). The graph is launched on the compute stream.
 *
 * What a graph cannot hold, because it replays fixed arguments without the host:
 * - a kernel that waits for the device or reads it on the host (index and label checks read
 *   the error flag, resize uploads its weights): the kernel says so (hl_cuda_uncapturable),
 *   the plan keeps that call out of its graphs;
 * - the device's shared work buffer, which a later call may reallocate: captured kernels take
 *   their work buffers from the plan's arena (hl_plan_scratch);
 * - a value the plan changes between replays: the Philox key of a random call (advanced per
 *   replay) is read by the captured kernel from a mapped pinned word the launch refreshes
 *   (hl_cuda_capture_word).
 */
#include <stdio.h>

#include <vector>

#include "hl_cuda.cuh"

namespace {
enum { MAX_DEVICES = 16, MAX_WORDS = 512 };

struct seed_word {
    const uint64_t *src;  /* the call's value on the host (the plan's record) */
    uint64_t *pinned;     /* the mapped pinned word the kernel reads */
};

/* A thread's capture state: its capture streams and cuBLAS handles (one per device, made on
   first use and kept), the device view its kernels see while capturing, and the words the
   graph being captured reads. */
struct capture_thread {
    int index = -1;  /* the device being captured, or -1 */
    cudaStream_t streams[MAX_DEVICES] = {};
    cublasHandle_t blas[MAX_DEVICES] = {};
    hl_cuda_device view;
    bool view_mutexes = false;
    uint64_t *words = nullptr;  /* MAX_WORDS pinned words for this capture */
    int n_words = 0;
    std::vector<const uint64_t *> sources;  /* the host value each word mirrors */
    bool failed = false;        /* a kernel could not be captured: the graph is discarded */
    char why[256] = "";
    bool has_why = false;
};
thread_local capture_thread ct;
}  // namespace

struct hl_cuda_graph {
    cudaGraphExec_t exec;
    cudaEvent_t done;     /* recorded after each launch: the words may be rewritten after it */
    bool launched;
    uint64_t *words;      /* pinned, owned */
    std::vector<seed_word> feeds;
};

hl_cuda_device *hl_cuda_capture_view(int index) { return ct.index == index ? &ct.view : NULL; }

bool hl_cuda_capturing(void) { return ct.index >= 0; }

void hl_cuda_uncapturable(const char *fmt, const char *op) {
    if (ct.index >= 0) ct.failed = true;
    if (ct.has_why) return;  /* the first reason since the plan last asked */
    snprintf(ct.why, sizeof ct.why, fmt, op ? op : "?");
    ct.has_why = true;
}

static const char *cuda_uncapturable(void) {
    if (!ct.has_why) return NULL;
    ct.has_why = false;
    return ct.why;
}

const uint64_t *hl_cuda_capture_word(const uint64_t *src) {
    if (ct.index < 0) return NULL;
    if (!ct.words || ct.n_words == MAX_WORDS) {
        hl_cuda_uncapturable("%s: more random calls than one graph holds", "random");
        return NULL;
    }
    uint64_t *w = ct.words + ct.n_words++;
    *w = *src;
    ct.sources.push_back(src);
    void *dev = NULL;
    if (cudaHostGetDevicePointer(&dev, w, 0) != cudaSuccess) {
        cudaGetLastError();
        hl_cuda_uncapturable("%s: no device address for a mapped pinned word", "random");
        return NULL;
    }
    return (const uint64_t *)dev;
}

static hl_status cuda_capture_begin(int index) {
    if (ct.index >= 0)
        return HL_FAIL(HL_ERR_VALUE, "capture_begin: this thread is already capturing cuda:%d",
                       ct.index);
    hl_cuda_device *d = hl_cuda_dev(index);
    if (!ct.streams[index]) {
        /* a handle of its own, kept for the thread's life, with the workspace every handle
           has (so cuBLAS never allocates inside a capture, and chooses as eagerly) */
        if (cudaStreamCreateWithFlags(&ct.streams[index], cudaStreamNonBlocking) != cudaSuccess ||
            !hl_cuda_blas_create(&ct.blas[index], ct.streams[index])) {
            cudaGetLastError();
            return HL_FAIL(HL_ERR_DEVICE, "capture_begin: no capture stream on cuda:%d", index);
        }
    }
    if (!ct.view_mutexes) {
        pthread_mutex_init(&ct.view.scratch_mutex, NULL);
        pthread_mutex_init(&ct.view.blas_mutex, NULL);
        ct.view_mutexes = true;
    }
    ct.view.stream = ct.streams[index];
    ct.view.blas = ct.blas[index];
    ct.view.error_flag = d->error_flag;
    ct.view.scratch = NULL;  /* a captured kernel's work buffer comes from the plan's arena */
    ct.view.scratch_bytes = 0;
    /* allocated before the capture: cudaHostAlloc is no stream work */
    if (cudaHostAlloc((void **)&ct.words, sizeof(uint64_t) * MAX_WORDS, cudaHostAllocMapped) !=
        cudaSuccess) {
        cudaGetLastError();
        ct.words = NULL;
    }
    ct.n_words = 0;
    ct.sources.clear();
    ct.failed = false;
    if (cudaStreamBeginCapture(ct.streams[index], cudaStreamCaptureModeThreadLocal) !=
        cudaSuccess) {
        cudaError_t e = cudaGetLastError();
        if (ct.words) cudaFreeHost(ct.words);
        ct.words = NULL;
        return HL_FAIL(HL_ERR_DEVICE, "capture_begin: cuda:%d refused to capture: %s", index,
                       cudaGetErrorString(e));
    }
    ct.index = index;
    return HL_OK;
}

static hl_status cuda_capture_end(int index, void **graph, char *why, size_t why_len) {
    *graph = NULL;
    if (ct.index != index)
        return HL_FAIL(HL_ERR_VALUE, "capture_end: this thread is not capturing cuda:%d", index);
    ct.index = -1;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(ct.streams[index], &g);
    cudaGraphExec_t exec = NULL;
    if (e == cudaSuccess && !ct.failed) e = cudaGraphInstantiate(&exec, g, 0);
    if (g) cudaGraphDestroy(g);
    if (e != cudaSuccess || ct.failed) {
        if (e != cudaSuccess) cudaGetLastError();
        snprintf(why, why_len, "%s", ct.failed && ct.has_why ? ct.why : cudaGetErrorString(e));
        if (exec) cudaGraphExecDestroy(exec);
        if (ct.words) cudaFreeHost(ct.words);
        ct.words = NULL;
        return HL_OK;
    }
    hl_cuda_graph *G = new hl_cuda_graph();
    G->exec = exec;
    cudaEventCreate(&G->done);
    G->launched = false;
    G->words = ct.words;
    ct.words = NULL;
    for (int k = 0; k < ct.n_words; k++)
        G->feeds.push_back(seed_word{ct.sources[(size_t)k], G->words + k});
    *graph = G;
    return HL_OK;
}

static hl_status cuda_graph_launch(void *graph, int index) {
    hl_cuda_graph *G = (hl_cuda_graph *)graph;
    hl_cuda_device *d = hl_cuda_dev(index);
    if (!G->feeds.empty()) {
        /* the previous launch may still read the words: wait for it before rewriting them */
        if (G->launched) cudaEventSynchronize(G->done);
        for (auto &f : G->feeds) *f.pinned = *f.src;
    }
    cudaError_t e = cudaGraphLaunch(G->exec, d->stream);
    if (e == cudaSuccess && !G->feeds.empty()) e = cudaEventRecord(G->done, d->stream);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        cudaGetLastError();
        return HL_FAIL(HL_ERR_DEVICE, "a captured plan failed on cuda:%d: %s", index,
                       cudaGetErrorString(e));
    }
    G->launched = true;
    return HL_OK;
}

static void cuda_graph_free(void *graph, int index) {
    hl_cuda_graph *G = (hl_cuda_graph *)graph;
    if (!G) return;
    cudaStreamSynchronize(hl_cuda_dev(index)->stream);
    cudaGraphExecDestroy(G->exec);
    cudaEventDestroy(G->done);
    if (G->words) cudaFreeHost(G->words);
    delete G;
}

void hl_cuda_fill_capture(hl_backend *be) {
    be->capture_begin = cuda_capture_begin;
    be->capture_end = cuda_capture_end;
    be->graph_launch = cuda_graph_launch;
    be->graph_free = cuda_graph_free;
    be->uncapturable = cuda_uncapturable;
}
