/* brisk info CKPT: tensors (name, dtype, shape) and training state of a checkpoint, or
 * of any safetensors file. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cmd_info(int argc, char **argv) {
    if (argc != 2 || cli_is_help(argv[1])) {
        fputs("usage: brisk info CKPT\n\nLists a safetensors file's tensors (name, dtype, shape) and metadata:\n"
              "for a brisk checkpoint, the step, epoch and position reached and the config, after\nchecking its checksum (a damaged checkpoint exits with status 1).\n",
              argc == 2 ? stdout : stderr);
        return argc == 2 ? 0 : 2;
    }
    brisk_error err = {0};
    brisk_safetensors *st = NULL;
    if (brisk_safetensors_open(argv[1], &st, &err)) return cli_fail_err(&err);
    size_t n = brisk_safetensors_count(st);
    long long total = 0, params = 0;
    printf("%s: %zu tensors\n", argv[1], n);
    for (size_t i = 0; i < n; i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        char s[96];
        long long k = (long long)brisk_shape_numel(&t->shape);
        total += k;
        if (strncmp(t->name, "optim.", 6) != 0) params += k;
        printf("  %-40s %-5s %s\n", t->name, brisk_dtype_st_name(t->dtype), brisk_shape_str(&t->shape, s, sizeof s));
    }
    printf("parameters: %lld (all tensors: %lld values)\n", params, total);
    for (size_t i = 0; i < brisk_safetensors_meta_count(st); i++) {
        const char *k, *v;
        brisk_safetensors_meta_at(st, i, &k, &v);
        printf("%-14s %s\n", k, v);
    }
    /* A brisk checkpoint is also checked against its checksum. */
    const char *fmt = brisk_safetensors_meta(st, "format");
    int is_ckpt = fmt && strncmp(fmt, "brisk-checkpoint", 16) == 0;
    brisk_safetensors_free(st);
    if (is_ckpt) {
        if (brisk_checkpoint_check(argv[1], NULL, &err)) return cli_fail_err(&err);
        printf("integrity      checksum verified\n");
    }
    return 0;
}
