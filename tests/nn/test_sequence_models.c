/* The LSTM and Transformer models of bench/WORKLOADS.md: parameter counts, PyTorch's
 * parameter names and shapes, and a forward/backward that runs; the variants (bidirectional,
 * mean pool, class token, sinusoidal positions, post-LN, causal, padding mask, regression)
 * build, train one step and give finite losses. */
#include "brisk/brisk.h"
#include "test.h"

static brisk_model_spec lstm_spec(void) {
    brisk_model_spec s = {.type = BRISK_MODEL_LSTM, .inputs = 32, .outputs = 3, .seq_len = 60, .width = 128,
                          .layers = 2, .pool = BRISK_POOL_LAST, .task = BRISK_TASK_CLASSIFY};
    return s;
}

static brisk_model_spec transformer_spec(void) {
    brisk_model_spec s = {.type = BRISK_MODEL_TRANSFORMER, .inputs = 32, .outputs = 3, .seq_len = 60, .width = 128,
                          .layers = 3, .heads = 4, .ffn = 512, .activation = BRISK_ACT_GELU, .dropout = 0.1f,
                          .norm_first = 1, .pool = BRISK_POOL_MEAN, .positions = BRISK_POS_LEARNED};
    return s;
}

static const brisk_param_info *find(const brisk_graph *g, const char *name) {
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].name, name) == 0) return &g->params[i];
    return NULL;
}

static void check_param(const brisk_graph *g, const char *name, int64_t a, int64_t b) {
    const brisk_param_info *p = find(g, name);
    CHECKF(p != NULL, "no parameter %s", name);
    if (!p) return;
    brisk_shape want = b ? brisk_shape2(a, b) : brisk_shape1(a);
    CHECKF(brisk_shape_equal(&p->shape, &want), "%s has the wrong shape", name);
}

static void test_workload_counts(void) {
    brisk_model_spec l = lstm_spec(), t = transformer_spec();
    CHECK(brisk_model_param_count(&l) == 215427);
    CHECK(brisk_model_param_count(&t) == 607363);
}

static void test_lstm_names(void) {
    brisk_model_spec s = lstm_spec();
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    REQUIRE_OK(brisk_model_build(&s, 4, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    check_param(g, "lstm.weight_ih_l0", 512, 32);
    check_param(g, "lstm.weight_hh_l0", 512, 128);
    check_param(g, "lstm.bias_ih_l0", 512, 0);
    check_param(g, "lstm.bias_hh_l0", 512, 0);
    check_param(g, "lstm.weight_ih_l1", 512, 128);
    check_param(g, "head.weight", 3, 128);
    CHECK(g->n_params == 10);
    brisk_graph_free(g);
}

static void test_transformer_names(void) {
    brisk_model_spec s = transformer_spec();
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    REQUIRE_OK(brisk_model_build(&s, 4, BRISK_BUILD_TRAIN, g, &io, &e), &e);
    check_param(g, "proj.weight", 128, 32);
    check_param(g, "enc.layers.2.self_attn.in_proj_weight", 384, 128);
    check_param(g, "enc.layers.2.self_attn.in_proj_bias", 384, 0);
    check_param(g, "enc.layers.0.self_attn.out_proj.weight", 128, 128);
    check_param(g, "enc.layers.1.linear1.weight", 512, 128);
    check_param(g, "enc.layers.1.linear2.weight", 128, 512);
    check_param(g, "enc.layers.0.norm2.bias", 128, 0);
    check_param(g, "norm.weight", 128, 0);
    check_param(g, "head.bias", 3, 0);
    const brisk_param_info *pos = find(g, "pos");
    brisk_shape ps = brisk_shape3(1, 60, 128);
    CHECK(pos && brisk_shape_equal(&pos->shape, &ps));
    CHECK(g->n_params == 2 + 1 + 3 * 12 + 2 + 2);
    brisk_graph_free(g);
}

/* Builds for batch 3 and runs one training step; the loss must be finite. */
static void train_once(const brisk_model_spec *s, const char *what) {
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_error e = {0};
    brisk_backend *be = brisk_backend_cpu_new(2);
    brisk_status st = brisk_model_build(s, 3, BRISK_BUILD_TRAIN, g, &io, &e);
    if (!st) st = brisk_backward(g, io.loss, &e);
    if (!st) st = brisk_plan_build(g, &plan, &e);
    if (!st) st = brisk_exec_create(g, &plan, be, &ex, &e);
    if (!st) st = brisk_exec_init_params(ex, 7, &e);
    for (int f = 0; f < io.n_fields && !st; f++) {
        const brisk_input_info *in = &g->inputs[io.input_node[f]];
        int64_t n = brisk_shape_numel(&in->shape);
        void *buf = calloc((size_t)n, 4);
        for (int64_t i = 0; i < n; i++) {
            if (in->dtype == BRISK_I32) ((int32_t *)buf)[i] = (int32_t)(i % s->outputs);
            else if (!strcmp(in->name, "mask")) ((float *)buf)[i] = (i % s->seq_len) < s->seq_len - 1 - i / s->seq_len;
            else ((float *)buf)[i] = (float)sin(0.37 * (double)i);
        }
        st = brisk_exec_set_input(ex, io.input_node[f], buf, &e);
        free(buf);
    }
    float loss = NAN;
    if (!st) st = brisk_exec_run(ex, BRISK_RUN_TRAIN, &e);
    if (!st) st = brisk_exec_read(ex, io.loss, &loss, &e);
    CHECKF(st == BRISK_OK && isfinite(loss), "%s: %s (loss %g)", what, e.msg, (double)loss);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
}

static void test_variants(void) {
    brisk_model_spec s = lstm_spec();
    s.seq_len = 7, s.width = 16, s.inputs = 5;
    train_once(&s, "lstm");
    s.bidirectional = 1, s.pool = BRISK_POOL_MEAN, s.layers = 3, s.dropout = 0.2f;
    train_once(&s, "lstm bidirectional, mean");
    s.task = BRISK_TASK_REGRESS, s.outputs = 2;
    train_once(&s, "lstm regression");
    brisk_model_spec t = transformer_spec();
    t.seq_len = 6, t.width = 16, t.ffn = 32, t.inputs = 5, t.layers = 2;
    train_once(&t, "transformer");
    t.pool = BRISK_POOL_CLS, t.positions = BRISK_POS_SINUSOIDAL, t.norm_first = 0;
    train_once(&t, "transformer cls, sinusoidal, post-LN");
    t.causal = 1, t.padding_mask = 1, t.pool = BRISK_POOL_MEAN;
    train_once(&t, "transformer causal, padding mask, mean");
    t.pool = BRISK_POOL_CLS, t.task = BRISK_TASK_REGRESS, t.positions = BRISK_POS_NONE;
    train_once(&t, "transformer cls with mask, regression");
}

static void test_bad_specs(void) {
    brisk_model_spec t = transformer_spec();
    t.heads = 3;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error e = {0};
    CHECK(brisk_model_build(&t, 2, BRISK_BUILD_TRAIN, g, &io, &e) == BRISK_ERR_INVALID && strstr(e.msg, "heads"));
    brisk_graph_free(g);
    brisk_model_spec l = lstm_spec();
    l.pool = BRISK_POOL_CLS;
    g = brisk_graph_new();
    CHECK(brisk_model_build(&l, 2, BRISK_BUILD_TRAIN, g, &io, &e) == BRISK_ERR_INVALID);
    brisk_graph_free(g);
    CHECK(brisk_model_param_count(&l) == -1);
}

TEST_MAIN(T(test_workload_counts), T(test_lstm_names), T(test_transformer_names), T(test_variants), T(test_bad_specs))
