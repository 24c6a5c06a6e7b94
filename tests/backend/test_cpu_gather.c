/* GATHER, SCATTER_ADD, SEGMENT_SUM, SINUSOIDAL and SINUSOIDAL_GRAD on the CPU backend: exact
 * row copies (f32 and i32 tables, multi-dim indices and rows), scatter-add with
 * repeated indices against float64 and bit-equal for 1 and 2 threads, an index out
 * of range as an error naming the op, the value and the range, and the sinusoidal
 * embedding and its t-gradient against float64. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static void test_gather(void) {
    for (int k = 0; k < 2; k++) {
        brisk_dtype dt = k ? BRISK_I32 : BRISK_F32;
        tgraph t;
        tg_init(&t);
        int tab = tg_input(&t, dt, brisk_shape3(11, 3, 5)), idx = tg_input(&t, BRISK_I32, brisk_shape2(4, 7));
        for (int64_t i = 0; i < 28; i++) tg_i(&t, idx)[i] = (int32_t)(tg_rand_u32() % 11);
        if (dt == BRISK_I32)
            for (int64_t i = 0; i < 165; i++) tg_i(&t, tab)[i] = (int32_t)tg_rand_u32();
        int ins[2] = {tab, idx};
        int o = tg_node(&t, BRISK_OP_GATHER, dt, brisk_shape4(4, 7, 3, 5), NULL, 2, ins);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be2, &t, o, err), err);
        int64_t bad = 0;
        for (int64_t i = 0; i < 28; i++)
            if (memcmp((char *)t.buf[o] + i * 60, (char *)t.buf[tab] + tg_i(&t, idx)[i] * 60, 60)) bad++;
        CHECKF(bad == 0, "gather %s: %lld rows wrong", brisk_dtype_name(dt), (long long)bad);
        tg_free(&t);
    }
}

static void test_index_errors(void) {
    const int32_t bad[] = {11, -1, 1 << 30};
    for (int k = 0; k < 3; k++)
        for (int sc = 0; sc < 2; sc++) {
            tgraph t;
            tg_init(&t);
            int idx = tg_input(&t, BRISK_I32, brisk_shape1(6));
            tg_i(&t, idx)[4] = bad[k];
            int o;
            if (sc) {
                int dy = tg_input(&t, BRISK_F32, brisk_shape2(6, 3));
                brisk_attr at = tg_attr0();
                at.shape2 = brisk_shape2(11, 3);
                int ins[2] = {dy, idx};
                o = tg_node(&t, BRISK_OP_SCATTER_ADD, BRISK_F32, at.shape2, &at, 2, ins);
            } else {
                int tab = tg_input(&t, BRISK_F32, brisk_shape2(11, 3));
                int ins[2] = {tab, idx};
                o = tg_node(&t, BRISK_OP_GATHER, BRISK_F32, brisk_shape2(6, 3), NULL, 2, ins);
            }
            brisk_error err = {0};
            CHECK(tg_run(be2, &t, o, &err) == BRISK_ERR_INVALID);
            char want[48];
            snprintf(want, sizeof want, "index %d", bad[k]);
            CHECKF(strstr(err.msg, want) && strstr(err.msg, "[0, 11)") && strstr(err.msg, sc ? "scatter_add" : "gather"),
                   "message: %s", err.msg);
            tg_free(&t);
        }
}

static void test_scatter_add(void) {
    const int64_t V = 37, D = 300, I = 500;
    tgraph t;
    tg_init(&t);
    int dy = tg_input(&t, BRISK_F32, brisk_shape2(I, D)), idx = tg_input(&t, BRISK_I32, brisk_shape1(I));
    for (int64_t i = 0; i < I; i++) tg_i(&t, idx)[i] = (int32_t)(tg_rand_u32() % 20); /* many repeats; rows >= 20 stay 0 */
    brisk_attr at = tg_attr0();
    at.shape2 = brisk_shape2(V, D);
    int ins[2] = {dy, idx};
    int o = tg_node(&t, BRISK_OP_SCATTER_ADD, BRISK_F32, at.shape2, &at, 2, ins);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be1, &t, o, err), err);
    float *first = malloc(V * D * 4);
    memcpy(first, tg_f(&t, o), V * D * 4);
    REQUIRE_OK(tg_run(be2, &t, o, err), err);
    CHECK(memcmp(first, tg_f(&t, o), V * D * 4) == 0);
    double *ref = calloc(V * D, sizeof(double));
    for (int64_t i = 0; i < I; i++)
        for (int64_t j = 0; j < D; j++) ref[tg_i(&t, idx)[i] * D + j] += tg_f(&t, dy)[i * D + j];
    CHECK_REL(tg_f(&t, o), ref, V * D, 1e-6);
    free(first);
    free(ref);
    tg_free(&t);
}

/* SEGMENT_SUM over sorted indices with empty and long segments: bit-equal for 1 to 4
 * threads, across runs, and to SCATTER_ADD (the same additions in the same order), against float64;
 * unsorted indices are an error naming the position. */
static void test_segment_sum(void) {
    const int64_t V = 300, D = 64, I = 2400;
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(I, D)), idx = tg_input(&t, BRISK_I32, brisk_shape1(I));
    for (int64_t i = 0; i < I * D; i++) tg_f(&t, x)[i] = tg_randf(-1, 1);
    int32_t v = 0;
    for (int64_t i = 0; i < I; i++) {
        if (tg_rand_u32() % 6 == 0) v += (int32_t)(tg_rand_u32() % 3); /* gaps = empty segments */
        tg_i(&t, idx)[i] = v < V - 1 ? v : (int32_t)(V - 1);             /* the last one long */
    }
    brisk_attr at = tg_attr0();
    at.shape2 = brisk_shape2(V, D);
    int ins[2] = {x, idx};
    int o = tg_node(&t, BRISK_OP_SEGMENT_SUM, BRISK_F32, at.shape2, &at, 2, ins);
    int sc = tg_node(&t, BRISK_OP_SCATTER_ADD, BRISK_F32, at.shape2, &at, 2, ins);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be1, &t, o, err), err);
    float *first = malloc(V * D * 4);
    memcpy(first, tg_f(&t, o), V * D * 4);
    for (int threads = 2; threads <= 4; threads++) /* twice each: across runs too */
        for (int rep = 0; rep < 2; rep++) {
            brisk_backend *be = threads == 2 ? be2 : brisk_backend_cpu_new(threads);
            REQUIRE_OK(tg_run(be, &t, o, err), err);
            CHECKF(memcmp(first, tg_f(&t, o), V * D * 4) == 0, "%d threads, run %d", threads, rep + 1);
            if (be != be2) be->destroy(be);
        }
    REQUIRE_OK(tg_run(be2, &t, sc, err), err);
    CHECK(memcmp(first, tg_f(&t, sc), V * D * 4) == 0);
    double *ref = calloc(V * D, sizeof(double));
    for (int64_t i = 0; i < I; i++)
        for (int64_t j = 0; j < D; j++) ref[tg_i(&t, idx)[i] * D + j] += tg_f(&t, x)[i * D + j];
    CHECK_REL(first, ref, V * D, 1e-6);
    tg_i(&t, idx)[100] = (int32_t)(V - 1);
    brisk_error e2 = {0};
    CHECK(tg_run(be2, &t, o, &e2) == BRISK_ERR_INVALID);
    CHECKF(strstr(e2.msg, "segment_sum") && strstr(e2.msg, "position 101") && strstr(e2.msg, "sorted"), "%s", e2.msg);
    free(first);
    free(ref);
    tg_free(&t);
}

static void test_sinusoidal(void) {
    for (int ti = 0; ti < 2; ti++) {
        const int64_t N = 16, dim = 32, half = 16;
        tgraph t;
        tg_init(&t);
        int tt = tg_input(&t, ti ? BRISK_I32 : BRISK_F32, brisk_shape1(N));
        for (int64_t i = 0; i < N; i++) {
            if (ti) tg_i(&t, tt)[i] = (int32_t)(tg_rand_u32() % 50);
            else tg_f(&t, tt)[i] = tg_randf(0, 50);
        }
        brisk_attr at = tg_attr0();
        at.i0 = dim;
        int o = tg_node(&t, BRISK_OP_SINUSOIDAL, BRISK_F32, brisk_shape2(N, dim), &at, 1, &tt);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be1, &t, o, err), err);
        double ref[16 * 32];
        for (int64_t r = 0; r < N; r++) {
            double tv = ti ? tg_i(&t, tt)[r] : tg_f(&t, tt)[r];
            for (int64_t k = 0; k < half; k++) {
                double f = exp(-log(10000.0) * (double)k / (double)half);
                ref[r * dim + k] = sin(tv * f);
                ref[r * dim + half + k] = cos(tv * f);
            }
        }
        CHECK_REL(tg_f(&t, o), ref, N * dim, 1e-5);
        tg_free(&t);
    }
    /* gradient wrt t */
    const int64_t N = 9, dim = 12, half = 6;
    tgraph t;
    tg_init(&t);
    int dy = tg_input(&t, BRISK_F32, brisk_shape2(N, dim)), tt = tg_input(&t, BRISK_F32, brisk_shape1(N));
    brisk_attr at = tg_attr0();
    at.i0 = dim;
    int ins[2] = {dy, tt};
    int o = tg_node(&t, BRISK_OP_SINUSOIDAL_GRAD, BRISK_F32, brisk_shape1(N), &at, 2, ins);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be1, &t, o, err), err);
    double ref[9];
    for (int64_t r = 0; r < N; r++) {
        double s = 0, tv = tg_f(&t, tt)[r];
        for (int64_t k = 0; k < half; k++) {
            double f = exp(-log(10000.0) * (double)k / (double)half);
            s += f * (tg_f(&t, dy)[r * dim + k] * cos(tv * f) - tg_f(&t, dy)[r * dim + half + k] * sin(tv * f));
        }
        ref[r] = s;
    }
    CHECK_REL(tg_f(&t, o), ref, N, 1e-5);
    /* odd dim is an error */
    t.nodes[o].attr.i0 = 11;
    brisk_error e2 = {0};
    CHECK(tg_run(be1, &t, o, &e2) == BRISK_ERR_INVALID);
    tg_free(&t);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_gather), T(test_index_errors), T(test_scatter_add), T(test_segment_sum), T(test_sinusoidal)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
