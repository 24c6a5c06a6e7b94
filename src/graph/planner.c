/* The memory planner: picks the nodes each schedule runs (pruning dead ones),
 * computes every activation's lifetime over the training schedule and packs the
 * activations into one arena, largest first, each into the best-fitting gap left
 * by buffers whose lifetimes intersect its own. The arena size is known before any
 * allocation, which is what lets brisk say up front that a batch will not fit.
 *
 * Schedules hold compute nodes only: leaves live in their own areas and RESHAPE
 * is a view of its base's buffer (it runs nothing). Because eval and predict run
 * subsequences of the training schedule, the training plan is valid for them too. */

#include "brisk/graph.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    int node;
    size_t size;      /* bytes, rounded up to BRISK_AREA_ALIGN */
    int def, last;    /* first and last step (inclusive) it must hold its value */
    size_t offset;
} buf;

typedef struct span { size_t lo, hi; } span;

static int is_leaf(brisk_op op) { return op == BRISK_OP_INPUT || op == BRISK_OP_PARAM || op == BRISK_OP_CONST; }
static int is_compute(const brisk_node *n) { return !is_leaf(n->op) && n->storage != BRISK_STORE_ALIAS; }
/* The node that owns the buffer a node's output lives in. */
static int base_of(const brisk_graph *g, int i) {
    return g->nodes[i].storage == BRISK_STORE_ALIAS ? g->nodes[i].alias_of : i;
}

/* Marks every ancestor of the marked nodes (inputs always have lower ids). */
static void mark_ancestors(const brisk_graph *g, uint8_t *mark) {
    for (int i = g->n_nodes - 1; i >= 0; i--)
        if (mark[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) mark[g->nodes[i].in[j]] = 1;
}

/* Compute nodes with mark set and id < limit, in id order. */
static int collect(const brisk_graph *g, const uint8_t *mark, int limit, int *out) {
    int n = 0;
    for (int i = 0; i < limit; i++)
        if (mark[i] && is_compute(&g->nodes[i])) out[n++] = i;
    return n;
}

/* Training order: id order, except that each GRAD_ACCUM runs as soon as its
 * gradient exists, so a parameter's gradient buffer dies early instead of living
 * until the end of the backward pass. */
static int train_schedule(const brisk_graph *g, const uint8_t *mark, int *out) {
    int n = g->n_nodes, k = 0;
    int *head = malloc((size_t)n * sizeof *head), *next = malloc((size_t)n * sizeof *next);
    if (!head || !next) { free(head); free(next); return -1; }
    for (int i = 0; i < n; i++) head[i] = next[i] = -1;
    for (int i = n - 1; i >= 0; i--)
        if (mark[i] && g->nodes[i].op == BRISK_OP_GRAD_ACCUM) {
            int src = g->nodes[i].in[0];
            next[i] = head[src];
            head[src] = i;
        }
    for (int i = 0; i < n; i++) {
        if (g->nodes[i].op == BRISK_OP_GRAD_ACCUM) continue;
        if (mark[i] && is_compute(&g->nodes[i])) out[k++] = i;
        for (int a = head[i]; a >= 0; a = next[a]) out[k++] = a;
    }
    free(head);
    free(next);
    return k;
}

static int by_size_desc(const void *pa, const void *pb) {
    const buf *a = pa, *b = pb;
    if (a->size != b->size) return a->size < b->size ? 1 : -1;
    if (a->def != b->def) return a->def < b->def ? -1 : 1;
    return a->node < b->node ? -1 : 1;
}

static int by_lo(const void *pa, const void *pb) {
    const span *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Places bufs[0..n) (sorted largest first); returns the arena size. spans has room for n. */
static size_t place(buf *bufs, int n, span *spans) {
    size_t arena = 0;
    for (int i = 0; i < n; i++) {
        int ns = 0;
        for (int j = 0; j < i; j++)
            if (bufs[j].def <= bufs[i].last && bufs[i].def <= bufs[j].last)
                spans[ns++] = (span){bufs[j].offset, bufs[j].offset + bufs[j].size};
        qsort(spans, (size_t)ns, sizeof *spans, by_lo);
        /* Best fit among the gaps between conflicting buffers (lowest on ties);
         * above all of them when no gap is big enough. */
        size_t cur = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
        for (int s = 0; s < ns; s++) {
            if (spans[s].lo > cur) {
                size_t gap = spans[s].lo - cur;
                if (gap >= bufs[i].size && gap < best_gap) best = cur, best_gap = gap;
            }
            if (spans[s].hi > cur) cur = spans[s].hi;
        }
        bufs[i].offset = best != SIZE_MAX ? best : cur;
        if (bufs[i].offset + bufs[i].size > arena) arena = bufs[i].offset + bufs[i].size;
    }
    return arena;
}

static brisk_status plan_arena(brisk_graph *g, brisk_plan *plan, brisk_error *err) {
    int n = g->n_nodes, T = plan->n_train;
    int *pos = malloc((size_t)n * sizeof *pos);
    buf *bufs = malloc(((size_t)T + 1) * sizeof *bufs);
    span *spans = malloc(((size_t)T + 1) * sizeof *spans);
    int64_t *delta = calloc((size_t)T + 1, sizeof *delta);
    brisk_status st = BRISK_OK;
    if (!pos || !bufs || !spans || !delta) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "plan: out of memory for %d nodes", n);
        goto done;
    }
    for (int i = 0; i < n; i++) pos[i] = -1;
    for (int i = 0; i < n; i++)
        if (g->nodes[i].storage == BRISK_STORE_ARENA) g->nodes[i].offset = SIZE_MAX; /* unplanned */
    int nb = 0;
    for (int s = 0; s < T; s++) {
        int id = plan->train_order[s];
        if (g->nodes[id].storage != BRISK_STORE_ARENA) continue;
        pos[id] = nb;
        size_t size = (g->nodes[id].bytes + BRISK_AREA_ALIGN - 1) / BRISK_AREA_ALIGN * BRISK_AREA_ALIGN;
        bufs[nb++] = (buf){id, size, s, s, 0};
    }
    for (int s = 0; s < T; s++) {
        const brisk_node *nd = &g->nodes[plan->train_order[s]];
        for (int j = 0; j < nd->n_in; j++) {
            int b = pos[base_of(g, nd->in[j])];
            if (b >= 0 && bufs[b].last < s) bufs[b].last = s;
        }
    }
    /* The executor reads the loss, the output and nodes marked `keep` after a run: keep them
     * to the end. */
    for (int id = 0; id < n; id++) {
        if (id != g->loss && id != g->output && !g->nodes[id].keep) continue;
        int b = pos[base_of(g, id)];
        if (b >= 0) bufs[b].last = T - 1;
    }
    size_t peak = 0;
    int64_t live = 0;
    for (int b = 0; b < nb; b++) {
        delta[bufs[b].def] += (int64_t)bufs[b].size;
        delta[bufs[b].last + 1] -= (int64_t)bufs[b].size;
    }
    for (int s = 0; s < T; s++) {
        live += delta[s];
        if ((size_t)live > peak) peak = (size_t)live;
    }
    qsort(bufs, (size_t)nb, sizeof *bufs, by_size_desc);
    plan->arena_bytes = place(bufs, nb, spans);
    plan->peak_live_bytes = peak;
    for (int b = 0; b < nb; b++) g->nodes[bufs[b].node].offset = bufs[b].offset;
done:
    free(pos);
    free(bufs);
    free(spans);
    free(delta);
    return st;
}

/* grads_in_place: a GRAD_ACCUM's input that nothing else reads (no other node, no view of
 * it, not the loss, output or a kept node) is placed at the GRAD_ACCUM's own bytes of the
 * gradient arena. With one micro-batch a step the copy into the arena was all GRAD_ACCUM
 * did: 8 of the 54 kernels of the diffusion example's GPU step, 5 % of its CPU step. */
static void place_grads_in_place(brisk_graph *g) {
    int n = g->n_nodes;
    int *readers = calloc((size_t)n + 1, sizeof *readers);
    if (!readers) return; /* an optimization only: the copies stay */
    for (int i = 0; i < n; i++) {
        const brisk_node *nd = &g->nodes[i];
        for (int j = 0; j < nd->n_in; j++) readers[nd->in[j]]++;
        if (nd->storage == BRISK_STORE_ALIAS) readers[nd->alias_of] += 2;
    }
    for (int i = 0; i < n; i++) {
        const brisk_node *a = &g->nodes[i];
        if (a->op != BRISK_OP_GRAD_ACCUM || a->n_in != 1) continue;
        brisk_node *p = &g->nodes[a->in[0]];
        int pid = a->in[0];
        if (p->storage != BRISK_STORE_ARENA || readers[pid] != 1 || p->bytes != a->bytes || p->dtype != BRISK_F32 ||
            p->keep || pid == g->loss || pid == g->output)
            continue;
        p->storage = BRISK_STORE_GRAD;
        p->offset = a->offset;
    }
    free(readers);
}

brisk_status brisk_plan_build(brisk_graph *g, brisk_plan *plan, brisk_error *err) {
    if (!plan) return brisk_errorf(err, BRISK_ERR_INVALID, "plan: plan is NULL");
    memset(plan, 0, sizeof *plan);
    if (!g) return brisk_errorf(err, BRISK_ERR_INVALID, "plan: graph is NULL");
    if (g->err.code != BRISK_OK) {
        brisk_graph_error(g, err);
        brisk_error_prefix(err, "plan: the graph has a builder error");
        return g->err.code;
    }
    int n = g->n_nodes;
    if (g->loss < -1 || g->loss >= n || g->output < -1 || g->output >= n)
        return brisk_errorf(err, BRISK_ERR_INVALID, "plan: loss %d or output %d is not a node", g->loss, g->output);
    int nf = g->grad_of ? g->n_forward : n;
    uint8_t *mark = calloc((size_t)n + 1, 1);
    plan->train_order = malloc(((size_t)n + 1) * sizeof(int));
    plan->eval_order = malloc(((size_t)n + 1) * sizeof(int));
    plan->predict_order = malloc(((size_t)n + 1) * sizeof(int));
    if (!mark || !plan->train_order || !plan->eval_order || !plan->predict_order) {
        free(mark);
        brisk_plan_free(plan);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "plan: out of memory for %d nodes", n);
    }
    /* Training keeps the output too, so that eval and predict (which need it) run
     * only nodes the training plan has placed. */
    if (g->loss >= 0) mark[g->loss] = 1;
    if (g->output >= 0) mark[g->output] = 1;
    for (int i = 0; i < n; i++) /* and what a run is read for (keep: the terms of a loss) */
        if (g->nodes[i].op == BRISK_OP_GRAD_ACCUM || g->nodes[i].keep) mark[i] = 1;
    mark_ancestors(g, mark);
    plan->n_train = train_schedule(g, mark, plan->train_order);

    memset(mark, 0, (size_t)n);
    if (g->loss >= 0) mark[g->loss] = 1;
    if (g->output >= 0) mark[g->output] = 1;
    for (int i = 0; i < nf; i++)
        if (g->nodes[i].keep) mark[i] = 1;
    mark_ancestors(g, mark);
    plan->n_eval = collect(g, mark, nf, plan->eval_order);

    memset(mark, 0, (size_t)n);
    if (g->output >= 0) mark[g->output] = 1;
    mark_ancestors(g, mark);
    plan->n_predict = g->output >= 0 ? collect(g, mark, nf, plan->predict_order) : 0;
    free(mark);
    if (plan->n_train < 0) {
        brisk_plan_free(plan);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "plan: out of memory for %d nodes", n);
    }

    if (g->grads_in_place) place_grads_in_place(g);
    brisk_status st = plan_arena(g, plan, err);
    if (st != BRISK_OK) {
        brisk_plan_free(plan);
        return st;
    }
    plan->param_bytes = (size_t)g->n_param_floats * sizeof(float);
    plan->input_bytes = g->input_bytes;
    plan->const_bytes = g->const_bytes;
    return BRISK_OK;
}

void brisk_plan_free(brisk_plan *plan) {
    if (!plan) return;
    free(plan->train_order);
    free(plan->eval_order);
    free(plan->predict_order);
    memset(plan, 0, sizeof *plan);
}

size_t brisk_plan_total_bytes(const brisk_plan *plan) {
    return plan->arena_bytes + 4 * plan->param_bytes + plan->input_bytes + plan->const_bytes;
}

void brisk_plan_grad_ready(const brisk_graph *g, const brisk_plan *plan, const int64_t *offsets,
                           const int64_t *counts, int n_ranges, int *last) {
    for (int r = 0; r < n_ranges; r++) last[r] = -1;
    for (int s = 0; s < plan->n_train; s++) {
        const brisk_node *nd = &g->nodes[plan->train_order[s]];
        if (nd->storage != BRISK_STORE_GRAD) continue;
        int64_t lo = (int64_t)(nd->offset / sizeof(float)), hi = lo + (int64_t)(nd->bytes / sizeof(float));
        for (int r = 0; r < n_ranges; r++)
            if (lo < offsets[r] + counts[r] && offsets[r] < hi) last[r] = s;
    }
}
