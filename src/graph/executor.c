/* The executor: allocates a planned graph's device buffers through the backend
 * (activation arena, params, grads, Adam moments, inputs, consts), resolves every
 * node's output pointer once, initialises parameters from the seed, and runs a
 * schedule by handing each node to the backend. It owns no kernel and no policy:
 * the trainer decides the step state, accumulation and the optimizer. */

#include "brisk/graph.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Backends get at least this much per buffer, so an empty area is still a valid,
 * distinct pointer. */
#define MIN_ALLOC 64

static brisk_status alloc_area(brisk_exec *ex, size_t bytes, void **out, const char *what, brisk_error *err) {
    size_t n = bytes < MIN_ALLOC ? MIN_ALLOC : (bytes + MIN_ALLOC - 1) / MIN_ALLOC * MIN_ALLOC;
    brisk_status st = ex->be->alloc(ex->be, n, out, err);
    if (st != BRISK_OK) brisk_error_prefix(err, "exec: %s (%zu bytes)", what, n);
    return st;
}

void brisk_exec_free(brisk_exec *ex) {
    if (!ex) return;
    if (ex->be->forget) ex->be->forget(ex->be, ex); /* before the buffers it may hold go */
    void *areas[] = {ex->arena, ex->params_of ? NULL : ex->params, ex->grads, ex->m, ex->v, ex->inputs, ex->consts};
    for (size_t i = 0; i < sizeof areas / sizeof areas[0]; i++)
        if (areas[i]) ex->be->free(ex->be, areas[i]);
    free(ex->ptr);
    free(ex->grad_done);
    free(ex);
}

/* Checks that the plan still describes the graph (nodes appended or re-planned
 * after the plan would otherwise read and write outside the arena). */
static brisk_status check_plan(const brisk_graph *g, const brisk_plan *plan, brisk_error *err) {
    for (int s = 0; s < plan->n_train; s++) {
        int id = plan->train_order[s];
        if (id < 0 || id >= g->n_nodes) return brisk_errorf(err, BRISK_ERR_INVALID, "exec: plan names node %d, not in the graph", id);
        const brisk_node *n = &g->nodes[id];
        if (n->storage == BRISK_STORE_ARENA &&
            (n->offset == SIZE_MAX || n->offset + n->bytes > plan->arena_bytes))
            return brisk_errorf(err, BRISK_ERR_INVALID,
                                "exec: node %d (%s) lies outside the planned arena; re-plan after changing the graph",
                                id, brisk_op_name(n->op));
    }
    if (plan->param_bytes != (size_t)g->n_param_floats * sizeof(float) || plan->input_bytes != g->input_bytes ||
        plan->const_bytes != g->const_bytes)
        return brisk_errorf(err, BRISK_ERR_INVALID, "exec: the plan's area sizes do not match the graph; re-plan");
    return BRISK_OK;
}

int brisk_backend_first_unsupported(brisk_backend *be, const brisk_graph *g, const brisk_plan *plan, char *msg,
                                    size_t msg_size) {
    if (msg_size) msg[0] = 0;
    if (!be->supports_op) return -1;
    for (int s = 0; s < plan->n_train; s++) {
        int id = plan->train_order[s];
        const brisk_node *n = &g->nodes[id];
        char why[160] = "";
        if (be->supports_op(be, n, why, sizeof why)) continue;
        char b[BRISK_SHAPE_STR];
        snprintf(msg, msg_size, "%s on %s %s (node %d): %s", brisk_op_name(n->op), brisk_dtype_name(n->dtype),
                 brisk_shape_str(&n->shape, b, sizeof b), id, why[0] ? why : "no kernel");
        return id;
    }
    return -1;
}

/* owner NULL: an executor with its own parameters, gradients and moments; else a view that
 * reads owner's parameters. */
static brisk_status create(brisk_graph *g, brisk_plan *plan, brisk_backend *be, const brisk_exec *owner,
                           brisk_exec **out, brisk_error *err) {
    if (!out) return brisk_errorf(err, BRISK_ERR_INVALID, "exec: out is NULL");
    *out = NULL;
    if (!g || !plan || !be) return brisk_errorf(err, BRISK_ERR_INVALID, "exec: graph, plan and backend are required");
    brisk_status st = check_plan(g, plan, err);
    if (st != BRISK_OK) return st;
    char why[512];
    if (brisk_backend_first_unsupported(be, g, plan, why, sizeof why) >= 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "exec: backend %s does not run %s", be->name, why);
    brisk_exec *ex = calloc(1, sizeof *ex);
    if (!ex) return brisk_errorf(err, BRISK_ERR_NOMEM, "exec: out of memory");
    ex->g = g;
    ex->plan = plan;
    ex->be = be;
    ex->params_of = owner;
    ex->moments_n = g->n_param_floats;
    ex->ptr = calloc((size_t)g->n_nodes + 1, sizeof *ex->ptr);
    if (!ex->ptr) {
        free(ex);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "exec: out of memory");
    }
    if (owner) {
        ex->params = owner->params;
        if ((st = alloc_area(ex, plan->arena_bytes, &ex->arena, "activation arena", err)) ||
            (st = alloc_area(ex, plan->input_bytes, &ex->inputs, "inputs", err)) ||
            (st = alloc_area(ex, plan->const_bytes, &ex->consts, "consts", err)) ||
            (st = be->memset0(be, ex->inputs, plan->input_bytes, err)))
            goto fail;
    } else if ((st = alloc_area(ex, plan->arena_bytes, &ex->arena, "activation arena", err)) ||
        (st = alloc_area(ex, plan->param_bytes, &ex->params, "parameters", err)) ||
        (st = alloc_area(ex, plan->param_bytes, &ex->grads, "gradients", err)) ||
        (st = alloc_area(ex, plan->param_bytes, &ex->m, "first moments", err)) ||
        (st = alloc_area(ex, plan->param_bytes, &ex->v, "second moments", err)) ||
        (st = alloc_area(ex, plan->input_bytes, &ex->inputs, "inputs", err)) ||
        (st = alloc_area(ex, plan->const_bytes, &ex->consts, "consts", err)))
        goto fail;
    /* Zero everything a run may read before it is written, so results never
     * depend on leftover device memory. */
    void *zero[] = {ex->params, ex->grads, ex->m, ex->v, ex->inputs};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0] && !owner; i++)
        if ((st = be->memset0(be, zero[i], i == 4 ? plan->input_bytes : plan->param_bytes, err))) goto fail;
    if (plan->const_bytes && (st = be->upload(be, ex->consts, g->const_data, plan->const_bytes, err))) goto fail;

    for (int i = 0; i < g->n_nodes; i++) {
        const brisk_node *n = &g->nodes[i];
        char *base = NULL;
        switch (n->storage) {
        case BRISK_STORE_ARENA: base = n->offset == SIZE_MAX ? NULL : (char *)ex->arena; break;
        case BRISK_STORE_INPUT: base = ex->inputs; break;
        case BRISK_STORE_PARAM: base = ex->params; break;
        case BRISK_STORE_GRAD: base = ex->grads; break;
        case BRISK_STORE_CONST: base = ex->consts; break;
        case BRISK_STORE_ALIAS: ex->ptr[i] = ex->ptr[n->alias_of]; continue; /* alias_of < i */
        }
        ex->ptr[i] = base ? base + n->offset : NULL;
    }
    ex->step = (brisk_step_state){.seed = 0, .rng_step = 0, .first_micro = 1, .training = 1};
    /* A device backend plans over the whole schedule once (fusions, low-precision copies);
     * it holds one such plan, the training executor's, which a view must not replace. */
    if (!owner && be->prepare && (st = be->prepare(be, ex, err))) {
        brisk_error_prefix(err, "exec: %s backend", be->name);
        goto fail;
    }
    *out = ex;
    return BRISK_OK;
fail:
    brisk_exec_free(ex);
    return st;
}

brisk_status brisk_exec_create(brisk_graph *g, brisk_plan *plan, brisk_backend *be, brisk_exec **out,
                               brisk_error *err) {
    return create(g, plan, be, NULL, out, err);
}

brisk_status brisk_exec_create_view(brisk_graph *g, brisk_plan *plan, const brisk_exec *base, brisk_exec **out,
                                    brisk_error *err) {
    if (out) *out = NULL;
    if (!g || !base) return brisk_errorf(err, BRISK_ERR_INVALID, "exec view: graph and base executor are required");
    const brisk_graph *b = base->g;
    int same = g->n_params == b->n_params && g->n_param_floats == b->n_param_floats;
    for (int i = 0; same && i < b->n_params; i++)
        same = strcmp(g->params[i].name, b->params[i].name) == 0 && g->params[i].offset == b->params[i].offset &&
               g->params[i].numel == b->params[i].numel;
    if (!same) return brisk_errorf(err, BRISK_ERR_INVALID, "exec view: the graph's parameter layout differs from the base's");
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].storage == BRISK_STORE_GRAD)
            return brisk_errorf(err, BRISK_ERR_INVALID, "exec view: node %d is a gradient; a view runs forward only", i);
    return create(g, plan, base->be, base, out, err);
}

/* Element i of a param takes word i % 4 of Philox block i / 4 under counter
 * {block, 0, param index, 0xFFFFFFFF}: word 3 set apart from the rng_step values
 * random ops use, so initialisation never repeats a dropout draw. */
static void init_values(const brisk_graph *g, const brisk_param_info *p, int index, uint64_t seed, float *host) {
    if (p->init == BRISK_INIT_GIVEN) {
        memcpy(host, g->given_data + p->given, (size_t)p->numel * sizeof *host);
        return;
    }
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    float a = p->init_scale;
    for (int64_t b = 0; b * 4 < p->numel; b++) {
        uint32_t ctr[4] = {(uint32_t)b, (uint32_t)((uint64_t)b >> 32), (uint32_t)index, 0xFFFFFFFFu};
        float v[4];
        if (p->init == BRISK_INIT_NORMAL) {
            brisk_philox_normal4(ctr, key, v);
            for (int w = 0; w < 4; w++) v[w] *= a;
        } else if (p->init == BRISK_INIT_UNIFORM) {
            uint32_t u[4];
            brisk_philox4x32(ctr, key, u);
            for (int w = 0; w < 4; w++) v[w] = (2.0f * brisk_u32_to_unit(u[w]) - 1.0f) * a;
        } else {
            for (int w = 0; w < 4; w++) v[w] = p->init == BRISK_INIT_ONES ? 1.0f : 0.0f;
        }
        for (int w = 0; w < 4 && b * 4 + w < p->numel; w++) host[b * 4 + w] = v[w];
    }
}

brisk_status brisk_exec_init_params(brisk_exec *ex, uint64_t seed, brisk_error *err) {
    if (!ex) return brisk_errorf(err, BRISK_ERR_INVALID, "exec: NULL executor");
    const brisk_graph *g = ex->g;
    int64_t most = 1;
    for (int k = 0; k < g->n_params; k++)
        if (g->params[k].numel > most) most = g->params[k].numel;
    float *host = malloc((size_t)most * sizeof *host);
    if (!host) return brisk_errorf(err, BRISK_ERR_NOMEM, "init params: out of memory for %lld floats", (long long)most);
    brisk_status st = BRISK_OK;
    size_t bytes = ex->plan->param_bytes;
    for (int k = 0; k < g->n_params && st == BRISK_OK; k++) {
        const brisk_param_info *p = &g->params[k];
        init_values(g, p, k, seed, host);
        st = ex->be->upload(ex->be, (char *)ex->params + p->offset * sizeof(float), host,
                            (size_t)p->numel * sizeof(float), err);
        if (st != BRISK_OK) brisk_error_prefix(err, "init param \"%s\"", p->name);
    }
    free(host);
    if (st == BRISK_OK) st = ex->be->memset0(ex->be, ex->grads, bytes, err);
    size_t mbytes = (size_t)ex->moments_n * sizeof(float);
    if (st == BRISK_OK) st = ex->be->memset0(ex->be, ex->m, mbytes, err);
    if (st == BRISK_OK) st = ex->be->memset0(ex->be, ex->v, mbytes, err);
    if (st == BRISK_OK) ex->step.seed = seed;
    return st;
}

brisk_status brisk_exec_shard_moments(brisk_exec *ex, int64_t off, int64_t n, brisk_error *err) {
    if (off < 0 || n < 0 || off + n > ex->g->n_param_floats)
        return brisk_errorf(err, BRISK_ERR_INVALID, "exec: moment shard [%lld, +%lld) outside %lld parameters",
                            (long long)off, (long long)n, (long long)ex->g->n_param_floats);
    void *m = NULL, *v = NULL;
    size_t bytes = (size_t)n * sizeof(float);
    brisk_status st = alloc_area(ex, bytes, &m, "first moments (shard)", err);
    if (!st) st = alloc_area(ex, bytes, &v, "second moments (shard)", err);
    if (!st) st = ex->be->memset0(ex->be, m, bytes, err);
    if (!st) st = ex->be->memset0(ex->be, v, bytes, err);
    if (st) {
        if (m) ex->be->free(ex->be, m);
        if (v) ex->be->free(ex->be, v);
        return st;
    }
    ex->be->free(ex->be, ex->m);
    ex->be->free(ex->be, ex->v);
    ex->m = m, ex->v = v;
    ex->moments_off = off, ex->moments_n = n;
    return BRISK_OK;
}

/* Input node `node` at p, and the views of it (and of views of it: alias_of < i) with it. */
static void point_input(brisk_exec *ex, int node, void *p) {
    ex->ptr[node] = p;
    for (int i = node + 1; i < ex->g->n_nodes; i++)
        if (ex->g->nodes[i].storage == BRISK_STORE_ALIAS) ex->ptr[i] = ex->ptr[ex->g->nodes[i].alias_of];
}

void brisk_exec_release_inputs(brisk_exec *ex) {
    if (!ex || !ex->inputs_bound) return;
    for (int k = 0; k < ex->g->n_inputs; k++) {
        const brisk_input_info *in = &ex->g->inputs[k];
        point_input(ex, in->node, (char *)ex->inputs + in->offset);
    }
    ex->inputs_bound = 0;
}

static brisk_status check_input(const brisk_exec *ex, int input, const void *host, brisk_error *err) {
    if (!ex || !host) return brisk_errorf(err, BRISK_ERR_INVALID, "set input: NULL executor or data");
    if (input < 0 || input >= ex->g->n_inputs)
        return brisk_errorf(err, BRISK_ERR_INVALID, "set input: %d is not an input (the graph has %d)", input,
                            ex->g->n_inputs);
    return BRISK_OK;
}

brisk_status brisk_exec_use_input(brisk_exec *ex, int input, const void *host, brisk_error *err) {
    brisk_status st = check_input(ex, input, host, err);
    if (st) return st;
    if (!ex->be->host_memory || (uintptr_t)host % BRISK_AREA_ALIGN != 0)
        return brisk_exec_set_input(ex, input, host, err);
    point_input(ex, ex->g->inputs[input].node, (void *)host); /* read only: no node writes an input */
    ex->inputs_bound = 1;
    return BRISK_OK;
}

brisk_status brisk_exec_set_input(brisk_exec *ex, int input, const void *host, brisk_error *err) {
    brisk_status cs = check_input(ex, input, host, err);
    if (cs) return cs;
    const brisk_input_info *in = &ex->g->inputs[input];
    if (ex->inputs_bound) point_input(ex, in->node, (char *)ex->inputs + in->offset);
    brisk_status st = ex->be->upload(ex->be, (char *)ex->inputs + in->offset, host, in->bytes, err);
    if (st != BRISK_OK) brisk_error_prefix(err, "set input \"%s\"", in->name);
    return st;
}

brisk_status brisk_exec_set_grad_hook(brisk_exec *ex, const int64_t *offsets, const int64_t *counts, int n,
                                      int *order, void (*ready)(void *user, int n_complete), void *user,
                                      brisk_error *err) {
    if (!ex || n < 0 || (n > 0 && (!offsets || !counts || !order)) || !ready)
        return brisk_errorf(err, BRISK_ERR_INVALID, "exec: gradient hook without its ranges or callback");
    const brisk_plan *p = ex->plan;
    for (int r = 0; r < n; r++)
        if (offsets[r] < 0 || counts[r] < 0 || offsets[r] + counts[r] > ex->g->n_param_floats)
            return brisk_errorf(err, BRISK_ERR_INVALID, "exec: gradient range [%lld, +%lld) outside %lld floats",
                                (long long)offsets[r], (long long)counts[r], (long long)ex->g->n_param_floats);
    int *last = malloc(sizeof(int) * ((size_t)n + 1)), *done = calloc((size_t)p->n_train + 1, sizeof(int));
    if (!last || !done) {
        free(last), free(done);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "exec: out of memory");
    }
    brisk_plan_grad_ready(ex->g, p, offsets, counts, n, last);
    /* a counting sort by last writer (stable: ties by index): done[s + 1] counts the ranges
     * whose last writer is at or before position s, which is also where their run starts */
    for (int r = 0; r < n; r++) done[last[r] + 1]++;
    for (int s = 1; s <= p->n_train; s++) done[s] += done[s - 1];
    int *at = calloc((size_t)p->n_train + 1, sizeof(int));
    if (!at) {
        free(last), free(done);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "exec: out of memory");
    }
    for (int s = 1; s <= p->n_train; s++) at[s] = done[s - 1];
    for (int r = 0; r < n; r++) order[at[last[r] + 1]++] = r;
    free(at);
    free(last);
    free(ex->grad_done);
    ex->grad_done = done;
    ex->grad_ready = ready;
    ex->grad_user = user;
    ex->grad_armed = 0;
    return BRISK_OK;
}

void brisk_exec_arm_grad_hook(brisk_exec *ex, int armed) {
    if (ex) ex->grad_armed = armed && ex->grad_done != NULL;
}

brisk_status brisk_exec_run(brisk_exec *ex, brisk_run_kind kind, brisk_error *err) {
    if (!ex) return brisk_errorf(err, BRISK_ERR_INVALID, "run: NULL executor");
    const brisk_graph *g = ex->g;
    const brisk_plan *p = ex->plan;
    const int *order;
    int n;
    brisk_step_state st = ex->step;
    switch (kind) {
    case BRISK_RUN_TRAIN:
        if (g->loss < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "run train: the graph has no loss");
        order = p->train_order, n = p->n_train;
        break;
    case BRISK_RUN_EVAL:
        if (g->loss < 0 && g->output < 0)
            return brisk_errorf(err, BRISK_ERR_INVALID, "run eval: the graph has neither loss nor output");
        order = p->eval_order, n = p->n_eval, st.training = 0;
        break;
    case BRISK_RUN_PREDICT:
        if (g->output < 0) return brisk_errorf(err, BRISK_ERR_INVALID, "run predict: the graph has no output");
        order = p->predict_order, n = p->n_predict, st.training = 0;
        break;
    default:
        return brisk_errorf(err, BRISK_ERR_INVALID, "run: kind %d is not a run kind", (int)kind);
    }
    const int *done = kind == BRISK_RUN_TRAIN && ex->grad_armed ? ex->grad_done : NULL;
    int told = 0;
    if (done && done[0] > 0) ex->grad_ready(ex->grad_user, told = done[0]);
    brisk_status (*hook)(void *, int, int, brisk_error *) = kind == BRISK_RUN_TRAIN ? ex->node_hook : NULL;
    for (int s = 0; s < n; s++) {
        int id = order[s];
        const brisk_node *nd = &g->nodes[id];
        const void *in[BRISK_MAX_INPUTS];
        brisk_status hs = hook ? hook(ex->node_user, s, id, err) : BRISK_OK;
        if (hs) return hs;
        int ok = ex->ptr[id] != NULL;
        for (int j = 0; j < nd->n_in; j++) ok &= (in[j] = ex->ptr[nd->in[j]]) != NULL;
        if (!ok)
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "run: node %d (%s) or one of its inputs has no buffer",
                                id, brisk_op_name(nd->op));
        brisk_status rs = ex->be->run_node(ex->be, g, id, in, ex->ptr[id], &st, err);
        if (rs != BRISK_OK) {
            brisk_error_prefix(err, "node %d (%s)", id, brisk_op_name(nd->op));
            return rs;
        }
        if (done && done[s + 1] > told) ex->grad_ready(ex->grad_user, told = done[s + 1]);
    }
    return hook ? hook(ex->node_user, n, -1, err) : BRISK_OK;
}

void brisk_exec_set_node_hook(brisk_exec *ex, brisk_status (*hook)(void *user, int pos, int id, brisk_error *err),
                              void *user) {
    if (!ex) return;
    ex->node_hook = hook;
    ex->node_user = hook ? user : NULL;
}

brisk_status brisk_exec_read(brisk_exec *ex, int node, void *host, brisk_error *err) {
    if (!ex || !host) return brisk_errorf(err, BRISK_ERR_INVALID, "read: NULL executor or destination");
    if (node < 0 || node >= ex->g->n_nodes)
        return brisk_errorf(err, BRISK_ERR_INVALID, "read: %d is not a node", node);
    if (!ex->ptr[node])
        return brisk_errorf(err, BRISK_ERR_INVALID, "read: node %d (%s) is not in any schedule, so it has no buffer",
                            node, brisk_op_name(ex->g->nodes[node].op));
    const brisk_node *n = &ex->g->nodes[node];
    size_t out_bytes = (size_t)brisk_shape_numel(&n->shape) * brisk_dtype_size(n->dtype); /* not a workspace */
    return ex->be->download(ex->be, host, ex->ptr[node], out_bytes, err);
}
