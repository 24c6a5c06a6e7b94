/* Building a trainer: backend, data (fields mapped to the model's), split, graph,
 * plan, executor, optimizer. Every mismatch between config, data and model is an
 * error naming the file and field. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "train/trainer_internal.h"

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* "; CPU fusion on; 2 MiB pages on; ...": the backend's own rows, by name and state. */
static void name_state(void *user, const char *name, const char *state, const char *detail) {
    (void)detail;
    brisk_strbuf_printf(user, "; %s %s", name, state);
}

/* The start-of-run report of what is on, and why anything is off: logged, and kept for the
 * event file's text (tboard.c). */
static void report_active(brisk_trainer *t) {
    const brisk_config *cfg = &t->cfg;
    const char *opt = cfg->optim.kind == BRISK_OPTIM_ADAMW ? "AdamW" : "SGD";
    char *r = t->active_report;
    size_t n = sizeof t->active_report;
    if (!t->be->describe) {
        brisk_strbuf names = {0};
        if (t->be->optimizations) t->be->optimizations(t->be, name_state, &names);
        snprintf(r, n,
                 "active    fp32 (CPU)%s; fused %s over one parameter arena; loader prefetch %d%s; "
                 "grad accumulation %d; clip %s",
                 names.s ? names.s : "", opt, cfg->speed.prefetch,
                 cfg->speed.prefetch ? " (background thread)" : " (off)",
                 cfg->train.accumulate, cfg->optim.clip_norm > 0 ? "on" : "off");
        brisk_strbuf_free(&names);
    } else {
        char desc[2048];
        t->be->describe(t->be, desc, sizeof desc);
        brisk_log(&t->log, BRISK_LOG_INFO, "device    cuda: %s", desc);
        snprintf(r, n,
                 "active    CUDA graph %s; prefetch %s; fused %s over one parameter arena (one launch)%s; "
                 "grad accumulation %d; clip %s",
                 cfg->speed.cuda_graph ? "on (captured after 1 eager warm-up step)" : "off (--no-graph)",
                 cfg->speed.prefetch ? "on: loader thread into pinned memory, copy stream overlapped with compute"
                                     : "off (--no-prefetch: each batch copied when needed)",
                 opt, cfg->optim.clip_norm > 0 ? " with global-norm clipping on the device" : "",
                 cfg->train.accumulate, cfg->optim.clip_norm > 0 ? "on" : "off");
    }
    brisk_log(&t->log, BRISK_LOG_INFO, "%s", r);
    if (t->device_note[0]) snprintf(r + strlen(r), n - strlen(r), "\n\ndevice    %s", t->device_note);
}


/* Class labels must index the model's outputs: checked once at load, where the file and the
 * row can still be named, rather than at the first step inside a shuffled batch. */
static brisk_status check_labels(const brisk_trainer *t, const brisk_dataset *ds, int k, const brisk_model_field *f,
                                 brisk_error *err) {
    const brisk_tensor *y = &ds->fields[k].tensor;
    int64_t C = t->cfg.model.outputs, n = brisk_shape_numel(&y->shape);
    const int32_t *v = (const int32_t *)y->data;
    int64_t i = 0;
    while (i < n && v[i] >= 0 && v[i] < C) i++;
    if (i == n) return BRISK_OK;
    const brisk_data_spec *d = &t->cfg.data;
    int j = 0;
    while (j < d->n_fields && strcmp(d->field_names[j], f->name) != 0) j++;
    const char *src = j < d->n_fields ? d->field_sources[j] : f->name;
    int csv = strlen(ds->source) > 4 && strcmp(ds->source + strlen(ds->source) - 4, ".csv") == 0;
    return brisk_errorf(err, BRISK_ERR_INVALID, "%s: field '%s' (%s '%s'), row %lld%s: class label %d is outside [0, %lld): "
                        "model.outputs is %lld", ds->source, f->name, csv ? "CSV column" : "npz member", src,
                        (long long)i, csv ? " (the data row after the header)" : "", v[i], (long long)C, (long long)C);
}

/* Maps the fields of ds to the model's (map: NULL, or the dataset field of each model
 * field); per-sample shapes must be what the model was configured for (a flat input also
 * takes samples of the same size in another shape, as an mlp's [64] takes [64, 1] or a
 * window, and a one-output regressor's [1] takes scalars [N]: the bytes are the same). */
static brisk_status bind_fields(brisk_trainer *t, const brisk_dataset *ds, int *map, brisk_error *err) {
    for (int i = 0; i < t->io.n_fields; i++) {
        const brisk_model_field *f = &t->io.fields[i];
        int k = 0;
        while (k < ds->nfields && strcmp(ds->fields[k].name, f->name) != 0) k++;
        if (k == ds->nfields)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no field '%s', which the model (%s) takes", ds->source,
                                f->name, t->cfg.path);
        brisk_shape s = brisk_dataset_sample_shape(ds, k);
        /* a flat sample and a shaped one of the same size: its values in C order (a graph model's
         * input from [N, K] data or a session's rows) */
        int flat = (f->sample.ndim == 1 || (s.ndim == 1 && f->takes_flat)) &&
                   (f->sample.ndim == 1) != (s.ndim == 1) && brisk_shape_numel(&s) == brisk_shape_numel(&f->sample);
        if (!brisk_shape_equal(&s, &f->sample) && !flat) {
            char a[64], b[64];
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: field '%s' has samples of shape %s, the model (%s) expects %s; "
                                "set %s to the data's, or map the field to another array with data.fields",
                                ds->source, f->name, brisk_shape_str(&s, a, sizeof a), t->cfg.path,
                                brisk_shape_str(&f->sample, b, sizeof b), f->shape_key ? f->shape_key : "the model's sizes");
        }
        if (ds->fields[k].tensor.dtype != f->dtype)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: field '%s' holds %s, the model (%s) expects %s", ds->source,
                                f->name, brisk_dtype_name(ds->fields[k].tensor.dtype), t->cfg.path,
                                brisk_dtype_name(f->dtype));
        /* the labels: the target field (an i32 input beside it holds ids, an embedding's) */
        if (f->dtype == BRISK_I32 && t->cfg.model.task == BRISK_TASK_CLASSIFY && ds->fields[k].window == 0 &&
            (t->io.target < 0 || i == t->io.target)) {
            brisk_status st = check_labels(t, ds, k, f, err);
            if (st) return st;
        }
        if (map) map[i] = k;
    }
    return BRISK_OK;
}

static brisk_status bind_data(brisk_trainer *t, brisk_error *err) {
    brisk_status st = bind_fields(t, &t->data, t->field_of_input, err);
    if (!st && t->val_data.count) st = bind_fields(t, &t->val_data, NULL, err);
    return st;
}

/* data.validation with windows: every window of the validation file, normalised with the
 * training rows' statistics (not its own). */
static brisk_status load_validation_windows(brisk_trainer *t, const brisk_window_spec *train_spec, brisk_error *err) {
    brisk_window_spec ws = *train_spec;
    ws.validation_fraction = 0;
    ws.normalize = 0;
    brisk_windows w;
    brisk_status st = brisk_windows_load(t->cfg.data.validation, &ws, &w, err);
    if (st) return st;
    for (int f = 0; f < w.ds.nfields && t->norm_n; f++)
        if (strcmp(w.ds.fields[f].name, "x") == 0)
            brisk_normalize_rows(w.ds.fields[f].tensor.data, w.rows, t->norm_n, t->norm_mean, t->norm_std);
    t->val_data = w.ds;
    memset(&w.ds, 0, sizeof w.ds);
    brisk_windows_free(&w);
    return BRISK_OK;
}

/* data.windows: the windows dataset, its chronological split and normalisation. */
static brisk_status load_windows(brisk_trainer *t, brisk_error *err) {
    const brisk_data_spec *d = &t->cfg.data;
    const brisk_windows_config *wc = &d->windows;
    const brisk_model_spec *m = &t->cfg.model;
    int classes = wc->kind == BRISK_TARGET_CLASSES;
    if (m->type == BRISK_MODEL_DIFFUSION)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.windows: a diffusion model does not train on windows",
                            t->cfg.path);
    if (classes != (m->task == BRISK_TASK_CLASSIFY))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.windows.target.kind \"%s\" makes %s, but model.task is "
                            "\"%s\"", t->cfg.path, classes ? "classes" : wc->kind == BRISK_TARGET_VALUE ? "value" : "change",
                            classes ? "class labels" : "regression targets", classes ? "regress" : "classify");
    if (classes && m->outputs != wc->nthresholds + 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.windows.target.thresholds: %d thresholds make %d classes, "
                            "but model.outputs is %lld", t->cfg.path, wc->nthresholds, wc->nthresholds + 1,
                            (long long)m->outputs);
    const char *names[BRISK_MAX_FEATURES];
    brisk_window_spec ws;
    brisk_windows_spec_of(d, names, &ws);
    brisk_windows w;
    brisk_status st = brisk_windows_load(d->train, &ws, &w, err);
    if (st) return st;
    t->data = w.ds; /* the trainer owns these from here on */
    t->split = w.split;
    t->norm_mean = w.mean;
    t->norm_std = w.std;
    t->norm_n = w.mean ? w.nfeatures : 0;
    if (d->validation[0] && (st = load_validation_windows(t, &ws, err))) return st;
    /* data.windows.target.normalize: the regression target becomes (y - mean) / std */
    if (wc->normalize_target && (st = brisk_field_standardize(t, "y", 1, &t->tnorm_mean, &t->tnorm_std, err))) return st;
    t->tnorm_n = t->tnorm_mean ? 1 : 0;
    int64_t K = t->data.count;
    brisk_log(&t->log, BRISK_LOG_INFO,
              "data      %s: %lld rows -> %lld windows of %lld x %d (stride %lld, target %lld after); validation from "
              "row %lld: %lld train / %lld validation windows, %lld left out between them%s",
              d->train, (long long)w.rows, (long long)K, (long long)ws.length, ws.nfeatures, (long long)ws.stride,
              (long long)ws.horizon, (long long)w.split_row, (long long)t->split.ntrain, (long long)t->split.nval,
              (long long)(K - t->split.ntrain - t->split.nval), t->norm_n ? "; normalised on the training rows" : "");
    if (t->val_data.count)
        brisk_log(&t->log, BRISK_LOG_INFO, "data      validation: %lld windows of %s", (long long)t->val_data.count,
                  d->validation);
    if (t->tnorm_n)
        brisk_log(&t->log, BRISK_LOG_INFO, "data      target normalised: (y - %.6g) / %.6g, fitted on the training windows",
                  t->tnorm_mean[0], t->tnorm_std[0]);
    return BRISK_OK;
}

/* Which source (npz member or CSV columns) feeds each model field. */
/* data.shard_files: rank r of W loads rows [r*R/W, (r+1)*R/W) with R/W rounded down, so
 * every rank has as many rows and its epochs end at the same step as the others'. A CSV's
 * row count takes a first pass that only splits records. */
static brisk_status load_shard(brisk_trainer *t, brisk_dataset *ds, const char *path, const brisk_field_spec *specs,
                               int csv, int64_t *lo, int64_t *file_rows, brisk_error *err) {
    const brisk_data_spec *d = &t->cfg.data;
    int W = d->shard_world, r = d->shard_rank;
    int64_t R = 0;
    brisk_status st = csv ? brisk_dataset_load_csv_rows(ds, path, specs, t->io.n_fields, 0, 1, &R, err)
                          : brisk_dataset_load_npz_rows(ds, path, specs, t->io.n_fields, 0, 1, &R, err);
    brisk_dataset_free(ds);
    if (st) return st;
    int64_t per = R / W;
    if (per < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.shard_files: %s has %lld rows, fewer than the %d ranks",
                            t->cfg.path, path, (long long)R, W);
    *lo = (int64_t)r * per, *file_rows = R;
    st = csv ? brisk_dataset_load_csv_rows(ds, path, specs, t->io.n_fields, *lo, *lo + per, NULL, err)
             : brisk_dataset_load_npz_rows(ds, path, specs, t->io.n_fields, *lo, *lo + per, NULL, err);
    if (st) return st;
    int64_t bytes = 0;
    for (int i = 0; i < ds->nfields; i++) bytes += (int64_t)brisk_tensor_bytes(&ds->fields[i].tensor);
    brisk_log(&t->log, BRISK_LOG_INFO, "data      shard_files: rank %d of %d loaded rows [%lld, %lld) of %s: %lld of "
              "%lld rows, %lld bytes as the model's fields; the last %lld rows (rows mod ranks) are not used", r, W,
              (long long)*lo, (long long)(*lo + per), path, (long long)per, (long long)R, (long long)bytes,
              (long long)(R - per * W));
    return BRISK_OK;
}

static brisk_status load_data(brisk_trainer *t, brisk_error *err) {
    const brisk_data_spec *d = &t->cfg.data;
    if (d->shard_files && d->shard_world > 1 && (d->images.enabled || d->netcdf.enabled || d->windows.enabled))
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: data.shard_files reads the rows of an .npz or .csv file; "
                            "data.%s is not sharded: leave data.shard_files false", t->cfg.path,
                            d->images.enabled ? "images" : d->netcdf.enabled ? "netcdf" : "windows");
    if (d->images.enabled) {
        brisk_status st = brisk_trainer_load_images(t, err);
        return st ? st : bind_data(t, err);
    }
    if (d->netcdf.enabled) {
        brisk_status st = brisk_trainer_load_netcdf(t, err);
        return st ? st : bind_data(t, err);
    }
    if (d->windows.enabled) {
        brisk_status st = load_windows(t, err);
        if (st) return st;
        return bind_data(t, err);
    }
    brisk_field_spec specs[BRISK_MAX_FIELDS] = {{0}};
    const char *own[BRISK_MAX_FIELDS], **cols[BRISK_MAX_FIELDS] = {0};
    int csv = ends_with(d->train, ".csv");
    for (int j = 0; j < d->n_fields; j++) {
        int known = 0;
        for (int i = 0; i < t->io.n_fields; i++) known |= strcmp(d->field_names[j], t->io.fields[i].name) == 0;
        if (!known) {
            char list[256] = "";
            for (int i = 0; i < t->io.n_fields; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", t->io.fields[i].name);
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.fields: unknown field \"%s\" (this model takes %s); "
                                "key data.fields by those names, each mapped to an npz member or CSV columns",
                                t->cfg.path, d->field_names[j], list);
        }
    }
    brisk_status st = BRISK_OK;
    for (int i = 0; i < t->io.n_fields && !st; i++) {
        const brisk_model_field *f = &t->io.fields[i];
        int j = 0;
        while (j < d->n_fields && strcmp(d->field_names[j], f->name) != 0) j++;
        specs[i] = (brisk_field_spec){.name = f->name, .dtype = f->dtype};
        if (j < d->n_fields) {
            if (!(cols[i] = malloc((size_t)d->field_n_sources[j] * sizeof *cols[i] + 1))) {
                st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
                break;
            }
            brisk_data_field_sources(d, j, cols[i]);
            specs[i].member = cols[i][0];
            specs[i].columns = cols[i];
            specs[i].ncolumns = d->field_n_sources[j];
        } else {
            own[i] = f->name;
            specs[i].columns = &own[i];
            specs[i].ncolumns = 1;
        }
        if (!csv && j < d->n_fields && d->field_n_sources[j] > 1)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.fields.%s: a list of columns needs a .csv file, %s is not one",
                              t->cfg.path, f->name, d->train);
    }
    int64_t bytes = 0;
    int W = d->shard_files && d->shard_world > 1 ? d->shard_world : 1;
    if (!st && !(st = brisk_dataset_estimate(d->train, specs, t->io.n_fields, csv, &bytes, err)))
        st = brisk_memory_check_data(&t->cfg, d->train, (bytes + W - 1) / W, err);
    if (!st && W > 1) {
        st = load_shard(t, &t->data, d->train, specs, csv, &t->shard_lo, &t->shard_file_rows, err);
        t->data_sharded = !st;
        for (int i = 0; i < t->data.nfields && !st; i++) t->shard_bytes += (int64_t)brisk_tensor_bytes(&t->data.fields[i].tensor);
    } else if (!st)
        st = csv ? brisk_dataset_load_csv(&t->data, d->train, specs, t->io.n_fields, err)
                 : brisk_dataset_load_npz(&t->data, d->train, specs, t->io.n_fields, err);
    /* data.validation: the same fields (members or columns) from another file */
    int64_t vlo = 0, vrows = 0;
    if (!st && d->validation[0])
        st = ends_with(d->validation, ".csv") != csv
                 ? brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.validation %s must be a %s file like data.train %s",
                                t->cfg.path, d->validation, csv ? ".csv" : ".npz", d->train)
             : W > 1 ? load_shard(t, &t->val_data, d->validation, specs, csv, &vlo, &vrows, err)
             : csv   ? brisk_dataset_load_csv(&t->val_data, d->validation, specs, t->io.n_fields, err)
                     : brisk_dataset_load_npz(&t->val_data, d->validation, specs, t->io.n_fields, err);
    for (int i = 0; i < t->io.n_fields; i++) free(cols[i]);
    return st ? st : bind_data(t, err);
}

/* The split of the bound data into train and validation, and the batches it gives. The
 * run's length (for the learning-rate schedule) is fixed by the first data a trainer gets. */
/* data.episodes: categories of the training split, each with support + query samples. */
static brisk_status make_episodes(brisk_trainer *t, brisk_error *err) {
    const brisk_data_spec *d = &t->cfg.data;
    brisk_episodes_free(&t->episodes);
    if (d->episode_support < 1) return BRISK_OK;
    int64_t want = (int64_t)d->episode_support + d->episode_query;
    if (t->cfg.train.batch_size != want)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: train.batch_size is %lld, but an episode (data.episodes) is %d "
                            "support + %d query = %lld samples; make them equal", t->cfg.path,
                            (long long)t->cfg.train.batch_size, d->episode_support, d->episode_query, (long long)want);
    const brisk_tensor *cat = brisk_dataset_get(&t->data, "category");
    if (!cat)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.episodes draws categories, and %s has none (a labels CSV "
                            "needs a category column; an .npz a \"category\" member)", t->cfg.path, t->data.source);
    brisk_status st = brisk_episodes_init(&t->episodes, cat->data, t->split.train, t->split.ntrain, d->episode_support,
                                          d->episode_query, err);
    if (st) return brisk_error_prefix(err, "%s: data.episodes over the training split of %s", t->cfg.path, t->data.source);
    brisk_log(&t->log, BRISK_LOG_INFO, "episodes  each batch %d support + %d query samples of one of %d categories",
              d->episode_support, d->episode_query, t->episodes.ncat);
    return BRISK_OK;
}

static brisk_status split_data(brisk_trainer *t, brisk_error *err) {
    const brisk_train_spec *tr = &t->cfg.train;
    if (!t->cfg.data.windows.enabled && !t->cfg.data.netcdf.enabled) { /* both come with a chronological split */
        brisk_split_free(&t->split);
        brisk_status st = brisk_split_make(t->data.count, t->cfg.data.validation_fraction, tr->seed, &t->split, err);
        if (st) return st;
    }
    brisk_status st = BRISK_OK;
    /* several ranks sharing one data set: their global batch must fit in the split */
    const int ranks = t->cfg.data.shard_world > 1 && !t->cfg.data.shard_files ? t->cfg.data.shard_world : 1;
    if (tr->batch_auto && !t->length_set && (st = brisk_memory_auto_batch(t, t->split.ntrain / ranks, err))) return st;
    if ((st = make_episodes(t, err))) return st;
    t->batches_per_epoch = t->split.ntrain / brisk_trainer_global_batch(t);
    if (t->batches_per_epoch == 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: train.batch_size is %lld, but the training split of %s has only %lld samples",
                            t->cfg.path, (long long)tr->batch_size, t->data.source, (long long)t->split.ntrain);
    if (!t->length_set) brisk_trainer_plan_length(t);
    t->length_set = 1;
    return BRISK_OK;
}

void brisk_trainer_plan_length(brisk_trainer *t) {
    const brisk_train_spec *tr = &t->cfg.train;
    const int64_t B = brisk_trainer_global_batch(t), K = tr->accumulate, n = t->split.ntrain;
    t->sched_shift = 0;
    if (tr->max_steps >= 0) { /* steps, whatever their size */
        t->total_steps = tr->max_steps > t->step ? tr->max_steps : t->step;
        return;
    }
    if (t->batches_per_epoch < 1) return;
    /* the micro-batches left: the rest of this epoch (the loader starts the next one when
     * less than a batch is left), then whole epochs up to train.epochs */
    int64_t epoch = t->epoch, pos = t->position;
    if (pos > 0 && pos + B > n) epoch++, pos = 0;
    int64_t micro = epoch < tr->epochs ? (n - pos) / B + (tr->epochs - 1 - epoch) * t->batches_per_epoch : 0;
    t->total_steps = t->step + micro / K;
    if (t->step == 0 && t->total_steps < 1) t->total_steps = 1;
    /* the schedule at this batch size: where the samples seen so far put it */
    if (t->samples > 0) t->sched_shift = t->samples / (B * K) - t->step;
}

brisk_status brisk_trainer_set_dataset(brisk_trainer *t, brisk_dataset *data, brisk_error *err) {
    brisk_dataset_free(&t->data);
    t->data = *data;
    memset(data, 0, sizeof *data);
    brisk_status st = bind_data(t, err);
    if (!st) brisk_normalization_apply(t); /* a loaded checkpoint's data.normalize */
    if (!st) st = split_data(t, err);
    if (!st) st = brisk_eval_prepare(t, err);
    if (st) t->batches_per_epoch = 0; /* nothing to train on until good data comes */
    return st;
}

/* data: the dataset to adopt; NULL with from_file 0: none yet (brisk_trainer_set_dataset later). */
static brisk_status create(const brisk_config *cfg, const brisk_logger *log, brisk_dataset *data, int from_file,
                           brisk_trainer **out, brisk_error *err) {
    *out = NULL;
    brisk_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        brisk_dataset_free(data);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    }
    t->cfg = *cfg;
    t->cfg.json = strdup(cfg->json ? cfg->json : "{}");
    t->cfg.n_models = 0; /* one model: its own reference to a graph model's layers */
    brisk_layer_graph_ref(t->cfg.model.graph);
    if (log) t->log = *log;
    t->best_val = NAN;
    t->best_at = (brisk_best_at){-1, -1, 0, NAN, NAN, NAN, NAN, NAN, NAN};
    t->lock_fd = -1;
    t->world = 1;
    t->data_shards = 1;
    t->last_saved_step = -1;
    t->from_files = from_file;
    brisk_run_id_draw(t->run_id);
    brisk_status st;
    const brisk_train_spec *tr = &t->cfg.train;
    if (from_file && !cfg->data.train[0] && !cfg->data.images.enabled && !cfg->data.netcdf.nfiles) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.train is missing: the .npz or .csv file to train on", cfg->path);
        goto fail;
    }
    if (!from_file && cfg->data.normalize_given &&
        (cfg->data.normalize_inputs != BRISK_NORM_OFF || cfg->data.normalize_targets != BRISK_NORM_OFF)) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.normalize fits a data.train file's training split; data "
                          "given in memory arrive a batch at a time: standardise them beforehand, or load a checkpoint "
                          "that carries the statistics (one trained from the file with data.normalize)", cfg->path);
        goto fail;
    }
    if (!from_file && cfg->data.validation[0]) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.validation is a file to validate a data.train file on; data "
                          "given in memory validates on its data.validation_fraction", cfg->path);
        goto fail;
    }
    if ((st = brisk_device_pick(t, err)) || (st = brisk_model_fields(&cfg->model, BRISK_BUILD_TRAIN, &t->io, err)))
        goto fail;
    if (from_file) st = load_data(t, err);
    else if (data) {
        t->data = *data;
        memset(data, 0, sizeof *data);
        st = bind_data(t, err);
    }
    if (st || ((from_file || t->data.count) && (st = split_data(t, err)))) goto fail;
    if (from_file && (st = brisk_table_normalize(t, err))) goto fail;
    t->g = brisk_graph_new();
    if (!t->g) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto fail; }
    /* t's model: data.netcdf sets its grid from the file */
    if ((st = brisk_model_build(&t->cfg.model, tr->batch_size, BRISK_BUILD_TRAIN, t->g, &t->io, err)) ||
        (st = brisk_backward(t->g, t->io.loss, err)) || (st = brisk_train_plan(&t->cfg, t->g, &t->plan, err)) ||
        (st = brisk_device_check_graph(&t->cfg, &t->log, &t->be, t->g, &t->plan, t->device_note,
                                       sizeof t->device_note, err)) ||
        (st = brisk_memory_fit(t, err)))
        goto fail;
    if ((st = brisk_exec_create(t->g, &t->plan, t->be, &t->ex, err)) ||
        (st = brisk_exec_init_params(t->ex, tr->seed, err)) ||
        (st = brisk_optimizer_create(&t->opt, &cfg->optim, t->ex, err)) || (st = brisk_eval_prepare(t, err)))
        goto fail;
    t->opt.skip_nonfinite = tr->skip_nan_steps > 0; /* a device step skips on the device, unseen by the host */
    brisk_log(&t->log, BRISK_LOG_INFO,
              "model     %s, %lld parameters; data %s: %lld train / %lld validation samples",
              brisk_model_type_name(cfg->model.type), (long long)brisk_model_param_count(&cfg->model),
              t->data.count ? t->data.source : "(none yet)", (long long)t->split.ntrain,
              (long long)brisk_trainer_val_count(t));
    const char *note = brisk_model_note(&cfg->model);
    if (note) brisk_log(&t->log, BRISK_LOG_WARN, "%s", note);
    brisk_log(&t->log, BRISK_LOG_INFO,
              "memory    planned before running: activations %.2f MiB (peak live %.2f MiB), "
              "parameters+gradients+moments %.2f MiB, total %.2f MiB",
              t->plan.arena_bytes / 1048576.0, t->plan.peak_live_bytes / 1048576.0,
              4.0 * t->plan.param_bytes / 1048576.0, brisk_plan_total_bytes(&t->plan) / 1048576.0);
    report_active(t);
    *out = t;
    return BRISK_OK;
fail:
    brisk_dataset_free(data);
    brisk_trainer_free(t);
    return st;
}

brisk_status brisk_trainer_create(const brisk_config *cfg, const brisk_logger *log, brisk_trainer **out,
                                  brisk_error *err) {
    *out = NULL;
    /* its keys (signal handlers, the host's communicator) mean nothing to a run from files */
    if (cfg->session.present)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: \"session\" configures a library session "
                            "(brisk_session_create); a run from files does not read it: remove the section",
                            cfg->path);
    return create(cfg, log, NULL, 1, out, err);
}

brisk_status brisk_trainer_create_with_dataset(const brisk_config *cfg, const brisk_logger *log, brisk_dataset *data,
                                               brisk_trainer **out, brisk_error *err) {
    return create(cfg, log, data, 0, out, err);
}

void brisk_trainer_free(brisk_trainer *t) {
    if (!t) return;
    if (t->opt.ex) brisk_optimizer_free(&t->opt);
    brisk_eval_free(t); /* a view of ex: first */
    brisk_dist_overlap_free(t->overlap); /* its thread reduces ex's gradients */
    if (t->ex) brisk_exec_free(t->ex);
    brisk_plan_free(&t->plan);
    if (t->g) brisk_graph_free(t->g);
    if (t->be) t->be->destroy(t->be);
    brisk_split_free(&t->split);
    brisk_episodes_free(&t->episodes);
    brisk_dataset_free(&t->data);
    brisk_dataset_free(&t->val_data);
    brisk_weather_free(t->weather);
    free(t->weather);
    brisk_metrics_file_close(t->metrics);
    brisk_tboard_close(t->tboard);
    brisk_run_dir_unlock(t->lock_fd);
    free(t->losses);
    free(t->terms);
    free(t->dev_ms);
    brisk_sample_dump_close(t);
    free(t->buckets);
    free(t->shard_bounds);
    free(t->overlap_buckets);
    free(t->moments_host);
    free(t->norm_mean);
    free(t->norm_std);
    free(t->tnorm_mean);
    free(t->tnorm_std);
    free(t->ckpt_stage);
    brisk_layer_graph_unref(t->cfg.model.graph);
    free(t->cfg.json);
    free(t);
}

/* data.shard_files: a checkpoint's place in the epoch counts in each rank's own rows, which
 * depend on the world size; without it, in one order over all rows. Read the other way, the
 * same number names other samples: some rows trained twice in the epoch, others never. */
static brisk_status check_sharded_resume(const brisk_trainer *t, const char *checkpoint, brisk_error *err) {
    int was = t->resumed_sharded, is = t->data_sharded, W = t->resumed_world;
    if (was && is && W != t->world)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: written by %d ranks, continued by %d with data.shard_files: each "
                            "rank's rows and its place in them depend on the world size; resume with %d ranks",
                            checkpoint, W, t->world, W);
    if (was && !is)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: written by %d ranks with data.shard_files (each rank's place "
                            "in the epoch counts in its own rows), continued by %d rank%s %s: it would continue at "
                            "another place in another order, training some rows twice and others never; resume with "
                            "data.shard_files true on %d ranks", checkpoint, W, t->world, t->world == 1 ? "" : "s",
                            t->cfg.data.shard_files ? "(where data.shard_files shards nothing)" : "without data.shard_files", W);
    if (!was && is)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: written by %d rank%s without data.shard_files (its place in the "
                            "epoch counts in one order over all rows), continued by %d with data.shard_files: it would "
                            "continue at another place in another order, training some rows twice and others never; "
                            "resume without data.shard_files", checkpoint, W > 1 ? W : 1, W > 1 ? "s" : "", t->world);
    return BRISK_OK;
}

brisk_status brisk_trainer_resume(brisk_trainer *t, const char *checkpoint, brisk_error *err) {
    t->run_claimed = 1; /* a previous run in train.out_dir is continued, not refused */
    brisk_status st = brisk_checkpoint_load(t, checkpoint, err);
    if (!st && (st = check_sharded_resume(t, checkpoint, err))) return st;
    if (!st && !t->from_files && (st = brisk_normalization_adopt(t, checkpoint, err))) return st;
    if (!st)
        brisk_log(&t->log, BRISK_LOG_INFO, "resume    %s: step %lld, epoch %lld, batch %lld of the epoch", checkpoint,
                  (long long)t->step, (long long)t->epoch + 1, (long long)(t->position / brisk_trainer_global_batch(t)));
    if (!st && t->resumed_world > 0 && t->resumed_world != t->world)
        brisk_log(&t->log, BRISK_LOG_INFO, "resume    written by %d rank%s, continued by %d: the sampler continues at "
                  "sample %lld of epoch %lld's order, in global batches of %lld", t->resumed_world,
                  t->resumed_world == 1 ? "" : "s", t->world, (long long)t->position, (long long)t->epoch + 1,
                  (long long)brisk_trainer_global_batch(t));
    return st;
}

brisk_status brisk_trainer_save(brisk_trainer *t, const char *path, brisk_error *err) {
    return brisk_checkpoint_save(t, path, err);
}

int64_t brisk_trainer_batches_per_epoch(const brisk_trainer *t) { return t->batches_per_epoch; }
int64_t brisk_trainer_steps_done(const brisk_trainer *t) { return t->step; }

int brisk_trainer_run_began(const brisk_trainer *t) { return t && t->metrics != NULL; }

const float *brisk_trainer_losses(const brisk_trainer *t, int64_t *n) {
    *n = t->n_losses;
    return t->losses;
}
