/* ONNX's recurrent layers, LSTM and GRU, on brisk's fused LSTM and GRU ops (one per
 * direction). ONNX stacks the gates as i, o, f, c (LSTM) and z, r, h (GRU); brisk's ops
 * take PyTorch's i, f, g, o and r, z, n, so W, R and B are cut and joined again with graph
 * ops (SLICE, CONCAT) on whatever computes them. torch's export builds W, R and B from the
 * state_dict's weight_ih_l0 etc. by Slice and Concat of the parameters, so the gradients
 * reach those parameters by name and a checkpoint loads back into the module. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "onnx/onnx_import_internal.h"

/* x's `n` blocks of h along `axis`, block order[k] of x going to place k */
static int regate(ctx *c, int x, int axis, int64_t h, const int *order, int n) {
    int parts[4];
    for (int k = 0; k < n; k++)
        if ((parts[k] = brisk_slice(c->g, x, axis, order[k] * h, h)) < 0) return -1;
    return brisk_concat(c->g, parts, n, axis);
}

/* direction d of a [dirs, rows, cols] tensor as [rows, cols] */
static int direction(ctx *c, int x, int d) {
    const brisk_shape *s = ox_shape(c, x);
    int64_t rows = s->d[1], cols = s->ndim == 3 ? s->d[2] : 0;
    int y = brisk_slice(c->g, x, 0, d, 1);
    return y < 0 ? -1 : brisk_reshape(c->g, y, cols ? brisk_shape2(rows, cols) : brisk_shape1(rows));
}

/* The optional initial states and sequence lengths brisk's ops take only as their defaults:
 * zero states, every sequence the full length t. */
static int default_inputs(ctx *c, int64_t t) {
    static const char *const what[] = {"sequence_lens", "initial_h", "initial_c", "P (peepholes)"};
    for (size_t k = 4; k < c->n->n_inputs && k < 8; k++) {
        if (!ox_has_in(c, k)) continue;
        if (k == 7) return ox_fail(c, "peepholes (input P) are not taken");
        konst *own, *v = ox_const_in(c, k, &own);
        int ok = v != NULL;
        for (int64_t i = 0; ok && i < v->numel; i++) ok = k == 4 ? v->v[i] == (double)t : v->v[i] == 0.0;
        ox_konst_free(own);
        if (!ok)
            return ox_fail(c, "%s %s (%s taken)", what[k - 4], v ? "of other values" : "computed from tensors",
                           k == 4 ? "every sequence the full length" : "constant zeros");
    }
    return 0;
}

/* activations, clip and input_forget: only ONNX's defaults, the gates brisk's ops compute */
static int default_attrs(ctx *c, int gates, int dirs) {
    static const char *const dflt[2][3] = {{"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh", ""}};
    int per = gates == 4 ? 3 : 2;
    const brisk_onnx_attr *a = brisk_onnx_attr_find(c->n, "activations");
    if (a && a->type == BRISK_ONNX_ATTR_STRINGS && a->n == (size_t)(per * dirs)) {
        for (size_t k = 0; k < a->n; k++)
            if (strcasecmp(a->strings[k], dflt[gates == 3][k % (size_t)per]))
                return ox_fail(c, "activation %s (the defaults %s taken)", a->strings[k],
                               gates == 4 ? "Sigmoid, Tanh, Tanh" : "Sigmoid, Tanh");
    } else if (a) {
        return ox_fail(c, "activations not %d strings", per * dirs);
    }
    if (brisk_onnx_attr_find(c->n, "clip")) return ox_fail(c, "a cell clip (none taken)");
    if (brisk_onnx_attr_find(c->n, "activation_alpha") || brisk_onnx_attr_find(c->n, "activation_beta"))
        return ox_fail(c, "activation_alpha or activation_beta (the default activations taken)");
    if (gates == 4 && ox_attr_i(c, "input_forget", 0)) return ox_fail(c, "input_forget 1 (0 taken)");
    if (gates == 3 && ox_attr_i(c, "linear_before_reset", 0) != 1)
        return ox_fail(c, "linear_before_reset 0 (1 taken: PyTorch's GRU, r times (R h + Rb))");
    return c->g->err.code ? -1 : 0;
}

/* whether any node or the graph's outputs read value `name` */
static int is_read(ctx *c, const char *name) {
    const brisk_onnx_graph *g = &c->m->graph;
    for (size_t i = 0; name[0] && i < g->n_outputs; i++)
        if (!strcmp(g->outputs[i].name, name)) return 1;
    for (size_t i = 0; name[0] && i < g->n_nodes; i++)
        for (size_t k = 0; k < g->nodes[i].n_inputs; k++)
            if (!strcmp(g->nodes[i].inputs[k], name)) return 1;
    return 0;
}

/* LSTM (gates 4) or GRU (3): Y [T, dirs, N, H] (layout 1: [N, T, dirs, H]) and Y_h [dirs, N,
 * H] (layout 1: [N, dirs, H]); LSTM's Y_c is not kept by brisk's op (refused when read). */
static int build_rnn(ctx *c, int gates) {
    static const int lstm_order[4] = {0, 2, 3, 1}, gru_order[3] = {1, 0, 2};
    const int *order = gates == 4 ? lstm_order : gru_order;
    const char *dir = "forward";
    brisk_error e;
    if (brisk_onnx_attr_string(c->m, c->n, "direction", "forward", &dir, &e)) return ox_fail(c, "%s", e.msg);
    int dirs = !strcmp(dir, "bidirectional") ? 2 : 1, layout = (int)ox_attr_i(c, "layout", 0);
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && dirs != 2)
        return ox_fail(c, "direction %s (forward, reverse or bidirectional taken)", dir);
    if (layout != 0 && layout != 1) return ox_fail(c, "layout %d (0 or 1 taken)", layout);
    if (default_attrs(c, gates, dirs)) return -1;
    if (gates == 4 && c->n->n_outputs > 2 && is_read(c, c->n->outputs[2]))
        return ox_fail(c, "its last cell state Y_c is read (brisk's LSTM keeps only h: take Y or Y_h)");
    int x = ox_in(c, 0, 0), w = ox_in(c, 1, 0), r = ox_in(c, 2, 0);
    if (x < 0 || w < 0 || r < 0) return -1;
    brisk_shape sx = *ox_shape(c, x), sw = *ox_shape(c, w), sr = *ox_shape(c, r);
    int64_t h = sr.ndim == 3 ? sr.d[2] : 0, gh = gates * h;
    if (sx.ndim != 3 || sw.ndim != 3 || sr.ndim != 3 || sw.d[0] != dirs || sr.d[0] != dirs || sw.d[1] != gh ||
        sr.d[1] != gh || sw.d[2] != sx.d[2] || h < 1 || h != ox_attr_i(c, "hidden_size", h))
        return ox_fail(c, "X, W and R of ranks %d, %d and %d, or of shapes that do not agree (X [T, N, I] (layout 1: "
                       "[N, T, I]), W [%d, %d H, I], R [%d, %d H, H] taken, H the hidden_size)",
                       sx.ndim, sw.ndim, sr.ndim, dirs, gates, dirs, gates);
    int64_t t = sx.d[layout ? 1 : 0], n = sx.d[layout ? 0 : 1];
    if (default_inputs(c, t)) return -1;
    int b = -1;
    if (ox_has_in(c, 3)) {
        if ((b = ox_in(c, 3, 0)) < 0) return -1;
        const brisk_shape *sb = ox_shape(c, b);
        if (sb->ndim != 2 || sb->d[0] != dirs || sb->d[1] != 2 * gh)
            return ox_fail(c, "B not [%d, %lld] (both biases of each direction)", dirs, (long long)(2 * gh));
    }
    static const int swap[3] = {1, 0, 2};
    int xs = layout ? x : brisk_transpose(c->g, x, swap); /* [N, T, I], brisk's ops' order */
    int ys[2], yh[2];
    for (int d = 0; d < dirs; d++) {
        int reverse = d == 1 || !strcmp(dir, "reverse");
        int wd = regate(c, direction(c, w, d), 0, h, order, gates), rd = regate(c, direction(c, r, d), 0, h, order, gates);
        int bi, bh;
        if (b >= 0) {
            int bd = direction(c, b, d);
            bi = regate(c, brisk_slice(c->g, bd, 0, 0, gh), 0, h, order, gates);
            bh = regate(c, brisk_slice(c->g, bd, 0, gh, gh), 0, h, order, gates);
        } else {
            float *zero = calloc((size_t)gh, sizeof *zero);
            bi = bh = zero ? brisk_const(c->g, NULL, BRISK_F32, brisk_shape1(gh), zero) : ox_fail(c, "out of memory");
            free(zero);
        }
        int xp = brisk_matmul(c->g, xs, wd, 0, 1);
        int y = gates == 4 ? brisk_lstm(c->g, xp, rd, brisk_add(c->g, bi, bh), reverse)
                           : brisk_gru(c->g, xp, rd, bi, bh, reverse);
        if (y < 0) return -1;
        /* the last state: the last step forward, the first in reverse */
        yh[d] = brisk_reshape(c->g, brisk_slice(c->g, y, 1, reverse ? 0 : t - 1, 1),
                              layout ? brisk_shape3(n, 1, h) : brisk_shape3(1, n, h));
        ys[d] = layout ? brisk_reshape(c->g, y, brisk_shape4(n, t, 1, h))
                       : brisk_reshape(c->g, brisk_transpose(c->g, y, swap), brisk_shape4(t, 1, n, h));
    }
    int y = dirs == 1 ? ys[0] : brisk_concat(c->g, ys, 2, layout ? 2 : 1);
    int hn = dirs == 1 ? yh[0] : brisk_concat(c->g, yh, 2, layout ? 1 : 0);
    if (y < 0 || hn < 0) return -1;
    if (c->n->n_outputs > 1) ox_set_out(c, 1, hn);
    return y;
}

int ox_build_lstm(ctx *c) { return build_rnn(c, 4); }
int ox_build_gru(ctx *c) { return build_rnn(c, 3); }
