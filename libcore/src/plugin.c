/*
 * plugin.c - loading a backend built as a library of its own (plugin.h): dlopen, the entry
 * point, registration, and the reason a device kind has no backend, for messages.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "plugin.h"

static pthread_mutex_t reason_lock = PTHREAD_MUTEX_INITIALIZER;
static char reasons[HL_DEVICE_KINDS][512];

void hl_backend_set_unavailable_reason(int kind, const char *why) {
    if (kind < 0 || kind >= HL_DEVICE_KINDS) return;
    pthread_mutex_lock(&reason_lock);
    snprintf(reasons[kind], sizeof reasons[kind], "%s", why ? why : "");
    pthread_mutex_unlock(&reason_lock);
}

const char *hl_backend_unavailable_reason(int kind) {
    static _Thread_local char copy[512];
    copy[0] = 0;
    if (kind < 0 || kind >= HL_DEVICE_KINDS) return copy;
    pthread_mutex_lock(&reason_lock);
    snprintf(copy, sizeof copy, "%s", reasons[kind]);
    pthread_mutex_unlock(&reason_lock);
    return copy;
}

static const hl_plugin_host host = {
    .abi = HL_PLUGIN_ABI,
    .backend_abi = HL_BACKEND_ABI,
    .tensor_size = sizeof(hl_tensor),
    .storage_size = sizeof(hl_storage),
    .call_size = sizeof(hl_call),
    .fail = hl_fail,
    .desc = hl_desc,
    .op_name = hl_op_str,
    .plan_scratch = hl_plan_scratch,
    .plan_scratch_measuring = hl_plan_scratch_measuring,
};

hl_status hl_backend_load(const char *path) {
    if (!path) return hl_fail(HL_ERR_VALUE, "backend_load: path is NULL");
    char why[512] = "";
    /* RTLD_LOCAL: the plugin's symbols (and the CUDA runtime's) stay out of everyone's way */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, sizeof why, "cannot load %s: %s", path, dlerror());
        hl_backend_set_unavailable_reason(HL_DEVICE_CUDA, why);
        return hl_fail(HL_ERR_DEVICE, "%s", why);
    }
    hl_plugin_entry entry = (hl_plugin_entry)dlsym(lib, HL_PLUGIN_ENTRY);
    if (!entry) {
        snprintf(why, sizeof why, "%s is not an hl backend (no %s)", path, HL_PLUGIN_ENTRY);
        hl_backend_set_unavailable_reason(HL_DEVICE_CUDA, why);
        dlclose(lib);
        return hl_fail(HL_ERR_DEVICE, "%s", why);
    }
    const hl_backend *be = entry(&host, why, sizeof why);
    if (!be) {
        hl_backend_set_unavailable_reason(HL_DEVICE_CUDA, why);
        /* kept loaded: a driver library, once initialised, may not like being unloaded */
        return hl_fail(HL_ERR_DEVICE, "%s", why);
    }
    hl_status st = hl_backend_register(be);
    if (st) return st;
    hl_backend_set_unavailable_reason(be->kind, "");
    return HL_OK;
}
