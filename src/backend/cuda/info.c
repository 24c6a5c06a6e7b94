/* What brisk reports about the GPU: the probe behind `brisk check` (device, versions,
 * precision support, and exactly why there is no GPU), measured rates (bf16 and TF32 GEMM
 * TFLOP/s, device copy GB/s), the backend's one-line description for the run report, and
 * live stats for the progress line. cuDNN, NCCL and NVML are loaded at run time (dlopen),
 * so the binary runs without them; NVML gives utilisation and memory when present. */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/conv_layout.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* NVML's few types, declared here so that no NVML header is needed to build */
typedef struct { unsigned int gpu, memory; } nvml_util_t;
typedef struct { unsigned long long total, free, used; } nvml_mem_t;

/* cuDNN's and NCCL's versions, looked up once per process (loading cuDNN takes tens of
 * milliseconds, and every trainer probes): written once under pthread_once, read-only after. */
static int cudnn_version, nccl_version;
static pthread_once_t versions_once = PTHREAD_ONCE_INIT;

static void load_versions(void) {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        size_t (*ver)(void) = (size_t (*)(void))dlsym(h, "cudnnGetVersion");
        if (ver) cudnn_version = (int)ver();
        dlclose(h);
    }
    h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        int (*ver)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
        int v = 0;
        if (ver && ver(&v) == 0) nccl_version = v;
        dlclose(h);
    }
}

static void lib_versions(brisk_cuda_info *info) {
    pthread_once(&versions_once, load_versions);
    info->cudnn_version = cudnn_version;
    info->nccl_version = nccl_version;
}

void brisk_cuda_probe(int device, brisk_cuda_info *info) {
    memset(info, 0, sizeof *info);
    info->built = 1;
    cudaRuntimeGetVersion(&info->runtime_version);
    lib_versions(info);
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        snprintf(info->reason, sizeof info->reason, "no NVIDIA driver: libcuda.so.1 not found");
        return;
    }
    dlclose(drv);
    cudaDriverGetVersion(&info->driver_version);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        snprintf(info->reason, sizeof info->reason, "the NVIDIA driver supports CUDA %d.%d, older than this build's "
                 "runtime %d.%d", info->driver_version / 1000, info->driver_version % 1000 / 10,
                 info->runtime_version / 1000, info->runtime_version % 1000 / 10);
        return;
    }
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        snprintf(info->reason, sizeof info->reason, "the NVIDIA driver is installed but reports no usable device (%s)",
                 e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
        return;
    }
    info->device_count = n;
    /* loaded only now, a GPU being there (cublaslt_load.h) */
    if (!cuda_lt_missing()) info->cublaslt_version = cuda_lt.cublasLtGetVersion();
    if (device < 0 || device >= n) {
        snprintf(info->reason, sizeof info->reason, "device %d does not exist (%d device%s)", device, n, n == 1 ? "" : "s");
        return;
    }
    struct cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, device)) != cudaSuccess) {
        cudaGetLastError();
        snprintf(info->reason, sizeof info->reason, "cudaGetDeviceProperties failed: %s", cudaGetErrorString(e));
        return;
    }
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major, info->cc_minor = p.minor, info->sms = p.multiProcessorCount;
    info->mem_total = p.totalGlobalMem;
    info->fp16 = p.major > 7 || (p.major == 7 && p.minor >= 5);
    info->bf16 = info->tf32 = p.major >= 8;
    cudaDeviceGetPCIBusId(info->pci_bus_id, sizeof info->pci_bus_id, device);
    size_t free_b = 0, total = 0;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free_b, &total) == cudaSuccess) info->mem_free = free_b;
    cudaGetLastError();
    if (!cuda_cc_supported(p.major, p.minor)) {
        snprintf(info->reason, sizeof info->reason, CUDA_CC_TOO_OLD, p.name, p.major, p.minor);
        return;
    }
    info->usable = 1;
}

/* ---------------------------------------------------------------- measured rates */

static brisk_status time_gemm(cuda_backend *cb, int in_type, int64_t n, double *tflops, brisk_error *err) {
    size_t esz = in_type ? 2 : 4;
    void *a = NULL, *b = NULL;
    float *c = NULL, *tmp = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    brisk_status st = BRISK_OK;
    cudaError_t e;
    if ((e = cudaMalloc(&a, (size_t)(n * n) * esz)) || (e = cudaMalloc(&b, (size_t)(n * n) * esz)) ||
        (e = cudaMalloc((void **)&c, (size_t)(n * n) * 4)) || (e = cudaEventCreate(&e0)) || (e = cudaEventCreate(&e1))) {
        st = cuda_fail(err, e, "cudaMalloc", "GEMM rate measurement");
        goto out;
    }
    /* random operands: normals from the device generator (zeros run faster and lie) */
    tmp = c;
    for (int k = 0; k < 2 && !st; k++) {
        void *dst = k ? b : a;
        e = cuk_random(BRISK_OP_RANDN, NULL, in_type ? (void *)tmp : dst, n * n, 1000u + (uint32_t)k, 0, 1, 0, 0, 0, 0,
                       cb->vals, cb->compute);
        if (!e && in_type) e = cuk_cast_lp(tmp, dst, n * n, in_type == 2, cb->compute);
        if (e) st = cuda_fail(err, e, "cuk_random", "GEMM rate measurement");
    }
    if (st) goto out;
    cuda_gemm_args g = {.ta = 0, .tb = 1, .M = n, .N = n, .K = n, .batch = 1, .A = a, .B = b, .C = c,
                        .in_type = in_type, .epi = EPI_NONE, .what = "GEMM rate measurement"};
    const int runs = 10;
    for (int r = 0; r < 2 && !st; r++) st = cuda_gemm(cb, &g, err);
    if (!st && (e = cudaEventRecord(e0, cb->compute))) st = cuda_fail(err, e, "cudaEventRecord", g.what);
    for (int r = 0; r < runs && !st; r++) st = cuda_gemm(cb, &g, err);
    float ms = 0;
    if (!st && ((e = cudaEventRecord(e1, cb->compute)) || (e = cudaEventSynchronize(e1)) ||
                (e = cudaEventElapsedTime(&ms, e0, e1))))
        st = cuda_fail(err, e, "cudaEventElapsedTime", g.what);
    if (!st) *tflops = 2.0 * (double)n * n * n * runs / (ms * 1e-3) / 1e12;
out:
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return st;
}

static brisk_status time_copy(cuda_backend *cb, double *gbs, brisk_error *err) {
    size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    brisk_status st = BRISK_OK;
    cudaError_t e;
    float ms = 0;
    if ((e = cudaMalloc(&a, bytes)) || (e = cudaMalloc(&b, bytes)) || (e = cudaEventCreate(&e0)) ||
        (e = cudaEventCreate(&e1)) || (e = cudaMemsetAsync(a, 1, bytes, cb->compute)) ||
        (e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, cb->compute)) ||
        (e = cudaEventRecord(e0, cb->compute)))
        st = cuda_fail(err, e, "cudaMalloc/cudaMemcpyAsync", "copy rate measurement");
    for (int r = 0; r < 5 && !st; r++)
        if ((e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, cb->compute)))
            st = cuda_fail(err, e, "cudaMemcpyAsync", "copy rate measurement");
    if (!st && ((e = cudaEventRecord(e1, cb->compute)) || (e = cudaEventSynchronize(e1)) ||
                (e = cudaEventElapsedTime(&ms, e0, e1))))
        st = cuda_fail(err, e, "cudaEventElapsedTime", "copy rate measurement");
    if (!st) *gbs = 2.0 * (double)bytes * 5 / (ms * 1e-3) / 1e9; /* read + write */
    cudaFree(a);
    cudaFree(b);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return st;
}

brisk_status brisk_cuda_measure(int device, brisk_cuda_rates *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    brisk_cuda_options o;
    brisk_cuda_options_default(&o);
    o.device = device;
    o.autotune = 0;
    snprintf(o.autotune_cache, sizeof o.autotune_cache, "-");
    brisk_backend *be;
    brisk_status st = brisk_backend_cuda_create(&o, &be, err);
    if (st) return st;
    cuda_backend *cb = be->impl;
    if (cb->cc_major >= 8) {
        if (!(st = time_gemm(cb, 1, 8192, &out->bf16_tflops, err)))
            st = time_gemm(cb, 0, 8192, &out->tf32_tflops, err);
    }
    if (!st) st = time_copy(cb, &out->copy_gbs, err);
    be->destroy(be);
    return st;
}

/* ---------------------------------------------------------------- NVML, stats, describe */

static void nvml_open(cuda_backend *cb) {
    if (cb->nvml_lib) return;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        cb->nvml_lib = (void *)1; /* tried */
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*by_bus)(const char *, void **) = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    char bus[32] = "";
    void *dev = NULL;
    cudaDeviceGetPCIBusId(bus, sizeof bus, cb->opt.device);
    if (!init || !by_bus || init() != 0 || by_bus(bus, &dev) != 0) {
        dlclose(h);
        cb->nvml_lib = (void *)1;
        return;
    }
    cb->nvml_lib = h;
    cb->nvml_dev = dev;
    cb->nvml_util = (int (*)(void *, void *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    cb->nvml_mem = (int (*)(void *, void *))dlsym(h, "nvmlDeviceGetMemoryInfo");
}

void cuda_nvml_close(cuda_backend *cb) {
    if (cb->nvml_lib && cb->nvml_lib != (void *)1) {
        int (*shutdown)(void) = (int (*)(void))dlsym(cb->nvml_lib, "nvmlShutdown");
        if (shutdown) shutdown();
        dlclose(cb->nvml_lib);
    }
    cb->nvml_lib = NULL;
}

static brisk_status cu_stats(brisk_backend *be, brisk_backend_stats *out, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    memset(out, 0, sizeof *out);
    out->util_percent = -1;
    out->copy_s = cb->copy_s;
    if (cb->capturing) return BRISK_OK;
    cuda_optim_state s;
    CU(cudaMemcpyAsync(&s, cb->ostate, sizeof s, cudaMemcpyDeviceToHost, cb->compute), "reading the loss scaler");
    CU(cudaStreamSynchronize(cb->compute), "reading the loss scaler");
    out->skipped_steps = s.skipped;
    out->loss_scale = s.scaler ? s.scale : 0.0f;
    nvml_open(cb);
    nvml_util_t u;
    nvml_mem_t m;
    if (cb->nvml_util && cb->nvml_util(cb->nvml_dev, &u) == 0) out->util_percent = (int)u.gpu;
    size_t free_b = 0, total = 0;
    CU(cudaMemGetInfo(&free_b, &total), "reading the free GPU memory");
    out->mem_free = free_b;
    out->mem_used = total - free_b, out->mem_total = total;
    if (cb->nvml_mem && cb->nvml_mem(cb->nvml_dev, &m) == 0) {
        out->mem_used = (size_t)m.used;
        out->mem_total = (size_t)m.total;
    }
    return BRISK_OK;
}

static void cu_describe(brisk_backend *be, char *buf, size_t n) {
    cuda_backend *cb = be->impl;
    static const char *ops[] = {"fp32 (TF32 off: --no-tf32)", "TF32 tensor cores", "bf16 operands, fp32 accumulate",
                                "fp16 operands, fp32 accumulate, dynamic loss scaling"};
    char tune[1300], fusion[96];
    int active = 0, decomposed = 0;
    cuda_prep_fusions(cb, &active, &decomposed);
    if (!cb->opt.fuse) snprintf(fusion, sizeof fusion, "off");
    else if (decomposed) snprintf(fusion, sizeof fusion, "on (%d GEMMs fused, %d decomposed)", active, decomposed);
    else snprintf(fusion, sizeof fusion, "on (%d GEMMs)", active);
    if (cb->opt.deterministic) snprintf(tune, sizeof tune, "off (--deterministic: the heuristic's first choice)");
    else if (!cb->opt.autotune) snprintf(tune, sizeof tune, "off (--no-autotune: the heuristic's first choice)");
    else snprintf(tune, sizeof tune, "on, cache %s", cb->cache_path[0] ? cb->cache_path : "none");
    snprintf(buf, n,
             "%s (cc %d.%d, %d SMs, %.1f GiB), driver %d.%d, runtime %d.%d, cuBLASLt %zu.%zu.%zu; GEMM %s; "
             "epilogue fusion %s; autotune %s; deterministic %s",
             cb->name, cb->cc_major, cb->cc_minor, cb->sms, cb->mem_total / 1073741824.0, cb->driver_version / 1000,
             cb->driver_version % 1000 / 10, cb->runtime_version / 1000, cb->runtime_version % 1000 / 10,
             cb->lt_version / 10000, cb->lt_version % 10000 / 100, cb->lt_version % 100, ops[cb->opt.precision], fusion, tune,
             cb->opt.deterministic ? "on (no split-K, no atomics, no timing-based choices)" : "off");
    size_t used = strlen(buf);
    if (used < n) snprintf(buf + used, n - used, "; residual adds fused with layernorm: %d", cuda_prep_norm_fusions(cb));
    int nchw, nhwc;
    cuda_conv_layouts(cb, &nchw, &nhwc);
    used = strlen(buf);
    if (nchw + nhwc && used < n) /* the per-node choices and why: the log's "runs in" lines */
        snprintf(buf + used, n - used, "; convolutions (speed.conv_layout %s): %d passes in NCHW, %d in NHWC",
                 conv_layout_name(cb->opt.conv_layout), nchw, nhwc);
}

void cuda_info_install(brisk_backend *be) {
    be->stats = cu_stats;
    be->describe = cu_describe;
}
