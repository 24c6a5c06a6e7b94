/* Step-time statistics and durations for the progress lines and the run summary
 * (progress.c). Internal to the trainer. */
#ifndef BRISK_TRAIN_PROGRESS_H
#define BRISK_TRAIN_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct brisk_step_stats {
    int64_t n;
    double total_s;                              /* sum of the step times */
    double mean_ms, median_ms, p95_ms, min_ms, max_ms;
    int unstable;                                /* the spread says the machine's load varied */
} brisk_step_stats;

/* Where some steps' time went: waiting for data, copying batches to the device, and compute,
 * which is the rest of the steps' time. The one definition of "compute" that the progress
 * line, metrics.jsonl's compute_ms and the run summary's compute_s share, so data + copy +
 * compute is the step time in each. */
typedef struct brisk_time_split {
    int64_t steps;
    double step_s, data_s, copy_s;
} brisk_time_split;

static inline void brisk_time_split_add(brisk_time_split *s, double step_s, double data_s, double copy_s) {
    s->steps++, s->step_s += step_s, s->data_s += data_s, s->copy_s += copy_s;
}
static inline double brisk_time_split_compute_s(const brisk_time_split *s) {
    return s->step_s - s->data_s - s->copy_s;
}

/* Statistics of n step times in seconds (sorts times in place). */
void brisk_step_stats_of(double *times, int64_t n, brisk_step_stats *st);

/* "12.3 s" under a minute, else "4:05" or "1:02:03". */
void brisk_format_duration(double seconds, char *buf, size_t n);

/* "elapsed 0:12, ETA 1:05" from the time since the run's start, the steps done in this
 * run and the steps still to do. */
void brisk_format_eta(double elapsed, int64_t done, int64_t todo, char *buf, size_t n);

/* A progress line of at most `width` - 1 columns (width at least 40), its bar 20 columns, or 8,
 * or none, as the text leaves room:
 * "[#########.........]  45% step 450/1000 epoch 2/5 loss 0.12345 1234 samples/s ETA 0:12"
 * With a total of 0 steps the bar is empty. */
struct brisk_progress;
void brisk_progress_line(const struct brisk_progress *p, int width, char *buf, size_t n);

#endif
