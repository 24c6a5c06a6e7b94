/* brisk: fast neural-network training in C. Dispatches to the verbs. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: brisk <command> [options]\n"
    "\n"
    "commands:\n"
    "  check              what hardware and libraries brisk sees, and why no GPU\n"
    "  train CONFIG       train a model from a JSON config\n"
    "  predict CKPT       run a trained model on an input array\n"
    "  sample CKPT        sample fine fields from a diffusion model, given coarse ones\n"
    "  info CKPT          list a checkpoint's tensors and training state\n"
    "  synth KIND PATH    write the example data set KIND (diffusion, tabular, series)\n"
    "  bench CONFIG       time CONFIG with each GPU optimization added in turn\n"
    "\n"
    "'brisk <command> --help' describes each command's options.\n";

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("brisk: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_fail_err(const brisk_error *err) { return cli_fail("%s", err->msg); }

void cli_log(void *user, brisk_log_level level, const char *msg) {
    (void)user;
    if (level <= BRISK_LOG_WARN) fprintf(stderr, "brisk: %s%s\n", level == BRISK_LOG_WARN ? "warning: " : "", msg);
    else {
        fputs(msg, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

int cli_is_help(const char *arg) { return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0; }

int main(int argc, char **argv) {
    if (argc < 2 || cli_is_help(argv[1])) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("brisk %s\n", BRISK_VERSION);
        return 0;
    }
    static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
        {"check", cmd_check}, {"train", cmd_train}, {"predict", cmd_predict},
        {"info", cmd_info},   {"synth", cmd_synth},   {"bench", cmd_bench},
        {"sample", cmd_sample},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "brisk: unknown command '%s'\n%s", argv[1], usage);
    return 2;
}
