/* Sequence classifiers and regressors over windows x [B, seq_len, inputs]: the fields of the
 * LSTM and Transformer models of bench/WORKLOADS.md, and the Transformer, named as
 * TransformerClassifier of bench/reference/models.py so checkpoints load into it (the LSTM is
 * a preset of the graph form, presets.c):
 *   transformer: Linear "proj" -> [class token "cls"] -> + positions ("pos" learned
 *                [1, T, width], or a sinusoidal table) -> encoder layers "enc.layers.i"
 *                -> pool (mean, last, class token) -> LayerNorm "norm" -> Linear "head"
 * With a padding mask (a data field "mask" [seq_len], 0 = padding) attention ignores
 * padded keys and the mean pools over the valid steps only. */
#include "nn/nn_internal.h"

#include <math.h>
#include <stdlib.h>

brisk_status nn_seq_fields(const brisk_model_spec *s, brisk_build_mode mode, brisk_model_io *io, brisk_error *err) {
    const char *kind = brisk_model_type_name(s->type);
    if (s->seq_len < 1 || s->inputs < 1 || s->width < 1 || s->layers < 1 || s->outputs < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID,
                            "%s: seq_len %lld, inputs %lld, width %lld, layers %d, outputs %lld (expected all >= 1)", kind,
                            (long long)s->seq_len, (long long)s->inputs, (long long)s->width, s->layers,
                            (long long)s->outputs);
    if (s->type == BRISK_MODEL_TRANSFORMER && (s->heads < 1 || s->width % s->heads || s->ffn < 1))
        return brisk_errorf(err, BRISK_ERR_INVALID, "transformer: %d heads must divide width %lld, and ffn %lld >= 1",
                            s->heads, (long long)s->width, (long long)s->ffn);
    if (s->type == BRISK_MODEL_LSTM && (s->pool == BRISK_POOL_CLS || s->padding_mask))
        return brisk_errorf(err, BRISK_ERR_INVALID, "lstm: pools by \"last\" or \"mean\" and takes no padding mask");
    nn_field(io, "x", BRISK_F32, nn_x_shape(s));
    if (s->padding_mask) nn_field(io, "mask", BRISK_F32, brisk_shape1(s->seq_len));
    if (mode == BRISK_BUILD_TRAIN) {
        if (s->task == BRISK_TASK_CLASSIFY) nn_field(io, "y", BRISK_I32, brisk_shape_make(0, NULL));
        else nn_field(io, "y", BRISK_F32, brisk_shape1(s->outputs));
    }
    return BRISK_OK;
}

/* [1, T, d] sinusoidal positions of "Attention Is All You Need": sin on even
 * features, cos on odd, wavelengths 2 pi .. 10000 2 pi. */
static int sinusoidal_positions(brisk_graph *g, int64_t T, int64_t d) {
    float *tab = malloc(sizeof(float) * (size_t)(T * d));
    if (!tab) return brisk_graph_fail(g, BRISK_ERR_NOMEM, "transformer: out of memory for positions");
    for (int64_t p = 0; p < T; p++)
        for (int64_t i = 0; i < d; i++) {
            double a = (double)p / pow(10000.0, (double)(i - i % 2) / (double)d);
            tab[p * d + i] = (float)(i % 2 ? cos(a) : sin(a));
        }
    int id = brisk_const(g, "positions", BRISK_F32, brisk_shape3(1, T, d), tab);
    free(tab);
    return id;
}

/* Step t of h [B, T, d] as [B, d]. */
static int step_of(brisk_graph *g, int h, int64_t batch, int64_t t, int64_t d) {
    return brisk_reshape(g, brisk_slice(g, h, 1, t, 1), brisk_shape2(batch, d));
}

/* Mean over the steps of h [B, T, d] whose mask [B, T] is nonzero (all when mask < 0). */
static int pool_mean(brisk_graph *g, int h, int mask, int64_t batch, int64_t T, int64_t d) {
    if (mask < 0) return brisk_mean(g, h, 1u << 1, 0);
    int m3 = brisk_reshape(g, mask, brisk_shape3(batch, T, 1));
    int sum = brisk_sum(g, brisk_mul(g, h, m3), 1u << 1, 0);
    /* a sample with no valid step pools to zeros rather than 0 / 0 */
    int count = brisk_scale(g, brisk_sum(g, mask, 1u << 1, 1), 1.0f, 1e-6f);
    return brisk_div(g, sum, count);
}

static int transformer_forward(const brisk_model_spec *s, brisk_graph *g, int64_t batch, int x, int mask) {
    int64_t d = s->width, T = s->seq_len;
    int h = brisk_nn_linear(g, x, s->inputs, d, "proj");
    if (s->pool == BRISK_POOL_CLS) { /* a learned token in front of every sequence */
        int cls = brisk_param(g, "cls", brisk_shape3(1, 1, d), BRISK_INIT_NORMAL, 0.02f, 0);
        int parts[2] = {brisk_expand(g, cls, brisk_shape3(batch, 1, d)), h};
        h = brisk_concat(g, parts, 2, 1);
        if (mask >= 0) {
            float *ones = malloc(sizeof(float) * (size_t)batch);
            if (!ones) return brisk_graph_fail(g, BRISK_ERR_NOMEM, "transformer: out of memory");
            for (int64_t i = 0; i < batch; i++) ones[i] = 1.0f;
            int mparts[2] = {brisk_const(g, NULL, BRISK_F32, brisk_shape2(batch, 1), ones), mask};
            free(ones);
            mask = brisk_concat(g, mparts, 2, 1);
        }
        T++;
    }
    if (s->positions == BRISK_POS_LEARNED)
        h = brisk_add(g, h, brisk_param(g, "pos", brisk_shape3(1, T, d), BRISK_INIT_NORMAL, 0.02f, 0));
    else if (s->positions == BRISK_POS_SINUSOIDAL)
        h = brisk_add(g, h, sinusoidal_positions(g, T, d));
    char name[BRISK_NAME_MAX];
    for (int l = 0; l < s->layers; l++) {
        snprintf(name, sizeof name, "enc.layers.%d", l);
        h = brisk_nn_encoder_layer(g, h, mask, d, s->heads, s->ffn, s->activation, s->dropout, s->norm_first, s->causal,
                                   name);
    }
    if (s->pool == BRISK_POOL_MEAN) h = pool_mean(g, h, mask, batch, T, d);
    else h = step_of(g, h, batch, s->pool == BRISK_POOL_CLS ? 0 : T - 1, d);
    return brisk_nn_linear(g, brisk_nn_layernorm(g, h, d, "norm"), d, s->outputs, "head");
}

int nn_seq_forward(const brisk_model_spec *s, brisk_graph *g, int64_t batch, const int *in) {
    return transformer_forward(s, g, batch, in[0], s->padding_mask ? in[1] : -1);
}
