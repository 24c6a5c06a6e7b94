/* nn: model builders. A model is described by a spec (parsed from the config's
 * "model" section) and built into a graph for a fixed batch size. Builders only
 * compose graph ops; autodiff writes every backward pass. Parameter names follow
 * the PyTorch modules of bench/reference/models.py ("net.0.weight"), so a
 * brisk checkpoint loads into those modules with load_state_dict. */
#ifndef BRISK_NN_H
#define BRISK_NN_H

#include "brisk/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_MAX_LAYERS 32
#define BRISK_MAX_FIELDS 8

typedef enum brisk_activation {
    BRISK_ACT_RELU = 0,
    BRISK_ACT_GELU,      /* erf form, PyTorch's default */
    BRISK_ACT_GELU_TANH,
    BRISK_ACT_SILU,
    BRISK_ACT_TANH,
    BRISK_ACT_SIGMOID,
    BRISK_ACT_COUNT
} brisk_activation;
const char *brisk_activation_name(brisk_activation a);
int brisk_activation_parse(const char *s, brisk_activation *out); /* 0 on success */

/* ---- graph networks on a lat-lon grid and a coarser mesh (src/nn/gnn_graph.c)
 * Nodes are numbered row-major (row = latitude index, column = longitude index). Node
 * position features are (x, y) in [0, 1): x = (col + offset) / cols, y = (row + offset) /
 * rows, offset 0 for the grid and 0.5 for the mesh (cell centres), models.grid_xy.
 * Edges: grid -> mesh from each grid node to its k nearest mesh nodes, mesh -> grid the
 * same pairs reversed, mesh -> mesh from the `neighbours` nearest other mesh nodes into
 * each mesh node. Each edge set is ordered by receiver (then by the order above: sender
 * grid node, or distance rank), so segment sums can use SEGMENT_SUM. Ties in distance go
 * to the lower node index. Edge features (3): the receiver minus the sender position
 * (plane: in the (x, y) features; sphere: in radians along east and north at the
 * receiver) and the distance (plane: Euclidean in (x, y); sphere: great-circle, radians). */
typedef enum { BRISK_GNN_PLANE = 0, BRISK_GNN_SPHERE } brisk_gnn_metric;

typedef struct brisk_gnn_graph_spec {
    int64_t grid_rows, grid_cols, mesh_rows, mesh_cols;
    int k;                 /* grid <-> mesh edges per grid node */
    int neighbours;        /* mesh edges into each mesh node */
    brisk_gnn_metric metric;
    double lat0, lat1, lon0, lon1; /* sphere: the domain in degrees (cell edges) */
    int icosahedral;       /* 0: the mesh is the mesh_rows x mesh_cols lattice; r + 1 (r = 0 to 7): an
                              icosahedron refined r times, 10 * 4^r + 2 nodes (sphere, global domain) */
    char cache_dir[1024];  /* "": no cache; else the built graph is kept there (brisk_gnn_graph_build_cached):
                              data.netcdf sets it to the data's folder. Not part of the graph's key. */
} brisk_gnn_graph_spec;

typedef struct brisk_gnn_edges {
    int64_t n;
    int32_t *src, *dst;    /* [n], dst non-decreasing */
    float *feat;           /* [n, 3] */
} brisk_gnn_edges;

typedef struct brisk_gnn_graph {
    int64_t n_grid, n_mesh;
    float *grid_pos, *mesh_pos; /* [n, 2] */
    brisk_gnn_edges g2m, mm, m2g;
} brisk_gnn_graph;

typedef enum { BRISK_TASK_CLASSIFY = 0, BRISK_TASK_REGRESS } brisk_task;
typedef enum { BRISK_MODEL_MLP = 0, BRISK_MODEL_DIFFUSION, BRISK_MODEL_LSTM, BRISK_MODEL_TRANSFORMER,
               BRISK_MODEL_MESHGNN, BRISK_MODEL_RESNET, BRISK_MODEL_GRAPH } brisk_model_type;
/* "mlp", "diffusion", "lstm", "transformer", "meshgnn", "resnet", "graph" */
const char *brisk_model_type_name(brisk_model_type t);

/* A model the config writes as a graph of layers (src/nn/layer_graph.c): named inputs, layers
 * (a name, an op of src/nn/layer_ops.c, its inputs' names, its attributes), outputs and
 * losses. Immutable once read, shared by reference (a config and the trainers and
 * executors made from it). */
typedef struct brisk_layer_graph brisk_layer_graph;
struct brisk_json_reader;
/* Reads the model object's "inputs", "layers", "outputs" and "losses" (errors go to the
 * reader, naming the layer and key); *out is set even on an error (unref it). */
void brisk_layer_graph_read(struct brisk_json_reader *model, brisk_layer_graph **out);
/* The same for an imported ONNX model (src/nn/layer_graph_onnx.c): "file" (relative to the
 * working directory, else to config_path's folder), optional "inputs" and "outputs", "losses". */
void brisk_layer_graph_read_onnx(struct brisk_json_reader *model, const char *config_path, brisk_layer_graph **out);
brisk_layer_graph *brisk_layer_graph_ref(brisk_layer_graph *lg);
/* classify when its first loss is a cross-entropy, else regress */
brisk_task brisk_layer_graph_task(const brisk_layer_graph *lg);
void brisk_layer_graph_unref(brisk_layer_graph *lg);
/* The layer ops as a Markdown table (the config reference's), malloc'd; NULL: out of memory. */
char *brisk_layer_ops_reference(void);
/* How a sequence model turns [B, T, width] into one vector per sample. */
typedef enum { BRISK_POOL_LAST = 0, BRISK_POOL_MEAN, BRISK_POOL_CLS } brisk_pool;
typedef enum { BRISK_POS_LEARNED = 0, BRISK_POS_SINUSOIDAL, BRISK_POS_NONE } brisk_positions;

typedef struct brisk_model_spec {
    brisk_model_type type;
    /* mlp: inputs -> hidden... -> outputs; classify = cross-entropy on integer labels,
     * regress = MSE on float targets */
    int64_t inputs, outputs;
    int64_t hidden[BRISK_MAX_LAYERS];
    int n_hidden;
    brisk_activation activation;
    float dropout;
    brisk_task task;
    /* diffusion: the conditional DDPM noise predictor of bench/WORKLOADS.md */
    int64_t fine, coarse, time_embedding;
    int noise_steps;
    float beta_start, beta_end; /* linear schedule */
    int predict_x0;             /* 0: the network predicts the noise, loss MSE on it (bench/WORKLOADS.md);
                                   1: it predicts the clean field x0, loss MSE on x0 */
    /* sequences: seq_len > 0 makes x [seq_len, inputs] per sample (an mlp flattens it);
     * lstm and transformer need it. Both end in pool -> [LayerNorm (transformer)] ->
     * Linear(width, outputs) "head", with task as for mlp. */
    int64_t seq_len;
    int64_t width;          /* lstm: hidden size; transformer: model width (d_model) */
    int layers;             /* lstm layers or encoder layers */
    brisk_pool pool;
    int bidirectional;      /* lstm; dropout (above) acts between layers, as torch.nn.LSTM */
    int heads;              /* transformer: attention heads; activation is the FFN's */
    int64_t ffn;            /* transformer: feed-forward width */
    int norm_first;         /* transformer: pre-LN blocks (1) or post-LN (0) */
    int causal;             /* transformer: each step attends only to itself and earlier ones */
    int padding_mask;       /* transformer: a data field "mask" [seq_len] (0 = padding) */
    brisk_positions positions; /* transformer */
    /* meshgnn (models.MeshGNN): x [grid nodes, inputs] -> the next-step change [grid nodes,
     * outputs], MSE. width = latent, layers = processor layers; the graph from mesh. */
    brisk_gnn_graph_spec mesh;
    /* resnet (src/nn/resnet.c): x [inputs (channels), image_h, image_w] -> y [outputs / 2, 2]
     * keypoints, depth 18 or 34 (BasicBlock) or 50 (Bottleneck). Loss MSE; with visibility
     * each keypoint's two coordinates are weighted by the data field "visible" [K]. */
    int depth;
    int64_t image_h, image_w;
    int visibility;
    int recompute;          /* meshgnn: each processor layer a recompute segment (graph.h) */
    /* graph: the layers (a reference the spec's owner holds: brisk_config_free drops it) */
    brisk_layer_graph *graph;
} brisk_model_spec;

/* What the data must provide per sample, in the order of the graph's inputs. */
typedef struct brisk_model_field {
    char name[32];       /* the config's data.fields key: "x", "y", "coarse", "fine" */
    brisk_dtype dtype;
    brisk_shape sample;  /* per-sample shape (no batch dim) */
    int takes_flat;      /* data of K values a sample ([N, K]) feed it whatever its shape, in C order */
    const char *shape_key; /* what in the config sets its shape: the place an error points to */
} brisk_model_field;

typedef enum { BRISK_BUILD_TRAIN = 0, BRISK_BUILD_PREDICT } brisk_build_mode;

typedef struct brisk_model_io {
    brisk_model_field fields[BRISK_MAX_FIELDS];
    int input_node[BRISK_MAX_FIELDS]; /* graph input index (g->inputs[]) per field */
    int n_fields;
    int loss;     /* train: scalar loss node */
    int output;   /* the prediction: logits / regression output / predicted noise; the
                     trainer reads it in validation for accuracy */
    int target;   /* train: the field (fields[]) validation's metrics compare output with, or -1 */
    /* train, a model of several losses: a [1 + n_loss_terms] node, kept to the run's end: the
     * loss, then each loss term unweighted (loss_term_names[k], owned by the model spec);
     * -1 for one loss. The trainer logs each term. */
    int loss_terms, n_loss_terms;
    const char *loss_term_names[BRISK_LOSS_LOG_WIDTH - 1];
} brisk_model_io;

/* The fields a model needs: for TRAIN all of them, for PREDICT the inputs only. */
brisk_status brisk_model_fields(const brisk_model_spec *spec, brisk_build_mode mode,
                                brisk_model_io *io, brisk_error *err);
/* Builds the model for `batch` samples into g (forward only; the caller runs
 * brisk_backward on io->loss for training). */
brisk_status brisk_model_build(const brisk_model_spec *spec, int64_t batch, brisk_build_mode mode,
                               brisk_graph *g, brisk_model_io *io, brisk_error *err);
/* Builds a graph model once for one sample: every shape and dtype checked (an error names the
 * layer, the shapes it got and what it expected), and spec->outputs (a classifier's classes,
 * a regressor's values) and spec->inputs set for the data checks. Other types: BRISK_OK. */
brisk_status brisk_layer_graph_check(brisk_model_spec *spec, brisk_error *err);
/* A model that maps one row of floats to one row: an mlp, or a graph model of one f32
 * prediction input and one output (a sample of any shape, as its values in C order). Sets the
 * two widths (a classifier's output: its classes) and returns 1; else 0. Sessions and
 * row-wise inference take such models. */
int brisk_model_row_widths(const brisk_model_spec *spec, int64_t *in, int64_t *out);
/* Parameters of the model (by building it for one sample); -1 if the spec does not build. */
int64_t brisk_model_param_count(const brisk_model_spec *spec);
/* A warning about how the model will train, or NULL: an ONNX file exported for inference
 * (BatchNorm folded into the weights, Dropout gone, parameters not named as the module's). */
const char *brisk_model_note(const brisk_model_spec *spec);
/* The model as a table (for a graph model: each layer's name, op, output shape per sample and
 * parameters; then the losses and the totals), malloc'd into *text. Builds it for one
 * sample, so it also checks every shape. */
brisk_status brisk_model_summary(const brisk_model_spec *spec, char **text, brisk_error *err);
/* A built-in family that is a preset of the graph form (mlp, lstm, resnet) as the "model" section
 * of "type": "graph" that builds the same model, parameter for parameter (malloc'd JSON text
 * into *json); BRISK_ERR_INVALID for the other families. */
brisk_status brisk_model_graph_json(const brisk_model_spec *spec, char **json, brisk_error *err);

/* Layers, shared by the builders. A linear layer named `prefix` owns
 * prefix.weight [out, in] and prefix.bias [out], initialised as torch.nn.Linear. */
int brisk_nn_linear(brisk_graph *g, int x, int64_t in, int64_t out, const char *prefix);
int brisk_nn_activation(brisk_graph *g, int x, brisk_activation a);
/* An MLP stack as nn.Sequential(Linear, act, [Dropout], ..., Linear): the Sequential
 * index of each Linear gives its name ("<prefix>.<index>"). */
int brisk_nn_mlp(brisk_graph *g, int x, int64_t in, const int64_t *widths, int n_widths,
                 brisk_activation a, float dropout, const char *prefix);

/* torch.nn.LayerNorm(n) named `prefix` (prefix.weight ones, prefix.bias zeros), eps 1e-5. */
int brisk_nn_layernorm(brisk_graph *g, int x, int64_t n, const char *prefix);
/* torch.nn.LSTM(in, hidden, layers, batch_first=True, bidirectional, dropout) named `prefix`:
 * x [B, T, in] -> the last layer's h [B, T, hidden * directions] (forward half first);
 * parameters prefix.weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0 (and _reverse). */
int brisk_nn_lstm(brisk_graph *g, int x, int64_t in, int64_t hidden, int layers, int bidirectional,
                  float dropout, const char *prefix);
/* torch.nn.GRU(in, hidden, layers, batch_first=True, bidirectional, dropout) named `prefix`,
 * with the LSTM's shapes and parameter names (three gates r, z, n instead of four). */
int brisk_nn_gru(brisk_graph *g, int x, int64_t in, int64_t hidden, int layers, int bidirectional,
                 float dropout, const char *prefix);
/* torch.nn.TransformerEncoderLayer(d, heads, ffn, dropout, activation, batch_first=True,
 * norm_first) named `prefix` (self_attn.in_proj_weight, ..., linear1, linear2, norm1, norm2):
 * x [B, T, d] -> [B, T, d]. mask: f32 [B, T] key mask (0 = padding) or -1. */
int brisk_nn_encoder_layer(brisk_graph *g, int x, int mask, int64_t d, int heads, int64_t ffn,
                           brisk_activation act, float dropout, int norm_first, int causal,
                           const char *prefix);

/* DDPM linear beta schedule as bench/reference/models.py computes it in float32:
 * abar = cumprod(1 - beta). */
void brisk_ddpm_alpha_bar(int steps, float beta_start, float beta_end, float *abar);

/* ---- sampling from the diffusion denoiser (src/nn/ddpm.c)
 * A sampler visits model timesteps t_0 > t_1 > ... > t_{S-1} and at each applies
 *     x_prev = a[t] x_t + b[t] eps(x_t, coarse, t) + c[t] z,    z ~ N(0, I)
 * so one sampling step is one graph schedule with the timestep as its only per-step input.
 *   DDPM (Ho et al. 2020), ancestral, all T steps: a = 1/sqrt(alpha_t),
 *     b = -beta_t / (sqrt(alpha_t) sqrt(1 - abar_t)), c = sigma_t with the posterior variance
 *     sigma_t^2 = beta_t (1 - abar_{t-1}) / (1 - abar_t) (0 at t = 0).
 *   DDIM (Song et al. 2021, eq. 12), S <= T steps at t_k = round((T-1)(S-1-k)/(S-1)):
 *     sigma = eta sqrt((1 - abar_p)/(1 - abar_t)) sqrt(1 - abar_t/abar_p), a = sqrt(abar_p/abar_t),
 *     b = sqrt(1 - abar_p - sigma^2) - sqrt(abar_p (1 - abar_t)/abar_t), c = sigma, with p the
 *     next visited timestep (abar_p = 1 after the last). eta 0 is deterministic given x_T;
 *     eta 1 with S = T is DDPM exactly. */
#ifndef BRISK_SAMPLER_KIND_DEFINED /* api.h declares it too */
#define BRISK_SAMPLER_KIND_DEFINED
typedef enum { BRISK_SAMPLER_DDPM = 0, BRISK_SAMPLER_DDIM = 1 } brisk_sampler_kind;
#endif

typedef struct brisk_sample_schedule {
    brisk_sampler_kind kind;
    int steps;          /* S */
    int noise_steps;    /* T */
    float eta;
    int32_t *t;         /* [S] the visited timesteps, descending */
    float *a, *b, *c;   /* [T] per timestep; 0 where no step lands */
    int stochastic;     /* some c > 0: the step graph draws z */
    float start_signal, start_noise; /* sqrt(abar), sqrt(1 - abar) at t_0: a guided start */
} brisk_sample_schedule;

/* Fills the schedule for a diffusion model (T = spec->noise_steps). DDPM takes steps = T
 * (0 means T); DDIM 1 <= steps <= T; eta in [0, 1] (DDIM only). */
brisk_status brisk_sample_schedule_make(const brisk_model_spec *spec, brisk_sampler_kind kind, int steps,
                                        float eta, brisk_sample_schedule *out, brisk_error *err);
void brisk_sample_schedule_free(brisk_sample_schedule *s);
/* For an x0-predicting model the tables are rewritten for x0_hat through
 * eps_hat = (x_t - sqrt(abar_t) x0_hat) / sqrt(1 - abar_t), so the step stays linear.
 * Builds one sampling step for `batch` rows: the PREDICT graph (inputs coarse, x_t, t) plus the
 * update above; io->output is x_prev. The noise z is a RANDN node keyed by the step state. */
brisk_status brisk_diffusion_build_sample_step(const brisk_model_spec *spec, const brisk_sample_schedule *s,
                                               int64_t batch, brisk_graph *g, brisk_model_io *io, brisk_error *err);

brisk_status brisk_gnn_graph_build(const brisk_gnn_graph_spec *spec, brisk_gnn_graph *out, brisk_error *err);
void brisk_gnn_graph_free(brisk_gnn_graph *g);
/* The mesh nodes a spec asks for (lattice or icosahedral), without building anything. */
int64_t brisk_gnn_mesh_nodes(const brisk_gnn_graph_spec *spec);
/* brisk_gnn_graph_build through a file cache in `dir` (NULL or "": no cache), named by a
 * hash of the spec: read back when it holds this spec's graph, otherwise built and written
 * (an unreadable, stale or corrupt file is rebuilt, not an error; a directory that cannot be
 * written only leaves the graph uncached). result (may be NULL) says which happened. */
typedef enum { BRISK_GNN_CACHE_OFF = 0, BRISK_GNN_CACHE_READ, BRISK_GNN_CACHE_WRITTEN,
               BRISK_GNN_CACHE_UNWRITABLE } brisk_gnn_cache_result;
brisk_status brisk_gnn_graph_build_cached(const brisk_gnn_graph_spec *spec, const char *dir, brisk_gnn_graph *out,
                                          brisk_gnn_cache_result *result, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
