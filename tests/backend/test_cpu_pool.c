#define _GNU_SOURCE
/* brisk's CPU thread pool (backend/cpu/pool.c): every chunk runs exactly once, on a
 * worker index in range, for many jobs in a row (the generation hand-off), nested
 * calls run inline, and a pool with more threads than CPUs, or one whose workers
 * were never woken before it is freed, still finishes; and the throttle: a worker made
 * slow (descheduled, as on a busy machine) sends the pool to the caller alone, it
 * comes back when the stall stops, and the results never change. */
#include "backend/cpu/pool.h"
#include "test.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define MAXN 5000

typedef struct count_ctx {
    _Atomic int hits[MAXN];
    _Atomic int bad_bounds, bad_worker;
    int64_t n, chunk;
    int threads;
    cpu_pool *nested;
} count_ctx;

static void count_range(const void *vctx, int64_t i0, int64_t i1) {
    count_ctx *c = (count_ctx *)vctx;
    if (i0 % c->chunk != 0 || i1 - i0 > c->chunk || i1 > c->n || i0 >= i1) atomic_fetch_add(&c->bad_bounds, 1);
    int w = cpu_worker_id();
    if (w < 0 || w >= c->threads) atomic_fetch_add(&c->bad_worker, 1);
    for (int64_t i = i0; i < i1 && i < MAXN; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void check_job(cpu_pool *p, int threads, int64_t n, int64_t chunk) {
    static count_ctx c;
    memset(&c, 0, sizeof c);
    c.n = n, c.chunk = chunk, c.threads = threads;
    cpu_pool_run(p, n, chunk, count_range, &c);
    int once = 1;
    for (int64_t i = 0; i < n; i++) once &= atomic_load(&c.hits[i]) == 1;
    CHECKF(once, "threads %d n %lld chunk %lld: an item ran other than once", threads, (long long)n, (long long)chunk);
    CHECK(atomic_load(&c.bad_bounds) == 0);
    CHECK(atomic_load(&c.bad_worker) == 0);
}

static void test_every_chunk_once(void) {
    for (int threads = 1; threads <= 4; threads++) {
        cpu_pool *p = threads > 1 ? cpu_pool_new(threads) : NULL;
        REQUIRE(threads == 1 || p);
        CHECK(cpu_pool_threads(p) == threads);
        const int64_t ns[] = {1, 2, 7, 16, 100, 1023, MAXN};
        const int64_t chunks[] = {1, 3, 16, 64, 10000};
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
            for (size_t b = 0; b < sizeof chunks / sizeof chunks[0]; b++) check_job(p, threads, ns[a], chunks[b]);
        check_job(p, threads, 0, 4); /* nothing to do */
        cpu_pool_free(p);
    }
}

/* Thousands of short jobs back to back: a worker late for one job must never run a
 * chunk of the next with the old job's fields. */
static void test_many_jobs(void) {
    cpu_pool *p = cpu_pool_new(3);
    REQUIRE(p);
    for (int j = 0; j < 3000; j++) check_job(p, 3, 1 + j % 97, 1 + j % 5);
    cpu_pool_free(p);
}

static void nested_range(const void *vctx, int64_t i0, int64_t i1) {
    count_ctx *c = (count_ctx *)vctx;
    /* a parallel call from inside a chunk runs on this thread, in order */
    for (int64_t i = i0; i < i1; i++) {
        count_ctx inner;
        memset(&inner, 0, sizeof inner);
        inner.n = 8, inner.chunk = 2, inner.threads = c->threads;
        int w = cpu_worker_id();
        cpu_pool_run(c->nested, 8, 2, count_range, &inner);
        int ok = cpu_worker_id() == w;
        for (int k = 0; k < 8; k++) ok &= atomic_load(&inner.hits[k]) == 1;
        if (!ok) atomic_fetch_add(&c->bad_bounds, 1);
        atomic_fetch_add(&c->hits[i], 1);
    }
}

static void test_nested_inline(void) {
    cpu_pool *p = cpu_pool_new(2);
    REQUIRE(p);
    static count_ctx c;
    memset(&c, 0, sizeof c);
    c.n = 40, c.chunk = 3, c.threads = 2, c.nested = p;
    cpu_pool_run(p, c.n, c.chunk, nested_range, &c);
    for (int i = 0; i < 40; i++) CHECK(atomic_load(&c.hits[i]) == 1);
    CHECK(atomic_load(&c.bad_bounds) == 0);
    cpu_pool_free(p);
}

/* More threads than this machine has CPUs; pools freed at once or after their workers
 * went to sleep (the spin is bounded, so 0.2 s idle puts them on the futex). */
static void test_oversubscribed_and_sleeping(void) {
    cpu_pool *p = cpu_pool_new(16);
    REQUIRE(p);
    check_job(p, 16, 1000, 7);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    check_job(p, 16, 1000, 7); /* wakes sleeping workers */
    cpu_pool_free(p);
    for (int k = 0; k < 20; k++) cpu_pool_free(cpu_pool_new(4)); /* workers that never ran a job */
}

typedef struct stall_ctx {
    _Atomic int stall;       /* workers (not the caller) sleep STALL_NS in each chunk */
    double out[16];
} stall_ctx;

#define STALL_NS 3000000

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ~10 us of arithmetic per item, the size of a step's small GEMMs */
static void stall_range(const void *vctx, int64_t i0, int64_t i1) {
    stall_ctx *c = (stall_ctx *)vctx;
    if (cpu_worker_id() != 0 && atomic_load(&c->stall)) {
        struct timespec ts = {0, STALL_NS};
        nanosleep(&ts, NULL);
    }
    for (int64_t i = i0; i < i1; i++) {
        double x = (double)i + 0.5;
        for (int k = 0; k < 4000; k++) x = x * 0.999999 + 1e-3 / (x + k);
        c->out[i] = x;
    }
}

static int run_stall_job(cpu_pool *p, stall_ctx *c, const double *want) {
    memset(c->out, 0, sizeof c->out);
    cpu_pool_run(p, 16, 1, stall_range, c);
    return memcmp(c->out, want, sizeof c->out) == 0;
}

static void test_throttle_under_stall(void) {
    static stall_ctx c;
    double want[16];
    cpu_pool_run(NULL, 16, 1, stall_range, &c);
    memcpy(want, c.out, sizeof want);
    cpu_pool *p = cpu_pool_new(2);
    REQUIRE(p);
    int same = 1;
    /* stalled workers: a 100 us job would take 3 ms with them, so the caller goes alone */
    atomic_store(&c.stall, 1);
    for (int64_t t0 = mono_ns(); mono_ns() - t0 < 300000000;) same &= run_stall_job(p, &c, want);
    cpu_pool_stats s = cpu_pool_get_stats(p);
    CHECKF(s.throttles >= 1, "no throttle under a stall (%lld jobs)", (long long)s.jobs);
    CHECKF(s.solo_jobs * 2 > s.jobs, "only %lld of %lld jobs alone under a stall", (long long)s.solo_jobs,
           (long long)s.jobs);
    /* the stall stops: after the pause a probe window finds the workers worth it again */
    atomic_store(&c.stall, 0);
    int64_t t0 = mono_ns();
    /* 20 s: ctest may load the CPUs with other tests meanwhile */
    while (cpu_pool_get_stats(p).recoveries == s.recoveries && mono_ns() - t0 < 20000000000LL)
        same &= run_stall_job(p, &c, want);
    cpu_pool_stats r = cpu_pool_get_stats(p);
    CHECKF(r.recoveries > s.recoveries, "no recovery within 20 s of the stall's end (%lld jobs, %lld alone)",
           (long long)(r.jobs - s.jobs), (long long)(r.solo_jobs - s.solo_jobs));
    CHECK(same); /* alone or not, bit for bit the serial results */
    cpu_pool_free(p);
}

int main(void) {
    t_case c[] = {T(test_every_chunk_once), T(test_many_jobs), T(test_nested_inline),
                  T(test_oversubscribed_and_sleeping), T(test_throttle_under_stall)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
