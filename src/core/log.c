/* Logging through a caller-given sink, and the clock. */
#include "brisk/core.h"

#include <stdio.h>
#include <time.h>

void brisk_log(const brisk_logger *lg, brisk_log_level level, const char *fmt, ...) {
    if (!lg || !lg->fn || level > lg->max_level) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lg->fn(lg->user, level, buf);
}

double brisk_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
