/* The CUDA backend's private state and the functions its host files (C11, compiled by the
 * C compiler against the CUDA runtime and cuBLASLt C APIs) share. Not a public header.
 *
 * Files:
 *   backend.c   the vtable: memory, copies, streams, creation and destruction
 *   dispatch.c  run_node: one switch from op to launcher, GEMM operand and epilogue plumbing
 *   movement.c  run_node's data-movement and index ops
 *   attention.c run_node's fused attention (k_attention.cu)
 *   residual_norm.c run_node's residual add + layernorm pairs (k_layernorm_residual.cu)
 *   prepare.c   the per-executor plan: epilogue fusions (checked against the memory plan),
 *               low-precision operand copies, the loss-gradient seed, scratch sizing
 *   gemm.c      cuBLASLt: descriptors and algorithms cached per shape, epilogues
 *   autotune.c  timing heuristic candidates and the cache file
 *   step.c      per-step values, CUDA graphs, input staging, the loss log, the optimizer
 *   info.c      probe, measured rates, NVML (loaded at run time), describe, stats
 *   cudnn_rnn.c LSTM and GRU and their gradients through cuDNN's RNN API (loaded at run time)
 *   cudnn_conv.c CONV2D and its gradients through cuDNN (algorithm cache: conv_algo_cache.c)
 *   cudnn_load.c loads cuDNN once per process for both
 *   vision.c    POOL2D and BATCHNORM with their gradients (k_pool.cu, k_batchnorm.cu)
 *   k_*.cu      kernels (kernels.h)
 *
 * Every CUDA/cuBLASLt call is checked; an error names the call and what it was for. No
 * global mutable state: device properties, handles and caches live in cuda_backend (cuDNN's
 * entry points, loaded once per process and read-only after, are shared by every backend). */
#ifndef BRISK_CUDA_INTERNAL_H
#define BRISK_CUDA_INTERNAL_H

#include "backend/cuda/cublaslt_load.h"
#include <cuda_runtime_api.h>

#include "backend/cuda/cudnn_conv.h"
#include "backend/cuda/cudnn_rnn.h"
#include "backend/cuda/kernels.h"
#include "brisk/cuda.h"

/* The oldest GPU brisk runs on: compute capability 7.5 (Turing), the oldest architecture
 * CUDA 13 compiles for and the oldest in the default build (CMakeLists.txt). */
static inline int cuda_cc_supported(int major, int minor) { return major > 7 || (major == 7 && minor >= 5); }
#define CUDA_CC_TOO_OLD "%s has compute capability %d.%d; brisk needs 7.5 (Turing) or newer, as CUDA 13 does"

#define CUDA_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt workspace (split-K, large tiles) */
#define CUDA_LOSS_LOG 4096                      /* slots in the loss ring */

/* Fills err with "cuda: CALL failed: <reason> (what)" and returns BRISK_ERR_INTERNAL
 * (BRISK_ERR_NOMEM for allocations). */
brisk_status cuda_fail(brisk_error *err, cudaError_t e, const char *call, const char *what);
brisk_status lt_fail(brisk_error *err, cublasStatus_t s, const char *call, const char *what);
#define CU(call, what) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return cuda_fail(err, e_, #call, (what)); } while (0)
#define LT(call, what) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) return lt_fail(err, s_, #call, (what)); } while (0)

/* GEMM epilogues (cuBLASLt's, named for what they do here). */
typedef enum {
    EPI_NONE = 0,
    EPI_BIAS,          /* D = AB + bias */
    EPI_RELU_BIAS,     /* D = relu(AB + bias) */
    EPI_GELU_AUX_BIAS, /* aux = AB + bias, D = gelu_tanh(aux) */
    EPI_DGELU_BGRAD    /* D = AB * gelu_tanh'(aux), bias_grad = row sums of D */
} cuda_epilogue;

/* One product in brisk's row-major terms: C[b] = op(A[b]) op(B[b]), op = transpose when
 * the flag is set, A [M, K] (or [K, M]), B [K, N] (or [N, K]); sa/sb = batch strides in
 * elements (0: shared), C contiguous [batch, M, N]. */
typedef struct cuda_gemm_args {
    int ta, tb;
    int64_t M, N, K, batch, sa, sb;
    const void *A, *B;
    float *C;
    int in_type;           /* 0 f32, 1 bf16, 2 fp16 */
    cuda_epilogue epi;
    const float *bias;     /* BIAS variants: [N] */
    float *bias_grad;      /* DGELU_BGRAD: [N] */
    float *aux;            /* GELU_AUX_BIAS out / DGELU_BGRAD in: [batch, M, N] */
    const char *what;      /* for messages: "matmul (node 12)" */
} cuda_gemm_args;

typedef struct cuda_gemm_plan cuda_gemm_plan;
typedef struct cuda_prep cuda_prep;

typedef struct cuda_freq {
    int64_t dim;
    float *dev;
} cuda_freq;

typedef struct cuda_program {
    void *exec;            /* cudaGraphExec_t */
    int staging;           /* starts by copying the staged inputs in */
    int kernels;           /* kernel nodes of its graph (child graphs included) */
} cuda_program;

typedef struct cuda_backend {
    brisk_cuda_options opt;
    brisk_backend *be;
    /* the device */
    char name[128];
    int cc_major, cc_minor, sms;
    size_t mem_total;
    int runtime_version, driver_version;
    size_t lt_version;
    cudaStream_t compute, copy;
    cublasLtHandle_t lt;
    void *workspace;
    /* scratch for reductions, loss terms and unprepared operand casts; grown outside capture */
    void *scratch;
    size_t scratch_bytes;
    void **retired;        /* outgrown shared buffers (scratch, the conv workspace and staging) a
                            * captured program may still use: freed at destroy */
    int n_retired;
    /* per-step values: device block and the host's copy of what was last written */
    cuda_values *vals;
    cuda_values host_vals;
    int vals_written;
    cuda_errors *errors;
    cuda_optim_state *ostate;
    int sumsq_fresh;       /* grad_sumsq ran since the last update */
    int sumsq_summed;      /* ... and grad_sumsq_allreduce summed it over the ranks (ZeRO-1) */
    int shard_pending;     /* grad_reduce_scatter ran since the last update: it updates a shard */
    /* programs (CUDA graphs) */
    int capturing, capture_staging;
    cuda_program *programs;
    int n_programs, cap_programs;
    /* the loss log */
    float *loss_ring;
    float *loss_host;      /* pinned */
    cudaEvent_t *step_ev;  /* 2 * CUDA_LOSS_LOG step marks (start, end), created on first use */
    cudaEvent_t *mark_ev;  /* BRISK_MAX_MARKS profile marks (profile.c), each created on first use */
    /* input staging: two device buffers alternate, written on the copy stream */
    void *staging[2];
    size_t staging_bytes;
    char *inputs;          /* the prepared executor's input area */
    size_t input_bytes;
    cudaEvent_t copied[2], consumed[2], copy_start; /* copy_start and copied are timed */
    double copy_s;         /* device time of batch copies, summed */
    int parity, staging_open, commit_pending, wait_issued;
    /* GEMM plans and the autotune cache */
    cuda_gemm_plan *plans;
    int n_plans, cap_plans;
    char cache_path[1100];
    char (*cache_keys)[512];
    int *cache_index;
    int n_cache, cap_cache, cache_dirty;
    int autotuned, from_cache;
    /* sinusoidal frequency tables, per dim */
    cuda_freq *freqs;
    int n_freqs;
    /* the prepared executor */
    cuda_prep *prep;
    /* NCCL, loaded at run time (nccl.c): the data-parallel communicator (ncclComm_t), and
     * for the all-reduce overlapped with backward its own stream, ordered after each bucket's
     * last producer by nccl_ready (recorded on compute) and joined back by nccl_done */
    void *nccl_comm;
    int nccl_rank, nccl_world;
    cudaStream_t nccl_stream;
    cudaEvent_t nccl_ready, nccl_done;
    /* NVML, loaded at run time (info.c) */
    void *nvml_lib, *nvml_dev;
    int (*nvml_util)(void *dev, void *util);
    int (*nvml_mem)(void *dev, void *mem);
    /* cuDNN's handle and the per-node plans of the LSTMs and GRUs (cudnn_rnn.c) */
    struct cuda_rnn *rnn;
    /* cuDNN's handle, the per-conv-node plans and the algorithm cache (cudnn_conv.c) */
    struct cuda_conv *conv;
} cuda_backend;

/* The runtime's current device is per host thread, and any thread may call in (the
 * loader's threads allocate pinned batches; a host program may step from its own threads):
 * every entry point selects the backend's device first, which is one cudaGetDevice when it
 * is current already. */
static inline cudaError_t cuda_use_device(const cuda_backend *cb) {
    int d = -1;
    if (cudaGetDevice(&d) == cudaSuccess && d == cb->opt.device) return cudaSuccess;
    return cudaSetDevice(cb->opt.device);
}
#define USE_DEVICE(cb) CU(cuda_use_device(cb), "selecting the device on this thread")

/* ---- backend.c */
brisk_status cuda_scratch(cuda_backend *cb, size_t bytes, void **out, brisk_error *err);
/* A shared device buffer being outgrown: freed now when no captured program exists, else kept
 * (cb->retired) until the backend goes, since a program replays with the addresses it was
 * captured with. Never while capturing. */
brisk_status cuda_buffer_retire(cuda_backend *cb, void *p, const char *what, brisk_error *err);
/* Frees the retired buffers: once no program exists and the compute stream is idle. */
void cuda_retired_free(cuda_backend *cb);
/* Reads and clears the kernels' error record; an error names the node it came from. */
brisk_status cuda_check_errors(cuda_backend *cb, brisk_error *err);
brisk_status cuda_sync(cuda_backend *cb, brisk_error *err);

/* ---- dispatch.c */
brisk_status cuda_run_node(brisk_backend *be, const brisk_graph *g, int id, const void *const *in, void *out,
                           const brisk_step_state *st, brisk_error *err);
int cuda_supports_op(brisk_backend *be, const brisk_node *node, char *why, size_t why_size);
/* A matmul node's GEMM in row-major terms (shared 2-D b folded into one tall product);
 * pointers and precision left for the caller. *empty: nothing to compute. */
brisk_status cuda_matmul_args(const brisk_graph *g, int id, cuda_gemm_args *a, int *empty, brisk_error *err);
/* NumPy broadcast of operands xs[k] to os as a collapsed strided view (v->s[k]). */
void cuda_bcast_view(cuda_strides *v, const brisk_shape *os, const brisk_shape *const *xs, int nops);
/* movement.c: CONCAT, SLICE, SLICE_GRAD, TRANSPOSE, EXPAND; GATHER, SCATTER_ADD, SEGMENT_SUM, SINUSOIDAL(_GRAD) */
brisk_status cuda_run_movement(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err);
brisk_status cuda_run_index(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                            brisk_error *err);
/* attention.c: ATTENTION, ATTENTION_GRAD; supported: the head dim fits the kernel */
brisk_status cuda_run_attention(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                brisk_error *err);
int cuda_attention_supported(const brisk_node *n);
/* x's shape collapsed for a reduction over mask into alternating groups; returns nd. */
int cuda_reduce_dims(const brisk_shape *xs, uint32_t mask, int64_t *d, int *red);

/* ---- prepare.c */
/* What runs at one node's place in a prepared schedule: skipped (computed elsewhere), a
 * fused GEMM (epi != EPI_NONE: writes bias/act or grad/sum nodes), or a residual add fused
 * with the LAYERNORM norm_ln (forward) or the LAYERNORM_GRAD_X norm_grad it consumes. */
typedef struct cuda_node_plan {
    int skip;
    int epi, bias_node, act_node, grad_node, sum_node;
    int norm_ln, norm_grad;
} cuda_node_plan;
/* The fusion plan alone, on the host, for any executor of the plan (no device needed):
 * tests replay it with the CPU backend's kernels. NULL when out of memory. */
cuda_prep *cuda_prep_plan_host(const brisk_exec *ex);
void cuda_prep_node(const cuda_prep *p, int id, cuda_node_plan *np);
brisk_status cuda_prepare(brisk_backend *be, const brisk_exec *ex, brisk_error *err);
void cuda_forget(brisk_backend *be, const brisk_exec *ex);
void cuda_prep_free(cuda_prep *p);
/* g is the prepared executor's graph. */
int cuda_prep_covers(const cuda_backend *cb, const brisk_graph *g);
/* What prepare decided for a node (NULL prep or another graph: nothing). */
int cuda_prep_skips(const cuda_backend *cb, const brisk_graph *g, int id);
/* Runs a fused GEMM for matmul node id when prepare planned one: 1 = done, 0 = not fused. */
brisk_status cuda_prep_fused(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             int *done, brisk_error *err);
/* The GEMM operand for input i of matmul node id, in the GEMM's dtype (casting if needed). */
brisk_status cuda_prep_operand(cuda_backend *cb, const brisk_graph *g, int id, int i, const void *f32,
                               const void **out, void *scratch, brisk_error *err);
/* After node id produced its output: refresh its low-precision copy if a GEMM reads it. */
brisk_status cuda_prep_after(cuda_backend *cb, const brisk_graph *g, int id, brisk_error *err);
/* The bf16/fp16 copy of the parameter float at params (written by the optimizer), or NULL
 * when params is not in the prepared executor's parameter arena or it keeps no copy. */
void *cuda_prep_params_lp(const cuda_backend *cb, const float *params);
/* Marks the low-precision weights stale after a write into [dst, dst + bytes). */
void cuda_prep_touch(cuda_backend *cb, const void *dst, size_t bytes);
/* Re-casts the weights into their 16-bit copy when stale (an upload since the last cast):
 * before replaying a program, which holds no cast of its own (the optimizer keeps the copy). */
brisk_status cuda_prep_refresh_params(cuda_backend *cb, brisk_error *err);
float *cuda_prep_seed(const cuda_backend *cb);
/* Planned epilogue fusions: running fused, and running decomposed (refused). */
void cuda_prep_fusions(const cuda_backend *cb, int *active, int *decomposed);
int cuda_prep_norm_fusions(const cuda_backend *cb);
/* The prepared plan for g (NULL: none) and its executor's node buffers. */
const cuda_prep *cuda_prep_of(const cuda_backend *cb, const brisk_graph *g);
void *const *cuda_prep_ptrs(const cuda_prep *p);

/* ---- residual_norm.c: the residual add `id` fused with its layer norm when prepare
 * planned it (*done = 1), else nothing */
brisk_status cuda_run_add_norm(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               int *done, brisk_error *err);
int cuda_in_type(const cuda_backend *cb); /* 0 f32, 1 bf16, 2 fp16 */

/* ---- gemm.c */
/* Runs one GEMM; BRISK_ERR_UNSUPPORTED (no error text needed) when cuBLASLt has no
 * algorithm for the epilogue, so the caller can decompose it. */
brisk_status cuda_gemm(cuda_backend *cb, const cuda_gemm_args *a, brisk_error *err);
void cuda_gemm_free_plans(cuda_backend *cb);

/* ---- autotune.c */
/* Picks among n heuristic results: the cached index, else the fastest when timing is
 * allowed, else 0. Stores new choices in the cache. key: the shape's text. */
brisk_status cuda_autotune(cuda_backend *cb, const char *key, const cublasLtMatmulHeuristicResult_t *res, int n,
                           int (*run)(void *ctx, const cublasLtMatmulAlgo_t *algo), void *ctx, int *choice,
                           brisk_error *err);
void cuda_cache_load(cuda_backend *cb);
void cuda_cache_save(cuda_backend *cb);
void cuda_cache_free(cuda_backend *cb);

/* ---- step.c */
brisk_status cuda_write_values(cuda_backend *cb, const brisk_step_state *st, const brisk_optim_args *args,
                               brisk_error *err);
/* Before a run's first kernel: values, and staged inputs committed (eager path). */
brisk_status cuda_begin_work(cuda_backend *cb, const brisk_step_state *st, brisk_error *err);
void cuda_step_install(brisk_backend *be);
/* The loss ring, staging events and the optimizer state (after the device is selected). */
brisk_status cuda_step_init(cuda_backend *cb, brisk_error *err);
void cuda_step_free(cuda_backend *cb);
/* Destroys every captured program (their buffers are going away). */
void cuda_programs_clear(cuda_backend *cb);
/* ---- profile.c: timing marks, node notes, a captured graph's kernel count */
void cuda_profile_install(brisk_backend *be);
/* A table of `count` timing events (created on first use): cuda_event_mark records event
 * `slot` on the compute stream after the work issued so far (refused while capturing);
 * cuda_event_ms waits for `to` and gives the milliseconds from `from` to it. */
brisk_status cuda_event_mark(cuda_backend *cb, cudaEvent_t **table, int count, int slot, const char *what,
                             brisk_error *err);
brisk_status cuda_event_ms(cudaEvent_t from, cudaEvent_t to, double *ms, const char *what, brisk_error *err);
void cuda_events_free(cudaEvent_t **table, int count);
void cuda_profile_free(cuda_backend *cb);
int cuda_graph_kernels(void *graph); /* cudaGraph_t */
brisk_status cuda_grad_sumsq(brisk_backend *be, const float *g, int64_t n, float *sumsq_out, brisk_error *err);
brisk_status cuda_optim_update(brisk_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                               const brisk_optim_args *args, const float *sumsq, const uint8_t *decay_mask,
                               brisk_error *err);
/* Sets up the loss scaler for the prepared executor (fp16). */
brisk_status cuda_scaler_init(cuda_backend *cb, int on, brisk_error *err);

/* ---- cudnn_rnn.c (and cudnn_rnn.h) */
/* LSTM, LSTM_GRAD, LSTM_GRAD_W, GRU, GRU_GRAD, GRU_GRAD_W */
brisk_status cuda_run_rnn(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                          brisk_error *err);
/* Plans every LSTM and GRU node of g (descriptors, weight space, workspaces): nothing
 * allocated per step. */
brisk_status cuda_rnn_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err);
void cuda_rnn_forget(cuda_backend *cb); /* after the compute stream is idle */
void cuda_rnn_free(cuda_backend *cb);
/* How LSTM or GRU node id of g runs (cuDNN's math, sizes), for brisk profile; "" if unplanned. */
void cuda_rnn_note(const cuda_backend *cb, const brisk_graph *g, int id, char *buf, size_t n);

/* ---- vision.c: pooling, upsampling and batch norm (k_pool.cu, k_upsample.cu, k_batchnorm.cu) */
brisk_status cuda_run_pool(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                           brisk_error *err);
brisk_status cuda_run_upsample(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err);
brisk_status cuda_run_batchnorm(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                const brisk_step_state *st, brisk_error *err);

/* ---- cudnn_conv.c (and cudnn_conv.h) */
brisk_status cuda_run_conv(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                           brisk_error *err);
brisk_status cuda_conv_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err);
void cuda_conv_forget(cuda_backend *cb); /* after the compute stream is idle */
void cuda_conv_free(cuda_backend *cb);   /* saves the algorithm cache */
/* How many conv nodes' plans run cuDNN in NCHW and in NHWC (for the run report). */
void cuda_conv_layouts(const cuda_backend *cb, int *nchw, int *nhwc);
/* How conv node id of g runs (algorithm, layout, data type), for brisk profile; "" if unplanned. */
void cuda_conv_note(const cuda_backend *cb, const brisk_graph *g, int id, char *buf, size_t n);

/* ---- info.c */
void cuda_info_install(brisk_backend *be);
void cuda_nvml_close(cuda_backend *cb);

/* nccl.c: data parallel (the backend's comm_init and grad_allreduce; comm_free at destroy) */
brisk_status cuda_comm_init(brisk_backend *be, int rank, int world,
                            brisk_status (*share)(void *user, void *buf, size_t bytes, brisk_error *err), void *user,
                            brisk_error *err);
brisk_status cuda_grad_allreduce(brisk_backend *be, float *g, int64_t n, int64_t bucket_floats, brisk_error *err);
brisk_status cuda_grad_bucket_ready(brisk_backend *be, float *g, int64_t count, brisk_error *err);
brisk_status cuda_grad_buckets_join(brisk_backend *be, brisk_error *err);
brisk_status cuda_grad_reduce_scatter(brisk_backend *be, float *g, const int64_t *bounds, brisk_error *err);
brisk_status cuda_param_all_gather(brisk_backend *be, float *p, const int64_t *bounds, brisk_error *err);
brisk_status cuda_grad_sumsq_allreduce(brisk_backend *be, brisk_error *err);
void cuda_comm_free(cuda_backend *cb);

#endif
