/* LAYERNORM, LAYERNORM_GRAD_X and LAYERNORM_XHAT on the CPU backend against
 * float64, over odd widths, rows with a mean far from 0 (where a one-pass
 * variance would cancel), and row counts that run in parallel. */
#include "cpu_test_util.h"

static brisk_backend *be1, *be2;

static void ref_stats(const float *x, int64_t N, double eps, double *mu, double *rs) {
    double s = 0, q = 0;
    for (int64_t j = 0; j < N; j++) s += x[j];
    *mu = s / (double)N;
    for (int64_t j = 0; j < N; j++) q += (x[j] - *mu) * (x[j] - *mu);
    *rs = 1.0 / sqrt(q / (double)N + eps);
}

static void run_case(brisk_backend *be, int64_t R, int64_t N, float offset) {
    tgraph t;
    tg_init(&t);
    brisk_shape sh = brisk_shape3(1, R, N);
    int x = tg_input(&t, BRISK_F32, sh), ga = tg_input(&t, BRISK_F32, brisk_shape1(N));
    int bt = tg_input(&t, BRISK_F32, brisk_shape1(N)), dy = tg_input(&t, BRISK_F32, sh);
    for (int64_t i = 0; i < R * N; i++) tg_f(&t, x)[i] += offset;
    brisk_attr at = tg_attr0();
    at.f0 = 1e-5f;
    int ins[3] = {x, ga, bt}, gins[3] = {dy, x, ga};
    int y = tg_node(&t, BRISK_OP_LAYERNORM, BRISK_F32, sh, &at, 3, ins);
    int dx = tg_node(&t, BRISK_OP_LAYERNORM_GRAD_X, BRISK_F32, sh, &at, 3, gins);
    int xh = tg_node(&t, BRISK_OP_LAYERNORM_XHAT, BRISK_F32, sh, &at, 1, &x);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, &t, y, err), err);
    REQUIRE_OK(tg_run(be, &t, dx, err), err);
    REQUIRE_OK(tg_run(be, &t, xh, err), err);
    int64_t n = R * N;
    double *ry = malloc((size_t)n * 8), *rdx = malloc((size_t)n * 8), *rxh = malloc((size_t)n * 8);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = tg_f(&t, x) + r * N, *d = tg_f(&t, dy) + r * N, *g = tg_f(&t, ga), *b = tg_f(&t, bt);
        double mu, rs, mg = 0, mgx = 0;
        ref_stats(xr, N, 1e-5, &mu, &rs);
        for (int64_t j = 0; j < N; j++) {
            double h = (xr[j] - mu) * rs;
            rxh[r * N + j] = h;
            ry[r * N + j] = h * g[j] + b[j];
            mg += (double)d[j] * g[j];
            mgx += (double)d[j] * g[j] * h;
        }
        mg /= (double)N;
        mgx /= (double)N;
        for (int64_t j = 0; j < N; j++)
            rdx[r * N + j] = rs * ((double)d[j] * g[j] - mg - rxh[r * N + j] * mgx);
    }
    double e1 = tg_rel_err(tg_f(&t, y), ry, n), e2 = tg_rel_err(tg_f(&t, dx), rdx, n),
           e3 = tg_rel_err(tg_f(&t, xh), rxh, n);
    /* with a large offset, x itself carries f32 rounding of |offset| * 6e-8 */
    double tol = 1e-5;
    CHECKF(e1 <= tol && e2 <= tol && e3 <= tol, "[%lld, %lld] offset %g: y %.3g dx %.3g xhat %.3g", (long long)R,
           (long long)N, offset, e1, e2, e3);
    free(ry); free(rdx); free(rxh);
    tg_free(&t);
}

static void test_layernorm(void) {
    for (int bi = 0; bi < 2; bi++) {
        brisk_backend *be = bi ? be2 : be1;
        run_case(be, 3, 5, 0.0f);
        run_case(be, 7, 33, 0.0f);
        run_case(be, 600, 128, 0.0f);
        run_case(be, 61, 257, 1000.0f);
    }
}

static void test_layernorm_bad_gamma(void) {
    tgraph t;
    tg_init(&t);
    int x = tg_input(&t, BRISK_F32, brisk_shape2(3, 8)), ga = tg_input(&t, BRISK_F32, brisk_shape1(7));
    int ins[3] = {x, ga, ga};
    int y = tg_node(&t, BRISK_OP_LAYERNORM, BRISK_F32, brisk_shape2(3, 8), NULL, 3, ins);
    brisk_error err = {0};
    CHECK(tg_run(be1, &t, y, &err) == BRISK_ERR_SHAPE);
    tg_free(&t);
}

int main(void) {
    be1 = brisk_backend_cpu_new(1);
    be2 = brisk_backend_cpu_new(2);
    t_case c[] = {T(test_layernorm), T(test_layernorm_bad_gamma)};
    int r = t_run(c, (int)(sizeof c / sizeof c[0]));
    be1->destroy(be1);
    be2->destroy(be2);
    return r;
}
