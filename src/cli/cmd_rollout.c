/* brisk rollout CKPT --data FILE --steps N [--start T | --starts FIRST:LAST[:EVERY]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk rollout CKPT --data FILE --steps N [--start T | --starts FIRST:LAST[:EVERY]]\n"
    "                     [--output FORECAST.nc] [--jsonl PATH] [--quiet]\n"
    "\n"
    "Forecasts autoregressively with a meshgnn checkpoint trained on NetCDF data (data.netcdf):\n"
    "N steps of the trained lead, each prediction fed back as the next input, from time index T\n"
    "of FILE (default: the first time the training's chronological split held out), or from\n"
    "every EVERY-th time index of FIRST to LAST (--starts; an empty FIRST or LAST is the held-out\n"
    "range's: --starts ::24 is every 24th start of it; EVERY defaults to 1). FILE needs the\n"
    "variables and grid trained on (another grid is refused) and the true fields up to the last\n"
    "step. Per channel (t850 is field t at level 850) and lead time it prints, as tables: RMSE,\n"
    "latitude-weighted RMSE (cos latitude), bias (forecast - truth, latitude-weighted), ACC (the\n"
    "anomaly correlation against the climatology of the training times by hour of day; it needs\n"
    "the checkpoint's training files) and persistence's RMSEs (the initial state kept); over\n"
    "several starts the mean and its spread (standard deviation over the starts). The same go\n"
    "to --jsonl as JSON lines (- for standard output; the tables then go to standard error),\n"
    "with the start and valid dates of one start. Missing truth values are left out of every\n"
    "score and counted (\"missing\"); with data.netcdf.missing \"refuse\" a start whose inputs or\n"
    "truth hold one is refused (named; the others are scored). --output writes the forecast of\n"
    "one start as NetCDF-4 with FILE's coordinates and attributes, forecast_reference_time,\n"
    "forecast_period (hours), FILE's history with this command appended and every source file\n"
    "named (replaced atomically). --quiet leaves the tables and drops the information lines.\n"
    "  --steps N  1 to 100000;  --start T, FIRST, LAST  0 to the file's last time index;  EVERY >= 1\n";

/* FIRST:LAST[:EVERY] with FIRST or LAST empty for the default (-1). */
static int parse_starts(const char *v, brisk_rollout_spec *r) {
    char buf[96], *part[3] = {NULL, NULL, NULL};
    if (strlen(v) >= sizeof buf) return cli_usage("rollout", "--starts '%.40s...': too long", v);
    snprintf(buf, sizeof buf, "%s", v);
    int n = 1;
    part[0] = buf;
    for (char *c = buf; (c = strchr(c, ':')) && n <= 3; c++) *c = 0, part[n < 3 ? n : 2] = c + 1, n++;
    if (n < 2 || n > 3)
        return cli_usage("rollout", "--starts '%s': expected FIRST:LAST[:EVERY] (time indices; FIRST or LAST may be empty)", v);
    long long x[3] = {-1, -1, 1};
    for (int i = 0; i < n; i++)
        if (part[i][0] && cli_parse_count("rollout", i < 2 ? "--starts FIRST/LAST" : "--starts EVERY", part[i], i < 2 ? 0 : 1,
                                          1LL << 40, &x[i]))
            return 2;
    if (n == 3 && !part[2][0]) return cli_usage("rollout", "--starts '%s': EVERY is empty", v);
    r->start = x[0], r->start_last = x[1], r->start_every = x[2];
    return 0;
}

/* "brisk rollout ARGS..." for the forecast's history. */
static char *command_line(int argc, char **argv) {
    size_t len = 8;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    strcpy(s, "brisk");
    for (int i = 0; i < argc; i++) strcat(strcat(s, " "), argv[i]);
    return s;
}

int cmd_rollout(int argc, char **argv) {
    static const cli_opt opts[] = {{"--data", 1}, {"--steps", 1}, {"--start", 1}, {"--output", 1},
                                   {"--jsonl", 1}, {"--starts", 1}, {NULL, 0}};
    cli_parser p = {"rollout", opts, argc, argv, 0, 0};
    const char *name, *v, *start_flag = NULL, *starts_flag = NULL;
    long long steps = 0, start = -1;
    brisk_rollout_spec r = {.start = -1, .start_last = -1};
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) { cli_help(help); return 0; }
        if (k == 0) r.data = v;
        else if (k == 1 && cli_parse_count("rollout", name, v, 1, 100000, &steps)) return BRISK_EXIT_USAGE;
        else if (k == 2 && cli_parse_count("rollout", name, v, 0, 1LL << 40, &start)) return BRISK_EXIT_USAGE;
        else if (k == 2) start_flag = v;
        else if (k == 3) r.output = v;
        else if (k == 4) r.jsonl = v;
        else if (k == 5 && parse_starts(v, &r)) return BRISK_EXIT_USAGE;
        else if (k == 5) starts_flag = v;
        else if (k == CLI_POS) {
            if (r.checkpoint) return cli_usage("rollout", "one checkpoint expected, got '%s' and '%s'", r.checkpoint, v);
            r.checkpoint = v;
        }
    }
    if (!r.checkpoint || !r.data || !steps)
        return cli_usage("rollout", "%s is required", !r.checkpoint ? "a checkpoint" : !r.data ? "--data" : "--steps");
    if (start_flag && starts_flag)
        return cli_usage("rollout", "--start %s and --starts %s: give one start time or a range of them", start_flag,
                         starts_flag);
    r.steps = steps;
    if (start_flag) r.start = start;
    if (cli_make_folders(r.output) || cli_make_folders(r.jsonl)) return 1;
    char *cmd = command_line(argc, argv);
    r.command = cmd;
    brisk_error err = {0};
    brisk_logger lg = cli_logger(r.jsonl && strcmp(r.jsonl, "-") == 0);
    int rc = brisk_rollout(&r, &lg, &err) ? cli_fail_err(&err) : 0;
    free(cmd);
    return rc;
}
