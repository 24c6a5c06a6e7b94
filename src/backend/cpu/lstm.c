/* One LSTM layer over a whole sequence, batch-first, f32 (graph.h, BRISK_OP_LSTM):
 *   LSTM        (xp [B, T, 4H], w_hh [4H, H], bias [4H]) -> h [B, T, H] + workspace
 *   LSTM_GRAD   (dh [B, T, H], lstm, w_hh) -> d pre-activation gates [B, T, 4H]
 *   LSTM_GRAD_W (dgates, lstm) -> d w_hh [4H, H]
 * The output buffer holds four planes, each row-major over (b, t):
 *   h [B, T, H] | gates [B, T, 4H] (i, f, g, o after their nonlinearities) | c [B, T, H] |
 *   h_prev [B, T, H] (the h each step started from: zeros at the first step)
 * attr.kind = 1 runs the recurrence from t = T-1 down to 0 (the reverse half of a
 * bidirectional layer); "previous" below means previous in that order.
 *
 * Forward, per step: pre = h_prev w_hh^T (a GEMM straight into the gate plane), then
 * one pass per row adds xp and the bias, applies the nonlinearities, updates c and h.
 * Backward, per step in reverse: with dh_t = dh[t] + dh_rec and dc carried from the
 * later step,
 *   do = dh_t tanh(c);  dc += dh_t o (1 - tanh^2 c);  di = dc g;  dg = dc i;
 *   df = dc c_prev;  dc_prev = dc f;  pre-activation: di i(1-i), df f(1-f),
 *   dg (1-g^2), do o(1-o);  dh_rec = dgates_t w_hh (a GEMM)
 * and d w_hh = dgates^T h_prev over all steps at once (LSTM_GRAD_W).
 *
 * Threads: sequences are independent, so each thread takes chunks of batch rows and
 * runs each through every step alone: no synchronisation per step, and w_hh is packed
 * for the GEMM once per call and shared. Every element is computed by the same
 * operations whatever the chunk, so results do not depend on the thread count. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

#include <stdlib.h>
#include <string.h>

typedef struct lstm_ctx {
    int64_t B, T, H;
    int reverse;
    const float *xp, *bias, *w_packed, *zeros;
    float *h, *gates, *c, *hprev;   /* the planes of the LSTM node's buffer */
    const float *dh;                /* backward */
    float *dg, *rec, *dc;           /* backward: output, per-row dh_rec and dc [B, H] */
    float *gemm_scratch;
    size_t gemm_per;
} lstm_ctx;

static void planes(lstm_ctx *c, float *base) {
    int64_t n = c->B * c->T * c->H;
    c->h = base;
    c->gates = base + n;
    c->c = c->gates + 4 * n;
    c->hprev = c->c + n;
}

/* Each step's GEMM then cell pass over a block of rows, whose pre-activations (ROW_BLOCK x
 * 4H) are still in L1/L2 when the cell pass reads them back (recurrent.c's walk). */
#define ROW_BLOCK CPU_RNN_ROW_BLOCK

static cpu_rnn_walk walk_of(const lstm_ctx *c) {
    cpu_rnn_walk w = {.T = c->T, .H = c->H, .G = 4 * c->H, .row_block = ROW_BLOCK, .reverse = c->reverse,
                      .packed = c->w_packed, .scratch = c->gemm_scratch + c->gemm_per * (size_t)cpu_worker_id(),
                      .h = c->h, .gates = c->gates, .rec = c->rec};
    return w;
}

static void forward_cell(const void *vctx, const cpu_rnn_block *k) {
    const lstm_ctx *c = vctx;
    const int64_t T = c->T, H = c->H, G = 4 * H, s = k->s, t = k->t, tp = k->tp;
    for (int64_t b = k->r0; b < k->r1; b++) {
        int64_t row = b * T + t;
        float *restrict gr = c->gates + row * G;
        const float *restrict x = c->xp + row * G, *restrict bi = c->bias;
        const float *restrict cp = s > 0 ? c->c + (b * T + tp) * H : c->zeros;
        const float *restrict hp = s > 0 ? c->h + (b * T + tp) * H : c->zeros;
        float *restrict cr = c->c + row * H, *restrict hr = c->h + row * H, *restrict hpr = c->hprev + row * H;
        if (s == 0) memset(gr, 0, (size_t)G * sizeof(float)); /* no recurrent term yet */
#pragma omp simd
        for (int64_t j = 0; j < H; j++) {
            float ig = cpu_sigmoidf(gr[j] + x[j] + bi[j]);
            float fg = cpu_sigmoidf(gr[H + j] + x[H + j] + bi[H + j]);
            float gg = cpu_tanhf(gr[2 * H + j] + x[2 * H + j] + bi[2 * H + j]);
            float og = cpu_sigmoidf(gr[3 * H + j] + x[3 * H + j] + bi[3 * H + j]);
            float cv = fg * cp[j] + ig * gg;
            gr[j] = ig;
            gr[H + j] = fg;
            gr[2 * H + j] = gg;
            gr[3 * H + j] = og;
            cr[j] = cv;
            hpr[j] = hp[j];
            hr[j] = og * cpu_tanhf(cv);
        }
    }
}

static void forward_band(const void *vctx, int64_t b0, int64_t b1) {
    cpu_rnn_walk w = walk_of(vctx);
    cpu_rnn_walk_rows(&w, b0, b1, forward_cell, vctx);
}

static void backward_cell(const void *vctx, const cpu_rnn_block *k) {
    const lstm_ctx *c = vctx;
    const int64_t T = c->T, H = c->H, G = 4 * H, t = k->t, tp = k->tp;
    int has_prev = k->s < T - 1;
    for (int64_t b = k->r0; b < k->r1; b++) {
        int64_t row = b * T + t;
        const float *restrict gr = c->gates + row * G, *restrict dh = c->dh + row * H;
        const float *restrict cr = c->c + row * H;
        const float *restrict cp = has_prev ? c->c + (b * T + tp) * H : c->zeros;
        float *restrict rr = c->rec + b * H, *restrict dc = c->dc + b * H;
        float *restrict d = c->dg + row * G;
#pragma omp simd
        for (int64_t j = 0; j < H; j++) {
            float ig = gr[j], fg = gr[H + j], gg = gr[2 * H + j], og = gr[3 * H + j];
            float tc = cpu_tanhf(cr[j]), dht = dh[j] + rr[j];
            float dcv = dc[j] + dht * og * (1.0f - tc * tc);
            d[j] = dcv * gg * ig * (1.0f - ig);
            d[H + j] = dcv * cp[j] * fg * (1.0f - fg);
            d[2 * H + j] = dcv * ig * (1.0f - gg * gg);
            d[3 * H + j] = dht * tc * og * (1.0f - og);
            dc[j] = dcv * fg;
        }
    }
}

/* dh_rec for the step before: the block's gate gradients (d xp's rows) times w_hh */
static const float *backward_dhh(const void *vctx, const cpu_rnn_block *k, int64_t *lda) {
    const lstm_ctx *c = vctx;
    *lda = c->T * 4 * c->H;
    return c->dg + (k->r0 * c->T + k->t) * 4 * c->H;
}

static void backward_band(const void *vctx, int64_t b0, int64_t b1) {
    const lstm_ctx *c = vctx;
    const int64_t H = c->H; /* rec and dc [B, H]: rows b0 .. b1 are this band's */
    memset(c->rec + b0 * H, 0, (size_t)((b1 - b0) * H) * sizeof(float));
    memset(c->dc + b0 * H, 0, (size_t)((b1 - b0) * H) * sizeof(float));
    cpu_rnn_walk w = walk_of(c);
    w.dhh = backward_dhh;
    cpu_rnn_walk_rows(&w, b0, b1, backward_cell, c);
}

brisk_status cpu_lstm_op(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                         brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    lstm_ctx c;
    memset(&c, 0, sizeof c);
    cpu_rnn_dims d;
    brisk_status st = cpu_rnn_node(g, n->op == BRISK_OP_LSTM ? id : n->in[1], BRISK_OP_LSTM, 7, &d, err);
    if (st) return st;
    const int64_t B = d.B, T = d.T, H = d.H, G = 4 * H;
    c.B = B, c.T = T, c.H = H, c.reverse = d.reverse;
    int ok;
    if (n->op == BRISK_OP_LSTM)
        ok = n->n_in == 3 && cpu_shape_is(IN_NODE(g, id, 0), 3, B, T, G) &&
             cpu_shape_is(IN_NODE(g, id, 1), 2, G, H, 0) && cpu_shape_is(IN_NODE(g, id, 2), 1, G, 0, 0);
    else if (n->op == BRISK_OP_LSTM_GRAD)
        ok = n->n_in == 3 && cpu_shape_is(IN_NODE(g, id, 0), 3, B, T, H) &&
             cpu_shape_is(IN_NODE(g, id, 2), 2, G, H, 0) && cpu_shape_is(n, 3, B, T, G);
    else
        ok = n->n_in == 2 && cpu_shape_is(IN_NODE(g, id, 0), 3, B, T, G) && cpu_shape_is(n, 2, G, H, 0);
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): shapes do not fit an LSTM of B %lld, T %lld, H %lld",
                            brisk_op_name(n->op), id, (long long)B, (long long)T, (long long)H);
    if (B * T * H == 0) return BRISK_OK;
    if (n->op == BRISK_OP_LSTM_GRAD_W) { /* d w_hh = dgates^T h_prev: one GEMM over every (b, t) */
        lstm_ctx w = c;
        planes(&w, (float *)in[1]);
        cpu_gemm(cb, 1, 0, G, H, B * T, in[0], G, w.hprev, H, out, H);
        return BRISK_OK;
    }
    int fwd = n->op == BRISK_OP_LSTM;
    /* forward multiplies by w_hh^T ([H, 4H]), backward by w_hh ([4H, H]) */
    float *packed = cpu_rnn_pack(in[fwd ? 1 : 2], G, H, fwd);
    float *zeros = calloc((size_t)H, sizeof(float));
    float *tmp = fwd ? NULL : malloc((size_t)(2 * B * H) * sizeof(float));
    if (!packed || !zeros || (!fwd && !tmp)) {
        free(packed); free(zeros); free(tmp);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s (node %d): out of memory", brisk_op_name(n->op), id);
    }
    c.w_packed = packed;
    c.zeros = zeros;
    c.gemm_scratch = cb->gemm_scratch;
    c.gemm_per = cpu_sgemm_scratch_floats();
    int64_t chunk = cpu_rnn_chunk(cb, B, ROW_BLOCK);
    if (fwd) {
        c.xp = in[0];
        c.bias = in[2];
        planes(&c, out);
        cpu_parallel_dynamic(cb, B, chunk, forward_band, &c);
    } else {
        c.dh = in[0];
        planes(&c, (float *)in[1]);
        c.dg = out;
        c.rec = tmp;
        c.dc = tmp + B * H;
        cpu_parallel_dynamic(cb, B, chunk, backward_band, &c);
    }
    free(packed);
    free(zeros);
    free(tmp);
    return BRISK_OK;
}
