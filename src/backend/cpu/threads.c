/* The default CPU thread count (brisk_threads_resolve, declared in brisk/system.h):
 * what the host or the environment asks for, else the CPUs this process may use.
 *
 * Why not the machine's core count: on a shared machine brisk is one of several
 * programs. A process restricted to fewer CPUs (taskset, a container's cgroup quota,
 * a batch system) that starts one thread per core anyway puts two threads on a core,
 * and an MPI job whose unbound ranks each start one thread per core puts ranks x cores
 * threads on the node: either way every step waits for descheduled threads. */
#define _GNU_SOURCE
#include "brisk/system.h"

#include <ctype.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A positive integer environment value (OMP_NUM_THREADS may be a list: its first
 * entry is the outer level); 0 when unset or not a positive number. */
static int env_count(const char *name) {
    const char *v = getenv(name);
    if (!v) return 0;
    while (isspace((unsigned char)*v)) v++;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || n < 1 || n > 65536) return 0;
    while (isspace((unsigned char)*end)) end++;
    if (*end && *end != ',') return 0;
    return (int)n;
}

/* CPUs in this process's affinity mask (0 if it cannot be read). */
static int affinity_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

/* A cgroup CPU quota in CPUs, rounded up (0: none). cgroup v2's cpu.max of this
 * process's cgroup ("max 100000" or "200000 100000"), else v1's cfs quota. */
static int cgroup_quota_cpus(void) {
    char path[512] = "/sys/fs/cgroup/cpu.max", line[512];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "0::", 3) == 0) {
                line[strcspn(line, "\n")] = 0;
                snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", strcmp(line + 3, "/") ? line + 3 : "");
            }
        fclose(f);
    }
    long long quota = -1, period = 0;
    if ((f = fopen(path, "r")) || (f = fopen("/sys/fs/cgroup/cpu.max", "r"))) {
        char q[32] = "";
        if (fscanf(f, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0) quota = atoll(q);
        fclose(f);
    } else if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r"))) {
        if (fscanf(f, "%lld", &quota) != 1) quota = -1;
        fclose(f);
        if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r"))) {
            if (fscanf(f, "%lld", &period) != 1) period = 0;
            fclose(f);
        }
    }
    if (quota <= 0 || period <= 0) return 0;
    long long n = (quota + period - 1) / period;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* SLURM_TASKS_PER_NODE is "2(x3),1": node i's count, i = SLURM_NODEID. */
static int slurm_tasks_on_node(void) {
    int n = env_count("SLURM_NTASKS_PER_NODE");
    const char *v = getenv("SLURM_TASKS_PER_NODE"), *node = getenv("SLURM_NODEID");
    if (n || !v) return n;
    long want = node ? strtol(node, NULL, 10) : 0, at = 0;
    while (*v) {
        char *end;
        long count = strtol(v, &end, 10), rep = 1;
        if (end == v || count < 1) return 0;
        if (strncmp(end, "(x", 2) == 0) {
            rep = strtol(end + 2, &end, 10);
            if (rep < 1 || *end != ')') return 0;
            end++;
        }
        if (want < at + rep) return count > 65536 ? 0 : (int)count;
        at += rep;
        if (*end != ',') return 0;
        v = end + 1;
    }
    return 0;
}

/* Processes of this job on this node, and the variable that said so. */
static int local_ranks(const char **from) {
    static const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        int n = env_count(vars[i]);
        if (n) {
            *from = vars[i];
            return n;
        }
    }
    int n = getenv("SLURM_JOB_ID") || getenv("SLURM_JOBID") ? slurm_tasks_on_node() : 0;
    *from = "SLURM_TASKS_PER_NODE";
    return n ? n : 1;
}

void brisk_threads_resolve(int requested, const char *requested_by, brisk_thread_plan *p) {
    memset(p, 0, sizeof *p);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    p->online_cpus = online > 0 && online < INT_MAX ? (int)online : 1;
    int aff = affinity_cpus(), quota = cgroup_quota_cpus();
    p->usable_cpus = aff > 0 ? aff : p->online_cpus;
    if (quota > 0 && quota < p->usable_cpus) p->usable_cpus = quota;
    const char *ranks_from = "";
    p->local_ranks = local_ranks(&ranks_from);

    char cpus[96];
    if (quota > 0 && quota < (aff > 0 ? aff : p->online_cpus))
        snprintf(cpus, sizeof cpus, "cgroup CPU quota of %d", quota);
    else if (aff > 0 && aff < p->online_cpus)
        snprintf(cpus, sizeof cpus, "affinity mask of %d of %d CPUs", aff, p->online_cpus);
    else
        snprintf(cpus, sizeof cpus, "%d CPUs usable", p->usable_cpus);

    int env;
    if (requested > 0) {
        p->threads = requested;
        snprintf(p->source, sizeof p->source, "%s", requested_by && *requested_by ? requested_by : "requested");
    } else if ((env = env_count("OMP_NUM_THREADS")) > 0) {
        p->threads = env;
        snprintf(p->source, sizeof p->source, "OMP_NUM_THREADS");
    } else if ((env = env_count("SLURM_CPUS_PER_TASK")) > 0) {
        p->threads = env;
        snprintf(p->source, sizeof p->source, "SLURM_CPUS_PER_TASK");
    } else if (p->local_ranks > 1 && p->usable_cpus >= p->online_cpus) {
        /* unbound ranks all see the whole node: share it */
        p->threads = p->usable_cpus / p->local_ranks;
        if (p->threads < 1) p->threads = 1;
        snprintf(p->source, sizeof p->source, "%s, shared by %d ranks on this node (%s)", cpus, p->local_ranks,
                 ranks_from);
    } else {
        p->threads = p->usable_cpus;
        snprintf(p->source, sizeof p->source, "%s", cpus);
    }
    if (p->threads > p->usable_cpus)
        snprintf(p->warning, sizeof p->warning, "%d threads (%s) but this process may use %d CPU%s (%s): threads "
                 "will wait for each other; use %d or fewer", p->threads, p->source, p->usable_cpus,
                 p->usable_cpus == 1 ? "" : "s", cpus, p->usable_cpus);
    else if (p->local_ranks > 1 && p->usable_cpus >= p->online_cpus && p->threads * p->local_ranks > p->online_cpus) {
        int fit = p->online_cpus / p->local_ranks; /* threads a rank may have; 0: the ranks alone are too many */
        char advice[96];
        if (fit > 0) snprintf(advice, sizeof advice, "use %d thread%s or fewer a rank, or bind the ranks", fit,
                              fit == 1 ? "" : "s");
        else snprintf(advice, sizeof advice, "run at most %d ranks on this node", p->online_cpus);
        snprintf(p->warning, sizeof p->warning, "%d thread%s (%s) in each of %d unbound ranks on %d CPUs: threads "
                 "will wait for each other; %s", p->threads, p->threads == 1 ? "" : "s", p->source, p->local_ranks,
                 p->online_cpus, advice);
    }
}
