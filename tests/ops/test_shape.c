/* Data movement: CONCAT, SLICE (and SLICE_GRAD), RESHAPE (a view), TRANSPOSE and
 * CAST: forward vs float64 (exact copies), backward vs finite differences. */
#include "ops/opcheck.h"

static void test_concat(void) {
    for (int axis = 0; axis < 3; axis++) {
        oc c;
        oc_init(&c, 90 + (uint64_t)axis);
        brisk_shape s0 = brisk_shape3(2, 3, 4), s1 = s0, s2 = s0;
        s1.d[axis] = 1;
        s2.d[axis] = 2;
        int xs[3] = {oc_param(&c, "x0", s0), oc_param(&c, "x1", s1), oc_param(&c, "x2", s2)};
        int out = brisk_concat(c.g, xs, 3, axis - 3); /* negative axes count from the end */
        REQUIRE(out >= 0);
        brisk_shape so = c.g->nodes[out].shape;
        int64_t n = brisk_shape_numel(&so);
        double *ref = malloc((size_t)n * sizeof *ref);
        brisk_shape ss[3] = {s0, s1, s2};
        int64_t outer = 1, inner = 1;
        for (int d = 0; d < axis; d++) outer *= so.d[d];
        for (int d = axis + 1; d < 3; d++) inner *= so.d[d];
        int64_t k = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int i = 0; i < 3; i++) {
                int64_t len = ss[i].d[axis] * inner;
                for (int64_t j = 0; j < len; j++) ref[k++] = oc_val(&c, xs[i])[o * len + j];
            }
        char what[32];
        snprintf(what, sizeof what, "concat axis %d", axis);
        oc_check(&c, out, ref, what);
        free(ref);
        oc_free(&c);
    }
}

static void test_slice(void) {
    for (int axis = 0; axis < 3; axis++) {
        oc c;
        oc_init(&c, 95 + (uint64_t)axis);
        brisk_shape s = brisk_shape3(4, 5, 6);
        int x = oc_param(&c, "x", s);
        int64_t start = 1, len = 2 + axis;
        int out = brisk_slice(c.g, x, axis, start, len);
        REQUIRE(out >= 0);
        brisk_shape so = c.g->nodes[out].shape;
        int64_t n = brisk_shape_numel(&so);
        double *ref = malloc((size_t)n * sizeof *ref);
        for (int64_t i = 0; i < n; i++) {
            int64_t rem = i, idx[3];
            for (int d = 2; d >= 0; d--) idx[d] = rem % so.d[d], rem /= so.d[d];
            idx[axis] += start;
            ref[i] = oc_val(&c, x)[(idx[0] * 5 + idx[1]) * 6 + idx[2]];
        }
        char what[32];
        snprintf(what, sizeof what, "slice axis %d", axis);
        oc_check(&c, out, ref, what);
        free(ref);
        oc_free(&c);
    }
}

/* reshape is a view: its gradient is the reshaped dy; through an op so it matters. */
static void test_reshape(void) {
    oc c;
    oc_init(&c, 100);
    int x = oc_param(&c, "x", brisk_shape3(2, 3, 4));
    int r = brisk_reshape(c.g, x, brisk_shape2(4, 6));
    int w = oc_param(&c, "w", brisk_shape1(6));
    int out = brisk_mul(c.g, r, w);
    const float *vx = oc_val(&c, x), *vw = oc_val(&c, w);
    double ref[24];
    for (int i = 0; i < 24; i++) ref[i] = (double)vx[i] * vw[i % 6];
    oc_check(&c, out, ref, "reshape then mul");
    oc_free(&c);

    oc_init(&c, 101);
    x = oc_param(&c, "x", brisk_shape2(3, 4));
    int rr = brisk_reshape(c.g, brisk_relu(c.g, x), brisk_shape1(12)); /* output is an alias */
    vx = oc_val(&c, x);
    for (int i = 0; i < 12; i++) ref[i] = vx[i] > 0 ? vx[i] : 0;
    oc_check(&c, rr, ref, "reshape as output");
    oc_free(&c);
}

static void check_transpose(brisk_shape s, const int *perm, const char *what) {
    oc c;
    oc_init(&c, 102);
    int x = oc_param(&c, "x", s);
    int out = brisk_transpose(c.g, x, perm);
    REQUIRE(out >= 0);
    brisk_shape so = c.g->nodes[out].shape;
    int nd = s.ndim;
    int64_t n = brisk_shape_numel(&s), stride[BRISK_MAX_DIMS];
    stride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) stride[d] = stride[d + 1] * s.d[d + 1];
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, off = 0;
        for (int d = nd - 1; d >= 0; d--) {
            off += (rem % so.d[d]) * stride[perm[d]];
            rem /= so.d[d];
        }
        ref[i] = oc_val(&c, x)[off];
    }
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_transpose(void) {
    check_transpose(brisk_shape2(5, 7), (int[]){1, 0}, "transpose 2-D");
    check_transpose(brisk_shape3(2, 3, 4), (int[]){0, 2, 1}, "transpose last two");
    check_transpose(brisk_shape3(2, 3, 4), (int[]){2, 0, 1}, "transpose (2,0,1)");
    check_transpose(brisk_shape4(2, 3, 4, 5), (int[]){0, 2, 1, 3}, "transpose heads");
    check_transpose(brisk_shape4(2, 3, 4, 5), (int[]){3, 1, 0, 2}, "transpose (3,1,0,2)");
}

/* f32 -> bf16 -> f32 rounds like brisk_f32_to_bf16; the gradient passes straight
 * through both casts (rounded to bf16 on the way). FD is meaningless across a
 * rounding step, so the gradient is checked exactly instead. */
static void test_cast(void) {
    oc c;
    oc_init(&c, 103);
    int x = oc_param(&c, "x", brisk_shape2(4, 5));
    int out = brisk_cast(c.g, brisk_cast(c.g, x, BRISK_BF16), BRISK_F32);
    REQUIRE(oc_build(&c, out) == 0);
    float *got = oc_read(&c, out), *gx = oc_read(&c, c.g->params[0].grad_node);
    REQUIRE(got && gx);
    const float *vx = oc_val(&c, x);
    for (int i = 0; i < 20; i++) {
        CHECK(got[i] == brisk_bf16_to_f32(brisk_f32_to_bf16(vx[i])));
        CHECK(gx[i] == brisk_bf16_to_f32(brisk_f32_to_bf16(c.w[i])));
    }
    free(got);
    free(gx);
    oc_free(&c);

    oc_init(&c, 104);
    x = oc_param(&c, "x", brisk_shape1(6));
    int h = brisk_cast(c.g, brisk_cast(c.g, x, BRISK_F16), BRISK_F32);
    REQUIRE(oc_build(&c, h) == 0);
    got = oc_read(&c, h);
    REQUIRE(got);
    for (int i = 0; i < 6; i++) CHECK(got[i] == brisk_f16_to_f32(brisk_f32_to_f16(oc_val(&c, x)[i])));
    free(got);
    oc_free(&c);
}

/* f32 -> i32 truncates toward zero (the CPU backend's documented rule); an integer
 * path carries no gradient, so x's gradient is zero. */
static void test_cast_int(void) {
    oc c;
    oc_init(&c, 105);
    int x = oc_param(&c, "x", brisk_shape1(6));
    int out = brisk_cast(c.g, brisk_cast(c.g, x, BRISK_I32), BRISK_F32);
    float xv[6] = {2.7f, -2.7f, 0.0f, 41.0f, -0.5f, 1e3f};
    memcpy(c.pval[0], xv, sizeof xv);
    REQUIRE(oc_build(&c, out) == 0);
    float *got = oc_read(&c, out), *gx = oc_read(&c, c.g->params[0].grad_node);
    REQUIRE(got && gx);
    float want[6] = {2, -2, 0, 41, 0, 1000};
    for (int i = 0; i < 6; i++) CHECKF(got[i] == want[i] && gx[i] == 0, "[%d] %g %g", i, got[i], gx[i]);
    free(got);
    free(gx);
    oc_free(&c);
}

/* flatten(x, start_dim) = a view with the dims from start_dim merged (torch.flatten) */
static void test_flatten(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(2, 3, 4, 5));
    int a = brisk_flatten(g, x, 1), b = brisk_flatten(g, x, -2), c = brisk_flatten(g, x, 0);
    REQUIRE(a >= 0 && b >= 0 && c >= 0);
    CHECK(brisk_shape_equal(&g->nodes[a].shape, &(brisk_shape){2, {2, 60}}));
    CHECK(brisk_shape_equal(&g->nodes[b].shape, &(brisk_shape){3, {2, 3, 20}}));
    CHECK(brisk_shape_equal(&g->nodes[c].shape, &(brisk_shape){1, {120}}));
    CHECK(g->nodes[a].op == BRISK_OP_RESHAPE);
    CHECK(brisk_flatten(g, x, 4) == -1);
    brisk_error e;
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "flatten") && strstr(e.msg, "axis 4"), "%s", e.msg);
    brisk_graph_free(g);
}

TEST_MAIN(T(test_concat), T(test_slice), T(test_reshape), T(test_transpose), T(test_cast), T(test_cast_int),
          T(test_flatten))
