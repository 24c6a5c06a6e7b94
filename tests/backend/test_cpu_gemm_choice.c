/* The CPU GEMM kernel per shape (src/backend/cpu/gemm_choice.c): a choice is made the first
 * time a shape is seen and kept, written to the cache file and read back by a fresh table,
 * forced by the mode and by BRISK_CPU_GEMM; both kernels agree with a float64 reference on
 * the tuned shapes, and the BLAS's bands give the same bits on 1 to 4 threads. Skips
 * (77) when built without a BLAS. */
#include "backend/cpu/cpu_internal.h"
#include "cpu_test_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct { int ta, tb; int64_t M, N, K; } gshape;

/* the shapes of the brief's measurements: linear layers at batch 16, a 3-class head, attention */
static const gshape shapes[] = {
    {0, 0, 16, 256, 295}, {0, 1, 16, 256, 295}, {1, 0, 256, 295, 16}, {0, 1, 512, 3, 128},
    {1, 0, 3, 128, 512},  {0, 1, 60, 60, 16},   {0, 0, 60, 16, 60},   {0, 0, 200, 300, 100},
};
#define NS ((int)(sizeof shapes / sizeof shapes[0]))

static char dir[512];
static char cache[600];

static cpu_pool *pool_of(int threads) {
    static cpu_pool *pools[5];
    if (threads <= 1) return NULL;
    if (!pools[threads]) pools[threads] = cpu_pool_new(threads);
    return pools[threads];
}

static float *rand_buf(int64_t n) {
    float *p = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = tg_randf(-1.0f, 1.0f);
    return p;
}

typedef struct operands { float *A, *B, *C; int64_t lda, ldb, ldc; } operands;

static operands make(const gshape *s) {
    operands o;
    o.lda = s->ta ? s->M : s->K, o.ldb = s->tb ? s->K : s->N, o.ldc = s->N;
    o.A = rand_buf(s->M * s->K), o.B = rand_buf(s->K * s->N), o.C = rand_buf(s->M * s->N);
    return o;
}

static void drop(operands *o) { free(o->A), free(o->B), free(o->C); }

static int choose(const gshape *s, operands *o) {
    return cpu_gemm_choose_blas(s->ta, s->tb, s->M, s->N, s->K, o->A, o->lda, o->B, o->ldb, o->C, o->ldc, NULL);
}

static int have_blas(void) {
    float a = 1, b = 1, c = 0;
    return cpu_sgemm_blas(NULL, 0, 0, 1, 1, 1, &a, 1, &b, 1, &c, 1);
}

static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

static void setup(void) {
    T_MAKE_DIR(dir, "gemm_choice");
    snprintf(cache, sizeof cache, "%s/cpu-gemm-choice.txt", dir);
    unlink(cache);
    unsetenv("BRISK_CPU_GEMM");
    /* the folder of a (GPU) autotune cache file names where the CPU's file goes */
    char at[600];
    snprintf(at, sizeof at, "%s/gemm-autotune.txt", dir);
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_AUTO, at);
    cpu_gemm_choice_reset();
}

/* Decided once, kept, written; a fresh table reads the same decisions back without timing. */
static void test_choice_made_cached_reread(void) {
    setup();
    int first[NS];
    for (int i = 0; i < NS; i++) {
        operands o = make(&shapes[i]);
        first[i] = choose(&shapes[i], &o);
        CHECK(first[i] == 0 || first[i] == 1);
        for (int k = 0; k < 3; k++) CHECK(choose(&shapes[i], &o) == first[i]); /* fixed once made */
        drop(&o);
    }
    brisk_cpu_gemm_stats st;
    brisk_cpu_gemm_get_stats(&st);
    CHECKF(st.shapes == NS && st.blas + st.own == NS && st.from_cache == 0, "%d shapes, %d blas, %d own, %d cached",
           st.shapes, st.blas, st.own, st.from_cache);
    CHECK(st.tune_ms > 0);
    CHECK(strcmp(st.cache_path, cache) == 0);
    CHECKF(count_lines(cache) == NS + 1, "%s: %d lines", cache, count_lines(cache)); /* a header, one per shape */
    char line[700];
    brisk_cpu_gemm_describe(line, sizeof line);
    char want[64];
    snprintf(want, sizeof want, "%d shapes, %d BLAS / %d own", NS, st.blas, st.own);
    CHECKF(strstr(line, want) != NULL, "describe: %s", line);

    /* a line of another build and a damaged line are skipped */
    FILE *f = fopen(cache, "a");
    REQUIRE(f);
    fprintf(f, "other cpu|other build|0 0 16 256 295 295 256 256\tblas\ngarbage\n");
    fclose(f);
    cpu_gemm_choice_reset();
    for (int i = 0; i < NS; i++) {
        operands o = make(&shapes[i]);
        CHECKF(choose(&shapes[i], &o) == first[i], "shape %d: the cache's choice differs", i);
        drop(&o);
    }
    brisk_cpu_gemm_get_stats(&st);
    CHECKF(st.from_cache == NS && st.tune_ms == 0, "%d from cache, %.3f ms tuning", st.from_cache, st.tune_ms);
    CHECK(count_lines(cache) == NS + 3); /* nothing new appended */
}

/* own, blas, fixed, and BRISK_CPU_GEMM over the configuration; "-": no file */
static void test_forced(void) {
    setup();
    operands o = make(&shapes[0]);
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_OWN, "");
    CHECK(choose(&shapes[0], &o) == 0);
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_BLAS, "");
    CHECK(choose(&shapes[0], &o) == 1);
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_FIXED, "");
    CHECK(choose(&shapes[0], &o) == cpu_sgemm_use_blas(16, 256, 295));
    setenv("BRISK_CPU_GEMM", "blas", 1);
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_OWN, "");
    CHECK(choose(&shapes[0], &o) == 1);
    brisk_cpu_gemm_stats st;
    brisk_cpu_gemm_get_stats(&st);
    CHECK(st.mode == BRISK_CPU_GEMM_BLAS && st.shapes == 0); /* forced: nothing timed or recorded */
    unsetenv("BRISK_CPU_GEMM");
    brisk_cpu_gemm_mode m;
    CHECK(brisk_cpu_gemm_mode_parse("fixed", &m) == 0 && m == BRISK_CPU_GEMM_FIXED);
    CHECK(brisk_cpu_gemm_mode_parse("fast", &m) == -1);

    /* no cache file: a timed choice the next run could not repeat, so the fixed rule */
    brisk_cpu_gemm_configure(BRISK_CPU_GEMM_AUTO, "-");
    cpu_gemm_choice_reset();
    CHECK(choose(&shapes[0], &o) == cpu_sgemm_use_blas(16, 256, 295));
    brisk_cpu_gemm_get_stats(&st);
    CHECK(st.shapes == 1 && st.untimed == 1 && st.tune_ms == 0 && st.cache_path[0] == 0);
    CHECK(access(cache, F_OK) != 0);
    drop(&o);
    setup();
}

/* Both kernels against float64 on the tuned shapes, through the entry the backend uses
 * (cpu_gemm_local: the choice, then that kernel); the BLAS's bands on 1-4 threads agree
 * bit for bit. */
static void test_kernels_agree(void) {
    setup();
    for (int i = 0; i < NS; i++) {
        const gshape *s = &shapes[i];
        operands o = make(s);
        double *R = malloc((size_t)(s->M * s->N) * sizeof(double));
        for (int64_t r = 0; r < s->M; r++)
            for (int64_t c = 0; c < s->N; c++) {
                double sum = 0;
                for (int64_t k = 0; k < s->K; k++)
                    sum += (double)(s->ta ? o.A[k * o.lda + r] : o.A[r * o.lda + k]) *
                           (double)(s->tb ? o.B[c * o.ldb + k] : o.B[k * o.ldb + c]);
                R[r * s->N + c] = sum;
            }
        float *C1 = malloc((size_t)(s->M * s->N) * sizeof(float)), *scratch =
            aligned_alloc(64, cpu_sgemm_scratch_floats() * sizeof(float));
        cpu_gemm_local(s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, o.C, o.ldc, scratch);
        CHECKF(tg_rel_err(o.C, R, s->M * s->N) <= 1e-5, "chosen kernel, shape %d", i);
        cpu_sgemm(NULL, s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, C1, o.ldc, 0, scratch);
        CHECKF(tg_rel_err(C1, R, s->M * s->N) <= 1e-5, "own, shape %d", i);
        REQUIRE(cpu_sgemm_blas(NULL, s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, C1, o.ldc));
        CHECKF(tg_rel_err(C1, R, s->M * s->N) <= 1e-5, "blas, shape %d", i);
        for (int t = 2; t <= 4; t++) {
            cpu_sgemm_blas(pool_of(t), s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, o.C, o.ldc);
            CHECKF(memcmp(o.C, C1, (size_t)(s->M * s->N) * sizeof(float)) == 0, "blas, shape %d: 1 vs %d threads", i, t);
        }
        free(R), free(C1), free(scratch);
        drop(&o);
    }
}

/* Two runs that timed one new shape at once (MPI ranks, parallel tests) and decided apart both
 * take the key's first line in the file, which every later run reads too. */
static void test_first_line_wins(void) {
    setup();
    operands o0 = make(&shapes[0]);
    choose(&shapes[0], &o0); /* loads the (empty) cache, writes a header and one line */
    drop(&o0);
    FILE *f = fopen(cache, "r");
    REQUIRE(f);
    char line[1024] = "", prefix[1024] = "";
    while (fgets(line, sizeof line, f) && line[0] == '#') {}
    fclose(f);
    char *bar = strrchr(line, '|');
    REQUIRE(bar);
    memcpy(prefix, line, (size_t)(bar - line + 1));
    /* "another run" decides shapes 1-6 after this one loaded the file, the BLAS and own in turn
     * (so that this run's own timing cannot agree with all of them by chance) */
    f = fopen(cache, "a");
    REQUIRE(f);
    for (int i = 1; i < NS - 1; i++) {
        operands o = make(&shapes[i]);
        fprintf(f, "%s%d %d %lld %lld %lld %lld %lld %lld\t%s\n", prefix, shapes[i].ta, shapes[i].tb,
                (long long)shapes[i].M, (long long)shapes[i].N, (long long)shapes[i].K, (long long)o.lda,
                (long long)o.ldb, (long long)o.ldc, i % 2 ? "blas" : "own");
        drop(&o);
    }
    fclose(f);
    for (int i = 1; i < NS - 1; i++) {
        operands o = make(&shapes[i]);
        CHECKF(choose(&shapes[i], &o) == i % 2, "shape %d: not the file's first line", i);
        drop(&o);
    }
    cpu_gemm_choice_reset(); /* a later run: the same */
    for (int i = 1; i < NS - 1; i++) {
        operands o = make(&shapes[i]);
        CHECK(choose(&shapes[i], &o) == i % 2);
        drop(&o);
    }
}

int main(void) {
    if (!have_blas()) {
        printf("skipped: built without a BLAS\n");
        return 77;
    }
    t_case c[] = {T(test_choice_made_cached_reread), T(test_first_line_wins), T(test_forced), T(test_kernels_agree)};
    int rc = t_run(c, (int)(sizeof c / sizeof c[0]));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    return rc;
}
