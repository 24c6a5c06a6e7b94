/* Index ops: GATHER (embedding lookup, rows of a table by i32 index; brisk_embedding is
 * the same for a [V, D] table) with its
 * gradient SCATTER_ADD; the segment sums of graph networks (SEGMENT_SUM over indices
 * sorted by segment, SCATTER_ADD over any order), whose gradient is GATHER; and
 * SINUSOIDAL (the timestep/position embedding) with SINUSOIDAL_GRAD when its input is
 * a float. */
#include "ops/ops_internal.h"

#include <stdlib.h>

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

int brisk_embedding(brisk_graph *g, int table, int idx) {
    int ids[2] = {table, idx};
    if (brisk_ops_check(g, "embedding", ids, 2)) return -1;
    const brisk_node *t = &g->nodes[table], *ix = &g->nodes[idx];
    if (t->dtype != BRISK_F32 || ix->dtype != BRISK_I32 || t->shape.ndim != 2) {
        char bt[BRISK_SHAPE_STR], bi[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "embedding: table %s %s, idx %s %s (expected an f32 table [V, D] and i32 indices)",
                                brisk_dtype_name(t->dtype), brisk_shape_str(&t->shape, bt, sizeof bt),
                                brisk_dtype_name(ix->dtype), brisk_shape_str(&ix->shape, bi, sizeof bi));
    }
    return brisk_gather(g, table, idx);
}

int brisk_bw_gather(brisk_graph *g, int node, int dy, int which) {
    if (which != 0) return -1; /* indices are integers */
    brisk_node n = g->nodes[node];
    int ids[2] = {dy, n.in[1]};
    brisk_attr at = brisk_attr_none();
    at.shape2 = g->nodes[n.in[0]].shape;
    return brisk_graph_append(g, BRISK_OP_SCATTER_ADD, ids, 2, BRISK_F32, at.shape2, &at);
}

/* The gradient of a segment sum (or scatter-add) with respect to its rows: each row gets
 * its segment's gradient back, a GATHER by the same indices. */
int brisk_bw_segment_sum(brisk_graph *g, int node, int dy, int which) {
    if (which != 0) return -1;
    brisk_node n = g->nodes[node];
    int ids[2] = {dy, n.in[1]};
    return brisk_graph_append(g, BRISK_OP_GATHER, ids, 2, BRISK_F32, g->nodes[n.in[0]].shape, NULL);
}

/* The values of an i32 CONST node, or NULL when idx is not one. */
static const int32_t *const_i32(const brisk_graph *g, int idx) {
    const brisk_node *n = &g->nodes[idx];
    if (n->op != BRISK_OP_CONST || n->dtype != BRISK_I32) return NULL;
    return (const int32_t *)(const void *)(g->const_data + n->offset);
}

int brisk_segment_sum(brisk_graph *g, int x, int idx, int64_t segments, int sorted) {
    int ids[2] = {x, idx};
    if (brisk_ops_check(g, "segment_sum", ids, 2)) return -1;
    const brisk_node *nx = &g->nodes[x], *ni = &g->nodes[idx];
    char bx[BRISK_SHAPE_STR], bi[BRISK_SHAPE_STR];
    brisk_shape_str(&nx->shape, bx, sizeof bx);
    brisk_shape_str(&ni->shape, bi, sizeof bi);
    if (nx->dtype != BRISK_F32 || ni->dtype != BRISK_I32 || nx->shape.ndim < 1 || ni->shape.ndim != 1 ||
        ni->shape.d[0] != nx->shape.d[0])
        return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                "segment_sum: x %s %s, idx %s %s (expected f32 rows [I, ...] and i32 indices [I])",
                                brisk_dtype_name(nx->dtype), bx, brisk_dtype_name(ni->dtype), bi);
    if (segments < 1 || segments > INT32_MAX)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "segment_sum: %lld segments (expected 1 to %d)",
                                (long long)segments, INT32_MAX);
    const int32_t *v = const_i32(g, idx);
    for (int64_t i = 0; v && i < ni->shape.d[0]; i++) {
        if (v[i] < 0 || v[i] >= segments)
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "segment_sum: index %d at position %lld is outside [0, %lld)",
                                    (int)v[i], (long long)i, (long long)segments);
        if (sorted && i > 0 && v[i] < v[i - 1])
            return brisk_graph_fail(g, BRISK_ERR_INVALID,
                                    "segment_sum: indices not sorted (%d at position %lld after %d); pass sorted = 0",
                                    (int)v[i], (long long)i, (int)v[i - 1]);
    }
    brisk_attr at = brisk_attr_none();
    at.shape2 = nx->shape;
    at.shape2.d[0] = segments;
    return brisk_graph_append(g, sorted ? BRISK_OP_SEGMENT_SUM : BRISK_OP_SCATTER_ADD, ids, 2, BRISK_F32, at.shape2,
                              &at);
}

int brisk_segment_mean(brisk_graph *g, int x, int idx, int64_t segments, int sorted) {
    int sum = brisk_segment_sum(g, x, idx, segments, sorted);
    if (sum < 0) return -1;
    const int32_t *v = const_i32(g, idx);
    if (!v)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "segment_mean: idx (node %d) must be an i32 const", idx);
    int64_t n = g->nodes[idx].shape.d[0];
    float *inv = calloc((size_t)segments, sizeof *inv);
    if (!inv) return brisk_graph_fail(g, BRISK_ERR_NOMEM, "segment_mean: out of memory (%lld segments)",
                                      (long long)segments);
    for (int64_t i = 0; i < n; i++) inv[v[i]] += 1.0f;
    for (int64_t s = 0; s < segments; s++) inv[s] = inv[s] > 0 ? 1.0f / inv[s] : 0.0f;
    brisk_shape cs = g->nodes[sum].shape; /* [V, 1, ...]: broadcasts over the row */
    for (int i = 1; i < cs.ndim; i++) cs.d[i] = 1;
    int c = brisk_const(g, NULL, BRISK_F32, cs, inv);
    free(inv);
    return brisk_mul(g, sum, c);
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
