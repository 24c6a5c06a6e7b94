/* An ONNX graph's names and order: one hash table from value name to what defines it
 * (initializer, graph input, producing node) and where its type is declared; the checks that
 * every name is defined once and used only when defined; a topological order of the nodes; and
 * the lookups and attribute getters of onnx_model.h. */
#include "onnx/onnx_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The entry for `name`: found, or (when add) a fresh one with every index -1; NULL if absent. */
static onnx_name *entry(struct brisk_onnx_priv *pv, const char *name, int add) {
    if (!pv->cap) return NULL;
    for (size_t i = (size_t)hash(name) & (pv->cap - 1);; i = (i + 1) & (pv->cap - 1)) {
        onnx_name *e = &pv->names[i];
        if (e->name && !strcmp(e->name, name)) return e;
        if (!e->name) {
            if (!add) return NULL;
            *e = (onnx_name){name, -1, -1, -1, -1, -1};
            return e;
        }
    }
}

static const onnx_name *find(const brisk_onnx_model *m, const char *name) {
    return m && name ? entry(m->priv, name, 0) : NULL;
}

static int defined(const onnx_name *e) { return e && (e->init >= 0 || e->input >= 0 || e->producer >= 0); }

static const char *node_text(const brisk_onnx_model *m, size_t k, char *buf, size_t cap) {
    const brisk_onnx_node *n = &m->graph.nodes[k];
    snprintf(buf, cap, "node %zu '%s' (%s)", k, ONNX_PN(n->name), ONNX_PN(n->op_type));
    return buf;
}
#define NODE(k) node_text(m, (k), (char[240]){0}, 240)

static brisk_status index_names(onnx_rd *rd) {
    brisk_onnx_model *m = rd->m;
    const brisk_onnx_graph *g = &m->graph;
    struct brisk_onnx_priv *pv = m->priv;
    const char *path = m->path;
    size_t count = g->n_initializers + g->n_inputs + g->n_outputs + g->n_value_info;
    for (size_t k = 0; k < g->n_nodes; k++) count += g->nodes[k].n_outputs;
    size_t cap = 16;
    while (cap < 2 * count) cap *= 2;
    if (!(pv->names = calloc(cap, sizeof *pv->names)))
        return brisk_errorf(rd->err, BRISK_ERR_NOMEM, "%s: out of memory indexing the graph's names", path);
    pv->cap = cap;
    for (size_t i = 0; i < g->n_initializers; i++) {
        const char *nm = g->initializers[i].name;
        if (!nm[0]) return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: graph.initializer[%zu] has no name", path, i);
        onnx_name *e = entry(pv, nm, 1);
        if (e->init >= 0)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: initializer '%s' is given twice (initializers %lld "
                                "and %zu)", path, ONNX_PN(nm), (long long)e->init, i);
        e->init = (int64_t)i;
    }
    for (size_t i = 0; i < g->n_inputs; i++) {
        onnx_name *e = entry(pv, g->inputs[i].name, 1);
        if (e->input >= 0)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: graph input '%s' is listed twice", path,
                                ONNX_PN(g->inputs[i].name));
        e->input = (int64_t)i;
        e->info = (int64_t)i;
    }
    for (size_t k = 0; k < g->n_nodes; k++) {
        const brisk_onnx_node *n = &g->nodes[k];
        for (size_t j = 0; j < n->n_outputs; j++) {
            const char *nm = n->outputs[j];
            if (!nm[0]) continue; /* an optional output not wanted */
            onnx_name *e = entry(pv, nm, 1);
            if (e->producer >= 0)
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: duplicate output name '%s': %s and %s both produce "
                                    "it", path, ONNX_PN(nm), NODE((size_t)e->producer), NODE(k));
            if (e->input >= 0 || e->init >= 0)
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: output '%s' is also the name of %s", path,
                                    NODE(k), ONNX_PN(nm), e->input >= 0 ? "a graph input" : "an initializer");
            e->producer = (int64_t)k;
        }
    }
    for (size_t i = 0; i < g->n_outputs; i++) {
        const char *nm = g->outputs[i].name;
        onnx_name *e = entry(pv, nm, 1);
        if (e->output >= 0)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: graph output '%s' is listed twice", path, ONNX_PN(nm));
        if (!defined(e))
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: graph output '%s' is produced by no node and is no "
                                "graph input or initializer", path, ONNX_PN(nm));
        e->output = (int64_t)i;
        if (e->info < 0) e->info = (int64_t)(g->n_inputs + i);
    }
    for (size_t i = 0; i < g->n_value_info; i++) {
        onnx_name *e = entry(pv, g->value_info[i].name, 1);
        if (e->info < 0) e->info = (int64_t)(g->n_inputs + g->n_outputs + i);
    }
    for (size_t k = 0; k < g->n_nodes; k++) {
        const brisk_onnx_node *n = &g->nodes[k];
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j][0] && !defined(entry(pv, n->inputs[j], 0)))
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: input '%s' is produced by no node and is no "
                                    "graph input or initializer", path, NODE(k), ONNX_PN(n->inputs[j]));
    }
    return BRISK_OK;
}

/* Depth-first, producers first, starting from the nodes in file order: a file already in
 * topological order (as ONNX asks, and as exporters write) keeps its order. Iterative, so a long
 * chain of nodes cannot exhaust the stack. */
static brisk_status order_nodes(onnx_rd *rd) {
    brisk_onnx_model *m = rd->m;
    brisk_onnx_graph *g = &m->graph;
    size_t n = g->n_nodes;
    size_t *order = onnx_array(m, n, sizeof(size_t));
    size_t *stack = onnx_array(m, n, sizeof(size_t));
    size_t *next_in = onnx_array(m, n, sizeof(size_t));
    unsigned char *state = onnx_array(m, n, 1); /* 0 new, 1 on the stack, 2 placed */
    if (!order || !stack || !next_in || !state)
        return brisk_errorf(rd->err, BRISK_ERR_NOMEM, "%s: out of memory ordering the graph", m->path);
    size_t placed = 0;
    for (size_t root = 0; root < n; root++) {
        if (state[root]) continue;
        size_t depth = 0;
        stack[depth++] = root;
        state[root] = 1;
        while (depth) {
            size_t k = stack[depth - 1];
            const brisk_onnx_node *nd = &g->nodes[k];
            if (next_in[k] == nd->n_inputs) {
                state[k] = 2;
                order[placed++] = k;
                depth--;
                continue;
            }
            const char *in = nd->inputs[next_in[k]++];
            const onnx_name *e = in[0] ? entry(m->priv, in, 0) : NULL;
            if (!e || e->producer < 0) continue;
            size_t p = (size_t)e->producer;
            if (state[p] == 1 && p == k)
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: the graph has a cycle: %s takes its own output "
                                    "'%s'", m->path, NODE(k), ONNX_PN(in));
            if (state[p] == 1) /* p is below k on the stack: it depends on k */
                return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: the graph has a cycle: %s takes '%s' from %s, "
                                    "which itself depends on node %zu", m->path, NODE(k), ONNX_PN(in), NODE(p), k);
            if (state[p] == 0) {
                state[p] = 1;
                stack[depth++] = p;
            }
        }
    }
    g->order = order;
    return BRISK_OK;
}

brisk_status onnx_graph_check(onnx_rd *rd) {
    brisk_status st = index_names(rd);
    return st ? st : order_nodes(rd);
}

/* ---------------------------------------------------------------- lookups */

int64_t brisk_onnx_opset_version(const brisk_onnx_model *m, const char *domain) {
    int std = !domain || !domain[0] || !strcmp(domain, "ai.onnx");
    for (size_t i = 0; i < m->n_opsets; i++) {
        const char *d = m->opsets[i].domain;
        if (std ? !d[0] || !strcmp(d, "ai.onnx") : !strcmp(d, domain)) return m->opsets[i].version;
    }
    return 0;
}

const brisk_onnx_tensor *brisk_onnx_initializer(const brisk_onnx_model *m, const char *name) {
    const onnx_name *e = find(m, name);
    return e && e->init >= 0 ? &m->graph.initializers[e->init] : NULL;
}

int64_t brisk_onnx_producer(const brisk_onnx_model *m, const char *name) {
    const onnx_name *e = find(m, name);
    return e ? e->producer : -1;
}

const brisk_onnx_value_info *brisk_onnx_value_info_find(const brisk_onnx_model *m, const char *name) {
    const onnx_name *e = find(m, name);
    return e && e->info >= 0 ? &m->graph.inputs[e->info] : NULL; /* inputs, outputs, value_info: one array */
}

const brisk_onnx_attr *brisk_onnx_attr_find(const brisk_onnx_node *n, const char *name) {
    for (size_t i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
    return NULL;
}

/* The attribute when it has type `want`; NULL when absent; an error for another type. */
static brisk_status typed(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name, int want,
                          const brisk_onnx_attr **out, brisk_error *err) {
    *out = brisk_onnx_attr_find(n, name);
    if (!*out || (*out)->type == want) return BRISK_OK;
    /* the node's index when it is one of m's (integers: pointers into other arrays do not compare) */
    size_t k = ((uintptr_t)n - (uintptr_t)m->graph.nodes) / sizeof *n;
    char buf[240];
    if ((uintptr_t)n < (uintptr_t)m->graph.nodes || k >= m->graph.n_nodes) snprintf(buf, sizeof buf, "node '%s' (%s)", ONNX_PN(n->name), ONNX_PN(n->op_type));
    else node_text(m, k, buf, sizeof buf);
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s: attribute '%s' is %s, expected %s", m->path, buf,
                        ONNX_PN(name), brisk_onnx_attr_type_name((*out)->type), brisk_onnx_attr_type_name(want));
}

brisk_status brisk_onnx_attr_int(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                 int64_t dflt, int64_t *out, brisk_error *err) {
    const brisk_onnx_attr *a;
    brisk_status st = typed(m, n, name, BRISK_ONNX_ATTR_INT, &a, err);
    *out = a && !st ? a->i : dflt;
    return st;
}

brisk_status brisk_onnx_attr_float(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                   float dflt, float *out, brisk_error *err) {
    const brisk_onnx_attr *a;
    brisk_status st = typed(m, n, name, BRISK_ONNX_ATTR_FLOAT, &a, err);
    *out = a && !st ? a->f : dflt;
    return st;
}

brisk_status brisk_onnx_attr_string(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                    const char *dflt, const char **out, brisk_error *err) {
    const brisk_onnx_attr *a;
    brisk_status st = typed(m, n, name, BRISK_ONNX_ATTR_STRING, &a, err);
    *out = a && !st ? a->s : dflt;
    return st;
}

brisk_status brisk_onnx_attr_ints(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                  const int64_t **out, size_t *count, brisk_error *err) {
    const brisk_onnx_attr *a;
    brisk_status st = typed(m, n, name, BRISK_ONNX_ATTR_INTS, &a, err);
    *out = a && !st ? a->ints : NULL;
    *count = a && !st ? a->n : 0;
    return st;
}

brisk_status brisk_onnx_attr_floats(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                    const float **out, size_t *count, brisk_error *err) {
    const brisk_onnx_attr *a;
    brisk_status st = typed(m, n, name, BRISK_ONNX_ATTR_FLOATS, &a, err);
    *out = a && !st ? a->floats : NULL;
    *count = a && !st ? a->n : 0;
    return st;
}

brisk_status brisk_onnx_attr_tensor(const brisk_onnx_model *m, const brisk_onnx_node *n, const char *name,
                                    const brisk_onnx_tensor **out, brisk_error *err) {
    const brisk_onnx_attr *a;
    brisk_status st = typed(m, n, name, BRISK_ONNX_ATTR_TENSOR, &a, err);
    *out = a && !st ? a->t : NULL;
    return st;
}
