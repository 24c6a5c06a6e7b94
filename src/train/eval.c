/* Validation over every sample: the split of data.train (or the file data.validation) in
 * full batches through the training graph's eval schedule, then the last, smaller batch
 * (nval % batch_size samples, or the whole split when it is smaller than one batch)
 * through a second graph planned once for exactly that many rows. That graph is a view
 * of the training executor (brisk_exec_create_view): it reads the trained parameters in
 * place, owns only its small activation arena, and computes what the full batches do, so
 * no padding and no masked loss are needed. The loss of a batch is its mean over its rows,
 * so the split's loss is the batch losses weighted by their rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

/* Validation runs use counter values far from training's, so they never share noise
 * with a training step and give the same loss every epoch for the same weights. */
#define EVAL_RNG_BASE 0xF0000000u

/* The validation samples: the dataset, its indices (NULL: all) and their count. */
static const brisk_dataset *val_source(const brisk_trainer *t, const int64_t **idx, int64_t *n) {
    if (t->val_data.count > 0) {
        *idx = NULL, *n = t->val_data.count;
        return &t->val_data;
    }
    *idx = t->split.val, *n = t->split.nval;
    return &t->data;
}

int64_t brisk_trainer_val_count(const brisk_trainer *t) {
    const int64_t *idx;
    int64_t n;
    val_source(t, &idx, &n);
    return n;
}

void brisk_eval_free(brisk_trainer *t) {
    if (t->tail_ex) brisk_exec_free(t->tail_ex);
    brisk_plan_free(&t->tail_plan);
    if (t->tail_g) brisk_graph_free(t->tail_g);
    t->tail_ex = NULL, t->tail_g = NULL, t->tail_rows = 0;
    memset(&t->tail_plan, 0, sizeof t->tail_plan);
}

int64_t brisk_eval_tail_bytes(const brisk_config *cfg, int64_t nval, int64_t batch) {
    int64_t rows = batch > 0 ? nval % batch : 0, bytes = 0;
    if (rows == 0) return 0;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan;
    brisk_error e;
    memset(&plan, 0, sizeof plan);
    if (g && !brisk_model_build(&cfg->model, rows, BRISK_BUILD_TRAIN, g, &io, &e) && !brisk_plan_build(g, &plan, &e))
        bytes = (int64_t)(plan.arena_bytes + plan.input_bytes + plan.const_bytes);
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    return bytes;
}

brisk_status brisk_eval_prepare(brisk_trainer *t, brisk_error *err) {
    const int64_t *idx;
    int64_t n, B = t->cfg.train.batch_size;
    val_source(t, &idx, &n);
    int64_t rows = n % B;
    if (rows == t->tail_rows && (rows == 0 || t->tail_ex)) return BRISK_OK;
    brisk_eval_free(t);
    if (rows == 0 || !t->ex) return BRISK_OK;
    brisk_status st = BRISK_OK;
    if (!(t->tail_g = brisk_graph_new())) return brisk_errorf(err, BRISK_ERR_NOMEM, "validation: out of memory");
    if ((st = brisk_model_build(&t->cfg.model, rows, BRISK_BUILD_TRAIN, t->tail_g, &t->tail_io, err)) ||
        (st = brisk_plan_build(t->tail_g, &t->tail_plan, err)) ||
        (st = brisk_exec_create_view(t->tail_g, &t->tail_plan, t->ex, &t->tail_ex, err))) {
        brisk_eval_free(t);
        return brisk_error_prefix(err, "%s: validation's last batch of %lld samples", t->cfg.path, (long long)rows);
    }
    t->tail_rows = rows;
    return BRISK_OK;
}

/* The dataset field feeding model field `name` (fields are bound by name, so the
 * validation file may order its members differently). */
static int field_index(const brisk_dataset *ds, const char *name) {
    for (int k = 0; k < ds->nfields; k++)
        if (strcmp(ds->fields[k].name, name) == 0) return k;
    return -1;
}

/* Keypoints of an image dataset, each labelled one in pixels of its own image: the
 * distance from the prediction, and whether it is within PCK's share of the image's longer
 * side. The batch holds samples idx[pos ..] (idx NULL: pos ..), in order. */
static void add_keypoints(const brisk_dataset *ds, const int64_t *idx, int64_t pos, const brisk_batch *b, int64_t rows,
                          int64_t C, const float *out, brisk_val_metrics *m) {
    int yf = field_index(ds, "y"), vf = field_index(ds, "visible"), w, h;
    brisk_error e;
    if (yf < 0 || vf < 0 || !brisk_image_dataset_path(ds, 0)) return;
    int64_t K = brisk_shape_numel(&ds->fields[vf].tensor.shape) / ds->count;
    if (C != 2 * K || K > BRISK_MAX_KEYPOINTS) return;
    float pred[2 * BRISK_MAX_KEYPOINTS], truth[2 * BRISK_MAX_KEYPOINTS];
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = idx ? idx[pos + r] : pos + r;
        const float *vis = (const float *)b->fields[vf].data + r * K;
        if (brisk_image_dataset_size(ds, i, &w, &h, &e) ||
            brisk_image_dataset_to_pixels(ds, i, (int)K, out + r * C, pred, &e) ||
            brisk_image_dataset_to_pixels(ds, i, (int)K, (const float *)b->fields[yf].data + r * C, truth, &e))
            return;
        for (int64_t k = 0; k < K; k++)
            if (vis[k] > 0)
                brisk_metrics_add_keypoint(m, hypot(pred[2 * k] - truth[2 * k], pred[2 * k + 1] - truth[2 * k + 1]),
                                           w > h ? w : h);
    }
}

/* Runs one batch of `rows` samples, idx[pos ..] (idx NULL: pos ..), through ex (io: its
 * graph's nodes) and adds its loss (times rows) and metrics. */
static brisk_status eval_batch(brisk_trainer *t, brisk_exec *ex, const brisk_model_io *io, const brisk_dataset *ds,
                               const int64_t *idx, int64_t pos, const brisk_batch *b, int64_t rows, uint32_t rng,
                               float *out, double *sum, brisk_val_metrics *m, brisk_error *err) {
    const brisk_model_spec *ms = &t->cfg.model;
    int classify = ms->type != BRISK_MODEL_DIFFUSION && ms->task == BRISK_TASK_CLASSIFY;
    int regress = ms->type != BRISK_MODEL_DIFFUSION && ms->task == BRISK_TASK_REGRESS;
    /* values per sample: outputs, or nodes x outputs for a model predicting per grid node */
    int64_t C = classify ? ms->outputs : brisk_shape_numel(&ex->g->nodes[io->output].shape) / rows;
    brisk_status st = BRISK_OK;
    for (int i = 0; i < io->n_fields && !st; i++) {
        int k = field_index(ds, io->fields[i].name);
        if (k < 0) return brisk_errorf(err, BRISK_ERR_INTERNAL, "validation: no field '%s'", io->fields[i].name);
        st = brisk_exec_use_input(ex, io->input_node[i], b->fields[k].data, err);
    }
    brisk_step_state saved = ex->step;
    ex->step = t->ex->step; /* the seed; the counter is validation's own */
    ex->step.rng_step = rng;
    float v[BRISK_LOSS_LOG_WIDTH] = {0};
    const int nt = io->n_loss_terms < m->n_loss_terms ? io->n_loss_terms : m->n_loss_terms;
    if (!st) st = brisk_exec_run(ex, BRISK_RUN_EVAL, err);
    brisk_exec_release_inputs(ex); /* b is the loader's again after this */
    if (!st && !(st = brisk_exec_read(ex, nt ? io->loss_terms : io->loss, v, err))) {
        *sum += (double)v[0] * (double)rows;
        for (int k = 0; k < nt; k++) m->loss_terms[k] += (double)v[k + 1] * (double)rows;
        int yf = io->target >= 0 ? field_index(ds, io->fields[io->target].name) : -1;
        if ((classify || regress) && yf >= 0 && !(st = brisk_exec_read(ex, io->output, out, err))) {
            if (classify) {
                brisk_metrics_add_classes(m, out, b->fields[yf].data, rows, C);
            } else {
                /* MAE and RMSE in the target's own units: undo the target normalisation */
                const float *y = b->fields[yf].data;
                for (int64_t r = 0; r < rows * C; r++) {
                    float p = brisk_target_units(t, out[r], r), q = brisk_target_units(t, y[r], r);
                    brisk_metrics_add_values(m, &p, &q, 1);
                }
                add_keypoints(ds, idx, pos, b, rows, C, out, m);
            }
        }
    }
    ex->step = saved;
    return st;
}

/* data.shard_files: each rank validated its own rows; the run's metrics are over all ranks'. */
static brisk_status reduce_sharded(brisk_trainer *t, brisk_val_metrics *m, double *sum, int64_t *n, brisk_error *err) {
    int C = m->classes <= BRISK_MAX_CLASSES ? m->classes : 0, nv = 5 + C * C;
    double *v = malloc(sizeof(double) * (size_t)nv);
    if (!v) return brisk_errorf(err, BRISK_ERR_NOMEM, "validation: out of memory");
    v[0] = *sum, v[1] = (double)*n, v[2] = (double)m->n, v[3] = m->abs_sum, v[4] = m->sq_sum;
    for (int i = 0; i < C * C; i++) v[5 + i] = (double)m->confusion[i / C][i % C];
    brisk_status st = brisk_dist_allreduce_sum(t->dist, v, nv, "validation metrics", t->step, err);
    if (!st) {
        *sum = v[0], *n = (int64_t)v[1], m->n = (int64_t)v[2], m->abs_sum = v[3], m->sq_sum = v[4];
        for (int i = 0; i < C * C; i++) m->confusion[i / C][i % C] = (int64_t)v[5 + i];
    }
    free(v);
    return st;
}

brisk_status brisk_validate(brisk_trainer *t, brisk_val_metrics *m, brisk_error *err) {
    const brisk_model_spec *ms = &t->cfg.model;
    int classify = ms->type != BRISK_MODEL_DIFFUSION && ms->task == BRISK_TASK_CLASSIFY;
    brisk_metrics_reset(m, classify ? (int)ms->outputs : 0);
    m->n_loss_terms = t->io.n_loss_terms;
    const int64_t *idx;
    int64_t n, B = t->cfg.train.batch_size;
    int64_t C = classify ? ms->outputs : brisk_shape_numel(&t->g->nodes[t->io.output].shape) / B;
    const brisk_dataset *ds = val_source(t, &idx, &n);
    if (n == 0) return BRISK_OK;
    brisk_status st = brisk_eval_prepare(t, err);
    if (st) return st;
    int64_t full = n / B, rows = n % B;
    float *out = malloc(sizeof(float) * (size_t)(B * C));
    if (!out) return brisk_errorf(err, BRISK_ERR_NOMEM, "validation: out of memory for %lld outputs", (long long)(B * C));
    double sum = 0;
    /* full batches, then the tail: one loader each, in the split's order */
    for (int part = 0; part < 2 && !st; part++) {
        int64_t bs = part ? rows : B, nb = part ? (rows > 0) : full;
        if (nb == 0) continue;
        brisk_loader_config lc = {.dataset = ds, .indices = idx, .nindices = n, .batch_size = bs,
                                  .seed = t->cfg.train.seed, .shuffle = 0, .prefetch = 0,
                                  .start_position = part ? full * B : 0,
                                  .workers = brisk_loader_workers(&t->cfg), .plain = 1};
        brisk_loader *l = NULL;
        if ((st = brisk_loader_create(&l, &lc, err))) break;
        for (int64_t i = 0; i < nb && !st; i++) {
            brisk_batch b;
            if ((st = brisk_loader_next(l, &b, err))) {
                t->loader_failed = 1;
                break;
            }
            st = part ? eval_batch(t, t->tail_ex, &t->tail_io, ds, idx, full * B, &b, rows, EVAL_RNG_BASE + (uint32_t)full,
                                   out, &sum, m, err)
                      : eval_batch(t, t->ex, &t->io, ds, idx, i * B, &b, B, EVAL_RNG_BASE + (uint32_t)i, out, &sum, m, err);
            brisk_loader_release(l, &b);
        }
        brisk_loader_destroy(l);
    }
    free(out);
    /* each rank's own rows: the terms stay this rank's, so they are left out */
    if (!st && t->data_sharded && t->world > 1) st = reduce_sharded(t, m, &sum, &n, err), m->n_loss_terms = 0;
    if (st) return st;
    for (int k = 0; k < m->n_loss_terms; k++) m->loss_terms[k] /= (double)n;
    brisk_metrics_finish(m, sum / (double)n);
    return BRISK_OK;
}
