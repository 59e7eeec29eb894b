/* error.c - the thread-local last-error message and the helpers that format it. */
#include <stdarg.h>
#include <stdio.h>

#include "core.h"

static _Thread_local char last_message[1024];
static _Thread_local hl_status last_status;

hl_status hl_fail(hl_status code, const char *fmt, ...) {
    /* Format into a scratch buffer first: callers add context to an earlier failure with
       hl_fail(st, "%s: %s", op, hl_last_error()), and vsnprintf must not read the buffer it
       writes. */
    char msg[sizeof last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_message, msg, sizeof msg);
    last_status = code;
    return code;
}

const char *hl_last_error(void) { return last_message; }
hl_status hl_last_status(void) { return last_status; }

const char *hl_status_name(hl_status s) {
    static const char *names[] = {"ok",    "shape error",       "dtype error",
                                  "device error", "index error", "value error",
                                  "unsupported", "out of memory", "not viewable",
                                  "internal error"};
    if (s < 0 || s >= (int)(sizeof names / sizeof names[0])) return "unknown status";
    return names[s];
}

/* A ring of buffers lets one message quote several shapes. */
enum { RING = 8, RING_LEN = 160 };
static _Thread_local char ring[RING][RING_LEN];
static _Thread_local int ring_next;

static char *ring_buffer(void) {
    char *b = ring[ring_next];
    ring_next = (ring_next + 1) % RING;
    return b;
}

static int format_shape(char *b, size_t cap, int ndim, const int64_t *shape) {
    int n = snprintf(b, cap, "(");
    for (int i = 0; i < ndim && n < (int)cap; i++)
        n += snprintf(b + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (ndim == 1 && n < (int)cap) n += snprintf(b + n, cap - n, ",");
    if (n < (int)cap) n += snprintf(b + n, cap - n, ")");
    return n;
}

const char *hl_shape_str(int ndim, const int64_t *shape) {
    char *b = ring_buffer();
    format_shape(b, RING_LEN, ndim, shape);
    return b;
}

const char *hl_desc(const hl_tensor *t) {
    char *b = ring_buffer();
    if (!t) {
        snprintf(b, RING_LEN, "(null tensor)");
        return b;
    }
    int n = format_shape(b, RING_LEN, t->ndim, t->shape);
    if (n < RING_LEN) snprintf(b + n, RING_LEN - n, " %s", hl_dtype_name(t->dtype));
    return b;
}

hl_status hl_norm_axis(const char *op, int64_t *axis, int ndim) {
    int64_t a = *axis;
    if (a < -ndim || a >= ndim || ndim == 0)
        return hl_fail(HL_ERR_INDEX, "%s: axis %lld is out of range for a tensor of %d dimensions",
                       op, (long long)a, ndim);
    *axis = a < 0 ? a + ndim : a;
    return HL_OK;
}
