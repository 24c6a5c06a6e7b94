/* The end of a run: its summary (steps, losses, the best validation, speed, the time split,
 * memory, checkpoints) into brisk_run_summary, the summary lines of the log, and the
 * run-end record of metrics.jsonl that the run report reads. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train/loop_internal.h"

/* The summary's "best val loss" text: the run's best over all its parts, where it was
 * reached, and this run's own when the best came before it (a resume). */
static void best_text(const brisk_trainer *t, const run_val *rv, int stop_sig, char *out, size_t n) {
    const brisk_best_at *b = &t->best_at;
    if (isnan(t->best_val)) {
        if (brisk_trainer_val_count(t) == 0) snprintf(out, n, "none (no validation split)");
        else snprintf(out, n, "none: validation runs at each epoch's end and at the end of a run cut mid-epoch, and "
                      "this run %s before either", stop_sig ? "was stopped" : "ended");
        return;
    }
    size_t k;
    if (b->epoch < 0) k = (size_t)snprintf(out, n, "%.5f", t->best_val);
    else if (b->mid_epoch)
        k = (size_t)snprintf(out, n, "%.5f (step %lld, at the end of a run cut in epoch %lld)", t->best_val,
                             (long long)b->step, (long long)b->epoch + 1);
    else k = (size_t)snprintf(out, n, "%.5f (epoch %lld)", t->best_val, (long long)b->epoch);
    if (!isnan(b->max_accuracy) && k < n) k += (size_t)snprintf(out + k, n - k, ", best val accuracy %.4f", b->max_accuracy);
    if (!isnan(b->mae) && k < n) k += (size_t)snprintf(out + k, n - k, ", MAE %.5g, RMSE %.5g", b->mae, b->rmse);
    if (!isnan(b->px_error) && k < n)
        k += (size_t)snprintf(out + k, n - k, " (fractions of the image), keypoint error %.4g px, PCK@%g %.4f",
                              b->px_error, BRISK_PCK_FRACTION, b->pck);
    if (rv->best_here || k >= n) return;
    if (isnan(rv->loss))
        snprintf(out + k, n - k, "; reached before this run was resumed, which did not validate");
    else
        snprintf(out + k, n - k, "; reached before this run was resumed; this run's best %.5f (epoch %lld)",
                 rv->loss, (long long)rv->best_epoch);
}

/* A backend's row of its optimizations as an end-of-run summary line: by then its kernel
 * choices are made and its thread pool has seen the whole run. */
static void log_row(void *log, const char *name, const char *state, const char *detail) {
    brisk_log(log, BRISK_LOG_INFO, "  %-17s %s: %s", name, state, detail);
}

void brisk_loop_summarize(brisk_trainer *t, run_state *rs, brisk_run_summary *sum, int64_t sampled) {
    const brisk_train_spec *tr = &t->cfg.train;
    const int K = tr->accumulate;
    const int64_t B = tr->batch_size;
    sum->steps = t->step;
    sum->stopped_by_signal = rs->stop_sig;
    sum->nan_skipped = t->nan_skipped;
    sum->scaler_skipped = t->scaler_skipped;
    snprintf(sum->checkpoint, sizeof sum->checkpoint, "%s", t->last_ckpt);
    sum->epochs_done = rs->epochs_done;
    /* the run's best over all its parts (what best.safetensors holds), and this run's own */
    sum->best_val_loss = t->best_val;
    sum->best_val_accuracy = t->best_at.max_accuracy;
    sum->best_epoch = isnan(t->best_val) || t->best_at.epoch < 0 ? 0 : (int)t->best_at.epoch;
    sum->best_before_run = !isnan(t->best_val) && !rs->rv.best_here;
    sum->run_best_val_loss = rs->rv.loss;
    sum->run_best_val_accuracy = rs->rv.max_accuracy;
    if (rs->rv.best_here) sum->best = rs->rv.best;
    else sum->best.loss = t->best_val, sum->best.accuracy = t->best_at.accuracy, sum->best.mae = t->best_at.mae,
         sum->best.rmse = t->best_at.rmse, sum->best.px_error = t->best_at.px_error,
         sum->best.pck = t->best_at.pck; /* per-class counts are not kept in checkpoints */
    sum->final_loss = rs->epoch_steps ? brisk_loop_tail_mean(t, rs->epoch_steps) : rs->last_epoch_loss;
    sum->wall_s = brisk_now() - rs->t_start;
    brisk_loop_use_device_copy(t, &rs->run, &rs->run_copy_mark);
    sum->data_wait_s = rs->run.data_s;
    sum->copy_s = rs->run.copy_s;
    sum->compute_s = brisk_time_split_compute_s(&rs->run);
    sum->checkpoint_s = t->checkpoint_s - rs->ckpt_s0;
    sum->validation_s = t->validation_s - rs->val_s0;
    sum->checkpoints = t->checkpoints_written - rs->ckpt_n0;
    sum->gpu_util = t->util_n ? t->util_sum / t->util_n : -1.0;
    /* the step statistics from the device's clock where it has one (its times replace
     * the host's, whose sum is the compute split's step time too) */
    const double dev_s = brisk_loop_device_steps_s(t, rs->n_timed, rs->n_timed);
    const int dev_times = dev_s >= 0;
    sum->host_ms_per_step_median = NAN;
    if (dev_times) {
        brisk_step_stats host; /* sorts the host's times, which the device's replace next */
        brisk_step_stats_of(rs->step_times, rs->n_timed, &host);
        sum->host_ms_per_step_median = host.median_ms;
        for (int64_t i = 0; i < rs->n_timed; i++) rs->step_times[i] = 1e-3 * t->dev_ms[i];
        rs->run.step_s = dev_s;
        sum->compute_s = brisk_time_split_compute_s(&rs->run);
    }
    snprintf(sum->step_clock, sizeof sum->step_clock, dev_times ? "device events (%s)" : "host clock",
             t->be->name);
    if (t->dev_clock && !dev_times) /* never expected: say that these times only time the issuing */
        brisk_log(&t->log, BRISK_LOG_WARN, "the device timed %lld of this run's %lld steps; the step times below "
                  "are the host's, which time only the issuing of the work", (long long)t->n_dev_ms,
                  (long long)rs->n_timed);
    /* On a device the first steps set up (cuDNN plans, the eager warm-up, the capture):
     * hundreds of ms that say nothing about the machine's load, so the judgement of
     * stability leaves them out (the statistics keep them). */
    int64_t warm = !dev_times ? 0 : t->graph && t->programs_ready ? t->eager_steps + 1 : 1;
    if (warm > rs->n_timed) warm = rs->n_timed;
    brisk_step_stats steady;
    brisk_step_stats_of(rs->step_times + warm, rs->n_timed - warm, &steady); /* sorts that tail only */
    brisk_step_stats ss;
    brisk_step_stats_of(rs->step_times, rs->n_timed, &ss);
    ss.unstable = steady.unstable;
    sum->steps_run = rs->n_timed;
    sum->ms_per_step_median = ss.median_ms;
    sum->ms_per_step_mean = ss.mean_ms;
    sum->ms_per_step_p95 = ss.p95_ms;
    sum->ms_per_step_max = ss.max_ms;
    sum->samples_per_s = ss.total_s > 0 ? (double)(B * K * t->world) * (double)rs->n_timed / ss.total_s : 0;
    sum->gflop_per_step = 1e-9 * brisk_plan_train_flops(t->g, &t->plan) * (double)K;
    sum->gflops = ss.total_s > 0 ? sum->gflop_per_step * (double)rs->n_timed / ss.total_s : 0;
    sum->load_unstable = ss.unstable;
    sum->arena_bytes = t->plan.arena_bytes;
    sum->total_bytes = brisk_plan_total_bytes(&t->plan);
    sum->state_bytes = 4 * t->plan.param_bytes; /* parameters, gradients, two moments */
    brisk_backend_stats bs; /* a device backend's counters at the end */
    brisk_error ignored;
    const int dev_stats = t->be->stats && !t->be->stats(t->be, &bs, &ignored);
    sum->device_mem_used = dev_stats ? (double)bs.mem_used : NAN;
    sum->params = brisk_model_param_count(&t->cfg.model);
    double w = sum->wall_s > 0 ? sum->wall_s : 1;
    char ranks_txt[320] = "", overlap_txt[224] = "";
    double arena_mib = (double)t->g->n_param_floats * sizeof(float) / 1048576.0;
    if (t->world > 1) /* per step: the arena in n_buckets and what a ring moves of it per rank */
        snprintf(overlap_txt, sizeof overlap_txt, "; gradients %.2f MiB in %lld buckets a step, %.2f MiB moved per "
                 "rank by a ring", arena_mib, (long long)t->n_buckets, brisk_dist_ring_bytes(arena_mib, t->world));
    if (t->overlap_steps > 0) /* the communication thread's timeline: how much of it backward hid */
        snprintf(overlap_txt + strlen(overlap_txt), sizeof overlap_txt - strlen(overlap_txt),
                 "; all-reduce %.2f ms/step in %lld overlapped steps, %.0f%% of it before the step waited for it",
                 1e3 * t->overlap_comm_s / (double)t->overlap_steps, (long long)t->overlap_steps,
                 t->overlap_comm_s > 0 ? 100.0 * t->overlap_hidden_s / t->overlap_comm_s : 0.0);
    if (t->world > 1)
        snprintf(ranks_txt, sizeof ranks_txt, " (%d ranks, %.0f per rank; %lld collectives, %.2f s waiting in them%s)",
                 t->world, sum->samples_per_s / t->world, (long long)brisk_dist_collectives(t->dist),
                 brisk_dist_wait_seconds(t->dist), overlap_txt);
    char resumed[64];
    snprintf(resumed, sizeof resumed, ", %lld in all", (long long)t->step);
    /* near the median, host and device go in step; which one sets the pace the host's
     * time cannot say, since it includes waits for the device (the batch copy) */
    char host_txt[112] = "";
    if (!isnan(sum->host_ms_per_step_median))
        snprintf(host_txt, sizeof host_txt, "; the host's time per step %.3f ms (median, its waits included)",
                 sum->host_ms_per_step_median);
    char other[128] = ""; /* what the time outside the steps went to, where it went anywhere */
    if (sum->checkpoints > 0 || sum->validation_s > 0)
        snprintf(other, sizeof other, ": checkpoints %.2f s (%lld written), validation %.2f s", sum->checkpoint_s,
                 (long long)sum->checkpoints, sum->validation_s);
    char val[400];
    best_text(t, &rs->rv, rs->stop_sig, val, sizeof val);
    brisk_log(&t->log, BRISK_LOG_INFO,
              BRISK_SUMMARY_HEAD "   %lld step%s in %.2f s (%d epoch%s)%s\n"
              "  train loss        %.5f (last epoch)\n"
              "  best val loss     %s\n"
              "  speed             %.0f samples/s over the run%s; %.3f ms/step median, %.3f p95, %.3f mean\n"
              "  arithmetic        %.3g GFLOP a step (matrix products), %.1f GFLOP/s sustained\n"
              "  step times        %s%s\n"
              "  time              data wait %.2f s (%.1f%%), copy to device %.2f s (%.1f%%), compute %.2f s (%.1f%%), other %.2f s%s\n"
              "  memory            %.2f MiB planned (activations %.2f MiB)\n"
              "  checkpoints       %s%s%s",
              (long long)rs->n_timed, rs->n_timed == 1 ? "" : "s", sum->wall_s, rs->epochs_done, rs->epochs_done == 1 ? "" : "s",
              rs->n_timed == t->step ? "" : resumed, sum->final_loss, val, sum->samples_per_s, ranks_txt, ss.median_ms, ss.p95_ms,
              ss.mean_ms, sum->gflop_per_step, sum->gflops, sum->step_clock, host_txt, sum->data_wait_s, 100 * sum->data_wait_s / w, sum->copy_s, 100 * sum->copy_s / w, sum->compute_s,
              100 * sum->compute_s / w, sum->wall_s - sum->data_wait_s - sum->copy_s - sum->compute_s, other, sum->total_bytes / 1048576.0, sum->arena_bytes / 1048576.0,
              rs->files ? tr->out_dir : "none (train.out_dir is \"\")", rs->files ? "/last.safetensors" : "",
              !rs->files || rs->when_due || isnan(t->best_val) ? "" : ", best.safetensors");
    brisk_trainer_skips_summary(t, sum);
    if (t->data_sharded)
        brisk_log(&t->log, BRISK_LOG_INFO, "  data              data.shard_files: each rank loaded %lld of the %lld rows "
                  "of %s (rank %d: rows from %lld, %.2f MiB)", (long long)t->data.count,
                  (long long)t->shard_file_rows, t->data.source, t->rank, (long long)t->shard_lo,
                  (double)t->shard_bytes / 1048576.0);
    if (dev_stats && bs.loss_scale > 0)
        brisk_log(&t->log, BRISK_LOG_INFO, "  loss scaler       %lld steps skipped (inf/NaN gradients), scale now %g",
                  (long long)bs.skipped_steps, bs.loss_scale);
    if (ss.unstable)
        brisk_log(&t->log, BRISK_LOG_INFO, "  load              unstable: step times spread from %.3f to %.3f ms (p95 "
                  "%.1fx the median); other programs are likely using these CPUs (a step waits for any "
                  "descheduled thread); see the thread count on the device line",
                  ss.min_ms, ss.max_ms, ss.median_ms > 0 ? ss.p95_ms / ss.median_ms : 0);
    if (!t->be->describe && t->be->optimizations) t->be->optimizations(t->be, log_row, &t->log);
    if (sampled)
        brisk_log(&t->log, BRISK_LOG_INFO, "  samples           RMSE %.4f to the validation fields (one DDPM sample each, "
                  "from the coarse blocks; %lld rows); the coarse block values' %.4f%s", sum->sample_rmse,
                  (long long)sampled, sum->sample_baseline_rmse,
                  sum->sample_rmse < sum->sample_baseline_rmse ? "" : ": the model does not beat them yet");
    if (sum->best_epoch && sum->best.classes) brisk_metrics_log(&sum->best, &t->log);
    brisk_run_dir_mark_end(t, sum);
}
