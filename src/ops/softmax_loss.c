/* Softmax, log-softmax and the losses (cross-entropy over class logits, mean
 * squared error), all over the last dim. Each differentiates through one fused
 * _GRAD op that the backends implement directly, which is cheaper and more stable
 * than composing the gradient from elementwise ops. */
#include "ops/ops_internal.h"

static int last_dim_op(brisk_graph *g, brisk_op op, int x) {
    const char *name = brisk_op_name(op);
    if (brisk_ops_check_dtype(g, name, &x, 1, BRISK_F32)) return -1;
    brisk_shape s = g->nodes[x].shape;
    if (s.ndim < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: x is a scalar (needs a last dim)", name);
    return brisk_graph_append(g, op, &x, 1, BRISK_F32, s, NULL);
}

int brisk_softmax(brisk_graph *g, int x) { return last_dim_op(g, BRISK_OP_SOFTMAX, x); }
int brisk_log_softmax(brisk_graph *g, int x) { return last_dim_op(g, BRISK_OP_LOG_SOFTMAX, x); }

/* (dy, y) with y the forward's own output. */
static int grad_from_output(brisk_graph *g, brisk_op grad_op, int node, int dy) {
    int ids[2] = {dy, node};
    brisk_shape s = g->nodes[node].shape;
    return brisk_graph_append(g, grad_op, ids, 2, BRISK_F32, s, NULL);
}

int brisk_bw_softmax(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    return grad_from_output(g, BRISK_OP_SOFTMAX_GRAD, node, dy);
}

int brisk_bw_log_softmax(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    return grad_from_output(g, BRISK_OP_LOG_SOFTMAX_GRAD, node, dy);
}

int brisk_cross_entropy(brisk_graph *g, int logits, int labels) {
    int ids[2] = {logits, labels};
    if (brisk_ops_check(g, "cross_entropy", ids, 2)) return -1;
    const brisk_node *lg = &g->nodes[logits], *lb = &g->nodes[labels];
    char bl[BRISK_SHAPE_STR], bb[BRISK_SHAPE_STR];
    brisk_shape_str(&lg->shape, bl, sizeof bl);
    brisk_shape_str(&lb->shape, bb, sizeof bb);
    if (lg->dtype != BRISK_F32 || lb->dtype != BRISK_I32)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "cross_entropy: logits %s %s and labels %s %s (expected f32 logits, i32 labels)",
                                brisk_dtype_name(lg->dtype), bl, brisk_dtype_name(lb->dtype), bb);
    /* labels carry one class per row: the logits' shape without the class dim. */
    brisk_shape rows = lg->shape;
    if (rows.ndim >= 1) rows.ndim--;
    if (lg->shape.ndim < 1 || !brisk_shape_equal(&rows, &lb->shape)) {
        char br[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "cross_entropy: labels %s do not match logits %s (expected labels %s)", bb,
                                bl, lg->shape.ndim ? brisk_shape_str(&rows, br, sizeof br) : "with a class dim");
    }
    return brisk_graph_append(g, BRISK_OP_CROSS_ENTROPY, ids, 2, BRISK_F32, brisk_shape_make(0, NULL), NULL);
}

int brisk_bw_cross_entropy(brisk_graph *g, int node, int dy, int which) {
    if (which != 0) return -1; /* labels are integers */
    brisk_node n = g->nodes[node];
    int ids[3] = {dy, n.in[0], n.in[1]};
    brisk_shape s = g->nodes[n.in[0]].shape;
    return brisk_graph_append(g, BRISK_OP_CROSS_ENTROPY_GRAD, ids, 3, BRISK_F32, s, NULL);
}

int brisk_mse(brisk_graph *g, int pred, int target) {
    int ids[2] = {pred, target};
    if (brisk_ops_check_dtype(g, "mse", ids, 2, BRISK_F32)) return -1;
    const brisk_shape *sp = &g->nodes[pred].shape, *st = &g->nodes[target].shape;
    if (!brisk_shape_equal(sp, st)) {
        char bp[BRISK_SHAPE_STR], bt[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "mse: pred %s and target %s differ in shape",
                                brisk_shape_str(sp, bp, sizeof bp), brisk_shape_str(st, bt, sizeof bt));
    }
    return brisk_graph_append(g, BRISK_OP_MSE, ids, 2, BRISK_F32, brisk_shape_make(0, NULL), NULL);
}

/* d/dpred = MSE_GRAD; d/dtarget is its negative. */
int brisk_bw_mse(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    int ids[3] = {dy, n.in[0], n.in[1]};
    brisk_shape s = g->nodes[n.in[0]].shape;
    int d = brisk_graph_append(g, BRISK_OP_MSE_GRAD, ids, 3, BRISK_F32, s, NULL);
    return which == 0 || d < 0 ? d : brisk_scale(g, d, -1.0f, 0.0f);
}
