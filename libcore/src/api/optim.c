/*
 * api/optim.c - hl_optim_update: one optimiser step of one parameter as one call (one pass
 * over the elements instead of the five to ten element-wise calls of the rule's op sequence).
 * The kernel is cpu/optim.c; the rules and their layouts are documented in hl_core.h.
 *
 * Record: in[0] = grad (contiguous), in[1 ..] = the scalars (0-d) when given, then the skip
 * flag (0-d bool) when given; out[0] = param, out[1 ..] = the states (all contiguous, read
 * and written in place); i[0] = rule, i[1] = flags, i[2] = number of states, i[3] = number
 * of per-step values, i[4] = 1 when they are the scalar tensors, 0 when they are numbers in
 * f[HL_OPTIM_VALUES ..], i[HL_OPTIM_SKIP] = 1 when the last input is the skip flag; f[0 ..] = hyper.
 */
#include "../core.h"

/* Per rule: its name (messages), the states, scalars and constants it takes. */
typedef struct {
    const char *name;
    int min_states, max_states, min_scalars, max_scalars, n_hyper, flags;
} rule_info;

static const rule_info RULES[] = {
    [HL_OPTIM_SGD] = {"sgd", 0, 1, 1, 1, 3, HL_OPTIM_NESTEROV | HL_OPTIM_INIT},
    [HL_OPTIM_ADAM] = {"adam", 2, 3, 2, 3, 5, HL_OPTIM_DECOUPLED},
    [HL_OPTIM_RMSPROP] = {"rmsprop", 1, 3, 1, 1, 5, HL_OPTIM_CENTERED | HL_OPTIM_MOMENTUM},
    [HL_OPTIM_ADAGRAD] = {"adagrad", 1, 1, 1, 1, 2, 0},
    [HL_OPTIM_V2_MOMENTUM] = {"v2_momentum", 1, 1, 1, 1, 2, 0},
    [HL_OPTIM_V2_ADAM] = {"v2_adam", 2, 2, 1, 1, 5, 0},
};
enum { N_RULES = sizeof RULES / sizeof RULES[0] };

/* The states and scalars the flags call for (the ranges above bound them). */
static hl_status check_counts(const char *op, const rule_info *r, int rule, int flags,
                              int n_states, int n_scalars, int n_hyper) {
    int want_states = -1, want_scalars = -1;
    if (rule == HL_OPTIM_ADAM) want_scalars = flags & HL_OPTIM_DECOUPLED ? 3 : 2;
    if (rule == HL_OPTIM_RMSPROP)
        want_states = 1 + !!(flags & HL_OPTIM_CENTERED) + !!(flags & HL_OPTIM_MOMENTUM);
    if (rule == HL_OPTIM_SGD && (flags & (HL_OPTIM_NESTEROV | HL_OPTIM_INIT)) && n_states != 1)
        return hl_fail(HL_ERR_VALUE, "%s (%s): the nesterov and init flags need the momentum "
                       "buffer as the one state, got %d states", op, r->name, n_states);
    if (n_states < r->min_states || n_states > r->max_states ||
        (want_states >= 0 && n_states != want_states))
        return hl_fail(HL_ERR_VALUE, "%s (%s): got %d state tensors, expected %d to %d for "
                       "flags 0x%x", op, r->name, n_states, r->min_states, r->max_states, flags);
    if (n_scalars < r->min_scalars || n_scalars > r->max_scalars ||
        (want_scalars >= 0 && n_scalars != want_scalars))
        return hl_fail(HL_ERR_VALUE, "%s (%s): got %d per-step scalars, expected %d to %d for "
                       "flags 0x%x", op, r->name, n_scalars, r->min_scalars, r->max_scalars,
                       flags);
    if (n_hyper != r->n_hyper)
        return hl_fail(HL_ERR_VALUE, "%s (%s): got %d constants, expected %d", op, r->name,
                       n_hyper, r->n_hyper);
    return HL_OK;
}

/* t has param's shape, dtype and device (and, for one written in place, is contiguous). */
static hl_status check_like(const char *op, const char *what, const hl_tensor *t,
                            const hl_tensor *param, bool written) {
    if (!t) return hl_fail(HL_ERR_VALUE, "%s: %s is NULL", op, what);
    hl_status st = hl_check_device(op, param->storage->device, t);
    if (st) return st;
    if (t->dtype != param->dtype)
        return hl_fail(HL_ERR_DTYPE, "%s: %s %s must have the parameter's dtype (%s)", op, what,
                       hl_desc(t), hl_desc(param));
    if (!hl_same_shape(t, param))
        return hl_fail(HL_ERR_SHAPE, "%s: %s %s must have the parameter's shape (%s)", op, what,
                       hl_desc(t), hl_desc(param));
    if (written && !hl_tensor_is_contiguous(t))
        return hl_fail(HL_ERR_VALUE, "%s: %s %s is updated in place and must be contiguous", op,
                       what, hl_desc(t));
    return written ? hl_check_writable(op, what, t) : HL_OK;
}

static hl_status check_scalar(const char *op, const hl_tensor *t, const hl_tensor *param) {
    if (!t) return hl_fail(HL_ERR_VALUE, "%s: a per-step scalar is NULL", op);
    hl_status st = hl_check_device(op, param->storage->device, t);
    if (st) return st;
    if (t->dtype != param->dtype || hl_tensor_numel(t) != 1 || t->ndim != 0)
        return hl_fail(HL_ERR_VALUE, "%s: a per-step scalar must be a 0-d tensor of the "
                       "parameter's dtype, got %s for a parameter %s", op, hl_desc(t),
                       hl_desc(param));
    return HL_OK;
}

/* The skip flag: a 0-d bool on param's device. Every backend's kernel reads it when it runs
   (cpu/optim.c, cuda/optim.cu) and writes nothing when it is set; a new backend's must too,
   or a skipped step would be applied. */
static hl_status check_skip(const char *op, const hl_tensor *skip, const hl_tensor *param) {
    hl_device dev = param->storage->device;
    hl_status st = hl_check_device(op, dev, skip);
    if (st) return st;
    if (skip->dtype != HL_BOOL || skip->ndim != 0)
        return hl_fail(HL_ERR_VALUE, "%s: the skip flag must be a 0-d bool tensor, got %s", op,
                       hl_desc(skip));
    return HL_OK;
}

hl_status hl_optim_update(int rule, int flags, hl_tensor *param, const hl_tensor *grad,
                          hl_tensor *const *states, int n_states,
                          const hl_tensor *const *scalars, const double *values, int n_scalars,
                          const double *hyper, int n_hyper, const hl_tensor *skip) {
    const char *op = "optim_update";
    if (rule < 0 || rule >= N_RULES)
        return hl_fail(HL_ERR_VALUE, "%s: unknown rule %d (expected 0 to %d)", op, rule,
                       N_RULES - 1);
    const rule_info *r = &RULES[rule];
    if (flags & ~r->flags)
        return hl_fail(HL_ERR_VALUE, "%s (%s): flags 0x%x do not apply to this rule", op,
                       r->name, flags & ~r->flags);
    if (!param || !grad) return hl_fail(HL_ERR_VALUE, "%s: param and grad are required", op);
    if ((n_states && !states) || (n_scalars && !scalars && !values) || (n_hyper && !hyper))
        return hl_fail(HL_ERR_VALUE, "%s: a states, scalars/values or hyper array is NULL", op);
    hl_status st = check_counts(op, r, rule, flags, n_states, n_scalars, n_hyper);
    if (!st) st = hl_check_op_dtype(op, HL_OP_OPTIM_UPDATE, param->storage->device, "param",
                                    param);
    if (!st) st = check_like(op, "param", param, param, true);
    if (!st) st = check_like(op, "grad", grad, param, false);
    for (int k = 0; k < n_states && !st; k++) st = check_like(op, "a state", states[k], param, true);
    for (int k = 0; scalars && k < n_scalars && !st; k++) st = check_scalar(op, scalars[k], param);
    if (!st && skip) st = check_skip(op, skip, param);
    /* everything written must be apart from everything else */
    const hl_tensor *written[1 + 3] = {param};
    for (int k = 0; k < n_states; k++) written[1 + k] = states[k];
    for (int a = 0; a < 1 + n_states && !st; a++) {
        st = hl_check_no_overlap(op, written[a], grad, false);
        for (int k = 0; scalars && k < n_scalars && !st; k++)
            st = hl_check_no_overlap(op, written[a], scalars[k], false);
        if (!st && skip) st = hl_check_no_overlap(op, written[a], skip, false);
        for (int b = a + 1; b < 1 + n_states && !st; b++)
            st = hl_check_no_overlap(op, written[a], written[b], false);
    }
    if (st) return st;
    hl_tensor *gc = NULL;
    if ((st = hl_contiguous(grad, &gc))) return st;
    hl_call c = {.op = HL_OP_OPTIM_UPDATE, .n_in = 1 + (scalars ? n_scalars : 0),
                 .n_out = 1 + n_states, .in = {gc}, .out = {param},
                 .i = {rule, flags, n_states, n_scalars, scalars != NULL, skip != NULL}};
    for (int k = 0; k < n_scalars; k++) {
        if (scalars) c.in[1 + k] = scalars[k];
        else c.f[HL_OPTIM_VALUES + k] = values[k];
    }
    if (skip) c.in[c.n_in++] = skip;
    for (int k = 0; k < n_states; k++) c.out[1 + k] = states[k];
    for (int k = 0; k < n_hyper; k++) c.f[k] = hyper[k];
    st = hl_submit(&c);
    hl_tensor_release(gc);
    return st;
}
