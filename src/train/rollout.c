/* `brisk rollout`: a meshgnn forecast fed back autoregressively from a checkpoint over a
 * NetCDF file (brisk_rollout). Each step predicts the normalised change over `lead`, maps
 * it back with the checkpoint's normalisation and adds it to the state; RMSE per channel
 * and lead time against the file's own fields, beside persistence (the initial state kept). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

/* The checkpoint's meshgnn and data.netcdf, over `data` (NULL: the files it trained on). */
static brisk_status open_data(const char *ckpt, const char *data, brisk_config *cfg, brisk_weather *w, brisk_error *err) {
    if (cfg->model.type != BRISK_MODEL_MESHGNN || !cfg->data.netcdf.enabled)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: rollout needs a meshgnn trained on data.netcdf; this "
                            "checkpoint holds a %s%s", ckpt, brisk_model_type_name(cfg->model.type),
                            cfg->data.netcdf.enabled ? "" : " trained on other data");
    float *mean = NULL, *std = NULL;
    int n = 0;
    brisk_status st = brisk_checkpoint_normalization(ckpt, &mean, &std, &n, err);
    if (!st && n == 0)
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no 'normalization' metadata; damaged or not written by brisk", ckpt);
    const char *paths[BRISK_NETCDF_MAX_FILES], *names[BRISK_WEATHER_MAX_VARS + BRISK_NETCDF_MAX_STATICS];
    brisk_weather_spec spec;
    brisk_weather_spec_of(&cfg->data, paths, names, &spec);
    if (data) paths[0] = data, spec.npaths = 1;
    spec.mean = mean, spec.std = std, spec.nnorm = n;
    if (!st) st = brisk_weather_open(&spec, w, err);
    free(mean);
    free(std);
    if (!st) st = brisk_weather_fit_model(&cfg->model, w, ckpt, err);
    return st;
}

brisk_status brisk_meshgnn_fit_checkpoint(const char *ckpt, brisk_config *cfg, brisk_error *err) {
    if (cfg->model.type != BRISK_MODEL_MESHGNN || !cfg->data.netcdf.enabled) return BRISK_OK;
    brisk_weather w = {0};
    brisk_status st = open_data(ckpt, NULL, cfg, &w, err);
    brisk_weather_free(&w);
    if (st) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        brisk_errorf(err, st, "%s: a meshgnn's graph is built from the grid of the data it trained on (data.netcdf, "
                     "paths as in its config): run where training ran, with those files in place; %s", ckpt, why);
    }
    return st;
}

brisk_status brisk_meshgnn_change_units(const char *ckpt, int64_t channels, float *mean, float *std, brisk_error *err) {
    float *m = NULL, *s = NULL;
    int n = 0;
    brisk_status st = brisk_checkpoint_normalization(ckpt, &m, &s, &n, err);
    if (!st && (n < 2 * channels))
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: 'normalization' metadata of %d values; a meshgnn of %lld channels "
                          "needs its channels', statics' and changes' (at least %lld); damaged or not written by brisk",
                          ckpt, n, (long long)channels, (long long)(2 * channels));
    if (!st) { /* the changes' come last */
        memcpy(mean, m + n - channels, sizeof(float) * (size_t)channels);
        memcpy(std, s + n - channels, sizeof(float) * (size_t)channels);
    }
    free(m);
    free(s);
    return st;
}

static void write_jsonl(FILE *f, const brisk_weather *w, int64_t k, double hours, double valid, const double *rmse,
                        const double *pers) {
    for (int c = 0; c < w->channels; c++)
        fprintf(f, "{\"lead\": %lld, \"hours\": %.6g, \"valid_time\": %.9g, \"variable\": \"%s\", \"rmse\": %.9g, "
                "\"persistence_rmse\": %.9g}\n", (long long)k, hours, valid, w->channel[c], rmse[c], pers[c]);
}

static void print_table(const brisk_weather *w, const char *title, int64_t steps, const double *rmse, double step_h) {
    printf("%s\n%8s", title, "lead_h");
    for (int c = 0; c < w->channels; c++) printf(" %11s", w->channel[c]);
    printf("\n");
    for (int64_t k = 0; k < steps; k++) {
        printf("%8.4g", (double)(k + 1) * step_h);
        for (int c = 0; c < w->channels; c++) printf(" %11.5g", rmse[k * w->channels + c]);
        printf("\n");
    }
}

brisk_status brisk_rollout(const brisk_rollout_spec *r, const brisk_logger *log, brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_checkpoint_config(r->checkpoint, &cfg, err);
    if (st) return st;
    brisk_weather w = {0};
    brisk_graph *g = NULL;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_backend *be = NULL;
    float *buf = NULL, *fc = NULL;
    double *rmse = NULL, *times = NULL;
    FILE *jf = NULL;
    brisk_model_io io;
    if ((st = open_data(r->checkpoint, r->data, &cfg, &w, err))) goto out;
    int64_t G = w.grid, C = w.channels, H = w.history, L = w.lead, S = w.nstatics;
    if (L > 1 && H > 1) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: trained with history %lld and lead %lld: a rollout feeds each "
                          "prediction back as the next input, which needs lead 1 or history 1", r->checkpoint,
                          (long long)H, (long long)L);
        goto out;
    }
    /* by default from the first time the checkpoint's split held out, else the first possible */
    int64_t t0 = r->start >= 0 ? r->start : (w.split_time + H - 1 < w.ntimes ? w.split_time + H - 1 : H - 1);
    if (t0 < H - 1 || t0 + r->steps * L >= w.ntimes) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: a rollout of %lld steps of %lld from time index %lld needs times "
                          "%lld to %lld; the file has 0 to %lld", r->data, (long long)r->steps, (long long)L, (long long)t0,
                          (long long)(t0 - H + 1), (long long)(t0 + r->steps * L), (long long)(w.ntimes - 1));
        goto out;
    }
    g = brisk_graph_new();
    be = brisk_backend_cpu_new(cfg.speed.threads);
    size_t per = (size_t)(G * (w.inputs > C ? w.inputs : C));
    buf = malloc((size_t)((H + 3) * G * C) * sizeof(float) + per * sizeof(float));
    fc = malloc((size_t)(r->steps * G * C) * sizeof(float));
    rmse = calloc((size_t)(2 * r->steps * C), sizeof(double));
    times = malloc((size_t)r->steps * sizeof(double));
    if (!g || !be || !buf || !fc || !rmse || !times) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = brisk_model_build(&cfg.model, 1, BRISK_BUILD_PREDICT, g, &io, err)) || (st = brisk_plan_build(g, &plan, err)) ||
        (st = brisk_exec_create(g, &plan, be, &ex, err)) || (st = brisk_checkpoint_load_params(r->checkpoint, ex, err)))
        goto out;
    ex->step.training = 0;
    float *states = buf, *truth = buf + H * G * C, *init = truth + G * C, *x = init + G * C, *y = x;
    for (int64_t h = 0; h < H && !st; h++) st = brisk_weather_state(&w, t0 - H + 1 + h, states + h * G * C, err);
    if (st) goto out;
    memcpy(init, states + (H - 1) * G * C, (size_t)(G * C) * sizeof(float));
    const float *dm = w.mean + C + S, *ds = w.std + C + S;
    double *pers = rmse + r->steps * C;
    int64_t t = t0;
    for (int64_t k = 0; k < r->steps; k++) {
        const float *hist[64];
        for (int64_t h = 0; h < H; h++) hist[h] = states + h * G * C;
        brisk_weather_input(&w, hist, t, x);
        if ((st = brisk_exec_set_input(ex, io.input_node[0], x, err)) || (st = brisk_exec_run(ex, BRISK_RUN_PREDICT, err)) ||
            (st = brisk_exec_read(ex, io.output, y, err)))
            goto out;
        /* the new state; the history shifts by one */
        float *now = states + (H - 1) * G * C, *next = fc + k * G * C;
        for (int64_t i = 0; i < G * C; i++) next[i] = now[i] + y[i] * ds[i % C] + dm[i % C];
        memmove(states, states + G * C, (size_t)((H - 1) * G * C) * sizeof(float));
        memcpy(states + (H - 1) * G * C, next, (size_t)(G * C) * sizeof(float));
        t += L;
        times[k] = w.time[t];
        if ((st = brisk_weather_state(&w, t, truth, err))) goto out;
        int64_t bad = 0;
        for (int64_t i = 0; i < G * C; i++) {
            double e = (double)next[i] - truth[i], p = (double)init[i] - truth[i];
            bad += !isfinite(next[i]);
            rmse[k * C + i % C] += e * e, pers[k * C + i % C] += p * p;
        }
        if (bad) {
            st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: %lld values of the forecast at step %lld are NaN or inf: the "
                              "checkpoint's weights are not usable", r->checkpoint, (long long)bad, (long long)(k + 1));
            goto out;
        }
        for (int64_t c = 0; c < C; c++)
            rmse[k * C + c] = sqrt(rmse[k * C + c] / (double)G), pers[k * C + c] = sqrt(pers[k * C + c] / (double)G);
    }
    if (r->output && (st = brisk_weather_write(&w, r->output, r->steps, times, fc, err))) goto out;
    if (r->jsonl) {
        int to_stdout = strcmp(r->jsonl, "-") == 0;
        if (!(jf = to_stdout ? stdout : fopen(r->jsonl, "w"))) {
            st = brisk_errorf(err, BRISK_ERR_IO, "%s: cannot write", r->jsonl);
            goto out;
        }
        double step_h = (double)L * (w.ntimes > 1 ? (w.time[1] - w.time[0]) * w.hours_per_unit : 0);
        for (int64_t k = 0; k < r->steps; k++)
            write_jsonl(jf, &w, k + 1, (double)(k + 1) * step_h, times[k], rmse + k * C, pers + k * C);
        if (to_stdout) jf = NULL;
        else if (fclose(jf)) {
            jf = NULL;
            st = brisk_errorf(err, BRISK_ERR_IO, "%s: cannot write", r->jsonl);
            goto out;
        } else jf = NULL;
    }
    if (!r->quiet) {
        double step_h = (double)L * (w.ntimes > 1 ? (w.time[1] - w.time[0]) * w.hours_per_unit : 0);
        print_table(&w, "RMSE of the forecast (the fields' units)", r->steps, rmse, step_h);
        print_table(&w, "RMSE of persistence (the initial state kept)", r->steps, pers, step_h);
    }
    brisk_log(log, BRISK_LOG_INFO, "rollout   %lld steps from time index %lld (time %g) of %s%s%s", (long long)r->steps,
              (long long)t0, w.time[t0], r->data, r->output ? " -> " : "", r->output ? r->output : "");
out:
    if (jf) fclose(jf);
    free(buf);
    free(fc);
    free(rmse);
    free(times);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    if (be) be->destroy(be);
    brisk_weather_free(&w);
    brisk_config_free(&cfg);
    return st;
}
