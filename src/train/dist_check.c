/* Data parallel: what every rank must hold alike, checked before any step (dist.h,
 * brisk_dist_agreement). Each rank reads its own config, data and run directory; nothing else
 * compares them, and a rank that differs trains a model of its own (another seed, learning
 * rate or data), trains rows twice (a node-local run directory: one rank resumed, one
 * started afresh), waits for a collective the others never issue (another batch size), or
 * all-reduces a gradient of another size.
 *
 * At brisk_trainer_set_dist: the resolved config (every key with the value the run uses,
 * the batch size and device as resolved), the data (sizes, shapes and a CRC: the digest
 * below), the parameter layout. At the start of each run: the position (step, epoch, place in
 * the epoch's order, samples seen), which a resume sets after the group is. A session's ranks
 * push their own samples: they agree on the config, the layout and the step, not on data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bytes.h"
#include "train/trainer_internal.h"

/* Keys that may differ between ranks: how fast a rank runs (threads, prefetch, image decoding
 * threads, the GEMM choice and its timing cache: ranks choose by their own timings anyway,
 * and each updates the same parameters by the same averaged gradients), the memory it may
 * use (the batch size it resolves is compared instead), how long it waits for the others,
 * and a session's buffer of the samples its rank pushes (its own). */
static const char *const per_rank[] = {"speed.threads", "speed.prefetch", "speed.memory_limit", "speed.autotune_cache",
                                       "speed.autotune", "speed.cpu_gemm", "data.images.workers", "dist.timeout_s",
                                       "data.buffer.capacity", "data.buffer.when_full", NULL};
/* Where the data are read from, which may differ per node (a copy on a local disk): their
 * contents are compared instead, where every rank reads the same rows. */
static const char *const data_paths[] = {"data.train", "data.validation", "data.images.labels", "data.netcdf.files",
                                         NULL};

static int listed(const char *const *keys, const char *key) {
    for (int i = 0; keys[i]; i++)
        if (strcmp(keys[i], key) == 0) return 1;
    return 0;
}

typedef struct config_list {
    const brisk_trainer *t;
    brisk_dist_agreement *a;
    int same_rows; /* the ranks read the same data, compared by content */
} config_list;

static void add_value(void *user, const char *key, const char *value) {
    config_list *c = user;
    const brisk_trainer *t = c->t;
    if (listed(per_rank, key) || (c->same_rows && listed(data_paths, key))) return;
    if (strcmp(key, "train.batch_size") == 0) /* "auto": the batch this rank's memory fits */
        brisk_dist_agreement_add(c->a, key, NULL, "%lld%s", (long long)t->cfg.train.batch_size,
                                 t->cfg.train.batch_auto ? " (auto)" : "");
    else if (strcmp(key, "speed.device") == 0) /* "auto": the backend this rank found */
        brisk_dist_agreement_add(c->a, key, NULL, "%s", t->be->name);
    else brisk_dist_agreement_add(c->a, key, NULL, "%s", value);
}

/* The data's digest: a CRC over all of a field's bytes up to 64 MiB (a fraction of a second,
 * against the time a file of that size takes to read), above that over 256 stretches of
 * 64 KiB spread evenly over it: bounded at start for data sets of many GiB, and a file of
 * other values differs almost everywhere, so a sample finds it; an edit of a few rows of a
 * large file may go unseen. Samples made on demand (images, NetCDF): 8 of them, spread over
 * the set, made as validation makes them (no augmentation), decoded or read once more. */
#define DIGEST_ALL_BYTES ((size_t)64 << 20)
#define DIGEST_STRETCHES 256
#define DIGEST_STRETCH ((size_t)64 << 10)
#define DIGEST_MADE 8

static void field_text(const brisk_dataset *ds, int f, char *out, size_t cap) {
    const brisk_dataset_field *fl = &ds->fields[f];
    char shape[96];
    brisk_shape_str(&fl->tensor.shape, shape, sizeof shape);
    if (fl->window > 0)
        snprintf(out, cap, "%s %s series, windows of %lld every %lld", brisk_dtype_name(fl->tensor.dtype), shape,
                 (long long)fl->window, (long long)fl->stride);
    else snprintf(out, cap, "%s %s", brisk_dtype_name(fl->tensor.dtype), shape);
}

static void add_stored_fields(brisk_dist_agreement *a, const char *what, const brisk_dataset *ds) {
    for (int f = 0; f < ds->nfields; f++) {
        const brisk_tensor *x = &ds->fields[f].tensor;
        size_t bytes = brisk_tensor_bytes(x);
        const uint8_t *p = x->data;
        uint32_t crc = 0;
        char key[160], desc[256];
        field_text(ds, f, desc, sizeof desc);
        snprintf(key, sizeof key, "%s field %s", what, ds->fields[f].name);
        if (bytes <= DIGEST_ALL_BYTES) {
            crc = brisk_crc32(0, p, bytes);
            brisk_dist_agreement_add(a, key, ds->source, "%s, crc32 %08x of all %zu bytes", desc, crc, bytes);
            continue;
        }
        for (size_t k = 0; k < DIGEST_STRETCHES; k++)
            crc = brisk_crc32(crc, p + k * ((bytes - DIGEST_STRETCH) / (DIGEST_STRETCHES - 1)), DIGEST_STRETCH);
        brisk_dist_agreement_add(a, key, ds->source, "%s, crc32 %08x of %d stretches of 64 KiB spread over %zu bytes",
                                 desc, crc, DIGEST_STRETCHES, bytes);
    }
}

static brisk_status add_made_fields(brisk_dist_agreement *a, const char *what, const brisk_dataset *ds,
                                    brisk_error *err) {
    int nf = ds->nfields;
    void **dst = calloc((size_t)nf + 1, sizeof *dst);
    uint32_t *crc = calloc((size_t)nf + 1, sizeof *crc);
    size_t *size = calloc((size_t)nf + 1, sizeof *size);
    int64_t n = ds->count < DIGEST_MADE ? ds->count : DIGEST_MADE;
    brisk_status st = dst && crc && size ? BRISK_OK : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int f = 0; f < nf && !st; f++) {
        brisk_shape s = brisk_dataset_sample_shape(ds, f);
        size[f] = (size_t)brisk_shape_numel(&s) * brisk_dtype_size(ds->fields[f].tensor.dtype);
        if (!(dst[f] = malloc(size[f] ? size[f] : 1))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    }
    for (int64_t k = 0; k < n && !st; k++) {
        int64_t i = n > 1 ? k * (ds->count - 1) / (n - 1) : 0;
        if (!(st = ds->make(ds->make_user, i, 0, 0, dst, err)))
            for (int f = 0; f < nf; f++) crc[f] = brisk_crc32(crc[f], dst[f], size[f]);
    }
    for (int f = 0; f < nf && !st; f++) {
        char key[160], desc[256];
        field_text(ds, f, desc, sizeof desc);
        snprintf(key, sizeof key, "%s field %s", what, ds->fields[f].name);
        brisk_dist_agreement_add(a, key, ds->source, "%s, crc32 %08x of %lld samples made as validation makes them",
                                 desc, crc[f], (long long)n);
    }
    for (int f = 0; dst && f < nf; f++) free(dst[f]);
    free(dst), free(crc), free(size);
    return st ? brisk_error_prefix(err, "%s: digesting %s for the other ranks", ds->source, what) : BRISK_OK;
}

static brisk_status add_data(const brisk_trainer *t, brisk_dist_agreement *a, brisk_error *err) {
    if (t->data_sharded) { /* data.shard_files: each rank holds other rows of the same file */
        brisk_dist_agreement_add(a, "data.train rows", NULL, "%lld in the file", (long long)t->shard_file_rows);
        for (int f = 0; f < t->data.nfields; f++) {
            char key[160], shape[96];
            brisk_shape s = brisk_dataset_sample_shape(&t->data, f);
            snprintf(key, sizeof key, "data.train field %s", t->data.fields[f].name);
            brisk_dist_agreement_add(a, key, NULL, "%s %s a sample", brisk_dtype_name(t->data.fields[f].tensor.dtype),
                                     brisk_shape_str(&s, shape, sizeof shape));
        }
        return BRISK_OK;
    }
    const brisk_dataset *sets[2] = {&t->data, &t->val_data};
    const char *names[2] = {"data.train", "data.validation"};
    for (int i = 0; i < 2; i++) {
        if (sets[i]->count == 0) continue;
        brisk_status st = sets[i]->make ? add_made_fields(a, names[i], sets[i], err) : BRISK_OK;
        if (st) return st;
        if (!sets[i]->make) add_stored_fields(a, names[i], sets[i]);
    }
    return BRISK_OK;
}

static void add_layout(const brisk_trainer *t, brisk_dist_agreement *a) {
    const brisk_graph *g = t->g;
    brisk_dist_agreement_add(a, "model parameters", NULL, "%lld floats in %d tensors", (long long)g->n_param_floats,
                             g->n_params);
    for (int i = 0; i < g->n_params; i++) {
        char key[160], shape[96];
        snprintf(key, sizeof key, "model parameter %s", g->params[i].name);
        brisk_dist_agreement_add(a, key, NULL, "%s at %zu", brisk_shape_str(&g->params[i].shape, shape, sizeof shape),
                                 g->params[i].offset);
    }
}

/* The ranks' error, with what it means for the run */
static brisk_status finish(const brisk_trainer *t, brisk_dist_agreement *a, const char *what, brisk_error *err) {
    brisk_status st = brisk_dist_agreement_check(t->dist, a, what, err);
    brisk_dist_agreement_free(a);
    if (st == BRISK_ERR_INVALID) { /* the ranks disagree (every rank returns it) */
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof err->msg - len, "; no rank trains");
    }
    return st;
}

brisk_status brisk_dist_check_setup(brisk_trainer *t, brisk_error *err) {
    if (t->world == 1) return BRISK_OK;
    brisk_dist_agreement a = {0};
    config_list c = {t, &a, !t->own_data && !t->data_sharded};
    brisk_status st = brisk_config_values(t->cfg.json, t->cfg.path, add_value, &c, err);
    if (!st && !t->own_data) st = add_data(t, &a, err);
    if (st) { /* this rank alone: the others wait in the agreement until this rank abandons */
        brisk_dist_agreement_free(&a);
        return st;
    }
    add_layout(t, &a);
    return finish(t, &a, "the ranks' agreement on the run", err);
}

brisk_status brisk_dist_check_position(brisk_trainer *t, brisk_error *err) {
    if (t->world == 1) return BRISK_OK;
    brisk_dist_agreement a = {0};
    char from[BRISK_PATH_MAX + 80] = "a new run";
    if (t->step > 0) snprintf(from, sizeof from, "%s%s", t->run_claimed && t->last_ckpt[0] ? "resumed from " : "",
                              t->run_claimed ? t->last_ckpt : "");
    if (t->own_data) /* a session: each rank's place in its own samples is its own */
        brisk_dist_agreement_add(&a, "the training position", from, "step %lld", (long long)t->step);
    else
        brisk_dist_agreement_add(&a, "the training position", from,
                                 "step %lld, epoch %lld, sample %lld of its order, %lld samples seen",
                                 (long long)t->step, (long long)t->epoch + 1, (long long)t->position,
                                 (long long)t->samples);
    return finish(t, &a, "the ranks' agreement on the training position", err);
}
