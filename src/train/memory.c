/* Resource limits: whether a run fits in memory, said before anything big is allocated.
 * The planner knows the exact bytes of the activation arena and of the parameter,
 * gradient and moment arenas; to these the trainer adds what it allocates around them
 * on the host: the loader's batch slots (one per prefetched batch, and one for the
 * validation loader) and the staging copy of parameters and moments a checkpoint is
 * written from. The dataset itself is loaded by then and already counted as used.
 *
 * Available memory is the smallest of the kernel's MemAvailable, the room left under
 * the cgroup's limit (a SLURM job's real ceiling) and under an address-space limit
 * (ulimit -v), unless speed.memory_limit or the BRISK_MEMORY_LIMIT environment
 * variable says otherwise (for tests, and for sharing a node). The largest batch that
 * fits is found by re-planning the graph at candidate sizes: a plan is cheap (no
 * allocation), and the bytes grow with the batch, so a binary search needs about
 * log2(batch) plans. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "brisk/json.h"
#include "train/trainer_internal.h"

#define MIB (1024.0 * 1024.0)

int brisk_parse_bytes(const char *s, int64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    while (*end == ' ') end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; break;
    case 'M': mul = MIB; break;
    case 'G': mul = MIB * 1024.0; break;
    case 'T': mul = MIB * MIB; break;
    default: return -1;
    }
    if (*end) {
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
    }
    if (*end || v * mul > 9.0e18) return -1;
    *out = (int64_t)(v * mul);
    return 0;
}

/* A number from a one-line file; -1 when absent or "max". */
static int64_t read_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = key ? strlen(key) : 0;
    while (fgets(line, sizeof line, f)) {
        if (key && strncmp(line, key, kl) != 0) continue;
        char *end;
        long long x = strtoll(line + kl, &end, 10);
        if (end != line + kl) v = x;
        break;
    }
    fclose(f);
    return v;
}

/* Room left under the memory cgroup's limit (v2, else v1); -1 when unlimited. */
static int64_t cgroup_room(void) {
    char rel[512] = "", path[700];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        char line[600];
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "0::", 3) == 0) {
                line[strcspn(line, "\n")] = 0;
                snprintf(rel, sizeof rel, "%s", strcmp(line + 3, "/") ? line + 3 : "");
            }
        fclose(f);
    }
    const char *v2[] = {rel, ""};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", v2[i]);
        int64_t max = read_number(path, NULL);
        if (max <= 0) continue;
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", v2[i]);
        int64_t cur = read_number(path, NULL);
        return cur >= 0 && cur < max ? max - cur : 0;
    }
    int64_t max = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", NULL);
    int64_t cur = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", NULL);
    if (max <= 0 || max >= (INT64_C(1) << 60)) return -1; /* v1 says "unlimited" with a huge number */
    return cur >= 0 && cur < max ? max - cur : 0;
}

/* Room left under an address-space limit (ulimit -v); -1 when there is none. */
static int64_t address_space_room(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = 0;
    if (f) {
        if (fscanf(f, "%lld", &pages) != 1) pages = 0;
        fclose(f);
    }
    int64_t used = (int64_t)pages * sysconf(_SC_PAGESIZE);
    return (int64_t)rl.rlim_cur > used ? (int64_t)rl.rlim_cur - used : 0;
}

int64_t brisk_memory_available(const brisk_config *cfg, char *source, size_t n) {
    if (cfg->speed.memory_limit > 0) {
        snprintf(source, n, "speed.memory_limit");
        return cfg->speed.memory_limit;
    }
    const char *env = getenv("BRISK_MEMORY_LIMIT");
    int64_t v;
    if (env && brisk_parse_bytes(env, &v) == 0) {
        snprintf(source, n, "BRISK_MEMORY_LIMIT");
        return v;
    }
    int64_t avail = read_number("/proc/meminfo", "MemAvailable:");
    if (avail >= 0) {
        avail *= 1024;
        snprintf(source, n, "MemAvailable in /proc/meminfo");
    } else {
        long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && size > 0 ? (int64_t)pages * size : INT64_MAX;
        snprintf(source, n, "free RAM");
    }
    int64_t room = cgroup_room();
    if (room >= 0 && room < avail) {
        avail = room;
        snprintf(source, n, "room under the cgroup's memory limit");
    }
    room = address_space_room();
    if (room >= 0 && room < avail) {
        avail = room;
        snprintf(source, n, "room under the address-space limit, ulimit -v");
    }
    return avail;
}

/* What a run needs on top of the data: the plan plus the trainer's host buffers. */
static void needed_parts(const brisk_plan *p, int prefetch, int64_t parts[4]) {
    int slots = (prefetch > 0 ? prefetch : 1) + 1;
    parts[0] = (int64_t)p->arena_bytes;
    parts[1] = 4 * (int64_t)p->param_bytes + (int64_t)p->const_bytes;
    parts[2] = (int64_t)(slots + 1) * (int64_t)p->input_bytes; /* + the graph's own input area */
    parts[3] = 3 * (int64_t)p->param_bytes;
}

static int64_t needed_total(const brisk_plan *p, int prefetch) {
    int64_t parts[4];
    needed_parts(p, prefetch, parts);
    return parts[0] + parts[1] + parts[2] + parts[3];
}

/* Needed bytes at a batch size; -1 when the model cannot be built at that size. */
static int64_t needed_at(const brisk_config *cfg, int64_t batch) {
    brisk_graph *g = brisk_graph_new();
    brisk_plan plan;
    brisk_model_io io;
    brisk_error e;
    int64_t need = -1;
    memset(&plan, 0, sizeof plan);
    if (g && !brisk_model_build(&cfg->model, batch, BRISK_BUILD_TRAIN, g, &io, &e) && !brisk_backward(g, io.loss, &e) &&
        !brisk_plan_build(g, &plan, &e))
        need = needed_total(&plan, cfg->speed.prefetch);
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    return need;
}

/* The largest batch in [1, hi] whose run fits in `avail` bytes; 0 when none does. */
static int64_t largest_fitting(const brisk_config *cfg, int64_t hi, int64_t avail) {
    int64_t lo = 0; /* fits (0 stands for "nothing") */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2, need = needed_at(cfg, mid);
        if (need >= 0 && need <= avail) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Image decoding's scratch is a fixed cost beside the data: taken off what is available. */
static int64_t available_for_run(brisk_trainer *t, char *source, size_t n) {
    int64_t avail = brisk_memory_available(&t->cfg, source, n);
    if (t->decode_bytes > 0) {
        avail -= t->decode_bytes;
        size_t k = strlen(source);
        snprintf(source + k, n - k, ", less %.1f MiB for image decoding", t->decode_bytes / MIB);
    }
    return avail;
}

brisk_status brisk_memory_fit(brisk_trainer *t, brisk_error *err) {
    char source[160];
    int64_t avail = available_for_run(t, source, sizeof source), parts[4];
    needed_parts(&t->plan, t->cfg.speed.prefetch, parts);
    int64_t need = parts[0] + parts[1] + parts[2] + parts[3];
    if (need <= avail) return BRISK_OK;
    int64_t B = t->cfg.train.batch_size, fit = largest_fitting(&t->cfg, B - 1, avail);
    char hint[160];
    if (fit > 0)
        snprintf(hint, sizeof hint, "the largest train.batch_size that fits is %" PRId64 " (--batch-size %" PRId64
                 ", or --batch-size auto)", fit, fit);
    else
        snprintf(hint, sizeof hint, "not even train.batch_size 1 fits: use a smaller model or free memory");
    return brisk_errorf(err, BRISK_ERR_NOMEM,
                        "%s: this run needs %.1f MiB at train.batch_size %" PRId64 " (activations %.1f, parameters, "
                        "gradients and optimizer moments %.1f, batches %.1f, checkpoint staging %.1f), but %.1f MiB "
                        "are available (%s); %s",
                        t->cfg.path, need / MIB, B, parts[0] / MIB, parts[1] / MIB, parts[2] / MIB, parts[3] / MIB,
                        avail / MIB, source, hint);
}

brisk_status brisk_memory_auto_batch(brisk_trainer *t, int64_t max_batch, brisk_error *err) {
    char source[160];
    int64_t avail = available_for_run(t, source, sizeof source);
    int64_t fit = largest_fitting(&t->cfg, max_batch, avail);
    if (fit == 0)
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: train.batch_size auto: not even a batch of 1 fits in the %.1f MiB "
                            "available (%s); this run needs %.1f MiB at batch 1", t->cfg.path, avail / MIB, source,
                            needed_at(&t->cfg, 1) / MIB);
    t->cfg.train.batch_size = fit;
    brisk_log(&t->log, BRISK_LOG_INFO, "batch     auto: %" PRId64 ", the largest that fits in %.1f MiB (%s)%s", fit,
              avail / MIB, source, fit == max_batch ? ", capped at the training split's size" : "");
    /* Checkpoints record the size chosen, so a resume can ask for it explicitly. */
    brisk_json *doc = NULL;
    brisk_status st = brisk_json_parse(t->cfg.json, strlen(t->cfg.json), t->cfg.path, &doc, err);
    char *json = NULL;
    if (!st) st = brisk_json_set_int(doc, "train.batch_size", fit, err);
    if (!st) st = brisk_json_dump(doc, &json, err);
    brisk_json_free(doc);
    if (st) return st;
    free(t->cfg.json);
    t->cfg.json = json;
    return BRISK_OK;
}
