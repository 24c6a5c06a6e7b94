/* Checkpoint integrity: every checkpoint carries, in its metadata, a CRC-32 of a
 * canonical serialisation of everything else it holds, and loading refuses a file
 * whose bytes no longer give that value. The canonical form does not depend on how
 * the safetensors writer laid the tensors out, so the checkpoint layer can compute it
 * from its entries before writing:
 *
 *   for each metadata key except "checksum", in strcmp order of keys:
 *       key NUL value NUL
 *   for each tensor, in strcmp order of names:
 *       name NUL, dtype (1 byte, brisk_dtype), rank (1 byte), each dimension as
 *       8 bytes little-endian, then the tensor's data bytes
 *
 * Structural damage (the length prefix, the header JSON, offsets) is caught by the
 * safetensors reader first; what still parses is covered here, metadata included, so
 * a flipped digit in "step" is refused like a flipped bit in a weight. CRC-32 finds
 * every 1- and 2-bit error and every burst up to 32 bits; a random corruption slips
 * through with probability 2^-32. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "data/bytes.h"
#include "run/checkpoint_file.h"

typedef struct ck_item {
    const char *name;
    brisk_dtype dtype;
    brisk_shape shape;
    const void *data;
    size_t nbytes;
} ck_item;

static int by_name(const void *a, const void *b) {
    return strcmp(((const ck_item *)a)->name, ((const ck_item *)b)->name);
}
static int by_key(const void *a, const void *b) {
    return strcmp(((const brisk_st_meta *)a)->key, ((const brisk_st_meta *)b)->key);
}

/* Sorts both arrays in place and returns the CRC of their canonical form. */
static uint32_t canonical_crc(ck_item *items, size_t n, brisk_st_meta *meta, size_t n_meta) {
    qsort(items, n, sizeof *items, by_name);
    qsort(meta, n_meta, sizeof *meta, by_key);
    uint32_t crc = 0;
    for (size_t i = 0; i < n_meta; i++) {
        if (strcmp(meta[i].key, BRISK_CKPT_CHECKSUM_KEY) == 0) continue;
        crc = brisk_crc32(crc, meta[i].key, strlen(meta[i].key) + 1);
        crc = brisk_crc32(crc, meta[i].value, strlen(meta[i].value) + 1);
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t hdr[2 + 8 * BRISK_MAX_DIMS];
        int nd = items[i].shape.ndim < 0 || items[i].shape.ndim > BRISK_MAX_DIMS ? 0 : items[i].shape.ndim;
        hdr[0] = (uint8_t)items[i].dtype;
        hdr[1] = (uint8_t)nd;
        for (int d = 0; d < nd; d++) brisk_put_le(hdr + 2 + 8 * d, (uint64_t)items[i].shape.d[d], 8);
        crc = brisk_crc32(crc, items[i].name, strlen(items[i].name) + 1);
        crc = brisk_crc32(crc, hdr, 2 + 8 * (size_t)nd);
        crc = brisk_crc32(crc, items[i].data, items[i].nbytes);
    }
    return crc;
}

static void format_checksum(uint32_t crc, char out[BRISK_CKPT_CHECKSUM_LEN]) {
    snprintf(out, BRISK_CKPT_CHECKSUM_LEN, "crc32:%08" PRIx32, crc);
}

brisk_status brisk_checkpoint_checksum_entries(const brisk_st_entry *e, size_t n, const brisk_st_meta *meta,
                                               size_t n_meta, char out[BRISK_CKPT_CHECKSUM_LEN], brisk_error *err) {
    ck_item *items = malloc((n ? n : 1) * sizeof *items);
    brisk_st_meta *m = malloc((n_meta ? n_meta : 1) * sizeof *m);
    if (!items || !m) {
        free(items), free(m);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "checkpoint: out of memory for the checksum");
    }
    for (size_t i = 0; i < n; i++)
        items[i] = (ck_item){e[i].name, e[i].dtype, e[i].shape, e[i].data,
                             (size_t)brisk_shape_numel(&e[i].shape) * brisk_dtype_size(e[i].dtype)};
    if (n_meta) memcpy(m, meta, n_meta * sizeof *m);
    format_checksum(canonical_crc(items, n, m, n_meta), out);
    free(items), free(m);
    return BRISK_OK;
}

brisk_status brisk_checkpoint_verify(const brisk_safetensors *st, brisk_error *err) {
    const char *name = brisk_safetensors_name(st);
    const char *fmt = brisk_safetensors_meta(st, "format");
    if (!fmt || strcmp(fmt, BRISK_CKPT_FORMAT) != 0) {
        if (fmt && strcmp(fmt, "brisk-checkpoint-1") == 0)
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: written by an older brisk (format brisk-checkpoint-1, "
                                "without a checksum); this brisk reads %s", name, BRISK_CKPT_FORMAT);
        char shown[64];
        snprintf(shown, sizeof shown, "%s%.40s%s", fmt ? "'" : "", fmt ? fmt : "missing", fmt ? "'" : "");
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a brisk checkpoint (metadata 'format' is %s, expected '%s')",
                            name, shown, BRISK_CKPT_FORMAT);
    }
    const char *want = brisk_safetensors_meta(st, BRISK_CKPT_CHECKSUM_KEY);
    if (!want)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata '%s' is missing: the file is damaged or was not "
                            "written by brisk", name, BRISK_CKPT_CHECKSUM_KEY);
    size_t n = brisk_safetensors_count(st), n_meta = brisk_safetensors_meta_count(st);
    ck_item *items = malloc((n ? n : 1) * sizeof *items);
    brisk_st_meta *m = malloc((n_meta ? n_meta : 1) * sizeof *m);
    if (!items || !m) {
        free(items), free(m);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory for the checksum", name);
    }
    for (size_t i = 0; i < n; i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        items[i] = (ck_item){t->name, t->dtype, t->shape, t->data, t->nbytes};
    }
    for (size_t i = 0; i < n_meta; i++) brisk_safetensors_meta_at(st, i, &m[i].key, &m[i].value);
    char got[BRISK_CKPT_CHECKSUM_LEN];
    format_checksum(canonical_crc(items, n, m, n_meta), got);
    free(items), free(m);
    if (strcmp(got, want) != 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: checksum mismatch (recorded %.40s, the contents give %s): the "
                            "file is corrupt; use an earlier checkpoint (--resume auto picks the newest intact one)",
                            name, want, got);
    return BRISK_OK;
}

int brisk_checkpoint_damaged(brisk_status s) { return s == BRISK_ERR_FORMAT || s == BRISK_ERR_UNSUPPORTED; }

brisk_status brisk_checkpoint_open(const char *path, brisk_safetensors **out, brisk_error *err) {
    *out = NULL;
    brisk_safetensors *st = NULL;
    brisk_status s = brisk_safetensors_open(path, &st, err);
    if (s) return brisk_checkpoint_damaged(s) ? brisk_error_prefix(err, "not a readable checkpoint (truncated or damaged?)") : s;
    if ((s = brisk_checkpoint_verify(st, err))) {
        brisk_safetensors_free(st);
        return s;
    }
    *out = st;
    return BRISK_OK;
}

/* Bounds a checkpoint's counters can reach (train.max_steps and train.epochs are bounded by
 * the config the same way): a larger value is a damaged or hand-made file, not a run. */
#define META_MAX_STEP (INT64_C(1) << 40)
#define META_MAX_EPOCH (INT64_C(1) << 24)

static int64_t meta_int(const brisk_safetensors *st, const char *key, int required, int64_t max, const char **bad) {
    const char *v = brisk_safetensors_meta(st, key);
    if (!v) {
        if (required && !*bad) *bad = key;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < 0 || x > max) {
        if (!*bad) *bad = key;
        return 0;
    }
    return x;
}

/* A number member of o, NaN when absent, null or not a number. */
static double member_num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : NAN;
}

/* "best_val": informational (what a resumed run's summary says of its best), so a value that
 * does not parse is taken as not recorded rather than refused: the loss that decides what
 * replaces best.safetensors is best_val_loss, checked above. */
static void best_at_of(const brisk_safetensors *st, brisk_ckpt_state *out) {
    brisk_best_at *b = &out->best_at;
    *b = (brisk_best_at){-1, -1, 0, NAN, NAN, NAN, NAN, NAN, NAN};
    const char *text = brisk_safetensors_meta(st, "best_val");
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    if (cJSON_IsObject(o)) {
        double e = member_num(o, "epoch"), s = member_num(o, "step");
        if (e >= 0 && e <= META_MAX_EPOCH && s >= 0 && s <= META_MAX_STEP) b->epoch = (int64_t)e, b->step = (int64_t)s;
        b->mid_epoch = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "mid_epoch"));
        b->accuracy = member_num(o, "accuracy"), b->mae = member_num(o, "mae"), b->rmse = member_num(o, "rmse");
        b->px_error = member_num(o, "px_error"), b->pck = member_num(o, "pck");
        b->max_accuracy = member_num(o, "max_accuracy");
    }
    cJSON_Delete(o);
}

brisk_status brisk_checkpoint_state(const brisk_safetensors *st, brisk_ckpt_state *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    const char *bad = NULL;
    out->step = meta_int(st, "step", 1, META_MAX_STEP, &bad);
    out->epoch = meta_int(st, "epoch", 1, META_MAX_EPOCH, &bad);
    out->position = meta_int(st, "position", 1, INT64_C(1) << 53, &bad);
    out->nan_skipped = meta_int(st, "nan_skipped", 0, META_MAX_STEP, &bad);
    out->samples = brisk_safetensors_meta(st, "samples") ? meta_int(st, "samples", 0, INT64_C(1) << 62, &bad) : -1;
    if (bad)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata '%s' is missing or not an integer in [0, %lld]",
                            brisk_safetensors_name(st), bad,
                            (long long)(strcmp(bad, "epoch") == 0 ? META_MAX_EPOCH : strcmp(bad, "position") == 0
                                        ? INT64_C(1) << 53 : META_MAX_STEP));
    const char *opt = brisk_safetensors_meta(st, "optimizer");
    if (!opt || (strcmp(opt, "sgd") != 0 && strcmp(opt, "adamw") != 0))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata 'optimizer' is %s, expected \"sgd\" or \"adamw\"",
                            brisk_safetensors_name(st), opt ? "not one of them" : "missing");
    out->sgd = strcmp(opt, "sgd") == 0;
    const char *best = brisk_safetensors_meta(st, "best_val_loss");
    char *end = NULL;
    out->best_val = best ? strtod(best, &end) : NAN;
    /* "nan" (no validation yet) or a finite loss; "garbage" is not 0 */
    if (best && (end == best || *end || isinf(out->best_val) || out->best_val < 0))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata 'best_val_loss' is \"%.40s\", expected a finite loss "
                            ">= 0 or nan", brisk_safetensors_name(st), best);
    best_at_of(st, out);
    out->config = brisk_safetensors_meta(st, "config");
    if (!out->config)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: metadata 'config' is missing", brisk_safetensors_name(st));
    return BRISK_OK;
}

brisk_status brisk_checkpoint_check(const char *path, int64_t *step, brisk_error *err) {
    brisk_safetensors *st = NULL;
    brisk_ckpt_state cs;
    brisk_status s = brisk_checkpoint_open(path, &st, err);
    if (!s) s = brisk_checkpoint_state(st, &cs, err);
    if (!s && step) *step = cs.step;
    brisk_safetensors_free(st);
    return s;
}
