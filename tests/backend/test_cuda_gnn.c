/* The graph-network index ops on the CUDA backend against the CPU, from the same inputs:
 * SEGMENT_SUM over sorted indices under --deterministic bit for bit (the sorted kernel
 * adds each segment in index order from 0, as the CPU does) and bit-equal between runs;
 * SEGMENT_SUM and SCATTER_ADD without --deterministic (the atomic kernel) to 1e-6; segment
 * mean; GATHER of mesh-sized rows; and the errors for an index outside the segments and
 * for unsorted indices. Shapes cover empty segments, one long segment, rows narrower and
 * wider than a block, and more segments than a grid's y dimension. Skips without a GPU. */
#include "backend/cuda_test_util.h"

static brisk_backend *gpu(int deterministic) {
    static brisk_backend *b[2];
    if (!b[deterministic]) b[deterministic] = cuda_backend_for(BRISK_GEMM_FP32, 1, deterministic);
    return b[deterministic];
}

/* Runs node `out` of g on the CPU and the GPU (twice; the two GPU runs must agree bit for
 * bit when `deterministic`) and compares with the CPU within tol. */
static void run_case(brisk_graph *g, int out, int deterministic, double tol, const char *what) {
    brisk_error err = {0};
    ct_pair p;
    if (!g || out < 0 || brisk_graph_error(g, &err)) {
        CHECKF(0, "%s: building the graph: %s", what, err.msg);
        if (g) brisk_graph_free(g);
        return;
    }
    g->loss = g->output = out;
    brisk_backend *be = gpu(deterministic);
    if (!be || ct_pair_make(g, be, &p, &err) || ct_poison(p.gpu, out, &err) ||
        brisk_exec_run(p.cpu, BRISK_RUN_TRAIN, &err) || brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) ||
        be->sync(be, &err)) {
        CHECKF(0, "%s: %s", what, be ? err.msg : "no GPU backend");
        if (be) ct_pair_free(&p);
        brisk_graph_free(g);
        return;
    }
    CHECKF(ct_compare(&p, out, tol, what), "%s", what);
    CHECKF(ct_inputs_intact(&p), "%s", what);
    size_t bytes = g->nodes[out].bytes;
    void *first = malloc(bytes), *second = malloc(bytes);
    if (deterministic && !brisk_exec_read(p.gpu, out, first, &err) && !ct_poison(p.gpu, out, &err) &&
        !brisk_exec_run(p.gpu, BRISK_RUN_TRAIN, &err) && !be->sync(be, &err) &&
        !brisk_exec_read(p.gpu, out, second, &err))
        CHECKF(memcmp(first, second, bytes) == 0, "%s: two deterministic runs differ", what);
    free(first);
    free(second);
    ct_pair_free(&p);
    brisk_graph_free(g);
}

/* Sorted segment indices over [0, v): runs of random length, some segments skipped
 * (empty), the last one long. */
static int32_t *sorted_indices(int64_t n, int64_t v) {
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ct_u32() % 4 == 0) s += ct_u32() % 3;
        idx[i] = (int32_t)(s < v - 1 ? s : v - 1);
    }
    return idx;
}

/* x [n, d] rows summed into [v, d] by `idx` (a const, as the models build it). */
static brisk_graph *segment_graph(int64_t n, int64_t v, int64_t d, const int32_t *idx, int sorted, int mean,
                                  int *out) {
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape2(n, d), -1, 1);
    int ix = brisk_const(g, "idx", BRISK_I32, brisk_shape1(n), idx);
    *out = mean ? brisk_segment_mean(g, x, ix, v, sorted) : brisk_segment_sum(g, x, ix, v, sorted);
    return g;
}

static const int64_t shapes[][3] = {/* n, v, d */
                                    {40, 7, 3}, {2400, 300, 64}, {5000, 1024, 256}, {300, 50, 300}, {70000, 68000, 2}};

static void test_segment_sum_sorted(void) {
    for (int k = 0; k < 5; k++) {
        int32_t *idx = sorted_indices(shapes[k][0], shapes[k][1]);
        char what[96];
        for (int det = 0; det < 2; det++) {
            int out;
            brisk_graph *g = segment_graph(shapes[k][0], shapes[k][1], shapes[k][2], idx, 1, 0, &out);
            snprintf(what, sizeof what, "segment_sum %lld rows into [%lld, %lld], %s", (long long)shapes[k][0],
                     (long long)shapes[k][1], (long long)shapes[k][2], det ? "deterministic (sorted)" : "atomic");
            run_case(g, out, det, det ? 0.0 : 1e-6, what);
        }
        free(idx);
    }
}

static void test_segment_mean(void) {
    int32_t *idx = sorted_indices(2400, 300);
    int out;
    brisk_graph *g = segment_graph(2400, 300, 64, idx, 1, 1, &out);
    run_case(g, out, 1, 1e-7, "segment mean, deterministic");
    g = segment_graph(2400, 300, 64, idx, 1, 1, &out);
    run_case(g, out, 0, 1e-6, "segment mean, atomic");
    free(idx);
}

/* Unsorted indices (GATHER's gradient): the CPU's column-split scatter-add against the
 * GPU's atomic kernel. */
static void test_scatter_add_atomic(void) {
    const int64_t sc[][3] = {{1500, 700, 130}, {8192, 1024, 256}, {700, 4000, 1}};
    for (int k = 0; k < 3; k++) {
        brisk_graph *g = brisk_graph_new();
        int dy = ct_input(g, BRISK_F32, brisk_shape2(sc[k][0], sc[k][2]), -1, 1);
        int i = ct_input(g, BRISK_I32, brisk_shape1(sc[k][0]), 0, (float)sc[k][1]);
        brisk_attr a;
        memset(&a, 0, sizeof a);
        a.shape2 = brisk_shape2(sc[k][1], sc[k][2]);
        int in[2] = {dy, i};
        char what[96];
        snprintf(what, sizeof what, "scatter_add %lld rows into [%lld, %lld], atomic", (long long)sc[k][0],
                 (long long)sc[k][1], (long long)sc[k][2]);
        run_case(g, brisk_graph_append(g, BRISK_OP_SCATTER_ADD, in, 2, BRISK_F32, a.shape2, &a), 0, 1e-6, what);
    }
}

/* Gathering the sender rows of mesh edges (latent 256, 8 neighbours). */
static void test_gather_edges(void) {
    brisk_graph *g = brisk_graph_new();
    int t = ct_input(g, BRISK_F32, brisk_shape2(1024, 256), -1, 1);
    int i = ct_input(g, BRISK_I32, brisk_shape1(8192), 0, 1024);
    run_case(g, brisk_gather(g, t, i), 1, 0.0, "gather 8192 edges from [1024, 256]");
}

/* A bad index is an error after the step (the kernel reports, the sync returns it), not a
 * wild write; unsorted indices under the sorted kernel likewise. */
static void bad_case(const int32_t *idx, int det, const char *want, const char *what) {
    brisk_graph *g = brisk_graph_new();
    int x = ct_input(g, BRISK_F32, brisk_shape2(6, 4), -1, 1);
    int ix = ct_input(g, BRISK_I32, brisk_shape1(6), 0, 1);
    brisk_attr a;
    memset(&a, 0, sizeof a);
    a.shape2 = brisk_shape2(5, 4);
    int in[2] = {x, ix};
    int out = brisk_graph_append(g, BRISK_OP_SEGMENT_SUM, in, 2, BRISK_F32, a.shape2, &a);
    g->loss = g->output = out;
    brisk_backend *be = gpu(det);
    brisk_error err = {0};
    brisk_plan plan;
    brisk_exec *ex = NULL;
    REQUIRE(be && !brisk_plan_build(g, &plan, &err) && !brisk_exec_create(g, &plan, be, &ex, &err));
    float xs[24] = {0};
    brisk_status st = brisk_exec_set_input(ex, 0, xs, &err);
    if (!st) st = brisk_exec_set_input(ex, 1, idx, &err);
    if (!st) st = brisk_exec_run(ex, BRISK_RUN_TRAIN, &err);
    if (!st) st = be->sync(be, &err);
    CHECKF(st == BRISK_ERR_INVALID && strstr(err.msg, want), "%s: status %d, message: %s", what, (int)st, err.msg);
    brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
}

static void test_bad_indices(void) {
    const int32_t range[6] = {0, 1, 1, 2, 5, 4}, unsorted[6] = {0, 2, 1, 3, 3, 4};
    bad_case(range, 1, "index 5 at position 4", "out of range, sorted kernel");
    bad_case(range, 0, "index 5 at position 4", "out of range, atomic kernel");
    bad_case(unsorted, 1, "must be sorted", "unsorted, sorted kernel");
}

CUDA_TEST_MAIN(T(test_segment_sum_sorted), T(test_segment_mean), T(test_scatter_add_atomic), T(test_gather_edges),
               T(test_bad_indices))
