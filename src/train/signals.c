/* Preemption: SIGTERM (the scheduler's "stop now"), SIGINT (Ctrl-C) and SIGUSR1 (SLURM's
 * warning ahead of the time limit, --signal=USR1@T) ask a running trainer to finish
 * its step, write a checkpoint and return; the brisk command then exits with status 75
 * (BRISK_EXIT_PREEMPTED) so a requeue script can tell a stop from a failure.
 *
 * The handler does the only async-signal-safe thing: it stores the signal number in
 * `pending`, a volatile sig_atomic_t, which the step loop reads after every step. This
 * is the library's one piece of mutable global state: a signal handler has nowhere
 * else to put what it learned. It is installed only on request (the CLI does, library
 * users may), with SA_RESTART so no read or write in flight fails with EINTR, and
 * SA_RESETHAND so a second signal acts as the default would (a user pressing Ctrl-C
 * twice means it). */
#include <signal.h>
#include <string.h>

#include "train/trainer_internal.h"

static volatile sig_atomic_t pending;

static const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
#define N_SIGS (sizeof sigs / sizeof sigs[0])
/* What the program had before the first install, for brisk_signals_restore. Installing and
 * restoring are the caller's to serialise (the API does so under its table's mutex). */
static struct sigaction saved[N_SIGS];
static int have_saved;

static void on_stop_signal(int sig) { pending = sig; }

brisk_status brisk_signals_install(brisk_error *err) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    pending = 0;
    for (size_t i = 0; i < N_SIGS; i++)
        if (sigaction(sigs[i], &sa, have_saved ? NULL : &saved[i]) != 0)
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "cannot install a handler for signal %d", sigs[i]);
    have_saved = 1;
    return BRISK_OK;
}

void brisk_signals_restore(void) {
    if (!have_saved) return;
    for (size_t i = 0; i < N_SIGS; i++) sigaction(sigs[i], &saved[i], NULL);
    have_saved = 0;
}

int brisk_signals_installed(void) { return have_saved; }

int brisk_signal_pending(void) { return pending; }

void brisk_signal_clear(void) { pending = 0; }

void brisk_signal_request(int sig) { pending = sig ? sig : SIGTERM; }

const char *brisk_signal_name(int sig) {
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case BRISK_STOP_REQUESTED: return "a stop request";
    default: return "a signal";
    }
}
