/* The transport: MPI collectives, each non-blocking and waited for with a deadline.
 *
 * Naming the rank behind a timeout: before each collective, every rank sends rank 0 the
 * collective's sequence number and rank 0 sends it to every rank (small eager messages,
 * 2(N-1) per collective, negligible next to a gradient bucket). A rank whose collective
 * times out reads what arrived: rank 0 knows exactly which ranks never reached this
 * collective; another rank knows whether rank 0 did. MPI has no timeout of its own, and a
 * blocking MPI_Allreduce would wait for a dead rank forever. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"

static brisk_dist *alloc_group(void) {
    brisk_dist *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->timeout_s = BRISK_DIST_TIMEOUT_DEFAULT;
    d->bucket_bytes = BRISK_DIST_BUCKET_BYTES_DEFAULT;
    return d;
}

#if BRISK_HAVE_MPI
#include <mpi.h>

enum { TAG_ARRIVE = 0x62726b }; /* "brk": the arrival messages' tag on brisk's own communicator */

struct brisk_dist_mpi {
    MPI_Comm comm;
    MPI_Comm check;           /* agreements (agree.c) */
    int owns_init;            /* brisk called MPI_Init (the command), so it finalises */
    int64_t seq;              /* collectives started on this rank */
    int n_peers;              /* rank 0: every other rank; others: rank 0 */
    int *peer;
    MPI_Request *recv, *send;
    int64_t *recv_buf, *send_buf, *seen; /* seen: the newest sequence number each peer reached */
    float *scratch;
    int64_t scratch_n;
};

int brisk_dist_have_mpi(void) { return 1; }

static brisk_status mpi_fail(brisk_dist *d, int rc, const char *what, brisk_error *err) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    d->broken = 1;
    return brisk_errorf(err, BRISK_ERR_IO, "rank %d: %s failed: %s", d->rank, what, msg);
}

static void drain_arrivals(struct brisk_dist_mpi *m) {
    for (int i = 0; i < m->n_peers; i++) {
        int done = 1;
        while (m->recv[i] != MPI_REQUEST_NULL && MPI_Test(&m->recv[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) {
            m->seen[i] = m->recv_buf[i];
            MPI_Irecv(&m->recv_buf[i], 1, MPI_INT64_T, m->peer[i], TAG_ARRIVE, m->comm, &m->recv[i]);
        }
    }
}

/* The ranks that have not reached the current collective, as text. */
static void missing_ranks(brisk_dist *d, char *out, size_t cap) {
    struct brisk_dist_mpi *m = d->mpi;
    drain_arrivals(m);
    size_t len = 0;
    int n = 0;
    out[0] = 0;
    for (int i = 0; i < m->n_peers; i++)
        if (m->seen[i] < m->seq && len + 16 < cap) {
            len += (size_t)snprintf(out + len, cap - len, "%s%d", n ? ", " : "", m->peer[i]);
            n++;
        }
    if (n == 0 && d->world == 2) /* the one peer reached it and stalled inside */
        snprintf(out, cap, "%d (it entered the collective but never finished it)", 1 - d->rank);
    else if (n == 0)
        snprintf(out, cap, d->rank == 0 ? "none (every rank entered it; one stalled inside)"
                                        : "not rank 0; rank 0's message names the rank");
}

/* patient: the communication thread, which shares the cores with backward: it yields at
 * once instead of spinning first */
static void pause_briefly(long spins, int patient) {
    if (patient && spins < 2000) {
        struct timespec ts = {0, 10000};
        nanosleep(&ts, NULL);
        return;
    }
    if (spins < 2000) return;
    struct timespec ts = {0, spins < 20000 ? 20000 : 200000};
    nanosleep(&ts, NULL);
}

/* Waits for reqs with the group's deadline; on timeout the group is broken and the error
 * names the ranks that never reached the collective. */
static brisk_status wait_for(brisk_dist *d, MPI_Request *reqs, int n, const char *what, int64_t step, int patient,
                             brisk_error *err) {
    double t0 = brisk_now(), deadline = t0 + d->timeout_s;
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, what, err);
        if (done) break;
        if ((spins & 63) == 0 && brisk_now() > deadline) {
            char who[256];
            missing_ranks(d, who, sizeof who);
            d->broken = 1;
            return brisk_errorf(err, BRISK_ERR_IO,
                                "rank %d of %d: the %s of step %lld did not complete within dist.timeout_s = %g s: "
                                "rank(s) that died or hang: %s",
                                d->rank, d->world, what, (long long)step, d->timeout_s, who);
        }
        pause_briefly(spins, patient);
    }
    d->wait_s += brisk_now() - t0;
    return BRISK_OK;
}

static brisk_status wait_all(brisk_dist *d, MPI_Request *reqs, int n, const char *what, int64_t step,
                             brisk_error *err) {
    return wait_for(d, reqs, n, what, step, 0, err);
}

/* Tells the peers this rank reached the next collective. */
static brisk_status arrive(brisk_dist *d, const char *what, int64_t step, brisk_error *err) {
    struct brisk_dist_mpi *m = d->mpi;
    d->failed_together = 0;
    m->seq++;
    for (int i = 0; i < m->n_peers; i++) {
        if (m->send[i] != MPI_REQUEST_NULL) {
            brisk_status st = wait_all(d, &m->send[i], 1, what, step, err);
            if (st) return st;
        }
        m->send_buf[i] = m->seq;
        int rc = MPI_Isend(&m->send_buf[i], 1, MPI_INT64_T, m->peer[i], TAG_ARRIVE, m->comm, &m->send[i]);
        if (rc != MPI_SUCCESS) return mpi_fail(d, rc, what, err);
    }
    drain_arrivals(m);
    return BRISK_OK;
}

static brisk_status usable(brisk_dist *d, brisk_error *err) {
    if (d->broken)
        return brisk_errorf(err, BRISK_ERR_IO, "rank %d: the process group failed at an earlier collective", d->rank);
    return BRISK_OK;
}

static brisk_status attach(brisk_dist *d, MPI_Comm parent, brisk_error *err) {
    struct brisk_dist_mpi *m = calloc(1, sizeof *m);
    if (!m) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    d->mpi = m;
    m->comm = m->check = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(parent, &m->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(m->comm, &m->check);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Comm_dup", err);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(m->check, MPI_ERRORS_RETURN);
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    d->thread_serialized = level >= MPI_THREAD_SERIALIZED;
    MPI_Comm_rank(m->comm, &d->rank);
    MPI_Comm_size(m->comm, &d->world);
    MPI_Comm node;
    if (MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &d->local_rank);
        MPI_Comm_free(&node);
    }
    m->n_peers = d->world == 1 ? 0 : d->rank == 0 ? d->world - 1 : 1;
    int np = m->n_peers ? m->n_peers : 1;
    m->peer = calloc((size_t)np, sizeof *m->peer);
    m->recv = calloc((size_t)np, sizeof *m->recv);
    m->send = calloc((size_t)np, sizeof *m->send);
    m->recv_buf = calloc((size_t)np, sizeof(int64_t));
    m->send_buf = calloc((size_t)np, sizeof(int64_t));
    m->seen = calloc((size_t)np, sizeof(int64_t));
    if (!m->peer || !m->recv || !m->send || !m->recv_buf || !m->send_buf || !m->seen)
        return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->n_peers; i++) {
        m->peer[i] = d->rank == 0 ? i + 1 : 0;
        m->send[i] = MPI_REQUEST_NULL;
        MPI_Irecv(&m->recv_buf[i], 1, MPI_INT64_T, m->peer[i], TAG_ARRIVE, m->comm, &m->recv[i]);
    }
    return BRISK_OK;
}

brisk_status brisk_dist_create(brisk_dist **out, brisk_error *err) {
    *out = NULL;
    brisk_dist *d = alloc_group();
    if (!d) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    brisk_status st;
    if (!brisk_dist_mpi_launched()) {
        if ((st = brisk_dist_from_env(d, err))) {
            free(d);
            return st;
        }
        *out = d;
        return BRISK_OK;
    }
    /* before MPI_Init, which may set variables of its own */
    snprintf(d->source, sizeof d->source, "MPI (%s)", brisk_dist_launcher());
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* SERIALIZED: the gradient all-reduce may run on brisk's communication thread while
         * backward runs (never two threads in MPI at once); FUNNELED would confine MPI to the
         * main thread. Below SERIALIZED the all-reduce waits for the end of backward. */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            free(d);
            return brisk_errorf(err, BRISK_ERR_IO, "MPI_Init_thread failed (an MPI launcher's variables are set)");
        }
    }
    st = attach(d, MPI_COMM_WORLD, err);
    if (d->mpi) d->mpi->owns_init = !inited;
    const char *size = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
    if (!st && size && atoi(size) != d->world) /* a launcher's variables, but MPI started alone */
        st = brisk_errorf(err, BRISK_ERR_INVALID, "the environment says %s ranks (%s), but MPI started %d: was this "
                          "process started by that MPI's launcher?", size,
                          getenv("OMPI_COMM_WORLD_SIZE") ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE", d->world);
    if (st) {
        brisk_dist_free(d);
        return st;
    }
    *out = d;
    return BRISK_OK;
}

/* The host's error handlers, made to return for a while: a bad communicator raises its
 * error on itself, or (an invalid handle) on MPI_COMM_WORLD, MPI_COMM_SELF in MPI 4, whose
 * handlers are the host's and by default abort; api.h promises brisk never aborts. */
typedef struct handlers {
    MPI_Comm comm[3];
    MPI_Errhandler old[3];
    int n;
} handlers;

static void handlers_return(handlers *h, MPI_Comm comm) {
    MPI_Comm all[3] = {MPI_COMM_WORLD, MPI_COMM_SELF, comm};
    h->n = 0;
    for (int i = 0; i < 3; i++) {
        if (i == 2 && (comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF)) break;
        if (MPI_Comm_get_errhandler(all[i], &h->old[h->n]) != MPI_SUCCESS) continue;
        MPI_Comm_set_errhandler(all[i], MPI_ERRORS_RETURN);
        h->comm[h->n++] = all[i];
    }
}

static void handlers_restore(handlers *h) {
    for (int i = 0; i < h->n; i++) {
        MPI_Comm_set_errhandler(h->comm[i], h->old[i]);
        MPI_Errhandler_free(&h->old[i]);
    }
}

/* MPI is usable (initialised and not finalised): anything else may abort before any error
 * handler applies (Open MPI's MPI_Comm_f2c before MPI_Init does). */
static brisk_status mpi_running(brisk_error *err) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (!inited)
        return brisk_errorf(err, BRISK_ERR_INVALID, "an MPI communicator was passed, but MPI is not initialised: "
                            "call MPI_Init (or MPI_Init_thread) before creating the session");
    if (fin)
        return brisk_errorf(err, BRISK_ERR_INVALID, "an MPI communicator was passed, but MPI is finalised already");
    return BRISK_OK;
}

static brisk_status create_from(brisk_dist **out, MPI_Comm comm, brisk_error *err) {
    *out = NULL;
    if (comm == MPI_COMM_NULL) return brisk_errorf(err, BRISK_ERR_INVALID, "the MPI communicator passed is MPI_COMM_NULL");
    handlers h;
    handlers_return(&h, comm);
    int size = 0, rc = MPI_Comm_size(comm, &size);
    brisk_dist *d = NULL;
    brisk_status st = BRISK_OK;
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        st = brisk_errorf(err, BRISK_ERR_INVALID, "the MPI communicator passed is not a valid one (MPI_Comm_size: %s); "
                          "pass a communicator of this MPI (in C its Fortran handle, MPI_Comm_c2f(comm))", msg);
    } else if (!(d = alloc_group())) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    } else {
        snprintf(d->source, sizeof d->source, "the host program's MPI communicator");
        st = attach(d, comm, err);
    }
    handlers_restore(&h);
    if (st) {
        brisk_dist_free(d);
        return st;
    }
    *out = d;
    return BRISK_OK;
}

brisk_status brisk_dist_create_comm(brisk_dist **out, const void *mpi_comm, brisk_error *err) {
    *out = NULL;
    if (!mpi_comm) return brisk_errorf(err, BRISK_ERR_INVALID, "mpi_comm is NULL; expected the address of an MPI_Comm");
    brisk_status st = mpi_running(err);
    return st ? st : create_from(out, *(const MPI_Comm *)mpi_comm, err);
}

brisk_status brisk_dist_create_fortran_comm(brisk_dist **out, int64_t fortran_comm, brisk_error *err) {
    *out = NULL;
    brisk_status st = mpi_running(err);
    return st ? st : create_from(out, MPI_Comm_f2c((MPI_Fint)fortran_comm), err);
}

void brisk_dist_free(brisk_dist *d) {
    if (!d) return;
    struct brisk_dist_mpi *m = d->mpi;
    if (m) {
        if (d->broken && m->owns_init) {
            /* a rank is dead or hung: MPI_Finalize would wait for it; the launcher ends the job */
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int i = 0; i < m->n_peers && !d->broken; i++) {
            if (m->send[i] != MPI_REQUEST_NULL) MPI_Wait(&m->send[i], MPI_STATUS_IGNORE);
            if (m->recv[i] != MPI_REQUEST_NULL) {
                MPI_Cancel(&m->recv[i]);
                MPI_Wait(&m->recv[i], MPI_STATUS_IGNORE);
            }
        }
        if (!d->broken && m->check != MPI_COMM_NULL) MPI_Comm_free(&m->check);
        if (!d->broken && m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
        if (m->owns_init) {
            int fin = 0;
            MPI_Finalized(&fin);
            if (!fin) MPI_Finalize();
        }
        free(m->peer), free(m->recv), free(m->send), free(m->recv_buf), free(m->send_buf), free(m->seen);
        free(m->scratch);
        free(m);
    }
    free(d);
}

void brisk_dist_scale(float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

brisk_status brisk_dist_mpi_arrive(brisk_dist *d, const char *what, int64_t step, brisk_error *err) {
    brisk_status st = usable(d, err);
    return st ? st : arrive(d, what, step, err);
}

/* One bucket's sum, in place: the same call for the overlapped and the after-backward
 * all-reduce, so both give the same bits. */
brisk_status brisk_dist_mpi_bucket_sum(brisk_dist *d, float *x, int64_t count, void *request, brisk_error *err) {
    int rc = count > INT_MAX ? MPI_ERR_COUNT
                             : MPI_Iallreduce(MPI_IN_PLACE, x, (int)count, MPI_FLOAT, MPI_SUM, d->mpi->comm, request);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Iallreduce", err);
    d->collectives++;
    d->bytes += count * (int64_t)sizeof(float);
    return BRISK_OK;
}

brisk_status brisk_dist_mpi_wait(brisk_dist *d, void *requests, int n, const char *what, int64_t step, int patient,
                                 brisk_error *err) {
    return n > 0 ? wait_for(d, requests, n, what, step, patient, err) : BRISK_OK;
}

size_t brisk_dist_mpi_request_size(void) { return sizeof(MPI_Request); }

brisk_status brisk_dist_mpi_allgather_bytes(brisk_dist *d, const void *mine, void *all, size_t bytes, const char *what,
                                            brisk_error *err) {
    brisk_status st = usable(d, err);
    if (st || (st = arrive(d, what, 0, err))) return st;
    if (bytes > INT_MAX) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: %zu bytes a rank", what, bytes);
    MPI_Request r;
    int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, d->mpi->check, &r);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Iallgather", err);
    return wait_all(d, &r, 1, what, 0, err);
}

brisk_status brisk_dist_allreduce_mean(brisk_dist *d, float *x, int64_t n, const brisk_dist_bucket *buckets,
                                       int64_t n_buckets, const char *what, int64_t step, brisk_error *err) {
    if (!d || d->world == 1 || n == 0) return BRISK_OK;
    int64_t per = d->bucket_bytes / (int64_t)sizeof(float);
    if (per > INT_MAX) per = INT_MAX;
    brisk_status st = usable(d, err);
    if (st || (st = brisk_dist_check_sizes(d, what, n, buckets, buckets ? n_buckets : 0, buckets ? 0 : per, err)) ||
        (st = brisk_dist_mpi_arrive(d, what, step, err)))
        return st;
    int64_t nb = buckets ? n_buckets : (n + per - 1) / per;
    MPI_Request *reqs = malloc((size_t)nb * sizeof *reqs);
    if (!reqs) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int64_t b = 0; b < nb; b++) {
        int64_t off = buckets ? buckets[b].offset : b * per;
        int64_t cnt = buckets ? buckets[b].count : (n - off < per ? n - off : per);
        if ((st = brisk_dist_mpi_bucket_sum(d, x + off, cnt, &reqs[b], err))) {
            /* those already started must finish before x may be touched */
            brisk_error e2 = {0};
            if (b > 0) wait_all(d, reqs, (int)b, what, step, &e2);
            free(reqs);
            return st;
        }
    }
    st = wait_all(d, reqs, (int)nb, what, step, err);
    free(reqs);
    if (!st) brisk_dist_scale(x, n, 1.0f / (float)d->world);
    return st;
}

static brisk_status reduce_doubles(brisk_dist *d, double *v, int n, MPI_Op op, const char *what, int64_t step,
                                   brisk_error *err) {
    if (!d || d->world == 1 || n == 0) return BRISK_OK;
    brisk_status st = usable(d, err);
    if (st || (st = arrive(d, what, step, err))) return st;
    MPI_Request r;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, d->mpi->comm, &r);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Iallreduce", err);
    d->collectives++;
    d->bytes += n * (int64_t)sizeof(double);
    return wait_all(d, &r, 1, what, step, err);
}

brisk_status brisk_dist_allreduce_sum(brisk_dist *d, double *v, int n, const char *what, int64_t step,
                                      brisk_error *err) {
    return reduce_doubles(d, v, n, MPI_SUM, what, step, err);
}

brisk_status brisk_dist_allreduce_max(brisk_dist *d, double *v, int n, const char *what, int64_t step,
                                      brisk_error *err) {
    return reduce_doubles(d, v, n, MPI_MAX, what, step, err);
}

brisk_status brisk_dist_broadcast(brisk_dist *d, void *buf, size_t bytes, const char *what, brisk_error *err) {
    if (!d || d->world == 1 || bytes == 0) return BRISK_OK;
    brisk_status st = usable(d, err);
    if (st || (st = arrive(d, what, 0, err))) return st;
    if (bytes > INT_MAX) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "broadcast of %zu bytes", bytes);
    MPI_Request r;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, 0, d->mpi->comm, &r);
    if (rc != MPI_SUCCESS) return mpi_fail(d, rc, "MPI_Ibcast", err);
    d->collectives++;
    return wait_all(d, &r, 1, what, 0, err);
}

/* counts and displacements of the shards, as MPI wants them (int) */
static brisk_status shard_table(brisk_dist *d, int64_t n, int **counts, int **displs, brisk_error *err) {
    *counts = malloc((size_t)d->world * sizeof(int));
    *displs = malloc((size_t)d->world * sizeof(int));
    if (!*counts || !*displs) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    if (n > INT_MAX)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "a sharded arena of %lld floats; at most %d", (long long)n, INT_MAX);
    for (int r = 0; r < d->world; r++) {
        int64_t off, cnt;
        brisk_dist_shard(n, d->world, r, &off, &cnt);
        (*counts)[r] = (int)cnt, (*displs)[r] = (int)off;
    }
    return BRISK_OK;
}

brisk_status brisk_dist_reduce_scatter_mean(brisk_dist *d, float *x, int64_t n, const char *what, int64_t step,
                                            brisk_error *err) {
    if (!d || d->world == 1 || n == 0) return BRISK_OK;
    struct brisk_dist_mpi *m = d->mpi;
    int *counts = NULL, *displs = NULL;
    brisk_status st = usable(d, err);
    if (!st) st = brisk_dist_check_sizes(d, what, n, NULL, 0, 0, err);
    if (!st) st = shard_table(d, n, &counts, &displs, err);
    int mine = st ? 0 : counts[d->rank];
    if (!st && m->scratch_n < mine) {
        float *p = realloc(m->scratch, (size_t)mine * sizeof *p);
        if (!p) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        else m->scratch = p, m->scratch_n = mine;
    }
    if (!st) st = arrive(d, what, step, err);
    if (!st) {
        MPI_Request r;
        int rc = MPI_Ireduce_scatter(x, m->scratch, counts, MPI_FLOAT, MPI_SUM, m->comm, &r);
        if (rc != MPI_SUCCESS) st = mpi_fail(d, rc, "MPI_Ireduce_scatter", err);
        else {
            d->collectives++;
            d->bytes += n * (int64_t)sizeof(float);
            st = wait_all(d, &r, 1, what, step, err);
        }
    }
    if (!st) {
        float s = 1.0f / (float)d->world, *dst = x + displs[d->rank];
        for (int i = 0; i < mine; i++) dst[i] = m->scratch[i] * s;
    }
    free(counts);
    free(displs);
    return st;
}

brisk_status brisk_dist_allgather(brisk_dist *d, float *x, int64_t n, const char *what, int64_t step,
                                  brisk_error *err) {
    if (!d || d->world == 1 || n == 0) return BRISK_OK;
    int *counts = NULL, *displs = NULL;
    brisk_status st = usable(d, err);
    if (!st) st = brisk_dist_check_sizes(d, what, n, NULL, 0, 0, err);
    if (!st) st = shard_table(d, n, &counts, &displs, err);
    if (!st) st = arrive(d, what, step, err);
    if (!st) {
        MPI_Request r;
        int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, MPI_FLOAT, d->mpi->comm, &r);
        if (rc != MPI_SUCCESS) st = mpi_fail(d, rc, "MPI_Iallgatherv", err);
        else {
            d->collectives++;
            d->bytes += n * (int64_t)sizeof(float);
            st = wait_all(d, &r, 1, what, step, err);
        }
    }
    free(counts);
    free(displs);
    return st;
}

brisk_status brisk_dist_gather(brisk_dist *d, const float *mine, float *all, int64_t n, const char *what, int64_t step,
                               brisk_error *err) {
    if (!d || d->world == 1) {
        if (all && all != mine) memcpy(all, mine, (size_t)n * sizeof(float));
        return BRISK_OK;
    }
    int *counts = NULL, *displs = NULL;
    brisk_status st = usable(d, err);
    if (!st) st = brisk_dist_check_sizes(d, what, n, NULL, 0, 0, err);
    if (!st) st = shard_table(d, n, &counts, &displs, err);
    if (!st) st = arrive(d, what, step, err);
    if (!st) {
        MPI_Request r;
        int rc = MPI_Igatherv(mine, counts[d->rank], MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, d->mpi->comm, &r);
        if (rc != MPI_SUCCESS) st = mpi_fail(d, rc, "MPI_Igatherv", err);
        else {
            d->collectives++;
            d->bytes += (int64_t)counts[d->rank] * (int64_t)sizeof(float);
            st = wait_all(d, &r, 1, what, step, err);
        }
    }
    free(counts);
    free(displs);
    return st;
}

#else /* no MPI in this build: a single process, or a clear error */

int brisk_dist_have_mpi(void) { return 0; }

brisk_status brisk_dist_create(brisk_dist **out, brisk_error *err) {
    *out = NULL;
    brisk_dist *d = alloc_group();
    if (!d) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    brisk_status st = brisk_dist_from_env(d, err);
    if (!st && brisk_dist_mpi_launched() && (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"))) {
        const char *n = getenv("OMPI_COMM_WORLD_SIZE") ? getenv("OMPI_COMM_WORLD_SIZE") : getenv("PMI_SIZE");
        if (atoi(n) > 1)
            st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "an MPI launcher started %s processes, but this brisk was built "
                              "without MPI: install libopenmpi-dev (tools/install-deps.sh) and rebuild", n);
    }
    if (st) {
        free(d);
        return st;
    }
    *out = d;
    return BRISK_OK;
}

static brisk_status no_mpi(brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "an MPI communicator was passed, but this brisk was built without "
                        "MPI: install libopenmpi-dev (tools/install-deps.sh) and rebuild");
}
brisk_status brisk_dist_create_comm(brisk_dist **out, const void *mpi_comm, brisk_error *err) {
    (void)mpi_comm;
    *out = NULL;
    return no_mpi(err);
}
brisk_status brisk_dist_create_fortran_comm(brisk_dist **out, int64_t fortran_comm, brisk_error *err) {
    (void)fortran_comm;
    *out = NULL;
    return no_mpi(err);
}
void brisk_dist_free(brisk_dist *d) { free(d); }
brisk_status brisk_dist_mpi_allgather_bytes(brisk_dist *d, const void *mine, void *all, size_t bytes, const char *what,
                                            brisk_error *err) {
    (void)d, (void)what, (void)err;
    memcpy(all, mine, bytes);
    return BRISK_OK;
}
/* world size is 1 without MPI: every collective is the identity */
brisk_status brisk_dist_allreduce_mean(brisk_dist *d, float *x, int64_t n, const brisk_dist_bucket *buckets,
                                       int64_t n_buckets, const char *what, int64_t step, brisk_error *err) {
    (void)d, (void)x, (void)n, (void)buckets, (void)n_buckets, (void)what, (void)step, (void)err;
    return BRISK_OK;
}
brisk_status brisk_dist_allreduce_sum(brisk_dist *d, double *v, int n, const char *what, int64_t step,
                                      brisk_error *err) {
    (void)d, (void)v, (void)n, (void)what, (void)step, (void)err;
    return BRISK_OK;
}
brisk_status brisk_dist_allreduce_max(brisk_dist *d, double *v, int n, const char *what, int64_t step,
                                      brisk_error *err) {
    (void)d, (void)v, (void)n, (void)what, (void)step, (void)err;
    return BRISK_OK;
}
brisk_status brisk_dist_broadcast(brisk_dist *d, void *buf, size_t bytes, const char *what, brisk_error *err) {
    (void)d, (void)buf, (void)bytes, (void)what, (void)err;
    return BRISK_OK;
}
brisk_status brisk_dist_gather(brisk_dist *d, const float *mine, float *all, int64_t n, const char *what, int64_t step,
                               brisk_error *err) {
    (void)d, (void)what, (void)step, (void)err;
    if (all && all != mine) memcpy(all, mine, (size_t)n * sizeof(float));
    return BRISK_OK;
}
brisk_status brisk_dist_reduce_scatter_mean(brisk_dist *d, float *x, int64_t n, const char *what, int64_t step,
                                            brisk_error *err) {
    (void)d, (void)x, (void)n, (void)what, (void)step, (void)err;
    return BRISK_OK;
}
brisk_status brisk_dist_allgather(brisk_dist *d, float *x, int64_t n, const char *what, int64_t step,
                                  brisk_error *err) {
    (void)d, (void)x, (void)n, (void)what, (void)step, (void)err;
    return BRISK_OK;
}
#endif
