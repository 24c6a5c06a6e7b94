/* `brisk check`'s one-step training smoke test on the GPU: the same small MLP, weights and
 * batch on the CUDA and CPU backends, one step each, then the loss of the updated model.
 * It exercises the executor, GEMMs, elementwise kernels, cross-entropy and its gradient,
 * gradient accumulation and the fused AdamW on the device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cuda.h"
#include "brisk/nn.h"
#include "brisk/optim.h"
#include "brisk/system.h"

#define SMOKE_BATCH 64

static brisk_status one(brisk_backend *be, const float *x, const int32_t *y, double *loss, brisk_error *err) {
    brisk_model_spec spec = {.type = BRISK_MODEL_MLP, .inputs = 32, .outputs = 5, .n_hidden = 2,
                             .activation = BRISK_ACT_GELU, .task = BRISK_TASK_CLASSIFY};
    spec.hidden[0] = 64, spec.hidden[1] = 48;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_optimizer opt = {0};
    brisk_optim_spec os;
    brisk_optim_spec_default(&os);
    float v = NAN;
    brisk_status st = g ? BRISK_OK : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    if (!st && !(st = brisk_model_build(&spec, SMOKE_BATCH, BRISK_BUILD_TRAIN, g, &io, err)) &&
        !(st = brisk_backward(g, io.loss, err)) && !(st = brisk_plan_build(g, &plan, err)) &&
        !(st = brisk_exec_create(g, &plan, be, &ex, err)) && !(st = brisk_exec_init_params(ex, 7, err)) &&
        !(st = brisk_optimizer_create(&opt, &os, ex, err)) &&
        !(st = brisk_exec_set_input(ex, io.input_node[0], x, err)) &&
        !(st = brisk_exec_set_input(ex, io.input_node[1], y, err)) && !(st = brisk_exec_run(ex, BRISK_RUN_TRAIN, err)) &&
        !(st = brisk_optimizer_step(&opt, 1, 1e-2f, 1, err)) && !(st = brisk_exec_run(ex, BRISK_RUN_EVAL, err)))
        st = brisk_exec_read(ex, io.loss, &v, err);
    *loss = v;
    if (opt.ex) brisk_optimizer_free(&opt);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    return st;
}

brisk_status brisk_gpu_smoke_test(double *gpu_loss, double *cpu_loss, brisk_error *err) {
    *gpu_loss = *cpu_loss = NAN;
    float x[SMOKE_BATCH * 32];
    int32_t y[SMOKE_BATCH];
    uint32_t key[2] = {3, 0};
    for (int i = 0; i < SMOKE_BATCH * 32; i += 4) {
        uint32_t ctr[4] = {(uint32_t)i, 0, 0, 0};
        brisk_philox_normal4(ctr, key, x + i);
    }
    for (int i = 0; i < SMOKE_BATCH; i++) y[i] = i % 5;
    brisk_cuda_options o;
    brisk_cuda_options_default(&o);
    o.precision = BRISK_GEMM_FP32;
    o.autotune = 0;
    snprintf(o.autotune_cache, sizeof o.autotune_cache, "-");
    brisk_backend *gpu = NULL, *cpu = brisk_backend_cpu_new(0);
    if (!cpu) return brisk_errorf(err, BRISK_ERR_NOMEM, "cannot create the CPU backend");
    brisk_status st = brisk_backend_cuda_create(&o, &gpu, err);
    if (!st) st = one(gpu, x, y, gpu_loss, err);
    if (!st) st = one(cpu, x, y, cpu_loss, err);
    if (gpu) gpu->destroy(gpu);
    cpu->destroy(cpu);
    if (!st && !(fabs(*gpu_loss - *cpu_loss) <= 1e-4 * fabs(*cpu_loss) + 1e-6))
        st = brisk_errorf(err, BRISK_ERR_NUMERIC, "the GPU step's loss %.7f differs from the CPU's %.7f", *gpu_loss,
                          *cpu_loss);
    return st;
}
