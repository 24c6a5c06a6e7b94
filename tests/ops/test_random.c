/* RANDN, RAND_UNIFORM, RANDINT: the Philox convention shared by every backend
 * (element i = word i % 4 of block i / 4 under counter {block, 0, stream,
 * rng_step}), ranges and moments, and reproducibility from seed and step. */
#include "ops/opcheck.h"

#include <stdint.h>

/* Runs a one-op graph at (seed, step) and returns its output (f32 or i32 bits). */
static void *run_random(int which, brisk_shape s, uint64_t seed, uint32_t step, uint32_t *stream) {
    oc c;
    oc_init(&c, 1);
    int out = which == 0 ? brisk_randn(c.g, s) : which == 1 ? brisk_rand_uniform(c.g, s, -2.0f, 3.0f)
                         : brisk_randint(c.g, s, -3, 5);
    void *v = NULL;
    if (out >= 0 && oc_build(&c, out) == 0) {
        brisk_error e;
        c.ex->step.seed = seed;
        c.ex->step.rng_step = step;
        if (brisk_exec_run(c.ex, BRISK_RUN_PREDICT, &e) == BRISK_OK) v = oc_read(&c, out);
        else fprintf(stderr, "%s\n", e.msg);
        if (stream) *stream = c.g->nodes[out].attr.rng;
    }
    oc_free(&c);
    return v;
}

static void test_randn(void) {
    const int n = 40003; /* not a multiple of 4: the tail block is partial */
    uint32_t stream = 0;
    const uint64_t seed = 0xabcdef01234ull;
    float *v = run_random(0, brisk_shape1(n), seed, 9, &stream);
    REQUIRE(v);
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int bad = 0;
    for (int i = 0; i < n; i += 997) {
        uint32_t ctr[4] = {(uint32_t)i / 4, 0, stream, 9};
        float want[4];
        brisk_philox_normal4(ctr, key, want);
        if (fabs(v[i] - want[i % 4]) > 1e-5) bad++;
    }
    CHECKF(bad == 0, "%d randn values differ from the Philox convention", bad);
    CHECK(fabs(v[n - 1] - v[n - 1]) == 0); /* the tail was written (not NaN) */
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) s += v[i], s2 += (double)v[i] * v[i];
    CHECK_NEAR(s / n, 0, 0.03);
    CHECK_NEAR(s2 / n, 1, 0.03);
    free(v);
}

static void test_rand_uniform(void) {
    const int n = 20001;
    float *v = run_random(1, brisk_shape2(3, n / 3), 5, 1, NULL);
    REQUIRE(v);
    int m = 3 * (n / 3), out = 0;
    double s = 0;
    for (int i = 0; i < m; i++) {
        out += !(v[i] >= -2.0f && v[i] < 3.0f);
        s += v[i];
    }
    CHECKF(out == 0, "%d values outside [-2, 3)", out);
    CHECK_NEAR(s / m, 0.5, 0.05);
    free(v);
}

static void test_randint(void) {
    const int n = 8000;
    int32_t *v = run_random(2, brisk_shape1(n), 5, 1, NULL);
    REQUIRE(v);
    int hist[8] = {0}, out = 0;
    for (int i = 0; i < n; i++) {
        if (v[i] < -3 || v[i] >= 5) out++;
        else hist[v[i] + 3]++;
    }
    CHECKF(out == 0, "%d values outside [-3, 5)", out);
    for (int k = 0; k < 8; k++) CHECKF(abs(hist[k] - n / 8) < n / 20, "value %d drawn %d times", k - 3, hist[k]);
    free(v);
}

static void test_reproducible(void) {
    for (int which = 0; which < 3; which++) {
        uint32_t *a = run_random(which, brisk_shape1(64), 11, 2, NULL);
        uint32_t *b = run_random(which, brisk_shape1(64), 11, 2, NULL);
        uint32_t *c = run_random(which, brisk_shape1(64), 11, 3, NULL);
        uint32_t *d = run_random(which, brisk_shape1(64), 12, 2, NULL);
        REQUIRE(a && b && c && d);
        CHECK(memcmp(a, b, 256) == 0);
        CHECK(memcmp(a, c, 256) != 0);
        CHECK(memcmp(a, d, 256) != 0);
        free(a), free(b), free(c), free(d);
    }
}

TEST_MAIN(T(test_randn), T(test_rand_uniform), T(test_randint), T(test_reproducible))
