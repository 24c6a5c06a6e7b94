/* The ONNX reader (src/onnx) on models built here field by field (tests/onnx/onnx_build.h) and
 * on the models torch.onnx.export wrote into the fuzz seed corpus: what a good model reads as,
 * and the one error each kind of bad model gives. The same modules exported by the torch on
 * this machine, with their weights, are test_onnx_torch.c's. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test.h"

static brisk_error err;

/* Parses the bytes; 1 when they are a model (freed again), 0 with err filled. */
static int parses(const void *p, size_t n) {
    brisk_onnx_model *m = NULL;
    memset(&err, 0, sizeof err);
    if (brisk_onnx_parse(p, n, "m.onnx", &m, &err) != BRISK_OK) return 0;
    brisk_onnx_free(m);
    return 1;
}

/* The model must be refused with a message holding `text`. */
#define CHECK_REFUSED(p, n, text) do { \
    CHECKF(!parses((p), (n)), "accepted, expected \"%s\"", (text)); \
    CHECKF(strstr(err.msg, (text)) != NULL, "message \"%s\" lacks \"%s\"", err.msg, (text)); \
    CHECKF(!strncmp(err.msg, "m.onnx: ", 8), "message \"%s\" does not name the file", err.msg); \
} while (0)

static void test_good_model_field_by_field(void) {
    brisk_pb b = {0};
    ob_linear(&b, NULL);
    brisk_onnx_model *m;
    REQUIRE_OK(brisk_onnx_parse(b.p, b.n, "m.onnx", &m, &err), &err);
    const brisk_onnx_graph *g = &m->graph;
    CHECK(m->ir_version == 8 && !strcmp(m->producer_name, "brisk-test") && !strcmp(m->producer_version, ""));
    CHECK(brisk_onnx_opset_version(m, "") == 17 && brisk_onnx_opset_version(m, NULL) == 17);
    CHECK(brisk_onnx_opset_version(m, "ai.onnx") == 17 && brisk_onnx_opset_version(m, "com.microsoft") == 0);
    CHECK(!strcmp(g->name, "linear") && g->n_nodes == 2 && g->n_initializers == 2);
    CHECK(!strcmp(g->nodes[0].op_type, "MatMul") && g->nodes[0].n_inputs == 2 && !strcmp(g->nodes[0].inputs[1], "W"));
    CHECK(g->order[0] == 0 && g->order[1] == 1);
    const brisk_onnx_tensor *w = brisk_onnx_initializer(m, "W");
    REQUIRE(w && w->dtype == BRISK_ONNX_FLOAT && w->rank == 2 && w->dims[0] == 4 && w->dims[1] == 3);
    REQUIRE(w->numel == 12 && w->nbytes == 48 && !w->external);
    /* zero-copy: raw_data is read where it lies in the buffer */
    CHECK((const uint8_t *)w->data > b.p && (const uint8_t *)w->data + 48 <= b.p + b.n);
    float v[12];
    memcpy(v, w->data, sizeof v);
    CHECK(v[0] == 0.0f && v[11] == 11.0f);
    CHECK(brisk_onnx_initializer(m, "x") == NULL && brisk_onnx_initializer(m, "nope") == NULL);
    CHECK(brisk_onnx_producer(m, "y") == 1 && brisk_onnx_producer(m, "x") == -1 && brisk_onnx_producer(m, "W") == -1);
    const brisk_onnx_value_info *x = brisk_onnx_value_info_find(m, "x");
    REQUIRE(x && x->is_tensor && x->elem_type == BRISK_ONNX_FLOAT && x->rank == 2);
    CHECK(x->dims[0].value == -1 && !strcmp(x->dims[0].param, "N") && x->dims[1].value == 4 && !x->dims[1].param);
    CHECK(brisk_onnx_value_info_find(m, "y") == &g->outputs[0] && brisk_onnx_value_info_find(m, "h") == NULL);
    brisk_onnx_free(m);
    brisk_pb_free(&b);
}

/* Nodes listed consumer first still come out producers first; unknown fields and groups are
 * skipped; repeated numbers read packed and unpacked alike. */
static void test_order_unknown_fields_and_packing(void) {
    brisk_pb g = {0}, t = {0}, b = {0};
    ob_node(&g, "Relu", OB_LIST("h"), OB_LIST("y"), NULL);
    ob_node(&g, "Neg", OB_LIST("x"), OB_LIST("h"), NULL);
    brisk_pb_uint(&g, 99, 7);             /* an unknown varint field */
    brisk_pb_tag(&g, 98, BRISK_PB_GROUP); /* an unknown group holding a field */
    brisk_pb_uint(&g, 1, 5);
    brisk_pb_tag(&g, 98, 4);
    /* dims unpacked, int64_data unpacked and packed: [1, 2, 3, 4] */
    brisk_pb_int(&t, 1, 2);
    brisk_pb_int(&t, 1, 2);
    brisk_pb_int(&t, 2, BRISK_ONNX_INT64);
    brisk_pb_string(&t, 8, "k");
    brisk_pb_int(&t, 7, 1);
    brisk_pb_packed_int(&t, 7, (const int64_t[]){2, 3, -4}, 3);
    brisk_pb_message(&g, 5, &t);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 13, &g);
    brisk_onnx_model *m;
    REQUIRE_OK(brisk_onnx_parse(b.p, b.n, "m.onnx", &m, &err), &err);
    CHECK(m->graph.order[0] == 1 && m->graph.order[1] == 0);
    const brisk_onnx_tensor *k = brisk_onnx_initializer(m, "k");
    REQUIRE(k && k->numel == 4 && k->nbytes == 32);
    int64_t v[4];
    memcpy(v, k->data, sizeof v);
    CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == -4);
    brisk_onnx_free(m);
    brisk_pb_free(&g);
    brisk_pb_free(&t);
    brisk_pb_free(&b);
}

static void test_typed_fields_and_dtypes(void) {
    brisk_pb t = {0}, b = {0};
    brisk_onnx_model *m;
    /* float_data, one value unpacked, two packed */
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){3}, 1, NULL, 0);
    brisk_pb_float(&t, 4, 1.5f);
    brisk_pb_packed_float(&t, 4, (const float[]){2.5f, -3.0f}, 2);
    ob_linear(&b, &t);
    /* (W's shape does not fit MatMul: the reader does not judge ops) */
    REQUIRE_OK(brisk_onnx_parse(b.p, b.n, "m.onnx", &m, &err), &err);
    float f[3];
    memcpy(f, brisk_onnx_initializer(m, "W")->data, sizeof f);
    CHECK(f[0] == 1.5f && f[1] == 2.5f && f[2] == -3.0f);
    brisk_onnx_free(m);
    /* float16 and bool as raw, float16 and bool in int32_data, double, uint32 */
    static const struct { int dtype; size_t size; } raw[] = {{BRISK_ONNX_FLOAT16, 2}, {BRISK_ONNX_BOOL, 1},
        {BRISK_ONNX_DOUBLE, 8}, {BRISK_ONNX_INT32, 4}, {BRISK_ONNX_INT64, 8}, {BRISK_ONNX_BFLOAT16, 2}};
    uint8_t bytes[16] = {0x00, 0x3c, 0x01, 0x00};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        brisk_pb_reset(&t), brisk_pb_reset(&b);
        ob_tensor(&t, "W", raw[i].dtype, (const int64_t[]){2}, 1, bytes, 2 * raw[i].size);
        ob_linear(&b, &t);
        CHECKF(parses(b.p, b.n), "%s: %s", brisk_onnx_dtype_name(raw[i].dtype), err.msg);
    }
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT16, (const int64_t[]){2}, 1, NULL, 0);
    brisk_pb_packed_int(&t, 5, (const int64_t[]){0x3c00, 0xbc00}, 2);
    ob_linear(&b, &t);
    REQUIRE_OK(brisk_onnx_parse(b.p, b.n, "m.onnx", &m, &err), &err);
    const brisk_onnx_tensor *h = brisk_onnx_initializer(m, "W");
    uint16_t hv[2];
    memcpy(hv, h->data, 4);
    CHECK(h->nbytes == 4 && hv[0] == 0x3c00 && hv[1] == 0xbc00);
    brisk_onnx_free(m);
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_DOUBLE, (const int64_t[]){2}, 1, NULL, 0);
    brisk_pb_packed_double(&t, 10, (const double[]){0.25, -8}, 2);
    ob_linear(&b, &t);
    REQUIRE_OK(brisk_onnx_parse(b.p, b.n, "m.onnx", &m, &err), &err);
    double dv[2];
    memcpy(dv, brisk_onnx_initializer(m, "W")->data, 16);
    CHECK(dv[0] == 0.25 && dv[1] == -8);
    brisk_onnx_free(m);
    /* a value that does not fit the type int32_data carries it for */
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_BOOL, (const int64_t[]){2}, 1, NULL, 0);
    brisk_pb_packed_int(&t, 5, (const int64_t[]){1, 2}, 2);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W': int32_data[1] is 2, outside bool's range [0, 1]");
    brisk_pb_free(&t);
    brisk_pb_free(&b);
}

static void test_initializer_size_and_dims(void) {
    brisk_pb t = {0}, b = {0};
    static uint8_t raw[8192];
    ob_tensor(&t, "fc.weight", BRISK_ONNX_FLOAT, (const int64_t[]){64, 32}, 2, raw, 8000);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "m.onnx: initializer 'fc.weight': dims [64, 32] of float need 8192 bytes, raw_data has 8000");
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){4, -3}, 2, raw, 48);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W': dims [4, -3]: dimension 1 is negative");
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){1ll << 40, 1ll << 40}, 2, raw, 48);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W': dims [1099511627776, 1099511627776] of float overflow");
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){2, 3}, 2, NULL, 0);
    brisk_pb_packed_float(&t, 4, (const float[]){1, 2, 3, 4, 5}, 5);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W': dims [2, 3] of float need 6 values, float_data has 5");
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){2}, 1, NULL, 0);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W': dims [2] of float need 8 bytes, it holds no data");
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){2}, 1, raw, 8);
    brisk_pb_packed_float(&t, 4, (const float[]){1, 2}, 2);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W' holds data in both raw_data and float_data");
    brisk_pb_reset(&t), brisk_pb_reset(&b);
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){2}, 1, NULL, 0);
    brisk_pb_packed_int(&t, 7, (const int64_t[]){1, 2}, 2);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W': int64_data given for a tensor of float");
    /* element types a tensor here cannot hold */
    static const struct { int dtype; const char *text; } bad[] = {
        {BRISK_ONNX_STRING, "holds string values"}, {BRISK_ONNX_COMPLEX64, "holds complex64 values"},
        {BRISK_ONNX_UNDEFINED, "initializer 'W' has no data_type"}, {77, "data_type 77 is no ONNX type"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        brisk_pb_reset(&t), brisk_pb_reset(&b);
        ob_tensor(&t, "W", bad[i].dtype, (const int64_t[]){2}, 1, raw, 8);
        ob_linear(&b, &t);
        CHECK_REFUSED(b.p, b.n, bad[i].text);
    }
    brisk_pb_free(&t);
    brisk_pb_free(&b);
}

static void test_not_a_model_or_truncated(void) {
    brisk_pb b = {0};
    ob_linear(&b, NULL);
    CHECK_REFUSED(b.p, b.n / 2, "m.onnx: truncated: graph (ModelProto field 7) at byte");
    CHECK_REFUSED(b.p, b.n / 2, "(the file was cut short)");
    CHECK_REFUSED(b.p, 1, "truncated");
    CHECK_REFUSED(b.p, 0, "empty file, not an ONNX model");
    static const uint8_t jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F'};
    CHECK_REFUSED(jpeg, sizeof jpeg, "not an ONNX model: its first bytes (ff d8 ff e0 00 10 4a 46) are no "
                                     "ModelProto field (a JPEG image)");
    CHECK_REFUSED("{\"model\": 1}", 12, "(JSON text)");
    CHECK_REFUSED("PK\x03\x04\x14\x00", 6, "torch.save");
    CHECK_REFUSED("\x89PNG\r\n", 6, "(a PNG image)");
    /* plausible first field, then garbage: damaged, with the place */
    static const uint8_t over[] = {0x08, 0x07, 0x3a, 0x0b, 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK_REFUSED(over, sizeof over, "damaged: graph: node (GraphProto field 1) at byte 4: malformed varint");
    /* a field of the wrong wire type: ir_version as a string */
    CHECK_REFUSED("\x08\x07\x0a\x01x", 5, "damaged: ir_version (ModelProto field 1) at byte 2 is length-delimited, "
                                          "expected varint");
    /* a model without a graph, or without ir_version */
    CHECK_REFUSED("\x08\x07", 2, "the model has no graph");
    CHECK_REFUSED("\x12\x01x", 3, "ModelProto has no ir_version");
    brisk_pb_free(&b);
}

static void test_graph_checks(void) {
    brisk_pb g = {0}, b = {0};
    /* a cycle: h = Neg(y), y = Relu(h) */
    ob_node(&g, "Neg", OB_LIST("y"), OB_LIST("h"), NULL);
    ob_node(&g, "Relu", OB_LIST("h"), OB_LIST("y"), NULL);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "the graph has a cycle: node 1 'Relu' (Relu) takes 'h' from node 0 'Neg' (Neg)");
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Neg", OB_LIST("y"), OB_LIST("y"), NULL);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "the graph has a cycle: node 0 'Neg' (Neg) takes its own output 'y'");
    /* an input nothing produces */
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Add", OB_LIST("x", "nope"), OB_LIST("y"), NULL);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "node 0 'Add' (Add): input 'nope' is produced by no node and is no graph input or "
                            "initializer");
    /* "" is an optional input left out: fine */
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Clip", OB_LIST("x", "", ""), OB_LIST("y"), NULL);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECKF(parses(b.p, b.n), "%s", err.msg);
    /* duplicate outputs, of two nodes and of the graph */
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Neg", OB_LIST("x"), OB_LIST("y"), NULL);
    ob_node(&g, "Relu", OB_LIST("x"), OB_LIST("y"), NULL);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "duplicate output name 'y': node 0 'Neg' (Neg) and node 1 'Relu' (Relu) both produce it");
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Neg", OB_LIST("x"), OB_LIST("x"), NULL);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "x", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "node 0 'Neg' (Neg): output 'x' is also the name of a graph input");
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Neg", OB_LIST("x"), OB_LIST("y"), NULL);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "graph output 'y' is listed twice");
    brisk_pb_reset(&g), brisk_pb_reset(&b);
    ob_node(&g, "Neg", OB_LIST("x"), OB_LIST("y"), NULL);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "z", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    CHECK_REFUSED(b.p, b.n, "graph output 'z' is produced by no node");
    /* two initializers of one name */
    brisk_pb t = {0};
    brisk_pb_reset(&b);
    ob_tensor(&t, "B", BRISK_ONNX_FLOAT, (const int64_t[]){3}, 1, (float[3]){0}, 12);
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'B' is given twice (initializers 0 and 1)");
    brisk_pb_free(&t);
    brisk_pb_free(&g);
    brisk_pb_free(&b);
}

static void test_attributes(void) {
    brisk_pb g = {0}, b = {0}, at = {0}, a = {0};
    ob_attr_int(&at, "axis", -1);
    brisk_pb_string(&a, 1, "pads");
    brisk_pb_uint(&a, 20, BRISK_ONNX_ATTR_INTS);
    brisk_pb_int(&a, 8, 1); /* one unpacked, three packed */
    brisk_pb_packed_int(&a, 8, (const int64_t[]){2, 3, 4}, 3);
    brisk_pb_message(&at, 5, &a);
    brisk_pb_reset(&a);
    brisk_pb_string(&a, 1, "alpha"); /* no type field: the value says float */
    brisk_pb_float(&a, 2, 0.5f);
    brisk_pb_message(&at, 5, &a);
    brisk_pb_reset(&a);
    brisk_pb_string(&a, 1, "mode");
    brisk_pb_uint(&a, 20, BRISK_ONNX_ATTR_STRING);
    brisk_pb_string(&a, 4, "linear");
    brisk_pb_message(&at, 5, &a);
    brisk_pb_reset(&a);
    brisk_pb t = {0};
    ob_tensor(&t, NULL, BRISK_ONNX_INT64, (const int64_t[]){1}, 1, (int64_t[]){42}, 8);
    brisk_pb_string(&a, 1, "value");
    brisk_pb_uint(&a, 20, BRISK_ONNX_ATTR_TENSOR);
    brisk_pb_message(&a, 5, &t);
    brisk_pb_message(&at, 5, &a);
    ob_node(&g, "Op", OB_LIST("x"), OB_LIST("y"), &at);
    ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
    ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
    ob_model(&b, 8, 17, &g);
    brisk_onnx_model *m;
    REQUIRE_OK(brisk_onnx_parse(b.p, b.n, "m.onnx", &m, &err), &err);
    const brisk_onnx_node *n = &m->graph.nodes[0];
    int64_t i;
    float f;
    const char *s;
    const int64_t *iv;
    size_t cnt;
    const brisk_onnx_tensor *tv;
    CHECK(brisk_onnx_attr_int(m, n, "axis", 0, &i, &err) == BRISK_OK && i == -1);
    CHECK(brisk_onnx_attr_int(m, n, "group", 1, &i, &err) == BRISK_OK && i == 1);
    CHECK(brisk_onnx_attr_float(m, n, "alpha", 1, &f, &err) == BRISK_OK && f == 0.5f);
    CHECK(brisk_onnx_attr_string(m, n, "mode", "nearest", &s, &err) == BRISK_OK && !strcmp(s, "linear"));
    CHECK(brisk_onnx_attr_string(m, n, "coord", "half_pixel", &s, &err) == BRISK_OK && !strcmp(s, "half_pixel"));
    CHECK(brisk_onnx_attr_ints(m, n, "pads", &iv, &cnt, &err) == BRISK_OK && cnt == 4 && iv[0] == 1 && iv[3] == 4);
    CHECK(brisk_onnx_attr_ints(m, n, "strides", &iv, &cnt, &err) == BRISK_OK && cnt == 0 && !iv);
    REQUIRE(brisk_onnx_attr_tensor(m, n, "value", &tv, &err) == BRISK_OK && tv);
    CHECK(tv->dtype == BRISK_ONNX_INT64 && tv->numel == 1 && !strcmp(tv->name, ""));
    memcpy(&i, tv->data, 8);
    CHECK(i == 42);
    CHECK(brisk_onnx_attr_float(m, n, "axis", 0, &f, &err) == BRISK_ERR_FORMAT);
    CHECKF(!strcmp(err.msg, "m.onnx: node 0 'Op' (Op): attribute 'axis' is int, expected float"), "%s", err.msg);
    CHECK(brisk_onnx_attr_find(n, "pads")->type == BRISK_ONNX_ATTR_INTS && !brisk_onnx_attr_find(n, "nope"));
    brisk_onnx_free(m);
    /* a subgraph, an attribute given twice, a type disagreeing with the value */
    static const struct { int type, field; const char *text; } bad[] = {
        {BRISK_ONNX_ATTR_GRAPH, 6, "attribute 'a' holds a subgraph (the body of If, Loop or Scan)"},
        {BRISK_ONNX_ATTR_INT, 2, "attribute 'a' is of type int but holds values of another type"},
        {BRISK_ONNX_ATTR_SPARSE_TENSOR, 22, "attribute 'a' is of type sparse tensor, which brisk does not read"},
        {0, 0, "attribute 'axis' is given twice"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        brisk_pb_reset(&g), brisk_pb_reset(&b), brisk_pb_reset(&at), brisk_pb_reset(&a);
        if (bad[k].type) {
            brisk_pb_string(&a, 1, "a");
            brisk_pb_uint(&a, 20, (uint64_t)bad[k].type);
            brisk_pb e = {0};
            if (bad[k].field == 2) brisk_pb_float(&a, 2, 1.0f);
            else brisk_pb_message(&a, (uint32_t)bad[k].field, &e);
            brisk_pb_message(&at, 5, &a);
        } else {
            ob_attr_int(&at, "axis", 1);
            ob_attr_int(&at, "axis", 2);
        }
        ob_node(&g, "If", OB_LIST("x"), OB_LIST("y"), &at);
        ob_value(&g, 11, "x", (const int64_t[]){3}, 1);
        ob_value(&g, 12, "y", (const int64_t[]){3}, 1);
        ob_model(&b, 8, 17, &g);
        CHECK_REFUSED(b.p, b.n, bad[k].text);
    }
    brisk_pb_free(&t);
    brisk_pb_free(&a);
    brisk_pb_free(&at);
    brisk_pb_free(&g);
    brisk_pb_free(&b);
}

static void test_model_level_refusals(void) {
    brisk_pb b = {0}, f = {0};
    ob_linear(&b, NULL);
    brisk_pb_string(&f, 1, "Block");
    brisk_pb_message(&b, 25, &f);
    CHECK_REFUSED(b.p, b.n, "the model defines 1 local functions (ModelProto.functions)");
    brisk_pb_reset(&b);
    ob_linear(&b, NULL);
    brisk_pb g = {0};
    brisk_pb_string(&g, 2, "again");
    brisk_pb_message(&b, 7, &g);
    CHECK_REFUSED(b.p, b.n, "graph (ModelProto field 7) is given more than once");
    brisk_pb_reset(&b);
    ob_linear(&b, NULL); /* imports "" at 17 */
    brisk_pb_reset(&f);
    brisk_pb_string(&f, 1, "ai.onnx");
    brisk_pb_int(&f, 2, 13);
    brisk_pb_message(&b, 8, &f);
    CHECK_REFUSED(b.p, b.n, "opset_import gives the standard operators ('' or 'ai.onnx') twice");
    brisk_pb_free(&g);
    brisk_pb_free(&f);
    brisk_pb_free(&b);
}

/* ---------------------------------------------------------------- external data */

static char dir[600];

static void write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return;
    fwrite(p, 1, n, fp);
    fclose(fp);
}

/* Writes dir/m.onnx whose W is EXTERNAL at location/offset/length (NULL: key left out), opens it. */
static brisk_status open_external(const char *location, const char *offset, const char *length) {
    brisk_pb t = {0}, b = {0};
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){4, 3}, 2, NULL, 0);
    if (location) ob_external(&t, "location", location);
    if (offset) ob_external(&t, "offset", offset);
    if (length) ob_external(&t, "length", length);
    brisk_pb_int(&t, 14, 1);
    ob_linear(&b, &t);
    char path[700];
    snprintf(path, sizeof path, "%s/m.onnx", dir);
    write_file(path, b.p, b.n);
    brisk_onnx_model *m = NULL;
    memset(&err, 0, sizeof err);
    brisk_status st = brisk_onnx_open(path, &m, &err);
    if (!st) {
        const brisk_onnx_tensor *w = brisk_onnx_initializer(m, "W");
        float v[12];
        memcpy(v, w->data, sizeof v);
        CHECK(w->external && v[0] == 0.0f && v[11] == 11.0f);
    }
    /* from memory there is no folder: refused, or refused for the location itself */
    brisk_error opened = err;
    CHECK(!parses(b.p, b.n));
    CHECKF(strstr(err.msg, "open the model by its path") || strstr(err.msg, "absolute") || strstr(err.msg, "'..'") ||
           strstr(err.msg, "no 'location'"), "%s", err.msg);
    err = opened;
    brisk_onnx_free(m);
    brisk_pb_free(&t);
    brisk_pb_free(&b);
    return st;
}

#define CHECK_EXT(st, text) do { CHECK((st) != BRISK_OK); \
    CHECKF(strstr(err.msg, (text)) != NULL, "message \"%s\" lacks \"%s\"", err.msg, (text)); } while (0)

static void test_external_data(void) {
    T_MAKE_DIR(dir, "onnx_external");
    char path[700], outside[700];
    float w[16];
    for (int i = 0; i < 16; i++) w[i] = (float)(i - 4); /* W = 0..11 at byte 16 */
    snprintf(path, sizeof path, "%s/w.bin", dir);
    write_file(path, w, sizeof w);
    snprintf(path, sizeof path, "%s/sub", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/sub/w.bin", dir);
    write_file(path, w + 4, 48);
    CHECK(open_external("w.bin", "16", "48") == BRISK_OK);
    CHECK(open_external("w.bin", "16", NULL) == BRISK_OK); /* length: to the end of the file */
    CHECK(open_external("sub/w.bin", NULL, NULL) == BRISK_OK);
    CHECK(open_external("./sub/../sub/w.bin", NULL, NULL) != BRISK_OK);
    CHECKF(strstr(err.msg, "leads out of the model's folder ('..')"), "%s", err.msg);
    CHECK_EXT(open_external("w.bin", "40", "48"), "external data at offset 40, length 48 bytes, runs past the end "
                                                  "of 'w.bin' (64 bytes)");
    CHECK_EXT(open_external("w.bin", "80", NULL), "runs past the end of 'w.bin' (64 bytes)");
    CHECK_EXT(open_external("w.bin", "0", "40"), "dims [4, 3] of float need 48 bytes, external data 'w.bin' has 40");
    CHECK_EXT(open_external("w.bin", "-1", NULL), "external_data 'offset' is '-1', not a byte count");
    CHECK_EXT(open_external("w.bin", "0", "1e3"), "external_data 'length' is '1e3', not a byte count");
    CHECK_EXT(open_external("/etc/passwd", NULL, NULL), "location '/etc/passwd' is an absolute path");
    CHECK_EXT(open_external("../w.bin", NULL, NULL), "location '../w.bin' leads out of the model's folder");
    CHECK_EXT(open_external(NULL, NULL, NULL), "data_location is EXTERNAL but external_data gives no 'location'");
    CHECK_EXT(open_external("absent.bin", NULL, NULL), "cannot open external data file");
    /* a symlink in the folder pointing out of it; and one pointing inside, which is fine */
    snprintf(outside, sizeof outside, "%s_outside.bin", dir);
    write_file(outside, w + 4, 48);
    snprintf(path, sizeof path, "%s/link.bin", dir);
    CHECK(symlink(outside, path) == 0);
    CHECK_EXT(open_external("link.bin", NULL, NULL), "outside the model's folder");
    snprintf(path, sizeof path, "%s/inner.bin", dir);
    CHECK(symlink("sub/w.bin", path) == 0);
    CHECK(open_external("inner.bin", NULL, NULL) == BRISK_OK);
    /* external_data given while data_location says DEFAULT */
    brisk_pb t = {0}, b = {0};
    ob_tensor(&t, "W", BRISK_ONNX_FLOAT, (const int64_t[]){4, 3}, 2, NULL, 0);
    ob_external(&t, "location", "w.bin");
    ob_linear(&b, &t);
    CHECK_REFUSED(b.p, b.n, "initializer 'W' has external_data but data_location is not EXTERNAL");
    brisk_pb_free(&t);
    brisk_pb_free(&b);
    char cmd[1500];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, outside);
    CHECK(system(cmd) == 0);
}

/* ---------------------------------------------------------------- torch's own files */

/* The models torch.onnx.export wrote into the fuzz corpus (tests/fuzz/corpus/onnx/README). */
static void test_torch_corpus_models(void) {
    brisk_onnx_model *m;
    REQUIRE_OK(brisk_onnx_open(BRISK_SOURCE_DIR "/tests/fuzz/corpus/onnx/mlp_opset13.onnx", &m, &err), &err);
    const brisk_onnx_graph *g = &m->graph;
    CHECK(m->ir_version == 7 && !strcmp(m->producer_name, "pytorch") && !strcmp(m->producer_version, "1.13.0"));
    CHECK(brisk_onnx_opset_version(m, "") == 13);
    REQUIRE(g->n_nodes == 3 && g->n_initializers == 4 && g->n_inputs == 1 && g->n_outputs == 1);
    static const char *const ops[] = {"Gemm", "Relu", "Gemm"}, *const keys[] = {"fc1.weight", "fc1.bias",
                                                                                 "fc2.weight", "fc2.bias"};
    for (size_t k = 0; k < 3; k++) CHECK(!strcmp(g->nodes[g->order[k]].op_type, ops[k]));
    for (size_t k = 0; k < 4; k++) CHECK(!strcmp(g->initializers[k].name, keys[k]));
    const brisk_onnx_tensor *w = brisk_onnx_initializer(m, "fc1.weight");
    CHECK(w && w->rank == 2 && w->dims[0] == 8 && w->dims[1] == 6 && w->nbytes == 192);
    int64_t tb;
    CHECK(brisk_onnx_attr_int(m, &g->nodes[0], "transB", 0, &tb, &err) == BRISK_OK && tb == 1);
    CHECK(g->inputs[0].rank == 2 && !strcmp(g->inputs[0].dims[0].param, "N") && g->inputs[0].dims[1].value == 6);
    brisk_onnx_free(m);
    REQUIRE_OK(brisk_onnx_open(BRISK_SOURCE_DIR "/tests/fuzz/corpus/onnx/cnn_opset17.onnx", &m, &err), &err);
    CHECK(m->ir_version == 8 && brisk_onnx_opset_version(m, "") == 17 && m->graph.n_nodes == 12);
    size_t constants = 0;
    for (size_t k = 0; k < m->graph.n_nodes; k++) {
        const brisk_onnx_node *n = &m->graph.nodes[k];
        const brisk_onnx_tensor *v;
        if (strcmp(n->op_type, "Constant")) continue;
        CHECK(brisk_onnx_attr_tensor(m, n, "value", &v, &err) == BRISK_OK && v && v->dtype == BRISK_ONNX_INT64);
        constants++;
    }
    CHECK(constants == 3);
    brisk_onnx_free(m);
    CHECK(brisk_onnx_open(T_ABSENT "/m.onnx", &m, &err) == BRISK_ERR_IO && strstr(err.msg, "cannot open"));
}

TEST_MAIN(T(test_good_model_field_by_field), T(test_order_unknown_fields_and_packing), T(test_typed_fields_and_dtypes),
          T(test_initializer_size_and_dims), T(test_not_a_model_or_truncated), T(test_graph_checks),
          T(test_attributes), T(test_model_level_refusals), T(test_external_data), T(test_torch_corpus_models))
