/* A run's summary (brisk_run_summary) as JSON, in the one key set of metrics.jsonl's run_end
 * line and of brisk_train_run's result (the Python package's brisk.train), so that a number
 * has one name wherever it appears. The names are those run_end has always used: run
 * directories on disk (and `brisk report` on them) read as before. */
#include <math.h>

#include <cjson/cJSON.h>

#include "brisk/train.h"

struct cJSON *brisk_run_summary_json(const brisk_run_summary *s, const char *out_dir) {
    const struct {
        const char *key;
        double v; /* NaN or inf (not measured): null, as JSON has neither */
    } nums[] = {
        {"steps", (double)s->steps}, {"steps_run", (double)s->steps_run}, {"epochs", s->epochs_done},
        {"wall_s", s->wall_s}, {"data_wait_s", s->data_wait_s}, {"copy_s", s->copy_s}, {"compute_s", s->compute_s},
        {"checkpoint_s", s->checkpoint_s}, {"validation_s", s->validation_s}, {"checkpoints", (double)s->checkpoints},
        {"samples_per_s", s->samples_per_s}, {"ms_per_step_median", s->ms_per_step_median},
        {"ms_per_step_p95", s->ms_per_step_p95},
        {"host_ms_per_step_median", s->host_ms_per_step_median}, {"gflop_per_step", s->gflop_per_step}, {"gflops", s->gflops},
        {"final_loss", s->final_loss}, {"best_val_loss", s->best_val_loss},
        {"best_val_accuracy", s->best_val_accuracy}, {"best_val_px_error", s->best.px_error},
        {"best_val_pck", s->best.pck}, {"best_epoch", s->best_epoch},
        {"run_best_val_loss", s->run_best_val_loss}, {"run_best_val_accuracy", s->run_best_val_accuracy},
        {"best_before_run", s->best_before_run}, {"sample_rmse", s->sample_rmse},
        {"sample_baseline_rmse", s->sample_baseline_rmse}, {"params", (double)s->params},
        {"arena_bytes", (double)s->arena_bytes}, {"state_bytes", (double)s->state_bytes},
        {"total_bytes", (double)s->total_bytes}, {"device_mem_used", s->device_mem_used},
        {"nan_skipped", (double)s->nan_skipped}, {"images_left_out", (double)s->images_left_out},
        {"images_replaced", (double)s->images_replaced}, {"stopped_by_signal", s->stopped_by_signal},
    };
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (isfinite(nums[i].v)) cJSON_AddNumberToObject(o, nums[i].key, nums[i].v);
        else cJSON_AddNullToObject(o, nums[i].key);
    }
    cJSON_AddStringToObject(o, "checkpoint", s->checkpoint);
    cJSON_AddStringToObject(o, "step_clock", s->step_clock);
    if (out_dir) cJSON_AddStringToObject(o, "out_dir", out_dir);
    return o;
}
