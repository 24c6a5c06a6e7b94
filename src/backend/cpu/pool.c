/* brisk's CPU thread pool: the one place kernels get threads from.
 *
 * Why its own pool and not OpenMP: brisk shares its cores (a simulation's MPI ranks,
 * a data job, a notebook), and there one descheduled or spinning thread must not
 * stall or starve the step. That needs (1) work handed out in chunks taken one at a
 * time, so a slow thread holds up at most the chunk it has, and (2) idle threads that
 * spin only briefly before sleeping, whatever the environment says. libgomp reads its
 * wait policy (OMP_WAIT_POLICY, GOMP_SPINCOUNT) once, from the environment, when it is
 * loaded - before any brisk code runs in a host program that links brisk, and shared
 * with the host's own OpenMP regions - so brisk could not set it for the embedded
 * library. bench/cpu_kernels.c `pool` compares the two.
 *
 * A job is (fn, ctx, n, chunk): chunk k covers [k * chunk, min(n, (k + 1) * chunk)).
 * The caller and up to threads - 1 workers claim chunk indices from one 64-bit ticket,
 * (generation << 32 | next chunk), by compare-and-swap: a worker that read the job's
 * fields for one generation can only claim a chunk of that generation (the caller
 * closes the ticket before it rewrites the fields), so a worker that wakes late never
 * runs a chunk of the wrong job. The caller returns when `done` reaches
 * the chunk count - it waits for chunks that were claimed, never for a worker that has
 * not woken up.
 *
 * Waiting: a worker spins for SPIN_NS after its last job (kernels of one step follow
 * each other within microseconds, so an idle-machine step never sleeps), then sleeps on
 * a futex until the next job; the caller waiting for the last chunks does the same.
 *
 * Throttle: dynamic chunks bound the wait to one claimed chunk, but on a shared machine
 * that chunk may belong to a worker the kernel has just descheduled (CFS slices are
 * ms, a step's jobs are ~10 us), and a job of 10 us then takes ms. So the caller
 * measures, per job, its own time per chunk (an estimate of the job run alone: that
 * time x chunks) against what the job took in parallel, wait included; when, over a
 * window of jobs, parallel cost more than running alone would have (or the excess
 * passes THROTTLE_EXCESS_NS at any point), the caller runs every job alone for a while
 * (the workers sleep and hand their cores back), then probes with the workers again;
 * each failed probe doubles the pause, up to THROTTLE_MAX_NS, so a lasting load costs
 * a probe window per second at most and an idle machine gets its speed back within
 * that. Alone, the caller runs the same chunks in order: results are unchanged. Why
 * the whole pool and not a per-job threshold: under a busy machine's load the jobs
 * that stall are the small ones, which are nearly all of a step's jobs; and why
 * measured waits and not run-delay counters (schedstat, getrusage): those say a
 * thread waited for a core, not whether that cost the step anything. */
#define _GNU_SOURCE
#include "backend/cpu/pool.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long an idle thread spins before it sleeps. Long enough to bridge the gaps
 * between the kernels of a step (a few us of serial work), short enough that a core
 * shared with another program is handed back at once. */
#define SPIN_NS 40000

/* The throttle (see the header): a window of jobs judged together, the excess wait
 * that throttles at once, and the first and longest pause before a probe. */
#define THROTTLE_WINDOW 128
#define THROTTLE_EXCESS_NS 1000000
#define THROTTLE_MIN_NS 20000000
#define THROTTLE_MAX_NS 1000000000

struct cpu_pool {
    int threads;                 /* caller + workers */
    pthread_t *tid;
    /* the job, written by the caller between closing the old ticket and publishing the
     * new one (atomics only because a late worker may read them while they change) */
    _Atomic(cpu_chunk_fn) fn;
    _Atomic(const void *) ctx;
    _Atomic int64_t n, chunk;
    _Atomic uint32_t nchunks;
    _Atomic uint64_t ticket;     /* generation << 32 | next chunk index */
    _Atomic uint32_t gen;        /* futex word the workers sleep on: the generation */
    _Atomic uint32_t done;       /* chunks finished in this generation; futex word for the caller */
    _Atomic int sleepers;        /* workers in or about to enter futex_wait on gen */
    _Atomic int caller_sleeps;   /* the caller is in or about to enter futex_wait on done */
    _Atomic int stop;
    /* the throttle: touched only by the caller (runs on one pool are not concurrent) */
    int64_t solo_until, pause_ns;  /* run alone until solo_until; the next pause */
    int64_t win_jobs, win_par_ns, win_solo_ns; /* this window: jobs, time in parallel, estimate alone */
    int probing;                   /* this window follows a pause */
    cpu_pool_stats stats;
};

static _Thread_local int tl_worker;    /* this thread's index in the pool running it */
static _Thread_local int tl_in_job;    /* inside a chunk: nested parallel calls run inline */

int cpu_worker_id(void) { return tl_worker; }

static void futex_wait(_Atomic uint32_t *w, uint32_t expect) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int n) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Claims and runs chunks of generation g until none is left; the fields were read
 * after the ticket showed g, and a successful claim proves they still belong to g. */
static int64_t run_chunks(cpu_pool *p, uint32_t g) {
    int64_t ran = 0;
    uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    cpu_chunk_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
    const void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    int64_t chunk = atomic_load_explicit(&p->chunk, memory_order_relaxed);
    uint32_t nchunks = atomic_load_explicit(&p->nchunks, memory_order_relaxed);
    for (;;) {
        if ((uint32_t)(t >> 32) != g || (uint32_t)t >= nchunks) return ran;
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        int64_t k = (int64_t)(uint32_t)t, i0 = k * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
        tl_in_job = 1;
        fn(ctx, i0, i1);
        tl_in_job = 0;
        ran++;
        /* seq_cst: the caller stores caller_sleeps, then reads done */
        if (atomic_fetch_add(&p->done, 1) + 1 == nchunks &&
            atomic_load(&p->caller_sleeps))
            futex_wake(&p->done, 1);
        t = atomic_load_explicit(&p->ticket, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    cpu_pool *p = ((void **)arg)[0];
    tl_worker = (int)(intptr_t)((void **)arg)[1];
    free(arg);
    uint32_t seen = 0; /* the generation at creation: a job or stop before this thread ran is not missed */
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen) {
            int64_t t0 = now_ns();
            for (int i = 1; (g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen; i++) {
                CPU_RELAX();
                if ((i & 63) == 0 && now_ns() - t0 > SPIN_NS) {
                    atomic_fetch_add(&p->sleepers, 1);
                    /* seq_cst: the caller stores gen, then reads sleepers */
                    if (atomic_load(&p->gen) == seen) futex_wait(&p->gen, seen);
                    atomic_fetch_sub(&p->sleepers, 1);
                    t0 = now_ns();
                }
            }
        }
        seen = g;
        if (atomic_load(&p->stop)) return NULL;
        run_chunks(p, g);
    }
}

cpu_pool *cpu_pool_new(int threads) {
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->threads = threads < 1 ? 1 : threads;
    p->pause_ns = THROTTLE_MIN_NS;
    if (p->threads > 1) {
        p->tid = calloc((size_t)p->threads, sizeof *p->tid);
        if (!p->tid) { free(p); return NULL; }
    }
    for (int w = 1; w < p->threads; w++) {
        void **arg = malloc(2 * sizeof *arg);
        if (arg) arg[0] = p, arg[1] = (void *)(intptr_t)w;
        if (!arg || pthread_create(&p->tid[w], NULL, worker_main, arg) != 0) {
            free(arg);
            p->threads = w; /* the workers made so far are joined by free */
            cpu_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void cpu_pool_free(cpu_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake(&p->gen, INT32_MAX);
    for (int w = 1; w < p->threads; w++) pthread_join(p->tid[w], NULL);
    free(p->tid);
    free(p);
}

int cpu_pool_threads(const cpu_pool *p) { return p ? p->threads : 1; }

static void throttle(cpu_pool *p, int64_t now) {
    p->solo_until = now + p->pause_ns;
    p->pause_ns = p->pause_ns * 2 < THROTTLE_MAX_NS ? p->pause_ns * 2 : THROTTLE_MAX_NS;
    p->stats.throttles++;
    p->probing = 1;
    p->win_jobs = p->win_par_ns = p->win_solo_ns = 0;
}

/* One parallel job's account: it took par_ns; alone it would have taken about the
 * caller's time per chunk times the chunks (unknown when the caller ran none). */
static void throttle_account(cpu_pool *p, int64_t now, int64_t par_ns, int64_t own_ns, int64_t own, int64_t nchunks) {
    if (own <= 0) return;
    p->win_jobs++;
    p->win_par_ns += par_ns;
    p->win_solo_ns += own_ns * nchunks / own;
    if (p->win_par_ns - p->win_solo_ns > THROTTLE_EXCESS_NS) {
        throttle(p, now);
    } else if (p->win_jobs >= THROTTLE_WINDOW) {
        if (p->win_par_ns > p->win_solo_ns) {
            throttle(p, now);
            return;
        }
        if (p->probing) p->stats.recoveries++;
        p->probing = 0;
        p->pause_ns = THROTTLE_MIN_NS;
        p->win_jobs = p->win_par_ns = p->win_solo_ns = 0;
    }
}

void cpu_pool_run(cpu_pool *p, int64_t n, int64_t chunk, cpu_chunk_fn fn, const void *ctx) {
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    int64_t nchunks = (n + chunk - 1) / chunk;
    int64_t t0 = 0;
    int eligible = p && p->threads > 1 && nchunks > 1 && !tl_in_job && nchunks <= UINT32_MAX / 2;
    if (eligible) {
        p->stats.jobs++;
        t0 = now_ns();
        if (t0 < p->solo_until) {
            p->stats.solo_jobs++;
            eligible = 0;
        }
    }
    if (!eligible) {
        /* the same chunks, in order, on this thread: the same results */
        for (int64_t k = 0; k < nchunks; k++) fn(ctx, k * chunk, (k + 1) * chunk < n ? (k + 1) * chunk : n);
        return;
    }
    uint32_t g = atomic_load(&p->gen) + 1;
    /* Close the ticket first: a worker still holding the last job's ticket value then
     * fails its claim instead of pairing it with this job's fields. */
    atomic_store(&p->ticket, (uint64_t)g << 32 | UINT32_MAX);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->chunk, chunk, memory_order_relaxed);
    atomic_store_explicit(&p->nchunks, (uint32_t)nchunks, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ticket, (uint64_t)g << 32, memory_order_release);
    atomic_store(&p->gen, g); /* seq_cst, then read sleepers: no lost wake-up */
    if (atomic_load(&p->sleepers) > 0) futex_wake(&p->gen, p->threads - 1);
    int saved = tl_worker;
    tl_worker = 0;
    int64_t own = run_chunks(p, g);
    tl_worker = saved;
    int64_t t1 = now_ns();
    uint32_t d = atomic_load_explicit(&p->done, memory_order_acquire);
    if (d == nchunks) {
        throttle_account(p, t1, t1 - t0, t1 - t0, own, nchunks);
        return;
    }
    for (int i = 1; (d = atomic_load_explicit(&p->done, memory_order_acquire)) != nchunks; i++) {
        CPU_RELAX();
        if ((i & 63) == 0 && now_ns() - t1 > SPIN_NS) {
            atomic_store(&p->caller_sleeps, 1);
            d = atomic_load(&p->done);
            if (d != nchunks) futex_wait(&p->done, d);
            atomic_store(&p->caller_sleeps, 0);
        }
    }
    int64_t t2 = now_ns();
    throttle_account(p, t2, t2 - t0, t1 - t0, own, nchunks);
}

cpu_pool_stats cpu_pool_get_stats(const cpu_pool *p) {
    cpu_pool_stats s = {0};
    if (p) s = p->stats;
    return s;
}
