/*
 * test_plan.c - libcore's plans without Python: record and replay, input slots and binding
 * (no copy, copy, refusals), the host-read guard, planned memory (arena sharing, in-place
 * writes, results bit-equal to the unplanned replay) and fusion, through the public header
 * only. Every tensor and plan is released at the end, so `make test-asan` checks reference
 * counting and arena ownership with LeakSanitizer and AddressSanitizer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static hl_tensor *filled(int64_t n, float start, float step) {
    hl_tensor *t = NULL;
    if (hl_tensor_empty(HL_F32, CPU, 1, &n, &t)) return NULL;
    float *p = hl_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = start + step * (float)i;
    return t;
}

static int op(const char *name) { return hl_op_lookup(name); }

/* y = sqrt(exp(x * 0.5) + 1) * x - x, through four intermediates; the plan holds them alone
   once the caller's references go. */
static hl_status chain(hl_tensor *x, hl_tensor *half, hl_tensor *one, hl_tensor **y) {
    hl_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    hl_status st = hl_binary(op("mul"), x, half, &a);
    if (!st) st = hl_unary(op("exp"), a, 0, 0, &b);
    if (!st) st = hl_binary(op("add"), b, one, &c);
    if (!st) st = hl_unary(op("sqrt"), c, 0, 0, &d);
    if (!st) st = hl_binary(op("mul"), d, x, &e);
    if (!st) st = hl_binary(op("sub"), e, x, y);
    hl_tensor *all[] = {a, b, c, d, e};
    for (int k = 0; k < 5; k++) hl_tensor_release(all[k]);
    return st;
}

static float chain_ref(float x) { return sqrtf(expf(x * 0.5f) + 1.0f) * x - x; }

static hl_plan *record_chain(hl_tensor *x, hl_tensor **y, int64_t *slot, int options) {
    int64_t one_shape[1] = {1};
    hl_tensor *half = NULL, *one = NULL;
    CHECK(hl_tensor_empty(HL_F32, CPU, 1, one_shape, &half) == HL_OK);
    CHECK(hl_fill(half, 0.5) == HL_OK && hl_tensor_empty(HL_F32, CPU, 1, one_shape, &one) == 0);
    CHECK(hl_fill(one, 1.0) == HL_OK);
    hl_plan *plan = NULL;
    CHECK(hl_plan_begin() == HL_OK && hl_plan_recording());
    CHECK(hl_plan_input(x, slot) == HL_OK);
    CHECK(chain(x, half, one, y) == HL_OK);
    CHECK(hl_plan_end(&plan) == HL_OK && !hl_plan_recording());
    CHECK(hl_plan_set_options(plan, options) == HL_OK);
    hl_tensor_release(half);
    hl_tensor_release(one);
    return plan;
}

static void test_record_replay_and_memory(void) {
    enum { N = 4096 };
    hl_tensor *x = filled(N, -2, 4.0f / N), *y = NULL, *y_plain = NULL, *y_unfused = NULL;
    int64_t slot = -1, slot_plain = -1, slot_unfused = -1;
    hl_plan *plan = record_chain(x, &y, &slot, 0);
    hl_plan *unfused = record_chain(x, &y_unfused, &slot_unfused, HL_PLAN_NO_FUSION);
    hl_plan *plain = record_chain(x, &y_plain, &slot_plain,
                                  HL_PLAN_NO_MEMORY | HL_PLAN_NO_FUSION);
    CHECK(slot == 0 && hl_plan_num_inputs(plan) == 1 && hl_plan_size(plan) == 6);
    /* the host-read guard: y has no value while recording (checked above through the plan's
       own recording: read it during another one) */
    CHECK(hl_plan_begin() == HL_OK);
    CHECK(hl_tensor_check_host_read(y) == HL_OK);  /* not written by this recording */
    hl_tensor *z = NULL;
    float buf[N];
    CHECK(hl_unary(op("neg"), x, 0, 0, &z) == HL_OK);
    CHECK(hl_tensor_read(z, buf, sizeof buf) == HL_ERR_UNSUPPORTED);
    CHECK(strstr(hl_last_error(), "while a plan is recorded") != NULL);
    CHECK(hl_plan_run(plan) == HL_ERR_VALUE);  /* no replay inside a recording */
    hl_plan *scratch = NULL;
    CHECK(hl_plan_end(&scratch) == HL_OK);
    hl_plan_release(scratch);
    hl_tensor_release(z);

    int64_t in_use0 = 0, in_use1 = 0;
    CHECK(hl_memory_stats(CPU, &in_use0, NULL, NULL) == HL_OK);
    for (int round = 0; round < 3; round++) {
        hl_tensor *batch = filled(N, (float)round - 3, 6.0f / N);
        CHECK(hl_plan_bind(plan, slot, batch) == HL_OK);
        CHECK(hl_plan_bind(plain, slot_plain, batch) == HL_OK);
        CHECK(hl_plan_bind(unfused, slot_unfused, batch) == HL_OK);
        CHECK(hl_plan_run(unfused) == HL_OK);
        CHECK(hl_tensor_shares_storage(x, batch));  /* bound without a copy */
        CHECK(hl_plan_run(plan) == HL_OK && hl_plan_run(plain) == HL_OK);
        const float *got = hl_tensor_data(y), *ref = hl_tensor_data(y_plain);
        const float *in = hl_tensor_data(batch), *got2 = hl_tensor_data(y_unfused);
        int exact = 1, close = 1;
        for (int i = 0; i < N; i++) {
            exact &= memcmp(&got[i], &ref[i], sizeof(float)) == 0;
            exact &= memcmp(&got2[i], &ref[i], sizeof(float)) == 0;
            close &= fabsf(got[i] - chain_ref(in[i])) <= 1e-5f * (1 + fabsf(chain_ref(in[i])));
        }
        CHECK(exact && close);
        hl_tensor_release(batch);
    }
    CHECK(hl_memory_stats(CPU, &in_use1, NULL, NULL) == HL_OK);
    hl_plan_info info, plain_info, unfused_info;
    CHECK(hl_plan_stats(plan, &info) == HL_OK && hl_plan_stats(plain, &plain_info) == HL_OK);
    CHECK(hl_plan_stats(unfused, &unfused_info) == HL_OK);
    /* five N-float intermediates: fused, they never reach memory; unfused, they are written
       in place, all in one block of the arena */
    CHECK(info.prepared && info.planned_tensors == 5 && info.fused_groups == 1);
    CHECK(info.fused_calls == 6 && info.arena_bytes <= 64);
    CHECK(unfused_info.planned_tensors == 5 && unfused_info.fused_groups == 0);
    CHECK(unfused_info.arena_bytes == N * 4 && unfused_info.in_place == 4);
    CHECK(plain_info.prepared && plain_info.planned_tensors == 0 && plain_info.arena_bytes == 0);
    /* nine intermediates' blocks went back, less the last batch, which the slots still view */
    CHECK(in_use1 == in_use0 - 8 * N * 4 + 64);
    CHECK(hl_plan_set_options(plan, 0) == HL_ERR_VALUE);  /* after the first run */
    hl_plan_release(plan);
    hl_plan_release(plain);
    hl_plan_release(unfused);
    hl_tensor_release(y_unfused);
    hl_tensor_release(x);
    hl_tensor_release(y);
    hl_tensor_release(y_plain);
}

static void test_bind(void) {
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, perm[2] = {1, 0};
    hl_tensor *x = NULL, *y = NULL, *flat = NULL, *two = filled(1, 2, 0);
    CHECK(hl_tensor_empty(HL_F32, CPU, 2, s23, &x) == HL_OK && hl_fill(x, 0) == HL_OK);
    hl_plan *plan = NULL;
    int64_t slot = -1, minus1 = -1;
    CHECK(hl_plan_begin() == HL_OK);
    CHECK(hl_plan_input(x, &slot) == HL_OK && slot == 0);
    CHECK(hl_view_reshape(x, 1, &minus1, &flat) == HL_OK);  /* a view made while recording */
    CHECK(hl_binary(op("mul"), flat, two, &y) == HL_OK);
    CHECK(hl_plan_input(flat, &slot) == HL_ERR_VALUE);      /* the same memory again */
    CHECK(hl_plan_input(y, &slot) == HL_ERR_VALUE);         /* computed by the plan */
    CHECK(hl_plan_end(&plan) == HL_OK);
    /* a contiguous tensor: no copy, the view follows */
    hl_tensor *a = filled(6, 1, 1), *a2 = NULL;
    CHECK(hl_view_reshape(a, 2, s23, &a2) == HL_OK);
    CHECK(hl_plan_bind(plan, 0, a2) == HL_OK && hl_tensor_shares_storage(flat, a));
    CHECK(hl_plan_run(plan) == HL_OK);
    const float *out = hl_tensor_data(y);
    CHECK(out[0] == 2 && out[5] == 12);
    /* a transposed view: copied into the slot's own memory */
    hl_tensor *b = filled(6, 10, 1), *b2 = NULL, *bt = NULL;
    CHECK(hl_view_reshape(b, 2, s32, &b2) == HL_OK && hl_view_permute(b2, perm, &bt) == HL_OK);
    CHECK(hl_plan_bind(plan, 0, bt) == HL_OK && !hl_tensor_shares_storage(x, b));
    CHECK(hl_plan_run(plan) == HL_OK);
    out = hl_tensor_data(y);
    CHECK(out[0] == 20 && out[1] == 24 && out[2] == 28 && out[3] == 22);
    /* refusals name the slot */
    hl_tensor *wrong = NULL;
    CHECK(hl_tensor_empty(HL_F32, CPU, 2, s32, &wrong) == HL_OK);
    CHECK(hl_plan_bind(plan, 0, wrong) == HL_ERR_SHAPE && strstr(hl_last_error(), "slot 0"));
    hl_tensor_release(wrong);
    wrong = NULL;
    CHECK(hl_tensor_empty(HL_F64, CPU, 2, s23, &wrong) == HL_OK);
    CHECK(hl_plan_bind(plan, 0, wrong) == HL_ERR_DTYPE);
    hl_tensor_release(wrong);
    wrong = NULL;
    CHECK(hl_tensor_empty(HL_F32, (hl_device){HL_DEVICE_META, 0}, 2, s23, &wrong) == HL_OK);
    CHECK(hl_plan_bind(plan, 0, wrong) == HL_ERR_DEVICE);
    CHECK(hl_plan_bind(plan, 1, a2) == HL_ERR_INDEX && hl_plan_bind(NULL, 0, a2) == HL_ERR_VALUE);
    hl_tensor_release(wrong);
    hl_plan_release(plan);
    hl_tensor *all[] = {x, y, flat, two, a, a2, b, b2, bt};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) hl_tensor_release(all[k]);
}

/* A second plan reading the first's input slot through a view of its own follows the first's
   binds once linked (a training step's backward reads the batch the forward was bound to). */
static void test_linked_plans(void) {
    int64_t s23[2] = {2, 3}, s6 = 6;
    hl_tensor *x = NULL, *y = NULL, *flat = NULL, *z = NULL, *two = filled(1, 2, 0);
    CHECK(hl_tensor_empty(HL_F32, CPU, 2, s23, &x) == HL_OK && hl_fill(x, 0) == HL_OK);
    hl_plan *first = NULL, *second = NULL;
    int64_t slot = -1;
    CHECK(hl_plan_begin() == HL_OK && hl_plan_input(x, &slot) == HL_OK);
    CHECK(hl_binary(op("mul"), x, two, &y) == HL_OK && hl_plan_end(&first) == HL_OK);
    CHECK(hl_plan_begin() == HL_OK && hl_view_reshape(x, 1, &s6, &flat) == HL_OK);
    CHECK(hl_binary(op("add"), flat, two, &z) == HL_OK && hl_plan_end(&second) == HL_OK);
    CHECK(hl_plan_link_inputs(first, second) == HL_OK);
    CHECK(hl_plan_link_inputs(first, first) == HL_ERR_VALUE);
    hl_tensor *a = filled(6, 1, 1), *a2 = NULL;
    CHECK(hl_view_reshape(a, 2, s23, &a2) == HL_OK);
    CHECK(hl_plan_bind(first, slot, a2) == HL_OK);
    hl_tensor_release(a);  /* the plans hold its storage now */
    hl_tensor_release(a2);
    CHECK(hl_plan_run(first) == HL_OK && hl_plan_run(second) == HL_OK);
    const float *out = hl_tensor_data(z);
    CHECK(out[0] == 3 && out[5] == 8);
    CHECK(hl_plan_link_inputs(first, second) == HL_ERR_VALUE);  /* bound already */
    /* z, written by the linked plan, fed back to the first: copied, not bound */
    hl_tensor *z2 = NULL;
    CHECK(hl_view_reshape(z, 2, s23, &z2) == HL_OK && hl_plan_bind(first, slot, z2) == HL_OK);
    CHECK(!hl_tensor_shares_storage(x, z));
    hl_plan_release(second);  /* either may go first */
    CHECK(hl_plan_run(first) == HL_OK && ((const float *)hl_tensor_data(y))[5] == 16);
    hl_plan_release(first);
    hl_tensor *all[] = {x, y, flat, z, z2, two};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) hl_tensor_release(all[k]);
}

/* Lifetimes that do not overlap share arena bytes: a chain of matmuls (not in place). */
static void test_arena_sharing(void) {
    int64_t s[2] = {64, 64};
    hl_tensor *w = NULL, *x = NULL, *y = NULL;
    CHECK(hl_tensor_empty(HL_F32, CPU, 2, s, &w) == HL_OK && hl_fill(w, 1.0 / 64) == HL_OK);
    CHECK(hl_tensor_empty(HL_F32, CPU, 2, s, &x) == HL_OK && hl_fill(x, 3) == HL_OK);
    hl_plan *plan = NULL;
    CHECK(hl_plan_begin() == HL_OK);
    hl_tensor *h = hl_tensor_retain(x);
    for (int k = 0; k < 8; k++) {
        hl_tensor *next = NULL;
        CHECK(hl_matmul(h, w, k == 7 ? &y : &next) == HL_OK);
        hl_tensor_release(h);
        h = k == 7 ? NULL : next;
    }
    CHECK(hl_plan_end(&plan) == HL_OK);
    CHECK(hl_plan_run(plan) == HL_OK);  /* measures the calls */
    hl_plan_info info;
    CHECK(hl_plan_stats(plan, &info) == HL_OK && info.prepared && !info.memory_planned);
    CHECK(hl_plan_run(plan) == HL_OK);  /* plans memory, then runs */
    CHECK(hl_plan_stats(plan, &info) == HL_OK && info.memory_planned);
    CHECK(info.planned_tensors == 7 && info.in_place == 0);
    CHECK(info.arena_bytes == 2 * 64 * 64 * 4);  /* two alive at any call */
    const float *out = hl_tensor_data(y);
    CHECK(fabsf(out[0] - 3) < 1e-5f && fabsf(out[64 * 64 - 1] - 3) < 1e-5f);
    hl_plan_release(plan);
    hl_tensor_release(w);
    hl_tensor_release(x);
    hl_tensor_release(y);
}

int main(void) {
    test_record_replay_and_memory();
    test_bind();
    test_linked_plans();
    test_arena_sharing();
    int64_t in_use = -1;
    CHECK(hl_memory_stats(CPU, &in_use, NULL, NULL) == HL_OK && in_use == 0);
    hl_memory_empty_cache(CPU);
    printf("test_plan: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
