/* The graph container: node storage, the generic append every builder goes through,
 * first-error-wins error recording, and the three kinds of leaves (inputs, params,
 * consts) with their placement in the input area, the param arena and the const blob. */
#include "brisk/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Params start on 16-float boundaries so vector kernels (and the optimizer) see
 * aligned slices; inputs and consts on 64 bytes, a cache line. */
#define PARAM_ALIGN_FLOATS 16

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

brisk_graph *brisk_graph_new(void) {
    brisk_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->loss = -1;
    g->output = -1;
    g->next_rng_stream = 1;
    g->err.code = BRISK_OK;
    return g;
}

void brisk_graph_free(brisk_graph *g) {
    if (!g) return;
    free(g->nodes);
    free(g->params);
    free(g->inputs);
    free(g->const_data);
    free(g->given_data);
    free(g->grad_of);
    free(g);
}

brisk_status brisk_graph_error(const brisk_graph *g, brisk_error *err) {
    if (!g) return brisk_errorf(err, BRISK_ERR_INVALID, "graph is NULL");
    if (err) *err = g->err;
    return g->err.code;
}

int brisk_graph_fail(brisk_graph *g, brisk_status code, const char *fmt, ...) {
    if (!g || g->err.code != BRISK_OK) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->err.msg, sizeof g->err.msg, fmt, ap);
    va_end(ap);
    g->err.code = code == BRISK_OK ? BRISK_ERR_INTERNAL : code;
    return -1;
}

/* Grows an array of `size`-byte elements to hold at least `need`; 0 on success. */
static int grow(void **arr, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int ncap = *cap ? *cap : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*arr, (size_t)ncap * size);
    if (!p) return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static int is_float(brisk_dtype dt) { return dt == BRISK_F32 || dt == BRISK_F16 || dt == BRISK_BF16; }

int brisk_graph_append(brisk_graph *g, brisk_op op, const int *in, int n_in, brisk_dtype dt,
                       brisk_shape s, const brisk_attr *attr) {
    if (!g || g->err.code != BRISK_OK) return -1;
    const char *name = (unsigned)op < BRISK_OP_COUNT ? brisk_op_name(op) : "?";
    if ((unsigned)op >= BRISK_OP_COUNT)
        return brisk_graph_fail(g, BRISK_ERR_INTERNAL, "append: op %d is not an op", (int)op);
    if (n_in < 0 || n_in > BRISK_MAX_INPUTS)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: %d inputs (at most %d)", name, n_in,
                                BRISK_MAX_INPUTS);
    for (int i = 0; i < n_in; i++)
        if (in[i] < 0 || in[i] >= g->n_nodes)
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: input %d (%d) is not a node", name, i,
                                    in[i]);
    if ((unsigned)dt >= BRISK_DTYPE_COUNT)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: dtype %d is not a dtype", name, (int)dt);
    if (s.ndim < 0 || s.ndim > BRISK_MAX_DIMS)
        return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: %d dims (at most %d)", name, s.ndim,
                                BRISK_MAX_DIMS);
    for (int i = 0; i < s.ndim; i++)
        if (s.d[i] <= 0) {
            char buf[BRISK_SHAPE_STR];
            return brisk_graph_fail(g, BRISK_ERR_SHAPE, "%s: shape %s has a dim <= 0", name,
                                    brisk_shape_str(&s, buf, sizeof buf));
        }
    for (int i = s.ndim; i < BRISK_MAX_DIMS; i++) s.d[i] = 0; /* shape_equal and memcmp agree */
    if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
        return brisk_graph_fail(g, BRISK_ERR_NOMEM, "%s: out of memory for node %d", name, g->n_nodes);

    brisk_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->dtype = dt;
    n->shape = s;
    if (attr) n->attr = *attr;
    else memset(&n->attr, 0, sizeof n->attr);
    if (n->attr.shape2.ndim >= 0 && n->attr.shape2.ndim <= BRISK_MAX_DIMS)
        for (int i = n->attr.shape2.ndim; i < BRISK_MAX_DIMS; i++) n->attr.shape2.d[i] = 0;
    n->storage = BRISK_STORE_ARENA;
    n->bytes = (size_t)brisk_shape_numel(&s) * brisk_dtype_size(dt);
    n->alias_of = -1;
    /* Integer outputs carry no gradient, whatever they were computed from. */
    int rg = op == BRISK_OP_PARAM;
    for (int i = 0; i < n_in; i++) rg |= g->nodes[in[i]].requires_grad;
    n->requires_grad = (uint8_t)(rg && is_float(dt));
    if (op != BRISK_OP_INPUT && op != BRISK_OP_PARAM && op != BRISK_OP_CONST) n->segment = g->cur_segment;
    if (op == BRISK_OP_RESHAPE) {
        /* A view: point at the buffer's owner, so chains of reshapes share one base. */
        const brisk_node *x = &g->nodes[in[0]];
        n->storage = BRISK_STORE_ALIAS;
        n->alias_of = x->storage == BRISK_STORE_ALIAS ? x->alias_of : in[0];
    }
    return g->n_nodes++;
}

int brisk_graph_recompute_begin(brisk_graph *g) {
    if (!g || g->err.code != BRISK_OK) return -1;
    if (g->cur_segment) return brisk_graph_fail(g, BRISK_ERR_INVALID, "recompute: segment %d is still open", g->cur_segment);
    if (g->grad_of) return brisk_graph_fail(g, BRISK_ERR_INVALID, "recompute: the backward graph is already built");
    return g->cur_segment = ++g->n_segments;
}

void brisk_graph_recompute_end(brisk_graph *g) {
    if (g) g->cur_segment = 0;
}

/* 0 when `name` is a usable leaf name; records an error naming `kind` otherwise. */
static int check_name(brisk_graph *g, const char *kind, const char *name) {
    if (!name || !name[0]) return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s: empty name", kind);
    if (strlen(name) >= BRISK_NAME_MAX)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "%s \"%.40s...\": name longer than %d bytes",
                                kind, name, BRISK_NAME_MAX - 1);
    return 0;
}

int brisk_input(brisk_graph *g, const char *name, brisk_dtype dt, brisk_shape s) {
    if (!g || g->err.code != BRISK_OK) return -1;
    if (check_name(g, "input", name)) return -1;
    for (int i = 0; i < g->n_inputs; i++)
        if (strcmp(g->inputs[i].name, name) == 0)
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "input \"%s\": name already used", name);
    if (grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof *g->inputs))
        return brisk_graph_fail(g, BRISK_ERR_NOMEM, "input \"%s\": out of memory", name);
    int id = brisk_graph_append(g, BRISK_OP_INPUT, NULL, 0, dt, s, NULL);
    if (id < 0) return brisk_error_prefix(&g->err, "input \"%s\"", name), -1;
    brisk_node *n = &g->nodes[id];
    n->storage = BRISK_STORE_INPUT;
    n->offset = align_up(g->input_bytes, BRISK_AREA_ALIGN);
    snprintf(n->name, sizeof n->name, "%s", name);
    g->input_bytes = n->offset + n->bytes;

    brisk_input_info *in = &g->inputs[g->n_inputs++];
    memset(in, 0, sizeof *in);
    snprintf(in->name, sizeof in->name, "%s", name);
    in->node = id;
    in->dtype = dt;
    in->shape = n->shape;
    in->offset = n->offset;
    in->bytes = n->bytes;
    return id;
}

int brisk_param(brisk_graph *g, const char *name, brisk_shape s, brisk_init_kind init,
                float init_scale, int decay) {
    if (!g || g->err.code != BRISK_OK) return -1;
    if (check_name(g, "param", name)) return -1;
    for (int i = 0; i < g->n_params; i++)
        if (strcmp(g->params[i].name, name) == 0)
            return brisk_graph_fail(g, BRISK_ERR_INVALID, "param \"%s\": name already used", name);
    if ((unsigned)init > BRISK_INIT_NORMAL)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "param \"%s\": init %d is not an init kind",
                                name, (int)init);
    if (grow((void **)&g->params, &g->cap_params, g->n_params + 1, sizeof *g->params))
        return brisk_graph_fail(g, BRISK_ERR_NOMEM, "param \"%s\": out of memory", name);
    int id = brisk_graph_append(g, BRISK_OP_PARAM, NULL, 0, BRISK_F32, s, NULL);
    if (id < 0) return brisk_error_prefix(&g->err, "param \"%s\"", name), -1;
    brisk_node *n = &g->nodes[id];
    int64_t numel = brisk_shape_numel(&n->shape);
    int64_t off = (g->n_param_floats + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS * PARAM_ALIGN_FLOATS;
    n->storage = BRISK_STORE_PARAM;
    n->offset = (size_t)off * sizeof(float);
    snprintf(n->name, sizeof n->name, "%s", name);
    g->n_param_floats = off + numel;

    brisk_param_info *p = &g->params[g->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->node = id;
    p->shape = n->shape;
    p->offset = (size_t)off;
    p->numel = numel;
    p->init = init;
    p->init_scale = init_scale;
    p->decay = decay;
    p->grad_node = -1;
    return id;
}

int brisk_buffer(brisk_graph *g, const char *name, brisk_shape s, brisk_init_kind init) {
    if (!g || g->err.code != BRISK_OK) return -1;
    if (init != BRISK_INIT_ZEROS && init != BRISK_INIT_ONES)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "buffer \"%s\": init %d (expected zeros or ones)",
                                name ? name : "", (int)init);
    int id = brisk_param(g, name, s, init, 0.0f, 0);
    if (id < 0) return -1;
    g->params[g->n_params - 1].buffer = 1;
    g->nodes[id].requires_grad = 0; /* so autodiff never reaches it */
    return id;
}

int brisk_param_given(brisk_graph *g, int param, const float *values) {
    if (!g || g->err.code != BRISK_OK) return -1;
    brisk_param_info *p = NULL;
    for (int i = 0; i < g->n_params && !p; i++)
        if (g->params[i].node == param) p = &g->params[i];
    if (!p || !values) return brisk_graph_fail(g, BRISK_ERR_INVALID, "param_given: node %d is not a param, or no values", param);
    size_t need = g->given_n + (size_t)p->numel;
    if (need > g->given_cap) {
        size_t cap = need * 2;
        float *d = realloc(g->given_data, cap * sizeof *d);
        if (!d) return brisk_graph_fail(g, BRISK_ERR_NOMEM, "param \"%s\": out of memory for its values", p->name);
        g->given_data = d, g->given_cap = cap;
    }
    memcpy(g->given_data + g->given_n, values, (size_t)p->numel * sizeof *values);
    p->given = g->given_n;
    p->init = BRISK_INIT_GIVEN;
    g->given_n = need;
    return param;
}

/* name may be NULL or "" for an anonymous const (autodiff's seed, test weights);
 * named consts must be unique. */
int brisk_const(brisk_graph *g, const char *name, brisk_dtype dt, brisk_shape s, const void *data) {
    if (!g || g->err.code != BRISK_OK) return -1;
    const char *shown = name && name[0] ? name : "(anonymous)";
    if (name && name[0]) {
        if (check_name(g, "const", name)) return -1;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].op == BRISK_OP_CONST && strcmp(g->nodes[i].name, name) == 0)
                return brisk_graph_fail(g, BRISK_ERR_INVALID, "const \"%s\": name already used", name);
    }
    if (!data) return brisk_graph_fail(g, BRISK_ERR_INVALID, "const \"%s\": data is NULL", shown);
    int id = brisk_graph_append(g, BRISK_OP_CONST, NULL, 0, dt, s, NULL);
    if (id < 0) return brisk_error_prefix(&g->err, "const \"%s\"", shown), -1;
    brisk_node *n = &g->nodes[id];
    size_t off = align_up(g->const_bytes, BRISK_AREA_ALIGN), end = off + n->bytes;
    if (end > g->const_cap) {
        size_t cap = g->const_cap ? g->const_cap : 4096;
        while (cap < end) cap *= 2;
        unsigned char *p = realloc(g->const_data, cap);
        if (!p) {
            g->n_nodes--; /* the node was never usable */
            return brisk_graph_fail(g, BRISK_ERR_NOMEM, "const \"%s\": out of memory (%zu bytes)",
                                    shown, end);
        }
        g->const_data = p;
        g->const_cap = cap;
    }
    memset(g->const_data + g->const_bytes, 0, off - g->const_bytes);
    memcpy(g->const_data + off, data, n->bytes);
    g->const_bytes = end;
    n->storage = BRISK_STORE_CONST;
    n->offset = off;
    n->attr.i0 = (int64_t)off;
    if (name) snprintf(n->name, sizeof n->name, "%s", name);
    return id;
}
