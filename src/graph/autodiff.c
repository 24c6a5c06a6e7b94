/* Reverse-mode autodiff as a graph transformation: walks the forward graph from the
 * loss backwards and appends, for each op, the nodes of its gradient (the op
 * table's backward rule), summing the contributions of nodes with several
 * consumers with ADD; then one GRAD_ACCUM per parameter writes the gradient into
 * the gradient arena. Gradients are ordinary nodes: planned, fused and run like
 * the forward. A recompute segment (graph.h) is appended again just before its
 * gradient, and its nodes' rules read the copies, so its activations are not kept. */

#include "brisk/graph.h"

#include <stdlib.h>
#include <string.h>

static brisk_status fail(brisk_graph *g, brisk_error *err) {
    brisk_graph_error(g, err);
    return g->err.code == BRISK_OK ? BRISK_ERR_INTERNAL : g->err.code;
}

/* Runs input `which` of node i through its op's backward rule and adds the result
 * into grad[]. The rule reads node `rule_node`: i itself, or its recomputed copy (whose
 * inputs are the copies of i's inputs), so the gradient is the same. 0 on success
 * (including "this input takes no gradient"). */
static int propagate(brisk_graph *g, int *grad, int i, int rule_node, int which) {
    brisk_node n = g->nodes[i];
    int x = n.in[which];
    int (*bw)(brisk_graph *, int, int, int) = brisk_op_table[n.op].backward;
    if (!bw)
        return brisk_graph_fail(g, BRISK_ERR_UNSUPPORTED, "backward: op %s (node %d) has no backward rule",
                                brisk_op_name(n.op), i);
    int gi = bw(g, rule_node, grad[i], which);
    if (gi < 0) return g->err.code == BRISK_OK ? 0 : -1;
    const brisk_node *gx = &g->nodes[gi], *nx = &g->nodes[x];
    if (!brisk_shape_equal(&gx->shape, &nx->shape) || gx->dtype != nx->dtype) {
        char b1[BRISK_SHAPE_STR], b2[BRISK_SHAPE_STR];
        return brisk_graph_fail(g, BRISK_ERR_INTERNAL,
                                "backward: %s rule gave a %s %s gradient for input %d, a %s %s",
                                brisk_op_name(n.op), brisk_dtype_name(gx->dtype),
                                brisk_shape_str(&gx->shape, b1, sizeof b1), which, brisk_dtype_name(nx->dtype),
                                brisk_shape_str(&nx->shape, b2, sizeof b2));
    }
    grad[x] = grad[x] < 0 ? gi : brisk_add(g, grad[x], gi);
    return grad[x] < 0 ? -1 : 0;
}

static int is_random(brisk_op op) {
    return op == BRISK_OP_DROPOUT || op == BRISK_OP_RANDN || op == BRISK_OP_RAND_UNIFORM || op == BRISK_OP_RANDINT;
}

/* Appends the forward of segment `seg` (its nodes in [0, nf), in order) again, inputs
 * from inside the segment rewired to their copies: copy[j] for each node copied. */
static int recompute_segment(brisk_graph *g, int nf, int seg, int *copy) {
    for (int j = 0; j < nf; j++) {
        brisk_node n = g->nodes[j];
        if (n.segment != seg || is_random(n.op)) continue;
        int in[BRISK_MAX_INPUTS];
        for (int k = 0; k < n.n_in; k++) in[k] = copy[n.in[k]] >= 0 ? copy[n.in[k]] : n.in[k];
        int c = brisk_graph_append(g, n.op, in, n.n_in, n.dtype, n.shape, &n.attr);
        if (c < 0) return -1;
        g->nodes[c].segment = 0;
        copy[j] = c;
    }
    return 0;
}

brisk_status brisk_backward(brisk_graph *g, int loss, brisk_error *err) {
    if (!g) return brisk_errorf(err, BRISK_ERR_INVALID, "backward: graph is NULL");
    if (g->err.code != BRISK_OK) {
        brisk_graph_error(g, err);
        brisk_error_prefix(err, "backward: the graph has a builder error");
        return g->err.code;
    }
    if (g->grad_of) return brisk_errorf(err, BRISK_ERR_INVALID, "backward: already ran on this graph");
    if (loss < 0 || loss >= g->n_nodes)
        return brisk_errorf(err, BRISK_ERR_INVALID, "backward: loss %d is not a node", loss);
    const brisk_node *ln = &g->nodes[loss];
    if (ln->dtype != BRISK_F32 || brisk_shape_numel(&ln->shape) != 1) {
        char b[BRISK_SHAPE_STR];
        return brisk_errorf(err, BRISK_ERR_SHAPE, "backward: loss (node %d, %s) is %s %s, expected an f32 scalar",
                            loss, brisk_op_name(ln->op), brisk_dtype_name(ln->dtype),
                            brisk_shape_str(&ln->shape, b, sizeof b));
    }

    if (g->cur_segment) return brisk_errorf(err, BRISK_ERR_INVALID, "backward: recompute segment %d is still open",
                                            g->cur_segment);
    int nf = g->n_nodes;
    uint8_t *need = calloc((size_t)nf, 1), *emitted = calloc((size_t)g->n_segments + 1, 1);
    int *grad = malloc((size_t)nf * sizeof *grad), *copy = malloc((size_t)nf * sizeof *copy);
    if (!need || !grad || !copy || !emitted) {
        free(need);
        free(grad);
        free(copy);
        free(emitted);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "backward: out of memory for %d nodes", nf);
    }
    for (int i = 0; i < nf; i++) grad[i] = copy[i] = -1;
    need[loss] = 1;
    for (int i = loss; i >= 0; i--)
        if (need[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) need[g->nodes[i].in[j]] = 1;

    g->n_forward = nf;
    g->loss = loss;
    brisk_status st = BRISK_OK;
    if (g->nodes[loss].requires_grad) {
        float one = 1.0f;
        grad[loss] = brisk_const(g, NULL, BRISK_F32, g->nodes[loss].shape, &one);
        if (grad[loss] < 0) { st = fail(g, err); goto done; }
    }
    /* Nodes are in topological order, so when node i is reached every consumer
     * (all at higher ids) has already added its contribution to grad[i]. */
    for (int i = loss; i >= 0; i--) {
        if (!need[i] || grad[i] < 0 || !g->nodes[i].requires_grad) continue;
        int seg = g->nodes[i].segment;
        if (seg > 0 && seg <= g->n_segments && !emitted[seg]) { /* the segment's last node: recompute it here */
            emitted[seg] = 1;
            if (recompute_segment(g, nf, seg, copy)) { st = fail(g, err); goto done; }
        }
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            if (!g->nodes[g->nodes[i].in[j]].requires_grad) continue;
            if (propagate(g, grad, i, copy[i] >= 0 ? copy[i] : i, j)) { st = fail(g, err); goto done; }
        }
    }
    for (int k = 0; k < g->n_params; k++) {
        if (g->params[k].buffer) continue; /* its gradient slot stays zero */
        int p = g->params[k].node, src = grad[p];
        if (src < 0) src = brisk_scale(g, p, 0.0f, 0.0f); /* the loss does not reach it */
        int id = src < 0 ? -1 : brisk_graph_append(g, BRISK_OP_GRAD_ACCUM, &src, 1, BRISK_F32,
                                                     g->params[k].shape, NULL);
        if (id < 0) { st = fail(g, err); goto done; }
        g->nodes[id].storage = BRISK_STORE_GRAD;
        g->nodes[id].offset = g->params[k].offset * sizeof(float);
        g->params[k].grad_node = id;
    }
    g->grad_of = malloc((size_t)g->n_nodes * sizeof *g->grad_of);
    if (!g->grad_of) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "backward: out of memory");
        goto done;
    }
    for (int i = 0; i < g->n_nodes; i++) g->grad_of[i] = i < nf ? grad[i] : -1;
done:
    free(need);
    free(grad);
    free(copy);
    free(emitted);
    return st;
}
