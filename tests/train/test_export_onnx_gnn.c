/* ONNX export of the graph networks' ops: the batched edge indices (B copies of the graph,
 * offset per copy, made from the batch size at run time), the segment sums (sorted
 * SEGMENT_SUM and unsorted SCATTER_ADD as ScatterND with reduction add) and the per-sample
 * Expand of batch-independent embeddings. A hand-built scatter graph and a small meshgnn
 * (brisk_model_build, inference graph) are written by brisk_onnx_write; ONNX Runtime (from
 * BRISK_BINARY_DIR/pydeps, when there) gives what brisk's CPU executor gives, to 1e-5, at
 * batches 2 and 3, and at batch 1 the first sample's (the samples are independent). */
#include "onnx_test_util.h"

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

static void test_scatter_add(void) { tu_onnx_check(scatter, NULL, 11, "export_onnx_scatter", 100); }
static void test_meshgnn(void) { tu_onnx_check(meshgnn, NULL, 11, "export_onnx_meshgnn", 1000); }

TEST_MAIN(T(test_scatter_add), T(test_meshgnn))
