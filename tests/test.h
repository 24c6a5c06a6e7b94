/* A minimal test harness: CHECK records a failure and goes on, REQUIRE stops the
 * test function. TEST_MAIN runs the listed functions and prints
 * "N passed, N failed" so ctest and CI logs read the same. */
#ifndef BRISK_TEST_H
#define BRISK_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_checks;
static int t_cur_failed;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    t_failed_checks++; t_cur_failed = 1; } } while (0)
#define CHECKF(cond, ...) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); \
    t_failed_checks++; t_cur_failed = 1; } } while (0)
#define REQUIRE(cond) do { if (!(cond)) { \
    fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
    t_failed_checks++; t_cur_failed = 1; return; } } while (0)
/* A brisk call that must succeed; prints the error message otherwise. */
#define REQUIRE_OK(call, errp) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            (errp)->msg); t_failed_checks++; t_cur_failed = 1; return; } } while (0)
#define CHECK_NEAR(a, b, tol) CHECKF(fabs((double)(a) - (double)(b)) <= (tol), \
    "%.9g vs %.9g (tol %.3g)", (double)(a), (double)(b), (double)(tol))

/* A path that does not exist and that nothing creates (not /nonexistent, which a machine may
 * have): prefix it to a name, T_ABSENT "/x.json". */
#define T_ABSENT BRISK_BINARY_DIR "/absent-never-created"

/* A fresh folder under the build tree for a test's files: BRISK_BINARY_DIR/<name>_<pid>. */
#define T_MAKE_DIR(buf, name) do { if (!(buf)[0]) { \
    snprintf((buf), sizeof(buf), "%s/%s_%d", BRISK_BINARY_DIR, (name), (int)getpid()); \
    char cmd_[sizeof(buf) + 16]; snprintf(cmd_, sizeof cmd_, "mkdir -p %s", (buf)); \
    if (system(cmd_) != 0) fprintf(stderr, "cannot create %s\n", (buf)); } } while (0)

typedef void (*t_fn)(void);
typedef struct { const char *name; t_fn fn; } t_case;
#define T(fn) { #fn, fn }

static int t_all_passed;
static int t_run(const t_case *cases, int n) {
    int passed = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        t_cur_failed = 0;
        cases[i].fn();
        if (t_cur_failed) { failed++; fprintf(stderr, "FAIL %s\n", cases[i].name); }
        else { passed++; fprintf(stderr, "ok   %s\n", cases[i].name); }
    }
    printf("%d passed, %d failed\n", passed, failed);
    t_all_passed = failed == 0; /* what was written may go (train_test_util.h's tu_scratch) */
    return failed ? 1 : 0;
}
#define TEST_MAIN(...) int main(void) { t_case c_[] = { __VA_ARGS__ }; \
    return t_run(c_, (int)(sizeof c_ / sizeof c_[0])); }
#endif
