/* LAYERNORM (and through it LAYERNORM_GRAD_X and LAYERNORM_XHAT): forward vs
 * float64, gradients of x, gamma and beta vs finite differences. */
#include "ops/opcheck.h"

static void check_layernorm(brisk_shape s, float eps, double shift, const char *what) {
    oc c;
    oc_init(&c, 80);
    /* Moving one x moves its row's mean and variance, so the f32 rounding of those
     * shifts every output of the row coherently (worse for wide rows and rows near
     * 50); a wider difference step keeps that noise below the tolerance. */
    c.fd_eps = 1e-2;
    int64_t N = s.d[s.ndim - 1], R = brisk_shape_numel(&s) / N;
    /* A common shift per row tests that the variance is computed stably. */
    int x = oc_param_avoid(&c, "x", s, shift - 2, shift + 2, 0);
    int gm = oc_param_avoid(&c, "gamma", brisk_shape1(N), 0.5, 1.5, 0);
    int bt = oc_param(&c, "beta", brisk_shape1(N));
    int out = brisk_layernorm(c.g, x, gm, bt, eps);
    const float *v = oc_val(&c, x), *vg = oc_val(&c, gm), *vb = oc_val(&c, bt);
    double *ref = malloc((size_t)(R * N) * sizeof *ref);
    for (int64_t r = 0; r < R; r++) {
        double m = 0, var = 0;
        for (int64_t j = 0; j < N; j++) m += v[r * N + j];
        m /= (double)N;
        for (int64_t j = 0; j < N; j++) var += (v[r * N + j] - m) * (v[r * N + j] - m);
        var /= (double)N;
        for (int64_t j = 0; j < N; j++) ref[r * N + j] = (v[r * N + j] - m) / sqrt(var + eps) * vg[j] + vb[j];
    }
    c.max_fd = 32;
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_layernorm(void) { check_layernorm(brisk_shape3(2, 3, 16), 1e-5f, 0, "layernorm [2,3,16]"); }
static void test_layernorm_wide(void) { check_layernorm(brisk_shape2(3, 257), 1e-5f, 0, "layernorm [3,257]"); }
static void test_layernorm_shifted(void) {
    check_layernorm(brisk_shape2(4, 8), 1e-3f, 50, "layernorm shifted by 50");
}

TEST_MAIN(T(test_layernorm), T(test_layernorm_wide), T(test_layernorm_shifted))
