/* Helpers for the NetCDF tests: a scratch folder, files written by ncgen (netcdf-bin,
 * another tool than brisk) from CDL text, and an open that must fail with a message. */
#ifndef BRISK_NETCDF_TEST_UTIL_H
#define BRISK_NETCDF_TEST_UTIL_H

#include "brisk/data.h"
#include "test.h"

#include <unistd.h>

static char nc_dir[400];

/* dir/name in one of 8 rotating buffers (a call's arguments may hold several). */
static const char *path_of(const char *name) {
    static char buf[8][600];
    static int k;
    T_MAKE_DIR(nc_dir, "netcdf");
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", nc_dir, name);
    return buf[k];
}

/* kind: ncgen's -k, "nc4" (HDF5), "classic" or "64-bit-offset" */
static int ncgen_kind(const char *nc, const char *text, const char *kind) {
    char cdlp[700], cmd[1600];
    snprintf(cdlp, sizeof cdlp, "%s.cdl", nc);
    FILE *f = fopen(cdlp, "w");
    if (!f) return -1;
    fputs(text, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "ncgen -k %s -o '%s' '%s'", kind, nc, cdlp);
    return system(cmd);
}

static int ncgen(const char *nc, const char *text) { return ncgen_kind(nc, text, "nc4"); }

static void expect_error(const brisk_weather_spec *s, brisk_status code, const char *a, const char *b) {
    brisk_weather w;
    brisk_error e = {0};
    brisk_status st = brisk_weather_open(s, &w, &e);
    CHECKF(st == code && strstr(e.msg, a) && (!b || strstr(e.msg, b)), "expected %s with '%s' and '%s', got %s: %s",
           brisk_status_name(code), a, b ? b : "", brisk_status_name(st), e.msg);
    if (!st) brisk_weather_free(&w);
}

/* Whether this build reads NetCDF and ncgen is there: prints why not and returns the
 * exit status (0 after checking the build's own error, 77 to skip), else -1. */
static int netcdf_tests_runnable(void) {
    if (!brisk_netcdf_available()) {
        const char *paths[] = {"x.nc"}, *vars[] = {"a"};
        brisk_weather_spec s = {.paths = paths, .npaths = 1, .variables = vars, .nvariables = 1, .history = 1, .lead = 1};
        brisk_weather w;
        brisk_error e = {0};
        int ok = brisk_weather_open(&s, &w, &e) == BRISK_ERR_UNSUPPORTED && strstr(e.msg, "x.nc: this brisk was built "
                                                                                      "without NetCDF support");
        printf("%s\n", ok ? "1 passed, 0 failed (no libnetcdf: the clear error)" : e.msg);
        return ok ? 0 : 1;
    }
    if (system("command -v ncgen >/dev/null 2>&1") != 0) {
        printf("skipped: ncgen (Debian netcdf-bin) not found\n");
        return 77;
    }
    return -1;
}

#endif
