/* The inference executor: a model's PREDICT graph over BRISK_INFER_BATCH rows on its own
 * CPU backend, a host copy of the parameters (from a checkpoint or a live trainer, matched
 * by name), and MLP predictions. Every graph it builds starts with the PREDICT graph, so
 * all share one parameter layout and take the host copy in one upload. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer_internal.h"
#include "infer/predict_internal.h"
#include "run/checkpoint_file.h"

brisk_status brisk_infer_graph_plan(brisk_inference *inf, infer_graph *ig, brisk_error *err) {
    const brisk_graph *ref = inf->pred.g;
    brisk_status st = brisk_plan_build(ig->g, &ig->plan, err);
    if (!st) st = brisk_exec_create(ig->g, &ig->plan, inf->be, &ig->ex, err);
    if (st || !ref || ref == ig->g) return st;
    int same = ig->g->n_params == ref->n_params && ig->g->n_param_floats == ref->n_param_floats;
    for (int i = 0; same && i < ref->n_params; i++)
        same = strcmp(ig->g->params[i].name, ref->params[i].name) == 0 && ig->g->params[i].offset == ref->params[i].offset;
    if (!same) return brisk_errorf(err, BRISK_ERR_INTERNAL, "inference graph: parameter layout differs from the model's");
    ig->params_version = -1;
    return BRISK_OK;
}

void brisk_infer_graph_free(infer_graph *ig) {
    if (ig->ex) brisk_exec_free(ig->ex);
    brisk_plan_free(&ig->plan);
    if (ig->g) brisk_graph_free(ig->g);
    memset(ig, 0, sizeof *ig);
}

brisk_status brisk_infer_graph_sync(brisk_inference *inf, infer_graph *ig, brisk_error *err) {
    if (ig->params_version == inf->params_version) return BRISK_OK;
    brisk_status st = inf->be->upload(inf->be, ig->ex->params, inf->params,
                                      (size_t)ig->g->n_param_floats * sizeof(float), err);
    if (!st) ig->params_version = inf->params_version;
    return st;
}

void brisk_inference_free(brisk_inference *inf) {
    if (!inf) return;
    brisk_infer_graph_free(&inf->step);
    brisk_infer_graph_free(&inf->pred);
    brisk_sample_schedule_free(&inf->sched);
    if (inf->be) inf->be->destroy(inf->be);
    free(inf->params);
    free(inf->rows_in);
    free(inf->rows_out);
    free(inf->t_rows);
    free(inf->norm_mean), free(inf->norm_std), free(inf->tnorm_mean), free(inf->tnorm_std);
    brisk_layer_graph_unref(inf->model.graph);
    free(inf);
}

brisk_status brisk_inference_create(const brisk_model_spec *model, int threads, brisk_inference **out,
                                    brisk_error *err) {
    *out = NULL;
    brisk_inference *inf = calloc(1, sizeof *inf);
    if (!inf) return brisk_errorf(err, BRISK_ERR_NOMEM, "inference: out of memory");
    inf->model = *model;
    brisk_layer_graph_ref(inf->model.graph);
    int64_t in = model->fine + model->coarse, outw = model->fine;
    if (model->type != BRISK_MODEL_DIFFUSION && !brisk_model_row_widths(model, &in, &outw)) {
        brisk_inference_free(inf);
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "inference: a %s model does not map rows to rows",
                            brisk_model_type_name(model->type));
    }
    inf->rows_i = in, inf->rows_o = outw;
    const size_t B = BRISK_INFER_BATCH;
    inf->be = brisk_backend_cpu_new(threads);
    inf->pred.g = brisk_graph_new();
    inf->rows_in = malloc(sizeof(float) * B * (size_t)in);
    inf->rows_out = malloc(sizeof(float) * B * (size_t)outw);
    inf->t_rows = malloc(sizeof(int32_t) * B);
    brisk_status st = BRISK_OK;
    if (!inf->be || !inf->pred.g || !inf->rows_in || !inf->rows_out || !inf->t_rows)
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "inference: out of memory");
    if (!st) st = brisk_model_build(model, (int64_t)B, BRISK_BUILD_PREDICT, inf->pred.g, &inf->pred.io, err);
    if (!st) st = brisk_infer_graph_plan(inf, &inf->pred, err);
    if (!st) st = brisk_exec_init_params(inf->pred.ex, 0, err);
    if (!st && !(inf->params = malloc(sizeof(float) * (size_t)(inf->pred.g->n_param_floats + 1))))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "inference: out of memory");
    if (!st)
        st = inf->be->download(inf->be, inf->params, inf->pred.ex->params,
                               (size_t)inf->pred.g->n_param_floats * sizeof(float), err);
    if (st) {
        brisk_inference_free(inf);
        return st;
    }
    *out = inf;
    return BRISK_OK;
}

brisk_status brisk_inference_load(brisk_inference *inf, const char *checkpoint, brisk_error *err) {
    brisk_status st = brisk_checkpoint_load_params(checkpoint, inf->pred.ex, err);
    if (!st)
        st = inf->be->download(inf->be, inf->params, inf->pred.ex->params,
                               (size_t)inf->pred.g->n_param_floats * sizeof(float), err);
    if (st) return st;
    inf->params_version++;
    inf->pred.params_version = inf->params_version;
    return BRISK_OK;
}

/* *mean, *std (n values) replaced by copies of the trainer's (n 0: none). */
static brisk_status copy_stats(float **mean, float **std, int *n, const float *tm, const float *ts, int tn,
                               brisk_error *err) {
    free(*mean), free(*std), *mean = *std = NULL, *n = 0;
    if (tn == 0) return BRISK_OK;
    if (!(*mean = malloc(sizeof(float) * (size_t)tn)) || !(*std = malloc(sizeof(float) * (size_t)tn))) {
        free(*mean), *mean = NULL;
        return brisk_errorf(err, BRISK_ERR_NOMEM, "inference: out of memory");
    }
    memcpy(*mean, tm, sizeof(float) * (size_t)tn);
    memcpy(*std, ts, sizeof(float) * (size_t)tn);
    *n = tn;
    return BRISK_OK;
}

brisk_status brisk_inference_set_params(brisk_inference *inf, const brisk_graph *src, const float *host,
                                        const brisk_norm_stats *norm, const brisk_norm_stats *tnorm, brisk_error *err) {
    const brisk_graph *dst = inf->pred.g;
    brisk_status st = BRISK_OK;
    for (int i = 0; i < dst->n_params && !st; i++) {
        const brisk_param_info *p = &dst->params[i];
        int j = 0;
        while (j < src->n_params && strcmp(src->params[j].name, p->name) != 0) j++;
        if (j == src->n_params || src->params[j].numel != p->numel)
            st = brisk_errorf(err, BRISK_ERR_INTERNAL, "inference: the trainer has no parameter '%s' of %lld values",
                              p->name, (long long)p->numel);
        else
            memcpy(inf->params + p->offset, host + src->params[j].offset, sizeof(float) * (size_t)p->numel);
    }
    if (!st) inf->params_version++;
    if (!st) st = copy_stats(&inf->norm_mean, &inf->norm_std, &inf->norm_n, norm->mean, norm->std, norm->n, err);
    if (!st) st = copy_stats(&inf->tnorm_mean, &inf->tnorm_std, &inf->tnorm_n, tnorm->mean, tnorm->std, tnorm->n, err);
    return st;
}

brisk_status brisk_inference_predict(brisk_inference *inf, int64_t n, const float *x, int64_t x_stride, float *y,
                                     int64_t y_stride, brisk_error *err) {
    const brisk_model_spec *m = &inf->model;
    if (m->type == BRISK_MODEL_DIFFUSION)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "predict: a diffusion model makes fine fields by sampling");
    const int64_t B = BRISK_INFER_BATCH, I = inf->rows_i, C = inf->rows_o;
    brisk_status st = brisk_infer_graph_sync(inf, &inf->pred, err);
    inf->pred.ex->step.training = 0;
    for (int64_t r = 0; r < n && !st; r += B) {
        int64_t rows = n - r < B ? n - r : B;
        /* The graph has a fixed batch: the last chunk is zero-padded and only its rows kept. */
        memset(inf->rows_in, 0, sizeof(float) * (size_t)(B * I));
        for (int64_t i = 0; i < rows; i++) memcpy(inf->rows_in + i * I, x + (r + i) * x_stride, sizeof(float) * (size_t)I);
        if (inf->norm_n) brisk_normalize_rows(inf->rows_in, rows * I / inf->norm_n, inf->norm_n, inf->norm_mean, inf->norm_std);
        if ((st = brisk_exec_set_input(inf->pred.ex, inf->pred.io.input_node[0], inf->rows_in, err)) ||
            (st = brisk_exec_run(inf->pred.ex, BRISK_RUN_PREDICT, err)) ||
            (st = brisk_exec_read(inf->pred.ex, inf->pred.io.output, inf->rows_out, err)))
            break;
        if (m->task == BRISK_TASK_CLASSIFY) brisk_softmax_rows(inf->rows_out, rows, C);
        for (int64_t i = 0; inf->tnorm_n && m->task == BRISK_TASK_REGRESS && i < rows * C; i++)
            inf->rows_out[i] = inf->rows_out[i] * inf->tnorm_std[i % inf->tnorm_n] + inf->tnorm_mean[i % inf->tnorm_n];
        for (int64_t i = 0; i < rows; i++) memcpy(y + (r + i) * y_stride, inf->rows_out + i * C, sizeof(float) * (size_t)C);
    }
    return st;
}
