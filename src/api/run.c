/* brisk_train_run: a whole `brisk train` run as one call, for bindings (the Python package's
 * brisk.train). The command's work, not a second trainer: config, trainer (or pipeline), run,
 * and the summary handed back as JSON (brisk_run_summary_json: the keys of metrics.jsonl's
 * run_end line), so a binding needs no struct layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "brisk/api.h"
#include "brisk/brisk.h"

typedef struct run_ctx {
    brisk_train_progress_fn fn;
    void *user;
    int stop; /* the progress callback asked for a stop */
} run_ctx;

static void on_progress(void *user, int64_t step, int64_t total, double loss) {
    run_ctx *c = user;
    if (c->fn && c->fn(c->user, step, total, loss)) c->stop = 1;
}

static int stop_asked(void *user) { return ((run_ctx *)user)->stop ? BRISK_STOP_REQUESTED : 0; }

static brisk_status put(cJSON *o, char *out, size_t size, brisk_error *err) {
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    brisk_status st = BRISK_OK;
    if (!text) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    else if (strlen(text) >= size)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "brisk_train_run: the summary takes %zu bytes; result_size is %zu",
                          strlen(text) + 1, size);
    else memcpy(out, text, strlen(text) + 1);
    cJSON_free(text);
    cJSON_Delete(o);
    return st;
}

brisk_status brisk_train_run(const char *config, int config_is_path, const char *const *overrides, int n_overrides,
                             const char *resume, int overwrite, brisk_log_fn log, void *log_user, brisk_train_progress_fn progress, void *progress_user,
                             char *result_json, size_t result_size, char *error, size_t error_size) {
    brisk_error err = {0};
    brisk_config cfg;
    brisk_status st;
    if (error && error_size) error[0] = 0;
    if (!config || !result_json || !result_size) {
        st = brisk_errorf(&err, BRISK_ERR_INVALID, "brisk_train_run: config and result_json are required");
        goto fail;
    }
    st = config_is_path ? brisk_config_load(config, overrides, n_overrides, &cfg, &err)
                        : brisk_config_parse(config, "<config>", overrides, n_overrides, &cfg, &err);
    if (st) goto fail;
    if (overwrite && resume && strcmp(resume, "auto") == 0) {
        brisk_config_free(&cfg);
        st = brisk_errorf(&err, BRISK_ERR_INVALID, "overwrite starts a new run and resume \"auto\" continues the "
                          "run directory's own; give one of them");
        goto fail;
    }
    cfg.train.overwrite = overwrite;
    brisk_logger lg = {log, log_user, BRISK_LOG_INFO};
    if (cfg.n_models > 0) { /* a pipeline: each model's summary, by name */
        brisk_pipeline_result *res = calloc(BRISK_MAX_MODELS, sizeof *res);
        if (resume) st = brisk_errorf(&err, BRISK_ERR_INVALID, "resume takes one model's checkpoint; resume a "
                                      "pipeline's model with its own config (see %s/<name>)", cfg.train.out_dir);
        else if (!res) st = brisk_errorf(&err, BRISK_ERR_NOMEM, "out of memory");
        else if (!(st = brisk_pipeline_run(&cfg, &lg, res, &err))) {
            cJSON *o = cJSON_CreateObject(), *models = o ? cJSON_AddObjectToObject(o, "models") : NULL;
            for (int i = 0; models && i < cfg.n_models; i++) {
                char dir[BRISK_PATH_MAX + 40];
                snprintf(dir, sizeof dir, "%s/%s", cfg.train.out_dir, res[i].name);
                cJSON *m = brisk_run_summary_json(&res[i].summary, dir);
                if (m) cJSON_AddItemToObject(models, res[i].name, m);
            }
            st = put(o, result_json, result_size, &err);
        }
        free(res);
        brisk_config_free(&cfg);
        if (st) goto fail;
        return BRISK_OK;
    }
    brisk_trainer *t = NULL;
    brisk_run_summary sum;
    run_ctx ctx = {progress, progress_user, 0};
    int resumed = 0;
    if (!(st = brisk_trainer_create(&cfg, &lg, &t, &err)) &&
        !(st = resume && strcmp(resume, "auto") == 0 ? brisk_trainer_resume_auto(t, &resumed, &err)
               : resume                             ? brisk_trainer_resume(t, resume, &err)
                                                    : BRISK_OK)) {
        brisk_trainer_set_control(t, &(brisk_trainer_control){stop_asked, &ctx, 0, on_progress, NULL});
        if (!(st = brisk_trainer_run(t, &sum, &err))) st = put(brisk_run_summary_json(&sum, cfg.train.out_dir), result_json,
                                                              result_size, &err);
        if (!st && sum.stopped_by_signal) st = BRISK_STOPPED;
    }
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    if (st && st != BRISK_STOPPED) goto fail;
    return st;
fail:
    if (error && error_size) snprintf(error, error_size, "%s", err.msg[0] ? err.msg : "error");
    return st;
}
