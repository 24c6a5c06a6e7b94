/* The run directory's checkpoints: last.safetensors, and beside it the newest
 * train.keep_checkpoints numbered ones (step-NNNNNNNN.safetensors), so that a damaged
 * last still leaves an intact earlier one. Each numbered checkpoint is written once
 * (atomically: brisk_safetensors_write) and last.safetensors becomes a second name of
 * the same file (a hard link renamed into place), so rotation costs no second write;
 * where the filesystem has no hard links, last is written again.
 *
 * The order of operations is what makes a crash anywhere harmless: the numbered file is
 * complete before last points at it, and older numbered files are removed only after
 * both. A crash leaves at worst a stale temporary file (removed when the next trainer
 * locks the directory) or last one checkpoint behind the newest numbered file, which
 * --resume auto finds anyway: it takes the newest intact checkpoint by the step recorded
 * inside, not by name. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/bytes.h"
#include "train/trainer_internal.h"

#define TMP_MARK ".safetensors.tmp."

/* "step-00000042.safetensors" -> 42; -1 for any other name. */
static int64_t numbered_step(const char *name) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *p = name + 5;
    int64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 18; p++, digits++) v = v * 10 + (*p - '0');
    return digits && strcmp(p, ".safetensors") == 0 ? v : -1;
}

/* Temporary files of writers that died: only the lock holder writes here, so any left
 * over belongs to a process that is gone. */
static void remove_stale_tmp(const char *dir, const brisk_logger *log) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[BRISK_PATH_MAX + 300];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, TMP_MARK)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) brisk_log(log, BRISK_LOG_INFO, "cleanup   removed %s, left by an interrupted write", path);
    }
    closedir(d);
}

brisk_status brisk_trainer_open_run_dir(brisk_trainer *t, brisk_error *err) {
    if (t->run_dir_ready || t->rank != 0) return BRISK_OK; /* rank 0 alone owns the run directory */
    const char *dir = t->cfg.train.out_dir;
    brisk_status st = brisk_run_dir_check_place(t, err);
    if (!st) st = brisk_mkdirs(dir, err);
    if (!st) st = brisk_run_dir_lock(dir, &t->lock_fd, &t->log, err);
    if (st) return st;
    remove_stale_tmp(dir, &t->log);
    if ((st = brisk_run_dir_claim(t, err))) {
        brisk_run_dir_unlock(t->lock_fd);
        t->lock_fd = -1;
        return st;
    }
    t->run_dir_ready = 1;
    t->last_save_time = brisk_now();
    return BRISK_OK;
}

/* Makes `dst` a second name of `src`, atomically. *unsupported is set when the
 * filesystem has no hard links (the caller writes a copy instead). */
static brisk_status link_into_place(const char *src, const char *dst, int *unsupported, brisk_error *err) {
    char tmp[BRISK_PATH_MAX + 96];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid());
    unlink(tmp);
    *unsupported = 0;
    if (link(src, tmp) != 0) {
        int e = errno;
        if (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == EXDEV || e == EMLINK || e == ENOSYS) {
            *unsupported = 1;
            return BRISK_OK;
        }
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot link %s to it: %s", dst, src, strerror(e));
    }
    if (rename(tmp, dst) != 0) {
        int e = errno;
        unlink(tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot rename %s over it: %s", dst, tmp, strerror(e));
    }
    return brisk_fsync_parent_dir(dst, err);
}

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Keeps the newest `keep` numbered checkpoints up to step `now`; removes older ones and
 * any numbered past `now` (left by a timeline this run abandoned by resuming from an
 * earlier checkpoint, which --resume auto would otherwise pick). Failures only warn:
 * an extra file costs disk space, not work. */
static void prune(const char *dir, int keep, int64_t now, const brisk_logger *log) {
    DIR *d = opendir(dir);
    if (!d) return;
    int64_t *steps = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int64_t s = numbered_step(e->d_name);
        if (s < 0) continue;
        if (n == cap) {
            size_t c = cap ? 2 * cap : 16;
            int64_t *p = realloc(steps, c * sizeof *p);
            if (!p) { /* not knowing them all, remove none */
                free(steps), closedir(d);
                return;
            }
            steps = p, cap = c;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (n) qsort(steps, n, sizeof *steps, cmp_desc);
    char path[BRISK_PATH_MAX + 64];
    int kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (steps[i] <= now && kept < keep) { kept++; continue; }
        snprintf(path, sizeof path, "%s/step-%08" PRId64 ".safetensors", dir, steps[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            brisk_log(log, BRISK_LOG_WARN, "%s: cannot remove an old checkpoint: %s", path, strerror(errno));
    }
    free(steps);
}

int brisk_rotation_due(brisk_trainer *t, int epoch_ended) {
    const brisk_train_spec *tr = &t->cfg.train;
    if (tr->checkpoint_every > 0 && t->step % tr->checkpoint_every == 0) return 1;
    if (epoch_ended && tr->checkpoint_epochs > 0 && t->epoch % tr->checkpoint_epochs == 0) return 1;
    if (t->world > 1) return t->agreed_due; /* rank 0's clock, agreed at the step (dist.c) */
    return tr->checkpoint_minutes > 0 && brisk_now() - t->last_save_time >= 60.0 * tr->checkpoint_minutes;
}

/* Says what a failed write leaves: the newest checkpoint that is still intact. */
static brisk_status not_completed(const brisk_trainer *t, const char *what, brisk_error *err) {
    char prev[BRISK_PATH_MAX + 128] = "no checkpoint was written before it";
    if (t->last_ckpt[0])
        snprintf(prev, sizeof prev, "the newest intact checkpoint is %s (step %" PRId64 ")", t->last_ckpt,
                 t->last_ckpt_step);
    return brisk_error_prefix(err, "%s at step %" PRId64 " not completed; %s", what, t->step, prev);
}

brisk_status brisk_rotation_save_best(brisk_trainer *t, brisk_error *err) {
    brisk_status gs = brisk_dist_gather_moments(t, err); /* on every rank: a collective */
    if (gs || t->rank != 0) return gs;
    char path[BRISK_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/best.safetensors", t->cfg.train.out_dir);
    brisk_status st = brisk_trainer_open_run_dir(t, err);
    if (!st && (st = brisk_checkpoint_save(t, path, err))) return not_completed(t, "best checkpoint", err);
    return st;
}

brisk_status brisk_rotation_save(brisk_trainer *t, brisk_error *err) {
    if (t->last_saved_step == t->step) return BRISK_OK;
    brisk_status gs = brisk_dist_gather_moments(t, err); /* on every rank: a collective */
    if (gs) return gs;
    if (t->rank != 0) { /* rank 0 writes it; every rank must skip the same steps */
        t->last_saved_step = t->step;
        return BRISK_OK;
    }
    /* the event file's records up to this step reach the disk first (metrics.jsonl is written as
     * it goes): a run killed after this checkpoint keeps its curves up to it */
    brisk_tboard_flush(t->tboard);
    const char *dir = t->cfg.train.out_dir;
    int keep = t->cfg.train.keep_checkpoints;
    char last[BRISK_PATH_MAX + 64], numbered[BRISK_PATH_MAX + 64];
    snprintf(last, sizeof last, "%s/last.safetensors", dir);
    snprintf(numbered, sizeof numbered, "%s/step-%08" PRId64 ".safetensors", dir, t->step);
    brisk_status st = brisk_trainer_open_run_dir(t, err);
    if (st) return st;
    if (keep <= 0) {
        st = brisk_checkpoint_save(t, last, err);
    } else if (!(st = brisk_checkpoint_save(t, numbered, err))) {
        snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", numbered);
        t->last_ckpt_step = t->step;
        int unsupported;
        st = link_into_place(numbered, last, &unsupported, err);
        if (!st && unsupported) st = brisk_checkpoint_save(t, last, err);
    }
    if (st) return not_completed(t, "checkpoint", err);
    t->last_saved_step = t->step;
    t->last_save_time = brisk_now();
    snprintf(t->last_ckpt, sizeof t->last_ckpt, "%s", last);
    t->last_ckpt_step = t->step;
    if (keep > 0) prune(dir, keep, t->step, &t->log);
    return BRISK_OK;
}

brisk_status brisk_checkpoint_find_latest(const char *dir, const brisk_logger *log, char *path, size_t cap,
                                          int64_t *step, int *found, brisk_error *err) {
    *found = 0;
    *step = -1;
    int64_t *nums = NULL;
    size_t n = 0, ncap = 0;
    int have_last = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return BRISK_OK;
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot list the run directory: %s", dir, strerror(errno));
    }
    for (struct dirent *e; (e = readdir(d));) {
        int64_t s = numbered_step(e->d_name);
        have_last |= strcmp(e->d_name, "last.safetensors") == 0;
        if (s < 0) continue;
        if (n == ncap) {
            size_t c = ncap ? 2 * ncap : 16;
            int64_t *p = realloc(nums, c * sizeof *p);
            if (!p) {
                closedir(d), free(nums);
                return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory listing checkpoints", dir);
            }
            nums = p, ncap = c;
        }
        nums[n++] = s;
    }
    closedir(d);
    if (n) qsort(nums, n, sizeof *nums, cmp_desc);
    /* last first (usually the newest), then numbered files newest first, as long as their
     * names promise a step beyond the best found so far. */
    char cand[BRISK_PATH_MAX + 64], first_bad[sizeof err->msg] = "";
    int bad = 0;
    brisk_error e2;
    for (size_t i = have_last ? 0 : 1; i <= n; i++) {
        if (i == 0) snprintf(cand, sizeof cand, "%s/last.safetensors", dir);
        else if (*found && nums[i - 1] <= *step) break;
        else snprintf(cand, sizeof cand, "%s/step-%08" PRId64 ".safetensors", dir, nums[i - 1]);
        int64_t s = -1;
        brisk_status st = brisk_checkpoint_check(cand, &s, &e2);
        if (st && !brisk_checkpoint_damaged(st)) { /* out of memory, I/O: not the file's fault */
            free(nums);
            if (err) *err = e2;
            return st;
        }
        if (st) {
            brisk_log(log, BRISK_LOG_WARN, "skipping a damaged checkpoint: %s", e2.msg);
            if (!bad++) snprintf(first_bad, sizeof first_bad, "%s", e2.msg);
            continue;
        }
        if (!*found || s > *step) {
            *found = 1;
            *step = s;
            snprintf(path, cap, "%s", cand);
        }
    }
    free(nums);
    /* best.safetensors is a whole checkpoint too, and may be the newest (written at an
     * epoch's end that no other checkpoint followed) */
    snprintf(cand, sizeof cand, "%s/best.safetensors", dir);
    int64_t s = -1;
    brisk_status bst = access(cand, F_OK) == 0 ? brisk_checkpoint_check(cand, &s, &e2) : BRISK_OK;
    if (bst && !brisk_checkpoint_damaged(bst)) {
        if (err) *err = e2;
        return bst;
    }
    if (bst) {
        brisk_log(log, BRISK_LOG_WARN, "skipping a damaged checkpoint: %s", e2.msg);
        if (!bad++) snprintf(first_bad, sizeof first_bad, "%s", e2.msg);
    } else if (s >= 0 && (!*found || s > *step)) {
        *found = 1;
        *step = s;
        snprintf(path, cap, "%s", cand);
    }
    if (!*found && bad)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no intact checkpoint to resume from (%d damaged; the first: %s); "
                            "move them away to start afresh", dir, bad, first_bad);
    return BRISK_OK;
}

brisk_status brisk_trainer_resume_auto(brisk_trainer *t, int *resumed, brisk_error *err) {
    *resumed = 0;
    char path[BRISK_PATH_MAX + 64];
    int64_t step;
    int found;
    t->run_claimed = 1; /* the run there, if any, is continued */
    brisk_status st = brisk_trainer_open_run_dir(t, err);
    if (!st) st = brisk_checkpoint_find_latest(t->cfg.train.out_dir, &t->log, path, sizeof path, &step, &found, err);
    if (st) return st;
    if (!found) {
        brisk_log(&t->log, BRISK_LOG_INFO, "resume    no checkpoint in %s yet: starting from step 0", t->cfg.train.out_dir);
        return BRISK_OK;
    }
    if ((st = brisk_trainer_resume(t, path, err))) return st;
    *resumed = 1;
    return BRISK_OK;
}
