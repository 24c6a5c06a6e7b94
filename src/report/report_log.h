/* A run directory's metrics.jsonl read back (report_log.c), for the run report and a
 * pipeline's comparison: the step lines (loss, learning rate, time split, throughput,
 * memory), the epoch lines (training and validation loss, a classifier's validation
 * accuracy), the last run_start's list of optimizations, the last run_end summary and the
 * image files left out (data_skipped). A resumed run repeats step numbers after its
 * "run_start" line: the later lines replace the earlier ones, so the series are the
 * history the checkpoints hold. A last line without its newline (a run killed while
 * writing it) is left out and noted; so is a damaged line anywhere (not JSON: a record glued
 * onto one a failed write cut short; or not a record brisk writes), counted and the first
 * named, so that one bad line never hides a run's curves. */
#ifndef BRISK_REPORT_LOG_H
#define BRISK_REPORT_LOG_H

#include <cjson/cJSON.h>

#include "brisk/train.h"

enum { S_STEP, S_LOSS, S_LR, S_MS, S_DATA, S_COPY, S_SPS, S_MEM, S_COMPUTE, S_COLS };
enum { E_STEP, E_TRAIN, E_VAL, E_ACC, E_COLS }; /* E_ACC: a classifier's validation accuracy, else NaN */
/* columns, each n long */
typedef struct log_table {
    double *col[S_COLS];
    int n, cap, ncols;
} log_table;

typedef struct run_log {
    log_table steps, epochs;
    int runs;            /* run_start lines: 1 + resumes */
    int truncated;       /* a last line without its newline was left out */
    int damaged;         /* other lines left out: they could not be read */
    int first_damaged_line;
    char first_damaged[160]; /* why the first of them could not be */
    char started[32];    /* the first run's start time */
    cJSON *end;          /* the last "run_end" line */
    cJSON *optimizations; /* the last run_start's "optimizations" */
    cJSON *skipped;      /* "data_skipped" records, an array, one per file (the first record of each) */
} run_log;
/* Reads dir/metrics.jsonl into *r (zeroed first); a missing or unreadable file, or one with
 * no record, is an error naming it and what to do. Free with brisk_run_log_free, also after
 * an error. */
brisk_status brisk_run_log_read(const char *dir, run_log *r, brisk_error *err);
/* The same from a buffer (the fuzz target), path naming it in messages. */
brisk_status brisk_run_log_parse(const char *data, size_t size, const char *path, run_log *r, brisk_error *err);
void brisk_run_log_free(run_log *r);
/* A number of the run_end line; NaN when there is none. */
double brisk_run_log_end(const run_log *r, const char *key);

/* report_run.c: the run report's page for a run log read from dir. */
struct brisk_strbuf;
void brisk_report_run_render(struct brisk_strbuf *b, const char *dir, const run_log *r);

#endif
