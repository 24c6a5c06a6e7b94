/* Array arguments checked before any of their values is used, with messages in the caller's
 * terms: from C, "target row 3, column 17" (0-based, one sample per row, as api.h lays the
 * arrays out); through the Fortran binding, "target(18, 4)" (1-based (element, sample), one
 * sample per column, the binding's argument name). Push, predict and sample all check
 * their inputs here, so NaN is refused alike wherever it comes in. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "api/internal.h"

/* "target row 3, column 17" or "target(18, 4)" */
static void where(const api_ctx *c, const char *name, int64_t sample, int64_t element, char *buf, size_t n) {
    if (c->fortran) snprintf(buf, n, "%s(%lld, %lld)", name, (long long)element + 1, (long long)sample + 1);
    else snprintf(buf, n, "%s row %lld, column %lld", name, (long long)sample, (long long)element);
}

brisk_status api_check_values(const api_ctx *c, const api_arg *a, int64_t n, int64_t labels,
                              const char *nothing_done, brisk_error *err) {
    char at[160];
    /* the last row's end must be addressable before any row is read */
    if (n > 0 && (n - 1 > (INT64_MAX - a->width) / a->stride ||
                  (uint64_t)((n - 1) * a->stride + a->width) > SIZE_MAX / sizeof(float)))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld rows %lld floats apart do not fit in memory: n or "
                            "the %s stride is wrong (%s)", c->fn, (long long)n, (long long)a->stride, a->name,
                            nothing_done);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < a->width; j++) {
            float x = a->v[i * a->stride + j];
            if (!isfinite(x)) {
                where(c, a->name, i, j, at, sizeof at);
                return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: %s is %s; expected finite values (%s)", c->fn, at,
                                    isnan(x) ? "NaN" : x > 0 ? "inf" : "-inf", nothing_done);
            }
            if (labels > 0 && (x != floorf(x) || x < 0 || x >= (float)labels)) {
                where(c, a->name, i, j, at, sizeof at);
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s is %g; expected a class label, an integer from 0 "
                                    "to %lld (%s)", c->fn, at, (double)x, (long long)labels - 1, nothing_done);
            }
        }
    return BRISK_OK;
}

brisk_status api_check_stride(const api_ctx *c, api_arg *a, brisk_error *err) {
    if (a->stride == 0) a->stride = a->width;
    if (a->stride >= a->width) return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %s stride %lld is shorter than a row of %lld floats "
                        "(a stride is the distance between the starts of consecutive rows; 0: packed rows)",
                        c->fn, a->name, (long long)a->stride, (long long)a->width);
}
