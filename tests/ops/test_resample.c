/* The vision ops a U-Net and a 1-D CNN need: UPSAMPLE2D (nearest and bilinear, integer
 * scales), the transposed convolution (CONV2D_GRAD_X as a forward op, with its backward
 * rule), the 1-D convolution (CONV2D through views), group normalisation and global
 * average pooling: forward vs float64, gradients vs finite differences, values PyTorch
 * printed, and the builders' errors. */
#include "ops/opcheck.h"
#include "ops/vision_ref.h"

static void check_upsample(int bilinear, int64_t N, int64_t C, int64_t H, int64_t W, int sh, int sw) {
    oc c;
    oc_init(&c, 800 + (uint64_t)(bilinear * 17 + H * 3 + W + sh * 5 + sw));
    int x = oc_param(&c, "x", brisk_shape4(N, C, H, W));
    int out = brisk_upsample2d(c.g, x, bilinear ? BRISK_UPSAMPLE_BILINEAR : BRISK_UPSAMPLE_NEAREST, sh, sw);
    REQUIRE(out >= 0);
    int64_t n = N * C * H * sh * W * sw;
    double *ref = malloc(sizeof(double) * (size_t)n);
    vref_upsample(bilinear, N * C, H, W, sh, sw, oc_val(&c, x), NULL, ref, NULL);
    char what[80];
    snprintf(what, sizeof what, "upsample %s %lldx%lld by %dx%d", bilinear ? "bilinear" : "nearest", (long long)H,
             (long long)W, sh, sw);
    c.max_fd = 40;
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_upsample(void) {
    for (int b = 0; b < 2; b++) {
        check_upsample(b, 2, 3, 4, 5, 2, 2);
        check_upsample(b, 1, 2, 3, 4, 3, 3);
        check_upsample(b, 2, 1, 5, 3, 2, 4);
        check_upsample(b, 1, 1, 1, 4, 5, 1);
    }
}

/* torch 1.13: F.interpolate(x, scale_factor=2 or 3, mode='bilinear', align_corners=False), and
 * x's gradient of sum(y * w), w = (1 .. 24) / 10, at scale 2 */
static void test_upsample_torch(void) {
    const float xv[6] = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};
    const double y2[24] = {0.5, 0.125, -0.625, -0.25, 1.25, 2.0, 0.75, 0.390625, -0.328125, -0.1875, 0.8125, 1.3125,
                           1.25, 0.921875, 0.265625, -0.0625, -0.0625, -0.0625, 1.5, 1.1875, 0.5625, 0.0, -0.5, -0.75};
    const double y3_row2[9] = {0.8333333730697632, 0.8333333730697632, 0.3611111044883728, -0.11111107468605042,
                               -0.5833331942558289, -0.02777770161628723, 0.5277778506278992, 1.0833332538604736,
                               1.0833332538604736};
    const double gx2[6] = {2.15, 2.9, 3.65, 6.35, 7.1, 7.85};
    for (int s = 2; s <= 3; s++) {
        brisk_graph *g = brisk_graph_new();
        int x = brisk_param(g, "x", brisk_shape4(1, 1, 2, 3), BRISK_INIT_ZEROS, 0, 0);
        int y = brisk_upsample2d(g, x, BRISK_UPSAMPLE_BILINEAR, s, s);
        float w[54];
        for (int i = 0; i < 54; i++) w[i] = (float)(i + 1) / 10.0f;
        int loss = brisk_sum(g, brisk_mul(g, y, brisk_const(g, NULL, BRISK_F32, g->nodes[y].shape, w)), 15, 0);
        brisk_error e, *ep = &e;
        REQUIRE_OK(brisk_backward(g, loss, &e), ep);
        g->output = y;
        brisk_plan plan;
        REQUIRE_OK(brisk_plan_build(g, &plan, &e), ep);
        brisk_backend *be = brisk_backend_cpu_new(1);
        brisk_exec *ex;
        REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &e), ep);
        memcpy(ex->params, xv, sizeof xv);
        REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
        float got[54], gx[6];
        REQUIRE_OK(brisk_exec_read(ex, y, got, &e), ep);
        REQUIRE_OK(brisk_exec_read(ex, g->params[0].grad_node, gx, &e), ep);
        if (s == 2) {
            CHECK(oc_compare("bilinear x2 (torch)", got, y2, 24, 1e-6) == 0);
            CHECK(oc_compare("bilinear x2 gradient (torch)", gx, gx2, 6, 1e-6) == 0);
        } else {
            CHECK(oc_compare("bilinear x3 row 2 (torch)", got + 18, y3_row2, 9, 1e-6) == 0);
        }
        brisk_exec_free(ex);
        be->destroy(be);
        brisk_plan_free(&plan);
        brisk_graph_free(g);
    }
}

/* ---- transposed convolution */

static void check_conv_t(int64_t N, int64_t Ci, int64_t H, int64_t W, int64_t Co, int kh, int kw, brisk_window w,
                         int oph, int opw, const char *what) {
    oc c;
    oc_init(&c, 900 + (uint64_t)(N + Ci * 3 + H * 5 + kh * 7 + w.sh * 11 + oph + w.layout * 13));
    int nhwc = w.layout == BRISK_LAYOUT_NHWC;
    int x = oc_param(&c, "x", nhwc ? brisk_shape4(N, H, W, Ci) : brisk_shape4(N, Ci, H, W));
    int wt = oc_param(&c, "w", brisk_shape4(Ci, Co / w.groups, kh, kw));
    int out = brisk_conv_transpose2d(c.g, x, wt, w, oph, opw);
    REQUIRE(out >= 0);
    int64_t Ho = (H - 1) * w.sh - 2 * w.ph + w.dh * (kh - 1) + oph + 1;
    int64_t Wo = (W - 1) * w.sw - 2 * w.pw + w.dw * (kw - 1) + opw + 1;
    const brisk_shape *so = &c.g->nodes[out].shape;
    CHECKF(so->d[0] == N && so->d[nhwc ? 3 : 1] == Co && so->d[nhwc ? 1 : 2] == Ho && so->d[nhwc ? 2 : 3] == Wo,
           "%s: output shape", what);
    /* the transposed convolution of x is the forward convolution's x-gradient at dy = x, the
     * forward mapping [N, Co, Ho, Wo] to [N, Ci, H, W] */
    vref_conv r;
    brisk_window fw = w;
    fw.kh = kh, fw.kw = kw;
    vref_conv_init(&r, N, Co, Ho, Wo, Ci, kh, kw, fw);
    CHECKF(r.Ho == H && r.Wo == W, "%s: the forward convolution of the output gives %lldx%lld", what, (long long)r.Ho,
           (long long)r.Wo);
    double *ref = malloc(sizeof(double) * (size_t)(N * Co * Ho * Wo));
    vref_conv_dx(&r, oc_val(&c, x), oc_val(&c, wt), ref);
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_conv_transpose(void) {
    brisk_window w = brisk_window_2d(3, 2, 1);
    check_conv_t(2, 3, 4, 5, 4, 3, 3, w, 1, 1, "conv_transpose 3x3 stride 2 pad 1 output pad 1");
    check_conv_t(2, 3, 4, 5, 4, 3, 3, w, 0, 0, "conv_transpose 3x3 stride 2 pad 1");
    check_conv_t(1, 2, 3, 3, 3, 2, 2, brisk_window_2d(2, 2, 0), 0, 0, "conv_transpose 2x2 stride 2 (U-Net)");
    check_conv_t(2, 4, 3, 4, 2, 3, 3, brisk_window_2d(3, 1, 1), 0, 0, "conv_transpose stride 1");
    brisk_window g = brisk_window_2d(3, 2, 0);
    g.groups = 2;
    g.dh = 2;
    check_conv_t(1, 4, 3, 3, 6, 3, 2, g, 1, 0, "conv_transpose groups 2 dilation 2x1");
    brisk_window n = brisk_window_2d(3, 2, 1);
    n.layout = BRISK_LAYOUT_NHWC;
    check_conv_t(2, 3, 4, 5, 4, 3, 3, n, 1, 1, "nhwc conv_transpose 3x3 stride 2 pad 1 output pad 1");
}

/* torch 1.13: F.conv_transpose2d([[1, 2], [3, 4]], w, stride=2, padding=1, output_padding=1) */
static void test_conv_transpose_torch(void) {
    oc c;
    oc_init(&c, 950);
    int x = oc_param(&c, "x", brisk_shape4(1, 1, 2, 2)), wt = oc_param(&c, "w", brisk_shape4(1, 1, 3, 3));
    memcpy((float *)oc_val(&c, x), (float[]){1, 2, 3, 4}, 16);
    memcpy((float *)oc_val(&c, wt), (float[]){1, 0.5f, -1, 2, 0, 1, 0.25f, -0.5f, 1.5f}, 36);
    int out = brisk_conv_transpose2d(c.g, x, wt, brisk_window_2d(3, 2, 1), 1, 1);
    const double want[16] = {0, 5, 0, 2, 1, 3, 1, -1, 0, 11, 0, 4, -1.5, 5.5, -2, 6};
    oc_check(&c, out, want, "conv_transpose (torch)");
    oc_free(&c);
}

/* ---- 1-D convolution */

static void check_conv1d(int64_t N, int64_t C, int64_t L, int64_t Co, int k, int stride, int pad, int dil, int groups,
                         const char *what) {
    oc c;
    oc_init(&c, 1000 + (uint64_t)(N + C * 3 + L * 5 + k * 7 + stride * 11 + groups));
    int x = oc_param(&c, "x", brisk_shape3(N, C, L)), wt = oc_param(&c, "w", brisk_shape3(Co, C / groups, k));
    int out = brisk_conv1d(c.g, x, wt, stride, pad, dil, groups);
    REQUIRE(out >= 0);
    int64_t Lo = (L + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    CHECKF(brisk_shape_equal(&c.g->nodes[out].shape, &(brisk_shape){3, {N, Co, Lo}}), "%s: output shape", what);
    const float *vx = oc_val(&c, x), *vw = oc_val(&c, wt);
    double *ref = calloc((size_t)(N * Co * Lo), sizeof(double));
    int64_t cg = C / groups, cog = Co / groups;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Co; o++)
            for (int64_t l = 0; l < Lo; l++)
                for (int64_t ci = 0; ci < cg; ci++)
                    for (int64_t t = 0; t < k; t++) {
                        int64_t il = l * stride - pad + t * dil;
                        if (il >= 0 && il < L)
                            ref[(n * Co + o) * Lo + l] += (double)vx[(n * C + o / cog * cg + ci) * L + il] *
                                                          vw[(o * cg + ci) * k + t];
                    }
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_conv1d(void) {
    check_conv1d(2, 3, 11, 4, 3, 1, 1, 1, 1, "conv1d k3 pad 1");
    check_conv1d(2, 4, 16, 6, 5, 2, 2, 1, 2, "conv1d k5 stride 2 groups 2");
    check_conv1d(1, 2, 12, 3, 3, 1, 2, 2, 1, "conv1d dilation 2");
    check_conv1d(3, 5, 7, 4, 1, 1, 0, 1, 1, "conv1d pointwise");
}

/* ---- group norm */

static void check_group_norm(int64_t N, int64_t C, int64_t S, int groups, int affine, const char *what) {
    oc c;
    oc_init(&c, 1100 + (uint64_t)(N + C * 3 + S * 5 + groups * 7 + affine));
    int x = oc_param(&c, "x", brisk_shape4(N, C, S, 2));
    int gamma = affine ? oc_param_avoid(&c, "gamma", brisk_shape1(C), 0.5, 1.5, 0) : -1;
    int beta = affine ? oc_param(&c, "beta", brisk_shape1(C)) : -1;
    const float eps = 1e-5f;
    int out = brisk_group_norm(c.g, x, gamma, beta, groups, eps);
    REQUIRE(out >= 0);
    const float *vx = oc_val(&c, x);
    int64_t per = C / groups * S * 2, n = N * C * S * 2;
    double *ref = malloc(sizeof(double) * (size_t)n);
    for (int64_t r = 0; r < N * groups; r++) {
        double m = 0, v = 0;
        for (int64_t i = 0; i < per; i++) m += vx[r * per + i];
        m /= (double)per;
        for (int64_t i = 0; i < per; i++) v += (vx[r * per + i] - m) * (vx[r * per + i] - m);
        double rs = 1 / sqrt(v / (double)per + eps);
        for (int64_t i = 0; i < per; i++) {
            int64_t e = r * per + i, ch = e / (S * 2) % C;
            ref[e] = (vx[e] - m) * rs;
            if (affine) ref[e] = ref[e] * oc_val(&c, gamma)[ch] + oc_val(&c, beta)[ch];
        }
    }
    c.max_fd = 40;
    c.fwd_rtol = 2e-5;
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_group_norm(void) {
    check_group_norm(2, 6, 3, 3, 1, "group norm 3 groups");
    check_group_norm(2, 4, 5, 1, 1, "group norm 1 group (layer norm over C H W)");
    check_group_norm(3, 4, 2, 4, 1, "group norm 4 groups (instance norm)");
    check_group_norm(2, 6, 3, 2, 0, "group norm without affine");
}

/* torch 1.13: nn.GroupNorm(2, 4) with weight [1, 2, -1, 0.5], bias [0, 0.1, 0.2, 0.3] of x [1, 4, 2] */
static void test_group_norm_torch(void) {
    oc c;
    oc_init(&c, 1150);
    int x = oc_param(&c, "x", brisk_shape3(1, 4, 2));
    int gamma = oc_param(&c, "gamma", brisk_shape1(4)), beta = oc_param(&c, "beta", brisk_shape1(4));
    memcpy((float *)oc_val(&c, x), (float[]){1, 2, 3, 5, -1, 0.5f, 2, 2.5f}, 32);
    memcpy((float *)oc_val(&c, gamma), (float[]){1, 2, -1, 0.5f}, 16);
    memcpy((float *)oc_val(&c, beta), (float[]){0, 0.1f, 0.2f, 0.3f}, 16);
    int out = brisk_group_norm(c.g, x, gamma, beta, 2, 1e-5f);
    const double want[8] = {-1.183213233947754, -0.5070914030075073, 0.4380607604980469, 3.142548084259033,
                            1.6605896949768066, 0.5651473999023438, 0.6651474237442017, 0.8477210998535156};
    oc_check(&c, out, want, "group norm (torch)");
    oc_free(&c);
}

static void test_global_avg_pool(void) {
    for (int layout = 0; layout < 2; layout++) {
        oc c;
        oc_init(&c, 1200 + (uint64_t)layout);
        int x = oc_param(&c, "x", brisk_shape4(2, 3, 4, 5)); /* NHWC: H 3, W 4, C 5 */
        int out = brisk_global_avg_pool2d(c.g, x, layout);
        REQUIRE(out >= 0);
        const float *v = oc_val(&c, x);
        int64_t C = layout ? 5 : 3;
        double ref[10] = {0};
        for (int64_t i = 0; i < 120; i++) {
            int64_t n = i / 60, ch = layout ? i % 5 : i / 20 % 3;
            ref[n * C + ch] += v[i] / (layout ? 12.0 : 20.0);
        }
        CHECK(c.g->nodes[out].shape.ndim == 2 && c.g->nodes[out].shape.d[1] == C);
        oc_check(&c, out, ref, layout ? "global avg pool nhwc" : "global avg pool");
        oc_free(&c);
    }
}

static void test_errors(void) {
    brisk_graph *g = brisk_graph_new();
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(1, 2, 3, 3));
    int w = brisk_param(g, "w", brisk_shape4(2, 4, 3, 3), BRISK_INIT_ZEROS, 0, 1);
    brisk_error e;
    CHECK(brisk_conv_transpose2d(g, x, w, brisk_window_2d(3, 2, 1), 2, 0) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "output padding") && strstr(e.msg, "stride"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape4(1, 2, 3, 3));
    w = brisk_param(g, "w", brisk_shape4(3, 4, 3, 3), BRISK_INIT_ZEROS, 0, 1);
    CHECK(brisk_conv_transpose2d(g, x, w, brisk_window_2d(3, 2, 1), 0, 0) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "C_in"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape3(1, 4, 5));
    w = brisk_param(g, "w", brisk_shape3(2, 4, 7), BRISK_INIT_ZEROS, 0, 1);
    CHECK(brisk_conv1d(g, x, w, 1, 0, 1, 1) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "conv1d") && strstr(e.msg, "does not fit"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape4(1, 6, 3, 3));
    CHECK(brisk_group_norm(g, x, -1, -1, 4, 1e-5f) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "group_norm") && strstr(e.msg, "4 groups"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape3(1, 6, 3));
    CHECK(brisk_upsample2d(g, x, BRISK_UPSAMPLE_BILINEAR, 2, 2) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "upsample2d") && strstr(e.msg, "[N, C, H, W]"), "%s", e.msg);
    brisk_graph_free(g);
    g = brisk_graph_new();
    x = brisk_input(g, "x", BRISK_F32, brisk_shape4(1, 6, 3, 3));
    CHECK(brisk_upsample2d(g, x, BRISK_UPSAMPLE_NEAREST, 0, 2) == -1);
    CHECKF(brisk_graph_error(g, &e) && strstr(e.msg, "scale"), "%s", e.msg);
    brisk_graph_free(g);
}

TEST_MAIN(T(test_upsample), T(test_upsample_torch), T(test_conv_transpose), T(test_conv_transpose_torch),
          T(test_conv1d), T(test_group_norm), T(test_group_norm_torch), T(test_global_avg_pool), T(test_errors))
