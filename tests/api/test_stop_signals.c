/* brisk's own signal handlers for a host without any ("session": {"stop_signals": true}):
 * SIGTERM mid-training stops the train call after its step with a checkpoint and
 * BRISK_STOPPED, stops every session of the process from then on, and is what
 * brisk_stop_signal() reports. Its own executable: a caught signal is process-wide. */
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

static const char *config(const char *out_dir, int stop_signals) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"model\": {\"type\": \"diffusion\", \"hidden\": [32], \"noise\": {\"steps\": 10}},"
             " \"data\": {\"validation_fraction\": 0},"
             " \"train\": {\"batch_size\": 16, \"log_every\": 1, \"out_dir\": \"%s\"},"
             " \"session\": {\"stop_signals\": %s},"
             " \"speed\": {\"threads\": 1, \"prefetch\": 0}}", out_dir, stop_signals ? "true" : "false");
    return buf;
}

/* SIGTERM, as the batch system sends it, at the progress line of step 4 */
static void log_raise(void *user, brisk_log_level level, const char *msg) {
    (void)user, (void)level;
    if (strncmp(msg, "epoch", 5) == 0 && strstr(msg, "step 4/")) raise(SIGTERM);
}

static void test_sigterm_mid_training(void) {
    T_MAKE_DIR(dir, "api_stop_signals");
    char out[400], path[450];
    snprintf(out, sizeof out, "%s/run", dir);
    brisk_dataset ds;
    brisk_error err = {0};
    REQUIRE_OK(brisk_synth_make("diffusion", 160, 2, &ds, &err), &err);
    const float *coarse = brisk_dataset_get(&ds, "coarse")->data, *fine = brisk_dataset_get(&ds, "fine")->data;
    brisk_session *s = NULL, *other = NULL;
    /* a session that does not ask installs nothing: the default action would still end us */
    OK(brisk_session_create(config("", 0), NULL, NULL, &other), other);
    struct sigaction cur;
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler == SIG_DFL);
    OK(brisk_session_create(config(out, 1), log_raise, NULL, &s), s);
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler != SIG_DFL);
    CHECK(brisk_stop_signal() == 0);
    OK(brisk_session_push(s, 160, coarse, 0, fine, 0), s);
    brisk_status st = brisk_session_train_epochs(s, 3);
    const char *msg = brisk_session_error(s);
    CHECKF(st == BRISK_STOPPED && strstr(msg, "stopped by SIGTERM after step 4 (4 steps done of the 30 steps") &&
           strstr(msg, "last.safetensors written"), "%s: %s", brisk_status_name(st), msg);
    CHECK(brisk_stop_signal() == SIGTERM);
    double v;
    OK(brisk_session_query(s, "stop_signal", &v), s);
    CHECK(v == SIGTERM);
    snprintf(path, sizeof path, "%s/last.safetensors", out);
    int64_t step = -1;
    CHECK(brisk_checkpoint_check(path, &step, &err) == BRISK_OK && step == 4);
    /* the signal is for the process: the other session stops too */
    OK(brisk_session_push(other, 160, coarse, 0, fine, 0), other);
    st = brisk_session_train_steps(other, 2);
    CHECKF(st == BRISK_STOPPED && strstr(brisk_session_error(other), "no checkpoint written"), "%s",
           brisk_session_error(other));
    OK(brisk_session_query(other, "stop_requested", &v), other);
    CHECK(v == 1);
    /* installing again after a caught signal changes nothing (the handler reset itself) */
    CHECK(brisk_stop_signals_install() == BRISK_OK);
    CHECK(brisk_stop_signal() == SIGTERM);
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler == SIG_DFL);
    brisk_session_destroy(other);
    brisk_session_destroy(s);
    brisk_dataset_free(&ds);
}

static void test_bad_session_section(void) {
    brisk_session *s = NULL;
    brisk_status st = brisk_session_create("{\"model\": {\"type\": \"diffusion\"}, \"session\": {\"stop_signal\": true}}",
                                           NULL, NULL, &s);
    CHECKF(st == BRISK_ERR_INVALID && strstr(brisk_session_error(s), "unknown key \"stop_signal\""), "%s",
           brisk_session_error(s));
    brisk_session_destroy(s);
    s = NULL;
    st = brisk_session_create("{\"model\": {\"type\": \"diffusion\"}, \"session\": {\"stop_signals\": 1}}", NULL, NULL, &s);
    CHECKF(st == BRISK_ERR_INVALID && strstr(brisk_session_error(s), "session.stop_signals"), "%s",
           brisk_session_error(s));
    brisk_session_destroy(s);
}

TEST_MAIN(T(test_bad_session_section), T(test_sigterm_mid_training))
