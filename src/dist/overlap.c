/* The gradient all-reduce overlapped with backward, on the CPU (dist.overlap).
 *
 * Why a thread: the executor runs backward as one schedule on all of this process's
 * threads, and Open MPI moves a non-blocking collective only inside MPI calls, so a bucket
 * started by the step thread would not progress until backward ends. A communication thread,
 * created once, starts each bucket's all-reduce as soon as the executor's gradient hook says
 * the bucket is final and keeps MPI progressing while backward computes the next ones.
 *
 * MPI_THREAD_SERIALIZED is enough: between begin and end the step thread makes no MPI call
 * (end comes before the loss agreement), so only this thread is in MPI. Buckets go out in
 * the order backward completes them, the same on every rank (the same graph), and each with
 * the call the after-backward path makes (brisk_dist_mpi_bucket_sum), so the collectives
 * match across ranks and the sums are the same bits. The thread waits with the group's
 * deadline, so a dead rank is named here as well. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"

#if BRISK_HAVE_MPI
#include <pthread.h>

struct brisk_dist_overlap {
    brisk_dist *d;
    float *x;
    int64_t n, nb;
    brisk_dist_bucket *b;
    void *reqs; /* nb MPI_Requests */
    size_t req_size;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* guarded by mu */
    int quit, active, cancel, begun, ending; /* ending: the step waits in end() */
    int64_t ready, step;
    const char *what;
    brisk_status st;
    brisk_error err;
    double t_first, t_done, t_end; /* first bucket started, last one done, end called */
    double comm_s, hidden_s;
};

int brisk_dist_can_overlap(const brisk_dist *d) { return d && d->world > 1 && d->mpi && d->thread_serialized; }

/* One step: start what is ready, wait for it, until every bucket is done (or cancelled or
 * failed). Called with mu held; returns with it held. */
static void run_step(brisk_dist_overlap *o) {
    int64_t started = 0;
    int arrived = 0;
    brisk_status st = BRISK_OK;
    brisk_error err = {0};
    char *reqs = o->reqs;
    o->t_first = o->t_done = 0;
    for (;;) {
        while (o->ready == started && !o->cancel && started < o->nb) pthread_cond_wait(&o->cv, &o->mu);
        int64_t k = o->ready;
        int cancel = o->cancel, patient = !o->ending;
        const char *what = o->what;
        int64_t step = o->step;
        pthread_mutex_unlock(&o->mu);
        if (!cancel && started < k) {
            if (!arrived && !(st = brisk_dist_mpi_arrive(o->d, what, step, &err))) arrived = 1;
            if (!o->t_first) o->t_first = brisk_now();
            int64_t b = started;
            for (; b < k && !st; b++)
                st = brisk_dist_mpi_bucket_sum(o->d, o->x + o->b[b].offset, o->b[b].count, reqs + b * o->req_size, &err);
            /* those started must finish before x may be touched, whatever failed */
            brisk_error e2 = {0};
            brisk_status ws = brisk_dist_mpi_wait(o->d, reqs + started * o->req_size,
                                                  (int)(b - started - (st ? 1 : 0)), what, step, patient,
                                                  st ? &e2 : &err);
            if (!st) st = ws;
            started = k;
            o->t_done = brisk_now();
        }
        pthread_mutex_lock(&o->mu);
        if (st || cancel || started == o->nb) break;
    }
    o->st = st;
    if (st) o->err = err;
}

static void *comm_thread(void *arg) {
    brisk_dist_overlap *o = arg;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->quit && !o->active) pthread_cond_wait(&o->cv, &o->mu);
        if (o->quit) break;
        run_step(o);
        o->active = 0;
        pthread_cond_broadcast(&o->cv);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

brisk_status brisk_dist_overlap_create(brisk_dist *d, float *x, int64_t n, const brisk_dist_bucket *buckets,
                                       int64_t n_buckets, brisk_dist_overlap **out, brisk_error *err) {
    *out = NULL;
    if (!brisk_dist_can_overlap(d))
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "the gradient all-reduce cannot overlap backward here: it needs "
                            "several ranks and MPI_THREAD_SERIALIZED from MPI");
    if (n_buckets > (int64_t)1 << 30)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%lld gradient buckets", (long long)n_buckets);
    /* here, once: the thread's bucket sums never change size */
    brisk_status st = brisk_dist_check_sizes(d, "gradient all-reduce (overlapped)", n, buckets, n_buckets, 0, err);
    if (st) return st;
    brisk_dist_overlap *o = calloc(1, sizeof *o);
    if (!o) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    o->d = d, o->x = x, o->n = n, o->nb = n_buckets;
    o->req_size = brisk_dist_mpi_request_size();
    o->b = malloc(sizeof *o->b * (size_t)(n_buckets + 1));
    o->reqs = malloc(o->req_size * (size_t)(n_buckets + 1));
    if (!o->b || !o->reqs) {
        free(o->b), free(o->reqs), free(o);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    }
    if (n_buckets) memcpy(o->b, buckets, sizeof *o->b * (size_t)n_buckets);
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    if (pthread_create(&o->thread, NULL, comm_thread, o) != 0) {
        pthread_mutex_destroy(&o->mu);
        pthread_cond_destroy(&o->cv);
        free(o->b), free(o->reqs), free(o);
        return brisk_errorf(err, BRISK_ERR_IO, "could not start the gradient all-reduce thread");
    }
    *out = o;
    return BRISK_OK;
}

void brisk_dist_overlap_free(brisk_dist_overlap *o) {
    if (!o) return;
    brisk_error e = {0};
    int reduced;
    brisk_dist_overlap_end(o, 1, &reduced, &e);
    pthread_mutex_lock(&o->mu);
    o->quit = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o->b), free(o->reqs), free(o);
}

void brisk_dist_overlap_begin(brisk_dist_overlap *o, const char *what, int64_t step) {
    pthread_mutex_lock(&o->mu);
    o->what = what, o->step = step;
    o->ready = 0, o->cancel = 0, o->ending = 0, o->st = BRISK_OK;
    o->active = o->begun = 1;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

void brisk_dist_overlap_ready(brisk_dist_overlap *o, int64_t k) {
    pthread_mutex_lock(&o->mu);
    if (k > o->ready) {
        o->ready = k < o->nb ? k : o->nb;
        pthread_cond_broadcast(&o->cv);
    }
    pthread_mutex_unlock(&o->mu);
}

brisk_status brisk_dist_overlap_end(brisk_dist_overlap *o, int cancel, int *reduced, brisk_error *err) {
    *reduced = 0;
    pthread_mutex_lock(&o->mu);
    if (!o->begun) {
        pthread_mutex_unlock(&o->mu);
        return BRISK_OK;
    }
    double t_end = brisk_now();
    if (cancel) o->cancel = 1;
    o->ending = 1;
    pthread_cond_broadcast(&o->cv);
    while (o->active) pthread_cond_wait(&o->cv, &o->mu);
    o->begun = 0;
    brisk_status st = o->st;
    if (st) *err = o->err;
    o->t_end = t_end;
    if (o->t_first > 0) {
        o->comm_s = o->t_done - o->t_first;
        double hidden = (t_end < o->t_done ? t_end : o->t_done) - o->t_first;
        o->hidden_s = hidden > 0 ? hidden : 0;
    }
    pthread_mutex_unlock(&o->mu);
    if (st || cancel) return st;
    brisk_dist_scale(o->x, o->n, 1.0f / (float)o->d->world);
    *reduced = 1;
    return BRISK_OK;
}

void brisk_dist_overlap_times(const brisk_dist_overlap *o, double *comm_s, double *hidden_s) {
    *comm_s = o ? o->comm_s : 0;
    *hidden_s = o ? o->hidden_s : 0;
}

#else /* no MPI: one process, nothing to overlap */

int brisk_dist_can_overlap(const brisk_dist *d) {
    (void)d;
    return 0;
}
brisk_status brisk_dist_overlap_create(brisk_dist *d, float *x, int64_t n, const brisk_dist_bucket *buckets,
                                       int64_t n_buckets, brisk_dist_overlap **out, brisk_error *err) {
    (void)d, (void)x, (void)n, (void)buckets, (void)n_buckets;
    *out = NULL;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "the gradient all-reduce overlap needs MPI (this build has none)");
}
void brisk_dist_overlap_free(brisk_dist_overlap *o) { (void)o; }
void brisk_dist_overlap_begin(brisk_dist_overlap *o, const char *what, int64_t step) { (void)o, (void)what, (void)step; }
void brisk_dist_overlap_ready(brisk_dist_overlap *o, int64_t k) { (void)o, (void)k; }
brisk_status brisk_dist_overlap_end(brisk_dist_overlap *o, int cancel, int *reduced, brisk_error *err) {
    (void)o, (void)cancel, (void)err;
    *reduced = 0;
    return BRISK_OK;
}
void brisk_dist_overlap_times(const brisk_dist_overlap *o, double *comm_s, double *hidden_s) {
    (void)o;
    *comm_s = *hidden_s = 0;
}
#endif
