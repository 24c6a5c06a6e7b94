/* The median of timings, shared by the step statistics, the profile, the overlap trial and
 * the launch floor. */
#include <math.h>
#include <stdlib.h>

#include "brisk/core.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double brisk_median(double *v, int64_t n) {
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
