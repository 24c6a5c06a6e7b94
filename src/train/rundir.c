/* Whose run a run directory holds. A new run in a directory that holds a previous run's
 * checkpoints or metrics is refused unless it continues that run (a resume was asked
 * for) or replaces it (train.overwrite, `brisk train --overwrite`), so a forgotten
 * --resume can never silently replace checkpoints. A continued run never lets a worse
 * model replace best.safetensors: the best validation loss recorded there stays the bar.
 * Each run marks its start in metrics.jsonl, so the step numbers a resumed run repeats
 * can be told apart. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train/trainer_internal.h"

/* A previous run's file: a checkpoint (last, best, step-N) or a non-empty metrics.jsonl. */
static int previous_run_file(const char *dir, const char *name) {
    size_t L = strlen(name);
    if (strcmp(name, "last.safetensors") == 0 || strcmp(name, "best.safetensors") == 0) return 1;
    if (strncmp(name, "step-", 5) == 0 && L > 17 && strcmp(name + L - 12, ".safetensors") == 0) return 1;
    if (strcmp(name, "metrics.jsonl") != 0) return 0;
    char path[BRISK_PATH_MAX + 32];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && sb.st_size > 0;
}

/* Removes (remove 1) or lists into `found` (remove 0) the previous run's files; returns
 * how many there are, or -1 (err filled) when one cannot be removed. */
static int previous_run(const char *dir, int remove, char *found, size_t cap, brisk_error *err) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    char path[BRISK_PATH_MAX + 300];
    if (found && cap) found[0] = 0;
    for (struct dirent *e; (e = readdir(d));) {
        /* event files go with the run they record, but alone do not make one */
        int events = remove && strncmp(e->d_name, "events.out.tfevents.", 20) == 0;
        if (!previous_run_file(dir, e->d_name) && !events) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove && unlink(path) != 0 && errno != ENOENT) {
            brisk_errorf(err, BRISK_ERR_IO, "%s: cannot remove it to start a new run (train.overwrite): %s", path,
                         strerror(errno));
            closedir(d);
            return -1;
        }
        if (found && n < 3)
            snprintf(found + strlen(found), cap - strlen(found), "%s%.200s", n ? ", " : "", e->d_name);
        n++;
    }
    closedir(d);
    if (found && n > 3) snprintf(found + strlen(found), cap - strlen(found), " and %d more", n - 3);
    return n;
}

/* Takes the best validation loss recorded in best.safetensors as the bar to beat. */
static void adopt_best(brisk_trainer *t) {
    char path[BRISK_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/best.safetensors", t->cfg.train.out_dir);
    if (access(path, F_OK) != 0) return;
    brisk_safetensors *st = NULL;
    brisk_ckpt_state cs;
    brisk_error e;
    if (brisk_checkpoint_open(path, &st, &e) || brisk_checkpoint_state(st, &cs, &e)) {
        brisk_log(&t->log, BRISK_LOG_WARN, "%s (the next best model replaces it)", e.msg);
    } else if (!isnan(cs.best_val) && (isnan(t->best_val) || cs.best_val < t->best_val)) {
        t->best_val = cs.best_val;
    }
    brisk_safetensors_free(st);
}

brisk_status brisk_run_dir_claim(brisk_trainer *t, brisk_error *err) {
    const char *dir = t->cfg.train.out_dir;
    char found[512];
    if (t->run_claimed) {
        adopt_best(t);
        return BRISK_OK;
    }
    int n = previous_run(dir, 0, found, sizeof found, err);
    if (n == 0) return BRISK_OK;
    if (!t->cfg.train.overwrite)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s holds a previous run (%s): %s, or choose another "
                            "train.out_dir", dir, found,
                            t->run_choices ? t->run_choices : "continue it with --resume auto, replace it with --overwrite");
    if (previous_run(dir, 1, NULL, 0, err) < 0) return BRISK_ERR_IO;
    brisk_log(&t->log, BRISK_LOG_INFO, "overwrite removed the previous run in %s (%s)", dir, found);
    return BRISK_OK;
}

/* one metrics.jsonl line: the record with the optimization list as decided so far */
static void put_with_optimizations(brisk_trainer *t, cJSON *o) {
    cJSON *opts = brisk_trainer_optimizations(t);
    if (opts) cJSON_AddItemToObject(o, "optimizations", opts);
    char *line = cJSON_PrintUnformatted(o);
    if (line) brisk_metrics_file_put(t->metrics, line);
    free(line);
}

void brisk_run_dir_mark_start(brisk_trainer *t) {
    if (!t->metrics) return;
    char when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddStringToObject(o, "event", "run_start");
    cJSON_AddStringToObject(o, "time", when);
    cJSON_AddNumberToObject(o, "step", (double)t->step);
    cJSON_AddNumberToObject(o, "epoch", (double)t->epoch);
    cJSON_AddNumberToObject(o, "samples", (double)t->samples);
    cJSON_AddNumberToObject(o, "batch_size", (double)t->cfg.train.batch_size);
    if (t->last_ckpt[0]) cJSON_AddStringToObject(o, "resumed_from", t->last_ckpt);
    else cJSON_AddNullToObject(o, "resumed_from");
    put_with_optimizations(t, o);
    cJSON_Delete(o);
}

/* The run's summary under "event": "run_end", in the key set brisk_train_run hands back
 * (brisk_run_summary_json), and the optimization list again as decided by then. */
void brisk_run_dir_mark_end(brisk_trainer *t, const brisk_run_summary *sum) {
    if (!t->metrics) return;
    cJSON *o = cJSON_CreateObject(), *s = brisk_run_summary_json(sum, NULL);
    if (o && s && cJSON_AddStringToObject(o, "event", "run_end")) {
        while (s->child) { /* "event" first, as in every other record */
            cJSON *item = cJSON_DetachItemViaPointer(s, s->child);
            if (!cJSON_AddItemToObject(o, item->string, item)) cJSON_Delete(item);
        }
        put_with_optimizations(t, o); /* again: what the run decided (the CPU's GEMM kernels per shape) */
    }
    cJSON_Delete(s);
    cJSON_Delete(o);
}
