/* CONV2D, CONV2D_GRAD_X and CONV2D_GRAD_W (src/ops/conv.c) through cuDNN's convolution API:
 * forward, backward data and backward filter, with stride, padding, dilation and groups.
 * cuDNN is the process-wide load of cudnn_load.c; without it these ops are refused at setup
 * (cuda_conv_missing) as the LSTM is.
 *
 * Plans: per conv node, made at prepare (or at a graph's first eager run), never while
 * capturing: the descriptors and the algorithm. Choosing it is PyTorch's benchmark mode:
 * with autotuning on, every algorithm cuDNN offers is timed once per shape by
 * cudnnFind*AlgorithmEx on scratch operands, and the fastest one that fits the workspace
 * bound (and, under --deterministic, is deterministic) is kept in the algorithm cache
 * (conv_algo_cache.h) beside the GEMM autotune cache, keyed by GPU, cuDNN version and
 * shape, so the next run reads it instead of timing. With autotuning off, cuDNN's heuristic
 * (cudnnGet*Algorithm_v7) chooses under the same rules. Each choice is logged (INFO):
 * node, pass, algorithm, workspace, and whether it was timed, cached or heuristic.
 *
 * Workspace: one buffer shared by every conv node (they run one at a time on the compute
 * stream), sized at prepare to the largest chosen algorithm's need and never above
 * CONV_WORKSPACE_LIMIT; a step allocates nothing, so it can be captured.
 *
 * Precision: the ops are fp32 (their dtype rule), so the data cuDNN sees are fp32 in every
 * mode. fp32: CUDNN_FMA_MATH (no tensor cores). tf32, bf16, fp16: CUDNN_DEFAULT_MATH, whose
 * fp32 convolutions may use TF32 tensor cores, accumulating in fp32. 16-bit convolution
 * data (bf16/fp16 copies of x and w, NHWC) is not done. Layout: NCHW, the ops' layout. */
#include "backend/cuda/cuda_internal.h"

#include "backend/cuda/conv_algo_cache.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])

/* The most workspace a convolution algorithm may use: larger ones are passed over. */
#define CONV_WORKSPACE_LIMIT ((size_t)256 << 20)

/* x [N, C, H, W], w [Co, C/groups, kh, kw], y [N, Co, Ho, Wo] of a conv node, whichever pass. */
typedef struct conv_geom {
    int x[4], w[4], y[4];
    brisk_window win;
    conv_pass pass;
} conv_geom;

static int64_t out_dim(int64_t in, int k, int stride, int pad, int dil) {
    int64_t span = in + 2 * (int64_t)pad - (int64_t)dil * (k - 1) - 1;
    return span < 0 ? -1 : span / stride + 1;
}

/* The node's shapes as a convolution, checked as the op's shape rule makes them. */
static brisk_status conv_geom_of(const brisk_graph *g, int id, conv_geom *cg, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    memset(cg, 0, sizeof *cg);
    if (n->n_in != 2)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): %d inputs (expected 2)", brisk_op_name(n->op), id,
                            n->n_in);
    const brisk_shape *x, *w, *y;
    switch (n->op) {
    case BRISK_OP_CONV2D: x = &IN_NODE(g, id, 0)->shape, w = &IN_NODE(g, id, 1)->shape, y = &n->shape;
        cg->pass = CONV_PASS_FWD; break;
    case BRISK_OP_CONV2D_GRAD_X: y = &IN_NODE(g, id, 0)->shape, w = &IN_NODE(g, id, 1)->shape, x = &n->shape;
        cg->pass = CONV_PASS_BWD_DATA; break;
    case BRISK_OP_CONV2D_GRAD_W: y = &IN_NODE(g, id, 0)->shape, x = &IN_NODE(g, id, 1)->shape, w = &n->shape;
        cg->pass = CONV_PASS_BWD_FILTER; break;
    default: return brisk_errorf(err, BRISK_ERR_INVALID, "node %d is not a convolution", id);
    }
    if (n->attr.win.layout != BRISK_LAYOUT_NCHW)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s (node %d): NHWC convolution on CUDA is not implemented",
                            brisk_op_name(n->op), id);
    const brisk_shape *s[3] = {x, w, y};
    int *d[3] = {cg->x, cg->w, cg->y};
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++) {
        ok = s[k]->ndim == 4;
        for (int i = 0; i < 4 && ok; i++) {
            ok = s[k]->d[i] >= 0 && s[k]->d[i] <= INT_MAX;
            d[k][i] = (int)s[k]->d[i];
        }
    }
    cg->win = n->attr.win;
    const brisk_window *v = &cg->win;
    ok = ok && v->groups >= 1 && v->kh == cg->w[2] && v->kw == cg->w[3] && cg->x[0] == cg->y[0] &&
         cg->w[0] == cg->y[1] && (int64_t)cg->w[1] * v->groups == cg->x[1] && cg->w[0] % v->groups == 0 &&
         out_dim(cg->x[2], v->kh, v->sh, v->ph, v->dh) == cg->y[2] &&
         out_dim(cg->x[3], v->kw, v->sw, v->pw, v->dw) == cg->y[3];
    if (!ok)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s (node %d): shapes do not fit a convolution (x [N, C, H, W], "
                            "w [Co, C/groups, kh, kw], y [N, Co, Ho, Wo], each dim at most %d)",
                            brisk_op_name(n->op), id, INT_MAX);
    return BRISK_OK;
}

static int64_t numel4(const int d[4]) { return (int64_t)d[0] * d[1] * d[2] * d[3]; }

#if BRISK_HAVE_CUDNN_H

#include "backend/cuda/cudnn_load.h"

#include <pthread.h>

static char conv_why[300];
static pthread_once_t conv_once = PTHREAD_ONCE_INIT;
static void conv_why_init(void) {
    const char *m = cuda_dnn_missing(CUDA_DNN_CNN);
    if (m) snprintf(conv_why, sizeof conv_why, "convolution on CUDA needs %s", m);
}

const char *cuda_conv_missing(void) {
    pthread_once(&conv_once, conv_why_init);
    return conv_why[0] ? conv_why : NULL;
}

typedef struct conv_descs {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
} conv_descs;

typedef struct conv_plan {
    const brisk_graph *g;
    int node;
    conv_geom geom;
    int math;
    conv_descs d;
    int algo;
    size_t ws_bytes;
} conv_plan;

struct cuda_conv {
    cudnnHandle_t handle;
    conv_plan *plans;
    int n, cap;
    void *work;               /* shared by every conv node */
    size_t work_bytes;
    conv_algo_cache cache;
    int cache_state;          /* 0 not read yet, 1 read, -1 refused (neither used nor written) */
};

static int math_type(brisk_gemm_precision precision) {
    return precision == BRISK_GEMM_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

static void descs_free(conv_descs *d) {
    if (d->xd) cuda_dnn.cudnnDestroyTensorDescriptor(d->xd);
    if (d->yd) cuda_dnn.cudnnDestroyTensorDescriptor(d->yd);
    if (d->wd) cuda_dnn.cudnnDestroyFilterDescriptor(d->wd);
    if (d->cd) cuda_dnn.cudnnDestroyConvolutionDescriptor(d->cd);
    memset(d, 0, sizeof *d);
}

static brisk_status descs_make(const conv_geom *cg, int math, conv_descs *d, const char *what, brisk_error *err) {
    memset(d, 0, sizeof *d);
    const brisk_window *v = &cg->win;
    DNN(cudnnCreateTensorDescriptor(&d->xd), what);
    DNN(cudnnCreateTensorDescriptor(&d->yd), what);
    DNN(cudnnCreateFilterDescriptor(&d->wd), what);
    DNN(cudnnCreateConvolutionDescriptor(&d->cd), what);
    DNN(cudnnSetTensor4dDescriptor(d->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cg->x[0], cg->x[1], cg->x[2],
                                   cg->x[3]), what);
    DNN(cudnnSetTensor4dDescriptor(d->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cg->y[0], cg->y[1], cg->y[2],
                                   cg->y[3]), what);
    DNN(cudnnSetFilter4dDescriptor(d->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cg->w[0], cg->w[1], cg->w[2], cg->w[3]),
        what);
    DNN(cudnnSetConvolution2dDescriptor(d->cd, v->ph, v->pw, v->sh, v->sw, v->dh, v->dw, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT), what);
    DNN(cudnnSetConvolutionGroupCount(d->cd, v->groups), what);
    DNN(cudnnSetConvolutionMathType(d->cd, (cudnnMathType_t)math), what);
    return BRISK_OK;
}

brisk_status cuda_conv_check_descs(brisk_gemm_precision precision, int64_t n, int64_t c, int64_t h, int64_t w,
                                   int64_t co, brisk_window win, brisk_error *err) {
    const char *why = cuda_conv_missing();
    if (why) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", why);
    conv_geom cg = {.x = {(int)n, (int)c, (int)h, (int)w}, .w = {(int)co, (int)(c / win.groups), win.kh, win.kw},
                    .win = win};
    cg.y[0] = (int)n, cg.y[1] = (int)co;
    cg.y[2] = (int)out_dim(h, win.kh, win.sh, win.ph, win.dh), cg.y[3] = (int)out_dim(w, win.kw, win.sw, win.pw, win.dw);
    conv_descs d;
    brisk_status st = descs_make(&cg, math_type(precision), &d, "conv descriptors", err);
    descs_free(&d);
    return st;
}

/* The three passes' perf results, which share a layout but not a type. */
typedef struct conv_perf {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
} conv_perf;
#define PERF_MAX 16

/* The first (fastest, or the heuristic's first) result that ran, fits the limit and is
 * deterministic where asked; -1 when none. */
static int pick(const conv_perf *r, int n, int deterministic, size_t limit) {
    for (int i = 0; i < n; i++)
        if (r[i].status == CUDNN_STATUS_SUCCESS && r[i].memory <= limit &&
            (!deterministic || r[i].determinism == CUDNN_DETERMINISTIC))
            return i;
    return -1;
}

#define COPY_PERF(src, n, dst)                                                                   \
    for (int i_ = 0; i_ < (n); i_++)                                                             \
        (dst)[i_] = (conv_perf){.algo = (int)(src)[i_].algo, .status = (src)[i_].status,         \
                                .memory = (src)[i_].memory, .determinism = (src)[i_].determinism}

/* cuDNN's candidates for the plan's pass: timed on scratch operands, or its heuristic's list. */
static brisk_status candidates(cuda_backend *cb, conv_plan *p, int timed, conv_perf *out, int *n_out,
                               const char *what, brisk_error *err) {
    cudnnHandle_t h = cb->conv->handle;
    conv_descs *d = &p->d;
    int n = 0;
    void *buf[3] = {NULL, NULL, NULL}, *ws = NULL;
    brisk_status st = BRISK_OK;
    if (timed) {
        const int *dims[3] = {p->geom.x, p->geom.w, p->geom.y};
        for (int k = 0; k < 3 && !st; k++) {
            size_t bytes = (size_t)numel4(dims[k]) * sizeof(float);
            cudaError_t e = cudaMalloc(&buf[k], bytes ? bytes : 4);
            if (e == cudaSuccess) e = cudaMemset(buf[k], 0, bytes ? bytes : 4);
            if (e != cudaSuccess) st = cuda_fail(err, e, "cudaMalloc", what);
        }
        /* the largest workspace that can be had up to the limit, halving on failure */
        size_t ws_bytes = CONV_WORKSPACE_LIMIT;
        while (!st && ws_bytes && cudaMalloc(&ws, ws_bytes) != cudaSuccess) ws_bytes /= 2, cudaGetLastError();
        if (!ws) ws_bytes = 0;
        cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
        if (!st && p->geom.pass == CONV_PASS_FWD) {
            cudnnConvolutionFwdAlgoPerf_t r[PERF_MAX];
            s = cuda_dnn.cudnnFindConvolutionForwardAlgorithmEx(h, d->xd, buf[0], d->wd, buf[1], d->cd, d->yd, buf[2],
                                                                PERF_MAX, &n, r, ws, ws_bytes);
            COPY_PERF(r, n, out);
        } else if (!st && p->geom.pass == CONV_PASS_BWD_DATA) {
            cudnnConvolutionBwdDataAlgoPerf_t r[PERF_MAX];
            s = cuda_dnn.cudnnFindConvolutionBackwardDataAlgorithmEx(h, d->wd, buf[1], d->yd, buf[2], d->cd, d->xd,
                                                                     buf[0], PERF_MAX, &n, r, ws, ws_bytes);
            COPY_PERF(r, n, out);
        } else if (!st) {
            cudnnConvolutionBwdFilterAlgoPerf_t r[PERF_MAX];
            s = cuda_dnn.cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d->xd, buf[0], d->yd, buf[2], d->cd, d->wd,
                                                                       buf[1], PERF_MAX, &n, r, ws, ws_bytes);
            COPY_PERF(r, n, out);
        }
        if (!st && s != CUDNN_STATUS_SUCCESS) st = cuda_dnn_fail(err, s, "cudnnFind*AlgorithmEx", what);
        for (int k = 0; k < 3; k++) cudaFree(buf[k]);
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
    *n_out = n;
    return st;
}

/* The workspace a cached algorithm needs for the plan's shape. */
static brisk_status algo_workspace(cuda_backend *cb, conv_plan *p, int algo, size_t *bytes, const char *what,
                                   brisk_error *err) {
    cudnnHandle_t h = cb->conv->handle;
    conv_descs *d = &p->d;
    *bytes = 0;
    if (p->geom.pass == CONV_PASS_FWD)
        DNN(cudnnGetConvolutionForwardWorkspaceSize(h, d->xd, d->wd, d->cd, d->yd, (cudnnConvolutionFwdAlgo_t)algo,
                                                    bytes), what);
    else if (p->geom.pass == CONV_PASS_BWD_DATA)
        DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->wd, d->yd, d->cd, d->xd,
                                                         (cudnnConvolutionBwdDataAlgo_t)algo, bytes), what);
    else
        DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->xd, d->yd, d->cd, d->wd,
                                                           (cudnnConvolutionBwdFilterAlgo_t)algo, bytes), what);
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

static const char *pass_label(conv_pass p) {
    return p == CONV_PASS_FWD ? "forward" : p == CONV_PASS_BWD_DATA ? "backward data" : "backward filter";
}

/* Chooses the plan's algorithm and its workspace (see the file comment). */
static brisk_status choose(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err) {
    struct cuda_conv *c = cb->conv;
    /* --deterministic still times, among deterministic algorithms only: every candidate
     * gives the same bits on every run, and the cache keeps the choice across runs */
    int det = cb->opt.deterministic, timed = cb->opt.autotune;
    conv_algo_device dev = {.gpu_name = cb->name, .cc_major = cb->cc_major, .cc_minor = cb->cc_minor, .sms = cb->sms,
                            .cudnn_version = cuda_dnn.cudnnGetVersion()};
    conv_algo_shape s = {.pass = p->geom.pass, .n = p->geom.x[0], .c = p->geom.x[1], .h = p->geom.x[2],
                         .w = p->geom.x[3], .co = p->geom.w[0], .win = p->geom.win,
                         .math = p->math == CUDNN_FMA_MATH ? CONV_MATH_FP32 : CONV_MATH_TF32, .deterministic = det};
    char key[CONV_CACHE_KEY_MAX];
    brisk_status st = conv_cache_key(&dev, &s, key, sizeof key, err);
    if (st) return st;
    const char *source = "heuristic";
    int algo = -1;
    if (timed) {
        cache_open(cb);
        algo = conv_cache_get(&c->cache, key);
        if (algo >= 0) {
            if ((st = algo_workspace(cb, p, algo, &p->ws_bytes, what, err))) return st;
            if (p->ws_bytes > CONV_WORKSPACE_LIMIT) algo = -1;
            else source = "from the cache";
        }
    }
    if (algo < 0) {
        conv_perf r[PERF_MAX];
        int n = 0;
        if ((st = candidates(cb, p, timed, r, &n, what, err))) return st;
        int i = pick(r, n, det, CONV_WORKSPACE_LIMIT);
        if (i < 0)
            return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: cuDNN offers no %s%s algorithm within %zu MiB of "
                                "workspace", what, det ? "deterministic " : "", pass_label(p->geom.pass),
                                CONV_WORKSPACE_LIMIT >> 20);
        algo = r[i].algo;
        p->ws_bytes = r[i].memory;
        if (timed) {
            source = "timed";
            brisk_error e = {0};
            if (c->cache_state == 1 && conv_cache_put(&c->cache, key, algo, &e))
                brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s", e.msg);
        }
    }
    p->algo = algo;
    brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s %s: cuDNN algorithm %d, %zu bytes of workspace (%s)", what,
              pass_label(p->geom.pass), algo, p->ws_bytes, source);
    return BRISK_OK;
}

static void plan_free(conv_plan *p) {
    descs_free(&p->d);
    memset(p, 0, sizeof *p);
}

static brisk_status handle_get(cuda_backend *cb, brisk_error *err) {
    if (!cb->conv && !(cb->conv = calloc(1, sizeof *cb->conv)))
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (conv)");
    struct cuda_conv *c = cb->conv;
    if (c->handle) return BRISK_OK;
    CU(cudaSetDevice(cb->opt.device), "selecting the device for cuDNN");
    cudnnStatus_t s = cuda_dnn.cudnnCreate(&c->handle);
    if (s == CUDNN_STATUS_SUCCESS && (s = cuda_dnn.cudnnSetStream(c->handle, cb->compute)) != CUDNN_STATUS_SUCCESS)
        cuda_dnn.cudnnDestroy(c->handle);
    if (s != CUDNN_STATUS_SUCCESS) {
        c->handle = NULL;
        return cuda_dnn_fail(err, s, "cudnnCreate", "the convolutions' cuDNN handle");
    }
    return BRISK_OK;
}

/* The plan of conv node `id` of g, made now when there is none (never while capturing). */
static brisk_status plan_get(cuda_backend *cb, const brisk_graph *g, int id, const conv_geom *cg, conv_plan **out,
                             brisk_error *err) {
    const char *why = cuda_conv_missing();
    if (why) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", why);
    brisk_status st = handle_get(cb, err);
    if (st) return st;
    struct cuda_conv *c = cb->conv;
    int math = math_type(cb->opt.precision);
    conv_plan *p = NULL;
    int free_slot = -1;
    for (int i = 0; i < c->n && !p; i++) {
        if (c->plans[i].g == g && c->plans[i].node == id) p = &c->plans[i];
        if (!c->plans[i].g && free_slot < 0) free_slot = i;
    }
    /* a plan from a freed graph at the same address: rebuilt when the shape differs */
    if (p && memcmp(&p->geom, cg, sizeof *cg) == 0 && p->math == math) {
        *out = p;
        return BRISK_OK;
    }
    char what[64];
    snprintf(what, sizeof what, "%s (node %d)", brisk_op_name(NODE(g, id)->op), id);
    if (cb->capturing)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no cuDNN plan while capturing a CUDA graph (the executor "
                            "was not prepared)", what);
    if (p) {
        plan_free(p);
    } else if (free_slot >= 0) {
        p = &c->plans[free_slot];
    } else {
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 16;
            conv_plan *np = realloc(c->plans, (size_t)cap * sizeof *np);
            if (!np) return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory (conv)");
            c->plans = np;
            c->cap = cap;
        }
        p = &c->plans[c->n++];
        memset(p, 0, sizeof *p);
    }
    p->geom = *cg;
    p->math = math;
    if ((st = descs_make(cg, math, &p->d, what, err)) || (st = choose(cb, p, what, err))) {
        plan_free(p); /* a free slot now */
        return st;
    }
    if (p->ws_bytes > c->work_bytes) {
        CU(cudaStreamSynchronize(cb->compute), what); /* an earlier conv may still use the old buffer */
        cudaFree(c->work);
        c->work = NULL, c->work_bytes = 0;
        CU(cudaMalloc(&c->work, p->ws_bytes), what);
        c->work_bytes = p->ws_bytes;
    }
    p->g = g;
    p->node = id;
    *out = p;
    return BRISK_OK;
}

brisk_status cuda_conv_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        brisk_op op = g->nodes[i].op;
        if (op != BRISK_OP_CONV2D && op != BRISK_OP_CONV2D_GRAD_X && op != BRISK_OP_CONV2D_GRAD_W) continue;
        conv_geom cg;
        conv_plan *p;
        brisk_status st = conv_geom_of(g, i, &cg, err);
        if (!st && numel4(cg.x) && numel4(cg.w) && numel4(cg.y)) st = plan_get(cb, g, i, &cg, &p, err);
        if (st) return st;
    }
    return BRISK_OK;
}

void cuda_conv_forget(cuda_backend *cb) {
    if (!cb->conv) return;
    for (int i = 0; i < cb->conv->n; i++) plan_free(&cb->conv->plans[i]);
    cb->conv->n = 0;
}

void cuda_conv_free(cuda_backend *cb) {
    struct cuda_conv *c = cb->conv;
    if (!c) return;
    cuda_conv_forget(cb);
    free(c->plans);
    cudaFree(c->work);
    if (c->handle) cuda_dnn.cudnnDestroy(c->handle);
    brisk_error e = {0};
    if (c->cache_state == 1 && conv_cache_save(&c->cache, &e)) brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s", e.msg);
    conv_cache_free(&c->cache);
    free(c);
    cb->conv = NULL;
}

brisk_status cuda_run_conv(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                           brisk_error *err) {
    conv_geom cg;
    brisk_status st = conv_geom_of(g, id, &cg, err);
    if (st) return st;
    char what[64];
    snprintf(what, sizeof what, "%s (node %d)", brisk_op_name(NODE(g, id)->op), id);
    if (!numel4(cg.x) || !numel4(cg.w) || !numel4(cg.y)) {
        /* an empty batch or plane: the filter gradient is a sum over nothing */
        if (cg.pass == CONV_PASS_BWD_FILTER && numel4(cg.w))
            CU(cudaMemsetAsync(out, 0, (size_t)numel4(cg.w) * sizeof(float), cb->compute), what);
        else if (cg.pass == CONV_PASS_BWD_DATA && numel4(cg.x))
            CU(cudaMemsetAsync(out, 0, (size_t)numel4(cg.x) * sizeof(float), cb->compute), what);
        else if (cg.pass == CONV_PASS_FWD && numel4(cg.y))
            CU(cudaMemsetAsync(out, 0, (size_t)numel4(cg.y) * sizeof(float), cb->compute), what);
        return BRISK_OK;
    }
    conv_plan *p;
    if ((st = plan_get(cb, g, id, &cg, &p, err))) return st;
    cudnnHandle_t h = cb->conv->handle;
    const float one = 1.0f, zero = 0.0f;
    void *ws = cb->conv->work;
    conv_descs *d = &p->d;
    if (cg.pass == CONV_PASS_FWD)
        DNN(cudnnConvolutionForward(h, &one, d->xd, in[0], d->wd, in[1], d->cd, (cudnnConvolutionFwdAlgo_t)p->algo,
                                    ws, p->ws_bytes, &zero, d->yd, out), what);
    else if (cg.pass == CONV_PASS_BWD_DATA)
        DNN(cudnnConvolutionBackwardData(h, &one, d->wd, in[1], d->yd, in[0], d->cd,
                                         (cudnnConvolutionBwdDataAlgo_t)p->algo, ws, p->ws_bytes, &zero, d->xd, out),
            what);
    else
        DNN(cudnnConvolutionBackwardFilter(h, &one, d->xd, in[1], d->yd, in[0], d->cd,
                                           (cudnnConvolutionBwdFilterAlgo_t)p->algo, ws, p->ws_bytes, &zero, d->wd,
                                           out), what);
    return BRISK_OK;
}

#else /* no cudnn.h at build time */

const char *cuda_conv_missing(void) {
    return "convolution on CUDA needs cuDNN 9 (this build found no cudnn.h: configure with cuDNN's headers installed)";
}

brisk_status cuda_conv_check_descs(brisk_gemm_precision precision, int64_t n, int64_t c, int64_t h, int64_t w,
                                   int64_t co, brisk_window win, brisk_error *err) {
    (void)precision, (void)n, (void)c, (void)h, (void)w, (void)co, (void)win;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", cuda_conv_missing());
}

brisk_status cuda_conv_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err) {
    (void)cb, (void)g, (void)err;
    return BRISK_OK;
}

void cuda_conv_forget(cuda_backend *cb) { (void)cb; }
void cuda_conv_free(cuda_backend *cb) { (void)cb; }

brisk_status cuda_run_conv(cuda_backend *cb, const brisk_graph *g, int id, const void *const *in, void *out,
                           brisk_error *err) {
    (void)cb, (void)in, (void)out;
    conv_geom cg;
    brisk_status st = conv_geom_of(g, id, &cg, err);
    if (st) return st;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", cuda_conv_missing());
}

#endif
