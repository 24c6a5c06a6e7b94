/* Microbenchmark of the CPU conv kernels (not a test) at ResNet-18's layer shapes: each
 * distinct convolution of bench/reference/models.py's ResNet18Keypoints at the small workload size
 * (batch 4, 3x64x64) or the full one (batch 16, 3x256x256), forward (CONV2D), grad x and
 * grad w, in microseconds (median of repeats) and GFLOP/s, and the whole network's conv
 * time per step (each layer times how often it occurs; the stem's grad x is not needed); then
 * the stem's BatchNorm + ReLU and max pool, forward and backward.
 * Compare with the same shapes in PyTorch: bench/conv_layers_torch.py.
 *
 *   cmake --build build --target bench_conv_layers && build/bench/bench_conv_layers [threads] [full | 1d]
 * (1d: examples/cnn1d.json's two 1-D convolutions instead; the first layer's dx is not needed
 * there either) */
#include "brisk/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}
/* buffers on 2 MiB pages where they can be, as brisk's arena asks for them (a convolution's rows
 * of one channel in many images are a page apart each) */
static float *buffer(size_t floats) {
    size_t bytes = (floats * 4 + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, bytes)) abort();
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct layer { const char *what; int64_t cin, cout, hw, k, stride, count; } layer;

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 0, full = argc > 2 && strcmp(argv[2], "full") == 0;
    int one_d = argc > 2 && strcmp(argv[2], "1d") == 0;
    int64_t N = full ? 16 : 4, s0 = full ? 256 : 64; /* input side; the stem halves it, the max pool again */
    const layer ls[] = {
        {"stem 7x7/2     ", 3, 64, s0, 7, 2, 1},
        {"l1 3x3 64      ", 64, 64, s0 / 4, 3, 1, 4},
        {"l2 3x3/2 64>128", 64, 128, s0 / 4, 3, 2, 1},
        {"l2 3x3 128     ", 128, 128, s0 / 8, 3, 1, 3},
        {"l2 down 1x1/2  ", 64, 128, s0 / 4, 1, 2, 1},
        {"l3 3x3/2 >256  ", 128, 256, s0 / 8, 3, 2, 1},
        {"l3 3x3 256     ", 256, 256, s0 / 16, 3, 1, 3},
        {"l3 down 1x1/2  ", 128, 256, s0 / 8, 1, 2, 1},
        {"l4 3x3/2 >512  ", 256, 512, s0 / 16, 3, 2, 1},
        {"l4 3x3 512     ", 512, 512, s0 / 32, 3, 1, 3},
        {"l4 down 1x1/2  ", 256, 512, s0 / 16, 1, 2, 1},
    };
    /* "1d": examples/cnn1d.json's two convolutions ([1, 5] kernels along 60 and 30 steps, batch
     * 256; Winograd unless BRISK_CPU_WINOGRAD=0) */
    const layer ls1[] = {{"cnn1d conv1    ", 32, 64, 60, 5, 1, 1}, {"cnn1d conv2    ", 64, 64, 30, 5, 1, 1}};
    if (one_d) N = 256;
    brisk_backend *be = brisk_backend_cpu_new(threads);
    printf("conv layers, batch %lld, input %lldx%lld (threads %s)\n", (long long)N, (long long)s0, (long long)s0,
           argc > 1 ? argv[1] : "default");
    printf("layer             fwd us  GF/s   dx us  GF/s   dw us  GF/s\n");
    double total = 0;
    size_t nl = one_d ? 2 : sizeof ls / sizeof ls[0];
    for (size_t l = 0; l < nl; l++) {
        const layer *L = one_d ? &ls1[l] : &ls[l];
        brisk_graph *g = brisk_graph_new();
        int64_t kh = one_d ? 1 : L->k, hi = one_d ? 1 : L->hw;
        brisk_window win = brisk_window_2d((int)L->k, (int)L->stride, (int)(L->k / 2));
        if (one_d) win.kh = 1, win.ph = 0;
        int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(N, L->cin, hi, L->hw));
        int w = brisk_input(g, "w", BRISK_F32, brisk_shape4(L->cout, L->cin, kh, L->k));
        int y = brisk_conv2d(g, x, w, win);
        int dy = brisk_input(g, "dy", BRISK_F32, g->nodes[y].shape);
        const brisk_attr *at = &g->nodes[y].attr;
        int i1[2] = {dy, w}, i2[2] = {dy, x};
        int gx = brisk_graph_append(g, BRISK_OP_CONV2D_GRAD_X, i1, 2, BRISK_F32, g->nodes[x].shape, at);
        int gw = brisk_graph_append(g, BRISK_OP_CONV2D_GRAD_W, i2, 2, BRISK_F32, g->nodes[w].shape, at);
        void *buf[16] = {0};
        for (int i = 0; i < g->n_nodes; i++) {
            size_t n = g->nodes[i].bytes / 4;
            float *p = buffer(n);
            for (size_t k = 0; k < n; k++) p[k] = (float)rand() / RAND_MAX - 0.5f;
            buf[i] = p;
        }
        int ops[3] = {y, gx, gw};
        double us[3];
        const brisk_node *yn = &g->nodes[y];
        double flop = 2.0 * (double)brisk_shape_numel(&yn->shape) * L->cin * kh * L->k;
        brisk_error err;
        for (int o = 0; o < 3; o++) {
            const brisk_node *n = &g->nodes[ops[o]];
            const void *in[2] = {buf[n->in[0]], buf[n->in[1]]};
            double s[9];
            int inner = flop < 2e7 ? 20 : 3;
            be->run_node(be, g, ops[o], in, buf[ops[o]], NULL, &err); /* warm */
            for (int r = 0; r < 9; r++) {
                double t0 = now_us();
                for (int i = 0; i < inner; i++)
                    if (be->run_node(be, g, ops[o], in, buf[ops[o]], NULL, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
                s[r] = (now_us() - t0) / inner;
            }
            qsort(s, 9, sizeof s[0], cmp_d);
            us[o] = s[4];
        }
        printf("%s %8.0f %5.1f %7.0f %5.1f %7.0f %5.1f\n", L->what, us[0], flop / us[0] * 1e-3, us[1],
               flop / us[1] * 1e-3, us[2], flop / us[2] * 1e-3);
        total += L->count * (us[0] + (l ? us[1] : 0) + us[2]);
        for (int i = 0; i < g->n_nodes; i++) free(buf[i]);
        brisk_graph_free(g);
    }
    printf("all convs of one step (fwd + dx + dw, by count): %.1f ms\n", total * 1e-3);
    if (one_d) {
        be->destroy(be);
        return 0;
    }

    /* the stem's BatchNorm + ReLU (training) and 3x3/2 max pool, forward and backward */
    int64_t S = s0 / 2;
    brisk_graph *g = brisk_graph_new();
    brisk_shape xs = brisk_shape4(N, 64, S, S), cs = brisk_shape1(64);
    int x = brisk_input(g, "x", BRISK_F32, xs), dy = brisk_input(g, "dy", BRISK_F32, xs);
    int gm = brisk_input(g, "g", BRISK_F32, cs), bt = brisk_input(g, "b", BRISK_F32, cs);
    int rm = brisk_buffer(g, "rm", cs, BRISK_INIT_ZEROS), rv = brisk_buffer(g, "rv", cs, BRISK_INIT_ONES);
    int bn = brisk_batchnorm(g, x, gm, bt, rm, rv, -1, 1e-5f, 0.1f, 1);
    int gin[3] = {dy, bn, x};
    int gb = brisk_graph_append(g, BRISK_OP_BATCHNORM_GRAD_GB, gin, 3, BRISK_F32, brisk_shape2(2, 64), &g->nodes[bn].attr);
    int xin[5] = {dy, bn, x, gm, gb};
    int gx = brisk_graph_append(g, BRISK_OP_BATCHNORM_GRAD_X, xin, 5, BRISK_F32, xs, &g->nodes[bn].attr);
    int mp = brisk_pool2d(g, x, BRISK_POOL_MAX, brisk_window_2d(3, 2, 1));
    int dyp = brisk_input(g, "dyp", BRISK_F32, g->nodes[mp].shape);
    int pin[2] = {dyp, mp};
    int pg = brisk_graph_append(g, BRISK_OP_POOL2D_GRAD, pin, 2, BRISK_F32, xs, &g->nodes[mp].attr);
    void *buf[32] = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        size_t n = g->nodes[i].bytes / 4;
        float *p = buffer(n);
        for (size_t k = 0; k < n; k++) p[k] = (float)rand() / RAND_MAX - 0.5f;
        buf[i] = p;
    }
    brisk_step_state st = {.training = 1, .first_micro = 1};
    int ops[5] = {bn, gb, gx, mp, pg};
    const char *what[5] = {"bn+relu fwd", "bn grad gb", "bn grad x", "maxpool fwd", "maxpool grad"};
    printf("[%lld, 64, %lld, %lld]:", (long long)N, (long long)S, (long long)S);
    for (int o = 0; o < 5; o++) {
        const brisk_node *n = &g->nodes[ops[o]];
        const void *in[8];
        for (int i = 0; i < n->n_in; i++) in[i] = buf[n->in[i]];
        double s[9];
        brisk_error err;
        for (int r = 0; r < 9; r++) {
            double t0 = now_us();
            for (int i = 0; i < 10; i++)
                if (be->run_node(be, g, ops[o], in, buf[ops[o]], &st, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
            s[r] = (now_us() - t0) / 10;
        }
        qsort(s, 9, sizeof s[0], cmp_d);
        printf(" %s %.0f us%s", what[o], s[4], o < 4 ? "," : "\n");
    }
    for (int i = 0; i < g->n_nodes; i++) free(buf[i]);
    brisk_graph_free(g);
    be->destroy(be);
    return 0;
}
