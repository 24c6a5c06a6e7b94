/* ONNX export of the graph networks' ops: the batched edge indices (B copies of the graph,
 * offset per copy, made from the batch size at run time), the segment sums (sorted
 * SEGMENT_SUM and unsorted SCATTER_ADD as ScatterND with reduction add) and the per-sample
 * Expand of batch-independent embeddings. A hand-built scatter graph and a small meshgnn
 * (brisk_model_build, inference graph) are written by brisk_onnx_write; ONNX Runtime (from
 * BRISK_BINARY_DIR/pydeps, when there) gives what brisk's CPU executor gives, to 1e-5, at
 * batches 2 and 3, and at batch 1 the first sample's (the samples are independent). */
#include "test.h"
#include "train_test_util.h"
#include "train/export_onnx.h"

typedef void (*build_fn)(brisk_graph *g, int64_t B, brisk_model_io *io);

/* x [B, 6, 3] -> rows [B * 6, 3] -> scatter-add (unsorted) into 4 segments per sample -> [B, 4, 3]. */
static void scatter(brisk_graph *g, int64_t B, brisk_model_io *io) {
    static const int32_t to[6] = {3, 0, 3, 1, 0, 2};
    int32_t idx[3 * 6];
    for (int64_t b = 0; b < B; b++)
        for (int i = 0; i < 6; i++) idx[b * 6 + i] = (int32_t)(b * 4 + to[i]);
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape3(B, 6, 3));
    int r = brisk_reshape(g, x, brisk_shape2(B * 6, 3));
    int s = brisk_segment_sum(g, r, brisk_const(g, "idx", BRISK_I32, brisk_shape1(B * 6), idx), B * 4, 0);
    int y = brisk_reshape(g, s, brisk_shape3(B, 4, 3));
    *io = (brisk_model_io){.n_fields = 1, .input_node = {0}, .output = y, .loss = -1};
    g->output = y;
}

static brisk_model_spec gnn_spec(void) {
    brisk_model_spec s = {.type = BRISK_MODEL_MESHGNN, .inputs = 5, .outputs = 3, .width = 16, .layers = 2};
    s.mesh = (brisk_gnn_graph_spec){.grid_rows = 8, .grid_cols = 8, .mesh_rows = 4, .mesh_cols = 4, .k = 4,
                                    .neighbours = 6};
    return s;
}

static void meshgnn(brisk_graph *g, int64_t B, brisk_model_io *io) {
    brisk_model_spec s = gnn_spec();
    brisk_error err = {0};
    REQUIRE_OK(brisk_model_build(&s, B, BRISK_BUILD_PREDICT, g, io, &err), &err);
    g->output = io->output;
}

/* The executor's output for the first B samples of x, both saved as x_B.npy, y_B.npy. */
static void run_batch(brisk_exec *ex, const brisk_model_io *io, int64_t B, const float *x, const char *dir) {
    brisk_error err = {0};
    brisk_tensor tx = {0}, ty = {0};
    char path[700];
    brisk_shape xs = ex->g->nodes[ex->g->inputs[0].node].shape, ys = ex->g->nodes[io->output].shape;
    REQUIRE_OK(brisk_tensor_alloc(&tx, BRISK_F32, xs, &err), &err);
    REQUIRE_OK(brisk_tensor_alloc(&ty, BRISK_F32, ys, &err), &err);
    memcpy(tx.data, x, sizeof(float) * (size_t)brisk_shape_numel(&xs));
    ex->step.training = 0;
    REQUIRE_OK(brisk_exec_set_input(ex, io->input_node[0], tx.data, &err), &err);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_PREDICT, &err), &err);
    REQUIRE_OK(brisk_exec_read(ex, io->output, ty.data, &err), &err);
    snprintf(path, sizeof path, "%s/x_%lld.npy", dir, (long long)B);
    REQUIRE_OK(brisk_npy_write(path, &tx, &err), &err);
    snprintf(path, sizeof path, "%s/y_%lld.npy", dir, (long long)B);
    REQUIRE_OK(brisk_npy_write(path, &ty, &err), &err);
    brisk_tensor_free(&tx);
    brisk_tensor_free(&ty);
}

/* Builds `build` at batches 2 and 3, runs both on the same parameters, exports, and has ONNX
 * Runtime check the model at batches 2, 3 and 1. */
static void check_model(build_fn build, const char *name) {
    char dir[512], path[700];
    tu_scratch(dir, sizeof dir, name);
    brisk_error err = {0};
    brisk_graph *g = brisk_graph_new(), *g3 = brisk_graph_new();
    brisk_backend *be = brisk_backend_cpu_new(1);
    brisk_model_io io, io3;
    brisk_plan plan = {0}, plan3 = {0};
    brisk_exec *ex = NULL, *ex3 = NULL;
    REQUIRE(g && g3 && be);
    build(g, 2, &io);
    build(g3, 3, &io3);
    REQUIRE_OK(brisk_graph_error(g, &err), &err);
    REQUIRE_OK(brisk_graph_error(g3, &err), &err);
    REQUIRE_OK(brisk_plan_build(g, &plan, &err), &err);
    REQUIRE_OK(brisk_plan_build(g3, &plan3, &err), &err);
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ex, 11, &err), &err);
    REQUIRE_OK(brisk_exec_create_view(g3, &plan3, ex, &ex3, &err), &err);
    int64_t n3 = brisk_shape_numel(&g3->nodes[g3->inputs[0].node].shape);
    float *x = malloc(sizeof(float) * (size_t)n3);
    REQUIRE(x);
    uint64_t s = 987654321;
    for (int64_t i = 0; i < n3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    run_batch(ex, &io, 2, x, dir);
    run_batch(ex3, &io3, 3, x, dir);
    free(x);
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    brisk_onnx_post post = {.tstd = 1.0f};
    REQUIRE_OK(brisk_onnx_write(g, g3, ex->params, &io, &post, 0, name, path, NULL, &err), &err);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PYTHONPATH='%s/pydeps' /usr/bin/python3 -c 'import onnxruntime' 2>/dev/null", BRISK_BINARY_DIR);
    if (system(cmd) != 0) {
        fprintf(stderr, "(onnxruntime not in %s/pydeps: the ONNX Runtime comparison is skipped)\n", BRISK_BINARY_DIR);
    } else {
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && PYTHONPATH='%s/pydeps' /usr/bin/python3 -c '\n"
                 "import numpy as np, onnxruntime as ort\n"
                 "s = ort.InferenceSession(\"m.onnx\", providers=[\"CPUExecutionProvider\"])\n"
                 "assert s.get_inputs()[0].shape[0] == \"N\", s.get_inputs()[0].shape\n"
                 "x3, y2, y3 = np.load(\"x_3.npy\"), np.load(\"y_2.npy\"), np.load(\"y_3.npy\")\n"
                 "for x, y in ((x3[:2], y2), (x3, y3), (x3[:1], y2[:1])):\n"
                 "    o = s.run(None, {\"x\": x})[0]\n"
                 "    assert o.shape == y.shape, (o.shape, y.shape)\n"
                 "    e = np.abs(o - y).max()\n"
                 "    print(\"%s batch\", len(x), \"max abs difference\", e, \"of\", np.abs(y).max())\n"
                 "    assert e < 1e-5, e\n'", dir, BRISK_BINARY_DIR, name);
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

static void test_scatter_add(void) { check_model(scatter, "export_onnx_scatter"); }
static void test_meshgnn(void) { check_model(meshgnn, "export_onnx_meshgnn"); }

TEST_MAIN(T(test_scatter_add), T(test_meshgnn))
