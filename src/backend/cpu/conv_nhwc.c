/* CONV2D, CONV2D_GRAD_X, CONV2D_GRAD_W over NHWC (x [N, H, W, C], y [N, Ho, Wo, Co]; w
 * [Co, C/g, kh, kw] as in NCHW), as im2col + GEMM with the channels contiguous.
 *
 * In NHWC the output pixels of the whole batch are the rows of one matrix y [N Ho Wo, Co],
 * so a block is simply a run of R of those rows, whatever images they belong to. For group
 * g, the column matrix col [R, K], K = kh kw C/g, holds in row r the window of output
 * pixel r, tap by tap, each tap's C/g channels contiguous (a memcpy from x, zeros in the
 * padding). The weight is repacked once per call to the same (i, j, c) order, wr [Co, K]
 * (OHWI), and then
 *   forward   y_g [R, Co/g]   = col wr_g^T            (ld Co: written in place in y)
 *   grad x    dcol [R, K]     = dy_g wr_g, added back into dx (col2im)
 *   grad w    dwr_g [Co/g, K] = dy_g^T col, summed over the blocks in order, then
 *             transposed back to [Co, C/g, kh, kw].
 * A 1x1 stride-1 unpadded convolution is one plain GEMM per group on x itself: no
 * column matrix, no repacking (kh kw = 1 makes OHWI and OIHW the same).
 *
 * R is cb->conv_col_floats / K rows (at least one), so the scratch is bounded by that
 * limit plus two weight-sized buffers, never by N. Determinism: blocks run in order;
 * im2col rows and col2im channels are each one thread's, in a fixed order; the GEMMs are
 * cpu_gemm's. */
#include "backend/cpu/conv_geom.h"

#include <string.h>

typedef struct nhwc_block {
    const conv_geom *c;
    int64_t r0, R, gi;
    const float *x; /* im2col source */
    float *dx;      /* col2im target */
    float *col;     /* [R, K] */
    const float *w; /* repacking: OIHW source, OHWI target (or the reverse for dw) */
    float *wt;
    int to_ohwi;
} nhwc_block;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t grain_for(int64_t per_item) { return max64(1, CPU_PAR_MIN / max64(per_item, 1)); }

/* Where output pixel r's window starts in its image (n, ih0, iw0): tap (i, j) reads pixel
 * (ih0 + i dh, iw0 + j dw), padding when outside [0, H) x [0, W). */
static void window_of(const conv_geom *c, int64_t r, int64_t *n, int64_t *ih0, int64_t *iw0) {
    int64_t p = r % c->HWo;
    *n = r / c->HWo;
    *ih0 = p / c->Wo * c->w.sh - c->w.ph;
    *iw0 = p % c->Wo * c->w.sw - c->w.pw;
}

static void im2col_rows(const void *vctx, int64_t q0, int64_t q1) {
    const nhwc_block *b = vctx;
    const conv_geom *c = b->c;
    size_t bytes = (size_t)c->Cg * sizeof(float);
    for (int64_t q = q0; q < q1; q++) {
        int64_t n, ih0, iw0;
        window_of(c, b->r0 + q, &n, &ih0, &iw0);
        float *d = b->col + q * c->K;
        for (int i = 0; i < c->w.kh; i++) {
            int64_t ih = ih0 + (int64_t)i * c->w.dh;
            for (int j = 0; j < c->w.kw; j++, d += c->Cg) {
                int64_t iw = iw0 + (int64_t)j * c->w.dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) memset(d, 0, bytes);
                else memcpy(d, b->x + ((n * c->H + ih) * c->W + iw) * c->C + b->gi * c->Cg, bytes);
            }
        }
    }
}

/* dx += col over channels [c0, c1) of the group: every pixel and tap in order. */
static void col2im_channels(const void *vctx, int64_t c0, int64_t c1) {
    const nhwc_block *b = vctx;
    const conv_geom *c = b->c;
    for (int64_t q = 0; q < b->R; q++) {
        int64_t n, ih0, iw0;
        window_of(c, b->r0 + q, &n, &ih0, &iw0);
        const float *s = b->col + q * c->K;
        for (int i = 0; i < c->w.kh; i++) {
            int64_t ih = ih0 + (int64_t)i * c->w.dh;
            for (int j = 0; j < c->w.kw; j++, s += c->Cg) {
                int64_t iw = iw0 + (int64_t)j * c->w.dw;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                float *d = b->dx + ((n * c->H + ih) * c->W + iw) * c->C + b->gi * c->Cg;
                for (int64_t ch = c0; ch < c1; ch++) d[ch] += s[ch];
            }
        }
    }
}

/* [Co, Cg, kh kw] (OIHW) <-> [Co, kh kw, Cg] (OHWI), one output channel per item: (ch, t)
 * sits at ch khw + t in OIHW and at t Cg + ch in OHWI; to_ohwi says which side is w. */
static void reorder_weights(const void *vctx, int64_t o0, int64_t o1) {
    const nhwc_block *b = vctx;
    const conv_geom *c = b->c;
    int64_t khw = (int64_t)c->w.kh * c->w.kw;
    int64_t s_ch = b->to_ohwi ? khw : 1, s_t = b->to_ohwi ? 1 : c->Cg;
    int64_t d_ch = b->to_ohwi ? 1 : khw, d_t = b->to_ohwi ? c->Cg : 1;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t ch = 0; ch < c->Cg; ch++)
            for (int64_t t = 0; t < khw; t++) b->wt[o * c->K + ch * d_ch + t * d_t] = b->w[o * c->K + ch * s_ch + t * s_t];
}

static void add_rows(const void *vctx, int64_t i0, int64_t i1) {
    const float *const *p = vctx; /* {dst, src} */
    float *d = (float *)p[0];
    for (int64_t i = i0; i < i1; i++) d[i] += p[1][i];
}

/* The 1x1 stride-1 case: per group one GEMM over all N H W pixels. */
static void conv_nhwc_pointwise(cpu_backend *cb, brisk_op op, const conv_geom *c, const float *x, const float *w,
                                const float *dy, float *out) {
    int64_t P = c->N * c->HW;
    for (int64_t gi = 0; gi < c->G; gi++) {
        const float *wg = w ? w + gi * c->Cog * c->Cg : NULL;
        if (op == BRISK_OP_CONV2D)
            cpu_gemm(cb, 0, 1, P, c->Cog, c->Cg, x + gi * c->Cg, c->C, wg, c->Cg, out + gi * c->Cog, c->Co);
        else if (op == BRISK_OP_CONV2D_GRAD_X) /* every (pixel, channel) is one group's: written */
            cpu_gemm(cb, 0, 0, P, c->Cg, c->Cog, dy + gi * c->Cog, c->Co, wg, c->Cg, out + gi * c->Cg, c->C);
        else
            cpu_gemm(cb, 1, 0, c->Cog, c->Cg, P, dy + gi * c->Cog, c->Co, x + gi * c->Cg, c->C,
                     out + gi * c->Cog * c->Cg, c->Cg);
    }
}

brisk_status cpu_conv_nhwc(cpu_backend *cb, brisk_op op, const conv_geom *c, const float *x, const float *w,
                           const float *dy, float *out, brisk_error *err) {
    int64_t rows = c->N * c->HWo;
    if (op == BRISK_OP_CONV2D_GRAD_X || rows == 0 || c->Co == 0 || c->K == 0)
        memset(out, 0, (size_t)(op == BRISK_OP_CONV2D ? rows * c->Co
                                : op == BRISK_OP_CONV2D_GRAD_X ? c->N * c->HW * c->C : c->Co * c->K) * sizeof(float));
    if (rows == 0 || c->Co == 0 || c->K == 0) return BRISK_OK;
    if (c->pointwise) {
        conv_nhwc_pointwise(cb, op, c, x, w, dy, out);
        return BRISK_OK;
    }
    int64_t R = min64(rows, max64(1, cb->conv_col_floats / c->K));
    int64_t ntw = op == BRISK_OP_CONV2D_GRAD_W && R < rows ? c->Cog * c->K : 0;
    float *scratch = cpu_conv_scratch(cb, (size_t)(R * c->K + c->Co * c->K + ntw), err);
    if (!scratch) return BRISK_ERR_NOMEM;
    float *col = scratch, *wr = col + R * c->K, *tw = wr + c->Co * c->K;
    nhwc_block rp = {.c = c, .w = w, .wt = wr, .to_ohwi = 1};
    if (op != BRISK_OP_CONV2D_GRAD_W) cpu_parallel(cb, c->Co, grain_for(c->K), reorder_weights, &rp);
    for (int64_t r0 = 0; r0 < rows; r0 += R)
        for (int64_t gi = 0; gi < c->G; gi++) {
            nhwc_block b = {.c = c, .r0 = r0, .R = min64(R, rows - r0), .gi = gi, .x = x, .dx = out, .col = col};
            const float *wg = wr + gi * c->Cog * c->K, *dyg = dy ? dy + r0 * c->Co + gi * c->Cog : NULL;
            if (op != BRISK_OP_CONV2D_GRAD_X) cpu_parallel(cb, b.R, grain_for(c->K), im2col_rows, &b);
            if (op == BRISK_OP_CONV2D) {
                cpu_gemm(cb, 0, 1, b.R, c->Cog, c->K, col, c->K, wg, c->K, out + r0 * c->Co + gi * c->Cog, c->Co);
            } else if (op == BRISK_OP_CONV2D_GRAD_X) {
                cpu_gemm(cb, 0, 0, b.R, c->K, c->Cog, dyg, c->Co, wg, c->K, col, c->K);
                cpu_parallel(cb, c->Cg, grain_for(b.R * c->w.kh * c->w.kw), col2im_channels, &b);
            } else if (r0 == 0) { /* the first block: no partial sum to add to */
                cpu_gemm(cb, 1, 0, c->Cog, c->K, b.R, dyg, c->Co, col, c->K, wr + gi * c->Cog * c->K, c->K);
            } else {
                cpu_gemm(cb, 1, 0, c->Cog, c->K, b.R, dyg, c->Co, col, c->K, tw, c->K);
                const float *pr[2] = {wr + gi * c->Cog * c->K, tw};
                cpu_parallel(cb, c->Cog * c->K, CPU_PAR_MIN, add_rows, pr);
            }
        }
    if (op == BRISK_OP_CONV2D_GRAD_W) {
        nhwc_block back = {.c = c, .w = wr, .wt = out};
        cpu_parallel(cb, c->Co, grain_for(c->K), reorder_weights, &back);
    }
    return BRISK_OK;
}
