/* CONV2D, CONV2D_GRAD_X, CONV2D_GRAD_W over NCHW (NHWC: conv_nhwc.c), as im2col + GEMM (cpu_gemm: brisk's own
 * sgemm or the BLAS, by matmul.c's rule).
 *
 * For group g and a block of columns (output pixels), the column matrix col [K, P],
 * K = C/groups * kh * kw, holds in row k = (c, i, j) the input value each output pixel's
 * window reads at kernel tap (i, j) of channel c (zero in the padding). Then
 *   forward   y_g [Co/g, P]  = w_g [Co/g, K] col
 *   grad x    dcol [K, P]    = w_g^T dy_g, scattered back into dx (col2im)
 *   grad w    dw_g [Co/g, K] = dy_g col^T, summed over the blocks in order.
 * The column matrix never covers the whole batch: a block is as many whole images as fit
 * in cb->conv_col_floats floats, or, when one image does not, a band of one image's output
 * pixels, so the scratch is bounded by the layer's sizes and that limit, never by N. A
 * block of several images is gathered from / scattered to NCHW through a [Co/g, P]
 * buffer; a single-image block reads and writes NCHW in place (ld = Ho Wo), and a 1x1
 * stride-1 unpadded convolution skips im2col (x already is its column matrix).
 *
 * Determinism: blocks are fixed by the sizes and run in order; im2col, col2im, the
 * gathers and the dw accumulation are split over rows or channels, each element computed
 * by one thread in a fixed order; the GEMMs are cpu_gemm's. */
#include "backend/cpu/conv_geom.h"

#include <stdlib.h>
#include <string.h>

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* From x [N, C, H, W], w [Co, C/g, kh, kw] and y [N, Co, Ho, Wo] (x [N, H, W, C] and y
 * [N, Ho, Wo, Co] in NHWC); checks they agree. */
static brisk_status conv_geometry(const brisk_shape *xs, const brisk_shape *ws, const brisk_shape *ys,
                                  const brisk_window *win, conv_geom *c, brisk_error *err) {
    if (xs->ndim != 4 || ws->ndim != 4 || ys->ndim != 4 || win->groups < 1 || win->sh < 1 || win->sw < 1 ||
        win->dh < 1 || win->dw < 1 || win->ph < 0 || win->pw < 0 ||
        (win->layout != BRISK_LAYOUT_NCHW && win->layout != BRISK_LAYOUT_NHWC))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "conv2d: x, w and y must be 4-D with a valid window and layout");
    memset(c, 0, sizeof *c);
    int nhwc = win->layout == BRISK_LAYOUT_NHWC, ci = nhwc ? 3 : 1, hi = nhwc ? 1 : 2, wi = nhwc ? 2 : 3;
    c->N = xs->d[0], c->C = xs->d[ci], c->H = xs->d[hi], c->W = xs->d[wi];
    c->Co = ws->d[0], c->Ho = ys->d[hi], c->Wo = ys->d[wi];
    c->w = *win;
    c->G = win->groups;
    int64_t kh = ws->d[2], kw = ws->d[3];
    int64_t ho = (c->H + 2 * win->ph - win->dh * (kh - 1) - 1), wo = (c->W + 2 * win->pw - win->dw * (kw - 1) - 1);
    if (kh != win->kh || kw != win->kw || c->C % c->G || c->Co % c->G || ws->d[1] * c->G != c->C ||
        ys->d[0] != c->N || ys->d[ci] != c->Co || ho < 0 || wo < 0 || ho / win->sh + 1 != c->Ho ||
        wo / win->sw + 1 != c->Wo)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "conv2d: x, w and y shapes do not agree with the window");
    c->Cg = c->C / c->G, c->Cog = c->Co / c->G;
    c->K = c->Cg * kh * kw;
    c->HW = c->H * c->W, c->HWo = c->Ho * c->Wo;
    c->pointwise = kh == 1 && kw == 1 && win->sh == 1 && win->sw == 1 && win->ph == 0 && win->pw == 0;
    return BRISK_OK;
}

/* One block: images [n0, n0 + ni), output pixels [p0, p0 + pb) of each (pb = HWo when
 * ni > 1), group gi; P = ni pb columns. */
typedef struct conv_block {
    const conv_geom *c;
    int64_t n0, ni, p0, pb, P, gi;
    const float *x;   /* im2col source / col2im target (dx, written through xw) */
    float *xw;
    float *col;       /* [K, P] */
    const float *src; /* gather source (NCHW, Ch channels) / scatter target via dst */
    float *dst;
    float *cp;        /* [Cog, P] */
    int64_t Ch;       /* channels of the NCHW tensor gathered or scattered (Co) */
} conv_block;

/* Columns [ow_lo, ow_hi) of an output row whose tap reads inside [0, W). */
static void tap_range(const conv_geom *c, int64_t j, int64_t *lo, int64_t *hi) {
    int64_t off = j * c->w.dw - c->w.pw, s = c->w.sw;
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;           /* first ow with iw >= 0 */
    int64_t b = c->W - 1 - off < 0 ? 0 : (c->W - 1 - off) / s + 1; /* first ow with iw >= W */
    *lo = min64(a, c->Wo);
    *hi = max64(*lo, min64(b, c->Wo));
}

static void im2col_rows(const void *vctx, int64_t k0, int64_t k1) {
    const conv_block *b = vctx;
    const conv_geom *c = b->c;
    int64_t khw = (int64_t)c->w.kh * c->w.kw, s = c->w.sw;
    for (int64_t k = k0; k < k1; k++) {
        int64_t ch = k / khw, i = k % khw / c->w.kw, j = k % c->w.kw;
        int64_t lo, hi, off = j * c->w.dw - c->w.pw;
        tap_range(c, j, &lo, &hi);
        for (int64_t img = 0; img < b->ni; img++) {
            const float *xp = b->x + ((b->n0 + img) * c->C + b->gi * c->Cg + ch) * c->HW;
            float *d = b->col + k * b->P + img * b->pb;
            for (int64_t p = b->p0; p < b->p0 + b->pb;) { /* one output row (or part) at a time */
                int64_t oh = p / c->Wo, ow0 = p % c->Wo, ow1 = min64(c->Wo, ow0 + b->p0 + b->pb - p);
                int64_t ih = oh * c->w.sh - c->w.ph + i * c->w.dh;
                float *row = d + (p - b->p0); /* row[ow - ow0], ow in [ow0, ow1) */
                int64_t a = ow0, e = ow0;
                if (ih >= 0 && ih < c->H) {
                    a = max64(ow0, min64(lo, ow1)), e = max64(a, min64(hi, ow1));
                    const float *xr = xp + ih * c->W;
                    if (s == 1) memcpy(row + (a - ow0), xr + a + off, (size_t)(e - a) * sizeof(float));
                    else
                        for (int64_t ow = a; ow < e; ow++) row[ow - ow0] = xr[ow * s + off];
                }
                for (int64_t ow = ow0; ow < a; ow++) row[ow - ow0] = 0.0f;
                for (int64_t ow = e; ow < ow1; ow++) row[ow - ow0] = 0.0f;
                p += ow1 - ow0;
            }
        }
    }
}

/* dx += col, channel by channel (a channel's kh kw taps in a fixed order). */
static void col2im_channels(const void *vctx, int64_t c0, int64_t c1) {
    const conv_block *b = vctx;
    const conv_geom *c = b->c;
    int64_t khw = (int64_t)c->w.kh * c->w.kw, s = c->w.sw;
    for (int64_t ch = c0; ch < c1; ch++)
        for (int64_t img = 0; img < b->ni; img++) {
            float *xp = b->xw + ((b->n0 + img) * c->C + b->gi * c->Cg + ch) * c->HW;
            for (int64_t t = 0; t < khw; t++) {
                int64_t i = t / c->w.kw, j = t % c->w.kw, lo, hi, off = j * c->w.dw - c->w.pw;
                tap_range(c, j, &lo, &hi);
                const float *d = b->col + (ch * khw + t) * b->P + img * b->pb;
                for (int64_t p = b->p0; p < b->p0 + b->pb;) {
                    int64_t oh = p / c->Wo, ow0 = p % c->Wo, ow1 = min64(c->Wo, ow0 + b->p0 + b->pb - p);
                    int64_t ih = oh * c->w.sh - c->w.ph + i * c->w.dh;
                    if (ih >= 0 && ih < c->H) {
                        float *xr = xp + ih * c->W;
                        const float *row = d + (p - b->p0);
                        int64_t a = max64(ow0, min64(lo, ow1)), e = max64(a, min64(hi, ow1));
                        for (int64_t ow = a; ow < e; ow++) xr[ow * s + off] += row[ow - ow0];
                    }
                    p += ow1 - ow0;
                }
            }
        }
}

/* cp [Cog, P] <- the block's channels of an NCHW tensor (whole images), and back. */
static void gather_rows(const void *vctx, int64_t r0, int64_t r1) {
    const conv_block *b = vctx;
    const conv_geom *c = b->c;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t img = 0; img < b->ni; img++)
            memcpy(b->cp + r * b->P + img * b->pb, b->src + ((b->n0 + img) * b->Ch + b->gi * c->Cog + r) * c->HWo,
                   (size_t)b->pb * sizeof(float));
}
static void scatter_rows(const void *vctx, int64_t r0, int64_t r1) {
    const conv_block *b = vctx;
    const conv_geom *c = b->c;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t img = 0; img < b->ni; img++)
            memcpy(b->dst + ((b->n0 + img) * b->Ch + b->gi * c->Cog + r) * c->HWo, b->cp + r * b->P + img * b->pb,
                   (size_t)b->pb * sizeof(float));
}

static int64_t grain_for(int64_t per_item) { return max64(1, CPU_PAR_MIN / max64(per_item, 1)); }

/* Block size: whole images while K HWo fits the limit, else a band of one image's pixels
 * (at least one output row's worth, so the GEMM stays wide). */
static void block_size(const conv_geom *c, int64_t limit, int64_t *imgs, int64_t *pix) {
    if (c->K * c->HWo <= limit) {
        *pix = c->HWo;
        *imgs = max64(1, min64(c->N, limit / max64(c->K * c->HWo, 1)));
    } else {
        *imgs = 1;
        *pix = min64(c->HWo, max64(limit / c->K, c->Wo));
    }
}

float *cpu_conv_scratch(cpu_backend *cb, size_t floats, brisk_error *err) {
    if (floats > cb->conv_scratch_cap) {
        free(cb->conv_scratch);
        cb->conv_scratch = NULL;
        cb->conv_scratch_cap = 0;
        if (posix_memalign((void **)&cb->conv_scratch, 64, floats * sizeof(float)) != 0) {
            cb->conv_scratch = NULL;
            brisk_errorf(err, BRISK_ERR_NOMEM, "conv2d: cannot allocate %zu bytes of scratch", floats * sizeof(float));
            return NULL;
        }
        cb->conv_scratch_cap = floats;
    }
    return cb->conv_scratch;
}

static void add_rows(const void *vctx, int64_t i0, int64_t i1) {
    const float *const *p = vctx; /* {dst, src} */
    float *d = (float *)p[0];
    for (int64_t i = i0; i < i1; i++) d[i] += p[1][i];
}

/* The geometry of convolution pass id (CONV2D, or a gradient: x, w and y from its inputs and
 * output as each pass has them) */
static brisk_status pass_geometry(const brisk_graph *g, int id, conv_geom *c, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    if (n->n_in < 2) return brisk_errorf(err, BRISK_ERR_INTERNAL, "conv: node %d has no operands", id);
    const brisk_shape *s0 = &IN_NODE(g, id, 0)->shape, *s1 = &IN_NODE(g, id, 1)->shape;
    switch (n->op) {
    case BRISK_OP_CONV2D: return conv_geometry(s0, s1, &n->shape, &n->attr.win, c, err);
    case BRISK_OP_CONV2D_GRAD_X: return conv_geometry(&n->shape, s1, s0, &n->attr.win, c, err);
    case BRISK_OP_CONV2D_GRAD_W: return conv_geometry(s1, &n->shape, s0, &n->attr.win, c, err);
    default: return brisk_errorf(err, BRISK_ERR_INTERNAL, "conv: not a conv op");
    }
}

brisk_status cpu_conv_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                         brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    conv_geom c;
    brisk_status st = pass_geometry(g, id, &c, err);
    if (st) return st;
    const float *x = NULL, *w = NULL, *dy = NULL;
    if (n->op == BRISK_OP_CONV2D) x = in[0], w = in[1];
    else if (n->op == BRISK_OP_CONV2D_GRAD_X) dy = in[0], w = in[1];
    else dy = in[0], x = in[1];
    if (c.w.layout == BRISK_LAYOUT_NHWC) return cpu_conv_nhwc(cb, n->op, &c, x, w, dy, out, err);
    float *o = out;
    int empty = c.N == 0 || c.HWo == 0 || c.Co == 0 || c.K == 0;
    /* dx accumulates over taps and blocks; dw is written by its first block */
    if (n->op == BRISK_OP_CONV2D_GRAD_X || (empty && n->op == BRISK_OP_CONV2D_GRAD_W))
        memset(o, 0, (size_t)cpu_numel(&n->shape) * sizeof(float));
    if (empty) return BRISK_OK;
    if (cb->conv_winograd && cpu_conv_winograd_fits(&c)) return cpu_conv_winograd(cb, n->op, &c, x, w, dy, o, NULL, err);
    int64_t imgs, pix;
    block_size(&c, cb->conv_col_floats, &imgs, &pix);
    /* col [K, P]; cp [Cog, P] only for blocks of several images; tw [Cog, K] only for dw
     * over several blocks */
    int64_t Pmax = imgs * pix, ncp = imgs > 1 ? c.Cog * Pmax : 0;
    int64_t ntw = n->op == BRISK_OP_CONV2D_GRAD_W && (imgs < c.N || pix < c.HWo) ? c.Cog * c.K : 0;
    float *scratch = cpu_conv_scratch(cb, (size_t)(c.K * Pmax + ncp + ntw), err);
    if (!scratch) return BRISK_ERR_NOMEM;
    float *col = scratch, *cp = col + c.K * Pmax, *tw = cp + ncp;
    for (int64_t n0 = 0; n0 < c.N; n0 += imgs)
        for (int64_t p0 = 0; p0 < c.HWo; p0 += pix)
            for (int64_t gi = 0; gi < c.G; gi++) {
                conv_block b = {.c = &c, .n0 = n0, .ni = min64(imgs, c.N - n0), .p0 = p0, .pb = min64(pix, c.HWo - p0),
                                .gi = gi, .x = x, .xw = o, .col = col, .cp = cp, .Ch = c.Co};
                b.P = b.ni * b.pb;
                int direct = b.ni == 1; /* NCHW rows of one image: ld HWo */
                int64_t yoff = (n0 * c.Co + gi * c.Cog) * c.HWo + p0, xoff = (n0 * c.C + gi * c.Cg) * c.HW + p0;
                const float *wg = w ? w + gi * c.Cog * c.K : NULL;
                /* the column matrix: x itself (pointwise, one image) or im2col */
                const float *colp = col;
                int64_t ldcol = b.P;
                if (n->op != BRISK_OP_CONV2D_GRAD_X) {
                    if (c.pointwise && direct) colp = x + xoff, ldcol = c.HW;
                    else cpu_parallel(cb, c.K, grain_for(b.P), im2col_rows, &b);
                }
                /* dy's block as a [Cog, P] matrix */
                const float *dyp = NULL;
                int64_t lddy = c.HWo;
                if (dy) {
                    if (direct) dyp = dy + yoff;
                    else {
                        b.src = dy;
                        cpu_parallel(cb, c.Cog, grain_for(b.P), gather_rows, &b);
                        dyp = cp, lddy = b.P;
                    }
                }
                if (n->op == BRISK_OP_CONV2D) {
                    if (direct) cpu_gemm(cb, 0, 0, c.Cog, b.P, c.K, wg, c.K, colp, ldcol, o + yoff, c.HWo);
                    else {
                        cpu_gemm(cb, 0, 0, c.Cog, b.P, c.K, wg, c.K, colp, ldcol, cp, b.P);
                        b.dst = o;
                        cpu_parallel(cb, c.Cog, grain_for(b.P), scatter_rows, &b);
                    }
                } else if (n->op == BRISK_OP_CONV2D_GRAD_X) {
                    if (c.pointwise && direct) { /* distinct pixels per block: written, not added */
                        cpu_gemm(cb, 1, 0, c.K, b.P, c.Cog, wg, c.K, dyp, lddy, o + xoff, c.HW);
                    } else {
                        cpu_gemm(cb, 1, 0, c.K, b.P, c.Cog, wg, c.K, dyp, lddy, col, b.P);
                        cpu_parallel(cb, c.Cg, grain_for(b.P * c.w.kh * c.w.kw), col2im_channels, &b);
                    }
                } else if (n0 == 0 && p0 == 0) { /* the first block: no partial sum to add to */
                    cpu_gemm(cb, 0, 1, c.Cog, c.K, b.P, dyp, lddy, colp, ldcol, o + gi * c.Cog * c.K, c.K);
                } else {
                    cpu_gemm(cb, 0, 1, c.Cog, c.K, b.P, dyp, lddy, colp, ldcol, tw, c.K);
                    const float *pr[2] = {o + gi * c.Cog * c.K, tw};
                    cpu_parallel(cb, c.Cog * c.K, CPU_PAR_MIN, add_rows, pr);
                }
            }
    return BRISK_OK;
}

/* a non-empty convolution that conv_winograd.c computes (what cpu_conv_op sends there; its
 * output pass takes the epilogue) */
static int by_winograd(const conv_geom *c) {
    return c->N > 0 && c->HWo > 0 && c->Co > 0 && c->K > 0 && cpu_conv_winograd_fits(c);
}

void cpu_conv_count_passes(cpu_backend *cb, const brisk_exec *ex) {
    cb->convs = cb->convs_winograd = 0;
    for (int s = 0; s < ex->plan->n_train; s++) {
        int id = ex->plan->train_order[s];
        brisk_op op = ex->g->nodes[id].op;
        conv_geom c;
        brisk_error err;
        if ((op != BRISK_OP_CONV2D && op != BRISK_OP_CONV2D_GRAD_X && op != BRISK_OP_CONV2D_GRAD_W) ||
            pass_geometry(ex->g, id, &c, &err))
            continue;
        cb->convs++;
        cb->convs_winograd += cb->conv_winograd && by_winograd(&c); /* cpu_conv_op's choice */
    }
}

int cpu_conv_epilogue_ok(const brisk_graph *g, int id) {
    const brisk_node *n = NODE(g, id);
    conv_geom c;
    brisk_error err;
    return n->op == BRISK_OP_CONV2D && n->n_in == 2 && n->dtype == BRISK_F32 && !pass_geometry(g, id, &c, &err) &&
           by_winograd(&c);
}

brisk_status cpu_conv_epilogue_run(cpu_backend *cb, const brisk_graph *g, int id, const float *x, const float *w,
                                   float *out, const cpu_conv_epi *epi, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    conv_geom c;
    if (n->op != BRISK_OP_CONV2D)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "conv2d (node %d): not a convolution with an epilogue", id);
    brisk_status st = pass_geometry(g, id, &c, err);
    if (st) return st;
    if (!by_winograd(&c))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "conv2d (node %d): not a convolution with an epilogue", id);
    return cpu_conv_winograd(cb, BRISK_OP_CONV2D, &c, x, w, NULL, out, epi, err);
}
