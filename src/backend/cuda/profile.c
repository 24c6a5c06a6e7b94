/* What brisk profile asks of the CUDA backend: timing marks (events recorded on the compute
 * stream, read with cudaEventElapsedTime once the step's last one is done), a note per node
 * on how it runs (the fusion prepare planned, the GEMM operands' type, cuDNN's algorithm and
 * layout), the kernel count of a captured step, and the launch floor: the replay time of a
 * CUDA graph of as many empty kernels, the least a step of that many kernels can take when
 * replayed. */
#include "backend/cuda/cuda_internal.h"
#include "brisk/cuda.h"

#include <stdlib.h>
#include <string.h>

/* ---- event tables: the profile's marks here, the step times' marks in step.c */

brisk_status cuda_event_mark(cuda_backend *cb, cudaEvent_t **table, int count, int slot, const char *what,
                             brisk_error *err) {
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "cuda: %s while capturing a CUDA graph", what);
    if (slot < 0 || slot >= count)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: %s %d outside 0 to %d", what, slot, count - 1);
    if (!*table && !(*table = calloc((size_t)count, sizeof **table)))
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cuda: out of memory for the %ss", what);
    cudaEvent_t *ev = &(*table)[slot];
    if (!*ev) CU(cudaEventCreate(ev), what); /* timing on */
    CU(cudaEventRecord(*ev, cb->compute), what);
    return BRISK_OK;
}

brisk_status cuda_event_ms(cudaEvent_t from, cudaEvent_t to, double *ms, const char *what, brisk_error *err) {
    CU(cudaEventSynchronize(to), what);
    float f = 0;
    CU(cudaEventElapsedTime(&f, from, to), what);
    *ms = f;
    return BRISK_OK;
}

void cuda_events_free(cudaEvent_t **table, int count) {
    if (!*table) return;
    for (int i = 0; i < count; i++)
        if ((*table)[i]) cudaEventDestroy((*table)[i]);
    free(*table);
    *table = NULL;
}

static brisk_status cu_mark(brisk_backend *be, int slot, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    return cuda_event_mark(cb, &cb->mark_ev, BRISK_MAX_MARKS, slot, "timing mark", err);
}

static brisk_status cu_mark_elapsed(brisk_backend *be, int from, int to, double *ms, brisk_error *err) {
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (from < 0 || to < 0 || from >= BRISK_MAX_MARKS || to >= BRISK_MAX_MARKS || !cb->mark_ev || !cb->mark_ev[from] ||
        !cb->mark_ev[to])
        return brisk_errorf(err, BRISK_ERR_INVALID, "cuda: timing marks %d and %d were not both recorded", from, to);
    return cuda_event_ms(cb->mark_ev[from], cb->mark_ev[to], ms, "reading two timing events", err);
}

static const char *epi_name(int epi) {
    switch (epi) {
    case EPI_BIAS: return "bias";
    case EPI_RELU_BIAS: return "bias + ReLU";
    case EPI_GELU_AUX_BIAS: return "bias + GELU (pre-activation kept)";
    case EPI_DGELU_BGRAD: return "dGELU + bias gradient";
    default: return "none";
    }
}

static void cu_note(brisk_backend *be, const brisk_graph *g, int id, char *buf, size_t n) {
    cuda_backend *cb = be->impl;
    if (!n) return;
    buf[0] = 0;
    if (id < 0 || id >= g->n_nodes) return;
    const brisk_node *nd = &g->nodes[id];
    size_t at = 0;
    if (cb->prep && cuda_prep_covers(cb, g)) {
        cuda_node_plan np;
        cuda_prep_node(cb->prep, id, &np);
        if (np.skip) at += (size_t)snprintf(buf, n, "computed by a fused neighbour (nothing launched here); ");
        else if (np.epi) at += (size_t)snprintf(buf, n, "cuBLASLt epilogue %s; ", epi_name(np.epi));
        else if (np.norm_ln >= 0 || np.norm_grad >= 0)
            at += (size_t)snprintf(buf, n, "fused with layernorm%s; ", np.norm_grad >= 0 ? " gradient" : "");
    } else {
        at += (size_t)snprintf(buf, n, "unprepared (no fusion); ");
    }
    if (at >= n) return;
    static const char *const types[] = {"fp32", "bf16", "fp16"};
    if (nd->op == BRISK_OP_MATMUL)
        snprintf(buf + at, n - at, "GEMM operands %s%s", types[cuda_in_type(cb) % 3],
                 cb->opt.precision == BRISK_GEMM_TF32 ? " (TF32)" : "");
    else if (nd->op == BRISK_OP_CONV2D || nd->op == BRISK_OP_CONV2D_GRAD_X || nd->op == BRISK_OP_CONV2D_GRAD_W)
        cuda_conv_note(cb, g, id, buf + at, n - at);
    else if (nd->op == BRISK_OP_LSTM || nd->op == BRISK_OP_LSTM_GRAD || nd->op == BRISK_OP_LSTM_GRAD_W ||
             nd->op == BRISK_OP_GRU || nd->op == BRISK_OP_GRU_GRAD || nd->op == BRISK_OP_GRU_GRAD_W)
        cuda_rnn_note(cb, g, id, buf + at, n - at);
    size_t len = strlen(buf); /* no trailing separator */
    if (len >= 2 && buf[len - 2] == ';') buf[len - 2] = 0;
}

/* kernel nodes of a graph, those of its child graphs included */
int cuda_graph_kernels(void *graph) {
    size_t nn = 0;
    if (cudaGraphGetNodes((cudaGraph_t)graph, NULL, &nn) != cudaSuccess) return cudaGetLastError(), -1;
    if (nn == 0) return 0;
    cudaGraphNode_t *nodes = malloc(nn * sizeof *nodes);
    if (!nodes) return -1;
    int kernels = 0;
    if (cudaGraphGetNodes((cudaGraph_t)graph, nodes, &nn) != cudaSuccess) kernels = -1;
    for (size_t i = 0; i < nn && kernels >= 0; i++) {
        enum cudaGraphNodeType ty;
        if (cudaGraphNodeGetType(nodes[i], &ty) != cudaSuccess) {
            kernels = -1;
        } else if (ty == cudaGraphNodeTypeKernel) {
            kernels++;
        } else if (ty == cudaGraphNodeTypeGraph) {
            cudaGraph_t child;
            int k = cudaGraphChildGraphNodeGetGraph(nodes[i], &child) == cudaSuccess ? cuda_graph_kernels(child) : -1;
            kernels = k < 0 ? -1 : kernels + k;
        }
    }
    if (kernels < 0) cudaGetLastError();
    free(nodes);
    return kernels;
}

int brisk_cuda_program_kernels(brisk_backend *be, int program) {
    if (!be || !be->name || strcmp(be->name, "cuda") != 0) return -1;
    cuda_backend *cb = be->impl;
    return program >= 0 && program < cb->n_programs ? cb->programs[program].kernels : -1;
}

brisk_status brisk_cuda_launch_floor(brisk_backend *be, int kernels, double *ms, brisk_error *err) {
    *ms = 0;
    if (!be || !be->name || strcmp(be->name, "cuda") != 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "launch floor: not a CUDA backend");
    if (kernels < 1 || kernels > 1000000)
        return brisk_errorf(err, BRISK_ERR_INVALID, "launch floor: %d kernels; expected 1 to 1000000", kernels);
    cuda_backend *cb = be->impl;
    USE_DEVICE(cb);
    if (cb->capturing) return brisk_errorf(err, BRISK_ERR_INTERNAL, "launch floor: while capturing a CUDA graph");
    /* its own stream and capture, so the backend's programs and values are untouched */
    cudaStream_t s = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    brisk_status st = BRISK_OK;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const char *what = "cudaStreamCreateWithFlags";
    if (!e) e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), what = "cudaStreamBeginCapture";
    if (!e) {
        for (int i = 0; i < kernels && !e; i++) e = cuk_empty(s), what = "an empty kernel's launch";
        cudaError_t end = cudaStreamEndCapture(s, &graph);
        if (!e) e = end, what = "cudaStreamEndCapture";
    }
    if (!e) e = cudaGraphInstantiate(&exec, graph, 0), what = "cudaGraphInstantiate";
    if (!e) e = cudaEventCreate(&ev[0]), what = "cudaEventCreate";
    if (!e) e = cudaEventCreate(&ev[1]), what = "cudaEventCreate";
    enum { WARM = 3, TIMED = 21 };
    double t[TIMED];
    for (int r = 0; r < WARM && !e; r++) e = cudaGraphLaunch(exec, s), what = "cudaGraphLaunch";
    for (int r = 0; r < TIMED && !e; r++) {
        float f = 0;
        if (!(e = cudaEventRecord(ev[0], s)) && !(e = cudaGraphLaunch(exec, s)) && !(e = cudaEventRecord(ev[1], s)) &&
            !(e = cudaEventSynchronize(ev[1])) && !(e = cudaEventElapsedTime(&f, ev[0], ev[1])))
            t[r] = f;
        what = "timing the empty graph's replay";
    }
    if (e) {
        cudaGetLastError();
        st = cuda_fail(err, e, what, "measuring the launch floor");
    } else {
        *ms = brisk_median(t, TIMED);
    }
    if (ev[0]) cudaEventDestroy(ev[0]);
    if (ev[1]) cudaEventDestroy(ev[1]);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (s) cudaStreamDestroy(s);
    return st;
}

void cuda_profile_install(brisk_backend *be) {
    be->mark = cu_mark;
    be->mark_elapsed = cu_mark_elapsed;
    be->note = cu_note;
}

void cuda_profile_free(cuda_backend *cb) { cuda_events_free(&cb->mark_ev, BRISK_MAX_MARKS); }
