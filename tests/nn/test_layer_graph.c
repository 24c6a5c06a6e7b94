/* Graph models written wrong: each mistake is one error at config time that names the layer
 * (or input) and says what was expected, never a crash or a failed run later: a cycle, an
 * unknown op, a name used twice, a reference to nothing, an input never used, a dtype
 * mismatch, a shape error deep in the graph, a layer with too many inputs, an unknown key. */
#include <string.h>

#include "brisk/brisk.h"
#include "test.h"

/* A config whose model has these inputs, layers, outputs and losses. */
static brisk_status parse(const char *inputs, const char *layers, const char *outputs, const char *losses,
                          brisk_error *err) {
    char json[4096];
    snprintf(json, sizeof json, "{\"model\": {\"type\": \"graph\", \"inputs\": [%s], \"layers\": [%s], \"outputs\": [%s],"
             " \"losses\": [%s]}}", inputs, layers, outputs, losses);
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "g.json", NULL, 0, &cfg, err);
    if (!st) brisk_config_free(&cfg);
    return st;
}

#define XY "{\"name\": \"x\", \"shape\": [8]}, {\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}"
#define CE "{\"output\": \"out\", \"target\": \"y\", \"type\": \"cross_entropy\"}"

/* The parse must fail with a message holding every one of the texts. */
static void refused(const char *inputs, const char *layers, const char *losses, const char *t1, const char *t2) {
    brisk_error err = {0};
    brisk_status st = parse(inputs, layers, "\"out\"", losses, &err);
    CHECKF(st != BRISK_OK, "accepted: %s", layers);
    CHECKF(strstr(err.msg, t1) && (!t2 || strstr(err.msg, t2)), "'%s' lacks '%s' / '%s'", err.msg, t1, t2 ? t2 : "");
}

static void test_a_good_graph(void) {
    brisk_error err = {0};
    brisk_status st = parse(XY, "{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 16},"
                            "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"a\"], \"out\": 3},"
                            "{\"name\": \"a\", \"op\": \"relu\", \"inputs\": [\"h\"]}", /* in any order */
                            "\"out\"", CE, &err);
    CHECKF(st == BRISK_OK, "%s", err.msg);
}

static void test_each_mistake(void) {
    refused(XY, "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"b\"], \"out\": 3},"
                "{\"name\": \"b\", \"op\": \"relu\", \"inputs\": [\"out\"]}", CE, "depends on itself", "cycle");
    refused(XY, "{\"name\": \"out\", \"op\": \"lineer\", \"inputs\": [\"x\"], \"out\": 3}", CE, "unknown op \"lineer\"",
            "linear");
    refused(XY, "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3},"
                "{\"name\": \"out\", \"op\": \"relu\", \"inputs\": [\"x\"]}", CE, "\"out\" is used twice", NULL);
    refused(XY, "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"z\"], \"out\": 3}", CE, "\"z\" names no input or layer",
            NULL);
    refused(XY ", {\"name\": \"extra\", \"shape\": [2]}", "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3}",
            CE, "input \"extra\" is used by no layer and no loss", NULL);
    /* labels (i32) into a linear layer */
    refused(XY, "{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3},"
                "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"y\"], \"out\": 3}", CE,
            "layer \"out\" (linear) given [1] i32", NULL);
    /* deep in the graph: a conv2d given [N, 16] */
    refused(XY, "{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 16},"
                "{\"name\": \"c\", \"op\": \"conv2d\", \"inputs\": [\"h\"], \"out\": 4, \"kernel\": 3},"
                "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"c\"], \"out\": 3}", CE,
            "layer \"c\" (conv2d) given [1, 16]", "expected [N, C, H, W]");
    /* an add of two shapes that do not broadcast */
    refused(XY, "{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 16},"
                "{\"name\": \"out\", \"op\": \"add\", \"inputs\": [\"h\", \"x\"]}", CE, "layer \"out\" (add) given [1, 16]",
            "[1, 8]");
    refused(XY, "{\"name\": \"out\", \"op\": \"relu\", \"inputs\": [\"x\", \"x\"]}", CE, "takes 1 input, got 2", NULL);
    refused(XY, "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3, \"bais\": false}", CE,
            "unknown key \"bais\"", "bias");
    /* a loss whose target names nothing, and a label loss on a float target */
    refused(XY, "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3}",
            "{\"output\": \"out\", \"target\": \"yy\", \"type\": \"mse\"}", "\"yy\" names no input or layer", NULL);
    refused("{\"name\": \"x\", \"shape\": [8]}, {\"name\": \"y\", \"shape\": []}",
            "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3}", CE, "loss 0 (cross_entropy", NULL);
    /* the second round's ops: their own checks, each naming the layer */
#define IMG "{\"name\": \"x\", \"shape\": [4, 8, 8]}, {\"name\": \"y\", \"shape\": [], \"dtype\": \"i32\"}"
#define HEAD ",{\"name\": \"g\", \"op\": \"global_avgpool\", \"inputs\": [\"t\"]}," \
             "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"g\"], \"out\": 3}"
    refused(IMG, "{\"name\": \"t\", \"op\": \"conv_transpose2d\", \"inputs\": [\"x\"], \"out\": 4, \"kernel\": 2,"
                 " \"stride\": 2, \"output_padding\": 2}" HEAD, CE, "layer \"t\" (conv_transpose2d)",
            "output_padding must be smaller than the stride");
    refused(IMG, "{\"name\": \"t\", \"op\": \"group_norm\", \"inputs\": [\"x\"], \"groups\": 3}" HEAD, CE,
            "layer \"t\" (group_norm)", "groups must divide the channels");
    refused(IMG, "{\"name\": \"t\", \"op\": \"conv1d\", \"inputs\": [\"x\"], \"out\": 4, \"kernel\": 3}" HEAD, CE,
            "layer \"t\" (conv1d) given [1, 4, 8, 8]", "expected [N, C, L]");
    refused(IMG, "{\"name\": \"t\", \"op\": \"upsample\", \"inputs\": [\"x\"], \"scale\": 2, \"mode\": \"cubic\"}" HEAD,
            CE, "mode", "bilinear");
    refused(XY, "{\"name\": \"out\", \"op\": \"linear\", \"inputs\": [\"x\"], \"out\": 3}",
            "{\"output\": \"out\", \"target\": \"y\", \"type\": \"cross_entropy\", \"mask\": \"x\"}", "mask",
            "elementwise loss");
}

TEST_MAIN(T(test_a_good_graph), T(test_each_mistake))
