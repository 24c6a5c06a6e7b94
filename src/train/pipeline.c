/* Pipelines: a config whose "models" lists several models trains each in turn on the
 * same data and compares them. Each run is an ordinary single-model run (its own
 * config, out_dir <out_dir>/<name>, checkpoints that `brisk predict` and `--resume`
 * take), and its trainer — graph, arenas, dataset — is freed before the next is built,
 * so the peak is the largest model's, not the sum. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/train.h"

brisk_status brisk_pipeline_config(const brisk_config *cfg, int i, brisk_config *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (i < 0 || i >= cfg->n_models)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: pipeline model %d of %d", cfg->path, i, cfg->n_models);
    const char *name = cfg->model_names[i];
    cJSON *root = cJSON_Parse(cfg->json ? cfg->json : "");
    cJSON *models = root ? cJSON_DetachItemFromObject(root, "models") : NULL;
    cJSON *m = cJSON_IsArray(models) ? cJSON_DetachItemFromArray(models, i) : NULL;
    cJSON_Delete(models);
    if (!m) {
        cJSON_Delete(root);
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: the effective config has no models[%d]", cfg->path, i);
    }
    cJSON_DeleteItemFromObject(m, "name");
    cJSON_AddItemToObject(root, "model", m);
    cJSON *train = cJSON_GetObjectItem(root, "train");
    if (!train) train = cJSON_AddObjectToObject(root, "train");
    char dir[BRISK_PATH_MAX + 40];
    snprintf(dir, sizeof dir, "%s/%s", cfg->train.out_dir, name);
    cJSON_DeleteItemFromObject(train, "out_dir");
    cJSON_AddStringToObject(train, "out_dir", dir);
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", cfg->path);
    char label[BRISK_PATH_MAX + 48];
    snprintf(label, sizeof label, "%s: models[%d] (%s)", cfg->path, i, name);
    brisk_status st = brisk_config_parse(json, label, NULL, 0, out, err);
    free(json);
    if (st) return st;
    /* the data path as the pipeline resolved it (relative to its config) */
    snprintf(out->data.train, sizeof out->data.train, "%s", cfg->data.train);
    snprintf(out->data.validation, sizeof out->data.validation, "%s", cfg->data.validation);
    out->train.overwrite = cfg->train.overwrite;
    snprintf(out->name, sizeof out->name, "%s-%s", cfg->name, name);
    return BRISK_OK;
}

brisk_status brisk_pipeline_run(const brisk_config *cfg, const brisk_logger *log, brisk_pipeline_result *results,
                                brisk_error *err) {
    return brisk_pipeline_run_control(cfg, log, NULL, results, err);
}

brisk_status brisk_pipeline_run_control(const brisk_config *cfg, const brisk_logger *log,
                                        const brisk_trainer_control *control, brisk_pipeline_result *results,
                                        brisk_error *err) {
    for (int i = 0; i < cfg->n_models; i++) {
        brisk_pipeline_result *r = &results[i];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", cfg->model_names[i]);
        r->type = cfg->models[i].type;
        brisk_config sub;
        brisk_status st = brisk_pipeline_config(cfg, i, &sub, err);
        if (st) return st;
        brisk_log(log, BRISK_LOG_INFO, "\npipeline  model %d of %d: %s (%s), out_dir %s", i + 1, cfg->n_models, r->name,
                  brisk_model_type_name(r->type), sub.train.out_dir);
        brisk_trainer *t = NULL;
        st = brisk_trainer_create(&sub, log, &t, err);
        if (!st && control) brisk_trainer_set_control(t, control);
        if (!st) st = brisk_trainer_run(t, &r->summary, err);
        brisk_trainer_free(t); /* every buffer of this model, before the next is built */
        brisk_config_free(&sub);
        if (st) return brisk_error_prefix(err, "pipeline model '%s'", r->name);
    }
    brisk_pipeline_report(results, cfg->n_models, log);
    return BRISK_OK;
}

/* "%.4f" or "-" for NaN, into buf. */
static const char *num(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, fmt, v);
    return buf;
}

void brisk_pipeline_report(const brisk_pipeline_result *res, int n, const brisk_logger *log) {
    brisk_log(log, BRISK_LOG_INFO, "\ncomparison (best validation epoch; memory as planned before running)");
    brisk_log(log, BRISK_LOG_INFO, "  %-14s %-11s %10s %9s %9s %9s %9s %6s %8s %10s %9s", "model", "type", "params",
              "val loss", "accuracy", "MAE", "RMSE", "epochs", "wall s", "samples/s", "mem MiB");
    for (int i = 0; i < n; i++) {
        const brisk_run_summary *s = &res[i].summary;
        char a[5][24];
        brisk_log(log, BRISK_LOG_INFO, "  %-14s %-11s %10lld %9s %9s %9s %9s %6d %8.1f %10.0f %9.1f", res[i].name,
                  brisk_model_type_name(res[i].type), (long long)s->params, num(a[0], 24, "%.5f", s->best_val_loss),
                  num(a[1], 24, "%.4f", s->best.accuracy), num(a[2], 24, "%.4g", s->best.mae),
                  num(a[3], 24, "%.4g", s->best.rmse), s->epochs_done, s->wall_s, s->samples_per_s,
                  s->total_bytes / 1048576.0);
    }
}
