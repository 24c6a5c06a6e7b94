/* One GRU layer over a whole sequence, batch-first, f32 (graph.h, BRISK_OP_GRU), as
 * torch.nn.GRU computes it:
 *   GRU         (xp [B, T, 3H], w_hh [3H, H], b_ih [3H], b_hh [3H]) -> h [B, T, H] + workspace
 *   GRU_GRAD    (dh [B, T, H], gru, w_hh) -> d xp [B, T, 3H] + workspace d hh_n [B, T, H]
 *   GRU_GRAD_W  (dxp, gru) -> d w_hh [3H, H]; (dxp, gru, d b_ih) -> d b_hh [3H]
 * The GRU node's buffer holds four planes, each row-major over (b, t):
 *   h [B, T, H] | gates [B, T, 3H] (r, z, n after their nonlinearities) |
 *   hh_n [B, T, H] (w_hn h_prev + b_hn, which r multiplies) | h_prev [B, T, H]
 * attr.kind = 1 runs the recurrence from t = T-1 down to 0; "previous" below means
 * previous in that order.
 *
 * Forward, per step: hh = h_prev w_hh^T (a GEMM straight into the gate plane), then one
 * pass per row: r = sigmoid(xp_r + hh_r + b_ir + b_hr), z likewise, hh_n += b_hn,
 * n = tanh(xp_n + b_in + r hh_n), h = n + z (h_prev - n) (PyTorch's form of
 * (1 - z) n + z h_prev).
 * Backward, per step in reverse, with dh_t = dh[t] + dh_rec from the later step:
 *   dn = dh_t (1 - z) (1 - n^2);  dz = dh_t (h_prev - n) z (1 - z);
 *   dr = dn hh_n r (1 - r);  d xp = [dr, dz, dn];  d hh = [dr, dz, dn r]
 *   dh_rec = dh_t z + d hh w_hh (a GEMM from a per-thread block of d hh rows)
 * d hh_n goes to GRU_GRAD's workspace, so GRU_GRAD_W's d w_hh = d hh^T h_prev is two GEMMs
 * over all steps at once, and d b_hh = the row sums of d hh is d b_ih's r and z parts (the
 * same sums) and the sums of d hh_n.
 *
 * Threads: as lstm.c, each thread takes chunks of batch rows and runs them through every
 * step alone; the results do not depend on the thread count. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <stdlib.h>
#include <string.h>

typedef struct gru_ctx {
    int64_t B, T, H;
    int reverse;
    const float *xp, *b_rz, *b_in, *b_hn, *w_packed, *zeros;
    float *h, *gates, *hhn, *hprev; /* the planes of the GRU node's buffer */
    const float *dh;                /* backward */
    float *dxp, *dhn, *rec, *dhh;   /* backward: outputs, per-row dh_rec [B, H], d hh blocks */
    float *gemm_scratch;
    size_t gemm_per;
} gru_ctx;

#define ROW_BLOCK CPU_RNN_ROW_BLOCK

static void planes(gru_ctx *c, float *base) {
    int64_t n = c->B * c->T * c->H;
    c->h = base;
    c->gates = base + n;
    c->hhn = c->gates + 3 * n;
    c->hprev = c->hhn + n;
}

static cpu_rnn_walk walk_of(const gru_ctx *c) {
    cpu_rnn_walk w = {.T = c->T, .H = c->H, .G = 3 * c->H, .row_block = ROW_BLOCK, .reverse = c->reverse,
                      .packed = c->w_packed, .scratch = c->gemm_scratch + c->gemm_per * (size_t)cpu_worker_id(),
                      .h = c->h, .gates = c->gates, .rec = c->rec, .accumulate = 1};
    return w;
}

static void forward_cell(const void *vctx, const cpu_rnn_block *k) {
    const gru_ctx *c = vctx;
    const int64_t T = c->T, H = c->H, G = 3 * H, s = k->s, t = k->t, tp = k->tp;
    for (int64_t b = k->r0; b < k->r1; b++) {
        int64_t row = b * T + t;
        float *restrict gr = c->gates + row * G;
        const float *restrict x = c->xp + row * G, *restrict brz = c->b_rz, *restrict bin = c->b_in,
                              *restrict bhn = c->b_hn;
        const float *restrict hp = s > 0 ? c->h + (b * T + tp) * H : c->zeros;
        float *restrict hr = c->h + row * H, *restrict hn = c->hhn + row * H, *restrict hpr = c->hprev + row * H;
        if (s == 0) memset(gr, 0, (size_t)G * sizeof(float)); /* no recurrent term yet */
#pragma omp simd
        for (int64_t j = 0; j < H; j++) {
            float rg = cpu_sigmoidf(gr[j] + x[j] + brz[j]);
            float zg = cpu_sigmoidf(gr[H + j] + x[H + j] + brz[H + j]);
            float hv = gr[2 * H + j] + bhn[j];
            float ng = cpu_tanhf(x[2 * H + j] + bin[j] + rg * hv);
            gr[j] = rg;
            gr[H + j] = zg;
            gr[2 * H + j] = ng;
            hn[j] = hv;
            hpr[j] = hp[j];
            hr[j] = ng + zg * (hp[j] - ng);
        }
        if (k->tn >= 0) { /* the next step's rows of this sequence: read xp, the GEMM writes the gates */
            int64_t nx = b * T + k->tn;
            cpu_prefetch_read(c->xp + nx * G, G);
            cpu_prefetch_write(c->gates + nx * G, G);
            cpu_prefetch_write(c->h + nx * H, H);
            cpu_prefetch_write(c->hhn + nx * H, H);
            cpu_prefetch_write(c->hprev + nx * H, H);
        }
    }
}

static void forward_band(const void *vctx, int64_t b0, int64_t b1) {
    cpu_rnn_walk w = walk_of(vctx);
    cpu_rnn_walk_rows(&w, b0, b1, forward_cell, vctx);
}

/* This thread's block of d hh rows [ROW_BLOCK, 3H]: the recurrent GEMM's A. */
static float *dhh_block(const gru_ctx *c) { return c->dhh + (size_t)cpu_worker_id() * ROW_BLOCK * (size_t)(3 * c->H); }

static void backward_cell(const void *vctx, const cpu_rnn_block *k) {
    const gru_ctx *c = vctx;
    const int64_t T = c->T, H = c->H, G = 3 * H, t = k->t;
    float *dhh = dhh_block(c);
    for (int64_t b = k->r0; b < k->r1; b++) {
        int64_t row = b * T + t;
        const float *restrict gr = c->gates + row * G, *restrict dh = c->dh + row * H;
        const float *restrict hn = c->hhn + row * H, *restrict hp = c->hprev + row * H;
        float *restrict rr = c->rec + b * H, *restrict d = c->dxp + row * G, *restrict dn_ws = c->dhn + row * H;
        float *restrict q = dhh + (b - k->r0) * G;
#pragma omp simd
        for (int64_t j = 0; j < H; j++) {
            float rg = gr[j], zg = gr[H + j], ng = gr[2 * H + j];
            float dht = dh[j] + rr[j];
            float dn = dht * (1.0f - zg) * (1.0f - ng * ng);
            float dz = dht * (hp[j] - ng) * zg * (1.0f - zg);
            float dr = dn * hn[j] * rg * (1.0f - rg);
            float dhn = dn * rg;
            d[j] = dr;
            d[H + j] = dz;
            d[2 * H + j] = dn;
            dn_ws[j] = dhn;
            q[j] = dr;
            q[H + j] = dz;
            q[2 * H + j] = dhn;
            rr[j] = dht * zg; /* the direct path to h_prev; the GEMM adds d hh w_hh */
        }
        if (k->tn >= 0) {
            int64_t nx = b * T + k->tn;
            cpu_prefetch_read(c->gates + nx * G, G);
            cpu_prefetch_read(c->dh + nx * H, H);
            cpu_prefetch_read(c->hhn + nx * H, H);
            cpu_prefetch_read(c->hprev + nx * H, H);
            cpu_prefetch_write(c->dxp + nx * G, G);
            cpu_prefetch_write(c->dhn + nx * H, H);
        }
    }
}

static const float *backward_dhh(const void *vctx, const cpu_rnn_block *k, int64_t *lda) {
    (void)k;
    const gru_ctx *c = vctx;
    *lda = 3 * c->H;
    return dhh_block(c);
}

static void backward_band(const void *vctx, int64_t b0, int64_t b1) {
    const gru_ctx *c = vctx;
    memset(c->rec + b0 * c->H, 0, (size_t)((b1 - b0) * c->H) * sizeof(float)); /* rows b0 .. b1: this band's */
    cpu_rnn_walk w = walk_of(c);
    w.dhh = backward_dhh;
    cpu_rnn_walk_rows(&w, b0, b1, backward_cell, c);
}

/* A GRU_GRAD node (or GRU_GRAD_W's input) is d xp [B, T, 3H] and d hh_n after it. */
static int grad_is(const brisk_node *n, int64_t B, int64_t T, int64_t H) {
    return cpu_shape_is(n, 3, B, T, 3 * H) && n->bytes >= (size_t)(4 * B * T * H) * sizeof(float);
}

/* GRU_GRAD_W: d w_hh = d hh^T h_prev, or d b_hh = the row sums of d hh: d b_ih's r and z
 * parts, then the sums of d hh_n. */
static void grad_w(cpu_backend *cb, const gru_ctx *c, const float *dxp, const float *gru_buf, const float *dbi,
                   float *out) {
    const int64_t BT = c->B * c->T, H = c->H;
    const float *dhn = dxp + BT * 3 * H;
    if (dbi) {
        brisk_shape s1 = brisk_shape2(BT, H);
        memcpy(out, dbi, (size_t)(2 * H) * sizeof(float));
        cpu_reduce_sum(cb, dhn, &s1, 1u, 1.0f, out + 2 * H);
        return;
    }
    const float *hprev = gru_buf + BT * 5 * H;
    cpu_gemm(cb, 1, 0, 2 * H, H, BT, dxp, 3 * H, hprev, H, out, H);
    cpu_gemm(cb, 1, 0, H, H, BT, dhn, H, hprev, H, out + 2 * H * H, H);
}

brisk_status cpu_gru_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                        brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    gru_ctx c;
    memset(&c, 0, sizeof c);
    cpu_rnn_dims d;
    brisk_status st = cpu_rnn_node(g, n->op == BRISK_OP_GRU ? id : n->n_in > 1 ? n->in[1] : -1, BRISK_OP_GRU, 6, &d, err);
    if (st) return st;
    const int64_t B = d.B, T = d.T, H = d.H, G = 3 * H;
    c.B = B, c.T = T, c.H = H, c.reverse = d.reverse;
    int ok;
    if (n->op == BRISK_OP_GRU)
        ok = n->n_in == 4 && cpu_shape_is(IN_NODE(g, id, 0), 3, B, T, G) &&
             cpu_shape_is(IN_NODE(g, id, 1), 2, G, H, 0) && cpu_shape_is(IN_NODE(g, id, 2), 1, G, 0, 0) &&
             cpu_shape_is(IN_NODE(g, id, 3), 1, G, 0, 0);
    else if (n->op == BRISK_OP_GRU_GRAD)
        ok = n->n_in == 3 && cpu_shape_is(IN_NODE(g, id, 0), 3, B, T, H) &&
             cpu_shape_is(IN_NODE(g, id, 2), 2, G, H, 0) && grad_is(n, B, T, H);
    else /* d w_hh from (dxp, gru); d b_hh from (dxp, gru, d b_ih) */
        ok = grad_is(IN_NODE(g, id, 0), B, T, H) &&
             ((n->n_in == 2 && cpu_shape_is(n, 2, G, H, 0)) ||
              (n->n_in == 3 && cpu_shape_is(n, 1, G, 0, 0) && cpu_shape_is(IN_NODE(g, id, 2), 1, G, 0, 0)));
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): shapes do not fit a GRU of B %lld, T %lld, H %lld",
                            brisk_op_name(n->op), id, (long long)B, (long long)T, (long long)H);
    if (n->op == BRISK_OP_GRU_GRAD_W) {
        if (B * T == 0) memset(out, 0, (size_t)cpu_numel(&n->shape) * sizeof(float));
        else if (H > 0) grad_w(cb, &c, in[0], in[1], n->n_in == 3 ? in[2] : NULL, out);
        return BRISK_OK;
    }
    if (B * T * H == 0) return BRISK_OK;
    int fwd = n->op == BRISK_OP_GRU;
    /* forward multiplies by w_hh^T ([H, 3H]), backward by w_hh ([3H, H]) */
    float *packed = cpu_rnn_pack(in[fwd ? 1 : 2], G, H, fwd);
    /* forward: zeros [H] and the summed r, z biases [2H]; backward: dh_rec [B, H] and each
     * thread's block of d hh rows */
    size_t tmp_floats = fwd ? (size_t)(3 * H) : (size_t)(B * H) + (size_t)cb->threads * ROW_BLOCK * (size_t)G;
    float *tmp = calloc(tmp_floats, sizeof(float));
    if (!packed || !tmp) {
        free(packed);
        free(tmp);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s (node %d): out of memory", brisk_op_name(n->op), id);
    }
    c.w_packed = packed;
    c.gemm_scratch = cb->gemm_scratch;
    c.gemm_per = cpu_sgemm_scratch_floats();
    int64_t chunk = cpu_rnn_chunk(cb, B, ROW_BLOCK);
    if (fwd) {
        const float *b_ih = in[2], *b_hh = in[3];
        float *b_rz = tmp + H;
        for (int64_t j = 0; j < 2 * H; j++) b_rz[j] = b_ih[j] + b_hh[j];
        c.zeros = tmp;
        c.b_rz = b_rz;
        c.b_in = b_ih + 2 * H;
        c.b_hn = b_hh + 2 * H;
        c.xp = in[0];
        planes(&c, out);
        cpu_parallel_dynamic(cb, B, chunk, forward_band, &c);
    } else {
        c.dh = in[0];
        planes(&c, (float *)in[1]);
        c.dxp = out;
        c.dhn = (float *)out + B * T * G;
        c.rec = tmp;
        c.dhh = tmp + B * H;
        cpu_parallel_dynamic(cb, B, chunk, backward_band, &c);
    }
    free(packed);
    free(tmp);
    return BRISK_OK;
}
