/* The choice of a convolution plan's algorithm and layout (cudnn_conv.c's file comment says
 * the rules): cuDNN's candidates, timed (cudnnFind*AlgorithmEx) or in the heuristic's order,
 * each kept only after a trial launch on scratch operands that cuDNN accepts; the algorithm
 * cache (conv_algo_cache.h); and, for speed.conv_layout auto, both layouts timed with their
 * conversions. */
#include "backend/cuda/cudnn_conv_internal.h"

#if BRISK_HAVE_CUDNN_H
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The three passes' perf results, which share a layout but not a type. */
typedef struct conv_perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
} conv_perf;
#define PERF_MAX 16

/* conv_algo_atomic's numbers are cuDNN's */
_Static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 == 0 && CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 == 0 &&
                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 == 3,
               "cuDNN's non-deterministic convolution algorithms moved: update conv_algo_atomic");

/* The first result from index `from` on (fastest first, or the heuristic's order) that
 * conv_algo_usable accepts; -1 when none. */
static int pick(const conv_perf *r, int n, int from, conv_pass pass, int deterministic, size_t limit) {
    for (int i = from < 0 ? 0 : from; i < n; i++)
        if (conv_algo_usable(pass, r[i].algo, r[i].status == CUDNN_STATUS_SUCCESS, r[i].memory,
                             r[i].determinism == CUDNN_DETERMINISTIC, deterministic, limit))
            return i;
    return -1;
}

#define COPY_PERF(src, n, dst)                                                                   \
    for (int i_ = 0; i_ < (n); i_++)                                                             \
        (dst)[i_] = (conv_perf){.algo = (int)(src)[i_].algo, .status = (src)[i_].status,         \
                                .time = (src)[i_].time, .memory = (src)[i_].memory,              \
                                .determinism = (src)[i_].determinism}

/* x, w, y in cuDNN's form (the plan's layout and type), zeroed: the operands of timing and
 * of trial launches. */
typedef struct conv_scratch {
    void *buf[3];
} conv_scratch;

static void scratch_free(conv_scratch *sc) {
    for (int k = 0; k < 3; k++) cudaFree(sc->buf[k]);
    memset(sc, 0, sizeof *sc);
}

static brisk_status scratch_make(const conv_plan *p, conv_scratch *sc, const char *what, brisk_error *err) {
    memset(sc, 0, sizeof *sc);
    for (int k = 0; k < 3; k++) {
        size_t bytes = (size_t)numel4(role_dims(&p->geom, k)) * (p->dt ? 2 : 4);
        cudaError_t e = cudaMalloc(&sc->buf[k], bytes ? bytes : 4);
        if (e == cudaSuccess) e = cudaMemset(sc->buf[k], 0, bytes ? bytes : 4);
        if (e != cudaSuccess) {
            scratch_free(sc);
            return cuda_fail(err, e, "cudaMalloc (convolution scratch operands)", what);
        }
    }
    return BRISK_OK;
}

/* cuDNN's candidates for the plan's pass: timed on the scratch operands, or its heuristic's list. */
static brisk_status candidates(cuda_backend *cb, conv_plan *p, int timed, const conv_scratch *sc, conv_perf *out,
                               int *n_out, const char *what, brisk_error *err) {
    cudnnHandle_t h = cb->conv->handle;
    conv_descs *d = &p->d;
    void *const *buf = sc ? sc->buf : NULL;
    int n = 0;
    void *ws = NULL;
    brisk_status st = BRISK_OK;
    *n_out = 0;
    if (timed && !buf) return brisk_errorf(err, BRISK_ERR_INTERNAL, "%s: timing without scratch operands", what);
    if (timed) {
        /* the largest workspace that can be had up to the limit, halving on failure */
        size_t ws_bytes = CONV_WORKSPACE_LIMIT;
        while (ws_bytes && cudaMalloc(&ws, ws_bytes) != cudaSuccess) ws_bytes /= 2, cudaGetLastError();
        if (!ws) ws_bytes = 0;
        cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
        if (p->geom.pass == CONV_PASS_FWD) {
            cudnnConvolutionFwdAlgoPerf_t r[PERF_MAX];
            s = cuda_dnn.cudnnFindConvolutionForwardAlgorithmEx(h, d->xd, buf[0], d->wd, buf[1], d->cd, d->yd, buf[2],
                                                                PERF_MAX, &n, r, ws, ws_bytes);
            COPY_PERF(r, n, out);
        } else if (p->geom.pass == CONV_PASS_BWD_DATA) {
            cudnnConvolutionBwdDataAlgoPerf_t r[PERF_MAX];
            s = cuda_dnn.cudnnFindConvolutionBackwardDataAlgorithmEx(h, d->wd, buf[1], d->yd, buf[2], d->cd, d->xd,
                                                                     buf[0], PERF_MAX, &n, r, ws, ws_bytes);
            COPY_PERF(r, n, out);
        } else {
            cudnnConvolutionBwdFilterAlgoPerf_t r[PERF_MAX];
            s = cuda_dnn.cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d->xd, buf[0], d->yd, buf[2], d->cd, d->wd,
                                                                       buf[1], PERF_MAX, &n, r, ws, ws_bytes);
            COPY_PERF(r, n, out);
        }
        if (s != CUDNN_STATUS_SUCCESS) st = cuda_dnn_fail(err, s, "cudnnFind*AlgorithmEx", what);
        cudaFree(ws);
    } else if (p->geom.pass == CONV_PASS_FWD) {
        cudnnConvolutionFwdAlgoPerf_t r[PERF_MAX];
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(h, d->xd, d->wd, d->cd, d->yd, PERF_MAX, &n, r), what);
        COPY_PERF(r, n, out);
    } else if (p->geom.pass == CONV_PASS_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t r[PERF_MAX];
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->wd, d->yd, d->cd, d->xd, PERF_MAX, &n, r), what);
        COPY_PERF(r, n, out);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t r[PERF_MAX];
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->xd, d->yd, d->cd, d->wd, PERF_MAX, &n, r), what);
        COPY_PERF(r, n, out);
    }
    *n_out = st ? 0 : n;
    return st;
}

/* The workspace algo needs for the plan's descriptors, as cuDNN's status. */
static cudnnStatus_t algo_workspace(cuda_backend *cb, conv_plan *p, int algo, size_t *bytes) {
    cudnnHandle_t h = cb->conv->handle;
    conv_descs *d = &p->d;
    *bytes = 0;
    if (p->geom.pass == CONV_PASS_FWD)
        return cuda_dnn.cudnnGetConvolutionForwardWorkspaceSize(h, d->xd, d->wd, d->cd, d->yd,
                                                                (cudnnConvolutionFwdAlgo_t)algo, bytes);
    if (p->geom.pass == CONV_PASS_BWD_DATA)
        return cuda_dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->wd, d->yd, d->cd, d->xd,
                                                                     (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cuda_dnn.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->xd, d->yd, d->cd, d->wd,
                                                                   (cudnnConvolutionBwdFilterAlgo_t)algo, bytes);
}

const char *conv_pass_call(conv_pass p) {
    return p == CONV_PASS_FWD ? "cudnnConvolutionForward" : p == CONV_PASS_BWD_DATA ? "cudnnConvolutionBackwardData"
                                                                                   : "cudnnConvolutionBackwardFilter";
}

/* One launch of the plan's pass with algo on operands dn (x, w, y in cuDNN's form): the
 * step's launch and the trial launch at plan time are this one call. */
cudnnStatus_t conv_launch(cuda_backend *cb, const conv_plan *p, int algo, void *const dn[3], void *ws,
                          size_t ws_bytes) {
    cudnnHandle_t h = cb->conv->handle;
    const conv_descs *d = &p->d;
    const float one = 1.0f, zero = 0.0f;
    if (p->geom.pass == CONV_PASS_FWD)
        return cuda_dnn.cudnnConvolutionForward(h, &one, d->xd, dn[0], d->wd, dn[1], d->cd,
                                                (cudnnConvolutionFwdAlgo_t)algo, ws, ws_bytes, &zero, d->yd, dn[2]);
    if (p->geom.pass == CONV_PASS_BWD_DATA)
        return cuda_dnn.cudnnConvolutionBackwardData(h, &one, d->wd, dn[1], d->yd, dn[2], d->cd,
                                                     (cudnnConvolutionBwdDataAlgo_t)algo, ws, ws_bytes, &zero, d->xd,
                                                     dn[0]);
    return cuda_dnn.cudnnConvolutionBackwardFilter(h, &one, d->xd, dn[0], d->yd, dn[2], d->cd,
                                                   (cudnnConvolutionBwdFilterAlgo_t)algo, ws, ws_bytes, &zero, d->wd,
                                                   dn[1]);
}

/* Whether algo runs for the plan's exact descriptors: its workspace as cuDNN computes it
 * (never below what the perf result listed), within the limit, and one trial launch on the
 * scratch operands that cuDNN accepts. cuDNN's heuristic (cudnnGet*Algorithm_v7) can list
 * as supported an algorithm that the launch then refuses: on the first GPU run (H200, cuDNN
 * 9), fp16 depthwise backward data in NHWC failed with CUDNN_STATUS_BAD_PARAM at every step.
 * Plans are made before any capture, so the trial never lands in a CUDA graph. *ok is 0 and
 * why says what cuDNN answered when it does not run; errors are only CUDA's own. */
static brisk_status try_algo(cuda_backend *cb, conv_plan *p, const conv_scratch *sc, int algo, size_t listed,
                             size_t *ws_bytes, int *ok, char *why, size_t why_size, const char *what,
                             brisk_error *err) {
    *ok = 0;
    size_t need = 0;
    cudnnStatus_t s = algo_workspace(cb, p, algo, &need);
    if (s != CUDNN_STATUS_SUCCESS) {
        snprintf(why, why_size, "workspace query: %s", cuda_dnn.cudnnGetErrorString(s));
        return BRISK_OK;
    }
    if (need < listed) need = listed;
    if (need > CONV_WORKSPACE_LIMIT) {
        snprintf(why, why_size, "needs %zu MiB of workspace", need >> 20);
        return BRISK_OK;
    }
    void *ws = NULL;
    if (need && cudaMalloc(&ws, need) != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, why_size, "its %zu bytes of workspace could not be allocated", need);
        return BRISK_OK;
    }
    s = conv_launch(cb, p, algo, sc->buf, ws, need);
    cudaError_t e = cudaStreamSynchronize(cb->compute);
    cudaFree(ws);
    if (e != cudaSuccess) return cuda_fail(err, e, "a trial launch of a cuDNN convolution algorithm", what);
    if (s != CUDNN_STATUS_SUCCESS) {
        snprintf(why, why_size, "%s: %s", conv_pass_call(p->geom.pass), cuda_dnn.cudnnGetErrorString(s));
        return BRISK_OK;
    }
    *ws_bytes = need;
    *ok = 1;
    return BRISK_OK;
}

static void cache_open(cuda_backend *cb) {
    struct cuda_conv *c = cb->conv;
    if (c->cache_state) return;
    conv_cache_path_beside(cb->cache_path, c->cache.path, sizeof c->cache.path);
    brisk_error e = {0};
    if (conv_cache_load(&c->cache, &e)) {
        brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s; convolutions are timed again and the file is left as it is",
                  e.msg);
        c->cache.path[0] = 0;
        c->cache_state = -1;
        return;
    }
    c->cache_state = 1;
}

/* The plan's cache key fields: its shape, the math and layout it runs in now, and determinism. */
static conv_algo_shape algo_shape(const cuda_backend *cb, const conv_plan *p) {
    conv_algo_shape s = {.pass = p->geom.pass, .n = p->geom.x[0], .c = p->geom.x[1], .h = p->geom.x[2],
                         .w = p->geom.x[3], .co = p->geom.w[0], .win = p->geom.win,
                         .math = conv_math_of_form(p->dt, p->math == CUDNN_FMA_MATH),
                         .nhwc = p->nhwc ? CONV_KEY_NHWC : CONV_KEY_NCHW,
                         .deterministic = cb->opt.deterministic};
    s.win.layout = 0; /* the key's layout field says it */
    return s;
}

static const char *pass_label(conv_pass p) {
    return p == CONV_PASS_FWD ? "forward" : p == CONV_PASS_BWD_DATA ? "backward data" : "backward filter";
}

/* Appends "algorithm A (why)" to the list of refusals in `tried`. */
static void note_refusal(char *tried, size_t size, int algo, const char *why) {
    size_t len = strlen(tried);
    if (len + 1 < size)
        snprintf(tried + len, size - len, "%salgorithm %d (%s)", len ? ", " : "", algo, why);
}

/* Chooses the plan's algorithm and its workspace (see the file comment) among those that
 * run for its descriptors (try_algo), in order: the cached one, then cuDNN's (timed
 * fastest first, or the heuristic's order). BRISK_ERR_UNSUPPORTED, naming each refusal,
 * when none runs in the plan's layout and type. */
brisk_status conv_choose_algo(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err) {
    struct cuda_conv *c = cb->conv;
    /* --deterministic turns autotuning off (backend.c: no choice may depend on timing), so
     * there the heuristic's order decides, among deterministic algorithms only */
    int det = cb->opt.deterministic, timed = cb->opt.autotune;
    conv_algo_device dev = {.gpu_name = cb->name, .cc_major = cb->cc_major, .cc_minor = cb->cc_minor, .sms = cb->sms,
                            .cudnn_version = cuda_dnn.cudnnGetVersion()};
    conv_algo_shape s = algo_shape(cb, p);
    char key[CONV_CACHE_KEY_MAX];
    brisk_status st = conv_cache_key(&dev, &s, key, sizeof key, err);
    if (st) return st;
    conv_scratch sc;
    if ((st = scratch_make(p, &sc, what, err))) return st;
    const char *source = timed ? "timed" : "heuristic";
    char tried[400] = "", why[120];
    int algo = -1, ok = 0, from_cache = 0, refused_cached = -1;
    size_t ws = 0;
    if (timed) {
        cache_open(cb);
        int cached = conv_cache_get(&c->cache, key);
        if (cached >= 0 && conv_algo_usable(p->geom.pass, cached, 1, 0, 1, det, CONV_WORKSPACE_LIMIT)) {
            st = try_algo(cb, p, &sc, cached, 0, &ws, &ok, why, sizeof why, what, err);
            if (!st && ok) algo = cached, from_cache = 1, source = "from the cache";
            else if (!st) note_refusal(tried, sizeof tried, cached, why), refused_cached = cached;
        }
    }
    conv_perf r[PERF_MAX];
    int n = 0;
    if (!st && algo < 0) st = candidates(cb, p, timed, &sc, r, &n, what, err);
    for (int i = 0; !st && algo < 0 && (i = pick(r, n, i, p->geom.pass, det, CONV_WORKSPACE_LIMIT)) >= 0; i++) {
        if (r[i].algo == refused_cached) continue;
        st = try_algo(cb, p, &sc, r[i].algo, r[i].memory, &ws, &ok, why, sizeof why, what, err);
        if (!st && ok) algo = r[i].algo;
        else if (!st) note_refusal(tried, sizeof tried, r[i].algo, why);
    }
    scratch_free(&sc);
    if (st) return st;
    if (algo < 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: cuDNN offers no %s%s algorithm that runs in %s %s within "
                            "%zu MiB of workspace%s%s%s", what, det ? "deterministic " : "", pass_label(p->geom.pass),
                            p->nhwc ? "NHWC" : "NCHW", conv_dt_name(p->dt), CONV_WORKSPACE_LIMIT >> 20,
                            tried[0] ? " (refused: " : "", tried, tried[0] ? ")" : "");
    if (tried[0])
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s %s: cuDNN listed but refused %s", what,
                  pass_label(p->geom.pass), tried);
    if (timed && !from_cache) {
        brisk_error e = {0};
        if (c->cache_state == 1 && conv_cache_put(&c->cache, key, algo, &e))
            brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s", e.msg);
    }
    p->algo = algo;
    p->ws_bytes = ws;
    brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s %s: cuDNN algorithm %d in %s %s, %zu bytes of workspace (%s)",
              what, pass_label(p->geom.pass), algo, p->nhwc ? "NHWC" : "NCHW", conv_dt_name(p->dt), p->ws_bytes, source);
    return BRISK_OK;
}

/* The fastest usable algorithm's time in the plan's current layout (-1: none; an error of
 * cuDNN's for that layout counts as none), cached under that layout's key as conv_choose_algo()
 * would; and what that layout's conversions cost. */
static brisk_status time_layout(cuda_backend *cb, conv_plan *p, double *conv_ms, double *convert_ms,
                                const char *what, brisk_error *err) {
    struct cuda_conv *c = cb->conv;
    *conv_ms = -1, *convert_ms = 0;
    conv_stage_layout(p);
    brisk_error e = {0};
    conv_perf r[PERF_MAX];
    conv_scratch sc = {{NULL, NULL, NULL}};
    int n = 0, i = -1;
    if (!scratch_make(p, &sc, what, &e) && !conv_descs_make(&p->geom, p->math, p->nhwc, p->dt, &p->d, what, &e) &&
        !candidates(cb, p, 1, &sc, r, &n, what, &e))
        i = pick(r, n, 0, p->geom.pass, cb->opt.deterministic, CONV_WORKSPACE_LIMIT);
    conv_descs_free(&p->d);
    scratch_free(&sc);
    if (i < 0) {
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s: no usable cuDNN algorithm in %s %s%s%s", what,
                  p->nhwc ? "NHWC" : "NCHW", conv_dt_name(p->dt), e.msg[0] ? ": " : "", e.msg);
        return BRISK_OK;
    }
    *conv_ms = r[i].time;
    char key[CONV_CACHE_KEY_MAX];
    conv_algo_shape s = algo_shape(cb, p);
    if (c->cache_state == 1 && !conv_cache_key(&(conv_algo_device){.gpu_name = cb->name, .cc_major = cb->cc_major,
                                                                    .cc_minor = cb->cc_minor, .sms = cb->sms,
                                                                    .cudnn_version = cuda_dnn.cudnnGetVersion()},
                                               &s, key, sizeof key, &e) &&
        conv_cache_put(&c->cache, key, r[i].algo, &e))
        brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s", e.msg);
    return conv_time_conversions(cb, p, convert_ms, what, err);
}

/* Sets p->nhwc (conv_layout.h): speed.conv_layout, the rule, the cache, or both layouts
 * timed; logs the choice. */
brisk_status conv_choose_layout(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err) {
    struct cuda_conv *c = cb->conv;
    brisk_conv_layout mode = cb->opt.conv_layout;
    char why[96];
    int data = p->geom.data_nhwc;
    /* timing only decides AUTO, and never under --deterministic (no choice may depend on it) */
    if (mode != BRISK_CONV_LAYOUT_AUTO || !cb->opt.autotune || cb->opt.deterministic) {
        p->nhwc = conv_layout_rule(mode, p->dt, data, p->geom.x[1], p->geom.w[0], why, sizeof why);
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s runs in %s %s (%s)", what, p->nhwc ? "NHWC" : "NCHW",
                  conv_dt_name(p->dt), why);
        return BRISK_OK;
    }
    conv_algo_device dev = {.gpu_name = cb->name, .cc_major = cb->cc_major, .cc_minor = cb->cc_minor, .sms = cb->sms,
                            .cudnn_version = cuda_dnn.cudnnGetVersion()};
    conv_algo_shape s = algo_shape(cb, p);
    char key[CONV_CACHE_KEY_MAX];
    brisk_status st = conv_cache_layout_key(&dev, &s, data, key, sizeof key, err);
    if (st) return st;
    cache_open(cb);
    int cached = conv_cache_get(&c->cache, key), narrow = p->req_dt != 0;
    if (cached == 0 || cached == 1 || (narrow && (cached == 2 || cached == 3))) {
        p->nhwc = cached & 1;
        if (cached >= 2) p->dt = 0, p->math = CUDNN_DEFAULT_MATH;
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s runs in %s %s%s (timed before: from the cache)", what,
                  p->nhwc ? "NHWC" : "NCHW", conv_dt_name(p->dt), cached >= 2 ? " with TF32 math" : "");
        return BRISK_OK;
    }
    conv_layout_costs costs, wide;
    for (int l = 0; l < 2; l++) {
        p->nhwc = l;
        if ((st = time_layout(cb, p, &costs.conv_ms[l], &costs.convert_ms[l], what, err))) return st;
    }
    int l = conv_layout_pick(mode, &costs, data, why, sizeof why), w = 0;
    if (narrow) {
        /* the same in fp32 with TF32 math: kept only where strictly faster (conv_layout.h) */
        char why_wide[96];
        p->dt = 0, p->math = CUDNN_DEFAULT_MATH;
        for (int k = 0; k < 2; k++) {
            p->nhwc = k;
            if ((st = time_layout(cb, p, &wide.conv_ms[k], &wide.convert_ms[k], what, err))) return st;
        }
        int lw = conv_layout_pick(mode, &wide, data, why_wide, sizeof why_wide);
        w = conv_precision_pick(l < 0 ? -1 : costs.conv_ms[l] + costs.convert_ms[l],
                                lw < 0 ? -1 : wide.conv_ms[lw] + wide.convert_ms[lw]);
        if (w) l = lw, snprintf(why, sizeof why, "%s, TF32 faster than %s", why_wide, conv_dt_name(p->req_dt));
        else p->dt = p->req_dt, p->math = p->req_math;
    }
    if (l < 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: cuDNN offers no %s algorithm in NCHW or NHWC (%s) "
                            "within %zu MiB of workspace", what, pass_label(p->geom.pass), conv_dt_name(p->req_dt),
                            CONV_WORKSPACE_LIMIT >> 20);
    p->nhwc = l;
    brisk_error e = {0};
    if (c->cache_state == 1 && conv_cache_put(&c->cache, key, l + 2 * w, &e))
        brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s", e.msg);
    const conv_layout_costs *k = w ? &wide : &costs;
    brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s runs in %s %s (%s: NCHW %.3f + %.3f ms, NHWC %.3f + %.3f ms of "
              "convolution + conversions; the graph is %s)", what, l ? "NHWC" : "NCHW", conv_dt_name(p->dt), why,
              k->conv_ms[0], k->convert_ms[0], k->conv_ms[1], k->convert_ms[1], data ? "NHWC" : "NCHW");
    return BRISK_OK;
}

#endif /* BRISK_HAVE_CUDNN_H */
