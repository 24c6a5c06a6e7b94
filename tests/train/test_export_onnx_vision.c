/* ONNX export of the vision ops (CONV2D, BATCHNORM in inference with a residual and ReLU,
 * max and average POOL2D, MEAN over H and W), on a hand-built ResNet-style block until a
 * ResNet model lands: brisk_onnx_write writes the graph, and ONNX Runtime (from
 * BRISK_BINARY_DIR/pydeps, when there) gives what brisk's CPU executor gives, to 1e-5, at
 * batch 2 and, through the dynamic batch dimension, at batch 3. */
#include "test.h"
#include "train_test_util.h"
#include "train/export_onnx.h"

/* x [B, 3, 8, 8] -> conv 3x3 -> bn + relu -> conv 3x3 (stride 1) -> bn + x' residual + relu
 * -> max pool 3/2 pad 1 -> avg pool 2/2 -> mean over H, W -> linear 4 -> 5. */
static int block(brisk_graph *g, int64_t B, brisk_model_io *io) {
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
    return h;
}

static void run_batch(brisk_exec *ex, int64_t B, const float *x, const char *dir, const char *name) {
    brisk_error err = {0};
    brisk_tensor tx = {0}, ty = {0};
    char path[700];
    REQUIRE_OK(brisk_tensor_alloc(&tx, BRISK_F32, brisk_shape_make(4, (int64_t[]){B, 3, 8, 8}), &err), &err);
    REQUIRE_OK(brisk_tensor_alloc(&ty, BRISK_F32, brisk_shape2(B, 5), &err), &err);
    memcpy(tx.data, x, sizeof(float) * (size_t)(B * 192));
    ex->step.training = 0;
    REQUIRE_OK(brisk_exec_set_input(ex, 0, tx.data, &err), &err);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_PREDICT, &err), &err);
    REQUIRE_OK(brisk_exec_read(ex, ex->g->output, ty.data, &err), &err);
    snprintf(path, sizeof path, "%s/x_%s.npy", dir, name);
    REQUIRE_OK(brisk_npy_write(path, &tx, &err), &err);
    snprintf(path, sizeof path, "%s/y_%s.npy", dir, name);
    REQUIRE_OK(brisk_npy_write(path, &ty, &err), &err);
    brisk_tensor_free(&tx);
    brisk_tensor_free(&ty);
}

static void test_vision_block(void) {
    char dir[512], path[700];
    tu_scratch(dir, sizeof dir, "export_onnx_vision");
    brisk_error err = {0};
    brisk_graph *g = brisk_graph_new(), *g3 = brisk_graph_new();
    brisk_backend *be = brisk_backend_cpu_new(1);
    brisk_model_io io, io3;
    brisk_plan plan = {0}, plan3 = {0};
    brisk_exec *ex = NULL, *ex3 = NULL;
    REQUIRE(g && g3 && be);
    block(g, 2, &io);
    block(g3, 3, &io3);
    REQUIRE_OK(brisk_graph_error(g, &err), &err);
    REQUIRE_OK(brisk_graph_error(g3, &err), &err);
    REQUIRE_OK(brisk_plan_build(g, &plan, &err), &err);
    REQUIRE_OK(brisk_plan_build(g3, &plan3, &err), &err);
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ex, 7, &err), &err);
    REQUIRE_OK(brisk_exec_create_view(g3, &plan3, ex, &ex3, &err), &err);
    /* running statistics away from 0 and 1, so inference's affine map is exercised */
    float *p = ex->params;
    for (int i = 0; i < g->n_params; i++) {
        const brisk_param_info *pi = &g->params[i];
        for (int64_t k = 0; pi->buffer && k < pi->numel; k++)
            p[pi->offset + k] = strstr(pi->name, "var") ? 0.5f + 0.25f * (float)k : 0.1f * (float)k - 0.2f;
    }
    float x[3 * 192];
    uint64_t s = 12345;
    for (int i = 0; i < 3 * 192; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    run_batch(ex, 2, x, dir, "2");
    run_batch(ex3, 3, x, dir, "3");
    snprintf(path, sizeof path, "%s/block.onnx", dir);
    brisk_onnx_post post = {.tstd = 1.0f};
    size_t bytes = 0;
    REQUIRE_OK(brisk_onnx_write(g, g3, p, &io, &post, 0, "block", path, &bytes, &err), &err);
    CHECK(bytes > 4 * 108);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PYTHONPATH='%s/pydeps' /usr/bin/python3 -c 'import onnxruntime' 2>/dev/null", BRISK_BINARY_DIR);
    if (system(cmd) != 0) {
        fprintf(stderr, "(onnxruntime not in %s/pydeps: the ONNX Runtime comparison is skipped)\n", BRISK_BINARY_DIR);
    } else {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && PYTHONPATH='%s/pydeps' /usr/bin/python3 -c '\n"
                 "import numpy as np, onnxruntime as ort\n"
                 "s = ort.InferenceSession(\"block.onnx\", providers=[\"CPUExecutionProvider\"])\n"
                 "for b in (\"2\", \"3\"):\n"
                 "    y = s.run(None, {\"x\": np.load(\"x_\" + b + \".npy\")})[0]\n"
                 "    e = np.abs(y - np.load(\"y_\" + b + \".npy\")).max()\n"
                 "    print(\"batch\", b, \"max abs difference\", e)\n"
                 "    assert e < 1e-5, e\n'", dir, BRISK_BINARY_DIR);
        CHECK(system(cmd) == 0);
    }
    brisk_exec_free(ex3);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_plan_free(&plan3);
    brisk_graph_free(g);
    brisk_graph_free(g3);
    be->destroy(be);
    tu_sh("rm -rf '%s'", dir);
}

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
