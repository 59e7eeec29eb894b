/*
 * test_core.c - libcore without Python: create, compute, view, cast, plans and the error
 * paths, through the public header only. Every tensor is released at the end, so under
 * `make test-asan` LeakSanitizer checks the core's reference counting too.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

static hl_tensor *from_floats(int ndim, const int64_t *shape, const float *values) {
    hl_tensor *t = NULL;
    if (hl_tensor_empty(HL_F32, CPU, ndim, shape, &t)) return NULL;
    size_t n = (size_t)hl_tensor_numel(t);
    if (hl_tensor_write(t, values, n * sizeof(float))) {
        hl_tensor_release(t);
        return NULL;
    }
    return t;
}

/* The value at a multi-index of any (strided) float32 tensor. */
static float at(const hl_tensor *t, const int64_t *idx) {
    const int64_t *st = hl_tensor_strides(t);
    const float *p = hl_tensor_data(t);
    int64_t off = 0;
    for (int i = 0; i < hl_tensor_ndim(t); i++) off += idx[i] * st[i];
    return p[off];
}

static void test_create_and_add(void) {
    int64_t shape[2] = {2, 3}, row[1] = {3};
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    hl_tensor *ta = from_floats(2, shape, a), *tb = from_floats(1, row, b), *sum = NULL;
    CHECK(ta && tb);
    CHECK(hl_binary(hl_op_lookup("add"), ta, tb, &sum) == HL_OK);
    CHECK(hl_tensor_ndim(sum) == 2 && hl_tensor_shape(sum)[0] == 2 && hl_tensor_shape(sum)[1] == 3);
    float out[6];
    CHECK(hl_tensor_read(sum, out, sizeof out) == HL_OK);
    for (int i = 0; i < 6; i++) CHECK(out[i] == a[i] + b[i % 3]);

    /* into a given output, which keeps its identity and gains a reference */
    hl_tensor *given = sum;
    CHECK(hl_binary(hl_op_lookup("mul"), ta, ta, &given) == HL_OK && given == sum);
    hl_tensor_release(given);
    CHECK(hl_tensor_read(sum, out, sizeof out) == HL_OK && out[5] == 36);

    hl_tensor *e = NULL;
    CHECK(hl_unary(hl_op_lookup("exp"), ta, 0, 0, &e) == HL_OK);
    CHECK(hl_tensor_read(e, out, sizeof out) == HL_OK && fabsf(out[0] - expf(1)) < 1e-6f);
    hl_tensor_release(e);
    hl_tensor_release(ta);
    hl_tensor_release(tb);
    hl_tensor_release(sum);
}

static void test_views(void) {
    int64_t shape[2] = {3, 4};
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i;
    hl_tensor *t = from_floats(2, shape, v), *tt = NULL, *r = NULL, *s = NULL, *c = NULL;
    int64_t perm[2] = {1, 0};
    CHECK(hl_view_permute(t, perm, &tt) == HL_OK);
    CHECK(hl_tensor_shares_storage(t, tt) && !hl_tensor_is_contiguous(tt));
    CHECK(at(tt, (int64_t[]){3, 2}) == 11);

    int64_t flat[1] = {12};
    CHECK(hl_view_reshape(tt, 1, flat, &r) == HL_ERR_NOT_VIEWABLE);
    CHECK(strstr(hl_last_error(), "cannot be viewed") != NULL);
    CHECK(r == NULL);
    CHECK(hl_reshape(tt, 1, flat, &r) == HL_OK);   /* copies */
    CHECK(!hl_tensor_shares_storage(t, r) && at(r, (int64_t[]){1}) == 4);

    int64_t start[2] = {2, 3}, len[2] = {2, 2}, step[2] = {-1, -2};
    CHECK(hl_view_slice(t, start, len, step, &s) == HL_OK);
    CHECK(at(s, (int64_t[]){1, 1}) == 5);            /* row 1, column 1 */
    CHECK(hl_contiguous(s, &c) == HL_OK && hl_tensor_is_contiguous(c));
    float cv[4];
    CHECK(hl_tensor_read(c, cv, sizeof cv) == HL_OK);
    CHECK(cv[0] == 11 && cv[1] == 9 && cv[2] == 7 && cv[3] == 5);

    hl_tensor *parts[3] = {NULL};
    int64_t sizes[3] = {1, 0, 2};
    CHECK(hl_view_split(t, 0, 3, sizes, parts) == HL_OK);
    CHECK(hl_tensor_shape(parts[2])[0] == 2 && at(parts[2], (int64_t[]){0, 0}) == 4);
    for (int k = 0; k < 3; k++) hl_tensor_release(parts[k]);

    /* a fill through a column-major view stays inside it */
    int64_t big[1] = {20};
    hl_tensor *buf = NULL, *win = NULL, *win2 = NULL, *wt = NULL;
    CHECK(hl_tensor_empty(HL_F32, CPU, 1, big, &buf) == HL_OK && hl_fill(buf, -1) == HL_OK);
    int64_t wstart[1] = {4}, wlen[1] = {12}, wstep[1] = {1}, w2[2] = {4, 3};
    CHECK(hl_view_slice(buf, wstart, wlen, wstep, &win) == HL_OK);
    CHECK(hl_view_reshape(win, 2, w2, &win2) == HL_OK);
    CHECK(hl_view_permute(win2, perm, &wt) == HL_OK && hl_fill(wt, 7) == HL_OK);
    float bv[20];
    CHECK(hl_tensor_read(buf, bv, sizeof bv) == HL_OK);
    for (int i = 0; i < 20; i++) CHECK(bv[i] == ((i >= 4 && i < 16) ? 7 : -1));

    hl_tensor *views[] = {t, tt, r, s, c, buf, win, win2, wt};
    for (size_t k = 0; k < sizeof views / sizeof views[0]; k++) hl_tensor_release(views[k]);
}

static void test_casts_and_creation(void) {
    hl_tensor *x = NULL, *h = NULL, *back = NULL, *i = NULL, *eye = NULL;
    CHECK(hl_arange(-1.5, 0.5, 8, HL_F32, CPU, &x) == HL_OK);
    CHECK(hl_cast(x, HL_F16, &h) == HL_OK && hl_tensor_dtype(h) == HL_F16);
    CHECK(hl_cast(h, HL_F32, &back) == HL_OK);
    float xs[8], bs[8];
    CHECK(hl_tensor_read(x, xs, sizeof xs) == HL_OK);
    CHECK(hl_tensor_read(back, bs, sizeof bs) == HL_OK);
    for (int k = 0; k < 8; k++) CHECK(xs[k] == bs[k] && xs[k] == -1.5f + 0.5f * k);
    /* float -> int saturates, NaN -> 0 */
    int64_t two[1] = {3};
    float odd[3] = {NAN, 1e20f, -3.7f};
    hl_tensor *o = from_floats(1, two, odd);
    CHECK(hl_cast(o, HL_I32, &i) == HL_OK);
    int32_t iv[3];
    CHECK(hl_tensor_read(i, iv, sizeof iv) == HL_OK);
    CHECK(iv[0] == 0 && iv[1] == 2147483647 && iv[2] == -3);
    CHECK(hl_eye(3, 4, 1, HL_U8, CPU, &eye) == HL_OK);
    uint8_t ev[12];
    CHECK(hl_tensor_read(eye, ev, sizeof ev) == HL_OK && ev[1] == 1 && ev[6] == 1 && ev[0] == 0);
    hl_tensor *all[] = {x, h, back, i, eye, o};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) hl_tensor_release(all[k]);
}

static void test_errors(void) {
    int64_t s2[1] = {2}, s3[1] = {3};
    hl_tensor *a = NULL, *b = NULL, *out = NULL;
    CHECK(hl_tensor_empty(HL_F32, CPU, 1, s2, &a) == HL_OK);
    CHECK(hl_tensor_empty(HL_F32, CPU, 1, s3, &b) == HL_OK);
    CHECK(hl_binary(hl_op_lookup("add"), a, b, &out) == HL_ERR_SHAPE && out == NULL);
    CHECK(strstr(hl_last_error(), "add: shapes (2,) and (3,) cannot be broadcast") != NULL);
    CHECK(hl_last_status() == HL_ERR_SHAPE);
    CHECK(hl_unary(-1, a, 0, 0, &out) == HL_ERR_VALUE && out == NULL);
    CHECK(hl_unary(hl_op_lookup("exp"), NULL, 0, 0, &out) == HL_ERR_VALUE);
    CHECK(hl_unary(hl_op_lookup("exp"), a, 0, 0, NULL) == HL_ERR_VALUE);
    CHECK(hl_cast(a, (hl_dtype)42, &out) == HL_ERR_DTYPE && out == NULL);
    CHECK(hl_view_reshape(NULL, 1, s2, &out) == HL_ERR_VALUE);
    CHECK(hl_view_select(a, 0, 2, &out) == HL_ERR_INDEX);
    CHECK(strstr(hl_last_error(), "out of bounds") != NULL);
    CHECK(hl_tensor_empty(HL_F32, (hl_device){HL_DEVICE_CUDA, 0}, 1, s2, &out) == HL_ERR_DEVICE);
    CHECK(hl_op_lookup("no such op") == -1 && hl_op_name(-1) == NULL && hl_op_lookup(NULL) == -1);
    CHECK(strcmp(hl_status_name(HL_ERR_INDEX), "index error") == 0);
    CHECK(strcmp(hl_status_name(99), "unknown status") == 0);
    CHECK(hl_dtype_size((hl_dtype)99) == 0);
    /* a failure with an output given leaves the caller's tensor alone */
    hl_tensor *keep = a;
    CHECK(hl_binary(hl_op_lookup("add"), a, b, &keep) == HL_ERR_SHAPE && keep == a);
    hl_tensor_release(a);
    hl_tensor_release(b);
}

/* A broadcast view (a zero stride on an axis of size > 1) is refused as anything written:
   each of its memory elements stands for several positions. Memory stays untouched. */
static void test_broadcast_writes(void) {
    int64_t one[1] = {1}, four[1] = {4}, start[1] = {0}, len[1] = {2}, step[1] = {2};
    float v = 2, w[4] = {1, 2, 3, 4};
    hl_tensor *base = from_floats(1, one, &v), *src = from_floats(1, four, w);
    hl_tensor *e = NULL, *sl = NULL, *given = NULL;
    CHECK(hl_view_expand(base, 1, four, &e) == HL_OK);
    given = e;
    CHECK(hl_binary(hl_op_lookup("mul"), e, e, &given) == HL_ERR_VALUE && given == e);
    CHECK(strstr(hl_last_error(), "mul: the output is a broadcast view (shape (4,), strides "
                                  "(0,))") != NULL);
    CHECK(hl_unary(hl_op_lookup("neg"), src, 0, 0, &given) == HL_ERR_VALUE && given == e);
    CHECK(hl_fill(e, 5) == HL_ERR_VALUE);
    CHECK(strstr(hl_last_error(), "fill: the tensor is a broadcast view") != NULL);
    CHECK(hl_copy(e, src) == HL_ERR_VALUE);
    CHECK(hl_random_uniform(e, 1, 0, 0, 1) == HL_ERR_VALUE);
    /* a strided slice of it is still broadcast; one element of it is not */
    CHECK(hl_view_slice(e, start, len, step, &sl) == HL_OK && hl_fill(sl, 5) == HL_ERR_VALUE);
    CHECK(at(base, (int64_t[]){0}) == 2);
    hl_tensor *elem = NULL;
    CHECK(hl_view_select(e, 0, 3, &elem) == HL_OK && hl_fill(elem, 7) == HL_OK);
    CHECK(at(base, (int64_t[]){0}) == 7);
    /* recording a plan refuses it too */
    CHECK(hl_plan_begin() == HL_OK);
    given = e;
    CHECK(hl_binary(hl_op_lookup("add"), src, src, &given) == HL_ERR_VALUE && given == e);
    hl_plan *plan = NULL;
    CHECK(hl_plan_end(&plan) == HL_OK && hl_plan_size(plan) == 0);
    hl_plan_release(plan);
    hl_tensor *all[] = {base, src, e, sl, elem};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) hl_tensor_release(all[k]);
}

static void test_plan(void) {
    int64_t s[1] = {4};
    float v[4] = {1, 2, 3, 4};
    hl_tensor *x = from_floats(1, s, v), *y = NULL, *z = NULL;
    hl_plan *plan = NULL;
    CHECK(hl_plan_begin() == HL_OK);
    CHECK(hl_binary(hl_op_lookup("mul"), x, x, &y) == HL_OK);
    CHECK(hl_unary(hl_op_lookup("neg"), y, 0, 0, &z) == HL_OK);
    CHECK(hl_plan_end(&plan) == HL_OK && hl_plan_size(plan) == 2);
    float out[4];
    for (int round = 1; round <= 2; round++) {
        CHECK(hl_plan_run(plan) == HL_OK);
        CHECK(hl_tensor_read(z, out, sizeof out) == HL_OK);
        for (int k = 0; k < 4; k++) CHECK(out[k] == -v[k] * v[k]);
        for (int k = 0; k < 4; k++) v[k] += 1;
        CHECK(hl_tensor_write(x, v, sizeof v) == HL_OK);
    }
    hl_tensor_release(x);      /* the plan holds its own references */
    hl_tensor_release(y);
    CHECK(hl_plan_run(plan) == HL_OK);
    hl_plan_release(plan);
    hl_tensor_release(z);
}

static void test_crc32(void) {
    /* the standard check value, then pieces against the whole on both code paths (the
       carry-less path needs at least 64 bytes) */
    CHECK(hl_crc32(0, "123456789", 9) == 0xCBF43926u);
    unsigned char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i * 37 + 11);
    uint32_t whole = hl_crc32(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut += 37) {
        CHECK(hl_crc32(hl_crc32(0, buf, cut), buf + cut, sizeof buf - cut) == whole);
        CHECK(hl_crc32_combine(hl_crc32(0, buf, cut), hl_crc32(0, buf + cut, sizeof buf - cut),
                               sizeof buf - cut) == whole);
    }
}

int main(void) {
    hl_set_num_threads(2);
    test_create_and_add();
    test_views();
    test_casts_and_creation();
    test_errors();
    test_broadcast_writes();
    test_plan();
    test_crc32();
    int64_t in_use = -1;
    CHECK(hl_memory_stats(CPU, &in_use, NULL, NULL) == HL_OK && in_use == 0);
    hl_memory_empty_cache(CPU);
    printf("test_core: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
