/* The built-in families that are layer graphs, mlp, lstm and resnet, are presets of the graph
 * form: each is written out as the model section a user could write ("type": "graph") and
 * built through it, so the engine has one way to build them. The layers are named and listed
 * so that parameters keep the family's names and order of creation (torch's nn.Sequential
 * indices for the MLP, bench/reference/models.py's for the LSTM and the ResNet): checkpoints, seeds and
 * losses are those of the family's own builder before it (tests/nn/graph_equivalence.sh).
 * `brisk info CONFIG --graph` prints a preset, to start a model of one's own from. */
#include <stdlib.h>
#include <string.h>

#include "brisk/json.h"
#include "core/strbuf.h"
#include "nn/layer_graph.h"
#include "nn/nn_internal.h"

static const char *const act_layer[] = {
    [BRISK_ACT_RELU] = "\"op\": \"relu\"",       [BRISK_ACT_GELU] = "\"op\": \"gelu\"",
    [BRISK_ACT_GELU_TANH] = "\"op\": \"gelu\", \"approximate\": \"tanh\"",
    [BRISK_ACT_SILU] = "\"op\": \"silu\"",       [BRISK_ACT_TANH] = "\"op\": \"tanh\"",
    [BRISK_ACT_SIGMOID] = "\"op\": \"sigmoid\"",
};

/* One layer line: its name, op (with any fixed attributes) and its input, or two (in2 NULL:
 * one); `more` adds attributes (", \"out\": 64"). The first layer has no comma before it. */
static void layer2(brisk_strbuf *b, int *n, const char *name, const char *op, const char *in, const char *in2,
                   const char *more) {
    brisk_strbuf_printf(b, "%s    {\"name\": \"%s\", %s, \"inputs\": [\"%s\"%s%s%s]%s}", (*n)++ ? ",\n" : "", name, op, in,
                        in2 ? ", \"" : "", in2 ? in2 : "", in2 ? "\"" : "", more ? more : "");
}

static void layer(brisk_strbuf *b, int *n, const char *name, const char *op, const char *in, const char *more) {
    layer2(b, n, name, op, in, NULL, more);
}

/* The target input y of an mlp or lstm: class numbers, or `outputs` values; then the layers */
static void target_input(const brisk_model_spec *s, brisk_strbuf *b) {
    if (s->task == BRISK_TASK_CLASSIFY) brisk_strbuf_printf(b, "{\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}],\n");
    else brisk_strbuf_printf(b, "{\"name\": \"y\", \"shape\": [%lld]}],\n", (long long)s->outputs);
    brisk_strbuf_printf(b, "  \"layers\": [\n");
}

/* The end of the layers, the output and the one loss */
static void outputs_and_loss(brisk_strbuf *b, const char *output, const char *pred, const char *truth, const char *type) {
    brisk_strbuf_printf(b, "\n  ],\n  \"outputs\": [\"%s\"],\n", output);
    brisk_strbuf_printf(b, "  \"losses\": [{\"output\": \"%s\", \"target\": \"%s\", \"type\": \"%s\"}]\n", pred, truth,
                        type);
}

/* The shortest decimal that reads back as the float v (0.1, not 0.100000001). */
static const char *shortest(float v, char *buf, size_t n) {
    for (int digits = 6; digits < 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) return buf;
    }
    snprintf(buf, n, "%.9g", (double)v);
    return buf;
}

/* nn.Sequential(Linear, act, [Dropout], ..., Linear) as brisk_nn_mlp builds it: net.0, net.1, ... */
static void mlp(const brisk_model_spec *s, brisk_strbuf *b) {
    brisk_strbuf_printf(b, "  \"inputs\": [{\"name\": \"x\", \"shape\": [");
    if (s->seq_len > 0) brisk_strbuf_printf(b, "%lld, ", (long long)s->seq_len);
    brisk_strbuf_printf(b, "%lld]}, ", (long long)s->inputs);
    target_input(s, b);
    int n = 0, index = 0;
    char name[32], prev[32] = "x", more[64], num[32];
    if (s->seq_len > 0) { /* a window of steps, flattened: the same bytes, viewed */
        layer(b, &n, "window", "\"op\": \"flatten\"", "x", NULL);
        snprintf(prev, sizeof prev, "window");
    }
    for (int i = 0; i <= s->n_hidden; i++) {
        int64_t width = i < s->n_hidden ? s->hidden[i] : s->outputs;
        snprintf(name, sizeof name, "net.%d", index++);
        snprintf(more, sizeof more, ", \"out\": %lld", (long long)width);
        layer(b, &n, name, "\"op\": \"linear\"", prev, more);
        snprintf(prev, sizeof prev, "%s", name);
        if (i == s->n_hidden) break;
        snprintf(name, sizeof name, "net.%d", index++);
        layer(b, &n, name, act_layer[s->activation], prev, NULL);
        snprintf(prev, sizeof prev, "%s", name);
        if (s->dropout > 0) {
            snprintf(name, sizeof name, "net.%d", index++);
            snprintf(more, sizeof more, ", \"p\": %s", shortest(s->dropout, num, sizeof num));
            layer(b, &n, name, "\"op\": \"dropout\"", prev, more);
            snprintf(prev, sizeof prev, "%s", name);
        }
    }
    outputs_and_loss(b, prev, prev, "y", s->task == BRISK_TASK_CLASSIFY ? "cross_entropy" : "mse");
}

/* nn.Conv2d(bias=False) then nn.BatchNorm2d, ReLU fused in, a shortcut added before it */
static void conv_bn(brisk_strbuf *b, int *n, const char *conv, const char *bn, const char *in, int64_t out, int k,
                    int stride, int relu, const char *residual) {
    char more[160];
    snprintf(more, sizeof more, ", \"out\": %lld, \"kernel\": %d, \"stride\": %d, \"padding\": %d, \"bias\": false",
             (long long)out, k, stride, k / 2);
    layer(b, n, conv, "\"op\": \"conv2d\"", in, more);
    layer2(b, n, bn, "\"op\": \"batchnorm\"", conv, residual, relu ? ", \"relu\": true" : NULL);
}

/* ResNet18Keypoints of bench/reference/models.py, generalised to depth 18 / 34 (BasicBlock)
 * and 50 (torchvision's Bottleneck v1.5, expansion 4). Blocks are numbered through all stages
 * ("blocks.{i}"), the shortcut's layers first, as models.py's nn.Sequential creates them. */
static void resnet(const brisk_model_spec *s, brisk_strbuf *b) {
    static const int stages18[4] = {2, 2, 2, 2}, stages34[4] = {3, 4, 6, 3};
    const int *stages = s->depth == 18 ? stages18 : stages34; /* 50 has 34's stage depths */
    int bottle = s->depth >= 50;
    long long k = (long long)(s->outputs / 2);
    brisk_strbuf_printf(b, "  \"inputs\": [{\"name\": \"x\", \"shape\": [%lld, %lld, %lld]}, "
                           "{\"name\": \"y\", \"shape\": [%lld, 2]}",
                        (long long)s->inputs, (long long)s->image_h, (long long)s->image_w, k);
    if (s->visibility) brisk_strbuf_printf(b, ", {\"name\": \"visible\", \"shape\": [%lld]}", k);
    brisk_strbuf_printf(b, "],\n  \"layers\": [\n");
    int n = 0;
    conv_bn(b, &n, "stem.0", "stem.1", "x", 64, 7, 2, 1, NULL);
    layer(b, &n, "pool", "\"op\": \"maxpool2d\"", "stem.1", ", \"kernel\": 3, \"stride\": 2, \"padding\": 1");
    char x[64] = "pool", c[64], bn[64], sc[64], h[64];
    int64_t cin = 64;
    for (int stage = 0, index = 0; stage < 4; stage++) {
        int64_t width = (int64_t)64 << stage, cout = bottle ? 4 * width : width;
        for (int i = 0; i < stages[stage]; i++, index++) {
            int stride = stage > 0 && i == 0 ? 2 : 1;
            snprintf(sc, sizeof sc, "%s", x);
            if (stride != 1 || cin != cout) {
                snprintf(c, sizeof c, "blocks.%d.down.0", index);
                snprintf(sc, sizeof sc, "blocks.%d.down.1", index);
                conv_bn(b, &n, c, sc, x, cout, 1, stride, 0, NULL);
            }
            snprintf(c, sizeof c, "blocks.%d.c1", index), snprintf(bn, sizeof bn, "blocks.%d.b1", index);
            conv_bn(b, &n, c, bn, x, bottle ? width : cout, bottle ? 1 : 3, bottle ? 1 : stride, 1, NULL);
            snprintf(h, sizeof h, "%s", bn);
            snprintf(c, sizeof c, "blocks.%d.c2", index), snprintf(bn, sizeof bn, "blocks.%d.b2", index);
            if (bottle) {
                conv_bn(b, &n, c, bn, h, width, 3, stride, 1, NULL);
                snprintf(h, sizeof h, "%s", bn);
                snprintf(c, sizeof c, "blocks.%d.c3", index), snprintf(bn, sizeof bn, "blocks.%d.b3", index);
                conv_bn(b, &n, c, bn, h, cout, 1, 1, 1, sc);
            } else {
                conv_bn(b, &n, c, bn, h, cout, 3, 1, 1, sc);
            }
            snprintf(x, sizeof x, "%s", bn);
            cin = cout;
        }
    }
    char more[64];
    layer(b, &n, "gap", "\"op\": \"global_avgpool\"", x, NULL);
    snprintf(more, sizeof more, ", \"out\": %lld", (long long)s->outputs);
    layer(b, &n, "head", "\"op\": \"linear\"", "gap", more);
    snprintf(more, sizeof more, ", \"shape\": [%lld, 2]", k);
    layer(b, &n, "keypoints", "\"op\": \"reshape\"", "head", more);
    const char *pred = "keypoints", *truth = "y";
    if (s->visibility) {
        /* a keypoint not visible drops out of the sum; the mean stays over all 2K coordinates
         * (HRNet's JointsMSELoss with target weights): F.mse_loss when all are visible */
        snprintf(more, sizeof more, ", \"shape\": [%lld, 1]", k);
        layer(b, &n, "visible_k", "\"op\": \"reshape\"", "visible", more);
        layer2(b, &n, "pred_seen", "\"op\": \"mul\"", "keypoints", "visible_k", NULL);
        layer2(b, &n, "true_seen", "\"op\": \"mul\"", "y", "visible_k", NULL);
        pred = "pred_seen", truth = "true_seen";
    }
    outputs_and_loss(b, "keypoints", pred, truth, "mse");
}

/* LSTMClassifier of bench/reference/models.py: nn.LSTM "lstm", the last step or the mean over
 * the steps, Linear "head". */
static void lstm(const brisk_model_spec *s, brisk_strbuf *b) {
    char num[32], more[160];
    brisk_strbuf_printf(b, "  \"inputs\": [{\"name\": \"x\", \"shape\": [%lld, %lld]}, ", (long long)s->seq_len,
                        (long long)s->inputs);
    target_input(s, b);
    int n = 0;
    snprintf(more, sizeof more, ", \"hidden\": %lld, \"layers\": %d, \"bidirectional\": %s, \"dropout\": %s",
             (long long)s->width, s->layers, s->bidirectional ? "true" : "false", shortest(s->dropout, num, sizeof num));
    layer(b, &n, "lstm", "\"op\": \"lstm\"", "x", more);
    if (s->pool == BRISK_POOL_MEAN) {
        layer(b, &n, "pooled", "\"op\": \"mean\"", "lstm", ", \"dim\": 1");
    } else {
        snprintf(more, sizeof more, ", \"dim\": 1, \"start\": %lld, \"length\": 1", (long long)(s->seq_len - 1));
        layer(b, &n, "last", "\"op\": \"slice\"", "lstm", more);
        layer(b, &n, "pooled", "\"op\": \"flatten\"", "last", NULL);
    }
    snprintf(more, sizeof more, ", \"out\": %lld", (long long)s->outputs);
    layer(b, &n, "head", "\"op\": \"linear\"", "pooled", more);
    outputs_and_loss(b, "head", "head", "y", s->task == BRISK_TASK_CLASSIFY ? "cross_entropy" : "mse");
}

int nn_has_preset(brisk_model_type t) { return t == BRISK_MODEL_MLP || t == BRISK_MODEL_RESNET || t == BRISK_MODEL_LSTM; }

brisk_status brisk_model_graph_json(const brisk_model_spec *s, char **out, brisk_error *err) {
    *out = NULL;
    if (!nn_has_preset(s->type))
        return brisk_errorf(err, BRISK_ERR_INVALID, "model type \"%s\" has no graph form; mlp, lstm and resnet have one",
                            brisk_model_type_name(s->type));
    if (s->type == BRISK_MODEL_MLP && (unsigned)s->activation >= BRISK_ACT_COUNT)
        return brisk_errorf(err, BRISK_ERR_INVALID, "mlp: unknown activation %d", (int)s->activation);
    brisk_strbuf b = {0};
    brisk_strbuf_printf(&b, "{\n  \"type\": \"graph\",\n");
    if (s->type == BRISK_MODEL_MLP) mlp(s, &b);
    else if (s->type == BRISK_MODEL_LSTM) lstm(s, &b);
    else resnet(s, &b);
    brisk_strbuf_printf(&b, "}\n");
    if (b.oom) {
        brisk_strbuf_free(&b);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s as a graph: out of memory", brisk_model_type_name(s->type));
    }
    *out = b.s;
    return BRISK_OK;
}

brisk_status nn_preset_graph(const brisk_model_spec *s, brisk_layer_graph **out, brisk_error *err) {
    *out = NULL;
    char *text = NULL;
    brisk_json *doc = NULL;
    brisk_status st = brisk_model_graph_json(s, &text, err);
    if (!st) st = brisk_json_parse(text, strlen(text), brisk_model_type_name(s->type), &doc, err);
    if (!st) {
        brisk_json_reader r = brisk_json_root(doc);
        const char *type = NULL; /* "graph", as the config reader takes it */
        brisk_json_string(&r, "type", &type);
        brisk_layer_graph_read(&r, out);
        st = brisk_json_finish(doc, err);
        /* sizes the family's reader accepted: a refusal here is the family's sizes meeting a
         * layer's limits, and is said in the family's words by the prefix */
        if (st) brisk_error_prefix(err, "%s as a graph", brisk_model_type_name(s->type));
    }
    if (st) brisk_layer_graph_unref(*out), *out = NULL;
    brisk_json_free(doc);
    free(text);
    return st;
}
