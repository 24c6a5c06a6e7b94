/* Softmax family and losses on the CPU backend against float64: SOFTMAX,
 * LOG_SOFTMAX and their gradients over the last dim (odd widths, large offsets
 * that would overflow a naive exp, parallel row counts), CROSS_ENTROPY and its
 * gradient, a label out of range as an error that names it, MSE and its
 * gradient, and losses equal for 1 and 2 threads. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static void ref_log_softmax_row(const float *x, int64_t C, double *out) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < C; j++) m = x[j] > m ? x[j] : m;
    for (int64_t j = 0; j < C; j++) s += exp(x[j] - m);
    for (int64_t j = 0; j < C; j++) out[j] = x[j] - m - log(s);
}

static void test_softmax(void) {
    const int64_t shapes[][2] = {{1, 1}, {7, 3}, {33, 129}, {600, 61}, {3, 1000}};
    for (int bi = 0; bi < 2; bi++)
        for (int s = 0; s < 5; s++)
            for (int lg = 0; lg < 2; lg++) {
                tgraph t;
                tg_init(&t);
                int64_t R = shapes[s][0], C = shapes[s][1], n = R * C;
                brisk_shape sh = brisk_shape2(R, C);
                int x = tg_input(&t, BRISK_F32, sh);
                for (int64_t i = 0; i < n; i++) tg_f(&t, x)[i] = tg_randf(-10, 10) + (i / C % 2 ? 300.0f : 0.0f);
                int o = tg_node(&t, lg ? BRISK_OP_LOG_SOFTMAX : BRISK_OP_SOFTMAX, BRISK_F32, sh, NULL, 1, &x);
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(bi ? be2 : be1, &t, o, err), err);
                double *ref = malloc((size_t)n * sizeof(double));
                for (int64_t r = 0; r < R; r++) ref_log_softmax_row(tg_f(&t, x) + r * C, C, ref + r * C);
                if (!lg)
                    for (int64_t i = 0; i < n; i++) ref[i] = exp(ref[i]);
                double e = tg_rel_err(tg_f(&t, o), ref, n);
                CHECKF(e <= 1e-5, "%s [%lld, %lld]: rel err %.3g", lg ? "log_softmax" : "softmax", (long long)R,
                       (long long)C, e);
                free(ref);
                tg_free(&t);
            }
}

static void test_softmax_grads(void) {
    const int64_t shapes[][2] = {{7, 3}, {33, 129}, {600, 61}};
    for (int bi = 0; bi < 2; bi++)
        for (int s = 0; s < 3; s++)
            for (int lg = 0; lg < 2; lg++) {
                tgraph t;
                tg_init(&t);
                int64_t R = shapes[s][0], C = shapes[s][1], n = R * C;
                brisk_shape sh = brisk_shape2(R, C);
                int dy = tg_input(&t, BRISK_F32, sh), y = tg_input(&t, BRISK_F32, sh);
                double *ls = malloc((size_t)n * sizeof(double));
                for (int64_t r = 0; r < R; r++) ref_log_softmax_row(tg_f(&t, y) + r * C, C, ls + r * C);
                for (int64_t i = 0; i < n; i++) tg_f(&t, y)[i] = (float)(lg ? ls[i] : exp(ls[i]));
                int ins[2] = {dy, y};
                int o = tg_node(&t, lg ? BRISK_OP_LOG_SOFTMAX_GRAD : BRISK_OP_SOFTMAX_GRAD, BRISK_F32, sh, NULL, 2, ins);
                brisk_error err_s = {0}, *err = &err_s;
                REQUIRE_OK(tg_run(bi ? be2 : be1, &t, o, err), err);
                double *ref = malloc((size_t)n * sizeof(double));
                for (int64_t r = 0; r < R; r++) {
                    const float *d = tg_f(&t, dy) + r * C, *yy = tg_f(&t, y) + r * C;
                    double sm = 0;
                    for (int64_t j = 0; j < C; j++) sm += lg ? (double)d[j] : (double)d[j] * yy[j];
                    for (int64_t j = 0; j < C; j++)
                        ref[r * C + j] = lg ? d[j] - exp((double)yy[j]) * sm : yy[j] * (d[j] - sm);
                }
                double e = tg_rel_err(tg_f(&t, o), ref, n);
                CHECKF(e <= 1e-5, "%s_grad [%lld, %lld]: rel err %.3g", lg ? "log_softmax" : "softmax", (long long)R,
                       (long long)C, e);
                free(ref);
                free(ls);
                tg_free(&t);
            }
}

static void test_cross_entropy(void) {
    const int64_t shapes[][2] = {{1, 1}, {512, 3}, {37, 1000}, {2000, 10}};
    for (int s = 0; s < 4; s++) {
        int64_t R = shapes[s][0], C = shapes[s][1], n = R * C;
        tgraph t;
        tg_init(&t);
        int x = tg_input(&t, BRISK_F32, brisk_shape2(R, C)), lab = tg_input(&t, BRISK_I32, brisk_shape1(R));
        int dl = tg_input(&t, BRISK_F32, brisk_shape_make(0, NULL));
        tg_f(&t, dl)[0] = 0.75f;
        for (int64_t r = 0; r < R; r++) tg_i(&t, lab)[r] = (int32_t)(tg_rand_u32() % (uint32_t)C);
        int ins[2] = {x, lab};
        int loss = tg_node(&t, BRISK_OP_CROSS_ENTROPY, BRISK_F32, brisk_shape_make(0, NULL), NULL, 2, ins);
        int gins[3] = {dl, x, lab};
        int grad = tg_node(&t, BRISK_OP_CROSS_ENTROPY_GRAD, BRISK_F32, brisk_shape2(R, C), NULL, 3, gins);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be1, &t, loss, err), err);
        float l1 = tg_f(&t, loss)[0];
        REQUIRE_OK(tg_run(be2, &t, loss, err), err);
        CHECK(memcmp(&l1, tg_f(&t, loss), 4) == 0);
        REQUIRE_OK(tg_run(be2, &t, grad, err), err);
        double *ls = malloc((size_t)n * sizeof(double)), ref = 0;
        for (int64_t r = 0; r < R; r++) {
            ref_log_softmax_row(tg_f(&t, x) + r * C, C, ls + r * C);
            ref -= ls[r * C + tg_i(&t, lab)[r]];
        }
        ref /= (double)R;
        CHECK_NEAR(tg_f(&t, loss)[0], ref, 1e-5 * fabs(ref) + 1e-7);
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < C; j++)
                ls[r * C + j] = (exp(ls[r * C + j]) - (j == tg_i(&t, lab)[r])) * 0.75 / (double)R;
        CHECK_REL(tg_f(&t, grad), ls, n, 1e-5);
        free(ls);
        tg_free(&t);
    }
}

static void test_cross_entropy_bad_label(void) {
    const int32_t bad[] = {3, -1};
    for (int k = 0; k < 2; k++)
        for (int grad = 0; grad < 2; grad++) {
            tgraph t;
            tg_init(&t);
            int x = tg_input(&t, BRISK_F32, brisk_shape2(4, 3)), lab = tg_input(&t, BRISK_I32, brisk_shape1(4));
            int dl = tg_input(&t, BRISK_F32, brisk_shape_make(0, NULL));
            tg_i(&t, lab)[2] = bad[k];
            int o;
            if (grad) {
                int ins[3] = {dl, x, lab};
                o = tg_node(&t, BRISK_OP_CROSS_ENTROPY_GRAD, BRISK_F32, brisk_shape2(4, 3), NULL, 3, ins);
            } else {
                int ins[2] = {x, lab};
                o = tg_node(&t, BRISK_OP_CROSS_ENTROPY, BRISK_F32, brisk_shape_make(0, NULL), NULL, 2, ins);
            }
            brisk_error err = {0};
            CHECK(tg_run(be2, &t, o, &err) == BRISK_ERR_INVALID);
            char want[32];
            snprintf(want, sizeof want, "label %d", bad[k]);
            CHECKF(strstr(err.msg, want) && strstr(err.msg, "[0, 3)") && strstr(err.msg, "cross_entropy"), "message: %s",
                   err.msg);
            tg_free(&t);
        }
}

static void test_mse(void) {
    const int64_t sizes[] = {1, 4096, 100003};
    for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        tgraph t;
        tg_init(&t);
        brisk_shape sh = brisk_shape2(1, n);
        int p = tg_input(&t, BRISK_F32, sh), q = tg_input(&t, BRISK_F32, sh);
        int dl = tg_input(&t, BRISK_F32, brisk_shape_make(0, NULL));
        tg_f(&t, dl)[0] = 1.5f;
        int ins[2] = {p, q}, gins[3] = {dl, p, q};
        int loss = tg_node(&t, BRISK_OP_MSE, BRISK_F32, brisk_shape_make(0, NULL), NULL, 2, ins);
        int grad = tg_node(&t, BRISK_OP_MSE_GRAD, BRISK_F32, sh, NULL, 3, gins);
        brisk_error err_s = {0}, *err = &err_s;
        REQUIRE_OK(tg_run(be1, &t, loss, err), err);
        float l1 = tg_f(&t, loss)[0];
        REQUIRE_OK(tg_run(be2, &t, loss, err), err);
        CHECK(memcmp(&l1, tg_f(&t, loss), 4) == 0);
        REQUIRE_OK(tg_run(be2, &t, grad, err), err);
        double ref = 0, *g = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++) {
            double d = (double)tg_f(&t, p)[i] - tg_f(&t, q)[i];
            ref += d * d;
            g[i] = 2 * d * 1.5 / (double)n;
        }
        ref /= (double)n;
        CHECK_NEAR(tg_f(&t, loss)[0], ref, 1e-6 * ref);
        CHECK_REL(tg_f(&t, grad), g, n, 1e-6);
        free(g);
        tg_free(&t);
    }
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_softmax), T(test_softmax_grads), T(test_cross_entropy), T(test_cross_entropy_bad_label),
                  T(test_mse)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
