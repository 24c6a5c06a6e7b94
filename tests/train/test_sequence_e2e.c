/* Sequence models end to end on the synthetic series: an LSTM on windows learns
 * better than the best constant guess; a Transformer with dropout (attention dropout
 * included) resumed from a mid-run checkpoint replays the uninterrupted run's losses
 * bit for bit; a pipeline trains its models one after another with their own out_dirs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train_test_util.h"

static char dir[256], series[300];

/* The windows section shared by the configs: 8 features, windows of 20, 3 classes. */
#define WINDOWS                                                                                             \
    "\"windows\": {\"features\": [\"ret_1\", \"ret_4\", \"ret_16\", \"ret_64\", \"dev_16\", \"dev_128\", "    \
    "\"vol_16\", \"hour_sin\"], \"length\": 20, \"horizon\": 5, \"target\": {\"column\": \"close\", "          \
    "\"thresholds\": [-0.0011, 0.0011]}}"

static void setup(void) {
    if (dir[0]) return;
    tu_scratch(dir, sizeof dir, "sequence_e2e");
    snprintf(series, sizeof series, "%s/series.npz", dir);
    brisk_error err = {0};
    if (brisk_synth_write("series", series, 6000, 3, &err)) fprintf(stderr, "synth: %s\n", err.msg);
}

static void test_lstm_learns(void) {
    setup();
    char json[2048];
    brisk_error err = {0};
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"lstm\", \"inputs\": 8, \"seq_len\": 20, \"hidden\": 32, \"outputs\": 3},"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.25, " WINDOWS "},"
             " \"train\": {\"batch_size\": 64, \"epochs\": 3, \"out_dir\": \"%s/lstm\"}}", series, dir);
    brisk_run_summary s;
    REQUIRE_OK(tu_train_json(json, NULL, 0, &s, NULL, NULL, &err), &err);
    /* No constant guess does better than the validation split's own class frequencies, whose
     * cross-entropy is the entropy of its labels: the bar to beat. */
    const brisk_val_metrics *m = &s.best;
    REQUIRE(m->classes == 3 && m->n > 0);
    double count[3] = {0}, best_const = 0;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) count[r] += (double)m->confusion[r][c];
    for (int r = 0; r < 3; r++) best_const -= count[r] / (double)m->n * log(count[r] / (double)m->n);
    fprintf(stderr, "lstm: val loss %.4f (best constant guess %.4f), accuracy %.4f\n", s.best_val_loss, best_const,
            m->accuracy);
    CHECK(s.best_val_loss < best_const - 0.02);
    CHECK(m->accuracy > 0.40);
}

static void test_transformer_resume_is_exact(void) {
    setup();
    char a[2048], b[2048], ckpt[400];
    brisk_error err = {0};
    const char *fmt = "{\"model\": {\"type\": \"transformer\", \"inputs\": 8, \"seq_len\": 20, \"width\": 16,"
                      " \"heads\": 2, \"ffn\": 32, \"layers\": 2, \"dropout\": 0.2, \"outputs\": 3},"
                      " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.8, " WINDOWS "},"
                      " \"train\": {\"batch_size\": 64, \"epochs\": 2, \"max_steps\": %d, \"out_dir\": \"%s/%s\"}}";
    brisk_run_summary s;
    float *full = NULL, *first = NULL, *second = NULL;
    int64_t nf = 0, n1 = 0, n2 = 0;
    snprintf(a, sizeof a, fmt, series, 12, dir, "tfull");
    REQUIRE_OK(tu_train_json(a, NULL, 0, &s, &full, &nf, &err), &err);
    REQUIRE(nf == 12);
    snprintf(b, sizeof b, fmt, series, 12, dir, "tpart");
    REQUIRE_OK(tu_train_json(b, NULL, 5, &s, &first, &n1, &err), &err);
    snprintf(ckpt, sizeof ckpt, "%s/tpart/last.safetensors", dir);
    REQUIRE_OK(tu_train_json(b, ckpt, 0, &s, &second, &n2, &err), &err);
    REQUIRE(n1 == 5 && n2 == 7);
    CHECK(memcmp(first, full, 5 * sizeof(float)) == 0);
    CHECK(memcmp(second, full + 5, 7 * sizeof(float)) == 0);
    free(full), free(first), free(second);
}

static void test_pipeline(void) {
    setup();
    char json[2048];
    brisk_error err = {0};
    snprintf(json, sizeof json,
             "{\"models\": [{\"name\": \"rnn\", \"type\": \"lstm\", \"inputs\": 8, \"seq_len\": 20, \"hidden\": 8, \"outputs\": 3},"
             " {\"name\": \"flat\", \"type\": \"mlp\", \"inputs\": 8, \"seq_len\": 20, \"hidden\": [16], \"outputs\": 3}],"
             " \"data\": {\"train\": \"%s\", \"validation_fraction\": 0.5, " WINDOWS "},"
             " \"train\": {\"batch_size\": 64, \"epochs\": 1, \"out_dir\": \"%s/pipe\"}}", series, dir);
    brisk_config cfg;
    REQUIRE_OK(brisk_config_parse(json, "<pipeline>", NULL, 0, &cfg, &err), &err);
    CHECK(cfg.n_models == 2 && cfg.model.type == BRISK_MODEL_LSTM);
    brisk_pipeline_result res[BRISK_MAX_MODELS];
    brisk_logger quiet = {0};
    brisk_status st = brisk_pipeline_run(&cfg, &quiet, res, &err);
    CHECKF(st == BRISK_OK, "%s", err.msg);
    if (!st) {
        /* 6000 rows: 2976 training windows ending before row 3000, 46 batches of 64 */
        CHECK(strcmp(res[0].name, "rnn") == 0 && res[0].summary.steps == 46 && !isnan(res[0].summary.best_val_loss));
        CHECK(strcmp(res[1].name, "flat") == 0 && res[1].type == BRISK_MODEL_MLP && res[1].summary.params == 160 * 16 + 16 + 51);
        char path[400];
        snprintf(path, sizeof path, "%s/pipe/flat/last.safetensors", dir);
        CHECK(access(path, F_OK) == 0);
    }
    /* each run's own config is a plain single-model config */
    brisk_config one;
    REQUIRE_OK(brisk_pipeline_config(&cfg, 1, &one, &err), &err);
    CHECK(one.n_models == 0 && one.model.type == BRISK_MODEL_MLP && strstr(one.train.out_dir, "/pipe/flat"));
    CHECK(strstr(one.json, "\"models\"") == NULL && strstr(one.json, "\"name\"") == NULL);
    brisk_config_free(&one);
    brisk_config_free(&cfg);
}

TEST_MAIN(T(test_lstm_learns), T(test_transformer_resume_is_exact), T(test_pipeline))
