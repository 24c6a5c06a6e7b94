/* brisk rollout CKPT --data FILE --steps N */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk rollout CKPT --data FILE --steps N [--start T] [--output FORECAST.nc]\n"
    "                     [--jsonl PATH] [--quiet]\n"
    "\n"
    "Forecasts autoregressively with a meshgnn checkpoint trained on NetCDF data (data.netcdf):\n"
    "from time index T of FILE (default: the first time the training's chronological split held\n"
    "out), N steps of the trained lead, each prediction fed back as the next input. FILE needs\n"
    "the variables and grid trained on, and the true fields up to the last step: the RMSE of\n"
    "every channel (t850 is field t at level 850) at every lead time is printed as a table,\n"
    "beside that of persistence (the initial state kept), and written as JSON lines to --jsonl\n"
    "(- for standard output, which --quiet leaves to them alone). --output writes the forecast\n"
    "as NetCDF-4 with FILE's coordinates and attributes (replaced atomically).\n"
    "  --steps N  1 to 100000;  --start T  0 to the file's last time index\n";

int cmd_rollout(int argc, char **argv) {
    static const cli_opt opts[] = {{"--data", 1}, {"--steps", 1}, {"--start", 1}, {"--output", 1},
                                   {"--jsonl", 1}, {NULL, 0}};
    cli_parser p = {"rollout", opts, argc, argv, 0, 0};
    const char *name, *v;
    long long steps = 0, start = -1;
    brisk_rollout_spec r = {.start = -1};
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == 0) r.data = v;
        else if (k == 1 && cli_parse_count("rollout", name, v, 1, 100000, &steps)) return BRISK_EXIT_USAGE;
        else if (k == 2 && cli_parse_count("rollout", name, v, 0, 1LL << 40, &start)) return BRISK_EXIT_USAGE;
        else if (k == 3) r.output = v;
        else if (k == 4) r.jsonl = v;
        else if (k == CLI_POS) {
            if (r.checkpoint) return cli_usage("rollout", "one checkpoint expected, got '%s' and '%s'", r.checkpoint, v);
            r.checkpoint = v;
        }
    }
    if (!r.checkpoint || !r.data || !steps)
        return cli_usage("rollout", "%s is required", !r.checkpoint ? "a checkpoint" : !r.data ? "--data" : "--steps");
    r.steps = steps, r.start = start;
    brisk_error err = {0};
    r.quiet = cli_quiet();
    brisk_logger lg = cli_logger(r.jsonl && strcmp(r.jsonl, "-") == 0);
    if (brisk_rollout(&r, &lg, &err)) return cli_fail_err(&err);
    return 0;
}
