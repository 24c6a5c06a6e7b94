/* What the tests that compare runs of one model (fused/unfused, thread counts) share: one
 * batch for its input fields, a few training steps from seed-fixed weights, then the
 * batch's loss in eval mode. */
#ifndef BRISK_TEST_MODEL_INPUTS_H
#define BRISK_TEST_MODEL_INPUTS_H

#include "brisk/brisk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Philox normals, class ids 0..2 for integer fields; the caller frees data[f], f < n_fields. */
static inline void model_inputs(const brisk_graph *g, const brisk_model_io *io, void **data) {
    uint32_t key[2] = {3, 0};
    for (int f = 0; f < io->n_fields; f++) {
        const brisk_input_info *in = &g->inputs[io->input_node[f]];
        int64_t n = brisk_shape_numel(&in->shape);
        data[f] = malloc(in->bytes);
        for (int64_t i = 0; i < n; i += 4) {
            uint32_t ctr[4] = {(uint32_t)(i / 4), (uint32_t)f, 0, 0}, u[4];
            float nv[4];
            brisk_philox4x32(ctr, key, u);
            brisk_philox_normal4(ctr, key, nv);
            for (int k = 0; k < 4 && i + k < n; k++) {
                if (in->dtype == BRISK_I32) ((int32_t *)data[f])[i + k] = (int32_t)(u[k] % 3);
                else ((float *)data[f])[i + k] = nv[k];
            }
        }
    }
}

#define MODEL_RUN_STEPS 3

typedef struct model_run_out {
    float losses[MODEL_RUN_STEPS];
    float eval_loss; /* after the steps, the same batch in eval mode (dropout off) */
    void *params, *grads; /* malloc'd (model_run_free); grads only when asked for */
    size_t param_bytes;
    char fusions[256]; /* the CPU backend's list of what it fused */
    int n_in_place;    /* gradients planned straight into the gradient arena (grads_in_place) */
} model_run_out;

/* MODEL_RUN_STEPS AdamW steps of `spec` at `batch` from weights of seed 7 on model_inputs'
 * batch, on a CPU backend of `threads` threads with its fusions on or off (fuse < 0: its
 * default), the gradients planned in place or copied by GRAD_ACCUM (in_place); the last
 * step's gradients too when want_grads. 0 on success. */
static inline int model_run(const brisk_model_spec *spec, int64_t batch, int threads, int fuse, int want_grads,
                            int in_place, const char *what, model_run_out *o) {
    brisk_error err = {0};
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan;
    brisk_exec *ex = NULL;
    brisk_backend *be = brisk_backend_cpu_new(threads);
    if (be && fuse >= 0) brisk_backend_cpu_set_fuse(be, fuse);
    brisk_optim_spec os;
    brisk_optim_spec_default(&os);
    os.lr = 1e-3f;
    brisk_optimizer opt;
    if (!g || !be || brisk_model_build(spec, batch, BRISK_BUILD_TRAIN, g, &io, &err) ||
        brisk_backward(g, io.loss, &err) || (g->grads_in_place = in_place, brisk_plan_build(g, &plan, &err)) ||
        brisk_exec_create(g, &plan, be, &ex, &err) || brisk_exec_init_params(ex, 7, &err) ||
        brisk_optimizer_create(&opt, &os, ex, &err)) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
        return -1;
    }
    for (int i = 0; i < g->n_nodes; i++)
        o->n_in_place += g->nodes[i].op == BRISK_OP_GRAD_ACCUM && g->nodes[g->nodes[i].in[0]].storage == BRISK_STORE_GRAD;
    brisk_backend_cpu_fusions(be, o->fusions, sizeof o->fusions);
    void *data[BRISK_MAX_FIELDS] = {0};
    model_inputs(g, &io, data);
    int rc = 0;
    o->param_bytes = plan.param_bytes;
    o->params = malloc(o->param_bytes);
    o->grads = want_grads ? malloc(o->param_bytes) : NULL;
    for (int s = 0; s < MODEL_RUN_STEPS && !rc; s++) {
        for (int f = 0; f < io.n_fields && !rc; f++)
            rc = brisk_exec_set_input(ex, io.input_node[f], data[f], &err) != 0;
        ex->step.rng_step = (uint32_t)s;
        ex->step.first_micro = 1;
        ex->step.training = 1;
        if (!rc) rc = brisk_exec_run(ex, BRISK_RUN_TRAIN, &err) != 0;
        if (!rc && o->grads && s == MODEL_RUN_STEPS - 1)
            rc = be->download(be, o->grads, ex->grads, o->param_bytes, &err) != 0;
        if (!rc)
            rc = brisk_optimizer_step(&opt, s + 1, os.lr, 1, &err) || brisk_exec_read(ex, io.loss, &o->losses[s], &err);
    }
    if (!rc) {
        ex->step.training = 0;
        rc = brisk_exec_run(ex, BRISK_RUN_EVAL, &err) || brisk_exec_read(ex, io.loss, &o->eval_loss, &err);
    }
    if (!rc) rc = !o->params || be->download(be, o->params, ex->params, o->param_bytes, &err) != 0;
    if (rc) fprintf(stderr, "%s (fuse %d, %d threads): %s\n", what, fuse, threads, err.msg);
    for (int f = 0; f < io.n_fields; f++) free(data[f]);
    brisk_optimizer_free(&opt);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
    return rc ? -1 : 0;
}

static inline void model_run_free(model_run_out *o) {
    free(o->params);
    free(o->grads);
}

#endif
