/* Autodiff, structurally: which nodes the backward pass appends, how contributions
 * are summed, GRAD_ACCUM placement, zero gradients for unreached params, and
 * backward rules that build the right ops (shapes checked by brisk_backward itself).
 * The numeric checks of every rule are in tests/ops. */
#include "brisk/graph.h"
#include "test.h"

static void test_param_used_twice_gets_sum(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(4, 8));
    int w = brisk_param(g, "w", brisk_shape1(8), BRISK_INIT_NORMAL, 1, 1);
    int a = brisk_mul(g, x, w), b = brisk_mul(g, a, w);
    int loss = brisk_sum(g, b, 3, 0);
    brisk_error e, *ep = &e;
    REQUIRE_OK(brisk_backward(g, loss, &e), ep);
    CHECK(g->n_forward == loss + 1 && g->loss == loss && g->grad_of);
    int gw = g->grad_of[w];
    REQUIRE(gw >= 0);
    CHECK(g->nodes[gw].op == BRISK_OP_ADD);
    CHECK(g->nodes[gw].shape.ndim == 1 && g->nodes[gw].shape.d[0] == 8);
    /* Both contributions were summed over the broadcast rows. */
    for (int j = 0; j < 2; j++) CHECK(g->nodes[g->nodes[gw].in[j]].op == BRISK_OP_SUM_TO);
    int ga = g->params[0].grad_node;
    CHECK(ga >= g->n_forward && g->nodes[ga].op == BRISK_OP_GRAD_ACCUM && g->nodes[ga].in[0] == gw);
    CHECK(g->nodes[ga].storage == BRISK_STORE_GRAD && g->nodes[ga].offset == 0);
    CHECK(g->grad_of[x] == -1); /* inputs need no gradient */
    CHECK(g->grad_of[ga] == -1);
    /* A second backward is refused. */
    CHECK(brisk_backward(g, loss, &e) == BRISK_ERR_INVALID);
    brisk_graph_free(g);
}

static void test_unreached_param_gets_zeros(void) {
    brisk_graph *g = brisk_graph_new();
    int w = brisk_param(g, "w", brisk_shape1(5), BRISK_INIT_NORMAL, 1, 1);
    int u = brisk_param(g, "unused", brisk_shape2(3, 7), BRISK_INIT_NORMAL, 1, 1);
    int loss = brisk_sum(g, brisk_relu(g, w), 1, 0);
    brisk_error e, *ep = &e;
    REQUIRE_OK(brisk_backward(g, loss, &e), ep);
    int ga = g->params[1].grad_node;
    REQUIRE(ga >= 0);
    const brisk_node *src = &g->nodes[g->nodes[ga].in[0]];
    CHECK(src->op == BRISK_OP_SCALE && src->attr.f0 == 0.0f && src->attr.f1 == 0.0f && src->in[0] == u);
    CHECK(g->nodes[ga].offset == g->params[1].offset * 4 && g->params[1].offset == 16);
    CHECK(g->grad_of[u] == -1);
    brisk_graph_free(g);
}

static void test_loss_checks(void) {
    brisk_graph *g = brisk_graph_new();
    int w = brisk_param(g, "w", brisk_shape1(5), BRISK_INIT_NORMAL, 1, 1);
    int r = brisk_relu(g, w);
    brisk_error e;
    CHECK(brisk_backward(g, r, &e) == BRISK_ERR_SHAPE);
    CHECK(strstr(e.msg, "[5]") && strstr(e.msg, "scalar"));
    CHECK(brisk_backward(g, 77, &e) == BRISK_ERR_INVALID);
    brisk_graph_free(g);
}

/* Each rule runs through brisk_backward, which checks every gradient's shape and
 * dtype against its input; one graph exercising every differentiable op. */
static void test_every_rule_builds(void) {
    brisk_graph *g = brisk_graph_new();
    int x3 = brisk_param(g, "x3", brisk_shape3(2, 3, 4), BRISK_INIT_NORMAL, 1, 1);
    int w = brisk_param(g, "w", brisk_shape2(4, 5), BRISK_INIT_NORMAL, 1, 1);
    int wt = brisk_param(g, "wt", brisk_shape2(5, 4), BRISK_INIT_NORMAL, 1, 1);
    int bw3 = brisk_param(g, "bw3", brisk_shape3(2, 5, 4), BRISK_INIT_NORMAL, 1, 1);
    int bias = brisk_param(g, "bias", brisk_shape1(5), BRISK_INIT_NORMAL, 1, 1);
    int gam = brisk_param(g, "gamma", brisk_shape1(5), BRISK_INIT_ONES, 1, 0);
    int bet = brisk_param(g, "beta", brisk_shape1(5), BRISK_INIT_ZEROS, 1, 0);
    int emb = brisk_param(g, "emb", brisk_shape2(10, 5), BRISK_INIT_NORMAL, 1, 0);
    int tf = brisk_param(g, "tf", brisk_shape1(3), BRISK_INIT_NORMAL, 1, 0);
    int idx = brisk_input(g, "idx", BRISK_I32, brisk_shape2(2, 3));
    int lab = brisk_input(g, "lab", BRISK_I32, brisk_shape2(2, 3));

    int m1 = brisk_matmul(g, x3, w, 0, 0);           /* [2,3,5], shared b */
    int m2 = brisk_matmul(g, x3, wt, 0, 1);          /* shared transposed b */
    int x3t = brisk_transpose(g, x3, (int[]){0, 2, 1});                 /* [2,4,3] */
    int m3 = brisk_matmul(g, x3t, bw3, 1, 1);        /* batched, both transposed: [2,3,5] */
    int m4 = brisk_matmul(g, x3t, w, 1, 0);          /* transposed a, shared b */
    int m3r = brisk_reshape(g, brisk_reshape(g, m3, brisk_shape2(6, 5)), brisk_shape3(2, 3, 5));
    int h = brisk_add(g, brisk_add(g, m1, m2), brisk_sub(g, m4, m3r));
    h = brisk_bias_add(g, h, bias);
    h = brisk_layernorm(g, h, gam, bet, 1e-5f);
    h = brisk_mul(g, brisk_gelu(g, h, BRISK_GELU_TANH), brisk_sigmoid(g, brisk_silu(g, h)));
    h = brisk_div(g, brisk_tanh(g, h), brisk_scale(g, brisk_expand(g, brisk_sum(g, h, 0x4, 1), brisk_shape3(2, 3, 5)), 0, 2));
    h = brisk_add(g, h, brisk_gather(g, emb, idx));
    h = brisk_dropout(g, brisk_relu(g, h), 0.1f);
    int cat = brisk_concat(g, (int[]){h, brisk_slice(g, h, 2, 1, 3)}, 2, 2);  /* [2,3,8] */
    int sm = brisk_softmax(g, cat), lsm = brisk_log_softmax(g, cat);
    int ce = brisk_cross_entropy(g, brisk_add(g, sm, lsm), lab);
    int sin = brisk_sinusoidal(g, tf, 6);
    int mse = brisk_mse(g, brisk_sum_to(g, sin, brisk_shape1(6)), brisk_mean(g, brisk_cast(g, sin, BRISK_F32), 1, 0));
    int loss = brisk_add(g, ce, mse);
    brisk_error e, *ep = &e;
    REQUIRE(brisk_graph_error(g, &e) == BRISK_OK);
    REQUIRE_OK(brisk_backward(g, loss, &e), ep);
    for (int k = 0; k < g->n_params; k++) {
        int gn = g->grad_of[g->params[k].node];
        CHECKF(gn >= 0, "param %s got no gradient", g->params[k].name);
    }
    int ga = g->grad_of[emb];
    CHECK(ga >= 0 && g->nodes[ga].op == BRISK_OP_SCATTER_ADD);
    CHECK(g->grad_of[tf] >= 0);
    brisk_graph_free(g);
}

/* A DROPOUT's backward is a DROPOUT with the same stream and p. */
static void test_dropout_rule(void) {
    brisk_graph *g = brisk_graph_new();
    int w = brisk_param(g, "w", brisk_shape1(16), BRISK_INIT_NORMAL, 1, 1);
    int d = brisk_dropout(g, w, 0.25f);
    int loss = brisk_sum(g, d, 1, 0);
    brisk_error e, *ep = &e;
    REQUIRE_OK(brisk_backward(g, loss, &e), ep);
    int gw = g->grad_of[w];
    REQUIRE(gw >= 0);
    CHECK(g->nodes[gw].op == BRISK_OP_DROPOUT && g->nodes[gw].attr.rng == g->nodes[d].attr.rng);
    CHECK(g->nodes[gw].attr.f0 == 0.25f);
    brisk_graph_free(g);
}

TEST_MAIN(T(test_param_used_twice_gets_sum), T(test_unreached_param_gets_zeros), T(test_loss_checks),
          T(test_every_rule_builds), T(test_dropout_rule))
