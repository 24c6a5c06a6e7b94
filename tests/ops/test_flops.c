/* Model FLOPs per op (src/ops/flops.c), each against the count worked out by hand, and a
 * whole training step (forward, backward) against the sum of its products: a linear
 * layer's step is its forward GEMM and dw, an LSTM or GRU layer's 3 recurrent products, attention's
 * 3 x its forward, a convolution's 3. */
#include "brisk/graph.h"
#include "test.h"

static brisk_shape sh(int nd, int64_t a, int64_t b, int64_t c, int64_t d) {
    brisk_shape s = {.ndim = nd};
    s.d[0] = a, s.d[1] = b, s.d[2] = c, s.d[3] = d;
    return s;
}

static double step_flops(brisk_graph *g, int loss) {
    brisk_error err = {0};
    brisk_plan plan;
    if (brisk_backward(g, loss, &err) || brisk_plan_build(g, &plan, &err)) {
        CHECKF(0, "%s", err.msg);
        return -1;
    }
    double f = brisk_plan_train_flops(g, &plan);
    brisk_plan_free(&plan);
    return f;
}

static void matmul(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, sh(2, 8, 5, 0, 0));
    int w = brisk_param(g, "w", sh(2, 7, 5, 0, 0), BRISK_INIT_UNIFORM, 0.1f, 1);
    int y = brisk_matmul(g, x, w, 0, 1); /* [8, 5] x [5, 7]^T: 8 x 7 dots of length 5 */
    CHECK(brisk_node_flops(g, y) == 2.0 * 8 * 7 * 5);
    int bt = brisk_matmul(g, x, x, 1, 0); /* [5, 8] x [8, 5]: K = 8 from the transposed a */
    CHECK(brisk_node_flops(g, bt) == 2.0 * 5 * 5 * 8);
    CHECK(brisk_node_flops(g, x) == 0 && brisk_node_flops(g, -1) == 0 && brisk_node_flops(g, 999) == 0);
    int loss = brisk_mean(g, y, 3, 0);
    /* forward and dw = dy^T x, products of the same size (x is an input without a
     * gradient, so dx is never built) */
    CHECK(step_flops(g, loss) == 2 * 2.0 * 8 * 7 * 5);
    brisk_graph_free(g);
}

static void lstm(void) {
    const int64_t B = 3, T = 5, H = 4;
    brisk_graph *g = brisk_graph_new();
    int xp = brisk_input(g, "xp", BRISK_F32, sh(3, B, T, 4 * H, 0));
    int whh = brisk_param(g, "w_hh", sh(2, 4 * H, H, 0, 0), BRISK_INIT_UNIFORM, 0.1f, 1);
    int bias = brisk_param(g, "b", sh(1, 4 * H, 0, 0, 0), BRISK_INIT_ZEROS, 0, 0);
    int l = brisk_lstm(g, xp, whh, bias, 0);
    double rec = 2.0 * B * (T - 1) * 4 * H * H; /* no recurrent product at the first step */
    CHECK(brisk_node_flops(g, l) == rec);
    int loss = brisk_mean(g, l, 7, 0);
    /* forward, dh_rec (T - 1 steps) and d w_hh (all T steps) */
    CHECK(step_flops(g, loss) == rec + rec + 2.0 * B * T * 4 * H * H);
    brisk_graph_free(g);
}

static void gru(void) {
    const int64_t B = 3, T = 5, H = 4;
    brisk_graph *g = brisk_graph_new();
    int xp = brisk_input(g, "xp", BRISK_F32, sh(3, B, T, 3 * H, 0));
    int whh = brisk_param(g, "w_hh", sh(2, 3 * H, H, 0, 0), BRISK_INIT_UNIFORM, 0.1f, 1);
    int bi = brisk_param(g, "b_ih", sh(1, 3 * H, 0, 0, 0), BRISK_INIT_ZEROS, 0, 0);
    int bh = brisk_param(g, "b_hh", sh(1, 3 * H, 0, 0, 0), BRISK_INIT_ZEROS, 0, 0);
    int l = brisk_gru(g, xp, whh, bi, bh, 1);
    double rec = 2.0 * B * (T - 1) * 3 * H * H;
    CHECK(brisk_node_flops(g, l) == rec);
    int loss = brisk_mean(g, l, 7, 0);
    /* forward, dh_rec (T - 1 steps) and d w_hh (all T steps); d b_hh is a sum */
    CHECK(step_flops(g, loss) == rec + rec + 2.0 * B * T * 3 * H * H);
    brisk_graph_free(g);
}

static void attention(void) {
    const int64_t B = 2, T = 6, D = 8;
    brisk_graph *g = brisk_graph_new();
    int qkv = brisk_param(g, "qkv", sh(3, B, T, 3 * D, 0), BRISK_INIT_UNIFORM, 0.5f, 1);
    int a = brisk_attention(g, qkv, -1, 2, 1, 0.0f);
    CHECK(brisk_node_flops(g, a) == 4.0 * B * T * T * D); /* causal counted whole */
    int loss = brisk_mean(g, a, 7, 0);
    CHECK(step_flops(g, loss) == 12.0 * B * T * T * D);
    brisk_graph_free(g);
}

static void conv(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_param(g, "x", sh(4, 2, 6, 9, 9), BRISK_INIT_UNIFORM, 0.5f, 1);
    int w = brisk_param(g, "w", sh(4, 4, 3, 3, 3), BRISK_INIT_UNIFORM, 0.5f, 1); /* groups 2: C/groups = 3 */
    brisk_window win = {.sh = 2, .sw = 2, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 2};
    int y = brisk_conv2d(g, x, w, win); /* [2, 4, 5, 5] */
    REQUIRE(y >= 0);
    double fwd = 2.0 * (2 * 4 * 5 * 5) * (3 * 3 * 3);
    CHECK(brisk_node_flops(g, y) == fwd);
    int loss = brisk_mean(g, y, 15, 0);
    CHECK(step_flops(g, loss) == 3 * fwd); /* forward, dx, dw */
    brisk_graph_free(g);
}

TEST_MAIN(T(matmul), T(lstm), T(gru), T(attention), T(conv))
