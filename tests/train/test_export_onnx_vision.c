/* ONNX export of the vision ops (CONV2D, BATCHNORM in inference with a residual and ReLU,
 * max and average POOL2D, MEAN over H and W), on a hand-built ResNet-style block until a
 * ResNet model lands: brisk_onnx_write writes the graph, and ONNX Runtime (from
 * BRISK_BINARY_DIR/pydeps, when there) gives what brisk's CPU executor gives, to 1e-5, at
 * batches 2, 3 and 1 (onnx_test_util.h). */
#include "onnx_test_util.h"

/* x [B, 3, 8, 8] -> conv 3x3 -> bn + relu -> conv 3x3 (stride 1) -> bn + x' residual + relu
 * -> max pool 3/2 pad 1 -> avg pool 2/2 -> mean over H, W -> linear 4 -> 5. */
static void block(brisk_graph *g, int64_t B, brisk_model_io *io) {
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape_make(4, (int64_t[]){B, 3, 8, 8}));
    int w1 = brisk_param(g, "conv1.weight", brisk_shape_make(4, (int64_t[]){4, 3, 3, 3}), BRISK_INIT_UNIFORM, 0.3f, 1);
    int w2 = brisk_param(g, "conv2.weight", brisk_shape_make(4, (int64_t[]){4, 4, 3, 3}), BRISK_INIT_UNIFORM, 0.3f, 1);
    int bn[2][4];
    for (int k = 0; k < 2; k++) {
        char nm[64];
        snprintf(nm, sizeof nm, "bn%d.weight", k + 1);
        bn[k][0] = brisk_param(g, nm, brisk_shape1(4), BRISK_INIT_UNIFORM, 1.0f, 0);
        snprintf(nm, sizeof nm, "bn%d.bias", k + 1);
        bn[k][1] = brisk_param(g, nm, brisk_shape1(4), BRISK_INIT_UNIFORM, 0.5f, 0);
        snprintf(nm, sizeof nm, "bn%d.running_mean", k + 1);
        bn[k][2] = brisk_buffer(g, nm, brisk_shape1(4), BRISK_INIT_ZEROS);
        snprintf(nm, sizeof nm, "bn%d.running_var", k + 1);
        bn[k][3] = brisk_buffer(g, nm, brisk_shape1(4), BRISK_INIT_ONES);
    }
    int wp = brisk_param(g, "fc.weight", brisk_shape2(5, 4), BRISK_INIT_UNIFORM, 0.5f, 1);
    int bp = brisk_param(g, "fc.bias", brisk_shape1(5), BRISK_INIT_UNIFORM, 0.5f, 0);
    int h = brisk_conv2d(g, x, w1, brisk_window_2d(3, 1, 1));
    h = brisk_batchnorm(g, h, bn[0][0], bn[0][1], bn[0][2], bn[0][3], -1, 1e-5f, 0.1f, 1);
    int r = h;
    h = brisk_conv2d(g, h, w2, brisk_window_2d(3, 1, 1));
    h = brisk_batchnorm(g, h, bn[1][0], bn[1][1], bn[1][2], bn[1][3], r, 1e-5f, 0.1f, 1);
    h = brisk_pool2d(g, h, BRISK_POOL_MAX, brisk_window_2d(3, 2, 1));   /* 8 -> 4 */
    h = brisk_pool2d(g, h, BRISK_POOL_AVG, brisk_window_2d(2, 2, 0));   /* 4 -> 2 */
    h = brisk_mean(g, h, (1u << 2) | (1u << 3), 0);                     /* [B, 4] */
    h = brisk_bias_add(g, brisk_matmul(g, h, wp, 0, 1), bp);
    *io = (brisk_model_io){.n_fields = 1, .input_node = {0}, .output = h, .loss = -1};
    g->output = h;
}

/* running statistics away from 0 and 1, so inference's affine map is exercised */
static void running_stats(brisk_exec *ex) {
    float *p = ex->params;
    for (int i = 0; i < ex->g->n_params; i++) {
        const brisk_param_info *pi = &ex->g->params[i];
        for (int64_t k = 0; pi->buffer && k < pi->numel; k++)
            p[pi->offset + k] = strstr(pi->name, "var") ? 0.5f + 0.25f * (float)k : 0.1f * (float)k - 0.2f;
    }
}

/* 108 weights of the first convolution alone, as float32 */
static void test_vision_block(void) { tu_onnx_check(block, running_stats, 7, "export_onnx_vision", 4 * 108 + 1); }

/* Graphs the exporter cannot write are refused with the reason, and nothing is written. */
static void test_refused(void) {
    char dir[512], path[700];
    tu_scratch(dir, sizeof dir, "export_onnx_refused");
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    brisk_error err = {0};
    brisk_graph *g[2] = {brisk_graph_new(), brisk_graph_new()};
    REQUIRE(g[0] && g[1]);
    brisk_model_io io[2];
    for (int k = 0; k < 2; k++) { /* a loss: not part of an inference graph, no ONNX mapping */
        int x = brisk_input(g[k], "x", BRISK_F32, brisk_shape2(4, 3));
        float t[12] = {0};
        int y = brisk_mse(g[k], x, brisk_const(g[k], "t", BRISK_F32, brisk_shape2(4, 3), t));
        io[k] = (brisk_model_io){.n_fields = 1, .input_node = {0}, .output = y, .loss = -1};
        REQUIRE_OK(brisk_graph_error(g[k], &err), &err);
    }
    brisk_onnx_post post = {.tstd = 1.0f};
    brisk_status st = brisk_onnx_write(g[0], g[1], NULL, &io[0], &post, 0, "m", path, NULL, &err);
    CHECKF(st == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "mse") && strstr(err.msg, "no ONNX export"), "%s",
           err.msg);
    brisk_relu(g[1], g[1]->inputs[0].node); /* not the same model at another batch size */
    st = brisk_onnx_write(g[0], g[1], NULL, &io[0], &post, 0, "m", path, NULL, &err);
    CHECKF(st == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "depends on the batch size"), "%s", err.msg);
    CHECK(access(path, F_OK) != 0);
    brisk_graph_free(g[0]);
    brisk_graph_free(g[1]);
    /* NHWC convolution and pooling: ONNX's take NCHW */
    for (int pool = 0; pool < 2; pool++) {
        for (int k = 0; k < 2; k++) {
            g[k] = brisk_graph_new();
            REQUIRE(g[k]);
            int x = brisk_input(g[k], "x", BRISK_F32, brisk_shape4(2 + k, 5, 5, 2));
            brisk_window win = brisk_window_2d(3, 1, 1);
            win.layout = BRISK_LAYOUT_NHWC;
            int y = pool ? brisk_pool2d(g[k], x, BRISK_POOL_MAX, win)
                         : brisk_conv2d(g[k], x, brisk_param(g[k], "w", brisk_shape4(3, 2, 3, 3), BRISK_INIT_ZEROS, 0, 1),
                                        win);
            io[k] = (brisk_model_io){.n_fields = 1, .input_node = {0}, .output = y, .loss = -1};
            REQUIRE_OK(brisk_graph_error(g[k], &err), &err);
        }
        static const float w0[3 * 2 * 3 * 3]; /* the conv's parameters (zeros) */
        st = brisk_onnx_write(g[0], g[1], w0, &io[0], &post, 0, "m", path, NULL, &err);
        CHECKF(st == BRISK_ERR_UNSUPPORTED && strstr(err.msg, "NHWC") && strstr(err.msg, pool ? "pool2d" : "conv2d"),
               "%s", err.msg);
        CHECK(access(path, F_OK) != 0);
        brisk_graph_free(g[0]);
        brisk_graph_free(g[1]);
    }
    tu_sh("rm -rf '%s'", dir);
}

TEST_MAIN(T(test_vision_block), T(test_refused))
