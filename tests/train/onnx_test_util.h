/* The ONNX export tests' harness: a model built at batches 2 and 3 on the same parameters, run
 * by brisk's CPU executor, written by brisk_onnx_write, and run again in ONNX Runtime (from
 * BRISK_BINARY_DIR/pydeps, through Python; skipped with a note when it is not there), which
 * must give brisk's outputs to 1e-5 at batches 2, 3 and 1 (the first sample's: samples are
 * independent) through the dynamic batch dimension "N". Header-only, like train_test_util.h. */
#ifndef BRISK_ONNX_TEST_UTIL_H
#define BRISK_ONNX_TEST_UTIL_H

#include "test.h"
#include "train_test_util.h"
#include "export/export_onnx.h"

/* Builds the model's inference graph at batch B (g->output set). */
typedef void (*tu_onnx_build_fn)(brisk_graph *g, int64_t B, brisk_model_io *io);
/* Changes the initialised parameters before the runs (NULL: keep them). */
typedef void (*tu_onnx_params_fn)(brisk_exec *ex);

/* The executor's output for the first B samples of x, both saved as x_B.npy, y_B.npy. */
__attribute__((unused)) static void tu_onnx_run_batch(brisk_exec *ex, const brisk_model_io *io, int64_t B, const float *x, const char *dir) {
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

/* ONNX Runtime on dir/m.onnx against brisk's outputs saved there; 0 when they agree, 1 when
 * not, -1 (with a note) when onnxruntime is not installed. */
__attribute__((unused)) static int tu_onnx_compare(const char *dir, const char *name) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PYTHONPATH='%s/pydeps' /usr/bin/python3 -c 'import onnxruntime' 2>/dev/null", BRISK_BINARY_DIR);
    if (system(cmd) != 0) {
        fprintf(stderr, "(onnxruntime not in %s/pydeps: the ONNX Runtime comparison is skipped)\n", BRISK_BINARY_DIR);
        return -1;
    }
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
    return system(cmd) != 0;
}

/* The whole check for the model `build` makes: parameters from `seed` (then `params`), inputs
 * uniform in [-1, 1); the exported file holds at least min_bytes. */
__attribute__((unused)) static void tu_onnx_check(tu_onnx_build_fn build, tu_onnx_params_fn params, uint64_t seed, const char *name,
                          size_t min_bytes) {
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
    REQUIRE_OK(brisk_exec_init_params(ex, seed, &err), &err);
    REQUIRE_OK(brisk_exec_create_view(g3, &plan3, ex, &ex3, &err), &err);
    if (params) params(ex);
    int64_t n3 = brisk_shape_numel(&g3->nodes[g3->inputs[0].node].shape);
    float *x = malloc(sizeof(float) * (size_t)n3);
    REQUIRE(x);
    uint64_t s = 12345;
    for (int64_t i = 0; i < n3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    tu_onnx_run_batch(ex, &io, 2, x, dir);
    tu_onnx_run_batch(ex3, &io3, 3, x, dir);
    free(x);
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    brisk_onnx_post post = {.tstd = 1.0f};
    size_t bytes = 0;
    REQUIRE_OK(brisk_onnx_write(g, g3, ex->params, &io, &post, 0, name, path, &bytes, &err), &err);
    CHECKF(bytes >= min_bytes, "%s: %zu bytes, expected at least %zu", name, bytes, min_bytes);
    CHECK(tu_onnx_compare(dir, name) <= 0);
    brisk_exec_free(ex3);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_plan_free(&plan3);
    brisk_graph_free(g);
    brisk_graph_free(g3);
    be->destroy(be);
    tu_sh("rm -rf '%s'", dir);
}

#endif
