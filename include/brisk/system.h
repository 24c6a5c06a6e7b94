/* What brisk sees of the machine: CPU, threads, BLAS, and whether a GPU could be used
 * (and exactly why not). Used by `brisk check` and the run report. */
#ifndef BRISK_SYSTEM_H
#define BRISK_SYSTEM_H

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brisk_system_info {
    char cpu_model[128];
    int cpu_cores;            /* online processors */
    int default_threads;      /* brisk's default thread count (brisk_threads_resolve) */
    char threads_source[192]; /* where that number came from */
    char simd[64];            /* widest vector extension the build uses: "avx512f", "avx2", ... */
    int blas;                 /* 1 if sgemm goes to a CPU BLAS */
    char blas_name[64];
    int cuda_built;           /* the CUDA backend is compiled in */
    int gpu_usable;           /* a GPU can be used by this build now */
    char gpu_reason[256];     /* why not, when !gpu_usable */
    char version[32];
} brisk_system_info;

void brisk_system_probe(brisk_system_info *info);

/* How many CPU threads brisk uses, and why. In order: an explicit count (requested > 0:
 * --threads, speed.threads, the API's threads option; `requested_by` names it), then
 * OMP_NUM_THREADS, then SLURM_CPUS_PER_TASK, else the CPUs this process may use (its
 * affinity mask, capped by a cgroup CPU quota), divided among the ranks of an MPI or
 * SLURM job on this node when the ranks are not bound to CPUs of their own (local size
 * from OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or SLURM_NTASKS_PER_NODE /
 * SLURM_TASKS_PER_NODE). */
typedef struct brisk_thread_plan {
    int threads;            /* what brisk uses, >= 1 */
    int usable_cpus;        /* CPUs this process may use (affinity mask and cgroup quota) */
    int online_cpus;        /* CPUs online on the machine */
    int local_ranks;        /* processes of this job on this node (1 outside MPI/SLURM) */
    char source[192];       /* where the number came from, in words, for the run report */
    char warning[256];      /* "" or why the count is likely too high (more threads than CPUs) */
} brisk_thread_plan;

void brisk_threads_resolve(int requested, const char *requested_by, brisk_thread_plan *plan);

/* One training step of a small MLP (forward, backward, AdamW) on the GPU and on the CPU
 * from the same weights and batch; *gpu_loss and *cpu_loss are the losses of a forward
 * pass after the step (fp32 without TF32 on the GPU, so they agree to ~1e-6). */
brisk_status brisk_gpu_smoke_test(double *gpu_loss, double *cpu_loss, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
