/* metrics.jsonl read back for the reports (report_log.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report/report_log.h"

static const char *const step_keys[S_COLS] = {"step", "loss", "lr", "ms_per_step", "data_ms", "copy_ms",
                                              "samples_per_s", "mem_mib", "compute_ms"};
static const char *const epoch_keys[E_COLS] = {"step", "train_loss", "val_loss", "val_accuracy"};


static void table_free(log_table *t) {
    for (int c = 0; c < t->ncols; c++) free(t->col[c]);
}

static int table_add(log_table *t, const double *row) {
    /* a resumed run logs steps again from its checkpoint: those replace the earlier lines */
    while (t->n > 0 && t->col[0][t->n - 1] >= row[0]) t->n--;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        for (int c = 0; c < t->ncols; c++) {
            double *p = realloc(t->col[c], sizeof(double) * (size_t)cap);
            if (!p) return -1;
            t->col[c] = p;
        }
        t->cap = cap;
    }
    for (int c = 0; c < t->ncols; c++) t->col[c][t->n] = row[c];
    t->n++;
    return 0;
}

void brisk_run_log_free(run_log *r) {
    table_free(&r->steps);
    table_free(&r->epochs);
    cJSON_Delete(r->end);
    cJSON_Delete(r->optimizations);
    cJSON_Delete(r->skipped);
}

/* A data_skipped record kept unless one for its file came before (every resume records the
 * files left out at load again). */
static brisk_status add_skip(run_log *r, cJSON *o, const char *path, brisk_error *err) {
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(o, "file");
    if (!cJSON_IsString(file)) return BRISK_OK;
    if (!r->skipped && !(r->skipped = cJSON_CreateArray())) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    const cJSON *it;
    cJSON_ArrayForEach(it, r->skipped) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "file");
        if (cJSON_IsString(f) && strcmp(f->valuestring, file->valuestring) == 0) return BRISK_OK;
    }
    cJSON *copy = cJSON_Duplicate(o, 1);
    if (!copy || !cJSON_AddItemToArray(r->skipped, copy)) {
        cJSON_Delete(copy);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    }
    return BRISK_OK;
}

/* The member as a number: NaN when absent or null; -1 (err filled) when of another type. */
static int member(const cJSON *o, const char *key, double *v, brisk_error *err) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, key);
    *v = NAN;
    if (!m || cJSON_IsNull(m)) return 0;
    if (cJSON_IsNumber(m)) {
        *v = m->valuedouble;
        return 0;
    }
    brisk_errorf(err, BRISK_ERR_FORMAT, "\"%s\" is not a number", key);
    return -1;
}

static int read_row(const cJSON *o, const char *const *keys, int n, double *row, brisk_error *err) {
    for (int c = 0; c < n; c++)
        if (member(o, keys[c], &row[c], err)) return -1;
    if (!isfinite(row[0])) {
        brisk_errorf(err, BRISK_ERR_FORMAT, "no \"step\" number");
        return -1;
    }
    return 0;
}

/* BRISK_ERR_FORMAT: the record is not one brisk writes (err says why) */
static brisk_status parse_line(run_log *r, cJSON *o, const char *path, brisk_error *err) {
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    double row[S_COLS];
    if (cJSON_IsString(ev)) {
        if (strcmp(ev->valuestring, "run_start") == 0) {
            const cJSON *when = cJSON_GetObjectItemCaseSensitive(o, "time");
            if (r->runs++ == 0 && cJSON_IsString(when)) snprintf(r->started, sizeof r->started, "%s", when->valuestring);
            cJSON *opts = cJSON_DetachItemFromObjectCaseSensitive(o, "optimizations");
            if (opts) cJSON_Delete(r->optimizations), r->optimizations = opts;
        } else if (strcmp(ev->valuestring, "run_end") == 0) {
            cJSON *opts = cJSON_DetachItemFromObjectCaseSensitive(o, "optimizations"); /* as decided by the end */
            if (opts) cJSON_Delete(r->optimizations), r->optimizations = opts;
            cJSON_Delete(r->end);
            r->end = cJSON_Duplicate(o, 1);
        } else if (strcmp(ev->valuestring, "data_skipped") == 0) {
            return add_skip(r, o, path, err);
        }
        return BRISK_OK; /* other events: for other readers */
    }
    int is_epoch = cJSON_GetObjectItemCaseSensitive(o, "val_loss") || cJSON_GetObjectItemCaseSensitive(o, "train_loss");
    log_table *t = is_epoch ? &r->epochs : &r->steps;
    if (read_row(o, is_epoch ? epoch_keys : step_keys, t->ncols, row, err)) return BRISK_ERR_FORMAT;
    if (table_add(t, row)) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    return BRISK_OK;
}

/* A line that cannot be read (a record glued onto a partial one by a writer that failed or
 * was killed, or one edited by hand) is left out and counted; the first is kept to be named. */
static void skip_damaged(run_log *r, int line, const char *why) {
    if (r->damaged++ == 0) {
        r->first_damaged_line = line;
        snprintf(r->first_damaged, sizeof r->first_damaged, "%s", why);
    }
}

/* One line of the file, NUL-terminated in place; whole: it ended with its newline. */
static brisk_status take_line(run_log *r, char *text, size_t len, int whole, const char *path, int line,
                              brisk_error *err) {
    size_t k = len;
    while (k > 0 && (text[k - 1] == '\n' || text[k - 1] == '\r' || text[k - 1] == ' ')) text[--k] = 0;
    if (k == 0) return BRISK_OK;
    cJSON *o = cJSON_ParseWithLength(text, k);
    brisk_status st = BRISK_OK;
    if (!cJSON_IsObject(o)) {
        char why[160];
        snprintf(why, sizeof why, "not a JSON object (\"%.40s%s\")", text, k > 40 ? "..." : "");
        if (!whole) r->truncated = 1; /* the run was killed while writing it */
        else skip_damaged(r, line, why);
    } else if ((st = parse_line(r, o, path, err)) == BRISK_ERR_FORMAT) {
        skip_damaged(r, line, err->msg);
        st = BRISK_OK;
    }
    cJSON_Delete(o);
    return st;
}

static void log_init(run_log *r) {
    memset(r, 0, sizeof *r);
    r->steps.ncols = S_COLS, r->epochs.ncols = E_COLS;
}

static brisk_status check_not_empty(const run_log *r, const char *path, brisk_error *err) {
    if (r->steps.n == 0 && r->epochs.n == 0 && r->runs == 0 && r->damaged)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no readable record: %d damaged line%s (the first, line %d: %s)",
                            path, r->damaged, r->damaged == 1 ? "" : "s", r->first_damaged_line, r->first_damaged);
    if (r->steps.n == 0 && r->epochs.n == 0 && r->runs == 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: empty: the run logged nothing yet; run brisk report again "
                            "after its first progress line (train.log_every)", path);
    return BRISK_OK;
}

brisk_status brisk_run_log_parse(const char *data, size_t size, const char *path, run_log *r, brisk_error *err) {
    log_init(r);
    brisk_status st = BRISK_OK;
    char *text = NULL;
    size_t cap = 0;
    int line = 0;
    for (size_t at = 0; st == BRISK_OK && at < size;) {
        const char *nl = memchr(data + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (data + at)) + 1 : size - at;
        if (len + 1 > cap) {
            char *t = realloc(text, len + 1);
            if (!t) {
                st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            text = t, cap = len + 1;
        }
        memcpy(text, data + at, len);
        text[len] = 0;
        st = take_line(r, text, len, nl != NULL, path, ++line, err);
        at += len;
    }
    free(text);
    return st ? st : check_not_empty(r, path, err);
}

/* The first folder of dir holding a metrics.jsonl, into sub: a pipeline's out_dir. */
static int runs_below(const char *dir, char *sub, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[BRISK_PATH_MAX + 300];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s/metrics.jsonl", dir, e->d_name);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) found = 1, snprintf(sub, n, "%s", e->d_name);
    }
    closedir(d);
    return found;
}

brisk_status brisk_run_log_read(const char *dir, run_log *r, brisk_error *err) {
    log_init(r);
    char path[BRISK_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return brisk_errorf(err, BRISK_ERR_IO, "%s: no such directory; give the run directory brisk train wrote "
                            "(train.out_dir, --out)", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        char sub[256];
        if (e == ENOENT && runs_below(dir, sub, sizeof sub))
            return brisk_errorf(err, BRISK_ERR_IO, "%s: no metrics.jsonl, but its folders hold runs (a pipeline's "
                                "models: their comparison is %s/report.html): brisk report %s/%s", dir, dir, dir, sub);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open it (%s): %s is not a run directory of brisk train, "
                            "or its run has not started; train with --out %s first", path, strerror(e), dir, dir);
    }
    brisk_status st = BRISK_OK;
    char *text = NULL;
    size_t cap = 0;
    int line = 0;
    /* line by line: a long run's file need not fit in memory twice */
    for (ssize_t len; st == BRISK_OK && (len = getline(&text, &cap, f)) > 0;)
        st = take_line(r, text, (size_t)len, text[len - 1] == '\n', path, ++line, err);
    if (st == BRISK_OK && ferror(f))
        st = brisk_errorf(err, BRISK_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    free(text);
    fclose(f);
    return st ? st : check_not_empty(r, path, err);
}

double brisk_run_log_end(const run_log *r, const char *key) {
    const cJSON *m = r->end ? cJSON_GetObjectItemCaseSensitive(r->end, key) : NULL;
    return cJSON_IsNumber(m) ? m->valuedouble : NAN;
}
