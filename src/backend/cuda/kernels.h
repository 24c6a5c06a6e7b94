/* The CUDA backend's kernel launchers: plain C declarations of the extern "C" functions
 * the .cu files define, and the small structs both sides share. Every launcher enqueues
 * on the stream it is given and returns cudaGetLastError() (launch errors only; faults
 * surface at the next synchronisation). No launcher allocates, synchronises or reads
 * device memory on the host, so every one of them can be captured into a CUDA graph.
 *
 * Per-step values are read on the device from a cuda_values block (set by
 * cuk_set_values, a kernel, so a captured graph picks up each step's values without
 * re-capture). Errors a kernel detects (an index or label out of range) go to a
 * cuda_errors block the host reads at its next synchronisation. */
#ifndef BRISK_CUDA_KERNELS_H
#define BRISK_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUK_MAX_DIMS 6

/* Per-step values, in device memory. The first five fields mirror brisk_step_state. */
typedef struct cuda_values {
    uint64_t seed;
    uint32_t rng_step, first_micro, training, loss_slot;
    uint32_t parity;        /* which input staging buffer holds this micro-batch */
    uint32_t pad;
    float lr;               /* optimizer */
    float pad2;
    int64_t t;              /* 1-based optimizer step */
} cuda_values;

/* The first error a kernel found (code 0: none). */
enum { CUK_ERR_NONE = 0, CUK_ERR_LABEL = 1, CUK_ERR_INDEX = 2, CUK_ERR_UNSORTED = 3 };
typedef struct cuda_errors {
    int code;
    int node;               /* the graph node whose kernel found it */
    long long pos, value, limit;
} cuda_errors;

/* The optimizer's device state: this step's gradient norm and multiplier, the AdamW
 * step constants, and the dynamic loss scaler. Written by cuk_optim_finalize, read by
 * cuk_optim_update. */
typedef struct cuda_optim_state {
    double sumsq;           /* sum of g^2 this step (when clipping or scaling) */
    float coef;             /* gradient multiplier: grad_scale / scale * clip factor */
    int skip;               /* 1: inf/NaN gradients, this step changes nothing */
    float step_size, bc2_sqrt, decay; /* AdamW: lr / bc1, sqrt(bc2), 1 - lr wd; SGD: decay = wd */
    float lr;
    float scale;            /* loss scale (1 without a scaler) */
    int growth;             /* clean steps since the scale last changed */
    int scaler;             /* 1: dynamic loss scaling */
    int growth_interval;
    long long skipped;      /* steps the scaler skipped so far (not counted in AdamW's t) */
    long long nonfinite_skipped; /* steps skipped for inf/NaN gradients without a scaler
                                    (skip_nonfinite; counted in t, as the CPU trainer does) */
} cuda_optim_state;

/* A broadcast/strided view: nd dims d[], per operand element strides (0 on broadcast dims). */
typedef struct cuda_strides {
    int nd;
    int64_t d[CUK_MAX_DIMS];
    int64_t s[3][CUK_MAX_DIMS];
} cuda_strides;

/* ---- k_elementwise.cu */
cudaError_t cuk_set_values(cuda_values *dst, cuda_values v, cudaStream_t s);
/* A kernel that does nothing, one thread: the launch floor's unit (profile.c). */
cudaError_t cuk_empty(cudaStream_t s);
/* ADD/SUB/MUL/DIV, MINIMUM/MAXIMUM, POW_XY (brisk_op values) over a broadcast view: operand
 * 0 = x, 1 = y, 2 = out. */
cudaError_t cuk_binary(int op, const float *x, const float *y, float *out, const cuda_strides *v, int64_t n,
                       cudaStream_t s);
/* out[r, j] = act(x[r, j] + b[j]); act: 0 none, else a brisk_op (RELU, GELU) with gelu_tanh. */
cudaError_t cuk_bias_act(const float *x, const float *b, float *out, int64_t rows, int64_t n, int act,
                         int gelu_tanh, cudaStream_t s);
/* SCALE (a x + b), RELU, GELU, SILU, TANH, SIGMOID, and the math ops and parameterised
 * activations EXP .. SOFTPLUS (a, b = attr.f0, f1). */
cudaError_t cuk_unary(int op, int gelu_tanh, float a, float b, const float *x, float *out, int64_t n,
                      cudaStream_t s);
/* out = dy * f'(x) for kind = the forward op (a, b its attr.f0, f1); ReLU reads y (y > 0 iff
 * x > 0), as do tanh, sigmoid, exp and sqrt; the others read x. */
cudaError_t cuk_act_grad(int kind, int gelu_tanh, float a, float b, const float *dy, const float *x, const float *y,
                         float *out, int64_t n, cudaStream_t s);
/* BINARY_GRAD: input `which`'s gradient of MINIMUM, MAXIMUM or POW_XY (kind) over the
 * broadcast view of x (operand 0) and y (1); dy and out contiguous in the view's shape. */
cudaError_t cuk_binary_grad(int kind, int which, const float *dy, const float *x, const float *y, float *out,
                            const cuda_strides *v, int64_t n, cudaStream_t s);
/* out = g on the first micro-batch (values), else out += g. */
cudaError_t cuk_grad_accum(const float *g, float *out, int64_t n, const cuda_values *v, cudaStream_t s);
/* GEMM operands: f32 -> bf16 (fp16 = 0) or fp16, round to nearest even. */
cudaError_t cuk_cast_lp(const float *x, void *out, int64_t n, int fp16, cudaStream_t s);
/* A convolution operand [N, C, S] (NCHW) or [N, S, C] (NHWC) converted between layouts and
 * types (0 f32, 1 bf16, 2 fp16) in one pass (k_conv_layout.cu). cudaErrorInvalidValue when
 * the pixels or channels exceed the grid's reach (65535 x 32 in one of them). */
cudaError_t cuk_conv_relayout(const void *src, int src_type, int src_nhwc, void *dst, int dst_type, int dst_nhwc,
                              int64_t N, int64_t C, int64_t S, cudaStream_t s);
/* inputs = staging[values.parity] (bytes, 16-byte aligned buffers). */
cudaError_t cuk_stage_inputs(void *dst, const void *s0, const void *s1, size_t bytes, const cuda_values *v,
                             cudaStream_t s);
/* ring[slot % n] = (first micro ? 0 : ring[slot % n]) + w * *loss. */
cudaError_t cuk_loss_log(const float *loss, int width, float *ring, int n, float w, const cuda_values *v, cudaStream_t s);
/* MSE_GRAD: out = 2 (p - t) *dloss / n. */
cudaError_t cuk_mse_grad(const float *dloss, const float *p, const float *t, float *out, int64_t n,
                         cudaStream_t s);
/* Fills n floats with value (poisoning in tests, the loss seed). */
cudaError_t cuk_fill(float *x, float value, int64_t n, cudaStream_t s);

/* ---- k_reduce.cu: every sum is deterministic (fixed partition, fixed combination order,
 * no atomics). scratch: at least cuk_reduce_scratch_bytes() bytes. */
size_t cuk_reduce_scratch_bytes(int64_t n_out, int64_t n_red);
/* out[o] = scale * sum over the reduced dims. v: x's collapsed dims; red[i] = dim i reduced. */
cudaError_t cuk_reduce(const float *x, float *out, int nd, const int64_t *d, const int *red, float scale,
                       void *scratch, cudaStream_t s);
/* kind 0: sum x; 1: sum x^2; 2: sum (x - y)^2 — in double, into *out_d (may be NULL) and
 * *out_f = (float)(sum * scale) (may be NULL). */
cudaError_t cuk_sum_global(int kind, const float *x, const float *y, int64_t n, double scale, double *out_d,
                           float *out_f, void *scratch, cudaStream_t s);

/* ---- k_rows.cu: row-wise ops over [rows, C]: lanes of a warp per short row, a warp, or a block per long row */
cudaError_t cuk_softmax(int log, const float *x, float *out, int64_t rows, int64_t c, cudaStream_t s);
cudaError_t cuk_softmax_grad(int log, const float *dy, const float *y, float *out, int64_t rows, int64_t c,
                             cudaStream_t s);
/* loss = mean over rows of logsumexp - x[label]; NaN and an error for a bad label. */
cudaError_t cuk_cross_entropy(const float *x, const int32_t *labels, float *loss, int64_t rows, int64_t c,
                              void *scratch, cuda_errors *e, int node, cudaStream_t s);
cudaError_t cuk_cross_entropy_grad(const float *dloss, const float *x, const int32_t *labels, float *out,
                                   int64_t rows, int64_t c, cuda_errors *e, int node, cudaStream_t s);
/* op: LAYERNORM (x, gamma, beta), LAYERNORM_GRAD_X (dy, x, gamma; gamma NULL: ones),
 * LAYERNORM_XHAT (x). */
cudaError_t cuk_layernorm(int op, const float *x, const float *dy, const float *gamma, const float *beta,
                          float *out, int64_t rows, int64_t n, float eps, cudaStream_t s);

/* ---- k_attention.cu: fused multi-head self-attention (src/backend/cpu/attention.c's
 * semantics and Philox dropout stream), fp32, no T x T tensor in global memory, no atomics.
 * qkv [B, T, 3D]; out [B, T, D] and lse [B, heads, T] (the forward's, read back by the
 * backward); dqkv [B, T, 3D]. Dropout applies when p > 0 and values.training. */
#define CUK_ATTN_MAX_DH 128 /* head dims a lane's registers hold: 32 lanes x 4 */
typedef struct cuk_attn_args {
    int64_t B, T, D, heads, dh;
    int causal;
    float scale;            /* 1 / sqrt(dh) */
    float p, keep_scale;    /* dropout probability and 1 / (1 - p), both f32 as the CPU has them */
    uint32_t stream;        /* the op's Philox stream (attr.rng) */
    const float *qkv, *mask; /* mask [B, T] (0: padding) or NULL */
    const float *dy;        /* backward: d out [B, T, D] */
    float *out, *lse;       /* forward: written; backward: read */
    float *dqkv;
} cuk_attn_args;
cudaError_t cuk_attention(const cuk_attn_args *a, const cuda_values *v, cudaStream_t s);
cudaError_t cuk_attention_grad(const cuk_attn_args *a, const cuda_values *v, cudaStream_t s);
/* Shared memory (bytes) and warps per block of each kernel (0 forward, 1 dQ, 2 dK/dV) for
 * head dim dh: exposed so the launch configuration can be checked on the host. */
size_t cuk_attention_smem(int kernel, int64_t dh, int *warps);

/* ---- k_layernorm_residual.cu: a residual add fused with its layer norm, one warp per row,
 * cuk_layernorm's arithmetic step for step (so the same bits as the add and the norm apart).
 * s = x + r, y = layernorm(s) gamma + beta; out = r + layernorm_grad_x(dy, x, gamma). */
cudaError_t cuk_add_layernorm(const float *x, const float *r, float *s, const float *gamma, const float *beta,
                              float *y, int64_t rows, int64_t n, float eps, cudaStream_t st);
cudaError_t cuk_layernorm_grad_add(const float *dy, const float *x, const float *gamma, const float *r, float *out,
                                   int64_t rows, int64_t n, float eps, cudaStream_t st);

/* ---- k_shape.cu: data movement for elements of esize bytes */
/* dst[dst view] = src[src view] over the same index space (v.s[0] = src, v.s[1] = dst). */
cudaError_t cuk_strided_copy(void *dst, const void *src, size_t esize, const cuda_strides *v, cudaStream_t s);
/* dtype values are brisk_dtype's. */
cudaError_t cuk_cast(const void *x, int from, void *out, int to, int64_t n, cudaStream_t s);
/* out[i] = table[idx[i]] rows of row_bytes; bad index: error, row zeroed. */
cudaError_t cuk_gather(const void *table, const int32_t *idx, void *out, int64_t nidx, int64_t v,
                       size_t row_bytes, cuda_errors *e, int node, cudaStream_t s);
/* out [v, d] = 0, then out[idx[i]] += dy[i] in order of i (blocks over column tiles and
 * ranges of output rows). */
cudaError_t cuk_scatter_add(const float *dy, const int32_t *idx, float *out, int64_t nidx, int64_t v, int64_t d,
                            cuda_errors *e, int node, cudaStream_t s);
/* ---- k_segment.cu: out [v, d] = the sum of the rows x[i] with idx[i] = r, for each r.
 * sorted: idx non-decreasing, each output element summed in index order (deterministic, the
 * CPU's bits); otherwise atomics in any order (also SCATTER_ADD's fast path). */
cudaError_t cuk_segment_sum(const float *x, const int32_t *idx, float *out, int64_t nidx, int64_t v, int64_t d,
                            int sorted, cuda_errors *e, int node, cudaStream_t s);
/* t: f32 or i32 (t_i32); freq: half floats (computed on the host as the CPU does). */
cudaError_t cuk_sinusoidal(const void *t, int t_i32, const float *freq, float *out, int64_t n, int64_t dim,
                           cudaStream_t s);
cudaError_t cuk_sinusoidal_grad(const float *dy, const void *t, int t_i32, const float *freq, float *out,
                                int64_t n, int64_t dim, cudaStream_t s);

/* ---- k_random.cu: Philox 4x32-10, core.h's convention (key = seed, counter = {block lo,
 * block hi, stream, rng_step}, element i takes word i % 4 of block i / 4) */
/* op: DROPOUT (identity when !training or p == 0, on the device), RANDN, RAND_UNIFORM
 * (a, b), RANDINT (lo, range) */
cudaError_t cuk_random(int op, const float *x, void *out, int64_t n, uint32_t stream, float p, float scale,
                       float a, float b, int64_t lo, uint64_t range, const cuda_values *v, cudaStream_t s);

/* ---- k_optim.cu. The gradient norm comes first (cuk_sum_global kind 1 into st->sumsq). */
typedef struct cuda_optim_consts {
    int adamw;
    float beta1, beta2, eps, weight_decay, momentum;
    int nesterov;
    float grad_scale, clip_norm;
    int use_sumsq;          /* st->sumsq holds this step's sum of g^2 */
    int skip_nonfinite;     /* without a scaler too: a non-finite sum skips the step */
} cuda_optim_consts;
/* One thread: decides skip (sumsq not finite, with the scaler on or skip_nonfinite), sets this step's gradient
 * multiplier and AdamW constants from values (lr, t), updates the scaler and writes the
 * new scale to *seed (the loss-gradient seed) when seed != NULL. */
cudaError_t cuk_optim_finalize(cuda_optim_consts c, const cuda_values *v, cuda_optim_state *st, float *seed,
                               cudaStream_t s);
/* The fused update over n floats; lp (bf16 or fp16 copy of p, may be NULL) refreshed. */
cudaError_t cuk_optim_update(float *p, const float *g, float *m, float *v, const uint8_t *mask, int64_t n,
                             cuda_optim_consts c, const cuda_optim_state *st, void *lp, int lp_fp16,
                             cudaStream_t s);

/* ---- k_rnn.cu: around cuDNN's LSTM and GRU (cudnn_rnn.c, index math in rnn_layout.h) */
/* dst [B, T, F] = src flipped in time. */
cudaError_t cuk_rnn_flip(const float *src, float *dst, int64_t B, int64_t T, int64_t F, cudaStream_t s);
/* hprev [B, T, H] = h one step earlier in the recurrence's order (zeros at its first step). */
cudaError_t cuk_rnn_hprev(const float *h, float *hprev, int64_t B, int64_t T, int64_t H, int reverse,
                          cudaStream_t s);
/* The GRU's reset gate: r [B, T, H] (holding h_prev w_hr^T) = sigmoid(r + xp_r + b_ir + b_hr),
 * xp [B, T, 3H]. */
cudaError_t cuk_gru_r(float *r, const float *xp, const float *b_ih, const float *b_hh, int64_t B, int64_t T,
                      int64_t H, cudaStream_t s);
/* dhn [B, T, H] = dxp_n r, dxp [B, T, 3H]. */
cudaError_t cuk_gru_dhn(const float *dxp, const float *r, float *dhn, int64_t B, int64_t T, int64_t H,
                        cudaStream_t s);

/* ---- k_loss.cu: POINTWISE_LOSS (kind BRISK_LOSS_*, w NULL: the plain mean) and its gradient
 * for input `which` (0 pred, 1 target); sums in double over fixed ranges, deterministic.
 * scratch: cuk_loss_scratch_bytes(). */
size_t cuk_loss_scratch_bytes(void);
cudaError_t cuk_pointwise_loss(int kind, float delta, const float *p, const float *t, const float *w, int64_t n,
                               float *out, void *scratch, cudaStream_t s);
cudaError_t cuk_pointwise_loss_grad(int kind, int which, float delta, const float *dloss, const float *p,
                                    const float *t, const float *w, float *out, int64_t n, void *scratch,
                                    cudaStream_t s);

/* ---- k_upsample.cu: UPSAMPLE2D (+GRAD) over planes [H, W] -> [H sh, W sw], nearest or
 * bilinear (align_corners false); the gradient gathers, no atomics. */
cudaError_t cuk_upsample(const float *x, float *y, int64_t planes, int64_t H, int64_t W, int sh, int sw, int bilinear,
                         cudaStream_t s);
cudaError_t cuk_upsample_grad(const float *dy, float *dx, int64_t planes, int64_t H, int64_t W, int sh, int sw,
                              int bilinear, cudaStream_t s);

/* ---- k_pool.cu: POOL2D (+GRAD) over [N, C, H, W] (nhwc: [N, H, W, C]); win = kh, kw, sh, sw,
 * ph, pw, dh, dw. arg: the max's flat position in its plane per output (NULL for average). */
cudaError_t cuk_pool_fwd(const float *x, float *y, int32_t *arg, int64_t N, int64_t C, int64_t H, int64_t W,
                         int64_t Ho, int64_t Wo, const int win[8], int max, int nhwc, cudaStream_t s);
cudaError_t cuk_pool_grad(const float *dy, const int32_t *arg, float *dx, int64_t N, int64_t C, int64_t H, int64_t W,
                          int64_t Ho, int64_t Wo, const int win[8], int max, int nhwc, cudaStream_t s);

/* ---- k_batchnorm.cu: BATCHNORM (+GRAD_GB, GRAD_X) over [N, C, S]; ws = mean [C] | invstd [C] */
cudaError_t cuk_bn_forward(const float *x, const float *gamma, const float *beta, const float *res, float *rmean,
                           float *rvar, float *y, float *ws, int64_t N, int64_t C, int64_t S, float eps,
                           float momentum, int relu, int training, cudaStream_t s);
cudaError_t cuk_bn_grad_gb(const float *dy, const float *y, const float *x, const float *ws, float *gb, int64_t N,
                           int64_t C, int64_t S, int relu, cudaStream_t s);
cudaError_t cuk_bn_grad_x(const float *dy, const float *y, const float *x, const float *ws, const float *gamma,
                          const float *gb, float *dx, int64_t N, int64_t C, int64_t S, int relu, int training,
                          cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
