/* No work lost, nothing replaced by mistake: a run directory's previous run is refused
 * unless resumed or overwritten, each run marks its start in metrics.jsonl, a resumable
 * checkpoint is written at every epoch end, --resume auto also considers best.safetensors,
 * a restarted run never replaces a better best, a refused run leaves metrics.jsonl as it was, --max-steps 0 writes the initial weights (-1,
 * the default, lets the epochs decide),
 * and a run resumed at another batch size trains the epochs it was asked for. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train_test_util.h"

static char dir[512], data[600];

/* 1100 samples: 990 train (7 batches of 128, 15 of 64), 110 validate. */
static void make_data(void) {
    T_MAKE_DIR(dir, "run_dir");
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    brisk_error err = {0};
    if (access(data, F_OK) != 0 && brisk_synth_write("tabular", data, 1100, 2, &err))
        fprintf(stderr, "%s\n", err.msg);
}

typedef struct run_opts {
    const char *out;       /* under dir */
    const char *train;     /* extra "train" members, starting with ", " */
    const char *resume;    /* NULL, "auto" or a path */
    int overwrite;
    int64_t batch;         /* 0: 128 */
    int64_t *steps_done;   /* optional */
    int64_t *n_losses;     /* optional: steps this process ran */
    int *began;            /* optional: brisk_trainer_run_began after the run, also a refused one */
} run_opts;

static brisk_status run(const run_opts *o, brisk_run_summary *s, brisk_error *err) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [32], \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\"}, \"optim\": {\"lr\": 3e-3},"
             " \"train\": {\"batch_size\": %lld, \"out_dir\": \"%s/%s\"%s}, \"speed\": {\"threads\": 1}}",
             data, (long long)(o->batch ? o->batch : 128), dir, o->out, o->train ? o->train : "");
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    cfg.train.overwrite = o->overwrite;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    int resumed;
    st = brisk_trainer_create(&cfg, &quiet, &t, err);
    if (!st && o->resume && strcmp(o->resume, "auto") == 0) st = brisk_trainer_resume_auto(t, &resumed, err);
    else if (!st && o->resume) st = brisk_trainer_resume(t, o->resume, err);
    if (!st) st = brisk_trainer_run(t, s, err);
    if (o->began) *o->began = brisk_trainer_run_began(t);
    if (!st && o->steps_done) *o->steps_done = brisk_trainer_steps_done(t);
    if (!st && o->n_losses) brisk_trainer_losses(t, o->n_losses);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

static int count_lines(const char *path, const char *needle) {
    char *text = tu_read(path, NULL);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(text);
    return n;
}

static int exists(const char *fmt, const char *a, int64_t b) {
    char path[1200];
    snprintf(path, sizeof path, fmt, a, (long long)b);
    return access(path, F_OK) == 0;
}

static const char *meta(const char *path, const char *key, char *buf, size_t n) {
    brisk_safetensors *st = NULL;
    brisk_error err = {0};
    buf[0] = 0;
    if (brisk_safetensors_open(path, &st, &err)) return buf;
    const char *v = brisk_safetensors_meta(st, key);
    snprintf(buf, n, "%s", v ? v : "");
    brisk_safetensors_free(st);
    return buf;
}

static void test_previous_run_refused_resumed_or_overwritten(void) {
    make_data();
    brisk_error err = {0};
    brisk_run_summary s;
    char metrics[700], out[600];
    snprintf(out, sizeof out, "%s/again", dir);
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", out);
    /* batch 64: 15 steps an epoch; the overwriting run below takes 7 */
    int began = 0;
    REQUIRE_OK(run(&(run_opts){.out = "again", .train = ", \"epochs\": 1", .batch = 64, .began = &began}, &s, &err),
               &err);
    CHECK(began == 1);
    CHECK(exists("%s/step-%08lld.safetensors", out, 15));
    char *before = tu_read(metrics, NULL);
    brisk_status st = run(&(run_opts){.out = "again", .train = ", \"epochs\": 1", .began = &began}, &s, &err);
    CHECKF(st == BRISK_ERR_INVALID && strstr(err.msg, "holds a previous run") && strstr(err.msg, "--resume auto") &&
               strstr(err.msg, "--overwrite"), "%s", err.msg);
    CHECK(exists("%s/step-%08lld.safetensors", out, 15)); /* untouched */
    /* the refused run did not begin: metrics.jsonl as the previous run left it, byte for byte */
    char *after = tu_read(metrics, NULL);
    CHECK(began == 0 && before && after && strcmp(before, after) == 0);
    free(before), free(after);
    CHECK(count_lines(metrics, "\"event\":\"run_start\"") == 1);
    /* continued: a second start record, naming the checkpoint it resumed from */
    REQUIRE_OK(run(&(run_opts){.out = "again", .train = ", \"epochs\": 2", .batch = 64, .resume = "auto"}, &s,
                   &err), &err);
    CHECK(count_lines(metrics, "\"event\":\"run_start\"") == 2);
    CHECK(count_lines(metrics, "\"resumed_from\":\"") == 1);
    /* replaced: the previous run's checkpoints and metrics are gone */
    REQUIRE_OK(run(&(run_opts){.out = "again", .train = ", \"epochs\": 1", .overwrite = 1}, &s, &err), &err);
    CHECK(!exists("%s/step-%08lld.safetensors", out, 15) && !exists("%s/step-%08lld.safetensors", out, 30));
    CHECK(exists("%s/step-%08lld.safetensors", out, 7));
    CHECK(count_lines(metrics, "\"event\":\"run_start\"") == 1);
    CHECK(count_lines(metrics, "\"resumed_from\":null") == 1);
}

static void test_checkpoint_every_epoch(void) {
    make_data();
    brisk_error err = {0};
    brisk_run_summary s;
    char out[600];
    REQUIRE_OK(run(&(run_opts){.out = "epochs", .train = ", \"epochs\": 3, \"keep_checkpoints\": 9"}, &s, &err), &err);
    snprintf(out, sizeof out, "%s/epochs", dir);
    for (int e = 1; e <= 3; e++) CHECK(exists("%s/step-%08lld.safetensors", out, 7 * e));
    REQUIRE_OK(run(&(run_opts){.out = "epochs2", .train = ", \"epochs\": 3, \"keep_checkpoints\": 9, "
                                                          "\"checkpoint_epochs\": 2"}, &s, &err), &err);
    snprintf(out, sizeof out, "%s/epochs2", dir);
    CHECK(!exists("%s/step-%08lld.safetensors", out, 7) && exists("%s/step-%08lld.safetensors", out, 14));
    CHECK(exists("%s/step-%08lld.safetensors", out, 21)); /* the run's end */
    CHECK(run(&(run_opts){.out = "epochs3", .train = ", \"checkpoint_epochs\": -1"}, &s, &err) == BRISK_ERR_INVALID &&
          strstr(err.msg, "checkpoint_epochs"));
}

/* --max-steps 0 writes the initial weights; a restart from them in a run directory whose
 * best.safetensors is better never replaces it; --resume auto takes best when it is the
 * newest checkpoint there. */
static void test_step0_best_and_resume_auto(void) {
    make_data();
    brisk_error err = {0};
    brisk_run_summary s;
    int64_t done = -1, ran = -1;
    char init[700], best[700], copy[700], buf[64];
    /* the initial weights of the run below: a restart from another run's checkpoint would be
     * refused (issue 37, item 14) */
    REQUIRE_OK(run(&(run_opts){.out = "best", .train = ", \"max_steps\": 0", .steps_done = &done, .n_losses = &ran}, &s,
                   &err), &err);
    CHECK(done == 0 && ran == 0);
    snprintf(init, sizeof init, "%s/best/step-00000000.safetensors", dir);
    REQUIRE(brisk_checkpoint_check(init, NULL, &err) == BRISK_OK);
    CHECK(strcmp(meta(init, "step", buf, sizeof buf), "0") == 0);
    /* -1 is the default, as in PyTorch Lightning and Hugging Face's Trainer: the epochs decide
     * (one epoch: 7 batches of 128); below it is an error naming the key */
    done = -1;
    REQUIRE_OK(run(&(run_opts){.out = "minus1", .train = ", \"max_steps\": -1", .steps_done = &done}, &s, &err), &err);
    CHECK(done == 7);
    CHECK(run(&(run_opts){.out = "bad", .train = ", \"max_steps\": -2"}, &s, &err) == BRISK_ERR_INVALID &&
          strstr(err.msg, "max_steps"));

    /* a run whose best epoch is better than its first */
    REQUIRE_OK(run(&(run_opts){.out = "best", .train = ", \"epochs\": 4, \"keep_checkpoints\": 9", .resume = "auto"}, &s,
                   &err), &err);
    snprintf(best, sizeof best, "%s/best/best.safetensors", dir);
    snprintf(copy, sizeof copy, "%s/best_before.safetensors", dir);
    tu_sh("cp '%s' '%s'", best, copy);
    double best_loss = strtod(meta(best, "best_val_loss", buf, sizeof buf), NULL);
    char metrics[700];
    snprintf(metrics, sizeof metrics, "%s/best/metrics.jsonl", dir);
    char *text = tu_read(metrics, NULL);
    const char *first = text ? strstr(text, "\"val_loss\": ") : NULL;
    double first_loss = first ? strtod(first + 12, NULL) : NAN;
    free(text);
    REQUIRE(best_loss < first_loss);
    /* restarted from the initial weights: its epoch 1 replays the first run's, worse than best;
     * the summary's best is the run's over all its parts (issue 37, item 19), this part's apart */
    REQUIRE_OK(run(&(run_opts){.out = "best", .train = ", \"epochs\": 1, \"keep_checkpoints\": 9", .resume = init}, &s,
                   &err), &err);
    CHECK_NEAR(s.run_best_val_loss, first_loss, 1e-6 * first_loss);
    CHECK_NEAR(s.best_val_loss, best_loss, 1e-6 * best_loss);
    CHECK(s.best_before_run);
    CHECK(tu_same_file(best, copy));

    /* killed before any other checkpoint: only best is left, and auto resumes from it */
    int64_t best_step = strtoll(meta(best, "step", buf, sizeof buf), NULL, 10);
    tu_sh("rm -f %s/best/last.safetensors %s/best/step-*.safetensors", dir, dir);
    REQUIRE_OK(run(&(run_opts){.out = "best", .train = ", \"epochs\": 4", .resume = "auto", .steps_done = &done}, &s,
                   &err), &err);
    CHECK(best_step > 0 && done == 28);
}

/* After 3 epochs at batch 128, a resume at batch 64 with epochs 5 trains exactly 2 more
 * epochs (2 x 15 steps), ending at epoch 5, position 0. */
static void test_resume_at_another_batch_size(void) {
    make_data();
    brisk_error err = {0};
    brisk_run_summary s;
    int64_t done = -1, ran = -1;
    char last[700], buf[64];
    REQUIRE_OK(run(&(run_opts){.out = "batch", .train = ", \"epochs\": 3", .steps_done = &done}, &s, &err), &err);
    CHECK(done == 21);
    REQUIRE_OK(run(&(run_opts){.out = "batch", .train = ", \"epochs\": 5", .batch = 64, .resume = "auto",
                               .steps_done = &done, .n_losses = &ran}, &s, &err), &err);
    CHECK(ran == 30 && done == 51);
    CHECK(s.epochs_done == 2);
    snprintf(last, sizeof last, "%s/batch/last.safetensors", dir);
    CHECK(strcmp(meta(last, "epoch", buf, sizeof buf), "5") == 0);
    CHECK(strcmp(meta(last, "position", buf, sizeof buf), "0") == 0);
    CHECK(strcmp(meta(last, "samples", buf, sizeof buf), "4608") == 0); /* 21 x 128 + 30 x 64 */
    /* and back up: 1 more epoch at batch 128 is 7 steps */
    REQUIRE_OK(run(&(run_opts){.out = "batch", .train = ", \"epochs\": 6", .resume = "auto", .n_losses = &ran}, &s,
                   &err), &err);
    CHECK(ran == 7);
}

TEST_MAIN(T(test_previous_run_refused_resumed_or_overwritten), T(test_checkpoint_every_epoch),
          T(test_step0_best_and_resume_auto), T(test_resume_at_another_batch_size))
