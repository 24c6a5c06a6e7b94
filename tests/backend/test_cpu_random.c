/* Random ops and DROPOUT on the CPU backend against the Philox convention of
 * core.h, computed here element by element with brisk_philox4x32 /
 * brisk_philox_normal4 (key = seed, counter = {block lo, block hi, stream, step},
 * element i = word i % 4 of block i / 4): bit-equal results, for sizes that are not
 * multiples of 4 and sizes that run on 2 threads. Also: dropout's keep rule
 * (unit(u) > p) and scale, identity in eval and at p = 0, all zeros at p = 1, a
 * different mask for another stream or step, and RANDINT/RAND_UNIFORM ranges. */
#include "backend/cpu/cpu_internal.h"
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static void words(const brisk_step_state *st, uint32_t stream, int64_t i, uint32_t out[4]) {
    uint64_t b = (uint64_t)i / 4;
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), stream, st->rng_step};
    uint32_t key[2] = {(uint32_t)st->seed, (uint32_t)(st->seed >> 32)};
    brisk_philox4x32(ctr, key, out);
}

static void test_randn(void) {
    const int64_t sizes[] = {35, 100003};
    for (int s = 0; s < 2; s++)
        for (int bi = 0; bi < 2; bi++) {
            int64_t n = sizes[s];
            tgraph t;
            tg_init(&t);
            brisk_attr at = tg_attr0();
            at.rng = 5;
            at.shape2 = brisk_shape1(n);
            int o = tg_node(&t, BRISK_OP_RANDN, BRISK_F32, at.shape2, &at, 0, NULL);
            brisk_step_state st = tg_state(1);
            brisk_error err_s = {0}, *err = &err_s;
            REQUIRE_OK(tg_run_st(bi ? be2 : be1, &t, o, &st, err), err);
            int64_t bad = 0;
            double m = 0, v = 0;
            for (int64_t i = 0; i < n; i++) {
                uint64_t b = (uint64_t)i / 4;
                uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 5, st.rng_step};
                uint32_t key[2] = {(uint32_t)st.seed, (uint32_t)(st.seed >> 32)};
                float z[4];
                brisk_philox_normal4(ctr, key, z);
                if (memcmp(&z[i % 4], &tg_f(&t, o)[i], 4)) bad++;
                m += z[i % 4];
                v += (double)z[i % 4] * z[i % 4];
            }
            CHECKF(bad == 0, "randn n=%lld threads=%d: %lld differ from brisk_philox_normal4", (long long)n, bi + 1,
                   (long long)bad);
            if (n > 1000) {
                CHECK_NEAR(m / n, 0.0, 0.02);
                CHECK_NEAR(v / n, 1.0, 0.03);
            }
            tg_free(&t);
        }
}

static void test_uniform_and_randint(void) {
    int64_t n = 40001;
    tgraph t;
    tg_init(&t);
    brisk_attr au = tg_attr0(), ai = tg_attr0();
    au.rng = 9;
    au.shape2 = brisk_shape1(n);
    au.f0 = -3.0f;
    au.f1 = 0.5f;
    ai.rng = 10;
    ai.shape2 = brisk_shape1(n);
    ai.i0 = -7;
    ai.i1 = 43;
    int u = tg_node(&t, BRISK_OP_RAND_UNIFORM, BRISK_F32, au.shape2, &au, 0, NULL);
    int r = tg_node(&t, BRISK_OP_RANDINT, BRISK_I32, ai.shape2, &ai, 0, NULL);
    brisk_step_state st = tg_state(1);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run_st(be2, &t, u, &st, err), err);
    REQUIRE_OK(tg_run_st(be2, &t, r, &st, err), err);
    int64_t bad = 0, hits[50] = {0};
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        words(&st, 9, i, w);
        float want = -3.0f + 3.5f * (1.0f - brisk_u32_to_unit(w[i % 4]));
        if (want >= 0.5f) want = nextafterf(0.5f, -3.0f);
        float got = tg_f(&t, u)[i];
        if (got != want || !(got >= -3.0f && got < 0.5f)) bad++;
        words(&st, 10, i, w);
        int32_t wi = (int32_t)(-7 + (int64_t)(((uint64_t)w[i % 4] * 50u) >> 32));
        if (tg_i(&t, r)[i] != wi || wi < -7 || wi >= 43) bad++;
        else hits[wi + 7]++;
    }
    CHECKF(bad == 0, "%lld uniform/randint values differ from the convention", (long long)bad);
    for (int k = 0; k < 50; k++) CHECKF(hits[k] > 600 && hits[k] < 1000, "randint value %d drawn %lld times", k - 7, (long long)hits[k]);
    /* an empty range is an error */
    t.nodes[r].attr.i1 = -7;
    brisk_error e2 = {0};
    CHECK(tg_run_st(be2, &t, r, &st, &e2) == BRISK_ERR_INVALID);
    tg_free(&t);
}

static void run_dropout(brisk_backend *be, int64_t n, float p, int training, uint32_t step) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(1, n));
    brisk_attr at = tg_attr0();
    at.rng = 3;
    at.f0 = p;
    int o = tg_node(&t, BRISK_OP_DROPOUT, BRISK_F32, brisk_shape2(1, n), &at, 1, &x);
    brisk_step_state st = tg_state(training);
    st.rng_step = step;
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run_st(be, &t, o, &st, err), err);
    float scale = 1.0f / (1.0f - p);
    int64_t bad = 0, kept = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        words(&st, 3, i, w);
        int keep = !training || brisk_u32_to_unit(w[i % 4]) > p;
        float want = !training || p == 0.0f ? tg_f(&t, x)[i] : keep ? tg_f(&t, x)[i] * scale : 0.0f;
        if (memcmp(&want, &tg_f(&t, o)[i], 4)) bad++;
        kept += keep;
    }
    CHECKF(bad == 0, "dropout n=%lld p=%g training=%d: %lld elements differ", (long long)n, p, training, (long long)bad);
    if (training && n > 10000) CHECK_NEAR((double)kept / n, 1.0 - p, 0.01);
    tg_free(&t);
}

static void test_dropout(void) {
    for (int bi = 0; bi < 2; bi++) {
        brisk_backend *be = bi ? be2 : be1;
        run_dropout(be, 37, 0.1f, 1, 0);
        run_dropout(be, 100001, 0.1f, 1, 3);
        run_dropout(be, 100001, 0.5f, 1, 4);
        run_dropout(be, 1001, 0.3f, 0, 4);  /* eval: identity */
        run_dropout(be, 1001, 0.0f, 1, 4);  /* p = 0: identity */
        run_dropout(be, 1001, 1.0f, 1, 4);  /* p = 1: zeros */
    }
}

/* Another step or stream gives another mask; the same (stream, step) the same one,
 * which is what the backward (DROPOUT of dy) relies on. */
static void test_dropout_masks(void) {
    int64_t n = 4096;
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape1(n));
    for (int64_t i = 0; i < n; i++) tg_f(&t, x)[i] = 1.0f;
    brisk_attr at = tg_attr0();
    at.rng = 3;
    at.f0 = 0.5f;
    int a = tg_node(&t, BRISK_OP_DROPOUT, BRISK_F32, brisk_shape1(n), &at, 1, &x);
    int b = tg_node(&t, BRISK_OP_DROPOUT, BRISK_F32, brisk_shape1(n), &at, 1, &x);
    at.rng = 4;
    int c = tg_node(&t, BRISK_OP_DROPOUT, BRISK_F32, brisk_shape1(n), &at, 1, &x);
    brisk_step_state st = tg_state(1);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run_st(be2, &t, a, &st, err), err);
    REQUIRE_OK(tg_run_st(be1, &t, b, &st, err), err);
    REQUIRE_OK(tg_run_st(be2, &t, c, &st, err), err);
    CHECK(memcmp(t.buf[a], t.buf[b], (size_t)n * 4) == 0);
    CHECK(memcmp(t.buf[a], t.buf[c], (size_t)n * 4) != 0);
    st.rng_step++;
    REQUIRE_OK(tg_run_st(be2, &t, b, &st, err), err);
    CHECK(memcmp(t.buf[a], t.buf[b], (size_t)n * 4) != 0);
    tg_free(&t);
}

/* cpu_dropout_factors from any element on, as the fused kernels and a rank's shard start: a
 * span beginning inside a block and running past a batch of 64 blocks keeps element
 * e0 + i's word i of the stream */
static void test_dropout_spans(void) {
    brisk_step_state st = tg_state(3);
    const uint32_t stream = 7;
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    const int64_t starts[] = {0, 1, 2, 3, 5, 255, 1000001}, lens[] = {1, 3, 7, 257, 1029};
    float out[1029];
    int64_t bad = 0;
    for (int a = 0; a < 7; a++)
        for (int l = 0; l < 5; l++) {
            int64_t e0 = starts[a], n = lens[l];
            cpu_dropout_factors((uint32_t)st.seed, (uint32_t)(st.seed >> 32), stream, st.rng_step, (uint64_t)e0, n, p,
                                out);
            for (int64_t i = 0; i < n; i++) {
                uint32_t w[4];
                words(&st, stream, e0 + i, w);
                float want = brisk_u32_to_unit(w[(e0 + i) % 4]) > p ? scale : 0.0f;
                bad += memcmp(&want, &out[i], 4) != 0;
            }
        }
    CHECKF(bad == 0, "dropout factors from mid-block starts: %lld differ from brisk_philox4x32", (long long)bad);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_randn), T(test_uniform_and_randint), T(test_dropout), T(test_dropout_masks),
                   T(test_dropout_spans)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
