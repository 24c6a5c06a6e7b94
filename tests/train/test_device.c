/* The device choice at setup (src/train/device.c), without a GPU: a mock GPU backend (the
 * CPU backend renamed, refusing LSTM with a reason, as a CUDA backend without cuDNN
 * would) stands in for the CUDA backend. Under speed.device auto a model with an op the
 * "GPU" lacks trains on the CPU and the run report says why; under speed.device cuda it
 * is a setup error naming the op and the reason; a model the GPU can run keeps it. Also
 * the CUDA backend's own capability answers, which need no GPU. */
#include "brisk/cuda.h"
#include "brisk/nn.h"
#include "test.h"
#include "train/trainer_internal.h"

#define MOCK_WHY "no mock kernel for this op (needs cuDNN)"

static brisk_backend *mock_gpu(void) {
    brisk_backend *be = brisk_backend_cpu_new(1);
    if (be) be->name = "mockgpu";
    return be;
}

static int mock_supports(brisk_backend *be, const brisk_node *n, char *why, size_t why_size) {
    (void)be;
    if (n->op != BRISK_OP_LSTM && n->op != BRISK_OP_LSTM_GRAD && n->op != BRISK_OP_LSTM_GRAD_W) return 1;
    if (why && why_size) snprintf(why, why_size, MOCK_WHY);
    return 0;
}

typedef struct { char text[8192]; } log_buf;

static void log_to(void *user, brisk_log_level level, const char *msg) {
    log_buf *b = user;
    size_t k = strlen(b->text);
    snprintf(b->text + k, sizeof b->text - k, "[%d] %s\n", (int)level, msg);
}

typedef struct {
    brisk_config cfg;
    brisk_graph *g;
    brisk_plan plan;
    brisk_model_io io;
} built;

static int build(built *b, const char *model, const char *device, brisk_error *e) {
    char json[512];
    snprintf(json, sizeof json, "{\"model\": %s, \"data\": {\"train\": \"x.npz\"}, \"speed\": {\"device\": \"%s\"}}",
             model, device);
    memset(b, 0, sizeof *b);
    if (brisk_config_parse(json, "device-test.json", NULL, 0, &b->cfg, e)) return -1;
    b->g = brisk_graph_new();
    if (!b->g || brisk_model_build(&b->cfg.model, 4, BRISK_BUILD_TRAIN, b->g, &b->io, e) ||
        brisk_backward(b->g, b->io.loss, e) || brisk_plan_build(b->g, &b->plan, e))
        return -1;
    return 0;
}

static void built_free(built *b) {
    brisk_plan_free(&b->plan);
    if (b->g) brisk_graph_free(b->g);
    brisk_config_free(&b->cfg);
}

#define LSTM_MODEL "{\"type\": \"lstm\", \"inputs\": 3, \"seq_len\": 5, \"hidden\": 4, \"outputs\": 2}"
#define MLP_MODEL "{\"type\": \"mlp\", \"inputs\": 3, \"hidden\": [4], \"outputs\": 2}"

static void test_auto_falls_back_to_cpu_with_reason(void) {
    brisk_error e;
    built b;
    REQUIRE_OK(build(&b, LSTM_MODEL, "auto", &e) ? BRISK_ERR_INVALID : BRISK_OK, &e);
    brisk_backend *be = mock_gpu();
    REQUIRE(be);
    be->supports_op = mock_supports;
    log_buf lb = {""};
    brisk_logger log = {log_to, &lb, BRISK_LOG_DEBUG};
    char note[640];
    brisk_status st = brisk_device_check_graph(&b.cfg, &log, &be, b.g, &b.plan, note, sizeof note, &e);
    CHECKF(st == BRISK_OK, "%s", e.msg);
    REQUIRE(be != NULL);
    CHECK(strcmp(be->name, "cpu") == 0);
    CHECKF(strstr(note, "lstm") && strstr(note, MOCK_WHY) && strstr(note, "mockgpu"), "note: %s", note);
    /* the run report: a warning, and the CPU device line carrying the reason */
    CHECKF(strstr(lb.text, "training on the CPU") != NULL, "log: %s", lb.text);
    CHECKF(strstr(lb.text, "device    cpu:") && strstr(lb.text, MOCK_WHY), "log: %s", lb.text);
    /* the executor now runs the whole schedule on the CPU */
    brisk_exec *ex = NULL;
    CHECKF(brisk_exec_create(b.g, &b.plan, be, &ex, &e) == BRISK_OK, "%s", e.msg);
    if (ex) brisk_exec_free(ex);
    be->destroy(be);
    built_free(&b);
}

static void test_cuda_is_a_setup_error_naming_the_op(void) {
    brisk_error e;
    built b;
    REQUIRE_OK(build(&b, LSTM_MODEL, "cuda", &e) ? BRISK_ERR_INVALID : BRISK_OK, &e);
    brisk_backend *be = mock_gpu(), *was = be;
    REQUIRE(be);
    be->supports_op = mock_supports;
    char note[640];
    brisk_status st = brisk_device_check_graph(&b.cfg, NULL, &be, b.g, &b.plan, note, sizeof note, &e);
    CHECK(st == BRISK_ERR_UNSUPPORTED);
    CHECK(be == was); /* untouched: the caller frees it */
    CHECKF(strstr(e.msg, "speed.device is \"cuda\"") && strstr(e.msg, "lstm") && strstr(e.msg, MOCK_WHY) &&
               strstr(e.msg, "device-test.json"), "%s", e.msg);
    CHECK(note[0] == 0);
    be->destroy(be);
    built_free(&b);
}

static void test_supported_model_keeps_the_gpu(void) {
    brisk_error e;
    built b;
    REQUIRE_OK(build(&b, MLP_MODEL, "auto", &e) ? BRISK_ERR_INVALID : BRISK_OK, &e);
    brisk_backend *be = mock_gpu(), *was = be;
    REQUIRE(be);
    be->supports_op = mock_supports;
    char note[640] = "x";
    CHECKF(brisk_device_check_graph(&b.cfg, NULL, &be, b.g, &b.plan, note, sizeof note, &e) == BRISK_OK, "%s", e.msg);
    CHECK(be == was && strcmp(be->name, "mockgpu") == 0 && note[0] == 0);
    be->destroy(be);
    built_free(&b);
}

/* The CUDA backend's answers need no GPU: LSTM and GRU say no only when cuDNN cannot be loaded, and
 * says so; attention only for heads wider than its kernel takes; everything else says yes. */
static void test_cuda_capability_answers(void) {
    brisk_cuda_info info;
    brisk_cuda_probe(0, &info);
    brisk_node n;
    char why[160];
    memset(&n, 0, sizeof n);
    n.dtype = BRISK_F32;
    for (int op = 0; op < BRISK_OP_COUNT; op++) {
        n.op = (brisk_op)op;
        n.dtype = op == BRISK_OP_RANDINT ? BRISK_I32 : BRISK_F32;
        why[0] = 0;
        int yes = brisk_cuda_op_supported(&n, why, sizeof why);
        CHECKF(yes || why[0], "%s: no without a reason", brisk_op_name(n.op));
        if (!info.built) CHECK(!yes && strstr(why, "without CUDA"));
        int dnn = op == BRISK_OP_LSTM || op == BRISK_OP_LSTM_GRAD || op == BRISK_OP_LSTM_GRAD_W || op == BRISK_OP_GRU ||
                  op == BRISK_OP_GRU_GRAD || op == BRISK_OP_GRU_GRAD_W || op == BRISK_OP_CONV2D || op == BRISK_OP_CONV2D_GRAD_X || op == BRISK_OP_CONV2D_GRAD_W;
        if (info.built && dnn) CHECKF(yes || strstr(why, "cuDNN"), "%s: %s", brisk_op_name(n.op), why);
    }
    n.op = BRISK_OP_MATMUL;
    n.dtype = BRISK_F32;
    CHECK(brisk_cuda_op_supported(&n, NULL, 0) == info.built);
    n.dtype = BRISK_BF16; /* float ops compute in f32 on every backend */
    CHECK(!brisk_cuda_op_supported(&n, why, sizeof why) && strstr(why, info.built ? "f32" : "without CUDA"));
}

TEST_MAIN(T(test_auto_falls_back_to_cpu_with_reason), T(test_cuda_is_a_setup_error_naming_the_op),
          T(test_supported_model_keeps_the_gpu), T(test_cuda_capability_answers))
