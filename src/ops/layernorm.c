/* Layer normalisation over the last dim: y = (x - mean) / sqrt(var + eps) * gamma + beta,
 * var the biased variance (as PyTorch). Backward: dx through the fused
 * LAYERNORM_GRAD_X op; dgamma = sum over rows of dy * xhat, with xhat recomputed by
 * LAYERNORM_XHAT rather than kept from the forward (it is cheap and saves a buffer
 * that would otherwise live from forward to backward); dbeta = sum over rows of dy. */
#include "ops/ops_internal.h"

#include <math.h>

int brisk_layernorm(brisk_graph *g, int x, int gamma, int beta, float eps) {
    int ids[3] = {x, gamma, beta};
    if (brisk_ops_check_dtype(g, "layernorm", ids, 3, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape, sg = g->nodes[gamma].shape, sb = g->nodes[beta].shape;
    int64_t n = sx.ndim ? sx.d[sx.ndim - 1] : 0;
    if (sx.ndim < 1 || sg.ndim != 1 || sb.ndim != 1 || sg.d[0] != n || sb.d[0] != n) {
        char bx[BRISK_SHAPE_STR], bg[BRISK_SHAPE_STR], bb[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "layernorm: gamma %s and beta %s must be [%lld], the last dim of x %s",
                                brisk_shape_str(&sg, bg, sizeof bg), brisk_shape_str(&sb, bb, sizeof bb),
                                (long long)n, brisk_shape_str(&sx, bx, sizeof bx));
    }
    if (!(eps >= 0.0f) || isinf(eps))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "layernorm: eps = %g (expected a finite eps >= 0)",
                                (double)eps);
    brisk_attr at = brisk_attr_none();
    at.f0 = eps;
    return brisk_graph_append(g, BRISK_OP_LAYERNORM, ids, 3, BRISK_F32, sx, &at);
}

int brisk_bw_layernorm(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    brisk_attr at = brisk_attr_none();
    at.f0 = n.attr.f0;
    if (which == 0) {
        int ids[3] = {dy, n.in[0], n.in[1]};
        return brisk_graph_append(g, BRISK_OP_LAYERNORM_GRAD_X, ids, 3, BRISK_F32, n.shape, &at);
    }
    if (which == 2) return brisk_ops_sum_rows(g, dy);
    int xhat = brisk_graph_append(g, BRISK_OP_LAYERNORM_XHAT, &n.in[0], 1, BRISK_F32, n.shape, &at);
    return xhat < 0 ? -1 : brisk_ops_sum_rows(g, brisk_mul(g, dy, xhat));
}
