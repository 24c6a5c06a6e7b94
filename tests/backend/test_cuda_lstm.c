/* LSTM, LSTM_GRAD and LSTM_GRAD_W on the CUDA backend (cuDNN's RNN API,
 * src/backend/cuda/cudnn_rnn.c) against the CPU backend on the same random inputs:
 *   - the three ops alone, forward and reverse, odd and workload-sized shapes, h (the
 *     output; the workspace after it is each backend's own), the gate gradients and d w_hh;
 *   - LSTM models (1 and 2 layers, uni- and bidirectional) trained one step: the loss and
 *     every parameter's gradient;
 *   - a captured CUDA graph replays to the eager run's bits; deterministic mode gives the
 *     same bits twice.
 * Tolerances (relative norm): fp32 1e-4 (cuDNN's own sigmoid/tanh, compounding over the
 * steps); TF32, bf16 (TF32 GEMMs in cuDNN, bf16 ones around it in the models) and fp16 3e-2
 * for the ops, 5e-2 for the models as test_cuda_grad holds them. Skips without a GPU, and
 * without cuDNN 9 (the backend then answers no for LSTM, which is what it must do). */
#include "backend/cuda_test_util.h"
#include "ops/ops_internal.h" /* brisk_bw_lstm: the gradient nodes autodiff builds */
#if BRISK_HAVE_CUDA
#include "backend/cuda/cudnn_rnn.h" /* cuda_rnn_missing: why a skip */
#endif

static int lstm_on_gpu(brisk_backend *be) {
    brisk_node n;
    memset(&n, 0, sizeof n);
    n.op = BRISK_OP_LSTM;
    n.dtype = BRISK_F32;
    return be->supports_op(be, &n, NULL, 0);
}

typedef struct op_graph {
    brisk_graph *g;
    int lstm, dg, dw;
    int64_t n_h;
} op_graph;

static op_graph op_build(int64_t B, int64_t T, int64_t H, int reverse) {
    op_graph o = {brisk_graph_new(), -1, -1, -1, B * T * H};
    brisk_graph *g = o.g;
    float k = 1.0f / sqrtf((float)H);
    int xp = ct_input(g, BRISK_F32, brisk_shape3(B, T, 4 * H), -1.5f, 1.5f);
    int w = ct_input(g, BRISK_F32, brisk_shape2(4 * H, H), -k, k);
    int bias = ct_input(g, BRISK_F32, brisk_shape1(4 * H), -0.5f, 0.5f);
    int dh = ct_input(g, BRISK_F32, brisk_shape3(B, T, H), -1.0f, 1.0f);
    o.lstm = brisk_lstm(g, xp, w, bias, reverse);
    o.dg = brisk_bw_lstm(g, o.lstm, dh, 0);
    o.dw = brisk_bw_lstm(g, o.lstm, dh, 1);
    g->loss = g->output = o.dw; /* the schedule runs all three */
    return o;
}

static void op_case(brisk_gemm_precision prec, int64_t B, int64_t T, int64_t H, int reverse, double tol) {
    brisk_backend *be = cuda_backend_for(prec, 1, 0);
    REQUIRE(be);
    op_graph o = op_build(B, T, H, reverse);
    brisk_error err = {0};
    ct_pair p;
    char what[160];
    snprintf(what, sizeof what, "lstm ops B %lld T %lld H %lld %s, %s", (long long)B, (long long)T, (long long)H,
             reverse ? "reverse" : "forward", brisk_gemm_precision_name(prec));
    if (brisk_graph_error(o.g, &err) || ct_pair_make(o.g, be, &p, &err) || ct_poison(p.gpu, o.lstm, &err) ||
        ct_poison(p.gpu, o.dg, &err) || ct_poison(p.gpu, o.dw, &err) || brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) ||
        brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) || be->sync(be, &err)) {
        CHECKF(0, "%s: %s", what, err.msg);
    } else {
        double e = ct_prefix_err(&p, o.lstm, o.n_h, &err);
        CHECKF(e <= tol, "%s: h relative error %.3g > %.3g", what, e, tol);
        CHECKF(ct_compare(&p, o.dg, tol, what), "%s: gate gradients", what);
        CHECKF(ct_compare(&p, o.dw, tol, what), "%s: d w_hh", what);
        CHECKF(ct_inputs_intact(&p), "%s", what);
    }
    ct_pair_free(&p);
    brisk_graph_free(o.g);
    be->destroy(be);
}

static const struct { int64_t B, T, H; } shapes[] = {{1, 1, 1}, {3, 5, 4}, {37, 9, 19}, {64, 20, 128}};

static void test_ops_fp32(void) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int rev = 0; rev < 2; rev++) op_case(BRISK_GEMM_FP32, shapes[s].B, shapes[s].T, shapes[s].H, rev, 1e-4);
}

static void test_ops_low_precision(void) {
    brisk_gemm_precision ps[3] = {BRISK_GEMM_TF32, BRISK_GEMM_BF16, BRISK_GEMM_FP16};
    for (int k = 0; k < 3; k++)
        for (int rev = 0; rev < 2; rev++) {
            op_case(ps[k], 37, 9, 19, rev, 3e-2);
            op_case(ps[k], 64, 20, 128, rev, 3e-2);
        }
}

/* ---------------------------------------------------------------- whole models */

static void model_case(brisk_gemm_precision prec, int layers, int bidirectional, double tol) {
    brisk_backend *be = cuda_backend_for(prec, 1, 0);
    REQUIRE(be);
    brisk_model_spec s = {.type = BRISK_MODEL_LSTM, .inputs = 12, .outputs = 3, .seq_len = 11, .width = 24,
                          .layers = layers, .bidirectional = bidirectional, .pool = BRISK_POOL_LAST,
                          .task = BRISK_TASK_CLASSIFY};
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_error err = {0};
    char what[160];
    snprintf(what, sizeof what, "lstm model, %d layer%s, %s, %s", layers, layers > 1 ? "s" : "",
             bidirectional ? "bidirectional" : "unidirectional", brisk_gemm_precision_name(prec));
    if (brisk_model_build(&s, 16, BRISK_BUILD_TRAIN, g, &io, &err) || brisk_backward(g, io.loss, &err))
        CHECKF(0, "%s: %s", what, err.msg);
    else
        ct_step_and_check_grads(g, be, prec, tol, what);
    brisk_graph_free(g);
    be->destroy(be);
}

static void test_models_fp32(void) {
    for (int layers = 1; layers <= 2; layers++)
        for (int bi = 0; bi < 2; bi++) model_case(BRISK_GEMM_FP32, layers, bi, 1e-4);
}

static void test_models_low_precision(void) {
    for (int bi = 0; bi < 2; bi++) {
        model_case(BRISK_GEMM_TF32, 2, bi, 5e-2);
        model_case(BRISK_GEMM_BF16, 2, bi, 5e-2);
        model_case(BRISK_GEMM_FP16, 2, bi, 5e-2);
    }
}

/* ---------------------------------------------------------------- capture, determinism */

/* The ops of one reverse layer: an eager run, then a captured one replayed, must give the
 * same bits; with deterministic on, a second run must too. The LSTM node's h only: its
 * workspace also holds cuDNN's reserve space. */
static void test_capture_and_determinism(void) {
    for (int det = 0; det < 2; det++) {
        brisk_backend *be = cuda_backend_for(BRISK_GEMM_FP32, 1, det);
        REQUIRE(be);
        op_graph o = op_build(29, 13, 40, 1);
        brisk_error err = {0};
        ct_pair p = {0};
        const char *what = det ? "lstm: deterministic" : "lstm: capture";
        int ids[3] = {o.lstm, o.dg, o.dw};
        size_t bytes[3] = {(size_t)o.n_h * 4};
        if (brisk_graph_error(o.g, &err) || ct_pair_make(o.g, be, &p, &err)) CHECKF(0, "%s: %s", what, err.msg);
        else ct_check_rerun(be, &p, ids, bytes, 3, det, what);
        ct_pair_free(&p);
        brisk_graph_free(o.g);
        be->destroy(be);
    }
}

int main(void) {
    if (!cuda_present()) return CUDA_SKIP;
    brisk_backend *be = cuda_backend_for(BRISK_GEMM_FP32, 1, 0);
    if (!be) return 1;
    int on = lstm_on_gpu(be);
    be->destroy(be);
    if (!on) {
#if BRISK_HAVE_CUDA
        const char *why = cuda_rnn_missing();
#else
        const char *why = NULL;
#endif
        printf("SKIP: the CUDA backend does not run LSTM here: %s\n", why ? why : "(no reason given)");
        return CUDA_SKIP;
    }
    t_case c[] = {T(test_ops_fp32), T(test_ops_low_precision), T(test_models_fp32),
                  T(test_models_low_precision), T(test_capture_and_determinism)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
