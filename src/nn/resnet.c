/* ResNet keypoint regressors: ResNet18Keypoints of bench/reference/models.py generalised to
 * depth 18 / 34 (BasicBlock) and 50 (Bottleneck, expansion 4). Stem conv 7x7/2 + BatchNorm + ReLU +
 * max pool 3/2, four stages, global average pool (MEAN over H and W), Linear head to K
 * (x, y) pairs. Every BatchNorm is followed by its ReLU fused in, and a block's last one
 * also takes the shortcut (the residual input of BATCHNORM), so a block is three or four
 * ops forward. Blocks are numbered through all stages ("blocks.{i}"), as models.py's
 * nn.Sequential does, so a brisk checkpoint loads into that module by name. */
#include <math.h>
#include <stdio.h>

#include "nn/nn_internal.h"

/* nn.Conv2d(cin, cout, k, stride, pad, bias=False) named `name`: kaiming_uniform(a=sqrt(5))
 * reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = cin k k. */
static int conv(brisk_graph *g, int x, int64_t cin, int64_t cout, int k, int stride, int pad, const char *name) {
    char pname[BRISK_NAME_MAX];
    snprintf(pname, sizeof pname, "%s.weight", name);
    float bound = 1.0f / sqrtf((float)(cin * k * k));
    int w = brisk_param(g, pname, brisk_shape4(cout, cin, k, k), BRISK_INIT_UNIFORM, bound, 1);
    return brisk_conv2d(g, x, w, brisk_window_2d(k, stride, pad));
}

/* nn.BatchNorm2d(c) named `name` (weight ones, bias zeros, running_mean zeros, running_var
 * ones; eps 1e-5, momentum 0.1), then + residual (-1: none), then ReLU when relu. */
static int bn(brisk_graph *g, int x, int64_t c, int residual, int relu, const char *name) {
    char p[BRISK_NAME_MAX];
    snprintf(p, sizeof p, "%s.weight", name);
    int gamma = brisk_param(g, p, brisk_shape1(c), BRISK_INIT_ONES, 0.0f, 0);
    snprintf(p, sizeof p, "%s.bias", name);
    int beta = brisk_param(g, p, brisk_shape1(c), BRISK_INIT_ZEROS, 0.0f, 0);
    snprintf(p, sizeof p, "%s.running_mean", name);
    int rm = brisk_buffer(g, p, brisk_shape1(c), BRISK_INIT_ZEROS);
    snprintf(p, sizeof p, "%s.running_var", name);
    int rv = brisk_buffer(g, p, brisk_shape1(c), BRISK_INIT_ONES);
    return brisk_batchnorm(g, x, gamma, beta, rm, rv, residual, 1e-5f, 0.1f, relu);
}

/* The shortcut: x itself, or down = Sequential(conv 1x1/stride, BatchNorm). */
static int shortcut(brisk_graph *g, int x, int64_t cin, int64_t cout, int stride, const char *block) {
    if (stride == 1 && cin == cout) return x;
    char n0[BRISK_NAME_MAX], n1[BRISK_NAME_MAX];
    snprintf(n0, sizeof n0, "%s.down.0", block);
    snprintf(n1, sizeof n1, "%s.down.1", block);
    return bn(g, conv(g, x, cin, cout, 1, stride, 0, n0), cout, -1, 0, n1);
}

/* models.BasicBlock: relu(b2(c2(relu(b1(c1(x))))) + shortcut(x)). */
static int basic_block(brisk_graph *g, int x, int64_t cin, int64_t cout, int stride, const char *block) {
    char c[BRISK_NAME_MAX], b[BRISK_NAME_MAX];
    int sc = shortcut(g, x, cin, cout, stride, block);
    snprintf(c, sizeof c, "%s.c1", block), snprintf(b, sizeof b, "%s.b1", block);
    int h = bn(g, conv(g, x, cin, cout, 3, stride, 1, c), cout, -1, 1, b);
    snprintf(c, sizeof c, "%s.c2", block), snprintf(b, sizeof b, "%s.b2", block);
    return bn(g, conv(g, h, cout, cout, 3, 1, 1, c), cout, sc, 1, b);
}

/* Bottleneck (torchvision's v1.5: the stride on the 3x3): 1x1 to `mid`, 3x3/stride, 1x1 to
 * 4 mid, named c1/b1, c2/b2, c3/b3 and down.0/1 like BasicBlock. */
static int bottleneck(brisk_graph *g, int x, int64_t cin, int64_t mid, int stride, const char *block) {
    char c[BRISK_NAME_MAX], b[BRISK_NAME_MAX];
    int64_t cout = 4 * mid;
    int sc = shortcut(g, x, cin, cout, stride, block);
    snprintf(c, sizeof c, "%s.c1", block), snprintf(b, sizeof b, "%s.b1", block);
    int h = bn(g, conv(g, x, cin, mid, 1, 1, 0, c), mid, -1, 1, b);
    snprintf(c, sizeof c, "%s.c2", block), snprintf(b, sizeof b, "%s.b2", block);
    h = bn(g, conv(g, h, mid, mid, 3, stride, 1, c), mid, -1, 1, b);
    snprintf(c, sizeof c, "%s.c3", block), snprintf(b, sizeof b, "%s.b3", block);
    return bn(g, conv(g, h, mid, cout, 1, 1, 0, c), cout, sc, 1, b);
}

brisk_status nn_resnet_fields(const brisk_model_spec *s, brisk_build_mode mode, brisk_model_io *io, brisk_error *err) {
    if (s->depth != 18 && s->depth != 34 && s->depth != 50)
        return brisk_errorf(err, BRISK_ERR_INVALID, "resnet: depth %d; expected 18, 34 or 50", s->depth);
    if (s->outputs < 2 || s->outputs % 2)
        return brisk_errorf(err, BRISK_ERR_INVALID, "resnet: %lld outputs; expected 2 per keypoint", (long long)s->outputs);
    int64_t dims[3] = {s->inputs, s->image_h, s->image_w};
    nn_field(io, "x", BRISK_F32, brisk_shape_make(3, dims));
    if (mode == BRISK_BUILD_TRAIN) {
        nn_field(io, "y", BRISK_F32, brisk_shape2(s->outputs / 2, 2));
        if (s->visibility) nn_field(io, "visible", BRISK_F32, brisk_shape1(s->outputs / 2));
    }
    return BRISK_OK;
}

int nn_resnet_forward(const brisk_model_spec *s, brisk_graph *g, int64_t batch, int x) {
    static const int stages18[4] = {2, 2, 2, 2}, stages34[4] = {3, 4, 6, 3};
    const int *n = s->depth == 18 ? stages18 : stages34; /* 50 has 34's stage depths */
    int bottle = s->depth >= 50;
    int h = conv(g, x, s->inputs, 64, 7, 2, 3, "stem.0");
    h = bn(g, h, 64, -1, 1, "stem.1");
    h = brisk_pool2d(g, h, BRISK_POOL_MAX, brisk_window_2d(3, 2, 1));
    int64_t cin = 64;
    int index = 0;
    char block[BRISK_NAME_MAX];
    for (int stage = 0; stage < 4; stage++) {
        int64_t width = (int64_t)64 << stage;
        for (int i = 0; i < n[stage]; i++, index++) {
            int stride = stage > 0 && i == 0 ? 2 : 1;
            snprintf(block, sizeof block, "blocks.%d", index);
            h = bottle ? bottleneck(g, h, cin, width, stride, block) : basic_block(g, h, cin, width, stride, block);
            cin = bottle ? 4 * width : width;
        }
    }
    h = brisk_mean(g, h, (1u << 2) | (1u << 3), 0); /* global average pool: [batch, cin] */
    h = brisk_nn_linear(g, h, cin, s->outputs, "head");
    return brisk_reshape(g, h, brisk_shape3(batch, s->outputs / 2, 2));
}

int nn_resnet_loss(const brisk_model_spec *s, brisk_graph *g, int64_t batch, int pred, int y, int visible) {
    if (!s->visibility) return brisk_mse(g, pred, y);
    /* A keypoint not visible drops out of the sum; the mean stays over all 2K coordinates
     * (as HRNet's JointsMSELoss with target weights), so it equals F.mse_loss when all are
     * visible and never divides by a count that may be zero. */
    int m = brisk_reshape(g, visible, brisk_shape3(batch, s->outputs / 2, 1));
    return brisk_mse(g, brisk_mul(g, pred, m), brisk_mul(g, y, m));
}
