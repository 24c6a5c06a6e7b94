/* The ops a user's own layer graph needs (issue 31) on the CUDA backend against the CPU on
 * the same random inputs, forward and backward (each input's gradient of sum(y r), r random,
 * through autodiff, so every gradient op runs: ACT_GRAD's new kinds, BINARY_GRAD,
 * POINTWISE_LOSS_GRAD, UPSAMPLE2D_GRAD, LAYERNORM_GRAD_X without gamma, and CONV2D /
 * CONV2D_GRAD_W as the transposed convolution's gradients):
 *   - EXP, LOG, SQRT, ABS, POW, CLAMP, LEAKY_RELU, ELU, SOFTPLUS at 1000 and 1001 elements
 *     (the float4 path and the tail);
 *   - MINIMUM, MAXIMUM (ties, NaN), POW_XY over broadcast shapes;
 *   - L1, Huber, BCE with logits and weighted MSE, plain, masked per element and per row,
 *     over one block and over many (and an all-zero mask: 0, not NaN);
 *   - nearest and bilinear upsampling, the transposed convolution (NCHW, NHWC, groups,
 *     output padding; also bf16 operands), the 1-D convolution, group norm, global average
 *     pooling;
 *   - an embedding gradient with repeated indices on the deterministic backend: the CPU's
 *     bits;
 *   - a small U-Net-like model (conv, group norm, leaky ReLU, transposed conv, upsampling,
 *     concat, masked Huber) trained one step: loss and every parameter's gradient.
 * Tolerances (relative norm): 1e-5 (CUDA's libm and FMA contraction against the CPU's own
 * math; sums in another order), 1e-4 for the whole model, 2e-2 for bf16 convolutions.
 * Skips without a GPU. */
#include "backend/cuda_test_util.h"

static brisk_backend *gpu(int deterministic, brisk_gemm_precision p) {
    static brisk_backend *b[2][4];
    if (!b[deterministic][p]) b[deterministic][p] = cuda_backend_for(p, 1, deterministic);
    return b[deterministic][p];
}

/* A scalar that needs every node in ids, so the schedule runs them all and keeps them. */
static int need_all(brisk_graph *g, const int *ids, int n) {
    int acc = -1;
    for (int i = 0; i < n; i++) {
        g->nodes[ids[i]].keep = 1;
        int64_t len = brisk_shape_numel(&g->nodes[ids[i]].shape);
        int s = brisk_sum(g, brisk_reshape(g, ids[i], brisk_shape1(len)), 1, 0);
        acc = acc < 0 ? s : brisk_add(g, acc, s);
    }
    return acc;
}

/* An input whose gradient autodiff computes (x's range [lo, hi)) */
static int grad_input(brisk_graph *g, brisk_shape s, float lo, float hi) {
    int x = ct_input(g, BRISK_F32, s, lo, hi);
    if (x >= 0) g->nodes[x].requires_grad = 1;
    return x;
}

/* y and the gradients of sum(y r) with respect to xs (and to every parameter) on the GPU
 * against the CPU */
static void check_graph_on(brisk_backend *be, brisk_graph *g, int y, const int *xs, int nx, double tol, const char *what) {
    brisk_error err = {0};
    ct_pair p;
    memset(&p, 0, sizeof p);
    int ids[16], n = 0, built = 0;
    if (y >= 0 && !brisk_graph_error(g, &err)) {
        int64_t len = brisk_shape_numel(&g->nodes[y].shape);
        int r = ct_input(g, BRISK_F32, g->nodes[y].shape, -1, 1);
        int loss = brisk_sum(g, brisk_reshape(g, brisk_mul(g, y, r), brisk_shape1(len)), 1, 0);
        if (loss >= 0 && !brisk_backward(g, loss, &err)) {
            built = 1;
            ids[n++] = y;
            for (int k = 0; k < nx && n < 16; k++)
                if (g->grad_of[xs[k]] >= 0) ids[n++] = g->grad_of[xs[k]];
            for (int k = 0; k < g->n_params && n < 16; k++)
                if (g->params[k].grad_node >= 0) ids[n++] = g->params[k].grad_node;
            g->output = need_all(g, ids, n);
            g->loss = loss;
        }
    }
    int ok = built && !brisk_graph_error(g, &err) && be && !ct_pair_make(g, be, &p, &err);
    for (int k = 0; ok && k < n; k++) ok = !ct_poison(p.gpu, ids[k], &err);
    ok = ok && !brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) && !brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) &&
         !be->sync(be, &err);
    if (!ok) {
        CHECKF(0, "%s: %s", what, be ? err.msg : "no GPU backend");
    } else {
        for (int k = 0; k < n; k++) CHECKF(ct_compare(&p, ids[k], tol, what), "%s: %s", what, k ? "a gradient" : "y");
        CHECKF(ct_inputs_intact(&p), "%s", what);
    }
    ct_pair_free(&p);
    brisk_graph_free(g);
}

static void check_graph(brisk_graph *g, int y, const int *xs, int nx, double tol, const char *what) {
    check_graph_on(gpu(0, BRISK_GEMM_FP32), g, y, xs, nx, tol, what);
}

/* ---------------------------------------------------------------- elementwise */

static void test_unary(void) {
    const struct { brisk_op op; float a, b, lo, hi; } cs[] = {
        {BRISK_OP_EXP, 0, 0, -20, 20},        {BRISK_OP_LOG, 0, 0, 0.01f, 100},    {BRISK_OP_SQRT, 0, 0, 0.01f, 50},
        {BRISK_OP_ABS, 0, 0, -3, 3},          {BRISK_OP_POW, 2, 0, -3, 3},         {BRISK_OP_POW, 3, 0, -3, 3},
        {BRISK_OP_POW, 0.5f, 0, 0.1f, 9},     {BRISK_OP_POW, -1, 0, 0.5f, 9},      {BRISK_OP_POW, 2.5f, 0, 0.1f, 4},
        {BRISK_OP_POW, 0, 0, -3, 3},          {BRISK_OP_CLAMP, -1, 0.5f, -3, 3},   {BRISK_OP_LEAKY_RELU, 0.02f, 0, -5, 5},
        {BRISK_OP_ELU, 1.3f, 0, -8, 5},       {BRISK_OP_SOFTPLUS, 1, 20, -40, 40}, {BRISK_OP_SOFTPLUS, 3, 2, -5, 5},
        {BRISK_OP_ERF, 0, 0, -3, 3},
    };
    for (int n = 1000; n <= 1001; n++)
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
            brisk_graph *g = brisk_graph_new();
            int x = grad_input(g, brisk_shape1(n), cs[k].lo, cs[k].hi);
            int y;
            switch (cs[k].op) {
            case BRISK_OP_EXP: y = brisk_exp(g, x); break;
            case BRISK_OP_LOG: y = brisk_ln(g, x); break;
            case BRISK_OP_SQRT: y = brisk_sqrt(g, x); break;
            case BRISK_OP_ABS: y = brisk_abs(g, x); break;
            case BRISK_OP_POW: y = brisk_pow(g, x, cs[k].a); break;
            case BRISK_OP_CLAMP: y = brisk_clamp(g, x, cs[k].a, cs[k].b); break;
            case BRISK_OP_LEAKY_RELU: y = brisk_leaky_relu(g, x, cs[k].a); break;
            case BRISK_OP_ELU: y = brisk_elu(g, x, cs[k].a); break;
            case BRISK_OP_ERF: y = brisk_erf(g, x); break;
            default: y = brisk_softplus(g, x, cs[k].a, cs[k].b); break;
            }
            char what[80];
            snprintf(what, sizeof what, "%s a=%g [%d]", brisk_op_name(cs[k].op), (double)cs[k].a, n);
            check_graph(g, y, &x, 1, 1e-5, what);
        }
}

static void test_binary(void) {
    const brisk_shape cs[][2] = {
        {{1, {1001}}, {1, {1001}}}, {{2, {64, 33}}, {1, {33}}}, {{3, {5, 1, 7}}, {2, {6, 1}}}, {{2, {1, 40}}, {2, {30, 1}}},
    };
    const brisk_op ops[3] = {BRISK_OP_MINIMUM, BRISK_OP_MAXIMUM, BRISK_OP_POW_XY};
    for (int o = 0; o < 3; o++)
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            brisk_graph *g = brisk_graph_new();
            int pw = ops[o] == BRISK_OP_POW_XY;
            /* min/max: whole numbers in [-3, 3), so ties are common */
            int x = grad_input(g, cs[c][0], pw ? 0.1f : -3.0f, 3.0f), y = grad_input(g, cs[c][1], pw ? -2.0f : -3.0f, pw ? 2.0f : 3.0f);
            int xs[2] = {x, y};
            int out = o == 0 ? brisk_minimum(g, x, y) : o == 1 ? brisk_maximum(g, x, y) : brisk_pow_xy(g, x, y);
            char what[80];
            snprintf(what, sizeof what, "%s case %zu", brisk_op_name(ops[o]), c);
            check_graph(g, out, xs, 2, 1e-5, what);
        }
}

/* ---------------------------------------------------------------- losses */

static void test_losses(void) {
    const int64_t sizes[2] = {1000, 100003};
    for (int kind = BRISK_LOSS_MSE; kind <= BRISK_LOSS_BCE_LOGITS; kind++)
        for (int s = 0; s < 2; s++)
            for (int w = 0; w < 3; w++) {
                if (kind == BRISK_LOSS_MSE && w == 0) continue; /* BRISK_OP_MSE */
                brisk_graph *g = brisk_graph_new();
                brisk_shape sh = brisk_shape2(sizes[s] / 10 + 1, 10);
                int bce = kind == BRISK_LOSS_BCE_LOGITS;
                int p = grad_input(g, sh, bce ? -8.0f : -2.0f, bce ? 8.0f : 2.0f);
                int t = grad_input(g, sh, bce ? 0.0f : -2.0f, bce ? 1.0f : 2.0f);
                int wt = w == 0 ? -1 : ct_input(g, BRISK_F32, w == 1 ? sh : brisk_shape2(sh.d[0], 1), 0.0f, 2.0f);
                int xs[2] = {p, t};
                int l = brisk_pointwise_loss(g, kind, p, t, wt, 0.5f);
                char what[96];
                snprintf(what, sizeof what, "loss kind %d, %lld elements, %s", kind, (long long)brisk_shape_numel(&sh),
                         w == 0 ? "mean" : w == 1 ? "masked" : "row mask");
                check_graph(g, l, xs, 2, 1e-5, what);
            }
    /* all masked out: both sides give 0 and gradients 0 */
    brisk_graph *g = brisk_graph_new();
    int p = grad_input(g, brisk_shape2(7, 3), -2, 2), t = ct_input(g, BRISK_F32, brisk_shape2(7, 3), -2, 2);
    float zeros[7] = {0};
    int w = brisk_const(g, NULL, BRISK_F32, brisk_shape2(7, 1), zeros);
    check_graph(g, brisk_l1_loss(g, p, t, w), &p, 1, 0, "l1 all masked");
}

/* ---------------------------------------------------------------- vision */

static void test_upsample(void) {
    const struct { int64_t N, C, H, W; int sh, sw; } cs[] = {{2, 3, 5, 7, 2, 2}, {4, 16, 32, 30, 2, 2}, {1, 2, 3, 4, 3, 3},
                                                              {2, 3, 6, 5, 1, 5}, {1, 1, 1, 1, 4, 4}};
    for (int bil = 0; bil < 2; bil++)
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            brisk_graph *g = brisk_graph_new();
            int x = grad_input(g, brisk_shape4(cs[c].N, cs[c].C, cs[c].H, cs[c].W), -2, 2);
            int y = brisk_upsample2d(g, x, bil, cs[c].sh, cs[c].sw);
            char what[96];
            snprintf(what, sizeof what, "upsample %s case %zu", bil ? "bilinear" : "nearest", c);
            check_graph(g, y, &x, 1, 1e-5, what);
        }
}

static void conv_t_case(brisk_backend *be, int64_t N, int64_t Ci, int64_t H, int64_t W, int64_t Co, int k,
                        brisk_window win, int op, double tol, const char *what) {
    brisk_graph *g = brisk_graph_new();
    int nhwc = win.layout == BRISK_LAYOUT_NHWC;
    int x = grad_input(g, nhwc ? brisk_shape4(N, H, W, Ci) : brisk_shape4(N, Ci, H, W), -1, 1);
    int w = brisk_param(g, "w", brisk_shape4(Ci, Co / win.groups, k, k), BRISK_INIT_UNIFORM, 0.3f, 1);
    check_graph_on(be, g, brisk_conv_transpose2d(g, x, w, win, op, op), &x, 1, tol, what);
}

static void test_conv_transpose(void) {
    brisk_backend *be = gpu(0, BRISK_GEMM_FP32);
    conv_t_case(be, 2, 8, 9, 7, 6, 3, brisk_window_2d(3, 2, 1), 1, 1e-5, "conv_transpose 3x3 s2 p1 op1");
    conv_t_case(be, 4, 16, 8, 8, 8, 2, brisk_window_2d(2, 2, 0), 0, 1e-5, "conv_transpose 2x2 s2 (U-Net)");
    brisk_window gw = brisk_window_2d(3, 1, 1);
    gw.groups = 4;
    conv_t_case(be, 2, 8, 6, 5, 12, 3, gw, 0, 1e-5, "conv_transpose groups 4");
    brisk_window nw = brisk_window_2d(3, 2, 1);
    nw.layout = BRISK_LAYOUT_NHWC;
    conv_t_case(be, 2, 8, 9, 7, 6, 3, nw, 1, 1e-5, "conv_transpose NHWC 3x3 s2 p1 op1");
    conv_t_case(gpu(0, BRISK_GEMM_BF16), 4, 16, 8, 8, 8, 2, brisk_window_2d(2, 2, 0), 0, 2e-2,
                "conv_transpose 2x2 s2, bf16 operands");
}

static void test_conv1d_norm_pool(void) {
    brisk_graph *g = brisk_graph_new();
    int x = grad_input(g, brisk_shape3(4, 6, 50), -1, 1);
    int w = brisk_param(g, "w", brisk_shape3(8, 3, 5), BRISK_INIT_UNIFORM, 0.3f, 1);
    check_graph(g, brisk_conv1d(g, x, w, 2, 2, 1, 2), &x, 1, 1e-5, "conv1d k5 s2 p2 groups 2");
    for (int affine = 0; affine < 2; affine++) {
        g = brisk_graph_new();
        x = grad_input(g, brisk_shape4(3, 8, 9, 10), -2, 3);
        int gm = affine ? brisk_param(g, "gamma", brisk_shape1(8), BRISK_INIT_UNIFORM, 1.0f, 0) : -1;
        int bt = affine ? brisk_param(g, "beta", brisk_shape1(8), BRISK_INIT_UNIFORM, 1.0f, 0) : -1;
        check_graph(g, brisk_group_norm(g, x, gm, bt, 4, 1e-5f), &x, 1, 1e-5, affine ? "group norm" : "group norm, no affine");
    }
    g = brisk_graph_new();
    x = grad_input(g, brisk_shape4(3, 8, 9, 10), -2, 2);
    check_graph(g, brisk_global_avg_pool2d(g, x, BRISK_LAYOUT_NCHW), &x, 1, 1e-5, "global average pool");
}

/* repeated indices: the deterministic backend sums them in the CPU's order, bit for bit */
static void test_embedding_deterministic(void) {
    brisk_graph *g = brisk_graph_new();
    int table = brisk_param(g, "emb", brisk_shape2(12, 40), BRISK_INIT_UNIFORM, 1.0f, 0);
    int idx = ct_input(g, BRISK_I32, brisk_shape2(64, 9), 0, 12); /* 576 lookups of 12 rows */
    check_graph_on(gpu(1, BRISK_GEMM_FP32), g, brisk_embedding(g, table, idx), NULL, 0, 0.0, "embedding, deterministic");
}

/* conv -> group norm -> leaky ReLU -> transposed conv (up) and bilinear upsampling side by
 * side, concat -> conv -> masked Huber against a target: one training step's loss and
 * every parameter's gradient */
static void test_small_unet(void) {
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape4(4, 3, 16, 16), -1, 1);
    int t = ct_input(g, BRISK_F32, brisk_shape4(4, 2, 32, 32), -1, 1);
    int m = ct_input(g, BRISK_F32, brisk_shape4(4, 1, 32, 32), 0, 1);
    int w1 = brisk_param(g, "c1.weight", brisk_shape4(8, 3, 3, 3), BRISK_INIT_UNIFORM, 0.3f, 1);
    int gm = brisk_param(g, "gn.weight", brisk_shape1(8), BRISK_INIT_ONES, 0, 0);
    int bt = brisk_param(g, "gn.bias", brisk_shape1(8), BRISK_INIT_ZEROS, 0, 0);
    int wu = brisk_param(g, "up.weight", brisk_shape4(8, 4, 2, 2), BRISK_INIT_UNIFORM, 0.3f, 1);
    int w2 = brisk_param(g, "c2.weight", brisk_shape4(2, 12, 3, 3), BRISK_INIT_UNIFORM, 0.2f, 1);
    int h = brisk_conv2d(g, x, w1, brisk_window_2d(3, 1, 1));
    h = brisk_leaky_relu(g, brisk_group_norm(g, h, gm, bt, 2, 1e-5f), 0.1f);
    int parts[2] = {brisk_conv_transpose2d(g, h, wu, brisk_window_2d(2, 2, 0), 0, 0),
                    brisk_upsample2d(g, h, BRISK_UPSAMPLE_BILINEAR, 2, 2)};
    int y = brisk_conv2d(g, brisk_concat(g, parts, 2, 1), w2, brisk_window_2d(3, 1, 1));
    int loss = brisk_huber_loss(g, y, t, 0.5f, m);
    brisk_error err = {0};
    ct_pair p;
    memset(&p, 0, sizeof p);
    brisk_backend *be = gpu(0, BRISK_GEMM_FP32);
    if (brisk_graph_error(g, &err) || brisk_backward(g, loss, &err) || (g->loss = loss, g->output = y, 0) ||
        ct_pair_make(g, be, &p, &err) || brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) ||
        brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) || be->sync(be, &err)) {
        CHECKF(0, "small U-Net: %s", err.msg);
    } else {
        CHECK(ct_compare(&p, loss, 1e-5, "small U-Net loss"));
        for (int k = 0; k < g->n_params; k++)
            CHECKF(ct_compare(&p, g->params[k].grad_node, 1e-4, g->params[k].name), "small U-Net: d %s",
                   g->params[k].name);
    }
    ct_pair_free(&p);
    brisk_graph_free(g);
}

CUDA_TEST_MAIN(T(test_unary), T(test_binary), T(test_losses), T(test_upsample), T(test_conv_transpose),
               T(test_conv1d_norm_pool), T(test_embedding_deterministic), T(test_small_unet))
