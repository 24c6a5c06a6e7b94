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
 * (cudnnGet*Algorithm_v7) chooses under the same rules. Whichever way, an algorithm is
 * only kept after one trial launch on scratch operands that cuDNN accepts (cuDNN 9's
 * heuristic lists some it then refuses); when none runs in the layout chosen, the node runs
 * in the other layout (a warning the first time), and when none runs in either, the plan
 * fails naming every refusal: an unsupported combination is never launched in a step.
 * Under --deterministic only deterministic algorithms are candidates (conv_algo_usable):
 * then a step's bits, captured CUDA graph or eager, are the same every run; outside it
 * cuDNN may pick one that sums with atomics, whose last bits vary from run to run. Each
 * choice is logged (INFO): node, pass, algorithm, layout, type, workspace, and whether it
 * was timed, cached or heuristic.
 *
 * Workspace: one buffer shared by every conv node (they run one at a time on the compute
 * stream), sized at prepare to the largest chosen algorithm's need and never above
 * CONV_WORKSPACE_LIMIT; a step allocates nothing, so it can be captured.
 *
 * Precision and layout: the ops' operands are fp32 in the graph's layout (win.layout, NCHW
 * or NHWC; w [Co, C/g, kh, kw] in both). fp32: CUDNN_FMA_MATH (no tensor cores); tf32:
 * CUDNN_DEFAULT_MATH on fp32 data (TF32 tensor cores, fp32 accumulation). bf16 and fp16
 * (mixed precision, as the GEMMs): the operands are converted to 16 bits at the node's
 * boundary, cuDNN computes in fp32 (CUDNN_DATA_FLOAT compute type: fp32 accumulation) on
 * tensor cores, and its 16-bit result is converted back to fp32 for the graph. cuDNN runs
 * in NCHW or NHWC whatever the graph's layout, as conv_layout.h decides (speed.conv_layout;
 * auto: timed at prepare with the conversions each layout costs, then cached); a layout or
 * type other than the graph's is converted by k_conv_layout.cu into a staging buffer shared
 * by every conv node, sized at prepare like the workspace. Each choice is logged (INFO):
 * layout, data type, why, and the times when timed. */
#include "backend/cuda/cuda_internal.h"

#include "backend/cuda/conv_algo_cache.h"
#include "backend/cuda/conv_layout.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])

/* The most workspace a convolution algorithm may use: larger ones are passed over. */
#define CONV_WORKSPACE_LIMIT BRISK_CUDA_CONV_WORKSPACE_LIMIT

/* x [N, C, H, W], w [Co, C/groups, kh, kw], y [N, Co, Ho, Wo] of a conv node, whichever
 * pass: logical dims, stored in the graph's layout (data_nhwc: x [N, H, W, C]). */
typedef struct conv_geom {
    int x[4], w[4], y[4];
    brisk_window win;
    conv_pass pass;
    int data_nhwc;
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
    cg->data_nhwc = n->attr.win.layout == BRISK_LAYOUT_NHWC;
    if (n->attr.win.layout != BRISK_LAYOUT_NCHW && !cg->data_nhwc)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): layout %d (expected NCHW or NHWC)",
                            brisk_op_name(n->op), id, n->attr.win.layout);
    /* the logical [N, C, H, W] order of x and y whatever their layout (w is OIHW in both) */
    static const int from_nhwc[4] = {0, 3, 1, 2}, from_nchw[4] = {0, 1, 2, 3};
    const brisk_shape *s[3] = {x, w, y};
    int *d[3] = {cg->x, cg->w, cg->y};
    int ok = 1;
    for (int k = 0; k < 3 && ok; k++) {
        ok = s[k]->ndim == 4;
        const int *at = cg->data_nhwc && k != 1 ? from_nhwc : from_nchw;
        for (int i = 0; i < 4 && ok; i++) {
            ok = s[k]->d[at[i]] >= 0 && s[k]->d[at[i]] <= INT_MAX;
            d[k][i] = (int)s[k]->d[at[i]];
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
                            "w [Co, C/groups, kh, kw], y [N, Co, Ho, Wo]%s, each dim at most %d)",
                            brisk_op_name(n->op), id, cg->data_nhwc ? " in NHWC order" : "", INT_MAX);
    return BRISK_OK;
}

static int64_t numel4(const int d[4]) { return (int64_t)d[0] * d[1] * d[2] * d[3]; }

int cuda_conv_device_live(const void *p) {
    struct cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

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
    int nhwc, dt;           /* the layout and data type cuDNN runs in (conv_layout.h) */
    conv_descs d;
    int algo;
    size_t ws_bytes;
    size_t stage_off[3];    /* x, w, y in cuDNN's form in the staging buffer; SIZE_MAX: used as they are */
    size_t stage_bytes;
} conv_plan;

struct cuda_conv {
    cudnnHandle_t handle;
    conv_plan *plans;
    int n, cap;
    void *work;               /* shared by every conv node */
    size_t work_bytes;
    void *stage;              /* the converted operands, shared by every conv node too */
    size_t stage_bytes;
    conv_algo_cache cache;
    int cache_state;          /* 0 not read yet, 1 read, -1 refused (neither used nor written) */
    int fallbacks;            /* nodes run in the other layout: the first is a warning, the rest INFO */
};

static int math_type(brisk_gemm_precision precision) {
    return precision == BRISK_GEMM_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

static cudnnDataType_t dnn_type(int dt) {
    return dt == 1 ? CUDNN_DATA_BFLOAT16 : dt == 2 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static const char *dt_name(int dt) { return dt == 1 ? "bf16" : dt == 2 ? "fp16" : "fp32"; }

static void descs_free(conv_descs *d) {
    if (d->xd) cuda_dnn.cudnnDestroyTensorDescriptor(d->xd);
    if (d->yd) cuda_dnn.cudnnDestroyTensorDescriptor(d->yd);
    if (d->wd) cuda_dnn.cudnnDestroyFilterDescriptor(d->wd);
    if (d->cd) cuda_dnn.cudnnDestroyConvolutionDescriptor(d->cd);
    memset(d, 0, sizeof *d);
}

/* The descriptors in layout nhwc (filter KRSC then) and data type dt; the compute type is
 * fp32 in every mode (16-bit data: fp32 accumulation). */
static brisk_status descs_make(const conv_geom *cg, int math, int nhwc, int dt, conv_descs *d, const char *what,
                               brisk_error *err) {
    memset(d, 0, sizeof *d);
    const brisk_window *v = &cg->win;
    cudnnTensorFormat_t fmt = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnDataType_t t = dnn_type(dt);
    DNN(cudnnCreateTensorDescriptor(&d->xd), what);
    DNN(cudnnCreateTensorDescriptor(&d->yd), what);
    DNN(cudnnCreateFilterDescriptor(&d->wd), what);
    DNN(cudnnCreateConvolutionDescriptor(&d->cd), what);
    DNN(cudnnSetTensor4dDescriptor(d->xd, fmt, t, cg->x[0], cg->x[1], cg->x[2], cg->x[3]), what);
    DNN(cudnnSetTensor4dDescriptor(d->yd, fmt, t, cg->y[0], cg->y[1], cg->y[2], cg->y[3]), what);
    DNN(cudnnSetFilter4dDescriptor(d->wd, t, fmt, cg->w[0], cg->w[1], cg->w[2], cg->w[3]), what);
    DNN(cudnnSetConvolution2dDescriptor(d->cd, v->ph, v->pw, v->sh, v->sw, v->dh, v->dw, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT), what);
    DNN(cudnnSetConvolutionGroupCount(d->cd, v->groups), what);
    DNN(cudnnSetConvolutionMathType(d->cd, (cudnnMathType_t)math), what);
    return BRISK_OK;
}

brisk_status cuda_conv_check_descs(brisk_gemm_precision precision, int nhwc, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t co, brisk_window win, brisk_error *err) {
    const char *why = cuda_conv_missing();
    if (why) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", why);
    conv_geom cg = {.x = {(int)n, (int)c, (int)h, (int)w}, .w = {(int)co, (int)(c / win.groups), win.kh, win.kw},
                    .win = win};
    cg.y[0] = (int)n, cg.y[1] = (int)co;
    cg.y[2] = (int)out_dim(h, win.kh, win.sh, win.ph, win.dh), cg.y[3] = (int)out_dim(w, win.kw, win.sw, win.pw, win.dw);
    conv_descs d;
    brisk_status st = descs_make(&cg, math_type(precision), nhwc, conv_data_type(precision), &d, "conv descriptors",
                                 err);
    descs_free(&d);
    return st;
}

/* ---------------------------------------------------------------- boundary conversions */

/* The roles x (0), w (1), y (2) of a pass's operands: which is written. */
static int out_role(conv_pass pass) { return pass == CONV_PASS_FWD ? 2 : pass == CONV_PASS_BWD_DATA ? 0 : 1; }

static const int *role_dims(const conv_geom *cg, int k) { return k == 0 ? cg->x : k == 1 ? cg->w : cg->y; }

/* Which operands the plan's layout and type convert, and where their copies sit. */
static void stage_layout(conv_plan *p) {
    size_t off = 0;
    for (int k = 0; k < 3; k++) {
        if (!conv_operand_converted(k == 1, p->dt, p->nhwc, p->geom.data_nhwc)) {
            p->stage_off[k] = SIZE_MAX;
            continue;
        }
        p->stage_off[k] = off;
        off += ((size_t)numel4(role_dims(&p->geom, k)) * (p->dt ? 2 : 4) + 255) / 256 * 256;
    }
    p->stage_bytes = off;
}

/* Operand k between the graph's form (fp32, the graph's layout; w OIHW) and cuDNN's. */
static cudaError_t convert(const conv_plan *p, int k, const void *src, void *dst, int to_dnn, cudaStream_t s) {
    const int *d = role_dims(&p->geom, k);
    int graph_nhwc = k == 1 ? 0 : p->geom.data_nhwc;
    int64_t N = d[0], C = d[1], S = (int64_t)d[2] * d[3];
    return to_dnn ? cuk_conv_relayout(src, 0, graph_nhwc, dst, p->dt, p->nhwc, N, C, S, s)
                  : cuk_conv_relayout(src, p->dt, p->nhwc, dst, 0, graph_nhwc, N, C, S, s);
}

/* The conversions one run of the plan makes (inputs in, the output back), on graph-form
 * buffers g[3] and the staging buffer st. */
static cudaError_t convert_all(const conv_plan *p, void *const g[3], char *st, cudaStream_t s) {
    int o = out_role(p->geom.pass);
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < 3 && !e; k++)
        if (p->stage_off[k] != SIZE_MAX) e = convert(p, k, k == o ? st + p->stage_off[k] : g[k],
                                                     k == o ? g[k] : st + p->stage_off[k], k != o, s);
    return e;
}

/* Milliseconds of the plan's conversions (0 when it converts nothing): the mean of 3 runs
 * after one to warm up, on zeroed scratch operands. */
static brisk_status time_conversions(cuda_backend *cb, const conv_plan *p, double *ms, const char *what,
                                     brisk_error *err) {
    *ms = 0;
    if (!p->stage_bytes) return BRISK_OK;
    void *g[3] = {NULL, NULL, NULL}, *st = NULL;
    cudaEvent_t a = NULL, b = NULL;
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < 3 && !e; k++) {
        size_t bytes = (size_t)numel4(role_dims(&p->geom, k)) * sizeof(float);
        e = cudaMalloc(&g[k], bytes ? bytes : 4);
        if (!e) e = cudaMemsetAsync(g[k], 0, bytes ? bytes : 4, cb->compute);
    }
    if (!e) e = cudaMalloc(&st, p->stage_bytes);
    if (!e) e = cudaMemsetAsync(st, 0, p->stage_bytes, cb->compute);
    if (!e) e = cudaEventCreate(&a);
    if (!e) e = cudaEventCreate(&b);
    if (!e) e = convert_all(p, g, st, cb->compute);
    if (!e) e = cudaEventRecord(a, cb->compute);
    for (int r = 0; r < 3 && !e; r++) e = convert_all(p, g, st, cb->compute);
    if (!e) e = cudaEventRecord(b, cb->compute);
    if (!e) e = cudaEventSynchronize(b);
    float t = 0;
    if (!e) e = cudaEventElapsedTime(&t, a, b);
    *ms = t / 3.0;
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    for (int k = 0; k < 3; k++) cudaFree(g[k]);
    cudaFree(st);
    if (e) return cuda_fail(err, e, "timing the layout conversions", what);
    return BRISK_OK;
}

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

static const char *pass_call(conv_pass p) {
    return p == CONV_PASS_FWD ? "cudnnConvolutionForward" : p == CONV_PASS_BWD_DATA ? "cudnnConvolutionBackwardData"
                                                                                   : "cudnnConvolutionBackwardFilter";
}

/* One launch of the plan's pass with algo on operands dn (x, w, y in cuDNN's form): the
 * step's launch and the trial launch at plan time are this one call. */
static cudnnStatus_t launch(cuda_backend *cb, const conv_plan *p, int algo, void *const dn[3], void *ws,
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
    s = launch(cb, p, algo, sc->buf, ws, need);
    cudaError_t e = cudaStreamSynchronize(cb->compute);
    cudaFree(ws);
    if (e != cudaSuccess) return cuda_fail(err, e, "a trial launch of a cuDNN convolution algorithm", what);
    if (s != CUDNN_STATUS_SUCCESS) {
        snprintf(why, why_size, "%s: %s", pass_call(p->geom.pass), cuda_dnn.cudnnGetErrorString(s));
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

/* The plan's cache key fields: its shape, math, layout (p->nhwc) and determinism. */
static conv_algo_shape algo_shape(const cuda_backend *cb, const conv_plan *p) {
    conv_algo_shape s = {.pass = p->geom.pass, .n = p->geom.x[0], .c = p->geom.x[1], .h = p->geom.x[2],
                         .w = p->geom.x[3], .co = p->geom.w[0], .win = p->geom.win,
                         .math = conv_math_of(cb->opt.precision), .nhwc = p->nhwc ? CONV_KEY_NHWC : CONV_KEY_NCHW,
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
static brisk_status choose(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err) {
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
                            p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt), CONV_WORKSPACE_LIMIT >> 20,
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
              what, pass_label(p->geom.pass), algo, p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt), p->ws_bytes, source);
    return BRISK_OK;
}

/* The fastest usable algorithm's time in the plan's current layout (-1: none; an error of
 * cuDNN's for that layout counts as none), cached under that layout's key as choose()
 * would; and what that layout's conversions cost. */
static brisk_status time_layout(cuda_backend *cb, conv_plan *p, double *conv_ms, double *convert_ms,
                                const char *what, brisk_error *err) {
    struct cuda_conv *c = cb->conv;
    *conv_ms = -1, *convert_ms = 0;
    stage_layout(p);
    brisk_error e = {0};
    conv_perf r[PERF_MAX];
    conv_scratch sc = {{NULL, NULL, NULL}};
    int n = 0, i = -1;
    if (!scratch_make(p, &sc, what, &e) && !descs_make(&p->geom, p->math, p->nhwc, p->dt, &p->d, what, &e) &&
        !candidates(cb, p, 1, &sc, r, &n, what, &e))
        i = pick(r, n, 0, p->geom.pass, cb->opt.deterministic, CONV_WORKSPACE_LIMIT);
    descs_free(&p->d);
    scratch_free(&sc);
    if (i < 0) {
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s: no usable cuDNN algorithm in %s %s%s%s", what,
                  p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt), e.msg[0] ? ": " : "", e.msg);
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
    return time_conversions(cb, p, convert_ms, what, err);
}

/* Sets p->nhwc (conv_layout.h): speed.conv_layout, the rule, the cache, or both layouts
 * timed; logs the choice. */
static brisk_status choose_layout(cuda_backend *cb, conv_plan *p, const char *what, brisk_error *err) {
    struct cuda_conv *c = cb->conv;
    brisk_conv_layout mode = cb->opt.conv_layout;
    char why[96];
    int data = p->geom.data_nhwc;
    /* timing only decides AUTO, and never under --deterministic (no choice may depend on it) */
    if (mode != BRISK_CONV_LAYOUT_AUTO || !cb->opt.autotune || cb->opt.deterministic) {
        p->nhwc = conv_layout_rule(mode, p->dt, data, p->geom.x[1], p->geom.w[0], why, sizeof why);
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s runs in %s %s (%s)", what, p->nhwc ? "NHWC" : "NCHW",
                  dt_name(p->dt), why);
        return BRISK_OK;
    }
    conv_algo_device dev = {.gpu_name = cb->name, .cc_major = cb->cc_major, .cc_minor = cb->cc_minor, .sms = cb->sms,
                            .cudnn_version = cuda_dnn.cudnnGetVersion()};
    conv_algo_shape s = algo_shape(cb, p);
    char key[CONV_CACHE_KEY_MAX];
    brisk_status st = conv_cache_layout_key(&dev, &s, data, key, sizeof key, err);
    if (st) return st;
    cache_open(cb);
    int cached = conv_cache_get(&c->cache, key);
    if (cached == 0 || cached == 1) {
        p->nhwc = cached;
        brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s runs in %s %s (timed before: from the cache)", what,
                  p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt));
        return BRISK_OK;
    }
    conv_layout_costs costs;
    for (int l = 0; l < 2; l++) {
        p->nhwc = l;
        if ((st = time_layout(cb, p, &costs.conv_ms[l], &costs.convert_ms[l], what, err))) return st;
    }
    int l = conv_layout_pick(mode, &costs, data, why, sizeof why);
    if (l < 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: cuDNN offers no %s algorithm in NCHW or NHWC (%s) "
                            "within %zu MiB of workspace", what, pass_label(p->geom.pass), dt_name(p->dt),
                            CONV_WORKSPACE_LIMIT >> 20);
    p->nhwc = l;
    brisk_error e = {0};
    if (c->cache_state == 1 && conv_cache_put(&c->cache, key, l, &e)) brisk_log(&cb->opt.log, BRISK_LOG_WARN, "%s", e.msg);
    brisk_log(&cb->opt.log, BRISK_LOG_INFO, "cuda: %s runs in %s %s (%s: NCHW %.3f + %.3f ms, NHWC %.3f + %.3f ms of "
              "convolution + conversions; the graph is %s)", what, l ? "NHWC" : "NCHW", dt_name(p->dt), why,
              costs.conv_ms[0], costs.convert_ms[0], costs.conv_ms[1], costs.convert_ms[1], data ? "NHWC" : "NCHW");
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

/* The plan's descriptors and algorithm in its layout p->nhwc (descriptors freed on failure);
 * `refused`: the layouts $BRISK_CUDA_REFUSE_CONV_LAYOUTS refuses (conv_layout.h). */
static brisk_status plan_in_layout(cuda_backend *cb, conv_plan *p, unsigned refused, const char *what,
                                   brisk_error *err) {
    if (refused & (p->nhwc ? 2u : 1u))
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: " CONV_REFUSE_LAYOUTS_ENV " refuses cuDNN's algorithms "
                            "in %s", what, p->nhwc ? "NHWC" : "NCHW");
    stage_layout(p);
    brisk_status st = descs_make(&p->geom, p->math, p->nhwc, p->dt, &p->d, what, err);
    if (!st) st = choose(cb, p, what, err);
    if (st) descs_free(&p->d);
    return st;
}

/* The plan of conv node `id` of g, made now when there is none (never while capturing). */
static brisk_status plan_get(cuda_backend *cb, const brisk_graph *g, int id, const conv_geom *cg, conv_plan **out,
                             brisk_error *err) {
    const char *why = cuda_conv_missing();
    if (why) return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", why);
    brisk_status st = handle_get(cb, err);
    if (st) return st;
    struct cuda_conv *c = cb->conv;
    int math = math_type(cb->opt.precision), dt = conv_data_type(cb->opt.precision);
    conv_plan *p = NULL;
    int free_slot = -1;
    for (int i = 0; i < c->n && !p; i++) {
        if (c->plans[i].g == g && c->plans[i].node == id) p = &c->plans[i];
        if (!c->plans[i].g && free_slot < 0) free_slot = i;
    }
    /* a plan from a freed graph at the same address: rebuilt when the shape differs */
    if (p && memcmp(&p->geom, cg, sizeof *cg) == 0 && p->math == math && p->dt == dt) {
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
    p->dt = dt;
    brisk_error first = {0};
    unsigned refused = 0;
    if (!(st = conv_layout_parse_refused(getenv(CONV_REFUSE_LAYOUTS_ENV), &refused, err)) &&
        !(st = choose_layout(cb, p, what, err)) && (st = plan_in_layout(cb, p, refused, what, &first))) {
        /* nothing of cuDNN's runs in that layout: the other one, at the cost of the
         * conversions at the node's boundaries; an error naming both when neither runs */
        brisk_error other = {0};
        p->nhwc = !p->nhwc;
        if (st != BRISK_ERR_NOMEM) st = plan_in_layout(cb, p, refused, what, &other);
        if (st && other.msg[0])
            brisk_errorf(err, st, "%s; and in %s: %s", first.msg, p->nhwc ? "NHWC" : "NCHW", other.msg);
        else if (st)
            brisk_errorf(err, st, "%s", first.msg);
        else
            brisk_log(&cb->opt.log, c->fallbacks++ ? BRISK_LOG_INFO : BRISK_LOG_WARN,
                      "cuda: %s runs in %s %s instead: %s", what, p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt),
                      first.msg);
    }
    if (st) {
        plan_free(p); /* a free slot now */
        return st;
    }
    /* Outgrown buffers are retired, not freed, once a program is captured: a graph planned
     * after the capture (validation's smaller last batch, brisk_exec_create_view) may need
     * more workspace or staging than the training step, and the captured step still
     * replays with the old addresses. Freeing them made the next replay of the ResNet
     * example's step read freed memory (an illegal memory access, GPU run of 2026-11-27). */
    if (p->ws_bytes > c->work_bytes) {
        if ((st = cuda_buffer_retire(cb, c->work, "growing the convolution workspace", err))) return st;
        c->work = NULL, c->work_bytes = 0;
        CU(cudaMalloc(&c->work, p->ws_bytes), what);
        c->work_bytes = p->ws_bytes;
    }
    if (p->stage_bytes > c->stage_bytes) {
        if ((st = cuda_buffer_retire(cb, c->stage, "growing the convolution staging buffer", err))) return st;
        c->stage = NULL, c->stage_bytes = 0;
        CU(cudaMalloc(&c->stage, p->stage_bytes), what);
        c->stage_bytes = p->stage_bytes;
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

void cuda_conv_layouts(const cuda_backend *cb, int *nchw, int *nhwc) {
    *nchw = *nhwc = 0;
    for (int i = 0; cb->conv && i < cb->conv->n; i++)
        if (cb->conv->plans[i].g) ++*(cb->conv->plans[i].nhwc ? nhwc : nchw);
}

void cuda_conv_note(const cuda_backend *cb, const brisk_graph *g, int id, char *buf, size_t n) {
    if (n) buf[0] = 0;
    for (int i = 0; cb->conv && i < cb->conv->n; i++) {
        const conv_plan *p = &cb->conv->plans[i];
        if (p->g != g || p->node != id) continue;
        snprintf(buf, n, "cuDNN algo %d, %s %s, workspace %zu B%s", p->algo, p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt),
                 p->ws_bytes, p->stage_bytes ? ", operands converted at the node" : "");
        return;
    }
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
    cudaFree(c->stage);
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
    /* x, w, y in the graph's form, then in cuDNN's: converted into the staging buffer where
     * the plan's layout or type differs (the inputs now, the output after) */
    void *gf[3];
    if (cg.pass == CONV_PASS_FWD) gf[0] = (void *)in[0], gf[1] = (void *)in[1], gf[2] = out;
    else if (cg.pass == CONV_PASS_BWD_DATA) gf[0] = out, gf[1] = (void *)in[1], gf[2] = (void *)in[0];
    else gf[0] = (void *)in[1], gf[1] = out, gf[2] = (void *)in[0];
    void *dn[3];
    int o = out_role(cg.pass);
    for (int k = 0; k < 3; k++) {
        dn[k] = p->stage_off[k] == SIZE_MAX ? gf[k] : (char *)cb->conv->stage + p->stage_off[k];
        if (k != o && dn[k] != gf[k]) CU(convert(p, k, gf[k], dn[k], 1, cb->compute), what);
    }
    cudnnStatus_t s = launch(cb, p, p->algo, dn, cb->conv->work, p->ws_bytes);
    if (s != CUDNN_STATUS_SUCCESS) {
        char call[160];
        snprintf(call, sizeof call, "%s (algorithm %d in %s %s, %zu bytes of workspace)", pass_call(cg.pass), p->algo,
                 p->nhwc ? "NHWC" : "NCHW", dt_name(p->dt), p->ws_bytes);
        return cuda_dnn_fail(err, s, call, what);
    }
    if (dn[o] != gf[o]) CU(convert(p, o, dn[o], gf[o], 0, cb->compute), what);
    return BRISK_OK;
}

void cuda_conv_buffers(const brisk_backend *be, const void **work, size_t *work_bytes, const void **stage,
                       size_t *stage_bytes) {
    const struct cuda_conv *c = ((const cuda_backend *)be->impl)->conv;
    *work = c ? c->work : NULL, *work_bytes = c ? c->work_bytes : 0;
    *stage = c ? c->stage : NULL, *stage_bytes = c ? c->stage_bytes : 0;
}

#else /* no cudnn.h at build time */

void cuda_conv_buffers(const brisk_backend *be, const void **work, size_t *work_bytes, const void **stage,
                       size_t *stage_bytes) {
    (void)be;
    *work = *stage = NULL, *work_bytes = *stage_bytes = 0;
}

const char *cuda_conv_missing(void) {
    return "convolution on CUDA needs cuDNN 9 (this build found no cudnn.h: configure with cuDNN's headers installed)";
}

brisk_status cuda_conv_check_descs(brisk_gemm_precision precision, int nhwc, int64_t n, int64_t c, int64_t h,
                                   int64_t w, int64_t co, brisk_window win, brisk_error *err) {
    (void)precision, (void)nhwc, (void)n, (void)c, (void)h, (void)w, (void)co, (void)win;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s", cuda_conv_missing());
}

brisk_status cuda_conv_prepare(cuda_backend *cb, const brisk_graph *g, brisk_error *err) {
    (void)cb, (void)g, (void)err;
    return BRISK_OK;
}

void cuda_conv_forget(cuda_backend *cb) { (void)cb; }
void cuda_conv_layouts(const cuda_backend *cb, int *nchw, int *nhwc) {
    (void)cb;
    *nchw = *nhwc = 0;
}
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
