/* Results do not depend on the schedule: training steps of each model family (MLP with
 * dropout, LSTM, Transformer with dropout, diffusion denoiser) give bit-identical losses
 * and parameters on 1, 2, 3 and 4 threads, and on 2 threads while two busy threads
 * compete for the cores. And the default thread count: where it comes from
 * (brisk_threads_resolve) and when it warns. */
#define _GNU_SOURCE
#include "brisk/brisk.h"
#include "model_inputs.h"
#include "test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

static void model_for(int which, brisk_model_spec *s, int64_t *batch) {
    memset(s, 0, sizeof *s);
    switch (which) {
    case 0: /* the tabular MLP's kinds of ops, dropout included, above the parallel grains */
        *s = (brisk_model_spec){.type = BRISK_MODEL_MLP, .inputs = 64, .outputs = 3, .n_hidden = 2,
                                .activation = BRISK_ACT_RELU, .dropout = 0.1f, .task = BRISK_TASK_CLASSIFY};
        s->hidden[0] = 256, s->hidden[1] = 128;
        *batch = 192;
        return;
    case 1: /* 3 chunks of 32 sequences, a ragged last one */
        *s = (brisk_model_spec){.type = BRISK_MODEL_LSTM, .inputs = 8, .outputs = 3, .seq_len = 12, .width = 32,
                                .layers = 2, .pool = BRISK_POOL_LAST, .task = BRISK_TASK_CLASSIFY};
        *batch = 80;
        return;
    case 2:
        *s = (brisk_model_spec){.type = BRISK_MODEL_TRANSFORMER, .inputs = 8, .outputs = 3, .seq_len = 16,
                                .width = 64, .layers = 2, .heads = 4, .ffn = 128, .activation = BRISK_ACT_GELU,
                                .dropout = 0.1f, .norm_first = 1, .pool = BRISK_POOL_MEAN,
                                .positions = BRISK_POS_LEARNED, .task = BRISK_TASK_CLASSIFY};
        *batch = 40;
        return;
    default:
        *s = (brisk_model_spec){.type = BRISK_MODEL_DIFFUSION, .fine = 256, .coarse = 7, .time_embedding = 32,
                                .n_hidden = 2, .activation = BRISK_ACT_SILU, .noise_steps = 50,
                                .beta_start = 1e-4f, .beta_end = 0.02f};
        s->hidden[0] = s->hidden[1] = 256;
        *batch = 64;
    }
}

static const char *model_name(int which) {
    return (const char *[]){"mlp", "lstm", "transformer", "diffusion"}[which];
}

/* model_run's steps of model `which` on `threads` threads. */
static int train(int which, int threads, model_run_out *o) {
    brisk_model_spec spec;
    int64_t batch;
    model_for(which, &spec, &batch);
    return model_run(&spec, batch, threads, -1, 0, 1, model_name(which), o); /* gradients in place, as the trainer plans them */
}

static void check_same(int which, const model_run_out *a, const model_run_out *b, const char *what) {
    CHECKF(memcmp(a->losses, b->losses, sizeof a->losses) == 0, "%s %s: losses %.9g %.9g %.9g vs %.9g %.9g %.9g",
           model_name(which), what, a->losses[0], a->losses[1], a->losses[2], b->losses[0], b->losses[1], b->losses[2]);
    CHECKF(a->param_bytes == b->param_bytes && memcmp(a->params, b->params, a->param_bytes) == 0,
           "%s %s: parameters differ after %d steps", model_name(which), what, MODEL_RUN_STEPS);
}

static _Atomic int busy_stop;
static void *busy_loop(void *arg) {
    (void)arg;
    volatile double x = 1.0;
    while (!atomic_load_explicit(&busy_stop, memory_order_relaxed)) x = x * 1.0000001 + 1e-9;
    return NULL;
}

static void test_bit_identical_across_threads(void) {
    for (int which = 0; which < 4; which++) {
        model_run_out ref = {0};
        REQUIRE(train(which, 1, &ref) == 0);
        for (int threads = 2; threads <= 4; threads++) {
            model_run_out o = {0};
            char what[64];
            snprintf(what, sizeof what, "1 vs %d threads", threads);
            CHECK(train(which, threads, &o) == 0);
            check_same(which, &ref, &o, what);
            model_run_free(&o);
        }
        /* under contention: two busy threads beside a 2-thread run (a few hundred ms) */
        pthread_t busy[2];
        atomic_store(&busy_stop, 0);
        int started = 0;
        for (int k = 0; k < 2; k++) started += pthread_create(&busy[k], NULL, busy_loop, NULL) == 0;
        model_run_out o = {0};
        int rc = train(which, 2, &o);
        atomic_store(&busy_stop, 1);
        for (int k = 0; k < started; k++) pthread_join(busy[k], NULL);
        CHECK(rc == 0);
        check_same(which, &ref, &o, "1 vs 2 threads beside 2 busy threads");
        model_run_free(&o);
        model_run_free(&ref);
    }
}

static void unset_thread_env(void) {
    const char *vars[] = {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                          "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NODEID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_thread_sources(void) {
    unset_thread_env();
    brisk_thread_plan p;
    brisk_threads_resolve(0, NULL, &p);
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    CHECK(p.usable_cpus >= 1 && p.usable_cpus <= CPU_COUNT(&set));
    CHECK(p.threads == p.usable_cpus);
    CHECK(p.local_ranks == 1);
    CHECK(p.warning[0] == 0);

    brisk_threads_resolve(3, "speed.threads", &p); /* the host's or the user's count wins */
    CHECK(p.threads == 3 && strcmp(p.source, "speed.threads") == 0);

    setenv("OMP_NUM_THREADS", "5,2", 1);
    setenv("SLURM_CPUS_PER_TASK", "4", 1);
    brisk_threads_resolve(0, NULL, &p);
    CHECK(p.threads == 5 && strcmp(p.source, "OMP_NUM_THREADS") == 0);
    brisk_threads_resolve(2, "speed.threads", &p);
    CHECK(p.threads == 2);
    const char *bad[] = {"", "abc", "0", "-3", "2x", "1e3"}; /* not a count: the next source decides */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("OMP_NUM_THREADS", bad[i], 1);
        brisk_threads_resolve(0, NULL, &p);
        CHECKF(p.threads == 4 && strcmp(p.source, "SLURM_CPUS_PER_TASK") == 0, "OMP_NUM_THREADS=\"%s\": %d from %s",
               bad[i], p.threads, p.source);
    }
    unset_thread_env();
}

/* Ranks of one job on a node share its CPUs when they are not bound; the local size comes
 * from Open MPI, MPICH/Hydra or SLURM's tasks-per-node list ("2(x3),1": node 3 has 1). */
static void test_mpi_ranks_share(void) {
    unset_thread_env();
    brisk_thread_plan p;
    brisk_threads_resolve(0, NULL, &p);
    int usable = p.usable_cpus, full = p.usable_cpus >= p.online_cpus;
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    brisk_threads_resolve(0, NULL, &p);
    CHECK(p.local_ranks == 2);
    if (full) CHECKF(p.threads == (usable / 2 > 0 ? usable / 2 : 1) && strstr(p.source, "2 ranks"), "%d: %s", p.threads, p.source);
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    setenv("MPI_LOCALNRANKS", "3", 1);
    brisk_threads_resolve(0, NULL, &p);
    CHECK(p.local_ranks == 3);
    unsetenv("MPI_LOCALNRANKS");
    setenv("SLURM_JOB_ID", "17", 1);
    setenv("SLURM_TASKS_PER_NODE", "2(x3),1", 1);
    const char *node[] = {"0", "2", "3"};
    const int want[] = {2, 2, 1};
    for (int i = 0; i < 3; i++) {
        setenv("SLURM_NODEID", node[i], 1);
        brisk_threads_resolve(0, NULL, &p);
        CHECKF(p.local_ranks == want[i], "node %s: %d ranks", node[i], p.local_ranks);
    }
    setenv("SLURM_TASKS_PER_NODE", "2(x", 1); /* malformed: no ranks assumed */
    brisk_threads_resolve(0, NULL, &p);
    CHECK(p.local_ranks == 1);
    setenv("SLURM_NTASKS_PER_NODE", "4", 1);
    brisk_threads_resolve(0, NULL, &p);
    CHECK(p.local_ranks == 4);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    brisk_threads_resolve(16 * p.online_cpus, "speed.threads", &p); /* too many for the node */
    CHECK(p.warning[0] != 0);
    /* one thread a rank, but more unbound ranks than CPUs: the advice is fewer ranks, not
     * fewer threads (it said "1 threads ... use 1 or fewer") */
    if (p.usable_cpus >= p.online_cpus) {
        char ranks[16];
        snprintf(ranks, sizeof ranks, "%d", 2 * p.online_cpus);
        setenv("OMPI_COMM_WORLD_LOCAL_SIZE", ranks, 1);
        brisk_threads_resolve(1, "speed.threads", &p);
        char advice[96];
        snprintf(advice, sizeof advice, "run at most %d ranks on this node", p.online_cpus);
        CHECKF(strstr(p.warning, "1 thread (speed.threads) in each of") && strstr(p.warning, advice) &&
               !strstr(p.warning, "or fewer"), "warning: '%s'", p.warning);
    }
    unset_thread_env();
}

/* Restricted to one CPU (as `taskset -c 0` would), the default is 1 thread and asking
 * for 4 warns. */
static void test_affinity_and_warning(void) {
    unset_thread_env();
    cpu_set_t old, one;
    REQUIRE(sched_getaffinity(0, sizeof old, &old) == 0);
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &old)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    brisk_thread_plan p;
    brisk_threads_resolve(0, NULL, &p);
    CHECK(p.usable_cpus == 1 && p.threads == 1);
    CHECK(p.online_cpus == 1 || strstr(p.source, "affinity mask of 1"));
    brisk_threads_resolve(4, "speed.threads", &p);
    CHECK(p.threads == 4);
    CHECKF(strstr(p.warning, "may use 1 CPU") != NULL, "warning: '%s'", p.warning);
    sched_setaffinity(0, sizeof old, &old);
}

int main(void) {
    t_case c[] = {T(test_bit_identical_across_threads), T(test_thread_sources), T(test_mpi_ranks_share),
                  T(test_affinity_and_warning)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
