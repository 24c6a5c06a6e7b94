/* TensorBoard event files: a TFRecord stream of Event messages (tensorflow/core/util/
 * event.proto), the first holding file_version, each next one a Summary at a step. Only the
 * fields TensorBoard reads are written:
 *   Event          1 wall_time (double), 2 step (int64), 3 file_version, 5 summary
 *   Summary        1 value (repeated)
 *   Summary.Value  1 tag, 2 simple_value (float), 5 histo, 8 tensor, 9 metadata
 *   SummaryMetadata 1 plugin_data {1 plugin_name, 2 content}
 *   TensorProto    1 dtype (7: DT_STRING), 2 tensor_shape (empty: a scalar), 8 string_val
 *   HistogramProto 1 min, 2 max, 3 num, 4 sum, 5 sum_squares, 6 bucket_limit, 7 bucket
 * Why own code and not protobuf-c: a few dozen lines of fields against a generated library
 * and its runtime as a dependency of every build. */
#include "report/tboard.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brisk/train.h"
#include "core/protowire.h"

#define FLUSH_BYTES (1 << 20) /* a buffer past this is written at once, whatever the schedule */
#define FLUSH_SECONDS 30.0    /* and one this old: TensorBoard shows a long epoch as it goes */
#define HIST_BUCKETS 30

struct brisk_tboard {
    FILE *f;
    char path[BRISK_PATH_MAX + 160];
    const brisk_logger *log;
    brisk_pb buf;          /* framed records not written yet */
    brisk_pb ev, sum, val; /* scratch for one record */
    int failed;            /* a write failed (reported): every call is a no-op */
    double flushed;        /* wall time of the last flush (or the open) */
};

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fail(brisk_tboard *tb, const char *what) {
    if (tb->failed) return;
    tb->failed = 1;
    brisk_log(tb->log, BRISK_LOG_WARN, "tensorboard: %s: %s; training goes on without the event file (free space "
              "there, or turn it off with log.tensorboard false)", tb->path, what);
}

brisk_tboard *brisk_tboard_open(const char *dir, const brisk_logger *log) {
    brisk_tboard *tb = calloc(1, sizeof *tb);
    if (!tb) {
        brisk_log(log, BRISK_LOG_WARN, "tensorboard: out of memory; training goes on without the event file");
        return NULL;
    }
    tb->log = log;
    char host[64] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    /* the pid keeps two runs started in the same second (several ranks, tests) apart */
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s.%ld" BRISK_TBOARD_SUFFIX, dir,
             (long long)time(NULL), host, (long)getpid());
    if (!(tb->f = fopen(tb->path, "ab"))) {
        char why[160];
        snprintf(why, sizeof why, "cannot create it: %s", strerror(errno));
        fail(tb, why);
        brisk_tboard_close(tb);
        return NULL;
    }
    tb->flushed = wall_time();
    brisk_pb_double(&tb->ev, 1, tb->flushed);
    brisk_pb_string(&tb->ev, 3, "brain.Event:2");
    brisk_tfrecord_append(&tb->buf, tb->ev.p, tb->ev.n);
    return tb;
}

/* Frames Event{wall_time, step, summary{value: tb->val}} into the buffer. */
static void emit(brisk_tboard *tb, int64_t step) {
    brisk_pb_reset(&tb->sum);
    brisk_pb_reset(&tb->ev);
    brisk_pb_message(&tb->sum, 1, &tb->val);
    double now = wall_time();
    brisk_pb_double(&tb->ev, 1, now);
    brisk_pb_int(&tb->ev, 2, step);
    brisk_pb_message(&tb->ev, 5, &tb->sum);
    if (tb->ev.oom) {
        fail(tb, "out of memory");
        return;
    }
    brisk_tfrecord_append(&tb->buf, tb->ev.p, tb->ev.n);
    if (tb->buf.oom) fail(tb, "out of memory");
    else if (tb->buf.n > FLUSH_BYTES || now - tb->flushed > FLUSH_SECONDS) brisk_tboard_flush(tb);
}

void brisk_tboard_scalar(brisk_tboard *tb, int64_t step, const char *tag, double v) {
    if (!tb || tb->failed || !isfinite(v)) return;
    brisk_pb_reset(&tb->val);
    brisk_pb_string(&tb->val, 1, tag);
    brisk_pb_float(&tb->val, 2, (float)v);
    emit(tb, step);
}

void brisk_tboard_text(brisk_tboard *tb, int64_t step, const char *tag, const char *text) {
    if (!tb || tb->failed) return;
    brisk_pb meta = {0}, plugin = {0}, tensor = {0}, shape = {0};
    brisk_pb_string(&plugin, 1, "text");
    brisk_pb_message(&meta, 1, &plugin);
    brisk_pb_uint(&tensor, 1, 7); /* DT_STRING */
    brisk_pb_message(&tensor, 2, &shape);
    brisk_pb_string(&tensor, 8, text);
    brisk_pb_reset(&tb->val);
    brisk_pb_string(&tb->val, 1, tag);
    brisk_pb_message(&tb->val, 9, &meta);
    brisk_pb_message(&tb->val, 8, &tensor);
    emit(tb, step);
    brisk_pb_free(&meta);
    brisk_pb_free(&plugin);
    brisk_pb_free(&tensor);
    brisk_pb_free(&shape);
}

void brisk_tboard_histogram(brisk_tboard *tb, int64_t step, const char *tag, const float *v, int64_t n) {
    if (!tb || tb->failed || n <= 0) return;
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = v[i];
        if (!isfinite(x)) continue;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        sum += x, sq += x * x, finite++;
    }
    if (!finite) return;
    /* equal buckets over [lo, hi]; TensorBoard reads bucket i as (limit[i-1], limit[i]] */
    double limit[HIST_BUCKETS], count[HIST_BUCKETS] = {0};
    double width = (hi - lo) / HIST_BUCKETS;
    for (int b = 0; b < HIST_BUCKETS; b++) limit[b] = lo + width * (b + 1);
    limit[HIST_BUCKETS - 1] = hi;
    for (int64_t i = 0; i < n; i++) {
        double x = v[i];
        if (!isfinite(x)) continue;
        int b = width > 0 ? (int)((x - lo) / width) : 0;
        count[b < 0 ? 0 : b >= HIST_BUCKETS ? HIST_BUCKETS - 1 : b]++;
    }
    brisk_pb h = {0};
    brisk_pb_double(&h, 1, lo);
    brisk_pb_double(&h, 2, hi);
    brisk_pb_double(&h, 3, (double)finite);
    brisk_pb_double(&h, 4, sum);
    brisk_pb_double(&h, 5, sq);
    brisk_pb_packed_double(&h, 6, limit, HIST_BUCKETS);
    brisk_pb_packed_double(&h, 7, count, HIST_BUCKETS);
    brisk_pb_reset(&tb->val);
    brisk_pb_string(&tb->val, 1, tag);
    brisk_pb_message(&tb->val, 5, &h);
    emit(tb, step);
    brisk_pb_free(&h);
}

void brisk_tboard_flush(brisk_tboard *tb) {
    if (!tb || tb->failed || !tb->f) return;
    if (tb->buf.n && fwrite(tb->buf.p, 1, tb->buf.n, tb->f) != tb->buf.n) {
        char why[160];
        snprintf(why, sizeof why, "cannot write: %s", strerror(errno));
        fail(tb, why);
        return;
    }
    brisk_pb_reset(&tb->buf);
    tb->flushed = wall_time();
    if (fflush(tb->f) != 0) {
        char why[160];
        snprintf(why, sizeof why, "cannot write: %s", strerror(errno));
        fail(tb, why);
    }
}

void brisk_tboard_close(brisk_tboard *tb) {
    if (!tb) return;
    brisk_tboard_flush(tb);
    if (tb->f && fclose(tb->f) != 0 && !tb->failed) {
        char why[160];
        snprintf(why, sizeof why, "cannot write: %s", strerror(errno));
        fail(tb, why);
    }
    brisk_pb_free(&tb->buf);
    brisk_pb_free(&tb->ev);
    brisk_pb_free(&tb->sum);
    brisk_pb_free(&tb->val);
    free(tb);
}

const char *brisk_tboard_path(const brisk_tboard *tb) { return tb ? tb->path : ""; }
