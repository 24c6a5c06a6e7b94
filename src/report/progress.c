/* The numbers a user reads while and after training: elapsed time and ETA on the
 * progress lines; mean throughput, median and 95th-percentile step time in the summary,
 * and whether the spread of step times says the machine was busy.
 *
 * Why the mean and the spread, not the median alone: on a shared machine a few steps
 * that wait for a descheduled thread can take 100x the median and most of the run's
 * time, and the median hides them. What a user experiences is samples over time. */
#include "report/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/train.h"

/* A run whose 95th-percentile step is this many times its median, or whose slowest
 * step is STALL_RATIO times it, ran on a machine whose load varied. An idle run's p95
 * is within ~1.2x of its median; one page fault or timer tick makes a single slow step,
 * hence the higher bar for the maximum. */
#define UNSTABLE_P95_RATIO 1.5
#define STALL_RATIO 10.0

void brisk_step_stats_of(double *times, int64_t n, brisk_step_stats *st) {
    *st = (brisk_step_stats){.n = n};
    if (n <= 0) return;
    for (int64_t i = 0; i < n; i++) st->total_s += times[i];
    st->median_ms = 1e3 * brisk_median(times, n); /* sorts times */
    int64_t i95 = (n * 95 + 99) / 100 - 1; /* nearest rank */
    st->mean_ms = 1e3 * st->total_s / (double)n;
    st->p95_ms = 1e3 * times[i95 < 0 ? 0 : i95];
    st->min_ms = 1e3 * times[0];
    st->max_ms = 1e3 * times[n - 1];
    st->unstable = n >= 10 && st->median_ms > 0 &&
                   (st->p95_ms > UNSTABLE_P95_RATIO * st->median_ms || st->max_ms > STALL_RATIO * st->median_ms);
}

void brisk_format_duration(double s, char *buf, size_t n) {
    if (!(s >= 0)) s = 0;
    if (s < 60) {
        snprintf(buf, n, "%.1f s", s);
        return;
    }
    long long t = (long long)(s + 0.5), h = t / 3600, m = t / 60 % 60, sec = t % 60;
    if (h) snprintf(buf, n, "%lld:%02lld:%02lld", h, m, sec);
    else snprintf(buf, n, "%lld:%02lld", m, sec);
}

void brisk_format_eta(double elapsed, int64_t done, int64_t todo, char *buf, size_t n) {
    char e[32], r[32] = "?";
    brisk_format_duration(elapsed, e, sizeof e);
    if (done > 0 && todo >= 0) brisk_format_duration(elapsed / (double)done * (double)todo, r, sizeof r);
    snprintf(buf, n, "elapsed %s, ETA %s", e, r);
}

void brisk_progress_line(const brisk_progress *p, int width, char *buf, size_t n) {
    char loss[32] = "?", eta[32] = "?", text[256];
    if (isfinite(p->loss)) snprintf(loss, sizeof loss, "%.5f", p->loss);
    if (p->eta_s >= 0) brisk_format_duration(p->eta_s, eta, sizeof eta);
    double frac = p->total_steps > 0 ? (double)p->step / (double)p->total_steps : 0;
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    int len = snprintf(text, sizeof text, " %3d%% step %lld/%lld epoch %lld/%lld loss %s %.0f samples/s ETA %s",
                       (int)(100 * frac), (long long)p->step, (long long)p->total_steps, (long long)p->epoch,
                       (long long)p->epochs, loss, p->samples_per_s, eta);
    if (width < 40) width = 40;
    /* a bar of 20 columns, else 8, else none: a fixed size that does not jitter with the text;
     * one column spare, so that the line never wraps */
    int text_len = len < (int)sizeof text ? len : (int)sizeof text - 1;
    int bar = width - 1 - 2 - text_len >= 20 ? 20 : width - 1 - 2 - text_len >= 8 ? 8 : 0;
    size_t k = 0;
    if (bar && n > (size_t)bar + 2) {
        int full = (int)(frac * bar + 1e-9);
        buf[k++] = '[';
        for (int i = 0; i < bar; i++) buf[k++] = i < full ? '#' : '.';
        buf[k++] = ']';
    }
    snprintf(buf + k, n - k, "%s", text);
    if (strlen(buf) > (size_t)width - 1) buf[width - 1] = 0; /* a narrow terminal: cut, never wrap */
}
