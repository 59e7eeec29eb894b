/*
 * plugin.h - how libcore loads a backend built as a shared library of its own (libhlcuda,
 * libcore/cuda/). libcore is linked into the Python extension with hidden symbols, so a
 * plugin cannot link against it: libcore dlopens the plugin, looks up HL_PLUGIN_ENTRY and
 * hands it the few libcore services its kernels need; the plugin answers with its backend
 * (then registered like the built-in ones) or with the reason it cannot serve.
 *
 * C and C++ (nvcc and g++ compile the plugin) read this header.
 */
#ifndef HL_PLUGIN_H
#define HL_PLUGIN_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { HL_PLUGIN_ABI = 3 };  /* 2: the struct sizes in hl_plugin_host; 3: plan scratch */

typedef struct hl_plugin_host {
    int abi;              /* HL_PLUGIN_ABI */
    int backend_abi;      /* HL_BACKEND_ABI */
    /* The layouts the plugin reads directly: a plugin built against another core.h (a field
       added to a struct) is refused instead of reading the wrong bytes. */
    size_t tensor_size, storage_size, call_size;
    hl_status (*fail)(hl_status code, const char *fmt, ...);
    const char *(*desc)(const hl_tensor *t);
    const char *(*op_name)(int op);
    void *(*plan_scratch)(size_t nbytes);  /* hl_plan_scratch, hl_plan_scratch_measuring */
    bool (*plan_scratch_measuring)(void);
} hl_plugin_host;

/* The plugin's entry point: its backend, or NULL with why (a sentence) filled in. */
typedef const hl_backend *(*hl_plugin_entry)(const hl_plugin_host *host, char *why,
                                               size_t why_len);
#define HL_PLUGIN_ENTRY "hl_plugin_backend"

#ifdef __cplusplus
}
#endif

#endif /* HL_PLUGIN_H */
