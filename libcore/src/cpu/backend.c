/*
 * backend.c - the CPU backend: 64-byte aligned host memory, its threads (OpenMP and
 * OpenBLAS, one count for both), which dtypes each op computes in, and the kernel table,
 * generated from the op list (ops.h): op NAME of family F runs hl_cpu_F. Every family must be
 * defined somewhere in cpu/, or the library does not link.
 */
#include <stdlib.h>
#include <sys/mman.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core.h"
#include "thread_pool.h"

#define DECLARE_FAMILY(family) hl_status hl_cpu_##family(const hl_call *c);
HL_KERNEL_FAMILIES(DECLARE_FAMILY)

/* Large blocks are 2 MiB aligned and marked for transparent huge pages (as numpy does): a scan
   of a 64 MiB tensor then takes 32 TLB entries instead of 16384, which measured 2x faster for
   bandwidth-bound kernels (sum, max) run after the machine did something else. */
enum { HUGE_MIN = 4 << 20, HUGE_PAGE = 2 << 20 };

static void *cpu_alloc(size_t nbytes, int index) {
    (void)index;
    if (nbytes >= HUGE_MIN) {
        size_t rounded = (nbytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        void *p = aligned_alloc(HUGE_PAGE, rounded);
#ifdef MADV_HUGEPAGE
        if (p) madvise(p, rounded, MADV_HUGEPAGE);  /* advice only: failure changes nothing */
#endif
        return p;
    }
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

/* Memory written once by a file read and then read a few times (weights before packing)
   gains nothing from huge pages, and on a VM a fresh huge page is slow to come by: reading
   GPT-2's 600 MB took 0.13-1.6 s into huge pages, varying with what the host had backed,
   against a steady 0.30-0.45 s into ordinary ones (2-vCPU Firecracker guest, THP on
   madvise). The advice only counts for pages not touched yet; such a block is freed, not
   cached, when released (alloc.c), so no other tensor inherits its ordinary pages. */
void hl_tensor_plain_pages(hl_tensor *t) {
    if (!t || t->offset != 0 || t->storage->device.kind != HL_DEVICE_CPU) return;
    hl_storage *s = t->storage;
    if (s->borrowed || s->arena_owner || !s->data || s->block_bytes < HUGE_MIN)
        return;  /* not a block cpu_alloc gave the advice */
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    size_t rounded = (s->block_bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    madvise(s->data, rounded, MADV_NOHUGEPAGE);  /* advice only, as in cpu_alloc */
    s->plain_pages = true;
#endif
}

static void cpu_free(void *p, int index) {
    (void)index;
    free(p);
}

static hl_status cpu_memcpy(void *dst, const void *src, size_t nbytes, int kind, int index) {
    (void)kind;
    (void)index;
    memcpy(dst, src, nbytes);
    return HL_OK;
}

static int cpu_device_count(void) { return 1; }

/* The pool's loops, OpenMP's and OpenBLAS never run at once (libcore calls no BLAS inside a
   parallel loop, and cpu/blas_threads.c runs OpenBLAS's work on the pool's threads), so they
   share one count and never oversubscribe the cores. */
extern void scipy_openblas_set_num_threads(int n);

static void cpu_set_num_threads(int n) {
    hl_pool_set_threads(n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    scipy_openblas_set_num_threads(n);
}

#include "op_dtypes.h"

#define KERNEL_ROW(NAME, name, family, ...) [HL_OP_##NAME] = hl_cpu_##family,
const hl_backend hl_cpu_backend = {
    .abi = HL_BACKEND_ABI,
    .name = "cpu",
    .kind = HL_DEVICE_CPU,
    .device_count = cpu_device_count,
    .has_memory = true,
    .host_visible = true,
    .raw_alloc = cpu_alloc,
    .raw_free = cpu_free,
    .memcpy = cpu_memcpy,
    .set_num_threads = cpu_set_num_threads,
    .op_dtypes = {HL_OPS(HL_CPU_DTYPES_ROW) HL_CPU_DTYPES_OVERRIDES},
    .kernels = {HL_OPS(KERNEL_ROW)},
};
