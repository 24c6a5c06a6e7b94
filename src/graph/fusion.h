/* Fusion planning over a prepared executor's training schedule, shared by the backends'
 * prepare hooks (backend/cuda/prepare.c, backend/cpu/fuse.c): which nodes may run as one
 * pass, given the memory plan's buffer reuse. What a fusion is computed with (a cuBLASLt
 * epilogue, a CPU GEMM band epilogue, a fused row kernel) is the backend's business; this
 * finds the patterns and checks the lifetimes, in one order, the same for every backend.
 * Internal to the library (backends include it), not a public header. */
#ifndef BRISK_GRAPH_FUSION_H
#define BRISK_GRAPH_FUSION_H

#include "brisk/graph.h"

#include <stdint.h>

typedef enum {
    BRISK_FUSE_GEMM_BIAS,        /* M = MATMUL; B = BIAS_ADD(M, b): writes B */
    BRISK_FUSE_GEMM_BIAS_RELU,   /* ... A = RELU(B): writes A (and B when rules.relu_writes_pre) */
    BRISK_FUSE_GEMM_BIAS_GELU,   /* ... A = GELU_tanh(B) (or erf, rules.gelu_erf): writes A and B */
    BRISK_FUSE_GEMM_BIAS_ACT,    /* ... A = SILU, TANH, SIGMOID, LEAKY_RELU, ELU or SOFTPLUS(B)
                                    (rules.other_acts): writes A and B */
                                 /* (the three: and D = DROPOUT(A) (rules.act_dropout): writes D too) */
    BRISK_FUSE_GEMM_DGELU_BGRAD, /* H = MATMUL; Q = ACT_GRAD_gelu_tanh(H, B, A); S = SUM_rows(Q) */
    BRISK_FUSE_ACTGRAD_BGRAD,    /* Q = ACT_GRAD(dy, x, y); S = SUM_rows(Q), at Q's place */
    BRISK_FUSE_GEMM_ACTGRAD,     /* H = MATMUL; [D = DROPOUT(H)]; Q = ACT_GRAD(H or D, x, y): writes Q */
    BRISK_FUSE_ADD_NORM,         /* S = ADD(a, b); Y = LAYERNORM(S, gamma, beta), at the add */
    BRISK_FUSE_ADD_NORM_GRAD,    /* ADD(r, LAYERNORM_GRAD_X(dy, x, gamma)), the grad unwritten */
    BRISK_FUSE_CONV_BIAS,        /* Y = CONV2D; B = ADD(Y, bias [Co, 1, 1]): writes B */
    BRISK_FUSE_CONV_BIAS_ACT,    /* ... A = an activation of B as the GEMM's (no dropout): writes A and B */
    BRISK_FUSE_EXPAND_ACTGRAD,   /* E = EXPAND(s) over trailing dims; Q = ACT_GRAD_relu(E, x, y): at E's place,
                                    E never written */
} brisk_fusion_kind;

/* One fusion: `at` is the node at whose schedule place it all runs (the matmul, the
 * act_grad or the add); the other fields are -1 where the kind has no such node (`matmul`
 * is the CONV2D of the convolution kinds; `matmul` is the EXPAND of BRISK_FUSE_EXPAND_ACTGRAD). */
typedef struct brisk_fusion {
    brisk_fusion_kind kind;
    int at;
    int matmul, bias, act, grad, sum, ln;
    int drop;              /* the dropout after the activation (forward) or between the GEMM and the
                              ACT_GRAD (BRISK_FUSE_GEMM_ACTGRAD), else -1 */
    int sum_deferred;      /* BRISK_FUSE_ACTGRAD_BGRAD: S is written at its own place (fusion_at[sum]
                              is this fusion too) from sums the backend kept since Q's */
} brisk_fusion;

/* What the backend can run. */
typedef struct brisk_fusion_rules {
    /* 1 with the product's N when node m is one 2-D product (batch 1 once folded) that the
     * backend can fuse; NULL: no GEMM patterns */
    int (*gemm_2d)(const brisk_graph *g, int m, int64_t *n_out);
    int gelu_n_multiple;   /* GELU epilogues need N a multiple of this (cuBLASLt: 8) */
    int gelu_erf;          /* the erf form of GELU too (cuBLASLt has the tanh form only) */
    int other_acts;        /* SiLU, tanh, sigmoid, leaky ReLU, ELU and softplus epilogues too
                              (cuBLASLt has none) */
    int relu_writes_pre;   /* the ReLU fusion writes B too (its gradient reads B, not A) */
    int act_dropout;       /* a forward epilogue applies the activation's dropout too */
    int gemm_backward;     /* plan BRISK_FUSE_GEMM_DGELU_BGRAD */
    int actgrad_sum;       /* plan BRISK_FUSE_ACTGRAD_BGRAD */
    int actgrad_sum_deferred; /* ... also where S cannot be written at Q's place (sum_deferred) */
    int gemm_actgrad;      /* plan BRISK_FUSE_GEMM_ACTGRAD (before act-grad + bias-grad) */
    int norms;             /* plan the residual + layernorm pairs */
    int expand_actgrad;    /* plan BRISK_FUSE_EXPAND_ACTGRAD */
    /* 1 when CONV2D node c is one the backend computes with a bias and activation epilogue;
     * NULL: no convolution patterns */
    int (*conv_epilogue)(const brisk_graph *g, int c);
} brisk_fusion_rules;

typedef struct brisk_fusion_plan {
    uint8_t *skip;         /* per node: computed by a fusion at another node's place */
    int *fusion_at;        /* per node: index into list of the fusion that runs there, else -1 */
    brisk_fusion *list;
    int n;
} brisk_fusion_plan;

/* Plans ex's fusions by rules (the norms first, then forward GEMMs, then backward ones, each
 * in schedule order). Returns 0, or -1 out of memory (plan then empty and freed). */
int brisk_fusion_plan_build(const brisk_exec *ex, const brisk_fusion_rules *rules, brisk_fusion_plan *plan);
void brisk_fusion_plan_free(brisk_fusion_plan *plan);
/* Counts of plan's fusions of one kind. */
int brisk_fusion_count(const brisk_fusion_plan *plan, brisk_fusion_kind kind);

#endif
