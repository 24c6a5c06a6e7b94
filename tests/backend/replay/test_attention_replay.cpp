/* The CUDA attention kernels (src/backend/cuda/k_attention.cu, compiled here as C++ against
 * the replay runtime of cuda_runtime.h) run on the host, every CUDA thread a fiber,
 * through their real launchers, against the CPU backend's ATTENTION and ATTENTION_GRAD on
 * the same inputs: out, lse and dqkv within 1e-5 / 1e-4 relative norm, dropout included
 * (the factors are drawn from the same Philox elements, so a wrong element index shows as
 * an error of order p). Runs without a GPU: it checks the kernels' index math, tiling,
 * masks, online softmax, dropout indexing and shuffle uniformity (a shuffle some lanes
 * skip hangs; the test's timeout catches it), and that every launch stays within 48 KiB of
 * shared memory and 128 threads. What it cannot check: timing, the memory model, races. */
#include "cuda_runtime.h"

#include "backend/cuda/k_attention.cu"

#include "brisk/brisk.h"

#include <cstdio>
#include <cstdlib>

static int failures;
static size_t max_smem;
static unsigned max_threads;

typedef void (*attn_kernel)(cuk_attn_args, const cuda_values *);

cudaError_t cudaLaunchKernel(const void *fn, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t) {
    if (smem > 48 * 1024 || block.x % 32 || block.x > 128 || block.y != 1 || grid.y > 65535)
        return cudaErrorInvalidConfiguration;
    if (smem > max_smem) max_smem = smem;
    if (block.x > max_threads) max_threads = block.x;
    attn_kernel k = (attn_kernel)fn;
    const cuk_attn_args a = *(const cuk_attn_args *)args[0];
    const cuda_values *v = *(const cuda_values *const *)args[1];
    gridDim = grid;
    blockDim = block;
    replay::body = [=] { k(a, v); };
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

int main() {
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
    if (max_threads > 128 || max_smem > 48 * 1024) FAIL("launches up to %u threads, %zu bytes", max_threads, max_smem);
    printf("largest launch: %u threads, %zu bytes of shared memory\n", max_threads, max_smem);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
