/* The gradient all-reduce alone (brisk_dist_allreduce_mean), for choosing dist.bucket_mb:
 * arenas of the workloads' sizes averaged over the ranks in buckets of 64 KiB .. 16 MiB and in
 * one piece; median of 30 rounds after 3 warm-up rounds, printed by rank 0.
 *   mpirun -np 2 build/bench/bench_dist_allreduce */
#include <stdio.h>
#include <stdlib.h>

#include "brisk/dist.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    brisk_error err = {0};
    brisk_dist *d = NULL;
    if (brisk_dist_create(&d, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (brisk_dist_world(d) < 2) {
        fprintf(stderr, "run under mpirun -np 2 (world size is 1: no collective to time)\n");
        brisk_dist_free(d);
        return 1;
    }
    /* floats: tabular MLP 197,891; diffusion 273K; a 4M-parameter model; ResNet-18 11.7M */
    const int64_t sizes[] = {197891, 273000, 4000000, 11700000};
    const double mib[] = {1.0 / 64, 1.0 / 32, 1.0 / 16, 1.0 / 8, 0.25, 1, 4, 16, 0};
    enum { ROUNDS = 30 };
    double t[ROUNDS];
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        float *x = malloc(sizeof(float) * (size_t)sizes[s]);
        if (!x) return 1;
        for (int64_t i = 0; i < sizes[s]; i++) x[i] = (float)(i % 97);
        for (size_t m = 0; m < sizeof mib / sizeof mib[0]; m++) {
            brisk_dist_set_bucket_bytes(d, mib[m] > 0 ? (int64_t)(mib[m] * 1048576) : sizes[s] * 4);
            for (int r = -3; r < ROUNDS; r++) {
                double t0 = brisk_now();
                if (brisk_dist_allreduce_mean(d, x, sizes[s], NULL, 0, "bench", r, &err)) {
                    fprintf(stderr, "%s\n", err.msg);
                    return 1;
                }
                if (r >= 0) t[r] = brisk_now() - t0;
            }
            qsort(t, ROUNDS, sizeof t[0], cmp);
            char label[32] = "one";
            if (mib[m] > 0) snprintf(label, sizeof label, "%g KiB", mib[m] * 1024);
            if (brisk_dist_rank(d) == 0)
                printf("%9lld floats (%6.2f MiB), bucket %-9s: %8.3f ms (median of %d), %.2f GB/s\n", (long long)sizes[s],
                       sizes[s] * 4 / 1048576.0, label, 1e3 * t[ROUNDS / 2], ROUNDS, sizes[s] * 4 / t[ROUNDS / 2] / 1e9);
        }
        free(x);
    }
    brisk_dist_free(d);
    return 0;
}
