/* Probing the machine for `brisk check` and the run report. The GPU probe loads the
 * driver library at run time, so the binary never needs it to start. */
#include "brisk/cuda.h"
#include "brisk/system.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *v = strchr(line, ':');
            if (v) {
                v += 1 + (v[1] == ' ');
                v[strcspn(v, "\n")] = 0;
                snprintf(out, n, "%s", v);
            }
            break;
        }
    }
    fclose(f);
}

/* The CUDA module's probe (in a CPU-only build its stub still looks for the driver, so the
 * message says what a CUDA build would find). */
static void gpu_probe(brisk_system_info *info) {
    brisk_cuda_info ci;
    brisk_cuda_probe(0, &ci);
    info->cuda_built = ci.built;
    info->gpu_usable = ci.built && ci.usable;
    snprintf(info->gpu_reason, sizeof info->gpu_reason, "%s", info->gpu_usable ? "" : ci.reason);
}

void brisk_system_probe(brisk_system_info *info) {
    memset(info, 0, sizeof *info);
    cpu_model(info->cpu_model, sizeof info->cpu_model);
    info->cpu_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    brisk_thread_plan tp;
    brisk_threads_resolve(0, NULL, &tp);
    info->default_threads = tp.threads;
    snprintf(info->threads_source, sizeof info->threads_source, "%s", tp.source);
#if defined(__AVX512F__)
    snprintf(info->simd, sizeof info->simd, "avx512f");
#elif defined(__AVX2__)
    snprintf(info->simd, sizeof info->simd, "avx2");
#elif defined(__SSE2__)
    snprintf(info->simd, sizeof info->simd, "sse2");
#else
    snprintf(info->simd, sizeof info->simd, "none");
#endif
#if BRISK_HAVE_BLAS
    info->blas = 1;
    snprintf(info->blas_name, sizeof info->blas_name, "OpenBLAS");
#else
    snprintf(info->blas_name, sizeof info->blas_name, "none (brisk's own sgemm)");
#endif
    snprintf(info->version, sizeof info->version, "%s", BRISK_VERSION);
    gpu_probe(info);
}
