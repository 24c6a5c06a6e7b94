/* Fused sequence ops: LSTM and GRU (one layer over the whole sequence) and multi-head
 * self-attention, with their backward rules.
 *
 * Each keeps what its backward needs in a workspace placed after the output in the
 * same buffer (the node's bytes include it), so a node still has one output and the
 * gradient ops simply take the forward node as an input:
 *   LSTM       h [B, T, H], then gates [B, T, 4H] (activated), c [B, T, H], h_prev [B, T, H]
 *   GRU        h [B, T, H], then gates [B, T, 3H] (activated), hh_n [B, T, H], h_prev [B, T, H]
 *   ATTENTION  out [B, T, D], then the log-sum-exp of each query's scores [B, heads, T],
 *              then with dropout the kept weights, brisk_attention_keep_words(T) per head
 * That is the CPU backend's layout; a backend may keep its own in the same bytes (the CUDA
 * backend's LSTM and GRU: cuDNN's reserve space and h_prev, src/backend/cuda/rnn_layout.h),
 * since only its own gradient kernels read the workspace.
 *
 * LSTM: xp = x w_ih^T is one matmul over every step outside the op (its gradients are
 * matmuls again); the op runs the recurrence. Its backward is LSTM_GRAD (the
 * pre-activation gate gradients, which are d xp), then d w_hh = LSTM_GRAD_W (one GEMM
 * over all steps) and d bias = the row sum of the gate gradients. Autodiff asks for
 * each input's gradient in turn, so the rules for w_hh and bias find the LSTM_GRAD
 * node the rule for xp appended rather than appending a second.
 *
 * GRU: the same split, with one difference: b_hh's n part is inside the reset gate's
 * product, r (w_hn h_prev + b_hn), so the recurrent side's gradient differs from d xp in
 * its n part, d hh_n = d xp_n r. GRU_GRAD hands back d xp and keeps d hh_n in a workspace
 * after it (GRU_GRAD's node is [B, T, 3H] plus [B, T, H]); GRU_GRAD_W reads both for
 * d w_hh, and for d b_hh takes d b_ih (the row sum of d xp) for the r and z parts.
 *
 * ATTENTION reads q, k and v from one packed [B, T, 3D] tensor (the in-projection's
 * output, as torch.nn.MultiheadAttention's in_proj_weight produces it), so its one
 * differentiable input gets one fused gradient op, ATTENTION_GRAD. */
#include "ops/ops_internal.h"


/* Appends op with `ws_bytes` of workspace after its output. */
static int append_ws(brisk_graph *g, brisk_op op, const int *in, int n_in, brisk_shape s, const brisk_attr *at,
                     size_t ws_bytes) {
    int id = brisk_graph_append(g, op, in, n_in, BRISK_F32, s, at);
    if (id >= 0) g->nodes[id].bytes += ws_bytes;
    return id;
}

/* ---------------------------------------------------------------- LSTM */

int brisk_lstm(brisk_graph *g, int xp, int w_hh, int bias, int reverse) {
    int ids[3] = {xp, w_hh, bias};
    if (brisk_ops_check_dtype(g, "lstm", ids, 3, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[xp].shape, sw = g->nodes[w_hh].shape, sb = g->nodes[bias].shape;
    int64_t H = sw.ndim == 2 ? sw.d[1] : 0;
    if (sx.ndim != 3 || sw.ndim != 2 || sw.d[0] != 4 * H || sx.d[2] != 4 * H || sb.ndim != 1 || sb.d[0] != 4 * H) {
        char bx[BRISK_SHAPE_STR], bw[BRISK_SHAPE_STR], bb[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "lstm: xp %s, w_hh %s, bias %s (expected xp [B, T, 4H], w_hh [4H, H], bias [4H])",
                                brisk_shape_str(&sx, bx, sizeof bx), brisk_shape_str(&sw, bw, sizeof bw),
                                brisk_shape_str(&sb, bb, sizeof bb));
    }
    brisk_attr at = brisk_attr_none();
    at.kind = !!reverse;
    brisk_shape out = brisk_shape3(sx.d[0], sx.d[1], H);
    size_t ws = (size_t)(sx.d[0] * sx.d[1] * 6 * H) * sizeof(float);
    return append_ws(g, BRISK_OP_LSTM, ids, 3, out, &at, ws);
}

int brisk_bw_lstm(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    int gin[3] = {dy, node, n.in[1]};
    /* the gate gradients, shared by all three inputs' rules */
    int dg = brisk_ops_find_recent(g, g->n_forward, BRISK_OP_LSTM_GRAD, gin, 3);
    if (dg < 0) dg = brisk_graph_append(g, BRISK_OP_LSTM_GRAD, gin, 3, BRISK_F32, g->nodes[n.in[0]].shape, &n.attr);
    if (dg < 0 || which == 0) return dg;
    if (which == 2) return brisk_ops_sum_rows(g, dg);
    int win[2] = {dg, node};
    return brisk_graph_append(g, BRISK_OP_LSTM_GRAD_W, win, 2, BRISK_F32, g->nodes[n.in[1]].shape, &n.attr);
}

/* ---------------------------------------------------------------- GRU */

int brisk_gru(brisk_graph *g, int xp, int w_hh, int b_ih, int b_hh, int reverse) {
    int ids[4] = {xp, w_hh, b_ih, b_hh};
    if (brisk_ops_check_dtype(g, "gru", ids, 4, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[xp].shape, sw = g->nodes[w_hh].shape, si = g->nodes[b_ih].shape,
                sh = g->nodes[b_hh].shape;
    int64_t H = sw.ndim == 2 ? sw.d[1] : 0;
    if (sx.ndim != 3 || sw.ndim != 2 || sw.d[0] != 3 * H || sx.d[2] != 3 * H || si.ndim != 1 || si.d[0] != 3 * H ||
        sh.ndim != 1 || sh.d[0] != 3 * H) {
        char bx[BRISK_SHAPE_STR], bw[BRISK_SHAPE_STR], bi[BRISK_SHAPE_STR], bh[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "gru: xp %s, w_hh %s, b_ih %s, b_hh %s (expected xp [B, T, 3H], w_hh [3H, H], "
                                "b_ih [3H], b_hh [3H])",
                                brisk_shape_str(&sx, bx, sizeof bx), brisk_shape_str(&sw, bw, sizeof bw),
                                brisk_shape_str(&si, bi, sizeof bi), brisk_shape_str(&sh, bh, sizeof bh));
    }
    brisk_attr at = brisk_attr_none();
    at.kind = !!reverse;
    size_t ws = (size_t)(sx.d[0] * sx.d[1] * 5 * H) * sizeof(float);
    return append_ws(g, BRISK_OP_GRU, ids, 4, brisk_shape3(sx.d[0], sx.d[1], H), &at, ws);
}

int brisk_bw_gru(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    int gin[3] = {dy, node, n.in[1]};
    /* d xp and its workspace d hh_n, shared by all four inputs' rules */
    int dg = brisk_ops_find_recent(g, g->n_forward, BRISK_OP_GRU_GRAD, gin, 3);
    if (dg < 0) {
        brisk_shape s = g->nodes[n.in[0]].shape;
        dg = append_ws(g, BRISK_OP_GRU_GRAD, gin, 3, s, &n.attr, (size_t)(s.d[0] * s.d[1] * (s.d[2] / 3)) * sizeof(float));
    }
    if (dg < 0 || which == 0) return dg;
    int win[3] = {dg, node, -1};
    if (which >= 2) { /* d b_ih = the row sums of d xp; d b_hh shares its r and z parts */
        win[2] = brisk_ops_find_recent(g, g->n_forward, BRISK_OP_SUM, &dg, 1);
        if (win[2] < 0) win[2] = brisk_ops_sum_rows(g, dg);
        if (which == 2 || win[2] < 0) return win[2];
    }
    return brisk_graph_append(g, BRISK_OP_GRU_GRAD_W, win, which == 3 ? 3 : 2, BRISK_F32, g->nodes[n.in[which]].shape,
                              &n.attr);
}

/* ---------------------------------------------------------------- attention */

int brisk_attention(brisk_graph *g, int qkv, int mask, int heads, int causal, float dropout) {
    int ids[2] = {qkv, mask};
    int n_in = mask >= 0 ? 2 : 1;
    if (brisk_ops_check_dtype(g, "attention", ids, n_in, BRISK_F32)) return -1;
    brisk_shape s = g->nodes[qkv].shape;
    char bs[BRISK_SHAPE_STR];
    if (s.ndim != 3 || s.d[2] % 3)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "attention: qkv %s (expected [B, T, 3D])",
                                brisk_shape_str(&s, bs, sizeof bs));
    int64_t D = s.d[2] / 3;
    if (heads < 1 || D % heads)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "attention: %d heads do not divide the model width %lld",
                                heads, (long long)D);
    if (mask >= 0) {
        brisk_shape sm = g->nodes[mask].shape;
        if (sm.ndim != 2 || sm.d[0] != s.d[0] || sm.d[1] != s.d[1]) {
            char bm[BRISK_SHAPE_STR];
            return brisk_graph_fail(g, BRISK_ERR_SHAPE, "attention: key mask %s does not match qkv %s (expected [%lld, %lld])",
                                    brisk_shape_str(&sm, bm, sizeof bm), brisk_shape_str(&s, bs, sizeof bs),
                                    (long long)s.d[0], (long long)s.d[1]);
        }
    }
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "attention: dropout %g (expected 0 <= p < 1)", (double)dropout);
    brisk_attr at = brisk_attr_none();
    at.i0 = heads;
    at.kind = !!causal;
    at.f0 = dropout;
    if (dropout > 0.0f) at.rng = g->next_rng_stream;
    int id = append_ws(g, BRISK_OP_ATTENTION, ids, n_in, brisk_shape3(s.d[0], s.d[1], D), &at,
                       brisk_attention_workspace_bytes(s.d[0], s.d[1], heads, dropout > 0.0f));
    if (id >= 0 && dropout > 0.0f) g->next_rng_stream++;
    return id;
}

int brisk_bw_attention(brisk_graph *g, int node, int dy, int which) {
    if (which != 0) return -1; /* the key mask is data */
    brisk_node n = g->nodes[node];
    int ids[4] = {dy, n.in[0], node, n.n_in > 1 ? n.in[1] : -1};
    return brisk_graph_append(g, BRISK_OP_ATTENTION_GRAD, ids, n.n_in > 1 ? 4 : 3, BRISK_F32,
                              g->nodes[n.in[0]].shape, &n.attr);
}
