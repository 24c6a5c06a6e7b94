/* One training step, the way the backend runs it best:
 *
 * CPU (no device hooks): each micro-batch is copied in, the schedule runs, the loss is
 * read back at once; then the fused optimizer step.
 *
 * Device (CUDA): batches go in through upload_input (pinned memory, copy stream,
 * overlapped with the work already queued) when the loader prefetches; each micro-step
 * adds its loss into the device loss log instead of being read; the host reads the log
 * every N steps (brisk_step_flush). With speed.cuda_graph, the first step runs eagerly
 * (it creates and autotunes the GEMM plans and sizes every buffer), the second is
 * captured into a program (a CUDA graph: forward, backward, optimizer and scaler, and the
 * copy of the staged batch), and every later step replays it after writing the per-step
 * values (step state, lr, t) into device memory with set_values. With accumulate K > 1
 * the micro-step and the update are two programs (the micro-step replayed K times).
 * Nothing in a step synchronises the host with the device, so the host's clock around a
 * step measures only how long issuing it took (the host may run steps ahead of the GPU):
 * when the backend offers step_mark, each step's start (before its batch is fetched) and
 * end (after its update) are marked on the device, outside any capture, and flush reads the
 * device's step times with the losses; the trainer's step statistics use those. Under
 * train.skip_nan_steps a device step whose gradients are not finite skips its own update
 * on the device (any precision), and the host counts it when it reads that step's loss. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/cuda.h"
#include "train/trainer_internal.h"

static int on_device(const brisk_trainer *t) { return t->be->loss_log != NULL && t->be->loss_read != NULL; }

/* Room for `need` elements of `size` bytes in *arr (capacity *cap, doubled from 1024). */
static brisk_status reserve(void **arr, int64_t *cap, int64_t need, size_t size, brisk_error *err) {
    if (need <= *cap) return BRISK_OK;
    int64_t c = *cap ? 2 * *cap : 1024;
    while (c < need) c *= 2;
    void *p = realloc(*arr, (size_t)c * size);
    if (!p) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    *arr = p;
    *cap = c;
    return BRISK_OK;
}

brisk_status brisk_trainer_push_loss(brisk_trainer *t, float loss, const float *terms, brisk_error *err) {
    const int nt = t->io.n_loss_terms;
    brisk_status st = reserve((void **)&t->losses, &t->cap_losses, t->n_losses + 1, sizeof *t->losses, err);
    if (!st && nt) st = reserve((void **)&t->terms, &t->cap_terms, (t->n_losses + 1) * nt, sizeof *t->terms, err);
    if (st) return st;
    for (int k = 0; k < nt; k++) t->terms[t->n_losses * nt + k] = terms ? terms[k] : NAN;
    t->losses[t->n_losses++] = loss;
    return BRISK_OK;
}

/* what the loss log takes from a step: the loss, or the loss and its terms */
static int loss_width(const brisk_trainer *t) { return 1 + t->io.n_loss_terms; }
static int loss_node(const brisk_trainer *t) { return t->io.n_loss_terms ? t->io.loss_terms : t->io.loss; }

static brisk_status nonfinite(const brisk_trainer *t, int64_t step, float loss, brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_NUMERIC,
                        "step %lld: the training loss is %s; the last checkpoint is %s/last.safetensors; "
                        "try a lower optim.lr, optim.clip_norm, or check the data",
                        (long long)step, isnan(loss) ? "NaN" : "infinite", t->cfg.train.out_dir);
}

brisk_status brisk_step_setup(brisk_trainer *t, brisk_error *err) {
    (void)err;
    brisk_backend *be = t->be;
    /* programs captured by an earlier run_steps() of this trainer stay valid: same buffers */
    t->loss_first = t->step;
    t->loss_pending = 0;
    t->n_dev_ms = 0;
    t->dev_clock = on_device(t) && be->step_mark && be->step_times;
    int can = be->capture_begin && be->capture_end && be->replay && be->set_values && on_device(t);
    t->graph = can && t->cfg.speed.cuda_graph;
    if (!can) snprintf(t->graph_off, sizeof t->graph_off, "the %s backend runs eagerly", be->name);
    else if (!t->cfg.speed.cuda_graph) snprintf(t->graph_off, sizeof t->graph_off, "--no-graph (speed.cuda_graph false)");
    else t->graph_off[0] = 0;
    return BRISK_OK;
}

static brisk_status feed(brisk_trainer *t, const brisk_batch *b, brisk_error *err) {
    double t0 = brisk_now();
    brisk_backend *be = t->be;
    int staged = be->upload_input && t->cfg.speed.prefetch > 0;
    for (int i = 0; i < t->io.n_fields; i++) {
        const brisk_input_info *in = &t->g->inputs[t->io.input_node[i]];
        const void *src = b->fields[t->field_of_input[i]].data;
        /* on the CPU the nodes read the batch where the loader put it (it is released after the run) */
        brisk_status st = staged ? be->upload_input(be, (char *)t->ex->inputs + in->offset, src, in->bytes, err)
                                 : brisk_exec_use_input(t->ex, t->io.input_node[i], src, err);
        if (st) return st;
    }
    t->copy_s += brisk_now() - t0;
    return BRISK_OK;
}

/* forward + backward of one micro-batch, and its loss into the log */
static brisk_status micro_body(brisk_trainer *t, brisk_error *err) {
    brisk_dist_device_arm(t, 1); /* several ranks, dist.overlap: buckets on the NCCL stream */
    brisk_status st = brisk_exec_run(t->ex, BRISK_RUN_TRAIN, err);
    brisk_dist_device_arm(t, 0);
    if (!st) st = brisk_dist_device_check(t, err);
    if (!st)
        st = t->be->loss_log(t->be, t->ex->ptr[loss_node(t)], loss_width(t), 1.0f / (float)t->cfg.train.accumulate, err);
    return st;
}

/* Records body() as a program and runs it once (the capture itself runs nothing). When
 * recording fails (the backend discards what it had), the run goes on eagerly: this step
 * runs body() as is and later steps are not captured; the log and the report say why. */
static brisk_status capture(brisk_trainer *t, brisk_status (*body)(brisk_trainer *, const brisk_optim_args *,
                                                                     brisk_error *),
                            const brisk_optim_args *a, int *program, brisk_error *err) {
    brisk_backend *be = t->be;
    brisk_error ce = {0}, e2;
    brisk_status st = be->capture_begin(be, &ce);
    if (!st) {
        st = body(t, a, &ce);
        brisk_status end = be->capture_end(be, program, st ? &e2 : &ce);
        if (!st) st = end;
    }
    if (!st) return be->replay(be, *program, err);
    *program = -1;
    t->graph = 0;
    snprintf(t->graph_off, sizeof t->graph_off, "capture failed at step %lld; eager", (long long)t->step + 1);
    brisk_log(&t->log, BRISK_LOG_WARN, "step %lld: recording the step as a CUDA graph failed (%s); this run goes on "
              "eagerly, without CUDA graphs", (long long)t->step + 1, ce.msg);
    return body(t, a, err);
}

static brisk_status body_micro(brisk_trainer *t, const brisk_optim_args *a, brisk_error *err) {
    (void)a;
    return micro_body(t, err);
}

static brisk_status body_update(brisk_trainer *t, const brisk_optim_args *a, brisk_error *err) {
    if (t->shard_bounds) return brisk_dist_device_shard_update(t, a, err); /* ZeRO-1 */
    brisk_status st = brisk_dist_device_reduce(t, err); /* several ranks: NCCL, on the stream */
    return st ? st : brisk_optimizer_step(&t->opt, a->t, a->lr, t->cfg.train.accumulate, err);
}

static brisk_status body_step(brisk_trainer *t, const brisk_optim_args *a, brisk_error *err) {
    brisk_status st = micro_body(t, err);
    return st ? st : body_update(t, a, err);
}

brisk_status brisk_step_capture_kernels(brisk_trainer *t, int *kernels, int *program_out, brisk_error *err) {
    *kernels = -1;
    *program_out = -1;
    brisk_backend *be = t->be;
    if (!be->capture_begin || !be->capture_end || !be->set_values || !on_device(t)) return BRISK_OK;
    const int K = t->cfg.train.accumulate;
    brisk_optim_args a = brisk_optimizer_args(&t->opt, t->step + 1, 0.0f, K);
    int counts[2] = {0, 0};
    for (int pass = 0; pass < (K > 1 ? 2 : 1); pass++) { /* the whole step; with K > 1 also a micro-step */
        brisk_error ce = {0};
        int program = -1;
        brisk_status st = be->set_values(be, &t->cur, &a, err);
        if (st || (st = be->capture_begin(be, err))) return st;
        st = pass == 0 ? body_step(t, &a, &ce) : micro_body(t, &ce);
        brisk_status end = be->capture_end(be, &program, st ? &(brisk_error){0} : &ce);
        if (st || end) return brisk_errorf(err, st ? st : end, "capturing a step to count its kernels: %s", ce.msg);
        if ((counts[pass] = brisk_cuda_program_kernels(be, program)) < 0) return BRISK_OK;
        if (pass == 0) *program_out = program;
    }
    *kernels = counts[0] + (K - 1) * counts[1];
    return BRISK_OK;
}

brisk_status brisk_step_begin(brisk_trainer *t, brisk_error *err) {
    return t->dev_clock ? t->be->step_mark(t->be, (uint32_t)t->step, 0, err) : BRISK_OK;
}

brisk_status brisk_step_micro(brisk_trainer *t, const brisk_batch *b, int micro, brisk_error *err) {
    const int K = t->cfg.train.accumulate;
    t->cur = (brisk_step_state){.seed = t->cfg.train.seed, .rng_step = (uint32_t)(t->step * K + micro),
                                .first_micro = micro == 0, .training = 1, .loss_slot = (uint32_t)t->step,
                                .rng_shard = (uint32_t)t->rank};
    t->ex->step = t->cur;
    brisk_status st = feed(t, b, err);
    if (st) return st;
    if (!on_device(t)) {
        float v[BRISK_LOSS_LOG_WIDTH] = {0};
        brisk_dist_overlap_begin_step(t, micro);
        st = brisk_exec_run(t->ex, BRISK_RUN_TRAIN, err);
        brisk_exec_release_inputs(t->ex); /* the batch goes back to the loader after this */
        if (st || (st = brisk_exec_read(t->ex, loss_node(t), v, err))) {
            brisk_dist_overlap_finish(t, 1, err);
            return st;
        }
        t->micro_loss = micro ? t->micro_loss + v[0] : v[0];
        for (int k = 0; k < t->io.n_loss_terms; k++) t->micro_terms[k] = micro ? t->micro_terms[k] + v[k + 1] : v[k + 1];
        return BRISK_OK;
    }
    brisk_backend *be = t->be;
    int capture_now = t->graph && !t->programs_ready && t->eager_steps >= 1;
    if (K == 1 && (t->programs_ready || capture_now)) return BRISK_OK; /* update() runs the whole step */
    if (t->programs_ready) {
        if ((st = be->set_values(be, &t->cur, NULL, err))) return st;
        return be->replay(be, t->prog_step, err);
    }
    if (capture_now && micro == 0) {
        if ((st = be->set_values(be, &t->cur, NULL, err))) return st;
        return capture(t, body_micro, NULL, &t->prog_step, err);
    }
    if (capture_now) { /* later micro-batches of the capturing step replay what micro 0 recorded */
        if ((st = be->set_values(be, &t->cur, NULL, err))) return st;
        return be->replay(be, t->prog_step, err);
    }
    return micro_body(t, err);
}

int brisk_step_cuttable(const brisk_trainer *t) { return !on_device(t) && !t->prof; }

brisk_status brisk_step_update(brisk_trainer *t, float lr, brisk_error *err) {
    const int K = t->cfg.train.accumulate;
    brisk_backend *be = t->be;
    brisk_status st;
    if (!on_device(t)) {
        float loss = (float)(t->micro_loss / K), terms[BRISK_LOSS_LOG_WIDTH];
        for (int k = 0; k < t->io.n_loss_terms; k++) terms[k] = (float)(t->micro_terms[k] / K);
        /* the overlapped all-reduce done before the next collective (MPI_THREAD_SERIALIZED) */
        if ((st = brisk_dist_overlap_finish(t, 0, err))) return st;
        if ((st = brisk_dist_agree(t, &loss, err))) return st; /* every rank sees the mean loss */
        /* a stop asked for on any rank abandons the step, on every rank alike: the parameters,
         * moments and loss log stay those of the last completed step, which the checkpoint
         * then holds (and a resumed run repeats this one exactly) */
        int stop = t->world > 1 ? t->agreed_stop : brisk_trainer_stop_asked(t);
        if (stop) {
            t->grads_averaged = 0; /* averaged during backward (dist.overlap), never applied */
            t->step_abandoned = stop;
            return BRISK_OK;
        }
        if (!isfinite(loss)) { /* stop, or skip the update within train.skip_nan_steps */
            if ((st = brisk_numeric_bad_loss(t, loss, err))) return st;
            return brisk_trainer_push_loss(t, loss, terms, err);
        }
        if ((st = brisk_dist_step_update(t, lr, K, err))) return st;
        return brisk_trainer_push_loss(t, loss, terms, err);
    }
    brisk_optim_args a = brisk_optimizer_args(&t->opt, t->step + 1, lr, K);
    int capture_now = t->graph && !t->programs_ready && t->eager_steps >= 1;
    if (t->programs_ready) {
        if ((st = be->set_values(be, K == 1 ? &t->cur : NULL, &a, err)) ||
            (st = be->replay(be, K == 1 ? t->prog_step : t->prog_update, err)))
            return st;
    } else if (capture_now) {
        if ((st = be->set_values(be, K == 1 ? &t->cur : NULL, &a, err))) return st;
        st = K == 1 ? capture(t, body_step, &a, &t->prog_step, err) : capture(t, body_update, &a, &t->prog_update, err);
        if (st) return st;
        if (t->graph) t->programs_ready = 1;
        else t->eager_steps++;
    } else {
        if ((st = body_update(t, &a, err))) return st;
        t->eager_steps++;
    }
    if (t->dev_clock && (st = be->step_mark(be, (uint32_t)t->step, 1, err))) return st;
    /* several ranks: agree on stopping and timed checkpoints (host values only; each rank's
     * progress line shows its own loss on a device) */
    float no_loss = 0;
    if ((st = brisk_dist_agree(t, &no_loss, err))) return st;
    /* the log holds loss_log_size steps: read it well before it wraps */
    if (++t->loss_pending >= be->loss_log_size / 2) return brisk_step_flush(t, err);
    return BRISK_OK;
}

/* the device's times of the n steps from loss_first, after loss_read waited for them */
static brisk_status read_step_times(brisk_trainer *t, int n, brisk_error *err) {
    brisk_status st = reserve((void **)&t->dev_ms, &t->cap_dev_ms, t->n_dev_ms + n, sizeof *t->dev_ms, err);
    if (st) return st;
    st = t->be->step_times(t->be, (uint32_t)t->loss_first, n, t->dev_ms + t->n_dev_ms, err);
    if (!st) t->n_dev_ms += n;
    return st;
}

brisk_status brisk_step_flush(brisk_trainer *t, brisk_error *err) {
    if (!on_device(t) || t->loss_pending == 0) return BRISK_OK;
    int n = t->loss_pending, w = loss_width(t);
    float *all = malloc(sizeof(float) * (size_t)n * (size_t)w), buf[BRISK_LOSS_LOG_WIDTH];
    if (!all) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    brisk_status st = t->be->loss_read(t->be, (uint32_t)t->loss_first, n, w, all, err);
    if (!st && t->dev_clock) st = read_step_times(t, n, err);
    for (int i = 0; i < n && !st; i++) {
        memcpy(buf, all + (size_t)i * w, (size_t)w * sizeof(float)); /* buf[0] the loss, then its terms */
        if (isfinite(buf[0])) {
            st = brisk_trainer_push_loss(t, buf[0], buf + 1, err);
        } else if (t->opt.skip_nonfinite) {
            /* the device skipped that update itself (its gradients were not finite, on any
             * precision): count it against train.skip_nan_steps, naming its step */
            int64_t now = t->step;
            t->step = t->loss_first + i;
            st = brisk_numeric_bad_loss(t, buf[0], err);
            t->step = now;
            if (!st) st = brisk_trainer_push_loss(t, buf[0], buf + 1, err);
        } else {
            /* without train.skip_nan_steps the device applied it: stop at this step */
            st = nonfinite(t, t->loss_first + i + 1, buf[0], err);
        }
    }
    free(all);
    if (st) return st;
    t->loss_first += n;
    t->loss_pending = 0;
    return BRISK_OK;
}
