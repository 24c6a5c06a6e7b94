/* CONV2D, CONV2D_GRAD_X and CONV2D_GRAD_W of a 1-D convolution (a [1, r] kernel, 2 <= r <= 5,
 * stride and dilation 1, one group, NCHW) by Winograd's minimal filtering F(4, r): each tile
 * of 4 outputs of a row is computed from the n = r + 3 inputs it reads as
 *   y = AT [(G w) . (BT d)]
 * so a tile costs n multiplications per input and output channel pair instead of 4 r (8
 * instead of 20 at r = 5). Summed over the channels, the n products are n GEMMs:
 *   M[xi] [Co, tiles] = U[xi] [Co, C] V[xi] [C, tiles],  U = G w,  V = BT d.
 * im2col + GEMM (conv.c) runs the 1-D CNN's two convolutions at 60-95 GFLOP/s of a 185 peak
 * on 2 AVX2 cores, so only fewer multiplications make them much faster.
 *
 * The gradients are the same computation's: dx is a convolution of dy with the kernel
 * flipped and its channels swapped (padding r - 1 - p), run by the same code; dw sums, over
 * all tiles, dU[xi] [Co, C] = dM[xi]^T V[xi] with dM = A dy, then dw = G^T dU. For dw the
 * transforms write tile-major ([xi][tile][channel]), so that this sum along the tiles is an
 * outer-product GEMM, the register tile of every other product here (channel-major, it was
 * a dot product per (co, c) pair, each finished by a sum across a vector's lanes: the 1-D
 * CNN's two dw 2.5 and 2.9 ms, now 1.4 and 1.4, bench_conv_layers 2 1d on a 2-core AVX-512
 * Xeon, 8 interleaved runs each).
 *
 * Points 0, 1, -1, 2, -2, 1/2, -1/2 and infinity (the first r + 2 finite ones): BT's rows are
 * the coefficients of the products of (x - p) over the other points, exact in float, and G
 * carries the divisions. Measured against float64 (C 64, Co 64, r 5): 1.2e-6 of the largest
 * output, against 3e-7 for the direct sum; F(6, 5) would save another 17 % of the
 * multiplications at 1.2e-5, too far from fp32.
 *
 * Tiles are numbered row after row (N H rows of ceil(Wo / 4) tiles) and cut into blocks of
 * a size fixed by the layer's channels, so that a block's transforms and products stay in
 * L2; a block is one thread's, start to end, and its outputs are its own. dw's sums over
 * blocks go into a fixed number of chunks (by the shape, not the thread count), each summed
 * in block order and the chunks in chunk order: the bits do not depend on the threads.
 * Scratch: the transformed weights, a block's buffers per thread and the chunks' partial dU,
 * bounded by the layer's channels, never by N. */
#include "backend/cpu/conv_geom.h"
#include "backend/cpu/vec8.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WM 4 /* outputs per tile */
#define WR_MAX 5
#define WN_MAX (WM + WR_MAX - 1)
#define DW_CHUNKS 8
#define DW_PART_FLOATS (1 << 22)
#define BLOCK_FLOATS 65536 /* a block's V and M: 256 KiB, half the L2 of the AMD EPYC it was tuned on */

/* A row of a transform as its nonzero terms: sum over q < count of val[q] * in[idx[q]]. */
typedef struct wino_row {
    int count, idx[WN_MAX];
    float val[WN_MAX];
} wino_row;

typedef struct wino_mats {
    int r, n;
    float AT[WM][WN_MAX], G[WN_MAX][WR_MAX], BT[WN_MAX][WN_MAX];
    wino_row bt[WN_MAX], at[WM], a[WN_MAX]; /* BT's rows, AT's rows, AT's columns */
} wino_mats;

static void nonzeros(const float *v, int n, int stride, wino_row *row) {
    row->count = 0;
    for (int j = 0; j < n; j++)
        if (v[j * stride] != 0.0f) row->idx[row->count] = j, row->val[row->count++] = v[j * stride];
}

static wino_mats g_mats[WR_MAX + 1];
static pthread_once_t g_mats_once = PTHREAD_ONCE_INIT;
static const double POINTS[WN_MAX - 1] = {0, 1, -1, 2, -2, 0.5, -0.5};

/* Eight tiles at a time: their inputs (or outputs) loaded one tile to a vector and turned
 * to one vector per position across the tiles (an 8 x 8 transpose in registers, vec8.h), so
 * the transforms are whole-vector multiply-adds. */
static inline v8 combine(const wino_row *row, const v8 *in) {
    v8 acc = row->val[0] * in[row->idx[0]];
    for (int q = 1; q < row->count; q++) acc += row->val[q] * in[row->idx[q]];
    return acc;
}

/* The three transforms of a tile, eight tiles a vector. For r = 3 and 5 (n = 6 and 8) they are
 * written out: the points come in pairs +p, -p, whose rows of BT (and columns of AT) differ
 * only in the sign of the odd terms, so each pair costs one even and one odd sum (36 vector
 * operations for BT at n = 8 instead of 44 multiply-adds). The constants are the entries
 * build_mats computes for these points (tests/backend/test_cpu_vision.c checks the result
 * against float64); other r take the matrices' nonzero terms. */
static inline __attribute__((always_inline)) void bt_apply(const wino_mats *m, int n, const v8 *d, v8 *v) {
    if (n == 8) {
        v[0] = (d[6] - d[0]) + 5.25f * (d[2] - d[4]);
        v[7] = (d[7] - d[1]) + 5.25f * (d[3] - d[5]);
        v8 e = d[2] - 4.25f * d[4] + d[6], o = d[1] - 4.25f * d[3] + d[5];
        v[1] = e + o, v[2] = e - o;
        e = 0.25f * d[2] - 1.25f * d[4] + d[6], o = 0.5f * d[1] - 2.5f * d[3] + 2.0f * d[5];
        v[3] = e + o, v[4] = e - o;
        e = 4.0f * d[2] - 5.0f * d[4] + d[6], o = 2.0f * d[1] - 2.5f * d[3] + 0.5f * d[5];
        v[5] = e + o, v[6] = e - o;
    } else if (n == 6) {
        v[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
        v[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
        v8 e = d[4] - 4.0f * d[2], o = d[3] - 4.0f * d[1];
        v[1] = e + o, v[2] = e - o;
        e = d[4] - d[2], o = 2.0f * (d[3] - d[1]);
        v[3] = e + o, v[4] = e - o;
    } else {
        for (int xi = 0; xi < m->n; xi++) v[xi] = combine(&m->bt[xi], d);
    }
}

/* y[0..3] = AT mx */
static inline __attribute__((always_inline)) void at_apply(const wino_mats *m, int n, const v8 *mx, v8 *y) {
    if (n == 8) {
        v8 s1 = mx[1] + mx[2], d1 = mx[1] - mx[2], s2 = mx[3] + mx[4], d2 = mx[3] - mx[4];
        v8 s3 = mx[5] + mx[6], d3 = mx[5] - mx[6];
        y[0] = mx[0] + s1 + s2 + s3;
        y[1] = d1 + 2.0f * d2 + 0.5f * d3;
        y[2] = s1 + 4.0f * s2 + 0.25f * s3;
        y[3] = d1 + 8.0f * d2 + 0.125f * d3 + mx[7];
    } else if (n == 6) {
        v8 s1 = mx[1] + mx[2], d1 = mx[1] - mx[2], s2 = mx[3] + mx[4], d2 = mx[3] - mx[4];
        y[0] = mx[0] + s1 + s2;
        y[1] = d1 + 2.0f * d2;
        y[2] = s1 + 4.0f * s2;
        y[3] = d1 + 8.0f * d2 + mx[5];
    } else {
        for (int i = 0; i < WM; i++) y[i] = combine(&m->at[i], mx);
    }
}

/* mo[0..n-1] = AT^T e (e[0..3]) */
static inline __attribute__((always_inline)) void a_apply(const wino_mats *m, int n, const v8 *e, v8 *mo) {
    if (n == 8 || n == 6) {
        static const float P[3] = {1.0f, 2.0f, 0.5f};
        mo[0] = e[0];
        mo[n - 1] = e[3];
        for (int k = 0; k < (n - 2) / 2; k++) {
            float p = P[k];
            v8 ev = e[0] + (p * p) * e[2], od = p * e[1] + (p * p * p) * e[3];
            mo[1 + 2 * k] = ev + od, mo[2 + 2 * k] = ev - od;
        }
    } else {
        for (int xi = 0; xi < m->n; xi++) mo[xi] = combine(&m->a[xi], e);
    }
}

typedef float v4 __attribute__((vector_size(16)));
/* halves and joins by shuffles (through memory they stall: a load of what two stores just wrote) */
static inline v4 v8_lo(v8 a) { return __builtin_shufflevector(a, a, 0, 1, 2, 3); }
static inline v4 v8_hi(v8 a) { return __builtin_shufflevector(a, a, 4, 5, 6, 7); }
static inline v8 v4_join(v4 lo, v4 hi) { return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7); }


/* c[0..] = the coefficients (lowest degree first) of the product of (x - p_j) over the first
 * np points but `skip` (-1: none) */
static void poly_from_roots(int np, int skip, double *c) {
    int deg = 0;
    c[0] = 1.0;
    for (int j = 0; j < np; j++) {
        if (j == skip) continue;
        c[deg + 1] = 0.0;
        for (int k = deg + 1; k > 0; k--) c[k] = c[k - 1] - POINTS[j] * c[k];
        c[0] *= -POINTS[j];
        deg++;
    }
}

static void build_mats(void) {
    for (int r = 2; r <= WR_MAX; r++) {
        wino_mats *m = &g_mats[r];
        int n = WM + r - 1, nf = n - 1;
        memset(m, 0, sizeof *m);
        m->r = r, m->n = n;
        for (int i = 0; i < WM; i++)
            for (int j = 0; j < n; j++) m->AT[i][j] = j < nf ? (float)pow(POINTS[j], i) : (float)(i == WM - 1);
        for (int j = 0; j < n; j++) {
            double c[WN_MAX + 1] = {0};
            poly_from_roots(nf, j < nf ? j : -1, c);
            for (int k = 0; k < n; k++) m->BT[j][k] = (float)c[k];
            double f = 1.0;
            for (int l = 0; l < nf && j < nf; l++)
                if (l != j) f *= POINTS[j] - POINTS[l];
            for (int k = 0; k < r; k++) m->G[j][k] = j < nf ? (float)(pow(POINTS[j], k) / f) : (float)(k == r - 1);
        }
        for (int j = 0; j < n; j++) nonzeros(m->BT[j], n, 1, &m->bt[j]), nonzeros(&m->AT[0][j], WM, WN_MAX, &m->a[j]);
        for (int i = 0; i < WM; i++) nonzeros(m->AT[i], n, 1, &m->at[i]);
    }
}

int cpu_conv_winograd_fits(const conv_geom *c) {
    const brisk_window *w = &c->w;
    return w->layout == BRISK_LAYOUT_NCHW && c->G == 1 && w->kh == 1 && w->kw >= 2 && w->kw <= WR_MAX &&
           w->sh == 1 && w->sw == 1 && w->dh == 1 && w->dw == 1 && w->ph == 0 && w->pw <= w->kw - 1 &&
           c->Wo >= WM && c->C * c->Co >= 8 * (c->C + c->Co); /* the products must outweigh the transforms */
}

/* The transforms write a block's rows to a multiple of 16 tiles, zeros past its last: the
 * products read whole vectors */
static int64_t round16(int64_t nb) { return (nb + 15) / 16 * 16; }

/* One pass: src [N, Cs, H, Ws] -> dst [N, Cd, H, Wd] (forward, dx), or the sums of dw. */
typedef struct wino_run {
    const wino_mats *m;
    const float *src, *dy;
    float *dst;
    int64_t N, H, Cs, Ws, Cd, Wd, pad; /* dw: Cs C (x), Cd Co (dy), Wd Wo */
    int64_t nt, T, tb, nblocks;        /* tiles a row, tiles in all, tiles a block, blocks */
    int64_t edge_floats;               /* a block's gathered edges (edge_floats()) */
    int64_t ldv, ldm;                  /* dw: the rows of its tile-major V [n][tb][ldv], dM [n][tb][ldm]; else Cs, Cd */
    int64_t v_floats, m_floats;        /* a block's V and M (or dM) */
    float *U;                          /* [n][Cd][Cs], made by weights_rows */
    float *work, *parts;               /* per thread: work_per floats; dw: per chunk [n][Cd][Cs] */
    size_t work_per;
    float *gemm_scratch;
    size_t gemm_per;
    int64_t chunk_blocks;
    const float *bias;                 /* forward epilogue (fuse.c): dst = y + bias[co], */
    float *act_out;                    /* and act_out = act(dst), or NULL; */
    cpu_act act;
    int relu;                          /* or dst = relu(y + bias[co]) */
    const float *w;                    /* the weights [Co, C, 1, r] (forward, dx) */
    int64_t C, nchunks;
    int gx;                            /* dx: U from w flipped, channels swapped */
    float *dw_out;                     /* dw: [Co, C, 1, r] */
} wino_run;

/* Where block tiles [g0, g0 + nb) start: in channel 0 of src (may be before its row, by up to the
 * padding), whether all n inputs lie in the row, and the tile's first output in channel 0 of
 * dst and how many of its 4 outputs exist. */
typedef struct tile_pos {
    int64_t in, start, out, nout;
    int64_t edge; /* not inside: its slot in the block's gathered edges */
    int inside;
    const float *p; /* transform_in: channel c's inputs at p + c step (src, or the gathered edges) */
    int64_t step;
} tile_pos;

static void tile_positions(const wino_run *r, int64_t g0, int64_t nb, int64_t Cin, int64_t Win, int64_t Cout,
                           int64_t Wout, tile_pos *tp) {
    int64_t edges = 0;
    for (int64_t t = 0; t < nb; t++) {
        int64_t g = g0 + t, row = g / r->nt, tt = g % r->nt, img = row / r->H, h = row % r->H;
        int64_t s = tt * WM - r->pad;
        tp[t].start = s;
        tp[t].in = (img * Cin * r->H + h) * Win + s;
        tp[t].inside = s >= 0 && s + 8 <= Win; /* a whole vector of 8 inputs can be loaded */
        tp[t].edge = tp[t].inside ? -1 : edges++;
        tp[t].out = (img * Cout * r->H + h) * Wout + tt * WM;
        tp[t].nout = Wout - tt * WM < WM ? Wout - tt * WM : WM;
    }
}

/* The transforms run over a block a group of 8 tiles at a time. The input transform takes all
 * of a block's groups for one channel before the next: each of the n rows of V a channel's
 * pass writes is then one run along the tiles, whole cache lines in order (group after group,
 * channel within, wrote 8 half lines 512 lines apart at every step and waited on its stores).
 * The output and dy transforms go the other way, channel within group: what they read or
 * write in the tensor (a row's 32 outputs, channel after channel) is then in order, which
 * weighed more than their n reads or writes of M and dM (bench_conv_layers 2 1d, 8
 * interleaved runs each, fastest run: the 1-D CNN's convolutions 0 to 21 % faster than
 * either order for all three). */
typedef float v4u __attribute__((vector_size(16), aligned(4)));

static inline __attribute__((always_inline)) void in_group(const wino_run *r, const tile_pos *tp, int64_t c,
                                                           int64_t t0, const wino_mats *m, int n, float *V) {
    const int64_t tb = r->tb;
    v8 d[8], v[WN_MAX];
    for (int l = 0; l < 8; l++) d[l] = *(const v8u *)(tp[t0 + l].p + c * tp[t0 + l].step);
    transpose8(d);
    bt_apply(m, n, d, v);
    for (int xi = 0; xi < n; xi++) *(v8 *)(V + (xi * r->Cs + c) * tb + t0) = v[xi];
}

static inline __attribute__((always_inline)) void in_channels(const wino_run *r, const tile_pos *tp, int64_t nb,
                                                              const wino_mats *m, int n, float *V) {
    for (int64_t c = 0; c < r->Cs; c++)
        for (int64_t t0 = 0; t0 < round16(nb); t0 += 8) in_group(r, tp, c, t0, m, n, V);
}

/* dw's V, tile-major: tile t's 8 inputs of 8 channels turned to one vector per position
 * across the channels, so each point's row of V[xi][t] is written whole (channels past Cs:
 * zeros) */
static inline __attribute__((always_inline)) void in_tile_group(const wino_run *r, const tile_pos *tp, int64_t t,
                                                                int64_t c0, int nc, const wino_mats *m, int n,
                                                                float *V) {
    v8 d[8], v[WN_MAX];
    for (int l = 0; l < 8; l++) d[l] = l < nc ? *(const v8u *)(tp[t].p + (c0 + l) * tp[t].step) : (v8){0};
    transpose8(d);
    bt_apply(m, n, d, v);
    for (int xi = 0; xi < n; xi++) *(v8 *)(V + (xi * r->tb + t) * r->ldv + c0) = v[xi];
}

static inline __attribute__((always_inline)) void in_tiles(const wino_run *r, const tile_pos *tp, int64_t nb,
                                                           const wino_mats *m, int n, float *V) {
    const int64_t full = r->Cs / 8 * 8;
    for (int64_t t = 0; t < nb; t++) {
        for (int64_t c0 = 0; c0 < full; c0 += 8) in_tile_group(r, tp, t, c0, 8, m, n, V);
        if (full < r->Cs) in_tile_group(r, tp, t, full, (int)(r->Cs - full), m, n, V);
    }
}

/* V[xi][c][t] = sum_j BT[xi][j] d_t[j] for every channel c of src and the block's nb tiles
 * (row stride tb; written to nb rounded up to 16, zeros past nb), or tile-major V[xi][t][c]
 * (dw's: row stride ldv, nb rows). A tile whose 8 inputs are
 * not all inside its row (the first and last of a row) has them gathered first, every
 * channel's, into E (8 zeros, then Cs x 8 floats a tile): gathered in the group's loop,
 * the vector load right after the scalar stores stalls. */
static void transform_in(const wino_run *r, tile_pos *tp, int64_t nb, float *V, float *E, int tile_major) {
    const wino_mats *m = r->m;
    const int n = m->n;
    const int64_t Ws = r->Ws, cs = r->H * Ws;
    memset(E, 0, 8 * sizeof(float));
    E += 8;
    for (int64_t t = 0; t < round16(nb); t++) {
        if (t >= nb) { /* the zeros before the edges */
            tp[t].p = E - 8, tp[t].step = 0;
            continue;
        }
        if (tp[t].inside) {
            tp[t].p = r->src + tp[t].in, tp[t].step = cs;
            continue;
        }
        float *e = E + tp[t].edge * r->Cs * 8;
        tp[t].p = e, tp[t].step = 8;
        int64_t j0 = tp[t].start < 0 ? -tp[t].start : 0, j1 = Ws - tp[t].start < n ? Ws - tp[t].start : n;
        if (j1 < j0) j1 = j0;
        for (int64_t c = 0; c < r->Cs; c++) {
            const float *src = r->src + c * cs + tp[t].in; /* read at [j0, j1) only */
            for (int j = 0; j < 8; j++) e[c * 8 + j] = j >= j0 && j < j1 ? src[j] : 0.0f;
        }
    }
    if (tile_major) { /* a constant n: the pairs' code, in registers */
        if (n == 8) in_tiles(r, tp, nb, m, 8, V);
        else if (n == 6) in_tiles(r, tp, nb, m, 6, V);
        else in_tiles(r, tp, nb, m, n, V);
    } else if (n == 8) in_channels(r, tp, nb, m, 8, V);
    else if (n == 6) in_channels(r, tp, nb, m, 6, V);
    else in_channels(r, tp, nb, m, n, V);
}

/* cpu_relu (v < 0 ? 0 : v, NaN and -0 kept) on the bits */
static inline v8 relu8(v8 v) {
    v8i neg = v < 0.0f, b;
    memcpy(&b, &v, sizeof b);
    b &= ~neg;
    memcpy(&v, &b, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void out_group(const wino_run *r, const tile_pos *tp, int64_t co,
                                                            int64_t t0, int64_t nb, const wino_mats *m, int n,
                                                            const float *M) {
    const int64_t tb = r->tb, cs = r->H * r->Wd;
    v8 mx[WN_MAX], y[4];
    for (int xi = 0; xi < n; xi++) mx[xi] = *(const v8 *)(M + (xi * r->Cd + co) * tb + t0);
    at_apply(m, n, mx, y);
    if (r->bias)
        for (int i = 0; i < 4; i++) y[i] += r->bias[co]; /* the ADD's one rounding */
    if (r->relu)
        for (int i = 0; i < 4; i++) y[i] = relu8(y[i]);
    transpose4x2(y); /* y[l % 4], half l / 4: tile t0 + l's 4 outputs */
    float *d = r->dst + co * cs;
    for (int l = 0; l < 8; l++) {
        v4 h = l < 4 ? v8_lo(y[l]) : v8_hi(y[l - 4]);
        int64_t t = t0 + l;
        if (t >= nb) break;
        if (tp[t].nout == WM) *(v4u *)(d + tp[t].out) = h;
        else
            for (int64_t i = 0; i < tp[t].nout; i++) d[tp[t].out + i] = h[i];
    }
}

static inline __attribute__((always_inline)) void out_channels(const wino_run *r, const tile_pos *tp, int64_t nb,
                                                               const wino_mats *m, int n, const float *M) {
    for (int64_t t0 = 0; t0 < nb; t0 += 8)
        for (int64_t co = 0; co < r->Cd; co++) out_group(r, tp, co, t0, nb, m, n, M);
}

/* y_t[i] = sum_xi AT[i][xi] M[xi][co][t], written to every channel co of dst. */
static void transform_out(const wino_run *r, const tile_pos *tp, int64_t nb, const float *M) {
    if (r->m->n == 8) out_channels(r, tp, nb, r->m, 8, M);
    else if (r->m->n == 6) out_channels(r, tp, nb, r->m, 6, M);
    else out_channels(r, tp, nb, r->m, r->m->n, M);
}

/* The gathered edges of a block: 8 zeros, then Cs x 8 floats for each tile not inside, as many
 * as a row has times the rows a block touches (or the block's tiles, if fewer) */
static int64_t edge_floats(const wino_run *r) {
    int64_t per_row = 0;
    for (int64_t tt = 0; tt < r->nt; tt++) {
        int64_t s = tt * WM - r->pad;
        per_row += !(s >= 0 && s + 8 <= r->Ws);
    }
    int64_t edges = (r->tb / r->nt + 2) * per_row;
    if (edges > r->tb) edges = r->tb;
    return (8 + edges * r->Cs * 8 + 15) / 16 * 16;
}

/* The activation of the block's outputs, a row's run of them at a time (cpu_act_span, as the
 * activation's node computes it), while they are in cache. */
static void act_rows(const wino_run *r, const tile_pos *tp, int64_t nb) {
    const int64_t cs = r->H * r->Wd;
    for (int64_t t = 0; t < nb;) {
        int64_t t1 = t + 1;
        while (t1 < nb && tp[t1].out == tp[t1 - 1].out + WM) t1++;
        int64_t o = tp[t].out, len = tp[t1 - 1].out + tp[t1 - 1].nout - o;
        for (int64_t co = 0; co < r->Cd; co++)
            cpu_act_span(&r->act, r->dst + co * cs + o, r->act_out + co * cs + o, len);
        t = t1;
    }
}

static void apply_blocks(const void *vctx, int64_t b0, int64_t b1) {
    const wino_run *r = vctx;
    const int n = r->m->n;
    const int64_t tb = r->tb;
    int tid = cpu_worker_id();
    float *V = r->work + r->work_per * (size_t)tid, *M = V + r->v_floats, *E = M + r->m_floats;
    tile_pos *tp = (tile_pos *)(E + r->edge_floats);
    float *scratch = r->gemm_scratch + r->gemm_per * (size_t)tid;
    for (int64_t blk = b0; blk < b1; blk++) {
        int64_t g0 = blk * tb, nb = r->T - g0 < tb ? r->T - g0 : tb;
        tile_positions(r, g0, nb, r->Cs, r->Ws, r->Cd, r->Wd, tp);
        transform_in(r, tp, nb, V, E, 0);
        for (int xi = 0; xi < n; xi++)
            cpu_sgemm_b_rows(r->Cd, nb, r->Cs, r->U + xi * r->Cd * r->Cs, r->Cs, V + xi * r->Cs * tb, tb,
                             M + xi * r->Cd * tb, tb, scratch);
        transform_out(r, tp, nb, M);
        if (r->act_out) act_rows(r, tp, nb);
    }
}

/* Tile t's 4 outputs in a row of s (zeros past the row's last, or past the block) */
static inline v4 load_out4(const float *s, const tile_pos *tp, int64_t t, int64_t nb) {
    if (t < nb && tp[t].nout == WM) return *(const v4u *)(s + tp[t].out);
    v4 q = {0};
    for (int64_t i = 0; t < nb && i < tp[t].nout; i++) q[i] = s[tp[t].out + i];
    return q;
}

/* dM[xi][t][co] = sum_i AT[i][xi] dy_t[i], tile-major as dw's V: tile t's 4 outputs of 8
 * channels turned to one vector per position (0 past a row's last output, and for channels
 * past Cd). */
static inline __attribute__((always_inline)) void dy_tile_group(const wino_run *r, const tile_pos *tp, int64_t t,
                                                                int64_t co0, int nc, int64_t nb, const wino_mats *m,
                                                                int n, float *dM) {
    const int64_t cs = r->H * r->Wd;
    const float *s = r->dy + co0 * cs;
    const v4 zero = {0};
    v8 e[4], mo[WN_MAX];
    for (int l = 0; l < 4; l++)
        e[l] = v4_join(l < nc ? load_out4(s + l * cs, tp, t, nb) : zero,
                       l + 4 < nc ? load_out4(s + (l + 4) * cs, tp, t, nb) : zero);
    transpose4x2(e);
    a_apply(m, n, e, mo);
    for (int xi = 0; xi < n; xi++) *(v8 *)(dM + (xi * r->tb + t) * r->ldm + co0) = mo[xi];
}

static inline __attribute__((always_inline)) void dy_tiles(const wino_run *r, const tile_pos *tp, int64_t nb,
                                                           const wino_mats *m, int n, float *dM) {
    const int64_t full = r->Cd / 8 * 8;
    for (int64_t t = 0; t < nb; t++) {
        for (int64_t co0 = 0; co0 < full; co0 += 8) dy_tile_group(r, tp, t, co0, 8, nb, m, n, dM);
        if (full < r->Cd) dy_tile_group(r, tp, t, full, (int)(r->Cd - full), nb, m, n, dM);
    }
}

static void transform_dy(const wino_run *r, const tile_pos *tp, int64_t nb, float *dM) {
    if (r->m->n == 8) dy_tiles(r, tp, nb, r->m, 8, dM);
    else if (r->m->n == 6) dy_tiles(r, tp, nb, r->m, 6, dM);
    else dy_tiles(r, tp, nb, r->m, r->m->n, dM);
}

static void dw_chunks(const void *vctx, int64_t c0, int64_t c1) {
    const wino_run *r = vctx;
    const int n = r->m->n;
    const int64_t tb = r->tb, plane = r->Cd * r->Cs;
    int tid = cpu_worker_id();
    float *V = r->work + r->work_per * (size_t)tid, *dM = V + r->v_floats, *E = dM + r->m_floats;
    tile_pos *tp = (tile_pos *)(E + r->edge_floats);
    float *scratch = r->gemm_scratch + r->gemm_per * (size_t)tid;
    for (int64_t ch = c0; ch < c1; ch++) {
        float *part = r->parts + ch * n * plane;
        int64_t blk1 = (ch + 1) * r->chunk_blocks < r->nblocks ? (ch + 1) * r->chunk_blocks : r->nblocks;
        for (int64_t blk = ch * r->chunk_blocks; blk < blk1; blk++) {
            int64_t g0 = blk * tb, nb = r->T - g0 < tb ? r->T - g0 : tb;
            tile_positions(r, g0, nb, r->Cs, r->Ws, r->Cd, r->Wd, tp);
            transform_in(r, tp, nb, V, E, 1);
            transform_dy(r, tp, nb, dM);
            int first = blk == ch * r->chunk_blocks;
            for (int xi = 0; xi < n; xi++)
                cpu_sgemm_atb_rows(r->Cd, r->Cs, nb, dM + xi * tb * r->ldm, r->ldm, V + xi * tb * r->ldv, r->ldv,
                                   part + xi * plane, r->Cs, !first, scratch);
        }
    }
}

/* U[xi][d][s] = sum_k G[xi][k] w_k for rows d of [d0, d1), w_k the tap k of (d, s): forward
 * w[d][s][k], dx w[s][d][r-1-k] */
static void weights_rows(const void *vctx, int64_t d0, int64_t d1) {
    const wino_run *r = vctx;
    const wino_mats *m = r->m;
    const int rk = m->r;
    float *U = r->U;
    for (int64_t d = d0; d < d1; d++) {
        int64_t si = 0;
        for (; si + 8 <= r->Cs; si += 8) { /* 8 source channels a vector: whole-vector stores into U */
            v8 tap[WR_MAX];
            for (int l = 0; l < 8; l++) {
                const float *wk = r->gx ? r->w + ((si + l) * r->C + d) * rk : r->w + (d * r->C + si + l) * rk;
                for (int k = 0; k < rk; k++) tap[k][l] = wk[r->gx ? rk - 1 - k : k];
            }
            for (int xi = 0; xi < m->n; xi++) {
                v8 acc = m->G[xi][0] * tap[0]; /* the scalar loop's 0 + G t, the same rounding */
                for (int k = 1; k < rk; k++) acc += m->G[xi][k] * tap[k];
                *(v8u *)(U + (xi * r->Cd + d) * r->Cs + si) = acc;
            }
        }
        for (; si < r->Cs; si++) {
            const float *wk = r->gx ? r->w + (si * r->C + d) * rk : r->w + (d * r->C + si) * rk;
            float tap[WR_MAX];
            for (int k = 0; k < rk; k++) tap[k] = wk[r->gx ? rk - 1 - k : k];
            for (int xi = 0; xi < m->n; xi++) {
                float acc = 0.0f;
                for (int k = 0; k < rk; k++) acc += m->G[xi][k] * tap[k];
                U[(xi * r->Cd + d) * r->Cs + si] = acc;
            }
        }
    }
}

/* dU elements [k0, k1): the chunks' partials summed in chunk order into chunk 0's */
static void dw_sum_chunks(const void *vctx, int64_t k0, int64_t k1) {
    const wino_run *r = vctx;
    const int64_t all = r->m->n * r->Cd * r->Cs;
    float *dU = r->parts;
    for (int64_t ch = 1; ch < r->nchunks; ch++) {
        const float *p = r->parts + ch * all;
#pragma omp simd
        for (int64_t k = k0; k < k1; k++) dU[k] += p[k];
    }
}

/* dw for (co, ci) pairs [q0, q1): G^T dU */
static void dw_finish(const void *vctx, int64_t q0, int64_t q1) {
    const wino_run *r = vctx;
    const wino_mats *m = r->m;
    const int n = m->n, rk = m->r;
    const int64_t plane = r->Cd * r->Cs;
    for (int64_t q = q0; q < q1; q++)
        for (int k = 0; k < rk; k++) {
            float acc = 0.0f;
            for (int xi = 0; xi < n; xi++) acc += m->G[xi][k] * r->parts[xi * plane + q];
            r->dw_out[q * rk + k] = acc;
        }
}

/* Tiles a block: its transforms and products (n (Cs + Cd) floats a tile) within `floats`, a
 * multiple of 32 (whole B strips of the kernel, 16-float aligned rows) from 32 to 1024. */
static int64_t block_tiles(int n, int64_t Cs, int64_t Cd, int64_t floats) {
    int64_t tb = floats / (n * (Cs + Cd)) / 32 * 32;
    return tb < 32 ? 32 : tb > 1024 ? 1024 : tb;
}

brisk_status cpu_conv_winograd(cpu_backend *cb, brisk_op op, const conv_geom *c, const float *x, const float *w,
                               const float *dy, float *out, const cpu_conv_epi *epi, brisk_error *err) {
    pthread_once(&g_mats_once, build_mats);
    const int r_ = c->w.kw;
    const wino_mats *m = &g_mats[r_];
    const int n = m->n;
    wino_run run = {.m = m, .N = c->N, .H = c->H};
    if (epi && op == BRISK_OP_CONV2D) {
        run.bias = epi->bias, run.act_out = epi->act_out, run.relu = epi->relu;
        if (epi->act_out) run.act = epi->act;
    }
    int dw = op == BRISK_OP_CONV2D_GRAD_W;
    if (op == BRISK_OP_CONV2D) {
        run.src = x, run.dst = out, run.Cs = c->C, run.Ws = c->W, run.Cd = c->Co, run.Wd = c->Wo, run.pad = c->w.pw;
    } else if (op == BRISK_OP_CONV2D_GRAD_X) {
        run.src = dy, run.dst = out, run.Cs = c->Co, run.Ws = c->Wo, run.Cd = c->C, run.Wd = c->W;
        run.pad = r_ - 1 - c->w.pw;
    } else {
        run.src = x, run.dy = dy, run.Cs = c->C, run.Ws = c->W, run.Cd = c->Co, run.Wd = c->Wo, run.pad = c->w.pw;
    }
    run.nt = (run.Wd + WM - 1) / WM; /* tiles cover the rows of outputs: y, dx, or dy for dw */
    run.T = c->N * c->H * run.nt;
    /* dw's tile-major rows: whole register strips of channels (the widest NR is 32) */
    run.ldv = dw ? (run.Cs + 31) / 32 * 32 : run.Cs, run.ldm = dw ? (run.Cd + 7) / 8 * 8 : run.Cd;
    run.tb = block_tiles(n, run.ldv, run.ldm, BLOCK_FLOATS);
    run.v_floats = n * run.ldv * run.tb, run.m_floats = n * run.ldm * run.tb;
    run.nblocks = (run.T + run.tb - 1) / run.tb;
    int64_t plane = run.Cd * run.Cs;
    if (dw) {
        /* partial sums of at most DW_PART_FLOATS in all (wide layers: fewer chunks) */
        int64_t fit = DW_PART_FLOATS / (n * plane), most = fit < 1 ? 1 : fit < DW_CHUNKS ? fit : DW_CHUNKS;
        int64_t want = run.nblocks < most ? run.nblocks : most;
        run.chunk_blocks = (run.nblocks + want - 1) / want;
        run.nchunks = (run.nblocks + run.chunk_blocks - 1) / run.chunk_blocks;
    }
    /* per thread: V, M (or dM), the gathered edges, the tile positions; each 64-byte aligned */
    size_t tp_floats = (size_t)((run.tb * (int64_t)sizeof(tile_pos) + sizeof(float) - 1) / sizeof(float));
    run.edge_floats = edge_floats(&run);
    run.work_per = (size_t)(run.v_floats + run.m_floats + run.edge_floats) + tp_floats;
    run.work_per = (run.work_per + 15) / 16 * 16;
    size_t u_floats = dw ? 0 : (size_t)(n * plane + 15) / 16 * 16, parts_floats = (size_t)(run.nchunks * n * plane + 15) / 16 * 16;
    float *s = cpu_conv_scratch(cb, u_floats + parts_floats + run.work_per * (size_t)cb->threads, err);
    if (!s) return BRISK_ERR_NOMEM;
    float *U = s;
    run.parts = s + u_floats;
    run.work = run.parts + parts_floats;
    run.U = U;
    run.gemm_scratch = cb->gemm_scratch;
    run.gemm_per = cpu_sgemm_scratch_floats();
    if (!dw) {
        run.w = w, run.C = c->C, run.gx = op == BRISK_OP_CONV2D_GRAD_X;
        cpu_parallel(cb, run.Cd, CPU_PAR_MIN / (n * run.Cs * r_) + 1, weights_rows, &run);
        cpu_parallel_dynamic(cb, run.nblocks, 1, apply_blocks, &run);
        return BRISK_OK;
    }
    cpu_parallel_dynamic(cb, run.nchunks, 1, dw_chunks, &run);
    /* dU = the chunks' sum in chunk order, then dw = G^T dU: each element by one thread, the
     * same additions in the same order whatever the threads */
    run.dw_out = out;
    if (run.nchunks > 1) cpu_parallel(cb, n * plane, CPU_PAR_MIN / run.nchunks + 1, dw_sum_chunks, &run);
    cpu_parallel(cb, plane, CPU_PAR_MIN / (n * r_) + 1, dw_finish, &run);
    return BRISK_OK;
}
