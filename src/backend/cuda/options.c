/* The CUDA backend's options, shared by the real backend and the CPU-only stub (no CUDA
 * header here): defaults, names, and BRISK_CUDA_REFUSE_EPILOGUES, the switch that makes
 * every planned cuBLASLt epilogue fusion run decomposed (GEMM, then bias/activation
 * kernels) so the fallback paths run on a GPU too (tools/gpu-session.sh runs the CUDA
 * tests once with it set to "all"). */
#include "brisk/cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *brisk_gemm_precision_name(brisk_gemm_precision p) {
    static const char *names[] = {"fp32", "tf32", "bf16", "fp16"};
    return (unsigned)p < 4 ? names[p] : "?";
}

void brisk_cuda_options_default(brisk_cuda_options *o) {
    memset(o, 0, sizeof *o);
    o->precision = BRISK_GEMM_TF32;
    o->autotune = 1;
    o->fuse = 1;
}

static const struct {
    const char *name;
    unsigned bit;
} epilogues[] = {
    {"bias", BRISK_CUDA_EPI_BIAS},
    {"relu_bias", BRISK_CUDA_EPI_RELU_BIAS},
    {"gelu_aux_bias", BRISK_CUDA_EPI_GELU_AUX_BIAS},
    {"dgelu_bgrad", BRISK_CUDA_EPI_DGELU_BGRAD},
    {"all", BRISK_CUDA_EPI_ALL},
    {"none", 0},
};

brisk_status brisk_cuda_parse_refused_epilogues(const char *spec, unsigned *mask, brisk_error *err) {
    *mask = 0;
    if (!spec) return BRISK_OK;
    const char *p = spec;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = 0;
        for (size_t i = 0; i < sizeof epilogues / sizeof epilogues[0] && !found; i++)
            if (n == strlen(epilogues[i].name) && strncmp(p, epilogues[i].name, n) == 0) {
                *mask |= epilogues[i].bit;
                found = 1;
            }
        if (!found && n > 0) {
            *mask = 0;
            return brisk_errorf(err, BRISK_ERR_INVALID, BRISK_CUDA_REFUSE_ENV " is \"%s\": \"%.*s\" is not one of "
                                "bias, relu_bias, gelu_aux_bias, dgelu_bgrad, all, none (comma-separated)", spec,
                                (int)n, p);
        }
        p += n;
        if (*p == ',') p++;
    }
    return BRISK_OK;
}
