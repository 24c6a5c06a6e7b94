/* Softmax, log-softmax and the losses (cross-entropy over class logits, mean squared
 * error, and the pointwise losses: L1, Huber, BCE with logits and a weighted MSE, each a
 * mean or a masked mean). Each differentiates through one fused _GRAD op that the
 * backends implement directly, which is cheaper and more stable than composing the
 * gradient from elementwise ops. */
#include "ops/ops_internal.h"

#include <math.h>

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

/* ---- pointwise losses */

static const char *const loss_names[] = {"mse", "l1_loss", "huber_loss", "bce_with_logits"};

int brisk_pointwise_loss(brisk_graph *g, int kind, int pred, int target, int weight, float delta) {
    if (kind < BRISK_LOSS_MSE || kind > BRISK_LOSS_BCE_LOGITS)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "pointwise_loss: kind %d (expected BRISK_LOSS_MSE %d to "
                                "BRISK_LOSS_BCE_LOGITS %d)", kind, BRISK_LOSS_MSE, BRISK_LOSS_BCE_LOGITS);
    if (kind == BRISK_LOSS_MSE && weight < 0) return brisk_mse(g, pred, target);
    const char *name = loss_names[kind];
    int ids[3] = {pred, target, weight};
    if (brisk_ops_check_dtype(g, name, ids, weight >= 0 ? 3 : 2, BRISK_F32)) return -1;
    brisk_shape sp = g->nodes[pred].shape, st = g->nodes[target].shape;
    char bp[BRISK_SHAPE_STR], bt[BRISK_SHAPE_STR];
    if (!brisk_shape_equal(&sp, &st))
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: pred %s and target %s differ in shape", name,
                                brisk_shape_str(&sp, bp, sizeof bp), brisk_shape_str(&st, bt, sizeof bt));
    if (kind == BRISK_LOSS_HUBER && !(delta > 0.0f && isfinite(delta)))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "huber_loss: delta %g (expected a finite delta > 0)", (double)delta);
    if (weight >= 0) {
        brisk_shape sw = g->nodes[weight].shape;
        if (g->nodes[weight].requires_grad)
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: the weight (node %d) depends on parameters; a loss "
                                    "weight is data and takes no gradient", name, weight);
        if (!brisk_shape_equal(&sw, &sp)) {
            if (!brisk_ops_broadcasts_to(&sw, &sp))
                return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: weight %s does not broadcast to pred %s", name,
                                        brisk_shape_str(&sw, bt, sizeof bt), brisk_shape_str(&sp, bp, sizeof bp));
            if ((ids[2] = brisk_expand(g, weight, sp)) < 0) return -1;
        }
    }
    brisk_attr at = brisk_attr_none();
    at.kind = kind;
    at.f0 = kind == BRISK_LOSS_HUBER ? delta : 0.0f;
    return brisk_graph_append(g, BRISK_OP_POINTWISE_LOSS, ids, weight >= 0 ? 3 : 2, BRISK_F32,
                              brisk_shape_make(0, NULL), &at);
}

int brisk_bce_with_logits(brisk_graph *g, int logits, int target, int weight) {
    return brisk_pointwise_loss(g, BRISK_LOSS_BCE_LOGITS, logits, target, weight, 0.0f);
}
int brisk_l1_loss(brisk_graph *g, int pred, int target, int weight) {
    return brisk_pointwise_loss(g, BRISK_LOSS_L1, pred, target, weight, 0.0f);
}
int brisk_huber_loss(brisk_graph *g, int pred, int target, float delta, int weight) {
    return brisk_pointwise_loss(g, BRISK_LOSS_HUBER, pred, target, weight, delta);
}

int brisk_bw_pointwise_loss(brisk_graph *g, int node, int dy, int which) {
    if (which == 2) return -1; /* the weight: data (the builder refused one that depends on parameters) */
    brisk_node n = g->nodes[node];
    int ids[4] = {dy, n.in[0], n.in[1], n.n_in > 2 ? n.in[2] : -1};
    brisk_attr at = n.attr;
    at.i0 = which;
    brisk_shape s = g->nodes[n.in[which]].shape;
    return brisk_graph_append(g, BRISK_OP_POINTWISE_LOSS_GRAD, ids, n.n_in + 1, BRISK_F32, s, &at);
}

brisk_status brisk_ops_check_loss_node(const brisk_graph *g, int id, brisk_error *err) {
    const brisk_node *n = &g->nodes[id];
    int grad = n->op == BRISK_OP_POINTWISE_LOSS_GRAD, off = grad ? 1 : 0;
    const char *name = brisk_op_name(n->op);
    if ((n->n_in != 2 + off && n->n_in != 3 + off) || n->attr.kind < BRISK_LOSS_MSE ||
        n->attr.kind > BRISK_LOSS_BCE_LOGITS || (grad && n->attr.i0 != 0 && n->attr.i0 != 1))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %d inputs, kind %d (expected %s, a BRISK_LOSS_* "
                            "kind)", name, id, n->n_in, n->attr.kind,
                            grad ? "(dloss, pred, target [, weight]) and input 0 or 1" : "(pred, target [, weight])");
    int64_t len = brisk_shape_numel(&g->nodes[n->in[off]].shape);
    for (int k = off + 1; k < n->n_in; k++)
        if (brisk_shape_numel(&g->nodes[n->in[k]].shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): input %d has %lld elements, pred %lld", name, id, k,
                                (long long)brisk_shape_numel(&g->nodes[n->in[k]].shape), (long long)len);
    if (brisk_shape_numel(&n->shape) != (grad ? len : 1) || (grad && brisk_shape_numel(&g->nodes[n->in[0]].shape) != 1))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): the output%s is not the size expected (%lld)", name,
                            id, grad ? " or dloss" : "", (long long)(grad ? len : 1));
    return BRISK_OK;
}
