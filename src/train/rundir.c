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
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
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

/* An event file: brisk's own end in BRISK_TBOARD_SUFFIX (tboard.c); TensorFlow's, PyTorch's
 * and older brisk runs' are someone else's record and stay. */
static int event_file(const char *name, int *own) {
    size_t L = strlen(name), k = strlen(BRISK_TBOARD_SUFFIX);
    if (strncmp(name, "events.out.tfevents.", 20) != 0) return 0;
    *own = L > 20 + k && strcmp(name + L - k, BRISK_TBOARD_SUFFIX) == 0;
    return 1;
}

/* A list of file names, growing. */
typedef struct name_list {
    char *s;
    size_t len, cap;
    int n;
} name_list;

static void name_add(name_list *l, const char *name) {
    size_t k = strlen(name) + 3;
    if (l->len + k >= l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        while (cap <= l->len + k) cap *= 2;
        char *p = realloc(l->s, cap);
        if (!p) return; /* the list is what is said, not what is done: it may end early */
        l->s = p, l->cap = cap;
    }
    l->len += (size_t)snprintf(l->s + l->len, l->cap - l->len, "%s%s", l->n ? ", " : "", name);
    l->n++;
}

/* Removes (remove 1) or lists (remove 0) the previous run's files: every name into `found`
 * (events into `kept` when not brisk's own; both may be NULL); returns how many make the
 * run, or -1 (err filled) when one cannot be removed. */
static int previous_run(const char *dir, int remove, name_list *found, name_list *kept, brisk_error *err) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, own = 0;
    char path[BRISK_PATH_MAX + 300];
    for (struct dirent *e; (e = readdir(d));) {
        /* event files go with the run they record, but alone do not make one */
        int events = remove && event_file(e->d_name, &own);
        if (events && !own) {
            if (kept) name_add(kept, e->d_name);
            continue;
        }
        if (!previous_run_file(dir, e->d_name) && !events) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove && unlink(path) != 0 && errno != ENOENT) {
            brisk_errorf(err, BRISK_ERR_IO, "%s: cannot remove it to start a new run (train.overwrite): %s", path,
                         strerror(errno));
            closedir(d);
            return -1;
        }
        if (found) name_add(found, e->d_name);
        n += !events;
    }
    closedir(d);
    return n;
}

/* Places whose files are not a run's: --overwrite removes checkpoints, metrics.jsonl and
 * event files from the run directory, and `--out ~` or `--out /` is a slip of the keyboard,
 * not a run directory. */
brisk_status brisk_run_dir_check_place(const brisk_trainer *t, brisk_error *err) {
    const char *dir = t->cfg.train.out_dir;
    char *real = realpath(dir, NULL); /* a directory that does not exist yet is new: fine */
    if (!real) return BRISK_OK;
    const char *what = strcmp(real, "/") == 0 ? "the root directory" : NULL;
    const char *homes[2] = {getenv("HOME"), NULL};
    struct passwd *pw = getpwuid(getuid());
    if (pw) homes[1] = pw->pw_dir;
    for (int i = 0; i < 2 && !what; i++) {
        char *h = homes[i] && homes[i][0] ? realpath(homes[i], NULL) : NULL;
        if (h && strcmp(h, real) == 0) what = "your home directory";
        free(h);
    }
    brisk_status st = BRISK_OK;
    if (what)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: train.out_dir \"%s\" is %s (%s); a run directory holds one run's "
                          "checkpoints, metrics.jsonl and lock, and --overwrite removes such files from it: give the run "
                          "a directory of its own (--out runs/NAME)", t->cfg.path, dir, what, real);
    free(real);
    return st;
}

void brisk_trainer_adopt_best(brisk_trainer *t, const brisk_ckpt_state *cs) {
    double max_acc = t->best_at.max_accuracy;
    if (cs->best_at.max_accuracy > max_acc || isnan(max_acc)) max_acc = cs->best_at.max_accuracy;
    if (!isnan(cs->best_val) && !(t->best_val <= cs->best_val)) {
        t->best_val = cs->best_val;
        t->best_at = cs->best_at;
    }
    t->best_at.max_accuracy = max_acc;
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
    } else {
        /* written when its loss was validated: where it was reached, also for files before "best_val" */
        if (cs.best_at.epoch < 0) cs.best_at.epoch = cs.epoch, cs.best_at.step = cs.step;
        brisk_trainer_adopt_best(t, &cs);
    }
    brisk_safetensors_free(st);
}

void brisk_run_id_draw(char out[20]) {
    uint64_t v = 0;
    if (getentropy(&v, sizeof v) != 0) /* no entropy source: the time and the process, still unlike any other run's */
        v = (uint64_t)(brisk_now() * 1e9) ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)out;
    snprintf(out, 20, "%016" PRIx64, v);
}

/* The run a directory's metrics.jsonl records last (its last run_start's run_id) into id; ""
 * when there is none or it predates run ids. */
static void dir_run_id(const char *dir, char *id, size_t n) {
    char path[BRISK_PATH_MAX + 32], line[4096];
    id[0] = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"run_start\"")) continue;
        cJSON *o = cJSON_Parse(line);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "run_id");
        snprintf(id, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
        cJSON_Delete(o);
    }
    fclose(f);
}

/* 1 when path lies in directory dir itself (not below it). */
static int in_dir(const char *path, const char *dir) {
    char *p = realpath(path, NULL), *d = realpath(dir, NULL);
    char *slash = p ? strrchr(p, '/') : NULL;
    int yes = 0;
    if (slash && d) {
        *slash = 0;
        yes = strcmp(p[0] ? p : "/", d) == 0;
    }
    free(p), free(d);
    return yes;
}

/* A resume from a checkpoint named by path, into a directory that holds a run: the same run
 * (the checkpoint is one of the directory's, or carries its run id) continues; another run's
 * would replace this one's checkpoints and mix its metrics, so it is refused unless the
 * directory's run is to be replaced (train.overwrite): *replace then says to remove its files. */
static brisk_status check_resumed_run(brisk_trainer *t, int *replace, brisk_error *err) {
    const char *dir = t->cfg.train.out_dir, *ckpt = t->last_ckpt;
    name_list found = {0};
    *replace = 0;
    int n = previous_run(dir, 0, &found, NULL, err);
    char id[64];
    dir_run_id(dir, id, sizeof id);
    int same = in_dir(ckpt, dir) || (id[0] && strcmp(id, t->run_id) == 0);
    brisk_status st = BRISK_OK;
    if (n > 0 && same && t->cfg.train.overwrite)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: --overwrite would remove the run that %s continues (it is %s); "
                          "drop --overwrite to continue it", dir, ckpt,
                          in_dir(ckpt, dir) ? "one of its checkpoints" : "a checkpoint of the same run");
    else if (n > 0 && !same && !t->cfg.train.overwrite)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s holds another run (%.300s%s; run %s) than the checkpoint %s (run "
                          "%s): resuming it here would replace that run's checkpoints and mix the two runs' metrics; "
                          "resume into another train.out_dir (--out), continue the directory's own run with --resume "
                          "auto, or replace it with --overwrite", dir, found.s ? found.s : "", found.len > 300 ? ", ..." : "",
                          id[0] ? id : "without a run id", ckpt, t->run_id);
    else *replace = n > 0 && !same;
    free(found.s);
    return st;
}

brisk_status brisk_run_dir_claim(brisk_trainer *t, brisk_error *err) {
    const char *dir = t->cfg.train.out_dir;
    int replace = 0;
    brisk_status st = BRISK_OK;
    /* a checkpoint was resumed before the directory was opened: a path the user gave (--resume
     * auto opens the directory first and resumes from its own) */
    if (t->run_claimed && t->last_ckpt[0] && (st = check_resumed_run(t, &replace, err))) return st;
    if (t->run_claimed && !replace) {
        adopt_best(t);
        return BRISK_OK;
    }
    name_list found = {0}, removed = {0}, kept = {0};
    int n = previous_run(dir, 0, &found, NULL, err);
    if (n > 0 && !t->cfg.train.overwrite)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s holds a previous run (%.300s%s): %s, or choose another "
                          "train.out_dir", dir, found.s ? found.s : "", found.len > 300 ? ", ..." : "",
                          t->run_choices ? t->run_choices : "continue it with --resume auto, replace it with --overwrite");
    else if (n > 0 && previous_run(dir, 1, &removed, &kept, err) < 0)
        st = BRISK_ERR_IO;
    else if (n > 0)
        brisk_log(&t->log, BRISK_LOG_INFO, "overwrite removed the previous run in %s: %s", dir, removed.s ? removed.s : "");
    if (!st && kept.n)
        brisk_log(&t->log, BRISK_LOG_WARN, "overwrite kept %d event file%s that brisk did not write (TensorBoard shows "
                  "them beside this run's; move them away if they do not belong here): %s", kept.n,
                  kept.n == 1 ? "" : "s", kept.s ? kept.s : "");
    free(found.s), free(removed.s), free(kept.s);
    return st;
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
    cJSON_AddStringToObject(o, "run_id", t->run_id);
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
