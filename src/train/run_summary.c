/* A run's summary (brisk_run_summary) as JSON: the one key set that metrics.jsonl's run_end
 * line, brisk_train_run (the Python package's brisk.train) and anything else that hands a
 * summary on use, so that a number has one name wherever it appears. The names are those
 * metrics.jsonl has always used: run directories on disk (and `brisk report` on them) keep
 * reading as before. */
#include <math.h>

#include <cjson/cJSON.h>

#include "brisk/train.h"

/* A number, or null for NaN and inf (JSON has neither). */
static void num(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

struct cJSON *brisk_run_summary_json(const brisk_run_summary *s, const char *out_dir) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    num(o, "steps", (double)s->steps);
    num(o, "steps_run", (double)s->steps_run);
    num(o, "epochs", s->epochs_done);
    num(o, "wall_s", s->wall_s);
    num(o, "data_wait_s", s->data_wait_s);
    num(o, "copy_s", s->copy_s);
    num(o, "compute_s", s->compute_s);
    num(o, "samples_per_s", s->samples_per_s);
    num(o, "ms_per_step_median", s->ms_per_step_median);
    num(o, "ms_per_step_p95", s->ms_per_step_p95);
    num(o, "final_loss", s->final_loss);
    num(o, "best_val_loss", s->best_val_loss);
    num(o, "best_val_accuracy", s->best_val_accuracy);
    num(o, "best_epoch", s->best_epoch);
    num(o, "params", (double)s->params);
    num(o, "arena_bytes", (double)s->arena_bytes);
    num(o, "state_bytes", (double)s->state_bytes);
    num(o, "total_bytes", (double)s->total_bytes);
    num(o, "device_mem_used", s->device_mem_used);
    num(o, "nan_skipped", (double)s->nan_skipped);
    num(o, "stopped_by_signal", s->stopped_by_signal);
    cJSON_AddStringToObject(o, "checkpoint", s->checkpoint);
    if (out_dir) cJSON_AddStringToObject(o, "out_dir", out_dir);
    return o;
}
