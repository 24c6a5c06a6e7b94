/* brisk profile on the CUDA backend (src/train/profile.c, src/backend/cuda/profile.c): the
 * nodes are timed by events on the device; the rows (every node, the batch coming in, the loss
 * and update) sum to within 30 % of the plain eager step's device time; a captured step's
 * kernel count is positive and the launch floor for that many empty kernels is positive and
 * below the step, and the step's own graph replayed lies between the floor and the eager step;
 * in bf16 the GEMM nodes say their operands are bf16. The MLP (64-4096-4096-3,
 * batch 2048) is GEMM-bound, so that the events around each node cost little beside it. Skips
 * without a GPU. */
#include <math.h>
#include <unistd.h>

#include "backend/cuda_test_util.h"
#include "brisk/cuda.h"

static char data[300];

static brisk_status profile(const char *precision, int accumulate, brisk_profile_result *r, brisk_error *err) {
    if (!data[0]) {
        snprintf(data, sizeof data, "%s/cuda_profile_%d.npz", BRISK_BINARY_DIR, (int)getpid());
        brisk_status st = brisk_synth_write("tabular", data, 8192, 0, err);
        if (st) return st;
    }
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model\": {\"type\": \"mlp\", \"inputs\": 64, \"hidden\": [4096, 4096], \"outputs\": 3}, "
             "\"data\": {\"train\": \"%s\", \"validation_fraction\": 0.0}, "
             "\"train\": {\"batch_size\": 2048, \"epochs\": 100, \"seed\": 3, \"accumulate\": %d, \"out_dir\": \"\"}, "
             "\"speed\": {\"device\": \"cuda\", \"precision\": \"%s\", \"autotune\": false}}",
             data, accumulate, precision);
    brisk_config cfg;
    brisk_status st = brisk_config_parse(json, "<test>", NULL, 0, &cfg, err);
    if (st) return st;
    brisk_logger quiet = {0};
    brisk_profile_options o = {.steps = 10, .warmup = 3};
    st = brisk_profile_run(&cfg, &quiet, &o, r, err);
    brisk_config_free(&cfg);
    return st;
}

static double rows_ms(const brisk_profile_result *r) {
    double s = 0;
    for (int i = 0; i < r->n_ops; i++) s += r->ops[i].ms_per_step;
    return s;
}

static void check_run(const char *precision, int accumulate) {
    brisk_error err = {0};
    brisk_profile_result r;
    REQUIRE_OK(profile(precision, accumulate, &r, &err), &err);
    brisk_profile_print(stdout, precision, &r, 8);
    double rows = rows_ms(&r);
    CHECKF(strcmp(r.device, "cuda") == 0 && strncmp(r.clock, "device events", 13) == 0, "%s: %s, timed by the %s",
           precision, r.device, r.clock);
    CHECKF(r.steps == 10 && r.n_nodes > 0 && r.nodes_per_step >= r.n_nodes, "%s: %d steps, %d nodes, %d runs a step",
           precision, r.steps, r.n_nodes, r.nodes_per_step);
    CHECKF(r.plain_ms > 0 && fabs(rows / r.plain_ms - 1) < 0.30,
           "%s: the rows sum to %.4f ms, the plain eager step is %.4f ms of device time", precision, rows, r.plain_ms);
    CHECKF(fabs(rows / r.marked_ms - 1) < 0.30, "%s: the rows sum to %.4f ms, the timed step's median is %.4f ms",
           precision, rows, r.marked_ms);
    int gemms = 0; /* a matmul is never fused away: each launches at least its GEMM */
    for (int i = 0; i < r.n_nodes; i++) gemms += strcmp(r.nodes[i].op, "matmul") == 0 ? r.nodes[i].calls_per_step : 0;
    CHECKF(gemms > 0 && r.kernel_nodes >= gemms, "%s: %d kernels a step for %d GEMMs (%d node runs)", precision,
           r.kernel_nodes, gemms, r.nodes_per_step);
    CHECKF(isfinite(r.floor_ms) && r.floor_ms > 0 && r.floor_ms < r.plain_ms,
           "%s: the launch floor of %d kernels is %.4f ms, the step %.4f ms", precision, r.kernel_nodes, r.floor_ms,
           r.plain_ms);
    /* the step's own graph replayed (one micro-step a step only): no faster than that many
     * empty kernels, and about the eager step or less (this MLP is GEMM-bound, so the
     * launches the graph saves are little of it) */
    if (accumulate == 1)
        CHECKF(isfinite(r.replay_ms) && r.replay_ms >= 0.5 * r.floor_ms && r.replay_ms < 1.2 * r.plain_ms,
               "%s: the replayed step %.4f ms, the launch floor %.4f ms, the eager step %.4f ms", precision,
               r.replay_ms, r.floor_ms, r.plain_ms);
    else
        CHECKF(isnan(r.replay_ms), "%s: a replayed step with %d micro-steps", precision, accumulate);
    printf("%s: replayed step %.4f ms, launch floor %.4f ms, eager step %.4f ms\n", precision, r.replay_ms, r.floor_ms,
           r.plain_ms);
    CHECKF(r.n_ops > 0 && strcmp(r.ops[0].op, "matmul") == 0, "%s: the top op type is %s, not matmul", precision,
           r.n_ops ? r.ops[0].op : "(none)");
    int noted = 0;
    for (int i = 0; i < r.n_nodes; i++)
        if (strcmp(r.nodes[i].op, "matmul") == 0 && strstr(r.nodes[i].note, "GEMM operands")) {
            noted = 1;
            CHECKF(strstr(r.nodes[i].note, strcmp(precision, "bf16") == 0 ? "bf16" : "fp32") != NULL,
                   "%s: matmul node %d's note is '%s'", precision, r.nodes[i].id, r.nodes[i].note);
            break;
        }
    CHECKF(noted, "%s: no matmul node says how its GEMM ran", precision);
    brisk_profile_result_free(&r);
}

static void test_profile_fp32(void) { check_run("fp32", 1); }
static void test_profile_bf16(void) { check_run("bf16", 1); }
static void test_profile_accumulate(void) { check_run("fp32", 2); }

/* The launch floor scales with the kernel count and is refused for a backend that is not CUDA. */
static void test_launch_floor(void) {
    brisk_error err = {0};
    brisk_cuda_options o;
    brisk_cuda_options_default(&o);
    brisk_backend *be = NULL;
    REQUIRE_OK(brisk_backend_cuda_create(&o, &be, &err), &err);
    double small = 0, large = 0;
    REQUIRE_OK(brisk_cuda_launch_floor(be, 10, &small, &err), &err);
    REQUIRE_OK(brisk_cuda_launch_floor(be, 1000, &large, &err), &err);
    printf("launch floor: 10 kernels %.4f ms, 1000 kernels %.4f ms\n", small, large);
    CHECKF(small > 0 && large > small, "10 kernels %.4f ms, 1000 kernels %.4f ms", small, large);
    CHECKF(large < 50.0, "1000 empty kernels took %.4f ms to replay", large);
    CHECKF(brisk_cuda_launch_floor(be, 0, &small, &err) == BRISK_ERR_INVALID, "0 kernels accepted");
    be->destroy(be);
    brisk_backend *cpu = brisk_backend_cpu_new(1);
    CHECKF(brisk_cuda_launch_floor(cpu, 10, &small, &err) == BRISK_ERR_UNSUPPORTED, "a CPU backend's floor measured");
    CHECKF(brisk_cuda_program_kernels(cpu, 0) == -1, "a CPU backend has programs");
    cpu->destroy(cpu);
}

CUDA_TEST_MAIN(T(test_launch_floor), T(test_profile_fp32), T(test_profile_bf16), T(test_profile_accumulate))
