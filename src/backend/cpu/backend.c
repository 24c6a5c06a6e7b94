/* The CPU backend: the brisk_backend vtable over host memory. Buffers are plain
 * 64-byte-aligned heap blocks (one cache line, one AVX-512 vector), so upload and
 * download are memcpy. run_node is one switch over the op into the kernel
 * families (matmul.c, elementwise.c, unary.c, reduce.c, softmax_loss.c, loss.c, layernorm.c,
 * shape.c, gather.c, random.c, lstm.c, gru.c, attention.c, conv.c, batchnorm.c, pool2d.c,
 * upsample.c); the optimizer lives in optim.c.
 *
 * Threads: fixed at creation (0 = brisk_threads_resolve's default: the CPUs this
 * process may use, shared among the MPI ranks of the node) in the backend's own pool
 * (pool.c), so two backends in one process do not fight over a global setting.
 * OpenBLAS, when linked, is set to one thread here: brisk splits GEMMs itself so only
 * brisk's pool runs on the cores (OpenBLAS's idle threads sleep). */
#include "backend/cpu/cpu_internal.h"

#include "brisk/system.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if BRISK_HAVE_BLAS
#include <cblas.h>
#endif

double *cpu_partials(cpu_backend *cb, size_t n) {
    if (n > cb->partials_cap) {
        double *p = realloc(cb->partials, n * sizeof(double));
        if (!p) return NULL;
        cb->partials = p;
        cb->partials_cap = n;
    }
    return cb->partials;
}

void cpu_parallel(const cpu_backend *cb, int64_t n, int64_t grain, cpu_range_fn fn, const void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (cb->threads <= 1 || n < 2 * grain) {
        fn(ctx, 0, n);
        return;
    }
    /* chunks of whole 16-item groups, so no two threads write one cache line of f32 */
    cpu_pool_run(cb->pool, n, (grain + 15) / 16 * 16, fn, ctx);
}

void cpu_parallel_dynamic(const cpu_backend *cb, int64_t n, int64_t chunk, cpu_range_fn fn, const void *ctx) {
    cpu_pool_run(cb->threads > 1 ? cb->pool : NULL, n, chunk, fn, ctx);
}

/* The arenas (activations, parameters, gradients, moments) on 2 MiB pages where the kernel
 * gives them only on request (transparent_hugepage "madvise", Debian's setting on many
 * machines): an LSTM step walks tens of MiB in rows a whole sequence apart, one 4 KiB page
 * (and TLB entry) per row. Smaller buffers keep the 64-byte alignment the kernels need. */
#define HUGE_PAGE ((size_t)2 << 20)

static brisk_status cpu_alloc(brisk_backend *be, size_t bytes, void **out, brisk_error *err) {
    (void)be;
    size_t rounded = (bytes + 63) / 64 * 64;
    int huge = rounded >= 2 * HUGE_PAGE;
    if (huge) rounded = (rounded + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = NULL;
    if (posix_memalign(&p, huge ? HUGE_PAGE : 64, rounded ? rounded : 64) != 0 || !p) {
        *out = NULL;
        return brisk_errorf(err, BRISK_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes", bytes);
    }
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: without THP it changes nothing */
#endif
    *out = p;
    return BRISK_OK;
}

static void cpu_free(brisk_backend *be, void *p) { (void)be; free(p); }

int64_t brisk_backend_cpu_huge_pages(char *buf, size_t n, int *never) {
    char mode[160] = "", line[256];
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) { /* "always [madvise] never": the bracketed one is in force */
        if (fgets(line, sizeof line, f)) {
            char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
            if (a && b) snprintf(mode, sizeof mode, "%.*s", (int)(b - a - 1), a + 1);
        }
        fclose(f);
    }
    if (never) *never = strcmp(mode, "never") == 0;
    int64_t kib = -1;
    if ((f = fopen("/proc/self/smaps_rollup", "r"))) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "AnonHugePages: %" SCNd64, &kib) == 1) break;
        fclose(f);
    }
    if (buf && n) {
        if (kib < 0) snprintf(buf, n, "unknown (no /proc/self/smaps_rollup)");
        else snprintf(buf, n, "%.1f MiB on 2 MiB pages (transparent_hugepage %s)", kib / 1024.0, mode[0] ? mode : "?");
    }
    return kib < 0 ? -1 : kib * 1024;
}

static brisk_status cpu_copy(brisk_backend *be, void *dst, const void *src, size_t bytes,
                             brisk_error *err) {
    (void)be; (void)err;
    if (bytes && dst != src) memmove(dst, src, bytes);
    return BRISK_OK;
}

static brisk_status cpu_memset0(brisk_backend *be, void *dst, size_t bytes, brisk_error *err) {
    (void)be; (void)err;
    if (bytes) memset(dst, 0, bytes);
    return BRISK_OK;
}

static int cpu_supports_op(brisk_backend *be, const brisk_node *node, char *why, size_t why_size) {
    (void)be;
    return brisk_op_dtype_ok(node, why, why_size);
}

static brisk_status cpu_run_node(brisk_backend *be, const brisk_graph *g, int id,
                                 const void *const *in, void *out, const brisk_step_state *st,
                                 brisk_error *err) {
    cpu_backend *cb = be->impl;
    if (!g || id < 0 || id >= g->n_nodes)
        return brisk_errorf(err, BRISK_ERR_INVALID, "cpu backend: node %d out of range", id);
    brisk_status s = brisk_node_check_inputs(g, id, err);
    if (s != BRISK_OK) return s;
    const brisk_node *n = NODE(g, id);
    if (!cpu_supports_op(be, n, NULL, 0))
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cpu backend: %s (node %d) in %s",
                            brisk_op_name(n->op), id, brisk_dtype_name(n->dtype));
    if (n->op != BRISK_OP_INPUT && n->op != BRISK_OP_PARAM && n->op != BRISK_OP_CONST) {
        int ok = out != NULL && (n->n_in == 0 || in != NULL);
        for (int i = 0; ok && i < n->n_in; i++) ok = in[i] != NULL;
        if (!ok)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s (node %d): NULL input or output buffer",
                                brisk_op_name(n->op), id);
    }
    static const brisk_step_state eval_state = {.first_micro = 1};
    if (!st) st = &eval_state;
    if (cb->prep) { /* fused at prepare (fuse.c) */
        int done;
        s = cpu_prep_run(cb, g, id, in, out, st, &done, err);
        if (done) return s;
    }
    switch (n->op) {
    case BRISK_OP_INPUT: case BRISK_OP_PARAM: case BRISK_OP_CONST:
        return BRISK_OK; /* leaves: their buffers are filled by the executor */
    case BRISK_OP_RESHAPE: /* the planner aliases reshapes; a copy covers a non-aliased one */
        if (out != in[0]) memmove(out, in[0], n->bytes ? n->bytes
                                  : (size_t)cpu_numel(&n->shape) * brisk_dtype_size(n->dtype));
        return BRISK_OK;
    case BRISK_OP_MATMUL: s = cpu_matmul(cb, g, id, in, out, err); break;
    case BRISK_OP_BIAS_ADD: s = cpu_bias_add(cb, g, id, in, out, err); break;
    case BRISK_OP_ADD: case BRISK_OP_SUB: case BRISK_OP_MUL: case BRISK_OP_DIV: case BRISK_OP_MINIMUM:
    case BRISK_OP_MAXIMUM: case BRISK_OP_POW_XY:
        s = cpu_binary(cb, g, id, in, out, err);
        break;
    case BRISK_OP_BINARY_GRAD: s = cpu_binary_grad(cb, g, id, in, out, err); break;
    case BRISK_OP_SCALE: case BRISK_OP_RELU: case BRISK_OP_GELU: case BRISK_OP_SILU:
    case BRISK_OP_TANH: case BRISK_OP_SIGMOID: case BRISK_OP_LEAKY_RELU: case BRISK_OP_ELU: case BRISK_OP_SOFTPLUS:
    case BRISK_OP_EXP: case BRISK_OP_LOG: case BRISK_OP_SQRT: case BRISK_OP_ABS: case BRISK_OP_POW: case BRISK_OP_CLAMP:
    case BRISK_OP_ERF:
        s = cpu_unary(cb, g, id, in, out, err);
        break;
    case BRISK_OP_ACT_GRAD: s = cpu_act_grad(cb, g, id, in, out, err); break;
    case BRISK_OP_DROPOUT: case BRISK_OP_RANDN: case BRISK_OP_RAND_UNIFORM: case BRISK_OP_RANDINT:
        s = cpu_random(cb, g, id, in, out, st, err);
        break;
    case BRISK_OP_SUM: case BRISK_OP_MEAN: case BRISK_OP_SUM_TO:
        s = cpu_reduce(cb, g, id, in, out, err);
        break;
    case BRISK_OP_SOFTMAX: case BRISK_OP_LOG_SOFTMAX:
        s = cpu_softmax(cb, g, id, in, out, err);
        break;
    case BRISK_OP_SOFTMAX_GRAD: case BRISK_OP_LOG_SOFTMAX_GRAD:
        s = cpu_softmax_grad(cb, g, id, in, out, err);
        break;
    case BRISK_OP_CROSS_ENTROPY: case BRISK_OP_CROSS_ENTROPY_GRAD:
        s = cpu_cross_entropy(cb, g, id, in, out, err);
        break;
    case BRISK_OP_MSE: case BRISK_OP_MSE_GRAD: s = cpu_mse(cb, g, id, in, out, err); break;
    case BRISK_OP_POINTWISE_LOSS: case BRISK_OP_POINTWISE_LOSS_GRAD:
        s = cpu_pointwise_loss(cb, g, id, in, out, err);
        break;
    case BRISK_OP_LAYERNORM: case BRISK_OP_LAYERNORM_GRAD_X: case BRISK_OP_LAYERNORM_XHAT:
        s = cpu_layernorm(cb, g, id, in, out, err);
        break;
    case BRISK_OP_EXPAND: case BRISK_OP_CONCAT: case BRISK_OP_SLICE: case BRISK_OP_SLICE_GRAD:
    case BRISK_OP_TRANSPOSE:
        s = cpu_shape_op(cb, g, id, in, out, err);
        break;
    case BRISK_OP_CAST: s = cpu_cast(cb, g, id, in, out, err); break;
    case BRISK_OP_GATHER: case BRISK_OP_SCATTER_ADD: case BRISK_OP_SINUSOIDAL:
    case BRISK_OP_SINUSOIDAL_GRAD: case BRISK_OP_SEGMENT_SUM:
        s = cpu_gather_op(cb, g, id, in, out, err);
        break;
    case BRISK_OP_GRAD_ACCUM: s = cpu_grad_accum(cb, g, id, in, out, st, err); break;
    case BRISK_OP_LSTM: case BRISK_OP_LSTM_GRAD: case BRISK_OP_LSTM_GRAD_W:
        s = cpu_lstm_op(cb, g, id, in, out, err);
        break;
    case BRISK_OP_GRU: case BRISK_OP_GRU_GRAD: case BRISK_OP_GRU_GRAD_W: s = cpu_gru_op(cb, g, id, in, out, err); break;
    case BRISK_OP_ATTENTION: case BRISK_OP_ATTENTION_GRAD: s = cpu_attention_op(cb, g, id, in, out, st, err); break;
    case BRISK_OP_CONV2D: case BRISK_OP_CONV2D_GRAD_X: case BRISK_OP_CONV2D_GRAD_W:
        s = cpu_conv_op(cb, g, id, in, out, err);
        break;
    case BRISK_OP_BATCHNORM: case BRISK_OP_BATCHNORM_GRAD_GB: case BRISK_OP_BATCHNORM_GRAD_X:
        s = cpu_batchnorm_op(cb, g, id, in, out, st, err);
        break;
    case BRISK_OP_POOL2D: case BRISK_OP_POOL2D_GRAD: s = cpu_pool_op(cb, g, id, in, out, err); break;
    case BRISK_OP_UPSAMPLE2D: case BRISK_OP_UPSAMPLE2D_GRAD: s = cpu_upsample_op(cb, g, id, in, out, err); break;
    default:
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "cpu backend: no kernel for %s (node %d)",
                            brisk_op_name(n->op), id);
    }
    return s;
}

static brisk_status cpu_sync(brisk_backend *be, brisk_error *err) { (void)be; (void)err; return BRISK_OK; }

static void cpu_destroy(brisk_backend *be) {
    if (!be) return;
    cpu_backend *cb = be->impl;
    if (cb) {
        cpu_forget(be, NULL);
        cpu_pool_free(cb->pool);
        free(cb->gemm_scratch);
        free(cb->partials);
        free(cb->conv_scratch);
        free(cb);
    }
    free(be);
}

double brisk_backend_cpu_pool_note(const brisk_backend *be, char *buf, size_t n) {
    if (n) buf[0] = 0;
    if (!be || !be->name || strcmp(be->name, "cpu") != 0) return -1;
    const cpu_backend *cb = be->impl;
    if (!cb->pool) return -1;
    cpu_pool_stats s = cpu_pool_get_stats(cb->pool);
    double share = s.jobs ? (double)s.solo_jobs / (double)s.jobs : 0;
    if (s.solo_jobs && n)
        snprintf(buf, n, "ran on 1 of %d threads for %.0f %% of parallel jobs (%lld pauses): other programs held "
                 "the cores", cb->threads, 100 * share, (long long)s.throttles);
    return share;
}

/* The run report's rows for what the CPU backend does for speed. Each detail has its own
 * buffer: the rows are read after this returns. */
static void cpu_optimizations(brisk_backend *be, brisk_backend_row_fn row, void *user) {
    char fus[512], pool[256], huge[160], pages[256], gemm[600];
    brisk_backend_cpu_fusions(be, fus, sizeof fus);
    if (strncmp(fus, "on (", 4) == 0) {
        size_t n = strlen(fus);
        if (fus[n - 1] == ')') fus[n - 1] = 0;
        row(user, "CPU fusion", "on", fus + 4);
    } else if (fus[0]) {
        row(user, "CPU fusion", "off", "speed.fuse is false (--no-fuse) or BRISK_CPU_FUSE=0");
    }
    const cpu_backend *cb = be->impl;
    char wino[256];
    if (cb->convs > 0) {
        snprintf(wino, sizeof wino, "%d of the step's %d convolution passes (forward, input and weight gradients) "
                 "by Winograd F(4, k)%s", cb->convs_winograd, cb->convs,
                 cb->conv_winograd ? " (1-D kernels of 2 to 5 taps, stride 1; the others im2col + GEMM)"
                                   : ": BRISK_CPU_WINOGRAD=0, all im2col + GEMM");
        row(user, "Winograd convolutions", cb->convs_winograd > 0 ? "on" : "off", wino);
    }
    if (brisk_backend_cpu_pool_note(be, pool, sizeof pool) > 0) row(user, "CPU pool throttle", "on", pool);
    int never = 0;
    if (brisk_backend_cpu_huge_pages(huge, sizeof huge, &never) >= 0) {
        snprintf(pages, sizeof pages, "%s for the buffers of 4 MiB or more, now %s",
                 never ? "not given: the kernel's transparent_hugepage is never" : "asked", huge);
        row(user, "2 MiB pages", never ? "off" : "on", pages);
    }
    brisk_cpu_gemm_stats gs;
    brisk_cpu_gemm_get_stats(&gs);
    brisk_cpu_gemm_describe(gemm, sizeof gemm);
    row(user, "GEMM kernel per shape",
        gs.mode == BRISK_CPU_GEMM_AUTO && strstr(gemm, "without a BLAS") == NULL ? "on" : "off", gemm);
}

brisk_backend *brisk_backend_cpu_new(int threads) {
    brisk_backend *be = calloc(1, sizeof *be);
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!be || !cb) { free(be); free(cb); return NULL; }
    if (threads <= 0) {
        brisk_thread_plan tp;
        brisk_threads_resolve(0, NULL, &tp);
        threads = tp.threads;
    }
    cb->threads = threads < 1 ? 1 : threads;
    cb->conv_col_floats = CPU_CONV_COL_FLOATS;
    const char *wino = getenv("BRISK_CPU_WINOGRAD");
    cb->conv_winograd = !(wino && strcmp(wino, "0") == 0);
    const char *fuse = getenv("BRISK_CPU_FUSE");
    cb->fuse = !(fuse && strcmp(fuse, "0") == 0);
    size_t bytes = cpu_sgemm_scratch_floats() * sizeof(float) * (size_t)cb->threads;
    if (posix_memalign((void **)&cb->gemm_scratch, 64, bytes) != 0) {
        free(be); free(cb);
        return NULL;
    }
    if (cb->threads > 1 && !(cb->pool = cpu_pool_new(cb->threads))) {
        free(cb->gemm_scratch); free(be); free(cb);
        return NULL;
    }
#if BRISK_HAVE_BLAS
    openblas_set_num_threads(1);
#endif
    be->name = "cpu";
    be->host_memory = 1;
    be->impl = cb;
    be->alloc = cpu_alloc;
    be->free = cpu_free;
    be->upload = cpu_copy;
    be->download = cpu_copy;
    be->memset0 = cpu_memset0;
    be->run_node = cpu_run_node;
    be->supports_op = cpu_supports_op;
    be->grad_sumsq = cpu_grad_sumsq;
    be->optim_update = cpu_optim_update;
    be->sync = cpu_sync;
    be->prepare = cpu_prepare;
    be->forget = cpu_forget;
    be->note = cpu_note;
    be->optimizations = cpu_optimizations;
    be->destroy = cpu_destroy;
    return be;
}
