/* Probing the machine for `brisk check` and the run report. The GPU probe loads the
 * driver library at run time, so the binary never needs it to start. */
#include "brisk/system.h"

#include <dlfcn.h>
#include <omp.h>
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

static void gpu_probe(brisk_system_info *info) {
    info->cuda_built = 0;
    info->gpu_usable = 0;
    /* The driver is what tells us whether a device exists; look for it even in a CPU-only
     * build, so the message says what a CUDA build would find. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(info->gpu_reason, sizeof info->gpu_reason,
                 "no NVIDIA driver: libcuda.so.1 not found (CPU-only build as well)");
        return;
    }
    typedef int (*init_fn)(unsigned);
    typedef int (*count_fn)(int *);
    init_fn cu_init = (init_fn)dlsym(h, "cuInit");
    count_fn cu_count = (count_fn)dlsym(h, "cuDeviceGetCount");
    int n = 0;
    if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&n) != 0 || n == 0)
        snprintf(info->gpu_reason, sizeof info->gpu_reason, "NVIDIA driver found but no usable device");
    else
        snprintf(info->gpu_reason, sizeof info->gpu_reason,
                 "%d NVIDIA device(s) present, but this build has no CUDA backend", n);
    dlclose(h);
}

void brisk_system_probe(brisk_system_info *info) {
    memset(info, 0, sizeof *info);
    cpu_model(info->cpu_model, sizeof info->cpu_model);
    info->cpu_cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    info->omp_threads = omp_get_max_threads();
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
