/* ONNX's layers with weights, and pooling: Conv, Gemm, MatMul, BatchNormalization,
 * LayerNormalization, MaxPool, AveragePool, GlobalAveragePool. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

int ox_conv_window(ctx *c, int spatial, brisk_window *w) {
    const int64_t *ks, *st, *pd, *dl;
    size_t nk = ox_attr_ints(c, "kernel_shape", &ks), ns = ox_attr_ints(c, "strides", &st), np = ox_attr_ints(c, "pads", &pd),
           nd = ox_attr_ints(c, "dilations", &dl);
    const char *ap = "NOTSET";
    brisk_error e;
    brisk_onnx_attr_string(c->m, c->n, "auto_pad", "NOTSET", &ap, &e);
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")) return ox_fail(c, "auto_pad %s (NOTSET or VALID taken)", ap);
    int k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, dd[2] = {1, 1};
    for (int i = 0; i < spatial; i++) {
        int j = 2 - spatial + i;
        if (nk > (size_t)i) k[j] = (int)ks[i];
        if (ns > (size_t)i) s[j] = (int)st[i];
        if (nd > (size_t)i) dd[j] = (int)dl[i];
        if (np == 2 * (size_t)spatial) {
            if (pd[i] != pd[i + spatial]) return ox_fail(c, "pads %lld and %lld differ (brisk pads both sides alike)",
                                                   (long long)pd[i], (long long)pd[i + spatial]);
            p[j] = (int)pd[i];
        }
    }
    *w = brisk_window_2d(k[0], s[0], p[0]);
    w->kw = k[1], w->sw = s[1], w->pw = p[1], w->dh = dd[0], w->dw = dd[1];
    w->groups = (int)ox_attr_i(c, "group", 1);
    return 0;
}

int ox_channel_add(ctx *c, int y, int b, int spatial) {
    if (y < 0 || b < 0) return -1;
    int64_t d[BRISK_MAX_DIMS] = {ox_shape(c, b)->d[0], 1, 1, 1};
    return brisk_add(c->g, y, brisk_reshape(c->g, b, brisk_shape_make(1 + spatial, d)));
}

int ox_build_conv(ctx *c) {
    int x = ox_in(c, 0, 0), w = ox_in(c, 1, 0);
    if (x < 0 || w < 0) return -1;
    int rank = ox_shape(c, x)->ndim;
    brisk_window win;
    if (rank != 3 && rank != 4) return ox_fail(c, "Conv of a rank-%d input (1-D and 2-D taken)", rank);
    if (ox_conv_window(c, rank - 2, &win)) return -1;
    int y = rank == 4 ? brisk_conv2d(c->g, x, w, win) : brisk_conv1d(c->g, x, w, win.sw, win.pw, win.dw, win.groups);
    if (ox_has_in(c, 2)) y = ox_channel_add(c, y, ox_in(c, 2, 0), rank - 2);
    return y;
}

static int build_pool(ctx *c, int kind) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    brisk_shape s = *ox_shape(c, x);
    if (s.ndim != 3 && s.ndim != 4) return ox_fail(c, "pooling of a rank-%d input (1-D and 2-D taken)", s.ndim);
    if (ox_attr_i(c, "ceil_mode", 0)) return ox_fail(c, "ceil_mode 1 (0 taken)");
    brisk_window win;
    if (ox_conv_window(c, s.ndim - 2, &win)) return -1;
    if (win.dh != 1 || win.dw != 1) return ox_fail(c, "dilated pooling");
    if (kind == BRISK_POOL_AVG && (win.ph || win.pw) && !ox_attr_i(c, "count_include_pad", 0))
        return ox_fail(c, "padded AveragePool without count_include_pad");
    win.groups = 1;
    if (s.ndim == 4) return brisk_pool2d(c->g, x, kind, win);
    /* 1-D as 2-D of height 1 (views) */
    int y = brisk_pool2d(c->g, brisk_reshape(c->g, x, brisk_shape4(s.d[0], s.d[1], 1, s.d[2])), kind, win);
    return y < 0 ? -1 : brisk_reshape(c->g, y, brisk_shape3(s.d[0], s.d[1], ox_shape(c, y)->d[3]));
}

int ox_build_maxpool(ctx *c) { return build_pool(c, BRISK_POOL_MAX); }
int ox_build_avgpool(ctx *c) { return build_pool(c, BRISK_POOL_AVG); }

int ox_build_gemm(ctx *c) {
    int a = ox_in(c, 0, 0), b = ox_in(c, 1, 0);
    float alpha = ox_attr_f(c, "alpha", 1.0f), beta = ox_attr_f(c, "beta", 1.0f);
    int y = brisk_matmul(c->g, a, b, (int)ox_attr_i(c, "transA", 0), (int)ox_attr_i(c, "transB", 0));
    if (alpha != 1.0f) y = brisk_scale(c->g, y, alpha, 0.0f);
    if (ox_has_in(c, 2)) {
        int bias = ox_in(c, 2, 0);
        if (bias >= 0 && beta != 1.0f) bias = brisk_scale(c->g, bias, beta, 0.0f);
        if (bias >= 0 && y >= 0 && ox_shape(c, bias)->ndim == 1) y = brisk_bias_add(c->g, y, bias);
        else y = brisk_add(c->g, y, bias);
    }
    return y;
}

/* MatMul with NumPy's rules: a 1-D side gains a dim of 1 for the product and loses it after;
 * a right side of rank 2 (or whose batch dims are all 1, no more of them than the left's)
 * multiplies the left's rows flattened; else both sides are broadcast to equal batch dims
 * (EXPAND where they differ) for a batched MATMUL. */
int ox_build_matmul(ctx *c) {
    int a = ox_in(c, 0, 0), b = ox_in(c, 1, 0);
    if (a < 0 || b < 0) return -1;
    brisk_shape sa = *ox_shape(c, a), sb = *ox_shape(c, b);
    int a1 = sa.ndim == 1, b1 = sb.ndim == 1;
    if (sa.ndim < 1 || sb.ndim < 1) return ox_fail(c, "MatMul of ranks %d and %d (1 and more taken)", sa.ndim, sb.ndim);
    if (a1) a = brisk_reshape(c->g, a, sa = brisk_shape2(1, sa.d[0]));
    if (b1) b = brisk_reshape(c->g, b, sb = brisk_shape2(sb.d[0], 1));
    int flat = sb.ndim <= sa.ndim;
    for (int k = 0; k < sb.ndim - 2; k++) flat &= sb.d[k] == 1;
    int64_t m = sa.d[sa.ndim - 2], k = sa.d[sa.ndim - 1], n = sb.d[sb.ndim - 1];
    if (sb.d[sb.ndim - 2] != k) return ox_fail(c, "MatMul of [.., %lld, %lld] and [.., %lld, %lld]", (long long)m, (long long)k,
                                               (long long)sb.d[sb.ndim - 2], (long long)n);
    brisk_shape so;
    int y;
    if (flat) {
        int x = sa.ndim == 2 ? a : brisk_reshape(c->g, a, brisk_shape2(brisk_shape_numel(&sa) / k, k));
        y = brisk_matmul(c->g, x, sb.ndim == 2 ? b : brisk_reshape(c->g, b, brisk_shape2(k, n)), 0, 0);
        so = sa;
    } else {
        int64_t d[BRISK_MAX_DIMS];
        int r = ox_broadcast(c, sa.d, sa.ndim - 2, sb.d, sb.ndim - 2, d);
        if (r < 0) return -1;
        if (r + 2 > BRISK_MAX_DIMS) return ox_fail(c, "rank %d is more than brisk's %d", r + 2, BRISK_MAX_DIMS);
        brisk_shape ta = ox_shape_of(d, r + 2), tb = ta;
        ta.d[r] = m, ta.d[r + 1] = k, tb.d[r] = k, tb.d[r + 1] = n;
        if (!brisk_shape_equal(&ta, &sa)) a = brisk_expand(c->g, a, ta);
        if (!brisk_shape_equal(&tb, &sb)) b = brisk_expand(c->g, b, tb);
        y = brisk_matmul(c->g, a, b, 0, 0);
        so = ta;
    }
    so.d[so.ndim - 1] = n;
    /* the dims a 1-D side gained go */
    if (b1) so.ndim--;
    if (a1) so.d[so.ndim - (b1 ? 1 : 2)] = so.d[so.ndim - 1], so.ndim--;
    return y < 0 || brisk_shape_equal(&so, ox_shape(c, y)) ? y : brisk_reshape(c->g, y, so);
}

int ox_build_global_avgpool(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    brisk_shape s = *ox_shape(c, x);
    if (s.ndim != 4) return ox_fail(c, "GlobalAveragePool of a rank-%d input (2-D taken)", s.ndim);
    s.d[2] = s.d[3] = 1;
    return brisk_reshape(c->g, brisk_global_avg_pool2d(c->g, x, BRISK_LAYOUT_NCHW), s);
}

int ox_build_batchnorm(ctx *c) {
    int x = ox_in(c, 0, 0), gamma = ox_in(c, 1, 0), beta = ox_in(c, 2, 0), mean = ox_in(c, 3, 1), var = ox_in(c, 4, 1);
    if (x < 0 || gamma < 0 || beta < 0 || mean < 0 || var < 0) return -1;
    /* ONNX's momentum weighs the old statistics, torch's the new batch's */
    return brisk_batchnorm(c->g, x, gamma, beta, mean, var, -1, ox_attr_f(c, "epsilon", 1e-5f),
                           1.0f - ox_attr_f(c, "momentum", 0.9f), 0);
}

int ox_build_layernorm(ctx *c) {
    int x = ox_in(c, 0, 0);
    if (x < 0) return -1;
    int r = ox_shape(c, x)->ndim, a = ox_axis(c, ox_attr_i(c, "axis", -1), r);
    if (a < 0) return -1;
    if (a != r - 1) return ox_fail(c, "axis %d of a rank-%d input (the last taken)", a, r);
    int gamma = ox_in(c, 1, 0), beta = ox_has_in(c, 2) ? ox_in(c, 2, 0) : -1;
    if (gamma < 0) return -1;
    if (beta < 0) return ox_fail(c, "LayerNormalization without a bias");
    return brisk_layernorm(c->g, x, gamma, beta, ox_attr_f(c, "epsilon", 1e-5f));
}
