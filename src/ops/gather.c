/* Index ops: GATHER (embedding lookup, rows of a table by i32 index) with its
 * gradient SCATTER_ADD, and SINUSOIDAL (the timestep/position embedding) with
 * SINUSOIDAL_GRAD when its input is a float. */
#include "ops/ops_internal.h"

int brisk_gather(brisk_graph *g, int table, int idx) {
    int ids[2] = {table, idx};
    if (brisk_ops_check(g, "gather", ids, 2)) return -1;
    const brisk_node *t = &g->nodes[table], *ix = &g->nodes[idx];
    char bt[BRISK_SHAPE_STR], bi[BRISK_SHAPE_STR];
    brisk_shape_str(&t->shape, bt, sizeof bt);
    brisk_shape_str(&ix->shape, bi, sizeof bi);
    if (t->dtype != BRISK_F32 || ix->dtype != BRISK_I32 || t->shape.ndim < 1)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "gather: table %s %s, idx %s %s (expected an f32 table [V, ...] and i32 indices)",
                                brisk_dtype_name(t->dtype), bt, brisk_dtype_name(ix->dtype), bi);
    int nd = ix->shape.ndim + t->shape.ndim - 1;
    if (nd > BRISK_MAX_DIMS)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "gather: table %s with idx %s gives %d dims (at most %d)",
                                bt, bi, nd, BRISK_MAX_DIMS);
    brisk_shape out = ix->shape;
    for (int i = 1; i < t->shape.ndim; i++) out.d[out.ndim++] = t->shape.d[i];
    return brisk_graph_append(g, BRISK_OP_GATHER, ids, 2, BRISK_F32, out, NULL);
}

int brisk_bw_gather(brisk_graph *g, int node, int dy, int which) {
    if (which != 0) return -1; /* indices are integers */
    brisk_node n = g->nodes[node];
    int ids[2] = {dy, n.in[1]};
    brisk_attr at = brisk_attr_none();
    at.shape2 = g->nodes[n.in[0]].shape;
    return brisk_graph_append(g, BRISK_OP_SCATTER_ADD, ids, 2, BRISK_F32, at.shape2, &at);
}

int brisk_sinusoidal(brisk_graph *g, int t, int dim) {
    if (brisk_ops_check(g, "sinusoidal", &t, 1)) return -1;
    const brisk_node *x = &g->nodes[t];
    if ((x->dtype != BRISK_F32 && x->dtype != BRISK_I32) || x->shape.ndim != 1) {
        char b[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "sinusoidal: t %s %s (expected f32 or i32 [N])",
                                brisk_dtype_name(x->dtype), brisk_shape_str(&x->shape, b, sizeof b));
    }
    if (dim < 2 || dim % 2)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "sinusoidal: dim %d (expected an even dim >= 2)", dim);
    brisk_attr at = brisk_attr_none();
    at.i0 = dim;
    return brisk_graph_append(g, BRISK_OP_SINUSOIDAL, &t, 1, BRISK_F32, brisk_shape2(x->shape.d[0], dim), &at);
}

int brisk_bw_sinusoidal(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    const brisk_node *t = &g->nodes[n.in[0]];
    if (t->dtype != BRISK_F32) return -1; /* integer timesteps have no gradient */
    int ids[2] = {dy, n.in[0]};
    brisk_shape s = t->shape;
    return brisk_graph_append(g, BRISK_OP_SINUSOIDAL_GRAD, ids, 2, BRISK_F32, s, &n.attr);
}
