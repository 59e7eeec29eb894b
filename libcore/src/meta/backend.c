/*
 * meta/backend.c - the meta backend: tensors with shapes, dtypes and strides and no memory.
 *
 * Entry points run unchanged on meta tensors: they check every argument and compute every
 * output's shape and dtype, hl_out_prepare makes outputs on meta (a storage record without
 * bytes), and hl_submit hands the record to a kernel here that does nothing. So a whole
 * forward pass runs on shapes alone (Module.compile with placeholders, the functional API's
 * symbolic tensors) with exactly the checks and messages of a real run, and
 * hl.zeros((1 << 40,), device="meta") costs nothing.
 *
 * Meta stands in for the CPU: an op computes on meta in the dtypes the CPU computes it in.
 */
#include "../core.h"
#include "../cpu/op_dtypes.h"

static int meta_device_count(void) { return 1; }

/* Every op's kernel: there is nothing to compute. Values read from data (indices, labels)
   are checked by the kernels of real devices when they run, as in graph mode. */
static hl_status meta_kernel(const hl_call *c) {
    (void)c;
    return HL_OK;
}

#define META_ROW(NAME, name, family, ...) [HL_OP_##NAME] = meta_kernel,

const hl_backend hl_meta_backend = {
    .abi = HL_BACKEND_ABI,
    .name = "meta",
    .kind = HL_DEVICE_META,
    .device_count = meta_device_count,
    .has_memory = false,
    .host_visible = false,
    .op_dtypes = {HL_OPS(HL_CPU_DTYPES_ROW) HL_CPU_DTYPES_OVERRIDES},
    .kernels = {HL_OPS(META_ROW)},
};
