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

/* Statistics of n step times in seconds (sorts times in place). */
void brisk_step_stats_of(double *times, int64_t n, brisk_step_stats *st);

/* "12.3 s" under a minute, else "4:05" or "1:02:03". */
void brisk_format_duration(double seconds, char *buf, size_t n);

/* "elapsed 0:12, ETA 1:05" from the time since the run's start, the steps done in this
 * run and the steps still to do. */
void brisk_format_eta(double elapsed, int64_t done, int64_t todo, char *buf, size_t n);

#endif
