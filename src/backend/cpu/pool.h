/* brisk's CPU thread pool (pool.c): chunks of a range handed out one at a time to the
 * caller and the pool's workers; idle threads spin briefly, then sleep. Internal to
 * the CPU backend. */
#ifndef BRISK_CPU_POOL_H
#define BRISK_CPU_POOL_H

#include <stdint.h>

typedef struct cpu_pool cpu_pool;
typedef void (*cpu_chunk_fn)(const void *ctx, int64_t i0, int64_t i1);

/* A pool of `threads` threads in all: the caller of cpu_pool_run and threads - 1
 * workers. NULL when a thread cannot be made. */
cpu_pool *cpu_pool_new(int threads);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_threads(const cpu_pool *p);

/* Runs fn over [0, n) in chunks [k * chunk, min(n, (k + 1) * chunk)), each exactly
 * once, and returns when all are done. The chunks depend only on n and chunk; which
 * thread runs which is decided at run time. p NULL, one chunk, or a call from inside
 * a chunk (nested): the chunks run in order on the calling thread. Not for concurrent
 * calls on one pool. */
void cpu_pool_run(cpu_pool *p, int64_t n, int64_t chunk, cpu_chunk_fn fn, const void *ctx);

/* What the throttle (pool.c) did: parallel jobs asked for, those run by the caller
 * alone because waiting for descheduled workers cost more than they gained, times it
 * throttled, and probes after which the workers were worth it again. */
typedef struct cpu_pool_stats {
    int64_t jobs, solo_jobs, throttles, recoveries;
} cpu_pool_stats;
cpu_pool_stats cpu_pool_get_stats(const cpu_pool *p);

/* The index, 0 .. threads - 1, of the calling thread in the pool whose chunk it is
 * running (the caller of cpu_pool_run is 0): for per-thread scratch. */
int cpu_worker_id(void);

#endif
