/* Runs 20 AdamW steps of a model (tabular MLP, diffusion denoiser, LSTM or Transformer
 * classifier, dropout off) in fp32 on the CPU and writes everything PyTorch needs to
 * replay them to an .npz: the initial parameters, every step's batch (and, for
 * diffusion, the sampled timesteps and noise), outputs, losses, every step's gradients,
 * and the final parameters. check_torch.py replays the same steps with the modules of
 * bench/reference/models.py.
 *
 * For resnet (models.ResNet18Keypoints at the small size: 3 x 64 x 64, batch 4) it runs
 * 10 forward + backward passes in training mode (BatchNorm on batch statistics, moving its
 * running ones) on 10 batches with the weights fixed, keeps the gradients of the first and
 * the last only (11M floats each) and dumps the running statistics with the final
 * parameters (they are buffers in the parameter arena). No optimizer steps: at batch 4,
 * AdamW's first steps turn rounding-level gradient differences into whole steps, so after a
 * few of them PyTorch in fp32 and in fp64 differ by 10% themselves (measured); the update
 * is model-independent and checked by the other kinds.
 *
 * For meshgnn (the small size of bench/WORKLOADS.md) it also writes the graph brisk built
 * ("graph.<models.MeshGNN buffer name>"), which check_torch.py loads into models.MeshGNN's
 * buffers: the two constructions break distance ties differently (src/nn/gnn_graph.c).
 *
 * For a graph model (ref_dump graph CONFIG.json OUT.npz: the config's model at batch 4, on
 * random batches of its inputs; integer inputs are class labels) it runs 20 AdamW steps with
 * dropout off, or, when the model has BatchNorm, 10 batches in training mode on fixed weights
 * as for resnet; check_graph.py replays them with bench/reference/graph.py's module built from
 * the same config.
 *
 *   ref_dump tabular|diffusion|lstm|transformer|meshgnn|resnet OUT.npz
 *   ref_dump graph CONFIG.json OUT.npz */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"

#define MAX_STEPS 20
#define MAX_OUT 4096

static const char *names[MAX_OUT];
static brisk_tensor tensors[MAX_OUT];
static int n_out;

static int add(const char *fmt, int step, const char *pname, brisk_dtype dt, brisk_shape s, const void *src) {
    if (n_out == MAX_OUT) return -1;
    char buf[256];
    snprintf(buf, sizeof buf, fmt, step, pname);
    brisk_tensor *t = &tensors[n_out];
    if (brisk_tensor_alloc(t, dt, s, NULL)) return -1;
    memcpy(t->data, src, brisk_tensor_bytes(t));
    names[n_out++] = strdup(buf);
    return 0;
}

static int find_op(const brisk_graph *g, brisk_op op) {
    for (int i = 0; i < g->n_forward; i++)
        if (g->nodes[i].op == op) return i;
    return -1;
}

int main(int argc, char **argv) {
    int graph_kind = argc == 4 && strcmp(argv[1], "graph") == 0;
    if (argc != 3 && !graph_kind) {
        fprintf(stderr, "usage: ref_dump tabular|diffusion|lstm|transformer|meshgnn|resnet OUT.npz\n"
                        "       ref_dump graph CONFIG.json OUT.npz\n");
        return 2;
    }
    const char *out_path = argv[argc - 1];
    int diffusion = strcmp(argv[1], "diffusion") == 0, resnet = strcmp(argv[1], "resnet") == 0;
    int steps = resnet ? 10 : MAX_STEPS;
    brisk_model_spec spec;
    brisk_config cfg = {0};
    int64_t B;
    if (graph_kind) {
        brisk_error e = {0};
        if (brisk_config_load(argv[2], NULL, 0, &cfg, &e)) { fprintf(stderr, "ref_dump: %s\n", e.msg); return 1; }
        spec = cfg.model;
        B = 4;
    } else if (resnet) { /* models.ResNet18Keypoints, small: 17 keypoints = Linear(512, 34), plain MSE */
        spec = (brisk_model_spec){.type = BRISK_MODEL_RESNET, .depth = 18, .inputs = 3, .outputs = 34, .image_h = 64,
                                  .image_w = 64, .task = BRISK_TASK_REGRESS};
        B = 4;
    } else if (strcmp(argv[1], "lstm") == 0) { /* models.LSTMClassifier at a smaller batch */
        spec = (brisk_model_spec){.type = BRISK_MODEL_LSTM, .inputs = 32, .outputs = 3, .seq_len = 60, .width = 128,
                                  .layers = 2, .pool = BRISK_POOL_LAST, .task = BRISK_TASK_CLASSIFY};
        B = 16;
    } else if (strcmp(argv[1], "transformer") == 0) { /* models.TransformerClassifier */
        spec = (brisk_model_spec){.type = BRISK_MODEL_TRANSFORMER, .inputs = 32, .outputs = 3, .seq_len = 60,
                                  .width = 128, .layers = 3, .heads = 4, .ffn = 512, .activation = BRISK_ACT_GELU,
                                  .dropout = 0.1f, .norm_first = 1, .pool = BRISK_POOL_MEAN,
                                  .positions = BRISK_POS_LEARNED, .task = BRISK_TASK_CLASSIFY};
        B = 8;
    } else if (strcmp(argv[1], "meshgnn") == 0) { /* models.MeshGNN, small, at batch 4 */
        spec = (brisk_model_spec){.type = BRISK_MODEL_MESHGNN, .inputs = 20, .outputs = 8, .width = 64, .layers = 4};
        spec.mesh = (brisk_gnn_graph_spec){.grid_rows = 16, .grid_cols = 16, .mesh_rows = 8, .mesh_cols = 8, .k = 4,
                                           .neighbours = 8};
        B = 4;
        brisk_gnn_graph mg;
        brisk_error e = {0};
        if (brisk_gnn_graph_build(&spec.mesh, &mg, &e)) { fprintf(stderr, "ref_dump: %s\n", e.msg); return 1; }
        const brisk_gnn_edges *es[3] = {&mg.g2m, &mg.mm, &mg.m2g};
        const char *en[3] = {"g2m", "mm", "m2g"};
        for (int k = 0; k < 3; k++) {
            add("graph.%.0d%s_src", 0, en[k], BRISK_I32, brisk_shape1(es[k]->n), es[k]->src);
            add("graph.%.0d%s_dst", 0, en[k], BRISK_I32, brisk_shape1(es[k]->n), es[k]->dst);
            add("graph.%.0d%s_f", 0, en[k], BRISK_F32, brisk_shape2(es[k]->n, 3), es[k]->feat);
        }
        add("graph.%.0d%s", 0, "mesh_f", BRISK_F32, brisk_shape2(mg.n_mesh, 2), mg.mesh_pos);
        brisk_gnn_graph_free(&mg);
    } else if (diffusion) {
        spec = (brisk_model_spec){.type = BRISK_MODEL_DIFFUSION, .fine = 256, .coarse = 7, .time_embedding = 32,
                                  .n_hidden = 3, .activation = BRISK_ACT_SILU, .noise_steps = 50,
                                  .beta_start = 1e-4f, .beta_end = 0.02f};
        spec.hidden[0] = spec.hidden[1] = spec.hidden[2] = 256;
        B = 16;
    } else {
        spec = (brisk_model_spec){.type = BRISK_MODEL_MLP, .inputs = 64, .outputs = 3, .n_hidden = 3,
                                  .activation = BRISK_ACT_RELU, .dropout = 0.1f, .task = BRISK_TASK_CLASSIFY};
        spec.hidden[0] = 512, spec.hidden[1] = 256, spec.hidden[2] = 128;
        B = 128;
    }
    brisk_error err = {0};
    float *host = NULL;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    /* GEMMs through the BLAS, the library Debian's PyTorch multiplies with: brisk's own AVX-512
     * kernel sums in another order, and an argument of a ReLU or a max pool within that rounding
     * of its kink then falls on the other side than in PyTorch (examples/cnn_classifier.json,
     * batch 3: one input of bn3's ReLU at 9.4e-8 of the largest, and every gradient before it
     * 1.2e-2 from PyTorch's and from float64's; 5e-7 through the BLAS). These tests compare the
     * models; the own kernel is held to float64 by test_cpu_gemm_choice and test_cpu_matmul.
     * BRISK_CPU_GEMM still overrides. */
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_BLAS, "-");
    brisk_backend *be = brisk_backend_cpu_new(0);
    brisk_optim_spec os;
    brisk_optim_spec_default(&os);
    brisk_optimizer opt = {0};
    if (brisk_model_build(&spec, B, BRISK_BUILD_TRAIN, g, &io, &err) || brisk_backward(g, io.loss, &err)) goto fail;
    /* a graph with BatchNorm: batch statistics (training mode), fixed weights, as resnet */
    int fixed = resnet || (graph_kind && find_op(g, BRISK_OP_BATCHNORM) >= 0);
    if (graph_kind && fixed && find_op(g, BRISK_OP_DROPOUT) >= 0) {
        fprintf(stderr, "ref_dump: %s has BatchNorm and dropout: training mode would draw dropout masks\n", argv[2]);
        return 2;
    }
    if (fixed) steps = 10;
    /* the sampled timesteps and noise are read after each run */
    for (int i = 0; i < g->n_forward; i++)
        if (g->nodes[i].op == BRISK_OP_RANDINT || g->nodes[i].op == BRISK_OP_RANDN) g->nodes[i].keep = 1;
    if (brisk_plan_build(g, &plan, &err) || brisk_exec_create(g, &plan, be, &ex, &err) ||
        brisk_exec_init_params(ex, 3, &err) || brisk_optimizer_create(&opt, &os, ex, &err)) {
        fprintf(stderr, "ref_dump: %s\n", err.msg);
        return 1;
    }
    size_t n = (size_t)g->n_param_floats;
    int t_node = find_op(g, BRISK_OP_RANDINT), eps_node = find_op(g, BRISK_OP_RANDN);
    host = malloc(n * sizeof(float));
    uint32_t key[2] = {42, 0};
#define DUMP_PARAMS(fmt, step, arena)                                                        \
    do {                                                                                     \
        if (be->download(be, host, (arena), n * sizeof(float), &err)) goto fail;             \
        for (int i = 0; i < g->n_params; i++)                                                \
            add(fmt, step, g->params[i].name, BRISK_F32, g->params[i].shape, host + g->params[i].offset); \
    } while (0)
    DUMP_PARAMS("p0.%.0d%s", 0, ex->params);
    float losses[MAX_STEPS];
    for (int s = 0; s < steps; s++) {
        for (int f = 0; f < io.n_fields; f++) {
            const brisk_input_info *in = &g->inputs[io.input_node[f]];
            int64_t k = brisk_shape_numel(&in->shape);
            void *buf = malloc(in->bytes);
            for (int64_t i = 0; i < k; i += 4) {
                uint32_t ctr[4] = {(uint32_t)(i / 4), (uint32_t)s, (uint32_t)f, 7}, u[4];
                float v[4];
                brisk_philox4x32(ctr, key, u);
                brisk_philox_normal4(ctr, key, v);
                for (int j = 0; j < 4 && i + j < k; j++) {
                    if (in->dtype == BRISK_I32) ((int32_t *)buf)[i + j] = (int32_t)(u[j] % (uint32_t)spec.outputs);
                    else ((float *)buf)[i + j] = v[j];
                }
            }
            if (brisk_exec_set_input(ex, io.input_node[f], buf, &err)) goto fail;
            char nm[64];
            snprintf(nm, sizeof nm, "batch%%d.%%s");
            add(nm, s, in->name, in->dtype, in->shape, buf);
            free(buf);
        }
        /* training = 0 makes dropout the identity (forward and backward) while the graph keeps
         * models.py's Dropout layers, so parameter names line up with nn.Sequential's indices. */
        ex->step = (brisk_step_state){.seed = 5, .rng_step = (uint32_t)s, .first_micro = 1, .training = fixed};
        if (brisk_exec_run(ex, BRISK_RUN_TRAIN, &err) || brisk_exec_read(ex, io.loss, &losses[s], &err)) goto fail;
        { /* the model's output (logits, or the predicted noise) */
            void *out = malloc(g->nodes[io.output].bytes);
            if (!out || brisk_exec_read(ex, io.output, out, &err)) goto fail;
            add("out%d%s", s, "", BRISK_F32, g->nodes[io.output].shape, out);
            free(out);
        }
        if (diffusion) {
            void *tmp = malloc(g->nodes[eps_node].bytes);
            if (brisk_exec_read(ex, t_node, tmp, &err)) goto fail;
            add("t%d%s", s, "", BRISK_I32, g->nodes[t_node].shape, tmp);
            if (brisk_exec_read(ex, eps_node, tmp, &err)) goto fail;
            add("eps%d%s", s, "", BRISK_F32, g->nodes[eps_node].shape, tmp);
            free(tmp);
        }
        if (!resnet || s == 0 || s == steps - 1) DUMP_PARAMS("grad%d.%s", s, ex->grads);
        if (!fixed && brisk_optimizer_step(&opt, s + 1, os.lr, 1, &err)) goto fail;
    }
    add("losses%.0d%s", 0, "", BRISK_F32, brisk_shape1(steps), losses);
    DUMP_PARAMS("final.%.0d%s", 0, ex->params);
    if (brisk_npz_write(out_path, n_out, names, tensors, &err)) goto fail;
    printf("ref_dump: %s: %d arrays, losses %.6f .. %.6f\n", out_path, n_out, losses[0], losses[steps - 1]);
    int rc = 0;
    if (0) {
    fail:
        fprintf(stderr, "ref_dump: %s\n", err.msg);
        rc = 1;
    }
    for (int i = 0; i < n_out; i++) {
        free((char *)names[i]);
        brisk_tensor_free(&tensors[i]);
    }
    free(host);
    brisk_optimizer_free(&opt);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
    if (graph_kind) brisk_config_free(&cfg);
    return rc;
}
