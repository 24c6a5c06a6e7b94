/* brisk info CKPT: tensors (name, dtype, shape) and training state of a checkpoint, or
 * of any safetensors file. Names and metadata come from the file: printed escaped.
 * brisk info CONFIG.json: the model as a table (a graph model's layers, as Keras' summary()),
 * or with --graph a built-in preset family's model section as a graph, to edit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk info CKPT\n"
    "       brisk info CONFIG.json [--graph]\n\n"
    "Lists a safetensors file's tensors (name, dtype, shape) and metadata:\n"
    "for a brisk checkpoint, the step, epoch and position reached and the config, after\n"
    "checking its checksum (a damaged checkpoint exits with status 1). Control characters in\n"
    "names and metadata are shown as \\xNN.\n\n"
    "Given a config (.json), prints its model: for a graph model each layer's name, op,\n"
    "output shape per sample and parameters, its losses and the totals (every shape is\n"
    "checked: a mistake is an error naming the layer). The mlp, lstm and resnet types are\n"
    "presets of the graph form and print the same table; the other types, their parameters.\n"
    "With --graph, prints the config's mlp, lstm or resnet as the \"model\" section of\n"
    "\"type\": \"graph\" that builds it, parameter for parameter: a start for a model of\n"
    "your own.\n";

/* the model of a config, as a table or (graph) as a graph model section */
static int config_summary(const char *path, int graph) {
    brisk_config cfg;
    brisk_error err = {0};
    char *text = NULL;
    if (brisk_config_load(path, NULL, 0, &cfg, &err)) return cli_fail_err(&err);
    brisk_status st = graph ? brisk_model_graph_json(&cfg.model, &text, &err) : brisk_model_summary(&cfg.model, &text, &err);
    brisk_config_free(&cfg);
    if (st) return cli_fail_err(&err);
    fputs(text, stdout);
    free(text);
    return 0;
}

int cmd_info(int argc, char **argv) {
    static const cli_opt opts[] = {{"--graph", 0}, {NULL, 0}};
    cli_parser p = {"info", opts, argc, argv, 0, 0};
    const char *path = NULL, *name, *v;
    int graph = 0;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == 0) { graph = 1; continue; }
        if (path) return cli_usage("info", "one checkpoint expected, got '%s' and '%s'", path, v);
        path = v;
    }
    if (!path) return cli_usage("info", "a checkpoint or a config is required");
    size_t L = strlen(path);
    if (L > 5 && strcmp(path + L - 5, ".json") == 0) return config_summary(path, graph);
    if (graph) return cli_usage("info", "--graph takes a config (.json), not '%s'", path);
    brisk_error err = {0};
    brisk_safetensors *st = NULL;
    if (brisk_safetensors_open(path, &st, &err)) return cli_fail_err(&err);
    size_t n = brisk_safetensors_count(st);
    long long total = 0, params = 0;
    cli_put_safe(stdout, path);
    printf(": %zu tensors\n", n);
    for (size_t i = 0; i < n; i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        char s[96], line[512];
        long long k = (long long)brisk_shape_numel(&t->shape);
        total += k;
        if (strncmp(t->name, "optim.", 6) != 0) params += k;
        snprintf(line, sizeof line, "  %-40s %-5s %s\n", t->name, brisk_dtype_st_name(t->dtype),
                 brisk_shape_str(&t->shape, s, sizeof s));
        cli_put_safe(stdout, line);
    }
    printf("parameters: %lld (all tensors: %lld values)\n", params, total);
    for (size_t i = 0; i < brisk_safetensors_meta_count(st); i++) {
        const char *k, *val;
        brisk_safetensors_meta_at(st, i, &k, &val);
        cli_put_safe(stdout, k);
        printf("%*s ", (int)(strlen(k) < 14 ? 14 - strlen(k) : 0), "");
        cli_put_safe(stdout, val);
        putchar('\n');
    }
    /* A brisk checkpoint is also checked against its checksum. */
    const char *fmt = brisk_safetensors_meta(st, "format");
    int is_ckpt = fmt && strncmp(fmt, "brisk-checkpoint", 16) == 0;
    brisk_safetensors_free(st);
    if (is_ckpt) {
        if (brisk_checkpoint_check(path, NULL, &err)) return cli_fail_err(&err);
        printf("integrity      checksum verified\n");
    }
    return 0;
}
