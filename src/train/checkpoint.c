/* Checkpoints as safetensors: parameters under their PyTorch names (fp32), the AdamW
 * moments as "optim.exp_avg.<name>" / "optim.exp_avg_sq.<name>" (SGD momentum as
 * "optim.momentum_buffer.<name>"), and the training state in the metadata: step,
 * epoch, position, seed, the effective config, the code version (brisk_version and the
 * git commit) and a checksum of it all (checkpoint_verify.c). Device-agnostic:
 * everything is copied to the host first. Written atomically by brisk_safetensors_write. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brisk/json.h"
#include "brisk/safetensors.h"
#include "train/trainer_internal.h"

static brisk_status download_arena(brisk_exec *ex, const void *dev, float *host, brisk_error *err) {
    return ex->be->download(ex->be, host, dev, (size_t)ex->g->n_param_floats * sizeof(float), err);
}

/* The fp16 loss scaler rides in the metadata ("loss_scale", "loss_scale_growth",
 * "loss_scale_skipped"), written only when the backend has an active scaler. */
static brisk_status scaler_meta(brisk_trainer *t, char v[3][32], brisk_error *err) {
    brisk_scaler_state s = {0};
    if (!t->be->scaler_get) return BRISK_OK;
    brisk_status st = t->be->scaler_get(t->be, &s, err);
    if (st || !s.active) return st;
    snprintf(v[0], 32, "%.9g", (double)s.scale);
    snprintf(v[1], 32, "%" PRId64, s.growth);
    snprintf(v[2], 32, "%" PRId64, s.skipped);
    return BRISK_OK;
}

/* A resumed fp16 run goes on with the checkpoint's scaler; a run without one ignores it. */
static brisk_status scaler_restore(brisk_trainer *t, const brisk_safetensors *st, const char *path, brisk_error *err) {
    const char *v[3] = {brisk_safetensors_meta(st, "loss_scale"), brisk_safetensors_meta(st, "loss_scale_growth"),
                        brisk_safetensors_meta(st, "loss_scale_skipped")};
    if (!v[0] || !t->be->scaler_set) return BRISK_OK;
    char *end[3];
    brisk_scaler_state s = {.active = 1, .scale = v[0] ? strtof(v[0], &end[0]) : 0.0f,
                            .growth = v[1] ? strtoll(v[1], &end[1], 10) : -1,
                            .skipped = v[2] ? strtoll(v[2], &end[2], 10) : -1};
    if (!v[1] || !v[2] || *end[0] || *end[1] || *end[2] || !(s.scale > 0.0f) || !isfinite(s.scale) || s.growth < 0 ||
        s.skipped < 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata loss_scale \"%s\", loss_scale_growth \"%s\", "
                            "loss_scale_skipped \"%s\": expected a positive scale and two counts >= 0", path, v[0],
                            v[1] ? v[1] : "(missing)", v[2] ? v[2] : "(missing)");
    return t->be->scaler_set(t->be, &s, err);
}

/* {"epoch": .., "step": .., "mid_epoch": .., "accuracy": .., "mae": .., "rmse": .., "px_error": .., "pck": ..,
 * "max_accuracy": ..}, NaN as null (checkpoint_verify.c reads it back). */
static brisk_status best_at_json(const brisk_trainer *t, char *out, size_t n, brisk_error *err) {
    const brisk_best_at *b = &t->best_at;
    const double v[6] = {b->accuracy, b->mae, b->rmse, b->px_error, b->pck, b->max_accuracy};
    char num[6][32];
    for (int i = 0; i < 6; i++) {
        if (isfinite(v[i])) snprintf(num[i], sizeof num[i], "%.9g", v[i]);
        else snprintf(num[i], sizeof num[i], "null");
    }
    int k = snprintf(out, n, "{\"epoch\": %" PRId64 ", \"step\": %" PRId64 ", \"mid_epoch\": %s, \"accuracy\": %s, "
                     "\"mae\": %s, \"rmse\": %s, \"px_error\": %s, \"pck\": %s, \"max_accuracy\": %s}", b->epoch,
                     b->step, b->mid_epoch ? "true" : "false", num[0], num[1], num[2], num[3], num[4], num[5]);
    return k > 0 && (size_t)k < n ? BRISK_OK : brisk_errorf(err, BRISK_ERR_INTERNAL, "best_val metadata too long");
}

brisk_status brisk_checkpoint_reserve(brisk_trainer *t, brisk_error *err) {
    if (t->ckpt_stage) return BRISK_OK;
    const size_t bytes = 3 * (size_t)t->g->n_param_floats * sizeof(float) + 1;
    if ((t->ckpt_stage = malloc(bytes))) return BRISK_OK;
    char source[96];
    int64_t avail = brisk_memory_available(&t->cfg, source, sizeof source);
    return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory after the first step for the %.1f MiB its checkpoints "
                        "are written from (%.1f MiB available: %s; the libraries took more than the memory check "
                        "counts): stopped before more work is done; lower train.batch_size or speed.threads, or give "
                        "it more memory", t->cfg.path, bytes / 1048576.0, avail / 1048576.0, source);
}

brisk_status brisk_checkpoint_save(brisk_trainer *t, const char *path, brisk_error *err) {
    double t0 = brisk_now();
    char *norm = NULL, *grid = NULL, *tnorm = NULL;
    brisk_graph *g = t->g;
    size_t n = (size_t)g->n_param_floats, np = (size_t)g->n_params;
    float *host = t->ckpt_stage ? t->ckpt_stage : malloc(3 * n * sizeof(float) + 1);
    brisk_st_entry *e = calloc(3 * np + 1, sizeof *e);
    char **names = calloc(2 * np + 1, sizeof *names);
    brisk_status st = BRISK_OK;
    if (!host || !e || !names) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); goto out; }
    if ((st = download_arena(t->ex, t->ex->params, host, err))) goto out;
    if (t->ex->moments_n == (int64_t)n) {
        if ((st = download_arena(t->ex, t->ex->m, host + n, err)) || (st = download_arena(t->ex, t->ex->v, host + 2 * n, err)))
            goto out;
    } else if (t->moments_host) { /* ZeRO-1: every rank's shard, gathered on rank 0 just before */
        memcpy(host + n, t->moments_host, 2 * n * sizeof(float));
    } else {
        st = brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: the sharded optimizer moments were not gathered", path);
        goto out;
    }
    int sgd = t->cfg.optim.kind == BRISK_OPTIM_SGD;
    size_t k = 0;
    for (size_t i = 0; i < np; i++) {
        const brisk_param_info *p = &g->params[i];
        e[k++] = (brisk_st_entry){p->name, BRISK_F32, p->shape, host + p->offset};
    }
    for (size_t i = 0; i < np; i++) {
        const brisk_param_info *p = &g->params[i];
        if (p->buffer) continue; /* running statistics: no optimizer state */
        size_t len = strlen(p->name) + 32;
        names[2 * i] = malloc(len);
        names[2 * i + 1] = malloc(len);
        if (!names[2 * i] || !names[2 * i + 1]) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); goto out; }
        snprintf(names[2 * i], len, sgd ? "optim.momentum_buffer.%s" : "optim.exp_avg.%s", p->name);
        e[k++] = (brisk_st_entry){names[2 * i], BRISK_F32, p->shape, host + n + p->offset};
        if (!sgd) {
            snprintf(names[2 * i + 1], len, "optim.exp_avg_sq.%s", p->name);
            e[k++] = (brisk_st_entry){names[2 * i + 1], BRISK_F32, p->shape, host + 2 * n + p->offset};
        }
    }
    char step[32], epoch[32], pos[32], seed[32], best[64], skipped[32], sum[BRISK_CKPT_CHECKSUM_LEN];
    char samples[32], target[96], world[16], best_at[400];
    snprintf(world, sizeof world, "%d", t->world > 1 ? t->world : 1);
    snprintf(samples, sizeof samples, "%" PRId64, t->samples);
    if (t->tnorm_n == 1) /* a window's target: the scalar form checkpoints have always had */
        snprintf(target, sizeof target, "{\"mean\": %.9g, \"std\": %.9g}", t->tnorm_mean[0], t->tnorm_std[0]);
    else if (t->tnorm_n > 1 && !(tnorm = brisk_normalization_json(t->tnorm_mean, t->tnorm_std, t->tnorm_n))) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    snprintf(skipped, sizeof skipped, "%" PRId64, t->nan_skipped);
    snprintf(step, sizeof step, "%" PRId64, t->step);
    snprintf(epoch, sizeof epoch, "%" PRId64, t->epoch);
    snprintf(pos, sizeof pos, "%" PRId64, t->position);
    snprintf(seed, sizeof seed, "%" PRIu64, t->cfg.train.seed);
    snprintf(best, sizeof best, "%.9g", t->best_val);
    if ((st = best_at_json(t, best_at, sizeof best_at, err))) goto out;
    if (t->norm_n > 0 && !(norm = brisk_normalization_json(t->norm_mean, t->norm_std, t->norm_n))) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    if (t->weather && !(grid = brisk_weather_grid_json(t->weather))) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    char scaler[3][32] = {"", "", ""};
    if ((st = scaler_meta(t, scaler, err))) goto out;
    brisk_st_meta meta[] = {
        {"format", BRISK_CKPT_FORMAT}, {"brisk_version", BRISK_VERSION}, {"brisk_commit", brisk_build_commit},
        {"step", step}, {"epoch", epoch}, {"position", pos}, {"samples", samples}, {"world_size", world}, {"seed", seed}, {"best_val_loss", best},
        {"best_val", isnan(t->best_val) ? NULL : best_at}, /* where the best was reached, for a resumed run's summary */
        {"run_id", t->run_id}, /* which run this is a checkpoint of (rundir.c) */
        {"nan_skipped", skipped}, {"optimizer", sgd ? "sgd" : "adamw"}, {"config", t->cfg.json},
        {"normalization", norm}, /* windowed data: predict applies it again; data.netcdf: rollout */
        {"weather_grid", grid},  /* data.netcdf: rollout refuses another grid */
        {"target_normalization", t->tnorm_n == 1 ? target : tnorm}, /* predict maps outputs back */
        {"loss_scale", scaler[0][0] ? scaler[0] : NULL}, {"loss_scale_growth", scaler[0][0] ? scaler[1] : NULL},
        {"loss_scale_skipped", scaler[0][0] ? scaler[2] : NULL}, /* fp16 only */
        {BRISK_CKPT_CHECKSUM_KEY, sum},
    };
    size_t n_meta = 0; /* the entries that apply, in order */
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
        if (meta[i].value) meta[n_meta++] = meta[i];
    if ((st = brisk_checkpoint_checksum_entries(e, k, meta, n_meta - 1, sum, err))) goto out;
    st = brisk_safetensors_write(path, e, k, meta, n_meta, err);
out:
    if (names)
        for (size_t i = 0; i < 2 * np; i++) free(names[i]);
    free(names);
    free(e);
    if (host != t->ckpt_stage) free(host);
    free(norm);
    free(grid);
    free(tnorm);
    t->checkpoint_s += brisk_now() - t0; /* the summary's own line: a big model writes for seconds */
    if (!st) t->checkpoints_written++;
    return st;
}

/* data.shard_files in an effective config (a checkpoint's) */
static int shard_files_on(const char *config) {
    cJSON *c = cJSON_Parse(config ? config : "");
    int on = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "data"), "shard_files"));
    cJSON_Delete(c);
    return on;
}

/* Refuses a checkpoint of another model shape, saying which settings changed; warns
 * about model settings that changed without changing shapes, and lists the rest. */
static brisk_status check_model(brisk_trainer *t, const brisk_safetensors *st, const char *config, float *host,
                                brisk_error *err) {
    size_t n = (size_t)t->g->n_param_floats;
    char diff[768], tensors[sizeof err->msg];
    int changed = brisk_config_diff(config, t->cfg.json, "model", NULL, diff, sizeof diff);
    brisk_status s = brisk_checkpoint_read_tensors(st, t->g, host, host + n, host + 2 * n, t->cfg.optim.kind == BRISK_OPTIM_SGD, err);
    if (s && changed) {
        snprintf(tensors, sizeof tensors, "%s", err->msg);
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: the checkpoint holds a model of another shape; changed since "
                            "it was written: %s (%s); resume with the model settings it was trained with (brisk "
                            "info shows its config), or start a new run with --overwrite or another train.out_dir",
                            brisk_safetensors_name(st), diff, tensors);
    }
    if (s) return s;
    if (changed)
        brisk_log(&t->log, BRISK_LOG_WARN, "%s: resuming with changed model settings (the shapes still fit): %s",
                  brisk_safetensors_name(st), diff);
    if (brisk_config_diff(config, t->cfg.json, NULL, "model", diff, sizeof diff))
        brisk_log(&t->log, BRISK_LOG_INFO, "resume    settings changed since the checkpoint: %s", diff);
    const char *version = brisk_safetensors_meta(st, "brisk_version"), *commit = brisk_safetensors_meta(st, "brisk_commit");
    if (!version || !commit || strcmp(version, BRISK_VERSION) != 0 || strcmp(commit, brisk_build_commit) != 0)
        brisk_log(&t->log, BRISK_LOG_INFO, "resume    the checkpoint was written by brisk %.32s (commit %.48s), this is "
                  "brisk %s (commit %s)", version ? version : "?", commit ? commit : "?", BRISK_VERSION, brisk_build_commit);
    return BRISK_OK;
}

brisk_status brisk_checkpoint_load(brisk_trainer *t, const char *path, brisk_error *err) {
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_checkpoint_open(path, &st, err);
    if (s) return s;
    size_t n = (size_t)t->g->n_param_floats;
    float *host = calloc(3 * n + 1, sizeof(float));
    brisk_ckpt_state cs;
    if (!host) { s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); goto out; }
    if ((s = brisk_checkpoint_state(st, &cs, err))) goto out;
    int sgd = t->cfg.optim.kind == BRISK_OPTIM_SGD;
    if (cs.sgd != sgd) {
        s = brisk_errorf(err, BRISK_ERR_INVALID, "%s: written with optimizer '%s', this run uses '%s'", path,
                         cs.sgd ? "sgd" : "adamw", sgd ? "sgd" : "adamw");
        goto out;
    }
    if ((s = check_model(t, st, cs.config, host, err))) goto out;
    brisk_backend *be = t->ex->be;
    size_t bytes = n * sizeof(float);
    /* the moments this executor holds: all, or its shard (ZeRO-1) of any world size's file */
    size_t off = (size_t)t->ex->moments_off, mb = (size_t)t->ex->moments_n * sizeof(float);
    if ((s = be->upload(be, t->ex->params, host, bytes, err)) || (s = be->upload(be, t->ex->m, host + n + off, mb, err)) ||
        (s = be->upload(be, t->ex->v, host + 2 * n + off, mb, err)))
        goto out;
    t->step = cs.step;
    t->epoch = cs.epoch;
    t->position = cs.position;
    t->nan_skipped = cs.nan_skipped;
    const char *ws = brisk_safetensors_meta(st, "world_size"); /* position and samples count all ranks' */
    t->resumed_world = ws ? atoi(ws) : 0;
    t->resumed_sharded = t->resumed_world > 1 && shard_files_on(cs.config);
    /* progress in samples: a checkpoint from before the key counts its steps at this batch size */
    t->samples = cs.samples >= 0 ? cs.samples : cs.step * t->cfg.train.batch_size * t->cfg.train.accumulate;
    brisk_trainer_plan_length(t);
    if ((s = scaler_restore(t, st, path, err))) goto out;
    /* the lowest known: a best.safetensors of this run directory may hold a better one */
    brisk_trainer_adopt_best(t, &cs);
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", path);
    t->last_ckpt_step = cs.step;
    /* the run continues the checkpoint's (a checkpoint from before run ids: a run of its own) */
    const char *id = brisk_safetensors_meta(st, "run_id");
    if (id && strlen(id) < sizeof t->run_id) snprintf(t->run_id, sizeof t->run_id, "%s", id);
out:
    free(host);
    brisk_safetensors_free(st);
    return s;
}
