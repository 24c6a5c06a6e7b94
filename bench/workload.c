/* brisk's side of the benchmark: times training steps of one workload of
 * bench/WORKLOADS.md the way bench/reference/timed.py does (synthetic batches already
 * in memory, warm-up steps, then the median of timed steps) and prints one JSON line
 * with the same keys, so bench/run.sh can set the two side by side.
 *
 *   brisk_bench --workload diffusion|tabular|lstm|transformer|resnet|meshgnn --steps 50 [--threads N] [--warmup 5]
 *               [--small] [--recompute] [--width W] [--seq T] [--batch B] [--heads H] [--ffn F] [--epoch-steps N]
 *   brisk_bench --config CONFIG.json ...: the config's model (a graph model, say) at its train.batch_size and
 *               optim.lr on synthetic batches, as bench/graph_timed.py times its PyTorch twin (bench/graph_vs_torch.sh)
 *
 * --small: bench/WORKLOADS.md's small sizes (resnet at 3 x 64 x 64, batch 4; meshgnn), as timed.py --small.
 * resnet clips the gradient norm to 1.0 and uses lr 1e-4, as bench/reference/workloads.py does.
 * --recompute: meshgnn's processor layers recomputed in the backward (arena_bytes shows the saving).
 *
 * The shape options move a workload off its defined shapes for bench/shape_sweep.py:
 * --width sets the LSTM's and the Transformer's width and every hidden layer of the
 * MLP (tabular), --seq the sequence length, --batch the batch, --heads and --ffn the
 * Transformer's. --epoch-steps N adds "epoch_s", the time of each block of N timed steps,
 * for bench/contention.sh. "fusion" lists the CPU backend's fusions (BRISK_CPU_FUSE=0: "off"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"
#include "brisk/train.h"
#include "report/progress.h"

static int spec_for(const char *w, int small, brisk_model_spec *s, int64_t *batch, float *lr) {
    memset(s, 0, sizeof *s);
    *lr = 1e-3f;
    if (strcmp(w, "resnet") == 0) { /* models.py's ResNet18Keypoints: y [B, 34] is brisk's [B, 17, 2] */
        int64_t hw = small ? 64 : 256;
        *s = (brisk_model_spec){.type = BRISK_MODEL_RESNET, .depth = 18, .inputs = 3, .outputs = 34, .image_h = hw,
                                .image_w = hw, .task = BRISK_TASK_REGRESS};
        *batch = small ? 4 : 16;
        *lr = 1e-4f;
        return 0;
    }
    if (strcmp(w, "meshgnn") == 0) { /* models.py's MeshGNN, --small as in workloads.py */
        int64_t grid = small ? 16 : 64, mesh = small ? 8 : 32;
        *s = (brisk_model_spec){.type = BRISK_MODEL_MESHGNN, .inputs = 20, .outputs = 8, .width = small ? 64 : 256,
                                .layers = small ? 4 : 16};
        s->mesh = (brisk_gnn_graph_spec){.grid_rows = grid, .grid_cols = grid, .mesh_rows = mesh, .mesh_cols = mesh,
                                         .k = 4, .neighbours = 8};
        *batch = 8;
        *lr = 1e-4f;
        return 0;
    }
    if (strcmp(w, "diffusion") == 0) {
        *s = (brisk_model_spec){.type = BRISK_MODEL_DIFFUSION, .fine = 256, .coarse = 7,
                                .time_embedding = 32, .n_hidden = 3, .activation = BRISK_ACT_SILU,
                                .noise_steps = 50, .beta_start = 1e-4f, .beta_end = 0.02f};
        s->hidden[0] = s->hidden[1] = s->hidden[2] = 256;
        *batch = 16;
        return 0;
    }
    if (strcmp(w, "lstm") == 0) {
        *s = (brisk_model_spec){.type = BRISK_MODEL_LSTM, .inputs = 32, .outputs = 3, .seq_len = 60, .width = 128,
                                .layers = 2, .pool = BRISK_POOL_LAST, .task = BRISK_TASK_CLASSIFY};
        *batch = 256;
        return 0;
    }
    if (strcmp(w, "transformer") == 0) {
        *s = (brisk_model_spec){.type = BRISK_MODEL_TRANSFORMER, .inputs = 32, .outputs = 3, .seq_len = 60,
                                .width = 128, .layers = 3, .heads = 4, .ffn = 512, .activation = BRISK_ACT_GELU,
                                .dropout = 0.1f, .norm_first = 1, .pool = BRISK_POOL_MEAN,
                                .positions = BRISK_POS_LEARNED, .task = BRISK_TASK_CLASSIFY};
        *batch = 256;
        return 0;
    }
    if (strcmp(w, "tabular") == 0) {
        *s = (brisk_model_spec){.type = BRISK_MODEL_MLP, .inputs = 64, .outputs = 3, .n_hidden = 3,
                                .activation = BRISK_ACT_RELU, .dropout = 0.1f, .task = BRISK_TASK_CLASSIFY};
        s->hidden[0] = 512, s->hidden[1] = 256, s->hidden[2] = 128;
        *batch = 512;
        return 0;
    }
    return -1;
}

/* The shape options over a workload's spec (0: keep). */
static int reshape(brisk_model_spec *s, int64_t *batch, int64_t width, int64_t seq, int64_t b, int64_t heads,
                   int64_t ffn) {
    if (b > 0) *batch = b;
    if (s->type == BRISK_MODEL_MLP && width > 0)
        for (int i = 0; i < s->n_hidden; i++) s->hidden[i] = width;
    if (s->type == BRISK_MODEL_LSTM || s->type == BRISK_MODEL_TRANSFORMER) {
        if (width > 0) s->width = width;
        if (seq > 0) s->seq_len = seq;
    }
    if (s->type == BRISK_MODEL_TRANSFORMER) {
        if (heads > 0) s->heads = heads;
        if (ffn > 0) s->ffn = ffn;
        if (s->width % s->heads) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *workload = "diffusion", *config = NULL;
    int steps = 50, warmup = 5, threads = 0, n_batches = 8, small = 0, recompute = 0;
    long long width = 0, seq = 0, bsz = 0, heads = 0, ffn = 0, epoch_steps = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--workload") && i + 1 < argc) workload = argv[++i];
        else if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--small")) small = 1;
        else if (!strcmp(argv[i], "--recompute")) recompute = 1;
        else if (!strcmp(argv[i], "--width") && i + 1 < argc) width = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc) seq = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) bsz = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && i + 1 < argc) heads = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--ffn") && i + 1 < argc) ffn = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--epoch-steps") && i + 1 < argc) epoch_steps = atoll(argv[++i]);
        else { fprintf(stderr, "usage: brisk_bench --workload diffusion|tabular|lstm|transformer|resnet|meshgnn [--small] [--recompute] [--steps N] [--warmup N] [--threads N] "
                       "[--width W] [--seq T] [--batch B] [--heads H] [--ffn F]\n"
                       "       brisk_bench --config CONFIG.json [--batch B] [--steps N] [--warmup N] [--threads N]\n"); return 2; }
    }
    if (steps < 1) steps = 1;
    brisk_model_spec spec;
    int64_t batch;
    float lr;
    brisk_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (config) { /* the config's model, batch and learning rate; the data stay synthetic */
        brisk_error e = {0};
        if (brisk_config_load(config, NULL, 0, &cfg, &e)) {
            fprintf(stderr, "brisk_bench: %s\n", e.msg);
            return 1;
        }
        const char *base = strrchr(config, '/');
        workload = base ? base + 1 : config;
        spec = cfg.model;
        batch = bsz > 0 ? bsz : cfg.train.batch_size;
        lr = cfg.optim.lr;
    } else if (spec_for(workload, small, &spec, &batch, &lr)) {
        fprintf(stderr, "brisk_bench: workload '%s' is not built yet (diffusion, tabular, lstm, transformer, resnet, meshgnn)\n",
                workload);
        return 2;
    }
    if (!config) spec.recompute = recompute;
    if (width < 0 || seq < 0 || bsz < 0 || heads < 0 || ffn < 0 ||
        (!config && reshape(&spec, &batch, width, seq, bsz, heads, ffn))) {
        fprintf(stderr, "brisk_bench: bad shape options for %s (negative, or width not a multiple of heads)\n", workload);
        return 2;
    }
    brisk_thread_plan tp;
    brisk_threads_resolve(threads, "--threads", &tp);
    brisk_error err = {0};
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan;
    brisk_exec *ex = NULL;
    brisk_backend *be = brisk_backend_cpu_new(tp.threads);
    brisk_optim_spec os;
    if (config) os = cfg.optim;
    else brisk_optim_spec_default(&os);
    os.lr = lr;
    if (spec.type == BRISK_MODEL_RESNET) os.clip_norm = 1.0f;
    brisk_optimizer opt;
    if (brisk_model_build(&spec, batch, BRISK_BUILD_TRAIN, g, &io, &err) ||
        brisk_backward(g, io.loss, &err) || (g->grads_in_place = 1, brisk_plan_build(g, &plan, &err)) ||
        brisk_exec_create(g, &plan, be, &ex, &err) || brisk_exec_init_params(ex, 0, &err) ||
        brisk_optimizer_create(&opt, &os, ex, &err)) {
        fprintf(stderr, "brisk_bench: %s\n", err.msg);
        return 1;
    }
    /* Synthetic batches resident in memory, as bench/reference/workloads.py keeps them on the device. */
    void *data[8][BRISK_MAX_FIELDS];
    uint32_t key[2] = {1, 0};
    for (int b = 0; b < n_batches; b++)
        for (int f = 0; f < io.n_fields; f++) {
            const brisk_input_info *in = &g->inputs[io.input_node[f]];
            int64_t n = brisk_shape_numel(&in->shape);
            data[b][f] = aligned_alloc(64, (in->bytes + 63) / 64 * 64); /* as the loader's: read in place */
            for (int64_t i = 0; i < n; i += 4) {
                uint32_t ctr[4] = {(uint32_t)(i / 4), (uint32_t)b, (uint32_t)f, 0}, u[4];
                float nv[4];
                brisk_philox4x32(ctr, key, u);
                brisk_philox_normal4(ctr, key, nv);
                for (int k = 0; k < 4 && i + k < n; k++) {
                    if (in->dtype == BRISK_I32) /* class labels: below the model's classes (3 by default) */
                        ((int32_t *)data[b][f])[i + k] = (int32_t)(u[k] % (uint32_t)(spec.outputs > 1 ? spec.outputs : 3));
                    else ((float *)data[b][f])[i + k] = nv[k];
                }
            }
        }
    double *times = malloc(sizeof(double) * (size_t)steps);
    float loss = 0, first_loss = 0;
    for (int s = 0; s < warmup + steps; s++) {
        double t0 = brisk_now();
        int b = s % n_batches;
        for (int f = 0; f < io.n_fields; f++)
            if (brisk_exec_use_input(ex, io.input_node[f], data[b][f], &err)) goto fail; /* as the trainer feeds */
        ex->step.rng_step = (uint32_t)s;
        ex->step.first_micro = 1;
        ex->step.training = 1;
        if (brisk_exec_run(ex, BRISK_RUN_TRAIN, &err) || brisk_optimizer_step(&opt, s + 1, lr, 1, &err) ||
            brisk_exec_read(ex, io.loss, &loss, &err))
            goto fail;
        brisk_exec_release_inputs(ex);
        if (s == warmup) first_loss = loss;
        if (s >= warmup) times[s - warmup] = brisk_now() - t0;
    }
    brisk_cpu_gemm_stats gs; /* the CPU's GEMM kernel per shape, decided in the warm-up steps */
    brisk_cpu_gemm_get_stats(&gs);
    char epochs[4096] = "";
    for (long long e = 0, k = 0; epoch_steps > 0 && e + epoch_steps <= steps && k < (long long)sizeof epochs - 32;
         e += epoch_steps) {
        double sum = 0;
        for (long long s = e; s < e + epoch_steps; s++) sum += times[s];
        k += snprintf(epochs + k, sizeof epochs - (size_t)k, "%s%.5f", k ? ", " : ", \"epoch_s\": [", sum);
    }
    if (epochs[0]) strcat(epochs, "]");
    brisk_step_stats ss; /* the trainer's statistics (sorts times) */
    brisk_step_stats_of(times, steps, &ss);
    const double med = 1e-3 * ss.median_ms;
    double gflop = 1e-9 * brisk_plan_train_flops(g, &plan);
    char fusion[400];
    brisk_backend_cpu_fusions(be, fusion, sizeof fusion); /* the CPU fusions (BRISK_CPU_FUSE=0: off) */
    char pool_note[200];
    double alone = brisk_backend_cpu_pool_note(be, pool_note, sizeof pool_note);
    printf("{\"workload\": \"%s\", \"impl\": \"brisk\", \"device\": \"cpu\", \"small\": %s, \"batch\": %lld, "
           "\"params\": %lld, \"threads\": %d, \"ms_per_step_median\": %.4f, \"ms_per_step_min\": %.4f, "
           "\"ms_per_step_mean\": %.4f, \"ms_per_step_p95\": %.4f, \"ms_per_step_max\": %.4f, "
           "\"samples_per_s\": %.1f, \"gflop_per_step\": %.4f, \"gflops_median\": %.2f, \"arena_bytes\": %zu, \"losses\": [%.5f, %.5f]%s, \"fusion\": \"%s\", "
           "\"gemm_shapes\": %d, \"gemm_blas\": %d, \"gemm_from_cache\": %d, \"gemm_tune_ms\": %.2f, "
           "\"pool_alone\": %.3f, \"pool\": \"%s\"}\n",
           workload, small ? "true" : "false", (long long)batch, (long long)brisk_model_param_count(&spec),
           tp.threads, ss.median_ms, ss.min_ms, ss.mean_ms, ss.p95_ms, ss.max_ms, (double)batch / med, gflop, gflop / med, plan.arena_bytes,
           first_loss, loss, epochs, fusion, gs.shapes, gs.blas, gs.from_cache, gs.tune_ms,
           alone, pool_note);
    return 0;
fail:
    fprintf(stderr, "brisk_bench: %s\n", err.msg);
    return 1;
}
