/* The mesh GNN of bench/WORKLOADS.md (MeshGNN in bench/reference/models.py): encode the grid
 * onto a mesh, N message-passing layers on the mesh, decode back to the grid, predict the
 * next-step change. Parameter names are models.py's module names.
 *
 * A batch is one disjoint union of B copies of the graph: node features are [B * nodes,
 * latent] and the edge indices are offset by b * nodes per copy, so one GATHER and one
 * segment sum serve the whole batch. Edge sets come ordered by receiver (gnn_graph.c), so
 * the batched receiver indices are sorted too and every aggregation is a SEGMENT_SUM.
 *
 * The "concat trick": models.py's edge MLP starts with Linear(3L, L) over [e, hs[src],
 * hd[dst]]. Here its weight is sliced into the three [L, L] blocks, hs and hd are projected
 * on their nodes (B * nodes rows, not B * edges) and the projections gathered to the edges,
 * so the [edges, 3L] concatenation is never materialised and the node projections cost a
 * fraction of the edge one. The node MLP's Linear(2L, L) over [hd, agg] is split the same
 * way. The edge embeddings are batch-independent: they stay [edges, L] and broadcast until
 * the first residual makes them per-sample. */
#include "brisk/nn.h"
#include "nn/nn_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct gnn_ctx {
    brisk_graph *g;
    int64_t B, L;
} gnn_ctx;

/* models.mlp(in, out): Linear(in, out), SiLU, Linear(out, out), [LayerNorm(out)] on x [rows, in]. */
static int mlp(gnn_ctx *c, int x, int64_t in, int64_t out, int norm, const char *prefix) {
    char name[BRISK_NAME_MAX];
    snprintf(name, sizeof name, "%s.0", prefix);
    int h = brisk_silu(c->g, brisk_nn_linear(c->g, x, in, out, name));
    snprintf(name, sizeof name, "%s.2", prefix);
    h = brisk_nn_linear(c->g, h, out, out, name);
    if (!norm) return h;
    snprintf(name, sizeof name, "%s.3", prefix);
    return brisk_nn_layernorm(c->g, h, out, name);
}

/* The second half of an MLP whose first Linear's pre-activation is `pre` (no bias yet). */
static int mlp_rest(gnn_ctx *c, int pre, int bias, const char *prefix) {
    char name[BRISK_NAME_MAX];
    int h = brisk_silu(c->g, brisk_bias_add(c->g, pre, bias));
    snprintf(name, sizeof name, "%s.2", prefix);
    h = brisk_nn_linear(c->g, h, c->L, c->L, name);
    snprintf(name, sizeof name, "%s.3", prefix);
    return brisk_nn_layernorm(c->g, h, c->L, name);
}

/* The first Linear(parts * L, L) of an MLP as `parts` [L, L] weight blocks and its bias. */
static void split_linear(gnn_ctx *c, int parts, const char *prefix, int *blocks, int *bias) {
    char name[BRISK_NAME_MAX];
    float bound = 1.0f / sqrtf((float)(parts * c->L));
    snprintf(name, sizeof name, "%s.0.weight", prefix);
    int w = brisk_param(c->g, name, brisk_shape2(c->L, parts * c->L), BRISK_INIT_UNIFORM, bound, 1);
    snprintf(name, sizeof name, "%s.0.bias", prefix);
    *bias = brisk_param(c->g, name, brisk_shape1(c->L), BRISK_INIT_UNIFORM, bound, 0);
    for (int i = 0; i < parts; i++) blocks[i] = brisk_slice(c->g, w, 1, i * c->L, c->L);
}

/* x [B * E, L] + y, where y is [B * E, L] or batch-independent [E, L]. */
static int add_edges(gnn_ctx *c, int x, int y, int64_t E) {
    if (c->g->nodes[y].shape.d[0] == c->B * E || c->B == 1) return brisk_add(c->g, x, y);
    int s = brisk_add(c->g, brisk_reshape(c->g, x, brisk_shape3(c->B, E, c->L)), y);
    return brisk_reshape(c->g, s, brisk_shape2(c->B * E, c->L));
}

typedef struct edge_set {
    int src, dst;      /* batched i32 consts [B * E] */
    int64_t E, n_src, n_dst;
} edge_set;

/* models.Interaction: e' = e + edge([e, hs[src], hd[dst]]), hd' = hd + node([hd, sum of
 * e' into each receiver]). e is [B * E, L] or [E, L]; hs, hd are [B * nodes, L]. */
static void interaction(gnn_ctx *c, const edge_set *es, int *e, int hs, int *hd, const char *prefix) {
    brisk_graph *g = c->g;
    char name[BRISK_NAME_MAX];
    int we[3], be, wn[2], bn;
    snprintf(name, sizeof name, "%s.edge", prefix);
    split_linear(c, 3, name, we, &be);
    int pre = brisk_add(g, brisk_gather(g, brisk_matmul(g, hs, we[1], 0, 1), es->src),
                        brisk_gather(g, brisk_matmul(g, *hd, we[2], 0, 1), es->dst));
    pre = add_edges(c, pre, brisk_matmul(g, *e, we[0], 0, 1), es->E);
    int upd = mlp_rest(c, pre, be, name);
    *e = add_edges(c, upd, *e, es->E);
    int agg = brisk_segment_sum(g, *e, es->dst, c->B * es->n_dst, 1);
    snprintf(name, sizeof name, "%s.node", prefix);
    split_linear(c, 2, name, wn, &bn);
    pre = brisk_add(g, brisk_matmul(g, *hd, wn[0], 0, 1), brisk_matmul(g, agg, wn[1], 0, 1));
    *hd = brisk_add(g, *hd, mlp_rest(c, pre, bn, name));
}

/* The edge indices of B copies of the graph as consts. */
static edge_set batch_edges(gnn_ctx *c, const brisk_gnn_edges *e, int64_t n_src, int64_t n_dst) {
    edge_set es = {-1, -1, e->n, n_src, n_dst};
    int64_t n = c->B * e->n;
    int32_t *s = malloc((size_t)n * sizeof *s), *d = malloc((size_t)n * sizeof *d);
    if (!s || !d) {
        brisk_graph_fail(c->g, BRISK_ERR_NOMEM, "meshgnn: out of memory for %lld edges", (long long)n);
    } else {
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t i = 0; i < e->n; i++) {
                s[b * e->n + i] = (int32_t)(b * n_src + e->src[i]);
                d[b * e->n + i] = (int32_t)(b * n_dst + e->dst[i]);
            }
        es.src = brisk_const(c->g, NULL, BRISK_I32, brisk_shape1(n), s);
        es.dst = brisk_const(c->g, NULL, BRISK_I32, brisk_shape1(n), d);
    }
    free(s);
    free(d);
    return es;
}

/* [n, L] -> [B * n, L], the same rows for every sample. */
static int per_sample(gnn_ctx *c, int x, int64_t n) {
    if (c->B == 1) return x;
    int r = brisk_expand(c->g, brisk_reshape(c->g, x, brisk_shape3(1, n, c->L)), brisk_shape3(c->B, n, c->L));
    return brisk_reshape(c->g, r, brisk_shape2(c->B * n, c->L));
}

int nn_meshgnn_forward(const brisk_model_spec *s, brisk_graph *g, int64_t batch, int x) {
    if (g->err.code != BRISK_OK) return -1;
    if (s->width < 1 || s->layers < 0 || s->inputs < 1 || s->outputs < 1)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "meshgnn: latent %lld, layers %d, inputs %lld, outputs %lld "
                                "(expected positive sizes)", (long long)s->width, s->layers, (long long)s->inputs,
                                (long long)s->outputs);
    brisk_gnn_graph mg;
    brisk_error err = {0};
    if (brisk_gnn_graph_build_cached(&s->mesh, s->mesh.cache_dir, &mg, NULL, &err))
        return brisk_graph_fail(g, err.code, "meshgnn: %s", err.msg);
    gnn_ctx c = {g, batch, s->width};
    int64_t ng = mg.n_grid, nm = mg.n_mesh, L = s->width;
    edge_set g2m = batch_edges(&c, &mg.g2m, ng, nm), mm = batch_edges(&c, &mg.mm, nm, nm),
             m2g = batch_edges(&c, &mg.m2g, nm, ng);
    int mesh_f = brisk_const(g, "mesh_f", BRISK_F32, brisk_shape2(nm, 2), mg.mesh_pos);
    int g2m_f = brisk_const(g, "g2m_f", BRISK_F32, brisk_shape2(mg.g2m.n, 3), mg.g2m.feat);
    int mm_f = brisk_const(g, "mm_f", BRISK_F32, brisk_shape2(mg.mm.n, 3), mg.mm.feat);
    int m2g_f = brisk_const(g, "m2g_f", BRISK_F32, brisk_shape2(mg.m2g.n, 3), mg.m2g.feat);
    brisk_gnn_graph_free(&mg);

    int h = mlp(&c, brisk_reshape(g, x, brisk_shape2(batch * ng, s->inputs)), s->inputs, L, 1, "grid_embed");
    int m = per_sample(&c, mlp(&c, mesh_f, 2, L, 1, "mesh_embed"), nm);
    int e = mlp(&c, g2m_f, 3, L, 1, "g2m_embed");
    interaction(&c, &g2m, &e, h, &m, "encoder");
    h = brisk_add(g, h, mlp(&c, h, L, L, 1, "grid_update"));
    e = mlp(&c, mm_f, 3, L, 1, "mm_embed");
    char name[BRISK_NAME_MAX];
    for (int i = 0; i < s->layers; i++) {
        snprintf(name, sizeof name, "processor.%d", i);
        if (s->recompute) brisk_graph_recompute_begin(g);
        interaction(&c, &mm, &e, m, &m, name);
        if (s->recompute) brisk_graph_recompute_end(g);
    }
    e = mlp(&c, m2g_f, 3, L, 1, "m2g_embed");
    interaction(&c, &m2g, &e, m, &h, "decoder");
    int out = mlp(&c, h, L, s->outputs, 0, "out");
    return brisk_reshape(g, out, brisk_shape3(batch, ng, s->outputs));
}
