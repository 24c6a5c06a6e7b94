/* Segment sum (sorted: SEGMENT_SUM; unsorted: SCATTER_ADD) and segment mean, the
 * aggregations of graph networks: forward vs float64, backward (a GATHER) vs finite
 * differences, with empty segments and repeated receivers; builder errors for unsorted
 * or out-of-range const indices. */
#include "ops/opcheck.h"

static void segment_case(uint64_t seed, int sorted, int mean) {
    oc c;
    oc_init(&c, seed);
    const int V = 7, I = 16, D = 3;
    int x = oc_param(&c, "x", brisk_shape2(I, D));
    int32_t idx[16];
    for (int i = 0; i < I; i++) idx[i] = oc_randint(&c, V);
    idx[5] = 6;
    if (sorted)
        for (int i = 1; i < I; i++) /* insertion sort */
            for (int j = i; j > 0 && idx[j] < idx[j - 1]; j--) { int32_t t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t; }
    for (int i = 0; i < I; i++) if (idx[i] == 3) idx[i] = 4; /* segment 3 stays empty */
    int ix = oc_const_i32(&c, brisk_shape1(I), idx);
    int out = mean ? brisk_segment_mean(c.g, x, ix, V, sorted) : brisk_segment_sum(c.g, x, ix, V, sorted);
    REQUIRE(out >= 0);
    if (!mean) CHECK(c.g->nodes[out].op == (sorted ? BRISK_OP_SEGMENT_SUM : BRISK_OP_SCATTER_ADD));
    double ref[7 * 3] = {0}, cnt[7] = {0};
    for (int i = 0; i < I; i++) {
        cnt[idx[i]] += 1;
        for (int d = 0; d < D; d++) ref[idx[i] * D + d] += oc_val(&c, x)[i * D + d];
    }
    if (mean)
        for (int v = 0; v < V; v++)
            for (int d = 0; d < D; d++) ref[v * D + d] = cnt[v] ? ref[v * D + d] / cnt[v] : 0.0;
    c.max_fd = 48;
    oc_check(&c, out, ref, sorted ? (mean ? "segment mean sorted" : "segment sum sorted")
                                  : (mean ? "segment mean unsorted" : "segment sum unsorted"));
    oc_free(&c);
}

static void test_segment_sum(void) { segment_case(120, 1, 0); segment_case(121, 0, 0); }
static void test_segment_mean(void) { segment_case(122, 1, 1); segment_case(123, 0, 1); }

/* Rows of more than one dim: [I, 2, 3] into [V, 2, 3]. */
static void test_segment_blocks(void) {
    oc c;
    oc_init(&c, 124);
    int x = oc_param(&c, "x", brisk_shape3(5, 2, 3));
    int32_t idx[5] = {0, 0, 2, 2, 2};
    int out = brisk_segment_sum(c.g, x, oc_const_i32(&c, brisk_shape1(5), idx), 3, 1);
    double ref[18] = {0};
    for (int i = 0; i < 5; i++)
        for (int d = 0; d < 6; d++) ref[idx[i] * 6 + d] += oc_val(&c, x)[i * 6 + d];
    oc_check(&c, out, ref, "segment sum blocks");
    oc_free(&c);
}

static void test_segment_builder_errors(void) {
    oc c;
    oc_init(&c, 125);
    int x = oc_param(&c, "x", brisk_shape2(3, 2));
    int32_t unsorted[3] = {0, 2, 1}, range[3] = {0, 1, 5};
    CHECK(brisk_segment_sum(c.g, x, oc_const_i32(&c, brisk_shape1(3), unsorted), 4, 1) < 0);
    CHECK(strstr(c.g->err.msg, "not sorted") != NULL);
    oc_free(&c);
    oc_init(&c, 126);
    x = oc_param(&c, "x", brisk_shape2(3, 2));
    CHECK(brisk_segment_sum(c.g, x, oc_const_i32(&c, brisk_shape1(3), range), 4, 0) < 0);
    CHECKF(strstr(c.g->err.msg, "index 5") && strstr(c.g->err.msg, "[0, 4)"), "%s", c.g->err.msg);
    oc_free(&c);
    oc_init(&c, 127);
    x = oc_param(&c, "x", brisk_shape2(3, 2));
    CHECK(brisk_segment_sum(c.g, x, oc_const_i32(&c, brisk_shape1(2), range), 4, 0) < 0); /* I differs */
    oc_free(&c);
    oc_init(&c, 128); /* mean needs const indices */
    x = oc_param(&c, "x", brisk_shape2(3, 2));
    int in = brisk_input(c.g, "idx", BRISK_I32, brisk_shape1(3));
    CHECK(brisk_segment_mean(c.g, x, in, 4, 0) < 0);
    oc_free(&c);
}

TEST_MAIN(T(test_segment_sum), T(test_segment_mean), T(test_segment_blocks), T(test_segment_builder_errors))
