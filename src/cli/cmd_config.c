/* brisk config --reference: every config key, generated from the config reader. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk config --reference\n\n"
    "Prints the config reference as Markdown: every key of every section and model type, its\n"
    "type, accepted values, default and meaning, generated from the config reader itself\n"
    "(docs/config.md is this output).\n";

int cmd_config(int argc, char **argv) {
    static const cli_opt opts[] = {{"--reference", 0}, {NULL, 0}};
    cli_parser p = {"config", opts, argc, argv, 0, 0};
    const char *name, *v;
    int reference = 0;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == CLI_POS) return cli_usage("config", "unexpected argument '%s'", v);
        reference = 1;
    }
    if (!reference) return cli_usage("config", "--reference is required");
    char *md = NULL;
    brisk_error err = {0};
    if (brisk_config_reference(&md, &err)) return cli_fail_err(&err);
    fputs(md, stdout);
    free(md);
    return 0;
}
