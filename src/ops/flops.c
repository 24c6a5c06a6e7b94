/* Model FLOPs: the multiply-add work of the ops a step's speed is judged by (MATMUL, the
 * LSTM, GRU and attention ops, the convolutions), 2 flops per multiply-add, as llm.c's MFU
 * and PyTorch's flop counter count them. Pointwise, normalisation, reduction and data
 * ops count 0: their cost is memory traffic, not arithmetic. The count is of the
 * mathematics, not of a kernel's choices: attention's backward counts its four
 * T x T products whether or not a kernel recomputes the scores, and a causal mask does
 * not halve it. */
#include "brisk/graph.h"

static int64_t dim(const brisk_node *n, int i) { return n->shape.d[i < 0 ? n->shape.ndim + i : i]; }

static double numel(const brisk_node *n) { return (double)brisk_shape_numel(&n->shape); }

double brisk_node_flops(const brisk_graph *g, int id) {
    if (!g || id < 0 || id >= g->n_nodes) return 0;
    const brisk_node *n = &g->nodes[id];
    const brisk_node *a = n->n_in > 0 && n->in[0] >= 0 && n->in[0] < g->n_nodes ? &g->nodes[n->in[0]] : NULL;
    const brisk_node *b = n->n_in > 1 && n->in[1] >= 0 && n->in[1] < g->n_nodes ? &g->nodes[n->in[1]] : NULL;
    switch (n->op) {
    case BRISK_OP_MATMUL: /* out [..., M, N], each element a dot product of length K */
        if (!a || a->shape.ndim < 2) return 0;
        return 2.0 * numel(n) * (double)dim(a, n->attr.trans_a ? -2 : -1);
    case BRISK_OP_LSTM: /* the recurrent product h_prev w_hh^T at every step but the first */
    case BRISK_OP_LSTM_GRAD: /* dh_rec = dgates w_hh, at every step but the last */
    case BRISK_OP_LSTM_GRAD_W: { /* d w_hh = dgates^T h_prev over every (b, t) */
        int lstm = n->op == BRISK_OP_LSTM ? id : n->in[1]; /* the gradients' second input */
        if (lstm < 0 || lstm >= g->n_nodes || g->nodes[lstm].shape.ndim != 3) return 0;
        const brisk_node *l = &g->nodes[lstm];
        double B = (double)l->shape.d[0], T = (double)l->shape.d[1], H = (double)l->shape.d[2];
        double steps = n->op == BRISK_OP_LSTM_GRAD_W ? T : T > 1 ? T - 1 : 0;
        return 2.0 * B * steps * 4 * H * H;
    }
    case BRISK_OP_GRU: /* as the LSTM's, with three gates; d b_hh (GRU_GRAD_W [3H]) is a sum */
    case BRISK_OP_GRU_GRAD:
    case BRISK_OP_GRU_GRAD_W: {
        int gru = n->op == BRISK_OP_GRU ? id : n->in[1];
        if (gru < 0 || gru >= g->n_nodes || g->nodes[gru].shape.ndim != 3) return 0;
        if (n->op == BRISK_OP_GRU_GRAD_W && n->shape.ndim != 2) return 0;
        const brisk_node *l = &g->nodes[gru];
        double B = (double)l->shape.d[0], T = (double)l->shape.d[1], H = (double)l->shape.d[2];
        double steps = n->op == BRISK_OP_GRU_GRAD_W ? T : T > 1 ? T - 1 : 0;
        return 2.0 * B * steps * 3 * H * H;
    }
    case BRISK_OP_ATTENTION: /* q k^T and p v: two T x T x D products per sequence */
    case BRISK_OP_ATTENTION_GRAD: { /* dv, dp, dq and dk: four */
        const brisk_node *q = n->op == BRISK_OP_ATTENTION ? a : b;
        if (!q || q->shape.ndim != 3) return 0;
        double B = (double)q->shape.d[0], T = (double)q->shape.d[1], D = (double)q->shape.d[2] / 3;
        return (n->op == BRISK_OP_ATTENTION ? 4.0 : 8.0) * B * T * T * D;
    }
    case BRISK_OP_CONV2D:        /* (x, w): out [N, Co, Ho, Wo] */
    case BRISK_OP_CONV2D_GRAD_X: /* (dy, w) */
    case BRISK_OP_CONV2D_GRAD_W: { /* (dy, x): out = dw */
        /* all three: one multiply-add per output element of the convolution per weight
         * of its filter, numel(y) x C/groups x kh x kw */
        const brisk_node *y = n->op == BRISK_OP_CONV2D ? n : a;
        const brisk_shape *w = n->op == BRISK_OP_CONV2D_GRAD_W ? &n->shape : b ? &b->shape : NULL;
        if (!y || !w || w->ndim != 4 || w->d[0] <= 0) return 0;
        return 2.0 * numel(y) * (double)(brisk_shape_numel(w) / w->d[0]);
    }
    default:
        return 0;
    }
}

double brisk_plan_train_flops(const brisk_graph *g, const brisk_plan *plan) {
    double sum = 0;
    for (int s = 0; plan && s < plan->n_train; s++) sum += brisk_node_flops(g, plan->train_order[s]);
    return sum;
}
