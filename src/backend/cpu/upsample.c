/* UPSAMPLE2D and UPSAMPLE2D_GRAD over NCHW planes, integer scales sh = attr.i0, sw = attr.i1:
 *   nearest   out[oh, ow] = x[oh / sh, ow / sw]
 *   bilinear  align_corners false, as PyTorch's upsample_bilinear2d: along each axis the
 *             output index o reads src = (o + 0.5) / s - 0.5 (with 1 / s rounded to f32, as
 *             PyTorch does, and src clamped at 0), i0 = (int)src, i1 = i0 + 1 (i0 at the last
 *             row), weights 1 - (src - i0) and src - i0; out = lh0 (lw0 x[i0, j0] +
 *             lw1 x[i0, j1]) + lh1 (lw0 x[i1, j0] + lw1 x[i1, j1]).
 * The gradients gather: each input element sums, in increasing output index, the dy of
 * the outputs that read it times the weights they read it with (per axis tables turned
 * around), so no two threads add into one element and the result does not depend on the
 * thread count. One plane per work item. */
#include "backend/cpu/cpu_internal.h"

#include <stdlib.h>

/* One axis of the bilinear map: output o reads inputs i0[o], i1[o] with weights l0[o],
 * l1[o]; the inputs' view of it (CSR, by input index, outputs in increasing order):
 * start[i] .. start[i + 1] - 1 index (src, weight) pairs. */
typedef struct axis_map {
    int64_t in, out;
    int32_t *i0, *i1, *start, *src;
    float *l0, *l1, *wt;
} axis_map;

static void axis_free(axis_map *a) {
    free(a->i0), free(a->i1), free(a->start), free(a->src), free(a->l0), free(a->l1), free(a->wt);
}

static int axis_build(axis_map *a, int64_t in, int s) {
    int64_t out = in * s;
    *a = (axis_map){.in = in, .out = out};
    a->i0 = malloc(sizeof(int32_t) * (size_t)out), a->i1 = malloc(sizeof(int32_t) * (size_t)out);
    a->l0 = malloc(sizeof(float) * (size_t)out), a->l1 = malloc(sizeof(float) * (size_t)out);
    a->start = calloc((size_t)in + 1, sizeof(int32_t));
    a->src = malloc(sizeof(int32_t) * (size_t)(2 * out)), a->wt = malloc(sizeof(float) * (size_t)(2 * out));
    if (!a->i0 || !a->i1 || !a->l0 || !a->l1 || !a->start || !a->src || !a->wt) return -1;
    float scale = (float)(1.0 / s);
    for (int64_t o = 0; o < out; o++) {
        float src = scale * ((float)o + 0.5f) - 0.5f;
        if (src < 0.0f) src = 0.0f;
        int64_t i0 = (int64_t)src;
        if (i0 > in - 1) i0 = in - 1;
        float lam = src - (float)i0;
        a->i0[o] = (int32_t)i0, a->i1[o] = (int32_t)(i0 + (i0 < in - 1));
        a->l0[o] = 1.0f - lam, a->l1[o] = lam;
        a->start[a->i0[o] + 1]++, a->start[a->i1[o] + 1]++;
    }
    for (int64_t i = 0; i < in; i++) a->start[i + 1] += a->start[i];
    int32_t *fill = calloc((size_t)in, sizeof(int32_t));
    if (!fill) return -1;
    for (int64_t o = 0; o < out; o++) /* o ascending: each input's list is in output order */
        for (int k = 0; k < 2; k++) {
            int32_t i = k ? a->i1[o] : a->i0[o];
            int32_t at = a->start[i] + fill[i]++;
            a->src[at] = (int32_t)o, a->wt[at] = k ? a->l1[o] : a->l0[o];
        }
    free(fill);
    return 0;
}

typedef struct up_ctx {
    int bilinear, grad, sh, sw;
    int64_t H, W, Ho, Wo;
    const float *in;
    float *out;
    const axis_map *ah, *aw;
} up_ctx;

static void nearest_planes(const up_ctx *c, int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; q++) {
        const float *x = c->in + q * (c->grad ? c->Ho * c->Wo : c->H * c->W);
        float *o = c->out + q * (c->grad ? c->H * c->W : c->Ho * c->Wo);
        if (!c->grad) {
            for (int64_t oh = 0; oh < c->Ho; oh++)
                for (int64_t ow = 0; ow < c->Wo; ow++) o[oh * c->Wo + ow] = x[oh / c->sh * c->W + ow / c->sw];
            continue;
        }
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t w = 0; w < c->W; w++) {
                float s = 0.0f;
                for (int64_t i = 0; i < c->sh; i++)
                    for (int64_t j = 0; j < c->sw; j++) s += x[(h * c->sh + i) * c->Wo + w * c->sw + j];
                o[h * c->W + w] = s;
            }
    }
}

static void bilinear_planes(const up_ctx *c, int64_t q0, int64_t q1) {
    const axis_map *ah = c->ah, *aw = c->aw;
    for (int64_t q = q0; q < q1; q++) {
        const float *x = c->in + q * (c->grad ? c->Ho * c->Wo : c->H * c->W);
        float *o = c->out + q * (c->grad ? c->H * c->W : c->Ho * c->Wo);
        if (!c->grad) {
            for (int64_t oh = 0; oh < c->Ho; oh++) {
                const float *r0 = x + ah->i0[oh] * c->W, *r1 = x + ah->i1[oh] * c->W;
                float h0 = ah->l0[oh], h1 = ah->l1[oh];
                for (int64_t ow = 0; ow < c->Wo; ow++) {
                    int32_t j0 = aw->i0[ow], j1 = aw->i1[ow];
                    float w0 = aw->l0[ow], w1 = aw->l1[ow];
                    o[oh * c->Wo + ow] = h0 * (w0 * r0[j0] + w1 * r0[j1]) + h1 * (w0 * r1[j0] + w1 * r1[j1]);
                }
            }
            continue;
        }
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t w = 0; w < c->W; w++) {
                float s = 0.0f;
                for (int32_t a = ah->start[h]; a < ah->start[h + 1]; a++) {
                    const float *dy = x + (int64_t)ah->src[a] * c->Wo;
                    float r = 0.0f;
                    for (int32_t b = aw->start[w]; b < aw->start[w + 1]; b++) r += aw->wt[b] * dy[aw->src[b]];
                    s += ah->wt[a] * r;
                }
                o[h * c->W + w] = s;
            }
    }
}

static void up_range(const void *vctx, int64_t q0, int64_t q1) {
    const up_ctx *c = vctx;
    if (c->bilinear) bilinear_planes(c, q0, q1);
    else nearest_planes(c, q0, q1);
}

brisk_status cpu_upsample_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                             brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int grad = n->op == BRISK_OP_UPSAMPLE2D_GRAD;
    const brisk_shape *xs = grad ? &n->shape : &IN_NODE(g, id, 0)->shape;
    const brisk_shape *ys = grad ? &IN_NODE(g, id, 0)->shape : &n->shape;
    int64_t sh = n->attr.i0, sw = n->attr.i1; /* checked against the shapes: brisk_node_check_inputs */
    int mode = n->attr.kind;
    up_ctx c = {.bilinear = mode == BRISK_UPSAMPLE_BILINEAR, .grad = grad, .sh = (int)sh, .sw = (int)sw,
                .H = xs->d[2], .W = xs->d[3], .Ho = ys->d[2], .Wo = ys->d[3], .in = in[0], .out = out};
    int64_t planes = xs->d[0] * xs->d[1], per = c.Ho * c.Wo;
    if (planes == 0 || per == 0) return BRISK_OK;
    axis_map ah = {0}, aw = {0};
    if (c.bilinear && (axis_build(&ah, c.H, c.sh) || axis_build(&aw, c.W, c.sw))) {
        axis_free(&ah), axis_free(&aw);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s (node %d): out of memory for the weight tables",
                            brisk_op_name(n->op), id);
    }
    c.ah = &ah, c.aw = &aw;
    cpu_parallel(cb, planes, (CPU_PAR_MIN + per - 1) / per, up_range, &c);
    axis_free(&ah), axis_free(&aw);
    return BRISK_OK;
}
