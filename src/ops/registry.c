/* The op table: one entry per op with its backward rule (ggml style). Adding an op means
 * one enum value in graph.h, its name in graph/op_names.c, one entry here, its builder and
 * backward rule in the op family's file, its kernels, and its test. */
#include "ops/ops_internal.h"

#include <stdio.h>

const brisk_op_info brisk_op_table[BRISK_OP_COUNT] = {
    [BRISK_OP_INPUT] = {NULL},
    [BRISK_OP_PARAM] = {NULL},
    [BRISK_OP_CONST] = {NULL},
    [BRISK_OP_MATMUL] = {brisk_bw_matmul},
    [BRISK_OP_BIAS_ADD] = {brisk_bw_bias_add},
    [BRISK_OP_ADD] = {brisk_bw_add},
    [BRISK_OP_SUB] = {brisk_bw_sub},
    [BRISK_OP_MUL] = {brisk_bw_mul},
    [BRISK_OP_DIV] = {brisk_bw_div},
    [BRISK_OP_SCALE] = {brisk_bw_scale},
    [BRISK_OP_RELU] = {brisk_bw_activation},
    [BRISK_OP_GELU] = {brisk_bw_activation},
    [BRISK_OP_SILU] = {brisk_bw_activation},
    [BRISK_OP_TANH] = {brisk_bw_activation},
    [BRISK_OP_SIGMOID] = {brisk_bw_activation},
    [BRISK_OP_ACT_GRAD] = {NULL},
    [BRISK_OP_DROPOUT] = {brisk_bw_dropout},
    [BRISK_OP_SUM] = {brisk_bw_sum},
    [BRISK_OP_MEAN] = {brisk_bw_mean},
    [BRISK_OP_SUM_TO] = {brisk_bw_sum_to},
    [BRISK_OP_EXPAND] = {brisk_bw_expand},
    [BRISK_OP_SOFTMAX] = {brisk_bw_softmax},
    [BRISK_OP_LOG_SOFTMAX] = {brisk_bw_log_softmax},
    [BRISK_OP_SOFTMAX_GRAD] = {NULL},
    [BRISK_OP_LOG_SOFTMAX_GRAD] = {NULL},
    [BRISK_OP_CROSS_ENTROPY] = {brisk_bw_cross_entropy},
    [BRISK_OP_CROSS_ENTROPY_GRAD] = {NULL},
    [BRISK_OP_MSE] = {brisk_bw_mse},
    [BRISK_OP_MSE_GRAD] = {NULL},
    [BRISK_OP_LAYERNORM] = {brisk_bw_layernorm},
    [BRISK_OP_LAYERNORM_GRAD_X] = {NULL},
    [BRISK_OP_LAYERNORM_XHAT] = {brisk_bw_layernorm_xhat},
    [BRISK_OP_CONCAT] = {brisk_bw_concat},
    [BRISK_OP_SLICE] = {brisk_bw_slice},
    [BRISK_OP_SLICE_GRAD] = {NULL},
    [BRISK_OP_RESHAPE] = {brisk_bw_reshape},
    [BRISK_OP_TRANSPOSE] = {brisk_bw_transpose},
    [BRISK_OP_GATHER] = {brisk_bw_gather},
    [BRISK_OP_SCATTER_ADD] = {brisk_bw_segment_sum},
    [BRISK_OP_SINUSOIDAL] = {brisk_bw_sinusoidal},
    [BRISK_OP_SINUSOIDAL_GRAD] = {NULL},
    [BRISK_OP_RANDN] = {NULL},
    [BRISK_OP_RAND_UNIFORM] = {NULL},
    [BRISK_OP_RANDINT] = {NULL},
    [BRISK_OP_CAST] = {brisk_bw_cast},
    [BRISK_OP_LSTM] = {brisk_bw_lstm},
    [BRISK_OP_LSTM_GRAD] = {NULL},
    [BRISK_OP_LSTM_GRAD_W] = {NULL},
    [BRISK_OP_ATTENTION] = {brisk_bw_attention},
    [BRISK_OP_ATTENTION_GRAD] = {NULL},
    [BRISK_OP_GRAD_ACCUM] = {NULL},
    [BRISK_OP_CONV2D] = {brisk_bw_conv2d},
    [BRISK_OP_CONV2D_GRAD_X] = {brisk_bw_conv2d_grad_x},
    [BRISK_OP_CONV2D_GRAD_W] = {NULL},
    [BRISK_OP_BATCHNORM] = {brisk_bw_batchnorm},
    [BRISK_OP_BATCHNORM_GRAD_GB] = {NULL},
    [BRISK_OP_BATCHNORM_GRAD_X] = {NULL},
    [BRISK_OP_POOL2D] = {brisk_bw_pool2d},
    [BRISK_OP_POOL2D_GRAD] = {NULL},
    [BRISK_OP_SEGMENT_SUM] = {brisk_bw_segment_sum},
    [BRISK_OP_EXP] = {brisk_bw_activation},
    [BRISK_OP_LOG] = {brisk_bw_activation},
    [BRISK_OP_SQRT] = {brisk_bw_activation},
    [BRISK_OP_ABS] = {brisk_bw_activation},
    [BRISK_OP_ERF] = {brisk_bw_activation},
    [BRISK_OP_POW] = {brisk_bw_activation},
    [BRISK_OP_CLAMP] = {brisk_bw_activation},
    [BRISK_OP_LEAKY_RELU] = {brisk_bw_activation},
    [BRISK_OP_ELU] = {brisk_bw_activation},
    [BRISK_OP_SOFTPLUS] = {brisk_bw_activation},
    [BRISK_OP_MINIMUM] = {brisk_bw_binary_grad},
    [BRISK_OP_MAXIMUM] = {brisk_bw_binary_grad},
    [BRISK_OP_POW_XY] = {brisk_bw_binary_grad},
    [BRISK_OP_BINARY_GRAD] = {NULL},
    [BRISK_OP_POINTWISE_LOSS] = {brisk_bw_pointwise_loss},
    [BRISK_OP_POINTWISE_LOSS_GRAD] = {NULL},
    [BRISK_OP_UPSAMPLE2D] = {brisk_bw_upsample2d},
    [BRISK_OP_UPSAMPLE2D_GRAD] = {NULL},
    [BRISK_OP_GRU] = {brisk_bw_gru},
    [BRISK_OP_GRU_GRAD] = {NULL},
    [BRISK_OP_GRU_GRAD_W] = {NULL},
};

/* C cannot check at compile time that each designated slot was filled, so, as in
 * ggml, the op count is pinned here: whoever adds an op lands on this line and the
 * table above (and graph/op_names.c). test_builder checks at run time that every op has a name. */
_Static_assert(BRISK_OP_COUNT == 81, "an op was added or removed: update brisk_op_table and this count");
_Static_assert(sizeof brisk_op_table / sizeof brisk_op_table[0] == BRISK_OP_COUNT,
               "brisk_op_table must have one entry per op");

/* Data movement takes any dtype; every other op computes in f32. */
int brisk_op_is_float(brisk_op op) {
    switch (op) {
    case BRISK_OP_INPUT: case BRISK_OP_PARAM: case BRISK_OP_CONST: case BRISK_OP_RESHAPE:
    case BRISK_OP_CONCAT: case BRISK_OP_SLICE: case BRISK_OP_SLICE_GRAD: case BRISK_OP_TRANSPOSE:
    case BRISK_OP_EXPAND: case BRISK_OP_GATHER: case BRISK_OP_RANDINT: case BRISK_OP_CAST:
        return 0;
    default:
        return 1;
    }
}

int brisk_op_dtype_ok(const brisk_node *node, char *why, size_t why_size) {
    const char *bad = NULL;
    if ((unsigned)node->op >= BRISK_OP_COUNT) bad = "not an op";
    else if ((unsigned)node->dtype >= BRISK_DTYPE_COUNT) bad = "not a dtype";
    else if (node->op == BRISK_OP_RANDINT && node->dtype != BRISK_I32) bad = "randint makes i32";
    else if (node->op != BRISK_OP_RANDINT && brisk_op_is_float(node->op) && node->dtype != BRISK_F32)
        bad = "this op computes in f32";
    if (bad && why && why_size) snprintf(why, why_size, "%s", bad);
    return bad == NULL;
}

brisk_status brisk_node_check_inputs(const brisk_graph *g, int id, brisk_error *err) {
    const brisk_node *n = &g->nodes[id];
    if (n->n_in < 0 || n->n_in > BRISK_MAX_INPUTS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %d inputs", brisk_op_name(n->op), id, n->n_in);
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i] < 0 || n->in[i] >= g->n_nodes)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): input %d is node %d of %d",
                                brisk_op_name(n->op), id, i, n->in[i], g->n_nodes);
    /* float ops read f32 inputs, except these index/label inputs */
    if (!brisk_op_is_float(n->op)) return BRISK_OK;
    for (int i = 0; i < n->n_in; i++) {
        brisk_dtype want = BRISK_F32, got = g->nodes[n->in[i]].dtype;
        if ((n->op == BRISK_OP_CROSS_ENTROPY && i == 1) || (n->op == BRISK_OP_CROSS_ENTROPY_GRAD && i == 2) ||
            ((n->op == BRISK_OP_SCATTER_ADD || n->op == BRISK_OP_SEGMENT_SUM) && i == 1))
            want = BRISK_I32;
        if (n->op == BRISK_OP_SINUSOIDAL && got == BRISK_I32) want = BRISK_I32;
        if (got != want)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): input %d is %s, expected %s",
                                brisk_op_name(n->op), id, i, brisk_dtype_name(got), brisk_dtype_name(want));
    }
    switch (n->op) {
    case BRISK_OP_POINTWISE_LOSS: case BRISK_OP_POINTWISE_LOSS_GRAD: return brisk_ops_check_loss_node(g, id, err);
    case BRISK_OP_BINARY_GRAD: return brisk_ops_check_binary_grad_node(g, id, err);
    case BRISK_OP_UPSAMPLE2D: case BRISK_OP_UPSAMPLE2D_GRAD: return brisk_ops_check_upsample_node(g, id, err);
    default: return BRISK_OK;
    }
}

int brisk_act_grad_kind_ok(int kind) {
    switch (kind) {
    case BRISK_OP_RELU: case BRISK_OP_GELU: case BRISK_OP_SILU: case BRISK_OP_TANH: case BRISK_OP_SIGMOID:
    case BRISK_OP_LEAKY_RELU: case BRISK_OP_ELU: case BRISK_OP_SOFTPLUS: case BRISK_OP_EXP: case BRISK_OP_LOG:
    case BRISK_OP_SQRT: case BRISK_OP_ABS: case BRISK_OP_POW: case BRISK_OP_CLAMP: case BRISK_OP_ERF:
        return 1;
    default:
        return 0;
    }
}
