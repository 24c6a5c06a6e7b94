/* The elementwise math ops and the activations with a parameter (EXP, LOG, SQRT, ABS, POW,
 * CLAMP, ERF, LEAKY_RELU, ELU, SOFTPLUS; MINIMUM, MAXIMUM, POW_XY with broadcasting): forward vs
 * float64, backward vs finite differences, a few values PyTorch computed, and the
 * gradients at the kinks as PyTorch defines them (checked exactly, not by differences:
 * abs'(0) = 0, clamp passes dy on [lo, hi] inclusive, ties of min/max split dy in halves,
 * leaky ReLU and ELU take the negative side's slope at 0, x^0 has gradient 0). */
#include "ops/opcheck.h"

typedef enum { U_EXP, U_LOG, U_SQRT, U_ABS, U_POW, U_CLAMP, U_LEAKY, U_ELU, U_SOFTPLUS, U_ERF } ukind;

static int build_unary(brisk_graph *g, ukind k, int x, float a, float b) {
    switch (k) {
    case U_EXP: return brisk_exp(g, x);
    case U_LOG: return brisk_ln(g, x);
    case U_SQRT: return brisk_sqrt(g, x);
    case U_ABS: return brisk_abs(g, x);
    case U_POW: return brisk_pow(g, x, a);
    case U_CLAMP: return brisk_clamp(g, x, a, b);
    case U_LEAKY: return brisk_leaky_relu(g, x, a);
    case U_ELU: return brisk_elu(g, x, a);
    case U_ERF: return brisk_erf(g, x);
    default: return brisk_softplus(g, x, a, b);
    }
}

static double ref_unary(ukind k, double x, double a, double b) {
    switch (k) {
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_ABS: return fabs(x);
    case U_POW: return pow(x, a);
    case U_CLAMP: return x < a ? a : x > b ? b : x;
    case U_LEAKY: return x > 0 ? x : a * x;
    case U_ELU: return x > 0 ? x : a * expm1(x);
    case U_ERF: return erf(x);
    default: return x * a > b ? x : log1p(exp(a * x)) / a;
    }
}

/* x drawn from [lo, hi), at least `avoid` from 0 and from the kinks `k1`, `k2` */
static void check_unary(ukind k, float a, float b, double lo, double hi, double avoid, double k1, double k2,
                        const char *what) {
    oc c;
    oc_init(&c, 200 + (uint64_t)k * 7 + (uint64_t)(a * 13));
    int x = oc_param_avoid(&c, "x", brisk_shape2(5, 13), lo, hi, avoid);
    float *v = (float *)oc_val(&c, x);
    for (int i = 0; i < 65; i++)
        while (fabs(v[i] - k1) < avoid || fabs(v[i] - k2) < avoid) v[i] = (float)oc_uniform(&c, lo, hi);
    int out = build_unary(c.g, k, x, a, b);
    REQUIRE(out >= 0);
    double ref[65];
    for (int i = 0; i < 65; i++) ref[i] = ref_unary(k, v[i], a, b);
    c.max_fd = 65;
    c.fd_eps = 1e-3 * (hi - lo) / 4;
    oc_check(&c, out, ref, what);
    oc_free(&c);
}

static void test_math_unary(void) {
    check_unary(U_EXP, 0, 0, -4, 4, 0, 0, 0, "exp");
    check_unary(U_LOG, 0, 0, 0.2, 20, 0, 0, 0, "log");
    check_unary(U_SQRT, 0, 0, 0.1, 9, 0, 0, 0, "sqrt");
    check_unary(U_ABS, 0, 0, -3, 3, 0.01, 0, 0, "abs");
    check_unary(U_POW, 2, 0, -3, 3, 0, 0, 0, "pow 2");
    check_unary(U_POW, 3, 0, -2, 2, 0, 0, 0, "pow 3");
    check_unary(U_POW, 0.5f, 0, 0.1, 4, 0, 0, 0, "pow 0.5");
    check_unary(U_POW, -1, 0, 0.5, 3, 0, 0, 0, "pow -1");
    check_unary(U_POW, -0.5f, 0, 0.5, 3, 0, 0, 0, "pow -0.5");
    check_unary(U_POW, -2, 0, 0.5, 3, 0, 0, 0, "pow -2");
    check_unary(U_POW, 1.7f, 0, 0.1, 3, 0, 0, 0, "pow 1.7");
    check_unary(U_POW, 1, 0, -3, 3, 0, 0, 0, "pow 1");
    check_unary(U_CLAMP, -0.5f, 1.25f, -2, 2, 0, -0.5, 1.25, "clamp");
    check_unary(U_CLAMP, -INFINITY, 0.5f, -2, 2, 0.01, 0.5, 0.5, "clamp above");
    check_unary(U_LEAKY, 0.01f, 0, -3, 3, 0.01, 0, 0, "leaky_relu 0.01");
    check_unary(U_LEAKY, -0.3f, 0, -3, 3, 0.01, 0, 0, "leaky_relu -0.3");
    check_unary(U_ELU, 1, 0, -6, 3, 0.01, 0, 0, "elu");
    check_unary(U_ELU, 0.7f, 0, -6, 3, 0.01, 0, 0, "elu 0.7");
    check_unary(U_SOFTPLUS, 1, 20, -30, 30, 0, 20, 20, "softplus");
    check_unary(U_SOFTPLUS, 2, 3, -8, 4, 0, 1.5, 1.5, "softplus beta 2 threshold 3");
    check_unary(U_ERF, 0, 0, -3, 3, 0, 0, 0, "erf");
}

/* the gradient an op sends back for dy = w at exactly these x */
static void kink_grads(ukind k, float a, float b, const float *xs, int n, const float *want_slope, const char *what) {
    oc c;
    oc_init(&c, 300 + (uint64_t)k);
    int x = oc_param(&c, "x", brisk_shape1(n));
    memcpy((float *)oc_val(&c, x), xs, sizeof(float) * (size_t)n);
    REQUIRE(oc_build(&c, build_unary(c.g, k, x, a, b)) == 0);
    float *g = oc_read(&c, c.g->params[0].grad_node);
    REQUIRE(g);
    for (int i = 0; i < n; i++)
        CHECKF(g[i] == c.w[i] * want_slope[i], "%s at %g: gradient %.9g, want %.9g", what, (double)xs[i], (double)g[i],
               (double)(c.w[i] * want_slope[i]));
    free(g);
    oc_free(&c);
}

static void test_kinks(void) {
    kink_grads(U_ABS, 0, 0, (float[]){0.0f, -0.0f, 2.0f, -2.0f}, 4, (float[]){0, 0, 1, -1}, "abs");
    kink_grads(U_CLAMP, -1, 1, (float[]){-1.0f, 1.0f, 0.0f, -1.5f, 1.5f}, 5, (float[]){1, 1, 1, 0, 0}, "clamp");
    kink_grads(U_LEAKY, 0.1f, 0, (float[]){0.0f, 1.0f, -1.0f}, 3, (float[]){0.1f, 1, 0.1f}, "leaky_relu");
    kink_grads(U_ELU, 1.5f, 0, (float[]){0.0f, 1.0f}, 2, (float[]){1.5f, 1}, "elu");
    kink_grads(U_POW, 0, 0, (float[]){0.0f, 2.0f, -1.0f}, 3, (float[]){0, 0, 0}, "pow 0");
    kink_grads(U_POW, 2, 0, (float[]){0.0f, 2.0f, -1.0f}, 3, (float[]){0, 4, -2}, "pow 2");
    kink_grads(U_SQRT, 0, 0, (float[]){0.0f}, 1, (float[]){INFINITY}, "sqrt");
}

/* Values torch 1.13 printed (F.softplus(x, beta=2, threshold=10), F.elu(x, alpha=0.7)). */
static void test_torch_values(void) {
    const float xs[5] = {-2, 0, 3, 4.9f, 5.1f};
    const double sp[5] = {0.009074964560568333, 0.3465735912322998, 3.0012378692626953, 4.900027751922607,
                          5.099999904632568};
    const float xe[3] = {-2, 0, 3};
    const double el[3] = {-0.6052653193473816, 0.0, 3.0};
    for (int which = 0; which < 2; which++) {
        oc c;
        oc_init(&c, 400);
        int n = which ? 3 : 5;
        int x = oc_param(&c, "x", brisk_shape1(n));
        memcpy((float *)oc_val(&c, x), which ? xe : xs, sizeof(float) * (size_t)n);
        int out = which ? brisk_elu(c.g, x, 0.7f) : brisk_softplus(c.g, x, 2.0f, 10.0f);
        REQUIRE(oc_build(&c, out) == 0);
        float *got = oc_read(&c, out);
        REQUIRE(got);
        CHECK(oc_compare(which ? "elu (torch)" : "softplus (torch)", got, which ? el : sp, n, 1e-6) == 0);
        free(got);
        oc_free(&c);
    }
}

typedef enum { B_MIN, B_MAX, B_POW } bkind;

static void check_binary(bkind k, brisk_shape sx, brisk_shape sy, const char *what) {
    oc c;
    oc_init(&c, 500 + (uint64_t)k * 3 + (uint64_t)sx.ndim);
    int x = k == B_POW ? oc_param_avoid(&c, "x", sx, 0.3, 3, 0) : oc_param(&c, "x", sx);
    int y = k == B_POW ? oc_param_avoid(&c, "y", sy, -2, 2, 0.05) : oc_param(&c, "y", sy);
    int out = k == B_MIN ? brisk_minimum(c.g, x, y) : k == B_MAX ? brisk_maximum(c.g, x, y) : brisk_pow_xy(c.g, x, y);
    REQUIRE(out >= 0);
    brisk_shape so = c.g->nodes[out].shape;
    int64_t n = brisk_shape_numel(&so);
    float *vx = (float *)oc_val(&c, x), *vy = (float *)oc_val(&c, y);
    if (k != B_POW) /* keep every pair of compared values apart: a finite difference across a tie is no slope */
        for (int64_t i = 0; i < brisk_shape_numel(&sy); i++) vy[i] = (float)(0.05 * (double)(i % 7) - 0.9 + 0.013 * i);
    double *ref = malloc(sizeof(double) * (size_t)n);
    int close = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = vx[oc_bcast(&sx, &so, i)], b = vy[oc_bcast(&sy, &so, i)];
        close += k != B_POW && fabs(a - b) < 0.01;
        ref[i] = k == B_MIN ? fmin(a, b) : k == B_MAX ? fmax(a, b) : pow(a, b);
    }
    if (close) { /* redraw x away from every y it meets */
        for (int64_t i = 0; i < n; i++) {
            int64_t ix = oc_bcast(&sx, &so, i);
            double b = vy[oc_bcast(&sy, &so, i)];
            if (fabs(vx[ix] - b) < 0.01) vx[ix] = (float)(b + 0.02);
        }
        for (int64_t i = 0; i < n; i++) {
            double a = vx[oc_bcast(&sx, &so, i)], b = vy[oc_bcast(&sy, &so, i)];
            ref[i] = k == B_MIN ? fmin(a, b) : fmax(a, b);
        }
    }
    c.max_fd = 40;
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_binary(void) {
    check_binary(B_MIN, brisk_shape2(4, 6), brisk_shape2(4, 6), "minimum");
    check_binary(B_MAX, brisk_shape2(4, 6), brisk_shape2(4, 6), "maximum");
    check_binary(B_MAX, brisk_shape3(2, 1, 5), brisk_shape2(3, 1), "maximum broadcast");
    check_binary(B_MIN, brisk_shape1(5), brisk_shape3(2, 3, 5), "minimum broadcast");
    check_binary(B_POW, brisk_shape2(3, 5), brisk_shape2(3, 5), "pow_xy");
    check_binary(B_POW, brisk_shape2(3, 5), brisk_shape1(1), "pow_xy broadcast exponent");
    check_binary(B_POW, brisk_shape1(5), brisk_shape2(4, 5), "pow_xy broadcast base");
}

/* ties split dy in halves (both inputs, each half); NaN propagates; pow_xy at x = 0 */
static void test_binary_ties(void) {
    for (int k = 0; k < 2; k++) {
        oc c;
        oc_init(&c, 600 + (uint64_t)k);
        int x = oc_param(&c, "x", brisk_shape1(3)), y = oc_param(&c, "y", brisk_shape1(3));
        memcpy((float *)oc_val(&c, x), (float[]){1, 2, 3}, sizeof(float) * 3);
        memcpy((float *)oc_val(&c, y), (float[]){1, 1, 4}, sizeof(float) * 3);
        REQUIRE(oc_build(&c, k ? brisk_maximum(c.g, x, y) : brisk_minimum(c.g, x, y)) == 0);
        float *gx = oc_read(&c, c.g->params[0].grad_node), *gy = oc_read(&c, c.g->params[1].grad_node);
        REQUIRE(gx && gy);
        /* torch: maximum -> x.grad [0.5, 1, 0], y.grad [0.5, 0, 1]; minimum the other way */
        const float wx[2][3] = {{0.5f, 0, 1}, {0.5f, 1, 0}}, wy[2][3] = {{0.5f, 1, 0}, {0.5f, 0, 1}};
        for (int i = 0; i < 3; i++) {
            CHECKF(gx[i] == c.w[i] * wx[k][i], "%s x[%d]: %g", k ? "max" : "min", i, (double)gx[i]);
            CHECKF(gy[i] == c.w[i] * wy[k][i], "%s y[%d]: %g", k ? "max" : "min", i, (double)gy[i]);
        }
        free(gx), free(gy);
        oc_free(&c);
    }
    for (int k = 0; k < 2; k++) { /* maximum with a NaN; pow_xy's exponent gradient at x = 0 */
        oc c;
        oc_init(&c, 610 + (uint64_t)k);
        int x = oc_param(&c, "x", brisk_shape1(3)), y = oc_param(&c, "y", brisk_shape1(3));
        memcpy((float *)oc_val(&c, x), (float[]){0, NAN, 2}, sizeof(float) * 3);
        memcpy((float *)oc_val(&c, y), (float[]){2, 1, 0}, sizeof(float) * 3);
        int out = k ? brisk_pow_xy(c.g, x, y) : brisk_maximum(c.g, x, y);
        REQUIRE(oc_build(&c, out) == 0);
        float *m = oc_read(&c, out), *gy = oc_read(&c, c.g->params[1].grad_node);
        REQUIRE(m && gy);
        if (!k) CHECK(m[0] == 2 && isnan(m[1]) && m[2] == 2);
        else CHECKF(gy[0] == 0.0f && m[2] == 1.0f, "d (0^2) / dy = %g (torch: 0), 2^0 = %g", (double)gy[0], (double)m[2]);
        free(m), free(gy);
        oc_free(&c);
    }
}

static void test_errors(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape1(4));
    brisk_error e;
    CHECK(brisk_clamp(g, x, 2, 1) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "clamp") && strstr(e.msg, "lo <= hi"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape1(4));
    CHECK(brisk_softplus(g, x, 0, 20) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "softplus") && strstr(e.msg, "beta > 0"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape2(3, 4));
    int y = brisk_input(g, "y", BRISK_F32, brisk_shape1(3));
    CHECK(brisk_maximum(g, x, y) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "maximum") && strstr(e.msg, "[3, 4]"), "%s", e.msg);
    brisk_graph_free(g);
}

TEST_MAIN(T(test_math_unary), T(test_kinks), T(test_torch_values), T(test_binary), T(test_binary_ties),
          T(test_errors))
