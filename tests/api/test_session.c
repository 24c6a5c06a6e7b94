/* The stable session API: the whole life cycle (create, push, train, save, load, predict,
 * sample, query, destroy), and every error path returning a status with a message instead of
 * aborting (run under ASan/UBSan in CI). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/ring.h"
#include "brisk/brisk.h"
#include "test.h"

/* A small diffusion denoiser over the example data's shapes (7 coarse, 256 fine). */
static const char *diffusion_cfg =
    "{\"model\": {\"type\": \"diffusion\", \"hidden\": [64, 64], \"noise\": {\"steps\": 20}},"
    " \"data\": {\"validation_fraction\": 0.25, \"buffer\": {\"capacity\": 512}},"
    " \"train\": {\"batch_size\": 16, \"seed\": 3}, \"speed\": {\"threads\": 2, \"prefetch\": 2}}";

static const char *classify_cfg =
    "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [32], \"outputs\": 3},"
    " \"data\": {\"validation_fraction\": 0, \"buffer\": {\"capacity\": 300, \"when_full\": \"reject\"}},"
    " \"train\": {\"batch_size\": 32}, \"speed\": {\"prefetch\": 0}}";

static char dir[256];
static void make_dir(void) { T_MAKE_DIR(dir, "api"); }

/* n samples of the example diffusion data: coarse [n, 7], fine [n, 256]. */
static void example(int64_t n, uint64_t seed, float **coarse, float **fine) {
    brisk_dataset ds;
    brisk_error err = {0};
    *coarse = *fine = NULL;
    if (brisk_synth_make("diffusion", n, seed, &ds, &err)) return;
    const brisk_tensor *c = brisk_dataset_get(&ds, "coarse"), *f = brisk_dataset_get(&ds, "fine");
    *coarse = malloc(brisk_tensor_bytes(c));
    *fine = malloc(brisk_tensor_bytes(f));
    memcpy(*coarse, c->data, brisk_tensor_bytes(c));
    memcpy(*fine, f->data, brisk_tensor_bytes(f));
    brisk_dataset_free(&ds);
}

static int all_finite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

#define OK(call, s) REQUIRE_OK_S(call, s)
#define REQUIRE_OK_S(call, s) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            brisk_session_error(s)); t_failed_checks++; t_cur_failed = 1; return; } } while (0)
/* A call that must fail with `code` and a message containing `text`. */
#define FAILS(call, s, code, text) do { brisk_status s_ = (call); \
    CHECKF(s_ == (code), "%s -> %s, expected %s (%s)", #call, brisk_status_name(s_), brisk_status_name(code), \
           brisk_session_error(s)); \
    CHECKF(strstr(brisk_session_error(s), text) != NULL, "%s: message '%s' lacks '%s'", #call, \
           brisk_session_error(s), text); } while (0)

/* Two sessions that must agree on a metric, bit for bit. */
#define CHECK_SAME(s, t, name) do { double a_, b_; OK(brisk_session_query(s, name, &a_), s); \
    OK(brisk_session_query(t, name, &b_), t); CHECKF(a_ == b_, "%s: %.9g vs %.9g", name, a_, b_); } while (0)

static void test_lifecycle(void) {
    make_dir();
    float *coarse, *fine;
    example(400, 0, &coarse, &fine);
    REQUIRE(coarse && fine);
    brisk_session *s = NULL, *s2 = NULL;
    OK(brisk_session_create(diffusion_cfg, NULL, NULL, &s), s);
    int64_t wi = 0, wt = 0;
    OK(brisk_session_sizes(s, &wi, &wt), s);
    CHECK(wi == 7 && wt == 256);
    double v = 0;
    OK(brisk_session_query(s, "train_loss", &v), s);
    CHECK(isnan(v));
    OK(brisk_session_push(s, 400, coarse, 0, fine, 256), s);
    OK(brisk_session_query(s, "buffered", &v), s);
    CHECK(v == 400);
    OK(brisk_session_train_epochs(s, 2), s);
    double loss1, steps, val, epochs;
    OK(brisk_session_query(s, "train_loss", &loss1), s);
    OK(brisk_session_query(s, "steps", &steps), s);
    OK(brisk_session_query(s, "val_loss", &val), s);
    OK(brisk_session_query(s, "epochs", &epochs), s);
    /* 400 samples, 100 for validation: 300 / 16 = 18 batches per epoch */
    CHECKF(steps == 36 && epochs == 2, "steps %g epochs %g", steps, epochs);
    CHECK(isfinite(loss1) && isfinite(val));
    OK(brisk_session_train_steps(s, 5), s);
    OK(brisk_session_query(s, "steps", &steps), s);
    CHECK(steps == 41);

    char ckpt[400];
    snprintf(ckpt, sizeof ckpt, "%s/session.safetensors", dir);
    OK(brisk_session_save(s, ckpt), s);
    float *a = malloc(sizeof(float) * 40 * 256), *b = malloc(sizeof(float) * 40 * 256);
    OK(brisk_session_sample(s, 40, coarse, 7, a, 256, BRISK_SAMPLER_DDIM, 5, 0.0, 11), s);
    CHECK(all_finite(a, 40 * 256));
    OK(brisk_session_query(s, "sample_seconds", &v), s);
    CHECK(v >= 0);
    /* A fresh session that loads the checkpoint samples the same fields bit for bit. */
    OK(brisk_session_create(diffusion_cfg, NULL, NULL, &s2), s2);
    OK(brisk_session_load(s2, ckpt), s2);
    OK(brisk_session_query(s2, "steps", &v), s2);
    CHECK(v == 41);
    OK(brisk_session_sample(s2, 40, coarse, 7, b, 256, BRISK_SAMPLER_DDIM, 5, 0.0, 11), s2);
    CHECK(memcmp(a, b, sizeof(float) * 40 * 256) == 0);
    /* and training on continues identically in both */
    OK(brisk_session_push(s2, 400, coarse, 0, fine, 0), s2);
    OK(brisk_session_train_steps(s, 3), s);
    OK(brisk_session_train_steps(s2, 3), s2);
    CHECK_SAME(s, s2, "last_loss");
    CHECK(brisk_session_destroy(s) == BRISK_OK);
    CHECK(brisk_session_destroy(s2) == BRISK_OK);
    CHECK(brisk_session_destroy(NULL) == BRISK_OK);
    free(a), free(b), free(coarse), free(fine);
}

/* Rows pushed with padding between them train exactly as packed rows. */
static void test_strides(void) {
    float *coarse, *fine;
    example(200, 1, &coarse, &fine);
    REQUIRE(coarse && fine);
    const int64_t cs = 10, fs = 300;
    float *cp = calloc(200 * cs, sizeof(float)), *fp = calloc(200 * fs, sizeof(float));
    for (int i = 0; i < 200; i++) {
        memcpy(cp + i * cs, coarse + i * 7, 7 * sizeof(float));
        memcpy(fp + i * fs, fine + i * 256, 256 * sizeof(float));
        cp[i * cs + 8] = NAN; /* padding is never read */
    }
    brisk_session *s = NULL, *t = NULL;
    OK(brisk_session_create(diffusion_cfg, NULL, NULL, &s), s);
    OK(brisk_session_create(diffusion_cfg, NULL, NULL, &t), t);
    OK(brisk_session_push(s, 200, coarse, 7, fine, 256), s);
    OK(brisk_session_push(t, 200, cp, cs, fp, fs), t);
    OK(brisk_session_train_epochs(s, 1), s);
    OK(brisk_session_train_epochs(t, 1), t);
    CHECK_SAME(s, t, "train_loss");
    brisk_session_destroy(s);
    brisk_session_destroy(t);
    free(coarse), free(fine), free(cp), free(fp);
}

static void test_buffer_policies(void) {
    /* drop_oldest keeps the newest rows, oldest first */
    brisk_ring r;
    brisk_error err = {0};
    REQUIRE_OK(brisk_ring_init(&r, 4, 1, 1, 0, 0, &err), &err);
    float in[6] = {0, 1, 2, 3, 4, 5}, tg[6] = {10, 11, 12, 13, 14, 15};
    REQUIRE_OK(brisk_ring_push(&r, 3, in, 1, tg, 1, &err), &err);
    REQUIRE_OK(brisk_ring_push(&r, 3, in + 3, 1, tg + 3, 1, &err), &err);
    CHECK(r.count == 4 && r.dropped == 2 && r.pushed == 6);
    brisk_dataset ds;
    REQUIRE_OK(brisk_ring_dataset(&r, "x", "y", &ds, &err), &err);
    const float *x = brisk_dataset_get(&ds, "x")->data;
    CHECK(x[0] == 2 && x[1] == 3 && x[2] == 4 && x[3] == 5);
    brisk_dataset_free(&ds);
    /* one push larger than the ring keeps its last rows */
    REQUIRE_OK(brisk_ring_push(&r, 6, in, 1, tg, 1, &err), &err);
    REQUIRE_OK(brisk_ring_dataset(&r, "x", "y", &ds, &err), &err);
    x = brisk_dataset_get(&ds, "x")->data;
    CHECK(x[0] == 2 && x[3] == 5 && r.dropped == 8);
    brisk_dataset_free(&ds);
    brisk_ring_free(&r);

    /* reject: a push that does not fit stores nothing */
    brisk_session *s = NULL;
    OK(brisk_session_create(classify_cfg, NULL, NULL, &s), s);
    float *xs = calloc(300 * 64, sizeof(float)), *ys = calloc(300, sizeof(float));
    for (int i = 0; i < 300; i++) {
        ys[i] = (float)(i % 3);
        xs[i * 64 + i % 64] = ys[i] + 1.0f;
    }
    OK(brisk_session_push(s, 250, xs, 64, ys, 1), s);
    FAILS(brisk_session_push(s, 51, xs, 64, ys, 1), s, BRISK_ERR_FULL, "250 of 300");
    double v;
    OK(brisk_session_query(s, "buffered", &v), s);
    CHECK(v == 250);
    OK(brisk_session_push(s, 50, xs, 64, ys, 1), s);
    OK(brisk_session_train_epochs(s, 3), s);
    OK(brisk_session_clear(s), s);
    OK(brisk_session_query(s, "buffered", &v), s);
    CHECK(v == 0);
    OK(brisk_session_query(s, "output_width", &v), s); /* a classifier's class count, target_width 1 */
    CHECK(v == 3);
    /* predict: probabilities over 3 classes, rows at a stride */
    float p[2 * 5];
    for (int k = 0; k < 10; k++) p[k] = -1;
    OK(brisk_session_predict(s, 2, xs, 64, p, 5), s);
    CHECK_NEAR(p[0] + p[1] + p[2], 1.0, 1e-5);
    CHECK_NEAR(p[5] + p[6] + p[7], 1.0, 1e-5);
    CHECK(p[3] == -1 && p[4] == -1);
    brisk_session_destroy(s);
    free(xs), free(ys);
}

static void test_create_errors(void) {
    make_dir();
    brisk_session *s = NULL;
    CHECK(brisk_session_create("{}", NULL, NULL, NULL) == BRISK_ERR_INVALID);
    CHECK(brisk_session_create(NULL, NULL, NULL, &s) == BRISK_ERR_INVALID);
    CHECK(s && strstr(brisk_session_error(s), "NULL"));
    /* a failed session refuses every call and keeps its message */
    CHECK(brisk_session_push(s, 0, NULL, 0, NULL, 0) == BRISK_ERR_INVALID);
    CHECK(brisk_session_train_epochs(s, 1) == BRISK_ERR_INVALID);
    CHECK(strstr(brisk_session_error(s), "NULL"));
    brisk_session_destroy(s);
    struct { const char *json; brisk_status code; const char *text; } cases[] = {
        {"{\"model\": {\"type\": \"diffusion\", \"hiden\": [3]}}", BRISK_ERR_INVALID, "unknown key \"hiden\""},
        {"{\"model\": {\"type\": \"diffusion\"}, \"trian\": {}}", BRISK_ERR_INVALID, "unknown key \"trian\""},
        {"{\"model\": {\"type\": \"diffusion\"}, \"data\": {\"buffer\": {\"capacity\": 0}}}", BRISK_ERR_INVALID, "capacity"},
        {"{\"model\": {\"type\": \"diffusion\"}, \"data\": {\"buffer\": {\"when_full\": \"wait\"}}}", BRISK_ERR_INVALID, "when_full"},
        {"{\"model\": {\"type\": \"diffusion\"}, \"speed\": {\"device\": \"cuda\"}}", BRISK_ERR_UNSUPPORTED, "cuda"},
        {"{\"model\": {\"type\": \"diffusion\"}", BRISK_ERR_FORMAT, "config"},
        {"[1, 2]", BRISK_ERR_INVALID, "config"},
        {"{\"model\": {\"type\": \"unet\"}}", BRISK_ERR_INVALID, "model.type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s = NULL;
        brisk_status st = brisk_session_create(cases[i].json, NULL, NULL, &s);
        CHECKF(st != BRISK_OK && s && strstr(brisk_session_error(s), cases[i].text), "case %zu: %s -> %s: %s", i,
               cases[i].json, brisk_status_name(st), s ? brisk_session_error(s) : "(no session)");
        if (cases[i].code != BRISK_ERR_FORMAT) CHECKF(st == cases[i].code, "case %zu: %s", i, brisk_status_name(st));
        brisk_session_destroy(s);
    }
    s = NULL;
    CHECK(brisk_session_create_file(T_ABSENT "/brisk.json", NULL, NULL, &s) == BRISK_ERR_IO);
    CHECK(s && strstr(brisk_session_error(s), T_ABSENT "/brisk.json"));
    brisk_session_destroy(s);
    s = NULL;
    CHECK(brisk_session_create_file(NULL, NULL, NULL, &s) == BRISK_ERR_INVALID);
    brisk_session_destroy(s);
    /* a config file works, with comments */
    char path[400];
    snprintf(path, sizeof path, "%s/cfg.json", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fprintf(f, "// a session config\n%s\n", classify_cfg);
    fclose(f);
    s = NULL;
    OK(brisk_session_create_file(path, NULL, NULL, &s), s);
    brisk_session_destroy(s);
}

static void test_call_errors(void) {
    make_dir();
    float *coarse, *fine;
    example(64, 2, &coarse, &fine);
    REQUIRE(coarse && fine);
    float out[4 * 256];
    brisk_session *s = NULL;
    OK(brisk_session_create(diffusion_cfg, NULL, NULL, &s), s);
    /* NULL session: a status, no crash */
    double v;
    CHECK(brisk_session_push(NULL, 1, coarse, 0, fine, 0) == BRISK_ERR_INVALID);
    CHECK(brisk_session_train_epochs(NULL, 1) == BRISK_ERR_INVALID);
    CHECK(brisk_session_train_steps(NULL, 1) == BRISK_ERR_INVALID);
    CHECK(brisk_session_save(NULL, "x") == BRISK_ERR_INVALID);
    CHECK(brisk_session_load(NULL, "x") == BRISK_ERR_INVALID);
    CHECK(brisk_session_predict(NULL, 1, coarse, 0, out, 0) == BRISK_ERR_INVALID);
    CHECK(brisk_session_sample(NULL, 1, coarse, 0, out, 0, 0, 0, 0.0, 0) == BRISK_ERR_INVALID);
    CHECK(brisk_session_query(NULL, "steps", &v) == BRISK_ERR_INVALID);
    CHECK(brisk_session_sizes(NULL, NULL, NULL) == BRISK_ERR_INVALID);
    CHECK(brisk_session_clear(NULL) == BRISK_ERR_INVALID);
    CHECK(strlen(brisk_session_error(NULL)) > 0);
    /* push */
    FAILS(brisk_session_push(s, 1, NULL, 0, fine, 0), s, BRISK_ERR_INVALID, "input is NULL");
    FAILS(brisk_session_push(s, 1, coarse, 0, NULL, 0), s, BRISK_ERR_INVALID, "target is NULL");
    FAILS(brisk_session_push(s, -1, coarse, 0, fine, 0), s, BRISK_ERR_INVALID, "-1 samples");
    FAILS(brisk_session_push(s, 2, coarse, 6, fine, 0), s, BRISK_ERR_SHAPE, "input stride 6");
    FAILS(brisk_session_push(s, 2, coarse, 7, fine, 255), s, BRISK_ERR_SHAPE, "target stride 255");
    float bad = fine[3 * 256 + 17];
    fine[3 * 256 + 17] = NAN;
    FAILS(brisk_session_push(s, 8, coarse, 7, fine, 256), s, BRISK_ERR_NUMERIC, "target row 3, column 17 is NaN");
    fine[3 * 256 + 17] = bad;
    OK(brisk_session_query(s, "buffered", &v), s);
    CHECK(v == 0);
    OK(brisk_session_push(s, 0, NULL, 0, NULL, 0), s);
    CHECK(strcmp(brisk_session_error(s), "") == 0);
    /* train */
    FAILS(brisk_session_train_epochs(s, 1), s, BRISK_ERR_INVALID, "empty");
    OK(brisk_session_push(s, 8, coarse, 7, fine, 256), s);
    FAILS(brisk_session_train_epochs(s, 1), s, BRISK_ERR_INVALID, "batch_size is 16");
    FAILS(brisk_session_train_epochs(s, 0), s, BRISK_ERR_INVALID, "0 epochs");
    FAILS(brisk_session_train_steps(s, -2), s, BRISK_ERR_INVALID, "-2 steps");
    OK(brisk_session_push(s, 56, coarse + 8 * 7, 7, fine + 8 * 256, 256), s);
    OK(brisk_session_train_steps(s, 2), s); /* recovers after the failed calls */
    /* a buffer that shrank below where the last call stopped: the next epoch begins */
    OK(brisk_session_clear(s), s);
    OK(brisk_session_push(s, 30, coarse, 7, fine, 256), s);
    OK(brisk_session_train_steps(s, 3), s);
    OK(brisk_session_push(s, 34, coarse + 30 * 7, 7, fine + 30 * 256, 256), s);
    /* save and load */
    FAILS(brisk_session_save(s, NULL), s, BRISK_ERR_INVALID, "NULL");
    FAILS(brisk_session_save(s, T_ABSENT "/dir/x.safetensors"), s, BRISK_ERR_IO, T_ABSENT "/dir");
    FAILS(brisk_session_load(s, NULL), s, BRISK_ERR_INVALID, "NULL");
    FAILS(brisk_session_load(s, T_ABSENT ".safetensors"), s, BRISK_ERR_IO, T_ABSENT ".safetensors");
    char junk[400], other[400];
    snprintf(junk, sizeof junk, "%s/junk.safetensors", dir);
    FILE *f = fopen(junk, "w");
    REQUIRE(f);
    fputs("not a checkpoint at all", f);
    fclose(f);
    brisk_status st = brisk_session_load(s, junk);
    CHECKF(st != BRISK_OK && strstr(brisk_session_error(s), "junk.safetensors"), "%s", brisk_session_error(s));
    brisk_session *m = NULL;
    OK(brisk_session_create(classify_cfg, NULL, NULL, &m), m);
    snprintf(other, sizeof other, "%s/mlp.safetensors", dir);
    OK(brisk_session_save(m, other), m);
    st = brisk_session_load(s, other);
    CHECKF(st != BRISK_OK && strstr(brisk_session_error(s), "another model"), "%s", brisk_session_error(s));
    /* predict and sample */
    FAILS(brisk_session_predict(s, 1, coarse, 0, out, 0), s, BRISK_ERR_UNSUPPORTED, "sampling");
    FAILS(brisk_session_sample(m, 1, coarse, 0, out, 0, 0, 0, 0.0, 0), m, BRISK_ERR_UNSUPPORTED, "diffusion");
    FAILS(brisk_session_predict(m, 1, NULL, 0, out, 0), m, BRISK_ERR_INVALID, "input array is NULL");
    FAILS(brisk_session_sample(s, 1, coarse, 0, NULL, 0, 0, 0, 0.0, 0), s, BRISK_ERR_INVALID, "fine array is NULL");
    FAILS(brisk_session_sample(s, -3, coarse, 0, out, 0, 0, 0, 0.0, 0), s, BRISK_ERR_INVALID, "-3 rows");
    FAILS(brisk_session_sample(s, 2, coarse, 3, out, 0, 0, 0, 0.0, 0), s, BRISK_ERR_SHAPE, "coarse stride 3");
    FAILS(brisk_session_sample(s, 1, coarse, 0, out, 0, 7, 0, 0.0, 0), s, BRISK_ERR_INVALID, "method 7");
    FAILS(brisk_session_sample_guided(s, 2, coarse, 0, fine, 100, out, 0, 0, 0, 0.0, 0), s, BRISK_ERR_SHAPE,
          "guess stride 100");
    OK(brisk_session_sample_guided(s, 2, coarse, 0, fine, 0, out, 0, BRISK_SAMPLER_DDIM, 3, 0.0, 0), s);
    CHECK(all_finite(out, 2 * 256));
    FAILS(brisk_session_sample_guided(NULL, 1, coarse, 0, fine, 0, out, 0, 0, 0, 0.0, 0), NULL, BRISK_ERR_INVALID, "");
    FAILS(brisk_session_sample(s, 1, coarse, 0, out, 0, BRISK_SAMPLER_DDPM, 5, 0.0, 0), s, BRISK_ERR_INVALID,
          "takes all 20");
    FAILS(brisk_session_sample(s, 1, coarse, 0, out, 0, BRISK_SAMPLER_DDIM, 21, 0.0, 0), s, BRISK_ERR_INVALID,
          "1 to 20");
    FAILS(brisk_session_sample(s, 1, coarse, 0, out, 0, BRISK_SAMPLER_DDIM, 5, 1.5, 0), s, BRISK_ERR_INVALID, "eta");
    FAILS(brisk_session_sample(s, 1, coarse, 0, out, 0, BRISK_SAMPLER_DDIM, 5, NAN, 0), s, BRISK_ERR_INVALID, "eta");
    OK(brisk_session_sample(s, 0, NULL, 0, NULL, 0, BRISK_SAMPLER_DDPM, 0, 0.0, 0), s);
    /* query */
    FAILS(brisk_session_query(s, "loss", &v), s, BRISK_ERR_INVALID, "unknown name \"loss\"; known: steps");
    FAILS(brisk_session_query(s, NULL, &v), s, BRISK_ERR_INVALID, "name is NULL");
    FAILS(brisk_session_query(s, "steps", NULL), s, BRISK_ERR_INVALID, "value is NULL");
    brisk_session_destroy(m);
    brisk_session_destroy(s);
    free(coarse), free(fine);
}

/* Inference inputs are checked as pushed ones are: NaN in, an error out, nothing written. A
 * model never trained nor loaded warns once. */
typedef struct { int warnings; char last[1024]; } warn_count;
static void count_warnings(void *user, brisk_log_level level, const char *msg) {
    warn_count *w = user;
    if (level == BRISK_LOG_WARN && strstr(msg, "trained")) w->warnings++, snprintf(w->last, sizeof w->last, "%s", msg);
}

static void test_inputs_checked(void) {
    float *coarse, *fine;
    example(32, 5, &coarse, &fine);
    REQUIRE(coarse && fine);
    warn_count w = {0, ""};
    brisk_session *s = NULL, *m = NULL;
    OK(brisk_session_create(diffusion_cfg, count_warnings, &w, &s), s);
    float out[4 * 256];
    for (int i = 0; i < 4 * 256; i++) out[i] = -7;
    coarse[2 * 7 + 3] = NAN;
    FAILS(brisk_session_sample(s, 4, coarse, 7, out, 256, BRISK_SAMPLER_DDIM, 3, 0.0, 0), s, BRISK_ERR_NUMERIC,
          "sample: coarse row 2, column 3 is NaN; expected finite values (nothing was written)");
    CHECK(out[0] == -7 && out[4 * 256 - 1] == -7);
    coarse[2 * 7 + 3] = 0.5f;
    fine[256 + 9] = -INFINITY;
    FAILS(brisk_session_sample_guided(s, 4, coarse, 7, fine, 256, out, 256, BRISK_SAMPLER_DDIM, 3, 0.0, 0), s,
          BRISK_ERR_NUMERIC, "guess row 1, column 9 is -inf");
    CHECK(out[0] == -7);
    fine[256 + 9] = 0;
    CHECK(w.warnings == 0);
    OK(brisk_session_sample(s, 4, coarse, 7, out, 256, BRISK_SAMPLER_DDIM, 3, 0.0, 0), s);
    CHECKF(w.warnings == 1 && strstr(w.last, "has not been trained"), "%d: %s", w.warnings, w.last);
    OK(brisk_session_sample(s, 4, coarse, 7, out, 256, BRISK_SAMPLER_DDIM, 3, 0.0, 0), s);
    CHECK(w.warnings == 1); /* once */
    /* after training, no warning */
    warn_count w2 = {0, ""};
    brisk_session *t = NULL;
    OK(brisk_session_create(diffusion_cfg, count_warnings, &w2, &t), t);
    OK(brisk_session_push(t, 32, coarse, 0, fine, 0), t);
    OK(brisk_session_train_steps(t, 1), t);
    OK(brisk_session_sample(t, 4, coarse, 7, out, 256, BRISK_SAMPLER_DDIM, 3, 0.0, 0), t);
    CHECKF(w2.warnings == 0, "%s", w2.last);
    brisk_session_destroy(t);
    /* predict */
    OK(brisk_session_create(classify_cfg, NULL, NULL, &m), m);
    float x[2 * 64] = {0}, p[2 * 3] = {-7, -7, -7, -7, -7, -7};
    x[64 + 40] = INFINITY;
    FAILS(brisk_session_predict(m, 2, x, 64, p, 3), m, BRISK_ERR_NUMERIC, "predict: input row 1, column 40 is inf");
    CHECK(p[0] == -7 && p[5] == -7);
    /* a failed call's message is its own, never the previous one's */
    FAILS(brisk_session_predict(m, 2, x, 63, p, 3), m, BRISK_ERR_SHAPE, "input stride 63");
    FAILS(brisk_session_predict(m, 2, x, 64, p, 2), m, BRISK_ERR_SHAPE, "output stride 2");
    brisk_session_destroy(m);
    brisk_session_destroy(s);
    free(coarse), free(fine);
}

/* Nothing but the log callback hears from a session; it hears the device choice. */
typedef struct { int lines, device; } log_count;
static void count_log(void *user, brisk_log_level level, const char *msg) {
    log_count *c = user;
    c->lines++;
    c->device |= strstr(msg, "device    cpu") != NULL && strstr(msg, "no GPU") != NULL;
    (void)level;
}

static void test_log_callback(void) {
    brisk_session *s = NULL;
    log_count c = {0, 0};
    OK(brisk_session_create(classify_cfg, count_log, &c, &s), s);
    CHECK(c.lines >= 3);
    CHECK(c.device); /* speed.device "auto" on a CPU build: the CPU, and the reason */
    brisk_session_destroy(s);
}

/* One session per thread: the same results as one after the other. */
typedef struct { float *coarse, *fine, *out; double loss; int ok; } job;
static void *run_job(void *arg) {
    job *j = arg;
    brisk_session *s = NULL;
    j->ok = brisk_session_create(diffusion_cfg, NULL, NULL, &s) == BRISK_OK &&
            brisk_session_push(s, 200, j->coarse, 0, j->fine, 0) == BRISK_OK &&
            brisk_session_train_epochs(s, 1) == BRISK_OK &&
            brisk_session_query(s, "train_loss", &j->loss) == BRISK_OK &&
            brisk_session_sample(s, 20, j->coarse, 0, j->out, 0, BRISK_SAMPLER_DDPM, 0, 0.0, 5) == BRISK_OK;
    if (!j->ok) fprintf(stderr, "job: %s\n", brisk_session_error(s));
    brisk_session_destroy(s);
    return NULL;
}

static void test_threads(void) {
    float *coarse, *fine;
    example(200, 4, &coarse, &fine);
    REQUIRE(coarse && fine);
    job jobs[3];
    for (int i = 0; i < 3; i++) jobs[i] = (job){coarse, fine, malloc(sizeof(float) * 20 * 256), 0, 0};
    run_job(&jobs[0]);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&th[i], NULL, run_job, &jobs[i + 1]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) CHECK(jobs[i].ok);
    for (int i = 1; i < 3; i++) {
        CHECKF(jobs[i].loss == jobs[0].loss, "%.9g vs %.9g", jobs[i].loss, jobs[0].loss);
        CHECK(memcmp(jobs[i].out, jobs[0].out, sizeof(float) * 20 * 256) == 0);
    }
    for (int i = 0; i < 3; i++) free(jobs[i].out);
    free(coarse), free(fine);
}

TEST_MAIN(T(test_lifecycle), T(test_strides), T(test_buffer_policies), T(test_create_errors), T(test_call_errors),
          T(test_inputs_checked), T(test_log_callback), T(test_threads))
