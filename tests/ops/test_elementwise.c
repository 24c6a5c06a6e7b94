/* Elementwise ops: broadcasting ADD/SUB/MUL/DIV, SCALE and the activations
 * (forward vs float64, backward vs finite differences), and DROPOUT (masks shared
 * by forward and backward, reproducible from seed and step). */
#include "ops/opcheck.h"

#include <stdint.h>

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV } bin_kind;

static void check_binary(bin_kind kind, brisk_shape sx, brisk_shape sy, const char *what) {
    oc c;
    oc_init(&c, 10 + (uint64_t)kind);
    int x = oc_param(&c, "x", sx);
    /* Divisors stay away from zero so the quotient and its differences are tame. */
    int y = kind == B_DIV ? oc_param_avoid(&c, "y", sy, -2, 2, 0.5) : oc_param(&c, "y", sy);
    int out = kind == B_ADD ? brisk_add(c.g, x, y) : kind == B_SUB ? brisk_sub(c.g, x, y)
            : kind == B_MUL ? brisk_mul(c.g, x, y) : brisk_div(c.g, x, y);
    REQUIRE(out >= 0);
    brisk_shape so = c.g->nodes[out].shape;
    int64_t n = brisk_shape_numel(&so);
    const float *vx = oc_val(&c, x), *vy = oc_val(&c, y);
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        double a = vx[oc_bcast(&sx, &so, i)], b = vy[oc_bcast(&sy, &so, i)];
        ref[i] = kind == B_ADD ? a + b : kind == B_SUB ? a - b : kind == B_MUL ? a * b : a / b;
    }
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_binary_same_shape(void) {
    const char *names[] = {"add", "sub", "mul", "div"};
    for (int k = 0; k < 4; k++) check_binary((bin_kind)k, brisk_shape2(3, 5), brisk_shape2(3, 5), names[k]);
}

static void test_binary_broadcast(void) {
    const char *names[] = {"add bcast", "sub bcast", "mul bcast", "div bcast"};
    for (int k = 0; k < 4; k++) {
        check_binary((bin_kind)k, brisk_shape3(3, 1, 5), brisk_shape2(4, 1), names[k]);   /* both broadcast */
        check_binary((bin_kind)k, brisk_shape1(5), brisk_shape3(2, 3, 5), names[k]);      /* x broadcast */
        check_binary((bin_kind)k, brisk_shape3(2, 3, 5), brisk_shape1(1), names[k]);      /* scalar-like y */
    }
}

/* x * x: one node feeding both inputs gets both contributions. */
static void test_mul_self(void) {
    oc c;
    oc_init(&c, 20);
    int x = oc_param(&c, "x", brisk_shape1(9));
    int out = brisk_mul(c.g, x, x);
    const float *vx = oc_val(&c, x);
    double ref[9];
    for (int i = 0; i < 9; i++) ref[i] = (double)vx[i] * vx[i];
    oc_check(&c, out, ref, "mul self");
    oc_free(&c);
}

static void test_scale(void) {
    oc c;
    oc_init(&c, 21);
    int x = oc_param(&c, "x", brisk_shape2(4, 7));
    int out = brisk_scale(c.g, x, -1.75f, 0.5f);
    const float *vx = oc_val(&c, x);
    double ref[28];
    for (int i = 0; i < 28; i++) ref[i] = -1.75 * vx[i] + 0.5;
    oc_check(&c, out, ref, "scale");
    oc_free(&c);
}

static double ref_act(brisk_op op, int form, double x) {
    switch (op) {
    case BRISK_OP_RELU: return x > 0 ? x : 0;
    case BRISK_OP_GELU:
        if (form == BRISK_GELU_ERF) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
        return 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case BRISK_OP_SILU: return x / (1 + exp(-x));
    case BRISK_OP_TANH: return tanh(x);
    case BRISK_OP_SIGMOID: return 1 / (1 + exp(-x));
    default: return NAN;
    }
}

static void check_act(brisk_op op, int form, const char *what) {
    oc c;
    oc_init(&c, 30 + (uint64_t)op * 2 + (uint64_t)form);
    /* Values out to +-6 reach the saturated tails; relu's kink at 0 is avoided. */
    int x = oc_param_avoid(&c, "x", brisk_shape2(6, 11), -6, 6, 0.01);
    int out = op == BRISK_OP_RELU ? brisk_relu(c.g, x) : op == BRISK_OP_GELU ? brisk_gelu(c.g, x, form)
            : op == BRISK_OP_SILU ? brisk_silu(c.g, x) : op == BRISK_OP_TANH ? brisk_tanh(c.g, x)
            : brisk_sigmoid(c.g, x);
    const float *vx = oc_val(&c, x);
    double ref[66];
    for (int i = 0; i < 66; i++) ref[i] = ref_act(op, form, vx[i]);
    c.max_fd = 66;
    oc_check(&c, out, ref, what);
    oc_free(&c);
}

static void test_activations(void) {
    check_act(BRISK_OP_RELU, 0, "relu");
    check_act(BRISK_OP_GELU, BRISK_GELU_ERF, "gelu erf");
    check_act(BRISK_OP_GELU, BRISK_GELU_TANH, "gelu tanh");
    check_act(BRISK_OP_SILU, 0, "silu");
    check_act(BRISK_OP_TANH, 0, "tanh");
    check_act(BRISK_OP_SIGMOID, 0, "sigmoid");
}

/* ---- dropout */

typedef struct { oc c; int x, d; float *out, *grad; } drop_run;

/* loss = sum(dropout(x) * W): the gradient is dropout(W) with the forward's mask. */
static int dropout_run(drop_run *r, float p, uint64_t seed, uint32_t rng_step) {
    oc_init(&r->c, 40);
    r->x = oc_param_avoid(&r->c, "x", brisk_shape2(32, 33), -1, 1, 0.05);
    r->d = brisk_dropout(r->c.g, r->x, p);
    if (oc_build(&r->c, r->d)) return -1;
    brisk_error e;
    r->c.ex->step.seed = seed;
    r->c.ex->step.rng_step = rng_step;
    if (brisk_exec_run(r->c.ex, BRISK_RUN_TRAIN, &e) != BRISK_OK) { fprintf(stderr, "%s\n", e.msg); return -1; }
    r->out = oc_read(&r->c, r->d);
    r->grad = oc_read(&r->c, r->c.g->params[0].grad_node);
    return r->out && r->grad ? 0 : -1;
}

static void dropout_free(drop_run *r) {
    free(r->out);
    free(r->grad);
    oc_free(&r->c);
}

static void test_dropout_mask_shared(void) {
    const float p = 0.3f;
    drop_run r;
    REQUIRE(dropout_run(&r, p, 1234, 5) == 0);
    const float *vx = r.c.pval[0], *w = r.c.w;
    int n = 32 * 33, dropped = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        int kept_f = r.out[i] != 0, kept_b = r.grad[i] != 0;
        dropped += !kept_f;
        if (kept_f != kept_b) bad++;
        if (kept_f && fabs(r.out[i] - vx[i] / (1 - p)) > 1e-6) bad++;
        if (kept_b && fabs(r.grad[i] - w[i] / (1 - p)) > 1e-6) bad++;
    }
    CHECKF(bad == 0, "%d mismatches between forward and backward masks", bad);
    CHECK_NEAR((double)dropped / n, p, 0.05);
    /* Eval is the identity. */
    brisk_error e, *ep = &e;
    REQUIRE_OK(brisk_exec_run(r.c.ex, BRISK_RUN_EVAL, &e), ep);
    float *ev = oc_read(&r.c, r.d);
    REQUIRE(ev);
    for (int i = 0; i < n; i++) CHECK(ev[i] == vx[i]);
    free(ev);
    dropout_free(&r);
}

static void test_dropout_reproducible(void) {
    drop_run a, b, c2;
    REQUIRE(dropout_run(&a, 0.5f, 77, 3) == 0);
    REQUIRE(dropout_run(&b, 0.5f, 77, 3) == 0);
    REQUIRE(dropout_run(&c2, 0.5f, 77, 4) == 0);
    int n = 32 * 33, same = 1, diff = 0;
    for (int i = 0; i < n; i++) {
        same &= a.out[i] == b.out[i];
        diff += (a.out[i] == 0) != (c2.out[i] == 0);
    }
    CHECK(same);
    CHECKF(diff > n / 4, "rng_step 3 and 4 differ in only %d of %d mask entries", diff, n);
    dropout_free(&a);
    dropout_free(&b);
    dropout_free(&c2);
}

/* Finite differences with the mask held fixed (same seed and step every run). */
static void test_dropout_fd(void) {
    oc c;
    oc_init(&c, 41);
    int x = oc_param(&c, "x", brisk_shape2(5, 8));
    int d = brisk_dropout(c.g, x, 0.25f);
    REQUIRE(oc_build(&c, d) == 0);
    oc_check_grads(&c, "dropout");
    oc_free(&c);
}

TEST_MAIN(T(test_binary_same_shape), T(test_binary_broadcast), T(test_mul_self), T(test_scale),
          T(test_activations), T(test_dropout_mask_shared), T(test_dropout_reproducible), T(test_dropout_fd))
