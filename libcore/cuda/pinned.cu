/*
 * pinned.cu - copies between the host and a device staged through pinned host buffers.
 * A copy from pageable memory makes the host wait for the stream (the driver stages it
 * anyway, and the caller may reuse its memory when the call returns). Through a pinned
 * buffer, an upload returns as soon as the bytes are in the buffer, the DMA queued on the
 * compute stream after the kernels before it, and a download pipelines chunks through two
 * buffers. Buffers come from a small pool, each with an event recorded after the copy that
 * reads or fills it: a buffer is handed out again only after its event, so a queued copy
 * never sees the next user's bytes.
 */
#include <stdio.h>

#include <mutex>
#include <vector>

#include "hl_cuda.cuh"

namespace {
enum : size_t {
    CHUNK = 4u << 20,          /* the largest buffer: longer copies go in chunks */
    SMALLEST = 64u << 10,      /* buffers are powers of two from here */
    KEEP = 64u << 20,          /* pooled bytes kept; more are freed when handed back */
    DOWNLOAD_MIN = 64u << 10,  /* smaller downloads wait for the stream and copy directly */
};

struct buffer {
    char *p;
    size_t bytes;
    cudaEvent_t done;
    bool pending;  /* done was recorded after a copy that used the buffer */
};

std::mutex pool_lock;
std::vector<buffer *> pool;
size_t pooled_bytes;
long long n_allocated, n_reused;

void wait(buffer *b) {
    if (b->pending) cudaEventSynchronize(b->done);
    b->pending = false;
}

/* A buffer of at least want bytes (want <= CHUNK), waited for; NULL when pinned memory is
   out (the caller copies from pageable memory instead). */
buffer *take(size_t want) {
    size_t bytes = SMALLEST;
    while (bytes < want) bytes <<= 1;
    buffer *found = NULL;
    {
        std::lock_guard<std::mutex> g(pool_lock);
        for (size_t k = 0; k < pool.size() && !found; k++)
            if (pool[k]->bytes >= bytes && pool[k]->bytes <= 4 * bytes) {
                found = pool[k];
                pool.erase(pool.begin() + (long)k);
                pooled_bytes -= found->bytes;
                n_reused++;
            }
    }
    if (found) {
        wait(found);  /* outside the lock: other threads' copies go on meanwhile */
        return found;
    }
    buffer *b = new buffer{NULL, bytes, NULL, false};
    if (cudaHostAlloc((void **)&b->p, bytes, cudaHostAllocDefault) != cudaSuccess ||
        cudaEventCreate(&b->done) != cudaSuccess) {
        cudaGetLastError();
        if (b->p) cudaFreeHost(b->p);
        delete b;
        return NULL;
    }
    std::lock_guard<std::mutex> g(pool_lock);
    n_allocated++;
    return b;
}

void give_back(buffer *b) {
    if (!b) return;
    {
        std::lock_guard<std::mutex> g(pool_lock);
        if (pooled_bytes + b->bytes <= KEEP) {
            pool.push_back(b);
            pooled_bytes += b->bytes;
            return;
        }
    }
    wait(b);
    cudaEventDestroy(b->done);
    cudaFreeHost(b->p);
    delete b;
}

cudaError_t upload(hl_cuda_device *d, char *dst, const char *src, size_t n, bool *staged) {
    buffer *bufs[2] = {take(n < CHUNK ? n : CHUNK), NULL};
    if (!bufs[0]) return cudaSuccess;  /* *staged stays false */
    *staged = true;
    if (n > CHUNK) bufs[1] = take(CHUNK);
    size_t ahead = bufs[1] ? 2 : 1;  /* one buffer fills while the other's copy runs */
    cudaError_t e = cudaSuccess;
    for (size_t off = 0, k = 0; off < n && e == cudaSuccess; off += CHUNK, k++) {
        size_t len = n - off < CHUNK ? n - off : CHUNK;
        buffer *b = bufs[k % ahead];
        wait(b);  /* the copy of its previous chunk has read it */
        memcpy(b->p, src + off, len);
        e = cudaMemcpyAsync(dst + off, b->p, len, cudaMemcpyHostToDevice, d->stream);
        if (e == cudaSuccess) e = cudaEventRecord(b->done, d->stream);
        b->pending = e == cudaSuccess;
    }
    give_back(bufs[0]);
    give_back(bufs[1]);
    return e;
}

cudaError_t download(hl_cuda_device *d, char *dst, const char *src, size_t n, bool *staged) {
    buffer *bufs[2] = {take(n < CHUNK ? n : CHUNK), NULL};
    if (!bufs[0]) return cudaSuccess;
    *staged = true;
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    if (chunks > 1) bufs[1] = take(CHUNK);
    size_t ahead = bufs[1] ? 2 : 1;  /* chunks in flight: the next is copied while one is read */
    cudaError_t e = cudaSuccess;
    auto enqueue = [&](size_t k) {
        buffer *b = bufs[k % ahead];
        size_t off = k * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(b->p, src + off, len, cudaMemcpyDeviceToHost, d->stream);
        if (e == cudaSuccess) e = cudaEventRecord(b->done, d->stream);
        b->pending = e == cudaSuccess;
    };
    for (size_t k = 0; k < ahead && k < chunks; k++) enqueue(k);
    for (size_t k = 0; k < chunks && e == cudaSuccess; k++) {
        buffer *b = bufs[k % ahead];
        wait(b);  /* chunk k is in the buffer */
        size_t off = k * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
        memcpy(dst + off, b->p, len);
        if (k + ahead < chunks) enqueue(k + ahead);
    }
    if (e == cudaSuccess) e = cudaStreamSynchronize(d->stream);  /* errors of earlier work */
    give_back(bufs[0]);
    give_back(bufs[1]);
    return e;
}
}  // namespace

cudaError_t hl_cuda_copy_host(hl_cuda_device *d, void *dst, const void *src, size_t n,
                              bool to_device) {
    bool staged = false;
    cudaError_t e = n == 0 ? cudaSuccess
                    : to_device ? upload(d, (char *)dst, (const char *)src, n, &staged)
                    : n >= DOWNLOAD_MIN ? download(d, (char *)dst, (const char *)src, n, &staged)
                                        : cudaSuccess;
    if (staged || e != cudaSuccess) return e;
    /* pageable: the host waits, so the caller may reuse or read its memory at once */
    e = cudaMemcpyAsync(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                        d->stream);
    return e == cudaSuccess ? cudaStreamSynchronize(d->stream) : e;
}

/* Test hook (exported): pinned buffers allocated and reused so far, and bytes pooled now. */
extern "C" __attribute__((visibility("default"))) void hl_cuda_pinned_stats(long long *out) {
    std::lock_guard<std::mutex> g(pool_lock);
    out[0] = n_allocated;
    out[1] = n_reused;
    out[2] = (long long)pooled_bytes;
}
