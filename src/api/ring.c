/* The session's bounded sample buffer (see ring.h). Rows are stored at their slot in two
 * dense arrays; a full ring either refuses a push whole or overwrites its oldest rows. */
#include "api/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

brisk_status brisk_ring_init(brisk_ring *r, int64_t cap, int64_t w_in, int64_t w_tg, int64_t classes, int reject,
                             brisk_error *err) {
    memset(r, 0, sizeof *r);
    if (cap < 1 || w_in < 1 || w_tg < 1 || cap > (INT64_C(1) << 40) / (w_in + w_tg))
        return brisk_errorf(err, BRISK_ERR_INVALID, "data.buffer.capacity %lld samples of %lld + %lld floats: "
                            "expected at least 1 sample and at most 2^40 floats in all",
                            (long long)cap, (long long)w_in, (long long)w_tg);
    r->in = malloc(sizeof(float) * (size_t)(cap * w_in));
    r->tg = malloc(sizeof(float) * (size_t)(cap * w_tg));
    if (!r->in || !r->tg) {
        brisk_ring_free(r);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "data.buffer.capacity %lld: cannot allocate %.1f MiB for the buffer",
                            (long long)cap, 4.0 * (double)(cap * (w_in + w_tg)) / 1048576.0);
    }
    r->cap = cap, r->w_in = w_in, r->w_tg = w_tg, r->classes = classes, r->reject = reject;
    return BRISK_OK;
}

void brisk_ring_free(brisk_ring *r) {
    free(r->in);
    free(r->tg);
    memset(r, 0, sizeof *r);
}

void brisk_ring_clear(brisk_ring *r) { r->count = r->head = 0; }

brisk_status brisk_ring_room(const brisk_ring *r, int64_t n, brisk_error *err) {
    if (!r->reject || n <= r->cap - r->count) return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_FULL, "the buffer holds %lld of %lld samples and %lld more do not fit "
                        "(data.buffer.when_full is \"reject\"); train and clear it, or push fewer",
                        (long long)r->count, (long long)r->cap, (long long)n);
}

brisk_status brisk_ring_push(brisk_ring *r, int64_t n, const float *in, int64_t in_stride, const float *tg,
                             int64_t tg_stride, brisk_error *err) {
    brisk_status st = brisk_ring_room(r, n, err);
    if (st) return st;
    /* Rows that would be overwritten within this same push are skipped outright. */
    int64_t skip = n > r->cap ? n - r->cap : 0;
    r->dropped += skip;
    r->pushed += n;
    for (int64_t i = skip; i < n; i++) {
        int64_t slot;
        if (r->count < r->cap) slot = (r->head + r->count++) % r->cap;
        else slot = r->head, r->head = (r->head + 1) % r->cap, r->dropped++;
        memcpy(r->in + slot * r->w_in, in + i * in_stride, sizeof(float) * (size_t)r->w_in);
        memcpy(r->tg + slot * r->w_tg, tg + i * tg_stride, sizeof(float) * (size_t)r->w_tg);
    }
    return BRISK_OK;
}

brisk_status brisk_ring_dataset(const brisk_ring *r, const char *in_name, const char *tg_name, brisk_dataset *ds,
                                brisk_error *err) {
    memset(ds, 0, sizeof *ds);
    snprintf(ds->source, sizeof ds->source, "the session's buffer");
    brisk_tensor a, b;
    brisk_status st = brisk_tensor_alloc(&a, BRISK_F32, brisk_shape2(r->count, r->w_in), err);
    if (st) return st;
    int labels = r->classes > 0;
    if ((st = brisk_tensor_alloc(&b, labels ? BRISK_I32 : BRISK_F32,
                                 labels ? brisk_shape1(r->count) : brisk_shape2(r->count, r->w_tg), err))) {
        brisk_tensor_free(&a);
        return st;
    }
    for (int64_t i = 0; i < r->count; i++) {
        int64_t slot = (r->head + i) % r->cap;
        memcpy((float *)a.data + i * r->w_in, r->in + slot * r->w_in, sizeof(float) * (size_t)r->w_in);
        if (labels) ((int32_t *)b.data)[i] = (int32_t)r->tg[slot];
        else memcpy((float *)b.data + i * r->w_tg, r->tg + slot * r->w_tg, sizeof(float) * (size_t)r->w_tg);
    }
    if ((st = brisk_dataset_add(ds, in_name, &a, err))) {
        brisk_tensor_free(&b);
        return st;
    }
    if ((st = brisk_dataset_add(ds, tg_name, &b, err))) brisk_dataset_free(ds);
    return st;
}
