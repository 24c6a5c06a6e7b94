/* The session API's smaller promises, each found by a host's trial of 0e9846d: what n and the
 * strides decide is checked before any row is read (a reject buffer pushed more rows than it
 * takes read them all, past the caller's arrays; a stride whose rows overflow was accepted),
 * the message of a NULL handle names the session limit, and a second session on a run
 * directory is told of train.out_dir (the library has no --out). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"

static const char *cfg = "{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2,"
                         " \"task\": \"regress\"}, \"data\": {\"buffer\": {\"capacity\": 10, \"when_full\": \"reject\"}},"
                         " \"speed\": {\"threads\": 1, \"prefetch\": 0}}";

static void test_checks_before_reading(void) {
    brisk_session *s = NULL;
    REQUIRE(brisk_session_create(cfg, NULL, NULL, &s) == BRISK_OK);
    /* exactly 10 rows allocated: 20 asked for must be refused without reading row 10 (ASan) */
    float *x = malloc(10 * 4 * sizeof(float)), *y = malloc(10 * 2 * sizeof(float));
    for (int i = 0; i < 40; i++) x[i] = 1;
    for (int i = 0; i < 20; i++) y[i] = 1;
    CHECK(brisk_session_push(s, 20, x, 0, y, 0) == BRISK_ERR_FULL);
    CHECKF(strstr(brisk_session_error(s), "10 samples and 20 more do not fit"), "%s", brisk_session_error(s));
    CHECK(brisk_session_push(s, 2, x, INT64_MAX / 2, y, 0) == BRISK_ERR_INVALID);
    CHECKF(strstr(brisk_session_error(s), "do not fit in memory"), "%s", brisk_session_error(s));
    CHECK(brisk_session_push(s, 10, x, 0, y, 0) == BRISK_OK);
    double v = 0;
    CHECK(brisk_session_query(s, "buffered", &v) == BRISK_OK && v == 10);
    free(x);
    free(y);
    brisk_session_destroy(s);
}

static void test_null_names_the_limit(void) {
    CHECKF(strstr(brisk_session_error(NULL), "4096 sessions"), "%s", brisk_session_error(NULL));
}

static void test_second_session_on_a_run_dir(void) {
    static char dir[256];
    T_MAKE_DIR(dir, "session_edges");
    char c[1024];
    snprintf(c, sizeof c, "{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"outputs\": 2}, \"train\": {\"out_dir\": \"%s/run\"},"
             " \"speed\": {\"threads\": 1}}", dir);
    brisk_session *a = NULL, *b = NULL;
    REQUIRE(brisk_session_create(c, NULL, NULL, &a) == BRISK_OK);
    CHECK(brisk_session_create(c, NULL, NULL, &b) == BRISK_ERR_INVALID);
    CHECKF(strstr(brisk_session_error(b), "in use by another trainer") &&
           strstr(brisk_session_error(b), "train.out_dir"), "%s", brisk_session_error(b));
    brisk_session_destroy(b);
    brisk_session_destroy(a);
}

TEST_MAIN(T(test_checks_before_reading), T(test_null_names_the_limit), T(test_second_session_on_a_run_dir))
