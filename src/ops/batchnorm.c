/* Batch normalisation over dim 1 (BatchNorm2d on [N, C, H, W]; BatchNorm1d on [N, C]; NHWC
 * through brisk_batchnorm_nhwc's [N H W, C] view), as
 * torch.nn.BatchNorm2d: when training, each channel is normalised by the batch's mean and
 * biased variance, and the running buffers move toward the batch's mean and unbiased
 * variance by `momentum`; in eval the running statistics normalise. An optional residual
 * is added after the affine map and an optional ReLU follows (a ResNet block's
 * relu(bn(conv(x)) + identity) is one op), so the normalised tensor before the ReLU
 * is never stored.
 *
 * The op keeps the per-channel mean and 1 / sqrt(var + eps) it used in a workspace after
 * its output. Backward: BATCHNORM_GRAD_GB sums dy' xhat and dy' per channel (dy' = dy
 * masked where the fused ReLU cut), which are dgamma and dbeta and also what
 * BATCHNORM_GRAD_X needs for dx; the residual's gradient is dy' (ACT_GRAD of the ReLU). */
#include "ops/ops_internal.h"

#include <math.h>

/* The buffer entry of node id, or NULL when id is not a buffer. */
static const brisk_param_info *buffer_of(const brisk_graph *g, int id) {
    for (int k = 0; k < g->n_params; k++)
        if (g->params[k].node == id) return g->params[k].buffer ? &g->params[k] : NULL;
    return NULL;
}

int brisk_batchnorm(brisk_graph *g, int x, int gamma, int beta, int running_mean, int running_var,
                    int residual, float eps, float momentum, int relu) {
    int ids[6] = {x, gamma, beta, running_mean, running_var, residual};
    int n_in = residual >= 0 ? 6 : 5;
    if (brisk_ops_check_dtype(g, "batchnorm", ids, n_in, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape;
    char bx[BRISK_SHAPE_STR], bo[BRISK_SHAPE_STR];
    if (sx.ndim < 2)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "batchnorm: x %s (expected [N, C, ...])",
                                brisk_shape_str(&sx, bx, sizeof bx));
    int64_t C = sx.d[1];
    static const char *what[4] = {"gamma", "beta", "running_mean", "running_var"};
    for (int i = 1; i < 5; i++) {
        brisk_shape s = g->nodes[ids[i]].shape;
        if (s.ndim != 1 || s.d[0] != C)
            return brisk_graph_fail(g, BRISK_ERR_SHAPE, "batchnorm: %s %s (expected [%lld], the channels of x %s)",
                                    what[i - 1], brisk_shape_str(&s, bo, sizeof bo), (long long)C,
                                    brisk_shape_str(&sx, bx, sizeof bx));
    }
    /* the op writes the running statistics, so they must be buffers, not activations or weights */
    for (int i = 3; i < 5; i++)
        if (!buffer_of(g, ids[i]))
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "batchnorm: %s (node %d) is not a buffer (make it with brisk_buffer)",
                                    what[i - 1], ids[i]);
    if (residual >= 0 && !brisk_shape_equal(&g->nodes[residual].shape, &sx)) {
        brisk_shape s = g->nodes[residual].shape;
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "batchnorm: residual %s does not match x %s",
                                brisk_shape_str(&s, bo, sizeof bo), brisk_shape_str(&sx, bx, sizeof bx));
    }
    if (!(eps >= 0.0f) || isinf(eps))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "batchnorm: eps = %g (expected a finite eps >= 0)", (double)eps);
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "batchnorm: momentum = %g (expected 0 <= momentum <= 1)",
                                (double)momentum);
    brisk_attr at = brisk_attr_none();
    at.f0 = eps;
    at.f1 = momentum;
    at.kind = !!relu;
    int id = brisk_graph_append(g, BRISK_OP_BATCHNORM, ids, n_in, BRISK_F32, sx, &at);
    if (id >= 0) g->nodes[id].bytes += (size_t)(2 * C) * sizeof(float);
    return id;
}

/* Channels last: a view as [rows, C], where BATCHNORM's dim 1 is the channel (views are
 * free: RESHAPE aliases), and back. */
int brisk_batchnorm_nhwc(brisk_graph *g, int x, int gamma, int beta, int running_mean, int running_var,
                         int residual, float eps, float momentum, int relu) {
    if (x < 0 || x >= g->n_nodes) return brisk_batchnorm(g, x, gamma, beta, running_mean, running_var, residual, eps,
                                                         momentum, relu); /* its own error for the id */
    brisk_shape sx = g->nodes[x].shape;
    char bx[BRISK_SHAPE_STR];
    if (sx.ndim < 2 || sx.d[sx.ndim - 1] < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "batchnorm: x %s (expected [N, ..., C], channels last)",
                                brisk_shape_str(&sx, bx, sizeof bx));
    int64_t C = sx.d[sx.ndim - 1];
    brisk_shape rows = brisk_shape2(brisk_shape_numel(&sx) / C, C);
    int xr = brisk_reshape(g, x, rows);
    int rr = residual >= 0 && residual < g->n_nodes && brisk_shape_equal(&g->nodes[residual].shape, &sx)
                 ? brisk_reshape(g, residual, rows)
                 : residual; /* a mismatch: batchnorm's own error names it */
    int y = brisk_batchnorm(g, xr, gamma, beta, running_mean, running_var, rr, eps, momentum, relu);
    return y < 0 ? -1 : brisk_reshape(g, y, sx);
}

int brisk_bw_batchnorm(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    if (which == 3 || which == 4) return -1; /* buffers */
    if (which == 5) {
        if (!n.attr.kind) return dy;
        brisk_attr at = brisk_attr_none();
        at.kind = BRISK_OP_RELU;
        int in[3] = {dy, node, node}; /* the ReLU's output is positive exactly where its input is */
        return brisk_graph_append(g, BRISK_OP_ACT_GRAD, in, 3, BRISK_F32, n.shape, &at);
    }
    int64_t C = n.shape.d[1];
    int gin[3] = {dy, node, n.in[0]};
    int gb = brisk_ops_find_recent(g, g->n_forward, BRISK_OP_BATCHNORM_GRAD_GB, gin, 3);
    if (gb < 0) gb = brisk_graph_append(g, BRISK_OP_BATCHNORM_GRAD_GB, gin, 3, BRISK_F32, brisk_shape2(2, C), &n.attr);
    if (gb < 0) return -1;
    if (which == 0) {
        int xin[5] = {dy, node, n.in[0], n.in[1], gb};
        return brisk_graph_append(g, BRISK_OP_BATCHNORM_GRAD_X, xin, 5, BRISK_F32, n.shape, &n.attr);
    }
    return brisk_reshape(g, brisk_slice(g, gb, 0, which == 1 ? 0 : 1, 1), brisk_shape1(C));
}
