/* The event-file writer (src/report/tboard.c) on its own: records framed and checksummed as
 * TFRecord, NaN scalars left out, and every failure (no directory, a write refused) one
 * warning, after which the writer is a no-op, never a crash. TensorBoard's own reading of the
 * files is tests/train/tensorboard.sh. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/protowire.h"
#include "test.h"
#include "report/tboard.h"

static int warnings;
static char last_warning[512];
static void sink(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    if (level == BRISK_LOG_WARN) warnings++, snprintf(last_warning, sizeof last_warning, "%s", msg);
}
static const brisk_logger logger = {sink, NULL, BRISK_LOG_INFO};

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Counts the records of a file, checking both masked CRCs of each; -1 on a bad one. */
static int count_records(const char *path, uint8_t *first, size_t *first_n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f), at = 0;
    fclose(f);
    int records = 0;
    while (at + 12 <= n) {
        uint64_t len = 0;
        for (int i = 0; i < 8; i++) len |= (uint64_t)buf[at + i] << (8 * i);
        if (le32(buf + at + 8) != brisk_crc32c_masked(buf + at, 8) || at + 16 + len > n) return -1;
        if (le32(buf + at + 12 + len) != brisk_crc32c_masked(buf + at + 12, len)) return -1;
        if (records == 0 && len <= *first_n) memcpy(first, buf + at + 12, len), *first_n = len;
        at += 16 + len;
        records++;
    }
    return at == n ? records : -1;
}

static void test_records(void) {
    char dir[512] = "";
    T_MAKE_DIR(dir, "tboard_records");
    warnings = 0;
    brisk_tboard *tb = brisk_tboard_open(dir, &logger);
    REQUIRE(tb != NULL);
    char path[1200];
    snprintf(path, sizeof path, "%s", brisk_tboard_path(tb));
    CHECK(strncmp(path, dir, strlen(dir)) == 0 && strstr(path, "/events.out.tfevents.") != NULL);
    brisk_tboard_scalar(tb, 1, "loss", 0.5);
    brisk_tboard_scalar(tb, 2, "loss", NAN); /* left out */
    brisk_tboard_text(tb, 0, "config", "{\"a\": 1}");
    float w[] = {-1, 0, 2, 3, INFINITY};
    brisk_tboard_histogram(tb, 3, "params/w", w, 5);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 0); /* buffered: the step loop never waits on the disk */
    brisk_tboard_flush(tb);
    CHECK(stat(path, &sb) == 0 && sb.st_size > 0);
    brisk_tboard_close(tb);
    uint8_t first[64];
    size_t first_n = sizeof first;
    CHECK(count_records(path, first, &first_n) == 4); /* file_version, scalar, text, histogram */
    /* the first: Event{wall_time (field 1, 8 bytes), file_version (field 3)} */
    CHECK(first_n == 24 && first[0] == 0x09 && first[9] == 0x1a && !memcmp(first + 11, "brain.Event:2", 13));
    CHECK(warnings == 0);
    unlink(path);
    rmdir(dir);
}

static void test_no_directory(void) {
    warnings = 0;
    brisk_tboard *tb = brisk_tboard_open(T_ABSENT "/brisk-run", &logger);
    CHECK(tb == NULL);
    CHECK(warnings == 1);
    CHECKF(strstr(last_warning, "cannot create") && strstr(last_warning, "log.tensorboard false"), "%s", last_warning);
    /* a NULL writer takes every call */
    brisk_tboard_scalar(NULL, 1, "loss", 1);
    brisk_tboard_text(NULL, 1, "t", "x");
    brisk_tboard_histogram(NULL, 1, "h", (const float[]){1}, 1);
    brisk_tboard_flush(NULL);
    brisk_tboard_close(NULL);
    CHECK(warnings == 1);
}

/* A write the system refuses (here a file-size limit, as a full disk would): one warning
 * naming the file and what to do, then nothing more. */
static void test_write_error(void) {
    char dir[512] = "";
    T_MAKE_DIR(dir, "tboard_full");
    warnings = 0;
    brisk_tboard *tb = brisk_tboard_open(dir, &logger);
    REQUIRE(tb != NULL);
    char path[1200];
    snprintf(path, sizeof path, "%s", brisk_tboard_path(tb));
    struct rlimit old, small;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    small = old;
    small.rlim_cur = 64;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    char text[1000];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = 0;
    brisk_tboard_text(tb, 0, "config", text);
    brisk_tboard_flush(tb);
    brisk_tboard_scalar(tb, 1, "loss", 1.0);
    brisk_tboard_flush(tb);
    brisk_tboard_close(tb);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(warnings == 1);
    CHECKF(strstr(last_warning, "cannot write") && strstr(last_warning, "training goes on"), "%s", last_warning);
    unlink(path);
    rmdir(dir);
}

TEST_MAIN(T(test_records), T(test_no_directory), T(test_write_error))
