/* MATMUL on the CPU backend and both sgemm paths (brisk's own packed kernel and the
 * BLAS), against a float64 reference: every transpose combination, odd sizes that
 * leave partial register tiles, K deeper than one packing slice, M and N beyond one
 * cache block, leading dims wider than the matrix, accumulate, 1 and 2 threads,
 * batched products, a 2-D b shared by a batch, a long K cut into chunks, and the guard
 * after every output. */
#include "backend/cpu/cpu_internal.h"
#include "cpu_test_util.h"

/* A pool per thread count, made once (NULL: the calling thread alone). */
static cpu_pool *pool_of(int threads) {
    static cpu_pool *pools[8];
    if (threads <= 1 || threads >= 8) return NULL;
    if (!pools[threads]) pools[threads] = cpu_pool_new(threads);
    return pools[threads];
}

/* C[M,N] = op(A) op(B) in double, A/B with leading dims */
static void ref_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                     const float *B, int64_t ldb, double *C) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += a * b;
            }
            C[i * N + j] = s;
        }
}

static float *rand_buf(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = tg_randf(-1.0f, 1.0f);
    return p;
}

typedef struct { int64_t M, N, K; } mnk;

static const mnk shapes[] = {
    {1, 1, 1}, {7, 13, 5}, {16, 256, 295}, {33, 47, 300}, {130, 70, 19}, {20, 600, 31},
    {3, 3, 600}, {9, 33, 17}, {512, 3, 128}, {3, 128, 64}, {5, 8, 0},
    {1000, 8, 40}, {77, 1, 33}, {64, 9, 300}, /* narrow C: computed transposed, in chunks */
    {60, 16, 600}, {61, 60, 16}, {60, 20, 60}, /* strips of at most one vector (attention at dh 16), tails */
    {70, 96, 5200}, /* a long K cut into chunks (weight gradients), the last one short */
};

static void check_sgemm_path(int use_blas) {
    size_t per = cpu_sgemm_scratch_floats();
    float *scratch = aligned_alloc(64, (per * 2 * sizeof(float) + 63) / 64 * 64);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int threads = 1; threads <= 2; threads++) {
                    /* leading dims 3 wider than the matrix, to catch ld mix-ups */
                    int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 3, ldc = N + 2;
                    int64_t arows = ta ? K : M, brows = tb ? N : K;
                    float *A = rand_buf(arows * lda), *B = rand_buf(brows * ldb);
                    float *C = malloc((size_t)(M * ldc + TG_GUARD) * sizeof(float));
                    double *R = malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof(double));
                    for (int64_t i = 0; i < M * ldc; i++) C[i] = NAN;
                    tg_guard_fill(C, (size_t)(M * ldc) * sizeof(float));
                    ref_gemm(ta, tb, M, N, K, A, lda, B, ldb, R);
                    if (use_blas) {
                        if (!cpu_sgemm_blas(pool_of(threads), ta, tb, M, N, K, A, lda, B, ldb, C, ldc)) {
                            free(A); free(B); free(C); free(R); free(scratch);
                            return; /* built without a BLAS */
                        }
                    } else {
                        cpu_sgemm(pool_of(threads), ta, tb, M, N, K, A, lda, B, ldb, C, ldc, 0, scratch);
                    }
                    float *Cc = malloc((size_t)(M * N > 0 ? M * N : 1) * sizeof(float));
                    for (int64_t i = 0; i < M; i++) memcpy(Cc + i * N, C + i * ldc, (size_t)N * sizeof(float));
                    double e = tg_rel_err(Cc, R, M * N);
                    CHECKF(e <= 1e-5, "%s M=%lld N=%lld K=%lld ta=%d tb=%d threads=%d: rel err %.3g",
                           use_blas ? "blas" : "own", (long long)M, (long long)N, (long long)K, ta, tb, threads, e);
                    CHECKF(tg_guard_ok(C, (size_t)(M * ldc) * sizeof(float)), "guard overwritten M=%lld N=%lld",
                           (long long)M, (long long)N);
                    if (!use_blas) {
                        /* accumulate: C += op(A) op(B) once more gives 2 R; the ld padding is untouched */
                        cpu_sgemm(pool_of(threads), ta, tb, M, N, K, A, lda, B, ldb, C, ldc, 1, scratch);
                        for (int64_t i = 0; i < M * N; i++) R[i] *= 2.0;
                        for (int64_t i = 0; i < M; i++) memcpy(Cc + i * N, C + i * ldc, (size_t)N * sizeof(float));
                        e = tg_rel_err(Cc, R, M * N);
                        CHECKF(e <= 1e-5, "own accumulate M=%lld N=%lld K=%lld: rel err %.3g", (long long)M,
                               (long long)N, (long long)K, e);
                        for (int64_t i = 0; i < M; i++)
                            CHECK(isnan(C[i * ldc + N]) && isnan(C[i * ldc + N + 1]));
                    }
                    free(A); free(B); free(C); free(R); free(Cc);
                }
    }
    free(scratch);
}

static void test_own_sgemm(void) { check_sgemm_path(0); }
static void test_blas_sgemm(void) { check_sgemm_path(1); }

/* Own sgemm with NULL scratch (the test-only path) and bit-identical results for the
 * same thread count run to run. */
static void test_own_sgemm_deterministic(void) {
    int64_t M = 64, N = 200, K = 333;
    float *A = rand_buf(M * K), *B = rand_buf(K * N), *C1 = malloc(M * N * 4), *C2 = malloc(M * N * 4);
    cpu_sgemm(pool_of(2), 0, 1, M, N, K, A, K, B, K, C1, N, 0, NULL);
    cpu_sgemm(pool_of(2), 0, 1, M, N, K, A, K, B, K, C2, N, 0, NULL);
    CHECK(memcmp(C1, C2, (size_t)(M * N) * 4) == 0);
    free(A); free(B); free(C1); free(C2);
}

/* Every element of C is computed by the same chain of FMAs whichever thread band
 * (or narrow/transposed path) it lands in, so 1 to 4 threads give the same bits. */
static void test_own_sgemm_thread_independent(void) {
    const mnk cs[] = {{16, 256, 295}, {40, 40, 600}, {300, 40, 70}, {512, 12, 64}, {64, 1000, 9}, {70, 96, 5200}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = cs[c].M, N = cs[c].N, K = cs[c].K;
                float *A = rand_buf(M * K), *B = rand_buf(K * N), *C1 = malloc(M * N * 4), *C2 = malloc(M * N * 4);
                cpu_sgemm(pool_of(1), ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, C1, N, 0, NULL);
                for (int nt = 2; nt <= 4; nt++) {
                    cpu_sgemm(pool_of(nt), ta, tb, M, N, K, A, ta ? M : K, B, tb ? K : N, C2, N, 0, NULL);
                    CHECKF(memcmp(C1, C2, (size_t)(M * N) * 4) == 0, "M=%lld N=%lld K=%lld ta=%d tb=%d threads=%d differ",
                           (long long)M, (long long)N, (long long)K, ta, tb, nt);
                }
                free(A); free(B); free(C1); free(C2);
            }
}

/* One MATMUL node: a [batch..., M, K] (or K, M), b 2-D or batched. */
static void check_matmul_op(brisk_backend *be, int nbatch, const int64_t *batch, int b_batched, int64_t M,
                            int64_t N, int64_t K, int ta, int tb) {
    tgraph t;
    tg_init(&t);
    int64_t ad[6], bd[6], od[6];
    int nd = nbatch + 2;
    int64_t B = 1;
    for (int i = 0; i < nbatch; i++) { ad[i] = bd[i] = od[i] = batch[i]; B *= batch[i]; }
    ad[nbatch] = ta ? K : M; ad[nbatch + 1] = ta ? M : K;
    od[nbatch] = M; od[nbatch + 1] = N;
    int a = tg_input(&t, BRISK_F32, brisk_shape_make(nd, ad));
    int b;
    if (b_batched) {
        bd[nbatch] = tb ? N : K; bd[nbatch + 1] = tb ? K : N;
        b = tg_input(&t, BRISK_F32, brisk_shape_make(nd, bd));
    } else {
        b = tg_input(&t, BRISK_F32, tb ? brisk_shape2(N, K) : brisk_shape2(K, N));
    }
    brisk_attr at = tg_attr0();
    at.trans_a = ta;
    at.trans_b = tb;
    int ins[2] = {a, b};
    int o = tg_node(&t, BRISK_OP_MATMUL, BRISK_F32, brisk_shape_make(nd, od), &at, 2, ins);
    brisk_error err_s = {0}, *err = &err_s;
    REQUIRE_OK(tg_run(be, &t, o, err), err);
    double *R = malloc((size_t)(B * M * N) * sizeof(double));
    for (int64_t i = 0; i < B; i++)
        ref_gemm(ta, tb, M, N, K, tg_f(&t, a) + i * M * K, ta ? M : K,
                 tg_f(&t, b) + (b_batched ? i * K * N : 0), tb ? K : N, R + i * M * N);
    double e = tg_rel_err(tg_f(&t, o), R, B * M * N);
    CHECKF(e <= 1e-5, "matmul batch=%lld b_batched=%d M=%lld N=%lld K=%lld ta=%d tb=%d: rel err %.3g",
           (long long)B, b_batched, (long long)M, (long long)N, (long long)K, ta, tb, e);
    free(R);
    tg_free(&t);
}

static void test_matmul_op(void) {
    for (int threads = 1; threads <= 2; threads++) {
        brisk_backend *be = brisk_backend_cpu_new(threads);
        REQUIRE(be);
        int64_t b1[1] = {3}, b2[2] = {2, 3}, b8[1] = {8};
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                check_matmul_op(be, 0, NULL, 0, 16, 256, 295, ta, tb);  /* diffusion layer 1 */
                check_matmul_op(be, 0, NULL, 0, 17, 19, 23, ta, tb);
                check_matmul_op(be, 1, b1, 1, 5, 7, 9, ta, tb);          /* batched */
                check_matmul_op(be, 1, b1, 0, 5, 7, 9, ta, tb);          /* shared 2-D b */
                check_matmul_op(be, 2, b2, 1, 4, 33, 6, ta, tb);         /* 2 batch dims */
                check_matmul_op(be, 1, b8, 1, 60, 60, 32, ta, tb);       /* attention-sized, parallel over batch */
                check_matmul_op(be, 1, b8, 0, 60, 128, 32, ta, tb);
            }
        be->destroy(be);
    }
}

static void test_matmul_shape_error(void) {
    brisk_backend *be = brisk_backend_cpu_new(1);
    tgraph t;
    tg_init(&t);
    int a = tg_input(&t, BRISK_F32, brisk_shape2(4, 5));
    int b = tg_input(&t, BRISK_F32, brisk_shape2(6, 7));
    int ins[2] = {a, b};
    int o = tg_node(&t, BRISK_OP_MATMUL, BRISK_F32, brisk_shape2(4, 7), NULL, 2, ins);
    brisk_error err = {0};
    CHECK(tg_run(be, &t, o, &err) == BRISK_ERR_SHAPE);
    CHECK(strstr(err.msg, "matmul") != NULL);
    tg_free(&t);
    be->destroy(be);
}

TEST_MAIN(T(test_own_sgemm), T(test_blas_sgemm), T(test_own_sgemm_deterministic),
          T(test_own_sgemm_thread_independent), T(test_matmul_op),
          T(test_matmul_shape_error))
