/* Resource limits: whether a run fits in memory, said before anything big is allocated.
 * The planner knows the exact bytes of the activation arena and of the parameter,
 * gradient and moment arenas; to these the trainer adds what it allocates around them
 * on the host: the loader's batch slots (one per prefetched batch, and one for the
 * validation loader) and the staging copy of parameters and moments a checkpoint is
 * written from. The dataset is loaded by then: what the machine reports as available
 * already excludes it, but an explicit limit (speed.memory_limit, BRISK_MEMORY_LIMIT)
 * covers the whole run, so there its bytes are added. Before the data is loaded, its size
 * read from the file's headers is checked against the same limit, so a data set that
 * cannot fit (a small deflated NPZ of 8 GB) is refused before it is inflated.
 *
 * Available memory is the smallest of the kernel's MemAvailable, the room left under
 * the cgroup's limit (a SLURM job's real ceiling) and under an address-space limit
 * (ulimit -v), unless speed.memory_limit or the BRISK_MEMORY_LIMIT environment
 * variable says otherwise (for tests, and for sharing a node).
 *
 * On a device backend (a GPU) the arenas, the graph's input area and the two staging
 * buffers live in device memory: that part is held against the memory the device can
 * still allocate (its stats: cudaMemGetInfo), less a reserve for the backend's own
 * buffers, and only the batch slots and the checkpoint staging against the host's. The largest batch that
 * fits is found by re-planning the graph at candidate sizes: a plan is cheap (no
 * allocation), and the bytes grow with the batch, so a binary search needs about
 * log2(batch) plans. */
#define _GNU_SOURCE
#include <ctype.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "brisk/cuda.h"
#include "brisk/json.h"
#include "brisk/system.h"
#include "train/trainer_internal.h"

#define MIB (1024.0 * 1024.0)

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

#define BLAS_THREAD_BUFFER ((int64_t)128 << 20)

/* Room left under an address-space limit (ulimit -v); -1 when there is none. blas: the
 * anonymous mappings of exactly a BLAS thread buffer's size among them (may be NULL). Both
 * come from one pass over /proc/self/maps: OpenBLAS's server thread maps its buffer when the
 * scheduler first runs it, and read apart (statm, then maps) the buffer could land between
 * the two reads, in the count but not in the room: 128 MiB over-promised (seen in CI under
 * load as an auto batch brisk's own fit check then refused). */
static int64_t address_space_room(int *blas) {
    if (blas) *blas = 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return -1;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[600];
    int64_t used = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long long lo, hi;
        char path[512] = "";
        if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %511s", &lo, &hi, path) < 2) continue;
        used += (int64_t)(hi - lo);
        if (blas && !path[0] && (int64_t)(hi - lo) == BLAS_THREAD_BUFFER) ++*blas;
        if (!strchr(line, '\n')) /* a longer line: skip its rest */
            while (fgets(line, sizeof line, f) && !strchr(line, '\n')) {}
    }
    if (f) fclose(f);
    return (int64_t)rl.rlim_cur > used ? (int64_t)rl.rlim_cur - used : 0;
}

/* blas as in address_space_room, set when the room under ulimit -v decides */
static int64_t memory_available(const brisk_config *cfg, char *source, size_t n, int *blas) {
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
    int mapped;
    room = address_space_room(&mapped);
    if (room >= 0 && room < avail) {
        avail = room;
        snprintf(source, n, "room under the address-space limit, ulimit -v");
        if (blas) *blas = mapped;
    }
    return avail;
}

int64_t brisk_memory_available(const brisk_config *cfg, char *source, size_t n) {
    return memory_available(cfg, source, n, NULL);
}

/* source may go on (", less ... for image decoding"): its first words name the limit */
static int explicit_limit(const char *source) {
    return strncmp(source, "speed.memory_limit", 18) == 0 || strncmp(source, "BRISK_MEMORY_LIMIT", 18) == 0;
}

brisk_status brisk_memory_check_data(const brisk_config *cfg, const char *path, int64_t bytes, brisk_error *err) {
    char source[64];
    int64_t avail = brisk_memory_available(cfg, source, sizeof source);
    if (bytes <= avail) return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: loading this data set needs %.1f MiB, but %.1f MiB are available (%s); "
                        "%s", path, bytes / MIB, avail / MIB, source,
                        explicit_limit(source) ? "raise the limit or use a smaller data set" : "use a smaller data set");
}

static int64_t data_bytes(const brisk_trainer *t) {
    int64_t n = 0;
    for (int i = 0; i < t->data.nfields; i++) n += (int64_t)brisk_tensor_bytes(&t->data.fields[i].tensor);
    return n;
}

/* The device backend's own buffers beyond the plan: the cuBLASLt workspace (32 MiB),
 * scratch, the loss log, 16-bit operand copies of small models; a bound, not exact. */
#define DEVICE_RESERVE ((int64_t)96 << 20)

/* The CUDA convolutions' own buffers (backend/cuda/cudnn_conv.c): the algorithm
 * workspace, at most BRISK_CUDA_CONV_WORKSPACE_LIMIT, and the staging buffer of the
 * operands converted to the layout and type cuDNN runs in, at most one conv node's x, w and
 * y in fp32 (the largest node's). 0 without convolutions. */
int64_t brisk_memory_conv_reserve(const brisk_graph *g) {
    int64_t stage = -1;
    for (int i = 0; g && i < g->n_nodes; i++) {
        const brisk_node *n = &g->nodes[i];
        if (n->op != BRISK_OP_CONV2D && n->op != BRISK_OP_CONV2D_GRAD_X && n->op != BRISK_OP_CONV2D_GRAD_W) continue;
        int64_t e = brisk_shape_numel(&n->shape);
        for (int k = 0; k < n->n_in && k < 2; k++) e += brisk_shape_numel(&g->nodes[n->in[k]].shape);
        if (4 * e > stage) stage = 4 * e;
    }
    return stage < 0 ? 0 : (int64_t)BRISK_CUDA_CONV_WORKSPACE_LIMIT + stage;
}

/* What a run needs on top of the data: the plan plus the trainer's buffers, and tail, the
 * graph validation's last, smaller batch runs through (brisk_eval_tail_bytes), with the
 * activations. On a device (where = 1: device memory, 2: host memory) the batches are split
 * between the two; g (may be NULL) adds its convolutions' buffers on the device. */
static void needed_parts(const brisk_plan *p, const brisk_graph *g, int prefetch, int where, int64_t tail,
                         int64_t parts[4]) {
    int slots = (prefetch > 0 ? prefetch : 1) + 1;
    parts[0] = (int64_t)p->arena_bytes + tail;
    parts[1] = 4 * (int64_t)p->param_bytes + (int64_t)p->const_bytes;
    parts[2] = (int64_t)(slots + 1) * (int64_t)p->input_bytes; /* + the graph's own input area */
    parts[3] = 3 * (int64_t)p->param_bytes;
    if (where == 1) { /* the input area and two staging buffers; the reserve */
        parts[2] = 3 * (int64_t)p->input_bytes;
        parts[3] = DEVICE_RESERVE + brisk_memory_conv_reserve(g);
    } else if (where == 2) { /* batch slots (pinned) and checkpoint staging */
        parts[0] = parts[1] = 0;
        parts[2] = (int64_t)slots * (int64_t)p->input_bytes;
    }
}

static int64_t needed_total(const brisk_plan *p, const brisk_graph *g, int prefetch, int where, int64_t tail) {
    int64_t parts[4];
    needed_parts(p, g, prefetch, where, tail, parts);
    return parts[0] + parts[1] + parts[2] + parts[3];
}

/* The device's free memory when t runs on one (1), else 0 (the CPU: host memory). An
 * explicit speed.memory_limit / BRISK_MEMORY_LIMIT stands for the device's memory then. */
static int device_room(const brisk_trainer *t, int64_t *avail, char *source, size_t n) {
    brisk_backend_stats s;
    brisk_error ignored;
    if (!t->be || !t->be->stats || t->be->stats(t->be, &s, &ignored) || s.mem_total == 0) return 0;
    char src[64];
    int64_t limit = brisk_memory_available(&t->cfg, src, sizeof src);
    if (strcmp(src, "speed.memory_limit") == 0 || strcmp(src, "BRISK_MEMORY_LIMIT") == 0) {
        *avail = limit;
        snprintf(source, n, "%s, for the GPU", src);
    } else {
        *avail = (int64_t)s.mem_free;
        snprintf(source, n, "free on the %s device (of %.1f GiB)", t->be->name, s.mem_total / (MIB * 1024.0));
    }
    return 1;
}

brisk_status brisk_train_plan(const brisk_config *cfg, brisk_graph *g, brisk_plan *plan, brisk_error *err) {
    g->grads_in_place = cfg->train.accumulate == 1;
    return brisk_plan_build(g, plan, err);
}

/* Needed bytes at a batch size (where as in needed_parts) with nval validation samples; -1
 * when the model cannot be built at that size. */
static int64_t needed_at(const brisk_config *cfg, int64_t batch, int where, int64_t nval) {
    brisk_graph *g = brisk_graph_new();
    brisk_plan plan;
    brisk_model_io io;
    brisk_error e;
    int64_t need = -1;
    memset(&plan, 0, sizeof plan);
    if (g && !brisk_model_build(&cfg->model, batch, BRISK_BUILD_TRAIN, g, &io, &e) && !brisk_backward(g, io.loss, &e) &&
        !brisk_train_plan(cfg, g, &plan, &e))
        need = needed_total(&plan, g, cfg->speed.prefetch, where, where == 2 ? 0 : brisk_eval_tail_bytes(cfg, nval, batch));
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    return need;
}

/* The largest batch in [1, hi] whose run fits in `avail` bytes; 0 when none does. */
static int64_t largest_fitting(const brisk_config *cfg, int64_t hi, int64_t avail, int where, int64_t nval) {
    int64_t lo = 0; /* fits (0 stands for "nothing") */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2, need = needed_at(cfg, mid, where, nval);
        if (need >= 0 && need <= avail) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Address space a CPU run maps after the check, beyond the plan, which only an address-space
 * limit sees (reservations whose pages are mostly never touched, so MemAvailable and a cgroup
 * do not): OpenBLAS's GEMM buffer, one per thread that calls it (BUFFER_SIZE, 32 << 22 bytes
 * on x86_64: one 128 MiB mapping per calling thread, measured); and for every thread brisk
 * starts (the pool's workers, the loader's producer when it prefetches, its image decoders)
 * a stack (RLIMIT_STACK, a new thread's default) and the glibc malloc arena its first
 * allocation reserves (64 MiB). Unaccounted, they let a run over the refusal point train and
 * then fail to stage its checkpoint (the loader's arena alone: 64 MiB short, seen with
 * --batch-size auto under ulimit -v, depending on when the producer first allocated). */
#define THREAD_ARENA ((int64_t)64 << 20)

/* OpenBLAS's own threads, started when it loads (its rule: OPENBLAS_NUM_THREADS, else
 * GOTO_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may use; one fewer
 * server threads than that), each mapping its buffer when it first runs: before or after
 * brisk measures the room, as the scheduler decides (measured: 115 or 243 MiB in use at the
 * same point of one run). Counting them, and not counting those already mapped as used,
 * makes the room the same either way. */
static int blas_server_threads(void) {
    if (!BRISK_HAVE_BLAS) return 0;
    const char *vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"};
    long n = 0;
    for (int k = 0; k < 3 && n <= 0; k++) {
        const char *v = getenv(vars[k]);
        n = v ? strtol(v, NULL, 10) : 0;
    }
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0 || n > cpus) n = cpus;
    return n > 1 ? (int)(n - 1) : 0;
}

/* mapped: the BLAS buffers already in the measured room (address_space_room) */
static int64_t thread_address_space(const brisk_trainer *t, int threads, int mapped) {
    struct rlimit rl;
    int64_t stack = getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (int64_t)rl.rlim_cur
                                                                                      : (int64_t)8 << 20;
    /* the buffers of brisk's GEMM-calling threads and of OpenBLAS's own, less those mapped
     * already (the room measured excludes them) */
    int buffers = BRISK_HAVE_BLAS ? threads + blas_server_threads() : 0;
    int64_t blas = (int64_t)(buffers > mapped ? buffers - mapped : 0) * BLAS_THREAD_BUFFER;
    int loader = t->cfg.speed.prefetch > 0, decoders = brisk_loader_workers(&t->cfg);
    int started = threads - 1 + loader + (decoders > 1 ? decoders - 1 : 0);
    /* and 32 MiB of headroom for what the run allocates along the way (log lines, metrics,
     * the checkpoint's names and header) */
    return blas + (int64_t)started * (stack + THREAD_ARENA) + ((int64_t)32 << 20);
}

/* Image decoding's scratch is a fixed cost beside the data: taken off what is available. The
 * node's free memory and its cgroup's room are shared by the ranks of a job on the node (each
 * would otherwise plan for all of it); an explicit limit and ulimit -v are this process's. */
static int64_t available_for_run(brisk_trainer *t, int device, char *source, size_t n) {
    int mapped = 0;
    int64_t avail = memory_available(&t->cfg, source, n, &mapped);
    brisk_thread_plan tp;
    brisk_threads_resolve(t->cfg.speed.threads, "speed.threads", &tp);
    if (!device && strstr(source, "ulimit -v")) {
        int64_t extra = thread_address_space(t, tp.threads, mapped);
        avail = avail > extra ? avail - extra : 0;
        size_t k = strlen(source);
        snprintf(source + k, n - k, ", less %.1f MiB that %d thread%s and the BLAS map", extra / MIB, tp.threads,
                 tp.threads == 1 ? "" : "s");
    }
    if (tp.local_ranks > 1 && !explicit_limit(source) && !strstr(source, "ulimit -v")) {
        avail /= tp.local_ranks;
        size_t k = strlen(source);
        snprintf(source + k, n - k, ", shared by %d ranks on this node", tp.local_ranks);
    }
    if (t->decode_bytes > 0) {
        avail -= t->decode_bytes;
        size_t k = strlen(source);
        snprintf(source + k, n - k, ", less %.1f MiB for image decoding", t->decode_bytes / MIB);
    }
    return avail;
}

static brisk_status check_fit(brisk_trainer *t, int where, int64_t avail, const char *source, brisk_error *err) {
    int64_t parts[4];
    /* the data set lives in host memory; it is counted under an explicit limit */
    int64_t data = where != 1 && explicit_limit(source) ? data_bytes(t) : 0;
    int64_t B = t->cfg.train.batch_size, nval = brisk_trainer_val_count(t);
    needed_parts(&t->plan, t->g, t->cfg.speed.prefetch, where, where == 2 ? 0 : brisk_eval_tail_bytes(&t->cfg, nval, B),
                 parts);
    int64_t need = data + parts[0] + parts[1] + parts[2] + parts[3];
    if (need <= avail) return BRISK_OK;
    int64_t best = largest_fitting(&t->cfg, B - 1, avail - data, where, nval);
    char hint[160];
    if (best > 0)
        snprintf(hint, sizeof hint, "the largest train.batch_size that fits is %" PRId64 " (--batch-size %" PRId64
                 ", or --batch-size auto)", best, best);
    else
        snprintf(hint, sizeof hint, "not even train.batch_size 1 fits: use a smaller model or free memory");
    if (where == 1)
        return brisk_errorf(err, BRISK_ERR_NOMEM,
                            "%s: this run needs %.1f MiB of %s memory at train.batch_size %" PRId64 " (activations "
                            "%.1f, parameters, gradients and optimizer moments %.1f, batches %.1f, the backend's own "
                            "%.1f), but %.1f MiB are available (%s); %s",
                            t->cfg.path, need / MIB, t->be->name, B, parts[0] / MIB, parts[1] / MIB, parts[2] / MIB,
                            parts[3] / MIB, avail / MIB, source, hint);
    return brisk_errorf(err, BRISK_ERR_NOMEM,
                        "%s: this run needs %.1f MiB at train.batch_size %" PRId64 " (data %.1f, activations %.1f, "
                        "parameters, gradients and optimizer moments %.1f, batches %.1f, checkpoint staging %.1f), but "
                        "%.1f MiB are available (%s); %s",
                        t->cfg.path, need / MIB, B, data / MIB, parts[0] / MIB, parts[1] / MIB, parts[2] / MIB,
                        parts[3] / MIB, avail / MIB, source, hint);
}

brisk_status brisk_memory_fit(brisk_trainer *t, brisk_error *err) {
    char source[96], hsource[240];
    int64_t dev_avail;
    int device = device_room(t, &dev_avail, source, sizeof source);
    int64_t host_avail = available_for_run(t, device, hsource, sizeof hsource);
    if (!device) return check_fit(t, 0, host_avail, hsource, err);
    brisk_status st = check_fit(t, 1, dev_avail, source, err);
    return st ? st : check_fit(t, 2, host_avail, hsource, err);
}

brisk_status brisk_memory_auto_batch(brisk_trainer *t, int64_t max_batch, brisk_error *err) {
    char source[240];
    int64_t avail, nval = brisk_trainer_val_count(t);
    int where = device_room(t, &avail, source, sizeof source);
    if (!where) {
        avail = available_for_run(t, 0, source, sizeof source);
        if (explicit_limit(source)) avail -= data_bytes(t);
    }
    /* The room is measured again by the fit check, after the graph and the loader exist (under
     * ulimit -v it shrinks by what they map: a batch that filled it to the byte was then
     * refused by brisk's own check). A margin of 1/32 of the room and 8 MiB keeps the pick
     * clear of that check and of the run's own small allocations. An explicit limit is a
     * budget that does not move: the pick may fill it. */
    int64_t margin = avail > 0 && !explicit_limit(source) ? avail / 32 + ((int64_t)8 << 20) : 0;
    int64_t fit = avail > margin ? largest_fitting(&t->cfg, max_batch, avail - margin, where, nval) : 0;
    if (fit == 0)
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: train.batch_size auto: not even a batch of 1 fits in the %.1f MiB "
                            "available (%s); this run needs %.1f MiB at batch 1", t->cfg.path, avail / MIB, source,
                            needed_at(&t->cfg, 1, where, nval) / MIB);
    t->cfg.train.batch_size = fit;
    char kept[64] = "";
    if (margin) snprintf(kept, sizeof kept, ", keeping %.1f MiB of it free", margin / MIB);
    brisk_log(&t->log, BRISK_LOG_INFO, "batch     auto: %" PRId64 ", the largest that fits in %.1f MiB (%s)%s%s", fit,
              avail / MIB, source, kept, fit == max_batch ? ", capped at the training split's size" : "");
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
