/* Stopping a session's training from the host's own signal handler
 * (brisk_session_request_stop), the checkpoint policy of a session with train.out_dir,
 * the run directory's lock taken at creation, and the caller's floating-point flags. The
 * signal is raised from the log callback at a progress line, so it lands mid-training at
 * a known step. brisk's own handlers: test_stop_signals.c (they change the process). */
#include <fenv.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"

#define OK(call, s) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            brisk_session_error(s)); t_failed_checks++; t_cur_failed = 1; return; } } while (0)

static char dir[256];

static int exists(const char *d, const char *name) {
    char p[512];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", d, name);
    return stat(p, &sb) == 0;
}

/* n samples of the example diffusion data */
static void example(int64_t n, float **coarse, float **fine) {
    brisk_dataset ds;
    brisk_error err = {0};
    *coarse = *fine = NULL;
    if (brisk_synth_make("diffusion", n, 7, &ds, &err)) return;
    const brisk_tensor *c = brisk_dataset_get(&ds, "coarse"), *f = brisk_dataset_get(&ds, "fine");
    *coarse = malloc(brisk_tensor_bytes(c));
    *fine = malloc(brisk_tensor_bytes(f));
    memcpy(*coarse, c->data, brisk_tensor_bytes(c));
    memcpy(*fine, f->data, brisk_tensor_bytes(f));
    brisk_dataset_free(&ds);
}

static char *config(const char *out_dir, const char *extra) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"model\": {\"type\": \"diffusion\", \"hidden\": [32], \"noise\": {\"steps\": 10}},"
             " \"data\": {\"validation_fraction\": 0},"
             " \"train\": {\"batch_size\": 16, \"log_every\": 1, \"out_dir\": \"%s\"%s},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}}", out_dir, extra);
    return buf;
}

/* The host program's handler: it knows its session and asks it to stop. */
static brisk_session *host_session;
static volatile sig_atomic_t host_caught;
static void host_handler(int sig) {
    host_caught = sig;
    brisk_session_request_stop(host_session);
}

/* Raises SIGUSR2 at the progress line of step `at` ("step 7/..."). */
static int raise_at;
static void log_raise(void *user, brisk_log_level level, const char *msg) {
    (void)user, (void)level;
    char key[32];
    snprintf(key, sizeof key, "step %d/", raise_at);
    if (raise_at && strstr(msg, key) && strncmp(msg, "epoch", 5) == 0) raise(SIGUSR2);
}

static void test_request_stop_mid_training(void) {
    char out[400], ckpt[450];
    snprintf(out, sizeof out, "%s/stop", dir);
    float *coarse, *fine;
    example(160, &coarse, &fine);
    REQUIRE(coarse && fine);
    struct sigaction sa = {0}, old;
    sa.sa_handler = host_handler;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGUSR2, &sa, &old) == 0);
    brisk_session *s = NULL;
    OK(brisk_session_create(config(out, ""), log_raise, NULL, &s), s);
    host_session = s;
    OK(brisk_session_push(s, 160, coarse, 0, fine, 0), s);
    raise_at = 7;
    /* 10 batches per epoch: 5 epochs are 50 steps; the stop lands after step 7 */
    brisk_status st = brisk_session_train_epochs(s, 5);
    CHECKF(st == BRISK_STOPPED, "%s: %s", brisk_status_name(st), brisk_session_error(s));
    CHECK(host_caught == SIGUSR2);
    const char *msg = brisk_session_error(s);
    CHECKF(strstr(msg, "after step 7 (7 steps done of the 50 steps asked for)") && strstr(msg, "last.safetensors written"), "%s", msg);
    double v;
    OK(brisk_session_query(s, "steps", &v), s);
    CHECK(v == 7);
    OK(brisk_session_query(s, "stop_requested", &v), s);
    CHECK(v == 1);
    CHECK(exists(out, "last.safetensors") && exists(out, "step-00000007.safetensors"));
    CHECK(!exists(out, "best.safetensors"));
    /* the request stays: later train calls stop at once, doing nothing; other calls work */
    raise_at = 0;
    st = brisk_session_train_steps(s, 3);
    CHECKF(st == BRISK_STOPPED && strstr(brisk_session_error(s), "(0 steps done of the 3 steps asked for)"), "%s",
           brisk_session_error(s));
    OK(brisk_session_query(s, "steps", &v), s);
    CHECK(v == 7);
    float *a = malloc(sizeof(float) * 4 * 256), *b = malloc(sizeof(float) * 4 * 256);
    OK(brisk_session_sample(s, 4, coarse, 0, a, 0, BRISK_SAMPLER_DDIM, 3, 0.0, 1), s);
    /* the checkpoint holds the state at the stop: a new session resumes from it */
    snprintf(ckpt, sizeof ckpt, "%s/last.safetensors", out);
    brisk_session *r = NULL;
    OK(brisk_session_create(config("", ""), NULL, NULL, &r), r);
    OK(brisk_session_load(r, ckpt), r);
    OK(brisk_session_query(r, "steps", &v), r);
    CHECK(v == 7);
    OK(brisk_session_sample(r, 4, coarse, 0, b, 0, BRISK_SAMPLER_DDIM, 3, 0.0, 1), r);
    CHECK(memcmp(a, b, sizeof(float) * 4 * 256) == 0);
    /* a request only concerns its session */
    OK(brisk_session_query(r, "stop_requested", &v), r);
    CHECK(v == 0);
    OK(brisk_session_push(r, 160, coarse, 0, fine, 0), r);
    OK(brisk_session_train_steps(r, 2), r);
    brisk_session_destroy(r);
    brisk_session_destroy(s);
    /* a request through a destroyed handle is refused and reaches nothing */
    CHECK(brisk_session_request_stop(s) == BRISK_ERR_INVALID);
    CHECK(brisk_session_request_stop(NULL) == BRISK_ERR_INVALID);
    sigaction(SIGUSR2, &old, NULL);
    free(a), free(b), free(coarse), free(fine);
}

/* Without train.out_dir a stop still returns STOPPED, and says nothing was written. */
static void test_stop_without_out_dir(void) {
    float *coarse, *fine;
    example(64, &coarse, &fine);
    REQUIRE(coarse && fine);
    brisk_session *s = NULL;
    OK(brisk_session_create(config("", ""), NULL, NULL, &s), s);
    OK(brisk_session_push(s, 64, coarse, 0, fine, 0), s);
    OK(brisk_session_train_steps(s, 2), s);
    OK(brisk_session_request_stop(s), s);
    brisk_status st = brisk_session_train_steps(s, 2);
    CHECKF(st == BRISK_STOPPED && strstr(brisk_session_error(s), "no checkpoint written"), "%s",
           brisk_session_error(s));
    brisk_session_destroy(s);
    free(coarse), free(fine);
}

/* Checkpoints only when due: train.checkpoint_every steps, not at the end of each call. */
static void test_checkpoint_policy(void) {
    char out[400];
    snprintf(out, sizeof out, "%s/policy", dir);
    float *coarse, *fine;
    example(160, &coarse, &fine);
    REQUIRE(coarse && fine);
    brisk_session *s = NULL;
    OK(brisk_session_create(config(out, ", \"checkpoint_every\": 5, \"checkpoint_minutes\": 0"), NULL, NULL, &s), s);
    OK(brisk_session_push(s, 160, coarse, 0, fine, 0), s);
    OK(brisk_session_train_steps(s, 3), s);
    CHECK(!exists(out, "last.safetensors") && exists(out, "brisk.lock"));
    OK(brisk_session_train_steps(s, 3), s);
    CHECK(exists(out, "step-00000005.safetensors") && exists(out, "last.safetensors"));
    CHECK(!exists(out, "step-00000006.safetensors"));
    OK(brisk_session_train_epochs(s, 2), s); /* 20 steps, to step 26: 10, 15, 20, 25 */
    CHECK(exists(out, "step-00000025.safetensors") && !exists(out, "step-00000026.safetensors"));
    CHECK(!exists(out, "best.safetensors"));
    brisk_session_destroy(s);
    free(coarse), free(fine);
}

/* The run directory is locked at creation: a second session is refused at once. */
static void test_lock_at_create(void) {
    char out[400];
    snprintf(out, sizeof out, "%s/locked", dir);
    brisk_session *a = NULL, *b = NULL;
    OK(brisk_session_create(config(out, ""), NULL, NULL, &a), a);
    CHECK(exists(out, "brisk.lock"));
    brisk_status st = brisk_session_create(config(out, ""), NULL, NULL, &b);
    CHECKF(st == BRISK_ERR_INVALID && strstr(brisk_session_error(b), "in use by another trainer") &&
           strstr(brisk_session_error(b), "pid"), "%s", brisk_session_error(b));
    brisk_session_destroy(b);
    brisk_session_destroy(a); /* unlocks */
    b = NULL;
    OK(brisk_session_create(config(out, ""), NULL, NULL, &b), b);
    brisk_session_destroy(b);
}

/* The caller's floating-point flags are as before the call: training raises (at least)
 * inexact, and none of it is left set; a flag the caller had raised stays raised. */
static void test_fenv_restored(void) {
    float *coarse, *fine;
    example(64, &coarse, &fine);
    REQUIRE(coarse && fine);
    for (int i = 0; i < 64 * 256; i += 97) fine[i] *= 1e-38f; /* denormal-range values */
    brisk_session *s = NULL;
    feclearexcept(FE_ALL_EXCEPT);
    OK(brisk_session_create(config("", ""), NULL, NULL, &s), s);
    OK(brisk_session_push(s, 64, coarse, 0, fine, 0), s);
    OK(brisk_session_train_steps(s, 4), s);
    float out[4 * 256];
    OK(brisk_session_sample(s, 4, coarse, 0, out, 0, BRISK_SAMPLER_DDPM, 0, 0.0, 3), s);
    CHECKF(fetestexcept(FE_ALL_EXCEPT) == 0, "flags left raised: %#x", fetestexcept(FE_ALL_EXCEPT));
    feraiseexcept(FE_DIVBYZERO);
    OK(brisk_session_train_steps(s, 1), s);
    CHECK(fetestexcept(FE_ALL_EXCEPT) == FE_DIVBYZERO);
    /* and on the error path */
    CHECK(brisk_session_train_steps(s, 0) == BRISK_ERR_INVALID);
    CHECK(fetestexcept(FE_ALL_EXCEPT) == FE_DIVBYZERO);
    feclearexcept(FE_ALL_EXCEPT);
    /* without the restore, the training above leaves inexact set: the check can fail */
    volatile float x = 1.0f, y = 3.0f;
    volatile float z = x / y;
    (void)z;
    CHECK(fetestexcept(FE_INEXACT));
    feclearexcept(FE_ALL_EXCEPT);
    brisk_session_destroy(s);
    free(coarse), free(fine);
}

static void setup(void) { T_MAKE_DIR(dir, "api_stop"); }

TEST_MAIN(T(setup), T(test_request_stop_mid_training), T(test_stop_without_out_dir), T(test_checkpoint_policy),
          T(test_lock_at_create), T(test_fenv_restored))
