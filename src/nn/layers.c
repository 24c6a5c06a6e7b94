/* Layers shared by the model builders: linear, activation, an MLP stack, layer norm. */
#include "brisk/nn.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *act_names[BRISK_ACT_COUNT] = {
    [BRISK_ACT_RELU] = "relu", [BRISK_ACT_GELU] = "gelu", [BRISK_ACT_GELU_TANH] = "gelu_tanh",
    [BRISK_ACT_SILU] = "silu", [BRISK_ACT_TANH] = "tanh", [BRISK_ACT_SIGMOID] = "sigmoid",
};

const char *brisk_activation_name(brisk_activation a) {
    return (unsigned)a < BRISK_ACT_COUNT ? act_names[a] : "?";
}

int brisk_activation_parse(const char *s, brisk_activation *out) {
    for (int i = 0; i < BRISK_ACT_COUNT; i++)
        if (strcmp(s, act_names[i]) == 0) { *out = (brisk_activation)i; return 0; }
    return -1;
}

int brisk_nn_linear(brisk_graph *g, int x, int64_t in, int64_t out, const char *prefix) {
    char name[BRISK_NAME_MAX];
    /* torch.nn.Linear: kaiming_uniform(a=sqrt(5)) on the weight and U(+-1/sqrt(in)) on the
     * bias both reduce to U(-1/sqrt(in), 1/sqrt(in)). */
    float bound = 1.0f / sqrtf((float)in);
    snprintf(name, sizeof name, "%s.weight", prefix);
    int w = brisk_param(g, name, brisk_shape2(out, in), BRISK_INIT_UNIFORM, bound, 1);
    snprintf(name, sizeof name, "%s.bias", prefix);
    int b = brisk_param(g, name, brisk_shape1(out), BRISK_INIT_UNIFORM, bound, 0);
    return brisk_bias_add(g, brisk_matmul(g, x, w, 0, 1), b);
}

int brisk_nn_activation(brisk_graph *g, int x, brisk_activation a) {
    switch (a) {
    case BRISK_ACT_RELU: return brisk_relu(g, x);
    case BRISK_ACT_GELU: return brisk_gelu(g, x, BRISK_GELU_ERF);
    case BRISK_ACT_GELU_TANH: return brisk_gelu(g, x, BRISK_GELU_TANH);
    case BRISK_ACT_SILU: return brisk_silu(g, x);
    case BRISK_ACT_TANH: return brisk_tanh(g, x);
    case BRISK_ACT_SIGMOID: return brisk_sigmoid(g, x);
    default: return brisk_graph_fail(g, BRISK_ERR_INVALID, "unknown activation %d", (int)a);
    }
}

int brisk_nn_mlp(brisk_graph *g, int x, int64_t in, const int64_t *widths, int n_widths,
                 brisk_activation a, float dropout, const char *prefix) {
    int index = 0;
    char name[BRISK_NAME_MAX];
    for (int i = 0; i < n_widths; i++) {
        snprintf(name, sizeof name, "%s.%d", prefix, index);
        x = brisk_nn_linear(g, x, in, widths[i], name);
        in = widths[i];
        index++;
        if (i == n_widths - 1) break;
        x = brisk_nn_activation(g, x, a);
        index++;
        if (dropout > 0) {
            x = brisk_dropout(g, x, dropout);
            index++;
        }
    }
    return x;
}

void brisk_ddpm_alpha_bar(int steps, float beta_start, float beta_end, float *abar) {
    float prod = 1.0f;
    for (int i = 0; i < steps; i++) {
        /* torch.linspace fills the first half from the start and the second from the end */
        float step = steps > 1 ? (beta_end - beta_start) / (float)(steps - 1) : 0.0f;
        float beta = i < steps / 2 ? beta_start + step * (float)i
                                   : beta_end - step * (float)(steps - 1 - i);
        prod *= 1.0f - beta;
        abar[i] = prod;
    }
}

int brisk_nn_layernorm(brisk_graph *g, int x, int64_t n, const char *prefix) {
    char name[BRISK_NAME_MAX];
    snprintf(name, sizeof name, "%s.weight", prefix);
    int gamma = brisk_param(g, name, brisk_shape1(n), BRISK_INIT_ONES, 0.0f, 0);
    snprintf(name, sizeof name, "%s.bias", prefix);
    int beta = brisk_param(g, name, brisk_shape1(n), BRISK_INIT_ZEROS, 0.0f, 0);
    return brisk_layernorm(g, x, gamma, beta, 1e-5f);
}
