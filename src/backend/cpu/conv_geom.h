/* The geometry of one CONV2D (or gradient) node, shared by the NCHW kernel (conv.c) and
 * the NHWC one (conv_nhwc.c). */
#ifndef BRISK_CPU_CONV_GEOM_H
#define BRISK_CPU_CONV_GEOM_H

#include "backend/cpu/cpu_internal.h"

typedef struct conv_geom {
    int64_t N, C, H, W, Co, Ho, Wo, HW, HWo;
    int64_t G, Cg, Cog, K;  /* groups; channels per group in and out; rows of col */
    brisk_window w;
    int pointwise;          /* 1x1, stride 1, no padding: col is x itself */
} conv_geom;

/* The conv scratch, grown to at least `floats` (64-byte aligned), or NULL with err set. */
float *cpu_conv_scratch(cpu_backend *cb, size_t floats, brisk_error *err);

/* CONV2D / CONV2D_GRAD_X / CONV2D_GRAD_W over NHWC: x or dy, w or x by op as cpu_conv_op
 * reads them; out is y, dx or dw ([Co, C/g, kh, kw] in both layouts). */
brisk_status cpu_conv_nhwc(cpu_backend *cb, brisk_op op, const conv_geom *c, const float *x, const float *w,
                           const float *dy, float *out, brisk_error *err);

/* conv_winograd.c: whether a convolution is one it computes (1-D, [1, 2..5] kernel, stride and
 * dilation 1, one group, NCHW, channels enough to pay for the transforms), and the op. */
int cpu_conv_winograd_fits(const conv_geom *c);
brisk_status cpu_conv_winograd(cpu_backend *cb, brisk_op op, const conv_geom *c, const float *x, const float *w,
                               const float *dy, float *out, const cpu_conv_epi *epi, brisk_error *err);

#endif
