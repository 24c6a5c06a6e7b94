/* 2-D upsampling of NCHW by integer factors, as torch.nn.Upsample(scale_factor=s):
 * nearest (out[oh, ow] = x[oh / sh, ow / sw]) and bilinear with align_corners false (the
 * output pixel's centre mapped back, src = (o + 0.5) / s - 0.5, clamped at 0, weights of
 * its two neighbours). Its gradient UPSAMPLE2D_GRAD returns to each input element the dy
 * of the outputs it fed, with the same weights. U-Nets' decoders use it, often followed
 * by a convolution, in place of a transposed convolution. */
#include "ops/ops_internal.h"

int brisk_upsample2d(brisk_graph *g, int x, int mode, int scale_h, int scale_w) {
    if (brisk_ops_check_dtype(g, "upsample2d", &x, 1, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape;
    char bx[BRISK_SHAPE_STR];
    if (mode != BRISK_UPSAMPLE_NEAREST && mode != BRISK_UPSAMPLE_BILINEAR)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "upsample2d: mode %d (expected nearest %d or bilinear %d)", mode,
                                BRISK_UPSAMPLE_NEAREST, BRISK_UPSAMPLE_BILINEAR);
    if (scale_h < 1 || scale_w < 1)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "upsample2d: scale %dx%d (expected integer factors >= 1)",
                                scale_h, scale_w);
    if (sx.ndim != 4)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "upsample2d: x %s (expected [N, C, H, W])",
                                brisk_shape_str(&sx, bx, sizeof bx));
    /* planes indexed in 32 bits by the kernels */
    if (sx.d[2] * scale_h > INT32_MAX || sx.d[3] * scale_w > INT32_MAX ||
        sx.d[2] * scale_h * sx.d[3] * scale_w > INT32_MAX)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "upsample2d: x %s scaled by %dx%d has planes over 2^31 elements",
                                brisk_shape_str(&sx, bx, sizeof bx), scale_h, scale_w);
    brisk_attr at = brisk_attr_none();
    at.kind = mode;
    at.i0 = scale_h;
    at.i1 = scale_w;
    brisk_shape sy = brisk_shape4(sx.d[0], sx.d[1], sx.d[2] * scale_h, sx.d[3] * scale_w);
    return brisk_graph_append(g, BRISK_OP_UPSAMPLE2D, &x, 1, BRISK_F32, sy, &at);
}

int brisk_bw_upsample2d(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    return brisk_graph_append(g, BRISK_OP_UPSAMPLE2D_GRAD, &dy, 1, BRISK_F32, g->nodes[n.in[0]].shape, &n.attr);
}

brisk_status brisk_ops_check_upsample_node(const brisk_graph *g, int id, brisk_error *err) {
    const brisk_node *n = &g->nodes[id];
    int grad = n->op == BRISK_OP_UPSAMPLE2D_GRAD;
    const brisk_shape *xs = grad ? &n->shape : &g->nodes[n->in[0]].shape;
    const brisk_shape *ys = grad ? &g->nodes[n->in[0]].shape : &n->shape;
    int64_t sh = n->attr.i0, sw = n->attr.i1;
    if (n->n_in != 1 || xs->ndim != 4 || ys->ndim != 4 || sh < 1 || sw < 1 || sh > INT32_MAX || sw > INT32_MAX ||
        (n->attr.kind != BRISK_UPSAMPLE_NEAREST && n->attr.kind != BRISK_UPSAMPLE_BILINEAR) ||
        ys->d[0] != xs->d[0] || ys->d[1] != xs->d[1] || ys->d[2] != xs->d[2] * sh || ys->d[3] != xs->d[3] * sw ||
        ys->d[2] > INT32_MAX || ys->d[3] > INT32_MAX)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): x, y, the mode and the scales %lldx%lld do not agree "
                            "(expected x [N, C, H, W], y [N, C, H sh, W sw])", brisk_op_name(n->op), id, (long long)sh,
                            (long long)sw);
    return BRISK_OK;
}
