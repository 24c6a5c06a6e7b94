/* The fp16 loss scaler's state in checkpoints, without a GPU: a CPU trainer whose backend
 * is given scaler hooks (as the CUDA backend has) writes the scale, its growth count and
 * its skip count into the checkpoint, and a resumed trainer hands exactly those back to
 * its backend; a backend without an active scaler writes none, a run without a scaler
 * ignores them, and a damaged value is an error naming the file and the field. (The real
 * scaler's round trip on a GPU: test_cuda_train's test_fp16_resume.) */
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"
#include "train/trainer_internal.h"

static char dir[256];

typedef struct fake_scaler {
    brisk_scaler_state now;   /* what scaler_get reports */
    brisk_scaler_state given; /* what scaler_set received */
    int sets;
} fake_scaler;
static fake_scaler fs;

static brisk_status f_get(brisk_backend *be, brisk_scaler_state *out, brisk_error *err) {
    (void)be, (void)err;
    *out = fs.now;
    return BRISK_OK;
}
static brisk_status f_set(brisk_backend *be, const brisk_scaler_state *in, brisk_error *err) {
    (void)be, (void)err;
    fs.given = *in;
    fs.sets++;
    return BRISK_OK;
}

static brisk_trainer *trainer(const char *out, int hooks) {
    T_MAKE_DIR(dir, "scaler_ckpt");
    char data[300], json[1024];
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    brisk_error err = {0};
    if (access(data, F_OK) != 0 && brisk_synth_write("tabular", data, 256, 0, &err))
        fprintf(stderr, "%s\n", err.msg);
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [16], \"outputs\": 3}, "
             "\"data\": {\"train\": \"%s\"}, \"train\": {\"batch_size\": 32, \"epochs\": 1, \"out_dir\": \"%s/%s\"}, "
             "\"speed\": {\"device\": \"cpu\"}}", data, dir, out);
    brisk_config cfg;
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    if (brisk_config_parse(json, "<test>", NULL, 0, &cfg, &err) || brisk_trainer_create(&cfg, &quiet, &t, &err))
        fprintf(stderr, "%s\n", err.msg);
    brisk_config_free(&cfg);
    if (t && hooks) {
        t->be->scaler_get = f_get;
        t->be->scaler_set = f_set;
    }
    return t;
}

static void test_round_trip(void) {
    brisk_error err = {0};
    brisk_trainer *a = trainer("rt", 1);
    REQUIRE(a);
    brisk_run_summary sum;
    REQUIRE_OK(brisk_trainer_run_steps(a, 3, &sum, &err), &err);
    fs = (fake_scaler){.now = {.active = 1, .scale = 1024.0f, .growth = 1234, .skipped = 7}};
    char path[400];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    REQUIRE_OK(brisk_trainer_save(a, path, &err), &err);
    brisk_trainer_free(a);

    brisk_trainer *b = trainer("rt2", 1);
    REQUIRE(b);
    REQUIRE_OK(brisk_trainer_resume(b, path, &err), &err);
    CHECK(fs.sets == 1);
    CHECKF(fs.given.active == 1 && fs.given.scale == 1024.0f && fs.given.growth == 1234 && fs.given.skipped == 7,
           "restored scale %g growth %lld skipped %lld", fs.given.scale, (long long)fs.given.growth,
           (long long)fs.given.skipped);
    brisk_trainer_free(b);

    /* a run without scaler hooks (the CPU) resumes from it and ignores the scaler */
    brisk_trainer *c = trainer("rt3", 0);
    REQUIRE(c);
    REQUIRE_OK(brisk_trainer_resume(c, path, &err), &err);
    brisk_trainer_free(c);
}

static void test_no_scaler_writes_nothing(void) {
    brisk_error err = {0};
    brisk_trainer *a = trainer("none", 1);
    REQUIRE(a);
    fs = (fake_scaler){.now = {.active = 0}};
    char path[400];
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    REQUIRE_OK(brisk_trainer_save(a, path, &err), &err);
    brisk_safetensors *st = NULL;
    REQUIRE_OK(brisk_safetensors_open(path, &st, &err), &err);
    CHECK(brisk_safetensors_meta(st, "loss_scale") == NULL && brisk_safetensors_meta(st, "loss_scale_skipped") == NULL);
    brisk_safetensors_free(st);
    REQUIRE_OK(brisk_trainer_resume(a, path, &err), &err);
    CHECK(fs.sets == 0); /* nothing to restore: the scaler starts fresh */
    brisk_trainer_free(a);
}

/* A scaler value that is not a positive scale (written here by a hook reporting one) is
 * an error naming the file and the field, and nothing reaches the backend. */
static void test_bad_value_is_an_error(void) {
    brisk_error err = {0};
    brisk_trainer *a = trainer("bad", 1);
    REQUIRE(a);
    fs = (fake_scaler){.now = {.active = 1, .scale = -2.0f, .growth = 0, .skipped = 0}};
    char path[400];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    REQUIRE_OK(brisk_trainer_save(a, path, &err), &err);
    brisk_status s = brisk_trainer_resume(a, path, &err);
    CHECK(s == BRISK_ERR_FORMAT);
    CHECKF(strstr(err.msg, "bad.safetensors") && strstr(err.msg, "loss_scale"), "%s", err.msg);
    CHECK(fs.sets == 0);
    brisk_trainer_free(a);
}

TEST_MAIN(T(test_round_trip), T(test_no_scaler_writes_nothing), T(test_bad_value_is_an_error))
