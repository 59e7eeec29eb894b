/*
 * loops.h - the one strided, broadcasting, parallel loop (on libcore's thread pool) every
 * element-wise CPU kernel runs on. A loop covers an output and up to three inputs of the
 * output's shape (inputs are broadcast first: their strides are zero along broadcast axes).
 * Axes that can merge are merged, so a contiguous tensor becomes one long row; the inner
 * function then sees one row at a time with each operand's byte stride, and can take a fast
 * path when every stride is its element size.
 */
#ifndef HL_CPU_LOOPS_H
#define HL_CPU_LOOPS_H

#include "../core.h"

/* Element-wise kernels use up to four operands; a fused pass (fused.c) up to sixteen. */
enum { HL_LOOP_MAX_OPS = 16 };

typedef struct {
    int ndim;                                   /* >= 1 after merging */
    int nop;                                    /* operand 0 is the output */
    int64_t shape[HL_MAX_DIMS];
    int64_t strides[HL_LOOP_MAX_OPS][HL_MAX_DIMS];  /* bytes */
    char *base[HL_LOOP_MAX_OPS];
} hl_loop;

/* One row: p[k] points at operand k's first element, s[k] is its byte stride, n elements. */
typedef void (*hl_row_fn)(char **p, const int64_t *s, int64_t n, const void *ctx);

/* ops[0] is the output; ops[1..nop-1] must have the output's shape, or broadcast to it
   (fewer leading axes, or size 1). */
void hl_loop_init(hl_loop *L, int nop, const hl_tensor *const *ops);
void hl_loop_run(const hl_loop *L, hl_row_fn fn, const void *ctx);

/* elementwise.c: the row function of a unary or binary op in a dtype, or NULL. */
hl_row_fn hl_cpu_elementwise_row(int op, hl_dtype d);

#endif
