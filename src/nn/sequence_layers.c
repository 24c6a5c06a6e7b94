/* Sequence layers as PyTorch defines them, with PyTorch's parameter names and
 * initialisation, so that a brisk checkpoint loads into torch.nn.LSTM, torch.nn.GRU and
 * torch.nn.TransformerEncoderLayer with load_state_dict:
 *   LSTM:  per layer l (and direction), xp = x weight_ih_l{l}^T as one matmul over every
 *          step, then the fused LSTM op with weight_hh_l{l} and bias_ih + bias_hh; all
 *          four tensors U(-1/sqrt(hidden), 1/sqrt(hidden)) as nn.LSTM.reset_parameters.
 *   GRU:   the same with three gates, the fused GRU op taking bias_ih and bias_hh apart.
 *   Encoder layer: in_proj (xavier-uniform weight, zero bias, as nn.MultiheadAttention),
 *          the fused attention op, out_proj (Linear init, zero bias), dropout, residual,
 *          norm1; linear1, activation, dropout, linear2, dropout, residual, norm2 — the
 *          norms before each block (norm_first) or after each residual. */
#include "brisk/nn.h"

#include <math.h>
#include <stdio.h>

/* x [..., in] @ w^T + b with the given names and inits. */
static int linear_as(brisk_graph *g, int x, int64_t in, int64_t out, const char *wname, const char *bname,
                     brisk_init_kind wi, float wscale, brisk_init_kind bi, float bscale) {
    int w = brisk_param(g, wname, brisk_shape2(out, in), wi, wscale, 1);
    int b = brisk_param(g, bname, brisk_shape1(out), bi, bscale, 0);
    return brisk_bias_add(g, brisk_matmul(g, x, w, 0, 1), b);
}

/* One direction of one layer of an LSTM (gates 4) or a GRU (3): x [B, T, in] -> h [B, T, hidden]. */
static int rnn_direction(brisk_graph *g, int x, int64_t in, int64_t hidden, int gates, const char *prefix, int layer,
                         int reverse) {
    static const char *const names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    const char *sfx = reverse ? "_reverse" : "";
    float k = 1.0f / sqrtf((float)hidden);
    int p[4];
    for (int i = 0; i < 4; i++) {
        char name[BRISK_NAME_MAX];
        snprintf(name, sizeof name, "%s.%s_l%d%s", prefix, names[i], layer, sfx);
        brisk_shape s = i < 2 ? brisk_shape2(gates * hidden, i == 0 ? in : hidden) : brisk_shape1(gates * hidden);
        p[i] = brisk_param(g, name, s, BRISK_INIT_UNIFORM, k, i < 2);
    }
    int xp = brisk_matmul(g, x, p[0], 0, 1);
    if (gates == 3) return brisk_gru(g, xp, p[1], p[2], p[3], reverse);
    /* the two biases only ever appear summed: one [4H] add instead of a pass over [B, T, 4H] */
    return brisk_lstm(g, xp, p[1], brisk_add(g, p[2], p[3]), reverse);
}

/* Layers of one kind stacked as torch.nn.LSTM / GRU stack them: each direction reads the
 * layer below (both halves concatenated), dropout between layers. */
static int rnn_stack(brisk_graph *g, int x, int64_t in, int64_t hidden, int layers, int bidirectional, float dropout,
                     int gates, const char *prefix) {
    if (layers < 1)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: %d %s layers (expected at least 1)", prefix, layers,
                                gates == 3 ? "GRU" : "LSTM");
    for (int l = 0; l < layers; l++) {
        int h = rnn_direction(g, x, in, hidden, gates, prefix, l, 0);
        if (bidirectional) {
            int parts[2] = {h, rnn_direction(g, x, in, hidden, gates, prefix, l, 1)};
            h = brisk_concat(g, parts, 2, 2);
        }
        in = hidden * (bidirectional ? 2 : 1);
        x = l < layers - 1 && dropout > 0 ? brisk_dropout(g, h, dropout) : h;
    }
    return x;
}

int brisk_nn_lstm(brisk_graph *g, int x, int64_t in, int64_t hidden, int layers, int bidirectional, float dropout,
                  const char *prefix) {
    return rnn_stack(g, x, in, hidden, layers, bidirectional, dropout, 4, prefix);
}

int brisk_nn_gru(brisk_graph *g, int x, int64_t in, int64_t hidden, int layers, int bidirectional, float dropout,
                 const char *prefix) {
    return rnn_stack(g, x, in, hidden, layers, bidirectional, dropout, 3, prefix);
}

int brisk_nn_encoder_layer(brisk_graph *g, int x, int mask, int64_t d, int heads, int64_t ffn, brisk_activation act,
                           float dropout, int norm_first, int causal, const char *prefix) {
    char w[BRISK_NAME_MAX], b[BRISK_NAME_MAX];
    /* self-attention block */
    snprintf(w, sizeof w, "%s.norm1", prefix);
    int a = norm_first ? brisk_nn_layernorm(g, x, d, w) : x;
    snprintf(w, sizeof w, "%s.self_attn.in_proj_weight", prefix);
    snprintf(b, sizeof b, "%s.self_attn.in_proj_bias", prefix);
    int qkv = linear_as(g, a, d, 3 * d, w, b, BRISK_INIT_UNIFORM, sqrtf(6.0f / (float)(d + 3 * d)), BRISK_INIT_ZEROS, 0);
    int att = brisk_attention(g, qkv, mask, heads, causal, dropout);
    snprintf(w, sizeof w, "%s.self_attn.out_proj.weight", prefix);
    snprintf(b, sizeof b, "%s.self_attn.out_proj.bias", prefix);
    int o = linear_as(g, att, d, d, w, b, BRISK_INIT_UNIFORM, 1.0f / sqrtf((float)d), BRISK_INIT_ZEROS, 0);
    if (dropout > 0) o = brisk_dropout(g, o, dropout);
    x = brisk_add(g, x, o);
    snprintf(w, sizeof w, "%s.norm1", prefix);
    if (!norm_first) x = brisk_nn_layernorm(g, x, d, w);
    /* feed-forward block */
    snprintf(w, sizeof w, "%s.norm2", prefix);
    a = norm_first ? brisk_nn_layernorm(g, x, d, w) : x;
    snprintf(w, sizeof w, "%s.linear1", prefix);
    int f = brisk_nn_activation(g, brisk_nn_linear(g, a, d, ffn, w), act);
    if (dropout > 0) f = brisk_dropout(g, f, dropout);
    snprintf(w, sizeof w, "%s.linear2", prefix);
    f = brisk_nn_linear(g, f, ffn, d, w);
    if (dropout > 0) f = brisk_dropout(g, f, dropout);
    x = brisk_add(g, x, f);
    snprintf(w, sizeof w, "%s.norm2", prefix);
    return norm_first ? x : brisk_nn_layernorm(g, x, d, w);
}
