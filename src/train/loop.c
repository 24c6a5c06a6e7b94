/* The training loop: micro-batches from the loader into the graph's inputs, one
 * schedule run each, the fused optimizer step, then logging, validation at epoch
 * ends and checkpoints. Randomness (dropout, diffusion noise) is keyed by the step
 * counter, and the loader resumes at (epoch, position), so a resumed run replays
 * the uninterrupted run's losses exactly. A stop signal (signals.c) ends the loop after
 * the step in progress, with a checkpoint; a non-finite loss stops the run or, within
 * train.skip_nan_steps, skips the update (numeric.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/system.h"
#include "train/progress.h"
#include "train/trainer_internal.h"

/* Threads decoding an image dataset's samples (data.images.workers); automatic: half of
 * brisk's thread budget (speed.threads, else OMP_NUM_THREADS, SLURM_CPUS_PER_TASK or the
 * CPUs this process may use: brisk_threads_resolve), at least 1, at most 8. Not half the
 * machine's cores: a run limited to 2 CPUs of 64 would otherwise start 8 decoders that
 * compete with the step's own threads. Other datasets copy. */
int brisk_loader_workers(const brisk_config *c) {
    if (!c->data.images.enabled) return 0;
    if (c->data.images.workers > 0) return c->data.images.workers;
    brisk_thread_plan tp;
    brisk_threads_resolve(c->speed.threads, "speed.threads", &tp);
    int n = tp.threads / 2;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}

/* Mean of the last n losses, leaving out steps skipped for a non-finite loss (numeric.c);
 * NaN when none of them is finite. */
static double tail_mean(const brisk_trainer *t, int64_t n) {
    double s = 0;
    int64_t k = 0;
    if (n > t->n_losses) n = t->n_losses;
    for (int64_t i = t->n_losses - n; i < t->n_losses; i++)
        if (isfinite(t->losses[i])) s += t->losses[i], k++;
    return k > 0 ? s / (double)k : NAN;
}

/* The same mean for each term of a loss of several parts (io.n_loss_terms; none: 0). */
static int tail_terms(const brisk_trainer *t, int64_t n, double *mean) {
    const int nt = t->io.n_loss_terms;
    if (n > t->n_losses) n = t->n_losses;
    for (int k = 0; k < nt; k++) {
        double s = 0;
        int64_t c = 0;
        for (int64_t i = t->n_losses - n; i < t->n_losses; i++) {
            float v = t->terms[i * nt + k];
            if (isfinite(t->losses[i]) && isfinite(v)) s += v, c++;
        }
        mean[k] = c > 0 ? s / (double)c : NAN;
    }
    return nt;
}

/* " (name1 v1, name2 v2)" for the loss terms; "" for one loss */
static void terms_text(const brisk_trainer *t, const double *v, int n, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s %.5f%s", i ? ", " : " (", t->io.loss_term_names[i], v[i],
                              i == n - 1 ? ")" : "");
}

/* seconds the device has spent copying batches in, or -1 without a device */
static double device_copy_s(brisk_trainer *t) {
    brisk_backend_stats s;
    brisk_error e;
    if (!t->be->stats || t->be->stats(t->be, &s, &e)) return -1;
    return s.copy_s;
}

/* The device's own copy time since *mark replaces the host's measure (which includes waiting
 * for a free staging buffer); without a device the host's stays. */
static void use_device_copy(brisk_trainer *t, brisk_time_split *s, double *mark) {
    double now = device_copy_s(t);
    if (now < 0) return;
    s->copy_s = now - *mark;
    *mark = now;
}

/* On a device that times steps itself (step.c), the last n steps' time in seconds from its
 * clock, once flushed; -1 otherwise (the host's clock then stands). The host's clock around
 * a step there would time only the issuing of its work. */
static double device_steps_s(const brisk_trainer *t, int64_t n_timed, int64_t n) {
    if (!t->dev_clock || t->n_dev_ms != n_timed || n > n_timed) return -1;
    double s = 0;
    for (int64_t i = n_timed - n; i < n_timed; i++) s += 1e-3 * t->dev_ms[i];
    return s;
}

/* What the progress line and the metrics record say of memory and the loss scaler. */
typedef struct dev_numbers {
    double mem_mib;    /* device memory in use, else the plan's size */
    double loss_scale; /* NaN: no loss scaler */
    int64_t skipped;   /* steps the loss scaler skipped */
} dev_numbers;

/* " gpu 87% 1.2/139.8 GiB" (and the loss scaler) from a device backend, else the plan's size */
static void device_status(brisk_trainer *t, char *buf, size_t n, dev_numbers *dn) {
    brisk_backend_stats s;
    brisk_error e;
    *dn = (dev_numbers){.mem_mib = brisk_plan_total_bytes(&t->plan) / 1048576.0, .loss_scale = NAN};
    if (!t->be->stats || t->be->stats(t->be, &s, &e)) {
        snprintf(buf, n, "mem %.1f MiB", dn->mem_mib);
        return;
    }
    char util[16] = "?";
    if (s.util_percent >= 0) {
        snprintf(util, sizeof util, "%d%%", s.util_percent);
        t->util_sum += s.util_percent;
        t->util_n++;
    }
    dn->mem_mib = s.mem_used / 1048576.0;
    snprintf(buf, n, "gpu %s, mem %.2f/%.1f GiB", util, s.mem_used / 1073741824.0, s.mem_total / 1073741824.0);
    if (s.loss_scale > 0) {
        dn->loss_scale = s.loss_scale, dn->skipped = s.skipped_steps;
        snprintf(buf + strlen(buf), n - strlen(buf), ", loss scale %g, %lld skipped", s.loss_scale,
                 (long long)s.skipped_steps);
    }
}

/* Where the run stands, for a driving program's progress bar (control.status). */
static void report_status(brisk_trainer *t, int epoch_ended, int64_t done, int64_t end, double t_start) {
    const brisk_train_spec *tr = &t->cfg.train;
    double elapsed = brisk_now() - t_start;
    int64_t per_step = brisk_trainer_global_batch(t) * tr->accumulate;
    int64_t epochs = tr->max_steps < 0 ? tr->epochs : 0;
    if (!epochs && t->split.ntrain > 0)
        epochs = (t->total_steps * per_step + t->split.ntrain - 1) / t->split.ntrain;
    brisk_progress p = {.step = t->step, .total_steps = t->total_steps,
                        .epoch = epoch_ended ? t->epoch : t->epoch + 1, .epochs = epochs,
                        .loss = tail_mean(t, tr->log_every),
                        .samples_per_s = elapsed > 0 ? (double)(per_step * done) / elapsed : 0,
                        .elapsed_s = elapsed, .eta_s = done > 0 ? elapsed / (double)done * (double)(end - t->step) : -1};
    if (p.epoch > p.epochs) p.epochs = p.epoch;
    t->control.status(t->control.user, &p);
}

/* One number of a metrics.jsonl record, printed with fmt (NaN: null, or left out when
 * optional). */
typedef struct metric {
    const char *key, *fmt;
    double v;
    int optional;
} metric;

/* Appends a record {"step": .., "epoch": .. (order: first), metrics..., extra} to
 * metrics.jsonl and puts each number, as printed there, into the event file under its key:
 * a value read back from either is the same float. */
static void record(brisk_trainer *t, int epoch_first, const metric *m, int n, const char *extra) {
    if (!t->metrics) return;
    char line[8192], num[64];
    size_t k = (size_t)snprintf(line, sizeof line, epoch_first ? "{\"epoch\": %lld, \"step\": %lld"
                                                               : "{\"step\": %lld, \"epoch\": %lld",
                                (long long)(epoch_first ? t->epoch : t->step),
                                (long long)(epoch_first ? t->step : t->epoch));
    for (int i = 0; i < n && k < sizeof line; i++) {
        if (isfinite(m[i].v)) snprintf(num, sizeof num, m[i].fmt, m[i].v);
        else if (m[i].optional) continue;
        else snprintf(num, sizeof num, "null");
        k += (size_t)snprintf(line + k, sizeof line - k, ", \"%s\": %s", m[i].key, num);
        if (isfinite(m[i].v)) brisk_tboard_scalar(t->tboard, t->step, m[i].key, strtod(num, NULL));
    }
    char *rec = malloc(k + (extra ? strlen(extra) : 0) + 2);
    if (!rec) return;
    sprintf(rec, "%s%s}", line, extra ? extra : "");
    brisk_metrics_file_put(t->metrics, rec);
    free(rec);
}

/* Histograms of every parameter into the event file (log.histogram_every). */
static void param_histograms(brisk_trainer *t) {
    size_t n = (size_t)t->g->n_param_floats;
    float *host = malloc(n * sizeof(float) + 1);
    brisk_error e;
    if (!host || t->be->download(t->be, host, t->ex->params, n * sizeof(float), &e)) {
        brisk_log(&t->log, BRISK_LOG_WARN, "tensorboard: parameter histograms at step %lld left out: %s",
                  (long long)t->step, host ? e.msg : "out of memory");
        free(host);
        return;
    }
    char tag[BRISK_NAME_MAX + 16];
    for (int i = 0; i < t->g->n_params; i++) {
        const brisk_param_info *p = &t->g->params[i];
        snprintf(tag, sizeof tag, "params/%s", p->name);
        brisk_tboard_histogram(t->tboard, t->step, tag, host + p->offset, p->numel);
    }
    free(host);
}

/* The event file beside metrics.jsonl (log.tensorboard), with the config and the
 * optimization report as texts at the run's first step. */
static void open_tboard(brisk_trainer *t) {
    if (t->tboard || !t->cfg.log.tensorboard) return;
    if (!(t->tboard = brisk_tboard_open(t->cfg.train.out_dir, &t->log))) return;
    brisk_tboard_text(t->tboard, t->step, "config", t->cfg.json ? t->cfg.json : "");
    brisk_tboard_text(t->tboard, t->step, "optimization", t->active_report);
    brisk_tboard_flush(t->tboard);
}

static void *pinned_alloc(void *user, size_t bytes) {
    brisk_backend *be = user;
    return be->host_alloc(be, bytes);
}

static void pinned_free(void *user, void *ptr, size_t bytes) {
    (void)bytes;
    brisk_backend *be = user;
    be->host_free(be, ptr);
}

/* Hands the device loss scaler's skip count to the numeric-fault accounting (numeric.c). */
static void scaler_skips(brisk_trainer *t) {
    brisk_backend_stats bs;
    brisk_error ignored;
    if (t->be->stats && !t->be->stats(t->be, &bs, &ignored) && bs.skipped_steps > t->scaler_skipped)
        brisk_trainer_add_scaler_skips(t, bs.skipped_steps - t->scaler_skipped);
}

/* A stop signal (signals.c), or a stop the driving program asked for (control.c). */
static int stop_pending(const brisk_trainer *t) {
    if (t->world > 1) return t->agreed_stop; /* every rank stops after the same step (dist.c) */
    return brisk_trainer_stop_asked(t);
}

/* This run's validations: its own best, beside the trainer's best over all the run's parts. */
typedef struct run_val {
    int rounds;                /* validations this run made */
    int best_here;             /* the trainer's best was reached in this run */
    double loss, max_accuracy; /* this run's best (NaN: none) */
    brisk_val_metrics best;    /* at this run's best loss */
    int64_t best_epoch;
} run_val;

/* Validates the current weights at an epoch's end, or (mid 1) at the end of a run whose last
 * epoch was cut short (train.max_steps inside an epoch), so that such a run too has a
 * validation loss and a best.safetensors; logs and records the result and keeps the best. */
static brisk_status validate_now(brisk_trainer *t, run_val *rv, int64_t epoch_steps, int mid, int write_best,
                                 double *train_loss, brisk_error *err) {
    brisk_val_metrics vm;
    double v0 = brisk_now();
    brisk_status st = brisk_validate(t, &vm, err);
    t->validation_s += brisk_now() - v0;
    if (st) return st;
    double vl = vm.loss, va = vm.accuracy;
    *train_loss = tail_mean(t, epoch_steps);
    rv->rounds++;
    int better = !isnan(vl) && (isnan(t->best_val) || vl < t->best_val);
    if (better) {
        t->best_val = vl, rv->best_here = 1;
        t->best_at = (brisk_best_at){t->epoch, t->step, mid, va, vm.mae, vm.rmse, vm.px_error, vm.pck,
                                     t->best_at.max_accuracy};
    }
    if (!isnan(va) && !(va <= t->best_at.max_accuracy)) t->best_at.max_accuracy = va;
    if (!isnan(vl) && !(vl >= rv->loss)) rv->loss = vl, rv->best = vm, rv->best_epoch = t->epoch;
    if (!isnan(va) && !(va <= rv->max_accuracy)) rv->max_accuracy = va;
    char vtxt[1024] = "", ttxt[512], vterms[512];
    double et[BRISK_LOSS_LOG_WIDTH];
    terms_text(t, et, tail_terms(t, epoch_steps, et), ttxt, sizeof ttxt);
    terms_text(t, vm.loss_terms, vm.n_loss_terms, vterms, sizeof vterms);
    if (!isnan(vl)) snprintf(vtxt, sizeof vtxt, "  val loss %.5f%s", vl, vterms);
    if (!isnan(va)) snprintf(vtxt + strlen(vtxt), sizeof vtxt - strlen(vtxt), "  val accuracy %.4f", va);
    if (!isnan(vm.mae))
        snprintf(vtxt + strlen(vtxt), sizeof vtxt - strlen(vtxt), "  val MAE %.4g RMSE %.4g", vm.mae, vm.rmse);
    if (!isnan(vm.px_error)) /* image keypoints: the MAE above is in fractions of the sample */
        snprintf(vtxt + strlen(vtxt), sizeof vtxt - strlen(vtxt), " (fractions of the image)  keypoint error "
                 "%.4g px  PCK@%g %.4f", vm.px_error, BRISK_PCK_FRACTION, vm.pck);
    if (mid)
        brisk_log(&t->log, BRISK_LOG_INFO, "validation at the run's end, step %lld, %lld steps into epoch %lld  train "
                  "loss %.5f%s%s%s", (long long)t->step, (long long)epoch_steps, (long long)t->epoch + 1, *train_loss,
                  ttxt, vtxt, better ? "  (best)" : "");
    else
        brisk_log(&t->log, BRISK_LOG_INFO, "epoch %lld done  train loss %.5f%s%s%s", (long long)t->epoch, *train_loss,
                  ttxt, vtxt, better ? "  (best)" : "");
    char abuf[4096] = "";
    if (mid) snprintf(abuf, sizeof abuf, ", \"mid_epoch\": true");
    if (!isnan(vl)) brisk_metrics_json(&vm, abuf + strlen(abuf), sizeof abuf - strlen(abuf));
    metric m[2 + 2 * BRISK_LOSS_LOG_WIDTH] = {{"train_loss", "%.7g", *train_loss, 0}, {"val_loss", "%.7g", vl, 0}};
    char keys[2 * BRISK_LOSS_LOG_WIDTH][80];
    int nm = 2;
    for (int k = 0; k < t->io.n_loss_terms; k++) { /* each term: train_loss/NAME, val_loss/NAME */
        snprintf(keys[2 * k], sizeof keys[0], "train_loss/%s", t->io.loss_term_names[k]);
        m[nm++] = (metric){keys[2 * k], "%.7g", et[k], 1};
        snprintf(keys[2 * k + 1], sizeof keys[0], "val_loss/%s", t->io.loss_term_names[k]);
        m[nm++] = (metric){keys[2 * k + 1], "%.7g", k < vm.n_loss_terms ? vm.loss_terms[k] : NAN, 1};
    }
    record(t, 1, m, nm, abuf);
    /* the validation metrics' scalars as metrics.jsonl prints them (brisk_metrics_json) */
    if (!isnan(vl)) {
        const char *key[] = {"val_accuracy", "val_mae", "val_rmse", "val_px_error", "val_pck"};
        double v[] = {vm.accuracy, vm.mae, vm.rmse, vm.px_error, vm.pck};
        char num[32];
        for (int i = 0; i < 5; i++)
            if (isfinite(v[i]) && (i == 0) == (vm.classes != 0))
                snprintf(num, sizeof num, "%.6g", v[i]), brisk_tboard_scalar(t->tboard, t->step, key[i], strtod(num, NULL));
    }
    brisk_tboard_flush(t->tboard);
    return write_best && better ? brisk_rotation_save_best(t, err) : BRISK_OK;
}

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

/* A run from a config that ends inside an epoch (train.max_steps) validates once more at its
 * last step, so that it has a validation loss and best.safetensors; not a stopped one (it must
 * be quick; the caller checks), nor a program's run of some steps (it validates when it chooses). */
static int validates_at_end(const brisk_trainer *t, int64_t epoch_steps, int64_t max_new_steps) {
    return epoch_steps > 0 && t->from_files && max_new_steps == 0 && t->step == t->total_steps &&
           brisk_trainer_val_count(t) > 0;
}

brisk_status brisk_trainer_run(brisk_trainer *t, brisk_run_summary *sum, brisk_error *err) {
    return brisk_trainer_run_steps(t, 0, sum, err);
}

brisk_status brisk_trainer_run_more(brisk_trainer *t, int64_t steps, int epoch_start, brisk_run_summary *sum,
                                    brisk_error *err) {
    if (steps < 1) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld steps to train; expected at least 1", t->cfg.path,
                                       (long long)steps);
    /* The data may have changed since the last run: a position past the new epoch's last
     * batch starts the next epoch, as one at the end of an epoch would. */
    if ((epoch_start && t->position != 0) || t->position + brisk_trainer_global_batch(t) > t->split.ntrain)
        t->epoch++, t->position = 0;
    if (!t->schedule_steps) t->schedule_steps = t->total_steps ? t->total_steps : steps;
    t->total_steps = t->step + steps;
    return brisk_trainer_run_steps(t, 0, sum, err);
}

brisk_status brisk_trainer_run_steps(brisk_trainer *t, int64_t max_new_steps, brisk_run_summary *sum,
                                     brisk_error *err) {
    const brisk_train_spec *tr = &t->cfg.train;
    const int K = tr->accumulate;
    const int when_due = t->control.checkpoint_when_due;
    const int64_t B = tr->batch_size;
    memset(sum, 0, sizeof *sum);
    t->loader_failed = 0;
    /* a resume (after set_dist) sets it: the ranks must stand at the same place */
    brisk_status st = brisk_dist_check_position(t, err);
    if (st) return st;
    if (t->batches_per_epoch == 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no training data yet", t->cfg.path);
    /* train.out_dir "" (the library API's default): no files, no checkpoints. */
    const int files = tr->out_dir[0] != 0;
    if (files && (st = brisk_trainer_open_run_dir(t, err))) return st;
    /* a config's out_dir "" is a choice whose cost (no checkpoint) shows only when the run is lost */
    if (!files && t->rank == 0 && !t->no_files_told++)
        brisk_log(&t->log, t->from_files ? BRISK_LOG_WARN : BRISK_LOG_INFO, "checkpoints off: train.out_dir is \"\": "
                  "no checkpoints, metrics.jsonl, report or event file; a stop or a failure loses this run's work");
    char path[BRISK_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->out_dir);
    if (files && t->rank == 0 && !t->metrics) {
        if ((st = brisk_metrics_file_open(&t->metrics, path, &t->log, err))) return st;
        brisk_run_dir_mark_start(t);
    }
    brisk_trainer_note_skips(t);
    if (files && t->rank == 0) open_tboard(t);

    brisk_loader_config lc = {.dataset = &t->data, .indices = t->split.train, .nindices = t->split.ntrain,
                              .batch_size = B, .seed = tr->seed, .shuffle = t->cfg.data.shuffle,
                              .start_epoch = t->epoch, .start_position = t->position,
                              .prefetch = t->cfg.speed.prefetch, .workers = brisk_loader_workers(&t->cfg),
                              .episodes = t->episodes.k > 0 ? &t->episodes : NULL,
                              .shard_rank = t->rank, .shard_count = t->data_shards};
    /* a device backend's pinned memory: batches go to it by DMA on its copy stream */
    if (t->be->host_alloc && t->be->host_free && t->cfg.speed.prefetch > 0)
        lc.allocator = (brisk_host_allocator){.alloc = pinned_alloc, .free = pinned_free, .user = t->be};
    brisk_loader *l = NULL;
    if ((st = brisk_loader_create(&l, &lc, err))) return st;
    if ((st = brisk_step_setup(t, err))) {
        brisk_loader_destroy(l);
        return st;
    }

    int64_t end = t->total_steps;
    if (max_new_steps > 0 && t->step + max_new_steps < end) end = t->step + max_new_steps;
    int64_t todo = end - t->step;
    double *step_times = malloc(sizeof(double) * (size_t)(todo > 0 ? todo : 1));
    double t_start = brisk_now(), last_epoch_loss = NAN;
    const double ckpt_s0 = t->checkpoint_s, val_s0 = t->validation_s; /* this run's share of each */
    const int64_t ckpt_n0 = t->checkpoints_written;
    /* the run's and the progress window's time split; marks of the device's copy counter */
    brisk_time_split run = {0}, win = {0};
    double run_copy_mark = device_copy_s(t), win_copy_mark = run_copy_mark;
    int64_t epoch_steps = 0, n_timed = 0;
    int epochs_done = 0, stop_sig = 0, cut = 0; /* cut: the stop abandoned a step in progress */
    double last_status = 0; /* brisk_now() of the last control.status call */
    /* a program drawing its own progress (control.status) gets the progress lines at debug level */
    const brisk_log_level progress_level = t->control.status ? BRISK_LOG_DEBUG : BRISK_LOG_INFO;
    int64_t step_epoch = t->epoch, step_position = t->position; /* where the step in progress began */
    const int cuttable = brisk_step_cuttable(t);
    sum->best_val_loss = sum->best_val_accuracy = NAN;
    brisk_metrics_reset(&sum->best, 0);
    run_val rv = {.loss = NAN, .max_accuracy = NAN};
    int save_at_end = 0; /* the last step's checkpoint waits for the validation at the run's end */
    if (!step_times) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }

    while (t->step < end && !(stop_sig = stop_pending(t))) {
        double t0 = brisk_now(), wait = 0, c0 = t->copy_s;
        int epoch_ended = 0;
        if ((st = brisk_step_begin(t, err))) goto out;
        if (t->prof && (st = brisk_profile_step_begin(t, err))) goto out;
        step_epoch = t->epoch, step_position = t->position;
        /* sched_shift: the schedule's position by samples seen, after a resume at another batch size */
        float lr = brisk_schedule_lr(&t->cfg.optim, t->step + t->sched_shift,
                                     (t->schedule_steps ? t->schedule_steps : t->total_steps) + t->sched_shift);
        for (int micro = 0; micro < K; micro++) {
            /* a stop cuts the step short: its other micro-batches are not run, and update()
             * abandons it (on several ranks, at their agreement: every rank alike) */
            if (cuttable && brisk_trainer_stop_asked(t)) {
                brisk_dist_overlap_stand_in(t);
                break;
            }
            brisk_batch b;
            if ((st = brisk_loader_next(l, &b, err))) {
                t->epoch = step_epoch, t->position = step_position; /* the step's batches are not consumed */
                t->loader_failed = 1;
                goto out;
            }
            wait += b.wait_s;
            st = brisk_step_micro(t, &b, micro, err);
            if (!st) st = brisk_sample_dump(t, &b, err);
            epoch_ended |= b.next_epoch != b.epoch;
            t->epoch = b.next_epoch;
            t->position = b.next_position;
            brisk_loader_release(l, &b);
            if (st) goto out;
        }
        if ((st = brisk_step_update(t, lr, err))) goto out;
        if ((stop_sig = t->step_abandoned)) { /* nothing of the step was applied, nor its batches consumed */
            t->step_abandoned = 0, cut = 1;
            t->epoch = step_epoch, t->position = step_position;
            break;
        }
        if (t->prof && (st = brisk_profile_step_end(t, err))) goto out;
        t->step++;
        t->samples += brisk_trainer_global_batch(t) * K;
        /* the checkpoint's staging, once the step has mapped what its libraries keep (OpenBLAS's
         * buffers, the threads' malloc arenas): held from here, or the run stops now */
        if (!t->ckpt_stage && (st = brisk_checkpoint_reserve(t, err))) goto out;
        brisk_trainer_note_skips(t);
        double dt = brisk_now() - t0, copy = t->copy_s - c0;
        step_times[n_timed++] = dt;
        brisk_time_split_add(&run, dt, wait, copy);
        brisk_time_split_add(&win, dt, wait, copy);
        epoch_steps++;

        int log_now = t->step % tr->log_every == 0 || t->step == t->total_steps;
        int hist_now = t->tboard && t->cfg.log.histogram_every && t->step % t->cfg.log.histogram_every == 0;
        /* device losses are read here, every log_every steps (and at epoch ends) */
        if ((log_now || epoch_ended || hist_now || t->step == end) && (st = brisk_step_flush(t, err))) goto out;
        if (log_now) {
            use_device_copy(t, &win, &win_copy_mark);
            const double dev_s = device_steps_s(t, n_timed, win.steps);
            if (dev_s >= 0) win.step_s = dev_s;
            const int64_t win_n = win.steps;
            const double win_time = win.step_s, ms = 1e3 * win_time / (double)win_n, wl = tail_mean(t, win_n);
            char dev[160], eta[64], tl[512];
            double tv[BRISK_LOSS_LOG_WIDTH];
            const int nt = tail_terms(t, win_n, tv);
            terms_text(t, tv, nt, tl, sizeof tl);
            dev_numbers dn;
            device_status(t, dev, sizeof dev, &dn);
            brisk_format_eta(brisk_now() - t_start, n_timed, end - t->step, eta, sizeof eta);
            char ranks[64] = "";
            if (t->world > 1) /* the loss is the ranks' mean; the speed is this rank's */
                snprintf(ranks, sizeof ranks, " (x %d ranks, %.0f per rank)", t->world, (double)(B * K) * win_n / win_time);
            const double data_ms = 1e3 * win.data_s / (double)win_n, copy_ms = 1e3 * win.copy_s / (double)win_n;
            const double compute_ms = 1e3 * brisk_time_split_compute_s(&win) / (double)win_n;
            brisk_log(&t->log, progress_level,
                      "epoch %lld  step %lld/%lld  loss %.5f%s  lr %.2e  %.0f samples/s%s  %.3f ms/step (data %.3f, copy %.3f, "
                      "compute %.3f)  %s  %s",
                      (long long)(epoch_ended ? t->epoch : t->epoch + 1), (long long)t->step, (long long)t->total_steps,
                      wl, tl, lr, (double)(B * K) * t->world * win_n / win_time, ranks, ms, data_ms, copy_ms, compute_ms, dev, eta);
            /* a window of skipped steps only has no loss: null */
            metric m[10 + BRISK_LOSS_LOG_WIDTH] = {{"loss", "%.9g", wl, 0}, {"lr", "%.7g", lr, 0}, {"ms_per_step", "%.4f", ms, 0},
                                {"data_ms", "%.4f", data_ms, 0},
                                {"samples_per_s", "%.1f", (double)(B * K) * win_n / win_time, 0},
                                {"copy_ms", "%.4f", copy_ms, 0}, {"compute_ms", "%.4f", compute_ms, 0},
                                {"mem_mib", "%.2f", dn.mem_mib, 0}, {"loss_scale", "%.9g", dn.loss_scale, 1},
                                {"skipped_steps", "%.0f", isnan(dn.loss_scale) ? NAN : (double)dn.skipped, 1}};
            char keys[BRISK_LOSS_LOG_WIDTH][80];
            int nm = 10;
            for (int k = 0; k < nt; k++) { /* "loss/NAME": TensorBoard groups them under loss */
                snprintf(keys[k], sizeof keys[k], "loss/%s", t->io.loss_term_names[k]);
                m[nm++] = (metric){keys[k], "%.9g", tv[k], 0};
            }
            record(t, 0, m, nm, NULL);
            if (t->control.progress) t->control.progress(t->control.user, t->step, t->total_steps, wl);
            win = (brisk_time_split){0};
            scaler_skips(t);
            brisk_numeric_check_scaler(t, n_timed);
        }
        if (hist_now) param_histograms(t);
        if (t->control.status && (log_now || t->step == end || brisk_now() - last_status >= 0.1)) {
            report_status(t, epoch_ended, n_timed, end, t_start);
            last_status = brisk_now();
        }
        if (epoch_ended) {
            if ((st = validate_now(t, &rv, epoch_steps, 0, files && !when_due, &last_epoch_loss, err))) goto out;
            epochs_done++;
            epoch_steps = 0;
        }
        /* After validation, so that a checkpoint at an epoch's end carries its result
         * (a run resumed from it must know the best loss so far); at the last step of a run
         * that validates at its end, after that validation, for the same reason. */
        if (files && brisk_rotation_due(t, epoch_ended)) {
            if (validates_at_end(t, epoch_steps, max_new_steps)) save_at_end = 1;
            else if ((st = brisk_step_flush(t, err)) || (st = brisk_rotation_save(t, err))) goto out;
        }
    }
    st = brisk_step_flush(t, err);
    if (!st && !stop_sig && validates_at_end(t, epoch_steps, max_new_steps))
        st = validate_now(t, &rv, epoch_steps, 1, files && !when_due, &last_epoch_loss, err);
    if (!st && files && (!when_due || stop_sig || save_at_end)) st = brisk_rotation_save(t, err);
    scaler_skips(t);
    brisk_numeric_check_scaler(t, n_timed);
    /* several ranks: rank 0 reports the stop every rank made at this step, by its own signal
     * where one reached it (perhaps after the agreement: stop_sig then is a stand-in) */
    const int mine = t->world > 1 ? brisk_trainer_stop_asked(t) : stop_sig;
    const char *why = mine ? brisk_signal_name(mine) : "a stop signal on another rank";
    char where[96] = "";
    if (cut) snprintf(where, sizeof where, " (step %lld, in progress, was cut short and not applied)", (long long)t->step + 1);
    if (!st && stop_sig && t->rank != 0)
        ;
    else if (!st && stop_sig && !files)
        brisk_log(&t->log, BRISK_LOG_WARN, "stopped by %s after step %lld%s (no checkpoint: train.out_dir is \"\")",
                  why, (long long)t->step, where);
    else if (!st && stop_sig)
        brisk_log(&t->log, BRISK_LOG_WARN, "stopped by %s after step %lld%s%s: checkpoint %s written%s",
                  why, (long long)t->step, t->world > 1 ? " on every rank" : "", where, t->last_ckpt,
                  t->control.stop_requested ? "" : "; run the same command with --resume auto to continue");
    /* Several ranks stopped by a signal meet once more, after rank 0 has written the
     * checkpoint and said so: a rank that exits first with status 75 makes mpirun end the
     * job, rank 0's checkpoint and line with it (dist.train_mpi_signal under ASan, CI). */
    if (!st && stop_sig && t->world > 1) {
        double one = 1.0;
        st = brisk_dist_allreduce_sum(t->dist, &one, 1, "the ranks' meeting after a stop", t->step + 1, err);
    }
out:
    if (st && files && brisk_dist_failed(t->dist)) {
        t->epoch = step_epoch, t->position = step_position; /* the failed step's batch is not consumed */
        brisk_dist_last_checkpoint(t, err);
    } else if (st && files && t->loader_failed) { /* unreadable data mid-run: keep the work done */
        brisk_error ignored;
        brisk_step_flush(t, &ignored);
        brisk_trainer_note_skips(t);
        brisk_dist_last_checkpoint(t, err);
    }
    if (!st) st = brisk_step_flush(t, err);
    /* the wall time ends when the device has done this run's work */
    if (!st && t->dev_clock && t->be->sync) st = t->be->sync(t->be, err);
    else if (st && t->be->sync) {
        brisk_error ignored;
        t->be->sync(t->be, &ignored); /* nothing of this run may still be running on the device */
    }
    brisk_loader_destroy(l);
    /* a diffusion run's summary scores samples of its validation fields against the trivial
     * downscaling (a model can learn to denoise and still sample worse than the coarse blocks) */
    int64_t sampled = 0;
    sum->sample_rmse = sum->sample_baseline_rmse = NAN;
    if (!st && !stop_sig && t->from_files && max_new_steps == 0 && t->rank == 0) {
        double v0 = brisk_now();
        st = brisk_sample_score_validation(t, &sum->sample_rmse, &sum->sample_baseline_rmse, &sampled, err);
        t->validation_s += brisk_now() - v0;
    }
    if (!st) {
        sum->steps = t->step;
        sum->stopped_by_signal = stop_sig;
        sum->nan_skipped = t->nan_skipped;
        sum->scaler_skipped = t->scaler_skipped;
        snprintf(sum->checkpoint, sizeof sum->checkpoint, "%s", t->last_ckpt);
        sum->epochs_done = epochs_done;
        /* the run's best over all its parts (what best.safetensors holds), and this run's own */
        sum->best_val_loss = t->best_val;
        sum->best_val_accuracy = t->best_at.max_accuracy;
        sum->best_epoch = isnan(t->best_val) || t->best_at.epoch < 0 ? 0 : (int)t->best_at.epoch;
        sum->best_before_run = !isnan(t->best_val) && !rv.best_here;
        sum->run_best_val_loss = rv.loss;
        sum->run_best_val_accuracy = rv.max_accuracy;
        if (rv.best_here) sum->best = rv.best;
        else sum->best.loss = t->best_val, sum->best.accuracy = t->best_at.accuracy, sum->best.mae = t->best_at.mae,
             sum->best.rmse = t->best_at.rmse, sum->best.px_error = t->best_at.px_error,
             sum->best.pck = t->best_at.pck; /* per-class counts are not kept in checkpoints */
        sum->final_loss = epoch_steps ? tail_mean(t, epoch_steps) : last_epoch_loss;
        sum->wall_s = brisk_now() - t_start;
        use_device_copy(t, &run, &run_copy_mark);
        sum->data_wait_s = run.data_s;
        sum->copy_s = run.copy_s;
        sum->compute_s = brisk_time_split_compute_s(&run);
        sum->checkpoint_s = t->checkpoint_s - ckpt_s0;
        sum->validation_s = t->validation_s - val_s0;
        sum->checkpoints = t->checkpoints_written - ckpt_n0;
        sum->gpu_util = t->util_n ? t->util_sum / t->util_n : -1.0;
        /* the step statistics from the device's clock where it has one (its times replace
         * the host's, whose sum is the compute split's step time too) */
        const double dev_s = device_steps_s(t, n_timed, n_timed);
        const int dev_times = dev_s >= 0;
        sum->host_ms_per_step_median = NAN;
        if (dev_times) {
            brisk_step_stats host; /* sorts the host's times, which the device's replace next */
            brisk_step_stats_of(step_times, n_timed, &host);
            sum->host_ms_per_step_median = host.median_ms;
            for (int64_t i = 0; i < n_timed; i++) step_times[i] = 1e-3 * t->dev_ms[i];
            run.step_s = dev_s;
            sum->compute_s = brisk_time_split_compute_s(&run);
        }
        snprintf(sum->step_clock, sizeof sum->step_clock, dev_times ? "device events (%s)" : "host clock",
                 t->be->name);
        if (t->dev_clock && !dev_times) /* never expected: say that these times only time the issuing */
            brisk_log(&t->log, BRISK_LOG_WARN, "the device timed %lld of this run's %lld steps; the step times below "
                      "are the host's, which time only the issuing of the work", (long long)t->n_dev_ms,
                      (long long)n_timed);
        /* On a device the first steps set up (cuDNN plans, the eager warm-up, the capture):
         * hundreds of ms that say nothing about the machine's load, so the judgement of
         * stability leaves them out (the statistics keep them). */
        int64_t warm = !dev_times ? 0 : t->graph && t->programs_ready ? t->eager_steps + 1 : 1;
        if (warm > n_timed) warm = n_timed;
        brisk_step_stats steady;
        brisk_step_stats_of(step_times + warm, n_timed - warm, &steady); /* sorts that tail only */
        brisk_step_stats ss;
        brisk_step_stats_of(step_times, n_timed, &ss);
        ss.unstable = steady.unstable;
        sum->steps_run = n_timed;
        sum->ms_per_step_median = ss.median_ms;
        sum->ms_per_step_mean = ss.mean_ms;
        sum->ms_per_step_p95 = ss.p95_ms;
        sum->ms_per_step_max = ss.max_ms;
        sum->samples_per_s = ss.total_s > 0 ? (double)(B * K * t->world) * (double)n_timed / ss.total_s : 0;
        sum->gflop_per_step = 1e-9 * brisk_plan_train_flops(t->g, &t->plan) * (double)K;
        sum->gflops = ss.total_s > 0 ? sum->gflop_per_step * (double)n_timed / ss.total_s : 0;
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
        char huge_txt[200] = "";
        if (strcmp(t->be->name, "cpu") == 0) { /* its big buffers asked for 2 MiB pages */
            char h[160];
            if (brisk_backend_cpu_huge_pages(h, sizeof h, NULL) >= 0) snprintf(huge_txt, sizeof huge_txt, "; %s", h);
        }
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
        best_text(t, &rv, stop_sig, val, sizeof val);
        brisk_log(&t->log, BRISK_LOG_INFO,
                  BRISK_SUMMARY_HEAD "   %lld step%s in %.2f s (%d epoch%s)%s\n"
                  "  train loss        %.5f (last epoch)\n"
                  "  best val loss     %s\n"
                  "  speed             %.0f samples/s over the run%s; %.3f ms/step median, %.3f p95, %.3f mean\n"
                  "  arithmetic        %.3g GFLOP a step (matrix products), %.1f GFLOP/s sustained\n"
                  "  step times        %s%s\n"
                  "  time              data wait %.2f s (%.1f%%), copy to device %.2f s (%.1f%%), compute %.2f s (%.1f%%), other %.2f s%s\n"
                  "  memory            %.2f MiB planned (activations %.2f MiB)%s\n"
                  "  checkpoints       %s%s%s",
                  (long long)n_timed, n_timed == 1 ? "" : "s", sum->wall_s, epochs_done, epochs_done == 1 ? "" : "s",
                  n_timed == t->step ? "" : resumed, sum->final_loss, val, sum->samples_per_s, ranks_txt, ss.median_ms, ss.p95_ms,
                  ss.mean_ms, sum->gflop_per_step, sum->gflops, sum->step_clock, host_txt, sum->data_wait_s, 100 * sum->data_wait_s / w, sum->copy_s, 100 * sum->copy_s / w, sum->compute_s,
                  100 * sum->compute_s / w, sum->wall_s - sum->data_wait_s - sum->copy_s - sum->compute_s, other, sum->total_bytes / 1048576.0, sum->arena_bytes / 1048576.0, huge_txt,
                  files ? tr->out_dir : "none (train.out_dir is \"\")", files ? "/last.safetensors" : "",
                  !files || when_due || isnan(t->best_val) ? "" : ", best.safetensors");
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
        if (strcmp(t->be->name, "cpu") == 0) {
            char gemm[600];
            brisk_cpu_gemm_describe(gemm, sizeof gemm);
            brisk_log(&t->log, BRISK_LOG_INFO, "  GEMM kernel       per shape: %s", gemm);
            if (brisk_backend_cpu_pool_note(t->be, gemm, sizeof gemm) > 0)
                brisk_log(&t->log, BRISK_LOG_INFO, "  CPU pool          %s", gemm);
        }
        if (sampled)
            brisk_log(&t->log, BRISK_LOG_INFO, "  samples           RMSE %.4f to the validation fields (one DDPM sample each, "
                      "from the coarse blocks; %lld rows); the coarse block values' %.4f%s", sum->sample_rmse,
                      (long long)sampled, sum->sample_baseline_rmse,
                      sum->sample_rmse < sum->sample_baseline_rmse ? "" : ": the model does not beat them yet");
        if (sum->best_epoch && sum->best.classes) brisk_metrics_log(&sum->best, &t->log);
        brisk_run_dir_mark_end(t, sum);
    }
    brisk_tboard_flush(t->tboard);
    free(step_times);
    return st;
}
