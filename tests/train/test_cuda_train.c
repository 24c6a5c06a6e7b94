/* The trainer on the CUDA backend: CUDA-graph replay gives the same losses as eager runs
 * (bit for bit), deterministic mode is bit-identical across runs, staged (prefetched)
 * batches equal direct copies, gradient accumulation agrees with the CPU, the fp16 loss
 * scaler skips a step with an injected inf and recovers (and so does every other precision
 * under train.skip_nan_steps, on the device), checkpoints move between GPU and CPU in both
 * directions (and `predict` runs a GPU-trained model on the CPU), validation scores
 * every sample, the ResNet example's CUDA-graph step survives its validation, and the
 * step times the trainer reports are the device's. Skips without a GPU. */
#include <unistd.h>

#include "backend/cuda_test_util.h"
#include "train/train_test_util.h"
#include "train/trainer_internal.h"

static char dir[256];

static void make_dir(void) {
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "%s/cuda_train_%d", BRISK_BINARY_DIR, (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot create %s\n", dir);
    char path[300];
    brisk_error err = {0};
    snprintf(path, sizeof path, "%s/tab.npz", dir);
    if (brisk_synth_write("tabular", path, 4096, 0, &err)) fprintf(stderr, "%s\n", err.msg);
    snprintf(path, sizeof path, "%s/diff.npz", dir);
    if (brisk_synth_write("diffusion", path, 1024, 0, &err)) fprintf(stderr, "%s\n", err.msg);
}

/* model + data part of a config */
static const char *TAB = "\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [128, 64], \"outputs\": 3, "
                         "\"dropout\": 0.1}, \"data\": {\"train\": \"%s/tab.npz\", \"validation_fraction\": 0.1}";
static const char *DIFF = "\"model\": {\"type\": \"diffusion\", \"fine\": 256, \"coarse\": 7, \"time_embedding\": 32, "
                          "\"hidden\": [128, 128], \"activation\": \"silu\"}, "
                          "\"data\": {\"train\": \"%s/diff.npz\", \"fields\": {\"coarse\": \"coarse\", \"fine\": \"fine\"}}";

/* Trains `steps` more steps (from `resume` when given); returns the loss history. */
static brisk_status train(const char *model, const char *speed, const char *extra, const char *out, const char *resume,
                          int64_t steps, float **losses, int64_t *n, brisk_run_summary *sum, brisk_error *err) {
    char m[1024], json[4096];
    snprintf(m, sizeof m, model, dir);
    snprintf(json, sizeof json,
             "{%s, \"train\": {\"batch_size\": 64, \"epochs\": 100, \"seed\": 3, \"log_every\": 7, \"out_dir\": \"%s/%s\"%s}, "
             "\"speed\": {%s}}",
             m, dir, out, extra, speed);
    brisk_run_summary s;
    return tu_train_json(json, resume, steps, sum ? sum : &s, losses, n, err);
}

#define GPU_FP32 "\"device\": \"cuda\", \"precision\": \"fp32\", \"tf32\": false, \"autotune\": false"

static void same_bits(const float *a, int64_t na, const float *b, int64_t nb, const char *what) {
    CHECKF(na == nb && na > 0, "%s: %lld vs %lld losses", what, (long long)na, (long long)nb);
    if (na == nb && na > 0) {
        int64_t first = -1;
        for (int64_t i = 0; i < na && first < 0; i++)
            if (memcmp(&a[i], &b[i], sizeof(float)) != 0) first = i;
        CHECKF(first < 0, "%s: step %lld: %.9g vs %.9g", what, (long long)first + 1, first >= 0 ? a[first] : 0.0,
               first >= 0 ? b[first] : 0.0);
    }
}

static void test_graph_matches_eager(void) {
    make_dir();
    brisk_error err = {0};
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": true", "", "graph", NULL, 40, &a, &na,
                     NULL, &err), &err);
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": false", "", "eager", NULL, 40, &b, &nb,
                     NULL, &err), &err);
    same_bits(a, na, b, nb, "CUDA graph vs eager (tabular, dropout)");
    free(a), free(b);
    REQUIRE_OK(train(DIFF, GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": true", "", "dgraph", NULL, 40, &a, &na,
                     NULL, &err), &err);
    REQUIRE_OK(train(DIFF, GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": false", "", "deager", NULL, 40, &b, &nb,
                     NULL, &err), &err);
    same_bits(a, na, b, nb, "CUDA graph vs eager (diffusion: randn, randint, gather)");
    free(a), free(b);
}

static void test_deterministic(void) {
    make_dir();
    brisk_error err = {0};
    const char *sp = "\"device\": \"cuda\", \"precision\": \"bf16\", \"deterministic\": true";
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    REQUIRE_OK(train(DIFF, sp, "", "det1", NULL, 60, &a, &na, NULL, &err), &err);
    REQUIRE_OK(train(DIFF, sp, "", "det2", NULL, 60, &b, &nb, NULL, &err), &err);
    same_bits(a, na, b, nb, "two deterministic bf16 runs");
    free(a), free(b);
}

static void test_prefetch_same(void) {
    make_dir();
    brisk_error err = {0};
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true, \"prefetch\": 4", "", "pf4", NULL, 30, &a, &na, NULL,
                     &err), &err);
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true, \"prefetch\": 0", "", "pf0", NULL, 30, &b, &nb, NULL,
                     &err), &err);
    same_bits(a, na, b, nb, "staged batches (pinned, copy stream) vs direct copies");
    free(a), free(b);
}

static void close_losses(const float *a, int64_t na, const float *b, int64_t nb, double tol, const char *what) {
    CHECKF(na == nb && na > 0, "%s: %lld vs %lld losses", what, (long long)na, (long long)nb);
    for (int64_t i = 0; i < na && i < nb; i++)
        if (!(fabs((double)a[i] - b[i]) <= tol * fabs((double)b[i]))) {
            CHECKF(0, "%s: step %lld: %.7g vs %.7g (tol %.1e)", what, (long long)i + 1, a[i], b[i], tol);
            break;
        }
}

static void test_accumulate_vs_cpu(void) {
    make_dir();
    brisk_error err = {0};
    float *a = NULL, *b = NULL, *c = NULL;
    int64_t na = 0, nb = 0, nc = 0;
    const char *acc = ", \"accumulate\": 2";
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true", acc, "acc_gpu", NULL, 20, &a, &na, NULL, &err), &err);
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": false", acc, "acc_eager", NULL, 20, &c,
                     &nc, NULL, &err), &err);
    REQUIRE_OK(train(TAB, "\"device\": \"cpu\"", acc, "acc_cpu", NULL, 20, &b, &nb, NULL, &err), &err);
    same_bits(a, na, c, nc, "accumulate 2: graph (two programs) vs eager");
    close_losses(a, na, b, nb, 2e-3, "accumulate 2: GPU vs CPU");
    free(a), free(b), free(c);
}

/* A run checkpointed on one device and resumed on the other continues as the
 * uninterrupted run does (to fp32 rounding differences between the devices). */
static void test_resume_across_devices(void) {
    make_dir();
    brisk_error err = {0};
    const char *devs[2][2] = {{GPU_FP32, "\"device\": \"cpu\""}, {"\"device\": \"cpu\"", GPU_FP32}};
    for (int k = 0; k < 2; k++) {
        char out[64], ckpt[400];
        float *full = NULL, *tail = NULL;
        int64_t nf = 0, nt = 0;
        snprintf(out, sizeof out, "xres%d", k);
        REQUIRE_OK(train(TAB, devs[k][0], "", out, NULL, 20, NULL, NULL, NULL, &err), &err);
        snprintf(ckpt, sizeof ckpt, "%s/%s/last.safetensors", dir, out);
        snprintf(out, sizeof out, "xres%d_b", k);
        REQUIRE_OK(train(TAB, devs[k][1], "", out, ckpt, 10, &tail, &nt, NULL, &err), &err);
        snprintf(out, sizeof out, "xres%d_full", k);
        REQUIRE_OK(train(TAB, devs[k][0], "", out, NULL, 30, &full, &nf, NULL, &err), &err);
        REQUIRE(nf == 30 && nt == 10);
        close_losses(tail, nt, full + 20, 10, 2e-3, k ? "CPU checkpoint resumed on the GPU" : "GPU checkpoint resumed on the CPU");
        free(full), free(tail);
    }
    /* predict with a GPU-trained checkpoint runs on the CPU */
    char ckpt[400], x[400], y[400];
    snprintf(ckpt, sizeof ckpt, "%s/xres0/last.safetensors", dir);
    snprintf(x, sizeof x, "%s/x.npy", dir);
    snprintf(y, sizeof y, "%s/y.npy", dir);
    brisk_tensor t;
    REQUIRE_OK(brisk_tensor_alloc(&t, BRISK_F32, brisk_shape2(10, 64), &err), &err);
    ct_fill(t.data, BRISK_F32, 640, -1, 1);
    REQUIRE_OK(brisk_npy_write(x, &t, &err), &err);
    brisk_tensor_free(&t);
    REQUIRE_OK(brisk_predict_file(ckpt, x, y, NULL, &err), &err);
}

/* One trainer: 12 steps, a checkpoint, 6 steps (losses A); the checkpoint resumed into the
 * same trainer, whose captured programs stay, then the same 6 steps again (losses B): A
 * and B bit for bit. bf16: the upload after capture refreshes the 16-bit weight copy the
 * programs read; fp16: the loss scaler's scale and counters come back from the checkpoint. */
static void resume_in_place(const char *speed, const char *out) {
    make_dir();
    char m[1024], json[4096], ckpt[400];
    snprintf(m, sizeof m, TAB, dir);
    snprintf(json, sizeof json, "{%s, \"train\": {\"batch_size\": 64, \"epochs\": 100, \"seed\": 3, \"out_dir\": "
             "\"%s/%s\"}, \"speed\": {%s, \"deterministic\": true}}", m, dir, out, speed);
    snprintf(ckpt, sizeof ckpt, "%s/%s.safetensors", dir, out);
    brisk_error err = {0};
    brisk_config cfg;
    REQUIRE_OK(brisk_config_parse(json, "<test>", NULL, 0, &cfg, &err), &err);
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    brisk_run_summary s;
    brisk_status st = brisk_trainer_create(&cfg, &quiet, &t, &err);
    brisk_config_free(&cfg);
    REQUIRE_OK(st, &err);
    float a[6], b[6];
    int64_t n = 0;
    if (!(st = brisk_trainer_run_steps(t, 12, &s, &err)) && !(st = brisk_trainer_save(t, ckpt, &err)) &&
        !(st = brisk_trainer_run_steps(t, 6, &s, &err))) {
        memcpy(a, brisk_trainer_losses(t, &n) + 12, sizeof a);
        if (!(st = brisk_trainer_resume(t, ckpt, &err)) && !(st = brisk_trainer_run_steps(t, 6, &s, &err))) {
            const float *l = brisk_trainer_losses(t, &n);
            memcpy(b, l + n - 6, sizeof b);
        }
    }
    brisk_trainer_free(t);
    REQUIRE_OK(st, &err);
    same_bits(a, 6, b, 6, out);
}

static void test_bf16_resume_after_capture(void) { resume_in_place("\"device\": \"cuda\", \"precision\": \"bf16\"", "bf16res"); }
static void test_fp16_resume(void) { resume_in_place("\"device\": \"cuda\", \"precision\": \"fp16\"", "fp16res"); }

static void test_fp16_trains(void) {
    make_dir();
    brisk_error err = {0};
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    REQUIRE_OK(train(TAB, "\"device\": \"cuda\", \"precision\": \"fp16\"", "", "fp16", NULL, 60, &a, &na, NULL, &err),
               &err);
    REQUIRE_OK(train(TAB, "\"device\": \"cpu\"", "", "fp16cpu", NULL, 60, &b, &nb, NULL, &err), &err);
    REQUIRE(na == 60 && nb == 60);
    double ga = 0, gb = 0;
    for (int i = 50; i < 60; i++) ga += a[i], gb += b[i];
    CHECKF(fabs(ga - gb) <= 0.05 * gb, "fp16 (CUDA graph, loss scaling): mean loss of steps 51-60 %.5f vs CPU %.5f",
           ga / 10, gb / 10);
    free(a), free(b);
}

/* An inf in the batch: the update is skipped on the device (parameters unchanged), the next
 * clean step updates again. fp16: the scaler skips it, halves the scale and counts the
 * skip. Every other precision: skipped under train.skip_nan_steps (skip_nonfinite). */
static void skip_bad_step(brisk_gemm_precision prec) {
    int fp16 = prec == BRISK_GEMM_FP16;
    brisk_backend *be = cuda_backend_for(prec, 1, 0);
    REQUIRE(be);
    brisk_model_spec s = {.type = BRISK_MODEL_MLP, .inputs = 16, .outputs = 4, .n_hidden = 1,
                          .activation = BRISK_ACT_SILU, .task = BRISK_TASK_REGRESS};
    s.hidden[0] = 32;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan;
    brisk_exec *ex = NULL;
    brisk_optimizer opt;
    brisk_optim_spec os;
    brisk_optim_spec_default(&os);
    brisk_error err = {0};
    REQUIRE_OK(brisk_model_build(&s, 8, BRISK_BUILD_TRAIN, g, &io, &err), &err);
    REQUIRE_OK(brisk_backward(g, io.loss, &err), &err);
    REQUIRE_OK(brisk_plan_build(g, &plan, &err), &err);
    REQUIRE_OK(brisk_exec_create(g, &plan, be, &ex, &err), &err);
    REQUIRE_OK(brisk_exec_init_params(ex, 1, &err), &err);
    REQUIRE_OK(brisk_optimizer_create(&opt, &os, ex, &err), &err);
    opt.skip_nonfinite = !fp16;
    float x[8 * 16], y[8 * 4];
    ct_fill(x, BRISK_F32, 8 * 16, -1, 1);
    ct_fill(y, BRISK_F32, 8 * 4, -1, 1);
    size_t n = (size_t)g->n_param_floats;
    float *p1 = malloc(n * 4), *p2 = malloc(n * 4), *p3 = malloc(n * 4);
    brisk_backend_stats st;
    for (int step = 1; step <= 3; step++) {
        float xs[8 * 16];
        memcpy(xs, x, sizeof xs);
        if (step == 2) xs[5] = INFINITY;
        REQUIRE_OK(brisk_exec_set_input(ex, io.input_node[0], xs, &err), &err);
        REQUIRE_OK(brisk_exec_set_input(ex, io.input_node[1], y, &err), &err);
        ex->step.rng_step = (uint32_t)step;
        REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &err), &err);
        REQUIRE_OK(brisk_optimizer_step(&opt, step, 1e-2f, 1, &err), &err);
        REQUIRE_OK(be->download(be, step == 1 ? p1 : step == 2 ? p2 : p3, ex->params, n * 4, &err), &err);
        REQUIRE_OK(be->stats(be, &st, &err), &err);
        if (step == 1) CHECKF(st.skipped_steps == 0 && st.loss_scale == (fp16 ? 65536.0f : 0.0f),
                              "step 1: skipped %lld, scale %g", (long long)st.skipped_steps, st.loss_scale);
    }
    CHECKF(memcmp(p1, p2, n * 4) == 0, "the step with an inf changed the parameters");
    CHECKF(memcmp(p2, p3, n * 4) != 0, "the step after the skip did not update");
    CHECKF(st.skipped_steps == fp16, "%s: scaler-skipped steps: %lld", brisk_gemm_precision_name(prec),
           (long long)st.skipped_steps);
    CHECKF(st.loss_scale == (fp16 ? 32768.0f : 0.0f), "loss scale after one skip: %g", st.loss_scale);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p3[i])) {
            CHECKF(0, "parameter %zu is %g after recovering", i, p3[i]);
            break;
        }
    free(p1), free(p2), free(p3);
    brisk_optimizer_free(&opt);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    be->destroy(be);
}

/* Validation on the GPU scores every sample: 4096 x 0.1 = 410 validate at batch 64, six full
 * batches through the (captured, prepared) training graph and 26 rows through an unprepared
 * view of it (src/train/eval.c). After one epoch (57 steps) the loss and accuracy equal the
 * CPU's predictions on the same weights over all 410 samples, to fp32 rounding. */
static void test_validation_every_sample(void) {
    make_dir();
    brisk_error err = {0};
    brisk_run_summary s;
    REQUIRE_OK(train(TAB, GPU_FP32 ", \"deterministic\": true", "", "valtail", NULL, 57, NULL, NULL, &s, &err), &err);
    REQUIRE(s.epochs_done == 1);
    brisk_split split;
    REQUIRE_OK(brisk_split_make(4096, 0.1f, 3, &split, &err), &err);
    REQUIRE(split.nval == 410);
    char data[400], x[400], y[400], ckpt[400];
    snprintf(data, sizeof data, "%s/tab.npz", dir);
    snprintf(x, sizeof x, "%s/xval.npy", dir);
    snprintf(y, sizeof y, "%s/pval.npy", dir);
    snprintf(ckpt, sizeof ckpt, "%s/valtail/last.safetensors", dir);
    brisk_npz z = {0};
    brisk_tensor xv = {0}, p = {0};
    REQUIRE_OK(brisk_npz_read(data, &z, &err), &err);
    const brisk_npy_array *zx = brisk_npz_find(&z, "x"), *zy = brisk_npz_find(&z, "y");
    REQUIRE(zx && zy);
    REQUIRE_OK(brisk_tensor_alloc(&xv, BRISK_F32, brisk_shape2(410, 64), &err), &err);
    for (int64_t i = 0; i < 410; i++)
        memcpy((float *)xv.data + i * 64, (const float *)zx->data + split.val[i] * 64, 64 * sizeof(float));
    REQUIRE_OK(brisk_npy_write(x, &xv, &err), &err);
    REQUIRE_OK(brisk_predict_file(ckpt, x, y, NULL, &err), &err);
    REQUIRE_OK(brisk_npy_load(y, BRISK_F32, &p, &err), &err);
    double loss = 0, right = 0;
    for (int64_t i = 0; i < 410; i++) {
        const float *r = (const float *)p.data + i * 3;
        int32_t label = ((const int32_t *)zy->data)[split.val[i]];
        int best = 0;
        for (int c = 1; c < 3; c++) best = r[c] > r[best] ? c : best;
        right += best == label;
        loss -= log((double)r[label]);
    }
    loss /= 410;
    CHECKF(fabs(s.best_val_loss - loss) <= 1e-4 * loss, "GPU val loss %.7f, CPU predict %.7f", s.best_val_loss, loss);
    CHECKF(fabs(s.best.accuracy - right / 410) <= 2.0 / 410, "GPU val accuracy %.5f, CPU predict %.5f", s.best.accuracy,
           right / 410);
    brisk_tensor_free(&xv);
    brisk_tensor_free(&p);
    brisk_npz_free(&z);
    brisk_split_free(&split);
}

/* The ResNet example (examples/resnet.json without its augmentation): ResNet-18 at 64x64,
 * batch 32, 512 synthetic images: 12 steps an epoch, then validation, whose last batch of
 * 102 % 32 = 6 rows plans its convolutions after the step was captured (and may outgrow
 * the cuDNN workspace and staging buffer the captured step replays with: the first GPU
 * run's bench of this example failed there with an illegal memory access). 16 steps:
 * 4 replays after the validation. */
static brisk_status train_resnet(const char *speed, const char *out, float **losses, int64_t *n, brisk_run_summary *sum,
                                 brisk_error *err) {
    char imgs[400], json[2048];
    snprintf(imgs, sizeof imgs, "%s/img", dir);
    char labels[420];
    snprintf(labels, sizeof labels, "%s/labels.csv", imgs);
    if (access(labels, R_OK) != 0) {
        brisk_status st = brisk_synth_images(imgs, 512, 0, err);
        if (st) return st;
    }
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"resnet\", \"depth\": 18, \"keypoints\": 4, \"channels\": 3}, "
             "\"data\": {\"images\": {\"labels\": \"%s\", \"size\": [64, 64], \"mean\": [0.5, 0.5, 0.5], "
             "\"std\": [0.25, 0.25, 0.25]}, \"validation_fraction\": 0.2}, "
             "\"optim\": {\"type\": \"adamw\", \"lr\": 1e-3, \"weight_decay\": 0.01, \"clip_norm\": 1.0}, "
             "\"train\": {\"batch_size\": 32, \"epochs\": 10, \"seed\": 0, \"log_every\": 4, \"out_dir\": \"%s/%s\"}, "
             "\"speed\": {%s}}",
             labels, dir, out, speed);
    return tu_train_json(json, NULL, 16, sum, losses, n, err);
}

/* Captured and eager give the same bits across the validation (deterministic cuDNN
 * algorithms); the run as the bench's CUDA-graph row makes it (cuDNN's own choice of
 * algorithms, prefetch) gets through too, with finite losses. */
static void test_resnet_graph_across_validation(void) {
    make_dir();
    brisk_error err = {0};
    brisk_run_summary s;
    float *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    REQUIRE_OK(train_resnet(GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": true", "rgraph", &a, &na, &s, &err),
               &err);
    CHECKF(s.epochs_done == 1, "resnet: %d epochs done after 16 steps, expected 1", (int)s.epochs_done);
    REQUIRE_OK(train_resnet(GPU_FP32 ", \"deterministic\": true, \"cuda_graph\": false", "reager", &b, &nb, &s, &err),
               &err);
    same_bits(a, na, b, nb, "CUDA graph vs eager (ResNet-18, across validation's 6-row tail)");
    free(a), free(b);
    REQUIRE_OK(train_resnet(GPU_FP32 ", \"cuda_graph\": true, \"prefetch\": 4", "rbench", &a, &na, &s, &err), &err);
    CHECKF(na == 16, "resnet, CUDA graph row: %lld losses", (long long)na);
    for (int64_t i = 0; i < na; i++) CHECKF(isfinite(a[i]), "resnet, CUDA graph row: step %lld loss %g", (long long)i + 1, a[i]);
    free(a);
}

/* The step times are the device's (step_mark events), not the host's clock. With the step a
 * replayed CUDA graph and batches prefetched nothing in a step waits for the GPU, so the
 * host runs ahead (to the next loss read) and its clock times only the issuing: 0.13 ms
 * for a 6.6-TFLOP step on the H200 (bench/gemm_bound.json). Here an MLP 64-4096-4096-4096-3
 * at batch 4096, fp32 without TF32 (about 0.83 TFLOP a step), 8 batches an epoch, 30 timed
 * steps after a warm-up run (the eager first step, the capture): the median device ms/step
 * times 30 is within 35 % of the wall time of those steps (a device sync before and after),
 * and the median is no faster than 2 PFLOP/s (no H200 does that in fp32, or at all dense). */
static void test_step_times_are_device_times(void) {
    enum { STEPS = 30, B = 4096, W = 4096 };
    make_dir();
    brisk_error err = {0};
    char data[400], json[2048];
    snprintf(data, sizeof data, "%s/wide.npz", dir);
    REQUIRE_OK(brisk_synth_write("tabular", data, 8 * B, 0, &err), &err);
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [%d, %d, %d], \"outputs\": 3}, "
             "\"data\": {\"train\": \"%s\", \"validation_fraction\": 0.0}, "
             "\"train\": {\"batch_size\": %d, \"epochs\": 1000, \"seed\": 3, \"log_every\": 10, \"out_dir\": \"\"}, "
             "\"speed\": {" GPU_FP32 ", \"cuda_graph\": true, \"prefetch\": 4}}",
             W, W, W, data, B);
    brisk_config cfg;
    REQUIRE_OK(brisk_config_parse(json, "<test>", NULL, 0, &cfg, &err), &err);
    brisk_trainer *t = NULL;
    brisk_logger quiet = {0};
    brisk_status st = brisk_trainer_create(&cfg, &quiet, &t, &err);
    brisk_config_free(&cfg);
    REQUIRE_OK(st, &err);
    brisk_run_summary s;
    st = brisk_trainer_run_steps(t, 5, &s, &err);
    if (!st) st = t->be->sync(t->be, &err);
    double t0 = brisk_now();
    if (!st) st = brisk_trainer_run_steps(t, STEPS, &s, &err);
    if (!st) st = t->be->sync(t->be, &err);
    double wall_ms = 1e3 * (brisk_now() - t0);
    brisk_trainer_free(t);
    REQUIRE_OK(st, &err);
    const double flop = 6.0 * B * (64.0 * W + 2.0 * W * W + 3.0 * W); /* forward 2, backward 4 per multiply-add */
    const double floor_ms = 1e3 * flop / 2e15;
    printf("device step times: median %.3f ms, p95 %.3f, mean %.3f; %d steps in %.1f ms wall (%.3f ms/step); "
           "%.0f TFLOP/s at the median; summary wall %.1f ms; clock: %s\n",
           s.ms_per_step_median, s.ms_per_step_p95, s.ms_per_step_mean, STEPS, wall_ms, wall_ms / STEPS,
           flop / (1e-3 * s.ms_per_step_median) / 1e12, 1e3 * s.wall_s, s.step_clock);
    CHECKF(strncmp(s.step_clock, "device events", 13) == 0, "the steps were timed by the %s", s.step_clock);
    CHECKF(s.steps_run == STEPS, "%lld steps timed", (long long)s.steps_run);
    double sum_ms = s.ms_per_step_median * STEPS;
    CHECKF(fabs(sum_ms - wall_ms) <= 0.35 * wall_ms,
           "median %.4f ms/step x %d = %.1f ms, but the steps took %.1f ms of wall time (device synced around them): "
           "the step times are not the device's", s.ms_per_step_median, STEPS, sum_ms, wall_ms);
    CHECKF(s.ms_per_step_median >= floor_ms,
           "median %.4f ms/step for %.3g FLOP is %.0f TFLOP/s, faster than the 2000 TFLOP/s no GPU reaches: the step "
           "times are not the device's, or the step did not run its work", s.ms_per_step_median, flop,
           flop / (1e-3 * s.ms_per_step_median) / 1e12);
    CHECKF(1e3 * s.wall_s >= sum_ms * 0.65, "the summary's wall time %.1f ms is shorter than its steps' %.1f ms",
           1e3 * s.wall_s, sum_ms);
}

static void test_fp16_scaler_skip(void) { skip_bad_step(BRISK_GEMM_FP16); }
static void test_skip_nonfinite_fp32(void) { skip_bad_step(BRISK_GEMM_FP32); }
static void test_skip_nonfinite_tf32(void) { skip_bad_step(BRISK_GEMM_TF32); }
static void test_skip_nonfinite_bf16(void) { skip_bad_step(BRISK_GEMM_BF16); }

CUDA_TEST_MAIN(T(test_graph_matches_eager), T(test_deterministic), T(test_prefetch_same), T(test_accumulate_vs_cpu),
               T(test_resume_across_devices), T(test_fp16_trains), T(test_fp16_scaler_skip),
               T(test_skip_nonfinite_fp32), T(test_skip_nonfinite_tf32), T(test_skip_nonfinite_bf16),
               T(test_bf16_resume_after_capture), T(test_fp16_resume), T(test_validation_every_sample),
               T(test_resnet_graph_across_validation), T(test_step_times_are_device_times))
