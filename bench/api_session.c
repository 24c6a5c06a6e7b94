/* The online-training figures of issue #5, measured through the stable API as a simulation
 * would call it: a diffusion session (the workload's denoiser), 48 pushes of 80 samples, then
 * timed calls of one epoch (240 batches of 16) and of 50-step DDPM sampling of 3840 samples.
 * Prints one JSON line with the medians.
 *
 *   brisk_api_bench [--threads 2] [--repeat 5] [--prefetch 4] [--prediction noise|x0] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"

int main(int argc, char **argv) {
    int threads = 2, repeat = 5, prefetch = 4;
    const char *prediction = "noise";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prefetch") && i + 1 < argc) prefetch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prediction") && i + 1 < argc) prediction = argv[++i];
        else {
            fprintf(stderr, "usage: brisk_api_bench [--threads N] [--repeat R] [--prefetch N] [--prediction noise|x0]\n");
            return 2;
        }
    }
    if (repeat < 1 || repeat > 1000) repeat = 5;
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"model\": {\"type\": \"diffusion\", \"noise\": {\"prediction\": \"%s\"}},"
             " \"data\": {\"validation_fraction\": 0, \"buffer\": {\"capacity\": 3840}},"
             " \"train\": {\"batch_size\": 16}, \"speed\": {\"threads\": %d, \"prefetch\": %d}}",
             prediction, threads, prefetch);
    brisk_dataset ds;
    brisk_error err = {0};
    if (brisk_synth_make("diffusion", 3840, 0, &ds, &err)) {
        fprintf(stderr, "brisk_api_bench: %s\n", err.msg);
        return 1;
    }
    const float *coarse = brisk_dataset_get(&ds, "coarse")->data, *fine = brisk_dataset_get(&ds, "fine")->data;
    float *out = malloc(sizeof(float) * 3840 * 256);
    double *train_s = malloc(sizeof(double) * (size_t)repeat), *sample_s = malloc(sizeof(double) * (size_t)repeat);
    brisk_session *s = NULL;
    brisk_status st = brisk_session_create(cfg, NULL, NULL, &s);
    for (int k = 0; k < 48 && !st; k++) st = brisk_session_push(s, 80, coarse + k * 80 * 7, 7, fine + k * 80 * 256, 256);
    double loss = 0, steps = 0;
    /* one untimed epoch and sampling call first: page faults, graph builds */
    if (!st) st = brisk_session_train_epochs(s, 1);
    if (!st) st = brisk_session_sample(s, 3840, coarse, 7, out, 256, BRISK_SAMPLER_DDPM, 50, 0.0, 0);
    for (int r = 0; r < repeat && !st; r++) {
        double t0 = brisk_now();
        st = brisk_session_train_epochs(s, 1);
        train_s[r] = brisk_now() - t0;
        if (st) break;
        t0 = brisk_now();
        st = brisk_session_sample(s, 3840, coarse, 7, out, 256, BRISK_SAMPLER_DDPM, 50, 0.0, (uint64_t)r);
        sample_s[r] = brisk_now() - t0;
    }
    if (!st) st = brisk_session_query(s, "train_loss", &loss);
    if (!st) st = brisk_session_query(s, "steps", &steps);
    if (st) {
        fprintf(stderr, "brisk_api_bench: %s\n", brisk_session_error(s));
        return 1;
    }
    printf("{\"bench\": \"api_session\", \"threads\": %d, \"prefetch\": %d, \"prediction\": \"%s\", \"repeat\": %d, "
           "\"epoch_s_median\": %.4f, \"ms_per_step\": %.4f, \"sample_3840x50_s_median\": %.4f, \"steps\": %.0f, "
           "\"train_loss\": %.5f}\n",
           threads, prefetch, prediction, repeat, brisk_median(train_s, repeat), 1e3 * brisk_median(train_s, repeat) / 240.0,
           brisk_median(sample_s, repeat), steps, loss);
    brisk_session_destroy(s);
    brisk_dataset_free(&ds);
    free(out), free(train_s), free(sample_s);
    return 0;
}
