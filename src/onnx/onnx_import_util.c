/* The importer's shared helpers (onnx_import_internal.h): host constants, a node's inputs as
 * brisk nodes or constants, its attributes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_import_internal.h"

int ox_fail(ctx *c, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return brisk_graph_fail(c->g, BRISK_ERR_UNSUPPORTED, "%s", msg);
}

konst *ox_konst_new(int rank, const int64_t *d, int is_float) {
    konst *k = calloc(1, sizeof *k);
    if (!k || rank < 0 || rank > BRISK_MAX_DIMS) return free(k), NULL;
    k->rank = rank, k->numel = 1, k->is_float = is_float;
    for (int i = 0; i < rank; i++) {
        if (d[i] < 0 || (d[i] > 0 && k->numel > OX_KONST_MAX / d[i])) return free(k), NULL;
        k->d[i] = d[i], k->numel *= d[i];
    }
    k->v = calloc((size_t)k->numel + 1, sizeof *k->v);
    if (!k->v) return free(k), NULL;
    return k;
}

int64_t ox_i64(double v) {
    const double big = 4611686018427387904.0; /* 2^62: sums of a few stay in range */
    return v != v ? 0 : v > big ? (int64_t)big : v < -big ? -(int64_t)big : (int64_t)v;
}

void ox_konst_free(konst *k) {
    if (k) free(k->v), free(k);
}

double ox_elem(const brisk_onnx_tensor *t, int64_t i) {
    const unsigned char *p = (const unsigned char *)t->data + (size_t)i * brisk_onnx_dtype_size(t->dtype);
    union { float f; double d; int64_t i64; int32_t i32; int16_t i16; int8_t i8; uint8_t u8; } u;
    memcpy(&u, p, brisk_onnx_dtype_size(t->dtype));
    switch (t->dtype) {
    case BRISK_ONNX_FLOAT: return u.f;
    case BRISK_ONNX_DOUBLE: return u.d;
    case BRISK_ONNX_INT64: return (double)u.i64;
    case BRISK_ONNX_INT32: return u.i32;
    case BRISK_ONNX_INT16: return u.i16;
    case BRISK_ONNX_INT8: return u.i8;
    case BRISK_ONNX_UINT8: case BRISK_ONNX_BOOL: return u.u8;
    default: return NAN;
    }
}

konst *ox_from_tensor(const brisk_onnx_tensor *t) {
    konst *k = ox_konst_new(t->rank, t->dims, t->dtype == BRISK_ONNX_FLOAT || t->dtype == BRISK_ONNX_DOUBLE);
    for (int64_t i = 0; k && i < t->numel; i++) k->v[i] = ox_elem(t, i);
    return k;
}

float *ox_floats_of(const brisk_onnx_tensor *t) {
    float *f = malloc((size_t)t->numel * sizeof *f + 1);
    for (int64_t i = 0; f && i < t->numel; i++) f[i] = (float)ox_elem(t, i);
    return f;
}

brisk_shape ox_shape_of(const int64_t *d, int rank) { return brisk_shape_make(rank, d); }

int ox_is_param(const brisk_onnx_tensor *t) {
    return t->dtype == BRISK_ONNX_FLOAT || t->dtype == BRISK_ONNX_DOUBLE || t->dtype == BRISK_ONNX_FLOAT16;
}

int ox_init_param(ctx *c, const brisk_onnx_tensor *t, int buffer) {
    size_t idx = (size_t)(t - c->m->graph.initializers);
    if (c->init_node[idx] >= 0) return c->init_node[idx];
    if (!ox_is_param(t))
        return ox_fail(c, "initializer '%s' is %s where a float tensor is needed", t->name, brisk_onnx_dtype_name(t->dtype));
    if (t->rank < 1 || t->rank > BRISK_MAX_DIMS) return ox_fail(c, "initializer '%s': rank %d (1 to %d taken)", t->name, t->rank, BRISK_MAX_DIMS);
    brisk_shape s = ox_shape_of(t->dims, t->rank);
    int p = buffer ? brisk_buffer(c->g, t->name, s, BRISK_INIT_ZEROS) : brisk_param(c->g, t->name, s, BRISK_INIT_ZEROS, 0.0f, t->rank > 1);
    float *v = ox_floats_of(t);
    if (!v) return ox_fail(c, "out of memory");
    if (p >= 0) p = brisk_param_given(c->g, p, v);
    free(v);
    return c->init_node[idx] = p;
}

val *ox_lookup(ctx *c, const char *name, val *tmp) {
    *tmp = (val){-1, NULL};
    for (int k = 0; k < c->n_in; k++)
        if (!strcmp(c->in_names[k], name)) return tmp->node = c->in_nodes[k], tmp;
    int64_t p = brisk_onnx_producer(c->m, name);
    if (p < 0) return NULL;
    const brisk_onnx_node *n = &c->m->graph.nodes[p];
    for (size_t j = 0; j < n->n_outputs; j++)
        if (!strcmp(n->outputs[j], name)) return &c->out[p][j];
    return NULL;
}

konst *ox_const_in(ctx *c, size_t k, konst **owned) {
    *owned = NULL;
    if (k >= c->n->n_inputs || !c->n->inputs[k][0]) return NULL;
    const brisk_onnx_tensor *t = brisk_onnx_initializer(c->m, c->n->inputs[k]);
    if (t && ox_is_param(t)) return NULL;
    if (t) return *owned = ox_from_tensor(t);
    val tmp, *v = ox_lookup(c, c->n->inputs[k], &tmp);
    return v ? v->c : NULL;
}

int ox_const_node(ctx *c, const konst *kc) {
    int rank = kc->rank ? kc->rank : 1;
    int64_t one = 1;
    int id;
    if (kc->is_float) {
        float *f = malloc((size_t)kc->numel * sizeof *f + 1);
        for (int64_t i = 0; f && i < kc->numel; i++) f[i] = (float)kc->v[i];
        id = f ? brisk_const(c->g, NULL, BRISK_F32, ox_shape_of(kc->rank ? kc->d : &one, rank), f) : ox_fail(c, "out of memory");
        free(f);
    } else {
        int32_t *f = malloc((size_t)kc->numel * sizeof *f + 1);
        for (int64_t i = 0; f && i < kc->numel; i++) f[i] = (int32_t)kc->v[i];
        id = f ? brisk_const(c->g, NULL, BRISK_I32, ox_shape_of(kc->rank ? kc->d : &one, rank), f) : ox_fail(c, "out of memory");
        free(f);
    }
    return id;
}

int ox_in(ctx *c, size_t k, int buffer) {
    if (k >= c->n->n_inputs || !c->n->inputs[k][0]) return ox_fail(c, "input %zu is missing", k);
    const char *name = c->n->inputs[k];
    const brisk_onnx_tensor *t = brisk_onnx_initializer(c->m, name);
    if (t && ox_is_param(t)) return ox_init_param(c, t, buffer);
    konst *own = NULL, *kc = t ? (own = ox_from_tensor(t)) : NULL;
    val tmp, *v = t ? NULL : ox_lookup(c, name, &tmp);
    if (!t && !v) return ox_fail(c, "input '%s' is not known", name);
    if (v && v->node >= 0) return v->node;
    if (v) kc = v->c;
    if (!kc) return ox_fail(c, "input '%s' has no value", name);
    int id = ox_const_node(c, kc);
    ox_konst_free(own);
    return id;
}

int ox_has_in(ctx *c, size_t k) { return k < c->n->n_inputs && c->n->inputs[k][0]; }

int ox_set_out(ctx *c, size_t j, int node) {
    if (j >= c->n->n_outputs) return ox_fail(c, "output %zu of %zu", j, c->n->n_outputs);
    return c->out[c->ni][j].node = node;
}

const brisk_shape *ox_shape(ctx *c, int id) { return &c->g->nodes[id].shape; }

int64_t ox_attr_i(ctx *c, const char *name, int64_t dflt) {
    int64_t v = dflt;
    brisk_error e;
    if (brisk_onnx_attr_int(c->m, c->n, name, dflt, &v, &e)) ox_fail(c, "%s", e.msg);
    return v;
}

float ox_attr_f(ctx *c, const char *name, float dflt) {
    float v = dflt;
    brisk_error e;
    if (brisk_onnx_attr_float(c->m, c->n, name, dflt, &v, &e)) ox_fail(c, "%s", e.msg);
    return v;
}

size_t ox_attr_ints(ctx *c, const char *name, const int64_t **v) {
    size_t n = 0;
    brisk_error e;
    *v = NULL;
    if (brisk_onnx_attr_ints(c->m, c->n, name, v, &n, &e)) ox_fail(c, "%s", e.msg);
    return n;
}

int ox_axis(ctx *c, int64_t a, int rank) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank) return ox_fail(c, "axis %lld of a rank-%d value", (long long)a, rank);
    return (int)d;
}


int ox_axes(ctx *c, int64_t *axes) {
    const int64_t *a;
    size_t n = ox_attr_ints(c, "axes", &a);
    for (size_t k = 0; k < n && k < BRISK_MAX_DIMS; k++) axes[k] = a[k];
    if (n) return (int)n;
    konst *own, *k1 = ox_const_in(c, 1, &own);
    int cnt = 0;
    for (int64_t k = 0; k1 && k < k1->numel && k < BRISK_MAX_DIMS; k++) axes[cnt++] = ox_i64(k1->v[k]);
    ox_konst_free(own);
    return cnt;
}

int ox_squeeze_shape(ctx *c, int unsq, const int64_t *d, int rank, int64_t *o) {
    int64_t axes[BRISK_MAX_DIMS];
    int n = ox_axes(c, axes), r = unsq ? rank + n : rank;
    if (r > BRISK_MAX_DIMS) return ox_fail(c, "rank %d is more than brisk's %d", r, BRISK_MAX_DIMS);
    char mark[BRISK_MAX_DIMS * 2] = {0};
    for (int k = 0; k < n; k++) {
        int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
        if (a < 0 || a >= r) return ox_fail(c, "axis %lld out of range", (long long)axes[k]);
        mark[a] = 1;
    }
    int out = 0;
    if (unsq) {
        for (int k = 0, j = 0; k < r; k++) o[out++] = mark[k] ? 1 : d[j++];
    } else {
        for (int k = 0; k < rank; k++)
            if (!(n ? mark[k] : d[k] == 1)) o[out++] = d[k];
    }
    return out;
}


int ox_reshape_dims(ctx *c, const int64_t *in, int rank, int64_t numel, const konst *shape, int64_t *d) {
    if (!shape) return ox_fail(c, "Reshape without a shape");
    if (shape->numel < 1 || shape->numel > BRISK_MAX_DIMS)
        return ox_fail(c, "a shape of %lld dims (1 to %d taken)", (long long)shape->numel, BRISK_MAX_DIMS);
    int r = (int)shape->numel, neg = -1;
    int64_t known = 1;
    for (int k = 0; k < r; k++) {
        d[k] = ox_i64(shape->v[k]);
        if (d[k] == 0 && k < rank) d[k] = in[k]; /* allowzero 0: copy the input's dim */
        if (d[k] == -1 && neg < 0) neg = k;
        else if (d[k] < 0 || (d[k] > 0 && known > numel / d[k] + 1))
            return ox_fail(c, "dim %lld of a Reshape of %lld values", (long long)d[k], (long long)numel);
        else known *= d[k];
    }
    if (neg >= 0) d[neg] = known ? numel / known : 0;
    if ((neg >= 0 ? d[neg] * known : known) != numel)
        return ox_fail(c, "a Reshape of %lld values to a shape of %lld", (long long)numel,
                       (long long)(neg >= 0 ? d[neg] * known : known));
    return r;
}

const char *ox_from_node(ctx *c, size_t k, char *buf, size_t cap) {
    int64_t p = k < c->n->n_inputs ? brisk_onnx_producer(c->m, c->n->inputs[k]) : -1;
    if (p < 0) snprintf(buf, cap, "input %zu", k);
    else snprintf(buf, cap, "input %zu, from node '%s' (%s)", k, c->m->graph.nodes[p].name, c->m->graph.nodes[p].op_type);
    return buf;
}
