/* The training loop: micro-batches from the loader into the graph's inputs, one
 * schedule run each, the fused optimizer step, then logging, validation at epoch
 * ends and checkpoints. Randomness (dropout, diffusion noise) is keyed by the step
 * counter, and the loader resumes at (epoch, position), so a resumed run replays
 * the uninterrupted run's losses exactly. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/trainer_internal.h"

/* Validation runs use counter values far from training's, so they never share noise
 * with a training step and give the same loss every epoch for the same weights. */
#define EVAL_RNG_BASE 0xF0000000u

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static brisk_status mkdirs(const char *path, brisk_error *err) {
    char buf[BRISK_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST)
            return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
    return BRISK_OK;
}

static brisk_status feed(brisk_trainer *t, const brisk_batch *b, brisk_error *err) {
    for (int i = 0; i < t->io.n_fields; i++) {
        brisk_status st = brisk_exec_set_input(t->ex, t->io.input_node[i], b->fields[t->field_of_input[i]].data, err);
        if (st) return st;
    }
    return BRISK_OK;
}

static brisk_status push_loss(brisk_trainer *t, float loss, brisk_error *err) {
    if (t->n_losses == t->cap_losses) {
        int64_t cap = t->cap_losses ? 2 * t->cap_losses : 1024;
        float *p = realloc(t->losses, (size_t)cap * sizeof *p);
        if (!p) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        t->losses = p;
        t->cap_losses = cap;
    }
    t->losses[t->n_losses++] = loss;
    return BRISK_OK;
}

/* Mean loss, and the metrics of metrics.c, over the validation split. */
static brisk_status validate(brisk_trainer *t, brisk_val_metrics *m, brisk_error *err) {
    const brisk_model_spec *ms = &t->cfg.model;
    int classify = ms->type != BRISK_MODEL_DIFFUSION && ms->task == BRISK_TASK_CLASSIFY;
    int regress = ms->type != BRISK_MODEL_DIFFUSION && ms->task == BRISK_TASK_REGRESS;
    brisk_metrics_reset(m, classify ? (int)ms->outputs : 0);
    int64_t B = t->cfg.train.batch_size;
    if (t->split.nval < B) return BRISK_OK;
    int yf = 0; /* the target's dataset field */
    for (int i = 0; i < t->io.n_fields; i++)
        if (strcmp(t->io.fields[i].name, "y") == 0) yf = t->field_of_input[i];
    brisk_loader_config lc = {.dataset = &t->data, .indices = t->split.val, .nindices = t->split.nval,
                              .batch_size = B, .seed = t->cfg.train.seed, .shuffle = 0, .prefetch = 0};
    brisk_loader *l = NULL;
    brisk_status st = brisk_loader_create(&l, &lc, err);
    if (st) return st;
    int64_t nb = brisk_loader_batches_per_epoch(l);
    int64_t C = ms->outputs;
    float *logits = classify || regress ? malloc(sizeof(float) * (size_t)(B * C)) : NULL;
    double sum = 0;
    brisk_step_state saved = t->ex->step;
    for (int64_t i = 0; i < nb && !st; i++) {
        brisk_batch b;
        if ((st = brisk_loader_next(l, &b, err))) break;
        t->ex->step.rng_step = EVAL_RNG_BASE + (uint32_t)i;
        float v = 0;
        if (!(st = feed(t, &b, err)) && !(st = brisk_exec_run(t->ex, BRISK_RUN_EVAL, err)) &&
            !(st = brisk_exec_read(t->ex, t->io.loss, &v, err))) {
            sum += v;
            if ((classify || regress) && !(st = brisk_exec_read(t->ex, t->io.output, logits, err))) {
                if (classify) brisk_metrics_add_classes(m, logits, b.fields[yf].data, B, C);
                else brisk_metrics_add_values(m, logits, b.fields[yf].data, B * C);
            }
        }
        brisk_loader_release(l, &b);
    }
    t->ex->step = saved;
    brisk_loader_destroy(l);
    free(logits);
    if (st) return st;
    brisk_metrics_finish(m, sum / (double)nb);
    return BRISK_OK;
}

static void ckpt_path(const brisk_trainer *t, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s.safetensors", t->cfg.train.out_dir, name);
}

brisk_status brisk_trainer_run(brisk_trainer *t, brisk_run_summary *sum, brisk_error *err) {
    return brisk_trainer_run_steps(t, 0, sum, err);
}

brisk_status brisk_trainer_run_steps(brisk_trainer *t, int64_t max_new_steps, brisk_run_summary *sum,
                                     brisk_error *err) {
    const brisk_train_spec *tr = &t->cfg.train;
    const int K = tr->accumulate;
    const int64_t B = tr->batch_size;
    memset(sum, 0, sizeof *sum);
    brisk_status st = mkdirs(tr->out_dir, err);
    if (st) return st;
    char path[BRISK_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/metrics.jsonl", tr->out_dir);
    if (!t->metrics && !(t->metrics = fopen(path, "a")))
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));

    brisk_loader_config lc = {.dataset = &t->data, .indices = t->split.train, .nindices = t->split.ntrain,
                              .batch_size = B, .seed = tr->seed, .shuffle = t->cfg.data.shuffle,
                              .start_epoch = t->epoch, .start_position = t->position,
                              .prefetch = t->cfg.speed.prefetch};
    brisk_loader *l = NULL;
    if ((st = brisk_loader_create(&l, &lc, err))) return st;

    int64_t end = t->total_steps;
    if (max_new_steps > 0 && t->step + max_new_steps < end) end = t->step + max_new_steps;
    int64_t todo = end - t->step;
    double *step_times = malloc(sizeof(double) * (size_t)(todo > 0 ? todo : 1));
    double t_start = brisk_now(), wait_total = 0, compute_total = 0, win_loss = 0, win_wait = 0, win_time = 0;
    double epoch_loss = 0, last_epoch_loss = NAN;
    int64_t epoch_steps = 0, win_n = 0, n_timed = 0;
    int epochs_done = 0;
    sum->best_val_loss = sum->best_val_accuracy = NAN;
    brisk_metrics_reset(&sum->best, 0);
    if (!step_times) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }

    while (t->step < end) {
        double t0 = brisk_now(), wait = 0, loss = 0;
        int epoch_ended = 0;
        for (int micro = 0; micro < K; micro++) {
            brisk_batch b;
            if ((st = brisk_loader_next(l, &b, err))) goto out;
            wait += b.wait_s;
            t->ex->step.seed = tr->seed;
            t->ex->step.rng_step = (uint32_t)(t->step * K + micro);
            t->ex->step.first_micro = micro == 0;
            t->ex->step.training = 1;
            float v = 0;
            st = feed(t, &b, err);
            if (!st) st = brisk_exec_run(t->ex, BRISK_RUN_TRAIN, err);
            if (!st) st = brisk_exec_read(t->ex, t->io.loss, &v, err);
            epoch_ended |= b.next_epoch != b.epoch;
            t->epoch = b.next_epoch;
            t->position = b.next_position;
            brisk_loader_release(l, &b);
            if (st) goto out;
            loss += v;
        }
        loss /= K;
        if (!isfinite(loss)) {
            st = brisk_errorf(err, BRISK_ERR_NUMERIC,
                              "step %lld: the training loss is %s; the last checkpoint is %s/last.safetensors; "
                              "try a lower optim.lr, optim.clip_norm, or check the data",
                              (long long)t->step + 1, isnan(loss) ? "NaN" : "infinite", tr->out_dir);
            goto out;
        }
        float lr = brisk_schedule_lr(&t->cfg.optim, t->step, t->total_steps);
        if ((st = brisk_optimizer_step(&t->opt, t->step + 1, lr, K, err))) goto out;
        t->step++;
        double dt = brisk_now() - t0;
        step_times[n_timed++] = dt;
        wait_total += wait;
        compute_total += dt - wait;
        if ((st = push_loss(t, (float)loss, err))) goto out;
        win_loss += loss, win_wait += wait, win_time += dt, win_n++;
        epoch_loss += loss, epoch_steps++;

        if (t->step % tr->log_every == 0 || t->step == t->total_steps) {
            double ms = 1e3 * win_time / (double)win_n;
            brisk_log(&t->log, BRISK_LOG_INFO,
                      "epoch %lld  step %lld/%lld  loss %.5f  lr %.2e  %.0f samples/s  %.3f ms/step (data %.3f, compute %.3f)  mem %.1f MiB",
                      (long long)(epoch_ended ? t->epoch : t->epoch + 1), (long long)t->step, (long long)t->total_steps,
                      win_loss / (double)win_n, lr, (double)(B * K) * win_n / win_time, ms,
                      1e3 * win_wait / (double)win_n, ms - 1e3 * win_wait / (double)win_n,
                      brisk_plan_total_bytes(&t->plan) / 1048576.0);
            fprintf(t->metrics, "{\"step\": %lld, \"epoch\": %lld, \"loss\": %.7g, \"lr\": %.7g, \"ms_per_step\": %.4f, "
                    "\"data_ms\": %.4f, \"samples_per_s\": %.1f}\n",
                    (long long)t->step, (long long)t->epoch, win_loss / (double)win_n, lr, ms,
                    1e3 * win_wait / (double)win_n, (double)(B * K) * win_n / win_time);
            win_loss = win_wait = win_time = 0, win_n = 0;
        }
        if (tr->checkpoint_every > 0 && t->step % tr->checkpoint_every == 0) {
            ckpt_path(t, "last", path, sizeof path);
            if ((st = brisk_checkpoint_save(t, path, err))) goto out;
        }
        if (epoch_ended) {
            brisk_val_metrics vm;
            if ((st = validate(t, &vm, err))) goto out;
            double vl = vm.loss, va = vm.accuracy;
            epochs_done++;
            last_epoch_loss = epoch_loss / (double)epoch_steps;
            int better = !isnan(vl) && (isnan(t->best_val) || vl < t->best_val);
            if (better) t->best_val = vl;
            if (!isnan(vl) && (isnan(sum->best_val_loss) || vl < sum->best_val_loss)) {
                sum->best_val_loss = vl;
                sum->best = vm;
                sum->best_epoch = (int)t->epoch;
            }
            if (!isnan(va) && (isnan(sum->best_val_accuracy) || va > sum->best_val_accuracy)) sum->best_val_accuracy = va;
            char vtxt[128] = "";
            if (!isnan(vl)) snprintf(vtxt, sizeof vtxt, "  val loss %.5f", vl);
            if (!isnan(va)) snprintf(vtxt + strlen(vtxt), sizeof vtxt - strlen(vtxt), "  val accuracy %.4f", va);
            if (!isnan(vm.mae))
                snprintf(vtxt + strlen(vtxt), sizeof vtxt - strlen(vtxt), "  val MAE %.4g RMSE %.4g", vm.mae, vm.rmse);
            brisk_log(&t->log, BRISK_LOG_INFO, "epoch %lld done  train loss %.5f%s%s", (long long)t->epoch,
                      last_epoch_loss, vtxt, better ? "  (best)" : "");
            char vbuf[32] = "null", abuf[4096] = "";
            if (!isnan(vl)) snprintf(vbuf, sizeof vbuf, "%.7g", vl);
            if (!isnan(vl)) brisk_metrics_json(&vm, abuf, sizeof abuf);
            fprintf(t->metrics, "{\"epoch\": %lld, \"step\": %lld, \"train_loss\": %.7g, \"val_loss\": %s%s}\n",
                    (long long)t->epoch, (long long)t->step, last_epoch_loss, vbuf, abuf);
            fflush(t->metrics);
            if (better) {
                ckpt_path(t, "best", path, sizeof path);
                if ((st = brisk_checkpoint_save(t, path, err))) goto out;
            }
            epoch_loss = 0, epoch_steps = 0;
        }
    }
    ckpt_path(t, "last", path, sizeof path);
    st = brisk_checkpoint_save(t, path, err);
out:
    brisk_loader_destroy(l);
    if (!st) {
        sum->steps = t->step;
        sum->epochs_done = epochs_done;
        sum->final_loss = epoch_steps ? epoch_loss / (double)epoch_steps : last_epoch_loss;
        sum->wall_s = brisk_now() - t_start;
        sum->data_wait_s = wait_total;
        sum->compute_s = compute_total;
        if (n_timed) {
            qsort(step_times, (size_t)n_timed, sizeof step_times[0], cmp_double);
            sum->ms_per_step_median = 1e3 * step_times[n_timed / 2];
            sum->samples_per_s = (double)(B * K) / step_times[n_timed / 2];
        }
        sum->arena_bytes = t->plan.arena_bytes;
        sum->total_bytes = brisk_plan_total_bytes(&t->plan);
        sum->params = brisk_model_param_count(&t->cfg.model);
        double w = sum->wall_s > 0 ? sum->wall_s : 1;
        char val[160] = "none (no validation split)";
        if (!isnan(sum->best_val_loss)) snprintf(val, sizeof val, "%.5f (epoch %d)", sum->best_val_loss, sum->best_epoch);
        if (!isnan(sum->best_val_accuracy))
            snprintf(val + strlen(val), sizeof val - strlen(val), ", best val accuracy %.4f", sum->best_val_accuracy);
        if (!isnan(sum->best.mae))
            snprintf(val + strlen(val), sizeof val - strlen(val), ", MAE %.5g, RMSE %.5g", sum->best.mae, sum->best.rmse);
        brisk_log(&t->log, BRISK_LOG_INFO,
                  "\nsummary   %lld steps in %.2f s (%d epochs this run)\n"
                  "  train loss        %.5f (last epoch)\n"
                  "  best val loss     %s\n"
                  "  speed             %.3f ms/step median, %.0f samples/s\n"
                  "  time              data wait %.2f s (%.1f%%), compute %.2f s (%.1f%%), other %.2f s\n"
                  "  memory            %.2f MiB planned (activations %.2f MiB)\n"
                  "  checkpoints       %s/last.safetensors%s",
                  (long long)sum->steps, sum->wall_s, epochs_done, sum->final_loss, val, sum->ms_per_step_median,
                  sum->samples_per_s, wait_total, 100 * wait_total / w, compute_total, 100 * compute_total / w,
                  sum->wall_s - wait_total - compute_total, sum->total_bytes / 1048576.0, sum->arena_bytes / 1048576.0,
                  tr->out_dir, isnan(t->best_val) ? "" : ", best.safetensors");
        if (sum->best_epoch && sum->best.classes) brisk_metrics_log(&sum->best, &t->log);
    }
    if (t->metrics) fflush(t->metrics);
    free(step_times);
    return st;
}
