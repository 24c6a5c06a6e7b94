/* brisk profile CONFIG: where a step's time goes, per op type and per node, timed by the
 * library (src/train/profile.c); this file parses flags and prints. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk profile CONFIG [--steps N] [--warmup W] [--top K] [--json] [--json-out FILE]\n"
    "                            [--model NAME] [train overrides]\n"
    "\n"
    "Builds the trainer as brisk train would (without a run directory or a CUDA graph), runs W\n"
    "warm-up steps (default 5), then 2N steps eagerly (N default 20): N plain steps and N steps\n"
    "with every node of the forward and backward timed (on a GPU by events on the compute stream,\n"
    "read after a sync at each step's end; on the CPU by the host clock), alternating. Prints per op\n"
    "type the calls, ms and share of a step and the mean us per call; the top K nodes (default 15)\n"
    "with their shape, dtype and the backend's note on how it ran them; the timed step beside the\n"
    "plain one (what the timing costs); the node runs a step and, on a GPU, the kernels a step\n"
    "launches and the launch floor: replaying an empty CUDA graph of that many kernels.\n"
    "(batch in) is the time before the first node (the batch's copy), (loss + update) the time\n"
    "after the last (the loss and the optimizer). The step times and the tables average the steps\n"
    "within 1.5x of their median (a longer one was descheduled; the text says how many were kept).\n"
    "--json prints one JSON object instead;\n"
    "--json-out FILE writes it to FILE besides the text. A pipeline config (\"models\"): --model NAME\n"
    "profiles that model.\n"
    "Overrides, as for brisk train:\n"
    "  --device auto|cpu|cuda   --precision auto|fp32|tf32|bf16|fp16   --batch-size N\n"
    "  --accumulate K   --threads N   --no-tf32   --no-autotune   --no-fuse   --no-prefetch\n"
    "  --deterministic   --set KEY=VALUE\n";

int cmd_profile(int argc, char **argv) {
    const char *config = NULL, *json_out = NULL, *model = NULL;
    long long steps = 20, warmup = 5, top = 15;
    int json = 0, n_over = 0, rc = 1;
    char **over = calloc((size_t)argc + 1, sizeof *over);
    int *from = calloc((size_t)argc + 1, sizeof *from); /* the flag of each override, -1: --set */
    if (!over || !from) {
        free(over), free(from);
        return cli_fail("out of memory");
    }
    cli_opt opts[CLI_N_OVERRIDES + 8];
    int which[CLI_N_OVERRIDES], no = 0;
    cli_override_opts(opts, &no, 1, which);
    const int own = no;
    opts[no++] = (cli_opt){"--steps", 1};
    opts[no++] = (cli_opt){"--warmup", 1};
    opts[no++] = (cli_opt){"--top", 1};
    opts[no++] = (cli_opt){"--json", 0};
    opts[no++] = (cli_opt){"--set", 1};
    opts[no++] = (cli_opt){"--json-out", 1};
    opts[no++] = (cli_opt){"--model", 1};
    opts[no] = (cli_opt){NULL, 0};
    cli_parser p = {"profile", opts, argc, argv, 0, 0};
    const char *name, *v;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) { rc = BRISK_EXIT_USAGE; goto done; }
        if (k == CLI_HELP) { cli_help(help); rc = 0; goto done; }
        if (k == CLI_POS && config) {
            rc = cli_usage("profile", "one config file expected, got '%s' and '%s'", config, v);
            goto done;
        }
        if (k == CLI_POS) { config = v; continue; }
        if (k >= 0 && k < own) {
            from[n_over] = which[k];
            over[n_over++] = cli_override_arg(which[k], v);
        } else if (k == own && cli_parse_count("profile", name, v, 1, 100000, &steps)) {
            rc = BRISK_EXIT_USAGE; goto done;
        } else if (k == own + 1 && cli_parse_count("profile", name, v, 0, 100000, &warmup)) {
            rc = BRISK_EXIT_USAGE; goto done;
        } else if (k == own + 2 && cli_parse_count("profile", name, v, 1, 1000000, &top)) {
            rc = BRISK_EXIT_USAGE; goto done;
        } else if (k == own + 3) {
            json = 1;
        } else if (k == own + 4) {
            from[n_over] = -1;
            over[n_over++] = strdup(v);
        } else if (k == own + 5) {
            json_out = v;
        } else if (k == own + 6) {
            model = v;
        }
        if (n_over && !over[n_over - 1]) { rc = cli_fail("out of memory"); goto done; }
    }
    if (!config) { rc = cli_usage("profile", "a config file is required"); goto done; }
    brisk_config cfg;
    brisk_error err = {0};
    if (brisk_config_load(config, (const char *const *)over, n_over, &cfg, &err)) {
        rc = cli_config_fail("profile", config, over, from, n_over, &err);
        goto done;
    }
    brisk_logger lg = cli_logger(1);
    lg.max_level = BRISK_LOG_WARN; /* the run's own progress and summary lines are not the profile */
    brisk_profile_options po = {.steps = (int)steps, .warmup = (int)warmup, .model = model};
    brisk_profile_result r;
    if (brisk_profile_run(&cfg, &lg, &po, &r, &err)) {
        rc = cli_fail_err(&err);
    } else {
        cJSON *j = json || json_out ? brisk_profile_json(config, &r, (int)top) : NULL;
        char *s = j ? cJSON_PrintUnformatted(j) : NULL;
        rc = (json || json_out) && !s ? cli_fail("out of memory") : 0;
        if (!rc && json) printf("%s\n", s);
        else if (!rc) brisk_profile_print(stdout, config, &r, (int)top);
        if (!rc && json_out && !(rc = cli_make_folders(json_out))) {
            FILE *f = fopen(json_out, "w");
            if (!f || fprintf(f, "%s\n", s) < 0) rc = cli_fail("%s: cannot write: %s", json_out, strerror(errno));
            if (f && fclose(f) != 0 && !rc) rc = cli_fail("%s: cannot write: %s", json_out, strerror(errno));
        }
        free(s);
        cJSON_Delete(j);
    }
    brisk_profile_result_free(&r);
    brisk_config_free(&cfg);
done:
    for (int i = 0; i < n_over; i++) free(over[i]);
    free(over);
    free(from);
    return rc;
}
