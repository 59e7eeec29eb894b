/*
 * nccl_api.h - the few NCCL entry points hl calls, declared by hl (NCCL 2.x's ABI, as nccl.h
 * of the nvidia-nccl-cu13 wheel has them), so that building libhlcuda needs no NCCL header:
 * the real library reaches libnccl.so.2 through dlopen and these function-pointer types
 * (nccl.cu); the emulated one is served by emu/nccl.cpp (the same entry points over shared
 * host memory). Only the values hl uses are declared.
 */
#ifndef HL_NCCL_API_H
#define HL_NCCL_API_H

#include <stddef.h>

typedef struct ncclComm *ncclComm_t;
enum { HL_NCCL_UNIQUE_ID_BYTES = 128 };
typedef struct { char internal[HL_NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

typedef enum {
    ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
    ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7
} ncclResult_t;
typedef enum {
    ncclInt32 = 2, ncclInt64 = 4, ncclUint8 = 1, ncclFloat16 = 6, ncclFloat32 = 7,
    ncclFloat64 = 8, ncclBfloat16 = 9
} ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

/* The entry points, as function types (the real library's are looked up by these names). */
#define HL_NCCL_ENTRY_POINTS(X)                                                               \
    X(ncclGetVersion, ncclResult_t, (int *version))                                           \
    X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId *id))                                      \
    X(ncclCommInitRank, ncclResult_t, (ncclComm_t *comm, int nranks, ncclUniqueId id,         \
                                       int rank))                                             \
    X(ncclAllReduce, ncclResult_t, (const void *send, void *recv, size_t count,               \
                                    ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,     \
                                    cudaStream_t stream))                                     \
    X(ncclBroadcast, ncclResult_t, (const void *send, void *recv, size_t count,               \
                                    ncclDataType_t type, int root, ncclComm_t comm,           \
                                    cudaStream_t stream))                                     \
    X(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t comm, ncclResult_t *error))            \
    X(ncclCommAbort, ncclResult_t, (ncclComm_t comm))                                         \
    X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                                       \
    X(ncclGetErrorString, const char *, (ncclResult_t result))                                \
    X(ncclGetLastError, const char *, (ncclComm_t comm))

#ifndef __CUDACC__
/* The emulation's implementations (emu/nccl.cpp), named apart from a real libnccl's. */
#define HL_NCCL_EMU_DECLARE(name, ret, args) ret hl_emu_##name args;
HL_NCCL_ENTRY_POINTS(HL_NCCL_EMU_DECLARE)
#undef HL_NCCL_EMU_DECLARE
#endif

#endif /* HL_NCCL_API_H */
