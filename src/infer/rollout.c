/* `brisk rollout`: a meshgnn forecast fed back autoregressively from a checkpoint over a
 * NetCDF file (brisk_rollout), from one start time or many. Each step predicts the
 * normalised change over `lead`, maps it back with the checkpoint's normalisation and adds
 * it to the state; the scores against the file's own fields are rollout_score.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bytes.h"
#include "infer/rollout_internal.h"

/* The checkpoint's data.netcdf over `data` (NULL: the files it trained on), with the
 * checkpoint's normalisation. */
static brisk_status open_weather(const char *ckpt, const char *data, const brisk_config *cfg, brisk_weather *w,
                                 brisk_error *err) {
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
    return st;
}

/* The checkpoint's meshgnn and data.netcdf, over `data` (NULL: the files it trained on). */
static brisk_status open_data(const char *ckpt, const char *data, brisk_config *cfg, brisk_weather *w, brisk_error *err) {
    if (cfg->model.type != BRISK_MODEL_MESHGNN || !cfg->data.netcdf.enabled)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: rollout needs a meshgnn trained on data.netcdf; this "
                            "checkpoint holds a %s%s", ckpt, brisk_model_type_name(cfg->model.type),
                            cfg->data.netcdf.enabled ? "" : " trained on other data");
    brisk_status st = open_weather(ckpt, data, cfg, w, err);
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

/* A copy of the checkpoint's metadata `key` (NULL when absent). */
static brisk_status checkpoint_meta(const char *ckpt, const char *key, char **out, brisk_error *err) {
    brisk_safetensors *st = NULL;
    *out = NULL;
    brisk_status s = brisk_checkpoint_open(ckpt, &st, err);
    if (s) return s;
    const char *v = brisk_safetensors_meta(st, key);
    if (v && !(*out = strdup(v))) s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", ckpt);
    brisk_safetensors_free(st);
    return s;
}

typedef struct rollout_run {
    const brisk_rollout_spec *r;
    brisk_weather *w;
    brisk_exec *ex;
    brisk_model_io io;
    float *states, *init, *x;  /* [H, G, C], [G, C], [G, inputs or C] */
    float *fc, *truth;         /* [steps, G, C] the forecast of one start and the truth it is scored against */
    double *times;             /* [steps] valid times */
} rollout_run;

/* One forecast from time index t0 into run->fc, and its truth. *hole: refused for a missing
 * value (data.netcdf.missing "refuse"), the error describing it. */
static brisk_status forecast(rollout_run *run, int64_t t0, int *hole, brisk_error *err) {
    brisk_weather *w = run->w;
    int64_t G = w->grid, C = w->channels, H = w->history, L = w->lead, S = w->nstatics;
    const float *dm = w->mean + C + S, *ds = w->std + C + S;
    float *states = run->states, *x = run->x, *y = x;
    brisk_status st = BRISK_OK;
    *hole = 0;
    for (int64_t h = 0; h < H && !st; h++) st = brisk_weather_state(w, t0 - H + 1 + h, states + h * G * C, err);
    if (st) {
        *hole = st == BRISK_ERR_NUMERIC;
        return st;
    }
    memcpy(run->init, states + (H - 1) * G * C, (size_t)(G * C) * sizeof(float));
    int64_t t = t0;
    for (int64_t k = 0; k < run->r->steps; k++) {
        const float *hist[64];
        for (int64_t h = 0; h < H; h++) hist[h] = states + h * G * C;
        brisk_weather_input(w, hist, t, x);
        if ((st = brisk_exec_set_input(run->ex, run->io.input_node[0], x, err)) ||
            (st = brisk_exec_run(run->ex, BRISK_RUN_PREDICT, err)) || (st = brisk_exec_read(run->ex, run->io.output, y, err)))
            return st;
        /* the new state; the history shifts by one */
        float *now = states + (H - 1) * G * C, *next = run->fc + k * G * C;
        int64_t bad = 0;
        for (int64_t i = 0; i < G * C; i++) bad += !isfinite(next[i] = now[i] + y[i] * ds[i % C] + dm[i % C]);
        if (bad)
            return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: %lld values of the forecast at step %lld are NaN or inf: the "
                                "checkpoint's weights are not usable", run->r->checkpoint, (long long)bad, (long long)(k + 1));
        memmove(states, states + G * C, (size_t)((H - 1) * G * C) * sizeof(float));
        memcpy(states + (H - 1) * G * C, next, (size_t)(G * C) * sizeof(float));
        t += L;
        run->times[k] = w->time[t];
        int64_t missing = 0;
        char first[256];
        if ((st = brisk_weather_read(w, t, run->truth + k * G * C, &missing, first, err))) return st;
        if (missing && !w->mask_missing) {
            *hole = 1;
            return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s (%lld missing values in the truth of step %lld; "
                                "data.netcdf.missing \"mask\" leaves them out of the scores)", first, (long long)missing,
                                (long long)(k + 1));
        }
    }
    return BRISK_OK;
}

/* The climatology of the training years (for ACC), and the trained grid checked: from the
 * checkpoint's record of it, else from the training files. */
static brisk_status reference(const brisk_rollout_spec *r, const brisk_config *cfg, const brisk_weather *w,
                              rollout_scores *sc, const brisk_logger *log, brisk_error *err) {
    char *grid = NULL;
    brisk_status st = checkpoint_meta(r->checkpoint, "weather_grid", &grid, err);
    if (!st) st = brisk_weather_check_grid(r->checkpoint, grid, w, err);
    if (st) {
        free(grid);
        return st;
    }
    brisk_weather train = {0};
    brisk_error terr = {0};
    brisk_status ts = open_weather(r->checkpoint, NULL, cfg, &train, &terr);
    if (!ts && !grid) {
        char *trained = brisk_weather_grid_json(&train);
        st = trained ? brisk_weather_check_grid(r->checkpoint, trained, w, err) : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        free(trained);
    } else if (ts && !grid) {
        brisk_log(log, BRISK_LOG_WARN, "rollout   %s records no grid (written before brisk did) and its training data "
                  "cannot be read: the grid is not checked", r->checkpoint);
    }
    if (!st && !ts) st = rollout_climatology(sc, &train, err);
    if (!st && ts)
        brisk_log(log, BRISK_LOG_WARN, "rollout   ACC left out: it needs the climatology of the training data, which "
                  "cannot be read (%s)", terr.msg);
    if (!st && !ts && sc->clim_times) {
        char a[48], b[48];
        brisk_weather_date(&train, train.time[0], a, sizeof a);
        brisk_weather_date(&train, train.time[sc->clim_times - 1], b, sizeof b);
        brisk_log(log, BRISK_LOG_INFO, "rollout   ACC against the climatology of %lld training times (%s to %s), %s",
                  (long long)sc->clim_times, a, b, sc->slots > 1 ? "by hour of day" : "all hours together");
    }
    brisk_weather_free(&train);
    free(grid);
    return st;
}

/* What the data say before any start: ERA5T's preliminary times, holes that refuse starts. */
static void describe_data(const brisk_weather *w, const brisk_logger *log) {
    brisk_weather_describe(w, log);
    if (w->missing && !w->mask_missing)
        brisk_log(log, BRISK_LOG_INFO, "data      %lld missing values: a start whose inputs or truth hold one is refused "
                  "(data.netcdf.missing \"mask\" fills the inputs and leaves the truth's out of the scores)",
                  (long long)w->missing);
}

static brisk_status write_jsonl(const brisk_rollout_spec *r, const rollout_scores *sc, const brisk_weather *w, double step_h,
                                int64_t starts, const char *init, const char *const *valid, brisk_error *err) {
    int to_stdout = strcmp(r->jsonl, "-") == 0;
    brisk_status there = to_stdout ? BRISK_OK : brisk_out_folder_check(r->jsonl, r->jsonl, err);
    if (there) return there;
    FILE *f = to_stdout ? stdout : fopen(r->jsonl, "w");
    if (!f) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot write: %s", r->jsonl, strerror(errno));
    rollout_scores_jsonl(sc, w, f, step_h, starts, init, valid);
    if (to_stdout ? fflush(f) != 0 : fclose(f) != 0) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot write", r->jsonl);
    return BRISK_OK;
}

brisk_status brisk_rollout(const brisk_rollout_spec *r, const brisk_logger *log, brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_checkpoint_config(r->checkpoint, &cfg, err);
    if (st) return st;
    brisk_weather w = {0};
    brisk_graph *g = NULL;
    brisk_plan plan = {0};
    brisk_backend *be = NULL;
    rollout_scores sc = {0};
    rollout_run run = {.r = r, .w = &w};
    char (*valid)[48] = NULL;
    const char **validp = NULL;
    if ((st = open_data(r->checkpoint, r->data, &cfg, &w, err))) goto out;
    int64_t G = w.grid, C = w.channels, H = w.history, L = w.lead;
    if (L > 1 && H > 1) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: trained with history %lld and lead %lld: a rollout feeds each "
                          "prediction back as the next input, which needs lead 1 or history 1", r->checkpoint,
                          (long long)H, (long long)L);
        goto out;
    }
    /* the start times: by default the held-out range's */
    int64_t lastpos = w.ntimes - 1 - r->steps * L, every = r->start_every > 0 ? r->start_every : 0;
    int64_t t0 = r->start >= 0 ? r->start : (w.split_time + H - 1 < w.ntimes ? w.split_time + H - 1 : H - 1);
    int64_t t1 = every == 0 ? t0 : r->start_last >= 0 ? r->start_last : lastpos;
    if (t0 < H - 1 || t1 > lastpos || t1 < t0) {
        char from[64];
        snprintf(from, sizeof from, t1 != t0 ? "time indices %lld to %lld" : "time index %lld", (long long)t0, (long long)t1);
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: a rollout of %lld steps of %lld from %s needs times %lld to %lld; "
                          "the file has 0 to %lld", r->data, (long long)r->steps, (long long)L, from, (long long)(t0 - H + 1),
                          (long long)(t1 + r->steps * L), (long long)(w.ntimes - 1));
        goto out;
    }
    int64_t nstarts = every ? (t1 - t0) / every + 1 : 1;
    if (r->output && nstarts > 1) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: a forecast file holds one start, and %lld are asked for: give one "
                          "start time to write it", r->output, (long long)nstarts);
        goto out;
    }
    describe_data(&w, log);
    if ((st = rollout_scores_init(&sc, &w, r->steps, err)) || (st = reference(r, &cfg, &w, &sc, log, err))) goto out;
    g = brisk_graph_new();
    be = brisk_backend_cpu_new(cfg.speed.threads);
    size_t per = (size_t)(G * (w.inputs > C ? w.inputs : C));
    run.states = malloc((size_t)((H + 1) * G * C) * sizeof(float) + per * sizeof(float));
    run.fc = malloc((size_t)(2 * r->steps * G * C) * sizeof(float));
    run.times = malloc((size_t)r->steps * sizeof(double));
    valid = malloc((size_t)r->steps * sizeof *valid);
    validp = malloc((size_t)r->steps * sizeof *validp);
    if (!g || !be || !run.states || !run.fc || !run.times || !valid || !validp) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        goto out;
    }
    run.init = run.states + H * G * C, run.x = run.init + G * C, run.truth = run.fc + r->steps * G * C;
    if ((st = brisk_model_build(&cfg.model, 1, BRISK_BUILD_PREDICT, g, &run.io, err)) ||
        (st = brisk_plan_build(g, &plan, err)) || (st = brisk_exec_create(g, &plan, be, &run.ex, err)) ||
        (st = brisk_checkpoint_load_params(r->checkpoint, run.ex, err)))
        goto out;
    run.ex->step.training = 0;
    int64_t scored = 0, refused = 0;
    for (int64_t s = 0; s < nstarts; s++) {
        int64_t t = t0 + s * every;
        int hole = 0;
        if ((st = forecast(&run, t, &hole, err))) {
            if (!hole || nstarts == 1) goto out;
            char a[48];
            brisk_weather_date(&w, w.time[t], a, sizeof a);
            brisk_log(log, BRISK_LOG_WARN, "rollout   start %s (time index %lld) refused: %s", a, (long long)t, err->msg);
            refused++, st = BRISK_OK;
            continue;
        }
        for (int64_t k = 0; k < r->steps; k++)
            rollout_scores_add(&sc, &w, k, t + (k + 1) * L, run.fc + k * G * C, run.truth + k * G * C, run.init);
        scored++;
    }
    if (!scored) {
        st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: all %lld start times were refused for missing values (each named "
                          "above)", r->data, (long long)nstarts);
        goto out;
    }
    double step_h = (double)L * (w.ntimes > 1 ? (w.time[1] - w.time[0]) * w.hours_per_unit : 0);
    char init[48], last[48];
    brisk_weather_date(&w, w.time[t0], init, sizeof init);
    brisk_weather_date(&w, w.time[t1], last, sizeof last);
    for (int64_t k = 0; k < r->steps; k++) brisk_weather_date(&w, run.times[k], valid[k], sizeof valid[k]), validp[k] = valid[k];
    if (r->output) {
        double *lead = malloc((size_t)r->steps * sizeof(double));
        if (!lead) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
        for (int64_t k = 0; k < r->steps; k++) lead[k] = (double)(k + 1) * step_h;
        brisk_forecast_info info = {.init = w.time[t0], .lead_h = lead, .checkpoint = r->checkpoint,
                                    .history = r->command ? r->command : "brisk rollout"};
        st = brisk_weather_write(&w, r->output, r->steps, run.times, run.fc, &info, err);
        free(lead);
        if (st) goto out;
    }
    if (r->jsonl && (st = write_jsonl(r, &sc, &w, step_h, scored, nstarts == 1 ? init : NULL, validp, err))) goto out;
    FILE *table = r->jsonl && strcmp(r->jsonl, "-") == 0 ? stderr : stdout; /* JSON lines keep stdout to themselves */
    rollout_scores_print(&sc, &w, table, step_h, scored);
    fflush(table);
    int64_t skipped = rollout_scores_skipped(&sc);
    if (skipped)
        brisk_log(log, BRISK_LOG_WARN, "rollout   %lld missing truth values left out of every score (the forecast's and "
                  "persistence's alike; per lead and variable: \"missing\" in the JSON lines)", (long long)skipped);
    if (nstarts == 1)
        brisk_log(log, BRISK_LOG_INFO, "rollout   %lld steps from %s (time index %lld) of %s%s%s", (long long)r->steps, init,
                  (long long)t0, r->data, r->output ? " -> " : "", r->output ? r->output : "");
    else
        brisk_log(log, BRISK_LOG_INFO, "rollout   %lld steps from each of %lld start times, %s to %s every %lld time steps "
                  "(time indices %lld to %lld), of %s; %lld refused for missing values", (long long)r->steps,
                  (long long)scored, init, last, (long long)every, (long long)t0, (long long)t1, r->data,
                  (long long)refused);
out:
    free(run.states);
    free(run.fc);
    free(run.times);
    free(valid);
    free(validp);
    rollout_scores_free(&sc);
    if (run.ex) brisk_exec_free(run.ex);
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    if (be) be->destroy(be);
    brisk_weather_free(&w);
    brisk_config_free(&cfg);
    return st;
}
