/* The compiled step's machinery:
 *
 * Per-step values (seed, rng_step, first_micro, training, loss slot, staging parity, lr,
 * t) live in one device block, written by a one-thread kernel whose arguments carry them
 * (so no host buffer has to outlive the launch). Eager runs write it when the values
 * change; before replaying a program the caller writes it with set_values. Kernels read
 * step-dependent values only from there, so one capture serves every step.
 *
 * Programs are CUDA graphs captured from the compute stream (thread-local capture mode,
 * so the loader thread is unaffected) and replayed with cudaGraphLaunch.
 *
 * Input staging: upload_input copies a batch from (pinned) host memory into one of two
 * device staging buffers on the copy stream, after the last run that read that buffer
 * (event `consumed`), and returns when the copy is done so the loader may refill its slot.
 * The compute stream waits on the copy's event (`copied`) and the run's first kernel
 * copies the staging buffer named by values.parity into the input area; a captured
 * program contains that kernel, so a copy of batch n+1 overlaps step n.
 *
 * The loss log: each micro-step adds weight * loss into slot values.loss_slot of a device
 * ring; the host reads a run of slots every N steps (one synchronisation per read).
 *
 * Step times: two timed events per step (start, end) in rings beside the loss log, recorded
 * on the compute stream outside any capture; read with cudaEventElapsedTime after the loss
 * read's synchronisation. The host's own clock would time only the issuing of the work.
 *
 * The optimizer: the gradient sum of squares (when clipping or loss scaling), the
 * one-thread finalize (skip decision, clip factor, AdamW constants, scaler update), and
 * the fused update: three launches, no host synchronisation, all capturable. */
#include "backend/cuda/cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SCALER_INIT 65536.0f
#define SCALER_GROWTH_INTERVAL 2000

brisk_status cuda_write_values(cuda_backend *cb, const brisk_step_state *st, const brisk_optim_args *args,
                               brisk_error *err) {
    cuda_values v = cb->host_vals;
    if (st) {
        v.seed = st->seed;
        v.rng_step = st->rng_step;
        v.first_micro = st->first_micro;
        v.training = st->training;
        v.loss_slot = st->loss_slot;
    }
    if (args) {
        v.lr = args->lr;
        v.t = args->t;
    }
    v.parity = (uint32_t)cb->parity;
    if (cb->vals_written && memcmp(&v, &cb->host_vals, sizeof v) == 0) return BRISK_OK;
    if (cb->capturing)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: per-step values changed while capturing a CUDA graph; "
                            "write them with set_values before capture_begin");
    CU(cuk_set_values(cb->vals, v, cb->compute), "writing the per-step values");
    cb->host_vals = v;
    cb->vals_written = 1;
    return BRISK_OK;
}

/* the compute stream waits for the staged batch (once per batch) */
static brisk_status commit_wait(cuda_backend *cb, brisk_error *err) {
    if (!cb->commit_pending || cb->wait_issued) return BRISK_OK;
    CU(cudaStreamWaitEvent(cb->compute, cb->copied[cb->parity], 0), "waiting for the batch copy");
    cb->wait_issued = 1;
    return BRISK_OK;
}

static void commit_done(cuda_backend *cb) { cb->commit_pending = cb->staging_open = cb->wait_issued = 0; }

brisk_status cuda_begin_work(cuda_backend *cb, const brisk_step_state *st, brisk_error *err) {
    if (cb->capturing) return BRISK_OK; /* a program reads the values its replay is given */
    brisk_status s = cuda_write_values(cb, st, NULL, err);
    if (s || !cb->commit_pending) return s;
    if ((s = commit_wait(cb, err))) return s;
    CU(cuk_stage_inputs(cb->inputs, cb->staging[0], cb->staging[1], cb->input_bytes, cb->vals, cb->compute),
       "copying the staged batch in");
    CU(cudaEventRecord(cb->consumed[cb->parity], cb->compute), "staging event");
    commit_done(cb);
    return BRISK_OK;
}

static brisk_status cu_set_values(brisk_backend *be, const brisk_step_state *st, const brisk_optim_args *args,
                                  brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    brisk_status s = cuda_write_values(cb, st, args, err);
    return s ? s : commit_wait(cb, err);
}

/* ---------------------------------------------------------------- programs */

static brisk_status cu_capture_begin(brisk_backend *be, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: capture_begin while capturing");
    brisk_status s = commit_wait(cb, err);
    if (s) return s;
    int staging = cb->commit_pending;
    CU(cudaStreamBeginCapture(cb->compute, cudaStreamCaptureModeThreadLocal), "starting a CUDA graph capture");
    cb->capturing = 1;
    if (staging) {
        cudaError_t e = cuk_stage_inputs(cb->inputs, cb->staging[0], cb->staging[1], cb->input_bytes, cb->vals,
                                         cb->compute);
        if (e != cudaSuccess) {
            cudaGraph_t gr;
            cudaStreamEndCapture(cb->compute, &gr);
            if (gr) cudaGraphDestroy(gr);
            cb->capturing = 0;
            return cuda_fail(err, e, "cuk_stage_inputs", "capturing the batch copy");
        }
    }
    cb->capture_staging = staging;
    return BRISK_OK;
}

static brisk_status cu_capture_end(brisk_backend *be, int *program, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    *program = -1;
    if (!cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: capture_end without capture_begin");
    int staging = cb->capture_staging;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(cb->compute, &graph);
    cb->capturing = cb->capture_staging = 0;
    if (e != cudaSuccess) { /* the partial graph goes; the caller runs the step eagerly */
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        return cuda_fail(err, e, "cudaStreamEndCapture", "finishing the CUDA graph capture");
    }
    int kernels = cuda_graph_kernels(graph);
    cudaGraphExec_t exec = NULL;
    e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return cuda_fail(err, e, "cudaGraphInstantiate", "instantiating the captured step");
    }
    if (cb->n_programs == cb->cap_programs) {
        int cap = cb->cap_programs ? 2 * cb->cap_programs : 4;
        cuda_program *grown = realloc(cb->programs, (size_t)cap * sizeof *grown);
        if (!grown) {
            cudaGraphExecDestroy(exec);
            return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory for programs");
        }
        cb->programs = grown;
        cb->cap_programs = cap;
    }
    cb->programs[cb->n_programs] = (cuda_program){exec, staging, kernels};
    *program = cb->n_programs++;
    return BRISK_OK;
}

static brisk_status cu_replay(brisk_backend *be, int program, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (program < 0 || program >= cb->n_programs)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: program %d does not exist", program);
    const cuda_program *p = &cb->programs[program];
    brisk_status s = p->staging ? commit_wait(cb, err) : BRISK_OK;
    if (s || (s = cuda_prep_refresh_params(cb, err))) return s; /* parameters uploaded since capture */
    CU(cudaGraphLaunch((cudaGraphExec_t)p->exec, cb->compute), "replaying the captured step");
    if (p->staging) {
        CU(cudaEventRecord(cb->consumed[cb->parity], cb->compute), "staging event");
        commit_done(cb);
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- input staging */

static brisk_status cu_upload_input(brisk_backend *be, void *dst, const void *src, size_t bytes, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    char *d = dst;
    if (!cb->inputs || d < cb->inputs || d + bytes > cb->inputs + cb->input_bytes)
        return be->upload(be, dst, src, bytes, err); /* not the prepared input area: a plain copy */
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: upload_input while capturing");
    size_t need = (cb->input_bytes + 63) / 64 * 64;
    if (cb->staging_bytes < need) {
        for (int i = 0; i < 2; i++) {
            if (cb->staging[i]) cudaFree(cb->staging[i]);
            cb->staging[i] = NULL;
        }
        cb->staging_bytes = 0;
        for (int i = 0; i < 2; i++) CU(cudaMalloc(&cb->staging[i], need), "input staging buffer");
        cb->staging_bytes = need;
    }
    if (!cb->staging_open) { /* a new micro-batch: the other buffer, once its last reader is done */
        cb->parity ^= 1;
        cb->staging_open = cb->commit_pending = 1;
        cb->wait_issued = 0;
        CU(cudaStreamWaitEvent(cb->copy, cb->consumed[cb->parity], 0), "staging event");
    }
    /* copy_start is reached once the buffer is free, so the timed span is the copy alone */
    CU(cudaEventRecord(cb->copy_start, cb->copy), "staging event");
    CU(cudaMemcpyAsync((char *)cb->staging[cb->parity] + (d - cb->inputs), src, bytes, cudaMemcpyHostToDevice,
                       cb->copy), "copying a batch to the device");
    CU(cudaEventRecord(cb->copied[cb->parity], cb->copy), "staging event");
    CU(cudaEventSynchronize(cb->copied[cb->parity]), "copying a batch to the device");
    float ms = 0;
    if (cudaEventElapsedTime(&ms, cb->copy_start, cb->copied[cb->parity]) == cudaSuccess) cb->copy_s += 1e-3 * ms;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- loss log */

/* slot s holds BRISK_LOSS_LOG_WIDTH floats from loss_ring + s * BRISK_LOSS_LOG_WIDTH */
static brisk_status cu_loss_log(brisk_backend *be, const float *loss, int width, float weight, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (width < 1 || width > BRISK_LOSS_LOG_WIDTH)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: %d losses a step; the log takes 1 to %d", width,
                            BRISK_LOSS_LOG_WIDTH);
    CU(cuk_loss_log(loss, width, cb->loss_ring, CUDA_LOSS_LOG, weight, cb->vals, cb->compute), "logging the loss");
    return BRISK_OK;
}

static brisk_status cu_loss_read(brisk_backend *be, uint32_t first, int n, int width, float *host, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    const size_t W = BRISK_LOSS_LOG_WIDTH;
    if (n < 0 || n > CUDA_LOSS_LOG || width < 1 || width > BRISK_LOSS_LOG_WIDTH)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: %d steps of %d losses asked for, the log holds %d of %d",
                            n, width, CUDA_LOSS_LOG, BRISK_LOSS_LOG_WIDTH);
    uint32_t at = first % CUDA_LOSS_LOG;
    int a = n < (int)(CUDA_LOSS_LOG - at) ? n : (int)(CUDA_LOSS_LOG - at);
    if (a > 0)
        CU(cudaMemcpyAsync(cb->loss_host, cb->loss_ring + at * W, (size_t)a * W * sizeof(float), cudaMemcpyDeviceToHost,
                           cb->compute), "reading the loss log");
    if (n > a)
        CU(cudaMemcpyAsync(cb->loss_host + a * W, cb->loss_ring, (size_t)(n - a) * W * sizeof(float),
                           cudaMemcpyDeviceToHost, cb->compute), "reading the loss log");
    brisk_status s = cuda_sync(cb, err);
    if (s) return s;
    for (int i = 0; i < n; i++) memcpy(host + (size_t)i * width, cb->loss_host + i * W, (size_t)width * sizeof(float));
    return BRISK_OK;
}

/* ---------------------------------------------------------------- step times */

static brisk_status cu_step_mark(brisk_backend *be, uint32_t slot, int end, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    return cuda_event_mark(cb, &cb->step_ev, 2 * CUDA_LOSS_LOG, (int)(2 * (slot % CUDA_LOSS_LOG) + (end ? 1 : 0)),
                           "step-time event", err);
}

static brisk_status cu_step_times(brisk_backend *be, uint32_t first, int n, double *ms, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (n < 0 || n > CUDA_LOSS_LOG)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: %d step times asked for, the ring holds %d", n, CUDA_LOSS_LOG);
    for (int i = 0; i < n; i++) {
        uint32_t at = (first + (uint32_t)i) % CUDA_LOSS_LOG;
        cudaEvent_t a = cb->step_ev ? cb->step_ev[2 * at] : NULL, b = cb->step_ev ? cb->step_ev[2 * at + 1] : NULL;
        if (!a || !b)
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: step %lld has no %s mark", (long long)first + i,
                                a ? "end" : "start");
        brisk_status st = cuda_event_ms(a, b, &ms[i], "reading a step's device time", err);
        if (st) return st;
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- optimizer */

brisk_status cuda_scaler_init(cuda_backend *cb, int on, brisk_error *err) {
    cuda_optim_state s;
    memset(&s, 0, sizeof s);
    s.coef = 1.0f;
    s.scale = on ? SCALER_INIT : 1.0f;
    s.scaler = on;
    s.growth_interval = SCALER_GROWTH_INTERVAL;
    CU(cudaMemcpyAsync(cb->ostate, &s, sizeof s, cudaMemcpyHostToDevice, cb->compute), "initialising the optimizer state");
    CU(cudaStreamSynchronize(cb->compute), "initialising the optimizer state");
    float *seed = cuda_prep_seed(cb);
    if (on && seed) CU(cuk_fill(seed, SCALER_INIT, 1, cb->compute), "setting the loss scale");
    return BRISK_OK;
}

static brisk_status cu_scaler_get(brisk_backend *be, brisk_scaler_state *out, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    memset(out, 0, sizeof *out);
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: scaler_get while capturing a CUDA graph");
    cuda_optim_state s;
    CU(cudaMemcpyAsync(&s, cb->ostate, sizeof s, cudaMemcpyDeviceToHost, cb->compute), "reading the loss scaler");
    CU(cudaStreamSynchronize(cb->compute), "reading the loss scaler");
    *out = (brisk_scaler_state){.active = s.scaler, .scale = s.scale, .growth = s.growth, .skipped = s.skipped};
    return BRISK_OK;
}

/* A checkpoint's scale, growth count and skips, into the device state and the loss seed. */
static brisk_status cu_scaler_set(brisk_backend *be, const brisk_scaler_state *in, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: scaler_set while capturing a CUDA graph");
    if (!(in->scale > 0.0f) || !isfinite(in->scale) || in->growth < 0 || in->skipped < 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: loss scaler state scale %g, growth %lld, skipped %lld is "
                            "not valid", (double)in->scale, (long long)in->growth, (long long)in->skipped);
    cuda_optim_state s;
    CU(cudaMemcpyAsync(&s, cb->ostate, sizeof s, cudaMemcpyDeviceToHost, cb->compute), "reading the loss scaler");
    CU(cudaStreamSynchronize(cb->compute), "reading the loss scaler");
    if (!s.scaler || !in->active) return BRISK_OK;
    s.scale = in->scale;
    s.growth = (int)(in->growth < s.growth_interval ? in->growth : s.growth_interval - 1);
    s.skipped = in->skipped;
    CU(cudaMemcpyAsync(cb->ostate, &s, sizeof s, cudaMemcpyHostToDevice, cb->compute), "restoring the loss scaler");
    CU(cudaStreamSynchronize(cb->compute), "restoring the loss scaler");
    float *seed = cuda_prep_seed(cb);
    if (seed) CU(cuk_fill(seed, s.scale, 1, cb->compute), "restoring the loss scale");
    return BRISK_OK;
}

brisk_status cuda_grad_sumsq(brisk_backend *be, const float *g, int64_t n, float *sumsq_out, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    void *scratch;
    brisk_status s = cuda_scratch(cb, cuk_reduce_scratch_bytes(1, n), &scratch, err);
    if (s) return s;
    CU(cuk_sum_global(1, g, NULL, n, 1.0, &cb->ostate->sumsq, sumsq_out, scratch, cb->compute), "gradient norm");
    cb->sumsq_fresh = 1;
    cb->sumsq_summed = 0; /* this rank's sum until grad_sumsq_allreduce */
    return BRISK_OK;
}

brisk_status cuda_optim_update(brisk_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                               const brisk_optim_args *a, const float *sumsq, const uint8_t *decay_mask,
                               brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    (void)sumsq; /* the device keeps its own (double) copy in the optimizer state */
    if (!a) return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: no arguments");
    if (a->kind != BRISK_OPTIM_ADAMW && a->kind != BRISK_OPTIM_SGD)
        return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: unknown optimizer kind %d", (int)a->kind);
    if (a->kind == BRISK_OPTIM_ADAMW && (a->t < 1 || !v || !m))
        return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: AdamW needs t >= 1 (got %lld) and the m, v buffers",
                            (long long)a->t);
    if (a->kind == BRISK_OPTIM_SGD && a->momentum != 0.0f && !m)
        return brisk_errorf(err, BRISK_ERR_INVALID, "optim_update: SGD momentum needs the m buffer");
    if (n <= 0) return BRISK_OK;
    brisk_status s;
    if (!cb->capturing && (s = cuda_write_values(cb, NULL, a, err))) return s;
    float *seed = cuda_prep_seed(cb);
    int scaler = seed != NULL && cuda_prep_params_lp(cb, p) != NULL;
    cuda_optim_consts c = {.adamw = a->kind == BRISK_OPTIM_ADAMW, .beta1 = a->beta1, .beta2 = a->beta2,
                           .eps = a->eps, .weight_decay = a->weight_decay, .momentum = a->momentum,
                           .nesterov = a->nesterov, .grad_scale = a->grad_scale, .clip_norm = a->clip_norm,
                           .use_sumsq = a->clip_norm > 0.0f || scaler || a->skip_nonfinite,
                           .skip_nonfinite = a->skip_nonfinite};
    /* ZeRO-1: a norm of this rank's shard alone would have ranks clip, skip and scale apart */
    int shard = cb->shard_pending, summed = cb->sumsq_fresh && cb->sumsq_summed;
    cb->shard_pending = cb->sumsq_summed = 0;
    if (shard && c.use_sumsq && !summed)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: the update of a ZeRO-1 shard with a gradient norm "
                            "(clipping, the NaN skip or the fp16 loss scaler) needs grad_sumsq of the shard and "
                            "grad_sumsq_allreduce before it");
    if (c.use_sumsq && !cb->sumsq_fresh && (s = cuda_grad_sumsq(be, g, n, NULL, err))) return s;
    cb->sumsq_fresh = 0;
    CU(cuk_optim_finalize(c, cb->vals, cb->ostate, scaler ? seed : NULL, cb->compute), "optimizer step constants");
    void *lp = cuda_prep_params_lp(cb, p);
    CU(cuk_optim_update(p, g, m, v, decay_mask, n, c, cb->ostate, lp, cuda_in_type(cb) == 2, cb->compute),
       a->kind == BRISK_OPTIM_ADAMW ? "fused AdamW" : "fused SGD");
    return BRISK_OK;
}

/* ---------------------------------------------------------------- setup */

brisk_status cuda_step_init(cuda_backend *cb, brisk_error *err) {
    CU(cudaMalloc((void **)&cb->loss_ring, CUDA_LOSS_LOG * BRISK_LOSS_LOG_WIDTH * sizeof(float)), "loss log");
    CU(cudaMemset(cb->loss_ring, 0, CUDA_LOSS_LOG * BRISK_LOSS_LOG_WIDTH * sizeof(float)), "loss log");
    CU(cudaMallocHost((void **)&cb->loss_host, CUDA_LOSS_LOG * BRISK_LOSS_LOG_WIDTH * sizeof(float)), "loss log (host)");
    for (int i = 0; i < 2; i++) {
        CU(cudaEventCreate(&cb->copied[i]), "staging event");
        CU(cudaEventCreateWithFlags(&cb->consumed[i], cudaEventDisableTiming), "staging event");
    }
    CU(cudaEventCreate(&cb->copy_start), "staging event");
    return cuda_scaler_init(cb, 0, err);
}

void cuda_programs_clear(cuda_backend *cb) {
    for (int i = 0; i < cb->n_programs; i++) cudaGraphExecDestroy((cudaGraphExec_t)cb->programs[i].exec);
    free(cb->programs);
    cb->programs = NULL;
    cb->n_programs = cb->cap_programs = 0;
}

void cuda_step_free(cuda_backend *cb) {
    cuda_programs_clear(cb);
    cuda_profile_free(cb);
    for (int i = 0; i < 2; i++) {
        if (cb->staging[i]) cudaFree(cb->staging[i]);
        if (cb->copied[i]) cudaEventDestroy(cb->copied[i]);
        if (cb->consumed[i]) cudaEventDestroy(cb->consumed[i]);
    }
    if (cb->copy_start) cudaEventDestroy(cb->copy_start);
    if (cb->loss_ring) cudaFree(cb->loss_ring);
    if (cb->loss_host) cudaFreeHost(cb->loss_host);
    cuda_events_free(&cb->step_ev, 2 * CUDA_LOSS_LOG);
}

void cuda_step_install(brisk_backend *be) {
    be->set_values = cu_set_values;
    be->capture_begin = cu_capture_begin;
    be->capture_end = cu_capture_end;
    be->replay = cu_replay;
    be->upload_input = cu_upload_input;
    be->loss_log = cu_loss_log;
    be->loss_read = cu_loss_read;
    be->loss_log_size = CUDA_LOSS_LOG;
    be->step_mark = cu_step_mark;
    be->step_times = cu_step_times;
    cuda_profile_install(be);
    be->scaler_get = cu_scaler_get;
    be->scaler_set = cu_scaler_set;
}
