/* float64 references for the vision ops (CONV2D and its gradients in both layouts, POOL2D
 * and its gradient, UPSAMPLE2D and its gradient), written as the textbook loops over every
 * output and tap, shared by the op tests (tests/ops) and the CPU kernel tests (tests/backend). */
#ifndef BRISK_TEST_VISION_REF_H
#define BRISK_TEST_VISION_REF_H

#include "brisk/graph.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct vref_conv {
    int64_t N, C, H, W, Co, kh, kw, Ho, Wo;
    brisk_window w; /* stride, padding, dilation, groups */
} vref_conv;

static inline void vref_conv_init(vref_conv *r, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Co, int64_t kh,
                                  int64_t kw, brisk_window w) {
    r->N = N, r->C = C, r->H = H, r->W = W, r->Co = Co, r->kh = kh, r->kw = kw, r->w = w;
    r->Ho = (H + 2 * w.ph - w.dh * (kh - 1) - 1) / w.sh + 1;
    r->Wo = (W + 2 * w.pw - w.dw * (kw - 1) - 1) / w.sw + 1;
}

/* Where element (n, c, h, w) of a [N, C, H, W] tensor is stored in the window's layout
 * (NCHW, or NHWC: [N, H, W, C]); w is [Co, C/groups, kh, kw] in both. */
static inline int64_t vref_index(int layout, int64_t n, int64_t c, int64_t h, int64_t w, int64_t C, int64_t H,
                                 int64_t W) {
    return layout == BRISK_LAYOUT_NHWC ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

/* Calls visit(ctx, x index, w index, y index) for every (output, tap) pair inside x. */
#define VREF_CONV_FOR(r, XI, WI, YI, BODY)                                                              \
    do {                                                                                                \
        int64_t cg_ = (r)->C / (r)->w.groups, cog_ = (r)->Co / (r)->w.groups;                           \
        for (int64_t n_ = 0; n_ < (r)->N; n_++)                                                         \
            for (int64_t co_ = 0; co_ < (r)->Co; co_++)                                                 \
                for (int64_t oh_ = 0; oh_ < (r)->Ho; oh_++)                                             \
                    for (int64_t ow_ = 0; ow_ < (r)->Wo; ow_++)                                         \
                        for (int64_t ci_ = 0; ci_ < cg_; ci_++)                                         \
                            for (int64_t i_ = 0; i_ < (r)->kh; i_++)                                    \
                                for (int64_t j_ = 0; j_ < (r)->kw; j_++) {                              \
                                    int64_t ih_ = oh_ * (r)->w.sh - (r)->w.ph + i_ * (r)->w.dh;         \
                                    int64_t iw_ = ow_ * (r)->w.sw - (r)->w.pw + j_ * (r)->w.dw;         \
                                    if (ih_ < 0 || ih_ >= (r)->H || iw_ < 0 || iw_ >= (r)->W) continue; \
                                    int64_t c_ = co_ / cog_ * cg_ + ci_;                                \
                                    int64_t XI = vref_index((r)->w.layout, n_, c_, ih_, iw_, (r)->C, (r)->H, (r)->W); \
                                    int64_t WI = ((co_ * cg_ + ci_) * (r)->kh + i_) * (r)->kw + j_;     \
                                    int64_t YI = vref_index((r)->w.layout, n_, co_, oh_, ow_, (r)->Co, (r)->Ho, (r)->Wo); \
                                    BODY;                                                               \
                                }                                                                       \
    } while (0)

/* y (zeroed here) = conv(x, w) */
static inline void vref_conv_fwd(const vref_conv *r, const float *x, const float *w, double *y) {
    memset(y, 0, sizeof(double) * (size_t)(r->N * r->Co * r->Ho * r->Wo));
    VREF_CONV_FOR(r, xi, wi, yi, y[yi] += (double)x[xi] * w[wi]);
}
static inline void vref_conv_dx(const vref_conv *r, const float *dy, const float *w, double *dx) {
    memset(dx, 0, sizeof(double) * (size_t)(r->N * r->C * r->H * r->W));
    VREF_CONV_FOR(r, xi, wi, yi, dx[xi] += (double)dy[yi] * w[wi]);
}
static inline void vref_conv_dw(const vref_conv *r, const float *dy, const float *x, double *dw) {
    memset(dw, 0, sizeof(double) * (size_t)(r->Co * (r->C / r->w.groups) * r->kh * r->kw));
    VREF_CONV_FOR(r, xi, wi, yi, dw[wi] += (double)dy[yi] * x[xi]);
}

/* Pooling over planes [P, H, W] -> [P, Ho, Wo]; max: first maximum, NaN wins. */
static inline void vref_pool(int max, int64_t P, int64_t H, int64_t W, brisk_window w, const float *x, double *y,
                             const float *dy, double *dx) {
    int64_t Ho = (H + 2 * w.ph - w.dh * (w.kh - 1) - 1) / w.sh + 1, Wo = (W + 2 * w.pw - w.dw * (w.kw - 1) - 1) / w.sw + 1;
    if (dx) memset(dx, 0, sizeof(double) * (size_t)(P * H * W));
    for (int64_t p = 0; p < P; p++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                double s = 0, m = -INFINITY;
                int64_t arg = -1;
                for (int64_t i = 0; i < w.kh; i++)
                    for (int64_t j = 0; j < w.kw; j++) {
                        int64_t ih = oh * w.sh - w.ph + i * w.dh, iw = ow * w.sw - w.pw + j * w.dw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        int64_t k = (p * H + ih) * W + iw;
                        s += x[k];
                        if (arg < 0 || x[k] > m || isnan(x[k])) m = x[k], arg = k;
                    }
                int64_t o = (p * Ho + oh) * Wo + ow;
                if (y) y[o] = max ? m : s / (double)(w.kh * w.kw);
                if (!dx) continue;
                if (max) dx[arg] += dy[o];
                else
                    for (int64_t i = 0; i < w.kh; i++)
                        for (int64_t j = 0; j < w.kw; j++) {
                            int64_t ih = oh * w.sh - w.ph + i, iw = ow * w.sw - w.pw + j;
                            if (ih >= 0 && ih < H && iw >= 0 && iw < W) dx[(p * H + ih) * W + iw] += dy[o] / (double)(w.kh * w.kw);
                        }
            }
}

/* One axis of bilinear upsampling by s, align_corners false: the inputs i0, i1 output o
 * reads and the weight of i1 (i0's is 1 - it). */
static inline void vref_bilinear_axis(int64_t o, int s, int64_t in, int64_t *i0, int64_t *i1, double *l1) {
    double src = (o + 0.5) / s - 0.5;
    if (src < 0) src = 0;
    *i0 = (int64_t)src;
    if (*i0 > in - 1) *i0 = in - 1;
    *i1 = *i0 + (*i0 < in - 1);
    *l1 = src - (double)*i0;
}

/* y = upsample(x) (nearest or bilinear, planes [P, H, W] by sh, sw) and, when dy is given,
 * dx = its transpose applied to dy (zeroed here) */
static inline void vref_upsample(int bilinear, int64_t P, int64_t H, int64_t W, int sh, int sw, const float *x,
                                 const float *dy, double *y, double *dx) {
    int64_t Ho = H * sh, Wo = W * sw;
    if (dx) memset(dx, 0, sizeof(double) * (size_t)(P * H * W));
    for (int64_t p = 0; p < P; p++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                int64_t o = (p * Ho + oh) * Wo + ow, a, b, c, d;
                double lh = 0, lw = 0;
                if (bilinear) {
                    vref_bilinear_axis(oh, sh, H, &a, &b, &lh);
                    vref_bilinear_axis(ow, sw, W, &c, &d, &lw);
                } else {
                    a = b = oh / sh, c = d = ow / sw;
                }
                const int64_t ix[4] = {a * W + c, a * W + d, b * W + c, b * W + d};
                const double wt[4] = {(1 - lh) * (1 - lw), (1 - lh) * lw, lh * (1 - lw), lh * lw};
                double v = 0;
                for (int k = 0; k < 4; k++) {
                    v += wt[k] * x[p * H * W + ix[k]];
                    if (dx) dx[p * H * W + ix[k]] += wt[k] * dy[o];
                }
                y[o] = v;
            }
}

#endif
