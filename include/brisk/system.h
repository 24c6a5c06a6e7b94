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
    int omp_threads;          /* OpenMP's default team size */
    char simd[64];            /* widest vector extension the build uses: "avx512f", "avx2", ... */
    int blas;                 /* 1 if sgemm goes to a CPU BLAS */
    char blas_name[64];
    int cuda_built;           /* the CUDA backend is compiled in */
    int gpu_usable;           /* a GPU can be used by this build now */
    char gpu_reason[256];     /* why not, when !gpu_usable */
    char version[32];
} brisk_system_info;

void brisk_system_probe(brisk_system_info *info);

/* One training step of a small MLP (forward, backward, AdamW) on the GPU and on the CPU
 * from the same weights and batch; *gpu_loss and *cpu_loss are the losses of a forward
 * pass after the step (fp32 without TF32 on the GPU, so they agree to ~1e-6). */
brisk_status brisk_gpu_smoke_test(double *gpu_loss, double *cpu_loss, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
