/* POOL2D and POOL2D_GRAD over NCHW, one (n, c) plane per work item, as PyTorch computes
 * them: max takes the first largest value of each window (a NaN wins, padding is never
 * read); average divides the sum of the window's in-bounds values by kh kw (padding
 * counts as zeros: count_include_pad). The gradient of max pooling finds each window's
 * maximum again in x instead of keeping indices; each plane is one thread's, in a fixed
 * order, so the result does not depend on the thread count. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

typedef struct pool_ctx {
    int64_t H, W, Ho, Wo;
    brisk_window w;
    int max;
    const float *x, *dy;
    float *out;
} pool_ctx;

/* The flat index in the plane of window (oh, ow)'s maximum; -1 only if no tap is inside
 * (the builder's padding rule rules that out). */
static int64_t window_argmax(const pool_ctx *p, const float *x, int64_t oh, int64_t ow) {
    int64_t best = -1;
    float m = -INFINITY;
    for (int i = 0; i < p->w.kh; i++) {
        int64_t ih = oh * p->w.sh - p->w.ph + (int64_t)i * p->w.dh;
        if (ih < 0 || ih >= p->H) continue;
        for (int j = 0; j < p->w.kw; j++) {
            int64_t iw = ow * p->w.sw - p->w.pw + (int64_t)j * p->w.dw;
            if (iw < 0 || iw >= p->W) continue;
            float v = x[ih * p->W + iw];
            if (best < 0 || v > m || isnan(v)) m = v, best = ih * p->W + iw;
        }
    }
    return best;
}

static void pool_forward_planes(const void *vctx, int64_t q0, int64_t q1) {
    const pool_ctx *p = vctx;
    double inv = 1.0 / ((double)p->w.kh * p->w.kw);
    for (int64_t q = q0; q < q1; q++) {
        const float *x = p->x + q * p->H * p->W;
        float *y = p->out + q * p->Ho * p->Wo;
        for (int64_t oh = 0; oh < p->Ho; oh++)
            for (int64_t ow = 0; ow < p->Wo; ow++) {
                if (p->max) {
                    int64_t k = window_argmax(p, x, oh, ow);
                    y[oh * p->Wo + ow] = k < 0 ? -INFINITY : x[k];
                    continue;
                }
                double s = 0;
                for (int i = 0; i < p->w.kh; i++) {
                    int64_t ih = oh * p->w.sh - p->w.ph + i;
                    if (ih < 0 || ih >= p->H) continue;
                    for (int j = 0; j < p->w.kw; j++) {
                        int64_t iw = ow * p->w.sw - p->w.pw + j;
                        if (iw >= 0 && iw < p->W) s += x[ih * p->W + iw];
                    }
                }
                y[oh * p->Wo + ow] = (float)(s * inv);
            }
    }
}

static void pool_grad_planes(const void *vctx, int64_t q0, int64_t q1) {
    const pool_ctx *p = vctx;
    float inv = (float)(1.0 / ((double)p->w.kh * p->w.kw));
    for (int64_t q = q0; q < q1; q++) {
        float *dx = p->out + q * p->H * p->W;
        const float *dy = p->dy + q * p->Ho * p->Wo, *x = p->max ? p->x + q * p->H * p->W : NULL;
        memset(dx, 0, (size_t)(p->H * p->W) * sizeof(float));
        for (int64_t oh = 0; oh < p->Ho; oh++)
            for (int64_t ow = 0; ow < p->Wo; ow++) {
                float d = dy[oh * p->Wo + ow];
                if (p->max) {
                    int64_t k = window_argmax(p, x, oh, ow);
                    if (k >= 0) dx[k] += d;
                    continue;
                }
                for (int i = 0; i < p->w.kh; i++) {
                    int64_t ih = oh * p->w.sh - p->w.ph + i;
                    if (ih < 0 || ih >= p->H) continue;
                    for (int j = 0; j < p->w.kw; j++) {
                        int64_t iw = ow * p->w.sw - p->w.pw + j;
                        if (iw >= 0 && iw < p->W) dx[ih * p->W + iw] += d * inv;
                    }
                }
            }
    }
}

brisk_status cpu_pool_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                         brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_POOL2D_GRAD;
    const brisk_shape *xs = grad ? &n->shape : &IN_NODE(g, id, 0)->shape;
    const brisk_shape *ys = grad ? &IN_NODE(g, id, 0)->shape : &n->shape;
    const brisk_window *w = &n->attr.win;
    pool_ctx p = {.w = *w, .max = n->attr.kind == BRISK_POOL_MAX, .out = out};
    if (xs->ndim != 4 || ys->ndim != 4 || xs->d[0] != ys->d[0] || xs->d[1] != ys->d[1] || w->kh < 1 || w->kw < 1 ||
        w->sh < 1 || w->sw < 1 || w->ph < 0 || w->pw < 0 || w->dh < 1 || w->dw < 1 ||
        (grad && p.max && (n->n_in != 2 || !brisk_shape_equal(&IN_NODE(g, id, 1)->shape, xs))))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: x, y and the window do not agree", brisk_op_name(n->op));
    p.H = xs->d[2], p.W = xs->d[3], p.Ho = ys->d[2], p.Wo = ys->d[3];
    if ((p.Ho - 1) * w->sh - w->ph + (int64_t)(w->kh - 1) * w->dh >= p.H + w->ph ||
        (p.Wo - 1) * w->sw - w->pw + (int64_t)(w->kw - 1) * w->dw >= p.W + w->pw)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: the output is larger than the window allows", brisk_op_name(n->op));
    if (grad) p.dy = in[0], p.x = p.max ? in[1] : NULL;
    else p.x = in[0];
    int64_t planes = xs->d[0] * xs->d[1], per = p.Ho * p.Wo * w->kh * w->kw + p.H * p.W;
    cpu_parallel(cb, planes, CPU_PAR_MIN / (per ? per : 1) + 1, grad ? pool_grad_planes : pool_forward_planes, &p);
    return BRISK_OK;
}
