/* GATHER (and SCATTER_ADD, its gradient, with repeated indices) and SINUSOIDAL (and
 * SINUSOIDAL_GRAD for float timesteps): forward vs float64, backward vs finite
 * differences. */
#include "ops/opcheck.h"

static void test_gather(void) {
    oc c;
    oc_init(&c, 110);
    const int V = 10, D = 4;
    int table = oc_param(&c, "table", brisk_shape2(V, D));
    int32_t idx[15];
    for (int i = 0; i < 15; i++) idx[i] = oc_randint(&c, V);
    idx[3] = idx[7] = idx[11] = 2; /* repeats must accumulate in the gradient */
    int ix = oc_const_i32(&c, brisk_shape2(3, 5), idx);
    int out = brisk_gather(c.g, table, ix);
    REQUIRE(out >= 0 && c.g->nodes[out].shape.ndim == 3);
    double ref[15 * 4];
    for (int i = 0; i < 15; i++)
        for (int d = 0; d < D; d++) ref[i * D + d] = oc_val(&c, table)[idx[i] * D + d];
    c.max_fd = 40;
    oc_check(&c, out, ref, "gather");
    oc_free(&c);
}

/* A 3-D table: each index picks a [2, 3] block. */
static void test_gather_blocks(void) {
    oc c;
    oc_init(&c, 111);
    int table = oc_param(&c, "table", brisk_shape3(6, 2, 3));
    int32_t idx[4] = {5, 0, 5, 3};
    int out = brisk_gather(c.g, table, oc_const_i32(&c, brisk_shape1(4), idx));
    double ref[4 * 6];
    for (int i = 0; i < 4; i++)
        for (int d = 0; d < 6; d++) ref[i * 6 + d] = oc_val(&c, table)[idx[i] * 6 + d];
    oc_check(&c, out, ref, "gather blocks");
    oc_free(&c);
}

/* brisk_embedding: a [V, D] table by [B, T] indices, many repeated (the gradient sums
 * them); a table of another rank is refused with the shapes named */
static void test_embedding(void) {
    oc c;
    oc_init(&c, 115);
    const int V = 5, D = 3;
    int table = oc_param(&c, "table", brisk_shape2(V, D));
    int32_t idx[12] = {1, 1, 4, 0, 1, 4, 4, 1, 2, 1, 1, 0};
    int out = brisk_embedding(c.g, table, oc_const_i32(&c, brisk_shape2(3, 4), idx));
    REQUIRE(out >= 0 && brisk_shape_equal(&c.g->nodes[out].shape, &(brisk_shape){3, {3, 4, D}}));
    double ref[36];
    for (int i = 0; i < 12; i++)
        for (int d = 0; d < D; d++) ref[i * D + d] = oc_val(&c, table)[idx[i] * D + d];
    oc_check(&c, out, ref, "embedding");
    oc_free(&c);
    brisk_graph *g = brisk_graph_new();
    int t3 = brisk_param(g, "t", brisk_shape3(4, 2, 2), BRISK_INIT_ZEROS, 0, 0);
    int ix = brisk_input(g, "i", BRISK_I32, brisk_shape1(3));
    CHECK(brisk_embedding(g, t3, ix) == -1);
    brisk_error e;
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "embedding") && strstr(e.msg, "[4, 2, 2]"), "%s", e.msg);
    brisk_graph_free(g);
}

static void test_gather_bad_index(void) {
    oc c;
    oc_init(&c, 112);
    int table = oc_param(&c, "table", brisk_shape2(4, 3));
    int32_t idx[2] = {1, -1};
    int out = brisk_gather(c.g, table, oc_const_i32(&c, brisk_shape1(2), idx));
    CHECK(oc_build(&c, out) != 0); /* the step must fail, not read out of bounds */
    oc_free(&c);
}

static void sinusoidal_ref(const double *t, int n, int dim, double *out) {
    int half = dim / 2;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < half; k++) {
            double f = exp(-log(10000.0) * k / half);
            out[i * dim + k] = sin(t[i] * f);
            out[i * dim + half + k] = cos(t[i] * f);
        }
}

static void test_sinusoidal_float(void) {
    oc c;
    oc_init(&c, 113);
    int t = oc_param_avoid(&c, "t", brisk_shape1(6), 0, 10, 0);
    int out = brisk_sinusoidal(c.g, t, 8);
    double tv[6], ref[48];
    for (int i = 0; i < 6; i++) tv[i] = oc_val(&c, t)[i];
    sinusoidal_ref(tv, 6, 8, ref);
    c.fwd_rtol = 2e-5; /* sin of arguments up to 10 in f32 */
    oc_check(&c, out, ref, "sinusoidal f32");
    oc_free(&c);
}

static void test_sinusoidal_int(void) {
    oc c;
    oc_init(&c, 114);
    int32_t tv[5] = {0, 1, 7, 100, 999};
    int out = brisk_sinusoidal(c.g, oc_const_i32(&c, brisk_shape1(5), tv), 16);
    double td[5], ref[80];
    for (int i = 0; i < 5; i++) td[i] = tv[i];
    sinusoidal_ref(td, 5, 16, ref);
    REQUIRE(oc_build(&c, out) == 0);
    float *got = oc_read(&c, out);
    REQUIRE(got);
    /* Arguments up to 999 rad: f32 argument rounding allows ~1e-4 absolute. */
    for (int i = 0; i < 80; i++) CHECKF(fabs(got[i] - ref[i]) <= 2e-4, "[%d] %g vs %g", i, got[i], ref[i]);
    free(got);
    oc_free(&c);
}

TEST_MAIN(T(test_gather), T(test_gather_blocks), T(test_embedding), T(test_gather_bad_index), T(test_sinusoidal_float),
          T(test_sinusoidal_int))
