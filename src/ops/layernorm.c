/* Layer normalisation over the last dim: y = (x - mean) / sqrt(var + eps) * gamma + beta,
 * var the biased variance (as PyTorch). Backward: dx through the fused
 * LAYERNORM_GRAD_X op; dgamma = sum over rows of dy * xhat, with xhat recomputed by
 * LAYERNORM_XHAT rather than kept from the forward (it is cheap and saves a buffer
 * that would otherwise live from forward to backward); dbeta = sum over rows of dy.
 *
 * Group normalisation (torch.nn.GroupNorm) is the same statistics over other rows: x
 * [N, C, ...] viewed as [N groups, C/groups * positions], each row normalised by
 * LAYERNORM_XHAT, viewed back and scaled and shifted per channel by a broadcast MUL and
 * ADD (whose gradients, SUM_TO, are dgamma and dbeta). LAYERNORM_XHAT's own gradient is
 * LAYERNORM_GRAD_X without gamma (gamma = 1, the same arithmetic: dy times 1 is dy). */
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

int brisk_bw_layernorm_xhat(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    int ids[2] = {dy, n.in[0]};
    brisk_attr at = brisk_attr_none();
    at.f0 = n.attr.f0;
    return brisk_graph_append(g, BRISK_OP_LAYERNORM_GRAD_X, ids, 2, BRISK_F32, n.shape, &at);
}

int brisk_group_norm(brisk_graph *g, int x, int gamma, int beta, int groups, float eps) {
    int ids[3] = {x, gamma, beta}, n_in = 1;
    if (gamma >= 0) ids[n_in++] = gamma;
    if (beta >= 0) ids[n_in++] = beta;
    if (brisk_ops_check_dtype(g, "group_norm", ids, n_in, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape;
    char bx[BRISK_SHAPE_STR], bp[BRISK_SHAPE_STR];
    brisk_shape_str(&sx, bx, sizeof bx);
    if (sx.ndim < 2)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "group_norm: x %s (expected [N, C, ...])", bx);
    int64_t N = sx.d[0], C = sx.d[1];
    if (groups < 1 || C % groups)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "group_norm: %d groups for the %lld channels of x %s (expected "
                                "groups >= 1 dividing the channels)", groups, (long long)C, bx);
    for (int k = 1; k < n_in; k++) {
        brisk_shape s = g->nodes[ids[k]].shape;
        if (s.ndim != 1 || s.d[0] != C)
            return brisk_graph_fail(g, BRISK_ERR_SHAPE, "group_norm: %s %s (expected [%lld], the channels of x %s)",
                                    ids[k] == gamma ? "gamma" : "beta", brisk_shape_str(&s, bp, sizeof bp),
                                    (long long)C, bx);
    }
    if (!(eps >= 0.0f) || isinf(eps))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "group_norm: eps = %g (expected a finite eps >= 0)", (double)eps);
    int64_t per = N * groups != 0 ? brisk_shape_numel(&sx) / (N * groups) : 0;
    int rows = brisk_reshape(g, x, brisk_shape2(N * groups, per));
    brisk_attr at = brisk_attr_none();
    at.f0 = eps;
    int xh = rows < 0 ? -1 : brisk_graph_append(g, BRISK_OP_LAYERNORM_XHAT, &rows, 1, BRISK_F32,
                                                brisk_shape2(N * groups, per), &at);
    int y = xh < 0 ? -1 : brisk_reshape(g, xh, sx);
    brisk_shape per_channel = sx; /* [C, 1, ...]: broadcasts over the batch and the positions */
    per_channel.ndim = sx.ndim - 1;
    per_channel.d[0] = C;
    for (int i = 1; i < per_channel.ndim; i++) per_channel.d[i] = 1;
    if (y >= 0 && gamma >= 0) y = brisk_mul(g, y, brisk_reshape(g, gamma, per_channel));
    if (y >= 0 && beta >= 0) y = brisk_add(g, y, brisk_reshape(g, beta, per_channel));
    return y;
}
