/*
 * plan/capture.c - a plan's calls on a device whose backend captures graphs (CUDA Graphs)
 * replayed as graphs: one kernel launch per run of calls instead of one per kernel.
 *
 * - The first replay runs every call one by one and notes those that cannot be captured: the
 *   backend says so after a kernel that waited for or read the device on the host (an index
 *   or label check), or used memory a later call may free (hl_backend.uncapturable).
 * - The replay after it (the memory plan is in place by then, so every address the calls use
 *   is fixed) splits the calls into runs: consecutive calls on one capturing device, none of
 *   them noted. Each run of at least MIN_RUN calls is captured (its kernels recorded, not run),
 *   instantiated and launched; the calls between runs run one by one as before. Input slots
 *   are pinned to their own memory first: a bind then copies into it (bind.c), since a graph
 *   reads the addresses it was captured with.
 * - Later replays launch the graphs. Random calls still draw fresh numbers: their keys advance
 *   on the host after each launch, as after each eager call, and the captured kernel reads the
 *   key from a word the backend refreshes at every launch.
 * - A run whose capture fails (a kernel the first replay did not flag, a refused API call)
 *   runs one by one from then on; hl_plan_stats says why (capture_note).
 *
 * HL_PLAN_NO_CAPTURE or HL_PLAN_CAPTURE=0 in the environment keeps every call uncaptured.
 */
#include <stdio.h>

#include "plan.h"

enum { MIN_RUN = 2 };  /* a single call gains nothing from a graph of its own */

typedef struct {
    int64_t first, end;  /* calls [first, end) */
    hl_device device;
    const hl_backend *be;
    void *graph;         /* NULL until captured */
    bool failed;         /* its capture failed: it runs one by one */
} capture_run;

struct plan_capture {
    bool first_done;     /* the first replay (call by call, observing) has run */
    bool observed;       /* runs are made (at the second replay) */
    bool *host;          /* per call: the backend said it cannot be captured */
    capture_run *runs;
    int64_t n_runs;
    int64_t graph_launches, uncaptured_calls;
    char note[200];      /* why the first uncaptured call is not in a graph */
};

static const hl_backend *capturing_backend(const hl_call *c) {
    const hl_backend *be = hl_backend_for(hl_plan_call_device(c));
    return be && be->capture_begin ? be : NULL;
}

hl_status hl_plan_capture_prepare(hl_plan *p) {
    const char *env = getenv("HL_PLAN_CAPTURE");
    if (env && env[0] == '0') return HL_OK;
    bool any = false;
    for (int64_t i = 0; i < p->n && !any; i++) any = capturing_backend(&p->calls[i]) != NULL;
    if (!any) return HL_OK;
    plan_capture *pc = calloc(1, sizeof *pc);
    if (pc) pc->host = calloc((size_t)p->n + 1, sizeof *pc->host);
    if (!pc || !pc->host) {
        free(pc);
        return hl_fail(HL_ERR_MEMORY, "plan_run: out of memory");
    }
    p->capture = pc;
    /* forget what kernels run before this plan noted */
    for (int64_t i = 0; i < p->n; i++) {
        const hl_backend *be = capturing_backend(&p->calls[i]);
        if (be) {
            be->uncapturable();
            break;
        }
    }
    return HL_OK;
}

void hl_plan_capture_observe(hl_plan *p, int64_t i) {
    plan_capture *pc = p->capture;
    if (pc->observed) return;
    const hl_backend *be = capturing_backend(&p->calls[i]);
    const char *why = be ? be->uncapturable() : NULL;
    if (!why) return;
    pc->host[i] = true;
    if (!pc->note[0]) snprintf(pc->note, sizeof pc->note, "call %lld (%s): %s", (long long)i,
                               hl_op_str(p->calls[i].op), why);
}

/* Splits the calls into runs to capture (after the first replay). */
static hl_status make_runs(hl_plan *p) {
    plan_capture *pc = p->capture;
    pc->runs = malloc(sizeof *pc->runs * (size_t)(p->n + 1));
    if (!pc->runs) return hl_fail(HL_ERR_MEMORY, "plan_run: out of memory");
    for (int64_t i = 0; i < p->n;) {
        const hl_backend *be = pc->host[i] ? NULL : capturing_backend(&p->calls[i]);
        hl_device dev = hl_plan_call_device(&p->calls[i]);
        int64_t end = i + 1;
        while (be && end < p->n && !pc->host[end] &&
               hl_same_device(hl_plan_call_device(&p->calls[end]), dev))
            end++;
        if (be && end - i >= MIN_RUN)
            pc->runs[pc->n_runs++] = (capture_run){i, end, dev, be, NULL, false};
        else if (be) {
            pc->uncaptured_calls += end - i;
            if (!pc->note[0]) snprintf(pc->note, sizeof pc->note, "call %lld (%s): a run of "
                                       "fewer than %d calls stays uncaptured", (long long)i,
                                       hl_op_str(p->calls[i].op), MIN_RUN);
        }
        i = end;
    }
    for (int64_t i = 0; i < p->n; i++) pc->uncaptured_calls += pc->host[i];
    /* bound inputs are copied into the slots' own memory from now on */
    for (int64_t k = 0; k < p->n_slots; k++) {
        hl_status st = hl_plan_pin_slot(p, k);
        if (st) return st;
    }
    pc->observed = true;
    return HL_OK;
}

/* Records run r's calls into a graph; NULL graph (and the note) when that fails. Nothing of
   the run has run on return. */
static hl_status capture(hl_plan *p, capture_run *r) {
    int index = r->device.index;
    char why[160] = "";
    hl_status st = r->be->capture_begin(index);
    if (!st) {
        hl_status ran = hl_plan_replay_range(p, r->first, r->end, false);
        if (ran) snprintf(why, sizeof why, "%s", hl_last_error());
        void *graph = NULL;
        char ended[160] = "";
        st = r->be->capture_end(index, &graph, ended, sizeof ended);
        if (!ran && !st && graph) {
            r->graph = graph;
            return HL_OK;
        }
        if (graph) r->be->graph_free(graph, index);
        if (!why[0]) snprintf(why, sizeof why, "%s", st ? hl_last_error() : ended);
    } else {
        snprintf(why, sizeof why, "%s", hl_last_error());
    }
    r->failed = true;
    p->capture->uncaptured_calls += r->end - r->first;
    snprintf(p->capture->note, sizeof p->capture->note, "calls %lld-%lld on %s: the capture "
             "failed: %s", (long long)r->first, (long long)r->end - 1, hl_device_str(r->device),
             why);
    return HL_OK;
}

hl_status hl_plan_replay_captured(hl_plan *p) {
    plan_capture *pc = p->capture;
    if (!pc->first_done) {
        hl_status st = hl_plan_replay_range(p, 0, p->n, true);
        pc->first_done = !st;
        return st;
    }
    hl_status st = pc->observed ? HL_OK : make_runs(p);
    int64_t at = 0;
    for (int64_t k = 0; !st && k < pc->n_runs; k++) {
        capture_run *r = &pc->runs[k];
        st = hl_plan_replay_range(p, at, r->first, true);
        if (!st && !r->graph && !r->failed) st = capture(p, r);
        if (st) break;
        if (r->failed) {
            st = hl_plan_replay_range(p, r->first, r->end, true);
        } else {
            st = r->be->graph_launch(r->graph, r->device.index);
            if (!st) {
                pc->graph_launches++;
                hl_plan_reseed_range(p, r->first, r->end);
            }
        }
        at = r->end;
    }
    return st ? st : hl_plan_replay_range(p, at, p->n, true);
}

void hl_plan_capture_release(hl_plan *p) {
    plan_capture *pc = p->capture;
    if (!pc) return;
    for (int64_t k = 0; k < pc->n_runs; k++)
        if (pc->runs[k].graph) pc->runs[k].be->graph_free(pc->runs[k].graph,
                                                         pc->runs[k].device.index);
    free(pc->runs);
    free(pc->host);
    free(pc);
    p->capture = NULL;
}

void hl_plan_capture_stats(const hl_plan *p, hl_plan_info *info) {
    const plan_capture *pc = p->capture;
    if (!pc) return;
    for (int64_t k = 0; k < pc->n_runs; k++)
        if (pc->runs[k].graph) {
            info->graphs++;
            info->graph_calls += pc->runs[k].end - pc->runs[k].first;
        }
    info->graph_launches = pc->graph_launches;
    info->uncaptured_calls = pc->uncaptured_calls;
    snprintf(info->capture_note, sizeof info->capture_note, "%s", pc->note);
}
