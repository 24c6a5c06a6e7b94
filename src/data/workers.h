/* data-internal: a small fixed pool of threads that run one indexed job at a time (the
 * loader's per-sample decoding). The calling thread works too, so a pool of n threads
 * gives n + 1 workers; a pool of 0 runs the job in the caller alone. */
#ifndef BRISK_DATA_WORKERS_H
#define BRISK_DATA_WORKERS_H

#include "brisk/core.h"

typedef brisk_status (*brisk_work_fn)(void *user, int64_t j, brisk_error *err);
typedef struct brisk_workers brisk_workers;

brisk_status brisk_workers_create(brisk_workers **out, int threads, brisk_error *err);
/* Runs fn(user, j) for j in [0, count), items taken dynamically; returns when all are
 * done. On failure the error is that of the lowest failing j (the same whatever the
 * thread count), and items not yet started are abandoned. */
brisk_status brisk_workers_run(brisk_workers *w, int64_t count, brisk_work_fn fn, void *user, brisk_error *err);
void brisk_workers_destroy(brisk_workers *w);

#endif
