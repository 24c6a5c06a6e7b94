/* A stop withdrawn and the host's handlers given back: brisk_session_clear_stop lets train
 * calls train again after a stop request and after a signal brisk's handlers caught (the
 * handler the signal reset is re-armed), and destroying the last session created with
 * "stop_signals" puts back the SIGTERM handler the host had. On 0e9846d no call cleared a stop
 * and the host's handler stayed replaced after destroy. Its own executable: signals are
 * process-wide. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "brisk/brisk.h"
#include "test.h"

#define OK(call, s) do { brisk_status s_ = (call); if (s_ != BRISK_OK) { \
    fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, brisk_status_name(s_), \
            brisk_session_error(s)); t_failed_checks++; t_cur_failed = 1; return; } } while (0)

static volatile sig_atomic_t host_got;
static void host_handler(int sig) { host_got = sig; }

static int raise_at_step;
static void log_raise(void *user, brisk_log_level level, const char *msg) {
    (void)user, (void)level;
    if (raise_at_step && strncmp(msg, "epoch", 5) == 0) {
        raise_at_step = 0;
        raise(SIGTERM);
    }
}

static void test_clear_stop_and_restore(void) {
    struct sigaction host, cur;
    memset(&host, 0, sizeof host);
    host.sa_handler = host_handler;
    sigemptyset(&host.sa_mask);
    sigaction(SIGTERM, &host, NULL);
    brisk_session *s = NULL;
    OK(brisk_session_create("{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2},"
                            " \"data\": {\"validation_fraction\": 0}, \"train\": {\"batch_size\": 8, \"log_every\": 1},"
                            " \"session\": {\"stop_signals\": true}, \"speed\": {\"threads\": 1, \"prefetch\": 0}}",
                            log_raise, NULL, &s), s);
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler != host_handler && cur.sa_handler != SIG_DFL);
    float x[64 * 4] = {0}, y[64] = {0};
    OK(brisk_session_push(s, 64, x, 0, y, 0), s);
    /* a request, withdrawn */
    OK(brisk_session_request_stop(s), s);
    CHECK(brisk_session_train_steps(s, 3) == BRISK_STOPPED);
    OK(brisk_session_clear_stop(s), s);
    OK(brisk_session_train_steps(s, 3), s);
    /* a caught signal, withdrawn: brisk's handler is back in place of the default */
    raise_at_step = 1;
    CHECK(brisk_session_train_steps(s, 5) == BRISK_STOPPED);
    CHECK(brisk_stop_signal() == SIGTERM);
    OK(brisk_session_clear_stop(s), s);
    CHECK(brisk_stop_signal() == 0);
    sigaction(SIGTERM, NULL, &cur);
    CHECK(cur.sa_handler != SIG_DFL && cur.sa_handler != host_handler);
    double steps = 0;
    OK(brisk_session_train_steps(s, 4), s);
    OK(brisk_session_query(s, "steps", &steps), s);
    CHECKF(steps == 0 + 3 + 1 + 4, "%g steps", steps); /* a stop asked between calls: no step */
    OK(brisk_session_destroy(s), s);
    sigaction(SIGTERM, NULL, &cur);
    CHECKF(cur.sa_handler == host_handler, "the host's SIGTERM handler was not given back");
    CHECK(host_got == 0);
}

TEST_MAIN(T(test_clear_stop_and_restore))
