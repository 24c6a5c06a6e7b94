/* The GPU all-reduce overlapped with backward, on one GPU: a one-rank NCCL communicator (the
 * mean over one rank is the gradient itself), the executor's gradient hook issuing each
 * bucket on the backend's NCCL stream after an event on the compute stream, and the join
 * before anything reads the gradients: eagerly and captured into a CUDA graph, the gradients
 * must equal those of a plain backward bit for bit, and the capture must close (an NCCL
 * stream left unjoined fails cudaStreamEndCapture). Two GPUs would be needed for a real
 * reduction; this checks the ordering machinery. Skips without a GPU or without NCCL;
 * tools/gpu-session.sh runs it (ctest -R cuda). Never run so far: written without a GPU. */
#include "dist/cuda_dist_util.h"

typedef struct {
    brisk_backend *be;
    float *grads;
    brisk_dist_bucket *b;
    int issued, calls;
    brisk_error err;
} issue_log;

static void issue(void *user, int n_complete) {
    issue_log *l = user;
    l->calls++;
    for (; l->issued < n_complete && !l->err.code; l->issued++)
        l->be->grad_bucket_ready(l->be, l->grads + l->b[l->issued].offset, l->b[l->issued].count, &l->err);
}

static void test_overlap_one_rank(void) {
    brisk_error e = {0}, *ep = &e;
    brisk_graph *g;
    dist_test_mlp(4, &g);
    brisk_plan p;
    REQUIRE_OK(brisk_plan_build(g, &p, &e), ep);
    brisk_backend *be = cuda_backend_for(BRISK_GEMM_FP32, 1, 1);
    REQUIRE(be != NULL && be->grad_bucket_ready && be->grad_buckets_join);
    brisk_exec *ex;
    REQUIRE_OK(brisk_exec_create(g, &p, be, &ex, &e), ep);
    REQUIRE_OK(brisk_exec_init_params(ex, 11, &e), ep);
    int64_t n = g->n_param_floats;
    float *xin = malloc(sizeof(float) * 32 * 48), *ref = malloc(sizeof(float) * (size_t)n),
          *got = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < 32 * 48; i++) xin[i] = ct_uniform(-1, 1);
    REQUIRE_OK(brisk_exec_set_input(ex, 0, xin, &e), ep);
    REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
    REQUIRE_OK(be->sync(be, &e), ep);
    REQUIRE_OK(be->download(be, ref, ex->grads, sizeof(float) * (size_t)n, &e), ep);

    brisk_status cs = be->comm_init(be, 0, 1, share_nothing, NULL, &e);
    if (cs == BRISK_ERR_UNSUPPORTED) {
        printf("SKIP: %s\n", e.msg);
    } else {
        REQUIRE_OK(cs, ep);
        /* 4 KiB buckets over the parameter table, in the order backward completes them */
        int64_t off[8], len[8];
        for (int i = 0; i < g->n_params; i++) off[i] = (int64_t)g->params[i].offset, len[i] = g->params[i].numel;
        int64_t nb = brisk_dist_plan_buckets(off, len, g->n_params, 4096, NULL, 0);
        brisk_dist_bucket *b = malloc(sizeof *b * (size_t)nb), *sorted = malloc(sizeof *b * (size_t)nb);
        int64_t *bo = malloc(sizeof(int64_t) * (size_t)nb), *bc = malloc(sizeof(int64_t) * (size_t)nb);
        int *order = malloc(sizeof(int) * (size_t)nb);
        brisk_dist_plan_buckets(off, len, g->n_params, 4096, b, nb);
        for (int64_t i = 0; i < nb; i++) bo[i] = b[i].offset, bc[i] = b[i].count;
        issue_log l = {.be = be, .grads = ex->grads, .b = sorted};
        REQUIRE_OK(brisk_exec_set_grad_hook(ex, bo, bc, (int)nb, order, issue, &l, &e), ep);
        for (int64_t i = 0; i < nb; i++) sorted[i] = b[order[i]];
        printf("%lld buckets\n", (long long)nb);
        /* eager */
        REQUIRE_OK(be->memset0(be, ex->grads, sizeof(float) * (size_t)n, &e), ep);
        brisk_exec_arm_grad_hook(ex, 1);
        REQUIRE_OK(brisk_exec_run(ex, BRISK_RUN_TRAIN, &e), ep);
        CHECKF(l.err.code == 0, "%s", l.err.msg);
        CHECK(l.issued == nb && l.calls >= 2);
        REQUIRE_OK(be->grad_buckets_join(be, &e), ep);
        REQUIRE_OK(be->sync(be, &e), ep);
        REQUIRE_OK(be->download(be, got, ex->grads, sizeof(float) * (size_t)n, &e), ep);
        CHECK(memcmp(got, ref, sizeof(float) * (size_t)n) == 0);
        /* captured: the NCCL stream forks from and joins the capture */
        if (be->capture_begin) {
            REQUIRE_OK(be->memset0(be, ex->grads, sizeof(float) * (size_t)n, &e), ep);
            REQUIRE_OK(be->set_values(be, &ex->step, NULL, &e), ep);
            int prog = -1;
            l.issued = 0;
            REQUIRE_OK(be->capture_begin(be, &e), ep);
            brisk_status rs = brisk_exec_run(ex, BRISK_RUN_TRAIN, &e);
            if (!rs) rs = be->grad_buckets_join(be, &e);
            brisk_error e2 = {0};
            brisk_status ce = be->capture_end(be, &prog, rs ? &e2 : &e);
            CHECKF(rs == BRISK_OK && ce == BRISK_OK && l.err.code == 0, "%s %s", e.msg, l.err.msg);
            if (!rs && !ce) {
                REQUIRE_OK(be->replay(be, prog, &e), ep);
                REQUIRE_OK(be->sync(be, &e), ep);
                REQUIRE_OK(be->download(be, got, ex->grads, sizeof(float) * (size_t)n, &e), ep);
                CHECK(memcmp(got, ref, sizeof(float) * (size_t)n) == 0);
            }
        }
        brisk_exec_arm_grad_hook(ex, 0);
        free(b), free(sorted), free(bo), free(bc), free(order);
    }
    free(xin), free(ref), free(got);
    brisk_exec_free(ex);
    be->destroy(be);
    brisk_plan_free(&p);
    brisk_graph_free(g);
}

CUDA_TEST_MAIN(T(test_overlap_one_rank))
