/* brisk check: what hardware and libraries brisk sees, and why there is no GPU. On a GPU:
 * the device, versions, precision support, measured GEMM and copy rates, and a one-step
 * training smoke test against the CPU. */
#include <stdio.h>
#include <string.h>

#include "brisk/cuda.h"
#include "cli/cli.h"

static void version(char *buf, size_t n, int v, int major_div) {
    if (v <= 0) snprintf(buf, n, "not found");
    else snprintf(buf, n, "%d.%d", v / major_div, v % major_div / (major_div / 100));
}

static void gpu_report(int measure, int smoke, int *smoke_failed) {
    brisk_cuda_info gi;
    brisk_cuda_probe(0, &gi);
    char cudnn[32], nccl[32];
    if (gi.cudnn_version > 0)
        snprintf(cudnn, sizeof cudnn, "%d.%d.%d", gi.cudnn_version / 10000, gi.cudnn_version % 10000 / 100,
                 gi.cudnn_version % 100);
    else snprintf(cudnn, sizeof cudnn, "not found");
    if (gi.nccl_version > 0)
        snprintf(nccl, sizeof nccl, "%d.%d.%d", gi.nccl_version / 10000, gi.nccl_version % 10000 / 100,
                 gi.nccl_version % 100);
    else snprintf(nccl, sizeof nccl, "not found");
    if (!gi.built) {
        printf("cuda      not built (CPU-only build)\n");
        printf("gpu       %s\n", gi.reason);
        return;
    }
    char rt[32], drv[32];
    version(rt, sizeof rt, gi.runtime_version, 1000);
    version(drv, sizeof drv, gi.driver_version, 1000);
    size_t lt = gi.cublaslt_version;
    char ltv[48] = "loaded when a GPU is used";
    if (lt) snprintf(ltv, sizeof ltv, "%zu.%zu.%zu", lt / 10000, lt % 10000 / 100, lt % 100);
    printf("cuda      backend built: runtime %s, driver %s, cuBLASLt %s, cuDNN %s, NCCL %s\n", rt, drv, ltv, cudnn, nccl);
    if (!gi.usable) {
        printf("gpu       %s\n", gi.reason);
        return;
    }
    printf("gpu       %s: compute capability %d.%d, %d SMs, %.1f GiB (%.1f GiB free), PCI %s%s\n", gi.name, gi.cc_major,
           gi.cc_minor, gi.sms, gi.mem_total / 1073741824.0, gi.mem_free / 1073741824.0, gi.pci_bus_id,
           gi.device_count > 1 ? " (device 0 of several)" : "");
    printf("precision bf16 %s, TF32 %s, fp16 %s; training default: %s\n", gi.bf16 ? "yes" : "no", gi.tf32 ? "yes" : "no",
           gi.fp16 ? "yes" : "no", gi.bf16 ? "bf16 GEMM operands, fp32 master weights" : "fp16 with loss scaling");
    brisk_error err = {0};
    if (measure) {
        brisk_cuda_rates r;
        if (brisk_cuda_measure(0, &r, &err)) printf("rates     measurement failed: %s\n", err.msg);
        else
            printf("rates     bf16 GEMM %.0f TFLOP/s, TF32 GEMM %.0f TFLOP/s (8192^3, random data), device copy %.0f GB/s\n",
                   r.bf16_tflops, r.tf32_tflops, r.copy_gbs);
    }
    if (smoke) {
        double g = 0, c = 0;
        if (brisk_gpu_smoke_test(&g, &c, &err)) {
            printf("smoke     one training step on the GPU FAILED: %s\n", err.msg);
            *smoke_failed = 1;
        } else {
            printf("smoke     one training step on the GPU: loss after the step %.6f (CPU %.6f), ok\n", g, c);
        }
    }
}

int cmd_check(int argc, char **argv) {
    int require_gpu = 0, measure = 1, smoke = 1, smoke_failed = 0;
    static const cli_opt opts[] = {{"--require-gpu", 0}, {"--quick", 0}, {NULL, 0}};
    cli_parser p = {"check", opts, argc, argv, 0, 0};
    const char *name, *v;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) {
            cli_help("usage: brisk check [--require-gpu] [--quick]\n\n"
                 "Prints the CPU, threads, vector extensions, BLAS and GPU status brisk sees. On a GPU also\n"
                 "the versions of CUDA, cuBLASLt, cuDNN and NCCL, measured bf16/TF32 GEMM and copy rates, and a\n"
                 "one-step training smoke test against the CPU.\n"
                 "  --require-gpu   exit with status 3 when no GPU can be used\n"
                 "  --quick         skip the rate measurements and the smoke test\n");
            return 0;
        }
        if (k == CLI_POS) return cli_usage("check", "unexpected argument '%s'", v);
        if (k == 0) require_gpu = 1;
        else measure = smoke = 0;
    }
    brisk_system_info s;
    brisk_system_probe(&s);
    printf("brisk %s\n", s.version);
    printf("cpu       %s, %d cores, %d thread%s by default (%s), %s\n", s.cpu_model, s.cpu_cores, s.default_threads,
           s.default_threads == 1 ? "" : "s", s.threads_source, s.simd);
    printf("blas      %s\n", s.blas_name);
    gpu_report(measure, smoke, &smoke_failed);
    printf("device    training runs on the %s\n", s.gpu_usable ? "GPU" : "CPU");
    fflush(stdout);
    if (require_gpu && !s.gpu_usable) {
        cli_fail("check: --require-gpu: %s", s.gpu_reason);
        return 3;
    }
    return smoke_failed ? 1 : 0;
}
