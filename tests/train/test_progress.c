/* The summary's and the progress lines' arithmetic (train/progress.c): mean, median,
 * nearest-rank p95 and extremes of step times, the unstable-load rule, and durations. */
#include "brisk/train.h"
#include "test.h"
#include "report/progress.h"

static void test_stats(void) {
    double t[20];
    for (int i = 0; i < 20; i++) t[i] = (20 - i) * 1e-3; /* 20 .. 1 ms, unsorted */
    brisk_step_stats s;
    brisk_step_stats_of(t, 20, &s);
    CHECK(s.n == 20);
    CHECK_NEAR(s.total_s, 0.210, 1e-12);
    CHECK_NEAR(s.mean_ms, 10.5, 1e-9);
    CHECK_NEAR(s.median_ms, 10.5, 1e-9);
    CHECK_NEAR(s.p95_ms, 19.0, 1e-9); /* nearest rank: the 19th of 20 */
    CHECK_NEAR(s.min_ms, 1.0, 1e-9);
    CHECK_NEAR(s.max_ms, 20.0, 1e-9);
    CHECK(s.unstable); /* p95 1.8x the median */
    double one[1] = {0.002};
    brisk_step_stats_of(one, 1, &s);
    CHECK_NEAR(s.median_ms, 2.0, 1e-12);
    CHECK_NEAR(s.p95_ms, 2.0, 1e-12);
    CHECK(!s.unstable); /* too few steps to say */
    brisk_step_stats_of(NULL, 0, &s);
    CHECK(s.n == 0 && s.mean_ms == 0 && s.total_s == 0);
}

/* Steady steps are stable; a few stalls of 20x (a descheduled thread) are not, even when
 * the p95 looks normal. */
static void test_unstable_rule(void) {
    double t[100];
    brisk_step_stats s;
    for (int i = 0; i < 100; i++) t[i] = 1e-3 * (1.0 + 0.01 * (i % 7));
    brisk_step_stats_of(t, 100, &s);
    CHECK(!s.unstable);
    for (int i = 0; i < 100; i++) t[i] = 1e-3;
    t[17] = 20e-3, t[60] = 25e-3;
    brisk_step_stats_of(t, 100, &s);
    CHECK(s.p95_ms < 1.5 * s.median_ms);
    CHECK(s.unstable);
}

static void test_durations(void) {
    char b[64];
    brisk_format_duration(0.04, b, sizeof b);
    CHECK(strcmp(b, "0.0 s") == 0);
    brisk_format_duration(42.26, b, sizeof b);
    CHECK(strcmp(b, "42.3 s") == 0);
    brisk_format_duration(245, b, sizeof b);
    CHECK(strcmp(b, "4:05") == 0);
    brisk_format_duration(3723, b, sizeof b);
    CHECK(strcmp(b, "1:02:03") == 0);
    brisk_format_duration(-1, b, sizeof b);
    CHECK(strcmp(b, "0.0 s") == 0);
    brisk_format_eta(10.0, 100, 300, b, sizeof b);
    CHECK(strcmp(b, "elapsed 10.0 s, ETA 30.0 s") == 0);
    brisk_format_eta(1.0, 0, 10, b, sizeof b); /* no step done yet: no estimate */
    CHECK(strcmp(b, "elapsed 1.0 s, ETA ?") == 0);
}

/* The live progress line: bar, percentage, steps, epoch, loss, speed, ETA; a fixed bar of 20
 * or 8 columns by the width, and never wider than the terminal (no wrap). */
static void test_progress_line(void) {
    brisk_progress p = {.step = 450, .total_steps = 1000, .epoch = 2, .epochs = 5, .loss = 0.123456,
                        .samples_per_s = 1234.4, .elapsed_s = 10, .eta_s = 12.2};
    char b[512];
    brisk_progress_line(&p, 120, b, sizeof b);
    CHECKF(strcmp(b, "[#########...........]  45% step 450/1000 epoch 2/5 loss 0.12346 1234 samples/s ETA 12.2 s") == 0,
           "%s", b);
    brisk_progress_line(&p, 80, b, sizeof b);
    CHECKF(strncmp(b, "[###.....]  45% step 450/1000", 29) == 0 && strlen(b) <= 79, "%s", b);
    brisk_progress_line(&p, 40, b, sizeof b); /* too narrow for a bar: the text, cut */
    CHECKF(strncmp(b, "  45% step 450/1000 epoch 2/5", 29) == 0 && strlen(b) == 39, "%s", b);
    p = (brisk_progress){.step = 0, .total_steps = 0, .epoch = 1, .epochs = 1, .loss = NAN, .eta_s = -1};
    brisk_progress_line(&p, 120, b, sizeof b); /* nothing known yet */
    CHECKF(strstr(b, "[....................]   0% step 0/0") == b && strstr(b, "loss ? 0 samples/s ETA ?"), "%s", b);
    p.step = p.total_steps = 7;
    brisk_progress_line(&p, 120, b, sizeof b);
    CHECKF(strstr(b, "[####################] 100% step 7/7") == b, "%s", b);
}

int main(void) {
    t_case c[] = {T(test_stats), T(test_unstable_rule), T(test_durations), T(test_progress_line)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
