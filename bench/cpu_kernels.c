/* Microbenchmark of the CPU backend's kernels at the workloads' shapes (not a test):
 * GEMMs of the diffusion (batch 16) and tabular (batch 512) MLPs, forward and both
 * backward products, brisk's own sgemm against the BLAS; AdamW over the diffusion
 * model's 273,152 parameters; a few activations. Prints the median of repeated
 * timings in microseconds.
 *
 *   cmake --build build --target bench_cpu_kernels && OMP_NUM_THREADS=2 build/bench/bench_cpu_kernels */
#include "backend/cpu/cpu_internal.h"
#include "brisk/graph.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median over `reps` samples of the mean time of `inner` calls */
#define TIME_US(out, reps, inner, stmt) do { \
    double s_[64]; \
    for (int r_ = 0; r_ < (reps); r_++) { \
        double t0_ = now_us(); \
        for (int i_ = 0; i_ < (inner); i_++) { stmt; } \
        s_[r_] = (now_us() - t0_) / (inner); \
    } \
    qsort(s_, (reps), sizeof(double), cmp_d); \
    (out) = s_[(reps) / 2]; } while (0)

static float *randv(int64_t n) {
    float *p = aligned_alloc(64, ((size_t)n * 4 + 63) / 64 * 64);
    for (int64_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

typedef struct { const char *what; int64_t M, N, K; int ta, tb; } gemm_case;

static void bench_gemm(int threads, float *scratch) {
    const gemm_case cs[] = {
        {"diff fwd  x W     ", 16, 256, 295, 0, 0},
        {"diff fwd  x W^T   ", 16, 256, 295, 0, 1},
        {"diff dX   dy W^T  ", 16, 295, 256, 0, 1},
        {"diff dX   dy W    ", 16, 295, 256, 0, 0},
        {"diff dW   x^T dy  ", 295, 256, 16, 1, 0},
        {"diff dW   dy^T x  ", 256, 295, 16, 1, 0},
        {"diff hid  x W     ", 16, 256, 256, 0, 0},
        {"diff hid  x W^T   ", 16, 256, 256, 0, 1},
        {"diff hid  dW      ", 256, 256, 16, 1, 0},
        {"tab  fwd1         ", 512, 512, 64, 0, 1},
        {"tab  fwd2         ", 512, 256, 512, 0, 1},
        {"tab  fwd3         ", 512, 128, 256, 0, 1},
        {"tab  fwd4         ", 512, 3, 128, 0, 1},
        {"tab  dX2  dy W    ", 512, 512, 256, 0, 0},
        {"tab  dX3          ", 512, 256, 128, 0, 0},
        {"tab  dW1  dy^T x  ", 512, 64, 512, 1, 0},
        {"tab  dW2          ", 256, 512, 512, 1, 0},
        {"tab  dW3          ", 128, 256, 512, 1, 0},
        {"tab  dW4          ", 3, 128, 512, 1, 0},
        {"big  1024^3       ", 1024, 1024, 1024, 0, 0},
    };
    printf("GEMM (threads=%d)          M     N     K ta tb   own us  GF/s | blas us  GF/s\n", threads);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const gemm_case *g = &cs[c];
        float *A = randv(g->M * g->K), *B = randv(g->K * g->N), *C = randv(g->M * g->N);
        int64_t lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
        double flop = 2.0 * g->M * g->N * g->K, t_own, t_blas = 0;
        int inner = flop < 1e7 ? 200 : flop < 1e9 ? 10 : 2;
        TIME_US(t_own, 15, inner, cpu_sgemm(threads, g->ta, g->tb, g->M, g->N, g->K, A, lda, B, ldb, C, g->N, 0, scratch));
        int have = cpu_sgemm_blas(threads, g->ta, g->tb, g->M, g->N, g->K, A, lda, B, ldb, C, g->N);
        if (have)
            TIME_US(t_blas, 15, inner, cpu_sgemm_blas(threads, g->ta, g->tb, g->M, g->N, g->K, A, lda, B, ldb, C, g->N));
        printf("%s %5lld %5lld %5lld  %d  %d %8.1f %5.1f | %7.1f %5.1f\n", g->what, (long long)g->M,
               (long long)g->N, (long long)g->K, g->ta, g->tb, t_own, flop / t_own * 1e-3,
               t_blas, have ? flop / t_blas * 1e-3 : 0.0);
        free(A); free(B); free(C);
    }
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    size_t per = cpu_sgemm_scratch_floats();
    float *scratch = aligned_alloc(64, per * sizeof(float) * (size_t)(threads > 0 ? threads : 1));
    srand(1);
    bench_gemm(1, scratch);
    if (threads > 1) bench_gemm(threads, scratch);
    free(scratch);
    return 0;
}
