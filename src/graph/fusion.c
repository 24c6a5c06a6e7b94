/* Fusion planning shared by the backends (fusion.h): the patterns and the lifetime checks
 * that make writing a later node's buffer early safe under the memory plan.
 *
 * The fused work runs at one node's place in the schedule (the matmul, the act_grad or
 * the add), so it writes the later nodes' buffers early; the memory plan reuses buffers
 * by lifetime, so that is allowed only when no other buffer sharing those bytes is live
 * in between (checked here on the planned offsets; eval and predict run subsequences of
 * the training schedule, so what holds for it holds for them). The fused-away nodes are
 * marked in skip and a backend returns from them at once.
 *
 * GEMM epilogues (forward M = MATMUL; B = BIAS_ADD(M, b); A = RELU(B) or GELU_tanh(B), and
 * where the rules allow GELU_erf, SILU, TANH, SIGMOID, LEAKY_RELU, ELU, SOFTPLUS, and
 * D = DROPOUT(A) when A has no
 * other reader than its gradients' y; every other reader of B an ACT_GRAD
 * of that activation; backward H = MATMUL; Q = ACT_GRAD_gelu_tanh(H, B, A); S = SUM_rows(Q)): the intermediate
 * (M, H) must have no other reader and must not be read after a run. A backend that can
 * fall back to running the work decomposed at the same place (GEMM into the matmul's own
 * buffer, then elementwise kernels) writes and reads the matmul's buffer, so a later
 * node's buffer may share its bytes only exactly (an elementwise kernel in place).
 *
 * GEMM + act-grad (the CPU's): H = MATMUL; [D = DROPOUT(H)]; Q = ACT_GRAD(H or D, x, y), at
 * H's place, D never written.
 *
 * Act-grad + bias gradient (the CPU's): Q = ACT_GRAD(dy, x, y) and S = SUM over all but
 * the last dim of Q, at Q's place, S written early; where S's buffer is not free that early
 * (rules.actgrad_sum_deferred), the backend keeps the sums and writes S at its own place.
 *
 * Convolution epilogues (the CPU's Winograd convolutions): Y = CONV2D; B = ADD(Y, bias) with
 * the bias [Co, 1, 1]; [A = an activation of B, as the GEMM's]: at Y's place, Y never
 * written, B as in the GEMM's.
 *
 * Broadcast + ReLU gradient (the CPU's): E = EXPAND(s) repeating each element of s over E's
 * trailing dims (a global average pool's gradient), read only by Q = ACT_GRAD_relu(E, x, y):
 * at E's place, from s, E never written, Q written early (it may take s's bytes: the backend
 * reads s before it writes Q).
 *
 * Residual + layernorm: forward, ADD then a LAYERNORM of its output runs at the ADD's
 * place, writing both (the norm's buffer early, checked as above); backward,
 * ADD(r, LAYERNORM_GRAD_X(dy, x, gamma)) with the ADD the norm gradient's only reader runs
 * at the ADD's place, the norm gradient never written: its inputs are then read after
 * their planned last use, so nothing scheduled in between may overwrite them (checked),
 * and their lifetimes are extended before the GEMM fusions are planned. */
#include "graph/fusion.h"

#include <stdlib.h>
#include <string.h>

static int base_of(const brisk_graph *g, int i) {
    return g->nodes[i].storage == BRISK_STORE_ALIAS ? g->nodes[i].alias_of : i;
}

/* ---------------------------------------------------------------- lifetimes */

typedef struct life {
    int *pos, *last;   /* schedule position of each node (-1: not run) and its base's last use */
    int *readers;      /* scheduled readers of each node's own output (aliases count as many) */
} life;

static void life_free(life *l) {
    free(l->pos);
    free(l->last);
    free(l->readers);
}

static int life_build(const brisk_exec *ex, life *l) {
    const brisk_graph *g = ex->g;
    const brisk_plan *pl = ex->plan;
    int n = g->n_nodes, T = pl->n_train;
    l->pos = malloc(sizeof(int) * (size_t)(n + 1));
    l->last = malloc(sizeof(int) * (size_t)(n + 1));
    l->readers = calloc((size_t)n + 1, sizeof(int));
    if (!l->pos || !l->last || !l->readers) return -1;
    for (int i = 0; i < n; i++) l->pos[i] = l->last[i] = -1;
    for (int s = 0; s < T; s++) l->pos[pl->train_order[s]] = l->last[pl->train_order[s]] = s;
    for (int s = 0; s < T; s++) {
        const brisk_node *nd = &g->nodes[pl->train_order[s]];
        for (int j = 0; j < nd->n_in; j++) {
            int b = base_of(g, nd->in[j]);
            if (l->last[b] < s) l->last[b] = s;
            l->readers[nd->in[j]]++;
        }
    }
    for (int i = 0; i < n; i++) {
        if (g->nodes[i].storage == BRISK_STORE_ALIAS) l->readers[g->nodes[i].alias_of] += 1000; /* viewed: never fuse */
        if (i == g->loss || i == g->output || g->nodes[i].keep) {
            l->readers[i] += 1000;
            l->last[base_of(g, i)] = T;
        }
    }
    return 0;
}

/* Writing node y's buffer at step s (before its own step) is safe when no other arena
 * buffer overlapping it is live at any step in [s, pos(y)), `unread` aside (a fused-away
 * node nothing writes or reads; -1: none). `gone` is the fused matmul,
 * whose own buffer the fused GEMM neither writes nor anyone reads; but the decomposed
 * fallback writes it and then computes y from it elementwise (from_gone), so then y may
 * share its bytes only exactly (in place), never shifted. */
static int early_write_ok_but(const brisk_exec *ex, const life *l, int y, int s, int gone, int from_gone,
                              int unread) {
    const brisk_graph *g = ex->g;
    const brisk_node *ny = &g->nodes[y];
    if (ny->storage != BRISK_STORE_ARENA || l->pos[y] < 0 || ny->offset == SIZE_MAX) return 0;
    size_t lo = ny->offset, hi = ny->offset + ny->bytes;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (t == y || t == unread || nt->storage != BRISK_STORE_ARENA || nt->offset == SIZE_MAX || l->pos[t] < 0)
            continue;
        if (nt->offset >= hi || nt->offset + nt->bytes <= lo) continue;
        if (t == gone) {
            if (from_gone && (nt->offset != lo || nt->bytes != ny->bytes)) return 0;
            continue;
        }
        if (l->last[t] >= s && l->pos[t] < l->pos[y]) return 0;
    }
    return 1;
}

static int early_write_ok(const brisk_exec *ex, const life *l, int y, int s, int gone, int from_gone) {
    return early_write_ok_but(ex, l, y, s, gone, from_gone, -1);
}

/* ---------------------------------------------------------------- fusion patterns */

static int only_reader_is(const brisk_graph *g, const life *l, int x, int reader) {
    if (l->readers[x] != 1) return 0;
    const brisk_node *r = &g->nodes[reader];
    int hits = 0;
    for (int j = 0; j < r->n_in; j++) hits += r->in[j] == x;
    return hits == 1;
}

static int add_fusion(brisk_fusion_plan *p, brisk_fusion f) {
    brisk_fusion *grown = realloc(p->list, (size_t)(p->n + 1) * sizeof *grown);
    if (!grown) return -1;
    p->list = grown;
    p->fusion_at[f.at] = p->n;
    p->list[p->n++] = f;
    return 0;
}

/* The DROPOUT of activation A that a forward GEMM epilogue can write too, at s: A's only
 * reader besides its gradients' y; else -1. */
static int act_dropout(const brisk_exec *ex, const life *l, int act, int s, int m) {
    const brisk_graph *g = ex->g;
    int dr = -1, n_dr = 0, others = 0;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (l->pos[t] < 0) continue;
        for (int j = 0; j < nt->n_in; j++) {
            if (nt->in[j] != act) continue;
            if (nt->op == BRISK_OP_DROPOUT && j == 0) dr = t, n_dr++;
            else if (!(nt->op == BRISK_OP_ACT_GRAD && j == 2)) others = 1;
        }
    }
    if (n_dr != 1 || others || l->readers[act] >= 1000) return -1;
    const brisk_node *nd = &g->nodes[dr];
    if (nd->dtype != BRISK_F32 || nd->n_in != 1 ||
        brisk_shape_numel(&nd->shape) != brisk_shape_numel(&g->nodes[act].shape) || !early_write_ok(ex, l, dr, s, m, 0))
        return -1;
    return dr;
}

/* The activation A reading B that an epilogue at m (step s) can apply too, set in f (kind
 * `act_kind` for a ReLU, `other_kind` or the GELU kind else): the only reader of B but the
 * activation's gradients, which must match it; A and, where it is written, B writable
 * early. N: the product's columns (GELU's multiple). Returns whether f took it. */
static int pick_act(const brisk_exec *ex, const life *l, const brisk_fusion_rules *r, int m, int b, int s, int64_t N,
                    int b_written, brisk_fusion *f, brisk_fusion_kind relu_kind, brisk_fusion_kind gelu_kind,
                    brisk_fusion_kind other_kind) {
    const brisk_graph *g = ex->g;
    int act = -1, others_ok = 1, n_act = 0;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (l->pos[t] < 0) continue;
        for (int j = 0; j < nt->n_in; j++) {
            if (nt->in[j] != b) continue;
            if ((nt->op == BRISK_OP_RELU ||
                 (nt->op == BRISK_OP_GELU && (nt->attr.kind == BRISK_GELU_TANH || r->gelu_erf)) ||
                 (r->other_acts && (nt->op == BRISK_OP_SILU || nt->op == BRISK_OP_TANH || nt->op == BRISK_OP_SIGMOID ||
                                    nt->op == BRISK_OP_LEAKY_RELU || nt->op == BRISK_OP_ELU ||
                                    nt->op == BRISK_OP_SOFTPLUS))) &&
                j == 0)
                act = t, n_act++;
            else if (!(nt->op == BRISK_OP_ACT_GRAD && j == 1)) others_ok = 0;
        }
    }
    if (act < 0 || n_act != 1 || !others_ok || l->readers[b] >= 1000) return 0;
    const brisk_node *na = &g->nodes[act];
    int grads_match = 1;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (l->pos[t] >= 0 && nt->op == BRISK_OP_ACT_GRAD && nt->in[1] == b)
            grads_match &= nt->attr.kind == (int)na->op && (na->op != BRISK_OP_GELU || nt->attr.i1 == na->attr.kind) &&
                           nt->attr.f0 == na->attr.f0 && nt->attr.f1 == na->attr.f1 && nt->in[2] == act;
    }
    if (!grads_match) return 0;
    if (na->op == BRISK_OP_RELU && early_write_ok(ex, l, act, s, m, 1) &&
        (!b_written || early_write_ok(ex, l, b, s, m, 1))) {
        f->kind = relu_kind;
    } else if (na->op != BRISK_OP_RELU && (na->op != BRISK_OP_GELU || N % r->gelu_n_multiple == 0) &&
               early_write_ok(ex, l, act, s, m, 0) && early_write_ok(ex, l, b, s, m, 1)) {
        f->kind = na->op == BRISK_OP_GELU ? gelu_kind : other_kind;
    } else {
        return 0;
    }
    f->act = act;
    return 1;
}

static int plan_forward(const brisk_exec *ex, const life *l, const brisk_fusion_rules *r, brisk_fusion_plan *p,
                        int m) {
    const brisk_graph *g = ex->g;
    int64_t N;
    if (!r->gemm_2d(g, m, &N) || l->readers[m] != 1) return 0;
    int b = -1;
    for (int t = 0; t < g->n_nodes && b < 0; t++)
        if (l->pos[t] >= 0 && g->nodes[t].op == BRISK_OP_BIAS_ADD && g->nodes[t].in[0] == m && g->nodes[t].in[1] != m)
            b = t;
    if (b < 0 || !only_reader_is(g, l, m, b)) return 0;
    int s = l->pos[m];
    if (l->pos[base_of(g, g->nodes[b].in[1])] >= s) return 0; /* the bias must exist when the GEMM runs */
    brisk_fusion f = {.kind = BRISK_FUSE_GEMM_BIAS, .at = m, .matmul = m, .bias = b, .act = -1, .grad = -1, .sum = -1,
                      .ln = -1, .drop = -1};
    pick_act(ex, l, r, m, b, s, N, r->relu_writes_pre, &f, BRISK_FUSE_GEMM_BIAS_RELU, BRISK_FUSE_GEMM_BIAS_GELU,
             BRISK_FUSE_GEMM_BIAS_ACT);
    if (f.kind == BRISK_FUSE_GEMM_BIAS && !early_write_ok(ex, l, b, s, m, 1)) return 0;
    if (f.act >= 0 && r->act_dropout) f.drop = act_dropout(ex, l, f.act, s, m);
    if (add_fusion(p, f)) return -1;
    p->skip[b] = 1;
    if (f.act >= 0) p->skip[f.act] = 1;
    if (f.drop >= 0) p->skip[f.drop] = 1;
    return 0;
}

/* The convolution's: Y = CONV2D (NCHW) read only by B = ADD(Y, bias) (either order), the bias
 * [Co, 1, 1] or [1, Co, 1, 1] and existing before Y is made, then an activation as above
 * (B written but for a ReLU's, as the GEMM's). */
static int plan_conv(const brisk_exec *ex, const life *l, const brisk_fusion_rules *r, brisk_fusion_plan *p, int m) {
    const brisk_graph *g = ex->g;
    const brisk_node *nm = &g->nodes[m];
    if (!r->conv_epilogue(g, m) || l->readers[m] != 1 || nm->shape.ndim != 4 || nm->dtype != BRISK_F32) return 0;
    int b = -1, bias = -1;
    for (int t = 0; t < g->n_nodes && b < 0; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (l->pos[t] < 0 || nt->op != BRISK_OP_ADD || nt->n_in != 2 || (nt->in[0] == m) == (nt->in[1] == m)) continue;
        int o = nt->in[0] == m ? nt->in[1] : nt->in[0];
        const brisk_shape *bs = &g->nodes[o].shape;
        int64_t co = nm->shape.d[1];
        int ok = (bs->ndim == 3 && bs->d[0] == co && bs->d[1] == 1 && bs->d[2] == 1) ||
                 (bs->ndim == 4 && bs->d[0] == 1 && bs->d[1] == co && bs->d[2] == 1 && bs->d[3] == 1);
        if (ok && g->nodes[o].dtype == BRISK_F32 && nt->dtype == BRISK_F32 && brisk_shape_equal(&nt->shape, &nm->shape))
            b = t, bias = o;
    }
    if (b < 0 || !only_reader_is(g, l, m, b)) return 0;
    int s = l->pos[m];
    if (l->pos[base_of(g, bias)] >= s) return 0;
    brisk_fusion f = {.kind = BRISK_FUSE_CONV_BIAS, .at = m, .matmul = m, .bias = b, .act = -1, .grad = -1, .sum = -1,
                      .ln = -1, .drop = -1};
    pick_act(ex, l, r, m, b, s, 1, r->relu_writes_pre, &f, BRISK_FUSE_CONV_BIAS_ACT, BRISK_FUSE_CONV_BIAS_ACT,
             BRISK_FUSE_CONV_BIAS_ACT);
    int relu = f.act >= 0 && g->nodes[f.act].op == BRISK_OP_RELU;
    if ((!relu || r->relu_writes_pre) && !early_write_ok(ex, l, b, s, m, 1)) return 0;
    if (add_fusion(p, f)) return -1;
    p->skip[b] = 1;
    if (f.act >= 0) p->skip[f.act] = 1;
    return 0;
}

static int plan_backward(const brisk_exec *ex, const life *l, const brisk_fusion_rules *r, brisk_fusion_plan *p,
                         int q) {
    const brisk_graph *g = ex->g;
    const brisk_node *nq = &g->nodes[q];
    if (nq->attr.kind != BRISK_OP_GELU || nq->attr.i1 != BRISK_GELU_TANH || nq->n_in < 3) return 0;
    int h = nq->in[0];
    int64_t N;
    if (g->nodes[h].op != BRISK_OP_MATMUL || l->pos[h] < 0 || p->fusion_at[h] >= 0 || !r->gemm_2d(g, h, &N) ||
        N % r->gelu_n_multiple != 0 || !only_reader_is(g, l, h, q) || nq->in[1] == h || nq->in[2] == h)
        return 0;
    int sum = -1;
    for (int t = 0; t < g->n_nodes && sum < 0; t++) {
        const brisk_node *nt = &g->nodes[t];
        int nd = g->nodes[q].shape.ndim;
        if (l->pos[t] >= 0 && nt->op == BRISK_OP_SUM && nt->in[0] == q && nd >= 2 && !nt->attr.keepdim &&
            nt->attr.axes == (1u << (nd - 1)) - 1u && l->readers[t] < 1000)
            sum = t;
    }
    int s = l->pos[h];
    if (l->pos[base_of(g, nq->in[1])] >= s || l->pos[base_of(g, nq->in[2])] >= s) return 0;
    if (sum < 0 || !early_write_ok(ex, l, q, s, h, 1) || !early_write_ok(ex, l, sum, s, h, 0)) return 0;
    brisk_fusion f = {.kind = BRISK_FUSE_GEMM_DGELU_BGRAD, .at = h, .matmul = h, .bias = -1, .act = -1, .grad = q,
                      .sum = sum, .ln = -1, .drop = -1};
    if (add_fusion(p, f)) return -1;
    p->skip[q] = p->skip[sum] = 1;
    return 0;
}

/* H = MATMUL, optionally D = DROPOUT(H) (a dropout's backward), and
 * Q = ACT_GRAD(H or D, x, y): at H's place the GEMM writes Q's buffer and turns each band
 * into Q while it is in cache; H and D are never written, so Q may take their bytes, but
 * not x's or y's (the epilogue reads them after the GEMM has written the band). The bias
 * gradient's SUM over Q runs at its own place. */
static int plan_gemm_actgrad(const brisk_exec *ex, const life *l, const brisk_fusion_rules *r, brisk_fusion_plan *p,
                             int q) {
    const brisk_graph *g = ex->g;
    const brisk_node *nq = &g->nodes[q];
    if (nq->n_in < 3 || nq->dtype != BRISK_F32 || l->pos[q] < 0 || p->fusion_at[q] >= 0) return 0;
    int d = -1, h = nq->in[0];
    const brisk_node *nh = &g->nodes[h];
    if (nh->op == BRISK_OP_DROPOUT) {
        d = h;
        if (nh->n_in != 1 || nh->dtype != BRISK_F32 || l->pos[d] < 0 || p->fusion_at[d] >= 0 || p->skip[d] ||
            !only_reader_is(g, l, d, q))
            return 0;
        h = nh->in[0];
    }
    int64_t N;
    if (g->nodes[h].op != BRISK_OP_MATMUL || l->pos[h] < 0 || p->fusion_at[h] >= 0 || p->skip[h] ||
        !r->gemm_2d(g, h, &N) || !only_reader_is(g, l, h, d >= 0 ? d : q))
        return 0;
    int64_t len = brisk_shape_numel(&nq->shape);
    if (brisk_shape_numel(&g->nodes[h].shape) != len || (d >= 0 && brisk_shape_numel(&g->nodes[d].shape) != len))
        return 0;
    for (int j = 1; j < 3; j++)
        if (nq->in[j] == h || nq->in[j] == d || brisk_shape_numel(&g->nodes[nq->in[j]].shape) != len) return 0;
    int s = l->pos[h];
    if (l->pos[base_of(g, nq->in[1])] >= s || l->pos[base_of(g, nq->in[2])] >= s) return 0;
    if (!early_write_ok_but(ex, l, q, s, h, 0, d)) return 0;
    brisk_fusion f = {.kind = BRISK_FUSE_GEMM_ACTGRAD, .at = h, .matmul = h, .bias = -1, .act = -1, .grad = q,
                      .sum = -1, .ln = -1, .drop = d};
    if (add_fusion(p, f)) return -1;
    p->skip[q] = 1;
    if (d >= 0) p->skip[d] = 1;
    return 0;
}

/* Q = ACT_GRAD(dy, x, y) whose sum over rows S (the bias gradient) is computed in the same
 * pass, S written at Q's place. */
static int plan_actgrad_sum(const brisk_exec *ex, const life *l, const brisk_fusion_rules *r, brisk_fusion_plan *p,
                            int q) {
    const brisk_graph *g = ex->g;
    const brisk_node *nq = &g->nodes[q];
    int nd = nq->shape.ndim;
    if (nq->n_in < 3 || nq->dtype != BRISK_F32 || nd < 2 || l->pos[q] < 0 || p->fusion_at[q] >= 0) return 0;
    int sum = -1;
    for (int t = 0; t < g->n_nodes && sum < 0; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (l->pos[t] > l->pos[q] && nt->in[0] == q && (l->readers[t] < 1000 || r->actgrad_sum_deferred) &&
            !p->skip[t] &&
            nt->op == BRISK_OP_SUM && !nt->attr.keepdim && nt->attr.axes == (1u << (nd - 1)) - 1u)
            sum = t;
    }
    if (sum < 0) return 0;
    /* S written early where that is safe, else kept by the backend until S's own place (also
     * a sum read after the run: a parameter's gradient) */
    int deferred = l->readers[sum] >= 1000 || !early_write_ok(ex, l, sum, l->pos[q], -1, 0);
    if (deferred && !r->actgrad_sum_deferred) return 0;
    brisk_fusion f = {.kind = BRISK_FUSE_ACTGRAD_BGRAD, .at = q, .matmul = -1, .bias = -1, .act = -1, .grad = q,
                      .sum = sum, .ln = -1, .drop = -1, .sum_deferred = deferred};
    if (add_fusion(p, f)) return -1;
    if (deferred) p->fusion_at[sum] = p->n - 1;
    else p->skip[sum] = 1;
    return 0;
}

/* ---------------------------------------------------------------- residual + layernorm */

/* an ADD with both operands of its own shape (no broadcast) over rows of its last dim */
static int plain_add(const brisk_graph *g, const life *l, int a) {
    const brisk_node *n = &g->nodes[a];
    if (n->op != BRISK_OP_ADD || n->dtype != BRISK_F32 || l->pos[a] < 0 || n->shape.ndim < 1 ||
        brisk_shape_numel(&n->shape) == 0)
        return 0;
    for (int k = 0; k < 2; k++)
        if (!brisk_shape_equal(&g->nodes[n->in[k]].shape, &n->shape)) return 0;
    return 1;
}

/* Nothing scheduled in (from, to] writes over v's buffer, so v can be read at `to`. */
static int intact_until(const brisk_exec *ex, const life *l, int v, int from, int to) {
    const brisk_graph *g = ex->g;
    const brisk_node *nv = &g->nodes[base_of(g, v)];
    if (nv->storage != BRISK_STORE_ARENA) /* inputs, params, consts: nothing writes them during a run */
        return nv->storage == BRISK_STORE_INPUT || nv->storage == BRISK_STORE_PARAM || nv->storage == BRISK_STORE_CONST;
    if (nv->offset == SIZE_MAX) return 0;
    size_t lo = nv->offset, hi = nv->offset + nv->bytes;
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (nt->storage != BRISK_STORE_ARENA || nt->offset == SIZE_MAX || l->pos[t] <= from || l->pos[t] > to) continue;
        if (nt->offset < hi && nt->offset + nt->bytes > lo) return 0;
    }
    return 1;
}

static int add_norm(brisk_fusion_plan *p, int add, int ln, int grad) {
    brisk_fusion f = {.kind = grad >= 0 ? BRISK_FUSE_ADD_NORM_GRAD : BRISK_FUSE_ADD_NORM, .at = add, .matmul = -1,
                      .bias = -1, .act = -1, .grad = grad, .sum = -1, .ln = ln, .drop = -1};
    if (add_fusion(p, f)) return -1;
    p->skip[grad >= 0 ? grad : ln] = 1;
    return 0;
}

static int plan_norm(const brisk_exec *ex, life *l, brisk_fusion_plan *p, int a) {
    const brisk_graph *g = ex->g;
    if (!plain_add(g, l, a)) return 0;
    const brisk_node *na = &g->nodes[a];
    int s = l->pos[a];
    /* backward: the add consumes a norm gradient it alone reads */
    for (int k = 1; k >= 0; k--) {
        int q = na->in[k];
        const brisk_node *nq = &g->nodes[q];
        if (nq->op != BRISK_OP_LAYERNORM_GRAD_X || nq->n_in < 3 || p->skip[q] || l->pos[q] < 0 ||
            na->in[1 - k] == q || !only_reader_is(g, l, q, a) || !brisk_shape_equal(&nq->shape, &na->shape))
            continue;
        int ok = 1;
        for (int j = 0; j < 3 && ok; j++) ok = intact_until(ex, l, nq->in[j], l->pos[q], s);
        if (!ok) continue;
        for (int j = 0; j < 3; j++) {
            int b = base_of(g, nq->in[j]);
            if (l->last[b] < s) l->last[b] = s;
        }
        return add_norm(p, a, -1, q);
    }
    /* forward: a layer norm of the sum, written early; no GEMM in between, whose fused
     * epilogue could write early over it in turn. The norm may take the very buffer of an
     * operand the add reads last: the kernel reads each element before it writes it. */
    for (int t = 0; t < g->n_nodes; t++) {
        const brisk_node *nt = &g->nodes[t];
        if (nt->op != BRISK_OP_LAYERNORM || nt->n_in < 3 || nt->in[0] != a || l->pos[t] <= s || p->skip[t] ||
            !brisk_shape_equal(&nt->shape, &na->shape) || l->pos[base_of(g, nt->in[1])] >= s ||
            l->pos[base_of(g, nt->in[2])] >= s)
            continue;
        int reused = -1;
        for (int k = 0; k < 2; k++) {
            const brisk_node *op = &g->nodes[na->in[k]];
            if (op->storage == BRISK_STORE_ARENA && op->offset == nt->offset && op->bytes == nt->bytes &&
                l->last[na->in[k]] == s && l->readers[na->in[k]] < 1000)
                reused = na->in[k];
        }
        if (!early_write_ok(ex, l, t, s, reused, 1)) continue;
        int gemm_between = 0;
        for (int k = s + 1; k < l->pos[t] && !gemm_between; k++)
            gemm_between = g->nodes[ex->plan->train_order[k]].op == BRISK_OP_MATMUL;
        if (gemm_between) continue;
        return add_norm(p, a, t, -1);
    }
    return 0;
}

/* ---------------------------------------------------------------- broadcast + ReLU gradient */

/* s's elements each repeated over a run of E's trailing elements: s's shape is E's leading
 * dims, then ones (or nothing) */
static int trailing_broadcast(const brisk_shape *s, const brisk_shape *e) {
    if (s->ndim > e->ndim || s->ndim < 1) return 0;
    int lead = 0;
    while (lead < s->ndim && s->d[lead] == e->d[lead] && s->d[lead] != 1) lead++;
    for (int i = lead; i < s->ndim; i++)
        if (s->d[i] != 1) return 0;
    return lead >= 1 && brisk_shape_numel(s) > 0;
}

static int plan_expand_actgrad(const brisk_exec *ex, const life *l, brisk_fusion_plan *p, int q) {
    const brisk_graph *g = ex->g;
    const brisk_node *nq = &g->nodes[q];
    if (nq->attr.kind != BRISK_OP_RELU || nq->n_in < 3 || nq->dtype != BRISK_F32 || l->pos[q] < 0 ||
        p->fusion_at[q] >= 0)
        return 0;
    int e = nq->in[0];
    const brisk_node *ne = &g->nodes[e];
    if (ne->op != BRISK_OP_EXPAND || ne->n_in != 1 || ne->dtype != BRISK_F32 || l->pos[e] < 0 || p->skip[e] ||
        p->fusion_at[e] >= 0 || !only_reader_is(g, l, e, q) || nq->in[1] == e || nq->in[2] == e ||
        !brisk_shape_equal(&ne->shape, &nq->shape))
        return 0;
    int src = ne->in[0], s = l->pos[e];
    if (g->nodes[src].dtype != BRISK_F32 || !trailing_broadcast(&g->nodes[src].shape, &ne->shape) ||
        l->pos[base_of(g, nq->in[2])] >= s)
        return 0;
    /* Q may take s's bytes: the backend reads s first (fuse.c copies it where they overlap) */
    if (!early_write_ok_but(ex, l, q, s, e, 0, base_of(g, src))) return 0;
    brisk_fusion f = {.kind = BRISK_FUSE_EXPAND_ACTGRAD, .at = e, .matmul = e, .bias = -1, .act = -1, .grad = q,
                      .sum = -1, .ln = -1, .drop = -1};
    if (add_fusion(p, f)) return -1;
    p->skip[q] = 1;
    return 0;
}

/* ---------------------------------------------------------------- the plan */

void brisk_fusion_plan_free(brisk_fusion_plan *p) {
    free(p->skip);
    free(p->fusion_at);
    free(p->list);
    memset(p, 0, sizeof *p);
}

int brisk_fusion_count(const brisk_fusion_plan *p, brisk_fusion_kind kind) {
    int c = 0;
    for (int i = 0; i < p->n; i++) c += p->list[i].kind == kind;
    return c;
}

static int plan_all(const brisk_exec *ex, life *l, const brisk_fusion_rules *r, brisk_fusion_plan *p) {
    const brisk_graph *g = ex->g;
    const brisk_plan *pl = ex->plan;
    /* first: the backward pairs extend lifetimes the GEMM fusions' checks then respect */
    for (int s = 0; r->norms && s < pl->n_train; s++)
        if (plan_norm(ex, l, p, pl->train_order[s])) return -1;
    for (int s = 0; r->gemm_2d && s < pl->n_train; s++) {
        int id = pl->train_order[s];
        if (g->nodes[id].op == BRISK_OP_MATMUL && plan_forward(ex, l, r, p, id)) return -1;
    }
    for (int s = 0; r->conv_epilogue && s < pl->n_train; s++) {
        int id = pl->train_order[s];
        if (g->nodes[id].op == BRISK_OP_CONV2D && plan_conv(ex, l, r, p, id)) return -1;
    }
    for (int s = 0; s < pl->n_train; s++) {
        int id = pl->train_order[s];
        if (g->nodes[id].op != BRISK_OP_ACT_GRAD || p->skip[id]) continue;
        if (r->gemm_backward && r->gemm_2d && plan_backward(ex, l, r, p, id)) return -1;
        if (r->gemm_actgrad && r->gemm_2d && !p->skip[id] && plan_gemm_actgrad(ex, l, r, p, id)) return -1;
        if (r->expand_actgrad && !p->skip[id] && plan_expand_actgrad(ex, l, p, id)) return -1;
        if (r->actgrad_sum && !p->skip[id] && plan_actgrad_sum(ex, l, r, p, id)) return -1;
    }
    return 0;
}

int brisk_fusion_plan_build(const brisk_exec *ex, const brisk_fusion_rules *rules, brisk_fusion_plan *p) {
    const brisk_graph *g = ex->g;
    memset(p, 0, sizeof *p);
    p->skip = calloc((size_t)g->n_nodes + 1, 1);
    p->fusion_at = malloc(sizeof(int) * ((size_t)g->n_nodes + 1));
    life l = {0};
    int rc = -1;
    if (p->skip && p->fusion_at) {
        for (int i = 0; i < g->n_nodes; i++) p->fusion_at[i] = -1;
        rc = life_build(ex, &l) || plan_all(ex, &l, rules, p) ? -1 : 0;
    }
    life_free(&l);
    if (rc) brisk_fusion_plan_free(p);
    return rc;
}
