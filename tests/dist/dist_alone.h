/* World size 1 costs nothing: a trainer given a one-process group (brisk_trainer_set_dist)
 * issues no collective and trains bit for bit as one without a group. Shared by
 * test_dist_alone.c (CPU) and test_cuda_dist_alone.c (the GPU, where the backend's NCCL
 * all-reduce must not be reached either). Prints both runs' median ms/step (the
 * all-reduce overhead at world size 1, which must be nil). */
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"

static char alone_dir[256];

static brisk_status alone_run(const char *device, brisk_dist *d, float **losses, int64_t *n, double *ms,
                              brisk_error *err) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [128, 64], \"outputs\": 3, \"dropout\": 0.1},"
             " \"data\": {\"train\": \"%s/tab.npz\", \"validation_fraction\": 0.1},"
             " \"train\": {\"batch_size\": 64, \"max_steps\": 40, \"seed\": 3, \"log_every\": 40, \"out_dir\": \"\"},"
             " \"speed\": {\"device\": \"%s\", \"deterministic\": true, \"threads\": 2}}",
             alone_dir, device);
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    brisk_run_summary sum;
    st = brisk_trainer_create(&cfg, &quiet, &t, err);
    if (!st && d) st = brisk_trainer_set_dist(t, d, 0, err);
    if (!st) st = brisk_trainer_run(t, &sum, err);
    if (!st) {
        const float *l = brisk_trainer_losses(t, n);
        *losses = malloc(sizeof(float) * (size_t)(*n ? *n : 1));
        memcpy(*losses, l, sizeof(float) * (size_t)*n);
        *ms = sum.ms_per_step_median;
    }
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

static void check_alone(const char *device) {
    brisk_error err = {0};
    T_MAKE_DIR(alone_dir, "dist_alone");
    char path[300];
    snprintf(path, sizeof path, "%s/tab.npz", alone_dir);
    REQUIRE_OK(brisk_synth_write("tabular", path, 4096, 0, &err), &err);
    brisk_dist *d = NULL;
    REQUIRE_OK(brisk_dist_create(&d, &err), &err);
    REQUIRE(brisk_dist_world(d) == 1);
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    double ms_a = 0, ms_b = 0;
    brisk_status st = alone_run(device, NULL, &a, &na, &ms_a, &err);
    if (!st) st = alone_run(device, d, &b, &nb, &ms_b, &err);
    CHECKF(st == BRISK_OK, "%s", err.msg);
    CHECK(na == 40 && nb == na);
    if (na == nb && a && b) CHECK(memcmp(a, b, sizeof(float) * (size_t)na) == 0);
    CHECK(brisk_dist_collectives(d) == 0 && brisk_dist_bytes(d) == 0);
    printf("%s, world size 1: %.3f ms/step without a group, %.3f with one; %lld collectives\n", device, ms_a, ms_b,
           (long long)brisk_dist_collectives(d));
    free(a), free(b);
    brisk_dist_free(d);
}
