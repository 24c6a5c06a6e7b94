/* graph: the static graph builder, the op table, autodiff, the memory planner and
 * the executor over a backend. Contains no kernel.
 *
 * A graph is a list of nodes in topological order (the builder appends). Each node
 * has exactly one output, always C-contiguous, of a static shape and dtype. Builder
 * functions check shapes, return the new node's id, and on error return -1 and
 * record the first error in the graph (later calls return -1 at once), so model code
 * reads straight and checks brisk_graph_error() once at the end. */
#ifndef BRISK_GRAPH_H
#define BRISK_GRAPH_H

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_MAX_INPUTS 8
#define BRISK_NAME_MAX 96

/* Ops. Attribute fields each op uses are listed beside it (see brisk_attr).
 * Inputs are x, y, ... in order. "rows" = all leading dims flattened; "last" =
 * the last dim. Unless said, inputs and output are f32. */
typedef enum brisk_op {
    /* leaves */
    BRISK_OP_INPUT = 0, /* fed each step by the loader; storage INPUT */
    BRISK_OP_PARAM,     /* a slice of the parameter arena; storage PARAM */
    BRISK_OP_CONST,     /* constant data in the graph's const blob; storage CONST; i0 = byte offset */
    /* linear algebra */
    BRISK_OP_MATMUL,    /* (a, b): trans_a, trans_b. a [..., M, K] (or [...,K,M] if trans_a),
                           b [K, N] or batched [..., K, N] with equal batch dims. out [..., M, N] */
    BRISK_OP_BIAS_ADD,  /* (x [rows, N], b [N]) */
    /* broadcasting binary (NumPy rules, out = broadcast shape) */
    BRISK_OP_ADD,
    BRISK_OP_SUB,
    BRISK_OP_MUL,
    BRISK_OP_DIV,
    BRISK_OP_SCALE,     /* (x): out = f0 * x + f1 */
    /* activations, elementwise */
    BRISK_OP_RELU,
    BRISK_OP_GELU,      /* kind: BRISK_GELU_ERF or BRISK_GELU_TANH */
    BRISK_OP_SILU,
    BRISK_OP_TANH,
    BRISK_OP_SIGMOID,
    BRISK_OP_ACT_GRAD,  /* (dy, x, y): kind = the forward op (BRISK_OP_RELU, ..., and the
                           elementwise math ops EXP .. SOFTPLUS below), i1 = gelu form, f0, f1 =
                           the forward's attributes; out = dy * f'(x); kernels may use x or y,
                           both are given */
    BRISK_OP_DROPOUT,   /* (x): f0 = p, rng = stream; out = x * mask / (1 - p); identity when
                           not training. Its backward is DROPOUT of dy with the same stream. */
    /* reductions */
    BRISK_OP_SUM,       /* (x): axes = bitmask of dims reduced, keepdim */
    BRISK_OP_MEAN,      /* (x): axes, keepdim */
    BRISK_OP_SUM_TO,    /* (x): shape2 = target shape x broadcasts from; sums the broadcast dims */
    BRISK_OP_EXPAND,    /* (x): shape2 = target shape, NumPy broadcast of x to it */
    /* normalisation and losses (over the last dim) */
    BRISK_OP_SOFTMAX,
    BRISK_OP_LOG_SOFTMAX,
    BRISK_OP_SOFTMAX_GRAD,     /* (dy, y): y = softmax output; dx = y * (dy - sum(dy*y)) */
    BRISK_OP_LOG_SOFTMAX_GRAD, /* (dy, y): y = log_softmax output; dx = dy - exp(y) * sum(dy) */
    BRISK_OP_CROSS_ENTROPY,    /* (logits [rows, C], labels i32 [rows]): scalar mean over rows of
                                  -log softmax(logits)[label]; a label outside [0, C) is a
                                  run-time error */
    BRISK_OP_CROSS_ENTROPY_GRAD, /* (dloss scalar, logits, labels): (softmax - onehot) * dloss / rows */
    BRISK_OP_MSE,              /* (pred, target) equal shapes: scalar mean((pred - target)^2) */
    BRISK_OP_MSE_GRAD,         /* (dloss scalar, pred, target): 2 (pred - target) dloss / n */
    BRISK_OP_LAYERNORM,        /* (x [rows, N], gamma [N], beta [N]): f0 = eps */
    BRISK_OP_LAYERNORM_GRAD_X, /* (dy, x [, gamma]): f0 = eps; dx of layernorm; without gamma,
                                  of LAYERNORM_XHAT (gamma = 1) */
    BRISK_OP_LAYERNORM_XHAT,   /* (x): f0 = eps; (x - mean) / sqrt(var + eps), for dgamma, and
                                  group norm's normalisation (brisk_group_norm) */
    /* shape and data movement */
    BRISK_OP_CONCAT,    /* (x0..xn-1): axis; other dims equal */
    BRISK_OP_SLICE,     /* (x): axis, i0 = start, i1 = length */
    BRISK_OP_SLICE_GRAD,/* (dy): axis, i0 = start, shape2 = full shape; zeros elsewhere */
    BRISK_OP_RESHAPE,   /* (x): shape2; a view, no copy (the planner aliases it) */
    BRISK_OP_TRANSPOSE, /* (x): perm[ndim] (out dim i = x dim perm[i]) */
    BRISK_OP_GATHER,    /* (table [V, D...], idx i32 [I...]): out [I..., D...] = table[idx];
                           out-of-range index is a run-time error */
    BRISK_OP_SCATTER_ADD, /* (dy [I..., D...], idx i32 [I...]): shape2 = table shape; zeros then
                             out[idx[i]] += dy[i]; deterministic on the CPU. Its gradient is
                             GATHER of dout by idx */
    BRISK_OP_SINUSOIDAL,  /* (t [N] i32 or f32): i0 = dim (even); out [N, dim] =
                             [sin(t f_k) | cos(t f_k)], f_k = exp(-ln(10000) k / (dim/2)) */
    BRISK_OP_SINUSOIDAL_GRAD, /* (dy [N, dim], t f32 [N]): i0 = dim; dt [N] */
    /* random (no gradient); the per-step counter comes from the step state */
    BRISK_OP_RANDN,       /* (): shape2; standard normal; rng = stream */
    BRISK_OP_RAND_UNIFORM,/* (): shape2; uniform in [f0, f1); rng = stream */
    BRISK_OP_RANDINT,     /* (): shape2; i32 uniform in [i0, i1); rng = stream */
    BRISK_OP_CAST,        /* (x): out dtype = node dtype */
    /* sequence models: fused ops. Each keeps a workspace after its output (see
       brisk_node.bytes) that its gradient ops read, so the forward's intermediates are
       saved without a second output. */
    BRISK_OP_LSTM,        /* (xp [B, T, 4H], w_hh [4H, H], bias [4H]): one LSTM layer over the
                             whole sequence, batch-first, zero initial state; kind = 1 runs
                             t = T-1 .. 0 (a bidirectional layer's reverse half). Gates in
                             PyTorch's order i, f, g, o: pre = xp[b,t] + bias + h_prev w_hh^T;
                             c = f c_prev + i g; h = o tanh(c). out h [B, T, H]; workspace
                             after it: the activated gates [B, T, 4H], c [B, T, H] and the h
                             each step started from, h_prev [B, T, H] */
    BRISK_OP_LSTM_GRAD,   /* (dh [B, T, H], lstm, w_hh): d pre-activation gates [B, T, 4H]
                             (= d xp, and d bias summed over rows); reads lstm's workspace */
    BRISK_OP_LSTM_GRAD_W, /* (dgates [B, T, 4H], lstm): d w_hh [4H, H] = sum dgates^T h_prev */
    BRISK_OP_ATTENTION,   /* (qkv [B, T, 3D] [, key mask f32 [B, T]]): multi-head scaled
                             dot-product self-attention; i0 = heads (D = heads * dh, head h
                             reads columns h dh .. of each third), kind = 1 causal, mask
                             entry 0 = that key is padding, f0 = dropout p on the attention
                             weights, rng = stream. out [B, T, D], heads side by side (ready
                             for the output projection); workspace after it: each query's
                             log-sum-exp [B, heads, T], then, with dropout (f0 > 0), the
                             kept weights as bits (brisk_attention_keep_words). A query that
                             may attend to no key gives zeros. */
    BRISK_OP_ATTENTION_GRAD, /* (dy [B, T, D], qkv, attention [, mask]): d qkv [B, T, 3D] */
    /* training glue */
    BRISK_OP_GRAD_ACCUM,  /* (g): storage GRAD at the param's offset; out = g on the first
                             micro-batch of a step, out += g on the others */
    /* vision (NCHW; CONV2D, POOL2D and their gradients also NHWC). win = kernel, stride,
       padding (both sides), dilation, groups, layout. */
    BRISK_OP_CONV2D,      /* (x [N, C, H, W], w [Co, C/groups, kh, kw]): win; out [N, Co, Ho, Wo],
                             Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1 (floor), as
                             torch.nn.functional.conv2d; no bias (add one with ADD). With
                             win.layout BRISK_LAYOUT_NHWC x is [N, H, W, C] and out
                             [N, Ho, Wo, Co]; w keeps its [Co, C/groups, kh, kw] shape */
    BRISK_OP_CONV2D_GRAD_X, /* (dy, w): win; dx, shape = x's. It is also the forward of a
                             transposed convolution (brisk_conv_transpose2d: dy = its input,
                             w [C_in, C_out/groups, kh, kw] as PyTorch's ConvTranspose2d), so it
                             has a backward rule: CONV2D of the gradient by w, and CONV2D_GRAD_W */
    BRISK_OP_CONV2D_GRAD_W, /* (dy, x): win; dw, shape = w's */
    BRISK_OP_BATCHNORM,   /* (x [N, C, ...], gamma [C], beta [C], running_mean [C], running_var [C]
                             [, residual shaped as x]): f0 = eps, f1 = momentum, kind = 1: ReLU
                             after. y = (x - m) / sqrt(v + eps) gamma + beta (+ residual), m, v
                             the batch's mean and biased variance per channel when training (and
                             then the running buffers, which this op WRITES, move by momentum
                             toward m and the unbiased variance, as PyTorch), the running ones in
                             eval. Workspace after out: the m and 1 / sqrt(v + eps) used [2, C] */
    BRISK_OP_BATCHNORM_GRAD_GB, /* (dy, batchnorm, x): [2, C]: dgamma = sum dy' xhat, dbeta =
                             sum dy', dy' = dy masked by the fused ReLU */
    BRISK_OP_BATCHNORM_GRAD_X,  /* (dy, batchnorm, x, gamma, grad_gb): dx (batch statistics'
                             gradient when training, the affine map's in eval) */
    BRISK_OP_POOL2D,      /* (x [N, C, H, W]): kind BRISK_POOL_MAX (padding is -inf, dilation
                             allowed, NaN wins) or BRISK_POOL_AVG (padding counts as zeros in
                             the mean: count_include_pad); win; out [N, C, Ho, Wo] (NHWC: x
                             [N, H, W, C], out [N, Ho, Wo, C]); max keeps a workspace after it:
                             each window's argmax, i32 flat in its plane, where its output is */
    BRISK_OP_POOL2D_GRAD, /* (dy [, pool2d for max]): kind, win; dx, shape = x's; max sends dy
                             to the first maximum of each window, as PyTorch */
    /* graph networks */
    BRISK_OP_SEGMENT_SUM, /* (x [I, D...], idx i32 [I] non-decreasing): shape2 = [V, D...];
                             out[v] = sum of the rows i with idx[i] = v, added in order of i
                             (zeros for an empty segment). Unsorted or out-of-range indices
                             are a run-time error. A sorted-segment reduction: no atomics,
                             bit-identical for any thread count. The CPU always runs this
                             segmented reduction; a device backend may use atomics instead
                             unless --deterministic (speed.deterministic). Its unsorted
                             counterpart is SCATTER_ADD */
    /* elementwise math (x), f32. Each differentiates through ACT_GRAD with kind = the op,
       which takes its attributes (f0, f1) along; gradients at the kinks as PyTorch's */
    BRISK_OP_EXP,
    BRISK_OP_LOG,         /* natural log: log 0 = -inf, a negative x gives NaN */
    BRISK_OP_SQRT,        /* gradient dy / (2 sqrt x): inf at 0 */
    BRISK_OP_ABS,         /* gradient dy sign(x): 0 at x = 0 */
    BRISK_OP_POW,         /* (x): f0 = the exponent p (a constant): x^p (x x for p = 2, x x x for 3,
                             sqrt for 0.5, 1 / x for -1, 1 for 0, ..., powf otherwise); gradient
                             p x^(p-1) dy, 0 for p = 0 */
    BRISK_OP_CLAMP,       /* (x): f0 = lo, f1 = hi (-inf / +inf: no bound): min(max(x, lo), hi),
                             NaN stays NaN, lo > hi gives hi; the gradient passes where
                             lo <= x <= hi (inclusive), 0 elsewhere */
    /* activations with a parameter: ACT_GRAD kinds, fused after a GEMM + bias where the
       SiLU/tanh/sigmoid epilogues are (the CPU's) */
    BRISK_OP_LEAKY_RELU,  /* (x): f0 = negative slope: x > 0 ? x : f0 x; gradient f0 at 0 */
    BRISK_OP_ELU,         /* (x): f0 = alpha: x > 0 ? x : f0 (e^x - 1); gradient f0 at 0 */
    BRISK_OP_SOFTPLUS,    /* (x): f0 = beta, f1 = threshold: beta x > threshold ? x :
                             log(1 + e^(beta x)) / beta (torch.nn.Softplus) */
    /* broadcasting binary (NumPy rules, as ADD) */
    BRISK_OP_MINIMUM,     /* NaN when either is NaN; on a tie each input gets dy / 2 (PyTorch) */
    BRISK_OP_MAXIMUM,     /* likewise */
    BRISK_OP_POW_XY,      /* x^y (powf); d/dx = y x^(y-1) (0 where y = 0), d/dy = x^y log x
                             (0 where x = 0 and y >= 0), as PyTorch */
    BRISK_OP_BINARY_GRAD, /* (dy, x, y): kind = MINIMUM, MAXIMUM or POW_XY, i0 = which input
                             (0: x, 1: y); the gradient in dy's (the broadcast) shape, which the
                             backward rule then sums to the input's shape (SUM_TO) */
    /* losses over every element (the mean of pointwise terms), scalar f32 */
    BRISK_OP_POINTWISE_LOSS, /* (pred, target [, weight]) all one shape: kind BRISK_LOSS_*, f0 =
                             Huber's delta. l = (p - t)^2 (MSE), |p - t| (L1), Huber, or
                             max(p, 0) - p t + log(1 + e^-|p|) (BCE with logits, p the logit).
                             Without weight the mean of l; with it the masked mean
                             sum(w l) / sum(w), and 0 (gradient 0) when sum(w) = 0: a batch
                             whose every element is masked out adds nothing. Sums in double,
                             deterministic. The weight takes no gradient */
    BRISK_OP_POINTWISE_LOSS_GRAD, /* (dloss scalar, pred, target [, weight]): kind, f0, i0 = which
                             input (0: pred, 1: target); the gradient of that input */
    /* resampling (NCHW) */
    BRISK_OP_UPSAMPLE2D,  /* (x [N, C, H, W]): kind BRISK_UPSAMPLE_NEAREST or _BILINEAR
                             (align_corners false, as torch.nn.Upsample), i0 = integer scale
                             of H, i1 of W; out [N, C, H i0, W i1] */
    BRISK_OP_UPSAMPLE2D_GRAD, /* (dy): kind, i0, i1; dx, shape = x's: each input element sums
                             the dy it fed, in a fixed order (no atomics) */
    /* sequence models, continued (a workspace after the output, as LSTM) */
    BRISK_OP_GRU,         /* (xp [B, T, 3H], w_hh [3H, H], b_ih [3H], b_hh [3H]): one GRU layer
                             over the whole sequence as torch.nn.GRU, batch-first, zero initial
                             state, xp = x w_ih^T (no bias); kind = 1 runs t = T-1 .. 0. Gates
                             in PyTorch's order r, z, n with hh = h_prev w_hh^T + b_hh:
                             r = sigmoid(xp_r + b_ir + hh_r), z likewise,
                             n = tanh(xp_n + b_in + r hh_n), h = n + z (h_prev - n). out h
                             [B, T, H]; workspace after it: the gates r, z, n [B, T, 3H], hh_n
                             [B, T, H] and the h each step started from, h_prev [B, T, H] */
    BRISK_OP_GRU_GRAD,    /* (dh [B, T, H], gru, w_hh): d xp [B, T, 3H] (the pre-activation
                             gradients of the input side: d b_ih is their row sum); workspace
                             after it: d hh_n = d xp_n r [B, T, H], the recurrent side's n part */
    BRISK_OP_GRU_GRAD_W,  /* (dxp, gru): out [3H, H] d w_hh = sum dhh^T h_prev; or (dxp, gru,
                             d b_ih [3H]): out [3H] d b_hh = the row sum of dhh; where dhh =
                             [d xp_r, d xp_z, d hh_n] (d hh_n from dxp's workspace; the row sums
                             of d xp_r and d xp_z are d b_ih's) */
    /* elementwise math, continued (an ACT_GRAD kind as EXP) */
    BRISK_OP_ERF,         /* (x): erf x; gradient dy 2/sqrt(pi) e^(-x^2) */
    BRISK_OP_COUNT
} brisk_op;

enum { BRISK_GELU_ERF = 0, BRISK_GELU_TANH = 1 };
enum { BRISK_POOL_MAX = 0, BRISK_POOL_AVG = 1 };
/* POINTWISE_LOSS kinds */
enum { BRISK_LOSS_MSE = 0, BRISK_LOSS_L1 = 1, BRISK_LOSS_HUBER = 2, BRISK_LOSS_BCE_LOGITS = 3 };
/* UPSAMPLE2D modes */
enum { BRISK_UPSAMPLE_NEAREST = 0, BRISK_UPSAMPLE_BILINEAR = 1 };
/* Activation layouts of the vision ops: channels second (PyTorch's default) or last
 * (channels_last; what tensor-core convolutions read). Weights are [Co, C/groups, kh, kw]
 * in both, so a checkpoint does not depend on the layout. */
enum { BRISK_LAYOUT_NCHW = 0, BRISK_LAYOUT_NHWC = 1 };

/* A 2-D sliding window: CONV2D, POOL2D and their gradients. */
typedef struct brisk_window {
    int kh, kw;   /* kernel (CONV2D: from the weight's shape) */
    int sh, sw;   /* stride */
    int ph, pw;   /* zero (max pool: -inf) padding on each side */
    int dh, dw;   /* dilation */
    int groups;   /* CONV2D: C and Co are both multiples of it */
    int layout;   /* BRISK_LAYOUT_NCHW (0, the default) or BRISK_LAYOUT_NHWC (CONV2D, POOL2D) */
} brisk_window;

typedef struct brisk_attr {
    int trans_a, trans_b;      /* MATMUL */
    int axis;                  /* CONCAT, SLICE, SLICE_GRAD */
    uint32_t axes;             /* SUM, MEAN: bit i set = reduce dim i */
    int keepdim;               /* SUM, MEAN */
    int kind;                  /* GELU form; ACT_GRAD, BINARY_GRAD: forward op; LSTM, GRU: reverse;
                                  ATTENTION: causal; BATCHNORM: fused ReLU; POOL2D: max or avg;
                                  POINTWISE_LOSS: BRISK_LOSS_*; UPSAMPLE2D: mode */
    int perm[BRISK_MAX_DIMS];  /* TRANSPOSE */
    float f0, f1;              /* SCALE, DROPOUT p, LAYERNORM eps, RAND_UNIFORM range, ATTENTION p,
                                  BATCHNORM eps and momentum, POW exponent, CLAMP bounds, the
                                  parameters of LEAKY_RELU, ELU, SOFTPLUS (and their ACT_GRAD),
                                  POINTWISE_LOSS delta */
    int64_t i0, i1;            /* SLICE, RANDINT, SINUSOIDAL dim, CONST offset, ACT_GRAD gelu form,
                                  ATTENTION heads, BINARY_GRAD and POINTWISE_LOSS_GRAD input,
                                  UPSAMPLE2D scales */
    uint32_t rng;              /* random ops, DROPOUT, ATTENTION: the stream id (unique per op) */
    brisk_shape shape2;        /* RESHAPE, SUM_TO, EXPAND, SLICE_GRAD, SCATTER_ADD, SEGMENT_SUM, RAND* */
    brisk_window win;          /* CONV2D, POOL2D and their gradients */
} brisk_attr;

/* Where a node's output lives. */
typedef enum brisk_storage {
    BRISK_STORE_ARENA = 0, /* the activation arena, offset by the planner */
    BRISK_STORE_INPUT,     /* the input area, offset at build time */
    BRISK_STORE_PARAM,     /* the parameter arena */
    BRISK_STORE_GRAD,      /* the gradient arena (GRAD_ACCUM outputs) */
    BRISK_STORE_CONST,     /* the const blob */
    BRISK_STORE_ALIAS      /* a view of another node's buffer (RESHAPE) */
} brisk_storage;

typedef struct brisk_node {
    brisk_op op;
    int n_in;
    int in[BRISK_MAX_INPUTS];
    brisk_dtype dtype;
    brisk_shape shape;
    brisk_attr attr;
    char name[BRISK_NAME_MAX];   /* params, inputs, consts; "" for others */
    uint8_t requires_grad;       /* depends on a PARAM (or a float INPUT marked as needing grad) */
    uint8_t keep;                /* stays live to the end of a run, so brisk_exec_read can read it
                                    afterwards (the loss and output always do); set before planning */
    /* placement (builder for leaves, planner for ARENA) */
    brisk_storage storage;
    size_t offset;               /* bytes into its storage; SIZE_MAX for an ARENA node no
                                    schedule runs (the planner places only those) */
    size_t bytes;                /* numel * dtype size, plus the workspace that the fused
                                    sequence ops (LSTM, GRU, ATTENTION) keep after their output */
    int alias_of;                /* ALIAS: the node whose buffer this views */
    int segment;                 /* recompute segment (brisk_graph_recompute_begin), 0: none */
} brisk_node;

/* How a parameter starts. */
typedef enum brisk_init_kind {
    BRISK_INIT_ZEROS = 0,
    BRISK_INIT_ONES,
    BRISK_INIT_UNIFORM,  /* U(-a, a) with a = init_scale */
    BRISK_INIT_NORMAL,   /* N(0, init_scale^2) */
    BRISK_INIT_GIVEN     /* values held by the graph (brisk_param_given): an imported model's */
} brisk_init_kind;

typedef struct brisk_param_info {
    char name[BRISK_NAME_MAX];  /* stable, PyTorch-style: "net.0.weight" */
    int node;
    brisk_shape shape;
    size_t offset;              /* floats into the param (and grad, m, v) arenas */
    int64_t numel;
    brisk_init_kind init;
    float init_scale;
    int decay;                  /* 1: weight decay applies (weights), 0: biases, norms */
    int buffer;                 /* 1: state, not a parameter (BatchNorm's running statistics):
                                   saved in checkpoints, written by its op, never by the
                                   optimizer; no gradient, not counted as a parameter */
    int grad_node;              /* after autodiff: the GRAD_ACCUM node, else -1 */
    size_t given;               /* GIVEN: floats into the graph's given_data */
} brisk_param_info;

/* Bytes every buffer in an executor's areas starts at a multiple of: the arena's (the planner),
 * the inputs' and the constants' (the builder); a caller's batch read in place must be too. */
#define BRISK_AREA_ALIGN 64

typedef struct brisk_input_info {
    char name[BRISK_NAME_MAX];
    int node;
    brisk_dtype dtype;
    brisk_shape shape;          /* whole batch, batch dim first */
    size_t offset, bytes;       /* in the input area */
} brisk_input_info;

typedef struct brisk_graph {
    brisk_node *nodes;
    int n_nodes, cap_nodes;
    brisk_param_info *params;
    int n_params, cap_params;
    int64_t n_param_floats;     /* size of the param, grad, m and v arenas, in floats */
    brisk_input_info *inputs;
    int n_inputs, cap_inputs;
    size_t input_bytes;
    unsigned char *const_data;  /* host copy of all CONST data */
    size_t const_bytes, const_cap;
    float *given_data;          /* the starting values of GIVEN params, host only */
    size_t given_n, given_cap;  /* floats */
    uint32_t next_rng_stream;
    int loss;                   /* scalar loss node, -1 until set */
    int output;                 /* prediction node, -1 until set */
    int *grad_of;               /* after autodiff: gradient node of each node, or -1 */
    int n_forward;              /* nodes [0, n_forward) are the forward graph */
    int cur_segment, n_segments; /* recompute segments: the open one (0: none), how many */
    int grads_in_place;         /* set before brisk_plan_build when every step is one micro-batch:
                                   a gradient read by its GRAD_ACCUM alone is written straight
                                   into the gradient arena, and that GRAD_ACCUM has nothing to do */
    brisk_error err;            /* first builder error; err.code == BRISK_OK if none */
} brisk_graph;

brisk_graph *brisk_graph_new(void);
void brisk_graph_free(brisk_graph *g);
/* The first error a builder call recorded (BRISK_OK if none); copies it to err. */
brisk_status brisk_graph_error(const brisk_graph *g, brisk_error *err);
const char *brisk_op_name(brisk_op op);
/* 0 for data-movement ops (any dtype), 1 for ops that compute in f32. */
int brisk_op_is_float(brisk_op op);
/* Every backend's dtype rule: float ops compute in f32, data movement takes any dtype,
 * RANDINT makes i32. 0 with why (may be NULL) filled when node breaks it. */
int brisk_op_dtype_ok(const brisk_node *node, char *why, size_t why_size);
/* The checks every backend makes before running node `id`: input ids in range, f32 inputs
 * to float ops except their index and label inputs, and for POINTWISE_LOSS(_GRAD),
 * BINARY_GRAD and UPSAMPLE2D(_GRAD) their input counts, sizes and attributes (so both
 * backends give the same error for the same bad graph). */
brisk_status brisk_node_check_inputs(const brisk_graph *g, int id, brisk_error *err);
/* 1 when ACT_GRAD differentiates forward op `kind`: the activations and the elementwise
 * math ops. */
int brisk_act_grad_kind_ok(int kind);

/* ---- leaves */
int brisk_input(brisk_graph *g, const char *name, brisk_dtype dt, brisk_shape s);
int brisk_param(brisk_graph *g, const char *name, brisk_shape s, brisk_init_kind init,
                float init_scale, int decay);
/* A buffer (brisk_param_info.buffer): lives in the parameter arena under its name (so
 * checkpoints save it and predict loads it) but takes no gradient and no optimizer update;
 * init ZEROS or ONES. */
int brisk_buffer(brisk_graph *g, const char *name, brisk_shape s, brisk_init_kind init);
/* Sets the starting values of param (or buffer) node `param`: its init becomes GIVEN and
 * numel floats are copied into the graph, so that brisk_exec_init_params writes them
 * whatever the seed (an imported model's weights). -1 with the graph's error set on failure. */
int brisk_param_given(brisk_graph *g, int param, const float *values);
/* Names are unique per kind. A const's name may be NULL or "" (anonymous, never
 * clashes); its data is copied. */
int brisk_const(brisk_graph *g, const char *name, brisk_dtype dt, brisk_shape s, const void *data);

/* ---- ops (return node id, -1 on error) */
int brisk_matmul(brisk_graph *g, int a, int b, int trans_a, int trans_b);
int brisk_bias_add(brisk_graph *g, int x, int b);
int brisk_add(brisk_graph *g, int x, int y);
int brisk_sub(brisk_graph *g, int x, int y);
int brisk_mul(brisk_graph *g, int x, int y);
int brisk_div(brisk_graph *g, int x, int y);
int brisk_scale(brisk_graph *g, int x, float a, float b);
int brisk_relu(brisk_graph *g, int x);
int brisk_gelu(brisk_graph *g, int x, int form);
int brisk_silu(brisk_graph *g, int x);
int brisk_tanh(brisk_graph *g, int x);
int brisk_sigmoid(brisk_graph *g, int x);
int brisk_dropout(brisk_graph *g, int x, float p);
int brisk_sum(brisk_graph *g, int x, uint32_t axes, int keepdim);
int brisk_mean(brisk_graph *g, int x, uint32_t axes, int keepdim);
int brisk_sum_to(brisk_graph *g, int x, brisk_shape target);
int brisk_expand(brisk_graph *g, int x, brisk_shape target);
int brisk_softmax(brisk_graph *g, int x);
int brisk_log_softmax(brisk_graph *g, int x);
int brisk_cross_entropy(brisk_graph *g, int logits, int labels);
int brisk_mse(brisk_graph *g, int pred, int target);
int brisk_layernorm(brisk_graph *g, int x, int gamma, int beta, float eps);
int brisk_concat(brisk_graph *g, const int *xs, int n, int axis);
int brisk_slice(brisk_graph *g, int x, int axis, int64_t start, int64_t len);
int brisk_reshape(brisk_graph *g, int x, brisk_shape s);
int brisk_transpose(brisk_graph *g, int x, const int *perm);
int brisk_gather(brisk_graph *g, int table, int idx);
int brisk_sinusoidal(brisk_graph *g, int t, int dim);
/* Segment sum of the rows of x [I, D...] by idx i32 [I] into [segments, D...] (PyTorch's
 * zeros(...).index_add_(0, idx, x)). sorted = 1 promises idx is non-decreasing (graph edges
 * ordered by receiver at construction): SEGMENT_SUM, the deterministic segmented
 * reduction; sorted = 0: SCATTER_ADD. An idx CONST is checked here, else when it runs. */
int brisk_segment_sum(brisk_graph *g, int x, int idx, int64_t segments, int sorted);
/* The same divided by each segment's row count (empty segments give zeros); idx must be a
 * CONST, so the counts are known when the graph is built. */
int brisk_segment_mean(brisk_graph *g, int x, int idx, int64_t segments, int sorted);
int brisk_randn(brisk_graph *g, brisk_shape s);
int brisk_rand_uniform(brisk_graph *g, brisk_shape s, float lo, float hi);
int brisk_randint(brisk_graph *g, brisk_shape s, int64_t lo, int64_t hi);
int brisk_cast(brisk_graph *g, int x, brisk_dtype dt);
/* One LSTM layer over the sequence (BRISK_OP_LSTM): xp = x w_ih^T, the input projection of
 * every step as one matmul; bias = b_ih + b_hh. Returns h [B, T, H]. */
int brisk_lstm(brisk_graph *g, int xp, int w_hh, int bias, int reverse);
/* One GRU layer over the sequence (BRISK_OP_GRU): xp = x w_ih^T, the input projection of
 * every step as one matmul (no bias: b_ih and b_hh go in apart, since b_hh's n part sits
 * inside the reset gate's product). Returns h [B, T, H]. */
int brisk_gru(brisk_graph *g, int xp, int w_hh, int b_ih, int b_hh, int reverse);
/* Self-attention over packed qkv [B, T, 3D] (BRISK_OP_ATTENTION); mask -1 for none. */
int brisk_attention(brisk_graph *g, int qkv, int mask, int heads, int causal, float dropout);
/* 32-bit words of ATTENTION's dropout mask per (sample, head): bit k % 32 of word k / 32 is
 * 1 iff weight k of the T x T block is kept. The CPU backend's forward writes them (after
 * the lse) so its backward need not redraw them from Philox. */
static inline size_t brisk_attention_keep_words(int64_t T) { return (size_t)((T * T + 31) / 32); }
/* ATTENTION's workspace after its output: the lse [B, heads, T] and, with dropout, the
 * mask bits of each (sample, head). */
static inline size_t brisk_attention_workspace_bytes(int64_t B, int64_t T, int64_t heads, int dropout) {
    size_t items = (size_t)(B * heads);
    return items * (size_t)T * sizeof(float) + (dropout ? items * brisk_attention_keep_words(T) * sizeof(uint32_t) : 0);
}
/* ---- vision (NCHW). brisk_window_2d: a square kernel k, stride, padding; dilation 1,
 * groups 1, layout NCHW. CONV2D takes the kernel size from w [Co, C/groups, kh, kw]
 * (PyTorch's layout) and win's stride, padding, dilation, groups and layout (NHWC: x
 * [N, H, W, C], out [N, Ho, Wo, Co]). */
brisk_window brisk_window_2d(int k, int stride, int pad);
int brisk_conv2d(brisk_graph *g, int x, int w, brisk_window win);
/* BatchNorm over dim 1 (BatchNorm2d on [N, C, H, W], BatchNorm1d on [N, C]); running_mean
 * and running_var are buffers (brisk_buffer), residual -1 for none, relu fuses a ReLU after
 * the (residual) add. PyTorch's defaults: eps 1e-5, momentum 0.1. */
int brisk_batchnorm(brisk_graph *g, int x, int gamma, int beta, int running_mean, int running_var,
                    int residual, float eps, float momentum, int relu);
/* The same with the channels last (x [N, H, W, C], NHWC, or any [..., C]): BATCHNORM over
 * x viewed as [numel / C, C] (the same statistics: per channel over every other dim),
 * returned in x's shape. */
int brisk_batchnorm_nhwc(brisk_graph *g, int x, int gamma, int beta, int running_mean, int running_var,
                         int residual, float eps, float momentum, int relu);
/* kind BRISK_POOL_MAX or BRISK_POOL_AVG. Global average pooling is MEAN over dims 2 and 3. */
int brisk_pool2d(brisk_graph *g, int x, int kind, brisk_window win);
/* The mean over H and W of x [N, C, H, W] (layout NHWC: [N, H, W, C]): [N, C]. */
int brisk_global_avg_pool2d(brisk_graph *g, int x, int layout);
/* Transposed convolution as torch.nn.functional.conv_transpose2d: x [N, C_in, H, W], w [C_in,
 * C_out/groups, kh, kw] (PyTorch's ConvTranspose2d weight), win's stride, padding, dilation,
 * groups and layout; out [N, C_out, Ho, Wo], Ho = (H - 1) sh - 2 ph + dh (kh - 1) + out_pad_h + 1.
 * 0 <= out_pad < stride (output_padding: rows and columns added at the end, which only the
 * taps past the last input reach). It is CONV2D_GRAD_X of x by w: the same kernels. */
int brisk_conv_transpose2d(brisk_graph *g, int x, int w, brisk_window win, int out_pad_h, int out_pad_w);
/* 1-D convolution as torch.nn.functional.conv1d: x [N, C, L], w [Co, C/groups, k]; out [N, Co,
 * Lo]. A CONV2D with H = 1 through views (RESHAPE: no copies), so exactly CONV2D's arithmetic. */
int brisk_conv1d(brisk_graph *g, int x, int w, int stride, int pad, int dilation, int groups);
/* 2-D upsampling of x [N, C, H, W] by integer factors: mode BRISK_UPSAMPLE_NEAREST or
 * BRISK_UPSAMPLE_BILINEAR (align_corners false), as torch.nn.Upsample(scale_factor=...). */
int brisk_upsample2d(brisk_graph *g, int x, int mode, int scale_h, int scale_w);

/* ---- normalisation */
/* Group normalisation as torch.nn.GroupNorm: x [N, C, ...] in `groups` groups of C/groups
 * channels, each (sample, group) normalised over its channels and positions (biased
 * variance), then gamma [C] and beta [C] per channel (-1 for none: affine off). Composed of
 * views, LAYERNORM_XHAT over rows of one group, and a broadcast MUL and ADD. */
int brisk_group_norm(brisk_graph *g, int x, int gamma, int beta, int groups, float eps);

/* ---- elementwise math and activations (see the ops for their attributes) */
int brisk_exp(brisk_graph *g, int x);
int brisk_ln(brisk_graph *g, int x); /* the natural log (brisk_log is the logger) */
int brisk_sqrt(brisk_graph *g, int x);
int brisk_abs(brisk_graph *g, int x);
int brisk_erf(brisk_graph *g, int x);
int brisk_pow(brisk_graph *g, int x, float p);
/* lo or hi may be -INFINITY / INFINITY for a one-sided clamp */
int brisk_clamp(brisk_graph *g, int x, float lo, float hi);
int brisk_minimum(brisk_graph *g, int x, int y);
int brisk_maximum(brisk_graph *g, int x, int y);
int brisk_pow_xy(brisk_graph *g, int x, int y);
/* PyTorch's defaults: slope 0.01; alpha 1; beta 1, threshold 20 */
int brisk_leaky_relu(brisk_graph *g, int x, float slope);
int brisk_elu(brisk_graph *g, int x, float alpha);
int brisk_softplus(brisk_graph *g, int x, float beta, float threshold);

/* ---- losses over every element (BRISK_OP_POINTWISE_LOSS): pred and target of one shape;
 * weight -1 for none (the mean), else a per-element weight or mask that broadcasts to
 * pred's shape (it is expanded), giving sum(w l) / sum(w), 0 when sum(w) = 0. The weight
 * must not depend on parameters (it takes no gradient). kind BRISK_LOSS_MSE without weight
 * is BRISK_OP_MSE. delta: Huber's (PyTorch's default 1), ignored by the others. */
int brisk_pointwise_loss(brisk_graph *g, int kind, int pred, int target, int weight, float delta);
/* torch.nn.BCEWithLogitsLoss (mean; its weight= is a plain multiplier, this one a mask) */
int brisk_bce_with_logits(brisk_graph *g, int logits, int target, int weight);
int brisk_l1_loss(brisk_graph *g, int pred, int target, int weight);
int brisk_huber_loss(brisk_graph *g, int pred, int target, float delta, int weight);

/* ---- embedding and flatten */
/* Rows of table [V, D] by i32 indices idx [I...]: out [I..., D] (GATHER; its gradient is
 * SCATTER_ADD, deterministic on the CPU and under --deterministic on CUDA, repeated
 * indices summed in index order). An index outside [0, V) is a run-time error. */
int brisk_embedding(brisk_graph *g, int table, int idx);
/* x viewed with dims start_dim .. last merged into one (torch.flatten(x, start_dim)); a view. */
int brisk_flatten(brisk_graph *g, int x, int start_dim);
/* Generic append used by the builders and backward rules: checks nothing beyond
 * input ids; the caller has computed shape and dtype. */
int brisk_graph_append(brisk_graph *g, brisk_op op, const int *in, int n_in, brisk_dtype dt,
                       brisk_shape s, const brisk_attr *attr);
/* Activation recomputation: the compute nodes appended between begin and end form one
 * segment. brisk_backward keeps only what enters a segment and, just before the segment's
 * gradient, appends the segment's forward again (random ops excepted: their outputs are
 * kept, so the masks are the same) for the gradient rules to read, so the planner frees
 * the segment's activations after their forward use. Segments do not nest. */
int brisk_graph_recompute_begin(brisk_graph *g);
void brisk_graph_recompute_end(brisk_graph *g);
/* Records a builder error (first one wins) and returns -1. */
int brisk_graph_fail(brisk_graph *g, brisk_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- op table (ggml style: one entry per op, a static assertion on the count) */
typedef struct brisk_op_info {
    /* Appends nodes for the gradient of `node` with respect to its input `which`,
     * given dy (the gradient of its output); returns the gradient node, or -1 with
     * no error recorded when that input takes no gradient. NULL: no gradient. */
    int (*backward)(brisk_graph *g, int node, int dy, int which);
} brisk_op_info;
extern const brisk_op_info brisk_op_table[BRISK_OP_COUNT];

/* ---- autodiff
 * Appends, in reverse order, the gradient nodes of every node the loss depends on,
 * summing contributions of nodes with several consumers, then one GRAD_ACCUM node
 * per parameter (storage GRAD). Sets g->loss, g->grad_of and params[].grad_node.
 * The loss must be a scalar f32. A parameter the loss does not depend on gets a
 * zero gradient (its GRAD_ACCUM writes zeros). */
brisk_status brisk_backward(brisk_graph *g, int loss, brisk_error *err);

/* ---- memory plan */
/* Orders hold compute nodes only: no leaves (INPUT, PARAM, CONST) and no RESHAPE
 * (a view: it runs nothing). train_order also computes g->output, so eval and
 * predict, subsequences of it, run only nodes the plan has placed. */
typedef struct brisk_plan {
    int *train_order;   /* nodes one micro-step runs: forward + backward + GRAD_ACCUM, each
                           GRAD_ACCUM right after its gradient is computed */
    int n_train;
    int *eval_order;    /* nodes the loss (and output) needs, forward only */
    int n_eval;
    int *predict_order; /* nodes g->output needs */
    int n_predict;
    size_t arena_bytes;      /* size of the activation arena (exact) */
    size_t peak_live_bytes;  /* max over the schedule of the bytes live at once */
    size_t param_bytes;      /* each of params, grads, m, v */
    size_t input_bytes, const_bytes;
} brisk_plan;

/* Orders nodes, computes lifetimes over train_order (a node lives from its
 * definition to its last use; aliases extend their base), and assigns arena
 * offsets greedily by size into the best-fitting gap, 64-byte aligned. */
brisk_status brisk_plan_build(brisk_graph *g, brisk_plan *plan, brisk_error *err);
void brisk_plan_free(brisk_plan *plan);
/* Total bytes a run needs on the device: arena + 4 param arenas + inputs + consts. */
size_t brisk_plan_total_bytes(const brisk_plan *plan);
/* Model FLOPs (src/ops/flops.c): the multiply-add work of one node, 2 flops per
 * multiply-add, for MATMUL, the LSTM, GRU and attention ops and the convolutions; 0 for the
 * ops whose cost is memory traffic. Per training micro-step: the sum over train_order. */
double brisk_node_flops(const brisk_graph *g, int id);
double brisk_plan_train_flops(const brisk_graph *g, const brisk_plan *plan);
/* For each range [offsets[r], +counts[r]) of the gradient arena (floats): the position in
 * train_order of the last node that writes into it (its last GRAD_ACCUM), or -1 when none
 * does (a buffer's slot, which stays zero). After that node has run the range holds the
 * micro-step's final gradient: data parallel reduces it while backward goes on. */
void brisk_plan_grad_ready(const brisk_graph *g, const brisk_plan *plan, const int64_t *offsets,
                           const int64_t *counts, int n_ranges, int *last);

/* ---- per-step values. On the CPU a host struct; on CUDA it lives in device memory
 * so that a captured graph never needs re-capture. */
/* A step's logged losses: the total and up to 16 terms (a model with several losses). */
#define BRISK_LOSS_LOG_WIDTH 17

typedef struct brisk_step_state {
    uint64_t seed;
    uint32_t rng_step;     /* counts micro-steps; random ops use it as counter word 3 */
    uint32_t first_micro;  /* 1 on the first micro-batch of an optimizer step */
    uint32_t training;     /* 0 in eval and predict: dropout is identity */
    uint32_t loss_slot;    /* where a backend's loss log records this micro-step (loss_log);
                              ignored by backends without one */
    uint32_t rng_shard;    /* data parallel: this rank's slice of the global batch. A random
                              op's element i draws as element rng_shard * numel + i of the
                              global batch's tensor would (batch-major), so N ranks draw what
                              one process of the N-fold batch draws. 0 in one process. */
} brisk_step_state;

/* ---- optimizer update over the parameter arena (one fused pass) */
typedef enum { BRISK_OPTIM_SGD = 0, BRISK_OPTIM_ADAMW } brisk_optim_kind;
typedef struct brisk_optim_args {
    brisk_optim_kind kind;
    float lr;
    float beta1, beta2, eps;   /* AdamW */
    float momentum;            /* SGD; 0 = plain SGD */
    int nesterov;              /* SGD */
    float weight_decay;        /* AdamW: decoupled (p -= lr*wd*p); SGD: added to the gradient */
    int64_t t;                 /* 1-based optimizer step, for Adam's bias correction */
    float grad_scale;          /* multiplies every gradient first: 1/accumulate (and 1/loss scale) */
    float clip_norm;           /* > 0: scale gradients by min(1, clip/(norm + 1e-6)) as PyTorch's
                                  clip_grad_norm_, norm = sqrt(*sumsq) * grad_scale */
    int skip_nonfinite;        /* 1: gradients holding an inf/NaN change nothing (train.skip_nan_steps).
                                  For a backend that updates before the host sees the loss (a
                                  replayed device step); the CPU trainer skips on the loss itself */
} brisk_optim_args;

/* What a backend can report about itself while running (zero/-1 where it has nothing). */
typedef struct brisk_backend_stats {
    int64_t skipped_steps;   /* optimizer steps the loss scaler skipped (inf/NaN gradients) */
    float loss_scale;        /* the dynamic loss scale now; 0 without a scaler */
    int util_percent;        /* device utilisation, -1 when unknown */
    size_t mem_used, mem_total; /* device memory in bytes, 0 when unknown */
    size_t mem_free;         /* device memory this process could still allocate (cudaMemGetInfo) */
    double copy_s;           /* time the device spent copying batches in (upload_input), total */
} brisk_backend_stats;

/* The dynamic loss scaler's state (fp16), which checkpoints carry so that a resumed run
 * goes on with the same scale, growth count and skip count. */
typedef struct brisk_scaler_state {
    int active;              /* 0: no scaler now (the other fields mean nothing) */
    float scale;
    int64_t growth;          /* clean steps since the scale last changed */
    int64_t skipped;         /* updates it skipped so far (not counted in AdamW's t) */
} brisk_scaler_state;

/* ---- backend: a small vtable. A backend runs one node at a time over resolved
 * buffer pointers; the executor owns the schedule. */
typedef struct brisk_backend brisk_backend;
typedef struct brisk_exec brisk_exec;
/* One row of a backend's report of its optimizations (brisk_backend.optimizations). */
typedef void (*brisk_backend_row_fn)(void *user, const char *name, const char *state, const char *detail);

struct brisk_backend {
    const char *name;  /* "cpu", "cuda" */
    void *impl;
    int host_memory;   /* 1: its buffers are host memory, so a node may read a caller's
                          (brisk_exec_use_input) */
    brisk_status (*alloc)(brisk_backend *be, size_t bytes, void **out, brisk_error *err);
    void (*free)(brisk_backend *be, void *p);
    brisk_status (*upload)(brisk_backend *be, void *dst, const void *src, size_t bytes, brisk_error *err);
    brisk_status (*download)(brisk_backend *be, void *dst, const void *src, size_t bytes, brisk_error *err);
    brisk_status (*memset0)(brisk_backend *be, void *dst, size_t bytes, brisk_error *err);
    /* Runs node `id`: in[i] points at input i's buffer, out at the node's buffer. */
    brisk_status (*run_node)(brisk_backend *be, const brisk_graph *g, int id, const void *const *in,
                             void *out, const brisk_step_state *st, brisk_error *err);
    /* 1 when run_node has a kernel for node (op, dtype); 0 with why (may be NULL) filled
     * with the reason, e.g. "no CUDA kernel for lstm yet" or "needs cuDNN". Asked at setup
     * for every node of the schedule, never first at step 1. */
    int (*supports_op)(brisk_backend *be, const brisk_node *node, char *why, size_t why_size);
    /* *sumsq_out (backend memory, one float) = sum of g[i]^2; deterministic. */
    brisk_status (*grad_sumsq)(brisk_backend *be, const float *g, int64_t n, float *sumsq_out,
                               brisk_error *err);
    /* One fused update of p[0, n) (and m, v: SGD uses m as the momentum buffer). sumsq is
     * backend memory written by grad_sumsq (read only when clip_norm > 0). Elements with
     * decay_mask == NULL or decay_mask[i] != 0 get weight decay; the mask is per element
     * (u8) only when some parameters are excluded. */
    brisk_status (*optim_update)(brisk_backend *be, float *p, const float *g, float *m, float *v,
                                 int64_t n, const brisk_optim_args *args, const float *sumsq,
                                 const uint8_t *decay_mask, brisk_error *err);
    brisk_status (*sync)(brisk_backend *be, brisk_error *err);
    void (*destroy)(brisk_backend *be);

    /* ---- optional: what a device backend adds for a compiled step (NULL on the CPU, and
     * callers check). Per-step values (the step state, the optimizer's lr and t) live in
     * backend memory; run_node and optim_update write them there themselves when they run
     * eagerly, and a caller replaying a program writes them first with set_values. */
    /* Once per executor, after its buffers are placed: plan fusions and low-precision
     * operand copies over the whole schedule. forget drops what prepare kept for ex (called
     * before its buffers are freed). One executor is prepared at a time; runs of graphs
     * that are not prepared work too, unfused. */
    brisk_status (*prepare)(brisk_backend *be, const brisk_exec *ex, brisk_error *err);
    void (*forget)(brisk_backend *be, const brisk_exec *ex);
    /* Makes st and args (either may be NULL: keep the current) what the next work reads. */
    brisk_status (*set_values)(brisk_backend *be, const brisk_step_state *st, const brisk_optim_args *args,
                               brisk_error *err);
    /* Records the work issued between the two calls as a program (none of it runs), which
     * replay then runs with the values current at that time. */
    brisk_status (*capture_begin)(brisk_backend *be, brisk_error *err);
    brisk_status (*capture_end)(brisk_backend *be, int *program, brisk_error *err);
    brisk_status (*replay)(brisk_backend *be, int program, brisk_error *err);
    /* Copies a batch into the input area (dst) on a copy stream, overlapped with work already
     * issued; the next run waits for it. src may be reused when this returns. */
    brisk_status (*upload_input)(brisk_backend *be, void *dst, const void *src, size_t bytes, brisk_error *err);
    /* The loss log: a ring of loss_log_size slots in backend memory, each of up to
     * BRISK_LOSS_LOG_WIDTH floats (a step's loss, then the terms of a loss of several parts).
     * loss_log adds weight * loss[0 .. width) into slot st.loss_slot % loss_log_size
     * (replacing it on the first micro-batch); loss_read copies n slots from `first` to host,
     * width floats each, packed, waiting for them. */
    brisk_status (*loss_log)(brisk_backend *be, const float *loss, int width, float weight, brisk_error *err);
    brisk_status (*loss_read)(brisk_backend *be, uint32_t first, int n, int width, float *host, brisk_error *err);
    int loss_log_size;
    /* Step times as the device sees them (NULL: the host's clock times the steps; on a device
     * that queues work the host's time is only how long issuing a step took). step_mark
     * records, after the work issued so far, the start (end 0) or the end (end 1) of step
     * `slot` (kept at slot % loss_log_size, like its loss); never while capturing a program.
     * step_times, once loss_read has read the same steps (it waits for them), writes each
     * step's milliseconds from its start mark to its end mark: the device's busy time and its
     * idle gaps within the step, so it is the step's real duration whichever side is slower. */
    brisk_status (*step_mark)(brisk_backend *be, uint32_t slot, int end, brisk_error *err);
    brisk_status (*step_times)(brisk_backend *be, uint32_t first, int n, double *ms, brisk_error *err);
    /* Timing marks for a profile (brisk profile). mark records mark `slot` (0 to
     * BRISK_MAX_MARKS - 1) after the work issued so far; never while capturing a program.
     * mark_elapsed waits for mark `to` and writes the milliseconds between marks from and to
     * as the device saw them. NULL: the caller times with the host clock (the CPU backend,
     * whose run_node returns when its work is done). note, where the backend has one, writes
     * a few words on how it runs node id, e.g. the algorithm or fusion it chose ("" if none). */
    brisk_status (*mark)(brisk_backend *be, int slot, brisk_error *err);
    brisk_status (*mark_elapsed)(brisk_backend *be, int from, int to, double *ms, brisk_error *err);
    void (*note)(brisk_backend *be, const brisk_graph *g, int id, char *buf, size_t n);
    /* Host memory the device copies from fastest (pinned), for the loader's batches. */
    void *(*host_alloc)(brisk_backend *be, size_t bytes);
    void (*host_free)(brisk_backend *be, void *p);
    brisk_status (*stats)(brisk_backend *be, brisk_backend_stats *out, brisk_error *err);
    /* One line: the device and which optimizations are on (and why any is off). */
    void (*describe)(brisk_backend *be, char *buf, size_t n);
    /* The backend's own speed measures as rows of the run report's table (name, state "on",
     * "off" or "info", detail): what it fused, how it chose its kernels, its memory pages.
     * Called at the start of a run and again at its end (the choices made by then). NULL:
     * nothing beyond describe. */
    void (*optimizations)(brisk_backend *be, brisk_backend_row_fn row, void *user);
    /* The loss scaler's state (get waits for the device); set applies a checkpoint's
     * (ignored when the backend has no active scaler). NULL: the backend has none. */
    brisk_status (*scaler_get)(brisk_backend *be, brisk_scaler_state *out, brisk_error *err);
    brisk_status (*scaler_set)(brisk_backend *be, const brisk_scaler_state *in, brisk_error *err);

    /* ---- optional: data parallel on a device that reduces its own gradients (CUDA: NCCL;
     * NULL on the CPU, whose gradients src/dist reduces over MPI). comm_init joins the
     * group as rank of world: rank 0's backend makes an id of `bytes`, share() (the
     * caller's transport) copies it to every rank, then every rank connects.
     * grad_allreduce replaces g[0, n) by its mean over the ranks, in pieces of
     * bucket_floats, ordered after the work already issued (and captured with it). */
    brisk_status (*comm_init)(brisk_backend *be, int rank, int world,
                              brisk_status (*share)(void *user, void *buf, size_t bytes, brisk_error *err), void *user,
                              brisk_error *err);
    brisk_status (*grad_allreduce)(brisk_backend *be, float *g, int64_t n, int64_t bucket_floats, brisk_error *err);
    /* The all-reduce overlapped with backward (dist.overlap; NULL: not offered): bucket_ready
     * orders the mean of g[0, count) over the ranks, in place, on the backend's own
     * communication stream after the work issued so far (the bucket's last producer), while
     * the work issued next goes on; buckets_join makes the work issued next (the update) wait
     * for every bucket. Both may be captured into a program. */
    brisk_status (*grad_bucket_ready)(brisk_backend *be, float *g, int64_t count, brisk_error *err);
    brisk_status (*grad_buckets_join)(brisk_backend *be, brisk_error *err);
    /* ZeRO-1 (dist.shard_optimizer; NULL: not offered), after comm_init. Rank r's shard is
     * floats [bounds[r], bounds[r + 1]) of the arena (bounds[world] = n: the caller's
     * brisk_dist_shard, so that checkpoints match the CPU path's). grad_reduce_scatter
     * replaces this rank's shard of g by its mean over the ranks (the rest of g is left
     * undefined); param_all_gather copies every rank's shard of p to every rank (and brings
     * the backend's own 16-bit copy of them, if any, up to date: the update wrote this
     * rank's shard of it). Both are ordered after the work already issued and captured with
     * it. */
    brisk_status (*grad_reduce_scatter)(brisk_backend *be, float *g, const int64_t *bounds, brisk_error *err);
    brisk_status (*param_all_gather)(brisk_backend *be, float *p, const int64_t *bounds, brisk_error *err);
    /* ZeRO-1 with a gradient norm (optim.clip_norm, the inf/NaN skip): the sum of squares that
     * grad_sumsq last computed (of this rank's shard) summed over the ranks, in the backend's
     * own copy that the next optim_update reads, so every rank clips and skips by the whole
     * gradient's norm; ordered and captured like the above. NULL: not offered. */
    brisk_status (*grad_sumsq_allreduce)(brisk_backend *be, brisk_error *err);
};

brisk_backend *brisk_backend_cpu_new(int threads); /* threads 0: OpenMP's default */
/* The CPU backend's fusions (GEMM + bias + activation, act-grad + bias-grad, residual +
 * layernorm), planned when an executor is created: on unless the environment has
 * BRISK_CPU_FUSE=0; set_fuse applies to executors created after it (a no-op on another
 * backend). fusions: "off", or "on (6 GEMM+bias+GELU, 4 residual+layernorm, ...)" for the
 * prepared executor ("" on another backend). */
void brisk_backend_cpu_set_fuse(brisk_backend *be, int on);
void brisk_backend_cpu_fusions(const brisk_backend *be, char *buf, size_t n);
/* When the CPU thread pool ran jobs on the calling thread alone because waiting for
 * descheduled workers cost more than they gained (other programs held the cores): the
 * share of its parallel jobs it ran alone (0 to 1; -1 on another backend or with one
 * thread), and a few words for a report in buf ("" when it never throttled). */
double brisk_backend_cpu_pool_note(const brisk_backend *be, char *buf, size_t n);
/* The CPU backend asks for 2 MiB pages for its buffers of 4 MiB or more: this process's
 * memory on them now (AnonHugePages), in bytes, with a few words for a report in buf (the
 * kernel's transparent_hugepage setting); -1 where Linux does not say. *never (may be NULL)
 * is 1 when that setting refuses every request. */
int64_t brisk_backend_cpu_huge_pages(char *buf, size_t n, int *never);

/* The CPU backend's GEMM kernel per shape (src/backend/cpu/gemm_choice.c), process-wide:
 * auto times brisk's own sgemm against the BLAS the first time a shape is seen and keeps
 * the faster (cached in cpu-gemm-choice.txt beside the CUDA autotune cache); own and blas
 * force one; fixed is the compiled rule with no timing (what --deterministic uses). Without
 * a BLAS every mode is own. autotune_cache: speed.autotune_cache ("" the default folder,
 * "-" no cache file). Decisions already made stay. */
typedef enum { BRISK_CPU_GEMM_AUTO = 0, BRISK_CPU_GEMM_OWN, BRISK_CPU_GEMM_BLAS, BRISK_CPU_GEMM_FIXED } brisk_cpu_gemm_mode;
void brisk_cpu_gemm_configure(brisk_cpu_gemm_mode mode, const char *autotune_cache);
int brisk_cpu_gemm_mode_parse(const char *s, brisk_cpu_gemm_mode *mode); /* "auto"..: 0, else -1 */
typedef struct brisk_cpu_gemm_stats {
    brisk_cpu_gemm_mode mode;
    int shapes, blas, own, from_cache; /* decisions made (auto), how many read from the cache */
    int untimed;                       /* ... how many by the fixed rule: no writable cache */
    double tune_ms;                    /* this process's time spent timing, CPU ms */
    char cache_path[4096];             /* "" when none */
} brisk_cpu_gemm_stats;
void brisk_cpu_gemm_get_stats(brisk_cpu_gemm_stats *out);
/* One line for the run's optimization list: "12 shapes, 3 BLAS / 9 own, tuned in 4.1 ms, ..." */
void brisk_cpu_gemm_describe(char *buf, size_t n);

/* The first node of plan's training schedule (forward, backward and loss: eval and
 * predict run subsequences of it) that be has no kernel for, or -1. msg gets
 * "<op> on <dtype> <shape> (node N): <the backend's reason>". */
int brisk_backend_first_unsupported(brisk_backend *be, const brisk_graph *g, const brisk_plan *plan, char *msg,
                                    size_t msg_size);

/* ---- executor: device buffers for one planned graph, and runs of its schedules */
struct brisk_exec {
    brisk_graph *g;
    brisk_plan *plan;
    brisk_backend *be;
    void *arena, *params, *grads, *m, *v, *inputs, *consts; /* device pointers */
    void **ptr;           /* per node: its resolved output pointer */
    brisk_step_state step;
    const brisk_exec *params_of; /* a view (brisk_exec_create_view): the executor whose
                                    parameters it reads; NULL when it owns its own */
    int64_t moments_off, moments_n; /* m and v hold parameter floats [off, off + n): all of
                                       them, or a rank's shard (brisk_exec_shard_moments) */
    /* brisk_exec_set_grad_hook: ranges of the gradient arena, in the order a training run
     * completes them; grad_done[s + 1] of them are complete once train_order[s] has run
     * (grad_done[0] before any node) */
    int *grad_done;
    void (*grad_ready)(void *user, int n_complete);
    void *grad_user;
    int grad_armed;       /* 1: the next training runs call grad_ready */
    /* brisk_exec_set_node_hook: called in training runs before each node and after the last */
    brisk_status (*node_hook)(void *user, int pos, int id, brisk_error *err);
    void *node_user;
    int inputs_bound;     /* brisk_exec_use_input pointed an input node at a caller's memory */
};

typedef enum { BRISK_RUN_TRAIN = 0, BRISK_RUN_EVAL, BRISK_RUN_PREDICT } brisk_run_kind;

/* The most timing marks a backend's mark takes (slots 0 to BRISK_MAX_MARKS - 1). */
#define BRISK_MAX_MARKS 65536
/* A profiler's hook (hook NULL: none): in every training run, hook(user, s, id) before the
 * node at schedule position s (id its node) and hook(user, n, -1) after the last of n, so
 * that the time between two calls is one node's. An error from it stops the run. */
void brisk_exec_set_node_hook(brisk_exec *ex, brisk_status (*hook)(void *user, int pos, int id, brisk_error *err),
                              void *user);

/* Allocates the areas, zeroes what runs read first, uploads the consts, and lets the
 * backend prepare (be->prepare) when it has that hook. */
brisk_status brisk_exec_create(brisk_graph *g, brisk_plan *plan, brisk_backend *be,
                               brisk_exec **out, brisk_error *err);
/* An executor for graph g that reads the parameter arena of `base` instead of owning one:
 * the same model at another batch size (the trainer validates an epoch's last, smaller
 * batch with it). g must have base's parameter layout (checked) and no gradients; the view
 * owns its activation arena, inputs and consts, and no backend prepares it (a device
 * backend runs it unfused, with the same precision). base must outlive it. */
brisk_status brisk_exec_create_view(brisk_graph *g, brisk_plan *plan, const brisk_exec *base, brisk_exec **out,
                                    brisk_error *err);
void brisk_exec_free(brisk_exec *ex);
/* Fills the param arena from each param's init (Philox from seed, on the host, so every
 * backend starts from the same bits; param k, element i: word i % 4 of the block under
 * counter {i / 4, 0, k, 0xFFFFFFFF}; UNIFORM = (2 unit(u) - 1) a), zeroes m, v, grads, and
 * sets ex->step.seed = seed. */
brisk_status brisk_exec_init_params(brisk_exec *ex, uint64_t seed, brisk_error *err);
/* ZeRO-1: m and v replaced by zeroed buffers for parameter floats [off, off + n) only. */
brisk_status brisk_exec_shard_moments(brisk_exec *ex, int64_t off, int64_t n, brisk_error *err);
/* Copies a whole batch into input i (host pointer, g->inputs[i].bytes bytes). */
brisk_status brisk_exec_set_input(brisk_exec *ex, int input, const void *host, brisk_error *err);
/* brisk_exec_set_input without the copy where the backend's buffers are host memory and host
 * is BRISK_AREA_ALIGN-aligned (as the input area is): input i's node, and its views, read host in place
 * until brisk_exec_release_inputs, which the caller calls before host is freed or reused. A
 * batch the CPU copied only to read it once was 2.5 % of a 1-D CNN's step. */
brisk_status brisk_exec_use_input(brisk_exec *ex, int input, const void *host, brisk_error *err);
/* Every input node back on the input area (what brisk_exec_use_input pointed elsewhere). */
void brisk_exec_release_inputs(brisk_exec *ex);
/* A hook for data parallel (the gradient all-reduce overlapped with backward): given n
 * ranges of the gradient arena (floats), writes into order[0..n) the ranges' indices in the
 * order a training run completes them (by brisk_plan_grad_ready; ties by index), and while
 * armed (brisk_exec_arm_grad_hook) every training run calls ready(user, k), on the thread
 * running the schedule, as soon as the first k ranges of that order are complete (k grows
 * to n within each run). On a device backend "complete" means issued on its stream. */
brisk_status brisk_exec_set_grad_hook(brisk_exec *ex, const int64_t *offsets, const int64_t *counts, int n,
                                      int *order, void (*ready)(void *user, int n_complete), void *user,
                                      brisk_error *err);
void brisk_exec_arm_grad_hook(brisk_exec *ex, int armed);
/* Runs one schedule with the step state in ex->step. */
brisk_status brisk_exec_run(brisk_exec *ex, brisk_run_kind kind, brisk_error *err);
/* Copies a node's output to host memory (numel * dtype size bytes: not the workspace
 * some ops keep after it). */
brisk_status brisk_exec_read(brisk_exec *ex, int node, void *host, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
