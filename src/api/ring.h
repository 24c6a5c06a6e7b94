/* The session's sample buffer: a bounded ring of (input, target) rows, copied in from any
 * row stride, read out oldest first as a dataset for one train call. */
#ifndef BRISK_API_RING_H
#define BRISK_API_RING_H

#include "brisk/data.h"

typedef struct brisk_ring {
    int64_t cap, count, head;  /* head: slot of the oldest row */
    int64_t w_in, w_tg;        /* floats per input row and per target row */
    int64_t classes;           /* > 0: the target is one class label in [0, classes) */
    int reject;                /* when full: 1 refuse the push, 0 drop the oldest rows */
    float *in, *tg;            /* [cap, w_in], [cap, w_tg] */
    int64_t pushed, dropped;   /* totals, for the session's queries */
} brisk_ring;

brisk_status brisk_ring_init(brisk_ring *r, int64_t cap, int64_t w_in, int64_t w_tg, int64_t classes, int reject,
                             brisk_error *err);
void brisk_ring_free(brisk_ring *r);
/* BRISK_ERR_FULL when a "reject" buffer cannot take n more rows. */
brisk_status brisk_ring_room(const brisk_ring *r, int64_t n, brisk_error *err);
/* Stores n rows (rows `stride` floats apart, values checked by the caller); a push that does
 * not fit a "reject" buffer stores nothing and fails. */
brisk_status brisk_ring_push(brisk_ring *r, int64_t n, const float *in, int64_t in_stride, const float *tg,
                             int64_t tg_stride, brisk_error *err);
void brisk_ring_clear(brisk_ring *r);
/* The rows, oldest first, as a dataset of fields in_name [count, w_in] (f32) and tg_name
 * [count, w_tg] (f32), or [count] (i32) for labels. */
brisk_status brisk_ring_dataset(const brisk_ring *r, const char *in_name, const char *tg_name, brisk_dataset *ds,
                                brisk_error *err);

#endif
