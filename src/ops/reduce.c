/* Reductions and broadcasts: SUM and MEAN over a set of axes, SUM_TO (sum the
 * broadcast dims back to a shape) and EXPAND (NumPy broadcast to a shape). SUM_TO
 * and EXPAND are each other's gradient; SUM and MEAN differentiate through EXPAND.
 * Over an empty axis (a reduced dim of size 0) SUM is 0 and MEAN is NaN (0 / 0), as in
 * NumPy and PyTorch, on every backend. */
#include "ops/ops_internal.h"

static int reduce(brisk_graph *g, brisk_op op, int x, uint32_t axes, int keepdim) {
    const char *name = brisk_op_name(op);
    if (brisk_ops_check_dtype(g, name, &x, 1, BRISK_F32)) return -1;
    brisk_shape s = g->nodes[x].shape;
    if (axes == 0 || (axes >> s.ndim) != 0) {
        char bx[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: axes 0x%x do not name dims of x %s", name,
                                (unsigned)axes, brisk_shape_str(&s, bx, sizeof bx));
    }
    brisk_shape out = brisk_shape_make(0, NULL);
    for (int i = 0; i < s.ndim; i++) {
        if (!(axes & (1u << i))) out.d[out.ndim++] = s.d[i];
        else if (keepdim) out.d[out.ndim++] = 1;
    }
    brisk_attr at = brisk_attr_none();
    at.axes = axes;
    at.keepdim = !!keepdim;
    return brisk_graph_append(g, op, &x, 1, BRISK_F32, out, &at);
}

int brisk_sum(brisk_graph *g, int x, uint32_t axes, int keepdim) { return reduce(g, BRISK_OP_SUM, x, axes, keepdim); }
int brisk_mean(brisk_graph *g, int x, uint32_t axes, int keepdim) { return reduce(g, BRISK_OP_MEAN, x, axes, keepdim); }

int brisk_ops_sum_rows(brisk_graph *g, int x) {
    if (x < 0) return -1;
    int nd = g->nodes[x].shape.ndim;
    if (nd <= 1) return x;
    return brisk_sum(g, x, (1u << (nd - 1)) - 1u, 0);
}

/* dy of a reduction, scaled by `scale`, broadcast back over the reduced dims. */
static int expand_back(brisk_graph *g, int node, int dy, float scale) {
    brisk_node n = g->nodes[node];
    brisk_shape xs = g->nodes[n.in[0]].shape, ks = xs;
    for (int i = 0; i < xs.ndim; i++)
        if (n.attr.axes & (1u << i)) ks.d[i] = 1;
    int d = scale == 1.0f ? dy : brisk_scale(g, dy, scale, 0.0f);
    if (d >= 0 && !n.attr.keepdim) d = brisk_reshape(g, d, ks); /* put the reduced dims back as 1s */
    return d < 0 ? -1 : brisk_expand(g, d, xs);
}

int brisk_bw_sum(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    return expand_back(g, node, dy, 1.0f);
}

int brisk_bw_mean(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    brisk_shape xs = g->nodes[n.in[0]].shape;
    double count = 1;
    for (int i = 0; i < xs.ndim; i++)
        if (n.attr.axes & (1u << i)) count *= (double)xs.d[i];
    return expand_back(g, node, dy, (float)(1.0 / count));
}

int brisk_sum_to(brisk_graph *g, int x, brisk_shape target) {
    if (brisk_ops_check_dtype(g, "sum_to", &x, 1, BRISK_F32)) return -1;
    brisk_shape s = g->nodes[x].shape;
    if (target.ndim < 0 || target.ndim > BRISK_MAX_DIMS || !brisk_ops_broadcasts_to(&target, &s)) {
        char bx[BRISK_SHAPE_STR], bt[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "sum_to: target %s does not broadcast to x %s",
                                brisk_shape_str(&target, bt, sizeof bt), brisk_shape_str(&s, bx, sizeof bx));
    }
    brisk_attr at = brisk_attr_none();
    at.shape2 = target;
    return brisk_graph_append(g, BRISK_OP_SUM_TO, &x, 1, BRISK_F32, target, &at);
}

int brisk_expand(brisk_graph *g, int x, brisk_shape target) {
    if (brisk_ops_check_dtype(g, "expand", &x, 1, BRISK_F32)) return -1;
    brisk_shape s = g->nodes[x].shape;
    if (target.ndim < 0 || target.ndim > BRISK_MAX_DIMS || !brisk_ops_broadcasts_to(&s, &target)) {
        char bx[BRISK_SHAPE_STR], bt[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "expand: x %s does not broadcast to %s",
                                brisk_shape_str(&s, bx, sizeof bx), brisk_shape_str(&target, bt, sizeof bt));
    }
    brisk_attr at = brisk_attr_none();
    at.shape2 = target;
    return brisk_graph_append(g, BRISK_OP_EXPAND, &x, 1, BRISK_F32, target, &at);
}

int brisk_bw_sum_to(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_shape xs = g->nodes[g->nodes[node].in[0]].shape;
    return brisk_expand(g, dy, xs);
}

int brisk_bw_expand(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_shape xs = g->nodes[g->nodes[node].in[0]].shape;
    return brisk_sum_to(g, dy, xs);
}
