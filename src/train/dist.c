/* Data-parallel training (DESIGN.md, "Distributed"): every rank holds the whole model, takes
 * its slice of each global batch (the loader's shard), and the gradients are averaged over
 * the ranks before the update, so N ranks of batch B step exactly as one process of batch
 * N*B would (up to the order of float sums). Rank 0 alone writes checkpoints and metrics.
 *
 * CPU: the gradient arena is all-reduced in buckets (dist.bucket_mb, planned over the
 * parameter table from the last tensor backwards). dist.overlap on: a communication thread
 * (src/dist/overlap.c) reduces each bucket as soon as the executor's gradient hook says
 * backward has written it for the last time, while backward goes on; off: all buckets in
 * flight at once after the backward pass. The same sums either way (tested bit for bit).
 *
 * ZeRO-1 (dist.shard_optimizer): gradients reduce-scattered, each rank updates its shard of
 * the parameters with its shard of the moments, the parameters all-gathered. Elementwise
 * updates of the same averaged gradients: the result equals the unsharded run. On a device
 * the backend's grad_reduce_scatter and param_all_gather (NCCL) take brisk_dist_shard's
 * shards, issued on its stream around the shard's fused update and captured with the step;
 * checkpoints gather the moments as on the CPU (download, then MPI); bf16/fp16: each rank's
 * update writes its shard's 16-bit copy, the all-gather casts the others', and the fp16 loss
 * scaler decides by the all-reduced norm, alike on every rank. Never run on a GPU. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

/* comm_init's transport: rank 0's id to every rank, over MPI */
static brisk_status share_id(void *user, void *buf, size_t bytes, brisk_error *err) {
    return brisk_dist_broadcast(user, buf, bytes, "device communicator id broadcast", err);
}

/* ZeRO-1 on a device: what it cannot do, refused before the first step. The gradient norm
 * (clipping, the inf/NaN skip, the fp16 loss scaler's overflow check) needs the backend to
 * sum the shards' sums of squares, else ranks would clip by different norms or disagree on
 * a skip. Any precision: bf16/fp16 parameters keep their 16-bit copy current per shard (the
 * backend's all-gather). Sets t->shard_norm: whether each step sums that norm. */
brisk_status brisk_dist_device_shard_check(brisk_trainer *t, brisk_error *err) {
    t->shard_norm = 0;
    if (!t->cfg.dist.shard_optimizer) return BRISK_OK;
    if (!t->be->grad_reduce_scatter || !t->be->param_all_gather)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: dist.shard_optimizer on the %s backend, which offers no "
                            "reduce-scatter and all-gather", t->cfg.path, t->be->name);
    /* the scaler is the backend's (fp16, explicit or what auto chose), known once prepared */
    brisk_scaler_state sc = {0};
    brisk_status st = t->be->scaler_get ? t->be->scaler_get(t->be, &sc, err) : BRISK_OK;
    if (st) return brisk_error_prefix(err, "%s: dist.shard_optimizer", t->cfg.path);
    const char *why = brisk_dist_shard_norm_need(t->cfg.optim.clip_norm, t->opt.skip_nonfinite, sc.active);
    if (why && !t->be->grad_sumsq_allreduce)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: dist.shard_optimizer with %s on the %s backend, which "
                            "cannot sum the gradient norm over the shards", t->cfg.path, why, t->be->name);
    t->shard_norm = why != NULL;
    return BRISK_OK;
}

const char *brisk_dist_shard_norm_need(float clip_norm, int skip_nonfinite, int loss_scaler) {
    return clip_norm > 0 ? "optim.clip_norm"
           : skip_nonfinite ? "train.skip_nan_steps"
           : loss_scaler    ? "the fp16 loss scaler"
                            : NULL;
}

brisk_status brisk_dist_device_shard_update(brisk_trainer *t, const brisk_optim_args *a, brisk_error *err) {
    brisk_backend *be = t->be;
    brisk_status st = be->grad_reduce_scatter(be, t->ex->grads, t->shard_bounds, err);
    /* clipping, the inf/NaN skip and the loss scaler by the whole gradient's norm: the
     * shards' sums, summed (the unscaling itself is the update's, per shard) */
    if (!st && (t->shard_norm || t->opt.spec.clip_norm > 0 || t->opt.skip_nonfinite) &&
        !(st = be->grad_sumsq(be, (float *)t->ex->grads + t->shard_off, t->shard_n, t->opt.sumsq, err)))
        st = be->grad_sumsq_allreduce(be, err);
    if (!st) st = brisk_optimizer_update_range(&t->opt, a->t, a->lr, t->cfg.train.accumulate, t->shard_off, t->shard_n,
                                               err);
    return st ? st : be->param_all_gather(be, t->ex->params, t->shard_bounds, err);
}

brisk_status brisk_dist_device_reduce(brisk_trainer *t, brisk_error *err) {
    if (t->world == 1) return BRISK_OK;
    if (t->device_overlap) return t->be->grad_buckets_join(t->be, err); /* issued during backward */
    return t->be->grad_allreduce(t->be, t->ex->grads, t->g->n_param_floats,
                                 brisk_dist_bucket_bytes(t->dist) / (int64_t)sizeof(float), err);
}

int64_t brisk_trainer_global_batch(const brisk_trainer *t) {
    return t->cfg.train.batch_size * (t->data_shards > 1 ? t->data_shards : 1);
}

static void grads_ready(void *user, int n_complete) { brisk_dist_overlap_ready(user, n_complete); }

/* device: each completed bucket's all-reduce issued on the backend's communication stream */
static void device_grads_ready(void *user, int n_complete) {
    brisk_trainer *t = user;
    brisk_backend *be = t->be;
    for (; t->overlap_told < n_complete && !t->overlap_err.code; t->overlap_told++) {
        const brisk_dist_bucket *b = &t->overlap_buckets[t->overlap_told];
        be->grad_bucket_ready(be, (float *)t->ex->grads + b->offset, b->count, &t->overlap_err);
    }
}

void brisk_dist_device_arm(brisk_trainer *t, int armed) {
    if (!t->device_overlap) return;
    if (armed) t->overlap_told = 0, t->overlap_err = (brisk_error){0};
    brisk_exec_arm_grad_hook(t->ex, armed);
}

brisk_status brisk_dist_device_check(brisk_trainer *t, brisk_error *err) {
    if (!t->device_overlap || !t->overlap_err.code) return BRISK_OK;
    *err = t->overlap_err;
    return err->code;
}

/* dist.overlap: the communication thread, fed by the executor's gradient hook with the
 * buckets in the order backward completes them. Not for ZeRO-1 (a reduce-scatter of the
 * whole arena) nor a device backend (NCCL on its stream). */
static brisk_status setup_overlap(brisk_trainer *t, const char **why, brisk_error *err) {
    brisk_overlap_mode mode = t->cfg.dist.overlap;
    int device = t->be->loss_log != NULL;
    *why = NULL;
    /* auto: on a device after backward until the NCCL stream path has run on several GPUs
     * (it never has). On the CPU timed per run: MPI's shared-memory all-reduce is CPU work, and
     * on the 2-core machine idle after backward was faster (tabular 4.8 vs 5.3-5.6 ms/step,
     * diffusion 1.2 vs 1.9-2.1), loaded overlapped was (tabular 7 vs 21): bench/DIST_NOTES.md */
    if (mode == BRISK_OVERLAP_AUTO && device) return (*why = "after backward (dist.overlap auto on a GPU)", BRISK_OK);
    if (mode == BRISK_OVERLAP_AUTO) t->trial = 1, t->trial_step = -3; /* warm-up steps before the timed ones */
    if (mode == BRISK_OVERLAP_OFF) return (*why = "after backward (dist.overlap off)", BRISK_OK);
    if (t->shard) return (*why = "after backward (ZeRO-1 reduce-scatters the whole arena)", BRISK_OK);
    if (device && (!t->be->grad_bucket_ready || !t->be->grad_buckets_join))
        return (*why = "after backward (the backend offers no overlap)", BRISK_OK);
    /* accumulation replays one micro-step program K times: only its last backward may start
     * the buckets, so the device overlaps at accumulate 1 only */
    if (device && t->cfg.train.accumulate > 1)
        return (*why = "after backward (train.accumulate > 1 on a device)", BRISK_OK);
    if (!device && !brisk_dist_can_overlap(t->dist))
        return (*why = "after backward (MPI granted less than MPI_THREAD_SERIALIZED)", BRISK_OK);
    int nb = (int)t->n_buckets;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(nb + 1)), *cnt = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    int *order = malloc(sizeof(int) * (size_t)(nb + 1));
    brisk_dist_bucket *sorted = malloc(sizeof *sorted * (size_t)(nb + 1));
    brisk_status st = off && cnt && order && sorted ? BRISK_OK : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int b = 0; b < nb && !st; b++) off[b] = t->buckets[b].offset, cnt[b] = t->buckets[b].count;
    if (!st) st = brisk_exec_set_grad_hook(t->ex, off, cnt, nb, order, device ? device_grads_ready : grads_ready,
                                           t, err);
    for (int b = 0; b < nb && !st; b++) sorted[b] = t->buckets[order[b]];
    if (!st && device) {
        t->overlap_buckets = sorted, sorted = NULL;
        t->device_overlap = 1;
    }
    if (!st && !device) st = brisk_dist_overlap_create(t->dist, t->ex->grads, t->g->n_param_floats, sorted, nb, &t->overlap, err);
    if (!st && !device) t->ex->grad_user = t->overlap;
    free(off), free(cnt), free(order), free(sorted);
    return st;
}

void brisk_dist_overlap_begin_step(brisk_trainer *t, int micro) {
    int last = micro == t->cfg.train.accumulate - 1;
    /* the trial's odd steps reduce after backward */
    int timed = t->overlap && t->trial && t->trial_step >= 0;
    t->overlap_now = t->overlap && last && !(timed && t->trial_step % 2);
    if (last && timed) t->trial_t0 = brisk_now();
    brisk_exec_arm_grad_hook(t->ex, t->overlap_now);
    if (t->overlap_now) brisk_dist_overlap_begin(t->overlap, "gradient all-reduce", t->step + 1);
}

/* dist.overlap auto: the last micro-batch's forward and backward plus the all-reduce timed,
 * overlapped and not in turn; once both have BRISK_OVERLAP_TRIAL steps, every rank keeps the
 * mode with the smaller mean of the ranks' medians (a collective: same step on every rank) */
static brisk_status overlap_trial(brisk_trainer *t, int64_t step, brisk_error *err) {
    if (!t->overlap || !t->trial) return BRISK_OK;
    if (t->trial_step < 0) return (t->trial_step++, BRISK_OK);
    int mode = t->trial_step % 2;
    if (t->trial_n[mode] < BRISK_OVERLAP_TRIAL) t->trial_ms[mode][t->trial_n[mode]++] = 1e3 * (brisk_now() - t->trial_t0);
    t->trial_step++;
    if (t->trial_n[0] < BRISK_OVERLAP_TRIAL || t->trial_n[1] < BRISK_OVERLAP_TRIAL) return BRISK_OK;
    t->trial = 0;
    double med[2];
    for (int m = 0; m < 2; m++) med[m] = brisk_median(t->trial_ms[m], BRISK_OVERLAP_TRIAL);
    brisk_status st = brisk_dist_allreduce_sum(t->dist, med, 2, "dist.overlap trial", step, err);
    if (st) return st;
    int keep = med[0] <= med[1];
    brisk_log(&t->log, BRISK_LOG_INFO, "dist      all-reduce %s: %.3f ms overlapped vs %.3f ms after backward "
              "(dist.overlap auto: median of %d steps each, mean of the ranks)", keep ? "overlapped with backward"
              : "after backward", med[0] / t->world, med[1] / t->world, BRISK_OVERLAP_TRIAL);
    if (!keep) {
        brisk_dist_overlap_free(t->overlap);
        t->overlap = NULL, t->ex->grad_user = NULL;
    }
    return BRISK_OK;
}

void brisk_dist_overlap_stand_in(brisk_trainer *t) {
    brisk_dist_overlap_begin_step(t, t->cfg.train.accumulate - 1);
    if (t->overlap_now) brisk_dist_overlap_ready(t->overlap, t->n_buckets);
}

brisk_status brisk_dist_overlap_finish(brisk_trainer *t, int failed, brisk_error *err) {
    if (!t->overlap_now) return BRISK_OK;
    t->overlap_now = 0;
    brisk_exec_arm_grad_hook(t->ex, 0);
    int reduced = 0;
    brisk_error e2 = {0};
    brisk_status st = brisk_dist_overlap_end(t->overlap, failed, &reduced, failed ? &e2 : err);
    t->grads_averaged = reduced;
    if (reduced) {
        double comm = 0, hidden = 0;
        brisk_dist_overlap_times(t->overlap, &comm, &hidden);
        t->overlap_comm_s += comm, t->overlap_hidden_s += hidden, t->overlap_steps++;
    }
    return failed ? BRISK_OK : st;
}

/* The gradient arena's buckets at bucket_bytes, as the all-reduce sends them. */
static brisk_status plan_buckets(const brisk_graph *g, int64_t bucket_bytes, brisk_dist_bucket **out, int64_t *n,
                                 brisk_error *err) {
    *out = NULL, *n = 0;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(g->n_params + 1)), *len = malloc(sizeof(int64_t) * (size_t)(g->n_params + 1));
    if (!off || !len) {
        free(off), free(len);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_params; i++) off[i] = g->params[i].offset, len[i] = g->params[i].numel;
    int64_t nb = brisk_dist_plan_buckets(off, len, g->n_params, bucket_bytes, NULL, 0);
    *out = malloc(sizeof **out * (size_t)(nb + 1));
    if (*out) *n = brisk_dist_plan_buckets(off, len, g->n_params, bucket_bytes, *out, nb);
    free(off), free(len);
    return *out ? BRISK_OK : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
}

double brisk_dist_ring_bytes(double bytes, int world) {
    return world > 1 ? bytes * 2.0 * (world - 1) / world : 0.0;
}

brisk_status brisk_trainer_dist_plan(const brisk_trainer *t, int world, brisk_dist_plan_info *p, brisk_error *err) {
    memset(p, 0, sizeof *p);
    if (world < 1) return brisk_errorf(err, BRISK_ERR_INVALID, "dist plan: world size %d; expected at least 1", world);
    int64_t bucket = (int64_t)(t->cfg.dist.bucket_mb * 1048576.0);
    p->world = world;
    p->bucket_bytes = bucket > 4 ? bucket : 4; /* as brisk_dist_set_bucket_bytes takes it */
    p->grad_bytes = t->g->n_param_floats * (int64_t)sizeof(float);
    brisk_dist_bucket *b = NULL;
    brisk_status st = plan_buckets(t->g, p->bucket_bytes, &b, &p->n_buckets, err);
    if (st) return st;
    for (int64_t i = 0; i < p->n_buckets; i++) {
        int64_t bytes = b[i].count * (int64_t)sizeof(float);
        if (i == 0 || bytes < p->min_bucket_bytes) p->min_bucket_bytes = bytes;
        if (bytes > p->max_bucket_bytes) p->max_bucket_bytes = bytes;
    }
    free(b);
    p->collectives_per_step = world > 1 ? p->n_buckets : 0;
    p->ring_bytes_per_rank = brisk_dist_ring_bytes((double)p->grad_bytes, world);
    return BRISK_OK;
}

brisk_status brisk_trainer_set_dist(brisk_trainer *t, brisk_dist *d, int own_data, brisk_error *err) {
    t->dist = d;
    t->world = brisk_dist_world(d);
    t->rank = brisk_dist_rank(d);
    t->own_data = own_data;
    /* data.shard_files: every rank loaded its own rows, so it draws whole batches from them */
    t->data_shards = own_data || t->data_sharded ? 1 : t->world;
    if (t->data_sharded && (t->cfg.data.shard_world != t->world || t->cfg.data.shard_rank != t->rank))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: data.shard_files loaded the rows of rank %d of %d, but the "
                            "process group makes this rank %d of %d", t->cfg.path, t->cfg.data.shard_rank,
                            t->cfg.data.shard_world, t->rank, t->world);
    free(t->buckets);
    t->buckets = NULL;
    t->n_buckets = 0;
    brisk_dist_overlap_free(t->overlap);
    t->overlap = NULL;
    t->grads_averaged = 0;
    free(t->overlap_buckets);
    t->overlap_buckets = NULL;
    t->device_overlap = 0;
    t->shard = 0;
    free(t->shard_bounds);
    t->shard_bounds = NULL;
    if (t->world == 1) return BRISK_OK;
    /* first: every rank meets it, before anything a rank that differs would do alone */
    brisk_dist_set_timeout(d, t->cfg.dist.timeout_s);
    brisk_status st0 = brisk_dist_check_setup(t, err);
    if (st0) return st0;
    if (t->be->loss_log) { /* a device backend: it reduces its own gradients (NCCL) */
        if (!t->be->comm_init || !t->be->grad_allreduce)
            return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: %d ranks on the %s backend, which has no collectives; "
                                "train with --device cpu (MPI)", t->cfg.path, t->world, t->be->name);
        if ((st0 = brisk_dist_device_shard_check(t, err))) return st0;
        brisk_status st = t->be->comm_init(t->be, t->rank, t->world, share_id, d, err);
        if (st) return brisk_error_prefix(err, "%s: rank %d of %d", t->cfg.path, t->rank, t->world);
    }
    if (own_data && t->cfg.train.checkpoint_epochs > 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: train.checkpoint_epochs %d with %d ranks training on their own "
                            "data: their epochs end at different steps; use train.checkpoint_every", t->cfg.path,
                            t->cfg.train.checkpoint_epochs, t->world);
    brisk_dist_set_bucket_bytes(d, (int64_t)(t->cfg.dist.bucket_mb * 1048576.0));
    const brisk_graph *g = t->g;
    brisk_status bs = plan_buckets(g, brisk_dist_bucket_bytes(d), &t->buckets, &t->n_buckets, err);
    if (bs) return bs;
    t->shard = t->cfg.dist.shard_optimizer;
    brisk_dist_shard(g->n_param_floats, t->world, t->rank, &t->shard_off, &t->shard_n);
    if (t->shard && own_data)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: dist.shard_optimizer in a session: its checkpoints "
                            "(brisk_session_save on any rank) need every rank's moments", t->cfg.path);
    /* ZeRO-1: this rank keeps the moments of its shard only */
    if (t->shard && t->step > 0)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: the process group must be set before resuming", t->cfg.path);
    brisk_status ss = t->shard ? brisk_exec_shard_moments(t->ex, t->shard_off, t->shard_n, err) : BRISK_OK;
    if (ss) return ss;
    if (t->shard && t->be->loss_log) { /* the device's collectives take every rank's shard */
        if (!(t->shard_bounds = malloc(sizeof(int64_t) * (size_t)(t->world + 1))))
            return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory planning the optimizer shards");
        brisk_dist_shard_bounds(g->n_param_floats, t->world, t->shard_bounds);
    }
    const char *after = NULL;
    if ((ss = setup_overlap(t, &after, err))) return ss;
    char reduce_txt[160];
    snprintf(reduce_txt, sizeof reduce_txt, "%s",
             t->overlap && t->trial ? "overlapped with backward or after it, whichever the first steps time faster"
             : t->overlap           ? "overlapped with backward (a communication thread)"
             : t->device_overlap ? "overlapped with backward (NCCL on its own stream)"
             : after             ? after
                                 : "after backward");
    /* the batches an epoch has at the global batch, and the run's length */
    int64_t G = brisk_trainer_global_batch(t);
    if (t->split.ntrain > 0) {
        t->batches_per_epoch = t->split.ntrain / G;
        if (t->batches_per_epoch == 0)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: train.batch_size %lld on %d ranks is a global batch of %lld, "
                                "but the training split has only %lld samples", t->cfg.path,
                                (long long)t->cfg.train.batch_size, t->world, (long long)G, (long long)t->split.ntrain);
        brisk_trainer_plan_length(t);
    }
    int64_t dropped = t->split.ntrain - t->batches_per_epoch * G;
    char shard_txt[160] = "replicated";
    if (t->shard)
        snprintf(shard_txt, sizeof shard_txt, "sharded (ZeRO-1: reduce-scatter, shard update, all-gather; moments %.2f "
                 "of %.2f MiB on this rank)", 8.0 * (double)t->shard_n / 1048576.0,
                 8.0 * (double)g->n_param_floats / 1048576.0);
    if (own_data)
        brisk_log(&t->log, BRISK_LOG_INFO, "dist      rank %d of %d (%s): each rank trains on its own samples, batches of "
                  "%lld; gradients averaged over the ranks in %lld bucket%s, %s; optimizer %s", t->rank, t->world,
                  brisk_dist_source(d), (long long)t->cfg.train.batch_size, (long long)t->n_buckets,
                  t->n_buckets == 1 ? "" : "s", reduce_txt, t->shard ? "sharded (ZeRO-1)" : "replicated");
    if (own_data) return BRISK_OK;
    brisk_log(&t->log, BRISK_LOG_INFO,
              "dist      rank %d of %d (%s), local rank %d; global batch %lld = %d x %lld; gradients all-reduced in "
              "%lld bucket%s of >= %.3g MiB (MPI), %s; optimizer %s; collective timeout %g s",
              t->rank, t->world, brisk_dist_source(d), brisk_dist_local_rank(d), (long long)G * t->world / t->data_shards, t->world,
              (long long)t->cfg.train.batch_size, (long long)t->n_buckets, t->n_buckets == 1 ? "" : "s",
              t->cfg.dist.bucket_mb, reduce_txt, shard_txt, t->cfg.dist.timeout_s);
    if (t->data_sharded)
        brisk_log(&t->log, BRISK_LOG_INFO,
                  "sampler   data.shard_files: each rank shuffles its own %lld training samples (the same seed and epoch "
                  "on every rank) and reads whole batches of %lld from them; %lld of them dropped per epoch on each "
                  "rank, %lld on all %d (the last, incomplete batch, another part of the order each epoch); this rank "
                  "holds %lld bytes of training data", (long long)t->split.ntrain, (long long)t->cfg.train.batch_size,
                  (long long)dropped, (long long)dropped * t->world, t->world, (long long)t->shard_bytes);
    else
    brisk_log(&t->log, BRISK_LOG_INFO,
              "sampler   one shuffle per epoch on every rank; each rank reads its %lld samples of each global batch; "
              "%lld of %lld training samples dropped per epoch (the last, incomplete global batch, another part of "
              "the order each epoch)", (long long)t->cfg.train.batch_size, (long long)dropped, (long long)t->split.ntrain);
    return BRISK_OK;
}

brisk_status brisk_dist_step_update(brisk_trainer *t, float lr, int K, brisk_error *err) {
    brisk_optimizer *o = &t->opt;
    brisk_exec *ex = t->ex;
    int64_t n = t->g->n_param_floats, step = t->step + 1;
    brisk_status st;
    if (t->world == 1) return brisk_optimizer_step(o, step, lr, K, err);
    if (t->grads_averaged) { /* by the communication thread, during backward */
        t->grads_averaged = 0;
        if ((st = overlap_trial(t, step, err))) return st;
        return brisk_optimizer_step(o, step, lr, K, err);
    }
    if (!t->shard) {
        if ((st = brisk_dist_allreduce_mean(t->dist, ex->grads, n, t->buckets, t->n_buckets, "gradient all-reduce", step, err)) ||
            (st = overlap_trial(t, step, err)))
            return st;
        return brisk_optimizer_step(o, step, lr, K, err);
    }
    if ((st = brisk_dist_reduce_scatter_mean(t->dist, ex->grads, n, "gradient reduce-scatter", step, err))) return st;
    if (o->spec.clip_norm > 0) { /* the global norm: the shards' sums of squares, summed */
        brisk_backend *be = ex->be;
        float part = 0;
        if ((st = be->grad_sumsq(be, (float *)ex->grads + t->shard_off, t->shard_n, o->sumsq, err)) ||
            (st = be->download(be, &part, o->sumsq, sizeof part, err)))
            return st;
        double total = part;
        if ((st = brisk_dist_allreduce_sum(t->dist, &total, 1, "gradient norm all-reduce", step, err))) return st;
        part = (float)total;
        if ((st = be->upload(be, o->sumsq, &part, sizeof part, err))) return st;
    }
    if ((st = brisk_optimizer_update_range(o, step, lr, K, t->shard_off, t->shard_n, err))) return st;
    return brisk_dist_allgather(t->dist, ex->params, n, "parameter all-gather", step, err);
}

brisk_status brisk_dist_agree(brisk_trainer *t, float *loss, brisk_error *err) {
    if (t->world == 1) return BRISK_OK;
    int sig = brisk_trainer_stop_asked(t);
    const brisk_train_spec *tr = &t->cfg.train;
    int timed = t->rank == 0 && tr->checkpoint_minutes > 0 && t->run_dir_ready &&
                brisk_now() - t->last_save_time >= 60.0 * tr->checkpoint_minutes;
    double v[3] = {*loss, sig != 0, timed};
    brisk_status st = brisk_dist_allreduce_sum(t->dist, v, 3, "loss and stop agreement", t->step + 1, err);
    if (st) return st;
    *loss = (float)(v[0] / t->world);
    t->agreed_stop = v[1] > 0 ? (sig ? sig : SIGTERM) : 0;
    t->agreed_due = v[2] > 0;
    return BRISK_OK;
}

brisk_status brisk_dist_gather_moments(brisk_trainer *t, brisk_error *err) {
    if (t->world == 1 || !t->shard) return BRISK_OK;
    int64_t n = t->g->n_param_floats, k = t->ex->moments_n;
    if (t->rank == 0 && !t->moments_host && !(t->moments_host = malloc(sizeof(float) * (size_t)(2 * n + 1))))
        return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory gathering the optimizer moments");
    float *mine = malloc(sizeof(float) * (size_t)(2 * k + 1));
    if (!mine) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory gathering the optimizer moments");
    brisk_backend *be = t->ex->be;
    brisk_status st = be->download(be, mine, t->ex->m, (size_t)k * sizeof(float), err);
    if (!st) st = be->download(be, mine + k, t->ex->v, (size_t)k * sizeof(float), err);
    if (!st) st = brisk_dist_gather(t->dist, mine, t->moments_host, n, "optimizer moment gather", t->step, err);
    if (!st) st = brisk_dist_gather(t->dist, mine + k, t->moments_host ? t->moments_host + n : NULL, n,
                                    "optimizer moment gather", t->step, err);
    free(mine);
    return st;
}

void brisk_dist_last_checkpoint(brisk_trainer *t, brisk_error *err) {
    if (t->rank != 0) return;
    brisk_error e2 = {0};
    /* replicated: rank 0 holds the whole state of the last completed step; sharded, the
     * other ranks' moments are out of reach and the newest checkpoint is the last written */
    brisk_status st = t->shard ? BRISK_ERR_UNSUPPORTED : brisk_rotation_save(t, &e2);
    size_t len = strlen(err->msg);
    if (!st)
        snprintf(err->msg + len, sizeof err->msg - len, "; %s the checkpoint of step %lld: %s",
                 t->world > 1 ? "rank 0 wrote" : "brisk wrote", (long long)t->step, t->last_ckpt);
    else if (t->last_ckpt[0])
        snprintf(err->msg + len, sizeof err->msg - len, "; the last good checkpoint is %s (step %lld)", t->last_ckpt,
                 (long long)t->last_ckpt_step);
    else
        snprintf(err->msg + len, sizeof err->msg - len, "; no checkpoint was written");
}
