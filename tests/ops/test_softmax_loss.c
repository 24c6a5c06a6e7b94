/* SOFTMAX, LOG_SOFTMAX, CROSS_ENTROPY and MSE (and through them the fused _GRAD
 * ops): forward vs float64, backward vs finite differences. */
#include "ops/opcheck.h"

static void check_softmax(int log_form) {
    oc c;
    oc_init(&c, 70 + (uint64_t)log_form);
    const int R = 12, C = 7;
    int x = oc_param_avoid(&c, "x", brisk_shape3(3, 4, C), -4, 4, 0);
    int out = log_form ? brisk_log_softmax(c.g, x) : brisk_softmax(c.g, x);
    const float *v = oc_val(&c, x);
    double ref[12 * 7];
    for (int r = 0; r < R; r++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < C; j++) m = fmax(m, v[r * C + j]);
        for (int j = 0; j < C; j++) s += exp(v[r * C + j] - m);
        for (int j = 0; j < C; j++)
            ref[r * C + j] = log_form ? v[r * C + j] - m - log(s) : exp(v[r * C + j] - m) / s;
    }
    c.max_fd = 40;
    oc_check(&c, out, ref, log_form ? "log_softmax" : "softmax");
    oc_free(&c);
}

static void test_softmax(void) { check_softmax(0); }
static void test_log_softmax(void) { check_softmax(1); }

/* Large logits: a kernel that forgets to subtract the max overflows. */
static void test_softmax_large_logits(void) {
    oc c;
    oc_init(&c, 72);
    int x = oc_param_avoid(&c, "x", brisk_shape2(2, 5), 100, 110, 0);
    int out = brisk_log_softmax(c.g, x);
    const float *v = oc_val(&c, x);
    double ref[10];
    for (int r = 0; r < 2; r++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < 5; j++) m = fmax(m, v[r * 5 + j]);
        for (int j = 0; j < 5; j++) s += exp(v[r * 5 + j] - m);
        for (int j = 0; j < 5; j++) ref[r * 5 + j] = v[r * 5 + j] - m - log(s);
    }
    /* The rounding of inputs near 100 limits relative accuracy of the small outputs. */
    c.fwd_rtol = 1e-5;
    c.fd_atol = 5e-3;
    oc_check(&c, out, ref, "log_softmax large");
    oc_free(&c);
}

static void check_cross_entropy(brisk_shape ls, const char *what) {
    oc c;
    oc_init(&c, 73);
    int64_t C = ls.d[ls.ndim - 1], R = brisk_shape_numel(&ls) / C;
    int x = oc_param_avoid(&c, "logits", ls, -3, 3, 0);
    brisk_shape rs = ls;
    rs.ndim--;
    int32_t *lab = malloc((size_t)R * sizeof *lab);
    for (int64_t r = 0; r < R; r++) lab[r] = oc_randint(&c, (int)C);
    int labels = oc_const_i32(&c, rs, lab);
    int out = brisk_cross_entropy(c.g, x, labels);
    const float *v = oc_val(&c, x);
    double loss = 0;
    for (int64_t r = 0; r < R; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < C; j++) m = fmax(m, v[r * C + j]);
        for (int64_t j = 0; j < C; j++) s += exp(v[r * C + j] - m);
        loss += -(v[r * C + lab[r]] - m - log(s));
    }
    double ref = loss / (double)R;
    c.max_fd = 48;
    oc_check(&c, out, &ref, what);
    free(lab);
    oc_free(&c);
}

static void test_cross_entropy(void) {
    check_cross_entropy(brisk_shape2(8, 10), "cross_entropy [8,10]");
    check_cross_entropy(brisk_shape3(2, 3, 5), "cross_entropy [2,3,5]");
}

/* A label outside [0, C) is a run-time error, not a crash or a silent NaN. */
static void test_cross_entropy_bad_label(void) {
    oc c;
    oc_init(&c, 74);
    int x = oc_param(&c, "logits", brisk_shape2(3, 4));
    int32_t lab[3] = {0, 4, 1};
    int out = brisk_cross_entropy(c.g, x, oc_const_i32(&c, brisk_shape1(3), lab));
    REQUIRE(oc_build(&c, out) != 0); /* oc_build runs a step, which must fail */
    brisk_error e;
    brisk_status st = brisk_exec_run(c.ex, BRISK_RUN_TRAIN, &e);
    CHECK(st != BRISK_OK);
    if (st != BRISK_OK) CHECKF(strstr(e.msg, "4") != NULL, "message does not name the label: %s", e.msg);
    oc_free(&c);
}

static void test_mse(void) {
    oc c;
    oc_init(&c, 75);
    int p = oc_param(&c, "pred", brisk_shape2(6, 5)), t = oc_param(&c, "target", brisk_shape2(6, 5));
    int out = brisk_mse(c.g, p, t);
    const float *vp = oc_val(&c, p), *vt = oc_val(&c, t);
    double s = 0;
    for (int i = 0; i < 30; i++) s += ((double)vp[i] - vt[i]) * ((double)vp[i] - vt[i]);
    double ref = s / 30;
    oc_check(&c, out, &ref, "mse");
    oc_free(&c);
}

TEST_MAIN(T(test_softmax), T(test_log_softmax), T(test_softmax_large_logits), T(test_cross_entropy),
          T(test_cross_entropy_bad_label), T(test_mse))
