/* Linear algebra ops: MATMUL (optionally transposed, optionally batched) and
 * BIAS_ADD, with their shape rules and backward rules.
 *
 * matmul: out[..., M, N] = op(a)[..., M, K] @ op(b)[K, N], op = transpose when the
 * flag is set. b is either 2-D (one matrix shared by every batch entry of a) or has
 * a's batch dims. The gradients are matmuls again:
 *   da = dy @ op(b)^T        db = op(a)^T @ dy   (then transposed back when a flag is set)
 * and a shared 2-D b sums db over the batch by folding the batch into the rows. */
#include "ops/ops_internal.h"

#include <stdio.h>

int brisk_matmul(brisk_graph *g, int a, int b, int trans_a, int trans_b) {
    int ids[2] = {a, b};
    if (brisk_ops_check_dtype(g, "matmul", ids, 2, BRISK_F32)) return -1;
    brisk_shape sa = g->nodes[a].shape, sb = g->nodes[b].shape;
    char ba[BRISK_SHAPE_STR], bb[BRISK_SHAPE_STR], tr[40] = "";
    brisk_shape_str(&sa, ba, sizeof ba);
    brisk_shape_str(&sb, bb, sizeof bb);
    if (trans_a || trans_b)
        snprintf(tr, sizeof tr, " (trans_a %d, trans_b %d)", !!trans_a, !!trans_b);
    if (sa.ndim < 2 || sb.ndim < 2)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "matmul: operands must be at least 2-D: a %s x b %s",
                                ba, bb);
    if (sb.ndim != 2 && sb.ndim != sa.ndim)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "matmul: b must be 2-D or have a's batch dims: a %s x b %s", ba, bb);
    int nd = sa.ndim;
    if (sb.ndim == nd)
        for (int i = 0; i < nd - 2; i++)
            if (sa.d[i] != sb.d[i])
                return brisk_graph_fail(g, BRISK_ERR_SHAPE, "matmul: batch dims differ: a %s x b %s",
                                        ba, bb);
    int nb = sb.ndim;
    int64_t m = trans_a ? sa.d[nd - 1] : sa.d[nd - 2], k = trans_a ? sa.d[nd - 2] : sa.d[nd - 1];
    int64_t kb = trans_b ? sb.d[nb - 1] : sb.d[nb - 2], n = trans_b ? sb.d[nb - 2] : sb.d[nb - 1];
    if (k != kb)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "matmul: inner dims differ: a %s x b %s%s", ba, bb, tr);
    brisk_shape out = sa;
    out.d[nd - 2] = m;
    out.d[nd - 1] = n;
    brisk_attr at = brisk_attr_none();
    at.trans_a = !!trans_a;
    at.trans_b = !!trans_b;
    return brisk_graph_append(g, BRISK_OP_MATMUL, ids, 2, BRISK_F32, out, &at);
}

/* x with its last two dims swapped (a copy). */
static int transpose_last2(brisk_graph *g, int x) {
    if (x < 0) return -1;
    int nd = g->nodes[x].shape.ndim, perm[BRISK_MAX_DIMS];
    for (int i = 0; i < nd; i++) perm[i] = i;
    perm[nd - 2] = nd - 1;
    perm[nd - 1] = nd - 2;
    return brisk_transpose(g, x, perm);
}

/* x [..., R, C] viewed as [rows, C]. */
static int fold_rows(brisk_graph *g, int x) {
    if (x < 0) return -1;
    brisk_shape s = g->nodes[x].shape;
    int64_t c = s.d[s.ndim - 1];
    return brisk_reshape(g, x, brisk_shape2(brisk_shape_numel(&s) / c, c));
}

int brisk_bw_matmul(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    int a = n.in[0], b = n.in[1], ta = n.attr.trans_a, tb = n.attr.trans_b;
    int shared_b = g->nodes[b].shape.ndim == 2 && g->nodes[a].shape.ndim > 2;
    if (which == 0) {
        if (!ta) return brisk_matmul(g, dy, b, 0, !tb);          /* dy @ op(b)^T: [..., M, K] */
        if (!shared_b) return brisk_matmul(g, b, dy, tb, 1);     /* op(b) @ dy^T: [..., K, M] */
        /* A 2-D left operand cannot meet a batched right one, so transpose afterwards. */
        return transpose_last2(g, brisk_matmul(g, dy, b, 0, !tb));
    }
    if (!shared_b)
        return tb ? brisk_matmul(g, dy, a, 1, ta)   /* db stored [.., N, K] = dy^T @ op(a) */
                  : brisk_matmul(g, a, dy, !ta, 0); /* db [.., K, N] = op(a)^T @ dy */
    /* b is shared over the batch: fold the batch into the rows, and one matmul both
     * multiplies and sums over the batch. A transposed a is made row-major first. */
    int a2 = fold_rows(g, ta ? transpose_last2(g, a) : a); /* [rows, K] */
    int dy2 = fold_rows(g, dy);                             /* [rows, N] */
    return tb ? brisk_matmul(g, dy2, a2, 1, 0) : brisk_matmul(g, a2, dy2, 1, 0);
}

int brisk_bias_add(brisk_graph *g, int x, int b) {
    int ids[2] = {x, b};
    if (brisk_ops_check_dtype(g, "bias_add", ids, 2, BRISK_F32)) return -1;
    brisk_shape sx = g->nodes[x].shape, sb = g->nodes[b].shape;
    if (sx.ndim < 1 || sb.ndim != 1 || sb.d[0] != sx.d[sx.ndim - 1]) {
        char bx[BRISK_SHAPE_STR], bbuf[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "bias_add: bias %s does not match the last dim of x %s (expected [%lld])",
                                brisk_shape_str(&sb, bbuf, sizeof bbuf), brisk_shape_str(&sx, bx, sizeof bx),
                                sx.ndim ? (long long)sx.d[sx.ndim - 1] : 0LL);
    }
    return brisk_graph_append(g, BRISK_OP_BIAS_ADD, ids, 2, BRISK_F32, sx, NULL);
}

int brisk_bw_bias_add(brisk_graph *g, int node, int dy, int which) {
    (void)node;
    return which == 0 ? dy : brisk_ops_sum_rows(g, dy);
}
