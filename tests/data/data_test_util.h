/* Helpers for the data tests: a per-process scratch directory, whole-file read/write,
 * and running NumPy (when /usr/bin/python3 has it) to make or check fixtures. */
#ifndef BRISK_DATA_TEST_UTIL_H
#define BRISK_DATA_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* REQUIRE_OK(call, &err) is the idiom; GCC warns that &err is never NULL. */
#pragma GCC diagnostic ignored "-Waddress"

static void remove_scratch(void) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/data_tmp/%ld'", BRISK_BINARY_DIR, (long)getpid());
    if (system(cmd) != 0) fprintf(stderr, "could not remove the scratch folder\n");
}

/* BRISK_BINARY_DIR/data_tmp/<pid>/<name> into buf: one scratch folder per test process,
 * removed at exit unless BRISK_KEEP_TMP is set. */
static inline const char *tpath(char *buf, size_t cap, const char *name) {
    static int made;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/data_tmp", BRISK_BINARY_DIR);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/data_tmp/%ld", BRISK_BINARY_DIR, (long)getpid());
    if (!made) {
        made = 1;
        mkdir(dir, 0755);
        if (!getenv("BRISK_KEEP_TMP")) atexit(remove_scratch);
    }
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

static inline const char *fixture(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/tests/data/fixtures/%s", BRISK_SOURCE_DIR, name);
    return buf;
}

static inline int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

static inline uint8_t *read_file(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* 1 when /usr/bin/python3 can import numpy; says so once when it cannot. */
static inline int have_numpy(void) {
    static int known = -1;
    if (known < 0) {
        known = access("/usr/bin/python3", X_OK) == 0 &&
                system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
        if (!known) printf("SKIP: /usr/bin/python3 with numpy not available; NumPy-written fixture cases skipped\n");
    }
    return known;
}

/* Runs a Python script (written to a scratch file) with cwd = the scratch directory. */
static inline int run_python(const char *script) {
    char path[1200], dir[1200], cmd[3000];
    tpath(path, sizeof path, "script.py");
    if (write_file(path, script, strlen(script))) return -1;
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 '%s'", dir, path);
    return system(cmd);
}

#endif
