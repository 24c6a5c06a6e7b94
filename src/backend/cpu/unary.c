/* Unary elementwise kernels, f32, C-contiguous (exact in place: each element is read
 * before it is written):
 *   SCALE       out = f0 x + f1
 *   activations RELU, GELU (erf or tanh form, as PyTorch defines them), SILU, TANH,
 *               SIGMOID, LEAKY_RELU (f0 slope), ELU (f0 alpha), SOFTPLUS (f0 beta,
 *               f1 threshold)
 *   math        EXP, LOG, SQRT, ABS, POW (f0 the exponent), CLAMP (f0, f1 the bounds), ERF
 *   ACT_GRAD    out = dy * f'(x) for the forward op in attr.kind, its attributes in f0, f1
 *               (y = f(x) is given too, for the derivatives that read it)
 * Each element's formula has one definition (cpu_math.h, or here) that the GEMM epilogues
 * of fuse.c run too (cpu_act_span, cpu_act_grad_span), so fused and unfused runs give the
 * same bits. Derivatives and the values at the kinks are PyTorch's: abs'(0) = 0, clamp
 * passes the gradient on [lo, hi] inclusive, sqrt'(0) = inf, (x^0)' = 0. */
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_math.h"

cpu_act cpu_act_of(const brisk_node *n) {
    cpu_act a = {.op = (int)n->op, .a = n->attr.f0, .b = n->attr.f1};
    if (n->op == BRISK_OP_ACT_GRAD) a.op = n->attr.kind, a.gelu_tanh = n->attr.i1 == BRISK_GELU_TANH;
    else a.gelu_tanh = n->op == BRISK_OP_GELU && n->attr.kind == BRISK_GELU_TANH;
    return a;
}

#define CPU_TWO_OVER_SQRT_PI 1.1283791670955126f /* erf's derivative: 2/sqrt(pi) e^(-x^2) */

/* x^p for a constant p, with PyTorch's special cases (its pow kernel takes these exponents
 * apart from powf, and so the results and their gradients match its bits there) */

static inline float pow_const(float x, float p) {
    if (p == 2.0f) return x * x;
    if (p == 3.0f) return x * x * x;
    if (p == 1.0f) return x;
    if (p == 0.0f) return 1.0f;
    if (p == 0.5f) return sqrtf(x);
    if (p == -0.5f) return 1.0f / sqrtf(x);
    if (p == -1.0f) return 1.0f / x;
    if (p == -2.0f) return 1.0f / (x * x);
    return powf(x, p);
}

void cpu_act_span(const cpu_act *act, const float *restrict x, float *restrict o, int64_t n) {
    float a = act->a, b = act->b;
    switch (act->op) {
    case BRISK_OP_SCALE:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = a * x[i] + b;
        break;
    case BRISK_OP_RELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_relu(x[i]);
        break;
    case BRISK_OP_GELU:
        if (act->gelu_tanh) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_tanh(x[i]);
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_erf(x[i]);
        }
        break;
    case BRISK_OP_SILU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_silu(x[i]);
        break;
    case BRISK_OP_TANH:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_tanhf(x[i]);
        break;
    case BRISK_OP_SIGMOID:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_sigmoidf(x[i]);
        break;
    case BRISK_OP_LEAKY_RELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_leaky_relu(x[i], a);
        break;
    case BRISK_OP_ELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_elu(x[i], a);
        break;
    case BRISK_OP_SOFTPLUS:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_softplus(x[i], a, b);
        break;
    case BRISK_OP_EXP:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_expf(x[i]);
        break;
    case BRISK_OP_LOG:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_logf(x[i]);
        break;
    case BRISK_OP_SQRT:
        for (int64_t i = 0; i < n; i++) o[i] = sqrtf(x[i]);
        break;
    case BRISK_OP_ABS:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = fabsf(x[i]);
        break;
    case BRISK_OP_POW:
        for (int64_t i = 0; i < n; i++) o[i] = pow_const(x[i], a);
        break;
    case BRISK_OP_ERF: /* glibc's erff: within an ulp, as PyTorch's */
        for (int64_t i = 0; i < n; i++) o[i] = erff(x[i]);
        break;
    default: /* CLAMP: min(max(x, lo), hi) in compares that keep a NaN */
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] < a ? a : x[i];
            o[i] = v > b ? b : v;
        }
        break;
    }
}

/* No restrict: the fused GEMM epilogue (fuse.c) runs it in place, o == dy; each element is
 * read before it is written, which `omp simd` keeps. */
void cpu_act_grad_span(const cpu_act *act, const float *dy, const float *x, const float *y, float *o, int64_t n) {
    float a = act->a, b = act->b;
    switch (act->op) {
    case BRISK_OP_RELU: /* from the output, positive exactly where the input is (NaN and -0 included):
                           a fused ReLU need not write its input (graph/fusion.c's relu_writes_pre) */
        (void)x;
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case BRISK_OP_GELU:
        if (act->gelu_tanh) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_tanh_grad(dy[i], x[i]);
        } else {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) o[i] = cpu_gelu_erf_grad(dy[i], x[i]);
        }
        break;
    case BRISK_OP_SILU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_silu_grad(dy[i], x[i]);
        break;
    case BRISK_OP_TANH:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case BRISK_OP_SIGMOID:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    case BRISK_OP_LEAKY_RELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0.0f ? dy[i] : dy[i] * a;
        break;
    case BRISK_OP_ELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_elu_grad(dy[i], x[i], a);
        break;
    case BRISK_OP_SOFTPLUS:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = cpu_softplus_grad(dy[i], x[i], a, b);
        break;
    case BRISK_OP_EXP:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * y[i];
        break;
    case BRISK_OP_LOG:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] / x[i];
        break;
    case BRISK_OP_SQRT:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] / (2.0f * y[i]);
        break;
    case BRISK_OP_ABS: /* sign(x) dy: 0 at 0 and for a NaN x, as torch's sgn */
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0.0f ? dy[i] : x[i] < 0.0f ? -dy[i] : 0.0f;
        break;
    case BRISK_OP_POW:
        for (int64_t i = 0; i < n; i++) o[i] = a == 0.0f ? 0.0f : dy[i] * (a * pow_const(x[i], a - 1.0f));
        break;
    case BRISK_OP_ERF:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = dy[i] * (CPU_TWO_OVER_SQRT_PI * cpu_expf(-x[i] * x[i]));
        break;
    default: /* CLAMP */
#pragma omp simd
        for (int64_t i = 0; i < n; i++) o[i] = x[i] >= a && x[i] <= b ? dy[i] : 0.0f;
        break;
    }
}

typedef struct unary_ctx {
    cpu_act act;
    const float *x, *dy, *y;
    float *out;
} unary_ctx;

static void unary_range(const void *vctx, int64_t i0, int64_t i1) {
    const unary_ctx *c = vctx;
    cpu_act_span(&c->act, c->x + i0, c->out + i0, i1 - i0);
}

/* ops whose elements take a few operations: threads pay only on longer loops */
static int light(int op) {
    return op == BRISK_OP_SCALE || op == BRISK_OP_RELU || op == BRISK_OP_LEAKY_RELU || op == BRISK_OP_ABS ||
           op == BRISK_OP_CLAMP;
}

brisk_status cpu_unary(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                       void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int64_t len = cpu_numel(&n->shape);
    if (cpu_numel(&IN_NODE(g, id, 0)->shape) != len)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: input and output sizes differ", brisk_op_name(n->op));
    unary_ctx c = {.act = cpu_act_of(n), .x = in[0], .out = out};
    cpu_parallel(cb, len, light(n->op) ? CPU_PAR_MIN : CPU_PAR_MIN_HEAVY, unary_range, &c);
    return BRISK_OK;
}

static void act_grad_range(const void *vctx, int64_t i0, int64_t i1) {
    const unary_ctx *c = vctx;
    cpu_act_grad_span(&c->act, c->dy + i0, c->x + i0, c->y + i0, c->out + i0, i1 - i0);
}

brisk_status cpu_act_grad(cpu_backend *cb, const brisk_graph *g, int id, const void *const *in,
                          void *out, brisk_error *err) {
    const brisk_node *n = NODE(g, id);
    int kind = n->attr.kind;
    if (!brisk_act_grad_kind_ok(kind))
        return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad: attr.kind %d is not an activation op", kind);
    if (n->n_in < 3)
        return brisk_errorf(err, BRISK_ERR_INVALID, "act_grad: needs (dy, x, y), got %d inputs", n->n_in);
    int64_t len = cpu_numel(&n->shape);
    for (int k = 0; k < 3; k++)
        if (cpu_numel(&IN_NODE(g, id, k)->shape) != len)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "act_grad: input %d size differs from the output", k);
    unary_ctx c = {.act = cpu_act_of(n), .dy = in[0], .x = in[1], .y = in[2], .out = out};
    cpu_parallel(cb, len, light(kind) ? CPU_PAR_MIN : CPU_PAR_MIN_HEAVY, act_grad_range, &c);
    return BRISK_OK;
}
