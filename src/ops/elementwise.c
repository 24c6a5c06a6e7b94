/* Elementwise ops: broadcasting ADD/SUB/MUL/DIV, MINIMUM/MAXIMUM and POW_XY (NumPy
 * rules), SCALE, the activations (RELU, GELU, SILU, TANH, SIGMOID, and LEAKY_RELU, ELU,
 * SOFTPLUS with a parameter), the math ops (EXP, LOG, SQRT, ABS, POW by a constant, CLAMP)
 * and DROPOUT, with their backward rules. A broadcast input's gradient is the output
 * gradient summed back to the input's shape (SUM_TO). Every unary op differentiates
 * through one ACT_GRAD node (one pass over dy, x and y, which the CPU fuses into a GEMM
 * that makes dy); MINIMUM, MAXIMUM and POW_XY through one BINARY_GRAD node per input. */
#include "ops/ops_internal.h"

#include <math.h>

static int binary(brisk_graph *g, brisk_op op, int x, int y) {
    const char *name = brisk_op_name(op);
    int ids[2] = {x, y};
    if (brisk_ops_check_dtype(g, name, ids, 2, BRISK_F32)) return -1;
    brisk_shape out;
    if (brisk_shape_broadcast(&g->nodes[x].shape, &g->nodes[y].shape, &out)) {
        char bx[BRISK_SHAPE_STR], by[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: shapes do not broadcast: x %s, y %s", name,
                                brisk_shape_str(&g->nodes[x].shape, bx, sizeof bx),
                                brisk_shape_str(&g->nodes[y].shape, by, sizeof by));
    }
    return brisk_graph_append(g, op, ids, 2, BRISK_F32, out, NULL);
}

int brisk_add(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_ADD, x, y); }
int brisk_sub(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_SUB, x, y); }
int brisk_mul(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_MUL, x, y); }
int brisk_div(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_DIV, x, y); }
int brisk_minimum(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_MINIMUM, x, y); }
int brisk_maximum(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_MAXIMUM, x, y); }
int brisk_pow_xy(brisk_graph *g, int x, int y) { return binary(g, BRISK_OP_POW_XY, x, y); }

int brisk_ops_sum_to_shape(brisk_graph *g, int dx, const brisk_shape *shape) {
    if (dx < 0) return -1;
    if (brisk_shape_equal(&g->nodes[dx].shape, shape)) return dx;
    return brisk_sum_to(g, dx, *shape);
}

/* The shape of input `which` of `node` (copied: appends may move the node array). */
static brisk_shape in_shape(const brisk_graph *g, int node, int which) {
    return g->nodes[g->nodes[node].in[which]].shape;
}

int brisk_bw_add(brisk_graph *g, int node, int dy, int which) {
    brisk_shape s = in_shape(g, node, which);
    return brisk_ops_sum_to_shape(g, dy, &s);
}

int brisk_bw_sub(brisk_graph *g, int node, int dy, int which) {
    brisk_shape s = in_shape(g, node, which);
    int d = brisk_ops_sum_to_shape(g, dy, &s);
    return which == 0 || d < 0 ? d : brisk_scale(g, d, -1.0f, 0.0f);
}

int brisk_bw_mul(brisk_graph *g, int node, int dy, int which) {
    brisk_shape s = in_shape(g, node, which);
    int other = g->nodes[node].in[1 - which];
    return brisk_ops_sum_to_shape(g, brisk_mul(g, dy, other), &s);
}

/* out = x / y: dx = dy / y, dy_ = -dy * x / y^2 = -(dy * out) / y. */
int brisk_bw_div(brisk_graph *g, int node, int dy, int which) {
    brisk_shape s = in_shape(g, node, which);
    int y = g->nodes[node].in[1];
    if (which == 0) return brisk_ops_sum_to_shape(g, brisk_div(g, dy, y), &s);
    int d = brisk_ops_sum_to_shape(g, brisk_div(g, brisk_mul(g, dy, node), y), &s);
    return d < 0 ? -1 : brisk_scale(g, d, -1.0f, 0.0f);
}

/* BINARY_GRAD in the broadcast shape (its kernel reads x and y broadcast, as the forward
 * did), then summed back to the input's shape. */
int brisk_bw_binary_grad(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    brisk_shape s = in_shape(g, node, which);
    int ids[3] = {dy, n.in[0], n.in[1]};
    brisk_attr at = brisk_attr_none();
    at.kind = (int)n.op;
    at.i0 = which;
    int d = brisk_graph_append(g, BRISK_OP_BINARY_GRAD, ids, 3, BRISK_F32, n.shape, &at);
    return brisk_ops_sum_to_shape(g, d, &s);
}

brisk_status brisk_ops_check_binary_grad_node(const brisk_graph *g, int id, brisk_error *err) {
    const brisk_node *n = &g->nodes[id];
    int kind = n->attr.kind;
    if (n->n_in != 3 || (kind != BRISK_OP_MAXIMUM && kind != BRISK_OP_MINIMUM && kind != BRISK_OP_POW_XY) ||
        (n->attr.i0 != 0 && n->attr.i0 != 1) || !brisk_shape_equal(&g->nodes[n->in[0]].shape, &n->shape))
        return brisk_errorf(err, BRISK_ERR_INVALID, "binary_grad (node %d): kind %d, input %lld, %d inputs (expected "
                            "(dy, x, y) of minimum, maximum or pow_xy, input 0 or 1, dy of the output's shape)", id,
                            kind, (long long)n->attr.i0, n->n_in);
    for (int k = 1; k < 3; k++)
        if (!brisk_ops_broadcasts_to(&g->nodes[n->in[k]].shape, &n->shape)) {
            char bi[BRISK_SHAPE_STR], bo[BRISK_SHAPE_STR];
            return brisk_errorf(err, BRISK_ERR_SHAPE, "binary_grad (node %d): input %d %s does not broadcast to %s", id,
                                k, brisk_shape_str(&g->nodes[n->in[k]].shape, bi, sizeof bi),
                                brisk_shape_str(&n->shape, bo, sizeof bo));
        }
    return BRISK_OK;
}

int brisk_scale(brisk_graph *g, int x, float a, float b) {
    if (brisk_ops_check_dtype(g, "scale", &x, 1, BRISK_F32)) return -1;
    brisk_attr at = brisk_attr_none();
    at.f0 = a;
    at.f1 = b;
    return brisk_graph_append(g, BRISK_OP_SCALE, &x, 1, BRISK_F32, g->nodes[x].shape, &at);
}

int brisk_bw_scale(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    return brisk_scale(g, dy, g->nodes[node].attr.f0, 0.0f);
}

static int unary(brisk_graph *g, brisk_op op, int x, const brisk_attr *at) {
    if (brisk_ops_check_dtype(g, brisk_op_name(op), &x, 1, BRISK_F32)) return -1;
    return brisk_graph_append(g, op, &x, 1, BRISK_F32, g->nodes[x].shape, at);
}

int brisk_relu(brisk_graph *g, int x) { return unary(g, BRISK_OP_RELU, x, NULL); }
int brisk_silu(brisk_graph *g, int x) { return unary(g, BRISK_OP_SILU, x, NULL); }
int brisk_tanh(brisk_graph *g, int x) { return unary(g, BRISK_OP_TANH, x, NULL); }
int brisk_sigmoid(brisk_graph *g, int x) { return unary(g, BRISK_OP_SIGMOID, x, NULL); }

int brisk_exp(brisk_graph *g, int x) { return unary(g, BRISK_OP_EXP, x, NULL); }
int brisk_ln(brisk_graph *g, int x) { return unary(g, BRISK_OP_LOG, x, NULL); }
int brisk_sqrt(brisk_graph *g, int x) { return unary(g, BRISK_OP_SQRT, x, NULL); }
int brisk_abs(brisk_graph *g, int x) { return unary(g, BRISK_OP_ABS, x, NULL); }
int brisk_erf(brisk_graph *g, int x) { return unary(g, BRISK_OP_ERF, x, NULL); }

/* A unary op with attributes f0, f1, after `ok` (the attributes' check) passed. */
static int unary_f(brisk_graph *g, brisk_op op, int x, float f0, float f1) {
    brisk_attr at = brisk_attr_none();
    at.f0 = f0;
    at.f1 = f1;
    return unary(g, op, x, &at);
}

int brisk_pow(brisk_graph *g, int x, float p) {
    if (!isfinite(p)) return brisk_graph_fail(g, BRISK_ERR_INVALID, "pow: exponent %g (expected a finite number)", (double)p);
    return unary_f(g, BRISK_OP_POW, x, p, 0.0f);
}

int brisk_clamp(brisk_graph *g, int x, float lo, float hi) {
    if (isnan(lo) || isnan(hi) || lo > hi)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "clamp: bounds [%g, %g] (expected lo <= hi; -inf or inf for none)",
                                (double)lo, (double)hi);
    return unary_f(g, BRISK_OP_CLAMP, x, lo, hi);
}

int brisk_leaky_relu(brisk_graph *g, int x, float slope) {
    if (!isfinite(slope))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "leaky_relu: negative slope %g (expected a finite number)",
                                (double)slope);
    return unary_f(g, BRISK_OP_LEAKY_RELU, x, slope, 0.0f);
}

int brisk_elu(brisk_graph *g, int x, float alpha) {
    if (!isfinite(alpha))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "elu: alpha %g (expected a finite number)", (double)alpha);
    return unary_f(g, BRISK_OP_ELU, x, alpha, 0.0f);
}

int brisk_softplus(brisk_graph *g, int x, float beta, float threshold) {
    if (!(beta > 0.0f) || !isfinite(beta) || !isfinite(threshold))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "softplus: beta %g, threshold %g (expected beta > 0, both finite)",
                                (double)beta, (double)threshold);
    return unary_f(g, BRISK_OP_SOFTPLUS, x, beta, threshold);
}

int brisk_gelu(brisk_graph *g, int x, int form) {
    if (form != BRISK_GELU_ERF && form != BRISK_GELU_TANH)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "gelu: form %d (expected BRISK_GELU_ERF or BRISK_GELU_TANH)",
                                form);
    brisk_attr at = brisk_attr_none();
    at.kind = form;
    return unary(g, BRISK_OP_GELU, x, &at);
}

/* ACT_GRAD(dy, x, y) with kind = the forward op; gelu's form travels in i1, the other ops'
 * parameters in f0 and f1. */
int brisk_bw_activation(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    int ids[3] = {dy, n.in[0], node};
    brisk_attr at = brisk_attr_none();
    at.kind = (int)n.op;
    at.i1 = n.op == BRISK_OP_GELU ? n.attr.kind : 0;
    at.f0 = n.attr.f0;
    at.f1 = n.attr.f1;
    return brisk_graph_append(g, BRISK_OP_ACT_GRAD, ids, 3, BRISK_F32, n.shape, &at);
}

int brisk_dropout(brisk_graph *g, int x, float p) {
    if (brisk_ops_check_dtype(g, "dropout", &x, 1, BRISK_F32)) return -1;
    if (!(p >= 0.0f && p < 1.0f))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "dropout: p = %g (expected 0 <= p < 1)", (double)p);
    brisk_attr at = brisk_attr_none();
    at.f0 = p;
    at.rng = g->next_rng_stream++;
    return brisk_graph_append(g, BRISK_OP_DROPOUT, &x, 1, BRISK_F32, g->nodes[x].shape, &at);
}

/* The same stream and p on the same step draw the same mask, so dropping dy with
 * the forward's attributes is exactly dy * mask / (1 - p). */
int brisk_bw_dropout(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    return brisk_graph_append(g, BRISK_OP_DROPOUT, &dy, 1, BRISK_F32, n.shape, &n.attr);
}
