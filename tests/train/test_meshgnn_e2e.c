/* The mesh GNN end to end from an .npz of grid fields: config keys (model.type "meshgnn"),
 * training that learns a local map from inputs to the change (validation loss well below the
 * targets' variance, the best constant guess), brisk predict on it, and bad config values as
 * errors naming the key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train_test_util.h"

static char dir[256], data[300];
static double y_var;

/* 8x8 grid, 4 inputs, 2 outputs: y = 0.5 x0 - 0.3 x1 x2 + 0.2 x3, per node. */
static void setup(void) {
    if (dir[0]) return;
    tu_scratch(dir, sizeof dir, "meshgnn_e2e");
    snprintf(data, sizeof data, "%s/fields.npz", dir);
    const int64_t N = 192, G = 64;
    brisk_tensor t[2];
    brisk_error err = {0};
    if (brisk_tensor_alloc(&t[0], BRISK_F32, brisk_shape3(N, G, 4), &err) ||
        brisk_tensor_alloc(&t[1], BRISK_F32, brisk_shape3(N, G, 2), &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    float *x = t[0].data, *y = t[1].data;
    uint64_t s = 7;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < N * G; i++) {
        for (int c = 0; c < 4; c++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x[i * 4 + c] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        }
        y[i * 2] = 0.5f * x[i * 4] - 0.3f * x[i * 4 + 1] * x[i * 4 + 2];
        y[i * 2 + 1] = 0.2f * x[i * 4 + 3];
        for (int c = 0; c < 2; c++) sum += y[i * 2 + c], sq += (double)y[i * 2 + c] * y[i * 2 + c];
    }
    double n = (double)(N * G * 2);
    y_var = sq / n - (sum / n) * (sum / n);
    const char *names[2] = {"x", "y"};
    if (brisk_npz_write(data, 2, names, t, &err)) fprintf(stderr, "%s\n", err.msg);
    brisk_tensor_free(&t[0]);
    brisk_tensor_free(&t[1]);
}

#define MODEL "\"type\": \"meshgnn\", \"inputs\": 4, \"outputs\": 2, \"grid\": [8, 8], \"mesh\": [4, 4], \"latent\": 32"

static void test_learns(void) {
    setup();
    char json[2048];
    brisk_error err = {0};
    snprintf(json, sizeof json,
             "{\"model\": {" MODEL ", \"layers\": 2},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.25},"
             " \"optim\": {\"lr\": 0.003},"
             " \"train\": {\"batch_size\": 8, \"epochs\": 5, \"out_dir\": \"%s/run\"}}", data, dir);
    brisk_run_summary s;
    REQUIRE_OK(tu_train_json(json, NULL, 0, &s, NULL, NULL, &err), &err);
    fprintf(stderr, "meshgnn: val loss %.5f, targets' variance %.5f\n", s.best_val_loss, y_var);
    CHECK(s.params > 0 && s.best_val_loss < 0.25 * y_var);
}

/* brisk predict on the learnt model: samples [N, grid, inputs] -> [N, grid, outputs], close to
 * the targets as the validation loss says, and each sample's the same alone as in a batch. */
static void test_predict(void) {
    setup();
    char ckpt[400], xin[400], yout[400], y1[400];
    snprintf(ckpt, sizeof ckpt, "%s/run/last.safetensors", dir);
    snprintf(xin, sizeof xin, "%s/x3.npy", dir);
    snprintf(yout, sizeof yout, "%s/y3.npy", dir);
    snprintf(y1, sizeof y1, "%s/y1.npy", dir);
    brisk_error err = {0};
    brisk_npz z;
    REQUIRE_OK(brisk_npz_read(data, &z, &err), &err);
    brisk_tensor x = {0}, y = {0}, p = {0}, p1 = {0};
    REQUIRE_OK(brisk_npy_to_tensor(brisk_npz_find(&z, "x"), BRISK_F32, "x", &x, &err), &err);
    REQUIRE_OK(brisk_npy_to_tensor(brisk_npz_find(&z, "y"), BRISK_F32, "y", &y, &err), &err);
    brisk_npz_free(&z);
    brisk_logger quiet = {0};
    x.shape.d[0] = 3; /* the first three samples */
    REQUIRE_OK(brisk_npy_write(xin, &x, &err), &err);
    REQUIRE_OK(brisk_predict_file(ckpt, xin, yout, &quiet, &err), &err);
    x.shape.d[0] = 1;
    REQUIRE_OK(brisk_npy_write(xin, &x, &err), &err);
    REQUIRE_OK(brisk_predict_file(ckpt, xin, y1, &quiet, &err), &err);
    REQUIRE_OK(brisk_npy_load(yout, BRISK_F32, &p, &err), &err);
    REQUIRE_OK(brisk_npy_load(y1, BRISK_F32, &p1, &err), &err);
    CHECK(p.shape.ndim == 3 && p.shape.d[0] == 3 && p.shape.d[1] == 64 && p.shape.d[2] == 2);
    CHECK(p1.shape.ndim == 3 && p1.shape.d[0] == 1);
    double se = 0, diff = 0;
    const float *pv = p.data, *yv = y.data, *p1v = p1.data;
    for (int64_t i = 0; i < 3 * 64 * 2; i++) se += (pv[i] - yv[i]) * (double)(pv[i] - yv[i]);
    for (int64_t i = 0; i < 64 * 2; i++) diff = fmax(diff, fabs(pv[i] - p1v[i]));
    fprintf(stderr, "meshgnn predict: mse %.5f (targets' variance %.5f), batch 1 vs 3 max difference %g\n",
            se / (3 * 64 * 2), y_var, diff);
    CHECK(se / (3 * 64 * 2) < 0.5 * y_var && diff < 1e-5);
    brisk_tensor_free(&x), brisk_tensor_free(&y), brisk_tensor_free(&p), brisk_tensor_free(&p1);
}

static void expect_error(const char *model, const char *want) {
    setup();
    char json[2048];
    brisk_error err = {0};
    snprintf(json, sizeof json, "{\"model\": {%s}, \"data\": {\"train\": \"%s\"}, \"train\": {\"out_dir\": \"%s/bad\"}}",
             model, data, dir);
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, &err);
    if (st == BRISK_OK) {
        brisk_trainer *t = NULL;
        brisk_logger quiet = {0};
        st = brisk_trainer_create(&cfg, &quiet, &t, &err);
        brisk_trainer_free(t);
        brisk_config_free(&cfg);
    }
    CHECKF(st != BRISK_OK && strstr(err.msg, want), "%s: got \"%s\", expected \"%s\"", model, err.msg, want);
}

static void test_bad_config(void) {
    expect_error(MODEL ", \"k\": 17", "model.k");
    expect_error(MODEL ", \"k\": 0", "model.k");
    expect_error(MODEL ", \"neighbours\": 16", "model.neighbours");
    expect_error(MODEL ", \"activation\": \"relu\"", "silu");
    expect_error("\"type\": \"meshgnn\", \"grid\": [4, 4], \"mesh\": [8, 8]", "finer than the grid");
    expect_error("\"type\": \"meshgnn\", \"grid\": [8], \"mesh\": [4, 4]", "[rows, cols]");
    expect_error(MODEL ", \"metric\": \"sphere\"", "model.lat");
    expect_error(MODEL ", \"metric\": \"sphere\", \"lat\": [50, 40], \"lon\": [0, 10]", "first < last");
    expect_error(MODEL ", \"metric\": \"torus\"", "model.metric");
    expect_error("\"type\": \"meshgnn\", \"grid\": [8, 8], \"mesh\": [4, 4], \"latent\": 0", "model.latent");
    expect_error(MODEL ", \"layerz\": 3", "layerz");
    expect_error(MODEL ", \"recompute\": 3", "model.recompute");
    expect_error(MODEL ", \"icosahedral\": 8", "model.icosahedral");
    expect_error(MODEL ", \"icosahedral\": 0", "globe");
    expect_error(MODEL ", \"icosahedral\": 0, \"metric\": \"sphere\", \"lat\": [-60, 90], \"lon\": [0, 360]", "globe");
    expect_error(MODEL ", \"icosahedral\": 2, \"metric\": \"sphere\", \"lat\": [-90, 90], \"lon\": [0, 360]",
                 "finer than the grid");
    expect_error("\"type\": \"meshgnn\", \"inputs\": 4, \"outputs\": 2, \"grid\": [16, 16], \"mesh\": [4, 4]", "'x'");
}

/* model.icosahedral: a 12-node icosahedral mesh over an 8x8 global grid builds and trains
 * (with model.recompute on). */
static void test_icosahedral(void) {
    setup();
    char json[2048];
    brisk_error err = {0};
    snprintf(json, sizeof json, "{\"model\": {" MODEL ", \"icosahedral\": 0, \"metric\": \"sphere\", \"lat\": [-90, 90], "
             "\"lon\": [-180, 180], \"recompute\": true}, \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 8, \"max_steps\": 2, "
             "\"out_dir\": \"%s/ico\"}}", data, dir);
    brisk_run_summary s;
    REQUIRE_OK(tu_train_json(json, NULL, 0, &s, NULL, NULL, &err), &err);
    CHECK(s.params > 0);
}

TEST_MAIN(T(test_learns), T(test_predict), T(test_bad_config), T(test_icosahedral))
