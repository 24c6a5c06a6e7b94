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
#include "report/progress.h"
#include "train/loop_internal.h"

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

double brisk_loop_tail_mean(const brisk_trainer *t, int64_t n) {
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

void brisk_loop_use_device_copy(brisk_trainer *t, brisk_time_split *s, double *mark) {
    double now = device_copy_s(t);
    if (now < 0) return;
    s->copy_s = now - *mark;
    *mark = now;
}

double brisk_loop_device_steps_s(const brisk_trainer *t, int64_t n_timed, int64_t n) {
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
                        .loss = brisk_loop_tail_mean(t, tr->log_every),
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
    *train_loss = brisk_loop_tail_mean(t, epoch_steps);
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

/* Everything a run needs before its first step: the ranks at one place, the run directory
 * with metrics.jsonl and the event file, the loader, the step's device state. On failure
 * nothing of it is left open. */
static brisk_status run_open(brisk_trainer *t, int64_t max_new_steps, run_state *rs, brisk_run_summary *sum,
                             brisk_error *err) {
    const brisk_train_spec *tr = &t->cfg.train;
    memset(rs, 0, sizeof *rs);
    memset(sum, 0, sizeof *sum);
    t->loader_failed = 0;
    /* a resume (after set_dist) sets it: the ranks must stand at the same place */
    brisk_status st = brisk_dist_check_position(t, err);
    if (st) return st;
    if (t->batches_per_epoch == 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no training data yet", t->cfg.path);
    /* train.out_dir "" (the library API's default): no files, no checkpoints. */
    rs->files = tr->out_dir[0] != 0;
    if (rs->files && (st = brisk_trainer_open_run_dir(t, err))) return st;
    /* a config's out_dir "" is a choice whose cost (no checkpoint) shows only when the run is lost */
    if (!rs->files && t->rank == 0 && !t->no_files_told++)
        brisk_log(&t->log, t->from_files ? BRISK_LOG_WARN : BRISK_LOG_INFO, "checkpoints off: train.out_dir is \"\": "
                  "no checkpoints, metrics.jsonl, report or event file; a stop or a failure loses this run's work");
    brisk_loader_config lc = {.dataset = &t->data, .indices = t->split.train, .nindices = t->split.ntrain,
                              .batch_size = tr->batch_size, .seed = tr->seed, .shuffle = t->cfg.data.shuffle,
                              .start_epoch = t->epoch, .start_position = t->position,
                              .prefetch = t->cfg.speed.prefetch, .workers = brisk_loader_workers(&t->cfg),
                              .episodes = t->episodes.k > 0 ? &t->episodes : NULL,
                              .shard_rank = t->rank, .shard_count = t->data_shards};
    /* a device backend's pinned memory: batches go to it by DMA on its copy stream */
    if (t->be->host_alloc && t->be->host_free && t->cfg.speed.prefetch > 0)
        lc.allocator = (brisk_host_allocator){.alloc = pinned_alloc, .free = pinned_free, .user = t->be};
    if ((st = brisk_loader_create(&rs->l, &lc, err))) return st;
    if ((st = brisk_step_setup(t, err))) {
        brisk_loader_destroy(rs->l);
        return st;
    }
    /* metrics.jsonl and the event file only now, when nothing stands between the run and its
     * first step: a run refused or failed before it leaves the directory's record (and so
     * the report brisk train writes from it) as the previous run left it */
    char path[BRISK_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->out_dir);
    if (rs->files && t->rank == 0 && !t->metrics) {
        if ((st = brisk_metrics_file_open(&t->metrics, path, &t->log, err))) {
            brisk_loader_destroy(rs->l);
            return st;
        }
        brisk_run_dir_mark_start(t);
    }
    brisk_trainer_note_skips(t);
    if (rs->files && t->rank == 0) open_tboard(t);
    rs->max_new_steps = max_new_steps;
    rs->end = t->total_steps;
    if (max_new_steps > 0 && t->step + max_new_steps < rs->end) rs->end = t->step + max_new_steps;
    int64_t todo = rs->end - t->step;
    if (!(rs->step_times = malloc(sizeof(double) * (size_t)(todo > 0 ? todo : 1)))) {
        brisk_loader_destroy(rs->l);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    }
    rs->when_due = t->control.checkpoint_when_due;
    rs->t_start = brisk_now(), rs->last_epoch_loss = NAN;
    rs->ckpt_s0 = t->checkpoint_s, rs->val_s0 = t->validation_s, rs->ckpt_n0 = t->checkpoints_written;
    rs->run_copy_mark = rs->win_copy_mark = device_copy_s(t);
    /* a program drawing its own progress (control.status) gets the progress lines at debug level */
    rs->progress_level = t->control.status ? BRISK_LOG_DEBUG : BRISK_LOG_INFO;
    rs->step_epoch = t->epoch, rs->step_position = t->position;
    rs->cuttable = brisk_step_cuttable(t);
    sum->best_val_loss = sum->best_val_accuracy = NAN;
    brisk_metrics_reset(&sum->best, 0);
    rs->rv = (run_val){.loss = NAN, .max_accuracy = NAN};
    return BRISK_OK;
}

/* One optimizer step: its micro-batches forward and backward, the update, the timing. A stop
 * that abandons the step sets rs->stop_sig and rs->cut (nothing of it applied). */
static brisk_status run_step(brisk_trainer *t, run_state *rs, brisk_error *err) {
    const int K = t->cfg.train.accumulate;
    double t0 = brisk_now(), wait = 0, c0 = t->copy_s;
    brisk_status st;
    rs->epoch_ended = 0;
    if ((st = brisk_step_begin(t, err))) return st;
    if (t->prof && (st = brisk_profile_step_begin(t, err))) return st;
    rs->step_epoch = t->epoch, rs->step_position = t->position;
    /* sched_shift: the schedule's position by samples seen, after a resume at another batch size */
    rs->lr = brisk_schedule_lr(&t->cfg.optim, t->step + t->sched_shift,
                               (t->schedule_steps ? t->schedule_steps : t->total_steps) + t->sched_shift);
    for (int micro = 0; micro < K; micro++) {
        /* a stop cuts the step short: its other micro-batches are not run, and update()
         * abandons it (on several ranks, at their agreement: every rank alike) */
        if (rs->cuttable && brisk_trainer_stop_asked(t)) {
            brisk_dist_overlap_stand_in(t);
            break;
        }
        brisk_batch b;
        if ((st = brisk_loader_next(rs->l, &b, err))) {
            t->epoch = rs->step_epoch, t->position = rs->step_position; /* the step's batches are not consumed */
            t->loader_failed = 1;
            return st;
        }
        wait += b.wait_s;
        st = brisk_step_micro(t, &b, micro, err);
        if (!st) st = brisk_sample_dump(t, &b, err);
        rs->epoch_ended |= b.next_epoch != b.epoch;
        t->epoch = b.next_epoch;
        t->position = b.next_position;
        brisk_loader_release(rs->l, &b);
        if (st) return st;
    }
    if ((st = brisk_step_update(t, rs->lr, err))) return st;
    if ((rs->stop_sig = t->step_abandoned)) { /* nothing of the step was applied, nor its batches consumed */
        t->step_abandoned = 0, rs->cut = 1;
        t->epoch = rs->step_epoch, t->position = rs->step_position;
        return BRISK_OK;
    }
    if (t->prof && (st = brisk_profile_step_end(t, err))) return st;
    t->step++;
    t->samples += brisk_trainer_global_batch(t) * K;
    /* the checkpoint's staging, once the step has mapped what its libraries keep (OpenBLAS's
     * buffers, the threads' malloc arenas): held from here, or the run stops now */
    if (!t->ckpt_stage && (st = brisk_checkpoint_reserve(t, err))) return st;
    brisk_trainer_note_skips(t);
    double dt = brisk_now() - t0, copy = t->copy_s - c0;
    rs->step_times[rs->n_timed++] = dt;
    brisk_time_split_add(&rs->run, dt, wait, copy);
    brisk_time_split_add(&rs->win, dt, wait, copy);
    rs->epoch_steps++;
    return BRISK_OK;
}

/* The progress line of the last log_every steps, and its metrics.jsonl and event records. */
static void log_progress(brisk_trainer *t, run_state *rs) {
    const int64_t B = t->cfg.train.batch_size, K = t->cfg.train.accumulate;
    brisk_time_split *win = &rs->win;
    brisk_loop_use_device_copy(t, win, &rs->win_copy_mark);
    const double dev_s = brisk_loop_device_steps_s(t, rs->n_timed, win->steps);
    if (dev_s >= 0) win->step_s = dev_s;
    const int64_t win_n = win->steps;
    const double win_time = win->step_s, ms = 1e3 * win_time / (double)win_n, wl = brisk_loop_tail_mean(t, win_n);
    char dev[160], eta[64], tl[512];
    double tv[BRISK_LOSS_LOG_WIDTH];
    const int nt = tail_terms(t, win_n, tv);
    terms_text(t, tv, nt, tl, sizeof tl);
    dev_numbers dn;
    device_status(t, dev, sizeof dev, &dn);
    brisk_format_eta(brisk_now() - rs->t_start, rs->n_timed, rs->end - t->step, eta, sizeof eta);
    char ranks[64] = "";
    if (t->world > 1) /* the loss is the ranks' mean; the speed is this rank's */
        snprintf(ranks, sizeof ranks, " (x %d ranks, %.0f per rank)", t->world, (double)(B * K) * win_n / win_time);
    const double data_ms = 1e3 * win->data_s / (double)win_n, copy_ms = 1e3 * win->copy_s / (double)win_n;
    const double compute_ms = 1e3 * brisk_time_split_compute_s(win) / (double)win_n;
    brisk_log(&t->log, rs->progress_level,
              "epoch %lld  step %lld/%lld  loss %.5f%s  lr %.2e  %.0f samples/s%s  %.3f ms/step (data %.3f, copy %.3f, "
              "compute %.3f)  %s  %s",
              (long long)(rs->epoch_ended ? t->epoch : t->epoch + 1), (long long)t->step, (long long)t->total_steps,
              wl, tl, rs->lr, (double)(B * K) * t->world * win_n / win_time, ranks, ms, data_ms, copy_ms, compute_ms,
              dev, eta);
    /* a window of skipped steps only has no loss: null */
    metric m[10 + BRISK_LOSS_LOG_WIDTH] = {{"loss", "%.9g", wl, 0}, {"lr", "%.7g", rs->lr, 0}, {"ms_per_step", "%.4f", ms, 0},
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
    *win = (brisk_time_split){0};
    scaler_skips(t);
    brisk_numeric_check_scaler(t, rs->n_timed);
}

/* After a step: progress, histograms, the program's status, validation at an epoch's end,
 * and a checkpoint when one is due. */
static brisk_status after_step(brisk_trainer *t, run_state *rs, brisk_error *err) {
    const brisk_train_spec *tr = &t->cfg.train;
    brisk_status st;
    int log_now = t->step % tr->log_every == 0 || t->step == t->total_steps;
    int hist_now = t->tboard && t->cfg.log.histogram_every && t->step % t->cfg.log.histogram_every == 0;
    /* device losses are read here, every log_every steps (and at epoch ends) */
    if ((log_now || rs->epoch_ended || hist_now || t->step == rs->end) && (st = brisk_step_flush(t, err))) return st;
    if (log_now) log_progress(t, rs);
    if (hist_now) param_histograms(t);
    if (t->control.status && (log_now || t->step == rs->end || brisk_now() - rs->last_status >= 0.1)) {
        report_status(t, rs->epoch_ended, rs->n_timed, rs->end, rs->t_start);
        rs->last_status = brisk_now();
    }
    if (rs->epoch_ended) {
        if ((st = validate_now(t, &rs->rv, rs->epoch_steps, 0, rs->files && !rs->when_due, &rs->last_epoch_loss, err)))
            return st;
        rs->epochs_done++;
        rs->epoch_steps = 0;
    }
    /* After validation, so that a checkpoint at an epoch's end carries its result
     * (a run resumed from it must know the best loss so far); at the last step of a run
     * that validates at its end, after that validation, for the same reason. */
    if (rs->files && brisk_rotation_due(t, rs->epoch_ended)) {
        if (validates_at_end(t, rs->epoch_steps, rs->max_new_steps)) rs->save_at_end = 1;
        else if ((st = brisk_step_flush(t, err)) || (st = brisk_rotation_save(t, err))) return st;
    }
    return BRISK_OK;
}

/* The loop has ended without an error: validation at the end of a run cut mid-epoch, the last
 * checkpoint, and what a stop by a signal says. */
static brisk_status run_finish(brisk_trainer *t, run_state *rs, brisk_error *err) {
    brisk_status st = brisk_step_flush(t, err);
    if (!st && !rs->stop_sig && validates_at_end(t, rs->epoch_steps, rs->max_new_steps))
        st = validate_now(t, &rs->rv, rs->epoch_steps, 1, rs->files && !rs->when_due, &rs->last_epoch_loss, err);
    if (!st && rs->files && (!rs->when_due || rs->stop_sig || rs->save_at_end)) st = brisk_rotation_save(t, err);
    scaler_skips(t);
    brisk_numeric_check_scaler(t, rs->n_timed);
    if (st || !rs->stop_sig) return st;
    /* several ranks: rank 0 reports the stop every rank made at this step, by its own signal
     * where one reached it (perhaps after the agreement: stop_sig then is a stand-in) */
    const int mine = t->world > 1 ? brisk_trainer_stop_asked(t) : rs->stop_sig;
    const char *why = mine ? brisk_signal_name(mine) : "a stop signal on another rank";
    char where[96] = "";
    if (rs->cut)
        snprintf(where, sizeof where, " (step %lld, in progress, was cut short and not applied)", (long long)t->step + 1);
    if (t->rank != 0)
        ;
    else if (!rs->files)
        brisk_log(&t->log, BRISK_LOG_WARN, "stopped by %s after step %lld%s (no checkpoint: train.out_dir is \"\")",
                  why, (long long)t->step, where);
    else
        brisk_log(&t->log, BRISK_LOG_WARN, "stopped by %s after step %lld%s%s: checkpoint %s written%s",
                  why, (long long)t->step, t->world > 1 ? " on every rank" : "", where, t->last_ckpt,
                  t->control.stop_requested ? "" : "; run the same command with --resume auto to continue");
    /* Several ranks stopped by a signal meet once more, after rank 0 has written the
     * checkpoint and said so: a rank that exits first with status 75 makes mpirun end the
     * job, rank 0's checkpoint and line with it (dist.train_mpi_signal under ASan, CI). */
    if (t->world > 1) {
        double one = 1.0;
        st = brisk_dist_allreduce_sum(t->dist, &one, 1, "the ranks' meeting after a stop", t->step + 1, err);
    }
    return st;
}

/* After the loop, with or without an error st: the work done kept where a failure allows
 * (a checkpoint of the last whole step), the device idle, the loader gone. */
static brisk_status run_close(brisk_trainer *t, run_state *rs, brisk_status st, brisk_error *err) {
    if (st && rs->files && brisk_dist_failed(t->dist)) {
        t->epoch = rs->step_epoch, t->position = rs->step_position; /* the failed step's batch is not consumed */
        brisk_dist_last_checkpoint(t, err);
    } else if (st && rs->files && t->loader_failed) { /* unreadable data mid-run: keep the work done */
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
    brisk_loader_destroy(rs->l);
    return st;
}

brisk_status brisk_trainer_run_steps(brisk_trainer *t, int64_t max_new_steps, brisk_run_summary *sum,
                                     brisk_error *err) {
    run_state rs;
    brisk_status st = run_open(t, max_new_steps, &rs, sum, err);
    if (st) return st;
    while (t->step < rs.end && !(rs.stop_sig = stop_pending(t))) {
        if ((st = run_step(t, &rs, err)) || rs.stop_sig) break;
        if ((st = after_step(t, &rs, err))) break;
    }
    if (!st) st = run_finish(t, &rs, err);
    st = run_close(t, &rs, st, err);
    /* a diffusion run's summary scores samples of its validation fields against the trivial
     * downscaling (a model can learn to denoise and still sample worse than the coarse blocks) */
    int64_t sampled = 0;
    sum->sample_rmse = sum->sample_baseline_rmse = NAN;
    if (!st && !rs.stop_sig && t->from_files && max_new_steps == 0 && t->rank == 0) {
        double v0 = brisk_now();
        st = brisk_sample_score_validation(t, &sum->sample_rmse, &sum->sample_baseline_rmse, &sampled, err);
        t->validation_s += brisk_now() - v0;
    }
    if (!st) brisk_loop_summarize(t, &rs, sum, sampled);
    brisk_tboard_flush(t->tboard);
    free(rs.step_times);
    return st;
}
