/* POOL2D and POOL2D_GRAD over NCHW or NHWC (src/backend/cpu/pool2d.c is the reference;
 * a plane is one (n, c), its pixels C apart in NHWC, and the argmax is the flat position in
 * the plane in both layouts, stored where the output element is): one thread
 * per output element forward, one per input element backward. Max takes the CPU's window
 * order and tie rule (the first largest value; a NaN takes over) and records the flat
 * position in the plane after the output, as the CPU does; average divides the in-bounds
 * sum by kh kw (count_include_pad). The gradients gather rather than scatter: each input
 * element sums, in a fixed order, the dy of every window that covers it (max: whose argmax
 * it is), so no atomics and the same bits on every run. */
#include "backend/cuda/k_common.cuh"

struct pool_geom {
    int64_t H, W, Ho, Wo;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t C;  /* channels: the pixel stride in NHWC */
    int nhwc;
};

__global__ void k_pool_fwd(const float *x, float *y, int32_t *arg, pool_geom p, int max, int64_t n) {
    float inv = 1.0f / (float)(p.kh * p.kw);
    GRID_STRIDE(o, n) {
        int64_t c = p.nhwc ? o % p.C : 0, r = p.nhwc ? o / p.C : o, xs = p.nhwc ? p.C : 1;
        int64_t ow = r % p.Wo, oh = (r / p.Wo) % p.Ho, q = r / (p.Wo * p.Ho); /* q: the plane, or n in NHWC */
        const float *xp = x + (p.nhwc ? q * p.H * p.W * p.C + c : q * p.H * p.W);
        int64_t h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
        float m = max ? -INFINITY : 0.0f;
        int32_t best = -1;
        for (int i = 0; i < p.kh; i++) {
            int64_t ih = h0 + (int64_t)i * p.dh;
            if (ih < 0 || ih >= p.H) continue;
            for (int j = 0; j < p.kw; j++) {
                int64_t iw = w0 + (int64_t)j * p.dw;
                if (iw < 0 || iw >= p.W) continue;
                float v = xp[(ih * p.W + iw) * xs];
                if (max) {
                    if (best < 0 || v > m || v != v) m = v, best = (int32_t)(ih * p.W + iw);
                } else {
                    m += v;
                }
            }
        }
        y[o] = max ? m : m * inv;
        if (max) arg[o] = best;
    }
}

__global__ void k_pool_grad(const float *dy, const int32_t *arg, float *dx, pool_geom p, int max, int64_t n) {
    float inv = 1.0f / (float)(p.kh * p.kw);
    GRID_STRIDE(e, n) {
        int64_t c = p.nhwc ? e % p.C : 0, r = p.nhwc ? e / p.C : e, ys = p.nhwc ? p.C : 1;
        int64_t iw = r % p.W, ih = (r / p.W) % p.H, q = r / (p.W * p.H);
        int64_t base = p.nhwc ? q * p.Ho * p.Wo * p.C + c : q * p.Ho * p.Wo;
        const float *dyp = dy + base;
        const int32_t *ap = max ? arg + base : NULL;
        int32_t self = (int32_t)(ih * p.W + iw);
        float s = 0.0f;
        /* tap i of window oh covers ih when oh sh - ph + i dh == ih */
        for (int i = 0; i < p.kh; i++) {
            int64_t t = ih + p.ph - (int64_t)i * p.dh;
            if (t < 0 || t % p.sh) continue;
            int64_t oh = t / p.sh;
            if (oh >= p.Ho) continue;
            for (int j = 0; j < p.kw; j++) {
                int64_t u = iw + p.pw - (int64_t)j * p.dw;
                if (u < 0 || u % p.sw) continue;
                int64_t ow = u / p.sw;
                if (ow >= p.Wo) continue;
                int64_t o = (oh * p.Wo + ow) * ys;
                if (!max) s += dyp[o] * inv;
                else if (ap[o] == self) s += dyp[o];
            }
        }
        dx[e] = s;
    }
}

static pool_geom geom(int64_t H, int64_t W, int64_t Ho, int64_t Wo, const int win[8], int64_t C, int nhwc) {
    pool_geom p = {H, W, Ho, Wo, win[0], win[1], win[2], win[3], win[4], win[5], win[6], win[7], C, nhwc};
    return p;
}

extern "C" cudaError_t cuk_pool_fwd(const float *x, float *y, int32_t *arg, int64_t N, int64_t C, int64_t H,
                                    int64_t W, int64_t Ho, int64_t Wo, const int win[8], int max, int nhwc,
                                    cudaStream_t s) {
    int64_t n = N * C * Ho * Wo;
    if (n <= 0) return cudaSuccess;
    k_pool_fwd<<<cuk_blocks(n, 1), CUK_THREADS, 0, s>>>(x, y, arg, geom(H, W, Ho, Wo, win, C, nhwc), max, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuk_pool_grad(const float *dy, const int32_t *arg, float *dx, int64_t N, int64_t C,
                                     int64_t H, int64_t W, int64_t Ho, int64_t Wo, const int win[8], int max,
                                     int nhwc, cudaStream_t s) {
    int64_t n = N * C * H * W;
    if (n <= 0) return cudaSuccess;
    k_pool_grad<<<cuk_blocks(n, 1), CUK_THREADS, 0, s>>>(dy, arg, dx, geom(H, W, Ho, Wo, win, C, nhwc), max, n);
    return cudaGetLastError();
}
