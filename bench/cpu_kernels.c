/* Microbenchmark of the CPU backend's kernels at the workloads' shapes (not a test):
 * GEMMs of the diffusion (batch 16) and tabular (batch 512) MLPs, forward and both
 * backward products, brisk's own sgemm against the BLAS; AdamW over the diffusion
 * model's 273,152 parameters; a few activations. Prints the median of repeated
 * timings in microseconds.
 *
 *   cmake --build build --target bench_cpu_kernels && build/bench/bench_cpu_kernels [threads]
 *   build/bench/bench_cpu_kernels pool      brisk's pool against OpenMP (see bench_pool)
 *   OMP_WAIT_POLICY=passive build/bench/bench_cpu_kernels pool     ... against passive OpenMP
 *   build/bench/bench_cpu_kernels peak      one core's FMA peak at the build's vector width
 *   build/bench/bench_cpu_kernels attention  the Transformer workload's ATTENTION node and its
 *                                           gradient on 1 and 2 threads, us per (sample, head)
 *   build/bench/bench_cpu_kernels fraction [threads]   clock under load (dependent FMA chain),
 *                                           the FMA peak from it, and sgemm 2048^3 as a fraction of it */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"
#include "brisk/graph.h"

#include <math.h>
#include <omp.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* BENCH_CPU_TIME=1: the timings are the process's CPU time, not wall time (on a machine
 * shared with other programs, a descheduled thread then costs nothing; all threads add up) */
static double now_us(void) {
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("BENCH_CPU_TIME") && atoi(getenv("BENCH_CPU_TIME")) > 0;
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static double wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* CPU time of the whole process (all its threads) */
static double cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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
        /* the small Transformer of issue 16 (width 64, dh 16, FFN 128, batch 64 x T 60) */
        {"tr64 qkv x W^T    ", 3840, 192, 64, 0, 1},
        {"tr64 ffn2 x W^T   ", 3840, 64, 128, 0, 1},
        {"tr64 dW qkv       ", 192, 64, 3840, 1, 0},
        /* the LSTM workload (H 128, batch 256 x T 60): the weight gradients over every (b, t),
         * and one step's 32-row recurrent products */
        {"lstm dW  dg^T h   ", 512, 128, 15360, 1, 0},
        /* the Transformer workload's weight gradients (width 128, batch 256 x T 60) */
        {"tr   dW qkv       ", 384, 128, 15360, 1, 0},
        {"tr   dW out       ", 128, 128, 15360, 1, 0},
        {"lstm dWih1 dg^T x ", 512, 32, 15360, 1, 0},
        {"lstm rec h W^T    ", 32, 512, 128, 0, 0},
        {"lstm dh  dg W     ", 32, 128, 512, 0, 0},
        {"attn S  Q K^T     ", 60, 60, 16, 0, 1},
        {"attn O  P V       ", 60, 16, 60, 0, 0},
        {"attn dV P^T dO    ", 60, 16, 60, 1, 0},
        /* the same at the Transformer workload's dh 32 (ldp 64 rows) */
        {"attn32 S Q K^T    ", 60, 60, 32, 0, 1},
        {"attn32 O P V      ", 60, 32, 60, 0, 0},
        {"attn32 dV P^T dO  ", 60, 32, 60, 1, 0},
        /* examples/cnn1d.json's convolutions as im2col GEMMs (a block of 109 windows) */
        {"c1d1 fwd w col    ", 64, 6540, 160, 0, 0},
        {"c1d1 dW dy col^T  ", 64, 160, 6540, 0, 1},
        {"c1d2 fwd w col    ", 64, 3270, 320, 0, 0},
        {"c1d2 dcol w^T dy  ", 320, 3270, 64, 1, 0},
        {"c1d2 dW dy col^T  ", 64, 320, 3270, 0, 1},
        /* examples/gru_regressor.json (H 64, batch 256 x T 60): the input projections, their
         * input gradient and weight gradients over every (b, t) */
        {"gru1 x Wih^T      ", 15360, 192, 32, 0, 1},
        {"gru2 h1 Wih^T     ", 15360, 192, 64, 0, 1},
        {"gru2 dh1 dg Wih   ", 15360, 64, 192, 0, 0},
        {"gru2 dWih dg^T h1 ", 192, 64, 15360, 1, 0},
        {"gru1 dWih dg^T x  ", 192, 32, 15360, 1, 0},
    };
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    printf("GEMM (threads=%d)          M     N     K ta tb   own us  GF/s | blas us  GF/s\n", threads);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const gemm_case *g = &cs[c];
        float *A = randv(g->M * g->K), *B = randv(g->K * g->N), *C = randv(g->M * g->N);
        int64_t lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
        double flop = 2.0 * g->M * g->N * g->K, t_own, t_blas = 0;
        int inner = flop < 1e7 ? 200 : flop < 1e9 ? 10 : 2;
        TIME_US(t_own, 15, inner, cpu_sgemm(pool, g->ta, g->tb, g->M, g->N, g->K, A, lda, B, ldb, C, g->N, 0, scratch));
        int have = cpu_sgemm_blas(pool, g->ta, g->tb, g->M, g->N, g->K, A, lda, B, ldb, C, g->N);
        if (have)
            TIME_US(t_blas, 15, inner, cpu_sgemm_blas(pool, g->ta, g->tb, g->M, g->N, g->K, A, lda, B, ldb, C, g->N));
        printf("%s %5lld %5lld %5lld  %d  %d %8.1f %5.1f | %7.1f %5.1f\n", g->what, (long long)g->M,
               (long long)g->N, (long long)g->K, g->ta, g->tb, t_own, flop / t_own * 1e-3,
               t_blas, have ? flop / t_blas * 1e-3 : 0.0);
        free(A); free(B); free(C);
    }
    cpu_pool_free(pool);
}

/* One node on the backend, timed: the op's input shapes are given, inputs random. */
typedef struct node_case { const char *what; brisk_op op; int n_in; brisk_shape in[3]; brisk_shape out; int kind; float f0; } node_case;

static void bench_nodes(brisk_backend *be) {
    const node_case cs[] = {
        {"silu      [16,256]        ", BRISK_OP_SILU, 1, {{2, {16, 256}}}, {2, {16, 256}}, 0, 0},
        {"act_grad silu [16,256]    ", BRISK_OP_ACT_GRAD, 3, {{2, {16, 256}}, {2, {16, 256}}, {2, {16, 256}}}, {2, {16, 256}}, BRISK_OP_SILU, 0},
        {"bias_add  [16,256]        ", BRISK_OP_BIAS_ADD, 2, {{2, {16, 256}}, {1, {256}}}, {2, {16, 256}}, 0, 0},
        {"sum_to [16,256]->[256]    ", BRISK_OP_SUM_TO, 1, {{2, {16, 256}}}, {1, {256}}, 0, 0},
        {"mse [16,256]              ", BRISK_OP_MSE, 2, {{2, {16, 256}}, {2, {16, 256}}}, {0, {0}}, 0, 0},
        {"randn [16,256]            ", BRISK_OP_RANDN, 0, {{0, {0}}}, {2, {16, 256}}, 0, 0},
        {"relu      [512,512]       ", BRISK_OP_RELU, 1, {{2, {512, 512}}}, {2, {512, 512}}, 0, 0},
        {"dropout   [512,512] p=0.1 ", BRISK_OP_DROPOUT, 1, {{2, {512, 512}}}, {2, {512, 512}}, 0, 0.1f},
        {"bias_add  [512,512]       ", BRISK_OP_BIAS_ADD, 2, {{2, {512, 512}}, {1, {512}}}, {2, {512, 512}}, 0, 0},
        {"act_grad relu [512,512]   ", BRISK_OP_ACT_GRAD, 3, {{2, {512, 512}}, {2, {512, 512}}, {2, {512, 512}}}, {2, {512, 512}}, BRISK_OP_RELU, 0},
        {"sum_to [512,512]->[512]   ", BRISK_OP_SUM_TO, 1, {{2, {512, 512}}}, {1, {512}}, 0, 0},
        {"gelu erf  [256*60,512]    ", BRISK_OP_GELU, 1, {{2, {15360, 512}}}, {2, {15360, 512}}, BRISK_GELU_ERF, 0},
        {"act_grad gelu erf [256*60,512]", BRISK_OP_ACT_GRAD, 3, {{2, {15360, 512}}, {2, {15360, 512}}, {2, {15360, 512}}}, {2, {15360, 512}}, BRISK_OP_GELU, 0},
        {"softmax   [256*4*60,60]   ", BRISK_OP_SOFTMAX, 1, {{2, {61440, 60}}}, {2, {61440, 60}}, 0, 0},
    };
    brisk_node nodes[4];
    brisk_graph g;
    memset(&g, 0, sizeof g);
    g.nodes = nodes;
    brisk_step_state st = {.seed = 1, .rng_step = 1, .first_micro = 1, .training = 1};
    brisk_error err;
    printf("\nnodes (backend threads=%d)          us\n", ((cpu_backend *)be->impl)->threads);
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        const node_case *k = &cs[c];
        memset(nodes, 0, sizeof nodes);
        const void *in[3] = {0};
        void *bufs[3] = {0};
        for (int i = 0; i < k->n_in; i++) {
            nodes[i].op = BRISK_OP_INPUT;
            nodes[i].dtype = BRISK_F32;
            nodes[i].shape = k->in[i];
            bufs[i] = randv(brisk_shape_numel(&k->in[i]));
            in[i] = bufs[i];
            nodes[3].in[i] = i;
        }
        nodes[3].op = k->op;
        nodes[3].n_in = k->n_in;
        nodes[3].dtype = BRISK_F32;
        nodes[3].shape = k->out;
        nodes[3].attr.kind = k->kind;
        nodes[3].attr.f0 = k->f0;
        nodes[3].attr.rng = 1;
        nodes[3].attr.shape2 = k->out;
        g.n_nodes = 4;
        float *out = randv(brisk_shape_numel(&k->out));
        int64_t n = brisk_shape_numel(&k->out);
        int inner = n < 100000 ? 2000 : 50;
        double t;
        TIME_US(t, 15, inner, be->run_node(be, &g, 3, in, out, &st, &err));
        printf("%s %8.2f\n", k->what, t);
        for (int i = 0; i < k->n_in; i++) free(bufs[i]);
        free(out);
    }
}

static void bench_adamw(brisk_backend *be, int64_t n) {
    float *p = randv(n), *g = randv(n), *m = randv(n), *v = randv(n), *sumsq;
    for (int64_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    be->alloc(be, 4, (void **)&sumsq, NULL);
    brisk_optim_args a = {.kind = BRISK_OPTIM_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = 0.01f, .t = 10, .grad_scale = 1.0f};
    brisk_error err;
    double t_adam, t_sq, t_clip;
    TIME_US(t_adam, 15, 50, be->optim_update(be, p, g, m, v, n, &a, NULL, NULL, &err));
    TIME_US(t_sq, 15, 50, be->grad_sumsq(be, g, n, sumsq, &err));
    a.clip_norm = 1.0f;
    TIME_US(t_clip, 15, 50, be->optim_update(be, p, g, m, v, n, &a, sumsq, NULL, &err));
    printf("\nAdamW over %lld floats (threads=%d): update %.1f us (%.1f GB/s), grad_sumsq %.1f us, "
           "update with clip %.1f us\n", (long long)n, ((cpu_backend *)be->impl)->threads, t_adam,
           28.0 * n / t_adam * 1e-3, t_sq, t_clip);
    be->free(be, sumsq);
    free(p); free(g); free(m); free(v);
}

/* The serial/parallel threshold of elementwise loops: an empty parallel region, and
 * a ReLU-like and a SiLU-like loop at several sizes, inline vs split on 2 threads. */
typedef struct thr_ctx { const float *x; float *y; int heavy; } thr_ctx;

static void thr_range(const void *vctx, int64_t i0, int64_t i1) {
    const thr_ctx *c = vctx;
    const float *restrict x = c->x;
    float *restrict y = c->y;
    if (c->heavy == 2) {
#pragma omp simd
        for (int64_t i = i0; i < i1; i++) y[i] = x[i] / (1.0f + cpu_expf(-x[i]));
    } else if (c->heavy) {
#pragma omp simd
        for (int64_t i = i0; i < i1; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
    } else {
#pragma omp simd
        for (int64_t i = i0; i < i1; i++) y[i] = x[i] < 0.0f ? 0.0f : x[i];
    }
}

static void noop_range(const void *vctx, int64_t i0, int64_t i1) { (void)vctx; (void)i0; (void)i1; }

static void bench_threshold(void) {
    brisk_backend *b2 = brisk_backend_cpu_new(2);
    cpu_backend *cb = b2->impl;
    double t;
    TIME_US(t, 15, 2000, cpu_parallel(cb, 1024, 512, noop_range, NULL));
    printf("\nempty 2-chunk loop on the 2-thread pool: %.2f us\n", t);
    printf("elementwise n       relu 1t   relu 2t   silu(libm expf) 1t   2t   silu(cpu_expf) 1t   2t\n");
    const int64_t ns[] = {4096, 16384, 32768, 65536, 262144};
    for (int k = 0; k < 5; k++) {
        int64_t n = ns[k];
        float *x = randv(n), *y = randv(n);
        double r1, r2, s1, s2, v1, v2;
        thr_ctx c = {x, y, 0};
        int inner = n < 50000 ? 2000 : 200;
        TIME_US(r1, 15, inner, thr_range(&c, 0, n));
        TIME_US(r2, 15, inner, cpu_parallel(cb, n, n / 2, thr_range, &c));
        c.heavy = 1;
        TIME_US(s1, 15, inner, thr_range(&c, 0, n));
        TIME_US(s2, 15, inner, cpu_parallel(cb, n, n / 2, thr_range, &c));
        c.heavy = 2;
        TIME_US(v1, 15, inner, thr_range(&c, 0, n));
        TIME_US(v2, 15, inner, cpu_parallel(cb, n, n / 2, thr_range, &c));
        printf("%12lld %9.2f %9.2f %17.2f %7.2f %17.2f %7.2f\n", (long long)n, r1, r2, s1, s2, v1, v2);
        free(x); free(y);
    }
    b2->destroy(b2);
}

/* brisk's pool against OpenMP on 2 threads, for the choice pool.c explains: the cost of
 * one parallel loop (4 chunks of a 16K-float ReLU, the size of a small model's activation),
 * back to back and with 100 us of serial work between loops (a step's small ops), and the
 * CPU time the process burns per wall second in the second case - what idle threads that
 * spin take from other programs on a shared machine. OpenMP's wait policy is libgomp's,
 * from the environment (OMP_WAIT_POLICY, GOMP_SPINCOUNT) at load time. */
typedef struct relu_ctx { const float *x; float *y; } relu_ctx;
static void relu_range(const void *vctx, int64_t i0, int64_t i1) {
    const relu_ctx *c = vctx;
    for (int64_t i = i0; i < i1; i++) c->y[i] = c->x[i] < 0.0f ? 0.0f : c->x[i];
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void serial_work_us(double us) {
    double t0 = now_us();
    while (now_us() - t0 < us) {}
}

static void bench_pool(void) {
    const int64_t n = 65536, chunk = 16384, jobs = 2000;
    float *x = randv(n), *y = randv(n);
    relu_ctx c = {x, y};
    cpu_pool *p = cpu_pool_new(2);
    const char *pol = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    printf("2 threads, %lld loops of 4 x 16K-float ReLU chunks; OpenMP wait policy: %s, GOMP_SPINCOUNT %s\n",
           (long long)jobs, pol ? pol : "(libgomp default)", spin ? spin : "(default)");
    printf("%-22s %16s %22s %18s\n", "", "us/loop (b2b)", "us/loop (100us gaps)", "CPU s / wall s");
    for (int which = 0; which < 2; which++) {
        double b2b, gap, t0, c0;
        TIME_US(b2b, 5, 200, which ? ({
            _Pragma("omp parallel for schedule(dynamic, 1) num_threads(2)")
            for (int64_t k = 0; k < n / chunk; k++) relu_range(&c, k * chunk, (k + 1) * chunk);
        }) : cpu_pool_run(p, n, chunk, relu_range, &c));
        t0 = now_us(), c0 = cpu_seconds();
        double in_loops = 0;
        for (int64_t j = 0; j < jobs; j++) {
            serial_work_us(100);
            double l0 = now_us();
            if (which) {
                _Pragma("omp parallel for schedule(dynamic, 1) num_threads(2)")
                for (int64_t k = 0; k < n / chunk; k++) relu_range(&c, k * chunk, (k + 1) * chunk);
            } else {
                cpu_pool_run(p, n, chunk, relu_range, &c);
            }
            in_loops += now_us() - l0;
        }
        double wall = (now_us() - t0) * 1e-6;
        gap = in_loops / (double)jobs;
        printf("%-22s %16.2f %22.2f %18.2f\n", which ? "OpenMP" : "brisk pool", b2b, gap, (cpu_seconds() - c0) / wall);
    }
    printf("(CPU s / wall s: 1.0 = only the calling thread busy between loops, 2.0 = a spinning worker too)\n");
    cpu_pool_free(p);
    free(x); free(y);
}

/* One core's fp32 FMA peak as this build can reach it: 12 independent accumulators (enough
 * to cover the FMA latency on two pipes) of the widest vector the build uses, for ~0.3 s.
 * The GEMM rows above are compared with this (issue 16: >= 70% on GEMM-bound shapes). */
#if defined(__AVX512F__)
#define PEAK_VL 16
#elif defined(__AVX__)
#define PEAK_VL 8
#else
#define PEAK_VL 4
#endif
typedef float pvf __attribute__((vector_size(PEAK_VL * 4)));

static void bench_peak(void) {
    pvf a, b;
    for (int k = 0; k < PEAK_VL; k++) a[k] = 1.0f + 1e-7f * k, b[k] = 1e-8f;
    pvf c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
    const long iters = 1 << 22;
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_us();
        for (long it = 0; it < iters; it++) {
            c0 = c0 * a + b; c1 = c1 * a + b; c2 = c2 * a + b; c3 = c3 * a + b; c4 = c4 * a + b; c5 = c5 * a + b;
            c6 = c6 * a + b; c7 = c7 * a + b; c8 = c8 * a + b; c9 = c9 * a + b; c10 = c10 * a + b; c11 = c11 * a + b;
            __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5), "+x"(c6), "+x"(c7),
                             "+x"(c8), "+x"(c9), "+x"(c10), "+x"(c11));
        }
        double us = now_us() - t0, gf = 2.0 * 12 * PEAK_VL * (double)iters / us * 1e-3;
        if (gf > best) best = gf;
    }
    pvf all = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11;
    float sink = all[0];
    printf("FMA peak, one core, %d-wide fp32 vectors: %.1f GFLOP/s (best of 5; checksum %g)\n", PEAK_VL, best, sink);
}

/* The core clock under load, from a dependent FMA chain: each FMA waits for the one
 * before it, so the chain runs at one FMA per FMA_LATENCY cycles whatever the clock, and
 * cycles / seconds is the clock the cores really ran at while all of them were busy (the
 * TSC ticks at a fixed rate, and a VM shows no cycle counter). FMA_LATENCY: 4 cycles on
 * Zen 2-5 and Intel since Skylake. Best of many 2 ms samples per thread: a thread
 * descheduled by another program only makes its sample slower. */
#define FMA_LATENCY 4
static double chain_clock_ghz(void) {
    float x = 1.0f, a = 0.999999f, b = 1e-7f;
    const long n = 1 << 21;
    double best = 0;
    for (int rep = 0; rep < 100; rep++) {
        double t0 = wall_us();
        for (long i = 0; i < n; i += 8) {
            x = __builtin_fmaf(x, a, b); x = __builtin_fmaf(x, a, b); x = __builtin_fmaf(x, a, b);
            x = __builtin_fmaf(x, a, b); x = __builtin_fmaf(x, a, b); x = __builtin_fmaf(x, a, b);
            x = __builtin_fmaf(x, a, b); x = __builtin_fmaf(x, a, b);
            __asm__ volatile("" : "+x"(x));
        }
        double ghz = (double)n * FMA_LATENCY / (wall_us() - t0) * 1e-3;
        if (ghz > best) best = ghz;
    }
    return x == 12345.0f ? 0 : best; /* keeps x live */
}

/* Issue 16's GEMM target: brisk's sgemm at a large square size against the machine's FMA
 * peak, taken as threads x 2 FMA pipes x 8 floats (AVX2 width; Zen 4 runs AVX-512 as two
 * 256-bit halves, so the rate is the same) x 2 flops x the clock measured above with every
 * thread running the chain at once. */
static void bench_fraction(int threads) {
    double ghz[64] = {0};
    if (threads > 64) threads = 64;
#pragma omp parallel num_threads(threads)
    ghz[omp_get_thread_num()] = chain_clock_ghz();
    double lo = ghz[0], sum = 0;
    for (int t = 0; t < threads; t++) {
        if (ghz[t] < lo) lo = ghz[t];
        sum += ghz[t];
    }
    double clock = sum / threads, peak = threads * 2.0 * 8 * 2 * clock;
    printf("clock under load (%d threads, dependent FMA chain at %d cycles): mean %.2f GHz, slowest %.2f GHz\n",
           threads, FMA_LATENCY, clock, lo);
    printf("FMA peak = %d cores x 2 FMA units x 8 floats x 2 flops x %.2f GHz = %.1f GFLOP/s\n", threads, clock, peak);
    const int64_t n = 2048;
    float *A = randv(n * n), *B = randv(n * n), *C = randv(n * n);
    size_t per = cpu_sgemm_scratch_floats();
    float *scratch = aligned_alloc(64, per * sizeof(float) * (size_t)threads);
    cpu_pool *pool = threads > 1 ? cpu_pool_new(threads) : NULL;
    /* wall time, and CPU time (on a shared machine the threads lose the CPU to other
     * programs: flops per CPU-second against one core's peak is the kernel's own rate) */
    double flop = 2.0 * n * n * n, best = 1e30, s[7], cs[7];
    for (int r = 0; r < 7; r++) {
        double t0 = wall_us(), c0 = cpu_us();
        cpu_sgemm(pool, 0, 0, n, n, n, A, n, B, n, C, n, 0, scratch);
        s[r] = wall_us() - t0;
        cs[r] = cpu_us() - c0;
        if (s[r] < best) best = s[r];
    }
    qsort(s, 7, sizeof(double), cmp_d);
    qsort(cs, 7, sizeof(double), cmp_d);
    double core_peak = peak / threads;
    printf("brisk sgemm %lld^3, %d threads: wall median %.1f GFLOP/s (%.0f%% of peak), best %.1f GFLOP/s (%.0f%%); "
           "per CPU-second (median) %.1f GFLOP/s = %.0f%% of one core's %.1f\n",
           (long long)n, threads, flop / s[3] * 1e-3, 100 * flop / s[3] * 1e-3 / peak, flop / best * 1e-3,
           100 * flop / best * 1e-3 / peak, flop / cs[3] * 1e-3, 100 * flop / cs[3] * 1e-3 / core_peak, core_peak);
    cpu_pool_free(pool);
    free(A); free(B); free(C); free(scratch);
}

/* The ATTENTION node and its gradient at the Transformer workload's shape (B 256, T 60,
 * D 128, 4 heads, dropout 0.1): us per (sample, head) item on `threads` threads. */
static void bench_attention(int threads) {
    const int64_t B = 256, T = 60, D = 128, H = 4;
    brisk_backend *be = brisk_backend_cpu_new(threads);
    brisk_node nodes[4];
    memset(nodes, 0, sizeof nodes);
    brisk_graph g;
    memset(&g, 0, sizeof g);
    g.nodes = nodes;
    g.n_nodes = 4;
    nodes[0] = (brisk_node){.op = BRISK_OP_INPUT, .dtype = BRISK_F32, .shape = brisk_shape3(B, T, 3 * D)};
    nodes[1] = (brisk_node){.op = BRISK_OP_INPUT, .dtype = BRISK_F32, .shape = brisk_shape3(B, T, D)};
    nodes[2] = (brisk_node){.op = BRISK_OP_ATTENTION, .dtype = BRISK_F32, .shape = brisk_shape3(B, T, D), .n_in = 1};
    nodes[2].attr.i0 = H;
    nodes[2].attr.f0 = 0.1f;
    nodes[2].attr.rng = 3;
    nodes[2].bytes = (size_t)(B * T * D) * 4 + brisk_attention_workspace_bytes(B, T, H, 1);
    nodes[3] = (brisk_node){.op = BRISK_OP_ATTENTION_GRAD, .dtype = BRISK_F32, .shape = brisk_shape3(B, T, 3 * D), .n_in = 3};
    nodes[3].in[0] = 1, nodes[3].in[1] = 0, nodes[3].in[2] = 2;
    nodes[3].attr = nodes[2].attr;
    for (int i = 0; i < 4; i++)
        if (!nodes[i].bytes) nodes[i].bytes = (size_t)brisk_shape_numel(&nodes[i].shape) * 4;
    float *qkv = randv(B * T * 3 * D), *dy = randv(B * T * D), *att = aligned_alloc(64, (nodes[2].bytes + 63) / 64 * 64);
    float *dq = randv(B * T * 3 * D);
    brisk_step_state st = {.seed = 1, .rng_step = 1, .first_micro = 1, .training = 1};
    brisk_error err;
    const void *fin[1] = {qkv}, *bin[3] = {dy, qkv, att};
    double tf, tb;
    if (be->run_node(be, &g, 2, fin, att, &st, &err) || be->run_node(be, &g, 3, bin, dq, &st, &err)) {
        fprintf(stderr, "bench_cpu_kernels attention: %s\n", err.msg);
        exit(1);
    }
    TIME_US(tf, 7, 3, be->run_node(be, &g, 2, fin, att, &st, &err));
    TIME_US(tb, 7, 3, be->run_node(be, &g, 3, bin, dq, &st, &err));
    printf("attention [256, 60, 384] 4 heads, dropout 0.1, %d threads: forward %.2f ms (%.2f us/item), "
           "backward %.2f ms (%.2f us/item)\n", threads, tf * 1e-3, tf / (B * H), tb * 1e-3, tb / (B * H));
    free(qkv); free(dy); free(att); free(dq);
    be->destroy(be);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "peak") == 0) {
        bench_peak();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "fraction") == 0) {
        bench_fraction(argc > 2 ? atoi(argv[2]) : 2);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "attention") == 0) {
        bench_attention(1);
        bench_attention(2);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "pool") == 0) {
        bench_pool();
        return 0;
    }
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    size_t per = cpu_sgemm_scratch_floats();
    float *scratch = aligned_alloc(64, per * sizeof(float) * (size_t)(threads > 0 ? threads : 1));
    srand(1);
    /* creating a backend pins OpenBLAS to one thread, as in real runs: brisk splits
     * GEMMs between its own OpenMP threads */
    brisk_backend *pin = brisk_backend_cpu_new(1);
    pin->destroy(pin);
    bench_gemm(1, scratch);
    if (threads > 1) bench_gemm(threads, scratch);
    free(scratch);
    if (threads > 1) bench_threshold();
    for (int nt = 1; nt <= threads; nt += threads > 1 ? threads - 1 : 1) {
        brisk_backend *be = brisk_backend_cpu_new(nt);
        bench_adamw(be, 273152);
        bench_nodes(be);
        be->destroy(be);
    }
    return 0;
}
