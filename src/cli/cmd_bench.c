/* brisk bench CONFIG: the seeds' table, measured in one run. The same training job runs
 * once per row, each row adding one optimization to the one above:
 *   baseline         fp32 (no TF32), eager, no prefetch, no autotune, no fusion
 *   + CUDA graph     the whole step captured and replayed
 *   + prefetch       loader thread into pinned memory, copies on their own stream
 *   + mixed precision  bf16 GEMM operands (fp16 where the GPU has no bf16)
 *   + autotune       GEMM algorithms timed per shape (a fresh cache)
 *   all on           brisk's defaults (adds TF32 where fp32 remains and epilogue fusion)
 * and reports the median ms/step, samples/s, mean GPU utilisation and the speedup over
 * the baseline. Without a GPU the rows are the CPU on one thread and on the default
 * thread count. Every time here is the run summary's, which on a GPU comes from events on
 * the device (start and end of each step), never from the host's clock, which would only
 * time the issuing of the work; GPU utilisation is NVML's share of recent time in which a
 * kernel ran, sampled at the progress lines (a coarse cross-check, not a timing).
 *
 * Rows are run interleaved: --rounds R (default 3) rounds, each running every row once,
 * so a drift in the machine's load (another job starting, the CPU clock settling) falls
 * on every row alike instead of favouring the rows measured first. Each row reports the
 * median over its rounds of the per-run median step time, the spread of those medians
 * (min-max, relative to the median), the worst 95th percentile and the mean throughput. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/cuda.h"
#include "cli/cli.h"
#include "report/progress.h"

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

static const row cpu_rows[] = {
    {"CPU, 1 thread", {"speed.threads=1", NULL}},
    {"CPU, default threads", {"speed.threads=0", NULL}},
};

#define MAX_ROUNDS 50

/* A JSON number in ms, or null where it was not measured. */
static const char *fmt_ms(double ms, char *buf, size_t n) {
    if (isnan(ms)) snprintf(buf, n, "null");
    else snprintf(buf, n, "%.5f", ms);
    return buf;
}

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
    cfg.train.overwrite = 1; /* each round reruns the row in the same directory */
    brisk_logger lg = {cli_log, NULL, BRISK_LOG_WARN};
    brisk_trainer *t = NULL;
    st = brisk_trainer_create(&cfg, &lg, &t, err);
    if (!st) st = brisk_trainer_run(t, sum, err);
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    return st ? 1 : 0;
}

int cmd_bench(int argc, char **argv) {
    const char *config = NULL, *report = "bench-report.html";
    int json = 0;
    long long steps = 300, rounds = 3;
    static const cli_opt opts[] = {{"--steps", 1}, {"--json", 0}, {"--rounds", 1}, {"--report", 1}, {NULL, 0}};
    cli_parser p = {"bench", opts, argc, argv, 0, 0};
    const char *name, *v;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (k == CLI_ERR) return BRISK_EXIT_USAGE;
        if (k == CLI_HELP) {
            cli_help("usage: brisk bench CONFIG [--steps N] [--rounds R] [--json] [--report FILE]\n\n"
                 "Trains CONFIG for N steps (default 300, at least 20) once per row of the table and round - on\n"
                 "a GPU the baseline, then each optimization added in turn, then all on; on the CPU one thread\n"
                 "and the default thread count - running the rows interleaved, R rounds (default 3, at most\n"
                 "50) of every row in turn, so that a change in the machine's load does not favour one row.\n"
                 "Prints per row the median ms/step over the rounds, the spread of the rounds' medians, the\n"
                 "worst p95 step, samples/s over all steps, GPU utilisation and the speedup over the first\n"
                 "row. --json adds one JSON line per row. The table is also written as an HTML page with bar\n"
                 "charts, FILE (default bench-report.html in the current directory).\n");
            return 0;
        }
        if (k == 0 && cli_parse_count("bench", name, v, 20, 100000000, &steps)) return BRISK_EXIT_USAGE;
        else if (k == 1) json = 1;
        else if (k == 2 && cli_parse_count("bench", name, v, 1, MAX_ROUNDS, &rounds)) return BRISK_EXIT_USAGE;
        else if (k == 3) report = v;
        else if (k == CLI_POS && config) return cli_usage("bench", "one config file expected, got '%s' and '%s'", config, v);
        else if (k == CLI_POS) config = v;
    }
    if (!config) return cli_usage("bench", "a config file is required");
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/brisk-bench-%d", (int)getpid());
    brisk_cuda_info gi;
    brisk_cuda_probe(0, &gi);
    int gpu = gi.built && gi.usable;
    const row *tab = gpu ? rows : cpu_rows;
    int n_rows = gpu ? (int)(sizeof rows / sizeof rows[0]) : (int)(sizeof cpu_rows / sizeof cpu_rows[0]);
    printf("brisk bench %s: %lld steps per row and round, %lld round%s interleaved, on %s\n", config, steps, rounds,
           rounds == 1 ? "" : "s", gpu ? gi.name : "the CPU");
    if (!gpu) printf("(no GPU: %s; CPU rows only)\n", gi.reason);
    enum { MAX_ROWS = 8 };
    double med[MAX_ROWS][MAX_ROUNDS], host[MAX_ROWS][MAX_ROUNDS], p95[MAX_ROWS] = {0}, samples[MAX_ROWS] = {0}, secs[MAX_ROWS] = {0};
    double util[MAX_ROWS] = {0}, loss[MAX_ROWS] = {0}, gflop[MAX_ROWS] = {0};
    int ok[MAX_ROWS] = {0}, util_n[MAX_ROWS] = {0}, failed = 0;
    char why[MAX_ROWS][sizeof ((brisk_error *)0)->msg], clock[sizeof ((brisk_run_summary *)0)->step_clock] = "";
    memset(why, 0, sizeof why);
    int bar = isatty(2) && !cli_quiet() && !cli_log_is_json(); /* the round counter, on a terminal only */
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n_rows; i++) {
            if (r > 0 && !ok[i]) continue; /* failed in the first round: reported once */
            brisk_run_summary s;
            brisk_error err = {0};
            if (bar) fprintf(stderr, "\rround %d/%lld, row %d/%d ", r + 1, rounds, i + 1, n_rows);
            if (run_row(config, &tab[i], (int)steps, dir, i, !gpu, &s, &err)) {
                snprintf(why[i], sizeof why[i], "%s", err.msg);
                ok[i] = 0;
                failed = 1;
                continue;
            }
            ok[i] = r + 1;
            med[i][r] = 1e-3 * s.ms_per_step_median;
            host[i][r] = 1e-3 * s.host_ms_per_step_median; /* NaN where the host's clock timed the steps */
            if (s.ms_per_step_p95 > p95[i]) p95[i] = s.ms_per_step_p95;
            samples[i] += s.samples_per_s > 0 ? (double)s.steps_run * s.samples_per_s * s.ms_per_step_mean * 1e-3 : 0;
            secs[i] += (double)s.steps_run * s.ms_per_step_mean * 1e-3;
            if (s.gpu_util >= 0) util[i] += s.gpu_util, util_n[i]++;
            loss[i] = s.final_loss;
            gflop[i] = s.gflop_per_step;
            snprintf(clock, sizeof clock, "%s", s.step_clock);
        }
    if (bar) fprintf(stderr, "\r%40s\r", "");
    printf("%-38s %10s %9s %10s %11s %9s %9s %8s%s\n", "", "ms/step", "spread", "p95 (max)", "samples/s", "GFLOP/s",
           "GPU util", "speedup", gpu ? "  host ms" : "");
    double base = 0;
    brisk_bench_row html_rows[MAX_ROWS];
    for (int i = 0; i < n_rows; i++) {
        html_rows[i] = (brisk_bench_row){.name = tab[i].name, .ms_per_step = NAN, .why = why[i]};
        if (!ok[i]) {
            printf("%-38s failed: %s\n", tab[i].name, why[i]);
            continue;
        }
        int n = ok[i];
        brisk_step_stats rs; /* over the rounds' medians (kept in seconds, as the helper takes) */
        brisk_step_stats_of(med[i], n, &rs);
        double m = rs.median_ms, hm = NAN;
        if (!isnan(host[i][0])) { /* the host's median time per step (waits included), over the rounds' */
            brisk_step_stats hs;
            brisk_step_stats_of(host[i], n, &hs);
            hm = hs.median_ms;
        }
        double spread = m > 0 ? (rs.max_ms - rs.min_ms) / m : 0;
        if (base == 0) base = m;
        char u[16] = "-";
        if (util_n[i]) snprintf(u, sizeof u, "%.0f%%", util[i] / util_n[i]);
        double sps = secs[i] > 0 ? samples[i] / secs[i] : 0;
        double gfs = m > 0 ? gflop[i] / (1e-3 * m) : 0; /* the step's products at the median step */
        char hcol[24] = "";
        if (gpu && isnan(hm)) snprintf(hcol, sizeof hcol, "  %7s", "-");
        else if (gpu) snprintf(hcol, sizeof hcol, "  %7.4f", hm);
        printf("%-38s %10.4f %8.1f%% %10.4f %11.0f %9.1f %9s %7.2fx%s\n", tab[i].name, m, 100 * spread, p95[i], sps, gfs,
               u, base > 0 && m > 0 ? base / m : 1.0, hcol);
        char hbuf[32];
        html_rows[i] = (brisk_bench_row){tab[i].name, m, spread, p95[i], sps, util_n[i] ? util[i] / util_n[i] : -1.0,
                                         base > 0 && m > 0 ? base / m : 1.0, ""};
        if (json)
            printf("{\"config\": \"%s\", \"row\": %d, \"name\": \"%s\", \"device\": \"%s\", \"steps\": %lld, "
                   "\"rounds\": %d, \"ms_per_step_median\": %.5f, \"ms_per_step_spread\": %.4f, "
                   "\"ms_per_step_p95_max\": %.5f, \"samples_per_s\": %.1f, \"gflop_per_step\": %.5f, \"gflops\": %.2f, "
                   "\"gpu_util\": %.1f, \"host_ms_per_step_median\": %s, "
                   "\"speedup\": %.3f, \"final_loss\": %.6f}\n",
                   config, i, tab[i].name, gpu ? "cuda" : "cpu", steps, n, m, spread, p95[i], sps, gflop[i], gfs,
                   util_n[i] ? util[i] / util_n[i] : -1.0, fmt_ms(hm, hbuf, sizeof hbuf),
                   base > 0 && m > 0 ? base / m : 1.0, loss[i]);
    }
    printf("(spread: max - min of the %lld rounds' median ms/step, over their median; p95: the worst round's; "
           "GFLOP/s: the step's products, as brisk_node_flops counts them, at the median step)\n", rounds);
    if (clock[0])
        printf("(step times: %s%s)\n", clock,
               gpu ? "; GPU util: NVML's share of time a kernel ran, sampled at the progress lines; host ms: the "
                     "host's median time per step, its waits for the device included (near ms/step: the two go in "
                     "step; brisk profile's replayed step says which sets the pace)" : "");
    char title[1400];
    snprintf(title, sizeof title, "%s: %lld steps per row and round, %lld round%s interleaved, on %s", config, steps,
             rounds, rounds == 1 ? "" : "s", gpu ? gi.name : "the CPU");
    brisk_error rerr = {0};
    if (cli_make_folders(report)) failed = 1;
    else if (brisk_report_bench(report, title, html_rows, n_rows, &rerr)) failed = cli_fail_err(&rerr);
    else printf("report    %s\n", report);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) cli_log(NULL, BRISK_LOG_WARN, "bench: could not remove the row folders");
    return failed;
}
