/* The model families of this release: a configurable MLP (classification or
 * regression), the conditional diffusion denoiser of bench/WORKLOADS.md, the sequence
 * models (LSTM, Transformer encoder) of sequence_models.c, the mesh GNN of gnn.c and the
 * ResNet keypoint regressors of resnet.c. */
#include "brisk/nn.h"
#include "nn/nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define field nn_field

const char *brisk_model_type_name(brisk_model_type t) {
    static const char *const names[] = {"mlp", "diffusion", "lstm", "transformer", "meshgnn", "resnet", "graph"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static brisk_status resnet_fields(const brisk_model_spec *s, brisk_build_mode mode, brisk_model_io *io, brisk_error *err) {
    if (s->depth != 18 && s->depth != 34 && s->depth != 50)
        return brisk_errorf(err, BRISK_ERR_INVALID, "resnet: depth %d; expected 18, 34 or 50", s->depth);
    if (s->outputs < 2 || s->outputs % 2)
        return brisk_errorf(err, BRISK_ERR_INVALID, "resnet: %lld outputs; expected 2 per keypoint", (long long)s->outputs);
    int64_t dims[3] = {s->inputs, s->image_h, s->image_w};
    field(io, "x", BRISK_F32, brisk_shape_make(3, dims));
    if (mode == BRISK_BUILD_TRAIN) {
        field(io, "y", BRISK_F32, brisk_shape2(s->outputs / 2, 2));
        if (s->visibility) field(io, "visible", BRISK_F32, brisk_shape1(s->outputs / 2));
    }
    return BRISK_OK;
}

static brisk_status model_fields(const brisk_model_spec *spec, brisk_build_mode mode, brisk_model_io *io,
                                 brisk_error *err) {
    switch (spec->type) {
    case BRISK_MODEL_LSTM: case BRISK_MODEL_TRANSFORMER:
        return nn_seq_fields(spec, mode, io, err);
    case BRISK_MODEL_RESNET:
        return resnet_fields(spec, mode, io, err);
    case BRISK_MODEL_GRAPH:
        return nn_graph_fields(spec, mode, io, err);
    case BRISK_MODEL_MLP:
        field(io, "x", BRISK_F32, nn_x_shape(spec));
        if (mode == BRISK_BUILD_TRAIN) {
            if (spec->task == BRISK_TASK_CLASSIFY) field(io, "y", BRISK_I32, brisk_shape_make(0, NULL));
            else field(io, "y", BRISK_F32, brisk_shape1(spec->outputs));
        }
        return BRISK_OK;
    case BRISK_MODEL_MESHGNN: {
        int64_t n = spec->mesh.grid_rows * spec->mesh.grid_cols;
        field(io, "x", BRISK_F32, brisk_shape2(n, spec->inputs));
        if (mode == BRISK_BUILD_TRAIN) field(io, "y", BRISK_F32, brisk_shape2(n, spec->outputs));
        return BRISK_OK;
    }
    case BRISK_MODEL_DIFFUSION:
        field(io, "coarse", BRISK_F32, brisk_shape1(spec->coarse));
        /* predict: the denoiser itself, given x_t and the timestep */
        if (mode == BRISK_BUILD_TRAIN) field(io, "fine", BRISK_F32, brisk_shape1(spec->fine));
        else {
            field(io, "x_t", BRISK_F32, brisk_shape1(spec->fine));
            field(io, "t", BRISK_I32, brisk_shape_make(0, NULL));
        }
        return BRISK_OK;
    }
    return brisk_errorf(err, BRISK_ERR_INVALID, "unknown model type %d", (int)spec->type);
}

brisk_status brisk_model_fields(const brisk_model_spec *spec, brisk_build_mode mode,
                                brisk_model_io *io, brisk_error *err) {
    memset(io, 0, sizeof *io);
    io->loss = io->output = io->target = io->loss_terms = -1;
    brisk_status st = model_fields(spec, mode, io, err);
    if (st) return st;
    /* a graph's inputs are named and shaped one by one; a built-in family's follow its sizes */
    for (int i = 0; i < io->n_fields; i++) {
        io->fields[i].takes_flat = spec->type == BRISK_MODEL_GRAPH;
        io->fields[i].shape_key = spec->type == BRISK_MODEL_GRAPH ? "the input's model.inputs[].shape"
                                                                 : "the model's sizes (model.inputs, model.outputs, ...)";
    }
    if (mode != BRISK_BUILD_TRAIN) return st;
    if (spec->type == BRISK_MODEL_GRAPH) {
        io->target = nn_graph_target(spec);
    } else if (spec->type != BRISK_MODEL_DIFFUSION) {
        for (int i = 0; i < io->n_fields; i++)
            if (strcmp(io->fields[i].name, "y") == 0) io->target = i;
    }
    return BRISK_OK;
}

static int batch_input(brisk_graph *g, const brisk_model_field *f, int64_t batch) {
    int64_t dims[BRISK_MAX_DIMS];
    dims[0] = batch;
    for (int i = 0; i < f->sample.ndim; i++) dims[i + 1] = f->sample.d[i];
    return brisk_input(g, f->name, f->dtype, brisk_shape_make(f->sample.ndim + 1, dims));
}

/* DDPM noise-prediction loss: x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, predict eps (or
 * x0 when spec->predict_x0) from [x_t | coarse | sinusoidal(t)]. The per-timestep factors are
 * constant tables gathered by t, so no square root runs per step. */
static int diffusion_train(const brisk_model_spec *s, brisk_graph *g, int64_t batch, int coarse,
                           int x0, int *pred_out) {
    int T = s->noise_steps;
    float *tab = malloc(sizeof(float) * 3 * (size_t)T);
    if (!tab) return brisk_graph_fail(g, BRISK_ERR_NOMEM, "diffusion: out of memory");
    float *abar = tab, *sa = tab + T, *s1 = tab + 2 * T;
    brisk_ddpm_alpha_bar(T, s->beta_start, s->beta_end, abar);
    for (int i = 0; i < T; i++) {
        sa[i] = sqrtf(abar[i]);
        s1[i] = sqrtf(1.0f - abar[i]);
    }
    int c_sa = brisk_const(g, "ddpm.sqrt_alpha_bar", BRISK_F32, brisk_shape1(T), sa);
    int c_s1 = brisk_const(g, "ddpm.sqrt_one_minus_alpha_bar", BRISK_F32, brisk_shape1(T), s1);
    free(tab);
    int t = brisk_randint(g, brisk_shape1(batch), 0, T);
    int eps = brisk_randn(g, brisk_shape2(batch, s->fine));
    int a = brisk_reshape(g, brisk_gather(g, c_sa, t), brisk_shape2(batch, 1));
    int b = brisk_reshape(g, brisk_gather(g, c_s1, t), brisk_shape2(batch, 1));
    int xt = brisk_add(g, brisk_mul(g, a, x0), brisk_mul(g, b, eps));
    int parts[3] = {xt, coarse, brisk_sinusoidal(g, t, (int)s->time_embedding)};
    int h = brisk_concat(g, parts, 3, 1);
    int64_t widths[BRISK_MAX_LAYERS + 1];
    memcpy(widths, s->hidden, (size_t)s->n_hidden * sizeof widths[0]);
    widths[s->n_hidden] = s->fine;
    int pred = brisk_nn_mlp(g, h, s->fine + s->coarse + s->time_embedding, widths, s->n_hidden + 1,
                            s->activation, 0.0f, "net");
    *pred_out = pred;
    return brisk_mse(g, pred, s->predict_x0 ? x0 : eps);
}

static int diffusion_predict(const brisk_model_spec *s, brisk_graph *g, int coarse, int xt, int t) {
    int parts[3] = {xt, coarse, brisk_sinusoidal(g, t, (int)s->time_embedding)};
    int h = brisk_concat(g, parts, 3, 1);
    int64_t widths[BRISK_MAX_LAYERS + 1];
    memcpy(widths, s->hidden, (size_t)s->n_hidden * sizeof widths[0]);
    widths[s->n_hidden] = s->fine;
    return brisk_nn_mlp(g, h, s->fine + s->coarse + s->time_embedding, widths, s->n_hidden + 1,
                        s->activation, 0.0f, "net");
}

brisk_status brisk_model_build(const brisk_model_spec *spec, int64_t batch, brisk_build_mode mode,
                               brisk_graph *g, brisk_model_io *io, brisk_error *err) {
    brisk_status st = brisk_model_fields(spec, mode, io, err);
    if (st) return st;
    int in[BRISK_MAX_FIELDS];
    for (int i = 0; i < io->n_fields; i++) {
        in[i] = batch_input(g, &io->fields[i], batch);
        io->input_node[i] = g->n_inputs - 1;
    }
    if (spec->type == BRISK_MODEL_GRAPH || nn_has_preset(spec->type)) {
        /* mlp, lstm and resnet are presets of the graph form (presets.c): built as the graph they write */
        brisk_model_spec preset = *spec;
        if (spec->type != BRISK_MODEL_GRAPH && (st = nn_preset_graph(spec, &preset.graph, err))) return st;
        int *node = calloc((size_t)nn_graph_n_layers(&preset), sizeof *node), loss = -1;
        if (!node) {
            if (preset.graph != spec->graph) brisk_layer_graph_unref(preset.graph);
            return brisk_errorf(err, BRISK_ERR_NOMEM, "graph model: out of memory");
        }
        io->output = nn_graph_forward(&preset, g, batch, in, mode == BRISK_BUILD_TRAIN, node, NULL, &loss, &io->loss_terms);
        io->loss = loss;
        io->n_loss_terms = io->loss_terms >= 0 ? nn_graph_loss_names(&preset, io->loss_term_names) : 0;
        int out_layer;
        nn_graph_task(&preset, &out_layer);
        if (io->output >= 0) io->output = node[out_layer];
        free(node);
        if (preset.graph != spec->graph) brisk_layer_graph_unref(preset.graph);
    } else if (spec->type == BRISK_MODEL_MESHGNN) {
        io->output = nn_meshgnn_forward(spec, g, batch, in[0]);
        if (mode == BRISK_BUILD_TRAIN) io->loss = brisk_mse(g, io->output, in[1]);
    } else if (spec->type == BRISK_MODEL_TRANSFORMER) {
        io->output = nn_seq_forward(spec, g, batch, in);
        if (mode == BRISK_BUILD_TRAIN) {
            int y = in[io->n_fields - 1]; /* the target comes last */
            if (spec->task == BRISK_TASK_CLASSIFY) {
                io->loss = brisk_cross_entropy(g, io->output, y);
            } else {
                io->loss = brisk_mse(g, io->output, y);
            }
        }
    } else if (mode == BRISK_BUILD_TRAIN) {
        io->loss = diffusion_train(spec, g, batch, in[0], in[1], &io->output);
    } else {
        io->output = diffusion_predict(spec, g, in[0], in[1], in[2]);
    }
    g->loss = io->loss;
    g->output = io->output;
    return brisk_graph_error(g, err);
}

int brisk_model_row_widths(const brisk_model_spec *s, int64_t *in, int64_t *out) {
    *in = *out = 0;
    if (s->type == BRISK_MODEL_MLP) {
        *in = s->inputs, *out = s->outputs;
        return 1;
    }
    if (s->type != BRISK_MODEL_GRAPH) return 0;
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    int ok = g && brisk_model_build(s, 1, BRISK_BUILD_PREDICT, g, &io, NULL) == BRISK_OK && io.n_fields == 1 &&
             io.fields[0].dtype == BRISK_F32;
    if (ok) {
        const brisk_shape *o = &g->nodes[io.output].shape; /* [1, ...] */
        *in = brisk_shape_numel(&io.fields[0].sample);
        *out = brisk_shape_numel(o);
        /* a classifier's rows are its class probabilities: one distribution a sample */
        ok = s->task != BRISK_TASK_CLASSIFY || o->ndim == 2;
    }
    brisk_graph_free(g);
    return ok;
}

int64_t brisk_model_param_count(const brisk_model_spec *s) {
    /* counted from the graph itself, so it cannot drift from what the builders make */
    brisk_graph *g = brisk_graph_new();
    brisk_model_io io;
    int64_t n = -1;
    if (g && brisk_model_build(s, 1, BRISK_BUILD_PREDICT, g, &io, NULL) == BRISK_OK) {
        n = 0;
        for (int i = 0; i < g->n_params; i++) n += g->params[i].buffer ? 0 : g->params[i].numel;
    }
    brisk_graph_free(g);
    return n;
}
