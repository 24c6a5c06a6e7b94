/* The CUDA backend's vtable: device memory (one cudaMalloc per executor area, so one per
 * arena of the memory plan), copies ordered on the compute stream, creation and teardown.
 * Work goes to one compute stream; batches come in on a second, copy stream (step.c).
 * Kernels that find bad data (a label or index out of range) record it in device memory;
 * every synchronising call (download, sync, loss_read) reads that record and turns it into
 * an error naming the node. */
#include "backend/cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

brisk_status cuda_fail(brisk_error *err, cudaError_t e, const char *call, const char *what) {
    brisk_status code = e == cudaErrorMemoryAllocation ? BRISK_ERR_NOMEM : BRISK_ERR_INTERNAL;
    return brisk_errorf(err, code, "cuda: %s failed: %s (%s)%s", call, cudaGetErrorString(e), what ? what : "",
                        e == cudaErrorMemoryAllocation ? "; try a smaller train.batch_size" : "");
}

brisk_status lt_fail(brisk_error *err, cublasStatus_t s, const char *call, const char *what) {
    return brisk_errorf(err, s == CUBLAS_STATUS_ALLOC_FAILED ? BRISK_ERR_NOMEM : BRISK_ERR_INTERNAL,
                        "cublasLt: %s failed: %s (%s)", call, cuda_lt.cublasLtGetStatusString(s), what ? what : "");
}

static brisk_status cu_alloc(brisk_backend *be, size_t bytes, void **out, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    *out = NULL;
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: alloc while capturing a CUDA graph");
    size_t n = (bytes + 255) / 256 * 256;
    cudaError_t e = cudaMalloc(out, n ? n : 256);
    if (e != cudaSuccess) {
        size_t free_b = 0, total = 0;
        cudaGetLastError();
        cudaMemGetInfo(&free_b, &total);
        *out = NULL;
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: cannot allocate %.1f MiB on %s (%.1f of %.1f GiB free): %s",
                            bytes / 1048576.0, cb->name, free_b / 1073741824.0, total / 1073741824.0,
                            cudaGetErrorString(e));
    }
    return BRISK_OK;
}

static void cu_free(brisk_backend *be, void *p) {
    cuda_use_device(be->impl);
    if (p) cudaFree(p);
}

brisk_status cuda_check_errors(cuda_backend *cb, brisk_error *err) {
    cuda_errors e;
    CU(cudaMemcpyAsync(&e, cb->errors, sizeof e, cudaMemcpyDeviceToHost, cb->compute), "reading the kernel error record");
    CU(cudaStreamSynchronize(cb->compute), "reading the kernel error record");
    if (e.code == CUK_ERR_NONE) return BRISK_OK;
    CU(cudaMemsetAsync(cb->errors, 0, sizeof e, cb->compute), "clearing the kernel error record");
    if (e.code == CUK_ERR_LABEL)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cross_entropy (node %d): label %lld at row %lld is outside the "
                            "valid range [0, %lld)", e.node, e.value, e.pos, e.limit);
    if (e.code == CUK_ERR_UNSORTED)
        return brisk_errorf(err, BRISK_ERR_INVALID, "segment_sum (node %d): index %lld at position %lld follows %lld "
                            "(the indices must be sorted)", e.node, e.value, e.pos, e.limit);
    return brisk_errorf(err, BRISK_ERR_INVALID, "gather/scatter_add/segment_sum (node %d): index %lld at position %lld is outside "
                        "the valid range [0, %lld)", e.node, e.value, e.pos, e.limit);
}

brisk_status cuda_sync(cuda_backend *cb, brisk_error *err) {
    CU(cudaStreamSynchronize(cb->compute), "synchronising the compute stream");
    return cuda_check_errors(cb, err);
}

static brisk_status cu_sync(brisk_backend *be, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    return cuda_sync(cb, err);
}

/* Host to device (or device to device): ordered after the work already issued, and
 * finished when this returns, so the source may be reused. */
static brisk_status cu_upload(brisk_backend *be, void *dst, const void *src, size_t bytes, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (!bytes) return BRISK_OK;
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: upload while capturing a CUDA graph");
    CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cb->compute), "upload");
    CU(cudaStreamSynchronize(cb->compute), "upload");
    cuda_prep_touch(cb, dst, bytes);
    return BRISK_OK;
}

static brisk_status cu_download(brisk_backend *be, void *dst, const void *src, size_t bytes, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: download while capturing a CUDA graph");
    if (bytes) CU(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cb->compute), "download");
    CU(cudaStreamSynchronize(cb->compute), "download");
    return cuda_check_errors(cb, err);
}

static brisk_status cu_memset0(brisk_backend *be, void *dst, size_t bytes, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (bytes) CU(cudaMemsetAsync(dst, 0, bytes, cb->compute), "memset0");
    cuda_prep_touch(cb, dst, bytes);
    return BRISK_OK;
}

brisk_status cuda_buffer_retire(cuda_backend *cb, void *p, const char *what, brisk_error *err) {
    if (!p) return BRISK_OK;
    if (cb->capturing)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: %s while capturing a CUDA graph", what);
    if (cb->n_programs > 0) { /* a captured program may point at it: keep it until the end */
        void **r = realloc(cb->retired, (size_t)(cb->n_retired + 1) * sizeof *r);
        if (!r) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (%s)", what);
        cb->retired = r;
        cb->retired[cb->n_retired++] = p;
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s after a CUDA graph was captured: the old buffer is kept for "
                  "its replays", what);
        return BRISK_OK;
    }
    CU(cudaStreamSynchronize(cb->compute), what); /* work already issued may still use it */
    cudaFree(p);
    return BRISK_OK;
}

void cuda_retired_free(cuda_backend *cb) {
    for (int i = 0; i < cb->n_retired; i++) cudaFree(cb->retired[i]);
    free(cb->retired);
    cb->retired = NULL;
    cb->n_retired = 0;
}

brisk_status cuda_scratch(cuda_backend *cb, size_t bytes, void **out, brisk_error *err) {
    if (bytes > cb->scratch_bytes) {
        if (cb->capturing)
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: scratch of %zu bytes needed while capturing a CUDA "
                                "graph (the warm-up step should have sized it)", bytes);
        size_t n = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : (bytes + 4095) / 4096 * 4096;
        if (cb->scratch) {
            brisk_status st = cuda_buffer_retire(cb, cb->scratch, "growing the scratch buffer", err);
            if (st) return st;
            cb->scratch = NULL;
            cb->scratch_bytes = 0;
        }
        CU(cudaMalloc(&cb->scratch, n), "scratch buffer");
        cb->scratch_bytes = n;
    }
    *out = cb->scratch;
    return BRISK_OK;
}

static void *cu_host_alloc(brisk_backend *be, size_t bytes) {
    void *p = NULL;
    if (cuda_use_device(be->impl) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (cudaHostAlloc(&p, bytes ? bytes : 64, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cu_host_free(brisk_backend *be, void *p) {
    cuda_use_device(be->impl);
    if (p) cudaFreeHost(p);
}

static void cu_destroy(brisk_backend *be) {
    if (!be) return;
    cuda_backend *cb = be->impl;
    if (cb) {
        cuda_use_device(cb);
        if (cb->compute) cudaStreamSynchronize(cb->compute);
        if (cb->copy) cudaStreamSynchronize(cb->copy);
        cuda_comm_free(cb);
        cuda_prep_free(cb->prep);
        cuda_rnn_free(cb);
        cuda_conv_free(cb); /* before cuda_cache_free: it reads the GEMM cache's path */
        cuda_step_free(cb);
        cuda_gemm_free_plans(cb);
        cuda_cache_save(cb);
        cuda_cache_free(cb);
        for (int i = 0; i < cb->n_freqs; i++) cudaFree(cb->freqs[i].dev);
        free(cb->freqs);
        cudaFree(cb->scratch);
        cuda_retired_free(cb);
        cudaFree(cb->workspace);
        cudaFree(cb->vals);
        cudaFree(cb->errors);
        cudaFree(cb->ostate);
        if (cb->lt) cuda_lt.cublasLtDestroy(cb->lt);
        if (cb->compute) cudaStreamDestroy(cb->compute);
        if (cb->copy) cudaStreamDestroy(cb->copy);
        cuda_nvml_close(cb);
        free(cb);
    }
    free(be);
}

static brisk_status create(cuda_backend *cb, brisk_error *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        brisk_cuda_info info;
        brisk_cuda_probe(cb->opt.device, &info);
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "no usable GPU: %s", info.reason);
    }
    if (cb->opt.device < 0 || cb->opt.device >= count)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: device %d does not exist (%d device%s)", cb->opt.device,
                            count, count == 1 ? "" : "s");
    CU(cudaSetDevice(cb->opt.device), "selecting the device");
    struct cudaDeviceProp p;
    CU(cudaGetDeviceProperties(&p, cb->opt.device), "reading device properties");
    snprintf(cb->name, sizeof cb->name, "%s", p.name);
    cb->cc_major = p.major, cb->cc_minor = p.minor, cb->sms = p.multiProcessorCount;
    cb->mem_total = p.totalGlobalMem;
    if (!cuda_cc_supported(p.major, p.minor))
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: " CUDA_CC_TOO_OLD, p.name, p.major, p.minor);
    if (cb->opt.precision == BRISK_GEMM_BF16 && p.major < 8)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: %s (compute capability %d.%d) has no bf16 tensor cores; "
                            "use --precision fp16 or fp32", p.name, p.major, p.minor);
    if (cb->opt.precision == BRISK_GEMM_TF32 && p.major < 8) cb->opt.precision = BRISK_GEMM_FP32;
    cudaRuntimeGetVersion(&cb->runtime_version);
    cudaDriverGetVersion(&cb->driver_version);
    const char *no_lt = cuda_lt_missing();
    if (no_lt) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: %s", no_lt);
    cb->lt_version = cuda_lt.cublasLtGetVersion();
    CU(cudaStreamCreateWithFlags(&cb->compute, cudaStreamNonBlocking), "compute stream");
    CU(cudaStreamCreateWithFlags(&cb->copy, cudaStreamNonBlocking), "copy stream");
    LT(cuda_lt.cublasLtCreate(&cb->lt), "creating the cuBLASLt handle");
    CU(cudaMalloc(&cb->workspace, CUDA_WORKSPACE_BYTES), "cuBLASLt workspace");
    CU(cudaMalloc((void **)&cb->vals, sizeof *cb->vals), "per-step values");
    CU(cudaMalloc((void **)&cb->errors, sizeof *cb->errors), "kernel error record");
    CU(cudaMalloc((void **)&cb->ostate, sizeof *cb->ostate), "optimizer state");
    CU(cudaMemset(cb->vals, 0, sizeof *cb->vals), "per-step values");
    CU(cudaMemset(cb->errors, 0, sizeof *cb->errors), "kernel error record");
    brisk_status st = cuda_step_init(cb, err);
    if (st) return st;
    void *scratch;
    if ((st = cuda_scratch(cb, (size_t)1 << 20, &scratch, err))) return st;
    cuda_cache_load(cb);
    /* the initial cudaMemsets ran on the legacy stream, which the non-blocking compute
     * stream does not wait for */
    CU(cudaDeviceSynchronize(), "initialising the backend");
    return BRISK_OK;
}

brisk_status brisk_backend_cuda_create(const brisk_cuda_options *o, brisk_backend **out, brisk_error *err) {
    *out = NULL;
    brisk_backend *be = calloc(1, sizeof *be);
    cuda_backend *cb = calloc(1, sizeof *cb);
    if (!be || !cb) {
        free(be);
        free(cb);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory");
    }
    if (o) cb->opt = *o;
    else brisk_cuda_options_default(&cb->opt);
    if (cb->opt.deterministic) cb->opt.autotune = 0; /* timing noise must not pick the algorithm */
    unsigned refuse = 0;
    if (brisk_cuda_parse_refused_epilogues(getenv(BRISK_CUDA_REFUSE_ENV), &refuse, err)) {
        free(be);
        free(cb);
        return BRISK_ERR_INVALID;
    }
    cb->opt.refuse_epilogues |= refuse;
    cb->be = be;
    be->name = "cuda";
    be->impl = cb;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->upload = cu_upload;
    be->download = cu_download;
    be->memset0 = cu_memset0;
    be->run_node = cuda_run_node;
    be->supports_op = cuda_supports_op;
    be->grad_sumsq = cuda_grad_sumsq;
    be->optim_update = cuda_optim_update;
    be->sync = cu_sync;
    be->comm_init = cuda_comm_init;
    be->grad_allreduce = cuda_grad_allreduce;
    be->grad_bucket_ready = cuda_grad_bucket_ready;
    be->grad_buckets_join = cuda_grad_buckets_join;
    be->grad_reduce_scatter = cuda_grad_reduce_scatter;
    be->param_all_gather = cuda_param_all_gather;
    be->grad_sumsq_allreduce = cuda_grad_sumsq_allreduce;
    be->destroy = cu_destroy;
    be->prepare = cuda_prepare;
    be->forget = cuda_forget;
    be->host_alloc = cu_host_alloc;
    be->host_free = cu_host_free;
    cuda_step_install(be);
    cuda_info_install(be);
    brisk_status st = create(cb, err);
    if (st) {
        cu_destroy(be);
        return st;
    }
    *out = be;
    return BRISK_OK;
}
