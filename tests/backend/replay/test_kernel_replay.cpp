/* The CUDA kernels of k_attention.cu and k_layernorm_residual.cu, compiled here as C++
 * against the replay runtime of cuda_runtime.h, run on the host (every CUDA thread a
 * fiber) through their real launchers, against the CPU backend on the same inputs:
 *   attention: out, lse and dqkv within 1e-5 / 1e-4 relative norm, dropout included (the
 *     factors are drawn from the same Philox elements, so a wrong element index shows as
 *     an error of order p);
 *   residual add + layernorm, layernorm gradient + residual add: the sum bit for bit, the
 *     rest within 1e-6.
 * Runs without a GPU: it checks the kernels' index math, tiling, masks, online softmax,
 * dropout indexing and shuffle uniformity (a shuffle some lanes skip hangs; the test's
 * timeout catches it), and that every attention launch stays within 48 KiB of shared
 * memory and 128 threads. What it cannot check: timing, the memory model, races. */
#include "cuda_runtime.h"

#include "backend/cuda/k_attention.cu"
#include "backend/cuda/k_layernorm_residual.cu"

#include "brisk/brisk.h"

#include <cstdio>
#include <cstdlib>

static int failures;
static size_t max_smem;
static unsigned max_threads;

typedef void (*attn_kernel)(cuk_attn_args, const cuda_values *);

template <typename T> static T arg(void **args, int i) { return *(T *)args[i]; }

cudaError_t cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t) {
    if (smem > 48 * 1024 || block.x % 32 || block.x > 1024 || block.y != 1 || grid.y > 65535)
        return cudaErrorInvalidConfiguration;
    if (fn == (const void *)k_add_layernorm) {
        auto x = arg<const float *>(args, 0), r = arg<const float *>(args, 1), g = arg<const float *>(args, 3),
             b = arg<const float *>(args, 4);
        auto s = arg<float *>(args, 2), y = arg<float *>(args, 5);
        auto rows = arg<int64_t>(args, 6), n = arg<int64_t>(args, 7);
        auto eps = arg<float>(args, 8);
        replay::body = [=] { k_add_layernorm(x, r, s, g, b, y, rows, n, eps); };
    } else if (fn == (const void *)k_layernorm_grad_add) {
        auto dy = arg<const float *>(args, 0), x = arg<const float *>(args, 1), g = arg<const float *>(args, 2),
             r = arg<const float *>(args, 3);
        auto o = arg<float *>(args, 4);
        auto rows = arg<int64_t>(args, 5), n = arg<int64_t>(args, 6);
        auto eps = arg<float>(args, 7);
        replay::body = [=] { k_layernorm_grad_add(dy, x, g, r, o, rows, n, eps); };
    } else {
        if (block.x > 128) return cudaErrorInvalidConfiguration; /* the attention kernels' launch bounds */
        if (smem > max_smem) max_smem = smem;
        if (block.x > max_threads) max_threads = block.x;
        attn_kernel k = (attn_kernel)fn;
        const cuk_attn_args a = *(const cuk_attn_args *)args[0];
        const cuda_values *v = *(const cuda_values *const *)args[1];
        replay::body = [=] { k(a, v); };
    }
    gridDim = grid;
    blockDim = block;
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            blockIdx = dim3(bx, by);
            memset(sh, 0xff, smem); /* NaN: a read of shared memory nobody wrote shows */
            replay::run_block();
        }
    return cudaSuccess;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float uniform(float lo, float hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) * (1.0 / 16777216.0));
}

static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (std::isnan(a[i]) != std::isnan(b[i]) || std::isinf(a[i]) != std::isinf(b[i])) return INFINITY;
        if (std::isinf(b[i])) continue;
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), failures++)

static void replay_case(int64_t B, int64_t T, int64_t dh, int heads, int causal, int masked, float p) {
    int64_t D = dh * heads;
    char what[128];
    snprintf(what, sizeof what, "B %lld T %lld dh %lld heads %d causal %d mask %d dropout %g", (long long)B,
             (long long)T, (long long)dh, heads, causal, masked, (double)p);
    brisk_error err = {};
    brisk_graph *g = brisk_graph_new();
    int qkv = brisk_input(g, "qkv", BRISK_F32, brisk_shape3(B, T, 3 * D));
    int mask = masked ? brisk_input(g, "mask", BRISK_F32, brisk_shape2(B, T)) : -1;
    int dy = brisk_input(g, "dy", BRISK_F32, brisk_shape3(B, T, D));
    int att = brisk_attention(g, qkv, mask, heads, causal, p);
    int ids[4] = {dy, qkv, att, mask};
    int grad = att < 0 ? -1 : brisk_graph_append(g, BRISK_OP_ATTENTION_GRAD, ids, masked ? 4 : 3, BRISK_F32,
                                                  g->nodes[qkv].shape, &g->nodes[att].attr);
    if (grad < 0 || brisk_graph_error(g, &err)) {
        FAIL("%s: building: %s", what, err.msg);
        brisk_graph_free(g);
        return;
    }
    g->nodes[att].keep = 1;
    g->loss = g->output = grad;
    size_t nq = (size_t)(B * T * 3 * D), no = (size_t)(B * T * D), nl = (size_t)(B * heads * T);
    std::vector<float> hq(nq), hm(B * T), hdy(no);
    for (auto &x : hq) x = uniform(-1.5f, 1.5f);
    for (auto &x : hdy) x = uniform(-1, 1);
    for (int64_t b = 0; b < B; b++) /* key 0 of sample 0 padding: under causal, query 0 sees nothing */
        for (int64_t j = 0; j < T; j++) hm[b * T + j] = b == 1 || (7 * j + 3 * b) % 5 == 0 ? 0.0f : 1.0f;
    brisk_backend *cpu = brisk_backend_cpu_new(2);
    brisk_plan plan;
    brisk_exec *ex = nullptr;
    std::vector<float> cpu_att(no + nl), cpu_grad(nq); /* out, then the lse workspace behind it */
    brisk_step_state st = {};
    st.seed = 0x1234567890abcdefull, st.rng_step = 11, st.first_micro = 1, st.training = 1;
    int in_dy = masked ? 2 : 1;
    if (brisk_plan_build(g, &plan, &err) || brisk_exec_create(g, &plan, cpu, &ex, &err) ||
        brisk_exec_set_input(ex, 0, hq.data(), &err) || (masked && brisk_exec_set_input(ex, 1, hm.data(), &err)) ||
        brisk_exec_set_input(ex, in_dy, hdy.data(), &err) || ((ex->step = st), brisk_exec_run(ex, BRISK_RUN_TRAIN, &err)) ||
        brisk_exec_read(ex, att, cpu_att.data(), &err) || brisk_exec_read(ex, grad, cpu_grad.data(), &err)) {
        FAIL("%s: CPU run: %s", what, err.msg);
    } else {
        memcpy(cpu_att.data() + no, (const float *)ex->ptr[att] + no, nl * sizeof(float)); /* host memory */
        cuda_values vals = {};
        vals.seed = st.seed, vals.rng_step = st.rng_step, vals.first_micro = 1, vals.training = 1;
        cuk_attn_args a = {};
        a.B = B, a.T = T, a.D = D, a.heads = heads, a.dh = dh, a.causal = causal;
        a.scale = 1.0f / sqrtf((float)dh);
        a.p = p, a.keep_scale = 1.0f / (1.0f - p), a.stream = g->nodes[att].attr.rng;
        a.qkv = hq.data(), a.mask = masked ? hm.data() : nullptr;
        std::vector<float> out(no + nl, NAN), dq(nq, NAN);
        a.out = out.data(), a.lse = out.data() + no, a.dy = hdy.data(), a.dqkv = dq.data();
        if (cuk_attention(&a, &vals, nullptr) != cudaSuccess || cuk_attention_grad(&a, &vals, nullptr) != cudaSuccess) {
            FAIL("%s: a launch was refused", what);
        } else {
            double eo = rel_err(out.data(), cpu_att.data(), no), el = rel_err(out.data() + no, cpu_att.data() + no, nl);
            double eg = rel_err(dq.data(), cpu_grad.data(), nq);
            if (!(eo <= 1e-5 && el <= 1e-5 && eg <= 1e-4))
                FAIL("%s: out %.3g lse %.3g dqkv %.3g", what, eo, el, eg);
            else
                printf("ok   %s: out %.2g lse %.2g dqkv %.2g\n", what, eo, el, eg);
        }
    }
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    cpu->destroy(cpu);
    brisk_graph_free(g);
}

/* add + layernorm and layernorm gradient + add against the CPU's ADD, LAYERNORM,
 * LAYERNORM_GRAD_X and ADD on the same data: the sum bit for bit, the rest within 1e-6 */
static void residual_case(int64_t rows, int64_t n) {
    char what[64];
    snprintf(what, sizeof what, "residual layernorm rows %lld n %lld", (long long)rows, (long long)n);
    brisk_error err = {};
    brisk_graph *g = brisk_graph_new();
    brisk_shape sh2 = brisk_shape2(rows, n), sv = brisk_shape1(n);
    int x = brisk_input(g, "x", BRISK_F32, sh2), r = brisk_input(g, "r", BRISK_F32, sh2);
    int ga = brisk_input(g, "gamma", BRISK_F32, sv), be = brisk_input(g, "beta", BRISK_F32, sv);
    int dy = brisk_input(g, "dy", BRISK_F32, sh2), r2 = brisk_input(g, "r2", BRISK_F32, sh2);
    int s = brisk_add(g, x, r), y = brisk_layernorm(g, s, ga, be, 1e-5f);
    brisk_attr at = g->nodes[y].attr;
    int qin[3] = {dy, s, ga}; /* the norm's gradient, of the sum as in a real graph */
    int q = brisk_graph_append(g, BRISK_OP_LAYERNORM_GRAD_X, qin, 3, BRISK_F32, sh2, &at);
    int o = brisk_add(g, r2, q);
    int outs[3] = {s, y, o};
    for (int k : outs) g->nodes[k].keep = 1;
    g->loss = o;
    g->output = y;
    size_t m = (size_t)(rows * n);
    std::vector<float> h[6];
    for (int i = 0; i < 6; i++) {
        h[i].resize(i == 2 || i == 3 ? n : m);
        for (auto &v : h[i]) v = uniform(-2, 2) + (i == 0 ? 300.0f : 0.0f); /* |mean| >> std in x */
    }
    brisk_backend *cpu = brisk_backend_cpu_new(2);
    brisk_plan plan;
    brisk_exec *ex = nullptr;
    std::vector<float> cs(m), cy(m), co(m);
    brisk_status st = brisk_plan_build(g, &plan, &err);
    if (!st) st = brisk_exec_create(g, &plan, cpu, &ex, &err);
    for (int i = 0; i < 6 && !st; i++) st = brisk_exec_set_input(ex, i, h[i].data(), &err);
    if (!st) st = brisk_exec_run(ex, BRISK_RUN_TRAIN, &err);
    if (!st) st = brisk_exec_read(ex, s, cs.data(), &err);
    if (!st) st = brisk_exec_read(ex, y, cy.data(), &err);
    if (!st) st = brisk_exec_read(ex, o, co.data(), &err);
    if (st) {
        FAIL("%s: CPU run: %s", what, err.msg);
    } else {
        std::vector<float> gs(m, NAN), gy(m, NAN), go(m, NAN);
        if (cuk_add_layernorm(h[0].data(), h[1].data(), gs.data(), h[2].data(), h[3].data(), gy.data(), rows, n, 1e-5f,
                              nullptr) ||
            cuk_layernorm_grad_add(h[4].data(), cs.data(), h[2].data(), h[5].data(), go.data(), rows, n, 1e-5f,
                                   nullptr)) {
            FAIL("%s: a launch was refused", what);
        } else {
            double ey = rel_err(gy.data(), cy.data(), m), eo = rel_err(go.data(), co.data(), m);
            int same = memcmp(gs.data(), cs.data(), m * sizeof(float)) == 0;
            if (!same || !(ey <= 1e-6 && eo <= 1e-6)) FAIL("%s: sum %s, y %.3g, d %.3g", what, same ? "same" : "DIFFERS", ey, eo);
            else printf("ok   %s: y %.2g, d %.2g\n", what, ey, eo);
        }
    }
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    cpu->destroy(cpu);
    brisk_graph_free(g);
}

int main() {
    residual_case(5, 3); /* n = 1 has a zero gradient that FMA contraction turns into noise */
    residual_case(37, 31);
    residual_case(9, 128);
    residual_case(3, 300);
    /* dh 8, 32, 64, 128 (one to four values per lane, the 2-warp backward at 128); T across
     * one key tile, several, a partial last tile and the forward's 16-query tiles */
    replay_case(2, 1, 8, 2, 0, 0, 0.0f);
    replay_case(3, 7, 32, 2, 1, 1, 0.25f);
    replay_case(2, 60, 32, 4, 0, 0, 0.1f);
    replay_case(2, 60, 64, 1, 1, 0, 0.0f);
    replay_case(2, 45, 128, 1, 0, 1, 0.3f);
    replay_case(1, 129, 8, 2, 1, 0, 0.2f);
    replay_case(2, 33, 12, 3, 1, 1, 0.0f);
    replay_case(1, 70, 100, 1, 0, 0, 0.5f);
    for (int kernel = 0; kernel < 3; kernel++) /* every head dim the kernels take, replayed or not */
        for (int64_t dh = 1; dh <= CUK_ATTN_MAX_DH; dh++) {
            int nw = 0;
            size_t bytes = cuk_attention_smem(kernel, dh, &nw);
            if (bytes > 48 * 1024 || nw < 2) FAIL("attention kernel %d, dh %lld: %zu bytes, %d warps", kernel, (long long)dh, bytes, nw);
        }
    if (max_threads > 128 || max_smem > 48 * 1024) FAIL("launches up to %u threads, %zu bytes", max_threads, max_smem);
    printf("largest launch: %u threads, %zu bytes of shared memory\n", max_threads, max_smem);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
