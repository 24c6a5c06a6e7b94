/* The mesh GNN of bench/WORKLOADS.md: parameter counts (small and full), the parameter
 * names and shapes of bench/reference/models.py, every aggregation a SEGMENT_SUM, no [edges, 3 latent] concatenation,
 * a training step with finite loss and gradients, repeatable bit for bit, and bad
 * sizes as builder errors. (Loss and gradients against PyTorch: tests/reference.) */
#include "brisk/brisk.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>

static brisk_model_spec spec(int small) {
    brisk_model_spec s = {.type = BRISK_MODEL_MESHGNN, .inputs = 20, .outputs = 8, .width = small ? 64 : 256,
                          .layers = small ? 4 : 16};
    int64_t grid = small ? 16 : 64, mesh = small ? 8 : 32;
    s.mesh = (brisk_gnn_graph_spec){.grid_rows = grid, .grid_cols = grid, .mesh_rows = mesh, .mesh_cols = mesh,
                                    .k = 4, .neighbours = 8};
    return s;
}

static const brisk_param_info *find(const brisk_graph *g, const char *name) {
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].name, name) == 0) return &g->params[i];
    return NULL;
}

static void test_counts(void) {
    brisk_model_spec s = spec(1), f = spec(0);
    CHECK(brisk_model_param_count(&s) == 207888);
    CHECK(brisk_model_param_count(&f) == 8769360);
}

static void test_names(void) {
    brisk_model_spec s = spec(1);
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    REQUIRE_OK(brisk_model_build(&s, 2, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    static const struct { const char *name; int64_t a, b; } want[] = {
        {"grid_embed.0.weight", 64, 20}, {"grid_embed.3.bias", 64, 0}, {"mesh_embed.0.weight", 64, 2},
        {"g2m_embed.2.weight", 64, 64}, {"encoder.edge.0.weight", 64, 192}, {"encoder.node.0.weight", 64, 128},
        {"encoder.node.3.weight", 64, 0}, {"grid_update.0.weight", 64, 64}, {"processor.3.edge.0.weight", 64, 192},
        {"processor.0.node.2.bias", 64, 0}, {"mm_embed.3.weight", 64, 0}, {"m2g_embed.0.weight", 64, 3},
        {"decoder.edge.3.bias", 64, 0}, {"out.0.weight", 8, 64}, {"out.2.weight", 8, 8}, {"out.2.bias", 8, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const brisk_param_info *p = find(g, want[i].name);
        CHECKF(p != NULL, "no parameter %s", want[i].name);
        brisk_shape w = want[i].b ? brisk_shape2(want[i].a, want[i].b) : brisk_shape1(want[i].a);
        if (p) CHECKF(brisk_shape_equal(&p->shape, &w), "%s has the wrong shape", want[i].name);
    }
    CHECK(find(g, "out.3.weight") == NULL);
    /* 6 MLPs with norm + out + (encoder, 4 processor, decoder) x 2 MLPs, 2 Linears each (+ LN) */
    CHECK(g->n_params == 6 * 6 + 4 + 6 * 2 * 6);
    int seg = 0, scatter = 0, concat = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        seg += g->nodes[i].op == BRISK_OP_SEGMENT_SUM;
        scatter += g->nodes[i].op == BRISK_OP_SCATTER_ADD;
        concat += g->nodes[i].op == BRISK_OP_CONCAT;
    }
    CHECK(seg == 6 && scatter == 0 && concat == 0);
    CHECK(io.n_fields == 2 && io.fields[0].sample.d[0] == 256 && io.fields[0].sample.d[1] == 20 &&
          io.fields[1].sample.d[1] == 8);
    brisk_graph_free(g);
}

/* One forward + backward on `threads` threads (processor layers recomputed or not): the
 * loss, the gradient arena and the plan's activation arena bytes. */
static void run_step_rc(int threads, int recompute, float *loss, float **grads_out, size_t *arena) {
    brisk_model_spec s = spec(1);
    s.layers = 2;
    s.recompute = recompute;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_backend *be = brisk_backend_cpu_new(threads);
    brisk_error e = {0};
    float *grads = NULL;
    *grads_out = NULL;
    REQUIRE_OK(brisk_model_build(&s, 3, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    REQUIRE_OK(brisk_backward(g, io.loss, &e), &e);
    REQUIRE_OK(brisk_plan_build(g, &plan, &e), &e);
    if (arena) *arena = plan.arena_bytes;
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &e), &e);
    REQUIRE_OK(brisk_exec_init_params(ex, 11, &e), &e);
    for (int f = 0; f < 2; f++) {
        const brisk_input_info *in = &g->inputs[io.input_node[f]];
        float *buf = malloc(in->bytes);
        for (size_t i = 0; i < in->bytes / 4; i++) buf[i] = sinf((float)(i * (f + 3)) * 0.37f);
        REQUIRE_OK(brisk_exec_set_input(ex, io.input_node[f], buf, &e), &e);
        free(buf);
    }
    ex->step = (brisk_step_state){.seed = 1, .first_micro = 1, .training = 1};
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), &e);
    REQUIRE_OK(brisk_exec_read(ex, io.loss, loss, &e), &e);
    size_t n = (size_t)g->n_param_floats;
    grads = malloc(n * sizeof(float));
    REQUIRE_OK(be->download(be, grads, ex->grads, n * sizeof(float), &e), &e);
    int finite = 1;
    double norm = 0;
    for (size_t i = 0; i < n; i++) finite &= isfinite(grads[i]), norm += (double)grads[i] * grads[i];
    CHECK(finite && norm > 0 && isfinite(*loss));
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
    *grads_out = grads;
}

static void run_step(int threads, float *loss, float **grads_out) { run_step_rc(threads, 0, loss, grads_out, NULL); }

/* --recompute: the same loss and gradients bit for bit (the same ops on the same inputs),
 * a smaller activation arena, and the recomputed forward present in the graph. */
static void test_recompute(void) {
    float l0, l1;
    float *g0, *g1;
    size_t a0 = 0, a1 = 0;
    run_step_rc(2, 0, &l0, &g0, &a0);
    run_step_rc(2, 1, &l1, &g1, &a1);
    REQUIRE(g0 && g1);
    brisk_model_spec s = spec(1);
    s.layers = 2;
    size_t n = (size_t)brisk_model_param_count(&s);
    CHECKF(l0 == l1, "loss %.9g with recompute, %.9g without", l1, l0);
    CHECK(memcmp(g0, g1, n * sizeof(float)) == 0);
    CHECKF(a1 < a0, "activation arena %zu bytes with recompute, %zu without", a1, a0);
    fprintf(stderr, "meshgnn small, 2 layers, batch 3: arena %zu bytes, %zu with recompute\n", a0, a1);
    free(g0);
    free(g1);
    /* segments: one per processor layer, each re-emitted once after the forward */
    s.recompute = 1;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    REQUIRE_OK(brisk_model_build(&s, 1, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    CHECK(g->n_segments == 2 && g->cur_segment == 0);
    int in_seg = 0;
    for (int i = 0; i < g->n_nodes; i++) in_seg += g->nodes[i].segment != 0;
    int nf = g->n_nodes, seg_ops = 0;
    REQUIRE_OK(brisk_backward(g, io.loss, &e), &e);
    for (int i = nf; i < g->n_nodes; i++) seg_ops += g->nodes[i].op == BRISK_OP_SEGMENT_SUM;
    CHECKF(in_seg > 0 && seg_ops >= 2, "%d nodes in segments, %d segment sums recomputed", in_seg, seg_ops);
    CHECK(brisk_graph_recompute_begin(g) < 0); /* no segments after the backward */
    brisk_graph_free(g);
    g = brisk_graph_new();
    CHECK(brisk_graph_recompute_begin(g) == 1 && brisk_graph_recompute_begin(g) < 0); /* no nesting */
    brisk_graph_free(g);
}

/* Two runs on 2 threads give the same bits; 1 and 2 threads agree to rounding (the
 * segment sums are thread-count independent, but the CPU matmul is not bit-identical
 * across thread counts: an MLP's weight gradients differ in the last bits too). */
static void test_step_threads(void) {
    float l1, l2, l3;
    float *g1, *g2, *g3;
    run_step(2, &l1, &g1);
    run_step(2, &l2, &g2);
    run_step(1, &l3, &g3);
    REQUIRE(g1 && g2 && g3);
    brisk_model_spec s = spec(1);
    s.layers = 2;
    size_t n = (size_t)brisk_model_param_count(&s);
    CHECK(l1 == l2 && l1 == l3);
    CHECK(memcmp(g1, g2, n * sizeof(float)) == 0);
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) d += pow((double)g1[i] - g3[i], 2), r += pow((double)g3[i], 2);
    CHECKF(sqrt(d / r) < 1e-5, "1 vs 2 threads: gradients differ by %g relative", sqrt(d / r));
    free(g1);
    free(g2);
    free(g3);
}

static void test_bad(void) {
    brisk_model_spec s = spec(1);
    s.mesh.k = 100;
    CHECK(brisk_model_param_count(&s) == -1);
    s = spec(1);
    s.mesh.grid_rows = 4;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    CHECK(brisk_model_build(&s, 2, BRISK_BUILD_TRAIN, g, &io, &e) == BRISK_ERR_INVALID);
    CHECKF(strstr(e.msg, "meshgnn") && strstr(e.msg, "smaller than the mesh"), "%s", e.msg);
    brisk_graph_free(g);
    s = spec(1);
    s.width = 0;
    CHECK(brisk_model_param_count(&s) == -1);
}

TEST_MAIN(T(test_counts), T(test_names), T(test_step_threads), T(test_recompute), T(test_bad))
