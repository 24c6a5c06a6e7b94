/* A session created on a train.out_dir that holds a previous run (a restarted simulation):
 * refused by default with a message naming the choices, and nothing touched; continued with
 * "session": {"resume": "auto"} from its newest checkpoint (the step count goes on from it);
 * replaced with "overwrite". On 0e9846d the session silently started again at step 0 and
 * its rotation deleted the previous run's newer checkpoints. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/brisk.h"
#include "test.h"

#define OK(call, s) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            brisk_session_error(s)); t_failed_checks++; t_cur_failed = 1; return; } } while (0)

static char dir[256];

static void config(char *buf, size_t n, const char *resume) {
    char session[96] = "";
    if (resume) snprintf(session, sizeof session, ", \"session\": {\"resume\": \"%s\"}", resume);
    snprintf(buf, n, "{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2},"
             " \"data\": {\"validation_fraction\": 0}, \"train\": {\"batch_size\": 8, \"out_dir\": \"%s/run\","
             " \"checkpoint_every\": 10, \"keep_checkpoints\": 3}, \"speed\": {\"threads\": 1, \"prefetch\": 0}%s}",
             dir, session);
}

static int exists(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/run/%s", dir, name);
    return access(p, F_OK) == 0;
}

static brisk_session *trained(const char *resume, int64_t steps) {
    char cfg[1024];
    config(cfg, sizeof cfg, resume);
    brisk_session *s = NULL;
    float x[64 * 4], y[64];
    for (int i = 0; i < 64 * 4; i++) x[i] = (float)(i % 7) / 7.0f;
    for (int i = 0; i < 64; i++) y[i] = (float)(i % 2);
    if (brisk_session_create(cfg, NULL, NULL, &s) || brisk_session_push(s, 64, x, 0, y, 0) ||
        (steps && brisk_session_train_steps(s, steps))) {
        fprintf(stderr, "%s\n", brisk_session_error(s));
        brisk_session_destroy(s);
        return NULL;
    }
    return s;
}

static void test_refused_by_default(void) {
    T_MAKE_DIR(dir, "session_run_dir");
    brisk_session *s = trained("overwrite", 40);
    REQUIRE(s);
    brisk_session_destroy(s);
    REQUIRE(exists("step-00000040.safetensors") && exists("step-00000030.safetensors"));
    char cfg[1024];
    config(cfg, sizeof cfg, NULL);
    s = NULL;
    CHECK(brisk_session_create(cfg, NULL, NULL, &s) == BRISK_ERR_INVALID);
    const char *msg = brisk_session_error(s);
    CHECKF(strstr(msg, "holds a previous run") && strstr(msg, "\"resume\": \"auto\"") &&
           strstr(msg, "\"overwrite\""), "'%s'", msg);
    brisk_session_destroy(s);
    CHECK(exists("step-00000040.safetensors") && exists("step-00000030.safetensors") && exists("last.safetensors"));
    config(cfg, sizeof cfg, "maybe");
    s = NULL;
    CHECK(brisk_session_create(cfg, NULL, NULL, &s) == BRISK_ERR_INVALID);
    CHECKF(strstr(brisk_session_error(s), "session.resume") != NULL, "'%s'", brisk_session_error(s));
    brisk_session_destroy(s);
}

static void test_auto_continues(void) {
    brisk_session *s = trained("auto", 0);
    REQUIRE(s);
    double steps = 0;
    OK(brisk_session_query(s, "steps", &steps), s);
    CHECKF(steps == 40, "resumed at step %g, expected 40", steps);
    OK(brisk_session_train_steps(s, 10), s);
    brisk_session_destroy(s);
    CHECK(exists("step-00000050.safetensors") && exists("step-00000040.safetensors"));
    CHECK(!exists("step-00000020.safetensors"));
}

static void test_overwrite_replaces(void) {
    brisk_session *s = trained("overwrite", 0);
    REQUIRE(s);
    double steps = -1;
    OK(brisk_session_query(s, "steps", &steps), s);
    CHECK(steps == 0);
    CHECK(!exists("step-00000050.safetensors") && !exists("last.safetensors"));
    brisk_session_destroy(s);
}

/* `brisk train` (here its library form) refuses a config meant for a session. */
static void test_train_refuses_session(void) {
    char cfg[1024], result[4096], error[1024];
    config(cfg, sizeof cfg, "auto");
    brisk_status st = brisk_train_run(cfg, 0, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, result, sizeof result, error,
                                      sizeof error);
    CHECK(st == BRISK_ERR_INVALID);
    CHECKF(strstr(error, "\"session\"") != NULL, "'%s'", error);
}

TEST_MAIN(T(test_refused_by_default), T(test_auto_continues), T(test_overwrite_replaces),
          T(test_train_refuses_session))
