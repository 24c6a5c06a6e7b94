/* A checkpoint whose checksum holds but whose contents are out of range is refused: counters
 * past what a run can reach, a best_val_loss that is not a number, NaN weights at predict
 * time (an error, nothing written), and a windowed model without its normalisation. The
 * files are rewritten with a valid checksum, as a hand-made or foreign file would be. */
#include "test.h"
#include "train/trainer_internal.h"
#include "train_test_util.h"

static char dir[1024];

/* Copies src to dst with metadata key set to value (NULL: removed) and, when nan_param is
 * set, the first element of that tensor made NaN; the checksum is recomputed. */
static brisk_status rewrite(const char *src, const char *dst, const char *key, const char *value, const char *nan_param,
                            brisk_error *err) {
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_safetensors_open(src, &st, err);
    if (s) return s;
    size_t n = brisk_safetensors_count(st), nm = brisk_safetensors_meta_count(st), k = 0;
    brisk_st_entry *e = calloc(n, sizeof *e);
    brisk_st_meta *m = calloc(nm + 1, sizeof *m);
    void **copies = calloc(n, sizeof *copies);
    for (size_t i = 0; i < n; i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        e[i] = (brisk_st_entry){t->name, t->dtype, t->shape, t->data};
        if (nan_param && strcmp(t->name, nan_param) == 0) {
            copies[i] = malloc(t->nbytes);
            memcpy(copies[i], t->data, t->nbytes);
            ((float *)copies[i])[0] = NAN;
            e[i].data = copies[i];
        }
    }
    for (size_t i = 0; i < nm; i++) {
        const char *mk, *mv;
        brisk_safetensors_meta_at(st, i, &mk, &mv);
        if (strcmp(mk, BRISK_CKPT_CHECKSUM_KEY) == 0) continue;
        if (key && strcmp(mk, key) == 0) {
            if (!value) continue;
            mv = value;
        }
        m[k++] = (brisk_st_meta){mk, mv};
    }
    char sum[BRISK_CKPT_CHECKSUM_LEN];
    s = brisk_checkpoint_checksum_entries(e, n, m, k, sum, err);
    m[k++] = (brisk_st_meta){BRISK_CKPT_CHECKSUM_KEY, sum};
    if (!s) s = brisk_safetensors_write(dst, e, n, m, k, err);
    for (size_t i = 0; i < n; i++) free(copies[i]);
    free(copies);
    free(e);
    free(m);
    brisk_safetensors_free(st);
    return s;
}

static void train_tiny(const char *data_json, const char *model_json, const char *out) {
    char json[2048];
    snprintf(json, sizeof json, "{\"model\": %s, \"data\": %s, \"train\": {\"batch_size\": 8, \"epochs\": 1, "
             "\"out_dir\": \"%s/%s\"}, \"speed\": {\"threads\": 1, \"prefetch\": 0}}", model_json, data_json, dir, out);
    brisk_error err;
    brisk_run_summary sum;
    brisk_status st = tu_train_json(json, NULL, 0, &sum, NULL, NULL, &err);
    if (st) fprintf(stderr, "training failed: %s\n", err.msg);
}

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static void test_counters_and_loss(void) {
    tu_scratch(dir, sizeof dir, "ckpt_meta");
    char data[1200], ck[1200], bad[1200];
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    brisk_error err;
    REQUIRE_OK(brisk_synth_write("tabular", data, 64, 1, &err), &err);
    char dj[1300];
    snprintf(dj, sizeof dj, "{\"train\": \"%s\"}", data);
    train_tiny(dj, "{\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [4], \"outputs\": 3}", "mlp");
    snprintf(ck, sizeof ck, "%s/mlp/last.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    REQUIRE_OK(brisk_checkpoint_check(ck, NULL, &err), &err);
    REQUIRE_OK(rewrite(ck, bad, "step", "7", NULL, &err), &err); /* the rewrite itself keeps a checkpoint valid */
    REQUIRE_OK(brisk_checkpoint_check(bad, NULL, &err), &err);
    const struct { const char *key, *value, *msg; } cases[] = {
        {"epoch", "1000000000000000000", "metadata 'epoch' is missing or not an integer in [0, 16777216]"},
        {"step", "4611686018427387904", "metadata 'step' is missing or not an integer in [0, 1099511627776]"},
        {"step", "-1", "metadata 'step'"},
        {"best_val_loss", "garbage", "metadata 'best_val_loss' is \"garbage\", expected a finite loss >= 0 or nan"},
        {"best_val_loss", "inf", "'best_val_loss'"},
        {"best_val_loss", "0.5x", "'best_val_loss'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        REQUIRE_OK(rewrite(ck, bad, cases[i].key, cases[i].value, NULL, &err), &err);
        CHECKF(brisk_checkpoint_check(bad, NULL, &err) == BRISK_ERR_FORMAT && has(&err, cases[i].msg), "%s=%s",
               cases[i].key, cases[i].value);
    }
    REQUIRE_OK(rewrite(ck, bad, "best_val_loss", "nan", NULL, &err), &err);
    CHECK(brisk_checkpoint_check(bad, NULL, &err) == BRISK_OK);

    /* NaN weights: predict refuses and writes nothing */
    char x[1200], y[1200];
    snprintf(x, sizeof x, "%s/x.npy", dir);
    snprintf(y, sizeof y, "%s/y.npy", dir);
    float v[2 * 64] = {0};
    brisk_tensor xt = {BRISK_F32, brisk_shape2(2, 64), v};
    REQUIRE_OK(brisk_npy_write(x, &xt, &err), &err);
    REQUIRE_OK(brisk_predict_file(ck, x, y, NULL, &err), &err);
    unlink(y);
    REQUIRE_OK(rewrite(ck, bad, NULL, NULL, "net.0.weight", &err), &err);
    CHECK(brisk_predict_file(bad, x, y, NULL, &err) == BRISK_ERR_NUMERIC);
    CHECK(has(&err, "predicted values are NaN or inf although the input is finite") && access(y, F_OK) != 0);
}

static void test_windowed_without_normalisation(void) {
    char data[1200], ck[1200], bad[1200], dj[1400];
    snprintf(data, sizeof data, "%s/series.csv", dir);
    brisk_error err;
    REQUIRE_OK(brisk_synth_write("series", data, 400, 1, &err), &err);
    snprintf(dj, sizeof dj, "{\"train\": \"%s\", \"windows\": {\"features\": [\"close\"], \"length\": 8, \"target\": "
             "{\"column\": \"close\", \"thresholds\": [-0.001, 0.001]}}}", data);
    train_tiny(dj, "{\"type\": \"lstm\", \"inputs\": 1, \"seq_len\": 8, \"hidden\": 4, \"outputs\": 3}", "win");
    snprintf(ck, sizeof ck, "%s/win/last.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/nonorm.safetensors", dir);
    REQUIRE_OK(rewrite(ck, bad, "normalization", NULL, NULL, &err), &err);
    char y[1200];
    snprintf(y, sizeof y, "%s/wy.npy", dir);
    REQUIRE_OK(brisk_predict_file(ck, data, y, NULL, &err), &err);
    CHECK(brisk_predict_file(bad, data, y, NULL, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "trained on normalised windows (data.windows.normalize) but holds no 'normalization' metadata"));
    tu_sh("rm -rf '%s'", dir);
}

TEST_MAIN(T(test_counters_and_loss), T(test_windowed_without_normalisation))
