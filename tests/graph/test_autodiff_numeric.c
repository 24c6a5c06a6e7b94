/* Autodiff numerically, on the CPU backend: a parameter used twice gets the sum of
 * both contributions, an unreached parameter gets zeros, GRAD_ACCUM adds on later
 * micro-batches, and a small MLP with a cross-entropy loss matches finite
 * differences end to end. */
#include "ops/opcheck.h"

static void test_param_used_twice(void) {
    oc c;
    oc_init(&c, 200);
    int x = oc_param(&c, "x", brisk_shape2(4, 8)), w = oc_param(&c, "w", brisk_shape1(8));
    int out = brisk_mul(c.g, brisk_mul(c.g, x, w), brisk_tanh(c.g, w));
    const float *vx = oc_val(&c, x), *vw = oc_val(&c, w);
    double ref[32];
    for (int i = 0; i < 32; i++) ref[i] = (double)vx[i] * vw[i % 8] * tanh(vw[i % 8]);
    oc_check(&c, out, ref, "x * w * tanh(w)");
    oc_free(&c);
}

static void test_unreached_param_zero_and_accumulate(void) {
    oc c;
    oc_init(&c, 201);
    int w = oc_param(&c, "w", brisk_shape1(8));
    int u = oc_param(&c, "u", brisk_shape2(3, 3));
    (void)u;
    int out = brisk_scale(c.g, w, 3.0f, 0.0f);
    REQUIRE(oc_build(&c, out) == 0);
    brisk_error e, *ep = &e;
    /* Garbage in the gradient arena: the first micro-batch overwrites it. */
    float junk[64];
    for (int i = 0; i < 64; i++) junk[i] = 1e3f + (float)i;
    REQUIRE_OK(c.be->upload(c.be, c.ex->grads, junk, c.plan.param_bytes, &e), ep);
    REQUIRE_OK(brisk_exec_run(c.ex, BRISK_RUN_TRAIN, &e), ep);
    float *gu = oc_read(&c, c.g->params[1].grad_node), *gw = oc_read(&c, c.g->params[0].grad_node);
    REQUIRE(gu && gw);
    for (int i = 0; i < 9; i++) CHECK(gu[i] == 0.0f);
    for (int i = 0; i < 8; i++) CHECK_NEAR(gw[i], 3.0 * c.w[i], 1e-6);
    free(gu);
    free(gw);
    /* A second micro-batch adds its gradient. */
    c.ex->step.first_micro = 0;
    REQUIRE_OK(brisk_exec_run(c.ex, BRISK_RUN_TRAIN, &e), ep);
    gw = oc_read(&c, c.g->params[0].grad_node);
    REQUIRE(gw);
    for (int i = 0; i < 8; i++) CHECK_NEAR(gw[i], 6.0 * c.w[i], 1e-6);
    free(gw);
    oc_free(&c);
}

/* x -> linear -> gelu -> layernorm -> linear -> cross-entropy, gradients of all
 * five parameters against finite differences of the loss itself. */
static void test_mlp_end_to_end(void) {
    oc c;
    oc_init(&c, 202);
    const int B = 6, I = 5, H = 8, C = 4;
    int x = oc_param(&c, "x", brisk_shape2(B, I));
    int w1 = oc_param(&c, "w1", brisk_shape2(I, H)), b1 = oc_param(&c, "b1", brisk_shape1(H));
    int g1 = oc_param_avoid(&c, "g1", brisk_shape1(H), 0.5, 1.5, 0), be1 = oc_param(&c, "be1", brisk_shape1(H));
    int w2 = oc_param(&c, "w2", brisk_shape2(C, H));
    int32_t lab[6] = {0, 3, 1, 1, 2, 0};
    int labels = oc_const_i32(&c, brisk_shape1(B), lab);
    int h = brisk_gelu(c.g, brisk_bias_add(c.g, brisk_matmul(c.g, x, w1, 0, 0), b1), BRISK_GELU_ERF);
    h = brisk_layernorm(c.g, h, g1, be1, 1e-5f);
    int logits = brisk_matmul(c.g, h, w2, 0, 1);
    int loss = brisk_cross_entropy(c.g, logits, labels);
    REQUIRE(oc_build(&c, loss) == 0);
    c.max_fd = 12;
    oc_check_grads(&c, "mlp");
    oc_free(&c);
}

TEST_MAIN(T(test_param_used_twice), T(test_unreached_param_zero_and_accumulate), T(test_mlp_end_to_end))
