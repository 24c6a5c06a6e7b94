/* MATMUL (every transpose combination, 2-D, batched, and batched a with a shared
 * 2-D b) and BIAS_ADD: forward vs float64, backward vs finite differences. */
#include "ops/opcheck.h"

/* a [B.., M, K] (stored [B.., K, M] if ta), b [K, N] or [B.., K, N] (transposed if tb). */
static void check_matmul(int batched_a, int batched_b, int ta, int tb) {
    const int64_t B = 2, M = 5, K = 7, N = 4;
    oc c;
    oc_init(&c, (uint64_t)(batched_a * 8 + batched_b * 4 + ta * 2 + tb));
    brisk_shape sa = ta ? brisk_shape2(K, M) : brisk_shape2(M, K);
    brisk_shape sb = tb ? brisk_shape2(N, K) : brisk_shape2(K, N);
    if (batched_a) sa = ta ? brisk_shape3(B, K, M) : brisk_shape3(B, M, K);
    if (batched_b) sb = tb ? brisk_shape3(B, N, K) : brisk_shape3(B, K, N);
    int a = oc_param(&c, "a", sa), b = oc_param(&c, "b", sb);
    int out = brisk_matmul(c.g, a, b, ta, tb);
    const float *va = oc_val(&c, a), *vb = oc_val(&c, b);
    int64_t nb = batched_a ? B : 1;
    double *ref = calloc((size_t)(nb * M * N), sizeof *ref);
    for (int64_t z = 0; z < nb; z++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double x = va[z * M * K + (ta ? k * M + i : i * K + k)];
                    int64_t zb = batched_b ? z * K * N : 0;
                    double y = vb[zb + (tb ? j * K + k : k * N + j)];
                    s += x * y;
                }
                ref[z * M * N + i * N + j] = s;
            }
    char what[64];
    snprintf(what, sizeof what, "matmul a%s b%s ta %d tb %d", batched_a ? "[B]" : "", batched_b ? "[B]" : "", ta, tb);
    oc_check(&c, out, ref, what);
    free(ref);
    oc_free(&c);
}

static void test_matmul_2d(void) {
    for (int t = 0; t < 4; t++) check_matmul(0, 0, t >> 1, t & 1);
}
static void test_matmul_batched(void) {
    for (int t = 0; t < 4; t++) check_matmul(1, 1, t >> 1, t & 1);
}
static void test_matmul_shared_b(void) {
    for (int t = 0; t < 4; t++) check_matmul(1, 0, t >> 1, t & 1);
}

/* A 4-D batched matmul, as attention uses: [B, H, T, D] x [B, H, D, T]^T. */
static void test_matmul_4d(void) {
    oc c;
    oc_init(&c, 99);
    int q = oc_param(&c, "q", brisk_shape4(2, 3, 4, 5)), k = oc_param(&c, "k", brisk_shape4(2, 3, 4, 5));
    int out = brisk_matmul(c.g, q, k, 0, 1);
    const float *vq = oc_val(&c, q), *vk = oc_val(&c, k);
    double ref[2 * 3 * 4 * 4];
    for (int z = 0; z < 6; z++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                double s = 0;
                for (int d = 0; d < 5; d++) s += (double)vq[z * 20 + i * 5 + d] * vk[z * 20 + j * 5 + d];
                ref[z * 16 + i * 4 + j] = s;
            }
    oc_check(&c, out, ref, "matmul 4-D q k^T");
    oc_free(&c);
}

/* Big enough that a blocked or BLAS kernel takes its fast path. */
static void test_matmul_large(void) {
    const int M = 67, K = 129, N = 65;
    oc c;
    oc_init(&c, 7);
    c.max_fd = 8;
    int a = oc_param(&c, "a", brisk_shape2(M, K)), b = oc_param(&c, "b", brisk_shape2(K, N));
    int out = brisk_matmul(c.g, a, b, 0, 0);
    const float *va = oc_val(&c, a), *vb = oc_val(&c, b);
    double *ref = malloc(sizeof(double) * M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)va[i * K + k] * vb[k * N + j];
            ref[i * N + j] = s;
        }
    oc_check(&c, out, ref, "matmul 67x129x65");
    free(ref);
    oc_free(&c);
}

static void test_bias_add(void) {
    oc c;
    oc_init(&c, 3);
    int x = oc_param(&c, "x", brisk_shape3(2, 3, 6)), b = oc_param(&c, "b", brisk_shape1(6));
    int out = brisk_bias_add(c.g, x, b);
    const float *vx = oc_val(&c, x), *vb = oc_val(&c, b);
    double ref[36];
    for (int i = 0; i < 36; i++) ref[i] = (double)vx[i] + vb[i % 6];
    oc_check(&c, out, ref, "bias_add");
    oc_free(&c);
}

TEST_MAIN(T(test_matmul_2d), T(test_matmul_batched), T(test_matmul_shared_b), T(test_matmul_4d),
          T(test_matmul_large), T(test_bias_add))
