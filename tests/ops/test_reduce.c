/* SUM and MEAN over axis sets (with and without keepdim), SUM_TO and EXPAND:
 * forward vs float64, backward vs finite differences. */
#include "ops/opcheck.h"

/* Reference reduction of v (shape s) over `axes` into out (keepdim layout = same
 * flat order either way). */
static void ref_reduce(const float *v, brisk_shape s, uint32_t axes, int mean, double *out, int64_t n_out) {
    brisk_shape ks = s;
    for (int d = 0; d < s.ndim; d++) if (axes & (1u << d)) ks.d[d] = 1;
    int64_t n = brisk_shape_numel(&s), count = n / n_out;
    for (int64_t i = 0; i < n_out; i++) out[i] = 0;
    /* Each input element lands in the keepdim cell of its non-reduced coordinates. */
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, o = 0, stride = 1;
        for (int d = s.ndim - 1; d >= 0; d--) {
            int64_t idx = rem % s.d[d];
            rem /= s.d[d];
            if (ks.d[d] != 1 || s.d[d] == 1) o += (ks.d[d] == 1 ? 0 : idx) * stride;
            stride *= ks.d[d];
        }
        out[o] += v[i];
    }
    if (mean) for (int64_t i = 0; i < n_out; i++) out[i] /= (double)count;
}

static void check_reduce(int mean, uint32_t axes, int keepdim) {
    oc c;
    oc_init(&c, 50 + axes * 2 + (uint64_t)keepdim);
    brisk_shape s = brisk_shape4(2, 3, 4, 5);
    int x = oc_param(&c, "x", s);
    int out = mean ? brisk_mean(c.g, x, axes, keepdim) : brisk_sum(c.g, x, axes, keepdim);
    REQUIRE(out >= 0);
    int64_t n_out = brisk_shape_numel(&c.g->nodes[out].shape);
    double *ref = malloc((size_t)n_out * sizeof *ref);
    ref_reduce(oc_val(&c, x), s, axes, mean, ref, n_out);
    char what[64];
    snprintf(what, sizeof what, "%s axes 0x%x keepdim %d", mean ? "mean" : "sum", axes, keepdim);
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_sum_mean(void) {
    uint32_t sets[] = {0x1, 0x2, 0x8, 0x5, 0xA, 0x6, 0xF, 0x7};
    for (int mean = 0; mean < 2; mean++)
        for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
            for (int keep = 0; keep < 2; keep++) check_reduce(mean, sets[i], keep);
}

static void check_sum_to(brisk_shape s, brisk_shape t, const char *what) {
    oc c;
    oc_init(&c, 60);
    int x = oc_param(&c, "x", s);
    int out = brisk_sum_to(c.g, x, t);
    REQUIRE(out >= 0);
    int64_t n = brisk_shape_numel(&s), nt = brisk_shape_numel(&t);
    double *ref = calloc((size_t)nt, sizeof *ref);
    const float *v = oc_val(&c, x);
    for (int64_t i = 0; i < n; i++) ref[oc_bcast(&t, &s, i)] += v[i];
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_sum_to(void) {
    check_sum_to(brisk_shape3(3, 4, 5), brisk_shape2(4, 1), "sum_to [3,4,5]->[4,1]");
    check_sum_to(brisk_shape3(3, 4, 5), brisk_shape1(5), "sum_to [3,4,5]->[5]");
    check_sum_to(brisk_shape3(3, 4, 5), brisk_shape3(3, 1, 5), "sum_to [3,4,5]->[3,1,5]");
    check_sum_to(brisk_shape2(6, 7), brisk_shape_make(0, NULL), "sum_to [6,7]->[]");
    check_sum_to(brisk_shape2(6, 7), brisk_shape2(6, 7), "sum_to identity");
}

static void check_expand(brisk_shape s, brisk_shape t, const char *what) {
    oc c;
    oc_init(&c, 61);
    int x = oc_param(&c, "x", s);
    int out = brisk_expand(c.g, x, t);
    REQUIRE(out >= 0);
    int64_t nt = brisk_shape_numel(&t);
    double *ref = malloc((size_t)nt * sizeof *ref);
    const float *v = oc_val(&c, x);
    for (int64_t i = 0; i < nt; i++) ref[i] = v[oc_bcast(&s, &t, i)];
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_expand(void) {
    check_expand(brisk_shape2(4, 1), brisk_shape3(3, 4, 5), "expand [4,1]->[3,4,5]");
    check_expand(brisk_shape1(5), brisk_shape3(2, 3, 5), "expand [5]->[2,3,5]");
    check_expand(brisk_shape3(2, 1, 3), brisk_shape4(2, 2, 4, 3), "expand [2,1,3]->[2,2,4,3]");
    check_expand(brisk_shape_make(0, NULL), brisk_shape2(3, 2), "expand []->[3,2]");
}

TEST_MAIN(T(test_sum_mean), T(test_sum_to), T(test_expand))
