/* The ResNet keypoint models: parameter counts (the benchmark ResNet-18 of bench/WORKLOADS.md;
 * ResNet-34 and -50 as torchvision's with a 34-output head), the parameter and
 * buffer names and shapes of bench/reference/models.py, the visibility-weighted loss against a hand computation from
 * the model's own output, a step repeatable bit for bit, and bad specs as errors. (Loss,
 * gradients and running statistics against PyTorch: tests/reference, reference.torch_resnet.) */
#include "brisk/brisk.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>

static brisk_model_spec spec(int depth, int64_t size, int64_t keypoints, int visibility) {
    return (brisk_model_spec){.type = BRISK_MODEL_RESNET, .depth = depth, .inputs = 3, .outputs = 2 * keypoints,
                              .image_h = size, .image_w = size, .visibility = visibility,
                              .task = BRISK_TASK_REGRESS};
}

static const brisk_param_info *find(const brisk_graph *g, const char *name) {
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].name, name) == 0) return &g->params[i];
    return NULL;
}

static void test_counts(void) {
    brisk_model_spec s = spec(18, 256, 17, 1);
    CHECK(brisk_model_param_count(&s) == 11193954); /* bench/WORKLOADS.md */
    s.image_h = s.image_w = 64;                     /* the small size: same weights */
    CHECK(brisk_model_param_count(&s) == 11193954);
    s = spec(34, 64, 17, 1);
    CHECK(brisk_model_param_count(&s) == 21797672 - 513000 + 512 * 34 + 34);
    s = spec(50, 64, 17, 1);
    CHECK(brisk_model_param_count(&s) == 25557032 - 2049000 + 2048 * 34 + 34);
}

static void test_names(void) {
    brisk_model_spec s = spec(18, 64, 17, 1);
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    REQUIRE_OK(brisk_model_build(&s, 2, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    static const struct { const char *name; int64_t d[4]; int nd, buffer; } want[] = {
        {"stem.0.weight", {64, 3, 7, 7}, 4, 0},       {"stem.1.weight", {64}, 1, 0},
        {"stem.1.running_var", {64}, 1, 1},           {"blocks.0.c1.weight", {64, 64, 3, 3}, 4, 0},
        {"blocks.1.b2.bias", {64}, 1, 0},             {"blocks.2.c1.weight", {128, 64, 3, 3}, 4, 0},
        {"blocks.2.down.0.weight", {128, 64, 1, 1}, 4, 0}, {"blocks.2.down.1.running_mean", {128}, 1, 1},
        {"blocks.7.b2.running_var", {512}, 1, 1},     {"head.weight", {34, 512}, 2, 0},
        {"head.bias", {34}, 1, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const brisk_param_info *p = find(g, want[i].name);
        CHECKF(p != NULL, "no parameter %s", want[i].name);
        if (!p) continue;
        brisk_shape w = brisk_shape_make(want[i].nd, want[i].d);
        CHECKF(brisk_shape_equal(&p->shape, &w), "%s has the wrong shape", want[i].name);
        CHECKF(!!p->buffer == want[i].buffer, "%s: buffer %d", want[i].name, p->buffer);
    }
    CHECK(find(g, "blocks.1.down.0.weight") == NULL && find(g, "blocks.8.c1.weight") == NULL);
    /* 20 convs; 20 BatchNorms of 2 parameters and 2 buffers; the head */
    CHECK(g->n_params == 20 + 20 * 4 + 2);
    CHECK(io.n_fields == 3 && strcmp(io.fields[2].name, "visible") == 0 && io.fields[1].sample.d[0] == 17 &&
          io.fields[1].sample.d[1] == 2 && io.fields[0].sample.d[1] == 64);
    int conv = 0, bnr = 0, pool = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        conv += g->nodes[i].op == BRISK_OP_CONV2D;
        bnr += g->nodes[i].op == BRISK_OP_BATCHNORM && g->nodes[i].n_in == 6; /* the residual fused in */
        pool += g->nodes[i].op == BRISK_OP_POOL2D;
    }
    CHECKF(conv == 20 && bnr == 8 && pool == 1, "%d convs, %d batchnorms with a residual, %d pools", conv, bnr, pool);
    brisk_graph_free(g);
    s = spec(18, 64, 17, 0);
    g = brisk_graph_new();
    REQUIRE_OK(brisk_model_build(&s, 2, BRISK_BUILD_PREDICT, g, &io, &e), &e);
    CHECK(io.n_fields == 1 && g->nodes[io.output].shape.ndim == 3 && g->nodes[io.output].shape.d[1] == 17);
    brisk_graph_free(g);
}

/* One training forward + backward of a small ResNet-18 (2 keypoints, 32 x 32, batch 2):
 * the loss, the output and the gradients. */
static void run_step(int visibility, const float *visible, float *loss, float *out, float **grads_out) {
    brisk_model_spec s = spec(18, 32, 2, visibility);
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_backend *be = brisk_backend_cpu_new(2);
    brisk_error e = {0};
    REQUIRE_OK(brisk_model_build(&s, 2, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    REQUIRE_OK(brisk_backward(g, io.loss, &e), &e);
    REQUIRE_OK(brisk_plan_build(g, &plan, &e), &e);
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &e), &e);
    REQUIRE_OK(brisk_exec_init_params(ex, 11, &e), &e);
    for (int f = 0; f < io.n_fields; f++) {
        const brisk_input_info *in = &g->inputs[io.input_node[f]];
        float *buf = malloc(in->bytes);
        for (size_t i = 0; i < in->bytes / 4; i++) buf[i] = f == 2 ? visible[i] : sinf((float)(i * (f + 3)) * 0.37f);
        REQUIRE_OK(brisk_exec_set_input(ex, io.input_node[f], buf, &e), &e);
        free(buf);
    }
    ex->step = (brisk_step_state){.seed = 1, .first_micro = 1, .training = 1};
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), &e);
    REQUIRE_OK(brisk_exec_read(ex, io.loss, loss, &e), &e);
    REQUIRE_OK(brisk_exec_read(ex, io.output, out, &e), &e);
    size_t n = (size_t)g->n_param_floats;
    float *grads = malloc(n * sizeof(float));
    REQUIRE_OK(be->download(be, grads, ex->grads, n * sizeof(float), &e), &e);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
    *grads_out = grads;
}

/* Visibility: all visible is plain MSE (bit for bit); a hidden keypoint drops out of the sum
 * and the mean stays over all 2 x 2 x 2 coordinates. */
static void test_visibility(void) {
    const float all[4] = {1, 1, 1, 1}, some[4] = {1, 0, 0, 1};
    float l_plain, l_all, l_some, out[8];
    float *g_plain, *g_all, *g_some;
    run_step(0, NULL, &l_plain, out, &g_plain);
    run_step(1, all, &l_all, out, &g_all);
    run_step(1, some, &l_some, out, &g_some);
    size_t n = (size_t)brisk_model_param_count(&(brisk_model_spec){.type = BRISK_MODEL_RESNET, .depth = 18, .inputs = 3,
                                                                   .outputs = 4, .image_h = 32, .image_w = 32});
    CHECK(l_plain == l_all);
    CHECK(memcmp(g_plain, g_all, n * sizeof(float)) == 0);
    double want = 0;
    for (int i = 0; i < 8; i++) { /* y is field 1: sin(i 4 0.37) */
        double d = (double)out[i] - sinf((float)(i * 4) * 0.37f);
        want += some[i / 2] * d * d;
    }
    want /= 8;
    CHECKF(fabs(l_some - want) <= 1e-5 * want, "masked loss %g, by hand %g", l_some, want);
    double norm = 0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) finite &= isfinite(g_some[i]), norm += (double)g_some[i] * g_some[i];
    CHECK(finite && norm > 0 && isfinite(l_some));
    free(g_plain), free(g_all), free(g_some);
}

static void test_bad(void) {
    brisk_model_spec s = spec(20, 64, 17, 1);
    CHECK(brisk_model_param_count(&s) == -1);
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    CHECK(brisk_model_build(&s, 2, BRISK_BUILD_TRAIN, g, &io, &e) == BRISK_ERR_INVALID);
    CHECKF(strstr(e.msg, "resnet") && strstr(e.msg, "depth 20"), "%s", e.msg);
    brisk_graph_free(g);
    s = spec(18, 64, 17, 1);
    s.outputs = 33;
    CHECK(brisk_model_param_count(&s) == -1);
    s = spec(18, 1, 17, 1); /* every window is padded enough for 1 x 1 images all the way down */
    CHECK(brisk_model_param_count(&s) == 11193954);
}

TEST_MAIN(T(test_counts), T(test_names), T(test_visibility), T(test_bad))
