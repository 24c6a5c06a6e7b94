/* Shape and data-movement ops: CONCAT, SLICE, RESHAPE (a view the planner aliases; flatten
 * is one), TRANSPOSE and CAST, with their backward rules: concat's gradient is slices of
 * dy, slice's is SLICE_GRAD (dy placed in zeros), reshape's and transpose's are their
 * inverses, cast's is the cast back. */
#include "ops/ops_internal.h"

#include <stdio.h>

/* Python-style negative axis; -1 (error recorded) when out of range. */
static int norm_axis(brisk_graph *g, const char *op, int axis, const brisk_shape *s) {
    int a = axis < 0 ? axis + s->ndim : axis;
    if (a < 0 || a >= s->ndim) {
        char b[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: axis %d out of range for x %s", op, axis,
                                brisk_shape_str(s, b, sizeof b));
    }
    return a;
}

int brisk_concat(brisk_graph *g, const int *xs, int n, int axis) {
    if (!g || g->err.code != BRISK_OK) return -1;
    if (!xs || n < 1 || n > BRISK_MAX_INPUTS)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "concat: %d inputs (expected 1 to %d)", n,
                                BRISK_MAX_INPUTS);
    if (brisk_ops_check(g, "concat", xs, n)) return -1;
    brisk_shape out = g->nodes[xs[0]].shape;
    brisk_dtype dt = g->nodes[xs[0]].dtype;
    int a = norm_axis(g, "concat", axis, &out);
    if (a < 0) return -1;
    for (int i = 1; i < n; i++) {
        const brisk_node *x = &g->nodes[xs[i]];
        int ok = x->dtype == dt && x->shape.ndim == out.ndim;
        for (int d = 0; ok && d < out.ndim; d++) ok = d == a || x->shape.d[d] == out.d[d];
        if (!ok) {
            char b0[BRISK_SHAPE_STR], bi[BRISK_SHAPE_STR];
            return brisk_graph_fail(g, BRISK_ERR_SHAPE,
                                    "concat: input %d %s %s does not match input 0 %s %s outside axis %d", i,
                                    brisk_dtype_name(x->dtype), brisk_shape_str(&x->shape, bi, sizeof bi),
                                    brisk_dtype_name(dt), brisk_shape_str(&g->nodes[xs[0]].shape, b0, sizeof b0), a);
        }
        out.d[a] += x->shape.d[a];
    }
    brisk_attr at = brisk_attr_none();
    at.axis = a;
    return brisk_graph_append(g, BRISK_OP_CONCAT, xs, n, dt, out, &at);
}

int brisk_bw_concat(brisk_graph *g, int node, int dy, int which) {
    brisk_node n = g->nodes[node];
    int a = n.attr.axis;
    int64_t start = 0;
    for (int i = 0; i < which; i++) start += g->nodes[n.in[i]].shape.d[a];
    return brisk_slice(g, dy, a, start, g->nodes[n.in[which]].shape.d[a]);
}

int brisk_slice(brisk_graph *g, int x, int axis, int64_t start, int64_t len) {
    if (brisk_ops_check(g, "slice", &x, 1)) return -1;
    brisk_shape s = g->nodes[x].shape;
    int a = norm_axis(g, "slice", axis, &s);
    if (a < 0) return -1;
    if (start < 0 || len < 1 || start > s.d[a] - len) {
        char b[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "slice: [%lld, %lld) is outside axis %d of x %s",
                                (long long)start, (long long)start + (long long)len, a,
                                brisk_shape_str(&s, b, sizeof b));
    }
    brisk_attr at = brisk_attr_none();
    at.axis = a;
    at.i0 = start;
    at.i1 = len;
    s.d[a] = len;
    return brisk_graph_append(g, BRISK_OP_SLICE, &x, 1, g->nodes[x].dtype, s, &at);
}

int brisk_bw_slice(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    brisk_attr at = brisk_attr_none();
    at.axis = n.attr.axis;
    at.i0 = n.attr.i0;
    at.shape2 = g->nodes[n.in[0]].shape;
    return brisk_graph_append(g, BRISK_OP_SLICE_GRAD, &dy, 1, BRISK_F32, at.shape2, &at);
}

int brisk_reshape(brisk_graph *g, int x, brisk_shape s) {
    if (brisk_ops_check(g, "reshape", &x, 1)) return -1;
    brisk_shape sx = g->nodes[x].shape;
    if (s.ndim < 0 || s.ndim > BRISK_MAX_DIMS || brisk_shape_numel(&s) != brisk_shape_numel(&sx)) {
        char bx[BRISK_SHAPE_STR], bs[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "reshape: x %s cannot be viewed as %s (element counts differ)",
                                brisk_shape_str(&sx, bx, sizeof bx), brisk_shape_str(&s, bs, sizeof bs));
    }
    brisk_attr at = brisk_attr_none();
    at.shape2 = s;
    return brisk_graph_append(g, BRISK_OP_RESHAPE, &x, 1, g->nodes[x].dtype, s, &at);
}

int brisk_flatten(brisk_graph *g, int x, int start_dim) {
    if (brisk_ops_check(g, "flatten", &x, 1)) return -1;
    brisk_shape s = g->nodes[x].shape;
    int a = norm_axis(g, "flatten", start_dim, &s);
    if (a < 0) return -1;
    brisk_shape out = s;
    out.ndim = a + 1;
    for (int i = a + 1; i < s.ndim; i++) out.d[a] *= s.d[i];
    return brisk_reshape(g, x, out);
}

int brisk_bw_reshape(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_shape xs = g->nodes[g->nodes[node].in[0]].shape;
    return brisk_reshape(g, dy, xs);
}

int brisk_transpose(brisk_graph *g, int x, const int *perm) {
    if (brisk_ops_check(g, "transpose", &x, 1)) return -1;
    brisk_shape sx = g->nodes[x].shape, out = sx;
    int seen[BRISK_MAX_DIMS] = {0}, ok = perm != NULL;
    for (int i = 0; ok && i < sx.ndim; i++) {
        ok = perm[i] >= 0 && perm[i] < sx.ndim && !seen[perm[i]];
        if (ok) seen[perm[i]] = 1, out.d[i] = sx.d[perm[i]];
    }
    if (!ok) {
        char bx[BRISK_SHAPE_STR], bp[64] = "NULL";
        if (perm) {
            size_t k = (size_t)snprintf(bp, sizeof bp, "(");
            for (int i = 0; i < sx.ndim && k < sizeof bp; i++)
                k += (size_t)snprintf(bp + k, sizeof bp - k, i ? ", %d" : "%d", perm[i]);
            if (k < sizeof bp) snprintf(bp + k, sizeof bp - k, ")");
        }
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "transpose: perm %s is not a permutation of the dims of x %s",
                                bp, brisk_shape_str(&sx, bx, sizeof bx));
    }
    brisk_attr at = brisk_attr_none();
    for (int i = 0; i < sx.ndim; i++) at.perm[i] = perm[i];
    return brisk_graph_append(g, BRISK_OP_TRANSPOSE, &x, 1, g->nodes[x].dtype, out, &at);
}

int brisk_bw_transpose(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_node n = g->nodes[node];
    int inv[BRISK_MAX_DIMS];
    for (int i = 0; i < n.shape.ndim; i++) inv[n.attr.perm[i]] = i;
    return brisk_transpose(g, dy, inv);
}

int brisk_cast(brisk_graph *g, int x, brisk_dtype dt) {
    if (brisk_ops_check(g, "cast", &x, 1)) return -1;
    if ((unsigned)dt >= BRISK_DTYPE_COUNT)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "cast: dtype %d is not a dtype", (int)dt);
    return brisk_graph_append(g, BRISK_OP_CAST, &x, 1, dt, g->nodes[x].shape, NULL);
}

static int is_float(brisk_dtype dt) { return dt == BRISK_F32 || dt == BRISK_F16 || dt == BRISK_BF16; }

int brisk_bw_cast(brisk_graph *g, int node, int dy, int which) {
    (void)which;
    brisk_dtype from = g->nodes[g->nodes[node].in[0]].dtype;
    if (!is_float(from) || !is_float(g->nodes[node].dtype)) return -1;
    return brisk_cast(g, dy, from);
}
