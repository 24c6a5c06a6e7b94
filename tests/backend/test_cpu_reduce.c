/* SUM, MEAN, SUM_TO and EXPAND on the CPU backend against float64: every axis mask
 * of a 4-D tensor with odd sizes, keepdim, sizes that run in parallel (row sums,
 * column sums, whole-tensor sums), SUM_TO as the reverse of broadcasting, and
 * EXPAND for f32 and i32. Whole-tensor sums must not depend on the thread count. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

/* sum of x over mask, into out laid out as x with reduced dims removed */
static void ref_reduce(const float *x, const brisk_shape *xs, uint32_t mask, double *out, int64_t outn) {
    for (int64_t i = 0; i < outn; i++) out[i] = 0;
    int64_t n = brisk_shape_numel(xs), idx[6];
    for (int64_t f = 0; f < n; f++) {
        tg_unflatten(xs, f, idx);
        int64_t o = 0;
        for (int i = 0; i < xs->ndim; i++)
            if (!((mask >> i) & 1)) o = o * xs->d[i] + idx[i];
        out[o] += x[f];
    }
}

static void run_reduce(brisk_backend *be, brisk_op op, brisk_shape xs, uint32_t mask, int keepdim) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, xs);
    brisk_shape os = {0};
    double cnt = 1;
    for (int i = 0; i < xs.ndim; i++) {
        if ((mask >> i) & 1) {
            cnt *= (double)xs.d[i];
            if (keepdim) os.d[os.ndim++] = 1;
        } else {
            os.d[os.ndim++] = xs.d[i];
        }
    }
    brisk_attr at = tg_attr0();
    at.axes = mask;
    at.keepdim = keepdim;
    int o = tg_node(&t, op, BRISK_F32, os, &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, &t, o, err), err);
    int64_t outn = brisk_shape_numel(&os);
    double *ref = malloc((size_t)outn * sizeof(double));
    ref_reduce(tg_f(&t, x), &xs, mask, ref, outn);
    if (op == BRISK_OP_MEAN)
        for (int64_t i = 0; i < outn; i++) ref[i] /= cnt;
    double e = tg_rel_err(tg_f(&t, o), ref, outn);
    char b[64];
    CHECKF(e <= 1e-5, "%s of %s mask 0x%x: rel err %.3g", op == BRISK_OP_SUM ? "sum" : "mean",
           brisk_shape_str(&xs, b, sizeof b), mask, e);
    free(ref);
    tg_free(&t);
}

static void test_sum_mean_all_masks(void) {
    brisk_shape xs = brisk_shape4(3, 5, 1, 7);
    for (int bi = 0; bi < 2; bi++)
        for (uint32_t mask = 0; mask < 16; mask++) {
            run_reduce(bi ? be2 : be1, BRISK_OP_SUM, xs, mask, mask & 1);
            run_reduce(bi ? be2 : be1, BRISK_OP_MEAN, xs, mask, !(mask & 1));
        }
    brisk_shape x5 = brisk_shape_make(5, (int64_t[]){2, 3, 4, 5, 6});
    for (uint32_t mask = 0; mask < 32; mask++) run_reduce(be2, BRISK_OP_SUM, x5, mask, 0);
}

static void test_sum_large(void) {
    for (int bi = 0; bi < 2; bi++) {
        brisk_backend *be = bi ? be2 : be1;
        run_reduce(be, BRISK_OP_SUM, brisk_shape2(700, 301), 2, 0);  /* row sums */
        run_reduce(be, BRISK_OP_SUM, brisk_shape2(700, 301), 1, 0);  /* column sums (bias grad) */
        run_reduce(be, BRISK_OP_MEAN, brisk_shape2(700, 301), 3, 0); /* everything */
        run_reduce(be, BRISK_OP_SUM, brisk_shape3(40, 60, 129), 2, 1);
        run_reduce(be, BRISK_OP_MEAN, brisk_shape3(40, 60, 129), 5, 0);
    }
}

static void test_sum_thread_independent(void) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape1(300001));
    brisk_attr at = tg_attr0();
    at.axes = 1;
    int o = tg_node(&t, BRISK_OP_SUM, BRISK_F32, brisk_shape_make(0, NULL), &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be1, &t, o, err), err);
    float s1 = tg_f(&t, o)[0];
    REQUIRE_OK(tg_run(be2, &t, o, err), err);
    CHECK(memcmp(&s1, tg_f(&t, o), 4) == 0);
    tg_free(&t);
}

static void run_sum_to(brisk_backend *be, brisk_shape xs, brisk_shape ts) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, xs);
    brisk_attr at = tg_attr0();
    at.shape2 = ts;
    int o = tg_node(&t, BRISK_OP_SUM_TO, BRISK_F32, ts, &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, &t, o, err), err);
    int64_t n = brisk_shape_numel(&ts), idx[6];
    double *ref = calloc((size_t)n, sizeof(double));
    for (int64_t f = 0; f < brisk_shape_numel(&xs); f++) {
        tg_unflatten(&xs, f, idx);
        ref[tg_bcast_index(&ts, &xs, idx)] += tg_f(&t, x)[f];
    }
    char b1[64], b2[64];
    double e = tg_rel_err(tg_f(&t, o), ref, n);
    CHECKF(e <= 1e-5, "sum_to %s -> %s: rel err %.3g", brisk_shape_str(&xs, b1, 64), brisk_shape_str(&ts, b2, 64), e);
    free(ref);
    tg_free(&t);
}

static void test_sum_to(void) {
    for (int bi = 0; bi < 2; bi++) {
        brisk_backend *be = bi ? be2 : be1;
        run_sum_to(be, brisk_shape2(512, 257), brisk_shape1(257));
        run_sum_to(be, brisk_shape2(512, 257), brisk_shape2(512, 1));
        run_sum_to(be, brisk_shape3(4, 5, 6), brisk_shape3(1, 5, 1));
        run_sum_to(be, brisk_shape3(4, 5, 6), brisk_shape2(5, 1));
        run_sum_to(be, brisk_shape3(4, 5, 6), brisk_shape3(4, 5, 6));
        run_sum_to(be, brisk_shape3(4, 5, 6), brisk_shape_make(0, NULL));
    }
    /* a target x does not broadcast from is an error */
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(4, 5));
    brisk_attr at = tg_attr0();
    at.shape2 = brisk_shape1(3);
    int o = tg_node(&t, BRISK_OP_SUM_TO, BRISK_F32, at.shape2, &at, 1, &x);
    brisk_error err = {0};
    CHECK(tg_run(be1, &t, o, &err) == BRISK_ERR_SHAPE);
    tg_free(&t);
}

static void run_expand(brisk_dtype dt, brisk_shape xs, brisk_shape os) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, dt, xs);
    int64_t nx = brisk_shape_numel(&xs);
    for (int64_t i = 0; i < nx; i++) {
        if (dt == BRISK_I32) tg_i(&t, x)[i] = (int32_t)tg_rand_u32();
    }
    brisk_attr at = tg_attr0();
    at.shape2 = os;
    int o = tg_node(&t, BRISK_OP_EXPAND, dt, os, &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be2, &t, o, err), err);
    int64_t idx[6], bad = 0;
    for (int64_t f = 0; f < brisk_shape_numel(&os); f++) {
        tg_unflatten(&os, f, idx);
        int64_t s = tg_bcast_index(&xs, &os, idx);
        if (memcmp((char *)t.buf[o] + f * 4, (char *)t.buf[x] + s * 4, 4)) bad++;
    }
    CHECKF(bad == 0, "expand: %lld elements differ", (long long)bad);
    tg_free(&t);
}

static void test_expand(void) {
    run_expand(BRISK_F32, brisk_shape1(7), brisk_shape2(5, 7));
    run_expand(BRISK_F32, brisk_shape2(5, 1), brisk_shape2(5, 7));
    run_expand(BRISK_I32, brisk_shape3(1, 3, 1), brisk_shape4(2, 4, 3, 5));
    run_expand(BRISK_F32, brisk_shape_make(0, NULL), brisk_shape2(3, 3));
    run_expand(BRISK_F32, brisk_shape2(3, 4), brisk_shape2(3, 4));
}

/* Over an empty axis (a dim of size 0 reduced): SUM gives 0 and MEAN gives NaN, as NumPy
 * and PyTorch do (0 / 0); the CUDA backend is held to the same in test_cuda_ops. */
static void test_empty_axis(void) {
    struct { brisk_shape x; uint32_t mask; } cases[] = {
        {{3, {3, 0, 4}}, 2}, {{3, {3, 0, 4}}, 3}, {{1, {0}}, 1}, {{2, {0, 5}}, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int op = 0; op < 2; op++) {
            tgraph t;
            tg_init(&t);
            int x = tg_input(&t, BRISK_F32, cases[k].x);
            brisk_shape os = {0};
            for (int i = 0; i < cases[k].x.ndim; i++)
                if (!((cases[k].mask >> i) & 1)) os.d[os.ndim++] = cases[k].x.d[i];
            brisk_attr at = tg_attr0();
            at.axes = cases[k].mask;
            int o = tg_node(&t, op ? BRISK_OP_MEAN : BRISK_OP_SUM, BRISK_F32, os, &at, 1, &x);
            brisk_error err = {0};
            REQUIRE_OK(tg_run(be2, &t, o, &err), &err);
            const float *y = tg_f(&t, o);
            int64_t n = brisk_shape_numel(&os), bad = 0;
            for (int64_t i = 0; i < n; i++) bad += op ? !isnan(y[i]) : y[i] != 0.0f;
            CHECKF(n > 0 && bad == 0, "%s over an empty axis (case %zu): %lld of %lld elements wrong",
                   op ? "mean" : "sum", k, (long long)bad, (long long)n);
            tg_free(&t);
        }
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_sum_mean_all_masks), T(test_sum_large), T(test_sum_thread_independent), T(test_sum_to),
                  T(test_expand), T(test_empty_axis)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
