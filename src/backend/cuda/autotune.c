/* GEMM autotuning, the cudnn.benchmark analogue: for each GEMM shape, the first time it
 * runs outside a CUDA-graph capture, time cuBLASLt's top heuristic candidates on the real
 * operands (one warm-up call, then 3 timed calls each, CUDA events on the compute
 * stream) and keep the fastest. The choice is kept in a cache file keyed by GPU (name,
 * compute capability, SM count), library versions (cuBLASLt, CUDA runtime) and shape, as
 * the index into the heuristic's candidate list: for the same key the heuristic returns
 * the same list, so the index names the same algorithm, and the next run starts fast.
 *
 * The file is text, one "key<TAB>index" per line, rewritten whole (temporary file, then
 * rename) when the backend is destroyed; entries of other GPUs are kept. Without
 * autotuning (--no-autotune, --deterministic) the heuristic's first choice is used, and
 * the cache is neither read for the choice nor written. */
#include "backend/cuda/cuda_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TIMED_RUNS 3
#define CACHE_HEADER "# brisk GEMM autotune cache v1: key<TAB>candidate index"

static void default_path(cuda_backend *cb) {
    const char *o = cb->opt.autotune_cache;
    cb->cache_path[0] = 0;
    if (strcmp(o, "-") == 0) return;
    if (o[0]) {
        snprintf(cb->cache_path, sizeof cb->cache_path, "%s", o);
        return;
    }
    brisk_cache_file("gemm-autotune.txt", cb->cache_path, sizeof cb->cache_path);
}

static int cache_add(cuda_backend *cb, const char *key, int index) {
    for (int i = 0; i < cb->n_cache; i++)
        if (strcmp(cb->cache_keys[i], key) == 0) {
            cb->cache_index[i] = index;
            return 0;
        }
    if (cb->n_cache == cb->cap_cache) {
        int cap = cb->cap_cache ? 2 * cb->cap_cache : 64;
        char(*k)[512] = realloc(cb->cache_keys, (size_t)cap * sizeof *k);
        if (!k) return -1;
        cb->cache_keys = k;
        int *ix = realloc(cb->cache_index, (size_t)cap * sizeof *ix);
        if (!ix) return -1;
        cb->cache_index = ix;
        cb->cap_cache = cap;
    }
    snprintf(cb->cache_keys[cb->n_cache], sizeof cb->cache_keys[0], "%s", key);
    cb->cache_index[cb->n_cache++] = index;
    return 0;
}

void cuda_cache_load(cuda_backend *cb) {
    default_path(cb);
    if (!cb->cache_path[0]) return;
    FILE *f = fopen(cb->cache_path, "r");
    if (!f) return;
    char line[700];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        int idx = atoi(tab + 1);
        if (idx >= 0 && strlen(line) < 512) cache_add(cb, line, idx);
    }
    fclose(f);
}

void cuda_cache_save(cuda_backend *cb) {
    if (!cb->cache_dirty || !cb->cache_path[0] || brisk_cache_prepare(cb->cache_path) != 0) return;
    /* keep what other processes saved since we loaded (ours win on the same key) */
    FILE *in = fopen(cb->cache_path, "r");
    if (in) {
        char line[700];
        while (fgets(line, sizeof line, in)) {
            char *tab = strchr(line, '\t');
            if (line[0] == '#' || !tab) continue;
            *tab = 0;
            int known = 0;
            for (int i = 0; i < cb->n_cache && !known; i++) known = strcmp(cb->cache_keys[i], line) == 0;
            if (!known && strlen(line) < 512 && atoi(tab + 1) >= 0) cache_add(cb, line, atoi(tab + 1));
        }
        fclose(in);
    }
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", cb->cache_path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        brisk_log(&cb->opt.log, BRISK_LOG_WARN, "autotune cache %s: cannot write: %s", tmp, strerror(errno));
        return;
    }
    fprintf(f, "%s\n", CACHE_HEADER);
    for (int i = 0; i < cb->n_cache; i++) fprintf(f, "%s\t%d\n", cb->cache_keys[i], cb->cache_index[i]);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, cb->cache_path) != 0) {
        brisk_log(&cb->opt.log, BRISK_LOG_WARN, "autotune cache %s: cannot write: %s", cb->cache_path, strerror(errno));
        remove(tmp);
        return;
    }
    cb->cache_dirty = 0;
}

void cuda_cache_free(cuda_backend *cb) {
    free(cb->cache_keys);
    free(cb->cache_index);
    cb->cache_keys = NULL;
    cb->cache_index = NULL;
    cb->n_cache = cb->cap_cache = 0;
}

/* The candidate's time in ms over TIMED_RUNS calls in *ms, or -1 when cuBLASLt refuses it
 * (a cublasStatus: that candidate is skipped). A CUDA error (an event call failing, a fault
 * surfacing at the synchronisation) is a real error and is returned, never cleared. */
static brisk_status time_candidate(cuda_backend *cb, const cublasLtMatmulAlgo_t *algo,
                                   int (*run)(void *, const cublasLtMatmulAlgo_t *), void *ctx, cudaEvent_t a,
                                   cudaEvent_t b, float *ms, brisk_error *err) {
    *ms = -1.0f;
    if (run(ctx, algo)) return BRISK_OK;
    CU(cudaEventRecord(a, cb->compute), "autotune timer");
    for (int r = 0; r < TIMED_RUNS; r++)
        if (run(ctx, algo)) return BRISK_OK;
    CU(cudaEventRecord(b, cb->compute), "autotune timer");
    CU(cudaEventSynchronize(b), "autotune: timing a GEMM candidate");
    CU(cudaEventElapsedTime(ms, a, b), "autotune timer");
    return BRISK_OK;
}

brisk_status cuda_autotune(cuda_backend *cb, const char *key, const cublasLtMatmulHeuristicResult_t *res, int n,
                           int (*run)(void *ctx, const cublasLtMatmulAlgo_t *algo), void *ctx, int *choice,
                           brisk_error *err) {
    *choice = 0;
    if (!cb->opt.autotune || n <= 1) return BRISK_OK;
    char full[512];
    snprintf(full, sizeof full, "%s|cc%d.%d|sm%d|lt%zu|rt%d|%s", cb->name, cb->cc_major, cb->cc_minor, cb->sms,
             cb->lt_version, cb->runtime_version, key);
    for (int i = 0; i < cb->n_cache; i++)
        if (strcmp(cb->cache_keys[i], full) == 0 && cb->cache_index[i] < n) {
            *choice = cb->cache_index[i];
            cb->from_cache++;
            return BRISK_OK;
        }
    if (cb->capturing) return BRISK_OK; /* no timing inside a capture: the heuristic's choice */
    /* an error from earlier work is reported as such, not blamed on (or hidden by) a candidate */
    CU(cudaPeekAtLastError(), "a CUDA error pending before GEMM autotuning");
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a), "autotune timer");
    if (cudaEventCreate(&b) != cudaSuccess) {
        cudaEventDestroy(a);
        return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: cudaEventCreate failed (autotune timer)");
    }
    float best = -1.0f;
    brisk_status st = BRISK_OK;
    for (int i = 0; i < n && !st; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > CUDA_WORKSPACE_BYTES) continue;
        float ms;
        st = time_candidate(cb, &res[i].algo, run, ctx, a, b, &ms, err);
        if (!st && ms >= 0.0f && (best < 0.0f || ms < best)) best = ms, *choice = i;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (st) {
        *choice = 0;
        return brisk_error_prefix(err, "autotune %s", key);
    }
    if (best < 0.0f) {
        *choice = 0;
        return BRISK_OK;
    }
    cb->autotuned++;
    if (cache_add(cb, full, *choice) == 0) cb->cache_dirty = 1;
    brisk_log(&cb->opt.log, BRISK_LOG_DEBUG, "autotune  %s: candidate %d of %d, %.1f us", key, *choice, n,
              1e3f * best / TIMED_RUNS);
    return BRISK_OK;
}
