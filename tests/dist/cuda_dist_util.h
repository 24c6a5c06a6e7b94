/* What the one-GPU NCCL tests (test_cuda_dist_overlap.c, test_cuda_zero1.c) share: a
 * communicator's id exchange for a single rank, and a small MLP with its backward. */
#include "backend/cuda_test_util.h"
#include "brisk/dist.h"

static brisk_status share_nothing(void *user, void *buf, size_t bytes, brisk_error *err) {
    (void)user, (void)buf, (void)bytes, (void)err;
    return BRISK_OK; /* one rank: rank 0's id is already here */
}

/* `layers` x (48 -> 48 linear + ReLU) over a [32, 48] input "x", loss the mean row sum
 * (returned through *out: REQUIRE returns from a void function). */
static void dist_test_mlp(int layers, brisk_graph **out) {
    brisk_error e = {0}, *ep = &e;
    brisk_graph *g = *out = brisk_graph_new();
    int h = brisk_input(g, "x", BRISK_F32, brisk_shape2(32, 48));
    for (int i = 0; i < layers; i++) {
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, "w%d", i), snprintf(bn, sizeof bn, "b%d", i);
        int w = brisk_param(g, wn, brisk_shape2(48, 48), BRISK_INIT_UNIFORM, 0.2f, 1);
        int b = brisk_param(g, bn, brisk_shape1(48), BRISK_INIT_UNIFORM, 0.1f, 0);
        h = brisk_relu(g, brisk_bias_add(g, brisk_matmul(g, h, w, 0, 0), b));
    }
    int loss = brisk_mean(g, brisk_sum(g, h, 2, 0), 1, 0);
    REQUIRE_OK(brisk_backward(g, loss, &e), ep);
}
