/* The ONNX reader's protobuf walk: ModelProto and the messages under it, as onnx.proto (IR
 * version 8, ONNX 1.12) numbers their fields. Each message is read in two passes over its bytes:
 * onnx_scan() checks every field's wire type and counts the repeated ones, so that arrays are
 * allocated once at their size; then the fields are read into the model. Unknown fields are
 * skipped. Nesting is fixed by the schema (a graph inside an attribute is refused), so no file
 * can make the reader recurse deeper than ModelProto > GraphProto > NodeProto > AttributeProto >
 * TensorProto. */
#include "onnx/onnx_internal.h"
#include "data/bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- schema */

/* Only fields the reader uses or refuses by name; the rest are skipped as unknown. */
PMSG(M_MODEL, "ModelProto", {1, K_VARINT, "ir_version"}, {2, K_STRING, "producer_name"},
     {3, K_STRING, "producer_version"}, {4, K_STRING, "domain"}, {5, K_VARINT, "model_version"},
     {6, K_STRING, "doc_string"}, {7, K_MSG, "graph"}, {8, K_REP_MSG, "opset_import"},
     {14, K_REP_MSG, "metadata_props"}, {20, K_REP_MSG, "training_info"}, {25, K_REP_MSG, "functions"});
PMSG(M_OPSET, "OperatorSetIdProto", {1, K_STRING, "domain"}, {2, K_VARINT, "version"});
PMSG(M_GRAPH, "GraphProto", {1, K_REP_MSG, "node"}, {2, K_STRING, "name"}, {5, K_REP_MSG, "initializer"},
     {11, K_REP_MSG, "input"}, {12, K_REP_MSG, "output"}, {13, K_REP_MSG, "value_info"},
     {15, K_REP_MSG, "sparse_initializer"});
PMSG(M_NODE, "NodeProto", {1, K_REP_STRING, "input"}, {2, K_REP_STRING, "output"}, {3, K_STRING, "name"},
     {4, K_STRING, "op_type"}, {5, K_REP_MSG, "attribute"}, {7, K_STRING, "domain"});
PMSG(M_ATTR, "AttributeProto", {1, K_STRING, "name"}, {2, K_FIXED32, "f"}, {3, K_VARINT, "i"},
     {4, K_STRING, "s"}, {5, K_MSG, "t"}, {6, K_MSG, "g"}, {7, K_REP_FIXED32, "floats"},
     {8, K_REP_VARINT, "ints"}, {9, K_REP_STRING, "strings"}, {10, K_REP_MSG, "tensors"},
     {11, K_REP_MSG, "graphs"}, {14, K_MSG, "tp"}, {15, K_REP_MSG, "type_protos"}, {20, K_VARINT, "type"},
     {21, K_STRING, "ref_attr_name"}, {22, K_MSG, "sparse_tensor"}, {23, K_REP_MSG, "sparse_tensors"});
PMSG(M_TENSOR, "TensorProto", {1, K_REP_VARINT, "dims"}, {2, K_VARINT, "data_type"}, {3, K_MSG, "segment"},
     {4, K_REP_FIXED32, "float_data"}, {5, K_REP_VARINT, "int32_data"}, {6, K_REP_STRING, "string_data"},
     {7, K_REP_VARINT, "int64_data"}, {8, K_STRING, "name"}, {9, K_STRING, "raw_data"},
     {10, K_REP_FIXED64, "double_data"}, {11, K_REP_VARINT, "uint64_data"}, {13, K_REP_MSG, "external_data"},
     {14, K_VARINT, "data_location"});
PMSG(M_ENTRY, "StringStringEntryProto", {1, K_STRING, "key"}, {2, K_STRING, "value"});
PMSG(M_VALUE, "ValueInfoProto", {1, K_STRING, "name"}, {2, K_MSG, "type"});
PMSG(M_TYPE, "TypeProto", {1, K_MSG, "tensor_type"}, {4, K_MSG, "sequence_type"}, {5, K_MSG, "map_type"},
     {8, K_MSG, "sparse_tensor_type"}, {9, K_MSG, "optional_type"});
PMSG(M_TTYPE, "TypeProto.Tensor", {1, K_VARINT, "elem_type"}, {2, K_MSG, "shape"});
PMSG(M_SHAPE, "TensorShapeProto", {1, K_REP_MSG, "dim"});
PMSG(M_DIM, "TensorShapeProto.Dimension", {1, K_VARINT, "dim_value"}, {2, K_STRING, "dim_param"});

/* A varint field that is an int32 (data_type, elem_type): sign-extended on the wire. */
static int64_t as_i64(uint64_t v) { return (int64_t)v; }

/* ---------------------------------------------------------------- tensors */

static brisk_status read_entry(onnx_rd *rd, const uint8_t *p, size_t n, const char *where, const char **key,
                               const char **value) {
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_ENTRY, p, n, where, cnt);
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    *key = *value = "";
    for (int s; !st && (s = onnx_next(&r, &M_ENTRY, &f)) >= 0;)
        st = onnx_text(rd, &f, &M_ENTRY, where, s == 0 ? key : value);
    return st;
}

/* A TensorProto into out. `where` is its place in the file ("graph.initializer[3]") for wire
 * errors; `owner` names an attribute's tensor in messages ("node 3 'c' (Constant): attribute
 * 'value'"), NULL for an initializer, which its own name names. */
static brisk_status read_tensor(onnx_rd *rd, const uint8_t *p, size_t n, const char *where, const char *owner,
                                brisk_onnx_tensor *out) {
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_TENSOR, p, n, where, cnt);
    if (st) return st;
    onnx_tensor_fields tf = {.name = ""};
    tf.rank = CNT(M_TENSOR, cnt, 1);
    tf.n_f32 = CNT(M_TENSOR, cnt, 4);
    tf.n_i32 = CNT(M_TENSOR, cnt, 5);
    tf.n_strings = CNT(M_TENSOR, cnt, 6);
    tf.n_i64 = CNT(M_TENSOR, cnt, 7);
    tf.n_f64 = CNT(M_TENSOR, cnt, 10);
    tf.n_u64 = CNT(M_TENSOR, cnt, 11);
    tf.n_external = CNT(M_TENSOR, cnt, 13);
    int segmented = CNT(M_TENSOR, cnt, 3) > 0;
    tf.dims = onnx_array(rd->m, tf.rank, sizeof(int64_t));
    tf.f32 = onnx_array(rd->m, tf.n_f32, sizeof(float));
    tf.i32 = onnx_array(rd->m, tf.n_i32, sizeof(int64_t));
    tf.i64 = onnx_array(rd->m, tf.n_i64, sizeof(int64_t));
    tf.f64 = onnx_array(rd->m, tf.n_f64, sizeof(double));
    tf.u64 = onnx_array(rd->m, tf.n_u64, sizeof(uint64_t));
    if (!tf.dims || !tf.f32 || !tf.i32 || !tf.i64 || !tf.f64 || !tf.u64) return onnx_oom(rd);
    size_t k[6] = {0};
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    for (int s; !st && (s = onnx_next(&r, &M_TENSOR, &f)) >= 0;) {
        switch (M_TENSOR.f[s].num) {
        case 1: onnx_rep_varint(&f, (uint64_t *)tf.dims, &k[0]); break;
        case 2: tf.dtype = as_i64(f.v); break;
        case 4: onnx_rep_fixed(&f, tf.f32, 4, &k[1]); break;
        case 5: onnx_rep_varint(&f, (uint64_t *)tf.i32, &k[2]); break;
        case 7: onnx_rep_varint(&f, (uint64_t *)tf.i64, &k[3]); break;
        case 8: st = onnx_text(rd, &f, &M_TENSOR, where, &tf.name); break;
        case 9: tf.has_raw = 1, tf.raw = f.p, tf.raw_len = f.len; break;
        case 10: onnx_rep_fixed(&f, tf.f64, 8, &k[4]); break;
        case 11: onnx_rep_varint(&f, tf.u64, &k[5]); break;
        case 14: tf.location = as_i64(f.v); break;
        case 13: {
            char at[200];
            const char *key, *value;
            snprintf(at, sizeof at, "%s.external_data", where);
            if ((st = read_entry(rd, f.p, f.len, at, &key, &value))) break;
            const char **slot = !strcmp(key, "location") ? &tf.ext_location
                              : !strcmp(key, "offset")   ? &tf.ext_offset
                              : !strcmp(key, "length")   ? &tf.ext_length : NULL;
            if (slot && *slot)
                st = brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: external_data gives key '%s' twice", rd->m->path,
                                  where, key);
            else if (slot)
                *slot = value;
            break;
        }
        default: break;
        }
    }
    if (st) return st;
    char what[320];
    if (owner) snprintf(what, sizeof what, "%s", owner);
    else snprintf(what, sizeof what, "initializer '%s'", ONNX_PN(tf.name));
    if (segmented)
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: %s: a segment of a larger tensor "
                            "(TensorProto.segment); brisk reads whole tensors", rd->m->path, what);
    return onnx_tensor_finish(rd, &tf, what, out);
}

/* ---------------------------------------------------------------- value info */

static brisk_status read_dims(onnx_rd *rd, const uint8_t *p, size_t n, const char *where, brisk_onnx_value_info *vi) {
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_SHAPE, p, n, where, cnt);
    if (st) return st;
    brisk_onnx_dim *dims = onnx_array(rd->m, cnt[0], sizeof *dims);
    if (!dims) return onnx_oom(rd);
    if (cnt[0] > INT32_MAX)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: a shape of %zu dimensions", rd->m->path, where, cnt[0]);
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    size_t k = 0;
    while (!st && onnx_next(&r, &M_SHAPE, &f) >= 0) {
        char at[220];
        snprintf(at, sizeof at, "%s.dim[%zu]", where, k);
        brisk_onnx_dim *d = &dims[k++];
        d->value = -1;
        size_t dc[MAX_FIELDS];
        if ((st = onnx_scan(rd, &M_DIM, f.p, f.len, at, dc))) break;
        brisk_pbr dr = brisk_pbr_make(f.p, f.len);
        brisk_pb_field g;
        for (int s; !st && (s = onnx_next(&dr, &M_DIM, &g)) >= 0;) {
            if (s == 1) { st = onnx_text(rd, &g, &M_DIM, at, &d->param); d->value = -1; continue; }
            d->value = as_i64(g.v);
            d->param = NULL;
            if (d->value < 0)
                st = brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: value '%s': dimension %zu is %lld; dimensions are "
                                  ">= 0", rd->m->path, ONNX_PN(vi->name), k - 1, (long long)d->value);
        }
    }
    vi->rank = (int)cnt[0];
    vi->dims = dims;
    return st;
}

static brisk_status read_type(onnx_rd *rd, const uint8_t *p, size_t n, const char *where, brisk_onnx_value_info *vi) {
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_TYPE, p, n, where, cnt);
    if (st) return st;
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    /* a oneof: the last member given is the one that holds */
    for (int s; (s = onnx_next(&r, &M_TYPE, &f)) >= 0;) {
        vi->is_tensor = s == 0;
        vi->elem_type = 0;
        vi->rank = -1;
        vi->dims = NULL;
        if (!vi->is_tensor) continue;
        char at[220];
        snprintf(at, sizeof at, "%s.tensor_type", where);
        size_t tc[MAX_FIELDS];
        if ((st = onnx_scan(rd, &M_TTYPE, f.p, f.len, at, tc))) return st;
        brisk_pbr tr = brisk_pbr_make(f.p, f.len);
        brisk_pb_field g;
        for (int ts; (ts = onnx_next(&tr, &M_TTYPE, &g)) >= 0;) {
            if (ts == 0) {
                int64_t e = as_i64(g.v);
                if (e < 0 || e > 1000)
                    return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: value '%s': elem_type %lld is no ONNX type",
                                        rd->m->path, ONNX_PN(vi->name), (long long)e);
                vi->elem_type = (int)e;
            } else {
                snprintf(at, sizeof at, "%s.tensor_type.shape", where);
                if ((st = read_dims(rd, g.p, g.len, at, vi))) return st;
            }
        }
    }
    return BRISK_OK;
}

static brisk_status read_value_info(onnx_rd *rd, const uint8_t *p, size_t n, const char *where,
                                    brisk_onnx_value_info *vi) {
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_VALUE, p, n, where, cnt);
    if (st) return st;
    vi->name = "";
    vi->rank = -1;
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    for (int s; !st && (s = onnx_next(&r, &M_VALUE, &f)) >= 0;)
        if (s == 0) st = onnx_text(rd, &f, &M_VALUE, where, &vi->name);
    if (st) return st;
    if (!vi->name[0]) return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s has no name", rd->m->path, where);
    r = brisk_pbr_make(p, n);
    char at[220];
    snprintf(at, sizeof at, "%s.type", where);
    for (int s; !st && (s = onnx_next(&r, &M_VALUE, &f)) >= 0;)
        if (s == 1) st = read_type(rd, f.p, f.len, at, vi);
    return st;
}

/* ---------------------------------------------------------------- nodes */

/* Which payload fields an attribute holds, as a set of brisk_onnx_attr_type bits. */
static unsigned attr_payload(const size_t *cnt) {
    static const struct { uint32_t num; int type; } map[] = {
        {2, BRISK_ONNX_ATTR_FLOAT}, {3, BRISK_ONNX_ATTR_INT}, {4, BRISK_ONNX_ATTR_STRING},
        {5, BRISK_ONNX_ATTR_TENSOR}, {6, BRISK_ONNX_ATTR_GRAPH}, {7, BRISK_ONNX_ATTR_FLOATS},
        {8, BRISK_ONNX_ATTR_INTS}, {9, BRISK_ONNX_ATTR_STRINGS}, {10, BRISK_ONNX_ATTR_TENSORS},
        {11, BRISK_ONNX_ATTR_GRAPHS}, {22, BRISK_ONNX_ATTR_SPARSE_TENSOR},
        {23, BRISK_ONNX_ATTR_SPARSE_TENSORS}, {14, BRISK_ONNX_ATTR_TYPE_PROTO}, {15, BRISK_ONNX_ATTR_TYPE_PROTOS}};
    unsigned bits = 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (CNT(M_ATTR, cnt, map[i].num)) bits |= 1u << map[i].type;
    return bits;
}

static brisk_status read_attr(onnx_rd *rd, const uint8_t *p, size_t n, const char *where, const char *node,
                              brisk_onnx_attr *a) {
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_ATTR, p, n, where, cnt);
    if (st) return st;
    a->name = "";
    int64_t type = 0;
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    for (int s; !st && (s = onnx_next(&r, &M_ATTR, &f)) >= 0;) {
        if (f.num == 1) st = onnx_text(rd, &f, &M_ATTR, where, &a->name);
        if (f.num == 20) type = as_i64(f.v);
    }
    if (st) return st;
    if (!a->name[0]) return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: %s has no name", rd->m->path, node, where);
    const char *an = ONNX_PN(a->name);
    if (CNT(M_ATTR, cnt, 21))
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: %s: attribute '%s' refers to a function's attribute "
                            "(ref_attr_name), which only functions may; brisk reads no functions", rd->m->path, node, an);
    unsigned have = attr_payload(cnt);
    if (type < 0 || type > BRISK_ONNX_ATTR_TYPE_PROTOS)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: attribute '%s' has type %lld, which ONNX does not "
                            "define", rd->m->path, node, an, (long long)type);
    a->type = (int)type;
    if (a->type == 0) { /* old files leave the type out: it is the one field given */
        for (int t = 1; t <= BRISK_ONNX_ATTR_TYPE_PROTOS; t++)
            if (have == 1u << t) a->type = t;
        if (!a->type)
            return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: attribute '%s' has no type and %s", rd->m->path,
                                node, an, have ? "values of several types" : "no value");
    }
    if (have & ~(1u << a->type))
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: attribute '%s' is of type %s but holds values of "
                            "another type", rd->m->path, node, an, brisk_onnx_attr_type_name(a->type));
    /* a number or a list may be left at its default; a tensor has none */
    if (a->type == BRISK_ONNX_ATTR_TENSOR && !(have & (1u << a->type)))
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: attribute '%s' is of type tensor but holds none",
                            rd->m->path, node, an);
    switch (a->type) {
    case BRISK_ONNX_ATTR_GRAPH:
    case BRISK_ONNX_ATTR_GRAPHS:
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: %s: attribute '%s' holds a subgraph (the body of If, "
                            "Loop or Scan); brisk reads graphs without control flow: export with the condition or "
                            "loop unrolled", rd->m->path, node, an);
    case BRISK_ONNX_ATTR_FLOAT: case BRISK_ONNX_ATTR_INT: case BRISK_ONNX_ATTR_STRING: case BRISK_ONNX_ATTR_TENSOR:
    case BRISK_ONNX_ATTR_FLOATS: case BRISK_ONNX_ATTR_INTS: case BRISK_ONNX_ATTR_STRINGS:
        break;
    default:
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: %s: attribute '%s' is of type %s, which brisk does "
                            "not read", rd->m->path, node, an, brisk_onnx_attr_type_name(a->type));
    }
    a->n = cnt[onnx_slot(&M_ATTR, a->type == BRISK_ONNX_ATTR_FLOATS ? 7 : a->type == BRISK_ONNX_ATTR_INTS ? 8 : 9)];
    if (a->type != BRISK_ONNX_ATTR_FLOATS && a->type != BRISK_ONNX_ATTR_INTS && a->type != BRISK_ONNX_ATTR_STRINGS)
        a->n = 0;
    float *fl = a->type == BRISK_ONNX_ATTR_FLOATS ? onnx_array(rd->m, a->n, sizeof(float)) : NULL;
    int64_t *in = a->type == BRISK_ONNX_ATTR_INTS ? onnx_array(rd->m, a->n, sizeof(int64_t)) : NULL;
    const char **sv = a->type == BRISK_ONNX_ATTR_STRINGS ? onnx_array(rd->m, a->n, sizeof(char *)) : NULL;
    if ((a->type == BRISK_ONNX_ATTR_FLOATS && !fl) || (a->type == BRISK_ONNX_ATTR_INTS && !in) ||
        (a->type == BRISK_ONNX_ATTR_STRINGS && !sv))
        return onnx_oom(rd);
    a->s = "";
    size_t k = 0;
    r = brisk_pbr_make(p, n);
    for (int s; !st && (s = onnx_next(&r, &M_ATTR, &f)) >= 0;) {
        switch (f.num) {
        case 2: memcpy(&a->f, &f.v, 4); break;
        case 3: a->i = as_i64(f.v); break;
        case 4:
            if (!(a->s = onnx_dup(rd, f.p, f.len))) return onnx_oom(rd);
            a->s_len = f.len;
            break;
        case 5: {
            char what[300];
            brisk_onnx_tensor *t = onnx_alloc(rd->m, sizeof *t);
            if (!t) return onnx_oom(rd);
            snprintf(what, sizeof what, "%s: attribute '%s'", node, an);
            char at[220];
            snprintf(at, sizeof at, "%s.t", where);
            st = read_tensor(rd, f.p, f.len, at, what, t);
            a->t = t;
            break;
        }
        /* a list of another type can only be an empty packed run here: attr_payload counted none */
        case 7: if (fl) onnx_rep_fixed(&f, fl, 4, &k); break;
        case 8: if (in) onnx_rep_varint(&f, (uint64_t *)in, &k); break;
        case 9:
            if (sv && !(sv[k++] = onnx_dup(rd, f.p, f.len))) return onnx_oom(rd);
            break;
        default: break;
        }
    }
    a->floats = fl;
    a->ints = in;
    a->strings = sv;
    return st;
}

static brisk_status read_node(onnx_rd *rd, const uint8_t *p, size_t n, size_t index, brisk_onnx_node *nd) {
    char where[64];
    snprintf(where, sizeof where, "graph.node[%zu]", index);
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_NODE, p, n, where, cnt);
    if (st) return st;
    nd->name = nd->op_type = nd->domain = "";
    nd->n_inputs = cnt[0];
    nd->n_outputs = cnt[1];
    nd->n_attrs = cnt[4];
    const char **in = onnx_array(rd->m, nd->n_inputs, sizeof(char *));
    const char **out = onnx_array(rd->m, nd->n_outputs, sizeof(char *));
    brisk_onnx_attr *attrs = onnx_array(rd->m, nd->n_attrs, sizeof *attrs);
    if (!in || !out || !attrs) return onnx_oom(rd);
    size_t ki = 0, ko = 0, ka = 0;
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    /* attributes last, so that their messages can name the node */
    for (int s; !st && (s = onnx_next(&r, &M_NODE, &f)) >= 0;) {
        switch (f.num) {
        case 1: st = onnx_text(rd, &f, &M_NODE, where, &in[ki++]); break;
        case 2: st = onnx_text(rd, &f, &M_NODE, where, &out[ko++]); break;
        case 3: st = onnx_text(rd, &f, &M_NODE, where, &nd->name); break;
        case 4: st = onnx_text(rd, &f, &M_NODE, where, &nd->op_type); break;
        case 7: st = onnx_text(rd, &f, &M_NODE, where, &nd->domain); break;
        default: break;
        }
    }
    nd->inputs = in;
    nd->outputs = out;
    nd->attrs = attrs;
    if (st) return st;
    char node[200];
    snprintf(node, sizeof node, "node %zu '%s' (%s)", index, ONNX_PN(nd->name), ONNX_PN(nd->op_type));
    if (!nd->op_type[0]) return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s has no op_type", rd->m->path, node);
    r = brisk_pbr_make(p, n);
    while (!st && onnx_next(&r, &M_NODE, &f) >= 0) {
        if (f.num != 5) continue;
        char at[120];
        snprintf(at, sizeof at, "%s.attribute[%zu]", where, ka);
        st = read_attr(rd, f.p, f.len, at, node, &attrs[ka++]);
    }
    if (st) return st;
    const char **names = onnx_array(rd->m, ka, sizeof *names);
    if (!names) return onnx_oom(rd);
    for (size_t i = 0; i < ka; i++) names[i] = attrs[i].name;
    const char *dup = onnx_duplicate(names, ka);
    if (dup)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: attribute '%s' is given twice", rd->m->path, node,
                            ONNX_PN(dup));
    return BRISK_OK;
}

/* ---------------------------------------------------------------- graph and model */

static brisk_status read_graph(onnx_rd *rd, const uint8_t *p, size_t n) {
    brisk_onnx_graph *g = &rd->m->graph;
    size_t cnt[MAX_FIELDS];
    brisk_status st = onnx_scan(rd, &M_GRAPH, p, n, "graph", cnt);
    if (st) return st;
    if (CNT(M_GRAPH, cnt, 15))
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: graph has %zu sparse initializers "
                            "(GraphProto.sparse_initializer); brisk reads dense tensors only", rd->m->path,
                            CNT(M_GRAPH, cnt, 15));
    g->name = "";
    g->n_nodes = CNT(M_GRAPH, cnt, 1);
    g->n_initializers = CNT(M_GRAPH, cnt, 5);
    g->n_inputs = CNT(M_GRAPH, cnt, 11);
    g->n_outputs = CNT(M_GRAPH, cnt, 12);
    g->n_value_info = CNT(M_GRAPH, cnt, 13);
    brisk_onnx_node *nodes = onnx_array(rd->m, g->n_nodes, sizeof *nodes);
    brisk_onnx_tensor *inits = onnx_array(rd->m, g->n_initializers, sizeof *inits);
    brisk_onnx_value_info *vis = onnx_array(rd->m, g->n_inputs + g->n_outputs + g->n_value_info, sizeof *vis);
    if (!nodes || !inits || !vis) return onnx_oom(rd);
    g->nodes = nodes;
    g->initializers = inits;
    g->inputs = vis;
    g->outputs = vis + g->n_inputs;
    g->value_info = vis + g->n_inputs + g->n_outputs;
    size_t k[5] = {0};
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    for (int s; !st && (s = onnx_next(&r, &M_GRAPH, &f)) >= 0;) {
        char at[64];
        switch (f.num) {
        case 1: st = read_node(rd, f.p, f.len, k[0], &nodes[k[0]]), k[0]++; break;
        case 2: st = onnx_text(rd, &f, &M_GRAPH, "graph", &g->name); break;
        case 5:
            snprintf(at, sizeof at, "graph.initializer[%zu]", k[1]);
            st = read_tensor(rd, f.p, f.len, at, NULL, &inits[k[1]++]);
            break;
        case 11:
            snprintf(at, sizeof at, "graph.input[%zu]", k[2]);
            st = read_value_info(rd, f.p, f.len, at, &vis[k[2]++]);
            break;
        case 12:
            snprintf(at, sizeof at, "graph.output[%zu]", k[3]);
            st = read_value_info(rd, f.p, f.len, at, &vis[g->n_inputs + k[3]++]);
            break;
        case 13:
            snprintf(at, sizeof at, "graph.value_info[%zu]", k[4]);
            st = read_value_info(rd, f.p, f.len, at, &vis[g->n_inputs + g->n_outputs + k[4]++]);
            break;
        default: break;
        }
    }
    return st;
}

/* What the first bytes of a file that is no ModelProto look like, for the message. */
static const char *looks_like(const uint8_t *p, size_t n) {
    if (n >= 4 && !memcmp(p, "PK\x03\x04", 4))
        return " (a zip archive, as torch.save writes: export the model with torch.onnx.export)";
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) return " (a JPEG image)";
    if (n >= 4 && !memcmp(p, "\x89PNG", 4)) return " (a PNG image)";
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    if (i < n && (p[i] == '{' || p[i] == '[')) return " (JSON text)";
    if (n > 8 && p[8] == '{') return " (a safetensors file)";
    return "";
}

/* A ModelProto's first field is one of its own with the right wire type: a cheap test that
 * tells a file of another kind from a damaged model. */
static brisk_status check_magic(onnx_rd *rd, const uint8_t *p, size_t n) {
    if (n == 0) return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: empty file, not an ONNX model", rd->m->path);
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    int rc = brisk_pbr_next(&r, &f);
    /* a good tag whose value the end cuts off is a truncated model, judged later */
    int s = rc > 0 || rc == BRISK_PBR_PAST_END || rc == BRISK_PBR_TRUNCATED ? onnx_slot(&M_MODEL, f.num) : -1;
    if (s >= 0 && onnx_wire_ok(M_MODEL.f[s].kind, f.wire)) return BRISK_OK;
    char hex[40] = "";
    for (size_t i = 0; i < n && i < 8; i++) snprintf(hex + 3 * i, sizeof hex - 3 * i, "%02x ", p[i]);
    hex[strlen(hex) - 1] = 0;
    return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: not an ONNX model: its first bytes (%s) are no ModelProto "
                        "field%s", rd->m->path, hex, looks_like(p, n));
}

static brisk_status read_model(onnx_rd *rd, const uint8_t *p, size_t n) {
    brisk_onnx_model *m = rd->m;
    brisk_status st = check_magic(rd, p, n);
    size_t cnt[MAX_FIELDS];
    if (st || (st = onnx_scan(rd, &M_MODEL, p, n, "", cnt))) return st;
    if (CNT(M_MODEL, cnt, 25))
        return brisk_errorf(rd->err, BRISK_ERR_UNSUPPORTED, "%s: the model defines %zu local functions "
                            "(ModelProto.functions); brisk reads plain graphs: export without "
                            "export_modules_as_functions", m->path, CNT(M_MODEL, cnt, 25));
    m->producer_name = m->producer_version = "";
    m->n_opsets = CNT(M_MODEL, cnt, 8);
    brisk_onnx_opset *ops = onnx_array(m, m->n_opsets, sizeof *ops);
    if (!ops) return onnx_oom(rd);
    m->opsets = ops;
    int have_ir = 0;
    const uint8_t *graph = NULL;
    size_t graph_len = 0, k = 0;
    brisk_pbr r = brisk_pbr_make(p, n);
    brisk_pb_field f;
    for (int s; !st && (s = onnx_next(&r, &M_MODEL, &f)) >= 0;) {
        switch (f.num) {
        case 1: m->ir_version = as_i64(f.v), have_ir = 1; break;
        case 2: st = onnx_text(rd, &f, &M_MODEL, "", &m->producer_name); break;
        case 3: st = onnx_text(rd, &f, &M_MODEL, "", &m->producer_version); break;
        case 7: graph = f.p, graph_len = f.len; break;
        case 8: {
            char at[64];
            snprintf(at, sizeof at, "opset_import[%zu]", k);
            size_t oc[MAX_FIELDS];
            brisk_onnx_opset *o = &ops[k++];
            o->domain = "";
            if ((st = onnx_scan(rd, &M_OPSET, f.p, f.len, at, oc))) break;
            brisk_pbr orr = brisk_pbr_make(f.p, f.len);
            brisk_pb_field g;
            for (int os; !st && (os = onnx_next(&orr, &M_OPSET, &g)) >= 0;) {
                if (os == 0) st = onnx_text(rd, &g, &M_OPSET, at, &o->domain);
                else o->version = as_i64(g.v);
            }
            if (!st && o->version <= 0)
                st = brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: %s: opset version %lld for domain '%s'; versions "
                                  "start at 1", m->path, at, (long long)o->version, ONNX_PN(o->domain));
            break;
        }
        default: break;
        }
    }
    if (st) return st;
    if (!have_ir || m->ir_version <= 0)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: not an ONNX model: ModelProto has %s", m->path,
                            have_ir ? "an ir_version below 1" : "no ir_version");
    if (!graph) return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: the model has no graph (ModelProto.graph)", m->path);
    const char **domains = onnx_array(m, m->n_opsets, sizeof *domains);
    if (!domains) return onnx_oom(rd);
    /* "" and "ai.onnx" are one domain, the standard operators */
    for (size_t i = 0; i < m->n_opsets; i++) domains[i] = strcmp(ops[i].domain, "ai.onnx") ? ops[i].domain : "";
    const char *dup = onnx_duplicate(domains, m->n_opsets);
    if (dup)
        return brisk_errorf(rd->err, BRISK_ERR_FORMAT, "%s: opset_import gives %s%s%s twice", m->path,
                            dup[0] ? "domain '" : "the standard operators ('' or 'ai.onnx')", dup[0] ? ONNX_PN(dup) : "",
                            dup[0] ? "'" : "");
    if ((st = read_graph(rd, graph, graph_len))) return st;
    return onnx_graph_check(rd);
}

/* ---------------------------------------------------------------- entry points */

static brisk_status parse_in(const void *buf, size_t len, const char *name, const char *dir, void *own,
                             brisk_onnx_model **out, brisk_error *err) {
    *out = NULL;
    brisk_onnx_model *m = calloc(1, sizeof *m);
    struct brisk_onnx_priv *pv = calloc(1, sizeof *pv);
    if (!m || !pv) {
        free(m);
        free(pv);
        free(own);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory while reading the model", name);
    }
    m->priv = pv;
    pv->file = own;
    m->path = name;
    char *path = onnx_alloc(m, strlen(name) + 1);
    if (path) m->path = strcpy(path, name);
    onnx_rd rd = {m, (const uint8_t *)buf, dir, err};
    brisk_status st = path ? read_model(&rd, buf, len) : onnx_oom(&rd);
    if (st) {
        brisk_onnx_free(m);
        return st;
    }
    *out = m;
    return BRISK_OK;
}

brisk_status brisk_onnx_parse(const void *buf, size_t len, const char *name, brisk_onnx_model **out,
                              brisk_error *err) {
    return parse_in(buf, len, name ? name : "<memory>", NULL, NULL, out, err);
}

brisk_status brisk_onnx_open(const char *path, brisk_onnx_model **out, brisk_error *err) {
    *out = NULL;
    brisk_file f;
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    /* the folder external data is relative to */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    return parse_in(f.data, f.len, path, dir, f.mem, out, err);
}

void brisk_onnx_free(brisk_onnx_model *m) {
    if (!m) return;
    struct brisk_onnx_priv *pv = m->priv;
    for (onnx_block *b = pv->blocks, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    free(pv->names);
    free(pv->file);
    free(pv);
    free(m);
}
