/* The image loader's decoding threads (brisk_loader_workers): automatic, they take half of
 * brisk's resolved thread budget (speed.threads, OMP_NUM_THREADS, the affinity mask), not
 * half of the machine's cores, so they do not compete with the step's own threads; an
 * explicit data.images.workers wins; datasets that are not images get none. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>

#include "brisk/system.h"
#include "test.h"
#include "train/trainer_internal.h"

static brisk_config images_config(int threads, int workers) {
    brisk_config c;
    memset(&c, 0, sizeof c);
    c.data.images.enabled = 1;
    c.data.images.workers = workers;
    c.speed.threads = threads;
    return c;
}

static void test_follows_speed_threads(void) {
    brisk_config c = images_config(1, 0);
    CHECK(brisk_loader_workers(&c) == 1); /* never none */
    c = images_config(6, 0);
    CHECK(brisk_loader_workers(&c) == 3);
    c = images_config(16, 0); /* more than this machine's cores: the budget, not sysconf, decides */
    CHECK(brisk_loader_workers(&c) == 8);
    c = images_config(64, 0); /* at most 8 */
    CHECK(brisk_loader_workers(&c) == 8);
}

static void test_follows_environment_and_affinity(void) {
    brisk_config c = images_config(0, 0);
    unsetenv("SLURM_CPUS_PER_TASK");
    setenv("OMP_NUM_THREADS", "6", 1);
    CHECK(brisk_loader_workers(&c) == 3);
    unsetenv("OMP_NUM_THREADS");
    /* one CPU allowed: one decoder, whatever the machine has */
    cpu_set_t old, one;
    REQUIRE(sched_getaffinity(0, sizeof old, &old) == 0);
    CPU_ZERO(&one);
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &old)) {
            CPU_SET(i, &one);
            break;
        }
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
    brisk_thread_plan tp;
    brisk_threads_resolve(0, NULL, &tp);
    int workers = brisk_loader_workers(&c);
    sched_setaffinity(0, sizeof old, &old);
    CHECK(tp.threads == 1);
    CHECK(workers == 1);
    setenv("OMP_NUM_THREADS", "2", 1);
}

static void test_explicit_and_not_images(void) {
    brisk_config c = images_config(6, 5);
    CHECK(brisk_loader_workers(&c) == 5);
    c = images_config(6, 0);
    c.data.images.enabled = 0;
    CHECK(brisk_loader_workers(&c) == 0);
}

TEST_MAIN(T(test_follows_speed_threads), T(test_follows_environment_and_affinity), T(test_explicit_and_not_images))
