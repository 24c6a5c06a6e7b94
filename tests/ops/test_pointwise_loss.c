/* POINTWISE_LOSS: L1, Huber, BCE with logits and weighted MSE, as a mean and as a masked
 * mean sum(w l) / sum(w) (a weight per element, or per row broadcast): the loss vs
 * float64, the gradients of pred and target vs finite differences, values PyTorch printed,
 * an all-zero mask (loss 0, gradient 0), and the builder's errors. */
#include "ops/loss_ref.h"
#include "ops/opcheck.h"

static const char *kind_name(int kind) {
    return (const char *[]){"mse", "l1", "huber", "bce with logits"}[kind];
}

/* pred and target [6, 7] both parameters; weighted: a mask [6, 1] (rows) or [6, 7] */
static void check_loss(int kind, int weighted, int row_mask) {
    oc c;
    oc_init(&c, 700 + (uint64_t)kind * 5 + (uint64_t)weighted * 2 + (uint64_t)row_mask);
    brisk_shape s = brisk_shape2(6, 7);
    int p = oc_param(&c, "pred", s), t = oc_param(&c, "target", s);
    float *vp = (float *)oc_val(&c, p), *vt = (float *)oc_val(&c, t);
    const double delta = 0.4;
    for (int i = 0; i < 42; i++) {
        if (kind == BRISK_LOSS_BCE_LOGITS) vp[i] *= 4, vt[i] = (float)((vt[i] + 1) / 2); /* logits, targets in [0, 1] */
        double d = vp[i] - vt[i]; /* keep clear of the kinks: |d| = 0, |d| = delta */
        if (fabs(d) < 0.02 || fabs(fabs(d) - delta) < 0.02) vt[i] += 0.05f;
    }
    float w[42];
    int64_t nw = row_mask ? 6 : 42;
    for (int i = 0; i < nw; i++) w[i] = i % 3 == 1 ? 0.0f : (float)(0.5 + 0.25 * (i % 4));
    int wn = weighted ? oc_const_f32(&c, row_mask ? brisk_shape2(6, 1) : s, w) : -1;
    int out = brisk_pointwise_loss(c.g, kind, p, t, wn, (float)delta);
    REQUIRE(out >= 0);
    double sum = 0, wsum = 0;
    for (int i = 0; i < 42; i++) {
        double wi = weighted ? w[row_mask ? i / 7 : i] : 1;
        sum += wi * lref_term(kind, vp[i], vt[i], delta);
        wsum += wi;
    }
    double ref = sum / wsum;
    char what[96];
    snprintf(what, sizeof what, "%s%s", kind_name(kind), weighted ? row_mask ? " row mask" : " weighted" : "");
    c.max_fd = 42;
    c.fd_eps = 1e-2;
    oc_check(&c, out, &ref, what);
    oc_free(&c);
}

static void test_losses(void) {
    for (int kind = BRISK_LOSS_L1; kind <= BRISK_LOSS_BCE_LOGITS; kind++)
        for (int w = 0; w < 3; w++) check_loss(kind, w > 0, w == 2);
    check_loss(BRISK_LOSS_MSE, 1, 0);
    check_loss(BRISK_LOSS_MSE, 1, 1);
}

/* torch 1.13: F.binary_cross_entropy_with_logits, F.huber_loss(delta=0.8), F.l1_loss of these */
static void test_torch_values(void) {
    const float p[5] = {-3, -0.5f, 0, 0.7f, 25}, t[5] = {0, 1, 0.5f, 1, 0};
    const double want[3] = {5.423799991607666, 4.561999797821045, 6.059999942779541};
    const int kinds[3] = {BRISK_LOSS_BCE_LOGITS, BRISK_LOSS_HUBER, BRISK_LOSS_L1};
    for (int k = 0; k < 3; k++) {
        oc c;
        oc_init(&c, 720);
        int pn = oc_param(&c, "p", brisk_shape1(5));
        memcpy((float *)oc_val(&c, pn), p, sizeof p);
        int out = brisk_pointwise_loss(c.g, kinds[k], pn, oc_const_f32(&c, brisk_shape1(5), t), -1, 0.8f);
        REQUIRE(oc_build(&c, out) == 0);
        float *got = oc_read(&c, out);
        REQUIRE(got);
        CHECKF(fabs(*got - want[k]) <= 2e-7 * want[k], "%s: %.9g, torch %.9g", kind_name(kinds[k]), (double)*got,
               want[k]);
        free(got);
        oc_free(&c);
    }
}

/* Every element masked out: the loss is 0 and so is every gradient, not NaN. */
static void test_all_masked(void) {
    oc c;
    oc_init(&c, 730);
    int p = oc_param(&c, "p", brisk_shape2(3, 4)), t = oc_param(&c, "t", brisk_shape2(3, 4));
    float zeros[3] = {0};
    int out = brisk_pointwise_loss(c.g, BRISK_LOSS_HUBER, p, t, oc_const_f32(&c, brisk_shape2(3, 1), zeros), 1.0f);
    REQUIRE(oc_build(&c, out) == 0);
    float *l = oc_read(&c, out), *gp = oc_read(&c, c.g->params[0].grad_node), *gt = oc_read(&c, c.g->params[1].grad_node);
    REQUIRE(l && gp && gt);
    CHECKF(*l == 0.0f, "loss %g", (double)*l);
    for (int i = 0; i < 12; i++) CHECKF(gp[i] == 0.0f && gt[i] == 0.0f, "[%d]: %g %g", i, (double)gp[i], (double)gt[i]);
    free(l), free(gp), free(gt);
    oc_free(&c);
}

static void test_errors(void) {
    struct { int kind; brisk_shape p, t, w; int w_param; float delta; const char *want; } cases[] = {
        {BRISK_LOSS_L1, {2, {3, 4}}, {2, {4, 3}}, {0}, 0, 0, "differ in shape"},
        {BRISK_LOSS_HUBER, {2, {3, 4}}, {2, {3, 4}}, {0}, 0, 0, "delta"},
        {BRISK_LOSS_L1, {2, {3, 4}}, {2, {3, 4}}, {2, {4, 1}}, 0, 0, "does not broadcast"},
        {BRISK_LOSS_BCE_LOGITS, {2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}, 1, 0, "takes no gradient"},
        {7, {1, {3}}, {1, {3}}, {0}, 0, 0, "kind"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_graph *g = brisk_graph_new();
        int p = brisk_input(g, "p", BRISK_F32, cases[i].p), t = brisk_input(g, "t", BRISK_F32, cases[i].t), w = -1;
        if (cases[i].w.ndim)
            w = cases[i].w_param ? brisk_param(g, "w", cases[i].w, BRISK_INIT_ONES, 0, 0)
                                 : brisk_input(g, "w", BRISK_F32, cases[i].w);
        CHECK(brisk_pointwise_loss(g, cases[i].kind, p, t, w, cases[i].delta) == -1);
        brisk_error e;
        CHECKF(brisk_graph_error(g, &e) != BRISK_OK && strstr(e.msg, cases[i].want), "case %zu: %s", i, e.msg);
        brisk_graph_free(g);
    }
}

TEST_MAIN(T(test_losses), T(test_torch_values), T(test_all_masked), T(test_errors))
