/* brisk bench CONFIG: the seeds' table, measured in one run. The same training job runs
 * once per row, each row adding one optimization to the one above:
 *   baseline         fp32 (no TF32), eager, no prefetch, no autotune, no fusion
 *   + CUDA graph     the whole step captured and replayed
 *   + prefetch       loader thread into pinned memory, copies on their own stream
 *   + mixed precision  bf16 GEMM operands (fp16 where the GPU has no bf16)
 *   + autotune       GEMM algorithms timed per shape (a fresh cache)
 *   all on           brisk's defaults (adds TF32 where fp32 remains and epilogue fusion)
 * and reports the median ms/step, samples/s, mean GPU utilisation and the speedup over
 * the baseline. Without a GPU it measures the CPU row and says why there is no table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/cuda.h"
#include "cli/cli.h"

typedef struct row {
    const char *name;
    const char *sets[8];
} row;

static const row rows[] = {
    {"baseline (fp32, eager, no prefetch)",
     {"speed.precision=fp32", "speed.tf32=false", "speed.cuda_graph=false", "speed.prefetch=0", "speed.autotune=false",
      "speed.fuse=false", NULL}},
    {"+ CUDA graph",
     {"speed.precision=fp32", "speed.tf32=false", "speed.cuda_graph=true", "speed.prefetch=0", "speed.autotune=false",
      "speed.fuse=false", NULL}},
    {"+ prefetch (pinned, copy stream)",
     {"speed.precision=fp32", "speed.tf32=false", "speed.cuda_graph=true", "speed.prefetch=4", "speed.autotune=false",
      "speed.fuse=false", NULL}},
    {"+ mixed precision (bf16)",
     {"speed.precision=auto", "speed.cuda_graph=true", "speed.prefetch=4", "speed.autotune=false", "speed.fuse=false",
      NULL}},
    {"+ autotune",
     {"speed.precision=auto", "speed.cuda_graph=true", "speed.prefetch=4", "speed.autotune=true", "speed.fuse=false",
      NULL}},
    {"all on (+ epilogue fusion, TF32)",
     {"speed.precision=auto", "speed.tf32=true", "speed.cuda_graph=true", "speed.prefetch=4", "speed.autotune=true",
      "speed.fuse=true", NULL}},
};

static int run_row(const char *config, const row *r, int steps, const char *dir, int index, int cpu,
                   brisk_run_summary *sum, brisk_error *err) {
    const char *over[24];
    char buf[7][1200];
    int n = 0;
    snprintf(buf[0], sizeof buf[0], "train.max_steps=%d", steps);
    snprintf(buf[1], sizeof buf[1], "train.out_dir=%s/row%d", dir, index);
    snprintf(buf[2], sizeof buf[2], "train.log_every=%d", steps / 10 > 0 ? steps / 10 : 1);
    snprintf(buf[3], sizeof buf[3], "speed.autotune_cache=%s/autotune.txt", dir);
    snprintf(buf[4], sizeof buf[4], "speed.device=%s", cpu ? "cpu" : "cuda");
    snprintf(buf[5], sizeof buf[5], "train.checkpoint_every=0");
    snprintf(buf[6], sizeof buf[6], "train.checkpoint_epochs=0"); /* no checkpoint inside the timing */
    for (int i = 0; i < 7; i++) over[n++] = buf[i];
    for (int i = 0; r->sets[i]; i++) over[n++] = r->sets[i];
    brisk_config cfg;
    brisk_status st = brisk_config_load(config, over, n, &cfg, err);
    if (st) return 1;
    brisk_logger lg = {cli_log, NULL, BRISK_LOG_WARN};
    brisk_trainer *t = NULL;
    st = brisk_trainer_create(&cfg, &lg, &t, err);
    if (!st) st = brisk_trainer_run(t, sum, err);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st ? 1 : 0;
}

int cmd_bench(int argc, char **argv) {
    const char *config = NULL;
    int json = 0;
    long long steps = 300;
    static const cli_opt opts[] = {{"--steps", 1}, {"--json", 0}, {NULL, 0}};
    cli_parser p = {"bench", opts, argc, argv, 0, 0};
    const char *name, *v;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) {
            puts("usage: brisk bench CONFIG [--steps N] [--json]\n\n"
                 "Trains CONFIG for N steps (default 300, at least 20) once per row of the table - baseline, then each\n"
                 "optimization added in turn, then all on - and prints ms/step (median), samples/s, GPU\n"
                 "utilisation and the speedup over the baseline. --json adds one JSON line per row.");
            return 0;
        }
        if (k == 0 && cli_parse_count("bench", name, v, 20, 100000000, &steps)) return BRISK_EXIT_USAGE;
        else if (k == 1) json = 1;
        else if (k == CLI_POS && config) return cli_usage("bench", "one config file expected, got '%s' and '%s'", config, v);
        else if (k == CLI_POS) config = v;
    }
    if (!config) return cli_usage("bench", "a config file is required");
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/brisk-bench-%d", (int)getpid());
    brisk_cuda_info gi;
    brisk_cuda_probe(0, &gi);
    int gpu = gi.built && gi.usable, n_rows = gpu ? (int)(sizeof rows / sizeof rows[0]) : 1;
    printf("brisk bench %s: %lld steps per row on %s\n", config, steps, gpu ? gi.name : "the CPU");
    if (!gpu) printf("(no GPU: %s; only the CPU baseline is measured)\n", gi.reason);
    printf("%-38s %10s %11s %9s %8s\n", "", "ms/step", "samples/s", "GPU util", "speedup");
    double base = 0;
    int failed = 0;
    for (int i = 0; i < n_rows; i++) {
        brisk_run_summary s;
        brisk_error err = {0};
        fflush(stdout);
        if (run_row(config, &rows[i], (int)steps, dir, i, !gpu, &s, &err)) {
            printf("%-38s failed: %s\n", rows[i].name, err.msg);
            failed = 1;
            continue;
        }
        if (i == 0) base = s.ms_per_step_median;
        char util[16] = "-";
        if (s.gpu_util >= 0) snprintf(util, sizeof util, "%.0f%%", s.gpu_util);
        printf("%-38s %10.4f %11.0f %9s %7.2fx\n", gpu ? rows[i].name : "baseline (CPU, fp32)", s.ms_per_step_median,
               s.samples_per_s, util, base > 0 ? base / s.ms_per_step_median : 1.0);
        if (json)
            printf("{\"config\": \"%s\", \"row\": %d, \"name\": \"%s\", \"device\": \"%s\", \"steps\": %lld, "
                   "\"ms_per_step_median\": %.5f, \"samples_per_s\": %.1f, \"gpu_util\": %.1f, \"speedup\": %.3f, "
                   "\"final_loss\": %.6f}\n",
                   config, i, rows[i].name, gpu ? "cuda" : "cpu", steps, s.ms_per_step_median, s.samples_per_s,
                   s.gpu_util, base > 0 ? base / s.ms_per_step_median : 1.0, s.final_loss);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "brisk: bench: could not remove %s\n", dir);
    return failed;
}
