/* The process group's state, shared by group.c (environment, arithmetic) and mpi.c (transport). */
#ifndef BRISK_DIST_INTERNAL_H
#define BRISK_DIST_INTERNAL_H

#include <stdio.h>

#include "brisk/dist.h"

struct brisk_dist_mpi; /* mpi.c: the communicator and the arrival messages */

struct brisk_dist {
    int rank, world, local_rank;
    char source[64];
    double timeout_s;
    int64_t bucket_bytes;
    int broken;          /* a collective timed out or failed: no further one is issued */
    int64_t collectives, bytes;
    double wait_s;
    int thread_serialized; /* MPI's thread level lets another thread call it (SERIALIZED or more) */
    int failed_together; /* the last collective failed alike on every rank (agree.c): nobody waits */
    /* agree.c: signatures of the sizes of sized collectives the ranks agreed on, newest last */
    uint64_t agreed_sizes[4];
    int n_agreed_sizes;
    struct brisk_dist_mpi *mpi; /* NULL: no MPI (world size 1) */
};

/* group.c: whether an MPI launcher started this process (its environment variables) */
int brisk_dist_mpi_launched(void);
/* group.c: rank and world size from SLURM's or torchrun's environment, else a single
 * process; a world size above 1 is an error here (it needs MPI, which mpi.c handles). */
brisk_status brisk_dist_from_env(brisk_dist *d, brisk_error *err);

/* mpi.c, for overlap.c's communication thread (MPI builds only): every bucket of the gradient
 * all-reduce goes through the same calls, overlapped or not. requests point at MPI_Requests. */
brisk_status brisk_dist_mpi_arrive(brisk_dist *d, const char *what, int64_t step, brisk_error *err);
brisk_status brisk_dist_mpi_bucket_sum(brisk_dist *d, float *x, int64_t count, void *request, brisk_error *err);
/* patient: sleep between polls from the start (while backward needs the cores) */
brisk_status brisk_dist_mpi_wait(brisk_dist *d, void *requests, int n, const char *what, int64_t step, int patient,
                                 brisk_error *err);
size_t brisk_dist_mpi_request_size(void);
/* Every rank's `bytes` bytes of mine into all, in rank order, on the group's communicator for
 * agreements (a duplicate: an agreement one rank skips cannot match another's data collective) */
brisk_status brisk_dist_mpi_allgather_bytes(brisk_dist *d, const void *mine, void *all, size_t bytes, const char *what,
                                            brisk_error *err);
/* agree.c: the sizes of a collective over n floats: buckets b[0..nb), else chunks of `per`
 * floats, else (per 0) the ranks' shards; agreed with the other ranks when this rank first
 * uses them, and checked to lie within n. */
brisk_status brisk_dist_check_sizes(brisk_dist *d, const char *what, int64_t n, const brisk_dist_bucket *b, int64_t nb,
                                    int64_t per, brisk_error *err);
void brisk_dist_scale(float *x, int64_t n, float s);

#endif
