/* include/brisk/cuda.h in a build without the CUDA backend (no nvcc, or -DBRISK_CUDA=OFF):
 * the same functions, each saying why there is no GPU. The probe still looks for the
 * driver, so `brisk check` can tell "no GPU here" from "a GPU, but a CPU-only build". */
#include "brisk/cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CPU_ONLY "this is a CPU-only build (nvcc was not found, or -DBRISK_CUDA=OFF)"

brisk_status brisk_backend_cuda_create(const brisk_cuda_options *o, brisk_backend **out, brisk_error *err) {
    (void)o;
    *out = NULL;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "no CUDA backend: %s", CPU_ONLY);
}

void brisk_cuda_probe(int device, brisk_cuda_info *info) {
    (void)device;
    memset(info, 0, sizeof *info);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(info->reason, sizeof info->reason, "no NVIDIA driver (libcuda.so.1 not found), and %s", CPU_ONLY);
        return;
    }
    typedef int (*init_fn)(unsigned);
    typedef int (*count_fn)(int *);
    init_fn cu_init = (init_fn)dlsym(h, "cuInit");
    count_fn cu_count = (count_fn)dlsym(h, "cuDeviceGetCount");
    int n = 0;
    if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&n) != 0 || n == 0)
        snprintf(info->reason, sizeof info->reason, "the NVIDIA driver reports no usable device, and %s", CPU_ONLY);
    else
        snprintf(info->reason, sizeof info->reason, "%d NVIDIA device(s) present, but %s", n, CPU_ONLY);
    info->device_count = n;
    dlclose(h);
}

brisk_status brisk_cuda_measure(int device, brisk_cuda_rates *out, brisk_error *err) {
    (void)device;
    memset(out, 0, sizeof *out);
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "no CUDA backend: %s", CPU_ONLY);
}

int brisk_cuda_op_supported(const brisk_node *node, char *why, size_t why_size) {
    (void)node;
    if (why && why_size) snprintf(why, why_size, "built without CUDA");
    return 0;
}

int brisk_cuda_program_kernels(brisk_backend *be, int program) {
    (void)be, (void)program;
    return -1;
}

brisk_status brisk_cuda_launch_floor(brisk_backend *be, int kernels, double *ms, brisk_error *err) {
    (void)be, (void)kernels;
    *ms = 0;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "no CUDA backend: %s", CPU_ONLY);
}
