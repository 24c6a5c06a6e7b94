/* A deadline for a call that cannot time out by itself: MPI_Init waits for every rank of the
 * job, so one rank that never starts it (stuck before it: started late, or reading its config
 * from a filesystem that hangs) holds up all the others forever, printing nothing. A thread
 * waits beside the call; when the deadline passes first, it prints the message as this
 * process's error and ends the process with status 1, and the launcher then ends the job. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

struct cli_deadline {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct timespec at;
    int done;
    char message[512];
};

static void *watch(void *arg) {
    cli_deadline *d = arg;
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    while (!d->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&d->cv, &d->mu, &d->at);
    int expired = !d->done;
    pthread_mutex_unlock(&d->mu);
    if (expired) {
        cli_fail("%s", d->message);
        _exit(1); /* the main thread is inside the call that never returns */
    }
    return NULL;
}

cli_deadline *cli_deadline_start(double seconds, const char *message) {
    cli_deadline *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    snprintf(d->message, sizeof d->message, "%s", message);
    clock_gettime(CLOCK_REALTIME, &d->at);
    double whole = (double)(time_t)seconds;
    d->at.tv_sec += (time_t)seconds;
    d->at.tv_nsec += (long)((seconds - whole) * 1e9);
    if (d->at.tv_nsec >= 1000000000L) d->at.tv_sec++, d->at.tv_nsec -= 1000000000L;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (pthread_create(&d->thread, NULL, watch, d) != 0) { /* no deadline then, as before */
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
        free(d);
        return NULL;
    }
    return d;
}

void cli_deadline_stop(cli_deadline *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->done = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}
