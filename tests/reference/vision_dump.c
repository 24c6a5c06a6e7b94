/* Runs brisk's vision ops in fp32 on the CPU and writes what PyTorch needs to check them
 * on identical data to an .npz (vision_torch.py reads it):
 *   conv<i>.{x,w,dy,y,dx,dw,cfg}  CONV2D for several stride/padding/dilation/groups
 *                                 settings (cfg = sh, sw, ph, pw, dh, dw, groups), dx and dw
 *                                 from the backward of sum(y * dy);
 *   pool<i>.{x,dy,y,dx,cfg}      POOL2D max and average (cfg = kind, kernel, stride,
 *                                 padding), dx from the backward of sum(y * dy);
 *   bn.{weight,bias}, bn<s>.{x,dy,y,dx,dweight,dbias} for 10 training steps of
 *                                 BatchNorm2d + ReLU, then bn.{running_mean,running_var}
 *                                 and bn.eval_{x,y}, one eval forward after them.
 *
 *   vision_dump OUT.npz */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/brisk.h"

#define MAX_OUT 256
#define BN_STEPS 10

static const char *names[MAX_OUT];
static brisk_tensor tensors[MAX_OUT];
static int n_out;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float uniform(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static void fill(float *v, int64_t n, float scale, float shift) {
    for (int64_t i = 0; i < n; i++) v[i] = uniform() * scale + shift;
}

static int add(const char *name, brisk_dtype dt, brisk_shape s, const void *src) {
    if (n_out == MAX_OUT || brisk_tensor_alloc(&tensors[n_out], dt, s, NULL)) return -1;
    memcpy(tensors[n_out].data, src, brisk_tensor_bytes(&tensors[n_out]));
    names[n_out++] = strdup(name);
    return 0;
}

/* A graph: f(inputs) -> out, loss = sum(out * dy); set up, run by the caller. */
typedef struct run {
    brisk_graph *g;
    brisk_plan plan;
    brisk_exec *ex;
    brisk_backend *be;
} run;

static int finish(run *r, int out, int dy, brisk_error *err) {
    brisk_graph *g = r->g;
    int loss = brisk_sum(g, brisk_mul(g, out, dy), 0xF, 0);
    g->output = out;
    if (brisk_backward(g, loss, err) || brisk_plan_build(g, &r->plan, err)) return -1;
    r->be = brisk_backend_cpu_new(0);
    return brisk_exec_create(g, &r->plan, r->be, &r->ex, err) || brisk_exec_init_params(r->ex, 1, err) ? -1 : 0;
}

static void run_free(run *r) {
    brisk_exec_free(r->ex);
    if (r->be) r->be->destroy(r->be);
    brisk_plan_free(&r->plan);
    brisk_graph_free(r->g);
}

/* Reads node (or, grad, the gradient of param k) into a fresh buffer and adds it. */
static int dump_node(run *r, int node, const char *name, brisk_error *err) {
    const brisk_node *n = &r->g->nodes[node];
    float *v = malloc((size_t)brisk_shape_numel(&n->shape) * sizeof(float));
    int rc = !v || brisk_exec_read(r->ex, node, v, err) || add(name, BRISK_F32, n->shape, v);
    free(v);
    return rc ? -1 : 0;
}

static int conv_case(int i, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Co, int64_t k, brisk_window win,
                     brisk_error *err) {
    run r = {.g = brisk_graph_new()};
    brisk_graph *g = r.g;
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(N, C, H, W));
    int w = brisk_param(g, "w", brisk_shape4(Co, C / win.groups, k, k), BRISK_INIT_ZEROS, 0, 1);
    int xp = brisk_param(g, "xp", brisk_shape4(N, C, H, W), BRISK_INIT_ZEROS, 0, 1); /* x as a param, for dx */
    int y = brisk_conv2d(g, brisk_add(g, x, xp), w, win);
    if (y < 0) return brisk_graph_error(g, err), -1;
    brisk_shape ys = g->nodes[y].shape;
    int64_t nx = N * C * H * W, nw = Co * (C / win.groups) * k * k, ny = brisk_shape_numel(&ys);
    float *xv = malloc(4 * (size_t)nx), *wv = malloc(4 * (size_t)nw), *dyv = malloc(4 * (size_t)ny);
    fill(xv, nx, 1, 0), fill(wv, nw, 0.5f, 0), fill(dyv, ny, 1, 0);
    int dy = brisk_const(g, "dy", BRISK_F32, ys, dyv);
    char nm[64];
    int rc = finish(&r, y, dy, err);
    if (!rc) rc = brisk_exec_set_input(r.ex, 0, xv, err) ||
                  r.be->upload(r.be, (float *)r.ex->params + g->params[0].offset, wv, 4 * (size_t)nw, err) ||
                  brisk_exec_run(r.ex, BRISK_RUN_TRAIN, err);
    int32_t cfg[7] = {win.sh, win.sw, win.ph, win.pw, win.dh, win.dw, win.groups};
#define NAME(s) (snprintf(nm, sizeof nm, "conv%d." s, i), nm)
    if (!rc) rc = add(NAME("x"), BRISK_F32, brisk_shape4(N, C, H, W), xv) || add(NAME("w"), BRISK_F32, g->params[0].shape, wv) ||
                  add(NAME("dy"), BRISK_F32, ys, dyv) || add(NAME("cfg"), BRISK_I32, brisk_shape1(7), cfg) ||
                  dump_node(&r, y, NAME("y"), err) || dump_node(&r, g->params[1].grad_node, NAME("dx"), err) ||
                  dump_node(&r, g->params[0].grad_node, NAME("dw"), err);
#undef NAME
    free(xv), free(wv), free(dyv);
    run_free(&r);
    return rc ? -1 : 0;
}

static int pool_case(int i, int kind, int k, int stride, int pad, brisk_error *err) {
    const int64_t N = 2, C = 3, H = 11, W = 9, n = N * C * H * W;
    run r = {.g = brisk_graph_new()};
    brisk_graph *g = r.g;
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(N, C, H, W));
    int xp = brisk_param(g, "xp", brisk_shape4(N, C, H, W), BRISK_INIT_ZEROS, 0, 1);
    int y = brisk_pool2d(g, brisk_add(g, x, xp), kind, brisk_window_2d(k, stride, pad));
    if (y < 0) return brisk_graph_error(g, err), -1;
    brisk_shape ys = g->nodes[y].shape;
    float *xv = malloc(4 * (size_t)n), *dyv = malloc(4 * (size_t)brisk_shape_numel(&ys));
    fill(xv, n, 1, 0), fill(dyv, brisk_shape_numel(&ys), 1, 0);
    int dy = brisk_const(g, "dy", BRISK_F32, ys, dyv);
    int32_t cfg[4] = {kind, k, stride, pad};
    char nm[64];
    int rc = finish(&r, y, dy, err) || brisk_exec_set_input(r.ex, 0, xv, err) || brisk_exec_run(r.ex, BRISK_RUN_TRAIN, err);
#define NAME(f) (snprintf(nm, sizeof nm, "pool%d." f, i), nm)
    if (!rc) rc = add(NAME("x"), BRISK_F32, g->inputs[0].shape, xv) || add(NAME("dy"), BRISK_F32, ys, dyv) ||
                  add(NAME("cfg"), BRISK_I32, brisk_shape1(4), cfg) || dump_node(&r, y, NAME("y"), err) ||
                  dump_node(&r, g->params[0].grad_node, NAME("dx"), err);
#undef NAME
    free(xv), free(dyv);
    run_free(&r);
    return rc ? -1 : 0;
}

static int bn_case(brisk_error *err) {
    const int64_t N = 4, C = 6, H = 5, W = 3, n = N * C * H * W;
    run r = {.g = brisk_graph_new()};
    brisk_graph *g = r.g;
    int x = brisk_input(g, "x", BRISK_F32, brisk_shape4(N, C, H, W));
    int dy = brisk_input(g, "dy", BRISK_F32, brisk_shape4(N, C, H, W));
    int xp = brisk_param(g, "xp", brisk_shape4(N, C, H, W), BRISK_INIT_ZEROS, 0, 1);
    int gm = brisk_param(g, "bn.weight", brisk_shape1(C), BRISK_INIT_ZEROS, 0, 0);
    int bt = brisk_param(g, "bn.bias", brisk_shape1(C), BRISK_INIT_ZEROS, 0, 0);
    int rm = brisk_buffer(g, "bn.running_mean", brisk_shape1(C), BRISK_INIT_ZEROS);
    int rv = brisk_buffer(g, "bn.running_var", brisk_shape1(C), BRISK_INIT_ONES);
    int y = brisk_batchnorm(g, brisk_add(g, x, xp), gm, bt, rm, rv, -1, 1e-5f, 0.1f, 1);
    if (y < 0) return brisk_graph_error(g, err), -1;
    float gv[6], bv[6], *xv = malloc(4 * (size_t)n), *dyv = malloc(4 * (size_t)n);
    fill(gv, C, 0.5f, 1.0f), fill(bv, C, 0.5f, 0.0f);
    int rc = finish(&r, y, dy, err) ||
             r.be->upload(r.be, (float *)r.ex->params + g->params[1].offset, gv, sizeof gv, err) ||
             r.be->upload(r.be, (float *)r.ex->params + g->params[2].offset, bv, sizeof bv, err) ||
             add("bn.weight", BRISK_F32, brisk_shape1(C), gv) || add("bn.bias", BRISK_F32, brisk_shape1(C), bv);
    char nm[64];
    for (int s = 0; s < BN_STEPS && !rc; s++) {
        fill(xv, n, 2.0f, (float)s * 0.3f), fill(dyv, n, 1, 0);
#define NAME(f) (snprintf(nm, sizeof nm, "bn%d." f, s), nm)
        rc = brisk_exec_set_input(r.ex, 0, xv, err) || brisk_exec_set_input(r.ex, 1, dyv, err) ||
             brisk_exec_run(r.ex, BRISK_RUN_TRAIN, err) || add(NAME("x"), BRISK_F32, g->inputs[0].shape, xv) ||
             add(NAME("dy"), BRISK_F32, g->inputs[0].shape, dyv) || dump_node(&r, y, NAME("y"), err) ||
             dump_node(&r, g->params[0].grad_node, NAME("dx"), err) ||
             dump_node(&r, g->params[1].grad_node, NAME("dweight"), err) ||
             dump_node(&r, g->params[2].grad_node, NAME("dbias"), err);
#undef NAME
    }
    if (!rc) {
        fill(xv, n, 2.0f, 1.0f);
        rc = dump_node(&r, rm, "bn.running_mean", err) || dump_node(&r, rv, "bn.running_var", err) ||
             brisk_exec_set_input(r.ex, 0, xv, err) || brisk_exec_run(r.ex, BRISK_RUN_PREDICT, err) ||
             add("bn.eval_x", BRISK_F32, g->inputs[0].shape, xv) || dump_node(&r, y, "bn.eval_y", err);
    }
    free(xv), free(dyv);
    run_free(&r);
    return rc ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: vision_dump OUT.npz\n"); return 2; }
    brisk_error err = {0};
    brisk_window w[6] = {brisk_window_2d(1, 1, 1), brisk_window_2d(1, 2, 3), brisk_window_2d(1, 2, 0),
                         brisk_window_2d(1, 1, 2), brisk_window_2d(1, 2, 1), brisk_window_2d(1, 1, 1)};
    w[3].dh = w[3].dw = 2;            /* dilation */
    w[4].groups = 4;                  /* groups */
    w[5].groups = 8, w[5].sh = 2;     /* depthwise, unequal strides */
    int64_t k[6] = {3, 7, 1, 3, 3, 3}, co[6] = {8, 8, 16, 6, 8, 8};
    int rc = 0;
    for (int i = 0; i < 6 && !rc; i++) rc = conv_case(i, 2, 8, 13, 11, co[i], k[i], w[i], &err);
    if (!rc) rc = pool_case(0, BRISK_POOL_MAX, 3, 2, 1, &err) || pool_case(1, BRISK_POOL_MAX, 2, 2, 0, &err) ||
                  pool_case(2, BRISK_POOL_AVG, 3, 2, 1, &err) || pool_case(3, BRISK_POOL_AVG, 3, 1, 1, &err);
    if (!rc) rc = bn_case(&err);
    if (!rc) rc = brisk_npz_write(argv[1], n_out, names, tensors, &err) != BRISK_OK;
    if (rc) fprintf(stderr, "vision_dump: %s\n", err.msg);
    else printf("vision_dump: %s: %d arrays\n", argv[1], n_out);
    for (int i = 0; i < n_out; i++) {
        free((char *)names[i]);
        brisk_tensor_free(&tensors[i]);
    }
    return rc ? 1 : 0;
}
