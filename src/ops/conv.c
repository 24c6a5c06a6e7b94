/* 2-D convolution and pooling, NCHW or NHWC, with their backward rules.
 *
 * CONV2D follows torch.nn.functional.conv2d: w [Co, C/groups, kh, kw], zero padding on
 * both sides, dilation, groups (input channel block g feeds output block g). Its two
 * gradients are dedicated ops: CONV2D_GRAD_X(dy, w), the transposed convolution, and
 * CONV2D_GRAD_W(dy, x), the correlation of dy with x. A bias is a broadcast ADD of the
 * bias reshaped to [Co, 1, 1] (whose gradient SUM_TO already reduces), so it is not part
 * of the op. win.layout NHWC puts the channels last in x, y and their gradients (the
 * layout tensor-core convolutions read); w stays [Co, C/groups, kh, kw] so parameters and
 * checkpoints do not depend on the layout. The gradient ops carry the forward's window,
 * layout included.
 *
 * A transposed convolution (brisk_conv_transpose2d) is CONV2D_GRAD_X itself, x in dy's place
 * and w [C_in, C_out/groups, kh, kw] in the forward weight's (both PyTorch's layouts), so it
 * runs the gradient's kernels (cuDNN's backward data on the GPU); its gradients are a
 * CONV2D of dz by w and a CONV2D_GRAD_W of (x, dz). A 1-D convolution is a CONV2D with
 * H = 1 through views.
 *
 * POOL2D max or average (count_include_pad, as PyTorch's default; ceil_mode off). Max
 * pooling keeps each window's argmax in a workspace after its output (as the sequence ops
 * keep theirs), so its gradient POOL2D_GRAD(dy, pool) is a scatter; average pooling's
 * gradient reads only dy. */
#include "ops/ops_internal.h"

#include <limits.h>

brisk_window brisk_window_2d(int k, int stride, int pad) {
    brisk_window w = {.kh = k, .kw = k, .sh = stride, .sw = stride, .ph = pad, .pw = pad, .dh = 1, .dw = 1,
                      .groups = 1};
    return w;
}

/* (in + 2 pad - dil (k - 1) - 1) / stride + 1, or -1 when the window does not fit. */
static int64_t out_dim(int64_t in, int k, int stride, int pad, int dil) {
    int64_t span = in + 2 * (int64_t)pad - (int64_t)dil * (k - 1) - 1;
    return span < 0 ? -1 : span / stride + 1;
}

/* 0 when the window's numbers are in range, else records an error for `op`. */
static int check_window(brisk_graph *g, const char *op, const brisk_window *w) {
    if (w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1 || w->ph < 0 || w->pw < 0 || w->dh < 1 || w->dw < 1 ||
        w->groups < 1)
        return brisk_graph_fail(g, BRISK_ERR_INVALID,
                                "%s: kernel %dx%d, stride %dx%d, padding %dx%d, dilation %dx%d, groups %d "
                                "(expected kernel, stride, dilation and groups >= 1, padding >= 0)",
                                op, w->kh, w->kw, w->sh, w->sw, w->ph, w->pw, w->dh, w->dw, w->groups);
    if (w->layout != BRISK_LAYOUT_NCHW && w->layout != BRISK_LAYOUT_NHWC)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: layout %d (expected NCHW %d or NHWC %d)", op, w->layout,
                                BRISK_LAYOUT_NCHW, BRISK_LAYOUT_NHWC);
    return 0;
}

int brisk_conv2d(brisk_graph *g, int x, int w, brisk_window win) {
    int ids[2] = {x, w};
    if (brisk_ops_check_dtype(g, "conv2d", ids, 2, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape, sw = g->nodes[w].shape;
    char bx[BRISK_SHAPE_STR], bw[BRISK_SHAPE_STR];
    int nhwc = win.layout == BRISK_LAYOUT_NHWC;
    if (sx.ndim != 4 || sw.ndim != 4 || sw.d[2] > INT_MAX || sw.d[3] > INT_MAX)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv2d: x %s and w %s (expected x %s, w [Co, C/groups, kh, kw])",
                                brisk_shape_str(&sx, bx, sizeof bx), brisk_shape_str(&sw, bw, sizeof bw),
                                nhwc ? "[N, H, W, C] (NHWC)" : "[N, C, H, W]");
    win.kh = (int)sw.d[2];
    win.kw = (int)sw.d[3];
    if (check_window(g, "conv2d", &win)) return -1;
    /* the spatial and channel dims of x by layout */
    int64_t C = sx.d[nhwc ? 3 : 1], H = sx.d[nhwc ? 1 : 2], W = sx.d[nhwc ? 2 : 3];
    if (C % win.groups || sw.d[0] % win.groups || sw.d[1] * win.groups != C)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "conv2d: x %s%s and w %s with %d groups (expected w [Co, C/groups, kh, kw], C and Co "
                                "multiples of groups)", brisk_shape_str(&sx, bx, sizeof bx), nhwc ? " (NHWC)" : "",
                                brisk_shape_str(&sw, bw, sizeof bw), win.groups);
    int64_t ho = out_dim(H, win.kh, win.sh, win.ph, win.dh), wo = out_dim(W, win.kw, win.sw, win.pw, win.dw);
    if (ho < 1 || wo < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv2d: the %dx%d kernel (dilation %dx%d) does not fit x %s%s "
                                "padded by %dx%d", win.kh, win.kw, win.dh, win.dw, brisk_shape_str(&sx, bx, sizeof bx),
                                nhwc ? " (NHWC)" : "", win.ph, win.pw);
    brisk_attr at = brisk_attr_none();
    at.win = win;
    brisk_shape sy = nhwc ? brisk_shape4(sx.d[0], ho, wo, sw.d[0]) : brisk_shape4(sx.d[0], sw.d[0], ho, wo);
    return brisk_graph_append(g, BRISK_OP_CONV2D, ids, 2, BRISK_F32, sy, &at);
}

int brisk_bw_conv2d(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    int ids[2] = {dy, n.in[which == 0 ? 1 : 0]};
    return brisk_graph_append(g, which == 0 ? BRISK_OP_CONV2D_GRAD_X : BRISK_OP_CONV2D_GRAD_W, ids, 2, BRISK_F32,
                              g->nodes[n.in[which]].shape, &n.attr);
}

/* z = CONV2D_GRAD_X(y, w) is the transpose of y = CONV2D(x, w), linear in y and in w:
 * <CONV2D(a, w), y> = <a, z>, so dL/dy = CONV2D(dz, w) and dL/dw = CONV2D_GRAD_W(y, dz). */
int brisk_bw_conv2d_grad_x(brisk_graph *g, int node, int dz, int which) {
    brisk_node n = g->nodes[node];
    int ids[2] = {which == 0 ? dz : n.in[0], which == 0 ? n.in[1] : dz};
    return brisk_graph_append(g, which == 0 ? BRISK_OP_CONV2D : BRISK_OP_CONV2D_GRAD_W, ids, 2, BRISK_F32,
                              g->nodes[n.in[which]].shape, &n.attr);
}

int brisk_conv_transpose2d(brisk_graph *g, int x, int w, brisk_window win, int out_pad_h, int out_pad_w) {
    int ids[2] = {x, w};
    if (brisk_ops_check_dtype(g, "conv_transpose2d", ids, 2, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape, sw = g->nodes[w].shape;
    char bx[BRISK_SHAPE_STR], bw[BRISK_SHAPE_STR];
    int nhwc = win.layout == BRISK_LAYOUT_NHWC;
    if (sx.ndim != 4 || sw.ndim != 4 || sw.d[2] > INT_MAX || sw.d[3] > INT_MAX)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv_transpose2d: x %s and w %s (expected x %s, w [C_in, "
                                "C_out/groups, kh, kw])", brisk_shape_str(&sx, bx, sizeof bx),
                                brisk_shape_str(&sw, bw, sizeof bw), nhwc ? "[N, H, W, C_in] (NHWC)" : "[N, C_in, H, W]");
    win.kh = (int)sw.d[2];
    win.kw = (int)sw.d[3];
    if (check_window(g, "conv_transpose2d", &win)) return -1;
    int64_t C = sx.d[nhwc ? 3 : 1], H = sx.d[nhwc ? 1 : 2], W = sx.d[nhwc ? 2 : 3];
    if (sw.d[0] != C || C % win.groups)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv_transpose2d: x %s%s and w %s with %d groups (expected w "
                                "[C_in, C_out/groups, kh, kw], C_in a multiple of groups)",
                                brisk_shape_str(&sx, bx, sizeof bx), nhwc ? " (NHWC)" : "",
                                brisk_shape_str(&sw, bw, sizeof bw), win.groups);
    /* output padding at or past the stride would make rows the forward convolution of the
     * output never reads back: its shape would not invert to x's (PyTorch refuses it too) */
    if (out_pad_h < 0 || out_pad_w < 0 || out_pad_h >= win.sh || out_pad_w >= win.sw)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "conv_transpose2d: output padding %dx%d (expected 0 <= output "
                                "padding < stride %dx%d)", out_pad_h, out_pad_w, win.sh, win.sw);
    int64_t ho = (H - 1) * win.sh - 2 * (int64_t)win.ph + (int64_t)win.dh * (win.kh - 1) + out_pad_h + 1;
    int64_t wo = (W - 1) * win.sw - 2 * (int64_t)win.pw + (int64_t)win.dw * (win.kw - 1) + out_pad_w + 1;
    if (H < 1 || W < 1 || ho < 1 || wo < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv_transpose2d: x %s%s with the %dx%d kernel, stride %dx%d and "
                                "padding %dx%d gives an empty output", brisk_shape_str(&sx, bx, sizeof bx),
                                nhwc ? " (NHWC)" : "", win.kh, win.kw, win.sh, win.sw, win.ph, win.pw);
    int64_t co = sw.d[1] * win.groups;
    brisk_attr at = brisk_attr_none();
    at.win = win;
    brisk_shape sy = nhwc ? brisk_shape4(sx.d[0], ho, wo, co) : brisk_shape4(sx.d[0], co, ho, wo);
    return brisk_graph_append(g, BRISK_OP_CONV2D_GRAD_X, ids, 2, BRISK_F32, sy, &at);
}

int brisk_conv1d(brisk_graph *g, int x, int w, int stride, int pad, int dilation, int groups) {
    int ids[2] = {x, w};
    if (brisk_ops_check_dtype(g, "conv1d", ids, 2, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape, sw = g->nodes[w].shape;
    char bx[BRISK_SHAPE_STR], bw[BRISK_SHAPE_STR];
    brisk_shape_str(&sx, bx, sizeof bx);
    brisk_shape_str(&sw, bw, sizeof bw);
    if (sx.ndim != 3 || sw.ndim != 3 || sw.d[2] < 1 || sw.d[2] > INT_MAX)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv1d: x %s and w %s (expected x [N, C, L], w [Co, C/groups, k])",
                                bx, bw);
    if (stride < 1 || pad < 0 || dilation < 1 || groups < 1)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "conv1d: stride %d, padding %d, dilation %d, groups %d (expected "
                                "stride, dilation and groups >= 1, padding >= 0)", stride, pad, dilation, groups);
    int64_t C = sx.d[1], Co = sw.d[0], k = sw.d[2];
    if (C % groups || Co % groups || sw.d[1] * groups != C)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv1d: x %s and w %s with %d groups (expected w [Co, C/groups, k], "
                                "C and Co multiples of groups)", bx, bw, groups);
    int64_t lo = out_dim(sx.d[2], (int)k, stride, pad, dilation);
    if (lo < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "conv1d: the kernel of %lld (dilation %d) does not fit x %s padded "
                                "by %d", (long long)k, dilation, bx, pad);
    brisk_window win = {.kh = 1, .kw = (int)k, .sh = 1, .sw = stride, .ph = 0, .pw = pad, .dh = 1, .dw = dilation,
                        .groups = groups};
    int y = brisk_conv2d(g, brisk_reshape(g, x, brisk_shape4(sx.d[0], C, 1, sx.d[2])),
                         brisk_reshape(g, w, brisk_shape4(Co, sw.d[1], 1, k)), win);
    return y < 0 ? -1 : brisk_reshape(g, y, brisk_shape3(sx.d[0], Co, lo));
}

int brisk_global_avg_pool2d(brisk_graph *g, int x, int layout) {
    if (brisk_ops_check_dtype(g, "global_avg_pool2d", &x, 1, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape;
    char bx[BRISK_SHAPE_STR];
    if (layout != BRISK_LAYOUT_NCHW && layout != BRISK_LAYOUT_NHWC)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "global_avg_pool2d: layout %d (expected NCHW %d or NHWC %d)",
                                layout, BRISK_LAYOUT_NCHW, BRISK_LAYOUT_NHWC);
    if (sx.ndim != 4)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "global_avg_pool2d: x %s (expected %s)",
                                brisk_shape_str(&sx, bx, sizeof bx),
                                layout == BRISK_LAYOUT_NHWC ? "[N, H, W, C] (NHWC)" : "[N, C, H, W]");
    return brisk_mean(g, x, layout == BRISK_LAYOUT_NHWC ? (1u << 1) | (1u << 2) : (1u << 2) | (1u << 3), 0);
}

int brisk_pool2d(brisk_graph *g, int x, int kind, brisk_window win) {
    if (brisk_ops_check_dtype(g, "pool2d", &x, 1, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape;
    char bx[BRISK_SHAPE_STR];
    if (kind != BRISK_POOL_MAX && kind != BRISK_POOL_AVG)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "pool2d: kind %d (expected max %d or avg %d)", kind,
                                BRISK_POOL_MAX, BRISK_POOL_AVG);
    win.groups = 1;
    if (check_window(g, "pool2d", &win)) return -1;
    int nhwc = win.layout == BRISK_LAYOUT_NHWC;
    if (sx.ndim != 4)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "pool2d: x %s (expected %s)", brisk_shape_str(&sx, bx, sizeof bx),
                                nhwc ? "[N, H, W, C] (NHWC)" : "[N, C, H, W]");
    int64_t C = sx.d[nhwc ? 3 : 1], H = sx.d[nhwc ? 1 : 2], W = sx.d[nhwc ? 2 : 3];
    /* PyTorch's rules: every window holds an input element, average pooling is undilated */
    if (win.ph > win.kh / 2 || win.pw > win.kw / 2)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "pool2d: padding %dx%d is more than half the %dx%d kernel",
                                win.ph, win.pw, win.kh, win.kw);
    if (kind == BRISK_POOL_AVG && (win.dh != 1 || win.dw != 1))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "pool2d: average pooling takes no dilation (got %dx%d)", win.dh,
                                win.dw);
    int64_t ho = out_dim(H, win.kh, win.sh, win.ph, win.dh), wo = out_dim(W, win.kw, win.sw, win.pw, win.dw);
    if (ho < 1 || wo < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "pool2d: the %dx%d window does not fit x %s%s padded by %dx%d",
                                win.kh, win.kw, brisk_shape_str(&sx, bx, sizeof bx), nhwc ? " (NHWC)" : "", win.ph,
                                win.pw);
    if (H * W > INT32_MAX)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "pool2d: x %s has planes over 2^31 elements",
                                brisk_shape_str(&sx, bx, sizeof bx));
    brisk_attr at = brisk_attr_none();
    at.kind = kind;
    at.win = win;
    brisk_shape sy = nhwc ? brisk_shape4(sx.d[0], ho, wo, C) : brisk_shape4(sx.d[0], C, ho, wo);
    int id = brisk_graph_append(g, BRISK_OP_POOL2D, &x, 1, BRISK_F32, sy, &at);
    /* max pooling keeps each window's argmax (i32, flat in its plane) for the gradient */
    if (id >= 0 && kind == BRISK_POOL_MAX) g->nodes[id].bytes += (size_t)(sx.d[0] * C * ho * wo) * sizeof(int32_t);
    return id;
}

int brisk_bw_pool2d(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    int ids[2] = {dy, node};
    return brisk_graph_append(g, BRISK_OP_POOL2D_GRAD, ids, n.attr.kind == BRISK_POOL_MAX ? 2 : 1, BRISK_F32,
                              g->nodes[n.in[0]].shape, &n.attr);
}
