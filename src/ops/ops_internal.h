/* Internal to ops: helpers the op builders share (input checks, NumPy
 * broadcasting, shape printing) and the backward rules that registry.c puts in
 * brisk_op_table. Not part of the public API. */
#ifndef BRISK_OPS_INTERNAL_H
#define BRISK_OPS_INTERNAL_H

#include "brisk/graph.h"

#include <string.h>


/* Returns 0 when the graph holds no earlier error and every id names a node;
 * otherwise -1 (recording "op: input i (id) is not a node" if that was the cause). */
int brisk_ops_check(brisk_graph *g, const char *op, const int *ids, int n);
/* Same as brisk_ops_check, plus every input must have dtype dt. */
int brisk_ops_check_dtype(brisk_graph *g, const char *op, const int *ids, int n, brisk_dtype dt);

/* 1 when `from` broadcasts to exactly `to`. */
int brisk_ops_broadcasts_to(const brisk_shape *from, const brisk_shape *to);

/* dx reduced to `shape` with SUM_TO when an input was broadcast, else dx itself. */
int brisk_ops_sum_to_shape(brisk_graph *g, int dx, const brisk_shape *shape);
/* SUM over every dim but the last ("rows"), no keepdim: [rows..., N] -> [N]. */
int brisk_ops_sum_rows(brisk_graph *g, int x);

/* The node `op(in[0..n_in))` appended since node `since`, or -1: a backward rule that
 * serves several inputs (LSTM, BATCHNORM) finds the gradient node an earlier call for
 * another input appended instead of appending a second. */
static inline int brisk_ops_find_recent(const brisk_graph *g, int since, brisk_op op, const int *in, int n_in) {
    for (int i = g->n_nodes - 1; i >= since; i--) {
        const brisk_node *n = &g->nodes[i];
        if (n->op != op || n->n_in < n_in) continue;
        int same = 1;
        for (int k = 0; k < n_in && same; k++) same = n->in[k] == in[k];
        if (same) return i;
    }
    return -1;
}

/* Run-time checks of a node the builders made, for brisk_node_check_inputs (every backend
 * calls it before running a node): input counts, sizes and attributes, so a hand-built or
 * corrupted node is an error naming the op and what it expected, not a wild read. */
brisk_status brisk_ops_check_loss_node(const brisk_graph *g, int id, brisk_error *err);        /* POINTWISE_LOSS(_GRAD) */
brisk_status brisk_ops_check_binary_grad_node(const brisk_graph *g, int id, brisk_error *err); /* BINARY_GRAD */
brisk_status brisk_ops_check_upsample_node(const brisk_graph *g, int id, brisk_error *err);    /* UPSAMPLE2D(_GRAD) */

/* Zero-initialised attributes (a named function keeps builders short). */
static inline brisk_attr brisk_attr_none(void) {
    brisk_attr a;
    memset(&a, 0, sizeof a);
    return a;
}

/* Backward rules (see brisk_op_info.backward). One per differentiable op. */
int brisk_bw_matmul(brisk_graph *g, int node, int dy, int which);
int brisk_bw_bias_add(brisk_graph *g, int node, int dy, int which);
int brisk_bw_add(brisk_graph *g, int node, int dy, int which);
int brisk_bw_sub(brisk_graph *g, int node, int dy, int which);
int brisk_bw_mul(brisk_graph *g, int node, int dy, int which);
int brisk_bw_div(brisk_graph *g, int node, int dy, int which);
int brisk_bw_scale(brisk_graph *g, int node, int dy, int which);
int brisk_bw_activation(brisk_graph *g, int node, int dy, int which);
int brisk_bw_dropout(brisk_graph *g, int node, int dy, int which);
int brisk_bw_sum(brisk_graph *g, int node, int dy, int which);
int brisk_bw_mean(brisk_graph *g, int node, int dy, int which);
int brisk_bw_sum_to(brisk_graph *g, int node, int dy, int which);
int brisk_bw_expand(brisk_graph *g, int node, int dy, int which);
int brisk_bw_softmax(brisk_graph *g, int node, int dy, int which);
int brisk_bw_log_softmax(brisk_graph *g, int node, int dy, int which);
int brisk_bw_cross_entropy(brisk_graph *g, int node, int dy, int which);
int brisk_bw_mse(brisk_graph *g, int node, int dy, int which);
int brisk_bw_layernorm(brisk_graph *g, int node, int dy, int which);
int brisk_bw_concat(brisk_graph *g, int node, int dy, int which);
int brisk_bw_slice(brisk_graph *g, int node, int dy, int which);
int brisk_bw_reshape(brisk_graph *g, int node, int dy, int which);
int brisk_bw_transpose(brisk_graph *g, int node, int dy, int which);
int brisk_bw_gather(brisk_graph *g, int node, int dy, int which);
int brisk_bw_segment_sum(brisk_graph *g, int node, int dy, int which); /* and SCATTER_ADD */
int brisk_bw_sinusoidal(brisk_graph *g, int node, int dy, int which);
int brisk_bw_cast(brisk_graph *g, int node, int dy, int which);
int brisk_bw_lstm(brisk_graph *g, int node, int dy, int which);
int brisk_bw_gru(brisk_graph *g, int node, int dy, int which);
int brisk_bw_attention(brisk_graph *g, int node, int dy, int which);
int brisk_bw_conv2d(brisk_graph *g, int node, int dy, int which);
int brisk_bw_batchnorm(brisk_graph *g, int node, int dy, int which);
int brisk_bw_pool2d(brisk_graph *g, int node, int dy, int which);
int brisk_bw_conv2d_grad_x(brisk_graph *g, int node, int dy, int which); /* a transposed convolution */
int brisk_bw_layernorm_xhat(brisk_graph *g, int node, int dy, int which);
int brisk_bw_binary_grad(brisk_graph *g, int node, int dy, int which);    /* MINIMUM, MAXIMUM, POW_XY */
int brisk_bw_pointwise_loss(brisk_graph *g, int node, int dy, int which);
int brisk_bw_upsample2d(brisk_graph *g, int node, int dy, int which);

#endif
