/* Reading a checkpoint file without a trainer: its parameters into a graph's arenas, the
 * normalisation and the config it carries (prediction, export and sessions use these; the
 * trainer's own save and resume are train/checkpoint.c). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/json.h"
#include "run/checkpoint_file.h"

/* Reads every parameter (and, when m/v are given, the moments) into host arenas. */
brisk_status brisk_checkpoint_read_tensors(const brisk_safetensors *st, const brisk_graph *g, float *p, float *m,
                                 float *v, int sgd, brisk_error *err) {
    char name[BRISK_NAME_MAX + 32];
    for (int i = 0; i < g->n_params; i++) {
        const brisk_param_info *pi = &g->params[i];
        brisk_status s = brisk_safetensors_read(st, pi->name, BRISK_F32, pi->shape, p + pi->offset, err);
        if (s) return brisk_error_prefix(err, "checkpoint from another model?");
        if (!m || pi->buffer) continue;
        snprintf(name, sizeof name, sgd ? "optim.momentum_buffer.%s" : "optim.exp_avg.%s", pi->name);
        if ((s = brisk_safetensors_read(st, name, BRISK_F32, pi->shape, m + pi->offset, err))) return s;
        if (sgd) continue;
        snprintf(name, sizeof name, "optim.exp_avg_sq.%s", pi->name);
        if ((s = brisk_safetensors_read(st, name, BRISK_F32, pi->shape, v + pi->offset, err))) return s;
    }
    /* A checkpoint with parameters this model lacks is another model, too. */
    for (size_t i = 0; i < brisk_safetensors_count(st); i++) {
        const char *nm = brisk_safetensors_at(st, i)->name;
        if (strncmp(nm, "optim.", 6) == 0) continue;
        int found = 0;
        for (int j = 0; j < g->n_params && !found; j++) found = strcmp(g->params[j].name, nm) == 0;
        if (!found)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: checkpoint from another model? it has tensor '%s', which this "
                                "model lacks; use the config it was trained with (brisk info shows it)",
                                brisk_safetensors_name(st), nm);
    }
    return BRISK_OK;
}

brisk_status brisk_checkpoint_load_params(const char *path, brisk_exec *ex, brisk_error *err) {
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_checkpoint_open(path, &st, err);
    if (s) return s;
    size_t n = (size_t)ex->g->n_param_floats;
    float *host = calloc(n + 1, sizeof(float));
    if (!host) s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    else if (!(s = brisk_checkpoint_read_tensors(st, ex->g, host, NULL, NULL, 0, err)))
        s = ex->be->upload(ex->be, ex->params, host, n * sizeof(float), err);
    free(host);
    brisk_safetensors_free(st);
    return s;
}

char *brisk_normalization_json(const float *mean, const float *std, int n) {
    size_t cap = (size_t)n * 36 + 64, k = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    for (int part = 0; part < 2; part++) {
        const float *v = part ? std : mean;
        k += (size_t)snprintf(s + k, cap - k, part ? "], \"std\": [" : "{\"mean\": [");
        for (int i = 0; i < n; i++) k += (size_t)snprintf(s + k, cap - k, i ? ", %.9g" : "%.9g", (double)v[i]);
    }
    snprintf(s + k, cap - k, "]}");
    return s;
}

/* The {"mean": [...], "std": [...]} under metadata `key` (also {"mean": m, "std": s}, the
 * scalar form of a window's target) into malloc'd arrays of *n values; *n = 0 and NULL
 * arrays when the checkpoint has none. */
static brisk_status read_normalization(const char *path, const char *key, float **mean, float **std, int *n,
                                       brisk_error *err) {
    *mean = *std = NULL;
    *n = 0;
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_checkpoint_open(path, &st, err);
    if (s) return s;
    const char *text = brisk_safetensors_meta(st, key);
    if (text) {
        char label[BRISK_PATH_MAX + 32];
        snprintf(label, sizeof label, "%s:%s", path, key);
        brisk_json *doc = NULL;
        double *m = NULL, *d = NULL;
        size_t nm = 0, nd = 0;
        if (!(s = brisk_json_parse(text, strlen(text), label, &doc, err))) {
            brisk_json_reader r = brisk_json_root(doc);
            if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r.obj, "mean"))) {
                if (!(m = malloc(sizeof(double))) || !(d = malloc(sizeof(double)))) {
                    s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", label);
                } else {
                    brisk_json_number(&r, "mean", BRISK_ANY, m);
                    brisk_json_number(&r, "std", BRISK_GT(0), d);
                    nm = nd = 1;
                }
            } else {
                brisk_json_numbers(&r, "mean", true, BRISK_ANY, &m, &nm);
                brisk_json_numbers(&r, "std", true, BRISK_GT(0), &d, &nd);
            }
            brisk_status f = brisk_json_finish(doc, err);
            if (!s) s = f;
        }
        if (!s && (nm != nd || nm == 0))
            s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %zu means and %zu standard deviations", label, nm, nd);
        for (size_t i = 0; !s && i < nm; i++)
            if (!isfinite(m[i]) || !isfinite(d[i]))
                s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: value %zu is not finite", label, i);
        if (!s && (!(*mean = malloc(sizeof(float) * nm)) || !(*std = malloc(sizeof(float) * nm))))
            s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", label);
        for (size_t i = 0; !s && i < nm; i++) (*mean)[i] = (float)m[i], (*std)[i] = (float)d[i];
        if (!s) *n = (int)nm;
        else free(*mean), free(*std), *mean = *std = NULL;
        free(m);
        free(d);
        brisk_json_free(doc);
    }
    brisk_safetensors_free(st);
    return s;
}

brisk_status brisk_checkpoint_normalization(const char *path, float **mean, float **std, int *n, brisk_error *err) {
    return read_normalization(path, "normalization", mean, std, n, err);
}

brisk_status brisk_checkpoint_target_normalization(const char *path, float **mean, float **std, int *n,
                                                   brisk_error *err) {
    return read_normalization(path, "target_normalization", mean, std, n, err);
}

brisk_status brisk_checkpoint_config(const char *path, brisk_config *cfg, brisk_error *err) {
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_checkpoint_open(path, &st, err);
    if (s) return s;
    const char *json = brisk_safetensors_meta(st, "config");
    char label[BRISK_PATH_MAX + 16];
    snprintf(label, sizeof label, "%s:config", path);
    if (!json) s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata 'config' is missing", path);
    else s = brisk_config_parse(json, label, NULL, 0, cfg, err);
    brisk_safetensors_free(st);
    return s;
}
