/* The batch loader: a producer that gathers samples in sampler order into batch slots,
 * run on its own thread over a ring of `prefetch` slots (mutex + two condition
 * variables, no polling) or, with prefetch 0, inside next() on the caller's thread. Both
 * modes share fill_slot, so they yield identical batches. */
#include "brisk/data.h"
#include "data/workers.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_EMPTY, SLOT_READY, SLOT_HELD };
enum { MAX_MADE_FIELDS = 16 }; /* fields of a dataset that makes its samples */

typedef struct slot {
    int state;
    brisk_tensor *fields;       /* [nfields]; data from the host allocator */
    int64_t epoch, position, next_epoch, next_position;
} slot;

struct brisk_loader {
    const brisk_dataset *ds;
    int64_t *indices, n, batch;
    uint64_t seed;
    int shuffle, prefetch, nslots, nfields;
    brisk_host_allocator alloc;
    brisk_batch_fn transform;
    void *transform_user;
    brisk_workers *workers;     /* for a dataset that makes its samples (ds->make) */
    const struct brisk_episodes *episodes;
    int64_t *episode;           /* [batch]: the current episode's samples */
    int plain;
    size_t *sample_bytes;       /* per field */
    size_t *sample_step;        /* per field: bytes from one sample's start to the next's (less
                                   than sample_bytes for overlapping windows) */
    slot *slots;

    /* Producer cursor: touched only by whoever fills (the thread, or next() when
     * synchronous). */
    int64_t epoch, pos, order_epoch;
    int64_t stride, shard_offset; /* the global batch, and where this rank's slice starts in it */
    int64_t *order;
    uint64_t produced;

    /* Consumer side. */
    uint64_t consumed;
    int held;
    double waited;

    pthread_mutex_t mu;
    pthread_cond_t can_fill, can_take;
    int stop, failed, has_thread;
    brisk_error thread_err;
    pthread_t thread;
};

static void *default_alloc(void *user, size_t bytes) {
    (void)user;
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
}
static void default_free(void *user, void *p, size_t bytes) {
    (void)user;
    (void)bytes;
    free(p);
}

static void batch_view(const brisk_loader *l, int k, brisk_batch *b) {
    const slot *s = &l->slots[k];
    b->nfields = l->nfields;
    b->fields = s->fields;
    b->epoch = s->epoch;
    b->position = s->position;
    b->next_epoch = s->next_epoch;
    b->next_position = s->next_position;
    b->slot = k;
}

/* One sample of a made dataset (ds->make) into its place in a slot. */
typedef struct make_job {
    const brisk_loader *l;
    const slot *s;
    const int64_t *idx;
    uint64_t epoch;
} make_job;

static brisk_status make_one(void *user, int64_t j, brisk_error *err) {
    const make_job *m = (const make_job *)user;
    const brisk_loader *l = m->l;
    void *dst[MAX_MADE_FIELDS];
    for (int f = 0; f < l->nfields; f++) dst[f] = (char *)m->s->fields[f].data + (size_t)j * l->sample_bytes[f];
    return l->ds->make(l->ds->make_user, m->idx[j], m->epoch, !l->plain, dst, err);
}

/* Gathers the batch at the cursor into slot k and advances the cursor past it (to the
 * next epoch when fewer than a batch of samples remain: the tail is dropped). */
static brisk_status fill_slot(brisk_loader *l, int k, brisk_error *err) {
    if (l->order_epoch != l->epoch) {
        brisk_status st = brisk_sampler_order(l->indices, l->n, l->seed, (uint64_t)l->epoch, l->shuffle, l->order, err);
        if (st) return st;
        l->order_epoch = l->epoch;
    }
    slot *s = &l->slots[k];
    const int64_t *idx = l->order + l->pos + l->shard_offset;
    if (l->episodes) {
        uint64_t e = (uint64_t)(l->epoch * (l->n / l->batch) + l->pos / l->batch);
        brisk_episodes_draw(l->episodes, l->seed, e, l->episode, l->episode + l->episodes->k, NULL);
        idx = l->episode;
    }
    if (l->ds->make) {
        make_job m = {l, s, idx, (uint64_t)l->epoch};
        brisk_status st = brisk_workers_run(l->workers, l->batch, make_one, &m, err);
        if (st) return brisk_error_prefix(err, "loader: batch at epoch %lld, position %lld", (long long)l->epoch,
                                          (long long)l->pos);
    }
    for (int f = 0; f < l->nfields && !l->ds->make; f++) {
        size_t sb = l->sample_bytes[f];
        const char *src = (const char *)l->ds->fields[f].tensor.data;
        char *dst = (char *)s->fields[f].data;
        size_t step = l->sample_step[f];
        for (int64_t j = 0; j < l->batch; j++) memcpy(dst + (size_t)j * sb, src + (size_t)idx[j] * step, sb);
    }
    s->epoch = l->epoch;
    s->position = l->pos;
    l->pos += l->stride;
    if (l->pos + l->stride > l->n) {
        l->epoch++;
        l->pos = 0;
    }
    s->next_epoch = l->epoch;
    s->next_position = l->pos;
    if (l->transform) {
        brisk_batch b;
        batch_view(l, k, &b);
        b.wait_s = 0;
        brisk_status st = l->transform(l->transform_user, &b, err);
        if (st) return brisk_error_prefix(err, "loader: batch at epoch %lld, position %lld", (long long)s->epoch,
                                          (long long)s->position);
    }
    return BRISK_OK;
}

static void *producer_main(void *arg) {
    brisk_loader *l = (brisk_loader *)arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        int k = (int)(l->produced % (uint64_t)l->nslots);
        while (!l->stop && l->slots[k].state != SLOT_EMPTY) pthread_cond_wait(&l->can_fill, &l->mu);
        if (l->stop) break;
        pthread_mutex_unlock(&l->mu);
        brisk_error e;
        e.msg[0] = 0;
        brisk_status st = fill_slot(l, k, &e);
        pthread_mutex_lock(&l->mu);
        if (st) {
            l->failed = 1;
            l->thread_err = e;
            l->thread_err.code = st;
            pthread_cond_broadcast(&l->can_take);
            break;
        }
        l->slots[k].state = SLOT_READY;
        l->produced++;
        pthread_cond_signal(&l->can_take);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

void brisk_loader_destroy(brisk_loader *l) {
    if (!l) return;
    if (l->has_thread) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->can_fill);
        pthread_cond_broadcast(&l->can_take);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    if (l->slots)
        for (int k = 0; k < l->nslots; k++) {
            for (int f = 0; f < l->nfields && l->slots[k].fields; f++)
                if (l->slots[k].fields[f].data)
                    l->alloc.free(l->alloc.user, l->slots[k].fields[f].data, l->sample_bytes[f] * (size_t)l->batch);
            free(l->slots[k].fields);
        }
    brisk_workers_destroy(l->workers);
    pthread_cond_destroy(&l->can_fill);
    pthread_cond_destroy(&l->can_take);
    pthread_mutex_destroy(&l->mu);
    free(l->slots);
    free(l->sample_bytes);
    free(l->sample_step);
    free(l->indices);
    free(l->order);
    free(l->episode);
    free(l);
}

static brisk_status check_config(const brisk_loader_config *c, brisk_error *err) {
    const brisk_dataset *ds = c->dataset;
    if (!ds || ds->nfields <= 0 || ds->count <= 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: the dataset is empty");
    int64_t n = c->indices ? c->nindices : ds->count;
    if (c->indices)
        for (int64_t i = 0; i < c->nindices; i++)
            if (c->indices[i] < 0 || c->indices[i] >= ds->count)
                return brisk_errorf(err, BRISK_ERR_INVALID, "loader: index %lld at subset position %lld is outside "
                                    "the dataset's %lld samples", (long long)c->indices[i], (long long)i,
                                    (long long)ds->count);
    int shards = c->shard_count > 1 ? c->shard_count : 1;
    if (c->shard_count > 1 && (c->shard_rank < 0 || c->shard_rank >= c->shard_count || c->episodes))
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: shard %d of %d%s; expected 0 <= shard < count",
                            c->shard_rank, c->shard_count, c->episodes ? " with episodes (not sharded)" : "");
    if (shards > 1 && c->batch_size >= 1 && c->batch_size * shards > n)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: batch size %lld on each of %d ranks (a global batch of "
                            "%lld) with %lld samples; expected a global batch of at most %lld", (long long)c->batch_size,
                            shards, (long long)(c->batch_size * shards), (long long)n, (long long)n);
    if (c->batch_size < 1 || c->batch_size > n)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: batch size %lld with %lld samples; expected 1 to %lld "
                            "(an epoch's incomplete last batch is dropped)", (long long)c->batch_size, (long long)n,
                            (long long)n);
    if (c->prefetch < 0 || c->prefetch > 1024)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: prefetch %d; expected 0 to 1024", c->prefetch);
    if (c->start_epoch < 0 || c->start_position < 0 || c->start_position > n)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: start at epoch %lld, position %lld; expected epoch >= 0 "
                            "and position in [0, %lld]", (long long)c->start_epoch, (long long)c->start_position,
                            (long long)n);
    if (ds->make && ds->nfields > MAX_MADE_FIELDS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: %d fields; expected at most %d", ds->nfields,
                            MAX_MADE_FIELDS);
    if (c->episodes && c->batch_size != (int64_t)c->episodes->k + c->episodes->q)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: batch size %lld for episodes of %d support + %d query "
                            "samples; expected %d", (long long)c->batch_size, c->episodes->k, c->episodes->q,
                            c->episodes->k + c->episodes->q);
    if (c->workers < 0 || c->workers > 1024)
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: %d workers; expected 0 to 1024", c->workers);
    if ((c->allocator.alloc == NULL) != (c->allocator.free == NULL))
        return brisk_errorf(err, BRISK_ERR_INVALID, "loader: give both allocator functions or neither");
    for (int f = 0; f < ds->nfields; f++) {
        const brisk_dataset_field *fd = &ds->fields[f];
        int64_t rows = fd->tensor.shape.ndim >= 1 ? fd->tensor.shape.d[0] : -1;
        if (fd->window > 0 ? fd->stride < 1 || rows < (ds->count - 1) * fd->stride + fd->window : rows != ds->count)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "loader: field '%s' does not hold %lld samples", fd->name,
                                (long long)ds->count);
    }
    return BRISK_OK;
}

brisk_status brisk_loader_create(brisk_loader **out, const brisk_loader_config *c, brisk_error *err) {
    *out = NULL;
    brisk_status st = check_config(c, err);
    if (st) return st;
    brisk_loader *l = calloc(1, sizeof *l);
    if (!l) return brisk_errorf(err, BRISK_ERR_NOMEM, "loader: out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->can_fill, NULL);
    pthread_cond_init(&l->can_take, NULL);
    l->ds = c->dataset;
    l->n = c->indices ? c->nindices : c->dataset->count;
    l->batch = c->batch_size;
    l->seed = c->seed;
    l->shuffle = c->shuffle;
    l->prefetch = c->prefetch;
    l->nslots = c->prefetch > 0 ? c->prefetch : 1;
    l->nfields = c->dataset->nfields;
    l->alloc = c->allocator;
    if (!l->alloc.alloc) { l->alloc.alloc = default_alloc; l->alloc.free = default_free; }
    l->transform = c->transform;
    l->transform_user = c->transform_user;
    l->plain = c->plain;
    l->episodes = c->episodes;
    l->epoch = c->start_epoch;
    l->pos = c->start_position;
    l->stride = l->batch * (c->shard_count > 1 ? c->shard_count : 1);
    l->shard_offset = c->shard_count > 1 ? l->batch * c->shard_rank : 0;
    if (l->pos + l->stride > l->n) { l->epoch++; l->pos = 0; } /* resuming after an epoch's last batch */
    l->order_epoch = -1;
    l->indices = c->indices ? malloc((size_t)l->n * sizeof *l->indices) : NULL;
    l->order = malloc((size_t)l->n * sizeof *l->order);
    l->sample_bytes = calloc((size_t)l->nfields, sizeof *l->sample_bytes);
    l->sample_step = calloc((size_t)l->nfields, sizeof *l->sample_step);
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->episode = c->episodes ? malloc((size_t)l->batch * sizeof *l->episode) : NULL;
    if ((c->episodes && !l->episode) || (c->indices && !l->indices) || !l->order || !l->sample_bytes || !l->sample_step || !l->slots) {
        brisk_loader_destroy(l);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "loader: out of memory");
    }
    if (c->indices) memcpy(l->indices, c->indices, (size_t)l->n * sizeof *l->indices);
    for (int f = 0; f < l->nfields; f++) {
        const brisk_dataset_field *fd = &c->dataset->fields[f];
        size_t row = brisk_tensor_bytes(&fd->tensor) / (size_t)fd->tensor.shape.d[0];
        l->sample_bytes[f] = fd->window > 0 ? row * (size_t)fd->window : row;
        l->sample_step[f] = fd->window > 0 ? row * (size_t)fd->stride : row;
    }
    for (int k = 0; k < l->nslots; k++) {
        slot *s = &l->slots[k];
        if (!(s->fields = calloc((size_t)l->nfields, sizeof *s->fields))) {
            brisk_loader_destroy(l);
            return brisk_errorf(err, BRISK_ERR_NOMEM, "loader: out of memory");
        }
        for (int f = 0; f < l->nfields; f++) {
            const brisk_tensor *t = &c->dataset->fields[f].tensor;
            size_t bytes = l->sample_bytes[f] * (size_t)l->batch;
            brisk_shape ss = brisk_dataset_sample_shape(c->dataset, f);
            s->fields[f].dtype = t->dtype;
            int64_t dims[BRISK_MAX_DIMS] = {l->batch};
            for (int i = 0; i < ss.ndim && i + 1 < BRISK_MAX_DIMS; i++) dims[i + 1] = ss.d[i];
            s->fields[f].shape = brisk_shape_make(ss.ndim + 1, dims);
            if (!(s->fields[f].data = l->alloc.alloc(l->alloc.user, bytes))) {
                brisk_loader_destroy(l);
                return brisk_errorf(err, BRISK_ERR_NOMEM, "loader: cannot allocate %zu bytes for field '%s' of "
                                    "batch slot %d", bytes, c->dataset->fields[f].name, k);
            }
        }
    }
    if (c->dataset->make && (st = brisk_workers_create(&l->workers, c->workers > 1 ? c->workers - 1 : 0, err))) {
        brisk_loader_destroy(l);
        return st;
    }
    if (l->prefetch > 0) {
        if (pthread_create(&l->thread, NULL, producer_main, l) != 0) {
            brisk_loader_destroy(l);
            return brisk_errorf(err, BRISK_ERR_INTERNAL, "loader: cannot start the loader thread");
        }
        l->has_thread = 1;
    }
    *out = l;
    return BRISK_OK;
}

brisk_status brisk_loader_next(brisk_loader *l, brisk_batch *b, brisk_error *err) {
    memset(b, 0, sizeof *b);
    b->slot = -1;
    double t0 = brisk_now();
    if (l->prefetch == 0) {
        if (l->failed) return brisk_errorf(err, l->thread_err.code, "%s", l->thread_err.msg);
        if (l->slots[0].state == SLOT_HELD)
            return brisk_errorf(err, BRISK_ERR_INVALID, "loader: release the previous batch before next() "
                                "(prefetch 0 has one slot)");
        brisk_status st = fill_slot(l, 0, &l->thread_err);
        if (st) {
            l->failed = 1;
            l->thread_err.code = st;
            return brisk_errorf(err, st, "%s", l->thread_err.msg);
        }
        l->slots[0].state = SLOT_HELD;
        l->held = 1;
        batch_view(l, 0, b);
    } else {
        pthread_mutex_lock(&l->mu);
        if (l->held == l->nslots) {
            pthread_mutex_unlock(&l->mu);
            return brisk_errorf(err, BRISK_ERR_INVALID, "loader: all %d batch slots are held; release one before next()",
                                l->nslots);
        }
        int k = (int)(l->consumed % (uint64_t)l->nslots);
        while (l->slots[k].state != SLOT_READY && !l->failed) pthread_cond_wait(&l->can_take, &l->mu);
        if (l->slots[k].state != SLOT_READY) {
            brisk_status st = brisk_errorf(err, l->thread_err.code, "%s", l->thread_err.msg);
            pthread_mutex_unlock(&l->mu);
            return st;
        }
        l->slots[k].state = SLOT_HELD;
        l->consumed++;
        l->held++;
        batch_view(l, k, b);
        pthread_mutex_unlock(&l->mu);
    }
    b->wait_s = brisk_now() - t0;
    l->waited += b->wait_s;
    return BRISK_OK;
}

void brisk_loader_release(brisk_loader *l, brisk_batch *b) {
    if (!l || !b || b->slot < 0 || b->slot >= l->nslots) return;
    pthread_mutex_lock(&l->mu);
    if (l->slots[b->slot].state == SLOT_HELD) {
        l->slots[b->slot].state = SLOT_EMPTY;
        l->held--;
        pthread_cond_signal(&l->can_fill);
    }
    pthread_mutex_unlock(&l->mu);
    b->slot = -1;
}

int64_t brisk_loader_batches_per_epoch(const brisk_loader *l) { return l->n / l->stride; }

double brisk_loader_wait_seconds(const brisk_loader *l) { return l->waited; }
