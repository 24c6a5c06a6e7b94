/* The loader's worker pool: threads sleep on a condition variable until a job's
 * generation changes, take items under a mutex (an item is a whole image decode, so the
 * lock is never what costs time), and the last one out wakes the caller. */
#include "data/workers.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct brisk_workers {
    int n;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int stop, active;
    /* the job */
    brisk_work_fn fn;
    void *user;
    int64_t count, next, fail_j;
    brisk_status st;
    brisk_error err;
};

static void work(brisk_workers *w) {
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int64_t j = w->next < w->count ? w->next++ : -1;
        pthread_mutex_unlock(&w->mu);
        if (j < 0) return;
        brisk_error e;
        e.msg[0] = 0;
        brisk_status st = w->fn(w->user, j, &e);
        if (st) {
            pthread_mutex_lock(&w->mu);
            if (w->fail_j < 0 || j < w->fail_j) {
                w->fail_j = j;
                w->st = st;
                w->err = e;
            }
            w->next = w->count; /* abandon what has not started */
            pthread_mutex_unlock(&w->mu);
        }
    }
}

static void *worker_main(void *arg) {
    brisk_workers *w = (brisk_workers *)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->gen == seen) pthread_cond_wait(&w->go, &w->mu);
        if (w->stop) break;
        seen = w->gen;
        pthread_mutex_unlock(&w->mu);
        work(w);
        pthread_mutex_lock(&w->mu);
        if (--w->active == 0) pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

void brisk_workers_destroy(brisk_workers *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n; i++) pthread_join(w->th[i], NULL);
    pthread_cond_destroy(&w->go);
    pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->mu);
    free(w->th);
    free(w);
}

brisk_status brisk_workers_create(brisk_workers **out, int threads, brisk_error *err) {
    *out = NULL;
    if (threads < 0 || threads > 1024)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: %d worker threads; expected 0 to 1024", threads);
    brisk_workers *w = calloc(1, sizeof *w);
    if (!w || !(w->th = calloc((size_t)(threads ? threads : 1), sizeof *w->th))) {
        free(w);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "loader: out of memory");
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->go, NULL);
    pthread_cond_init(&w->done, NULL);
    for (; w->n < threads; w->n++)
        if (pthread_create(&w->th[w->n], NULL, worker_main, w) != 0) {
            brisk_workers_destroy(w);
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "loader: cannot start worker thread %d", threads);
        }
    *out = w;
    return BRISK_OK;
}

brisk_status brisk_workers_run(brisk_workers *w, int64_t count, brisk_work_fn fn, void *user, brisk_error *err) {
    pthread_mutex_lock(&w->mu);
    w->fn = fn;
    w->user = user;
    w->count = count;
    w->next = 0;
    w->fail_j = -1;
    w->st = BRISK_OK;
    w->active = w->n;
    w->gen++;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->mu);
    work(w);
    pthread_mutex_lock(&w->mu);
    while (w->active > 0) pthread_cond_wait(&w->done, &w->mu);
    brisk_status st = w->st;
    if (st && err) *err = w->err;
    pthread_mutex_unlock(&w->mu);
    return st;
}
