/* UPSAMPLE2D (+GRAD) over NCHW planes by integer scales (src/backend/cpu/upsample.c is the
 * reference): nearest reads x[oh / sh, ow / sw]; bilinear (align_corners false) reads the
 * two inputs of each axis that src = (o + 0.5) / s - 0.5 falls between (1 / s rounded to
 * f32 as PyTorch and the CPU have it, src clamped at 0), weighted 1 - (src - i0) and
 * src - i0. One thread per output forward; the gradients gather, one thread per input
 * element summing in increasing output index the dy of the outputs that read it (only
 * those within a scale of it can), so no atomics and the same bits on every run. */
#include "backend/cuda/k_common.cuh"

struct up_axis_w {
    int64_t i0, i1;
    float l0, l1;
};

/* output o of an axis of `in` inputs upsampled by s (inv = (float)(1.0 / s)) */
__device__ __forceinline__ up_axis_w up_axis(int64_t o, float inv, int64_t in) {
    float src = inv * ((float)o + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
    int64_t i0 = (int64_t)src;
    if (i0 > in - 1) i0 = in - 1;
    float lam = src - (float)i0;
    up_axis_w a = {i0, i0 + (i0 < in - 1), 1.0f - lam, lam};
    return a;
}

struct up_geom {
    int64_t H, W, Ho, Wo;
    int sh, sw;
    float invh, invw;
};

__global__ void k_upsample(const float *x, float *y, up_geom g, int bilinear, int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t ow = e % g.Wo, oh = e / g.Wo % g.Ho, q = e / (g.Wo * g.Ho);
        const float *xp = x + q * g.H * g.W;
        if (!bilinear) {
            y[e] = xp[oh / g.sh * g.W + ow / g.sw];
            continue;
        }
        up_axis_w ah = up_axis(oh, g.invh, g.H), aw = up_axis(ow, g.invw, g.W);
        const float *r0 = xp + ah.i0 * g.W, *r1 = xp + ah.i1 * g.W;
        y[e] = ah.l0 * (aw.l0 * r0[aw.i0] + aw.l1 * r0[aw.i1]) + ah.l1 * (aw.l0 * r1[aw.i0] + aw.l1 * r1[aw.i1]);
    }
}

__global__ void k_upsample_grad(const float *dy, float *dx, up_geom g, int bilinear, int64_t n) {
    GRID_STRIDE(e, n) {
        int64_t w = e % g.W, h = e / g.W % g.H, q = e / (g.W * g.H);
        const float *dp = dy + q * g.Ho * g.Wo;
        float s = 0.0f;
        if (!bilinear) {
            for (int i = 0; i < g.sh; i++)
                for (int j = 0; j < g.sw; j++) s += dp[(h * g.sh + i) * g.Wo + w * g.sw + j];
            dx[e] = s;
            continue;
        }
        /* only outputs in [(i - 1) s, (i + 2) s) read input i; each reads it through i0, i1
         * or both (at the edge), added in that order as the CPU's entries are */
        int64_t oh0 = (h - 1) * g.sh < 0 ? 0 : (h - 1) * g.sh, oh1 = (h + 2) * g.sh < g.Ho ? (h + 2) * g.sh : g.Ho;
        int64_t ow0 = (w - 1) * g.sw < 0 ? 0 : (w - 1) * g.sw, ow1 = (w + 2) * g.sw < g.Wo ? (w + 2) * g.sw : g.Wo;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            up_axis_w ah = up_axis(oh, g.invh, g.H);
            if (ah.i0 != h && ah.i1 != h) continue;
            float r = 0.0f;
            for (int64_t ow = ow0; ow < ow1; ow++) {
                up_axis_w aw = up_axis(ow, g.invw, g.W);
                float d = dp[oh * g.Wo + ow];
                if (aw.i0 == w) r += aw.l0 * d;
                if (aw.i1 == w) r += aw.l1 * d;
            }
            if (ah.i0 == h) s += ah.l0 * r;
            if (ah.i1 == h) s += ah.l1 * r;
        }
        dx[e] = s;
    }
}

static up_geom geom(int64_t H, int64_t W, int sh, int sw) {
    up_geom g = {H, W, H * sh, W * sw, sh, sw, (float)(1.0 / sh), (float)(1.0 / sw)};
    return g;
}

extern "C" cudaError_t cuk_upsample(const float *x, float *y, int64_t planes, int64_t H, int64_t W, int sh, int sw,
                                    int bilinear, cudaStream_t s) {
    int64_t n = planes * H * sh * W * sw;
    if (n <= 0) return cudaSuccess;
    k_upsample<<<cuk_blocks(n, 1), CUK_THREADS, 0, s>>>(x, y, geom(H, W, sh, sw), bilinear, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_upsample_grad(const float *dy, float *dx, int64_t planes, int64_t H, int64_t W, int sh,
                                         int sw, int bilinear, cudaStream_t s) {
    int64_t n = planes * H * W;
    if (n <= 0) return cudaSuccess;
    k_upsample_grad<<<cuk_blocks(n, 1), CUK_THREADS, 0, s>>>(dy, dx, geom(H, W, sh, sw), bilinear, n);
    return cudaGetLastError();
}
