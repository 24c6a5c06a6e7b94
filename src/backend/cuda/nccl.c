/* Data parallel on GPUs: the gradient all-reduce over NCCL, loaded at run time (dlopen
 * libnccl.so.2, like cuDNN and NVML: a machine without it still runs one GPU). One
 * communicator per backend, joined with an id that rank 0 makes and the caller's transport
 * (MPI, src/dist) hands to every rank. The all-reduce is enqueued on the compute stream after
 * the backward pass already issued (ncclAvg: the mean, in place), grouped so the buckets go
 * out as one launch; being stream-ordered, it is captured into the step's CUDA graph like
 * the rest (NCCL >= 2.9 supports capture).
 *
 * Overlapped with backward (dist.overlap, cuda_grad_bucket_ready): each bucket's all-reduce
 * goes on a stream of its own, made to wait for an event recorded on the compute stream right
 * after the bucket's last producer was issued, so backward's later kernels run while it
 * moves; cuda_grad_buckets_join records the NCCL stream's completion and the compute stream
 * (the optimizer) waits for it. Event record and wait across streams are legal inside a
 * stream capture (the NCCL stream joins the capture through the first wait and leaves it at
 * the join), and NCCL >= 2.9 supports capture, so the same code runs eagerly and in the step's
 * CUDA graph. One event serves every bucket: a wait takes the event's state at the call.
 *
 * Unverified on a GPU: this project's sessions had no machine with two GPUs, and one GPU
 * never calls it (no collective at world size 1): none of this file has ever run. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define BRISK_NCCL_H 1
#else
#define BRISK_NCCL_H 0
#endif

#if BRISK_NCCL_H
#define NCCL_FNS(X)                                                                                        \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)           \
    X(ncclAllReduce) X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetErrorString) X(ncclReduceScatter)         \
    X(ncclAllGather) X(ncclReduce) X(ncclBroadcast)

static struct {
#define NCCL_FIELD(f) __typeof__(&f) f;
    NCCL_FNS(NCCL_FIELD)
#undef NCCL_FIELD
    int loaded;
    char missing[256];
} nc;
static pthread_once_t nc_once = PTHREAD_ONCE_INIT;

static void nc_load(void) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(nc.missing, sizeof nc.missing, "several GPUs need NCCL 2 (libnccl.so.2 not found: %s)",
                 e ? e : "dlopen failed");
        return;
    }
#define NCCL_LOAD(f)                                                                                   \
    if (!(nc.f = (__typeof__(nc.f))dlsym(h, #f))) {                                                    \
        snprintf(nc.missing, sizeof nc.missing, "several GPUs need NCCL 2 (libnccl.so.2 lacks %s)", #f); \
        dlclose(h);                                                                                    \
        return;                                                                                        \
    }
    NCCL_FNS(NCCL_LOAD)
#undef NCCL_LOAD
    int v = 0;
    if (nc.ncclGetVersion(&v) != ncclSuccess || v < 21000) { /* ncclAvg came with 2.10 */
        snprintf(nc.missing, sizeof nc.missing, "several GPUs need NCCL 2.10 or newer (libnccl.so.2 is %d)", v);
        dlclose(h);
        return;
    }
    nc.loaded = 1;
}

#define NC(call, what)                                                                                    \
    do {                                                                                                  \
        ncclResult_t r_ = (call);                                                                         \
        if (r_ != ncclSuccess)                                                                            \
            return brisk_errorf(err, BRISK_ERR_IO, "cuda: NCCL %s failed: %s", (what), nc.ncclGetErrorString(r_)); \
    } while (0)

brisk_status cuda_comm_init(brisk_backend *be, int rank, int world,
                            brisk_status (*share)(void *user, void *buf, size_t bytes, brisk_error *err), void *user,
                            brisk_error *err) {
    cuda_backend *cb = be->impl;
    pthread_once(&nc_once, nc_load);
    if (!nc.loaded) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: %s", nc.missing);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) NC(nc.ncclGetUniqueId(&id), "ncclGetUniqueId");
    brisk_status st = share(user, &id, sizeof id, err);
    if (st) return st;
    cuda_use_device(cb);
    ncclComm_t comm;
    NC(nc.ncclCommInitRank(&comm, world, id, rank), "ncclCommInitRank");
    cb->nccl_comm = comm;
    cb->nccl_rank = rank, cb->nccl_world = world;
    CU(cudaStreamCreateWithFlags(&cb->nccl_stream, cudaStreamNonBlocking), "NCCL stream");
    CU(cudaEventCreateWithFlags(&cb->nccl_ready, cudaEventDisableTiming), "NCCL bucket event");
    CU(cudaEventCreateWithFlags(&cb->nccl_done, cudaEventDisableTiming), "NCCL completion event");
    return BRISK_OK;
}

brisk_status cuda_grad_bucket_ready(brisk_backend *be, float *g, int64_t count, brisk_error *err) {
    cuda_backend *cb = be->impl;
    if (!cb->nccl_comm || !cb->nccl_stream)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: gradient bucket all-reduce before comm_init");
    CU(cudaEventRecord(cb->nccl_ready, cb->compute), "gradient bucket event");
    CU(cudaStreamWaitEvent(cb->nccl_stream, cb->nccl_ready, 0), "NCCL stream wait");
    NC(nc.ncclAllReduce(g, g, (size_t)count, ncclFloat32, ncclAvg, (ncclComm_t)cb->nccl_comm, cb->nccl_stream),
       "all-reduce of a gradient bucket");
    return BRISK_OK;
}

brisk_status cuda_grad_buckets_join(brisk_backend *be, brisk_error *err) {
    cuda_backend *cb = be->impl;
    if (!cb->nccl_stream) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: gradient join before comm_init");
    CU(cudaEventRecord(cb->nccl_done, cb->nccl_stream), "NCCL completion event");
    CU(cudaStreamWaitEvent(cb->compute, cb->nccl_done, 0), "wait for the gradient all-reduce");
    return BRISK_OK;
}

brisk_status cuda_grad_allreduce(brisk_backend *be, float *g, int64_t n, int64_t bucket_floats, brisk_error *err) {
    cuda_backend *cb = be->impl;
    if (!cb->nccl_comm) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: gradient all-reduce before comm_init");
    if (bucket_floats < 1) bucket_floats = n;
    NC(nc.ncclGroupStart(), "ncclGroupStart");
    for (int64_t off = 0; off < n; off += bucket_floats) {
        size_t cnt = (size_t)(n - off < bucket_floats ? n - off : bucket_floats);
        ncclResult_t r = nc.ncclAllReduce(g + off, g + off, cnt, ncclFloat32, ncclAvg, (ncclComm_t)cb->nccl_comm,
                                          cb->compute);
        if (r != ncclSuccess) {
            nc.ncclGroupEnd();
            return brisk_errorf(err, BRISK_ERR_IO, "cuda: NCCL all-reduce failed: %s", nc.ncclGetErrorString(r));
        }
    }
    NC(nc.ncclGroupEnd(), "ncclGroupEnd");
    return BRISK_OK;
}

/* ZeRO-1. Equal shards (n a multiple of the world size) are NCCL's own reduce-scatter and
 * all-gather, in place (rank r's shard at r * count, where NCCL's in-place forms put it).
 * brisk_dist_shard's shards otherwise differ by one float, which those collectives cannot
 * express: then one reduce (ncclAvg) to each shard's owner and one broadcast from it, grouped
 * into a single launch, move the same bytes per rank in a ring. */
static int equal_shards(const int64_t *bounds, int world) {
    for (int r = 1; r < world; r++)
        if (bounds[r + 1] - bounds[r] != bounds[1] - bounds[0]) return 0;
    return 1;
}

static brisk_status zero1_check(cuda_backend *cb, const int64_t *bounds, const char *what, brisk_error *err) {
    if (!cb->nccl_comm) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: %s before comm_init", what);
    if (!bounds || bounds[0] != 0)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: %s: the shard bounds must start at 0", what);
    for (int r = 0; r < cb->nccl_world; r++)
        if (bounds[r + 1] < bounds[r])
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: %s: shard %d ends before it starts", what, r);
    return BRISK_OK;
}

/* bf16/fp16: the 16-bit copy of the other ranks' shards, cast from their fp32 floats just
 * gathered (this rank's own the fused update wrote). Every rank needs the fp32 parameters
 * anyway (the ops that read them, rank 0's checkpoints), so gathering the 16-bit copy too
 * would add 2 bytes per float on the wire where this costs a local pass over HBM; gathering
 * only the 16-bit copy would leave the fp32 parameters stale. */
static brisk_status lp_outside_shard(cuda_backend *cb, float *p, const int64_t *bounds, brisk_error *err) {
    char *lp = cuda_prep_params_lp(cb, p);
    if (!lp) return BRISK_OK; /* fp32 or tf32: no copy */
    int fp16 = cuda_in_type(cb) == 2;
    int64_t lo = bounds[cb->nccl_rank], hi = bounds[cb->nccl_rank + 1], end = bounds[cb->nccl_world];
    if (end > 0 && cuda_prep_params_lp(cb, p + end - 1) != lp + 2 * (end - 1))
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: parameter all-gather: %lld floats reach past the prepared "
                            "parameter arena", (long long)end);
    CU(cuk_cast_lp(p, lp, lo, fp16, cb->compute), "casting the gathered parameters to 16 bits");
    CU(cuk_cast_lp(p + hi, lp + 2 * hi, end - hi, fp16, cb->compute), "casting the gathered parameters to 16 bits");
    return BRISK_OK;
}

brisk_status cuda_grad_reduce_scatter(brisk_backend *be, float *g, const int64_t *bounds, brisk_error *err) {
    cuda_backend *cb = be->impl;
    brisk_status st = zero1_check(cb, bounds, "gradient reduce-scatter", err);
    if (st) return st;
    cb->shard_pending = 1; /* the next update's norm must be the ranks' sum (cuda_optim_update) */
    ncclComm_t comm = cb->nccl_comm;
    int w = cb->nccl_world;
    if (equal_shards(bounds, w)) {
        size_t cnt = (size_t)(bounds[1] - bounds[0]);
        if (cnt) NC(nc.ncclReduceScatter(g, g + bounds[cb->nccl_rank], cnt, ncclFloat32, ncclAvg, comm, cb->compute),
                    "reduce-scatter of the gradients");
        return BRISK_OK;
    }
    NC(nc.ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < w; r++) {
        size_t cnt = (size_t)(bounds[r + 1] - bounds[r]);
        ncclResult_t res = cnt ? nc.ncclReduce(g + bounds[r], g + bounds[r], cnt, ncclFloat32, ncclAvg, r, comm,
                                               cb->compute)
                               : ncclSuccess;
        if (res != ncclSuccess) {
            nc.ncclGroupEnd();
            return brisk_errorf(err, BRISK_ERR_IO, "cuda: NCCL reduce of gradient shard %d failed: %s", r,
                                nc.ncclGetErrorString(res));
        }
    }
    NC(nc.ncclGroupEnd(), "ncclGroupEnd");
    return BRISK_OK;
}

brisk_status cuda_param_all_gather(brisk_backend *be, float *p, const int64_t *bounds, brisk_error *err) {
    cuda_backend *cb = be->impl;
    brisk_status st = zero1_check(cb, bounds, "parameter all-gather", err);
    if (st) return st;
    ncclComm_t comm = cb->nccl_comm;
    int w = cb->nccl_world;
    if (equal_shards(bounds, w)) {
        size_t cnt = (size_t)(bounds[1] - bounds[0]);
        if (cnt) NC(nc.ncclAllGather(p + bounds[cb->nccl_rank], p, cnt, ncclFloat32, comm, cb->compute),
                    "all-gather of the parameters");
        return lp_outside_shard(cb, p, bounds, err);
    }
    NC(nc.ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < w; r++) {
        size_t cnt = (size_t)(bounds[r + 1] - bounds[r]);
        ncclResult_t res = cnt ? nc.ncclBroadcast(p + bounds[r], p + bounds[r], cnt, ncclFloat32, r, comm, cb->compute)
                               : ncclSuccess;
        if (res != ncclSuccess) {
            nc.ncclGroupEnd();
            return brisk_errorf(err, BRISK_ERR_IO, "cuda: NCCL broadcast of parameter shard %d failed: %s", r,
                                nc.ncclGetErrorString(res));
        }
    }
    NC(nc.ncclGroupEnd(), "ncclGroupEnd");
    return lp_outside_shard(cb, p, bounds, err);
}

/* The optimizer state's double sum of squares (cuda_grad_sumsq), summed in place: the fused
 * update's clip factor, inf/NaN skip and fp16 loss scaler then see the whole gradient on
 * every rank. An inf or NaN in any rank's gradient reaches its shard's owner through the
 * reduce-scatter's mean and makes that shard's sum, and so this sum, non-finite on every
 * rank: all skip the step and halve the scale together. */
brisk_status cuda_grad_sumsq_allreduce(brisk_backend *be, brisk_error *err) {
    cuda_backend *cb = be->impl;
    if (!cb->nccl_comm) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: gradient norm all-reduce before comm_init");
    if (!cb->sumsq_fresh)
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: gradient norm all-reduce without grad_sumsq before it");
    double *s = &cb->ostate->sumsq;
    NC(nc.ncclAllReduce(s, s, 1, ncclFloat64, ncclSum, (ncclComm_t)cb->nccl_comm, cb->compute),
       "all-reduce of the gradient norm");
    cb->sumsq_summed = 1;
    return BRISK_OK;
}

void cuda_comm_free(cuda_backend *cb) {
    if (cb->nccl_stream) cudaStreamSynchronize(cb->nccl_stream);
    if (cb->nccl_ready) cudaEventDestroy(cb->nccl_ready);
    if (cb->nccl_done) cudaEventDestroy(cb->nccl_done);
    if (cb->nccl_stream) cudaStreamDestroy(cb->nccl_stream);
    cb->nccl_ready = cb->nccl_done = NULL;
    cb->nccl_stream = NULL;
    if (!cb->nccl_comm || !nc.loaded) return;
    nc.ncclCommDestroy((ncclComm_t)cb->nccl_comm);
    cb->nccl_comm = NULL;
}

#else /* built without nccl.h: say so at use */

brisk_status cuda_comm_init(brisk_backend *be, int rank, int world,
                            brisk_status (*share)(void *user, void *buf, size_t bytes, brisk_error *err), void *user,
                            brisk_error *err) {
    (void)be, (void)rank, (void)world, (void)share, (void)user;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
brisk_status cuda_grad_allreduce(brisk_backend *be, float *g, int64_t n, int64_t bucket_floats, brisk_error *err) {
    (void)be, (void)g, (void)n, (void)bucket_floats;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
brisk_status cuda_grad_bucket_ready(brisk_backend *be, float *g, int64_t count, brisk_error *err) {
    (void)be, (void)g, (void)count;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
brisk_status cuda_grad_buckets_join(brisk_backend *be, brisk_error *err) {
    (void)be;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
brisk_status cuda_grad_reduce_scatter(brisk_backend *be, float *g, const int64_t *bounds, brisk_error *err) {
    (void)be, (void)g, (void)bounds;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
brisk_status cuda_param_all_gather(brisk_backend *be, float *p, const int64_t *bounds, brisk_error *err) {
    (void)be, (void)p, (void)bounds;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
brisk_status cuda_grad_sumsq_allreduce(brisk_backend *be, brisk_error *err) {
    (void)be;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cuda: several GPUs need NCCL; this brisk was built without nccl.h");
}
void cuda_comm_free(cuda_backend *cb) { (void)cb; }
#endif
