/* metrics.jsonl's writer (src/train/metrics_file.c) on its own: each record in the file as
 * soon as it is put (nothing buffered for a kill to lose), a write the system refuses one
 * warning naming the file and the error, and no record ever glued onto a line a failed write
 * or a killed run cut short; brisk report then leaves the cut line out with a note. The
 * trainer end to end: tests/train/run_logs.sh. */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "report/metrics_file.h"
#include "report/report_log.h"

static int warnings;
static char last_warning[1024];
static void sink(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    if (level == BRISK_LOG_WARN) warnings++, snprintf(last_warning, sizeof last_warning, "%s", msg);
}
static const brisk_logger logger = {sink, NULL, BRISK_LOG_INFO};

static char dir[512], path[700];

static void read_text(char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
}

static long file_size(void) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* A new file holding the record of step 1, warnings counted from 0. */
static brisk_metrics_file *fresh_with_step_1(void) {
    unlink(path);
    brisk_error err = {0};
    brisk_metrics_file *m = NULL;
    warnings = 0;
    if (brisk_metrics_file_open(&m, path, &logger, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    brisk_metrics_file_put(m, "{\"step\": 1, \"loss\": 1}");
    return m;
}

static void test_written_at_once(void) {
    brisk_error err = {0};
    brisk_metrics_file *m = fresh_with_step_1();
    REQUIRE(m);
    CHECK(file_size() == 23); /* before any close or flush: a kill now loses nothing */
    brisk_metrics_file_put(m, "{\"step\": 2, \"loss\": 0.5}");
    char text[256];
    read_text(text, sizeof text);
    CHECKF(strcmp(text, "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 0.5}\n") == 0, "%s", text);
    brisk_metrics_file_close(m);
    CHECK(warnings == 0);
    /* a directory where the file should be: an error naming it */
    char sub[760];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0755);
    CHECK(brisk_metrics_file_open(&m, sub, &logger, &err) == BRISK_ERR_IO && m == NULL);
    CHECKF(strstr(err.msg, "/sub: cannot open for writing") != NULL, "%s", err.msg);
    rmdir(sub);
}

/* A file-size limit (as `ulimit -f`; a full disk alike) cuts a record: one warning naming the
 * file and the error for any number of failed records; once writes succeed again, the next
 * record starts a line of its own. */
static void test_write_refused(void) {
    brisk_metrics_file *m = fresh_with_step_1();
    REQUIRE(m);
    struct rlimit old, small;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    small = old;
    small.rlim_cur = 33; /* 10 bytes into the second record */
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    brisk_metrics_file_put(m, "{\"step\": 2, \"loss\": 0.5}");
    brisk_metrics_file_put(m, "{\"step\": 3, \"loss\": 0.25}");
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(warnings == 1);
    CHECKF(strstr(last_warning, "metrics.jsonl: cannot write a record: File too large") &&
           strstr(last_warning, "training and checkpoints go on"), "%s", last_warning);
    brisk_metrics_file_put(m, "{\"step\": 4, \"loss\": 0.125}");
    brisk_metrics_file_close(m);
    char text[256];
    read_text(text, sizeof text);
    CHECKF(strcmp(text, "{\"step\": 1, \"loss\": 1}\n{\"step\": 2\n{\"step\": 4, \"loss\": 0.125}\n") == 0, "%s", text);
    CHECK(warnings == 1);
}

/* A run appending to a file whose last line was cut (the previous run failed to write it or
 * was killed in the middle: the --resume case) starts on a fresh line and says so; the report
 * reads every record and leaves the cut line out. */
static void test_resumed_after_cut(void) {
    FILE *f = fopen(path, "wb");
    REQUIRE(f);
    fputs("{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"lo", f);
    fclose(f);
    brisk_error err = {0};
    brisk_metrics_file *m = NULL;
    warnings = 0;
    REQUIRE_OK(brisk_metrics_file_open(&m, path, &logger, &err), &err);
    CHECK(warnings == 1);
    CHECKF(strstr(last_warning, "metrics.jsonl: its last line was cut short") && strstr(last_warning, "fresh line"),
           "%s", last_warning);
    brisk_metrics_file_put(m, "{\"event\": \"run_start\", \"step\": 1}");
    brisk_metrics_file_put(m, "{\"step\": 2, \"loss\": 0.5}");
    brisk_metrics_file_close(m);
    char text[256];
    read_text(text, sizeof text);
    CHECKF(strcmp(text, "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"lo\n{\"event\": \"run_start\", \"step\": 1}\n"
                        "{\"step\": 2, \"loss\": 0.5}\n") == 0, "%s", text);
    run_log r;
    REQUIRE_OK(brisk_run_log_read(dir, &r, &err), &err);
    CHECK(r.steps.n == 2 && r.runs == 1 && r.damaged == 1 && r.first_damaged_line == 2 && !r.truncated);
    brisk_run_log_free(&r);
    /* an empty file or one ending in a newline is not cut */
    warnings = 0;
    REQUIRE_OK(brisk_metrics_file_open(&m, path, &logger, &err), &err);
    brisk_metrics_file_close(m);
    CHECK(warnings == 0);
}

int main(void) {
    T_MAKE_DIR(dir, "metrics_file");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    const t_case cases[] = {T(test_written_at_once), T(test_write_refused), T(test_resumed_after_cut)};
    int rc = t_run(cases, (int)(sizeof cases / sizeof cases[0]));
    unlink(path);
    rmdir(dir);
    return rc;
}
