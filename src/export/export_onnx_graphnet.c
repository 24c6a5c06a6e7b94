/* What a graph network (the meshgnn) adds to the ONNX export: sizes that depend on the batch
 * at run time, the batched edge indices and the segment sums.
 *
 * A meshgnn batch is the disjoint union of B copies of the graph: its edge indices are CONSTs
 * of B * E entries, copy b offset by b * nodes, so they differ between the batch-2 and batch-3
 * builds. In ONNX the first copy is an initializer and the offsets come from the batch size
 * at run time (Shape of an input), so the model takes any batch as the others do. A segment
 * sum is ScatterND with reduction "add" (opset 16) into zeros of the output's shape; its rows
 * are added in index order, as brisk's CPU kernel does. */
#include <stdlib.h>

#include "export/export_onnx.h"

/* The batch's unit in a dimension sized 2u in the batch-2 build and 3u in the batch-3 one:
 * u, or 0 when the dimension is not proportional to the batch. */
static int64_t batch_unit(int64_t d2, int64_t d3) {
    int64_t u = d3 - d2;
    return u > 0 && d2 == 2 * u ? u : 0;
}

/* o->batch: B as int64 [1], from the first input dimension proportional to the batch. */
static brisk_status batch_size(ox *o) {
    if (o->batch[0]) return BRISK_OK;
    for (int i = 0; i < o->g->n_inputs; i++) {
        const brisk_shape *s2 = &o->g->nodes[o->g->inputs[i].node].shape, *s3 = &o->g3->nodes[o->g3->inputs[i].node].shape;
        for (int k = 0; k < s2->ndim; k++) {
            int64_t u = batch_unit(s2->d[k], s3->d[k]);
            if (!u) continue;
            char t[BRISK_NAME_MAX + 8], c[BRISK_NAME_MAX + 8];
            attrs a = {0};
            attr_int(&a, "start", k);
            attr_int(&a, "end", k + 1);
            const char *in = o->g->inputs[i].name;
            node(o, "Shape", &in, 1, fresh(o, t), &a);
            if (u == 1) snprintf(o->batch, sizeof o->batch, "%s", t);
            else NODE(o, "Div", fresh(o, o->batch), NULL, t, const_i64(o, c, &u, 1));
            return BRISK_OK;
        }
    }
    return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: a size depends on the batch, but no input has a "
                        "dimension proportional to it");
}

/* A dimension sized 2u / 3u in the two builds as B * u at run time, int64 [1], into out. */
static brisk_status batch_dim(ox *o, int64_t d2, int64_t d3, char *out) {
    int64_t u = batch_unit(d2, d3);
    if (!u) return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: a dimension of %lld at batch 2 and %lld at "
                                "batch 3 is not proportional to the batch", (long long)d2, (long long)d3);
    brisk_status st = batch_size(o);
    if (st) return st;
    char c[BRISK_NAME_MAX + 8];
    NODE(o, "Mul", fresh(o, out), NULL, o->batch, const_i64(o, c, &u, 1));
    return BRISK_OK;
}

brisk_status brisk_onnx_runtime_shape(ox *o, const brisk_shape *s2, const brisk_shape *s3, char *out) {
    char part[BRISK_MAX_DIMS][BRISK_NAME_MAX + 8];
    const char *parts[BRISK_MAX_DIMS];
    int np = 0;
    for (int i = 0; i < s2->ndim; np++) {
        if (s2->d[i] != s3->d[i]) {
            brisk_status st = batch_dim(o, s2->d[i], s3->d[i], part[np]);
            if (st) return st;
            i++;
        } else { /* a run of fixed dimensions as one constant */
            int64_t d[BRISK_MAX_DIMS];
            int n = 0;
            while (i < s2->ndim && s2->d[i] == s3->d[i]) d[n++] = s2->d[i++];
            const_i64(o, part[np], d, n);
        }
        parts[np] = part[np];
    }
    attrs a = {0};
    attr_int(&a, "axis", 0);
    node(o, "Concat", parts, np, fresh(o, out), &a);
    return BRISK_OK;
}

brisk_status brisk_onnx_batched_indices(ox *o, int id, char *out) {
    const brisk_node *n = &o->g->nodes[id], *n3 = &o->g3->nodes[id];
    int64_t E = n3->shape.d[0] - n->shape.d[0];
    const int32_t *v2 = (const int32_t *)(o->g->const_data + n->attr.i0),
                  *v3 = (const int32_t *)(o->g3->const_data + n3->attr.i0);
    int ok = n->dtype == BRISK_I32 && n->shape.ndim == 1 && E > 0 && n->shape.d[0] == 2 * E;
    int64_t stride = ok ? (int64_t)v3[E] - v3[0] : 0;
    for (int64_t b = 0; ok && b < 3; b++)
        for (int64_t i = 0; ok && i < E; i++)
            ok = v3[b * E + i] == v3[i] + b * stride && (b == 2 || v2[b * E + i] == v3[b * E + i]);
    if (!ok)
        return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: constant %d depends on the batch size (and is not "
                            "B copies of graph indices, each offset by the graph's size)", id);
    int64_t *base = malloc(sizeof(int64_t) * (size_t)E);
    if (!base) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
    for (int64_t i = 0; i < E; i++) base[i] = v3[i];
    char c[4][BRISK_NAME_MAX + 8], t[5][BRISK_NAME_MAX + 8];
    int64_t d[2] = {1, E}, zero = 0, one = 1, flat = -1;
    initializer(o, fresh(o, c[0]), T_INT64, d, 2, base, sizeof(int64_t) * (size_t)E);
    free(base);
    brisk_status st = batch_size(o);
    if (st) return st;
    /* offsets [B, 1] = range(B) * stride; + the first copy [1, E]; flattened b-major */
    attrs a = {0};
    const char *b = o->batch;
    node(o, "Squeeze", &b, 1, fresh(o, t[0]), NULL);
    initializer(o, fresh(o, c[1]), T_INT64, NULL, 0, &zero, sizeof zero);
    initializer(o, fresh(o, c[2]), T_INT64, NULL, 0, &one, sizeof one);
    NODE(o, "Range", fresh(o, t[1]), NULL, c[1], t[0], c[2]);
    initializer(o, fresh(o, c[3]), T_INT64, NULL, 0, &stride, sizeof stride);
    NODE(o, "Mul", fresh(o, t[2]), NULL, t[1], c[3]);
    NODE(o, "Unsqueeze", fresh(o, t[3]), NULL, t[2], const_i64(o, c[1], &one, 1));
    NODE(o, "Add", fresh(o, t[4]), NULL, t[3], c[0]);
    NODE(o, "Reshape", fresh(o, t[0]), NULL, t[4], const_i64(o, c[2], &flat, 1));
    attr_int(&a, "to", T_INT32); /* the CONST's dtype, for whatever reads it */
    NODE(o, "Cast", out, &a, t[0]);
    return BRISK_OK;
}

brisk_status brisk_onnx_segment_sum(ox *o, int id, const char *out) {
    const brisk_node *n = &o->g->nodes[id], *n3 = &o->g3->nodes[id];
    char shape[BRISK_NAME_MAX + 8], c[2][BRISK_NAME_MAX + 8], t[3][BRISK_NAME_MAX + 8];
    brisk_status st = BRISK_OK;
    if (brisk_shape_equal(&n->shape, &n3->shape)) {
        int64_t d[BRISK_MAX_DIMS];
        for (int i = 0; i < n->shape.ndim; i++) d[i] = n->shape.d[i];
        const_i64(o, shape, d, n->shape.ndim);
    } else if ((st = brisk_onnx_runtime_shape(o, &n->shape, &n3->shape, shape))) {
        return st;
    }
    NODE(o, "Expand", fresh(o, t[0]), NULL, scalar(o, c[0], 0.0f), shape); /* zeros of the output's shape */
    attrs a = {0};
    attr_int(&a, "to", T_INT64); /* ScatterND's indices are int64 */
    NODE(o, "Cast", fresh(o, t[1]), &a, o->name[n->in[1]]);
    int64_t one = 1;
    NODE(o, "Unsqueeze", fresh(o, t[2]), NULL, t[1], const_i64(o, c[1], &one, 1)); /* [I, 1]: row indices */
    attr_str(&a, "reduction", "add");
    NODE(o, "ScatterND", out, &a, t[0], t[2], o->name[n->in[0]]);
    return BRISK_OK;
}
