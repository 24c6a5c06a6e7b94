/* End to end: both examples train to a loss below a justified threshold, and a run
 * resumed from a mid-run checkpoint replays the uninterrupted run's losses exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train_test_util.h"

static char dir[256];

static void make_dir(void) {
    if (dir[0]) return;
    tu_scratch(dir, sizeof dir, "e2e");
}

static brisk_status train(const char *json, const char *resume, brisk_run_summary *sum, float **losses,
                          int64_t *n, brisk_error *err) {
    return tu_train_json(json, resume, 0, sum, losses, n, err);
}

static void test_tabular_learns(void) {
    make_dir();
    char data[300], json[2048];
    brisk_error err = {0};
    snprintf(data, sizeof data, "%s/tabular.npz", dir);
    REQUIRE_OK(brisk_synth_write("tabular", data, 8192, 0, &err), &err);
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [512, 256, 128], \"outputs\": 3,"
             " \"dropout\": 0.1}, \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.25},"
             " \"train\": {\"batch_size\": 256, \"epochs\": 4, \"out_dir\": \"%s/tab\"}}", data, dir);
    brisk_run_summary s;
    REQUIRE_OK(train(json, NULL, &s, NULL, NULL, &err), &err);
    /* Chance is ln 3 = 1.099 loss and 1/3 accuracy; the labels are a fixed function of x with 5%
     * noise, so a 200K-parameter MLP must be far better after 4 epochs. */
    fprintf(stderr, "tabular: val loss %.4f, accuracy %.4f, %.3f ms/step\n", s.best_val_loss, s.best_val_accuracy,
            s.ms_per_step_median);
    CHECK(s.best_val_loss < 0.7);
    CHECK(s.best_val_accuracy > 0.7);
}

static void test_diffusion_learns(void) {
    make_dir();
    char data[300], json[2048];
    brisk_error err = {0};
    snprintf(data, sizeof data, "%s/diffusion.npz", dir);
    REQUIRE_OK(brisk_synth_write("diffusion", data, 2000, 0, &err), &err);
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"diffusion\"}, \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.2},"
             " \"train\": {\"batch_size\": 16, \"epochs\": 6, \"out_dir\": \"%s/diff\"}}", data, dir);
    brisk_run_summary s;
    REQUIRE_OK(train(json, NULL, &s, NULL, NULL, &err), &err);
    /* The noise is standard normal and independent of (coarse, t), so any predictor that ignores
     * x_t scores MSE >= 1 in expectation. Below 0.9 the denoiser has learned to read the noise
     * out of x_t using the coarse condition (measured: 0.80 after these 6 epochs; the
     * example's 10 epochs of 240 batches reach 0.63). */
    fprintf(stderr, "diffusion: val loss %.4f, %.3f ms/step\n", s.best_val_loss, s.ms_per_step_median);
    CHECK(s.best_val_loss < 0.9);
}

static void test_resume_is_exact(void) {
    make_dir();
    char data[300], a[2048], b[2048], ckpt[400];
    brisk_error err = {0};
    snprintf(data, sizeof data, "%s/tabular_small.npz", dir);
    REQUIRE_OK(brisk_synth_write("tabular", data, 2048, 1, &err), &err);
    /* 3 epochs of 14 batches with dropout and accumulation 2: 21 steps. The first run stops at
     * step 10 (mid-epoch, mid-shuffle) as if preempted, the second resumes from its checkpoint. */
    const char *fmt = "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [64], \"outputs\": 3, \"dropout\": 0.2},"
                      " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.1},"
                      " \"optim\": {\"clip_norm\": 1.0, \"schedule\": {\"type\": \"cosine\", \"warmup_steps\": 3}},"
                      " \"train\": {\"batch_size\": 128, \"epochs\": 3, \"accumulate\": 2, \"max_steps\": %d, \"out_dir\": \"%s/%s\"}}";
    snprintf(a, sizeof a, fmt, data, 21, dir, "full");
    brisk_run_summary s;
    float *full = NULL, *second = NULL, *first = NULL;
    int64_t nf = 0, n1 = 0, n2 = 0;
    REQUIRE_OK(train(a, NULL, &s, &full, &nf, &err), &err);
    REQUIRE(nf == 21);
    snprintf(b, sizeof b, fmt, data, 21, dir, "part");
    REQUIRE_OK(tu_train_json(b, NULL, 10, &s, &first, &n1, &err), &err);
    REQUIRE(n1 == 10);
    snprintf(ckpt, sizeof ckpt, "%s/part/last.safetensors", dir);
    REQUIRE_OK(train(b, ckpt, &s, &second, &n2, &err), &err);
    REQUIRE(n2 == 11);
    int same = 1;
    for (int i = 0; i < 10; i++) same &= memcmp(&first[i], &full[i], sizeof(float)) == 0;
    for (int i = 0; i < 11; i++) same &= memcmp(&second[i], &full[10 + i], sizeof(float)) == 0;
    for (int i = 0; i < 11; i++)
        if (second[i] != full[10 + i]) fprintf(stderr, "step %d: resumed %.9g, uninterrupted %.9g\n", 11 + i, second[i], full[10 + i]);
    CHECK(same);
    free(full), free(first), free(second);
}

TEST_MAIN(T(test_tabular_learns), T(test_diffusion_learns), T(test_resume_is_exact))
