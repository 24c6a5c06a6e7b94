/* End-to-end training step on the CPU backend for two workloads of
 * /work/shared/workloads/WORKLOADS.md, built with the graph builders: one step =
 * forward + backward + gradient accumulation (brisk_exec_run TRAIN) + fused AdamW
 * (lr 1e-3, betas 0.9/0.999, eps 1e-8, wd 0.01 on weights only). Prints the median
 * ms/step and the time spent per op kind over the schedule.
 *
 *   diffusion: DDPM denoiser, batch 16: t ~ randint[0, 50), eps ~ N(0, 1),
 *              x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, input [x_t | coarse(7) |
 *              sinusoidal(t, 32)] -> 256 -> 256 -> 256 -> 256, SiLU; MSE on eps
 *   tabular:   64 -> 512 -> 256 -> 128 -> 3, ReLU, dropout 0.1, cross-entropy, batch 512
 *
 *   build/bench/bench_train_step [threads] [steps] */
#include "backend/cpu/cpu_internal.h"
#include "brisk/graph.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int linear(brisk_graph *g, int x, int64_t in, int64_t out, const char *name) {
    char wn[64], bn[64];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    float a = 1.0f / sqrtf((float)in);
    int w = brisk_param(g, wn, brisk_shape2(out, in), BRISK_INIT_UNIFORM, a, 1);
    int b = brisk_param(g, bn, brisk_shape1(out), BRISK_INIT_UNIFORM, a, 0);
    return brisk_bias_add(g, brisk_matmul(g, x, w, 0, 1), b);
}

static brisk_graph *build_diffusion(void) {
    brisk_graph *g = brisk_graph_new();
    const int B = 16, T = 50;
    int x0 = brisk_input(g, "fine", BRISK_F32, brisk_shape2(B, 256));
    int coarse = brisk_input(g, "coarse", BRISK_F32, brisk_shape2(B, 7));
    float sab[50], s1ab[50], ab = 1.0f;
    for (int i = 0; i < T; i++) {
        float beta = 1e-4f + (0.02f - 1e-4f) * (float)i / (float)(T - 1);
        ab *= 1.0f - beta;
        sab[i] = sqrtf(ab);
        s1ab[i] = sqrtf(1.0f - ab);
    }
    int csab = brisk_const(g, "sqrt_abar", BRISK_F32, brisk_shape2(T, 1), sab);
    int cs1ab = brisk_const(g, "sqrt_1m_abar", BRISK_F32, brisk_shape2(T, 1), s1ab);
    int t = brisk_randint(g, brisk_shape1(B), 0, T);
    int eps = brisk_randn(g, brisk_shape2(B, 256));
    int xt = brisk_add(g, brisk_mul(g, brisk_gather(g, csab, t), x0), brisk_mul(g, brisk_gather(g, cs1ab, t), eps));
    int xs[3] = {xt, coarse, brisk_sinusoidal(g, t, 32)};
    int h = brisk_concat(g, xs, 3, 1);
    h = brisk_silu(g, linear(g, h, 295, 256, "net.0"));
    h = brisk_silu(g, linear(g, h, 256, 256, "net.2"));
    h = brisk_silu(g, linear(g, h, 256, 256, "net.4"));
    h = linear(g, h, 256, 256, "net.6");
    g->output = h;
    g->loss = brisk_mse(g, h, eps);
    return g;
}

static brisk_graph *build_tabular(void) {
    brisk_graph *g = brisk_graph_new();
    const int B = 512;
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape2(B, 64));
    int y = brisk_input(g, "y", BRISK_I32, brisk_shape1(B));
    int h = brisk_dropout(g, brisk_relu(g, linear(g, x, 64, 512, "net.0")), 0.1f);
    h = brisk_dropout(g, brisk_relu(g, linear(g, h, 512, 256, "net.3")), 0.1f);
    h = brisk_dropout(g, brisk_relu(g, linear(g, h, 256, 128, "net.6")), 0.1f);
    h = linear(g, h, 128, 3, "net.9");
    g->output = h;
    g->loss = brisk_cross_entropy(g, h, y);
    return g;
}

static int run(const char *name, brisk_graph *g, int threads, int steps) {
    brisk_error err = {0};
    brisk_plan plan;
    memset(&plan, 0, sizeof plan);
    if (brisk_graph_error(g, &err) != BRISK_OK || brisk_backward(g, g->loss, &err) != BRISK_OK ||
        brisk_plan_build(g, &plan, &err) != BRISK_OK) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
    }
    brisk_backend *be = brisk_backend_cpu_new(threads);
    brisk_exec *ex;
    if (brisk_exec_create(g, &plan, be, &ex, &err) != BRISK_OK || brisk_exec_init_params(ex, 1234, &err) != BRISK_OK) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        size_t n = g->inputs[i].bytes;
        unsigned char *host = malloc(n);
        for (size_t k = 0; k < n / 4; k++) {
            if (g->inputs[i].dtype == BRISK_I32) ((int32_t *)host)[k] = (int32_t)(rand() % 3);
            else ((float *)host)[k] = (float)rand() / RAND_MAX - 0.5f;
        }
        brisk_exec_set_input(ex, i, host, &err);
        free(host);
    }
    int64_t np = g->n_param_floats;
    uint8_t *mask = malloc((size_t)np);
    for (int i = 0; i < g->n_params; i++)
        memset(mask + g->params[i].offset, g->params[i].decay ? 1 : 0, (size_t)g->params[i].numel);
    int all_decay = 1;
    for (int i = 0; i < g->n_params; i++) all_decay &= g->params[i].decay;
    brisk_optim_args a = {.kind = BRISK_OPTIM_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = 0.01f, .grad_scale = 1.0f};
    double *ms = malloc(sizeof(double) * (size_t)steps), t_opt = 0;
    float loss0 = 0, loss = 0;
    for (int s = 0; s < steps; s++) {
        ex->step.rng_step = (uint32_t)s;
        ex->step.first_micro = 1;
        ex->step.training = 1;
        a.t = s + 1;
        double t0 = brisk_now();
        if (brisk_exec_run(ex, BRISK_RUN_TRAIN, &err) != BRISK_OK) { fprintf(stderr, "%s: %s\n", name, err.msg); return 1; }
        double t1 = brisk_now();
        be->optim_update(be, ex->params, ex->grads, ex->m, ex->v, np, &a, NULL, all_decay ? NULL : mask, &err);
        double t2 = brisk_now();
        ms[s] = (t2 - t0) * 1e3;
        t_opt += t2 - t1;
        brisk_exec_read(ex, g->loss, s ? &loss : &loss0, &err);
    }
    qsort(ms, (size_t)steps, sizeof(double), cmp_d);
    printf("%-9s threads %d: %7.3f ms/step median (min %.3f, p90 %.3f) over %d steps; AdamW %.1f us/step; "
           "%lld params, %d nodes scheduled; loss %.4f -> %.4f\n", name, ((cpu_backend *)be->impl)->threads,
           ms[steps / 2], ms[0], ms[steps * 9 / 10], steps, t_opt / steps * 1e6, (long long)np, plan.n_train, loss0, loss);
    /* per op kind, one more pass with a timer around each node */
    double per_op[BRISK_OP_COUNT] = {0};
    int reps = 20;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < plan.n_train; k++) {
            int id = plan.train_order[k];
            const brisk_node *nd = &g->nodes[id];
            const void *in[BRISK_MAX_INPUTS];
            for (int j = 0; j < nd->n_in; j++) in[j] = ex->ptr[nd->in[j]];
            double t0 = brisk_now();
            be->run_node(be, g, id, in, ex->ptr[id], &ex->step, &err);
            per_op[nd->op] += brisk_now() - t0;
        }
    printf("   per op (us/step):");
    for (int op = 0; op < BRISK_OP_COUNT; op++)
        if (per_op[op] > 0) printf(" %s %.1f", brisk_op_name((brisk_op)op), per_op[op] / reps * 1e6);
    printf("\n");
    free(ms);
    free(mask);
    brisk_exec_free(ex);
    be->destroy(be);
    brisk_plan_free(&plan);
    return 0;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    int rc = 0;
    brisk_graph *g = build_diffusion();
    rc |= run("diffusion", g, threads, steps);
    brisk_graph_free(g);
    g = build_tabular();
    rc |= run("tabular", g, threads, steps / 4 > 10 ? steps / 4 : 10);
    brisk_graph_free(g);
    return rc;
}
