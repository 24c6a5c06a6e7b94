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
    struct brisk_dist_mpi *mpi; /* NULL: no MPI (world size 1) */
};

/* group.c: whether an MPI launcher started this process (its environment variables) */
int brisk_dist_mpi_launched(void);
/* group.c: rank and world size from SLURM's or torchrun's environment, else a single
 * process; a world size above 1 is an error here (it needs MPI, which mpi.c handles). */
brisk_status brisk_dist_from_env(brisk_dist *d, brisk_error *err);

#endif
