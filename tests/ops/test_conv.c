/* CONV2D (stride, padding, dilation, groups, 1x1, and a bias through ADD; NCHW and NHWC)
 * and POOL2D (max and average): forward vs float64, gradients of x and w vs finite differences through
 * the backward rules (CONV2D_GRAD_X, CONV2D_GRAD_W, POOL2D_GRAD); and the shape rules'
 * errors. */
#include "ops/opcheck.h"
#include "ops/vision_ref.h"

static brisk_window win(int stride, int pad, int dil, int groups) {
    brisk_window w = brisk_window_2d(1, stride, pad);
    w.dh = w.dw = dil;
    w.groups = groups;
    return w;
}

static void check_conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t Co, int64_t kh, int64_t kw, brisk_window w,
                       int bias, const char *what) {
    oc c;
    oc_init(&c, (uint64_t)(N * 131 + C * 17 + H * 7 + Co + kh * 3 + w.groups + w.layout * 1000));
    int nhwc = w.layout == BRISK_LAYOUT_NHWC;
    int x = oc_param(&c, "x", nhwc ? brisk_shape4(N, H, W, C) : brisk_shape4(N, C, H, W));
    int wt = oc_param(&c, "w", brisk_shape4(Co, C / w.groups, kh, kw));
    int out = brisk_conv2d(c.g, x, wt, w);
    int b = -1;
    if (bias) { /* NHWC: the bias broadcasts over the last dim */
        b = oc_param(&c, "b", brisk_shape1(Co));
        out = brisk_add(c.g, out, nhwc ? b : brisk_reshape(c.g, b, brisk_shape3(Co, 1, 1)));
    }
    vref_conv r;
    vref_conv_init(&r, N, C, H, W, Co, kh, kw, w);
    CHECKF(out >= 0 && brisk_shape_equal(&c.g->nodes[out].shape, nhwc ? &(brisk_shape){4, {N, r.Ho, r.Wo, Co}}
                                                                      : &(brisk_shape){4, {N, Co, r.Ho, r.Wo}}),
           "%s: output shape", what);
    int64_t ny = N * Co * r.Ho * r.Wo;
    double *ref = malloc(sizeof(double) * (size_t)ny);
    vref_conv_fwd(&r, oc_val(&c, x), oc_val(&c, wt), ref);
    if (bias)
        for (int64_t i = 0; i < ny; i++) ref[i] += oc_val(&c, b)[nhwc ? i % Co : i / (r.Ho * r.Wo) % Co];
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_conv_basic(void) {
    check_conv(2, 3, 5, 6, 4, 3, 3, win(1, 1, 1, 1), 0, "conv 3x3 pad 1");
    check_conv(1, 2, 7, 7, 3, 3, 3, win(2, 0, 1, 1), 0, "conv 3x3 stride 2");
    check_conv(2, 3, 9, 8, 2, 3, 2, win(2, 1, 1, 1), 0, "conv 3x2 stride 2 pad 1");
}

static void test_conv_dilation_groups(void) {
    check_conv(2, 4, 8, 7, 6, 3, 3, win(1, 2, 2, 1), 0, "conv dilation 2");
    check_conv(2, 4, 6, 6, 6, 3, 3, win(1, 1, 1, 2), 0, "conv groups 2");
    check_conv(1, 4, 6, 5, 4, 3, 3, win(2, 1, 1, 4), 0, "conv depthwise stride 2");
    brisk_window w = win(1, 0, 1, 1);
    w.sh = 2, w.ph = 1, w.dw = 2; /* unequal strides, padding and dilation per axis */
    check_conv(2, 2, 7, 9, 3, 2, 3, w, 0, "conv anisotropic");
}

static void test_conv_pointwise_bias(void) {
    check_conv(3, 5, 4, 3, 4, 1, 1, win(1, 0, 1, 1), 0, "conv 1x1");
    check_conv(2, 4, 5, 5, 6, 1, 1, win(2, 0, 1, 2), 0, "conv 1x1 stride 2 groups 2");
    check_conv(2, 3, 5, 4, 2, 3, 3, win(1, 1, 1, 1), 1, "conv + bias");
}

/* NHWC: the same cases with channels last, forward vs float64 and both gradients vs
 * finite differences through the gradient ops, which carry the layout */
static brisk_window nhwc(brisk_window w) {
    w.layout = BRISK_LAYOUT_NHWC;
    return w;
}

static void test_conv_nhwc(void) {
    check_conv(2, 3, 5, 6, 4, 3, 3, nhwc(win(1, 1, 1, 1)), 0, "nhwc conv 3x3 pad 1");
    check_conv(2, 3, 9, 8, 2, 3, 2, nhwc(win(2, 1, 1, 1)), 0, "nhwc conv 3x2 stride 2 pad 1");
    check_conv(2, 4, 8, 7, 6, 3, 3, nhwc(win(1, 2, 2, 1)), 0, "nhwc conv dilation 2");
    check_conv(2, 4, 6, 6, 6, 3, 3, nhwc(win(1, 1, 1, 2)), 0, "nhwc conv groups 2");
    check_conv(1, 4, 6, 5, 4, 3, 3, nhwc(win(2, 1, 1, 4)), 0, "nhwc conv depthwise stride 2");
    brisk_window w = win(1, 0, 1, 1);
    w.sh = 2, w.ph = 1, w.dw = 2;
    check_conv(2, 2, 7, 9, 3, 2, 3, nhwc(w), 0, "nhwc conv anisotropic");
    check_conv(3, 5, 4, 3, 4, 1, 1, nhwc(win(1, 0, 1, 1)), 0, "nhwc conv 1x1 (a plain GEMM)");
    check_conv(2, 4, 4, 5, 6, 1, 1, nhwc(win(1, 0, 1, 2)), 0, "nhwc conv 1x1 groups 2");
    check_conv(2, 4, 5, 5, 6, 1, 1, nhwc(win(2, 0, 1, 2)), 0, "nhwc conv 1x1 stride 2 groups 2");
    check_conv(2, 3, 5, 4, 2, 3, 3, nhwc(win(1, 1, 1, 1)), 1, "nhwc conv + bias");
}

static void check_pool(int kind, int64_t N, int64_t C, int64_t H, int64_t W, brisk_window w, const char *what) {
    oc c;
    oc_init(&c, (uint64_t)(kind * 7 + H * 3 + W + w.kh + w.layout * 100));
    int nhwc = w.layout == BRISK_LAYOUT_NHWC;
    /* distinct values well apart, so a small step never changes which one is a window's max */
    int x = oc_param(&c, "x", nhwc ? brisk_shape4(N, H, W, C) : brisk_shape4(N, C, H, W));
    float *v = (float *)oc_val(&c, x);
    int64_t n = N * C * H * W;
    for (int64_t i = 0; i < n; i++) v[i] = (float)(((i * 37) % n) * 0.05 - n * 0.025);
    int out = brisk_pool2d(c.g, x, kind, w);
    int64_t Ho = (H + 2 * w.ph - w.dh * (w.kh - 1) - 1) / w.sh + 1, Wo = (W + 2 * w.pw - w.dw * (w.kw - 1) - 1) / w.sw + 1;
    /* the reference pools [N C] planes: NHWC's x gathered into them, its result put back */
    float *planes = malloc(sizeof(float) * (size_t)n);
    for (int64_t q = 0; q < N * C; q++)
        for (int64_t p = 0; p < H * W; p++)
            planes[q * H * W + p] = v[vref_index(w.layout, q / C, q % C, p / W, p % W, C, H, W)];
    double *pref = malloc(sizeof(double) * (size_t)(N * C * Ho * Wo)), *ref = malloc(sizeof(double) * (size_t)(N * C * Ho * Wo));
    vref_pool(kind == BRISK_POOL_MAX, N * C, H, W, w, planes, pref, NULL, NULL);
    for (int64_t q = 0; q < N * C; q++)
        for (int64_t p = 0; p < Ho * Wo; p++)
            ref[vref_index(w.layout, q / C, q % C, p / Wo, p % Wo, C, Ho, Wo)] = pref[q * Ho * Wo + p];
    oc_check(&c, out, ref, what);
    free(planes), free(pref), free(ref);
    oc_free(&c);
}

static void test_pool(void) {
    check_pool(BRISK_POOL_MAX, 2, 3, 7, 7, brisk_window_2d(3, 2, 1), "max pool 3x3 stride 2 pad 1");
    check_pool(BRISK_POOL_MAX, 1, 2, 6, 5, brisk_window_2d(2, 2, 0), "max pool 2x2");
    brisk_window d = brisk_window_2d(2, 1, 1);
    d.dh = d.dw = 2;
    check_pool(BRISK_POOL_MAX, 1, 2, 6, 6, d, "max pool dilation 2");
    check_pool(BRISK_POOL_AVG, 2, 3, 7, 6, brisk_window_2d(3, 2, 1), "avg pool 3x3 stride 2 pad 1");
    check_pool(BRISK_POOL_AVG, 1, 2, 4, 4, brisk_window_2d(2, 2, 0), "avg pool 2x2");
    check_pool(BRISK_POOL_MAX, 2, 3, 7, 6, nhwc(brisk_window_2d(3, 2, 1)), "nhwc max pool 3x3 stride 2 pad 1");
    check_pool(BRISK_POOL_MAX, 1, 2, 6, 6, nhwc(d), "nhwc max pool dilation 2");
    check_pool(BRISK_POOL_AVG, 2, 3, 7, 6, nhwc(brisk_window_2d(3, 2, 1)), "nhwc avg pool 3x3 stride 2 pad 1");
}

/* global average pooling is MEAN over H and W (an existing op), then a flatten */
static void test_global_avg_pool(void) {
    oc c;
    oc_init(&c, 5);
    int x = oc_param(&c, "x", brisk_shape4(2, 3, 4, 5));
    int out = brisk_mean(c.g, x, (1u << 2) | (1u << 3), 0);
    const float *v = oc_val(&c, x);
    double ref[6] = {0};
    for (int i = 0; i < 120; i++) ref[i / 20] += v[i] / 20.0;
    oc_check(&c, out, ref, "global average pool");
    oc_free(&c);
}

static void test_shape_errors(void) {
    struct { brisk_shape x, w; brisk_window win; brisk_status code; const char *want; } cases[] = {
        {brisk_shape3(1, 2, 3), brisk_shape4(1, 2, 1, 1), win(1, 0, 1, 1), BRISK_ERR_SHAPE, "[N, C, H, W]"},
        {brisk_shape4(1, 3, 5, 5), brisk_shape4(2, 2, 3, 3), win(1, 0, 1, 1), BRISK_ERR_SHAPE, "groups"},
        {brisk_shape4(1, 4, 5, 5), brisk_shape4(3, 2, 3, 3), win(1, 0, 1, 2), BRISK_ERR_SHAPE, "multiples"},
        {brisk_shape4(1, 2, 2, 2), brisk_shape4(1, 2, 3, 3), win(1, 0, 1, 1), BRISK_ERR_SHAPE, "does not fit"},
        {brisk_shape4(1, 2, 5, 5), brisk_shape4(1, 2, 3, 3), win(0, 0, 1, 1), BRISK_ERR_INVALID, "stride"},
        {brisk_shape4(1, 2, 5, 5), brisk_shape4(1, 2, 3, 3), win(1, -1, 1, 1), BRISK_ERR_INVALID, "padding"},
        {brisk_shape4(1, 2, 5, 5), brisk_shape4(1, 2, 3, 3), win(1, 0, 0, 1), BRISK_ERR_INVALID, "dilation"},
        /* NHWC reads C from the last dim: 5 channels are not w's 2, and 2x5 is too small */
        {brisk_shape4(1, 5, 5, 3), brisk_shape4(1, 2, 3, 3), nhwc(win(1, 0, 1, 1)), BRISK_ERR_SHAPE, "(NHWC)"},
        {brisk_shape4(1, 2, 5, 2), brisk_shape4(1, 2, 3, 3), nhwc(win(1, 0, 1, 1)), BRISK_ERR_SHAPE, "does not fit"},
        {brisk_shape4(1, 2, 5, 5), brisk_shape4(1, 2, 3, 3), (brisk_window){.sh = 1, .sw = 1, .dh = 1, .dw = 1,
                                                             .groups = 1, .layout = 5}, BRISK_ERR_INVALID, "layout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_graph *g = brisk_graph_new();
        int x = brisk_input(g, "x", BRISK_F32, cases[i].x), w = brisk_param(g, "w", cases[i].w, BRISK_INIT_ZEROS, 0, 1);
        CHECK(brisk_conv2d(g, x, w, cases[i].win) == -1);
        brisk_error e;
        CHECKF(brisk_graph_error(g, &e) == cases[i].code && strstr(e.msg, cases[i].want), "case %zu: %s", i, e.msg);
        brisk_graph_free(g);
    }
    struct { brisk_window win; int kind; const char *want; } pools[] = {
        {brisk_window_2d(3, 1, 2), BRISK_POOL_MAX, "half"},
        {brisk_window_2d(3, 1, 1), 7, "kind"},
        {{.kh = 2, .kw = 2, .sh = 1, .sw = 1, .dh = 2, .dw = 2}, BRISK_POOL_AVG, "dilation"},
        {brisk_window_2d(9, 1, 0), BRISK_POOL_MAX, "does not fit"},
        {nhwc(brisk_window_2d(3, 1, 0)), BRISK_POOL_MAX, "(NHWC)"}, /* x [1, 2, 5, 5] NHWC: H = 2 */
    };
    for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
        brisk_graph *g = brisk_graph_new();
        int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(1, 2, 5, 5));
        CHECK(brisk_pool2d(g, x, pools[i].kind, pools[i].win) == -1);
        brisk_error e;
        CHECKF(brisk_graph_error(g, &e) != BRISK_OK && strstr(e.msg, pools[i].want), "pool case %zu: %s", i, e.msg);
        brisk_graph_free(g);
    }
}

TEST_MAIN(T(test_conv_basic), T(test_conv_dilation_groups), T(test_conv_pointwise_bias), T(test_conv_nhwc), T(test_pool),
          T(test_global_avg_pool), T(test_shape_errors))
