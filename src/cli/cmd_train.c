/* brisk train CONFIG [flags]: every flag is a config override, so the config's own
 * validation judges its value; one it refuses is a bad command line naming the flag and the
 * key (cli_config_fail). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const char help[] =
    "usage: brisk train CONFIG [options]\n"
    "       brisk train --model NET.onnx [CONFIG] [options]\n"
    "\n"
    "Trains the model a JSON config describes (see examples/); a config with \"models\" trains each\n"
    "in turn on the same data and prints a comparison. Options override the config:\n"
    "  --model NET.onnx           train this ONNX file (e.g. torch.onnx.export's, in training mode):\n"
    "                             model.type=onnx, model.file=NET.onnx (from the working directory);\n"
    "                             the config gives the rest of \"model\" (inputs, losses, outputs)\n"
    "                             and data, train, optim. Without CONFIG, give those with --set:\n"
    "                             data.train, model.losses, and model.inputs when a loss's target\n"
    "                             is not an input of the ONNX graph (docs/onnx.md)\n"
    "  --device auto|cpu|cuda     where to train (auto: the GPU when present)   speed.device\n"
    "  --precision auto|fp32|tf32|bf16|fp16                                    speed.precision\n"
    "  --batch-size N|auto       auto: the largest batch the memory fits      train.batch_size\n"
    "  --epochs N                                                              train.epochs\n"
    "  --max-steps N              stop after N optimizer steps in all (-1, the default: the epochs\n"
    "                             decide; 0: no step, the initial weights are written as the\n"
    "                             step-0 checkpoint)                           train.max_steps\n"
    "  --accumulate K             average gradients over K micro-batches       train.accumulate\n"
    "  --seed N                                                                train.seed\n"
    "  --out DIR                  run directory (checkpoints, metrics)         train.out_dir\n"
    "  --checkpoint-every N       also checkpoint every N steps                train.checkpoint_every\n"
    "  --log-every N              progress line every N steps                  train.log_every\n"
    "  --lr X                                                                  optim.lr\n"
    "  --clip-norm X              clip gradients to this global norm           optim.clip_norm\n"
    "  --prefetch N               batches the loader prepares ahead            speed.prefetch\n"
    "  --no-prefetch              load each batch when needed (prefetch 0)\n"
    "  --threads N                CPU threads; 0: OMP_NUM_THREADS, else        speed.threads\n"
    "                             SLURM_CPUS_PER_TASK, else the CPUs this process may use\n"
    "                             (affinity, cgroup quota), shared by the unbound MPI ranks\n"
    "                             of a node\n"
    "  --no-graph                 GPU: run each step eagerly, no CUDA graph    speed.cuda_graph=false\n"
    "  --no-tf32                  GPU: fp32 GEMMs in full fp32                 speed.tf32=false\n"
    "  --no-autotune              GPU: the heuristic's GEMM algorithm; CPU:    speed.autotune=false\n"
    "                             the fixed GEMM kernel rule, no timing\n"
    "  --no-fuse                  no epilogue or residual+norm fusion          speed.fuse=false\n"
    "  --deterministic            bit-identical runs for the same seed (CPU:   speed.deterministic=true\n"
    "                             the fixed GEMM kernel rule)\n"
    "  --shard-optimizer          several ranks: ZeRO-1 optimizer sharding     dist.shard_optimizer=true\n"
    "  --bucket-mb X              several ranks: all-reduce bucket size, MiB   dist.bucket_mb\n"
    "  --dist-timeout S           several ranks: fail, naming the missing rank, when a collective\n"
    "                             waits longer than S seconds (default 300)    dist.timeout_s\n"
    "  --recompute                meshgnn: recompute processor activations in  model.recompute=true\n"
    "                             the backward (less memory, more compute)\n"
    "  --set KEY=VALUE            any config value, e.g. --set optim.weight_decay=0\n"
    "  --checkpoint-minutes M     also checkpoint every M minutes (default 30) train.checkpoint_minutes\n"
    "  --keep-checkpoints K       numbered checkpoints kept beside last        train.keep_checkpoints\n"
    "  --memory-limit BYTES       memory the run may use (\"8GiB\"; default: what is available)\n"
    "                                                                          speed.memory_limit\n"
    "  --checkpoint-epochs N      a resumable checkpoint every N epochs (default 1, 0: off)\n"
    "                                                                          train.checkpoint_epochs\n"
    "  --resume CKPT|auto         continue a run from its checkpoint; auto: the newest intact one in\n"
    "                             the run directory (last, best or step-N), or a fresh start when\n"
    "                             it has none. CKPT of another run than the one the run directory\n"
    "                             holds is refused (it would replace it), unless --overwrite\n"
    "  --overwrite                start a new run (or continue CKPT's) in a run directory that holds\n"
    "                             another, removing its checkpoints and metrics (without it that is\n"
    "                             refused)\n"
    "  --dist-plan N              print the gradient all-reduce's plan at N ranks (gradient bytes,\n"
    "                             buckets, ring traffic per rank a step) and exit: no training,\n"
    "                             no collective\n"
    "\n"
    "On a terminal, progress is one live line (steps, epoch, loss, samples/s, ETA); when stdout is\n"
    "not a terminal (a pipe, a file, a batch job), a plain line every train.log_every steps.\n"
    "\n"
    "Several processes (data parallel): mpirun -np N brisk train CONFIG, or srun with MPI; each rank\n"
    "takes train.batch_size samples of every global batch, rank 0 writes the run directory.\n"
    "SIGTERM, SIGINT and SIGUSR1 (SLURM's warning signal) stop the run at the next micro-batch or\n"
    "before the update (the step in progress is not applied; on a GPU, after the step), on every\n"
    "rank at the same step, with the checkpoint of the last completed step; a second one stops at\n"
    "once. Under mpirun send SIGUSR1: Open MPI forwards it, but answers SIGTERM by killing the\n"
    "ranks 2 s later and exiting 1. Exit status:\n"
    "  0   done\n"
    "  1   error (bad config or data, I/O, NaN loss, out of memory; one line on stderr says which)\n"
    "  2   bad command line (also a flag's or --set's value that its config key refuses)\n"
    "  75  stopped by a signal after writing its checkpoint: rerun with --resume auto\n";

/* --dist-plan N: the trainer's gradient plan at N ranks, printed; nothing trains. */
static int print_dist_plan(const brisk_config *cfg, const brisk_logger *lg, const char *arg) {
    char *end;
    long n = strtol(arg, &end, 10);
    if (*end || n < 1 || n > 1 << 20) return cli_usage("train", "--dist-plan: '%s' is not a world size (1 to 1048576)", arg);
    brisk_error err = {0};
    brisk_trainer *t = NULL;
    brisk_dist_plan_info p;
    if (brisk_trainer_create(cfg, lg, &t, &err) || brisk_trainer_dist_plan(t, (int)n, &p, &err)) {
        brisk_trainer_free(t);
        return cli_fail_err(&err);
    }
    brisk_trainer_free(t);
    const double MiB = 1048576.0;
    printf("dist plan  %s at %d rank%s (computed; no collective ran)\n", cfg->path, p.world, p.world == 1 ? "" : "s");
    printf("  gradients          %lld bytes (%.3f MiB) a step\n", (long long)p.grad_bytes, p.grad_bytes / MiB);
    printf("  buckets            %lld of >= %lld bytes (dist.bucket_mb %.4g): smallest %lld, largest %lld bytes\n",
           (long long)p.n_buckets, (long long)p.bucket_bytes, cfg->dist.bucket_mb, (long long)p.min_bucket_bytes,
           (long long)p.max_bucket_bytes);
    printf("  collectives        %lld a step (one all-reduce per bucket%s)\n", (long long)p.collectives_per_step,
           p.world == 1 ? "; none alone" : "");
    printf("  ring traffic       %.0f bytes (%.3f MiB) sent and as many received per rank a step: 2 (N-1)/N of the "
           "gradients\n", p.ring_bytes_per_rank, p.ring_bytes_per_rank / MiB);
    return 0;
}

/* --model FILE: model.type=onnx and model.file, both from the flag (an error on either names
 * it); the path absolute, so it is the working directory's file and not one beside the config
 * (the config's own relative "file" is looked for there too). 1: out of memory. */
static int model_overrides(char **over, int *from, int *n, int which, const char *file) {
    char real[PATH_MAX];
    const char *path = realpath(file, real) ? real : file; /* a missing file: the config's error names it */
    from[*n] = which;
    over[(*n)++] = strdup("model.type=onnx");
    from[*n] = which;
    over[(*n)++] = cli_override_arg(which, path);
    return !over[*n - 2] || !over[*n - 1];
}

int cmd_train(int argc, char **argv) {
    const char *config = NULL, *resume = NULL, *plan = NULL, *model = NULL;
    int quiet = 0, overwrite = 0, n_over = 0, rc = 1;
    char **over = calloc(2 * (size_t)argc + 1, sizeof *over); /* --model=F gives two */
    int *from = calloc(2 * (size_t)argc + 1, sizeof *from); /* the flag of each override, -1: --set */
    if (!over || !from) {
        free(over), free(from);
        return cli_fail("out of memory");
    }
    /* The option table: the config overrides, then the rest. */
    cli_opt opts[CLI_N_OVERRIDES + 5]; /* the four options below and the terminator */
    int which[CLI_N_OVERRIDES], no = 0;
    cli_override_opts(opts, &no, 0, which);
    const int opt_overwrite = no;
    opts[no++] = (cli_opt){"--overwrite", 0};
    opts[no++] = (cli_opt){"--resume", 1};
    opts[no++] = (cli_opt){"--set", 1};
    opts[no++] = (cli_opt){"--dist-plan", 1};
    opts[no] = (cli_opt){NULL, 0};
    cli_parser p = {"train", opts, argc, argv, 0, 0};
    const char *name, *v;
    for (int k; (k = cli_next(&p, &name, &v)) != CLI_END;) {
        if (n_over && !over[n_over - 1]) { rc = cli_fail("out of memory"); goto done; }
        if (k == CLI_ERR) { rc = BRISK_EXIT_USAGE; goto done; }
        if (k == CLI_HELP) { cli_help(help); rc = 0; goto done; }
        if (k == CLI_POS) {
            if (config) { rc = cli_usage("train", "one config file expected, got '%s' and '%s'", config, v); goto done; }
            config = v;
        } else if (k < opt_overwrite && strcmp(name, "--model") == 0) {
            model = v;
            if (model_overrides(over, from, &n_over, which[k], v)) { rc = cli_fail("out of memory"); goto done; }
        } else if (k < opt_overwrite) {
            from[n_over] = which[k];
            over[n_over++] = cli_override_arg(which[k], v);
        } else if (k == opt_overwrite) {
            overwrite = 1;
        } else if (k == opt_overwrite + 1) {
            resume = v;
        } else if (k == opt_overwrite + 3) {
            plan = v;
        } else {
            from[n_over] = -1;
            over[n_over++] = strdup(v);
        }
    }
    if (n_over && !over[n_over - 1]) { rc = cli_fail("out of memory"); goto done; }
    if (!config && !model) { rc = cli_usage("train", "a config file is required (or --model NET.onnx)"); goto done; }
    quiet = cli_quiet();

    brisk_error err = {0};
    brisk_config cfg;
    { /* errors before the process group exists carry the rank too */
        int w = 1, r = brisk_dist_env_rank(&w);
        cli_set_rank(r, w);
    }
    /* a config of --model alone is named as its file: in errors, and the default run directory
     * runs/<stem> */
    const char *label = config ? config : model;
    if (config ? brisk_config_load(config, (const char *const *)over, n_over, &cfg, &err)
               : brisk_config_parse("{}", label, (const char *const *)over, n_over, &cfg, &err)) {
        if (!config && strstr(err.msg, ": missing")) /* what a config would have given */
            rc = cli_usage("train", "%s; without a config, --model needs the rest with --set: data.train=FILE, "
                           "'model.losses=[{\"output\": ..., \"target\": ..., \"type\": ...}]' and, for a target the "
                           "ONNX graph does not take, 'model.inputs=[...]' (each input and target: name, shape, dtype)",
                           err.msg);
        else
            rc = cli_config_fail("train", label, over, from, n_over, &err);
        goto done;
    }
    if (overwrite && resume && strcmp(resume, "auto") == 0) {
        rc = cli_usage("train", "--overwrite starts a new run and --resume auto continues the run directory's own; "
                       "give one of them");
        brisk_config_free(&cfg);
        goto done;
    }
    cfg.train.overwrite = overwrite;
    int in_summary = 0; /* --quiet: the summary has begun */
    brisk_logger lg = {cli_log, NULL, BRISK_LOG_INFO};
    if (quiet) lg = (brisk_logger){cli_quiet_log, &in_summary, BRISK_LOG_INFO};
    brisk_dist *dist = NULL; /* the process group: alone, or a rank under mpirun / srun */
    /* MPI_Init waits for every rank: one that never gets there would hold this one forever */
    int env_world = 1;
    brisk_dist_env_rank(&env_world);
    char late[400];
    snprintf(late, sizeof late, "MPI_Init did not complete within dist.timeout_s = %g s: it waits for all %d ranks, "
             "and at least one has not started it (stuck before it: started late, or reading its config or files "
             "from a filesystem that hangs); the ranks that print this line did start it", cfg.dist.timeout_s,
             env_world);
    cli_deadline *startup = env_world > 1 ? cli_deadline_start(cfg.dist.timeout_s, late) : NULL;
    brisk_status dst = brisk_dist_create(&dist, &err);
    cli_deadline_stop(startup);
    if (dst) {
        rc = cli_fail_err(&err);
        brisk_config_free(&cfg);
        goto done;
    }
    cli_set_rank(brisk_dist_rank(dist), brisk_dist_world(dist));
    if (brisk_dist_rank(dist) != 0) lg.max_level = BRISK_LOG_WARN; /* rank 0 reports for all */
    cfg.data.shard_rank = brisk_dist_rank(dist), cfg.data.shard_world = brisk_dist_world(dist);
    if (cfg.n_models > 0 && brisk_dist_world(dist) > 1) {
        rc = cli_fail("%s: a config with \"models\" (a pipeline) trains in one process; train each model's own config "
                      "on %d ranks instead", cfg.path, brisk_dist_world(dist));
        brisk_dist_abandon(dist);
        brisk_dist_free(dist);
        brisk_config_free(&cfg);
        goto done;
    }
    /* a live progress line on a terminal, plain lines elsewhere; not with several ranks: mpirun
     * gives each rank a pty even when the job's output goes to a file, and forwards stdout and
     * stderr separately, so the line's erasures split the warnings printed beside it */
    const char *term = getenv("TERM");
    int bar = !quiet && lg.max_level >= BRISK_LOG_INFO && !cli_log_is_json() && isatty(STDOUT_FILENO) &&
              !(term && strcmp(term, "dumb") == 0) && brisk_dist_world(dist) == 1;
    const brisk_trainer_control bar_control = {.status = cli_progress_bar};
    if (cfg.n_models > 0) { /* a pipeline: each model in turn, then the comparison */
        brisk_pipeline_result res[BRISK_MAX_MODELS];
        if (quiet) lg.max_level = BRISK_LOG_WARN; /* the comparison below is its summary */
        /* One bar per model, under its "pipeline  model i of n" line: models differ in speed by
         * orders of magnitude, so only the running model's ETA can be measured honestly. */
        if (resume) rc = cli_fail("train: --resume takes one model's checkpoint; resume a pipeline's model with its "
                                  "own config (see %s/<name>)", cfg.train.out_dir);
        else if (brisk_pipeline_run_control(&cfg, &lg, bar ? &bar_control : NULL, res, &err)) rc = cli_fail_err(&err);
        else rc = 0;
        cli_progress_end();
        brisk_error rerr = {0};
        if (rc == 0 && brisk_report_pipeline(cfg.train.out_dir, res, cfg.n_models, &rerr))
            brisk_log(&lg, BRISK_LOG_WARN, "no report: %s", rerr.msg);
        else if (rc == 0)
            brisk_log(&lg, BRISK_LOG_INFO, "  report  %s/report.html (each model's in its own directory)",
                      cfg.train.out_dir);
        if (quiet && rc == 0) { /* the table is the point of a pipeline: show it even when quiet */
            brisk_logger all = {cli_log, NULL, BRISK_LOG_INFO};
            brisk_pipeline_report(res, cfg.n_models, &all);
        }
        brisk_config_free(&cfg);
        brisk_dist_free(dist);
        goto done;
    }
    brisk_trainer *t = NULL;
    if (plan) {
        rc = print_dist_plan(&cfg, &lg, plan);
        brisk_config_free(&cfg);
        brisk_dist_free(dist);
        goto done;
    }
    brisk_run_summary sum;
    int resumed = 0;

    /* A file-size limit (ulimit -f) must fail a write with EFBIG, which brisk reports,
     * rather than kill the process. */
    signal(SIGXFSZ, SIG_IGN);
    if (brisk_signals_install(&err) || brisk_trainer_create(&cfg, &lg, &t, &err) ||
        (bar && (brisk_trainer_set_control(t, &bar_control), 0)) ||
        brisk_trainer_set_dist(t, dist, 0, &err) ||
        (resume && strcmp(resume, "auto") == 0 && brisk_trainer_resume_auto(t, &resumed, &err)) ||
        (resume && strcmp(resume, "auto") != 0 && brisk_trainer_resume(t, resume, &err)) ||
        brisk_trainer_run(t, &sum, &err))
        rc = cli_fail_err(&err);
    else
        rc = sum.stopped_by_signal ? BRISK_EXIT_PREEMPTED : BRISK_EXIT_OK;
    cli_progress_end();
    /* the run's report, also after a failed run (a NaN loss is worth seeing), but not after one
     * refused or failed before its first step: the directory's report is still its previous
     * run's, and stays; rank 0 writes the run directory */
    if (brisk_trainer_run_began(t) && cfg.train.out_dir[0] && brisk_dist_rank(dist) == 0) {
        brisk_error rerr = {0};
        char written[BRISK_PATH_MAX + 64];
        if (brisk_report_run(cfg.train.out_dir, NULL, written, sizeof written, &lg, &rerr)) {
            if (rc != BRISK_EXIT_ERROR) brisk_log(&lg, BRISK_LOG_WARN, "no report: %s", rerr.msg);
        } else
            brisk_log(&lg, BRISK_LOG_INFO, "  report            %s", written);
    }
    brisk_trainer_free(t);
    brisk_config_free(&cfg);
    if (rc != BRISK_EXIT_OK && rc != BRISK_EXIT_PREEMPTED) brisk_dist_abandon(dist); /* the others would wait */
    brisk_dist_free(dist); /* after a failure: ends the MPI job (the error is printed) */
done:
    for (int i = 0; i < n_over; i++) free(over[i]);
    free(over);
    free(from);
    return rc;
}
