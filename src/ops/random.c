/* Random ops: RANDN, RAND_UNIFORM, RANDINT. Each takes its own Philox stream id at
 * build time; the per-step counter comes from the step state, so a run is
 * reproducible from seed and step alone. No gradient. */
#include "ops/ops_internal.h"

#include <math.h>

static int random_op(brisk_graph *g, brisk_op op, brisk_dtype dt, brisk_shape s, brisk_attr *at) {
    if (!g || g->err.code != BRISK_OK) return -1;
    at->shape2 = s;
    at->rng = g->next_rng_stream;
    int id = brisk_graph_append(g, op, NULL, 0, dt, s, at);
    if (id >= 0) g->next_rng_stream++;
    return id;
}

int brisk_randn(brisk_graph *g, brisk_shape s) {
    brisk_attr at = brisk_attr_none();
    return random_op(g, BRISK_OP_RANDN, BRISK_F32, s, &at);
}

int brisk_rand_uniform(brisk_graph *g, brisk_shape s, float lo, float hi) {
    if (!(lo < hi) || isinf(lo) || isinf(hi))
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "rand_uniform: range [%g, %g) (expected finite lo < hi)",
                                (double)lo, (double)hi);
    brisk_attr at = brisk_attr_none();
    at.f0 = lo;
    at.f1 = hi;
    return random_op(g, BRISK_OP_RAND_UNIFORM, BRISK_F32, s, &at);
}

int brisk_randint(brisk_graph *g, brisk_shape s, int64_t lo, int64_t hi) {
    if (!(lo < hi) || lo < INT32_MIN || hi > (int64_t)INT32_MAX + 1)
        return brisk_graph_fail(g, BRISK_ERR_INVALID, "randint: range [%lld, %lld) (expected lo < hi within i32)",
                                (long long)lo, (long long)hi);
    brisk_attr at = brisk_attr_none();
    at.i0 = lo;
    at.i1 = hi;
    return random_op(g, BRISK_OP_RANDINT, BRISK_I32, s, &at);
}
