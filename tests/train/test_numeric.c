/* Numeric faults: a NaN is planted in one training sample after loading (past the
 * load-time checks, as a corrupt read or a bad transform would), so step 3 of every
 * epoch has a NaN loss. By default the run stops there, naming the step, the last good
 * checkpoint and what to try; with train.skip_nan_steps it skips up to that many steps
 * (counted across resumes) and the weights stay finite. The fp16 loss-scaler hook is
 * fed injected skip counts. */
#include <math.h>

#include "test.h"
#include "train_test_util.h"
#include "train/trainer_internal.h"

static char dir[512], cfg_path[600], data_path[600], last_path[700];

static void write_config(int64_t skip, int64_t max_steps) {
    if (!dir[0]) {
        tu_scratch(dir, sizeof dir, "numeric");
        snprintf(data_path, sizeof data_path, "%s/tab.npz", dir);
        snprintf(cfg_path, sizeof cfg_path, "%s/c.json", dir);
        snprintf(last_path, sizeof last_path, "%s/run/last.safetensors", dir);
        brisk_error err = {0};
        if (brisk_synth_write("tabular", data_path, 256, 8, &err)) fprintf(stderr, "%s\n", err.msg);
    }
    /* 192 training samples in unshuffled batches of 32: 6 steps per epoch. */
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.25, \"shuffle\": false},"
             " \"train\": {\"batch_size\": 32, \"epochs\": 3, \"max_steps\": %lld, \"checkpoint_every\": 2,"
             " \"skip_nan_steps\": %lld, \"out_dir\": \"%s/run\"}, \"speed\": {\"threads\": 1, \"prefetch\": 0}}",
             data_path, (long long)max_steps, (long long)skip, dir);
    tu_write(cfg_path, json);
}

/* Trains (fresh, or resumed with --resume auto) with a NaN planted so that step 3 of
 * every epoch sees it. *nan_pattern (may be NULL): 1 when exactly those steps had NaN losses. */
static brisk_status run_poisoned(int64_t skip, int64_t max_steps, int resume, brisk_run_summary *s, int *nan_pattern,
                                 brisk_error *err) {
    write_config(skip, max_steps);
    if (!resume) tu_sh("rm -rf '%s/run'", dir);
    brisk_config cfg;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    int resumed = 0;
    brisk_status st = brisk_config_load(cfg_path, NULL, 0, &cfg, err);
    if (st) return st;
    if (!(st = brisk_trainer_create(&cfg, &quiet, &t, err))) {
        brisk_tensor *x = &t->data.fields[0].tensor;
        int64_t row = t->split.train[2 * 32 + 5], width = x->shape.d[1];
        ((float *)x->data)[row * width + 7] = NAN;
        if (resume) st = brisk_trainer_resume_auto(t, &resumed, err);
        if (!st && resume && !resumed) st = brisk_errorf(err, BRISK_ERR_INTERNAL, "nothing to resume from");
        if (!st) st = brisk_trainer_run(t, s, err);
        int64_t n = 0;
        const float *l = brisk_trainer_losses(t, &n);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) ok &= (i % 6 == 2) == (isnan(l[i]) != 0);
        if (nan_pattern) *nan_pattern = ok;
    }
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

static int params_finite(const char *path) {
    brisk_safetensors *st = NULL;
    brisk_error err;
    if (brisk_safetensors_open(path, &st, &err)) return 0;
    int ok = 1;
    for (size_t i = 0; i < brisk_safetensors_count(st); i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        for (size_t k = 0; k < t->nbytes / 4; k++) {
            float v;
            memcpy(&v, (const char *)t->data + 4 * k, 4);
            ok &= isfinite(v) != 0;
        }
    }
    brisk_safetensors_free(st);
    return ok;
}

static void test_nan_loss_stops_with_step_checkpoint_and_hint(void) {
    brisk_error err = {0};
    brisk_run_summary s;
    brisk_status st = run_poisoned(0, 18, 0, &s, NULL, &err);
    CHECKF(st == BRISK_ERR_NUMERIC && strstr(err.msg, "step 3: the training loss is NaN") &&
               strstr(err.msg, "last.safetensors (step 2)") && strstr(err.msg, "lower optim.lr") &&
               strstr(err.msg, "skip_nan_steps"),
           "%s", err.msg);
    int64_t at = -1;
    REQUIRE_OK(brisk_checkpoint_check(last_path, &at, &err), &err);
    CHECK(at == 2 && params_finite(last_path));
}

static void test_nan_steps_skipped_up_to_k(void) {
    brisk_error err = {0};
    brisk_run_summary s;
    int pattern = 0;
    REQUIRE_OK(run_poisoned(5, 18, 0, &s, &pattern, &err), &err);
    CHECK(s.nan_skipped == 3 && s.steps == 18 && pattern);
    CHECK(params_finite(last_path));
    /* Only 2 allowed: the third stops the run. */
    brisk_status st = run_poisoned(2, 18, 0, &s, NULL, &err);
    CHECKF(st == BRISK_ERR_NUMERIC && strstr(err.msg, "step 15") && strstr(err.msg, "after 2 skipped steps"), "%s", err.msg);
}

static void test_skips_are_counted_across_resume(void) {
    brisk_error err = {0};
    brisk_run_summary s;
    REQUIRE_OK(run_poisoned(1, 6, 0, &s, NULL, &err), &err);
    CHECK(s.nan_skipped == 1);
    brisk_status st = run_poisoned(1, 18, 1, &s, NULL, &err);
    CHECKF(st == BRISK_ERR_NUMERIC && strstr(err.msg, "step 9") && strstr(err.msg, "after 1 skipped"), "%s", err.msg);
}

/* The loss-scaler hook: a backend reports skipped updates; too many are reported once. */
typedef struct {
    brisk_trainer *t;
    int every, warnings;
    char warning[1024];
} scaler_feed;

static void feed_skips(void *user, brisk_log_level level, const char *msg) {
    scaler_feed *f = user;
    const char *p = strstr(msg, "  step ");
    if (p && f->t && atoll(p + 7) % f->every == 0) brisk_trainer_add_scaler_skips(f->t, 1);
    if (level == BRISK_LOG_WARN && strstr(msg, "loss scaler")) f->warnings++, snprintf(f->warning, sizeof f->warning, "%s", msg);
}

static void scaler_run(scaler_feed *f, int64_t steps, brisk_run_summary *s) {
    write_config(0, steps);
    tu_sh("rm -rf '%s/run'", dir);
    brisk_error err = {0};
    brisk_config cfg;
    brisk_logger lg = {feed_skips, f, BRISK_LOG_INFO};
    REQUIRE_OK(brisk_config_load(cfg_path, (const char *const[]){"train.log_every=1", "data.shuffle=true"}, 2, &cfg,
                                 &err), &err);
    REQUIRE_OK(brisk_trainer_create(&cfg, &lg, &f->t, &err), &err);
    REQUIRE_OK(brisk_trainer_run(f->t, s, &err), &err);
    brisk_trainer_free(f->t);
    brisk_config_free(&cfg);
}

static void test_loss_scaler_skip_fraction(void) {
    brisk_run_summary s;
    scaler_feed every = {.every = 1};
    scaler_run(&every, 30, &s);
    /* Skips past the 16 the scaler may spend finding its scale, above 5% of the steps. */
    CHECKF(every.warnings == 1 && strstr(every.warning, "skipped 17 of 17 steps") &&
               strstr(every.warning, "train.max_skipped_fraction"),
           "%d warnings: %s", every.warnings, every.warning);
    CHECK(s.scaler_skipped == 30);
    scaler_feed rare = {.every = 10};
    scaler_run(&rare, 60, &s);
    CHECK(rare.warnings == 0 && s.scaler_skipped == 6);
}

TEST_MAIN(T(test_nan_loss_stops_with_step_checkpoint_and_hint), T(test_nan_steps_skipped_up_to_k),
          T(test_skips_are_counted_across_resume), T(test_loss_scaler_skip_fraction))
