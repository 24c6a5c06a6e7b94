/* The CUDA backend's fusion plan (prepare.c: GEMM epilogues, residual add + layernorm
 * forward and backward) replayed on the CPU backend, no GPU needed: the training schedule
 * runs in the planned arena exactly as the CUDA backend would run it (a fused GEMM writes
 * its bias/activation or gradient/sum nodes at the matmul's place, a fused add writes the
 * norm's output at its own place, a fused norm gradient is computed at the add's place
 * from inputs whose planned last use has passed, fused-away nodes are never written), with
 * every arena buffer poisoned with NaN first (ReLU's gradient reads y, as CUDA's does, where
 * the fused GEMM left x unwritten). Any early write over a live buffer, late
 * read of an overwritten one, or read of a never-written one changes the loss or a
 * gradient, which must be bit-identical to the plain run of the same plan. */
#include "backend/cuda/cuda_internal.h"
#include "test.h"

#include "brisk/brisk.h"

typedef struct replay {
    brisk_backend *be;
    brisk_exec *ex;
    brisk_step_state st;
    uint8_t *unwritten; /* B of a RELU_BIAS fusion */
} replay;

/* Runs node id into out, input `swap` (a node id, or -1) read from `with` instead. */
static brisk_status run_as(replay *r, int id, int swap, const void *with, void *out, brisk_error *err) {
    const brisk_node *n = &r->ex->g->nodes[id];
    const void *in[BRISK_MAX_INPUTS];
    for (int j = 0; j < n->n_in; j++) in[j] = n->in[j] == swap ? with : r->ex->ptr[n->in[j]];
    return r->be->run_node(r->be, r->ex->g, id, in, out, &r->st, err);
}

static void *scratch_for(const brisk_graph *g, int id) { return malloc(g->nodes[id].bytes + 64); }

/* One node's place in the prepared schedule. */
static brisk_status run_place(replay *r, const cuda_prep *p, int id, int *norms, int *gemms, brisk_error *err) {
    const brisk_graph *g = r->ex->g;
    void *const *ptr = r->ex->ptr;
    cuda_node_plan np;
    cuda_prep_node(p, id, &np);
    if (np.skip) return BRISK_OK;
    brisk_status st;
    if (np.norm_ln >= 0) { /* the add, then the norm's buffer written early */
        ++*norms;
        return (st = run_as(r, id, -1, NULL, ptr[id], err)) ? st : run_as(r, np.norm_ln, -1, NULL, ptr[np.norm_ln], err);
    }
    if (np.norm_grad >= 0) { /* the norm gradient, never stored, summed into the add */
        ++*norms;
        void *q = scratch_for(g, np.norm_grad);
        st = run_as(r, np.norm_grad, -1, NULL, q, err);
        if (!st) st = run_as(r, id, np.norm_grad, q, ptr[id], err);
        free(q);
        return st;
    }
    const brisk_node *n = &g->nodes[id];
    if (n->op == BRISK_OP_ACT_GRAD && n->attr.kind == BRISK_OP_RELU && n->n_in >= 3 && r->unwritten[n->in[1]])
        return run_as(r, id, n->in[1], ptr[n->in[2]], ptr[id], err); /* CUDA's ReLU gradient reads y */
    if (np.epi == EPI_NONE) return run_as(r, id, -1, NULL, ptr[id], err);
    ++*gemms; /* the product in scratch: the matmul's own buffer is never written */
    void *m = scratch_for(g, id), *t = NULL;
    if ((st = run_as(r, id, -1, NULL, m, err))) goto done;
    switch (np.epi) {
    case EPI_BIAS: st = run_as(r, np.bias_node, id, m, ptr[np.bias_node], err); break;
    case EPI_RELU_BIAS: /* B is not written */
        r->unwritten[np.bias_node] = 1;
        t = scratch_for(g, np.bias_node);
        st = run_as(r, np.bias_node, id, m, t, err);
        if (!st) st = run_as(r, np.act_node, np.bias_node, t, ptr[np.act_node], err);
        break;
    case EPI_GELU_AUX_BIAS:
        st = run_as(r, np.bias_node, id, m, ptr[np.bias_node], err);
        if (!st) st = run_as(r, np.act_node, -1, NULL, ptr[np.act_node], err);
        break;
    case EPI_DGELU_BGRAD:
        st = run_as(r, np.grad_node, id, m, ptr[np.grad_node], err);
        if (!st) st = run_as(r, np.sum_node, -1, NULL, ptr[np.sum_node], err);
        break;
    default: st = brisk_errorf(err, BRISK_ERR_INTERNAL, "epilogue %d", np.epi);
    }
done:
    free(m);
    free(t);
    return st;
}

static brisk_status transformer(brisk_graph *g, int norm_first, brisk_error *err) {
    brisk_model_spec s = {.type = BRISK_MODEL_TRANSFORMER, .inputs = 8, .outputs = 3, .seq_len = 12, .width = 32,
                          .layers = 3, .heads = 4, .ffn = 48, .activation = norm_first ? BRISK_ACT_GELU_TANH : BRISK_ACT_RELU,
                          .dropout = 0.1f, .norm_first = norm_first, .causal = !norm_first,
                          .padding_mask = !norm_first, .pool = BRISK_POOL_MEAN, .task = BRISK_TASK_CLASSIFY};
    brisk_model_io io;
    brisk_status st = brisk_model_build(&s, 8, BRISK_BUILD_TRAIN, g, &io, err);
    return st ? st : brisk_backward(g, io.loss, err);
}

static brisk_status mlp(brisk_graph *g, brisk_activation a, brisk_error *err) {
    brisk_model_spec s = {.type = BRISK_MODEL_MLP, .inputs = 48, .outputs = 5, .n_hidden = 3, .activation = a,
                          .dropout = 0.2f, .task = BRISK_TASK_CLASSIFY};
    s.hidden[0] = 64, s.hidden[1] = 40, s.hidden[2] = 40;
    brisk_model_io io;
    brisk_status st = brisk_model_build(&s, 32, BRISK_BUILD_TRAIN, g, &io, err);
    return st ? st : brisk_backward(g, io.loss, err);
}

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static float unif(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((rs >> 40) * (1.0 / 16777216.0)) * 4.0f - 2.0f;
}

static void replay_model(const char *what, brisk_graph *g, int want_norms, int want_gemms) {
    brisk_error err = {0};
    brisk_plan plan;
    brisk_backend *be = brisk_backend_cpu_new(2);
    brisk_backend_cpu_set_fuse(be, 0); /* its own fusions off: each node runs where the CUDA plan says */
    brisk_exec *ref = NULL, *ex = NULL;
    REQUIRE_OK(brisk_plan_build(g, &plan, &err), &err);
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ref, &err), &err);
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ref, 5, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ex, 5, &err), &err);
    for (int i = 0; i < g->n_inputs; i++) {
        const brisk_input_info *in = &g->inputs[i];
        int64_t n = brisk_shape_numel(&in->shape);
        void *h = malloc(in->bytes + 16);
        for (int64_t k = 0; k < n; k++) {
            float v = unif();
            if (in->dtype == BRISK_I32) ((int32_t *)h)[k] = (int32_t)((v + 2.0f) * 0.75f); /* labels 0..2 */
            else ((float *)h)[k] = v;
        }
        REQUIRE_OK(brisk_exec_set_input(ref, i, h, &err), &err);
        REQUIRE_OK(brisk_exec_set_input(ex, i, h, &err), &err);
        free(h);
    }
    brisk_step_state st = {.seed = 77, .rng_step = 3, .first_micro = 1, .training = 1};
    ref->step = st;
    REQUIRE_OK(brisk_exec_run(ref, BRISK_RUN_TRAIN, &err), &err);
    /* the replay: every arena buffer NaN first */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].storage == BRISK_STORE_ARENA && ex->ptr[i]) memset(ex->ptr[i], 0xff, g->nodes[i].bytes);
    cuda_prep *p = cuda_prep_plan_host(ex);
    REQUIRE(p);
    replay r = {be, ex, st, calloc((size_t)g->n_nodes + 1, 1)};
    int norms = 0, gemms = 0;
    for (int s = 0; s < plan.n_train; s++) {
        brisk_status rs2 = run_place(&r, p, plan.train_order[s], &norms, &gemms, &err);
        CHECKF(!rs2, "%s: node %d: %s", what, plan.train_order[s], err.msg);
        if (rs2) break;
    }
    printf("%s: %d residual add + layernorm pairs, %d GEMM epilogues fused\n", what, norms, gemms);
    CHECKF(norms >= want_norms && gemms >= want_gemms, "%s: fused %d pairs and %d GEMMs, expected at least %d and %d",
           what, norms, gemms, want_norms, want_gemms);
    float a = NAN, b = NAN;
    brisk_exec_read(ref, g->loss, &a, &err);
    brisk_exec_read(ex, g->loss, &b, &err);
    CHECKF(memcmp(&a, &b, 4) == 0, "%s: loss %.9g replayed, %.9g plain", what, b, a);
    for (int k = 0; k < g->n_params; k++) {
        const brisk_param_info *pi = &g->params[k];
        size_t n = (size_t)pi->numel * 4;
        void *x = malloc(n + 4), *y = malloc(n + 4);
        if (!brisk_exec_read(ref, pi->grad_node, x, &err) && !brisk_exec_read(ex, pi->grad_node, y, &err))
            CHECKF(memcmp(x, y, n) == 0, "%s: the gradient of %s differs in the replay", what, pi->name);
        free(x);
        free(y);
    }
    free(r.unwritten);
    cuda_prep_free(p);
    brisk_exec_free(ref);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    be->destroy(be);
}

static void test_transformers(void) {
    for (int nf = 0; nf < 2; nf++) {
        brisk_graph *g = brisk_graph_new();
        brisk_error err = {0};
        REQUIRE_OK(transformer(g, nf, &err), &err);
        /* 3 layers x 2 blocks. pre-LN: the 5 adds a next norm reads, and all 6 norm
         * gradients (each added to the residual gradient right after it). post-LN: all 6
         * add + norm pairs (one norm takes the buffer of the add's operand); none
         * backward, where the norm gradient is the residual stream's gradient itself,
         * read by the block's backward too, so it must be stored */
        replay_model(nf ? "transformer pre-LN" : "transformer post-LN", g, nf ? 11 : 6, 1);
        brisk_graph_free(g);
    }
}

static void test_mlps(void) {
    brisk_activation acts[2] = {BRISK_ACT_RELU, BRISK_ACT_GELU_TANH};
    for (int k = 0; k < 2; k++) {
        brisk_graph *g = brisk_graph_new();
        brisk_error err = {0};
        REQUIRE_OK(mlp(g, acts[k], &err), &err);
        replay_model(k ? "mlp gelu tanh" : "mlp relu", g, 0, 2);
        brisk_graph_free(g);
    }
}

int main(void) {
    t_case c[] = {T(test_transformers), T(test_mlps)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
