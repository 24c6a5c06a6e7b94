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
#include "backend/cuda/cudnn_conv_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE(g, id) (&(g)->nodes[(id)])
#define IN_NODE(g, id, i) (&(g)->nodes[(g)->nodes[(id)].in[(i)]])

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

int cuda_conv_device_live(const void *p) {
    struct cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

#if BRISK_HAVE_CUDNN_H

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

int conv_math_type(brisk_gemm_precision precision) {
    return precision == BRISK_GEMM_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

static cudnnDataType_t dnn_type(int dt) {
    return dt == 1 ? CUDNN_DATA_BFLOAT16 : dt == 2 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

const char *conv_dt_name(int dt) { return dt == 1 ? "bf16" : dt == 2 ? "fp16" : "fp32"; }

void conv_descs_free(conv_descs *d) {
    if (d->xd) cuda_dnn.cudnnDestroyTensorDescriptor(d->xd);
    if (d->yd) cuda_dnn.cudnnDestroyTensorDescriptor(d->yd);
    if (d->wd) cuda_dnn.cudnnDestroyFilterDescriptor(d->wd);
    if (d->cd) cuda_dnn.cudnnDestroyConvolutionDescriptor(d->cd);
    memset(d, 0, sizeof *d);
}

/* The descriptors in layout nhwc (filter KRSC then) and data type dt; the compute type is
 * fp32 in every mode (16-bit data: fp32 accumulation). */
brisk_status conv_descs_make(const conv_geom *cg, int math, int nhwc, int dt, conv_descs *d, const char *what,
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
    brisk_status st = conv_descs_make(&cg, conv_math_type(precision), nhwc, conv_data_type(precision), &d, "conv descriptors",
                                 err);
    conv_descs_free(&d);
    return st;
}

/* ---------------------------------------------------------------- boundary conversions */

/* The roles x (0), w (1), y (2) of a pass's operands: which is written. */
static int out_role(conv_pass pass) { return pass == CONV_PASS_FWD ? 2 : pass == CONV_PASS_BWD_DATA ? 0 : 1; }

/* Which operands the plan's layout and type convert, and where their copies sit. */
void conv_stage_layout(conv_plan *p) {
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
brisk_status conv_time_conversions(cuda_backend *cb, const conv_plan *p, double *ms, const char *what,
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

/* ---------------------------------------------------------------- plans (the algorithm and layout
 * choice: cudnn_conv_algo.c) */

static void plan_free(conv_plan *p) {
    conv_descs_free(&p->d);
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
    conv_stage_layout(p);
    brisk_status st = conv_descs_make(&p->geom, p->math, p->nhwc, p->dt, &p->d, what, err);
    if (!st) st = conv_choose_algo(cb, p, what, err);
    if (st) conv_descs_free(&p->d);
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
    int math = conv_math_type(cb->opt.precision), dt = conv_data_type(cb->opt.precision);
    conv_plan *p = NULL;
    int free_slot = -1;
    for (int i = 0; i < c->n && !p; i++) {
        if (c->plans[i].g == g && c->plans[i].node == id) p = &c->plans[i];
        if (!c->plans[i].g && free_slot < 0) free_slot = i;
    }
    /* a plan from a freed graph at the same address: rebuilt when the shape differs */
    if (p && memcmp(&p->geom, cg, sizeof *cg) == 0 && p->req_math == math && p->req_dt == dt) {
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
    p->math = p->req_math = math;
    p->dt = p->req_dt = dt;
    brisk_error first = {0};
    unsigned refused = 0;
    if (!(st = conv_layout_parse_refused(getenv(CONV_REFUSE_LAYOUTS_ENV), &refused, err)) &&
        !(st = conv_choose_layout(cb, p, what, err)) && (st = plan_in_layout(cb, p, refused, what, &first))) {
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
                      "cuda: %s runs in %s %s instead: %s", what, p->nhwc ? "NHWC" : "NCHW", conv_dt_name(p->dt),
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
        snprintf(buf, n, "cuDNN algo %d, %s %s%s%s%s, workspace %zu B%s", p->algo, p->nhwc ? "NHWC" : "NCHW",
                 conv_dt_name(p->dt), p->dt != p->req_dt ? " (TF32, timed faster than " : "",
                 p->dt != p->req_dt ? conv_dt_name(p->req_dt) : "", p->dt != p->req_dt ? ")" : "", p->ws_bytes,
                 p->stage_bytes ? ", operands converted at the node" : "");
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
    cudnnStatus_t s = conv_launch(cb, p, p->algo, dn, cb->conv->work, p->ws_bytes);
    if (s != CUDNN_STATUS_SUCCESS) {
        char call[160];
        snprintf(call, sizeof call, "%s (algorithm %d in %s %s, %zu bytes of workspace)", conv_pass_call(cg.pass), p->algo,
                 p->nhwc ? "NHWC" : "NCHW", conv_dt_name(p->dt), p->ws_bytes);
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
