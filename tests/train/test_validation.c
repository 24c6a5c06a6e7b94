/* Validation scores every sample: the loss, accuracy and confusion matrix the trainer
 * reports equal what `predict` on the same weights gives over the whole validation split
 * (a last, smaller batch included, and a split smaller than one batch), or over a separate
 * validation file (data.validation); and a windowed regression target learnt normalised
 * is mapped back to its units in MAE/RMSE and in predict. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train_test_util.h"

static char dir[512];

/* Trains the config string; the summary and (optionally) the trainer's batches per epoch. */
static brisk_status train(const char *json, brisk_run_summary *sum, int64_t *bpe, brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    st = brisk_trainer_create(&cfg, &quiet, &t, err);
    if (!st && bpe) *bpe = brisk_trainer_batches_per_epoch(t);
    if (!st) st = brisk_trainer_run(t, sum, err);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st;
}

/* Rows `idx` (NULL: all n) of an npz's x [N, 64] and y [N] into x.npy / y (malloc'd). */
static void subset(const char *npz, const int64_t *idx, int64_t n, const char *x_out, int32_t **y) {
    brisk_npz z = {0};
    brisk_error err = {0};
    if (brisk_npz_read(npz, &z, &err)) { fprintf(stderr, "%s\n", err.msg); return; }
    const brisk_npy_array *x = brisk_npz_find(&z, "x"), *yy = brisk_npz_find(&z, "y");
    brisk_tensor t = {0};
    brisk_tensor_alloc(&t, BRISK_F32, brisk_shape2(n, 64), &err);
    *y = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = idx ? idx[i] : i;
        memcpy((float *)t.data + i * 64, (const float *)x->data + r * 64, 64 * sizeof(float));
        (*y)[i] = ((const int32_t *)yy->data)[r];
    }
    if (brisk_npy_write(x_out, &t, &err)) fprintf(stderr, "%s\n", err.msg);
    brisk_tensor_free(&t);
    brisk_npz_free(&z);
}

/* Cross-entropy and accuracy of the checkpoint's predictions on x.npy against y. */
static void reference(const char *ckpt, const char *x_npy, const int32_t *y, int64_t n, double *loss, double *acc) {
    char out[600];
    snprintf(out, sizeof out, "%s/p.npy", dir);
    brisk_error err = {0};
    brisk_logger quiet = {0};
    brisk_tensor p = {0};
    *loss = *acc = NAN;
    if (brisk_predict_file(ckpt, x_npy, out, &quiet, &err) || brisk_npy_load(out, BRISK_F32, &p, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    double l = 0, right = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *r = (const float *)p.data + i * 3;
        int best = 0;
        for (int c = 1; c < 3; c++) best = r[c] > r[best] ? c : best;
        right += best == y[i];
        l -= log((double)r[y[i]]);
    }
    *loss = l / (double)n, *acc = right / (double)n;
    brisk_tensor_free(&p);
}

/* 1140 samples, validation_fraction 0.1: 114 validate; at batch 64 that is one full batch and
 * 50 more, at batch 128 less than one batch. Both must score all 114. */
static void check_whole_split(int64_t batch) {
    T_MAKE_DIR(dir, "validation");
    char data[600], json[2048], ckpt[700], xv[700];
    brisk_error err = {0};
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    REQUIRE_OK(brisk_synth_write("tabular", data, 1140, 3, &err), &err);
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [32], \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": %lld, \"epochs\": 1, \"out_dir\": \"%s/b%lld\"},"
             " \"speed\": {\"threads\": 1}}", data, (long long)batch, dir, (long long)batch);
    brisk_run_summary s;
    REQUIRE_OK(train(json, &s, NULL, &err), &err);
    brisk_split split;
    REQUIRE_OK(brisk_split_make(1140, 0.1f, 0, &split, &err), &err);
    REQUIRE(split.nval == 114);
    int32_t *y = NULL;
    snprintf(xv, sizeof xv, "%s/xval.npy", dir);
    subset(data, split.val, split.nval, xv, &y);
    snprintf(ckpt, sizeof ckpt, "%s/b%lld/last.safetensors", dir, (long long)batch);
    double loss, acc;
    reference(ckpt, xv, y, split.nval, &loss, &acc);
    fprintf(stderr, "batch %lld: val loss %.7f (predict: %.7f), accuracy %.5f (%.5f)\n", (long long)batch,
            s.best_val_loss, loss, s.best.accuracy, acc);
    CHECK_NEAR(s.best_val_loss, loss, 1e-5 * fabs(loss));
    CHECK_NEAR(s.best.accuracy, acc, 1e-12);
    int64_t seen = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) seen += s.best.confusion[i][j];
    CHECK(seen == 114);
    free(y);
    brisk_split_free(&split);
}

static void test_last_partial_batch(void) { check_whole_split(64); }
static void test_split_smaller_than_a_batch(void) { check_whole_split(128); }

static void test_validation_file(void) {
    T_MAKE_DIR(dir, "validation");
    char tr[600], va[600], json[2048], ckpt[700], xv[700];
    brisk_error err = {0};
    snprintf(tr, sizeof tr, "%s/train.npz", dir);
    snprintf(va, sizeof va, "%s/val.npz", dir);
    REQUIRE_OK(brisk_synth_write("tabular", tr, 1000, 4, &err), &err);
    REQUIRE_OK(brisk_synth_write("tabular", va, 77, 5, &err), &err);
    const char *fmt = "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3},"
                      " \"data\": {\"train\": \"%s\", \"validation\": \"%s\"%s}, \"train\": {\"batch_size\": 64,"
                      " \"epochs\": 1, \"out_dir\": \"%s/vf\"}, \"speed\": {\"threads\": 1}}";
    snprintf(json, sizeof json, fmt, tr, va, "", dir);
    brisk_run_summary s;
    int64_t bpe = 0;
    REQUIRE_OK(train(json, &s, &bpe, &err), &err);
    CHECK(bpe == 1000 / 64); /* all of data.train trains */
    int32_t *y = NULL;
    snprintf(xv, sizeof xv, "%s/xfile.npy", dir);
    subset(va, NULL, 77, xv, &y);
    snprintf(ckpt, sizeof ckpt, "%s/vf/last.safetensors", dir);
    double loss, acc;
    reference(ckpt, xv, y, 77, &loss, &acc);
    CHECK_NEAR(s.best_val_loss, loss, 1e-5 * fabs(loss));
    CHECK_NEAR(s.best.accuracy, acc, 1e-12);
    free(y);
    /* bad values: both ways of validating, a missing file, a file of another kind */
    snprintf(json, sizeof json, fmt, tr, va, ", \"validation_fraction\": 0.2", dir);
    CHECK(train(json, &s, NULL, &err) == BRISK_ERR_INVALID && strstr(err.msg, "not both"));
    snprintf(json, sizeof json, fmt, tr, T_ABSENT "/val.npz", "", dir);
    CHECK(train(json, &s, NULL, &err) != BRISK_OK && strstr(err.msg, T_ABSENT "/val.npz"));
    snprintf(json, sizeof json, fmt, tr, "val.csv", "", dir);
    CHECK(train(json, &s, NULL, &err) == BRISK_ERR_INVALID && strstr(err.msg, "data.validation"));
    /* data given in memory (the library API) has no file to pair it with */
    brisk_config cfg;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    snprintf(json, sizeof json, fmt, "", va, "", dir);
    REQUIRE_OK(brisk_config_parse(json, "<test>", NULL, 0, &cfg, &err), &err);
    CHECK(brisk_trainer_create_with_dataset(&cfg, &quiet, NULL, &t, &err) == BRISK_ERR_INVALID &&
          strstr(err.msg, "data.validation"));
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
}

/* MAE and RMSE of a windowed regression checkpoint's predictions for the windows k >= first
 * of a series CSV (window k ends at row k + L - 1; its target is close[k + L - 1 + H]), and
 * the mean target. */
static void window_errors(const char *ckpt, const char *csv, int64_t first, int64_t L, int64_t H, double *mae,
                          double *rmse, double *price) {
    char out[700];
    snprintf(out, sizeof out, "%s/pred.npy", dir);
    brisk_error err = {0};
    brisk_logger quiet = {0};
    brisk_tensor p = {0}, close = {0};
    const char *col[] = {"close"};
    *mae = *rmse = *price = NAN;
    if (brisk_predict_file(ckpt, csv, out, &quiet, &err) || brisk_npy_load(out, BRISK_F32, &p, &err) ||
        brisk_csv_read(csv, col, 1, BRISK_F32, &close, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        brisk_tensor_free(&p);
        return;
    }
    int64_t rows = close.shape.d[0], K = rows - L - H + 1, n = 0;
    double abs_sum = 0, sq = 0, sum = 0;
    if (p.shape.d[0] == rows - L + 1)
        for (int64_t k = first; k < K; k++, n++) {
            double y = ((const float *)close.data)[k + L - 1 + H], d = ((const float *)p.data)[k] - y;
            abs_sum += fabs(d), sq += d * d, sum += y;
        }
    if (n) *mae = abs_sum / n, *rmse = sqrt(sq / n), *price = sum / n;
    brisk_tensor_free(&p);
    brisk_tensor_free(&close);
}

/* A windowed regression of the close price itself: learnt normalised (the default), reported
 * and predicted in the price's units; validated on the chronological split or on a file. */
static void test_windowed_target_normalised(void) {
    T_MAKE_DIR(dir, "validation");
    char csv[600], vcsv[600], json[2048], ckpt[700], extra[700];
    brisk_error err = {0};
    snprintf(csv, sizeof csv, "%s/series.csv", dir);
    snprintf(vcsv, sizeof vcsv, "%s/series_val.csv", dir);
    REQUIRE_OK(brisk_synth_write("series", csv, 1200, 7, &err), &err);
    REQUIRE_OK(brisk_synth_write("series", vcsv, 300, 8, &err), &err);
    const int64_t L = 8, H = 3, rows = 1200, split = rows - 300; /* validation_fraction 0.25 */
    const char *fmt = "{\"model\": {\"type\": \"lstm\", \"inputs\": 3, \"seq_len\": %lld, \"hidden\": 8, \"outputs\": 1,"
                      " \"task\": \"regress\"}, \"data\": {\"train\": \"%s\"%s,"
                      " \"windows\": {\"features\": [\"ret_1\", \"dev_16\", \"vol_32\"], \"length\": %lld, \"horizon\": %lld,"
                      " \"target\": {\"column\": \"close\", \"kind\": \"value\"%s}}},"
                      " \"train\": {\"batch_size\": 64, \"epochs\": 2, \"out_dir\": \"%s/%s\"}, \"speed\": {\"threads\": 1}}";
    const char *split_25 = ", \"validation_fraction\": 0.25";
    snprintf(json, sizeof json, fmt, (long long)L, csv, split_25, (long long)L, (long long)H, "", dir, "norm");
    brisk_run_summary s;
    REQUIRE_OK(train(json, &s, NULL, &err), &err);
    snprintf(ckpt, sizeof ckpt, "%s/norm/best.safetensors", dir); /* the epoch the summary reports */
    double mae, rmse, price;
    window_errors(ckpt, csv, split, L, H, &mae, &rmse, &price);
    fprintf(stderr, "windowed regression: val MAE %.6g RMSE %.6g (predict: %.6g, %.6g) around a price of %.4g\n",
            s.best.mae, s.best.rmse, mae, rmse, price);
    CHECK_NEAR(s.best.mae, mae, 1e-4 * mae);
    CHECK_NEAR(s.best.rmse, rmse, 1e-4 * rmse);
    CHECK(s.best.mae < 0.5 * fabs(price)); /* in the price's units, not around 0: mapped back */
    /* a validation file: every one of its windows, normalised with the training rows' statistics */
    snprintf(extra, sizeof extra, ", \"validation\": \"%s\"", vcsv);
    snprintf(json, sizeof json, fmt, (long long)L, csv, extra, (long long)L, (long long)H, "", dir, "vfile");
    REQUIRE_OK(train(json, &s, NULL, &err), &err);
    snprintf(ckpt, sizeof ckpt, "%s/vfile/best.safetensors", dir);
    window_errors(ckpt, vcsv, 0, L, H, &mae, &rmse, &price);
    CHECK_NEAR(s.best.mae, mae, 1e-4 * mae);
    CHECK_NEAR(s.best.rmse, rmse, 1e-4 * rmse);
    /* normalize false trains on raw targets and writes no target normalisation */
    snprintf(json, sizeof json, fmt, (long long)L, csv, split_25, (long long)L, (long long)H, ", \"normalize\": false",
             dir, "raw");
    REQUIRE_OK(train(json, &s, NULL, &err), &err);
    snprintf(ckpt, sizeof ckpt, "%s/raw/last.safetensors", dir);
    brisk_safetensors *st = NULL;
    REQUIRE_OK(brisk_safetensors_open(ckpt, &st, &err), &err);
    CHECK(brisk_safetensors_meta(st, "target_normalization") == NULL);
    brisk_safetensors_free(st);
    snprintf(json, sizeof json, fmt, (long long)L, csv, split_25, (long long)L, (long long)H, ", \"normalize\": 1", dir,
             "bad");
    CHECK(train(json, &s, NULL, &err) == BRISK_ERR_INVALID && strstr(err.msg, "normalize"));
}

TEST_MAIN(T(test_last_partial_batch), T(test_split_smaller_than_a_batch), T(test_validation_file),
          T(test_windowed_target_normalised))
