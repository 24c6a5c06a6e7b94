/* POOL2D and POOL2D_GRAD over NCHW or NHWC, one (n, c) plane per work item (in NHWC its
 * pixels are C apart; the argmax is the flat position in the plane either way), as PyTorch computes
 * them: max takes the first largest value of each window (a NaN wins, padding is never
 * read) and records where it was in the workspace after its output; average divides the
 * sum of the window's in-bounds values by kh kw (padding counts as zeros:
 * count_include_pad). The max gradient scatters dy to the recorded positions. Each plane is
 * one thread's, in a fixed order, so the result does not depend on the thread count. */
#include "backend/cpu/cpu_internal.h"

#include <math.h>
#include <string.h>

typedef struct pool_ctx {
    int64_t H, W, Ho, Wo;
    int64_t C, ps;       /* channels; the pixel stride: 1 (NCHW) or C (NHWC) */
    brisk_window w;
    int max;
    const float *x, *dy;
    float *out;
    int32_t *arg;        /* forward max: where each window's maximum is */
    const int32_t *argr; /* gradient of max: the same, read */
} pool_ctx;

/* Taps [*lo, *hi) of a window starting at `start` (stride of taps `dil`, k of them) that
 * fall inside [0, len). */
static void tap_span(int64_t start, int dil, int k, int64_t len, int64_t *lo, int64_t *hi) {
    *lo = start < 0 ? (-start + dil - 1) / dil : 0;
    *hi = len - 1 - start < 0 ? 0 : (len - 1 - start) / dil + 1;
    if (*hi > k) *hi = k;
    if (*lo > *hi) *lo = *hi;
}

/* tap_span without its divisions for a window wholly inside (nearly every one) */
static inline void taps(int64_t start, int dil, int k, int64_t len, int64_t *lo, int64_t *hi) {
    if (start >= 0 && start + (int64_t)(k - 1) * dil < len) *lo = 0, *hi = k;
    else tap_span(start, dil, k, len, lo, hi);
}

/* The running maximum takes v at flat position k when `take`, selected on the bits: GCC turns
 * a float ?: into a branch, which mispredicts on data (a 1-D CNN's [1, 2] max pool: 2.7 ms of
 * its step so, 1.6 ms this way). */
static inline void max_take(float v, int32_t k, int take, float *m, int32_t *best) {
    uint32_t t = -(uint32_t)take, vb, mb;
    memcpy(&vb, &v, 4), memcpy(&mb, m, 4);
    mb = (vb & t) | (mb & ~t);
    memcpy(m, &mb, 4);
    *best = (int32_t)(((uint32_t)k & t) | ((uint32_t)*best & ~t));
}

/* Where plane q's first pixel is in a tensor of `pixels` per plane. */
static int64_t plane_base(const pool_ctx *p, int64_t q, int64_t pixels) {
    return p->ps == 1 ? q * pixels : q / p->C * pixels * p->C + q % p->C;
}

/* Max pooling of an NCHW plane whose windows all lie inside (no padding, no dilation), a tap at
 * a time over a whole output row: the same comparisons in the same order per window as below,
 * without a window's bookkeeping per output (the 1-D CNN's [1, 2] pool: ~12 cycles an output
 * that way), 8 outputs a vector where the stride is 1 or 2. */
typedef float pv8 __attribute__((vector_size(32)));
typedef int32_t pv8i __attribute__((vector_size(32)));
typedef float pv8u __attribute__((vector_size(32), aligned(4)));
typedef int32_t pv8iu __attribute__((vector_size(32), aligned(4)));
typedef float pv4u __attribute__((vector_size(16), aligned(4)));
typedef int32_t pv4iu __attribute__((vector_size(16), aligned(4)));

/* The even (0, 2, .., 14) or odd floats of the 16 at p: a stride-2 load of 8 */
static inline pv8 even8(const float *p) {
    pv8 lo = *(const pv8u *)p, hi = *(const pv8u *)(p + 8);
    return __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
}
static inline pv8 odd8(const float *p) {
    pv8 lo = *(const pv8u *)p, hi = *(const pv8u *)(p + 8);
    return __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
}

/* b where t is set, else a, on the bits (max_take's select, 8 lanes) */
static inline pv8 select8(pv8i t, pv8 b, pv8 a) {
    pv8i ab, bb;
    memcpy(&ab, &a, sizeof ab), memcpy(&bb, &b, sizeof bb);
    ab = (bb & t) | (ab & ~t);
    memcpy(&a, &ab, sizeof a);
    return a;
}

/* each lane's index from its plane's start, 8 further on, wrapped at the plane's n (n >= 8: a
 * lane passes one plane's end at most) */
static inline pv8i wrap_next8(pv8i rel, int32_t n) {
    rel += 8;
    return rel - ((rel >= n) & n);
}

static void max_rows_inside(const pool_ctx *p, const float *x, float *y, int32_t *arg) {
    const brisk_window w = p->w;
    const int sw = w.sw;
    const pv8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int64_t oh = 0; oh < p->Ho; oh++) {
        float *yr = y + oh * p->Wo;
        int32_t *ar = arg + oh * p->Wo;
        for (int i = 0; i < w.kh; i++)
            for (int j = 0; j < w.kw; j++) {
                int32_t k0 = (int32_t)((oh * w.sh + i) * p->W + j);
                const float *xr = x + k0;
                int first = i == 0 && j == 0;
                int64_t ow = 0;
                if (sw <= 2) /* whole vectors read inside the row: stride 2 loads 16 from column j + 2 ow */
                    for (; ow + 8 <= p->Wo && (sw == 1 || j + 2 * ow + 16 <= p->W); ow += 8) {
                        pv8 v = sw == 1 ? *(const pv8u *)(xr + ow) : even8(xr + 2 * ow);
                        pv8i k = (k0 + (int32_t)ow * sw) + lane * sw;
                        if (first) {
                            *(pv8u *)(yr + ow) = v;
                            *(pv8iu *)(ar + ow) = k;
                            continue;
                        }
                        pv8 m = *(const pv8u *)(yr + ow);
                        pv8i t = (v > m) | (v != v);
                        *(pv8u *)(yr + ow) = select8(t, v, m);
                        *(pv8iu *)(ar + ow) = (k & t) | (*(const pv8iu *)(ar + ow) & ~t);
                    }
                for (; ow < p->Wo; ow++) {
                    float v = xr[ow * sw];
                    int32_t k = k0 + (int32_t)ow * sw;
                    if (first) yr[ow] = v, ar[ow] = k;
                    else max_take(v, k, (v > yr[ow]) | (v != v), &yr[ow], &ar[ow]);
                }
            }
    }
}

/* Whether the windows tile an NCHW plane's rows exactly (kh 1, stride = kw, no padding or
 * dilation, W = kw Wo): every input is in one window. */
static int tiled_rows(const pool_ctx *p) {
    const brisk_window *w = &p->w;
    return p->max && p->ps == 1 && w->kh == 1 && w->sh == 1 && w->sw == w->kw && w->ph == 0 && w->pw == 0 &&
           w->dh == 1 && w->dw == 1 && p->H == p->Ho && p->W == (int64_t)w->kw * p->Wo;
}

/* Planes [q0, q1) of a [1, 2] max pool that tiles its rows (tiled_rows), as one run of outputs
 * across the planes: a plane's outputs are consecutive pairs of its inputs, and its argmax is
 * 2 o + 1 where the second of pair o was taken, o counted from the plane's start (rel, one lane
 * an output, wrap_next8 at the plane's P outputs, at least 8). Per plane, a row of 30 outputs left a scalar tail of 6 (0.72 ms of the 1-D CNN's
 * step went to its [1, 2] pool). The same comparisons as the window loop: the first tap, then
 * the second where larger or NaN. */
static void max2_run(const pool_ctx *p, int64_t q0, int64_t q1) {
    const int64_t P = p->Ho * p->Wo, n = (q1 - q0) * P;
    const float *x = p->x + q0 * 2 * P;
    float *y = p->out + q0 * P;
    int32_t *arg = p->arg + q0 * P;
    pv8i rel = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t o = 0;
    for (; o + 8 <= n; o += 8) {
        pv8 a = even8(x + 2 * o), b = odd8(x + 2 * o);
        pv8i t = (b > a) | (b != b);
        *(pv8u *)(y + o) = select8(t, b, a);
        *(pv8iu *)(arg + o) = 2 * rel + (t & 1);
        rel = wrap_next8(rel, (int32_t)P);
    }
    for (; o < n; o++) {
        int32_t k = (int32_t)(2 * (o % P));
        float m = x[2 * o];
        int32_t best = k;
        max_take(x[2 * o + 1], k + 1, (x[2 * o + 1] > m) | (x[2 * o + 1] != x[2 * o + 1]), &m, &best);
        y[o] = m, arg[o] = best;
    }
}

static void pool_forward_planes(const void *vctx, int64_t q0, int64_t q1) {
    const pool_ctx *p = vctx;
    const brisk_window w = p->w;
    double inv = 1.0 / ((double)w.kh * w.kw);
    int64_t ps = p->ps;
    int inside = p->max && ps == 1 && w.ph == 0 && w.pw == 0 && w.dh == 1 && w.dw == 1;
    if (w.kw == 2 && p->Ho * p->Wo >= 8 && tiled_rows(p)) {
        max2_run(p, q0, q1);
        return;
    }
    for (int64_t q = q0; q < q1; q++) {
        if (inside) {
            int64_t yb = plane_base(p, q, p->Ho * p->Wo);
            max_rows_inside(p, p->x + plane_base(p, q, p->H * p->W), p->out + yb, p->arg + yb);
            continue;
        }
        const float *x = p->x + plane_base(p, q, p->H * p->W);
        int64_t yb = plane_base(p, q, p->Ho * p->Wo);
        float *y = p->out + yb;
        int32_t *arg = p->max ? p->arg + yb : NULL;
        for (int64_t oh = 0; oh < p->Ho; oh++) {
            int64_t h0 = oh * w.sh - w.ph, i0, i1;
            taps(h0, w.dh, w.kh, p->H, &i0, &i1);
            for (int64_t ow = 0; ow < p->Wo; ow++) {
                int64_t w0 = ow * w.sw - w.pw, j0, j1;
                taps(w0, w.dw, w.kw, p->W, &j0, &j1);
                if (p->max) {
                    float m = -INFINITY;
                    int32_t best = -1;
                    for (int64_t i = i0; i < i1; i++)
                        for (int64_t j = j0; j < j1; j++) {
                            int32_t k = (int32_t)((h0 + i * w.dh) * p->W + w0 + j * w.dw);
                            float v = x[k * ps];
                            max_take(v, k, (best < 0) | (v > m) | (v != v), &m, &best);
                        }
                    y[(oh * p->Wo + ow) * ps] = m;
                    arg[(oh * p->Wo + ow) * ps] = best;
                } else {
                    double s = 0;
                    for (int64_t i = i0; i < i1; i++)
                        for (int64_t j = j0; j < j1; j++) s += x[((h0 + i) * p->W + w0 + j) * ps];
                    y[(oh * p->Wo + ow) * ps] = (float)(s * inv);
                }
            }
        }
    }
}

/* The max gradient of planes [q0, q1) whose rows the windows tile (tiled_rows): every input is
 * in one window, so each is written once, 0 + dy where it was its window's maximum and 0
 * elsewhere (what zeroing and scattering leave). One run across the planes, as max2_run: 8
 * inputs a vector at kw 2, each lane's index from its plane's start wrapped at the plane's
 * kw P inputs (no zeroing pass before the scatter, no tail a row). */
static void max_grad_run(const pool_ctx *p, int64_t q0, int64_t q1) {
    const int kw = p->w.kw;
    const int64_t P = p->Ho * p->Wo, PI = kw * P, n = (q1 - q0) * PI;
    const int32_t *arg = p->argr + q0 * P;
    const float *dy = p->dy + q0 * P;
    float *dx = p->out + q0 * PI;
    pv8i rin = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t i = 0;
    if (kw == 2 && PI >= 8)
        for (; i + 8 <= n; i += 8) {
            pv4iu a4 = *(const pv4iu *)(arg + i / 2);
            pv4u d4 = *(const pv4u *)(dy + i / 2);
            pv8i a = __builtin_shufflevector(a4, a4, 0, 0, 1, 1, 2, 2, 3, 3);
            pv8 d = __builtin_shufflevector(d4, d4, 0, 0, 1, 1, 2, 2, 3, 3);
            *(pv8u *)(dx + i) = select8(a == rin, d + 0.0f, (pv8){0});
            rin = wrap_next8(rin, (int32_t)PI);
        }
    for (; i < n; i++) {
        int64_t o = i / kw;
        dx[i] = arg[o] == (int32_t)(i % PI) ? 0.0f + dy[o] : 0.0f;
    }
}

static void pool_grad_planes(const void *vctx, int64_t q0, int64_t q1) {
    const pool_ctx *p = vctx;
    float inv = (float)(1.0 / ((double)p->w.kh * p->w.kw));
    int64_t hw = p->H * p->W, ps = p->ps;
    if (tiled_rows(p)) {
        max_grad_run(p, q0, q1);
        return;
    }
    for (int64_t q = q0; q < q1; q++) {
        float *dx = p->out + plane_base(p, q, hw);
        int64_t yb = plane_base(p, q, p->Ho * p->Wo);
        const float *dy = p->dy + yb;
        if (ps == 1) memset(dx, 0, (size_t)hw * sizeof(float));
        else
            for (int64_t k = 0; k < hw; k++) dx[k * ps] = 0.0f;
        if (p->max) {
            const int32_t *arg = p->argr + yb;
            for (int64_t o = 0; o < p->Ho * p->Wo; o++)
                if (arg[o * ps] >= 0 && arg[o * ps] < hw) dx[(int64_t)arg[o * ps] * ps] += dy[o * ps];
            continue;
        }
        for (int64_t oh = 0; oh < p->Ho; oh++)
            for (int64_t ow = 0; ow < p->Wo; ow++) {
                float d = dy[(oh * p->Wo + ow) * ps] * inv;
                for (int i = 0; i < p->w.kh; i++) {
                    int64_t ih = oh * p->w.sh - p->w.ph + i;
                    if (ih < 0 || ih >= p->H) continue;
                    for (int j = 0; j < p->w.kw; j++) {
                        int64_t iw = ow * p->w.sw - p->w.pw + j;
                        if (iw >= 0 && iw < p->W) dx[(ih * p->W + iw) * ps] += d;
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
    int64_t ny = cpu_numel(ys);
    /* the max gradient reads the forward node's workspace: it must be that node */
    const brisk_node *fw = grad && p.max && n->n_in == 2 ? IN_NODE(g, id, 1) : NULL;
    int nhwc = w->layout == BRISK_LAYOUT_NHWC, ci = nhwc ? 3 : 1, hi = nhwc ? 1 : 2, wi = nhwc ? 2 : 3;
    if ((w->layout != BRISK_LAYOUT_NCHW && !nhwc) || xs->ndim != 4 || ys->ndim != 4 || xs->d[0] != ys->d[0] ||
        xs->d[ci] != ys->d[ci] || w->kh < 1 || w->kw < 1 ||
        w->sh < 1 || w->sw < 1 || w->ph < 0 || w->pw < 0 || w->dh < 1 || w->dw < 1 ||
        (!grad && p.max && n->bytes < (size_t)ny * (sizeof(float) + sizeof(int32_t))) ||
        (grad && p.max && (!fw || fw->op != BRISK_OP_POOL2D || !brisk_shape_equal(&fw->shape, ys) ||
                           fw->bytes < (size_t)ny * (sizeof(float) + sizeof(int32_t)))))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: x, y, the window and the argmax workspace do not agree",
                            brisk_op_name(n->op));
    p.H = xs->d[hi], p.W = xs->d[wi], p.Ho = ys->d[hi], p.Wo = ys->d[wi];
    p.C = xs->d[ci], p.ps = nhwc ? p.C : 1;
    if ((p.Ho - 1) * w->sh - w->ph + (int64_t)(w->kh - 1) * w->dh >= p.H + w->ph ||
        (p.Wo - 1) * w->sw - w->pw + (int64_t)(w->kw - 1) * w->dw >= p.W + w->pw)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: the output is larger than the window allows", brisk_op_name(n->op));
    if (grad) {
        p.dy = in[0];
        if (p.max) p.argr = (const int32_t *)((const float *)in[1] + ny);
    } else {
        p.x = in[0];
        if (p.max) p.arg = (int32_t *)((float *)out + ny);
    }
    int64_t planes = xs->d[0] * xs->d[ci], per = p.Ho * p.Wo * w->kh * w->kw + p.H * p.W;
    cpu_parallel(cb, planes, CPU_PAR_MIN / (per ? per : 1) + 1, grad ? pool_grad_planes : pool_forward_planes, &p);
    return BRISK_OK;
}
