/* Internal to nn: helpers the model files share. */
#ifndef BRISK_NN_INTERNAL_H
#define BRISK_NN_INTERNAL_H

#include <stdio.h>
#include <string.h>

#include "brisk/nn.h"

/* Appends a field the model reads. */
static inline void nn_field(brisk_model_io *io, const char *name, brisk_dtype dt, brisk_shape s) {
    brisk_model_field *f = &io->fields[io->n_fields++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->dtype = dt;
    f->sample = s;
}

/* The per-sample shape of x: [seq_len, inputs] for sequence data, else [inputs]. */
static inline brisk_shape nn_x_shape(const brisk_model_spec *s) {
    return s->seq_len > 0 ? brisk_shape2(s->seq_len, s->inputs) : brisk_shape1(s->inputs);
}

/* sequence_models.c: lstm and transformer. */
brisk_status nn_seq_fields(const brisk_model_spec *spec, brisk_build_mode mode, brisk_model_io *io, brisk_error *err);
/* The prediction node from the graph inputs in[] (fields in nn_seq_fields' order). */
int nn_seq_forward(const brisk_model_spec *spec, brisk_graph *g, int64_t batch, const int *in);

/* gnn.c: the mesh GNN's prediction [batch, grid nodes, outputs] from x [batch, grid nodes,
 * inputs]. */
int nn_meshgnn_forward(const brisk_model_spec *spec, brisk_graph *g, int64_t batch, int x);

/* presets.c: the families that are presets of the graph form (mlp, lstm, resnet), and a spec's
 * preset as a layer graph (its inputs the family's fields, in order; released by the caller). */
int nn_has_preset(brisk_model_type t);
brisk_status nn_preset_graph(const brisk_model_spec *spec, brisk_layer_graph **out, brisk_error *err);

/* layer_graph.c: a "graph" model's fields (its inputs; predict: those its outputs read), and
 * its layers built on the field nodes: the first output (node[] every layer's, per[] (may be
 * NULL) each layer's trainable parameters) and, in training, the weighted sum of the losses. */
brisk_status nn_graph_fields(const brisk_model_spec *spec, brisk_build_mode mode, brisk_model_io *io, brisk_error *err);
int nn_graph_forward(const brisk_model_spec *spec, brisk_graph *g, int64_t batch, const int *field_nodes, int train,
                     int *node, int64_t *per, int *loss, int *terms);
/* Classification when the first loss is a cross-entropy; *output_layer the layer whose
 * output validation reads. */
brisk_task nn_graph_task(const brisk_model_spec *spec, int *output_layer);
/* The input (a field of a training build) the first loss's target is, or is computed from
 * (a masked target: its layers' first inputs followed back); the metrics compare with it. */
int nn_graph_target(const brisk_model_spec *spec);
/* Each loss's name in the log (pointers into the spec's graph); returns their count. */
int nn_graph_loss_names(const brisk_model_spec *spec, const char **names);
int nn_graph_n_layers(const brisk_model_spec *spec);

#endif
