/* ZeRO-1 on one GPU: a one-rank NCCL communicator whose only shard is the whole arena. The
 * gradient reduce-scatter (the mean over one rank: the gradient itself), the fused AdamW over
 * the shard with moments held for the shard only (brisk_exec_shard_moments) and the
 * parameter all-gather must leave the parameters and moments bit for bit those of the plain
 * update, eagerly and captured into a CUDA graph with the rest of the step (the collectives
 * go on the compute stream); with clipping too (the shard's sum of squares all-reduced). Two GPUs would be needed for a real reduction or uneven shards;
 * this checks the plumbing and the capture. Skips without a GPU or without NCCL;
 * tools/gpu-session.sh runs it (ctest -R cuda). Never run so far: written without a GPU. */
#include "dist/cuda_dist_util.h"
#include "brisk/optim.h"

enum { STEPS = 3 };

/* STEPS AdamW steps; sharded: through the ZeRO-1 collectives, captured: the last two steps
 * recorded as one program each time (set_values then replay, as the trainer does).
 * out: parameters, then m, then v. *ran = 0 when NCCL is missing (skip). */
static void train(int sharded, int captured, float clip, const float *xin, float *out, int *ran) {
    brisk_error e = {0}, *ep = &e;
    brisk_graph *g;
    dist_test_mlp(3, &g);
    brisk_plan p;
    REQUIRE_OK(brisk_plan_build(g, &p, &e), ep);
    brisk_backend *be = cuda_backend_for(BRISK_GEMM_FP32, 1, 1);
    REQUIRE(be != NULL && be->grad_reduce_scatter && be->param_all_gather && be->grad_sumsq_allreduce);
    brisk_exec *ex;
    REQUIRE_OK(brisk_exec_create(g, &p, be, &ex, &e), ep);
    REQUIRE_OK(brisk_exec_init_params(ex, 11, &e), ep);
    ex->step.first_micro = 1, ex->step.training = 1; /* each step's gradients replace the last's */
    int64_t n = g->n_param_floats, bounds[2];
    brisk_dist_shard_bounds(n, 1, bounds);
    int ok = 1;
    if (sharded) {
        brisk_status cs = be->comm_init(be, 0, 1, share_nothing, NULL, &e);
        if (cs == BRISK_ERR_UNSUPPORTED) {
            printf("SKIP: %s\n", e.msg);
            ok = 0;
        } else {
            REQUIRE_OK(cs, ep);
            REQUIRE_OK(brisk_exec_shard_moments(ex, bounds[0], bounds[1] - bounds[0], &e), ep);
        }
    }
    brisk_optim_spec spec;
    brisk_optim_spec_default(&spec);
    spec.lr = 1e-2f;
    spec.clip_norm = clip;
    brisk_optimizer o;
    REQUIRE_OK(brisk_optimizer_create(&o, &spec, ex, &e), ep);
    REQUIRE_OK(brisk_exec_set_input(ex, 0, xin, &e), ep);
    int prog = -1;
    for (int s = 1; ok && s <= STEPS; s++) {
        brisk_optim_args a = brisk_optimizer_args(&o, s, spec.lr, 1);
        int cap = captured && s >= 2 && be->capture_begin;
        if (cap) REQUIRE_OK(be->set_values(be, &ex->step, &a, &e), ep);
        if (cap && prog < 0) REQUIRE_OK(be->capture_begin(be, &e), ep);
        if (!cap || prog < 0) {
            brisk_status rs = brisk_exec_run(ex, BRISK_RUN_TRAIN, &e);
            if (!rs && sharded) rs = be->grad_reduce_scatter(be, ex->grads, bounds, &e);
            if (!rs && sharded && clip > 0) /* the trainer's order: the shard's norm, summed over the ranks */
                if (!(rs = be->grad_sumsq(be, (float *)ex->grads + bounds[0], bounds[1] - bounds[0], o.sumsq, &e)))
                    rs = be->grad_sumsq_allreduce(be, &e);
            if (!rs) rs = sharded ? brisk_optimizer_update_range(&o, s, spec.lr, 1, bounds[0],
                                                                 bounds[1] - bounds[0], &e)
                                  : brisk_optimizer_step(&o, s, spec.lr, 1, &e);
            if (!rs && sharded) rs = be->param_all_gather(be, ex->params, bounds, &e);
            if (cap) {
                brisk_error e2 = {0};
                brisk_status ce = be->capture_end(be, &prog, rs ? &e2 : &e);
                CHECKF(rs == BRISK_OK && ce == BRISK_OK, "capture: %s", e.msg);
                if (rs || ce) ok = 0;
            } else {
                REQUIRE_OK(rs, ep);
            }
        }
        if (cap && ok) REQUIRE_OK(be->replay(be, prog, &e), ep);
    }
    if (ok) {
        REQUIRE_OK(be->sync(be, &e), ep);
        REQUIRE_OK(be->download(be, out, ex->params, sizeof(float) * (size_t)n, &e), ep);
        REQUIRE_OK(be->download(be, out + n, ex->m, sizeof(float) * (size_t)n, &e), ep);
        REQUIRE_OK(be->download(be, out + 2 * n, ex->v, sizeof(float) * (size_t)n, &e), ep);
    }
    brisk_optimizer_free(&o);
    brisk_exec_free(ex);
    be->destroy(be);
    brisk_plan_free(&p);
    brisk_graph_free(g);
    *ran = ok;
}

static void test_zero1_one_rank(void) {
    brisk_graph *g;
    dist_test_mlp(3, &g);
    int64_t n = g->n_param_floats;
    brisk_graph_free(g);
    float *xin = malloc(sizeof(float) * 32 * 48), *ref = malloc(sizeof(float) * 3 * (size_t)n),
          *got = malloc(sizeof(float) * 3 * (size_t)n);
    for (int i = 0; i < 32 * 48; i++) xin[i] = ct_uniform(-1, 1);
    /* clip 0.05: small, so that clipping likely acts (the norm itself never seen: no GPU here) */
    for (int run = 0; run < 4; run++) {
        int captured = run & 1, ran = 0;
        float clip = run >= 2 ? 0.05f : 0.0f;
        train(0, captured, clip, xin, ref, &ran);
        REQUIRE(ran);
        train(1, captured, clip, xin, got, &ran);
        if (!ran) break;
        printf("%s, clip %g: %lld parameters, %d AdamW steps\n", captured ? "captured" : "eager", clip, (long long)n,
               STEPS);
        CHECKF(memcmp(got, ref, sizeof(float) * (size_t)n) == 0, "%s, clip %g: parameters differ from the unsharded "
               "update", captured ? "captured" : "eager", clip);
        CHECKF(memcmp(got + n, ref + n, sizeof(float) * 2 * (size_t)n) == 0, "%s, clip %g: moments differ",
               captured ? "captured" : "eager", clip);
    }
    int moved = 0; /* the moments start at zero: the steps did update (not untouched arenas compared) */
    for (int64_t i = n; i < 3 * n && !moved; i++) moved = ref[i] != 0.0f;
    CHECK(moved);
    free(xin), free(ref), free(got);
}

CUDA_TEST_MAIN(T(test_zero1_one_rank))
