/* The config's model section ("model", or "models" for a pipeline): each family's sizes read
 * strictly, a graph's layers and an ONNX file handed to nn's readers. config.c reads the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/json.h"
#include "brisk/nn.h"
#include "brisk/train.h"
#include "config/config_internal.h"

static const char *const model_types[] = {"mlp", "diffusion", "lstm", "transformer", "meshgnn", "resnet", "graph", "onnx", NULL};
static const char *const gnn_metrics[] = {"plane", "sphere", NULL};
static const char *const pools[] = {"last", "mean", "cls", NULL};
static const char *const position_kinds[] = {"learned", "sinusoidal", "none", NULL};
static const char *const norm_places[] = {"post", "pre", NULL};
static const char *const tasks[] = {"classify", "regress", NULL};
static const char *const activations[] = {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", NULL};
static const char *const noise_schedules[] = {"linear", NULL};
static const char *const predictions[] = {"noise", "x0", NULL};

static void read_hidden(brisk_json_reader *r, brisk_model_spec *m, int def_n, int64_t def_w) {
    int *w = NULL;
    size_t n = 0;
    if (!brisk_json_has(r, "hidden")) {
        m->n_hidden = def_n;
        for (int i = 0; i < def_n; i++) m->hidden[i] = def_w;
        return;
    }
    if (brisk_json_ints(r, "hidden", false, 1, 1 << 20, &w, &n) == BRISK_OK) {
        if (n > BRISK_MAX_LAYERS) brisk_json_fail(r, "hidden", "at most %d layers, got %zu", BRISK_MAX_LAYERS, n);
        else {
            m->n_hidden = (int)n;
            for (size_t i = 0; i < n; i++) m->hidden[i] = w[i];
        }
    }
    free(w);
}

/* lstm and transformer: windows x [seq_len, inputs] -> outputs. */
static void read_sequence_model(brisk_json_reader *r, brisk_model_spec *m) {
    int v;
    double d;
    bool b;
    brisk_json_int64(r, "inputs", 1, 1 << 24, &m->inputs);
    brisk_json_int64(r, "outputs", 1, 1 << 24, &m->outputs);
    brisk_json_int64(r, "seq_len", 1, 1 << 24, &m->seq_len);
    brisk_json_int_or(r, "layers", 1, 1, BRISK_MAX_LAYERS, &m->layers);
    brisk_json_enum_or(r, "task", tasks, BRISK_TASK_CLASSIFY, &v);
    m->task = (brisk_task)v;
    if (m->type == BRISK_MODEL_LSTM) {
        brisk_json_int64(r, "hidden", 1, 1 << 16, &m->width);
        brisk_json_bool_or(r, "bidirectional", false, &b), m->bidirectional = b;
        brisk_json_number_or(r, "dropout", 0.0, BRISK_IN(0.0, 0.99), &d), m->dropout = (float)d;
        brisk_json_enum_or(r, "pool", pools, BRISK_POOL_LAST, &v), m->pool = (brisk_pool)v;
        if (m->pool == BRISK_POOL_CLS) brisk_json_fail(r, "pool", "expected \"last\" or \"mean\" for an lstm, got \"cls\"");
        return;
    }
    brisk_json_int64(r, "width", 1, 1 << 16, &m->width);
    brisk_json_int(r, "heads", 1, 1 << 10, &m->heads);
    if (m->heads > 0 && m->width % m->heads)
        brisk_json_fail(r, "heads", "%d heads do not divide width %lld", m->heads, (long long)m->width);
    brisk_json_int64_or(r, "ffn", 4 * m->width, 1, 1 << 20, &m->ffn);
    brisk_json_number_or(r, "dropout", 0.1, BRISK_IN(0.0, 0.99), &d), m->dropout = (float)d;
    brisk_json_enum_or(r, "norm", norm_places, 1, &v), m->norm_first = v;
    brisk_json_enum_or(r, "positions", position_kinds, BRISK_POS_LEARNED, &v), m->positions = (brisk_positions)v;
    brisk_json_enum_or(r, "pool", pools, BRISK_POOL_MEAN, &v), m->pool = (brisk_pool)v;
    brisk_json_bool_or(r, "causal", false, &b), m->causal = b;
    brisk_json_bool_or(r, "padding_mask", false, &b), m->padding_mask = b;
}

/* A [first, second] pair of `key` into a, b (defaults when absent). */
static void read_pair(brisk_json_reader *r, const char *key, int lo, int hi, int64_t *a, int64_t *b) {
    int *w = NULL;
    size_t n = 0;
    if (brisk_json_ints(r, key, false, lo, hi, &w, &n) == BRISK_OK && n) {
        if (n != 2) brisk_json_fail(r, key, "expected [rows, cols], got %zu numbers", n);
        else *a = w[0], *b = w[1];
    }
    free(w);
}

static void read_range(brisk_json_reader *r, const char *key, bool required, brisk_json_range range, double *a,
                       double *b) {
    double *w = NULL;
    size_t n = 0;
    if (brisk_json_numbers(r, key, required, range, &w, &n) == BRISK_OK && (required || n)) {
        if (n != 2 || !(w[0] < w[1])) brisk_json_fail(r, key, "expected [first, last] with first < last");
        else *a = w[0], *b = w[1];
    }
    free(w);
}

/* meshgnn: the grid and mesh sizes, k, neighbours, latent and layers; bench/WORKLOADS.md's
 * benchmark model by default. With data.netcdf (netcdf) the files decide the grid and the
 * sphere's domain: model.grid is refused, model.lat/lon are optional (NAN when absent) and
 * checked against the files (brisk_weather_fit_model), as are the sizes checked here. */
static void read_meshgnn(brisk_json_reader *r, brisk_model_spec *m, int netcdf) {
    int v;
    brisk_gnn_graph_spec *g = &m->mesh;
    m->task = BRISK_TASK_REGRESS; /* MSE on the next-step change */
    if (m->activation != BRISK_ACT_SILU) brisk_json_fail(r, "activation", "meshgnn's MLPs use \"silu\"");
    brisk_json_int64_or(r, "inputs", 20, 1, 1 << 16, &m->inputs);
    brisk_json_int64_or(r, "outputs", 8, 1, 1 << 16, &m->outputs);
    brisk_json_int64_or(r, "latent", 256, 1, 1 << 14, &m->width);
    brisk_json_int_or(r, "layers", 16, 0, 1024, &m->layers);
    bool rc = false;
    brisk_json_bool_or(r, "recompute", false, &rc);
    m->recompute = rc;
    g->grid_rows = g->grid_cols = 64;
    g->mesh_rows = g->mesh_cols = 32;
    if (!netcdf) read_pair(r, "grid", 1, 1 << 16, &g->grid_rows, &g->grid_cols);
    else if (brisk_json_has(r, "grid"))
        brisk_json_fail(r, "grid", "data.netcdf takes the grid from the files' latitude and longitude; remove model.grid");
    read_pair(r, "mesh", 1, 1 << 16, &g->mesh_rows, &g->mesh_cols);
    brisk_json_int_or(r, "icosahedral", -1, -1, 7, &v);
    g->icosahedral = v + 1; /* -1 (absent): the lattice of "mesh" */
    int64_t nm = brisk_gnn_mesh_nodes(g), cap = nm < 64 ? nm : 64;
    if (!netcdf && !g->icosahedral && (g->grid_rows < g->mesh_rows || g->grid_cols < g->mesh_cols))
        brisk_json_fail(r, "mesh", "the mesh (%lldx%lld) must not be finer than the grid (%lldx%lld)",
                        (long long)g->mesh_rows, (long long)g->mesh_cols, (long long)g->grid_rows, (long long)g->grid_cols);
    if (!netcdf && g->icosahedral && g->grid_rows * g->grid_cols < nm)
        brisk_json_fail(r, "icosahedral", "the mesh (%lld nodes) must not be finer than the grid (%lldx%lld)",
                        (long long)nm, (long long)g->grid_rows, (long long)g->grid_cols);
    brisk_json_int_or(r, "k", 4, 1, (int)cap, &g->k);
    brisk_json_int_or(r, "neighbours", nm > 8 ? 8 : (int)(nm - 1), 1, (int)(cap - (nm <= 64)), &g->neighbours);
    if (nm < 2) brisk_json_fail(r, "mesh", "expected at least 2 mesh nodes");
    brisk_json_enum_or(r, "metric", gnn_metrics, BRISK_GNN_PLANE, &v);
    g->metric = (brisk_gnn_metric)v;
    if (g->metric == BRISK_GNN_SPHERE) {
        g->lat0 = g->lat1 = g->lon0 = g->lon1 = NAN;
        read_range(r, "lat", !netcdf, BRISK_IN(-90.0, 90.0), &g->lat0, &g->lat1);
        read_range(r, "lon", !netcdf, BRISK_IN(-360.0, 720.0), &g->lon0, &g->lon1);
        if (g->lon1 - g->lon0 > 360) brisk_json_fail(r, "lon", "expected a span of at most 360 degrees");
    }
    if (g->icosahedral && !netcdf && (g->metric != BRISK_GNN_SPHERE || g->lat0 != -90 || g->lat1 != 90 || g->lon1 - g->lon0 != 360))
        brisk_json_fail(r, "icosahedral", "an icosahedral mesh needs \"metric\": \"sphere\" over the globe "
                        "(\"lat\": [-90, 90], a \"lon\" span of 360)");
}

/* resnet: depth, keypoints K, channels, size [width, height], visibility; bench/WORKLOADS.md's
 * benchmark model (ResNet-18, 17 keypoints of 3 x 256 x 256 images) by default. */
static void read_resnet(brisk_json_reader *r, brisk_model_spec *m) {
    int k;
    bool b;
    m->task = BRISK_TASK_REGRESS;
    if (m->activation != BRISK_ACT_RELU) brisk_json_fail(r, "activation", "resnet uses \"relu\"");
    brisk_json_int_or(r, "depth", 18, 18, 50, &m->depth);
    if (m->depth != 18 && m->depth != 34 && m->depth != 50) brisk_json_fail(r, "depth", "expected 18, 34 or 50, got %d", m->depth);
    brisk_json_int_or(r, "keypoints", 17, 1, BRISK_MAX_KEYPOINTS, &k);
    m->outputs = 2 * (int64_t)k;
    brisk_json_int64_or(r, "channels", 3, 1, 1 << 12, &m->inputs);
    m->image_h = m->image_w = 0; /* absent: data.images.size, else 256 (resnet_size_default) */
    int *w = NULL;
    size_t n = 0;
    if (brisk_json_ints(r, "size", false, 1, 1 << 15, &w, &n) == BRISK_OK && n) {
        if (n != 2) brisk_json_fail(r, "size", "expected [width, height], as data.images.size, got %zu numbers", n);
        else m->image_w = w[0], m->image_h = w[1];
    }
    free(w);
    brisk_json_bool_or(r, "visibility", true, &b), m->visibility = b;
}

/* A resnet without model.size takes the images' size (data.images.size), else 256 x 256. */
void brisk_config_resnet_size_default(brisk_model_spec *m, const brisk_data_spec *d) {
    if (m->type != BRISK_MODEL_RESNET || m->image_h > 0) return;
    m->image_w = d->images.enabled ? d->images.width : 256;
    m->image_h = d->images.enabled ? d->images.height : 256;
}

static void read_model_object(brisk_json_reader *r, brisk_model_spec *m, int netcdf, const char *config_path) {
    int v = 0;
    memset(m, 0, sizeof *m);
    brisk_json_enum(r, "type", model_types, &v);
    m->type = (brisk_model_type)v;
    if (v == BRISK_MODEL_GRAPH + 1) { /* "onnx": a graph model whose layers an ONNX file holds */
        m->type = BRISK_MODEL_GRAPH;
        brisk_layer_graph_read_onnx(r, config_path, &m->graph);
        m->task = brisk_layer_graph_task(m->graph);
        return;
    }
    if (m->type == BRISK_MODEL_GRAPH) { /* the layers are nn's to read (src/nn/layer_graph.c) */
        brisk_layer_graph_read(r, &m->graph);
        m->task = brisk_layer_graph_task(m->graph);
        return;
    }
    int act = m->type == BRISK_MODEL_DIFFUSION || m->type == BRISK_MODEL_MESHGNN ? BRISK_ACT_SILU
              : m->type == BRISK_MODEL_TRANSFORMER ? BRISK_ACT_GELU : BRISK_ACT_RELU;
    brisk_json_enum_or(r, "activation", activations, act, &v);
    m->activation = (brisk_activation)v;
    if (m->type == BRISK_MODEL_LSTM || m->type == BRISK_MODEL_TRANSFORMER) {
        read_sequence_model(r, m);
        return;
    }
    if (m->type == BRISK_MODEL_MESHGNN) {
        read_meshgnn(r, m, netcdf);
        return;
    }
    if (m->type == BRISK_MODEL_RESNET) {
        read_resnet(r, m);
        return;
    }
    if (m->type == BRISK_MODEL_MLP) {
        brisk_json_int64_or(r, "seq_len", 0, 0, 1 << 24, &m->seq_len);
        brisk_json_int64(r, "inputs", 1, 1 << 24, &m->inputs);
        brisk_json_int64(r, "outputs", 1, 1 << 24, &m->outputs);
        read_hidden(r, m, 0, 0);
        double d;
        brisk_json_number_or(r, "dropout", 0.0, BRISK_IN(0.0, 0.99), &d);
        m->dropout = (float)d;
        brisk_json_enum_or(r, "task", tasks, BRISK_TASK_CLASSIFY, &v);
        m->task = (brisk_task)v;
    } else {
        brisk_json_int64_or(r, "fine", 256, 1, 1 << 24, &m->fine);
        brisk_json_int64_or(r, "coarse", 7, 1, 1 << 24, &m->coarse);
        brisk_json_int64_or(r, "time_embedding", 32, 2, 1 << 16, &m->time_embedding);
        if (m->time_embedding % 2) brisk_json_fail(r, "time_embedding", "expected an even number, got %lld", (long long)m->time_embedding);
        read_hidden(r, m, 3, 256);
        brisk_json_reader n;
        brisk_json_object_opt(r, "noise", &n, NULL);
        brisk_json_int_or(&n, "steps", 50, 1, 100000, &m->noise_steps);
        brisk_json_enum_or(&n, "schedule", noise_schedules, 0, &v);
        double b0, b1;
        brisk_json_number_or(&n, "beta_start", 1e-4, BRISK_IN_LO_OPEN(0.0, 1.0), &b0);
        brisk_json_number_or(&n, "beta_end", 0.02, BRISK_IN_LO_OPEN(0.0, 1.0), &b1);
        if (b1 >= 1.0 || b0 > b1) brisk_json_fail(&n, "beta_end", "expected beta_start <= beta_end < 1");
        m->beta_start = (float)b0;
        m->beta_end = (float)b1;
        brisk_json_enum_or(&n, "prediction", predictions, 0, &v);
        m->predict_x0 = v == 1;
    }
}

/* "model": {...}, or "models": [{"name": ..., ...}, ...] for a pipeline. */
void brisk_config_read_models(brisk_json_reader *root, brisk_config *cfg) {
    brisk_json_reader r, data;
    brisk_json_object_opt(root, "data", &data, NULL);
    int netcdf = brisk_json_has(&data, "netcdf"); /* the files decide a meshgnn's grid */
    size_t n = 0;
    if (!brisk_json_has(root, "models")) {
        brisk_json_object(root, "model", &r);
        read_model_object(&r, &cfg->model, netcdf, cfg->path);
        return;
    }
    if (brisk_json_has(root, "model")) brisk_json_fail(root, "models", "give \"model\" or \"models\", not both");
    if (brisk_json_array_len(root, "models", true, &n) != BRISK_OK) return;
    if (n < 1 || n > BRISK_MAX_MODELS) {
        brisk_json_fail(root, "models", "expected 1 to %d models, got %zu", BRISK_MAX_MODELS, n);
        return;
    }
    cfg->n_models = (int)n;
    for (size_t i = 0; i < n; i++) {
        const char *name;
        brisk_json_object_at(root, "models", i, &r);
        brisk_json_string(&r, "name", &name);
        if (!name || !name[0] || strlen(name) >= sizeof cfg->model_names[i] || strchr(name, '/'))
            brisk_json_fail(&r, "name", "expected a name of 1 to %zu characters without '/'", sizeof cfg->model_names[i] - 1);
        snprintf(cfg->model_names[i], sizeof cfg->model_names[i], "%s", name ? name : "");
        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->model_names[j], cfg->model_names[i]) == 0) brisk_json_fail(&r, "name", "\"%s\" used twice", name);
        read_model_object(&r, &cfg->models[i], netcdf, cfg->path);
    }
    cfg->model = cfg->models[0];
}
