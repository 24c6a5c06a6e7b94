/* brisk report RUN_DIR [--output FILE]: the run directory's HTML report (report_run.c). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    static const cli_opt opts[] = {{"--output", 1}, {NULL, 0}};
    cli_parser p = {"report", opts, argc, argv, 0, 0};
    const char *name, *v;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) {
            cli_help("usage: brisk report RUN_DIR [--output FILE]\n\n"
                 "Writes RUN_DIR/report.html (or FILE): one self-contained page, no script and no network, with\n"
                 "plots of the training and validation loss, learning rate, throughput, the time per step\n"
                 "(data wait, copy, compute), memory, and the optimizations the run had on and why any was off,\n"
                 "all read from RUN_DIR/metrics.jsonl. brisk train writes it at the end of every run. FILE may\n"
                 "be a device or FIFO (written in place) or - (standard output).\n");
            return 0;
        }
        if (k == 0) out = v;
        else if (k == CLI_POS && dir) return cli_usage("report", "one run directory expected, got '%s' and '%s'", dir, v);
        else if (k == CLI_POS) dir = v;
    }
    if (!dir) return cli_usage("report", "a run directory is required");
    brisk_error err = {0};
    char written[BRISK_PATH_MAX + 64];
    /* "-": the page goes to stdout, so the warnings go to stderr */
    brisk_logger lg = cli_logger(out && strcmp(out, "-") == 0);
    if (cli_make_folders(out)) return 1;
    if (brisk_report_run(dir, out, written, sizeof written, &lg, &err)) return cli_fail_err(&err);
    if (strcmp(written, "-") != 0) cli_note(0, "report    %s", written); /* "-": the page itself went to stdout */
    return 0;
}
