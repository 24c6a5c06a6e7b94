/* data.normalize: a plain table's inputs (x) and regression targets (y), from data.train and
 * data.fields, standardised per channel (the last axis of a sample: an mlp's columns, a
 * sequence's features) with the mean and deviation of the training split, as data.windows
 * does for series (the same fit and the same arithmetic: brisk_normalize_fit and
 * brisk_normalize_rows). The statistics go into checkpoints ("normalization" for x,
 * "target_normalization" for y); predict and export apply them to inputs and undo them on
 * outputs, a session that loads such a checkpoint does the same to what it is given, and
 * validation's MAE and RMSE are in the target's own units.
 *
 * The default, "auto", standardises a field only when one of its channels is far from unit
 * scale on the training split: |mean| above 3, or a deviation above 10 or below 0.1. Such a
 * table (prices, counts, readings in raw units) trains badly or not at all under the default
 * initialisation, learning rate and weight decay, which all assume unit-scale values; a table
 * already near unit scale keeps weights that apply to its raw values, as a PyTorch model
 * loading them expects. true and false decide it for both fields, {"inputs": ..,
 * "targets": ..} for each; the log says what was done and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

/* A channel this far from unit scale makes "auto" standardise its field. */
#define AUTO_MAX_ABS_MEAN 3.0
#define AUTO_MAX_SD 10.0
#define AUTO_MIN_SD 0.1

static brisk_tensor *field_of(brisk_dataset *ds, const char *name) {
    for (int f = 0; f < ds->nfields; f++)
        if (strcmp(ds->fields[f].name, name) == 0 && ds->fields[f].tensor.dtype == BRISK_F32)
            return &ds->fields[f].tensor;
    return NULL;
}

static void apply(brisk_dataset *ds, const char *name, int64_t ch, const float *mean, const float *std) {
    brisk_tensor *x = field_of(ds, name);
    if (x) brisk_normalize_rows(x->data, brisk_shape_numel(&x->shape) / ch, (int)ch, mean, std);
}

/* Mean and deviation per channel of field `name` over the training split, into malloc'd
 * arrays (NULL: no such field, or no training rows). */
static brisk_status fit(brisk_trainer *t, const char *name, int64_t ch, float **mean, float **std, brisk_error *err) {
    *mean = *std = NULL;
    const brisk_tensor *x = field_of(&t->data, name);
    if (!x || t->data.count < 1 || t->split.ntrain < 1) return BRISK_OK;
    const int64_t per = brisk_shape_numel(&x->shape) / t->data.count;
    if (per < ch || per % ch) return BRISK_OK;
    *mean = malloc(sizeof(float) * (size_t)ch);
    *std = malloc(sizeof(float) * (size_t)ch);
    if (!*mean || !*std) {
        free(*mean), free(*std), *mean = *std = NULL;
        return brisk_errorf(err, BRISK_ERR_NOMEM, "normalisation of %s: out of memory", name);
    }
    brisk_normalize_fit(x->data, per, (int)ch, t->split.train, t->split.ntrain, *mean, *std);
    return BRISK_OK;
}

brisk_status brisk_field_standardize(brisk_trainer *t, const char *name, int64_t ch, float **mean, float **std,
                                     brisk_error *err) {
    brisk_status st = fit(t, name, ch, mean, std, err);
    if (!st && *mean) {
        apply(&t->data, name, ch, *mean, *std);
        apply(&t->val_data, name, ch, *mean, *std);
    }
    return st;
}

/* The channel furthest from unit scale when one is past the "auto" bounds, else -1 (a
 * constant channel, deviation 1 from the fit, is judged by its mean). */
static int64_t off_scale(const float *mean, const float *sd, int64_t ch) {
    int64_t worst = -1;
    double score = 1;
    for (int64_t c = 0; c < ch; c++) {
        double s = fmax(fabs(mean[c]) / AUTO_MAX_ABS_MEAN, fmax(sd[c] / AUTO_MAX_SD, AUTO_MIN_SD / sd[c]));
        if (s > score) score = s, worst = c;
    }
    return worst;
}

/* One field of the table, what its statistics say, and whether they are used. */
typedef struct field_norm {
    const char *field, *what; /* "x", "inputs" */
    brisk_norm_mode mode;
    int64_t ch;               /* channels: the last axis of a sample */
    float *mean, *std;        /* fitted (ch values each); kept when standardised */
    int64_t worst;            /* the channel furthest from unit scale, -1: none is */
} field_norm;

/* What was done to one field, in one log line. */
static void report(brisk_trainer *t, const field_norm *f, int per_column, int sharded) {
    char why[160] = "";
    if (f->worst >= 0)
        snprintf(why, sizeof why, "%s %lld has mean %.4g and deviation %.4g", per_column ? "column" : "feature",
                 (long long)f->worst, f->mean[f->worst], f->std[f->worst]);
    const int used = f->mode == BRISK_NORM_ON || (f->mode == BRISK_NORM_AUTO && f->worst >= 0);
    if (used)
        brisk_log(&t->log, BRISK_LOG_INFO, "data      %s (%s) standardised per %s with the training split's mean and "
                  "deviation (%lld channels): %s; stored in checkpoints, predict and export apply it%s", f->field,
                  f->what, per_column ? "column" : "feature", (long long)f->ch,
                  f->mode == BRISK_NORM_ON ? "data.normalize" : why,
                  f->field[0] == 'y' ? ", MAE, RMSE and predictions in its own units" : "");
    else if (f->worst >= 0)
        brisk_log(&t->log, BRISK_LOG_WARN, "data      %s (%s) is far from unit scale (%s) and left as it is (%s): "
                  "expect slow or no learning", f->field, f->what, why,
                  sharded ? "data.shard_files: each rank would fit other statistics; standardise the files beforehand"
                          : "data.normalize false");
    else if (f->mode == BRISK_NORM_AUTO)
        brisk_log(&t->log, BRISK_LOG_INFO, "data      %s (%s) near unit scale on the training split: left as it is "
                  "(data.normalize auto)", f->field, f->what);
}

/* The model field's channels (its sample's last axis); 0 when it is not an f32 field. */
static int64_t channels(const brisk_trainer *t, const char *name, int *per_column) {
    for (int i = 0; i < t->io.n_fields; i++) {
        const brisk_shape *s = &t->io.fields[i].sample;
        if (strcmp(t->io.fields[i].name, name) != 0 || t->io.fields[i].dtype != BRISK_F32) continue;
        *per_column = s->ndim <= 1;
        return s->ndim ? s->d[s->ndim - 1] : 1;
    }
    return 0;
}

brisk_status brisk_table_normalize(brisk_trainer *t, brisk_error *err) {
    const brisk_data_spec *d = &t->cfg.data;
    const brisk_model_type type = t->cfg.model.type;
    /* the data kinds and models that standardise their own way, or whose inputs predict does
     * not read as one table */
    const char *other = d->windows.enabled ? "data.windows (data.windows.normalize)"
                        : d->images.enabled ? "data.images (data.images.mean and std)"
                        : d->netcdf.enabled ? "data.netcdf (normalised by its fields' statistics)"
                        : type == BRISK_MODEL_DIFFUSION ? "a diffusion model"
                        : type == BRISK_MODEL_RESNET ? "a resnet (data.images.mean and std)"
                        : type == BRISK_MODEL_MESHGNN ? "a meshgnn (data.netcdf)"
                        : type == BRISK_MODEL_GRAPH ? "a graph model (its named inputs: standardise them beforehand)"
                        : NULL;
    if (other)
        return d->normalize_given ? brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.normalize standardises a table's "
                                                 "columns (data.train with data.fields, for an mlp, lstm or "
                                                 "transformer); not %s: remove it", t->cfg.path, other)
                                  : BRISK_OK;
    const int sharded = d->shard_files && d->shard_world > 1;
    field_norm f[2] = {{"x", "inputs", d->normalize_inputs, 0, NULL, NULL, -1},
                       {"y", "targets", d->normalize_targets, 0, NULL, NULL, -1}};
    const int nf = t->cfg.model.task == BRISK_TASK_REGRESS ? 2 : 1; /* class labels stay labels */
    brisk_status st = BRISK_OK;
    for (int i = 0; i < nf && !st; i++) {
        int per_column = 1;
        if (!(f[i].ch = channels(t, f[i].field, &per_column))) continue;
        if (sharded && f[i].mode == BRISK_NORM_ON)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.normalize with data.shard_files: each rank holds other "
                              "rows and would fit other statistics; standardise the files beforehand or set "
                              "data.normalize false", t->cfg.path);
        if (sharded) f[i].mode = BRISK_NORM_OFF;
        if (st || (st = fit(t, f[i].field, f[i].ch, &f[i].mean, &f[i].std, err)) || !f[i].mean) continue;
        f[i].worst = off_scale(f[i].mean, f[i].std, f[i].ch);
        report(t, &f[i], per_column, sharded);
        if (f[i].mode == BRISK_NORM_ON || (f[i].mode == BRISK_NORM_AUTO && f[i].worst >= 0)) {
            apply(&t->data, f[i].field, f[i].ch, f[i].mean, f[i].std);
            apply(&t->val_data, f[i].field, f[i].ch, f[i].mean, f[i].std);
        } else {
            free(f[i].mean), free(f[i].std), f[i].mean = f[i].std = NULL;
        }
    }
    if (st) {
        for (int i = 0; i < 2; i++) free(f[i].mean), free(f[i].std);
        return st;
    }
    t->norm_mean = f[0].mean, t->norm_std = f[0].std, t->norm_n = f[0].mean ? (int)f[0].ch : 0;
    t->tnorm_mean = f[1].mean, t->tnorm_std = f[1].std, t->tnorm_n = f[1].mean ? (int)f[1].ch : 0;
    return BRISK_OK;
}

brisk_status brisk_normalization_adopt(brisk_trainer *t, const char *checkpoint, brisk_error *err) {
    const brisk_model_spec *m = &t->cfg.model;
    if (m->type != BRISK_MODEL_MLP) return BRISK_OK; /* the only kind of table a session predicts from */
    float *mean = NULL, *std = NULL, *tmean = NULL, *tstd = NULL;
    int n = 0, tn = 0;
    brisk_status st = brisk_checkpoint_normalization(checkpoint, &mean, &std, &n, err);
    if (!st && m->task == BRISK_TASK_REGRESS) st = brisk_checkpoint_target_normalization(checkpoint, &tmean, &tstd, &tn, err);
    if (!st && ((n && n != m->inputs) || (tn && tn != m->outputs)))
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: normalisation of %d inputs and %d targets; the model has %lld and "
                          "%lld", checkpoint, n, tn, (long long)m->inputs, (long long)m->outputs);
    if (st) {
        free(mean), free(std), free(tmean), free(tstd);
        return st;
    }
    free(t->norm_mean), free(t->norm_std), free(t->tnorm_mean), free(t->tnorm_std);
    t->norm_mean = mean, t->norm_std = std, t->norm_n = n;
    t->tnorm_mean = tmean, t->tnorm_std = tstd, t->tnorm_n = tn;
    if (n || tn)
        brisk_log(&t->log, BRISK_LOG_INFO, "data      %s standardises %s%s%s (data.normalize): pushed samples and "
                  "predictions are in the data's own units, brisk applies it", checkpoint, n ? "the inputs" : "",
                  n && tn ? " and " : "", tn ? "the targets" : "");
    return BRISK_OK;
}

void brisk_normalization_apply(const brisk_trainer *t) {
    brisk_dataset *sets[] = {(brisk_dataset *)&t->data, (brisk_dataset *)&t->val_data};
    for (int d = 0; d < 2; d++) {
        if (t->norm_n) apply(sets[d], "x", t->norm_n, t->norm_mean, t->norm_std);
        if (t->tnorm_n && t->cfg.model.task == BRISK_TASK_REGRESS) apply(sets[d], "y", t->tnorm_n, t->tnorm_mean, t->tnorm_std);
    }
}
