/* brisk's own sgemm or the BLAS, chosen per GEMM shape by timing both (issue 16, part 5).
 * Neither wins everywhere on the AVX-512 box (bench/cpu_kernels.c, 1 thread, us, own |
 * OpenBLAS): 16x256x295 xW 28.6|20.8 but xW^T 31.6|36.3, 512x3x128 17.4|5.5, large shapes
 * own 2-15 % faster. So the first time a shape is seen, both run on the caller's real
 * operands (the first of the product's bands; C is overwritten by the real call right
 * after), alternating, one warm-up each
 * then up to TIMED_RUNS timed samples, on this thread alone (no pool: the thread count cannot
 * change the decision), timed in this thread's CPU time so that another program taking
 * the core does not count; the median decides.
 *
 * The key is everything that changes a kernel's speed or bits: trans_a, trans_b, M, N, K
 * and the three leading dimensions. The decision is process-wide and fixed once made (an
 * insert-only table: lookups take no lock), so every backend, thread count and band split
 * of one process uses the same kernel for a shape. OpenBLAS's bits do depend on how C is
 * split (0.3.21, one thread: 16x256x295 x W^T in 32-column bands differs from the whole
 * product in 3703 of 4096 elements, 15360x128x32 x W^T in 8-row bands in 77 %), so it must
 * only ever see the bands matmul.c cuts by shape alone, one at a time on one thread: then
 * its results, like brisk's own, do not depend on the thread count (test_cpu_threads.c,
 * test_cpu_gemm_choice.c).
 *
 * Decisions are appended to a text cache, "key<TAB>own|blas" per line, beside the CUDA
 * autotune cache (cpu-gemm-choice.txt in the same folder), the key prefixed by the CPU
 * model and the build (brisk commit, SIMD level, OpenBLAS's build): a later run reads
 * them and makes the same choices without timing. Appending one short line per new shape
 * (O_APPEND) keeps concurrent runs from clobbering each other; for a key found twice the
 * first line wins, also for the run that wrote a later one: it re-reads the file after
 * appending and takes the first (MPI ranks or parallel runs timing one new shape at once
 * would otherwise each keep their own). Without a cache file that can be written (speed.autotune_cache "-", no
 * HOME, a read-only folder) a shape not already in it takes the fixed rule, untimed: two runs
 * that each timed afresh could choose differently under load and differ in the last bits
 * (tests/api/same_losses.sh compares a CLI and an API run of one config bit for bit).
 *
 * Modes (brisk_cpu_gemm_configure): auto (above), own, blas (forced), and fixed: the
 * compiled rule of cpu_sgemm_use_blas (own kernel on an AVX-512 build, the BLAS
 * otherwise), no timing, no cache. --deterministic and speed.autotune false use the fixed
 * rule: a timed choice could differ between two runs on a fresh cache, and a cached one
 * between a run that found the cache and one that did not. */
#include "backend/cpu/cpu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if BRISK_HAVE_BLAS
#include <cblas.h>
#endif

extern const char brisk_build_commit[];

#define TIMED_RUNS 3
#define TABLE_SIZE 4096 /* power of two; a full table falls back to the fixed rule */
#define CACHE_NAME "cpu-gemm-choice.txt"
#define CACHE_HEADER "# brisk CPU GEMM choice cache v1: cpu|build|ta tb M N K lda ldb ldc<TAB>own|blas\n"

typedef struct entry {
    _Atomic int ready; /* the fields below are written before ready is released */
    int ta, tb, blas;
    int64_t M, N, K, lda, ldb, ldc;
} entry;

static entry table[TABLE_SIZE];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int mode = BRISK_CPU_GEMM_AUTO;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* BRISK_CPU_GEMM=auto|own|blas|fixed wins over the default and over the configuration */
static int env_mode(void) {
    const char *s = getenv("BRISK_CPU_GEMM");
    brisk_cpu_gemm_mode m;
    return s && brisk_cpu_gemm_mode_parse(s, &m) == 0 ? (int)m : -1;
}

static void read_env(void) {
    int m = env_mode();
    if (m >= 0) atomic_store(&mode, m);
}

/* under lock */
static char cache_path[4096];
static int path_set; /* by brisk_cpu_gemm_configure; else the default place */
static int cache_loaded;
static int writable = -1; /* cache_writable's answer; -1: not asked yet */
static char prefix[512]; /* "cpu model|build|" */
static brisk_cpu_gemm_stats stats;

/* keys read from the file, probed before timing (the table holds only decisions made) */
typedef struct cached { int ta, tb, blas; int64_t M, N, K, lda, ldb, ldc; } cached;
static cached *file_keys;
static int n_file_keys;

static uint64_t hash_key(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
    uint64_t h = 1469598103934665603ull;
    int64_t v[8] = {ta, tb, M, N, K, lda, ldb, ldc};
    for (int i = 0; i < 8; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static int same(const entry *e, int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
    return e->ta == ta && e->tb == tb && e->M == M && e->N == N && e->K == K && e->lda == lda && e->ldb == ldb &&
           e->ldc == ldc;
}

static void default_cache_path(const char *autotune_cache) {
    cache_path[0] = 0;
    if (autotune_cache && strcmp(autotune_cache, "-") == 0) return;
    if (autotune_cache && autotune_cache[0]) { /* beside the file the user named */
        const char *slash = strrchr(autotune_cache, '/');
        if (slash) snprintf(cache_path, sizeof cache_path, "%.*s/%s", (int)(slash - autotune_cache), autotune_cache, CACHE_NAME);
        else snprintf(cache_path, sizeof cache_path, "%s", CACHE_NAME);
        return;
    }
    brisk_cache_file(CACHE_NAME, cache_path, sizeof cache_path);
}

static void make_prefix(void) {
    char model[160] = "unknown cpu";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                const char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ') c++;
                    snprintf(model, sizeof model, "%s", c);
                    model[strcspn(model, "\n|\t")] = 0;
                }
                break;
            }
        fclose(f);
    }
    const char *blas = "noblas";
#if BRISK_HAVE_BLAS
    blas = openblas_get_config();
#endif
#if defined(__AVX512F__)
    const char *simd = "avx512";
#elif defined(__AVX2__)
    const char *simd = "avx2";
#else
    const char *simd = "generic";
#endif
    snprintf(prefix, sizeof prefix, "%s|%s %s %.200s|", model, brisk_build_commit, simd, blas);
    for (char *p = prefix; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
}

static void load_cache(void) {
    cache_loaded = 1;
    free(file_keys), file_keys = NULL, n_file_keys = 0;
    if (!prefix[0]) make_prefix();
    if (!path_set) default_cache_path(NULL), path_set = 1;
    if (!cache_path[0]) return;
    FILE *f = fopen(cache_path, "r");
    if (!f) return;
    char line[1024];
    size_t np = strlen(prefix);
    int cap = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, prefix, np) != 0) continue; /* a comment, another CPU or build */
        cached c;
        long long v[8];
        char kind[8];
        if (sscanf(line + np, "%lld %lld %lld %lld %lld %lld %lld %lld\t%7s", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                   &v[6], &v[7], kind) != 9)
            continue;
        c = (cached){(int)v[0], (int)v[1], strcmp(kind, "blas") == 0, v[2], v[3], v[4], v[5], v[6], v[7]};
        if (!c.blas && strcmp(kind, "own") != 0) continue;
        if (n_file_keys == cap) {
            cap = cap ? 2 * cap : 64;
            cached *k = realloc(file_keys, (size_t)cap * sizeof *k);
            if (!k) break;
            file_keys = k;
        }
        file_keys[n_file_keys++] = c;
    }
    fclose(f);
}

/* 1 when decisions can be kept for the next run (checked once per cache path) */
static int cache_writable(void) {
    if (writable < 0) {
        writable = 0;
        if (cache_path[0] && brisk_cache_prepare(cache_path) == 0) {
            int fd = open(cache_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
            if (fd >= 0) writable = 1, close(fd);
        }
    }
    return writable;
}

static void append_cache(const entry *e) {
    if (!cache_path[0]) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "%s%d %d %lld %lld %lld %lld %lld %lld\t%s\n", prefix, e->ta, e->tb,
                     (long long)e->M, (long long)e->N, (long long)e->K, (long long)e->lda, (long long)e->ldb,
                     (long long)e->ldc, e->blas ? "blas" : "own");
    if (n <= 0 || n >= (int)sizeof line) return;
    int fd = brisk_cache_prepare(cache_path) == 0 ? open(cache_path, O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
    if (fd < 0) return; /* no cache: the next run times again */
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size == 0 && write(fd, CACHE_HEADER, strlen(CACHE_HEADER)) < 0) {
        close(fd);
        return;
    }
    if (write(fd, line, (size_t)n) != n) { /* a short write leaves a line the reader skips */ }
    close(fd);
}

static double thread_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* the median of n (n <= TIMED_RUNS) values; of two, the smaller */
static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return v[(n - 1) / 2];
}

/* Runs own (0) or the BLAS (1) on the product's first band `reps` times; this thread's CPU
 * ns per call. Both kernels cut a product into the same bands, one per pool chunk (matmul.c),
 * so a band is the unit whose speed matters, and timing one costs 1/bands of the product
 * (15360 x 384 x 128, 64 bands: timing it whole took 70 ms on the loaded box). A deep K
 * (a weight gradient over batch x time: 512 x 128 x 15360, 4 bands) is timed over its first
 * TIMED_K only: both kernels go through K in slices of 256 or so, each slice the same work,
 * so a few slices give the rate (the whole band took 27 ms to time). */
#define TIMED_K 1024
static double timed(int blas, int reps, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch) {
    double t0 = thread_ns();
    for (int r = 0; r < reps; r++) cpu_sgemm_one_band(blas, ta, tb, M, N, K, TIMED_K, A, lda, B, ldb, C, ldc, scratch);
    return (thread_ns() - t0) / reps;
}

/* 1 when the BLAS was faster on this thread: after one warm-up call each, up to TIMED_RUNS
 * samples of each kernel, alternating, each sample at least SAMPLE_NS long (a 60 x 60 x 16
 * product takes about 2 us, near the clock's own cost); the medians decide. A shape whose
 * band is large stops sampling once it has cost SHAPE_BUDGET_NS: there per-call costs do
 * not matter, and one or two samples tell the rates apart as well as three. */
#define SAMPLE_NS 20e3
#define SHAPE_BUDGET_NS 1e6
static int time_both(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                     int64_t ldb, float *C, int64_t ldc, float *scratch) {
    double own[TIMED_RUNS], blas[TIMED_RUNS], t0 = thread_ns();
    double w = timed(0, 1, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, scratch);
    double wb = timed(1, 1, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, scratch);
    if (wb < w) w = wb;
    int reps = w <= 0 ? 64 : SAMPLE_NS / w > 64 ? 64 : SAMPLE_NS / w < 1 ? 1 : (int)(SAMPLE_NS / w);
    int n = 0;
    while (n < TIMED_RUNS && (n == 0 || thread_ns() - t0 < SHAPE_BUDGET_NS)) {
        own[n] = timed(0, reps, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, scratch);
        blas[n] = timed(1, reps, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, scratch);
        n++;
    }
    return median(blas, n) < median(own, n);
}

/* the key's first line in the cache file: 1 blas, 0 own, -1 none */
static int file_choice(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
    for (int i = 0; i < n_file_keys; i++) {
        const cached *c = &file_keys[i];
        if (c->ta == ta && c->tb == tb && c->M == M && c->N == N && c->K == K && c->lda == lda && c->ldb == ldb &&
            c->ldc == ldc)
            return c->blas;
    }
    return -1;
}

int cpu_gemm_choose_blas(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float *C, int64_t ldc, float *scratch) {
    if (!BRISK_HAVE_BLAS) return 0;
    pthread_once(&env_once, read_env);
    int m = atomic_load_explicit(&mode, memory_order_relaxed);
    if (m == BRISK_CPU_GEMM_OWN) return 0;
    if (m == BRISK_CPU_GEMM_BLAS) return 1;
    if (m == BRISK_CPU_GEMM_FIXED) return cpu_sgemm_use_blas(M, N, K);
    if (M <= 0 || N <= 0 || K <= 0) return 0; /* nothing to time: C is empty or zeros */
    uint64_t h = hash_key(ta, tb, M, N, K, lda, ldb, ldc);
    for (int i = 0; i < TABLE_SIZE; i++) { /* lock-free: entries are only ever added */
        entry *e = &table[(h + (uint64_t)i) & (TABLE_SIZE - 1)];
        if (!atomic_load_explicit(&e->ready, memory_order_acquire)) break;
        if (same(e, ta, tb, M, N, K, lda, ldb, ldc)) return e->blas;
    }
    pthread_mutex_lock(&lock);
    if (!cache_loaded) load_cache();
    entry *slot = NULL;
    for (int i = 0; i < TABLE_SIZE; i++) {
        entry *e = &table[(h + (uint64_t)i) & (TABLE_SIZE - 1)];
        if (!atomic_load_explicit(&e->ready, memory_order_relaxed)) {
            slot = e;
            break;
        }
        if (same(e, ta, tb, M, N, K, lda, ldb, ldc)) { /* another thread decided it meanwhile */
            int b = e->blas;
            pthread_mutex_unlock(&lock);
            return b;
        }
    }
    if (!slot) { /* full: not worth growing for a run with thousands of GEMM shapes */
        pthread_mutex_unlock(&lock);
        return cpu_sgemm_use_blas(M, N, K);
    }
    int blas = file_choice(ta, tb, M, N, K, lda, ldb, ldc);
    slot->ta = ta, slot->tb = tb, slot->M = M, slot->N = N, slot->K = K;
    slot->lda = lda, slot->ldb = ldb, slot->ldc = ldc;
    if (blas >= 0) {
        stats.from_cache++;
    } else if (!cache_writable()) { /* a choice the next run could not repeat: the fixed rule */
        blas = cpu_sgemm_use_blas(M, N, K);
        stats.untimed++;
    } else {
        double t0 = thread_ns();
        float *own_scratch = NULL;
        if (!scratch) scratch = own_scratch = aligned_alloc(64, cpu_sgemm_scratch_floats() * sizeof(float));
        blas = scratch ? time_both(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, scratch) : cpu_sgemm_use_blas(M, N, K);
        free(own_scratch);
        stats.tune_ms += (thread_ns() - t0) * 1e-6;
        slot->blas = blas;
        append_cache(slot);
        /* runs that timed the same new shape at once (MPI ranks, parallel tests) may have
         * decided apart: all of them take the key's first line in the file, so that every
         * later run, which reads that line, computes with the same kernel */
        load_cache();
        int first = file_choice(ta, tb, M, N, K, lda, ldb, ldc);
        if (first >= 0) blas = first;
    }
    slot->blas = blas;
    stats.shapes++;
    if (blas) stats.blas++;
    else stats.own++;
    atomic_store_explicit(&slot->ready, 1, memory_order_release);
    pthread_mutex_unlock(&lock);
    return blas;
}

/* the cache file's keys dropped, to be read again when next needed (under the lock) */
static void forget_file(void) {
    free(file_keys);
    file_keys = NULL;
    n_file_keys = 0;
    cache_loaded = 0;
    writable = -1;
}

void brisk_cpu_gemm_configure(brisk_cpu_gemm_mode m, const char *autotune_cache) {
    pthread_once(&env_once, read_env);
    int e = env_mode();
    pthread_mutex_lock(&lock);
    atomic_store(&mode, e >= 0 ? e : (int)m);
    char old[sizeof cache_path];
    snprintf(old, sizeof old, "%s", cache_path);
    default_cache_path(autotune_cache);
    path_set = 1;
    if (strcmp(old, cache_path) != 0) forget_file(); /* another file: its decisions, read when next needed */
    pthread_mutex_unlock(&lock);
}

int brisk_cpu_gemm_mode_parse(const char *s, brisk_cpu_gemm_mode *m) {
    static const char *const names[] = {"auto", "own", "blas", "fixed"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *m = (brisk_cpu_gemm_mode)i;
            return 0;
        }
    return -1;
}

void brisk_cpu_gemm_get_stats(brisk_cpu_gemm_stats *out) {
    pthread_once(&env_once, read_env);
    pthread_mutex_lock(&lock);
    if (!path_set) default_cache_path(NULL), path_set = 1;
    *out = stats;
    out->mode = (brisk_cpu_gemm_mode)atomic_load(&mode);
    snprintf(out->cache_path, sizeof out->cache_path, "%s", cache_path);
    pthread_mutex_unlock(&lock);
}

void brisk_cpu_gemm_describe(char *buf, size_t n) {
    brisk_cpu_gemm_stats s;
    brisk_cpu_gemm_get_stats(&s);
#if !BRISK_HAVE_BLAS
    snprintf(buf, n, "brisk's own sgemm for every shape (built without a BLAS)");
    return;
#endif
    switch (s.mode) {
    case BRISK_CPU_GEMM_OWN: snprintf(buf, n, "forced: brisk's own sgemm for every shape (speed.cpu_gemm own)"); return;
    case BRISK_CPU_GEMM_BLAS: snprintf(buf, n, "forced: the BLAS for every shape (speed.cpu_gemm blas)"); return;
    case BRISK_CPU_GEMM_FIXED:
        snprintf(buf, n, "fixed rule, no timing (deterministic, speed.autotune false or speed.cpu_gemm fixed): %s",
                 cpu_sgemm_use_blas(64, 64, 64) ? "the BLAS" : "brisk's own sgemm");
        return;
    default:
        if (s.shapes == 0) /* the run's start: nothing decided yet */
            snprintf(buf, n, "own sgemm or the BLAS, timed as each shape is first seen (cache %s)",
                     s.cache_path[0] ? s.cache_path : "none");
        else
            snprintf(buf, n, "%d shapes, %d BLAS / %d own, tuned in %.1f ms, %d from cache (%s)%s", s.shapes, s.blas,
                     s.own, s.tune_ms, s.from_cache, s.cache_path[0] ? s.cache_path : "no cache file",
                     s.untimed ? "; no writable cache: the fixed rule, untimed, for the shapes not in it" : "");
    }
}

/* for tests: forget every decision (the table, the counters and the file's keys) */
void cpu_gemm_choice_reset(void) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < TABLE_SIZE; i++) atomic_store(&table[i].ready, 0);
    memset(&stats, 0, sizeof stats);
    forget_file();
    pthread_mutex_unlock(&lock);
}
