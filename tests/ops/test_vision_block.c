/* A ResNet BasicBlock as the builders will compose it, through autodiff and the planner:
 *   h = relu(bn1(conv1(x)));  y = relu(bn2(conv2(h)) + x);  maxpool 3/2/1;  mean over H, W
 * forward vs float64 (composed from the single-op references) and the gradients of x, both
 * conv weights and both BatchNorm scales and shifts vs finite differences: checks that
 * the ops' workspaces and gradient nodes survive planning in a graph where they share the
 * arena with others. */
#include "ops/opcheck.h"
#include "ops/vision_ref.h"

enum { N = 2, C = 4, H = 6, W = 6 };

/* y = bn(in) (+ res), ReLU; batch statistics, [N, C, H, W] */
static void bn_relu_ref(const double *in, const float *gm, const float *bt, const double *res, double *y) {
    const int S = H * W;
    for (int c = 0; c < C; c++) {
        double m = 0, v = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) m += in[(n * C + c) * S + i];
        m /= N * S;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) v += pow(in[(n * C + c) * S + i] - m, 2);
        v /= N * S;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) {
                int o = (n * C + c) * S + i;
                double t = (in[o] - m) / sqrt(v + 1e-5) * gm[c] + bt[c] + (res ? res[o] : 0);
                y[o] = t < 0 ? 0 : t;
            }
    }
}

static void test_basic_block(void) {
    oc c;
    oc_init(&c, 21);
    c.fd_eps = 2e-3; /* small: two ReLUs and a max pool */
    c.fd_rtol = 2e-2;
    c.max_fd = 16;
    brisk_graph *g = c.g;
    int x = oc_param(&c, "x", brisk_shape4(N, C, H, W));
    int w1 = oc_param(&c, "w1", brisk_shape4(C, C, 3, 3)), w2 = oc_param(&c, "w2", brisk_shape4(C, C, 3, 3));
    int g1 = oc_param_avoid(&c, "g1", brisk_shape1(C), 0.5, 1.5, 0), b1 = oc_param(&c, "b1", brisk_shape1(C));
    int g2 = oc_param_avoid(&c, "g2", brisk_shape1(C), 0.5, 1.5, 0), b2 = oc_param(&c, "b2", brisk_shape1(C));
    int rm[2], rv[2];
    for (int i = 0; i < 2; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "rm%d", i);
        rm[i] = brisk_buffer(g, nm, brisk_shape1(C), BRISK_INIT_ZEROS);
        snprintf(nm, sizeof nm, "rv%d", i);
        rv[i] = brisk_buffer(g, nm, brisk_shape1(C), BRISK_INIT_ONES);
    }
    brisk_window k3 = brisk_window_2d(3, 1, 1);
    int h = brisk_batchnorm(g, brisk_conv2d(g, x, w1, k3), g1, b1, rm[0], rv[0], -1, 1e-5f, 0.1f, 1);
    int y = brisk_batchnorm(g, brisk_conv2d(g, h, w2, k3), g2, b2, rm[1], rv[1], x, 1e-5f, 0.1f, 1);
    int out = brisk_mean(g, brisk_pool2d(g, y, BRISK_POOL_MAX, brisk_window_2d(3, 2, 1)), 0xC, 0);

    vref_conv r;
    vref_conv_init(&r, N, C, H, W, C, 3, 3, (brisk_window){.sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1, .groups = 1});
    const int n = N * C * H * W;
    double t1[N * C * H * W], t2[N * C * H * W], xd[N * C * H * W], pooled[N * C * 9], ref[N * C];
    float t1f[N * C * H * W];
    const float *xv = oc_val(&c, x);
    for (int i = 0; i < n; i++) xd[i] = xv[i];
    vref_conv_fwd(&r, xv, oc_val(&c, w1), t1);
    bn_relu_ref(t1, oc_val(&c, g1), oc_val(&c, b1), NULL, t2);
    for (int i = 0; i < n; i++) t1f[i] = (float)t2[i]; /* the next conv's input, as f32 like brisk's */
    vref_conv_fwd(&r, t1f, oc_val(&c, w2), t1);
    bn_relu_ref(t1, oc_val(&c, g2), oc_val(&c, b2), xd, t2);
    float yf[N * C * H * W];
    for (int i = 0; i < n; i++) yf[i] = (float)t2[i];
    vref_pool(1, N * C, H, W, brisk_window_2d(3, 2, 1), yf, pooled, NULL, NULL);
    for (int i = 0; i < N * C; i++) {
        ref[i] = 0;
        for (int j = 0; j < 9; j++) ref[i] += pooled[i * 9 + j] / 9;
    }
    c.fwd_rtol = 1e-4; /* rounding the intermediates to f32 as brisk does still leaves its summation order */
    oc_check(&c, out, ref, "basic block");
    oc_free(&c);
}

TEST_MAIN(T(test_basic_block))
