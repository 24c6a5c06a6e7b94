/* The trainer's device-step paths without a GPU: the CPU backend dressed as a device
 * backend (loss log, capture, replay hooks).
 * - A step that cannot be recorded as a program (a CUDA graph whose capture fails) makes
 *   the run go on eagerly, saying why, with the same losses. During a capture nothing may
 *   run (a real capture only records), so the fake runs nothing then, and a
 *   double-applied step would show in the losses.
 * - A non-finite loss read back from the device log: under train.skip_nan_steps the
 *   device skipped that update itself (skip_nonfinite reaches the optimizer), and the host
 *   counts it against the allowance naming its step; without it the run stops there.
 * - A backend that times steps itself (step_mark, step_times): the summary's and the
 *   progress lines' step times are its times, not the host's clock (which on a GPU times
 *   only the issuing of the work); marks come in start/end pairs, never during a capture. */
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train/trainer_internal.h"

#define RING 64

static struct {
    brisk_status (*run_node)(brisk_backend *, const brisk_graph *, int, const void *const *, void *,
                             const brisk_step_state *, brisk_error *);
    brisk_status (*optim_update)(brisk_backend *, float *, const float *, float *, float *, int64_t,
                                 const brisk_optim_args *, const float *, const uint8_t *, brisk_error *);
    brisk_step_state last;
    float ring[RING * BRISK_LOSS_LOG_WIDTH];
    int nan_slot;        /* loss_log writes NaN for this step (-1: none) */
    int skip_nonfinite;  /* what the optimizer was asked */
    int capturing, begun, ended, replays, ran_while_capturing;
    int marks[RING][2], bad_marks; /* step_mark calls per slot (start, end); out of order or capturing */
    int synced_after_last_mark;    /* a sync came after the last step_mark (the wall time's end) */
} fk;
static int fake_clock;             /* train_with installs step_mark and step_times */
static brisk_run_summary last_sum; /* train_with's run */
static int log_every = 50;         /* train.log_every of train_with's runs */
static const char *model_json;     /* train_with's model (NULL: an MLP) */
static float last_terms[64 * 2];   /* train_with's run: the loss terms of its steps (2 a step) */

/* the scripted device time of step s: 50 + s ms, far from what the host measures */
static double scripted_ms(uint32_t s) { return 50.0 + (double)s; }
static brisk_status f_step_mark(brisk_backend *be, uint32_t slot, int end, brisk_error *err) {
    (void)be, (void)err;
    int *m = fk.marks[slot % RING];
    if (fk.capturing || (end ? m[1] != m[0] - 1 : m[0] != m[1])) fk.bad_marks++;
    m[end ? 1 : 0]++;
    fk.synced_after_last_mark = 0;
    return BRISK_OK;
}
static brisk_status f_sync(brisk_backend *be, brisk_error *err) {
    (void)be, (void)err;
    fk.synced_after_last_mark = 1;
    return BRISK_OK;
}
static brisk_status f_step_times(brisk_backend *be, uint32_t first, int n, double *ms, brisk_error *err) {
    (void)be;
    for (int i = 0; i < n; i++) {
        const int *m = fk.marks[(first + (uint32_t)i) % RING];
        if (m[0] != m[1] || !m[0])
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "fake: step %u read with %d start and %d end marks",
                                first + (unsigned)i, m[0], m[1]);
        ms[i] = scripted_ms(first + (uint32_t)i);
    }
    return BRISK_OK;
}

static brisk_status f_run_node(brisk_backend *be, const brisk_graph *g, int id, const void *const *in, void *out,
                               const brisk_step_state *st, brisk_error *err) {
    if (st) fk.last = *st;
    if (fk.capturing) return BRISK_OK; /* recorded, not run */
    return fk.run_node(be, g, id, in, out, st, err);
}
static brisk_status f_update(brisk_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                             const brisk_optim_args *a, const float *sumsq, const uint8_t *mask, brisk_error *err) {
    if (fk.capturing) return BRISK_OK;
    fk.skip_nonfinite = a->skip_nonfinite;
    return fk.optim_update(be, p, g, m, v, n, a, sumsq, mask, err);
}
static brisk_status f_set_values(brisk_backend *be, const brisk_step_state *st, const brisk_optim_args *a,
                                 brisk_error *err) {
    (void)be, (void)st, (void)a, (void)err;
    return BRISK_OK;
}
static brisk_status f_begin(brisk_backend *be, brisk_error *err) {
    (void)be, (void)err;
    fk.capturing = 1;
    fk.begun++;
    return BRISK_OK;
}
static brisk_status f_end(brisk_backend *be, int *program, brisk_error *err) {
    (void)be;
    fk.capturing = 0;
    fk.ended++;
    *program = -1;
    return brisk_errorf(err, BRISK_ERR_INTERNAL, "fake: operation not permitted when stream is capturing");
}
static brisk_status f_replay(brisk_backend *be, int program, brisk_error *err) {
    (void)be, (void)program;
    fk.replays++;
    return brisk_errorf(err, BRISK_ERR_INTERNAL, "fake: no program to replay");
}
static brisk_status f_loss_log(brisk_backend *be, const float *loss, int width, float w, brisk_error *err) {
    (void)be, (void)err;
    if (fk.capturing) return BRISK_OK;
    for (int j = 0; j < width; j++) {
        float *slot = &fk.ring[(fk.last.loss_slot % RING) * BRISK_LOSS_LOG_WIDTH + j];
        *slot = (fk.last.first_micro ? 0.0f : *slot) + w * loss[j];
        if ((int)fk.last.loss_slot == fk.nan_slot) *slot = NAN;
    }
    return BRISK_OK;
}
static brisk_status f_loss_read(brisk_backend *be, uint32_t first, int n, int width, float *host, brisk_error *err) {
    (void)be, (void)err;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < width; j++)
            host[i * width + j] = fk.ring[((first + (uint32_t)i) % RING) * BRISK_LOSS_LOG_WIDTH + j];
    return BRISK_OK;
}

typedef struct { char text[16384]; } log_buf;
static void log_to(void *user, brisk_log_level level, const char *msg) {
    log_buf *b = user;
    size_t k = strlen(b->text);
    snprintf(b->text + k, sizeof b->text - k, "[%d] %s\n", (int)level, msg);
}

static brisk_status train_with(const char *out, int fake, int accumulate, int skip_nan, int nan_slot, float *losses,
                               int64_t steps, log_buf *lb, int64_t *nan_skipped, brisk_error *err) {
    static char dir[256];
    T_MAKE_DIR(dir, "device_step");
    char data[300], json[1024];
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    if (access(data, F_OK) != 0 && brisk_synth_write("tabular", data, 512, 0, err)) return BRISK_ERR_IO;
    snprintf(json, sizeof json,
             "{\"model\": %s, \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 32, \"epochs\": 20, \"seed\": 5, \"log_every\": %d, "
             "\"accumulate\": %d, \"skip_nan_steps\": %d, \"out_dir\": \"%s/%s\"}, \"speed\": {\"device\": \"cpu\", "
             "\"cuda_graph\": true, \"prefetch\": 0}}",
             model_json ? model_json : "{\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [32], \"outputs\": 3, \"dropout\": 0.1}",
             data, log_every, accumulate, skip_nan, dir, out);
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    brisk_trainer *t = NULL;
    brisk_logger log = {log_to, lb, BRISK_LOG_INFO};
    st = brisk_trainer_create(&cfg, &log, &t, err);
    brisk_config_free(&cfg);
    if (st) return st;
    if (fake) {
        memset(&fk, 0, sizeof fk);
        fk.nan_slot = nan_slot;
        brisk_backend *be = t->be;
        fk.run_node = be->run_node;
        fk.optim_update = be->optim_update;
        be->run_node = f_run_node;
        be->optim_update = f_update;
        be->set_values = f_set_values;
        be->capture_begin = f_begin;
        be->capture_end = f_end;
        be->replay = f_replay;
        be->loss_log = f_loss_log;
        be->loss_read = f_loss_read;
        be->loss_log_size = RING;
        if (fake_clock) be->step_mark = f_step_mark, be->step_times = f_step_times, be->sync = f_sync;
    }
    brisk_run_summary sum;
    st = brisk_trainer_run_steps(t, steps, &sum, err);
    last_sum = sum;
    int64_t n = 0;
    const float *l = brisk_trainer_losses(t, &n);
    if (!st && n != steps) st = brisk_errorf(err, BRISK_ERR_INTERNAL, "%lld losses for %lld steps", (long long)n,
                                             (long long)steps);
    if (!st) memcpy(losses, l, sizeof(float) * (size_t)steps);
    if (!st && t->io.n_loss_terms == 2 && steps <= 64) memcpy(last_terms, t->terms, sizeof(float) * 2 * (size_t)steps);
    if (nan_skipped) *nan_skipped = t->nan_skipped;
    brisk_trainer_free(t);
    return st;
}

static brisk_status train(const char *out, int fake, int accumulate, float *losses, int64_t steps, log_buf *lb,
                          brisk_error *err) {
    return train_with(out, fake, accumulate, 0, -1, losses, steps, lb, NULL, err);
}

static void fallback(int accumulate) {
    enum { STEPS = 40 };
    float a[STEPS], b[STEPS];
    log_buf la = {""}, lb = {""};
    brisk_error err = {0};
    char out[32];
    snprintf(out, sizeof out, "cpu%d", accumulate);
    REQUIRE_OK(train(out, 0, accumulate, a, STEPS, &la, &err), &err);
    snprintf(out, sizeof out, "fake%d", accumulate);
    REQUIRE_OK(train(out, 1, accumulate, b, STEPS, &lb, &err), &err);
    CHECKF(fk.begun == 1 && fk.ended == 1, "accumulate %d: %d captures begun, %d ended (one attempt, then eager)",
           accumulate, fk.begun, fk.ended);
    CHECK(fk.replays == 0);
    CHECKF(strstr(lb.text, "recording the step as a CUDA graph failed") &&
               strstr(lb.text, "operation not permitted when stream is capturing") && strstr(lb.text, "eagerly"),
           "%s", lb.text);
    int64_t first = -1;
    for (int i = 0; i < STEPS && first < 0; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) first = i;
    CHECKF(first < 0, "accumulate %d: step %lld: eager fallback %.9g vs CPU %.9g", accumulate, (long long)first + 1,
           first >= 0 ? b[first] : 0.0, first >= 0 ? a[first] : 0.0);
}

/* A model of two losses logs each term: the device's loss log carries the loss and both
 * terms of every step (accumulated over micro-batches as the loss is), equal to the CPU's
 * to the bit, and the loss is the weighted sum of its terms. */
static void test_loss_terms(void) {
    enum { STEPS = 24 };
    float a[STEPS], b[STEPS], ta[2 * STEPS];
    log_buf la = {""}, lb = {""};
    brisk_error err = {0};
    model_json = "{\"type\": \"graph\", \"inputs\": [{\"name\": \"x\", \"shape\": [64]}, "
                 "{\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}], \"layers\": ["
                 "{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 32},"
                 "{\"name\": \"a\", \"op\": \"relu\", \"inputs\": [\"h\"]},"
                 "{\"name\": \"cls\", \"op\": \"linear\", \"inputs\": [\"a\"], \"out\": 3},"
                 "{\"name\": \"rec\", \"op\": \"linear\", \"inputs\": [\"a\"], \"out\": 4},"
                 "{\"name\": \"x4\", \"op\": \"slice\", \"inputs\": [\"x\"], \"dim\": 1, \"start\": 0, \"length\": 4}],"
                 "\"outputs\": [\"cls\", \"rec\"], \"losses\": ["
                 "{\"output\": \"cls\", \"target\": \"y\", \"type\": \"cross_entropy\"},"
                 "{\"output\": \"rec\", \"target\": \"x4\", \"type\": \"mse\", \"weight\": 0.5, \"name\": \"recon\"}]}";
    log_every = 6;
    REQUIRE_OK(train("terms_cpu", 0, 2, a, STEPS, &la, &err), &err);
    memcpy(ta, last_terms, sizeof ta);
    REQUIRE_OK(train("terms_fake", 1, 2, b, STEPS, &lb, &err), &err);
    model_json = NULL;
    log_every = 50;
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(ta, last_terms, sizeof ta) == 0);
    for (int i = 0; i < STEPS; i++)
        CHECKF(fabsf(a[i] - (ta[2 * i] + 0.5f * ta[2 * i + 1])) <= 1e-6f * fabsf(a[i]), "step %d: %.9g vs %.9g + 0.5 %.9g",
               i + 1, a[i], ta[2 * i], ta[2 * i + 1]);
    CHECKF(ta[0] > 0.5f && ta[1] > 0.0f && ta[0] != ta[1], "terms %g %g", ta[0], ta[1]);
    CHECKF(strstr(la.text, " (cls ") && strstr(la.text, ", recon ") && strstr(lb.text, ", recon "), "%s", la.text);
    CHECKF(strstr(la.text, "val loss ") && strstr(strstr(la.text, "val loss "), "(cls "), "%s", la.text);
}

/* step 5's loss comes back NaN from the device log */
static void test_nonfinite_device_step(void) {
    enum { STEPS = 12 };
    float l[STEPS];
    log_buf lb = {""};
    brisk_error err = {0};
    int64_t skipped = -1;
    REQUIRE_OK(train_with("nan_skip", 1, 1, 2, 4, l, STEPS, &lb, &skipped, &err), &err);
    CHECK(fk.skip_nonfinite == 1);
    CHECKF(skipped == 1 && isnan(l[4]) && isfinite(l[3]) && isfinite(l[5]), "skipped %lld, losses %g %g %g",
           (long long)skipped, l[3], l[4], l[5]);
    CHECKF(strstr(lb.text, "step 5: the training loss is NaN: step skipped") && strstr(lb.text, "1 of 2 allowed"), "%s",
           lb.text);
    memset(&lb, 0, sizeof lb);
    brisk_status st = train_with("nan_stop", 1, 1, 0, 4, l, STEPS, &lb, NULL, &err);
    CHECK(fk.skip_nonfinite == 0);
    CHECKF(st == BRISK_ERR_NUMERIC && strstr(err.msg, "step 5") && strstr(err.msg, "NaN"), "%s", err.msg);
}

/* 20 steps timed 50..69 ms by the fake device: median 59.5, p95 (nearest rank) 68, max 69,
 * the two progress windows of 10 steps 54.5 and 64.5 ms/step. The CPU says "host clock". */
static void test_device_step_times(void) {
    enum { STEPS = 20 };
    float l[STEPS];
    log_buf lb = {""};
    brisk_error err = {0};
    log_every = 10;
    REQUIRE_OK(train("cpu_clock", 0, 1, l, STEPS, &lb, &err), &err);
    CHECKF(strcmp(last_sum.step_clock, "host clock") == 0 && strstr(lb.text, "step times        host clock\n"), "%s",
           lb.text);
    CHECKF(last_sum.ms_per_step_median < 40, "the CPU's host-clock median: %g ms", last_sum.ms_per_step_median);
    CHECKF(isnan(last_sum.host_ms_per_step_median) && !strstr(lb.text, "the host's time per step"),
           "host clock: no separate issue time, got %g", last_sum.host_ms_per_step_median);
    memset(&lb, 0, sizeof lb);
    fake_clock = 1;
    brisk_status st = train("dev_clock", 1, 1, l, STEPS, &lb, &err);
    fake_clock = 0;
    log_every = 50;
    REQUIRE_OK(st, &err);
    CHECKF(fk.bad_marks == 0 && fk.marks[0][0] == 1 && fk.marks[STEPS - 1][1] == 1 && fk.marks[STEPS][0] == 0,
           "marks: %d out of order or while capturing; step 1 %d starts, step %d %d ends", fk.bad_marks,
           fk.marks[0][0], STEPS, fk.marks[STEPS - 1][1]);
    CHECKF(fk.synced_after_last_mark, "the run ended without waiting for the device: its wall time may end early");
    CHECKF(fabs(last_sum.ms_per_step_median - 59.5) < 1e-9 && fabs(last_sum.ms_per_step_p95 - 68) < 1e-9 &&
               fabs(last_sum.ms_per_step_max - 69) < 1e-9 && fabs(last_sum.ms_per_step_mean - 59.5) < 1e-9,
           "median %g, p95 %g, max %g, mean %g ms: expected the device's 59.5, 68, 69, 59.5",
           last_sum.ms_per_step_median, last_sum.ms_per_step_p95, last_sum.ms_per_step_max, last_sum.ms_per_step_mean);
    double want = 32.0 * STEPS / (1e-3 * 59.5 * STEPS);
    CHECKF(fabs(last_sum.samples_per_s - want) < 1e-6 * want, "samples/s %g, expected %g", last_sum.samples_per_s, want);
    CHECKF(strcmp(last_sum.step_clock, "device events (cpu)") == 0, "step clock '%s'", last_sum.step_clock);
    /* the products' rate over the same steps, on the device's times */
    CHECKF(last_sum.gflop_per_step > 0 && fabs(last_sum.gflops - last_sum.gflop_per_step / (1e-3 * 59.5)) <
               1e-9 * last_sum.gflops, "%g GFLOP a step at %g GFLOP/s, expected it over 59.5 ms",
           last_sum.gflop_per_step, last_sum.gflops);
    /* the host's own time to issue a step stays visible beside the device's: far below it here */
    CHECKF(last_sum.host_ms_per_step_median >= 0 && last_sum.host_ms_per_step_median < 40,
           "host issue median %g ms", last_sum.host_ms_per_step_median);
    CHECKF(strstr(lb.text, "step times        device events (cpu); the host's time per step ") &&
               strstr(lb.text, "59.500 ms/step median") &&
               strstr(lb.text, "54.500 ms/step (") && strstr(lb.text, "64.500 ms/step ("),
           "%s", lb.text);
}

static void test_failed_capture_runs_eagerly(void) { fallback(1); }
static void test_failed_capture_runs_eagerly_accumulating(void) { fallback(2); }

TEST_MAIN(T(test_loss_terms), T(test_failed_capture_runs_eagerly), T(test_failed_capture_runs_eagerly_accumulating),
          T(test_nonfinite_device_step), T(test_device_step_times))
