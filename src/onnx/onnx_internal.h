/* onnx-internal: what the reader's files share. onnx_wire.c checks a message's fields against
 * its table and holds the model's memory, onnx_read.c walks ModelProto and the messages under
 * it, onnx_tensor.c turns a TensorProto's fields into checked data (external files included),
 * onnx_graph.c indexes names, checks the graph, orders it and answers lookups. */
#ifndef BRISK_ONNX_INTERNAL_H
#define BRISK_ONNX_INTERNAL_H

#include "onnx/onnx_model.h"
#include "core/protowire.h"
#include "data/safetensors_internal.h" /* brisk_st_printable */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX tensor data is little-endian; brisk hands it out in place"
#endif

/* A name from the file fit for a one-line message (control bytes as '?', long ones cut). */
#define ONNX_PN(s) brisk_st_printable((s), (char[96]){0}, 96)

/* The model's memory: blocks freed together. */
typedef struct onnx_block {
    struct onnx_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} onnx_block;

/* Value name -> what defines it, for the graph checks and the lookups. */
typedef struct onnx_name {
    const char *name;   /* NULL: empty slot */
    int64_t init;       /* initializer index or -1 */
    int64_t input;      /* graph input index or -1 */
    int64_t producer;   /* node index or -1 */
    int64_t info;       /* value_info entry (graph.inputs, outputs, value_info in that order) or -1 */
    int64_t output;     /* graph output index or -1 */
} onnx_name;

struct brisk_onnx_priv {
    onnx_block *blocks;
    void *file;          /* the model's bytes when brisk_onnx_open read them */
    onnx_name *names;    /* open addressing, cap a power of two */
    size_t cap;
};

/* The reader's state while it parses one model. */
typedef struct onnx_rd {
    brisk_onnx_model *m;
    const uint8_t *base;  /* the whole file, so messages give absolute byte offsets */
    const char *dir;      /* the model's folder for external data; NULL when parsed from memory */
    brisk_error *err;
} onnx_rd;

/* ---------------------------------------------------------------- reading messages (onnx_wire.c) */

/* What a field of a message holds; a repeated number may come packed or one per field. */
enum {
    K_VARINT,     /* int32/int64/enum */
    K_FIXED32,    /* float */
    K_STRING,     /* string or bytes */
    K_MSG,        /* a message given once */
    K_REP_VARINT, /* repeated int32/int64/uint64, packed or not */
    K_REP_FIXED32,
    K_REP_FIXED64,
    K_REP_STRING,
    K_REP_MSG
};

typedef struct pfield {
    uint32_t num;
    uint8_t kind;
    const char *name;
} pfield;

typedef struct pmsg {
    const char *name;
    const pfield *f;
    int n;
} pmsg;

/* A message's table of fields: PMSG(M_NODE, "NodeProto", {1, K_REP_STRING, "input"}, ...). */
#define PMSG(var, label, ...)                          \
    static const pfield var##_f[] = {__VA_ARGS__};     \
    static const pmsg var = {label, var##_f, (int)(sizeof var##_f / sizeof var##_f[0])}

/* The most fields a table has (AttributeProto's 17): the size of a count array. */
#define MAX_FIELDS 20
/* The count of field `num`, which the table d has, in cnt. */
#define CNT(d, cnt, num) ((cnt)[onnx_slot(&(d), (num))])

/* The index of field `num` in the table, or -1. */
int onnx_slot(const pmsg *d, uint32_t num);
/* 1 when a field of this kind may come with this wire type. */
int onnx_wire_ok(int kind, int wire);
brisk_status onnx_oom(onnx_rd *rd);
/* Checks every field of a message (n bytes at p, a part of rd->base) against d, and counts the
 * known ones into cnt[MAX_FIELDS]: messages and strings per occurrence, repeated numbers per
 * value. `where` names the message in errors ("graph.node[3]"; "" for the ModelProto). */
brisk_status onnx_scan(onnx_rd *rd, const pmsg *d, const uint8_t *p, size_t n, const char *where, size_t *cnt);
/* The next known field of a message onnx_scan accepted: its slot in d, or -1 at the end. */
int onnx_next(brisk_pbr *r, const pmsg *d, brisk_pb_field *f);
/* Append one field's values (one, or a packed run) at dst[*k], advancing *k. */
void onnx_rep_varint(const brisk_pb_field *f, uint64_t *dst, size_t *k);
void onnx_rep_fixed(const brisk_pb_field *f, void *dst, size_t size, size_t *k);
/* A NUL-terminated copy in the model's memory; NULL when out of memory. */
char *onnx_dup(onnx_rd *rd, const uint8_t *p, size_t n);
/* A string field that must be text (a name): refused when it holds a NUL byte. */
brisk_status onnx_text(onnx_rd *rd, const brisk_pb_field *f, const pmsg *d, const char *where, const char **out);
/* A name given twice among n (reordered), or NULL. */
const char *onnx_duplicate(const char **names, size_t n);

/* n bytes from the model's memory, 16-aligned, zeroed; NULL when out of memory. */
void *onnx_alloc(brisk_onnx_model *m, size_t n);
/* As onnx_alloc for count elements of size each, with an overflow check. */
void *onnx_array(brisk_onnx_model *m, size_t count, size_t size);

/* A TensorProto's fields as read, before its data is checked and laid out. */
typedef struct onnx_tensor_fields {
    const char *name;
    int64_t dtype;
    int64_t *dims;
    size_t rank;
    int has_raw;
    const uint8_t *raw;
    size_t raw_len;
    float *f32;         /* float_data */
    int64_t *i32;       /* int32_data, as read (range-checked later) */
    int64_t *i64;       /* int64_data */
    double *f64;        /* double_data */
    uint64_t *u64;      /* uint64_data */
    size_t n_f32, n_i32, n_i64, n_f64, n_u64;
    size_t n_strings;   /* string_data entries (refused) */
    int64_t location;   /* data_location */
    const char *ext_location, *ext_offset, *ext_length;
    size_t n_external;  /* external_data entries */
} onnx_tensor_fields;

/* Checks a tensor's fields and fills out (data from raw_data, a typed field or an external
 * file). `what` names it in messages: "initializer 'fc.weight'". */
brisk_status onnx_tensor_finish(onnx_rd *rd, const onnx_tensor_fields *tf, const char *what, brisk_onnx_tensor *out);

/* Indexes the graph's names and checks them, then orders its nodes (graph.order). */
brisk_status onnx_graph_check(onnx_rd *rd);

#endif
