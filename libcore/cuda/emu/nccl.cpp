/*
 * nccl.cpp - NCCL emulated on the host, for libhlcuda_emu: the entry points hl calls
 * (nccl_api.h), served over a shared-memory segment between the processes of one machine,
 * as the emulated runtime serves cuBLAS with OpenBLAS. It keeps what hl relies on in NCCL:
 *
 * - the unique id is the only thing the ranks exchange before joining (hl sends it over MPI):
 *   it names the segment, which every rank maps in ncclCommInitRank, and which the last rank
 *   to join unlinks (nothing is left in /dev/shm, even if a rank dies later);
 * - a collective runs in stream order: earlier work given to the stream (an upload waiting
 *   in its queue) is done before the buffer is read, as on a GPU;
 * - every rank gets bit-identical sums (contributions are added in rank order);
 * - faults: a collective whose peer has died (its process gone, or a zombie) or aborted its
 *   communicator stops with ncclRemoteError, and one aborted by ncclCommAbort from another
 *   thread of this process stops with ncclSystemError; the error is also the communicator's
 *   asynchronous error (ncclCommGetAsyncError), as NCCL reports failures found on the device.
 *
 * What differs from a GPU: a collective runs when it is enqueued, in the calling thread (as
 * every emulated kernel does), so the host waits there; float16 and bfloat16 are summed in
 * float and rounded once (NCCL's ring rounds after each hop); only one machine's processes
 * can join (NCCL's sockets and InfiniBand are not emulated).
 */
#include "hl_cuda_emu.h"

#include <atomic>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include "../nccl_api.h"

namespace {

const uint32_t MAGIC = 0x686c6e63;  /* "hlnc" */
const int MAX_RANKS = 1024;
const size_t SLOT_BYTES = 1 << 20;  /* each rank's share of the segment: a collective's chunk */
const double JOIN_TIMEOUT_S = 600;  /* ncclCommInitRank waits this long for the others */

struct emu_id {  /* what the 128 bytes of an ncclUniqueId hold here */
    uint32_t magic;
    char name[64];  /* the shared-memory segment's name */
};

struct segment {
    std::atomic<int> joined;
    std::atomic<int> aborted_by;  /* 0, or the rank + 1 that aborted the communicator */
    std::atomic<unsigned> arrived;
    std::atomic<unsigned> generation;
    int nranks;
    pid_t pids[MAX_RANKS];
};

size_t header_bytes(void) { return (sizeof(segment) + 4095) & ~(size_t)4095; }

}  // namespace

struct ncclComm {
    segment *seg;
    size_t bytes;
    int rank, nranks;
    std::atomic<bool> aborted{false};  /* ncclCommAbort from another thread */
    std::atomic<int> users{0};         /* collectives running now (abort waits for them) */
    std::atomic<int> async_error{ncclSuccess};
    std::string last_error;
    char *slot(int r) { return (char *)seg + header_bytes() + (size_t)r * SLOT_BYTES; }
};

namespace {

thread_local std::string init_error;  /* ncclGetLastError(NULL) */

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A peer's process has ended: gone, or a zombie its parent has not reaped. */
bool process_dead(pid_t pid) {
    if (pid <= 0) return false;
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close = strrchr(buf, ')');
    return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

ncclResult_t comm_fail(ncclComm_t c, ncclResult_t code, const std::string &why) {
    c->last_error = why;
    int expected = ncclSuccess;
    c->async_error.compare_exchange_strong(expected, code);
    return code;
}

/* Why this rank cannot wait any longer, or ncclSuccess. */
ncclResult_t broken(ncclComm_t c) {
    if (c->aborted.load()) return comm_fail(c, ncclSystemError, "the communicator was aborted");
    int by = c->seg->aborted_by.load();
    if (by)
        return comm_fail(c, ncclRemoteError,
                         "rank " + std::to_string(by - 1) + " aborted the communicator");
    for (int r = 0; r < c->nranks; r++)
        if (r != c->rank && process_dead(c->seg->pids[r]))
            return comm_fail(c, ncclRemoteError,
                             "rank " + std::to_string(r) + " (process " +
                                 std::to_string(c->seg->pids[r]) + ") is gone");
    return ncclSuccess;
}

/* Spins, then yields, then sleeps a little between looks; checks for failures now and then. */
struct backoff {
    long spins = 0;
    double next_check = 0;
    bool wait(ncclComm_t c, ncclResult_t *why) {
        spins++;
        if (spins < 200) return true;
        if (spins < 2000) sched_yield();
        else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, nullptr);
        }
        double t = now_s();
        if (t >= next_check) {
            next_check = t + 0.01;
            *why = broken(c);
            if (*why != ncclSuccess) return false;
        }
        return true;
    }
};

/* Every rank of the communicator reaches this point (a central barrier in the segment). */
ncclResult_t barrier(ncclComm_t c) {
    segment *s = c->seg;
    unsigned gen = s->generation.load();
    if (s->arrived.fetch_add(1) + 1 == (unsigned)c->nranks) {
        s->arrived.store(0);
        s->generation.fetch_add(1);
        return ncclSuccess;
    }
    backoff b;
    ncclResult_t why = ncclSuccess;
    while (s->generation.load() == gen)
        if (!b.wait(c, &why)) return why;
    return ncclSuccess;
}

size_t type_size(ncclDataType_t t) {
    switch (t) {
    case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclFloat32: return 4;
    case ncclInt64: case ncclFloat64: return 8;
    default: return 0;
    }
}

float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (man << 13);
    else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man) bits = sign;
    else {  /* subnormal: normalise */
        exp = 113;
        while (!(man & 0x400)) { man <<= 1; exp--; }
        bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t float_to_half(float f) {  /* round to nearest even, overflow to infinity */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return (uint16_t)(sign | 0x7e00);
    if (ax >= 0x477ff000) return (uint16_t)(sign | 0x7c00);  /* rounds past 65504 */
    if (ax < 0x38800000) {  /* a half subnormal (or zero) */
        float a;
        memcpy(&a, &ax, 4);
        return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
    }
    uint32_t r = ax - 0x38000000;  /* rebias 127 -> 15, keep 23 bits of mantissa */
    uint32_t h = r >> 13, rest = r & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

template <class T, class Acc>
void sum_slots(ncclComm_t c, size_t at, size_t n, T *out) {
    for (size_t i = 0; i < n; i++) {
        Acc acc = 0;
        for (int r = 0; r < c->nranks; r++) acc += (Acc)((T *)(c->slot(r)))[i];
        out[at + i] = (T)acc;
    }
}

template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void sum_half_slots(ncclComm_t c, size_t at, size_t n, uint16_t *out) {
    for (size_t i = 0; i < n; i++) {
        float acc = 0;
        for (int r = 0; r < c->nranks; r++) acc += widen(((uint16_t *)c->slot(r))[i]);
        out[at + i] = narrow(acc);
    }
}

void sum_chunk(ncclComm_t c, ncclDataType_t t, size_t at, size_t n, void *out) {
    switch (t) {
    case ncclFloat32: sum_slots<float, float>(c, at, n, (float *)out); break;
    case ncclFloat64: sum_slots<double, double>(c, at, n, (double *)out); break;
    case ncclInt32:  /* wraps, as NCCL's integer sums do */
        sum_slots<uint32_t, uint32_t>(c, at, n, (uint32_t *)out); break;
    case ncclInt64: sum_slots<uint64_t, uint64_t>(c, at, n, (uint64_t *)out); break;
    case ncclUint8: sum_slots<uint8_t, uint8_t>(c, at, n, (uint8_t *)out); break;
    case ncclFloat16:
        sum_half_slots<half_to_float, float_to_half>(c, at, n, (uint16_t *)out); break;
    case ncclBfloat16:
        sum_half_slots<bf16_to_float, float_to_bf16>(c, at, n, (uint16_t *)out); break;
    default: break;
    }
}

/* The start every collective shares: a usable communicator, a known type, stream order. */
ncclResult_t enter(ncclComm_t c, ncclDataType_t t, cudaStream_t stream) {
    if (!c) return ncclInvalidArgument;
    if (!type_size(t)) return comm_fail(c, ncclInvalidArgument, "unsupported data type");
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (stream && cudaStreamIsCapturing(stream, &st) == cudaSuccess &&
        st != cudaStreamCaptureStatusNone)
        return comm_fail(c, ncclInvalidUsage,
                         "the emulated NCCL cannot be captured into a CUDA graph");
    int failed = c->async_error.load();
    if (failed != ncclSuccess) return (ncclResult_t)failed;  /* a broken communicator */
    cudaStreamSynchronize(stream);  /* what was given to the stream before runs first */
    return ncclSuccess;
}

struct user {  /* a collective running: ncclCommAbort waits for it to leave */
    ncclComm_t c;
    explicit user(ncclComm_t c_) : c(c_) { c->users.fetch_add(1); }
    ~user() { c->users.fetch_sub(1); }
};

}  // namespace

ncclResult_t hl_emu_ncclGetVersion(int *version) {
    *version = 23203;  /* the behaviour hl relies on is that of NCCL 2.x */
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    emu_id e;
    memset(&e, 0, sizeof e);
    e.magic = MAGIC;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(e.name, sizeof e.name, "/hl_nccl_emu_%d_%lx_%lx", (int)getpid(), (long)ts.tv_sec,
             (long)ts.tv_nsec ^ (long)random());
    memcpy(id->internal, &e, sizeof e);
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    emu_id e;
    memcpy(&e, id.internal, sizeof e);
    if (e.magic != MAGIC || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
        init_error = "bad id, rank or number of ranks";
        return ncclInvalidArgument;
    }
    e.name[sizeof e.name - 1] = 0;
    size_t bytes = header_bytes() + (size_t)nranks * SLOT_BYTES;
    int fd = shm_open(e.name, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        init_error = std::string("shared memory ") + e.name + ": " + strerror(errno);
        if (fd >= 0) close(fd);
        return ncclSystemError;
    }
    void *map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        init_error = std::string("mmap: ") + strerror(errno);
        return ncclSystemError;
    }
    ncclComm_t c = new ncclComm();
    c->seg = (segment *)map;
    c->bytes = bytes;
    c->rank = rank;
    c->nranks = nranks;
    c->seg->nranks = nranks;
    c->seg->pids[rank] = getpid();
    /* the pids are written before the count that publishes them */
    if (c->seg->joined.fetch_add(1) + 1 == nranks) shm_unlink(e.name);
    double deadline = now_s() + JOIN_TIMEOUT_S;
    while (c->seg->joined.load() < nranks) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, nullptr);
        if (now_s() > deadline) {
            init_error = "the other ranks did not join within 600 s";
            munmap(map, bytes);
            delete c;
            return ncclSystemError;
        }
    }
    *out = c;
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclAllReduce(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, ncclRedOp_t op, ncclComm_t c,
                                  cudaStream_t stream) {
    ncclResult_t r = enter(c, type, stream);
    if (r != ncclSuccess) return r;
    if (op != ncclSum) return comm_fail(c, ncclInvalidArgument, "only ncclSum is emulated");
    user in(c);
    size_t esz = type_size(type), per = SLOT_BYTES / esz;
    for (size_t at = 0; at < count || (count == 0 && at == 0); at += per) {
        size_t n = count - at < per ? count - at : per;
        memcpy(c->slot(c->rank), (const char *)send + at * esz, n * esz);
        if ((r = barrier(c)) != ncclSuccess) return r;  /* every contribution is there */
        sum_chunk(c, type, at, n, recv);
        if ((r = barrier(c)) != ncclSuccess) return r;  /* every rank has read them */
        if (count == 0) break;
    }
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclBroadcast(const void *send, void *recv, size_t count,
                                  ncclDataType_t type, int root, ncclComm_t c,
                                  cudaStream_t stream) {
    ncclResult_t r = enter(c, type, stream);
    if (r != ncclSuccess) return r;
    if (root < 0 || root >= c->nranks) return comm_fail(c, ncclInvalidArgument, "bad root");
    user in(c);
    size_t esz = type_size(type), per = SLOT_BYTES / esz;
    for (size_t at = 0; at < count; at += per) {
        size_t n = count - at < per ? count - at : per;
        if (c->rank == root) memcpy(c->slot(root), (const char *)send + at * esz, n * esz);
        if ((r = barrier(c)) != ncclSuccess) return r;
        if (c->rank != root || recv != send)
            memcpy((char *)recv + at * esz, c->slot(root), n * esz);
        if ((r = barrier(c)) != ncclSuccess) return r;
    }
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *error) {
    *error = (ncclResult_t)c->async_error.load();
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclCommAbort(ncclComm_t c) {
    if (!c) return ncclSuccess;
    c->aborted.store(true);
    int expected = 0;  /* the peers' waits stop too: they see who aborted */
    c->seg->aborted_by.compare_exchange_strong(expected, c->rank + 1);
    while (c->users.load() > 0) sched_yield();  /* a collective of another thread leaves */
    munmap(c->seg, c->bytes);
    delete c;
    return ncclSuccess;
}

ncclResult_t hl_emu_ncclCommDestroy(ncclComm_t c) {
    if (!c) return ncclSuccess;
    munmap(c->seg, c->bytes);
    delete c;
    return ncclSuccess;
}

const char *hl_emu_ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *hl_emu_ncclGetLastError(ncclComm_t c) {
    return c ? c->last_error.c_str() : init_error.c_str();
}
