/* dist: the process group. Alone (ctest runs it as one process): rank and world from SLURM's
 * and torchrun's environment, a world size above 1 without an MPI launcher refused with the
 * reason, shard and bucket arithmetic, and no collective at world size 1. Under mpirun
 * (dist.group_mpi, argument "mpi"): every collective against values computed by hand. */
#include <stdlib.h>
#include <string.h>

#include "brisk/dist.h"
#include "test.h"

static void clear_env(void) {
    const char *vars[] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_env_discovery(void) {
    brisk_error err = {0};
    brisk_dist *d = NULL;
    clear_env();
    REQUIRE_OK(brisk_dist_create(&d, &err), &err);
    CHECK(brisk_dist_world(d) == 1 && brisk_dist_rank(d) == 0);
    CHECK(strcmp(brisk_dist_source(d), "single process") == 0);
    brisk_dist_free(d);

    setenv("SLURM_PROCID", "0", 1), setenv("SLURM_NTASKS", "1", 1), setenv("SLURM_LOCALID", "0", 1);
    REQUIRE_OK(brisk_dist_create(&d, &err), &err);
    CHECK(strcmp(brisk_dist_source(d), "SLURM environment") == 0);
    brisk_dist_free(d);

    /* 4 tasks but no MPI launcher: refused, naming the source and the way out */
    setenv("SLURM_PROCID", "2", 1), setenv("SLURM_NTASKS", "4", 1);
    CHECK(brisk_dist_create(&d, &err) == BRISK_ERR_UNSUPPORTED && d == NULL);
    CHECKF(strstr(err.msg, "SLURM environment gives world size 4") && strstr(err.msg, "mpirun"), "%s", err.msg);

    setenv("SLURM_PROCID", "4", 1); /* rank outside the world */
    CHECK(brisk_dist_create(&d, &err) == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "SLURM_PROCID=4") != NULL, "%s", err.msg);
    setenv("SLURM_PROCID", "x", 1);
    CHECK(brisk_dist_create(&d, &err) == BRISK_ERR_INVALID);
    clear_env();

    setenv("RANK", "1", 1), setenv("WORLD_SIZE", "2", 1), setenv("LOCAL_RANK", "1", 1);
    CHECK(brisk_dist_create(&d, &err) == BRISK_ERR_UNSUPPORTED);
    CHECKF(strstr(err.msg, "torchrun environment gives world size 2") != NULL, "%s", err.msg);
    setenv("RANK", "0", 1), setenv("WORLD_SIZE", "1", 1), setenv("LOCAL_RANK", "0", 1);
    REQUIRE_OK(brisk_dist_create(&d, &err), &err);
    CHECK(strcmp(brisk_dist_source(d), "torchrun environment") == 0);
    brisk_dist_free(d);
    clear_env();
}

/* The launcher named by the variables each sets: mpirun inside a SLURM job (SLURM's variables
 * inherited through its daemons' job step) is mpirun, not srun. */
static void test_launcher(void) {
    const char *vars[] = {"OMPI_MCA_orte_hnp_uri", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "SLURM_STEP_ID",
                          "SLURM_JOB_ID"};
    char *saved[5];
    for (int i = 0; i < 5; i++) saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL, unsetenv(vars[i]);
    CHECK(strcmp(brisk_dist_launcher(), "an MPI launcher") == 0);
    setenv("SLURM_JOB_ID", "42", 1), setenv("SLURM_STEP_ID", "0", 1);
    CHECK(strcmp(brisk_dist_launcher(), "srun") == 0);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1), setenv("OMPI_MCA_orte_hnp_uri", "1.0;tcp://h:1", 1);
    CHECKF(strcmp(brisk_dist_launcher(), "mpirun") == 0, "%s", brisk_dist_launcher());
    for (int i = 0; i < 4; i++) unsetenv(vars[i]);
    setenv("MPI_LOCALNRANKS", "2", 1);
    CHECK(strcmp(brisk_dist_launcher(), "mpiexec") == 0);
    for (int i = 0; i < 5; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }
}

static void test_shards(void) {
    int64_t off, cnt, next = 0;
    for (int r = 0; r < 3; r++) { /* 10 over 3: 4, 3, 3, contiguous */
        brisk_dist_shard(10, 3, r, &off, &cnt);
        CHECK(off == next && cnt == (r == 0 ? 4 : 3));
        next = off + cnt;
    }
    CHECK(next == 10);
    /* every rank's shard at once (ZeRO-1 on a device): the same boundaries */
    int64_t b[4];
    brisk_dist_shard_bounds(10, 3, b);
    CHECK(b[0] == 0 && b[1] == 4 && b[2] == 7 && b[3] == 10);
    int64_t one[2];
    brisk_dist_shard_bounds(5, 1, one);
    CHECK(one[0] == 0 && one[1] == 5);
    int64_t few[5]; /* fewer floats than ranks: empty shards at the end */
    brisk_dist_shard_bounds(2, 4, few);
    CHECK(few[0] == 0 && few[1] == 1 && few[2] == 2 && few[3] == 2 && few[4] == 2);
}

static void test_buckets(void) {
    /* tensors of 100, 300, 50, 1000, 20 floats back to back */
    int64_t sizes[] = {100, 300, 50, 1000, 20}, offs[5], o = 0;
    for (int i = 0; i < 5; i++) offs[i] = o, o += sizes[i];
    brisk_dist_bucket b[8];
    /* 1 KiB = 256 floats: from the back, [20 + 1000] cut into 256, 256, 256, 252; then
     * [50 + 300] (less than two buckets: whole), [100] */
    int64_t n = brisk_dist_plan_buckets(offs, sizes, 5, 1024, b, 8);
    REQUIRE(n == 6);
    CHECK(b[0].offset == 1214 && b[0].count == 256);
    CHECK(b[3].offset == 450 && b[3].count == 252);
    CHECK(b[4].offset == 100 && b[4].count == 350);
    CHECK(b[5].offset == 0 && b[5].count == 100);
    /* one huge bucket covers everything; a tiny one gives a bucket per tensor */
    CHECK(brisk_dist_plan_buckets(offs, sizes, 5, INT64_C(1) << 40, b, 8) == 1 && b[0].offset == 0 && b[0].count == o);
    CHECK(brisk_dist_plan_buckets(offs, sizes, 5, 4 * 400, b, 8) == 4); /* 400: [1020], [350], [100]... */
    CHECK(brisk_dist_plan_buckets(offs, sizes, 5, 4, b, 2) == 1470); /* a float each; counted beyond cap */
}

static void test_alone_no_collective(void) {
    brisk_error err = {0};
    brisk_dist *d = NULL;
    clear_env();
    REQUIRE_OK(brisk_dist_create(&d, &err), &err);
    float x[5] = {1, 2, 3, 4, 5};
    double v[2] = {1, 2};
    REQUIRE_OK(brisk_dist_allreduce_mean(d, x, 5, NULL, 0, "test", 1, &err), &err);
    REQUIRE_OK(brisk_dist_allreduce_sum(d, v, 2, "test", 1, &err), &err);
    REQUIRE_OK(brisk_dist_reduce_scatter_mean(d, x, 5, "test", 1, &err), &err);
    REQUIRE_OK(brisk_dist_allgather(d, x, 5, "test", 1, &err), &err);
    CHECK(x[0] == 1 && x[4] == 5 && v[1] == 2);
    CHECK(brisk_dist_collectives(d) == 0 && brisk_dist_bytes(d) == 0);
    brisk_dist_free(d);
    /* a communicator passed without MPI initialised (or in a build without MPI) is refused */
    CHECK(brisk_dist_create_comm(&d, NULL, &err) == BRISK_ERR_INVALID || !brisk_dist_have_mpi());
}

/* Under mpirun: rank r holds x[i] = r * 1000 + i; means, sums, shards checked exactly
 * (small integers and halves are exact in f32). */
static brisk_dist *mpi_group; /* one for every MPI case: brisk_dist_free finalises MPI */

static void test_mpi_collectives(void) {
    brisk_error err = {0};
    brisk_dist *d = mpi_group;
    int r = brisk_dist_rank(d), n = brisk_dist_world(d);
    CHECKF(n >= 2, "world %d: run under mpirun -np 2", n);
    CHECK(strncmp(brisk_dist_source(d), "MPI", 3) == 0);
    enum { N = 1000 };
    float *x = malloc(sizeof(float) * N);
    REQUIRE(x);
    double base = 1000.0 * (n - 1) / 2; /* mean over ranks of r * 1000 */
    brisk_dist_set_bucket_bytes(d, 256); /* 64 floats: 16 buckets in flight */
    for (int i = 0; i < N; i++) x[i] = (float)(r * 1000 + i);
    REQUIRE_OK(brisk_dist_allreduce_mean(d, x, N, NULL, 0, "test all-reduce", 1, &err), &err);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += x[i] != (float)(base + i);
    CHECKF(bad == 0, "%d wrong means", bad);
    CHECK(brisk_dist_collectives(d) == 16);
    brisk_dist_bucket bk[2] = {{500, 500}, {0, 500}}; /* planned buckets */
    for (int i = 0; i < N; i++) x[i] = (float)(r * 1000 + i);
    REQUIRE_OK(brisk_dist_allreduce_mean(d, x, N, bk, 2, "test all-reduce", 2, &err), &err);
    bad = 0;
    for (int i = 0; i < N; i++) bad += x[i] != (float)(base + i);
    CHECKF(bad == 0, "%d wrong means (planned buckets)", bad);

    double v[2] = {r, 1};
    REQUIRE_OK(brisk_dist_allreduce_sum(d, v, 2, "test sum", 3, &err), &err);
    CHECK(v[0] == n * (n - 1) / 2.0 && v[1] == n);
    v[0] = r, v[1] = -r;
    REQUIRE_OK(brisk_dist_allreduce_max(d, v, 2, "test max", 3, &err), &err);
    CHECK(v[0] == n - 1 && v[1] == 0);

    int64_t off, cnt;
    brisk_dist_shard(N, n, r, &off, &cnt);
    for (int i = 0; i < N; i++) x[i] = (float)(r * 1000 + i);
    REQUIRE_OK(brisk_dist_reduce_scatter_mean(d, x, N, "test reduce-scatter", 4, &err), &err);
    bad = 0;
    for (int64_t i = 0; i < N; i++) bad += x[i] != (float)(i >= off && i < off + cnt ? base + i : r * 1000 + i);
    CHECKF(bad == 0, "%d wrong after reduce-scatter", bad);
    for (int i = 0; i < N; i++) x[i] = i >= off && i < off + cnt ? (float)(-i) : 7.0f;
    REQUIRE_OK(brisk_dist_allgather(d, x, N, "test all-gather", 5, &err), &err);
    bad = 0;
    for (int i = 0; i < N; i++) bad += x[i] != (float)(-i);
    CHECKF(bad == 0, "%d wrong after all-gather", bad);
    free(x);
}

/* Under mpirun: rank r lists its entries, rank 1 with another optim.lr, then an extra key;
 * every rank returns the same error naming the key, the ranks and the values. The order of
 * the entries does not matter. */
static void test_mpi_agreement(void) {
    brisk_error err = {0};
    brisk_dist *d = mpi_group;
    int r = brisk_dist_rank(d);
    brisk_dist_agreement a = {0};
    if (r == 1) brisk_dist_agreement_add(&a, "train.seed", NULL, "%d", 0);
    brisk_dist_agreement_add(&a, "optim.lr", r ? "b.json" : "a.json", "%g", 0.001);
    if (r != 1) brisk_dist_agreement_add(&a, "train.seed", NULL, "%d", 0);
    REQUIRE_OK(brisk_dist_agreement_check(d, &a, "test agreement", &err), &err);
    brisk_dist_agreement_free(&a);

    brisk_dist_agreement_add(&a, "train.seed", NULL, "%d", 0);
    brisk_dist_agreement_add(&a, "optim.lr", r ? "b.json" : "a.json", "%g", r == 1 ? 0.002 : 0.001);
    CHECK(brisk_dist_agreement_check(d, &a, "test agreement", &err) == BRISK_ERR_INVALID);
    CHECKF(strcmp(err.msg, "ranks disagree on optim.lr: rank 0 has 0.001 (a.json), rank 1 has 0.002 (b.json)") == 0,
           "%s", err.msg);
    /* every rank shares the error: giving up ends nothing, the group still works */
    brisk_dist_abandon(d);
    CHECK(!brisk_dist_failed(d));
    brisk_dist_agreement_free(&a);

    brisk_dist_agreement_add(&a, "train.seed", NULL, "%d", 0);
    if (r == 1) brisk_dist_agreement_add(&a, "extra\tkey", NULL, "5\n6");
    CHECK(brisk_dist_agreement_check(d, &a, "test agreement", &err) == BRISK_ERR_INVALID);
    CHECKF(strcmp(err.msg, "ranks disagree on extra key: rank 0 has no such entry, rank 1 has 5 6") == 0, "%s", err.msg);
    brisk_dist_agreement_free(&a);
    double v = 1;
    REQUIRE_OK(brisk_dist_allreduce_sum(d, &v, 1, "test sum", 1, &err), &err);
    CHECK(v == brisk_dist_world(d));
}

/* Under mpirun: rank 1's arrays are 10 floats longer. Every sized collective refuses on every
 * rank, naming the sizes, instead of writing past rank 0's buffer (ASan: dist.group_mpi in
 * the sanitizer build); x is left as it was. (Sizes new to every rank: a rank whose sizes were
 * agreed before would go straight to its collective, and the others' agreement would end in
 * the collective timeout, on its own communicator: an error too, but after timeout_s.) */
static void test_mpi_sizes_disagree(void) {
    brisk_error err = {0};
    brisk_dist *d = mpi_group;
    int r = brisk_dist_rank(d);
    int64_t n = 900 + 10 * r;
    float *x = malloc(sizeof(float) * (size_t)n);
    REQUIRE(x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)i;
    brisk_dist_set_bucket_bytes(d, 256);
    CHECK(brisk_dist_allreduce_mean(d, x, n, NULL, 0, "test all-reduce", 1, &err) == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "ranks disagree on the sizes of the test all-reduce: rank 0 has 900 floats in 15 buckets "
                           "(layout ") && strstr(err.msg, "rank 1 has 910 floats in 15 buckets (layout "), "%s", err.msg);
    CHECK(!brisk_dist_failed(d) && x[n - 1] == (float)(n - 1));
    brisk_dist_bucket bk[2] = {{400, n - 400}, {0, 400}};
    CHECK(brisk_dist_allreduce_mean(d, x, n, bk, 2, "test all-reduce", 2, &err) == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "rank 0 has 900 floats in 2 buckets") && strstr(err.msg, "rank 1 has 910 floats in 2 buckets"),
           "%s", err.msg);
    CHECK(brisk_dist_reduce_scatter_mean(d, x, n, "test reduce-scatter", 3, &err) == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "ranks disagree on the sizes of the test reduce-scatter: rank 0 has 900 floats in shards, "
                           "rank 1 has 910 floats in shards"), "%s", err.msg);
    CHECK(brisk_dist_allgather(d, x, n, "test all-gather", 4, &err) == BRISK_ERR_INVALID);
    brisk_dist_overlap *o = NULL;
    if (brisk_dist_can_overlap(d)) {
        CHECK(brisk_dist_overlap_create(d, x, n, bk, 2, &o, &err) == BRISK_ERR_INVALID && !o);
        CHECKF(strstr(err.msg, "rank 1 has 910 floats in 2 buckets"), "%s", err.msg);
    }
    /* a bucket outside the array, alike on every rank: refused after agreeing */
    brisk_dist_bucket out[1] = {{890, 20}};
    CHECK(brisk_dist_allreduce_mean(d, x, 900, out, 1, "test all-reduce", 5, &err) == BRISK_ERR_INVALID);
    CHECKF(strstr(err.msg, "bucket 0 lies outside its 900 floats"), "%s", err.msg);
    /* sizes that agree: it all-reduces (the first 900 floats) */
    REQUIRE_OK(brisk_dist_allreduce_mean(d, x, 900, NULL, 0, "test all-reduce", 6, &err), &err);
    CHECK(x[899] == 899.0f);
    free(x);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "mpi") == 0) {
        brisk_error err = {0};
        if (brisk_dist_create(&mpi_group, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        t_case mpi[] = {T(test_mpi_collectives), T(test_mpi_agreement), T(test_mpi_sizes_disagree)};
        int rc = t_run(mpi, (int)(sizeof mpi / sizeof mpi[0]));
        brisk_dist_free(mpi_group);
        return rc;
    }
    t_case alone[] = {T(test_env_discovery), T(test_launcher), T(test_shards), T(test_buckets), T(test_alone_no_collective)};
    return t_run(alone, (int)(sizeof alone / sizeof alone[0]));
}
