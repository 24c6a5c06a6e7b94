/* The CPU backend's fusions (backend/cpu/fuse.c, planned by graph/fusion.c): training steps
 * with them give bit-identical losses, gradients and parameters, and then an eval loss, to
 * the same steps without them, on 1 and 2 threads, for the MLP (ReLU, GELU in both forms,
 * tanh, sigmoid), the Transformer (post-LN and pre-LN), the diffusion denoiser and two 1-D CNNs
 * (Winograd convolutions with their bias and activation; a global average pool's gradient with
 * the ReLU's before it); each
 * model gets the fusions its pattern allows; the lifetime check refuses a fusion whose
 * early write would clobber a live buffer; and gradients planned in place change no bit. */
#include "brisk/brisk.h"
#include "graph/fusion.h"
#include "model_inputs.h"
#include "test.h"

#include <stdint.h>

#define N_MODELS 10

static const char *model_name(int which) {
    return (const char *[]){"mlp-relu", "mlp-gelu", "mlp-gelu-tanh", "transformer-post-ln", "transformer-pre-ln",
                            "diffusion", "mlp-tanh", "mlp-sigmoid", "cnn1d", "cnn1d-relu"}[which];
}

/* A 1-D CNN as a graph model (examples/cnn1d.json in small): Winograd convolutions, the
 * first with its bias and ReLU fused, the second (a 3-tap kernel) with its bias only. */
#define CNN1D_FIRST_LAYERS \
    "{\"model\": {\"type\": \"graph\", \"inputs\": [{\"name\": \"x\", \"shape\": [30, 24]}," \
    " {\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}], \"layers\": [" \
    " {\"name\": \"cf\", \"op\": \"permute\", \"inputs\": [\"x\"], \"dims\": [2, 1]}," \
    " {\"name\": \"im\", \"op\": \"reshape\", \"inputs\": [\"cf\"], \"shape\": [24, 1, 30]}," \
    " {\"name\": \"c1\", \"op\": \"conv2d\", \"inputs\": [\"im\"], \"out\": 32, \"kernel\": [1, 5], \"padding\": [0, 2]}," \
    " {\"name\": \"a1\", \"op\": \"relu\", \"inputs\": [\"c1\"]}," \
    " {\"name\": \"p1\", \"op\": \"maxpool2d\", \"inputs\": [\"a1\"], \"kernel\": [1, 2]},"
#define CNN1D_HEAD_LAYER \
    " {\"name\": \"head\", \"op\": \"linear\", \"inputs\": [\"g\"], \"out\": 3}]," \
    " \"outputs\": [\"head\"], \"losses\": [{\"output\": \"head\", \"target\": \"y\", \"type\": \"cross_entropy\"}]}}"
static const char CNN1D[] = CNN1D_FIRST_LAYERS
    " {\"name\": \"c2\", \"op\": \"conv2d\", \"inputs\": [\"p1\"], \"out\": 32, \"kernel\": [1, 3], \"padding\": [0, 1]},"
    " {\"name\": \"g\", \"op\": \"global_avgpool\", \"inputs\": [\"c2\"]}," CNN1D_HEAD_LAYER;

/* The same with a ReLU after the second convolution, as examples/cnn1d.json: the global
 * average pool's gradient (a broadcast) and the ReLU's run as one pass. */
static const char CNN1D_RELU[] = CNN1D_FIRST_LAYERS
    " {\"name\": \"c2\", \"op\": \"conv2d\", \"inputs\": [\"p1\"], \"out\": 32, \"kernel\": [1, 5], \"padding\": [0, 2]},"
    " {\"name\": \"a2\", \"op\": \"relu\", \"inputs\": [\"c2\"]},"
    " {\"name\": \"g\", \"op\": \"global_avgpool\", \"inputs\": [\"a2\"]}," CNN1D_HEAD_LAYER;

static void model_for(int which, brisk_model_spec *s, int64_t *batch) {
    memset(s, 0, sizeof *s);
    if (which >= 8) {
        brisk_config cfg;
        brisk_error err = {0};
        if (brisk_config_parse(which == 8 ? CNN1D : CNN1D_RELU, "cnn1d.json", NULL, 0, &cfg, &err)) {
            fprintf(stderr, "cnn1d: %s\n", err.msg);
            abort();
        }
        *s = cfg.model;
        s->graph = brisk_layer_graph_ref(s->graph); /* kept past the config */
        brisk_config_free(&cfg);
        *batch = 24;
        return;
    }
    if (which <= 2 || which >= 6) {
        /* tanh and sigmoid: their gradients read the activation's output (y) */
        static const brisk_activation acts[] = {BRISK_ACT_RELU, BRISK_ACT_GELU, BRISK_ACT_GELU_TANH, 0, 0, 0,
                                                BRISK_ACT_TANH, BRISK_ACT_SIGMOID};
        *s = (brisk_model_spec){.type = BRISK_MODEL_MLP, .inputs = 64, .outputs = 3, .n_hidden = 2,
                                .activation = acts[which],
                                .task = BRISK_TASK_CLASSIFY};
        s->hidden[0] = 256, s->hidden[1] = 128;
        *batch = 192;
    } else if (which <= 4) {
        *s = (brisk_model_spec){.type = BRISK_MODEL_TRANSFORMER, .inputs = 8, .outputs = 3, .seq_len = 16,
                                .width = 64, .layers = 2, .heads = 4, .ffn = 128, .activation = BRISK_ACT_GELU,
                                .dropout = 0.1f, .norm_first = which == 4, .pool = BRISK_POOL_MEAN,
                                .positions = BRISK_POS_LEARNED, .task = BRISK_TASK_CLASSIFY};
        *batch = 40;
    } else {
        *s = (brisk_model_spec){.type = BRISK_MODEL_DIFFUSION, .fine = 256, .coarse = 7, .time_embedding = 32,
                                .n_hidden = 2, .activation = BRISK_ACT_SILU, .noise_steps = 50,
                                .beta_start = 1e-4f, .beta_end = 0.02f};
        s->hidden[0] = s->hidden[1] = 256;
        *batch = 64;
    }
}

/* model_run's steps of model `which`, fuse on or off. */
static int train(int which, int threads, int fuse, model_run_out *o) {
    brisk_model_spec spec;
    int64_t batch;
    model_for(which, &spec, &batch);
    int rc = model_run(&spec, batch, threads, fuse, 1, 0, model_name(which), o);
    if (spec.graph) brisk_layer_graph_unref(spec.graph);
    return rc;
}

static void test_fused_equals_unfused(void) {
    /* what each model's pattern allows (2 layers / 2 hidden layers each) */
    static const char *expect[N_MODELS] = {
        "on (2 GEMM+bias+ReLU, 1 GEMM+bias, 1 GEMM+act-grad, 1 act-grad+bias-grad)",
        "on (2 GEMM+bias+GELU, 1 GEMM+bias, 1 GEMM+act-grad, 1 act-grad+bias-grad)",
        "on (2 GEMM+bias+GELU, 1 GEMM+bias, 1 GEMM+act-grad, 1 act-grad+bias-grad)",
        NULL, NULL, "on (2 GEMM+bias+activation, 1 GEMM+bias, 1 GEMM+act-grad, 1 act-grad+bias-grad)",
        "on (2 GEMM+bias+activation, 1 GEMM+bias, 1 GEMM+act-grad, 1 act-grad+bias-grad)",
        "on (2 GEMM+bias+activation, 1 GEMM+bias, 1 GEMM+act-grad, 1 act-grad+bias-grad)",
        "on (1 GEMM+bias, 1 conv+bias+activation, 1 conv+bias)",
        "on (1 GEMM+bias, 2 conv+bias+activation, 1 broadcast+ReLU-grad)"};
    for (int which = 0; which < N_MODELS; which++) {
        model_run_out ref = {0};
        REQUIRE(train(which, 1, 0, &ref) == 0);
        CHECKF(strcmp(ref.fusions, "off") == 0, "%s unfused: \"%s\"", model_name(which), ref.fusions);
        for (int threads = 1; threads <= 2; threads++) {
            model_run_out o = {0};
            CHECK(train(which, threads, 1, &o) == 0);
            printf("%s, %d thread%s: fusions %s; losses %.6f, eval %.6f\n", model_name(which), threads,
                   threads > 1 ? "s" : "", o.fusions, o.losses[MODEL_RUN_STEPS - 1], o.eval_loss);
            CHECKF(strncmp(o.fusions, "on (", 4) == 0 && !strstr(o.fusions, "no pattern"), "%s: \"%s\"",
                   model_name(which), o.fusions);
            if (expect[which])
                CHECKF(strcmp(o.fusions, expect[which]) == 0, "%s: \"%s\"", model_name(which), o.fusions);
            CHECKF(memcmp(ref.losses, o.losses, sizeof o.losses) == 0, "%s, %d threads: losses %.9g %.9g %.9g fused, "
                   "%.9g %.9g %.9g unfused", model_name(which), threads, o.losses[0], o.losses[1], o.losses[2],
                   ref.losses[0], ref.losses[1], ref.losses[2]);
            CHECKF(memcmp(&ref.eval_loss, &o.eval_loss, sizeof o.eval_loss) == 0,
                   "%s, %d threads: eval loss %.9g fused, %.9g unfused", model_name(which), threads, o.eval_loss,
                   ref.eval_loss);
            CHECKF(o.params && ref.params && memcmp(ref.grads, o.grads, ref.param_bytes) == 0,
                   "%s, %d threads: gradients differ fused vs unfused", model_name(which), threads);
            CHECKF(o.params && ref.params && memcmp(ref.params, o.params, ref.param_bytes) == 0,
                   "%s, %d threads: parameters differ fused vs unfused after %d steps", model_name(which), threads,
                   MODEL_RUN_STEPS);
            model_run_free(&o);
        }
        model_run_free(&ref);
    }
}

/* "on (2 GEMM+bias+GELU, 8 GEMM+bias, ...)" -> the count before " <name>" followed by ',' or ')' */
static int count_of(const char *fusions, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(fusions, name); p; p = strstr(p + 1, name)) {
        if (p[-1] != ' ' || (p[n] != ',' && p[n] != ')')) continue;
        const char *d = p - 1;
        while (d > fusions && d[-1] >= '0' && d[-1] <= '9') d--;
        return atoi(d);
    }
    return 0;
}

/* The transformer's patterns (2 layers): the FFN's GEMM+bias+GELU and, backward, its
 * GEMM + dropout + GELU gradient (GEMM+act-grad) per layer, the other projections' GEMM+bias; post-LN, both residual
 * adds of a layer with their norms forward (backward each norm gradient has two readers);
 * pre-LN, the adds feeding the next layer's norms forward and the four residual gradient
 * adds backward. */
static void test_transformer_counts(void) {
    for (int which = 3; which <= 4; which++) {
        model_run_out o = {0};
        REQUIRE(train(which, 1, 1, &o) == 0);
        int gelu = count_of(o.fusions, "GEMM+bias+GELU"), ag = count_of(o.fusions, "GEMM+act-grad");
        int norm = count_of(o.fusions, "residual+layernorm");
        int norm_grad = count_of(o.fusions, "residual+layernorm-grad");
        /* dropouts: the FFN's after GELU, forward, and before the GELU gradient, backward */
        CHECKF(gelu == 2 && ag == 2 && count_of(o.fusions, "GEMM+bias") == 8 &&
                   count_of(o.fusions, "act-grad+bias-grad") == 0 && count_of(o.fusions, "dropouts") == 4,
               "%s: \"%s\"", model_name(which), o.fusions);
        if (which == 3) CHECKF(norm == 4 && norm_grad == 0, "%s: \"%s\"", model_name(which), o.fusions);
        else CHECKF(norm == 3 && norm_grad == 4, "%s: \"%s\"", model_name(which), o.fusions);
        model_run_free(&o);
    }
}

static int any_gemm(const brisk_graph *g, int m, int64_t *n_out) {
    *n_out = g->nodes[m].shape.d[g->nodes[m].shape.ndim - 1];
    return 1;
}

/* M = x W; Z = relu(x2) read by Y = sum(Z) between the matmul and B = bias_add(M, b): when the
 * plan puts B in Z's bytes, writing B at the matmul's place would clobber Z before Y reads
 * it, so the GEMM+bias fusion must be refused; the run stays right either way. */
static void test_lifetime_refuses(void) {
    brisk_error err = {0};
    brisk_graph *g = brisk_graph_new();
    REQUIRE(g);
    int64_t R = 32, K = 16, N = 24;
    int x = brisk_input(g, "x", BRISK_F32, (brisk_shape){2, {R, K}});
    int x2 = brisk_input(g, "x2", BRISK_F32, (brisk_shape){2, {R, N}});
    int w = brisk_param(g, "w", (brisk_shape){2, {K, N}}, BRISK_INIT_UNIFORM, 0.5f, 0);
    int b = brisk_param(g, "b", (brisk_shape){1, {N}}, BRISK_INIT_UNIFORM, 0.5f, 0);
    int m = brisk_matmul(g, x, w, 0, 0);
    int z = brisk_relu(g, x2);
    int y = brisk_sum(g, z, 1u, 0);
    int bb = brisk_bias_add(g, m, b);
    int out = brisk_bias_add(g, bb, y);
    int loss = brisk_mean(g, out, 3u, 0);
    REQUIRE(loss >= 0);
    g->output = out;
    g->loss = loss;
    brisk_plan plan;
    REQUIRE_OK(brisk_plan_build(g, &plan, &err), &err);
    brisk_backend *be = brisk_backend_cpu_new(1);
    brisk_exec *ex = NULL;
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ex, 5, &err), &err);
    const brisk_node *nz = &g->nodes[z], *nb = &g->nodes[bb];
    int overlap = nz->storage == BRISK_STORE_ARENA && nb->storage == BRISK_STORE_ARENA &&
                  nz->offset < nb->offset + nb->bytes && nb->offset < nz->offset + nz->bytes;
    char fus[256];
    brisk_backend_cpu_fusions(be, fus, sizeof fus);
    printf("lifetime case: Z %s B's bytes; CPU fusions %s\n", overlap ? "shares" : "does not share", fus);
    CHECKF(overlap, "the plan no longer puts B in Z's bytes: the case tests nothing (Z at %zu+%zu, B at %zu+%zu)",
           nz->offset, nz->bytes, nb->offset, nb->bytes);
    if (overlap) CHECKF(!strstr(fus, "GEMM+bias"), "fusion not refused: %s", fus);
    /* the overlap is the reason: with Z placed nowhere, the same plan fuses */
    brisk_fusion_rules rules = {.gemm_2d = any_gemm, .gelu_n_multiple = 1, .relu_writes_pre = 1, .actgrad_sum = 1,
                                .norms = 1};
    brisk_fusion_plan fp;
    size_t z_off = g->nodes[z].offset;
    REQUIRE(brisk_fusion_plan_build(ex, &rules, &fp) == 0);
    CHECK(brisk_fusion_count(&fp, BRISK_FUSE_GEMM_BIAS) == 0 && fp.n == 0);
    brisk_fusion_plan_free(&fp);
    g->nodes[z].offset = SIZE_MAX;
    REQUIRE(brisk_fusion_plan_build(ex, &rules, &fp) == 0);
    g->nodes[z].offset = z_off;
    CHECKF(brisk_fusion_count(&fp, BRISK_FUSE_GEMM_BIAS) == 1 && fp.n == 1 && fp.skip[bb] && fp.list[0].at == m,
           "%d fusions without the overlap", fp.n);
    brisk_fusion_plan_free(&fp);
    /* and the result: out = x W + b + sum_rows(relu(x2)) */
    float hx[32 * 16], hx2[32 * 24], hw[16 * 24], hb[24], ho[32 * 24];
    for (int i = 0; i < 32 * 16; i++) hx[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < 32 * 24; i++) hx2[i] = (float)((i * 53) % 13) / 13.0f - 0.4f;
    REQUIRE_OK(brisk_exec_set_input(ex, x, hx, &err), &err);
    REQUIRE_OK(brisk_exec_set_input(ex, x2, hx2, &err), &err);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_EVAL, &err), &err);
    REQUIRE_OK(brisk_exec_read(ex, w, hw, &err), &err);
    REQUIRE_OK(brisk_exec_read(ex, b, hb, &err), &err);
    REQUIRE_OK(brisk_exec_read(ex, out, ho, &err), &err);
    double worst = 0;
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = hb[j], zs = 0;
            for (int64_t k = 0; k < K; k++) s += (double)hx[i * K + k] * hw[k * N + j];
            for (int64_t r = 0; r < R; r++) zs += hx2[r * N + j] > 0 ? hx2[r * N + j] : 0;
            double d = fabs(s + zs - ho[i * N + j]);
            if (d > worst) worst = d;
        }
    CHECKF(worst < 1e-4, "worst error %g", worst);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
}

/* grads_in_place (the trainer's plan at one micro-batch a step): each gradient that only its
 * GRAD_ACCUM reads is written straight into the gradient arena, with the fusions on; the
 * results are those of the copying plan, bit for bit. */
static void test_grads_in_place(void) {
    for (int which = 0; which < N_MODELS; which++) {
        brisk_model_spec spec;
        int64_t batch;
        model_for(which, &spec, &batch);
        model_run_out copied = {0}, placed = {0};
        REQUIRE(model_run(&spec, batch, 2, 1, 1, 0, model_name(which), &copied) == 0);
        REQUIRE(model_run(&spec, batch, 2, 1, 1, 1, model_name(which), &placed) == 0);
        printf("%s: %d gradients planned in place\n", model_name(which), placed.n_in_place);
        CHECKF(copied.n_in_place == 0 && placed.n_in_place > 0, "%s: %d in place without, %d with grads_in_place",
               model_name(which), copied.n_in_place, placed.n_in_place);
        CHECKF(memcmp(copied.losses, placed.losses, sizeof placed.losses) == 0 &&
                   memcmp(&copied.eval_loss, &placed.eval_loss, sizeof placed.eval_loss) == 0,
               "%s: losses differ in place vs copied", model_name(which));
        CHECKF(memcmp(copied.grads, placed.grads, copied.param_bytes) == 0 &&
                   memcmp(copied.params, placed.params, copied.param_bytes) == 0,
               "%s: gradients or parameters differ in place vs copied", model_name(which));
        model_run_free(&copied);
        model_run_free(&placed);
        if (spec.graph) brisk_layer_graph_unref(spec.graph);
    }
}

TEST_MAIN(T(test_fused_equals_unfused), T(test_transformer_counts), T(test_lifetime_refuses), T(test_grads_in_place))
