/* dist: data-parallel training over MPI (DESIGN.md, "Distributed"). One process per GPU or
 * per CPU share; rank, world size and local rank come from MPI when brisk runs under an MPI
 * launcher (mpirun, srun --mpi=pmix), else from SLURM's (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_LOCALID) or torchrun's (RANK, WORLD_SIZE, LOCAL_RANK) environment. The transport is
 * always MPI (a build without it refuses a world size above 1, naming where the size came
 * from); brisk invents none. At world size 1 no collective is ever issued.
 *
 * Every collective is non-blocking underneath and waited for with a deadline (timeout_s): a
 * rank that died or hangs is named in the error (each rank tells rank 0, and rank 0 tells
 * every rank, that it reached a collective, so a timeout knows who did not). After a
 * timeout the group is broken: later collectives fail at once and brisk_dist_free aborts
 * the MPI job (MPI_Finalize would wait for the dead rank forever). */
#ifndef BRISK_DIST_H
#define BRISK_DIST_H

#include <stdint.h>

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brisk_dist brisk_dist;
typedef struct brisk_dist_bucket {
    int64_t offset, count; /* floats */
} brisk_dist_bucket;

/* Default bucket of the gradient all-reduce: 64 KiB, the fastest of 16 KiB .. 16 MiB for
 * arenas of 0.75 to 45 MiB with Open MPI on this project's 2-core machine (bench/DIST_NOTES.md;
 * provisional: a shared machine). */
#define BRISK_DIST_BUCKET_BYTES_DEFAULT ((int64_t)64 << 10)
#define BRISK_DIST_TIMEOUT_DEFAULT 300.0

/* Whether this build has MPI. */
int brisk_dist_have_mpi(void);
/* The process group of this process, from MPI or the environment (see above); initialises
 * MPI when an MPI launcher started this process (and finalises it in brisk_dist_free). */
brisk_status brisk_dist_create(brisk_dist **out, brisk_error *err);
/* The group of a host program's communicator: mpi_comm points to its MPI_Comm (C), which
 * brisk duplicates (its traffic never mixes with the host's); MPI stays the host's. */
brisk_status brisk_dist_create_comm(brisk_dist **out, const void *mpi_comm, brisk_error *err);
/* The same from a Fortran handle (MPI_Comm_f2c). */
brisk_status brisk_dist_create_fortran_comm(brisk_dist **out, int64_t fortran_comm, brisk_error *err);
void brisk_dist_free(brisk_dist *d);
/* This rank gives up (an error the others may not share): brisk_dist_free then ends the MPI
 * job, when brisk started MPI, instead of waiting in MPI_Finalize for ranks that would wait
 * for this one until their collective timeout. Not after an error every rank returned from
 * the same collective (ranks that disagree, brisk_dist_agreement_check): no rank waits for
 * another, and MPI_Finalize meets them all. */
void brisk_dist_abandon(brisk_dist *d);
/* Whether a collective of this group failed or timed out (0 for NULL). */
int brisk_dist_failed(const brisk_dist *d);

int brisk_dist_rank(const brisk_dist *d);
int brisk_dist_world(const brisk_dist *d);
int brisk_dist_local_rank(const brisk_dist *d);
/* "MPI (mpirun)", "MPI (srun)", "SLURM environment", "single process", ... */
const char *brisk_dist_source(const brisk_dist *d);
/* What started this process's MPI job, by the variables each sets: "mpirun" (Open MPI's, also
 * inside a SLURM job), "mpiexec" (MPICH's or Intel MPI's Hydra), "srun" (a SLURM job step that
 * launched the ranks itself), else "an MPI launcher". */
const char *brisk_dist_launcher(void);
/* This process's rank as its launcher's variables give it before any MPI call (Open MPI's,
 * Hydra's PMI_RANK, SLURM_PROCID), and the world size into *world; -1 (world 1) when none says. */
int brisk_dist_env_rank(int *world);
void brisk_dist_set_timeout(brisk_dist *d, double seconds);
void brisk_dist_set_bucket_bytes(brisk_dist *d, int64_t bytes);
int64_t brisk_dist_bucket_bytes(const brisk_dist *d);
/* Collectives this group has issued, and the bytes they reduced (0 at world size 1). */
int64_t brisk_dist_collectives(const brisk_dist *d);
int64_t brisk_dist_bytes(const brisk_dist *d);
/* Seconds spent waiting in collectives. */
double brisk_dist_wait_seconds(const brisk_dist *d);

/* x[0..n) averaged over the ranks, bucket by bucket (buckets from brisk_dist_plan_buckets;
 * NULL: consecutive chunks of bucket_bytes), all buckets in flight at once. `what` and
 * `step` name the collective in a timeout's message.
 * The sized collectives (this one, the overlap, reduce-scatter, all-gather, gather) check
 * their sizes: the first call with an n and buckets this rank has not used before agrees
 * them with the other ranks (brisk_dist_agreement_check), so ranks with other sizes get an
 * error naming them instead of a collective that writes past the smaller buffer. (A rank
 * that reuses sizes agreed before while another brings new ones goes on to its collective;
 * the other's agreement, on a communicator of its own, then fails after timeout_s.) */
brisk_status brisk_dist_allreduce_mean(brisk_dist *d, float *x, int64_t n, const brisk_dist_bucket *buckets,
                                       int64_t n_buckets, const char *what, int64_t step, brisk_error *err);
/* v[0..n) summed over the ranks (small agreements: losses, stop flags). */
brisk_status brisk_dist_allreduce_sum(brisk_dist *d, double *v, int n, const char *what, int64_t step,
                                      brisk_error *err);
/* Rank 0's bytes copied to every rank (a device library's connection id). */
brisk_status brisk_dist_broadcast(brisk_dist *d, void *buf, size_t bytes, const char *what, brisk_error *err);
/* The local rank an MPI launcher or SLURM gives this process (OMPI_COMM_WORLD_LOCAL_RANK,
 * MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK), before any group exists: which GPU it binds
 * to. 0 when none is set. */
int brisk_dist_env_local_rank(void);
/* v[0..n) replaced by its maximum over the ranks. */
brisk_status brisk_dist_allreduce_max(brisk_dist *d, double *v, int n, const char *what, int64_t step,
                                      brisk_error *err);
/* ZeRO-1: rank r's shard of x (brisk_dist_shard) averaged over the ranks into x's shard; the
 * rest of x is left as it was. */
brisk_status brisk_dist_reduce_scatter_mean(brisk_dist *d, float *x, int64_t n, const char *what, int64_t step,
                                            brisk_error *err);
/* Every rank's shard of x copied to every rank. */
brisk_status brisk_dist_allgather(brisk_dist *d, float *x, int64_t n, const char *what, int64_t step,
                                  brisk_error *err);

/* Every rank's shard (mine: this rank's brisk_dist_shard of n) into all[0..n) on rank 0
 * (all may be NULL elsewhere). */
brisk_status brisk_dist_gather(brisk_dist *d, const float *mine, float *all, int64_t n, const char *what, int64_t step,
                               brisk_error *err);

/* The gradient all-reduce overlapped with backward (CPU, MPI): a communication thread,
 * created once, that all-reduces bucket after bucket of x (buckets in the order backward
 * completes them: brisk_exec_set_grad_hook) as soon as each is ready, with the same calls
 * as brisk_dist_allreduce_mean, so the result is the same bits. Between begin and end only
 * that thread calls MPI (MPI_THREAD_SERIALIZED); brisk_dist_can_overlap says whether MPI
 * granted that level. */
typedef struct brisk_dist_overlap brisk_dist_overlap;
int brisk_dist_can_overlap(const brisk_dist *d);
brisk_status brisk_dist_overlap_create(brisk_dist *d, float *x, int64_t n, const brisk_dist_bucket *buckets,
                                       int64_t n_buckets, brisk_dist_overlap **out, brisk_error *err);
void brisk_dist_overlap_free(brisk_dist_overlap *o);
/* A step's all-reduce begins: the thread waits for buckets to become ready. */
void brisk_dist_overlap_begin(brisk_dist_overlap *o, const char *what, int64_t step);
/* The first k buckets (in create's order) are final (any thread; k only grows within a step). */
void brisk_dist_overlap_ready(brisk_dist_overlap *o, int64_t k);
/* Waits for every bucket, then averages x (x / world); *reduced = 1 when this step's all-
 * reduce ran (0: no begin since the last end). cancel: backward failed; only the buckets
 * already started are waited for and x is left as it is. */
brisk_status brisk_dist_overlap_end(brisk_dist_overlap *o, int cancel, int *reduced, brisk_error *err);
/* Seconds the last step's backward ran with all-reduces in flight, and its total, for the
 * overlap fraction (the thread's view; 0 before a step). */
void brisk_dist_overlap_times(const brisk_dist_overlap *o, double *comm_s, double *hidden_s);

/* What the ranks must hold alike (a run's resolved config, its data, its parameter layout, its
 * position), as entries of a key, a value and a note that is shown but not compared (the file
 * a value came from). Every rank gathers every rank's digest of its entries (a fixed record,
 * order aside) and, only when they differ, the entries themselves, so that every rank finds
 * the same first difference and returns the same error: "ranks disagree on optim.lr: rank 0
 * has 0.001, rank 1 has 0.002" (key, the lowest rank that differs from rank 0, both values).
 * On the group's own communicator, so never matched with a data collective. */
typedef struct brisk_dist_agreement {
    char *text; /* "key\tvalue\tnote\n" per entry (tabs and newlines in them become spaces) */
    size_t len, cap;
    int oom;    /* an entry did not fit in memory: checking fails on this rank */
} brisk_dist_agreement;
void brisk_dist_agreement_add(brisk_dist_agreement *a, const char *key, const char *note, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* BRISK_ERR_INVALID on every rank when any two differ; `what` names the collective in a
 * timeout's message. One process: BRISK_OK at once. */
brisk_status brisk_dist_agreement_check(brisk_dist *d, const brisk_dist_agreement *a, const char *what,
                                        brisk_error *err);
void brisk_dist_agreement_free(brisk_dist_agreement *a);

/* The shard of n elements that rank owns: contiguous, sizes differing by at most one. */
void brisk_dist_shard(int64_t n, int world, int rank, int64_t *offset, int64_t *count);
/* Every rank's shard at once: bounds[r] = rank r's offset, bounds[world] = n. */
void brisk_dist_shard_bounds(int64_t n, int world, int64_t *bounds);

/* Buckets over an arena of tensors (offsets and sizes in floats, in arena order): from the
 * last tensor backwards (the order backward produces gradients), each bucket closed at a
 * tensor boundary once it holds at least bucket_bytes; one that holds two buckets or more
 * (a large tensor) is cut into pieces of bucket_bytes, from its end.
 * Writes up to cap buckets, returns how many there are. */
int64_t brisk_dist_plan_buckets(const int64_t *offsets, const int64_t *sizes, int n_tensors, int64_t bucket_bytes,
                                brisk_dist_bucket *out, int64_t cap);

#ifdef __cplusplus
}
#endif
#endif
