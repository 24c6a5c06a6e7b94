/* POOL2D (+GRAD), UPSAMPLE2D (+GRAD) and BATCHNORM (+GRAD_GB, GRAD_X) on the GPU: the CPU
 * backend's checks (src/backend/cpu/pool2d.c, batchnorm.c: the same errors for the same bad
 * graphs; upsampling's are brisk_node_check_inputs'), then the kernels of k_pool.cu,
 * k_upsample.cu and k_batchnorm.cu.
 * NCHW, fp32 (the ops' dtype in every precision mode). */
#include "backend/cuda/cuda_internal.h"

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])

static int64_t numel(const brisk_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}

brisk_status cuda_run_pool(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                           brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_POOL2D_GRAD, max = n->attr.kind == BRISK_POOL_MAX;
    const brisk_shape *xs = grad ? &n->shape : &IN_NODE(g, id, 0)->shape;
    const brisk_shape *ys = grad ? &IN_NODE(g, id, 0)->shape : &n->shape;
    const brisk_window *w = &n->attr.win;
    int64_t ny = numel(ys);
    /* the max gradient reads the forward node's workspace: it must be that node */
    const brisk_node *fw = grad && max && n->n_in == 2 ? IN_NODE(g, id, 1) : NULL;
    int nhwc = w->layout == BRISK_LAYOUT_NHWC, ci = nhwc ? 3 : 1, hi = nhwc ? 1 : 2, wi = nhwc ? 2 : 3;
    if ((w->layout != BRISK_LAYOUT_NCHW && !nhwc) || xs->ndim != 4 || ys->ndim != 4 || xs->d[0] != ys->d[0] ||
        xs->d[ci] != ys->d[ci] || w->kh < 1 || w->kw < 1 ||
        w->sh < 1 || w->sw < 1 || w->ph < 0 || w->pw < 0 || w->dh < 1 || w->dw < 1 ||
        (!grad && max && n->bytes < (size_t)ny * (sizeof(float) + sizeof(int32_t))) ||
        (grad && max && (!fw || fw->op != BRISK_OP_POOL2D || !brisk_shape_equal(&fw->shape, ys) ||
                         fw->bytes < (size_t)ny * (sizeof(float) + sizeof(int32_t)))))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: x, y, the window and the argmax workspace do not agree",
                            brisk_op_name(n->op));
    int64_t H = xs->d[hi], W = xs->d[wi], Ho = ys->d[hi], Wo = ys->d[wi];
    if ((Ho - 1) * w->sh - w->ph + (int64_t)(w->kh - 1) * w->dh >= H + w->ph ||
        (Wo - 1) * w->sw - w->pw + (int64_t)(w->kw - 1) * w->dw >= W + w->pw)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: the output is larger than the window allows", brisk_op_name(n->op));
    if (H * W > INT32_MAX)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: planes over 2^31 elements", brisk_op_name(n->op));
    int win[8] = {w->kh, w->kw, w->sh, w->sw, w->ph, w->pw, w->dh, w->dw};
    int64_t N = xs->d[0], C = xs->d[ci];
    if (grad) {
        const int32_t *arg = max ? (const int32_t *)((const float *)in[1] + ny) : NULL;
        CU(cuk_pool_grad(in[0], arg, out, N, C, H, W, Ho, Wo, win, max, nhwc, cb->compute), "pool2d_grad");
    } else {
        int32_t *arg = max ? (int32_t *)((float *)out + ny) : NULL;
        CU(cuk_pool_fwd(in[0], out, arg, N, C, H, W, Ho, Wo, win, max, nhwc, cb->compute), "pool2d");
    }
    return BRISK_OK;
}

brisk_status cuda_run_upsample(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                               brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_UPSAMPLE2D_GRAD;
    const brisk_shape *xs = grad ? &n->shape : &IN_NODE(g, id, 0)->shape;
    int64_t sh = n->attr.i0, sw = n->attr.i1; /* checked against the shapes: brisk_node_check_inputs */
    int mode = n->attr.kind;
    int64_t planes = xs->d[0] * xs->d[1];
    if (grad)
        CU(cuk_upsample_grad(in[0], out, planes, xs->d[2], xs->d[3], (int)sh, (int)sw,
                             mode == BRISK_UPSAMPLE_BILINEAR, cb->compute), "upsample2d_grad");
    else
        CU(cuk_upsample(in[0], out, planes, xs->d[2], xs->d[3], (int)sh, (int)sw, mode == BRISK_UPSAMPLE_BILINEAR,
                        cb->compute), "upsample2d");
    return BRISK_OK;
}

brisk_status cuda_run_batchnorm(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                                const brisk_step_state *st, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    /* x is input 0 of the forward and input 2 of the gradients */
    if (n->n_in < 3) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d inputs", brisk_op_name(n->op), n->n_in);
    const brisk_node *xn = n->op == BRISK_OP_BATCHNORM ? IN_NODE(g, id, 0) : IN_NODE(g, id, 2);
    const brisk_shape *xs = &xn->shape;
    if (xs->ndim < 2) return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: x must be [N, C, ...]");
    int64_t N = xs->d[0], C = xs->d[1], M = numel(xs) / (C ? C : 1), S = N ? M / N : 0;
    int training = st->training != 0;
    if (C == 0 || M == 0) return BRISK_OK;
    cudaStream_t s = cb->compute;
    if (n->op == BRISK_OP_BATCHNORM) {
        if (n->n_in != 5 && n->n_in != 6)
            return brisk_errorf(err, BRISK_ERR_INVALID, "batchnorm: %d inputs (expected 5 or 6)", n->n_in);
        for (int i = 1; i < 5; i++)
            if (numel(&IN_NODE(g, id, i)->shape) != C)
                return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: input %d must have %lld values", i, (long long)C);
        if (!brisk_shape_equal(&n->shape, xs) || n->bytes < (size_t)(numel(xs) + 2 * C) * 4 ||
            (n->n_in > 5 && !brisk_shape_equal(&IN_NODE(g, id, 5)->shape, xs)))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: output, workspace or residual do not match x");
        if (training && M < 2)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "batchnorm: training needs more than 1 value per channel (got %lld)",
                                (long long)M);
        /* the running statistics are buffers this op owns (see BRISK_OP_BATCHNORM) */
        CU(cuk_bn_forward(in[0], in[1], in[2], n->n_in > 5 ? in[5] : NULL, (float *)in[3], (float *)in[4], out,
                          (float *)out + numel(xs), N, C, S, n->attr.f0, n->attr.f1, n->attr.kind != 0, training, s),
           "batchnorm");
        return BRISK_OK;
    }
    int gx = n->op == BRISK_OP_BATCHNORM_GRAD_X;
    if (n->n_in != (gx ? 5 : 3))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d inputs", brisk_op_name(n->op), n->n_in);
    const brisk_node *bn = IN_NODE(g, id, 1);
    if (bn->op != BRISK_OP_BATCHNORM || !brisk_shape_equal(&bn->shape, xs) ||
        !brisk_shape_equal(&IN_NODE(g, id, 0)->shape, xs) || numel(&n->shape) != (gx ? numel(xs) : 2 * C) ||
        (gx && (numel(&IN_NODE(g, id, 3)->shape) != C || numel(&IN_NODE(g, id, 4)->shape) != 2 * C)))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: inputs do not match a batchnorm of x", brisk_op_name(n->op));
    const float *ws = (const float *)in[1] + numel(xs);
    int relu = bn->attr.kind != 0;
    if (gx)
        CU(cuk_bn_grad_x(in[0], in[1], in[2], ws, in[3], in[4], out, N, C, S, relu, training, s), "batchnorm_grad_x");
    else
        CU(cuk_bn_grad_gb(in[0], in[1], in[2], ws, out, N, C, S, relu, s), "batchnorm_grad_gb");
    return BRISK_OK;
}
