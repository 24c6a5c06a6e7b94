/* backend/cuda: the CUDA backend (kernels for every op, cuBLASLt GEMMs with cached and
 * autotuned plans, mixed precision, the fused optimizer with a device-side loss scaler,
 * CUDA graphs, pinned memory and a copy stream), and what `brisk check` reports about the
 * GPU. C-callable only: no CUDA type appears here, so every module builds without the
 * CUDA headers. In a build without nvcc these functions exist and say why there is no GPU. */
#ifndef BRISK_CUDA_H
#define BRISK_CUDA_H

#include "brisk/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What GEMM operands are computed in. Everything else (reductions, norms, softmax, losses,
 * the optimizer and its fp32 master weights and moments) stays fp32 in every mode. */
typedef enum brisk_gemm_precision {
    BRISK_GEMM_FP32 = 0, /* full fp32 */
    BRISK_GEMM_TF32,     /* fp32 storage, TF32 tensor cores */
    BRISK_GEMM_BF16,     /* operands cast once per step to bf16, fp32 accumulate and output */
    BRISK_GEMM_FP16      /* the same in fp16, with dynamic loss scaling on the device */
} brisk_gemm_precision;
const char *brisk_gemm_precision_name(brisk_gemm_precision p); /* "fp32", "tf32", ... */

/* The most workspace a cuDNN convolution algorithm may use (larger ones are passed over);
 * the memory check (train/memory.c) reserves it for a model with convolutions. */
#define BRISK_CUDA_CONV_WORKSPACE_LIMIT ((size_t)256 << 20)

/* The layout cuDNN convolutions run in, whatever the graph's (the op's win.layout): AUTO
 * times both at prepare, the conversions (casts, transposes) each costs at the node's
 * boundaries included, and keeps the faster (with autotuning off or --deterministic, a
 * fixed rule: NHWC for 16-bit data whose channels are multiples of 8, else the graph's);
 * NCHW and NHWC force one. */
typedef enum brisk_conv_layout {
    BRISK_CONV_LAYOUT_AUTO = 0,
    BRISK_CONV_LAYOUT_NCHW,
    BRISK_CONV_LAYOUT_NHWC
} brisk_conv_layout;

typedef struct brisk_cuda_options {
    int device;                     /* CUDA ordinal */
    brisk_gemm_precision precision;
    int autotune;                   /* time the top heuristic GEMM candidates once per shape */
    int deterministic;              /* no split-K reductions, no timing-dependent choices */
    int fuse;                       /* cuBLASLt epilogues (bias, ReLU/GELU, dGELU + bias grad),
                                       residual add + layernorm */
    char autotune_cache[1024];      /* the autotune cache file; "" = the default place
                                       ($BRISK_CACHE_DIR, else $XDG_CACHE_HOME/brisk, else
                                       ~/.cache/brisk), "-" = none */
    brisk_logger log;               /* where the backend reports (autotune, fallbacks) */
    unsigned refuse_epilogues;      /* BRISK_CUDA_EPI_* bits: these planned fusions run decomposed
                                       (to test the fallbacks); creation adds what
                                       $BRISK_CUDA_REFUSE_EPILOGUES names */
    brisk_conv_layout conv_layout;  /* convolutions: auto (default), nchw or nhwc */
} brisk_cuda_options;

/* The cuBLASLt epilogue fusions, for refuse_epilogues. */
enum {
    BRISK_CUDA_EPI_BIAS = 1,          /* GEMM + bias */
    BRISK_CUDA_EPI_RELU_BIAS = 2,     /* GEMM + bias + ReLU */
    BRISK_CUDA_EPI_GELU_AUX_BIAS = 4, /* GEMM + bias + tanh-GELU, pre-activation kept */
    BRISK_CUDA_EPI_DGELU_BGRAD = 8,   /* GEMM * tanh-GELU' + bias gradient */
    BRISK_CUDA_EPI_ALL = 15
};
/* The environment variable that refuses epilogues in every CUDA backend a process makes:
 * a comma-separated list of bias, relu_bias, gelu_aux_bias, dgelu_bgrad, or all / none. */
#define BRISK_CUDA_REFUSE_ENV "BRISK_CUDA_REFUSE_EPILOGUES"
/* Parses such a list into *mask; an unknown name is an error naming the variable. */
brisk_status brisk_cuda_parse_refused_epilogues(const char *spec, unsigned *mask, brisk_error *err);

/* fp32 + TF32, autotune on, fusion on, device 0, default cache. */
void brisk_cuda_options_default(brisk_cuda_options *o);

/* A CUDA backend on o->device. Fails with BRISK_ERR_UNSUPPORTED and the reason (CPU-only
 * build, no driver, no device, too old a GPU) when there is none. */
brisk_status brisk_backend_cuda_create(const brisk_cuda_options *o, brisk_backend **out, brisk_error *err);

/* For brisk profile: the kernel nodes of a program the backend captured (capture_end), child
 * graphs included; -1 when be is not a CUDA backend or has no such program. */
int brisk_cuda_program_kernels(brisk_backend *be, int program);
/* The launch floor: the median time (ms) of replaying a CUDA graph of `kernels` empty
 * one-thread kernels on be's device (its own stream; the backend's state is untouched), the
 * least a replayed step of that many kernels can take. */
brisk_status brisk_cuda_launch_floor(brisk_backend *be, int kernels, double *ms, brisk_error *err);
/* Whether the CUDA backend has a kernel for node (its op and dtype), answered without a
 * GPU (the backend's supports_op); 0 with the reason in why (may be NULL). A build without
 * CUDA answers 0: "built without CUDA". */
int brisk_cuda_op_supported(const brisk_node *node, char *why, size_t why_size);

/* What brisk sees of one GPU. Never fails: usable = 0 and reason say why not. */
typedef struct brisk_cuda_info {
    int built;                 /* this build has the CUDA backend */
    int usable;
    char reason[256];          /* why not usable */
    int device_count;
    char name[128];
    int cc_major, cc_minor, sms;
    size_t mem_total, mem_free;
    int driver_version, runtime_version; /* 13000 = 13.0 */
    size_t cublaslt_version;             /* cublasLtGetVersion() */
    int cudnn_version, nccl_version;     /* 0: library not found (they are loaded at run time) */
    int bf16, tf32, fp16;                /* tensor-core support */
    char pci_bus_id[32];
} brisk_cuda_info;
void brisk_cuda_probe(int device, brisk_cuda_info *info);

/* Measured rates: dense GEMM on random data (8192^3 bf16 with fp32 accumulate, 8192^3
 * fp32 inputs on TF32) and a device-to-device copy (bytes read + written per second). */
typedef struct brisk_cuda_rates {
    double bf16_tflops, tf32_tflops, copy_gbs;
} brisk_cuda_rates;
brisk_status brisk_cuda_measure(int device, brisk_cuda_rates *out, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
