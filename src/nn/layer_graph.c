/* A model the user writes: "model": {"type": "graph", "inputs": [...], "layers": [...],
 * "outputs": [...], "losses": [...]}. Each layer names an op (layer_ops.c), the names of its
 * inputs (model inputs or earlier-built layers, in any order: the graph is sorted) and the
 * op's attributes; parameters are named "<layer>.weight", ... as a PyTorch module whose
 * submodules are named as the layers, so a checkpoint loads into it. Reading checks the
 * names (unknown op, a name used twice, a reference to nothing, a cycle, an input never
 * used); building it once for one sample (brisk_layer_graph_check) checks every shape and
 * dtype, each error naming the layer. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "nn/layer_graph.h"
#include "nn/nn_internal.h"
#include "onnx/onnx_import.h"

static const char *const dtypes[] = {"f32", "i32", NULL};
static const char *const loss_kinds[] = {"cross_entropy", "mse", "l1", "huber", "bce_with_logits", NULL};

brisk_layer_graph *brisk_layer_graph_ref(brisk_layer_graph *lg) {
    if (lg) atomic_fetch_add(&lg->refs, 1);
    return lg;
}

void brisk_layer_graph_unref(brisk_layer_graph *lg) {
    if (!lg || atomic_fetch_sub(&lg->refs, 1) != 1) return;
    free(lg->inputs);
    free(lg->layers);
    free(lg->losses);
    free(lg->order);
    brisk_onnx_net_free(lg->onnx);
    free(lg);
}

int lg_find_input(const brisk_layer_graph *lg, const char *name) {
    for (int i = 0; i < lg->n_inputs; i++)
        if (strcmp(lg->inputs[i].name, name) == 0) return i;
    return -1;
}

static int find_layer(const brisk_layer_graph *lg, const char *name) {
    for (int i = 0; i < lg->n_layers; i++)
        if (strcmp(lg->layers[i].name, name) == 0) return i;
    return -1;
}

/* A name of the graph; 0 when it names nothing (the error is the caller's). */
static int resolve(const brisk_layer_graph *lg, const char *name, lg_ref *out) {
    int i = lg_find_input(lg, name);
    if (i >= 0) return *out = (lg_ref){0, i}, 1;
    i = find_layer(lg, name);
    if (i >= 0) return *out = (lg_ref){1, i}, 1;
    return 0;
}

static const char *ref_name(const brisk_layer_graph *lg, lg_ref r) {
    return r.layer ? lg->layers[r.index].name : lg->inputs[r.index].name;
}

static int name_ok(brisk_json_reader *r, const char *key, const char *name) {
    if (!name) return 0;
    size_t n = strlen(name);
    if (n == 0 || n >= LG_NAME || strchr(name, ' ')) {
        brisk_json_fail(r, key, "expected a name of 1 to %d characters without spaces, got \"%.80s\"", LG_NAME - 1, name);
        return 0;
    }
    return 1;
}

void lg_read_inputs(brisk_json_reader *model, brisk_layer_graph *lg) {
    size_t n = 0;
    if (brisk_json_array_len(model, "inputs", true, &n) != BRISK_OK) return;
    if (n < 1 || n > BRISK_MAX_FIELDS) {
        brisk_json_fail(model, "inputs", "expected 1 to %d inputs, got %zu", BRISK_MAX_FIELDS, n);
        return;
    }
    lg->inputs = calloc(n, sizeof *lg->inputs);
    if (!lg->inputs) return (void)brisk_json_fail(model, "inputs", "out of memory");
    for (size_t i = 0; i < n; i++) {
        brisk_json_reader r;
        brisk_json_object_at(model, "inputs", i, &r);
        const char *name = NULL;
        int dt = 0, *dims = NULL;
        size_t nd = 0;
        brisk_json_string(&r, "name", &name);
        brisk_json_enum_or(&r, "dtype", dtypes, 0, &dt);
        brisk_json_ints(&r, "shape", true, 1, 1 << 24, &dims, &nd);
        if (nd > BRISK_MAX_DIMS - 1) brisk_json_fail(&r, "shape", "at most %d dimensions per sample", BRISK_MAX_DIMS - 1);
        lg_input *in = &lg->inputs[lg->n_inputs];
        if (name_ok(&r, "name", name) && nd < BRISK_MAX_DIMS) {
            if (lg_find_input(lg, name) >= 0) brisk_json_fail(&r, "name", "\"%s\" is the name of an earlier input", name);
            snprintf(in->name, sizeof in->name, "%s", name);
            in->dtype = dt == 1 ? BRISK_I32 : BRISK_F32;
            int64_t d[BRISK_MAX_DIMS];
            for (size_t k = 0; k < nd; k++) d[k] = dims[k];
            in->sample = brisk_shape_make((int)nd, d);
            lg->n_inputs++;
        }
        free(dims);
    }
}

static void read_layers(brisk_json_reader *model, brisk_layer_graph *lg) {
    size_t n = 0;
    if (brisk_json_array_len(model, "layers", true, &n) != BRISK_OK) return;
    if (n < 1 || n > 4096) {
        brisk_json_fail(model, "layers", "expected 1 to 4096 layers, got %zu", n);
        return;
    }
    lg->layers = calloc(n, sizeof *lg->layers);
    if (!lg->layers) return (void)brisk_json_fail(model, "layers", "out of memory");
    /* names first, so that a layer may name one defined after it (the graph is sorted) */
    const char ***ins = calloc(n, sizeof *ins);
    size_t *n_ins = calloc(n, sizeof *n_ins);
    brisk_json_reader *rs = calloc(n, sizeof *rs);
    if (!ins || !n_ins || !rs) {
        brisk_json_fail(model, "layers", "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        brisk_json_reader *r = &rs[i];
        brisk_json_object_at(model, "layers", i, r);
        const char *name = NULL, *op = NULL;
        brisk_json_string(r, "name", &name);
        brisk_json_string(r, "op", &op);
        brisk_json_strings(r, "inputs", true, &ins[i], &n_ins[i]);
        lg_layer *l = &lg->layers[lg->n_layers];
        if (!name_ok(r, "name", name) || !op) continue;
        if (lg_find_input(lg, name) >= 0 || find_layer(lg, name) >= 0) {
            brisk_json_fail(r, "name", "\"%s\" is used twice (names of inputs and layers are one namespace)", name);
            continue;
        }
        snprintf(l->name, sizeof l->name, "%s", name);
        if (!(l->op = lg_op_find(op))) {
            char known[1024] = "";
            for (int k = 0; k < lg_n_ops; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", lg_ops[k].name);
            brisk_json_fail(r, "op", "layer \"%s\": unknown op \"%.40s\" (known: %s)", name, op, known);
            continue;
        }
        if ((int)n_ins[i] < l->op->min_in || (int)n_ins[i] > l->op->max_in) {
            char takes[32];
            if (l->op->max_in == l->op->min_in) snprintf(takes, sizeof takes, "%d", l->op->min_in);
            else snprintf(takes, sizeof takes, "%d to %d", l->op->min_in, l->op->max_in);
            brisk_json_fail(r, "inputs", "layer \"%s\" (%s) takes %s input%s, got %zu", name, op, takes,
                            l->op->max_in == 1 ? "" : "s", n_ins[i]);
            continue;
        }
        if (l->op->read) l->op->read(r, &l->a);
        lg->n_layers++;
    }
    for (int i = 0; i < lg->n_layers; i++) {
        lg_layer *l = &lg->layers[i];
        for (size_t k = 0; k < n_ins[i]; k++) {
            if (!resolve(lg, ins[i][k], &l->in[k])) {
                brisk_json_fail(&rs[i], "inputs", "layer \"%s\": \"%.60s\" names no input or layer", l->name, ins[i][k]);
                continue;
            }
            l->n_in++;
        }
    }
done:
    for (size_t i = 0; ins && i < n; i++) free(ins[i]);
    free(ins), free(n_ins), free(rs);
}

/* Depth-first order of the layers; a layer met again while on the path is a cycle. */
static int visit(brisk_layer_graph *lg, int i, char *state, int *n, brisk_json_reader *model) {
    if (state[i] == 2) return 1;
    if (state[i] == 1) {
        brisk_json_fail(model, "layers", "layer \"%s\" depends on itself (a cycle through its inputs)", lg->layers[i].name);
        return 0;
    }
    state[i] = 1;
    for (int k = 0; k < lg->layers[i].n_in; k++)
        if (lg->layers[i].in[k].layer && !visit(lg, lg->layers[i].in[k].index, state, n, model)) return 0;
    state[i] = 2;
    lg->order[(*n)++] = i;
    return 1;
}

static void sort_layers(brisk_json_reader *model, brisk_layer_graph *lg) {
    char *state = calloc((size_t)lg->n_layers + 1, 1);
    lg->order = calloc((size_t)lg->n_layers + 1, sizeof *lg->order);
    if (!state || !lg->order) {
        free(state);
        return (void)brisk_json_fail(model, "layers", "out of memory");
    }
    int n = 0;
    for (int i = 0; i < lg->n_layers; i++)
        if (!visit(lg, i, state, &n, model)) break;
    free(state);
}

void lg_read_outputs_and_losses(brisk_json_reader *model, brisk_layer_graph *lg, int outputs_required) {
    const char **outs = NULL;
    size_t n = 0;
    brisk_json_strings(model, "outputs", outputs_required, &outs, &n);
    if (n > BRISK_MAX_FIELDS) brisk_json_fail(model, "outputs", "at most %d outputs", BRISK_MAX_FIELDS);
    for (size_t i = 0; i < n && i < BRISK_MAX_FIELDS; i++) {
        if (!resolve(lg, outs[i], &lg->outputs[lg->n_outputs]) || !lg->outputs[lg->n_outputs].layer)
            brisk_json_fail(model, "outputs", "\"%.60s\" names no layer", outs[i]);
        else lg->n_outputs++;
    }
    free(outs);
    if (brisk_json_array_len(model, "losses", true, &n) != BRISK_OK) return;
    if (n < 1 || n > BRISK_LOSS_LOG_WIDTH - 1)
        return (void)brisk_json_fail(model, "losses", "expected 1 to %d losses, got %zu", BRISK_LOSS_LOG_WIDTH - 1, n);
    if (!(lg->losses = calloc(n, sizeof *lg->losses))) return (void)brisk_json_fail(model, "losses", "out of memory");
    for (size_t i = 0; i < n; i++) {
        brisk_json_reader r;
        brisk_json_object_at(model, "losses", i, &r);
        const char *out = NULL, *target = NULL, *mask = NULL, *name = NULL;
        int kind = 0;
        lg_loss *l = &lg->losses[lg->n_losses];
        brisk_json_string(&r, "output", &out);
        brisk_json_string(&r, "target", &target);
        brisk_json_enum(&r, "type", loss_kinds, &kind);
        brisk_json_number_or(&r, "weight", 1.0, BRISK_GT(0), &l->weight);
        brisk_json_number_or(&r, "delta", 1.0, BRISK_GT(0), &l->delta);
        brisk_json_string_or(&r, "mask", NULL, &mask);
        brisk_json_string_or(&r, "name", out, &name);
        if (name) snprintf(l->name, sizeof l->name, "%s", name);
        for (int k = 0; name && k < lg->n_losses; k++)
            if (strcmp(lg->losses[k].name, l->name) == 0)
                brisk_json_fail(&r, "name", "\"%.60s\" names loss %d too; give each loss its own \"name\" (the log's)",
                                l->name, k);
        l->kind = (lg_loss_kind)kind;
        l->mask = -1;
        if (out && (!resolve(lg, out, &l->output) || !l->output.layer))
            brisk_json_fail(&r, "output", "\"%.60s\" names no layer", out);
        else if (target && !resolve(lg, target, &l->target))
            brisk_json_fail(&r, "target", "\"%.60s\" names no input or layer", target);
        else if (mask && (l->mask = lg_find_input(lg, mask)) < 0)
            brisk_json_fail(&r, "mask", "\"%.60s\" names no input", mask);
        else if (mask && l->kind == LG_LOSS_CROSS_ENTROPY)
            brisk_json_fail(&r, "mask", "a mask weights an elementwise loss (mse, l1, huber, bce_with_logits), not %s",
                            loss_kinds[kind]);
        else if (out && target) lg->n_losses++;
    }
}

/* Every input feeds a layer or a loss: one that feeds nothing is a mistake in the config. */
void lg_check_inputs_used(brisk_json_reader *model, const brisk_layer_graph *lg) {
    for (int i = 0; i < lg->n_inputs; i++) {
        int used = 0;
        for (int k = 0; k < lg->n_layers && !used; k++)
            for (int j = 0; j < lg->layers[k].n_in; j++) used |= !lg->layers[k].in[j].layer && lg->layers[k].in[j].index == i;
        for (int k = 0; k < lg->n_losses && !used; k++)
            used = (!lg->losses[k].target.layer && lg->losses[k].target.index == i) || lg->losses[k].mask == i;
        if (!used) brisk_json_fail(model, "inputs", "input \"%s\" is used by no layer and no loss", lg->inputs[i].name);
    }
}

void brisk_layer_graph_read(brisk_json_reader *model, brisk_layer_graph **out) {
    *out = NULL;
    brisk_layer_graph *lg = calloc(1, sizeof *lg);
    if (!lg) return (void)brisk_json_fail(model, NULL, "out of memory");
    atomic_init(&lg->refs, 1);
    lg_read_inputs(model, lg);
    read_layers(model, lg);
    lg_read_outputs_and_losses(model, lg, 1);
    if (brisk_json_status(model->doc, NULL) == BRISK_OK) sort_layers(model, lg);
    if (brisk_json_status(model->doc, NULL) == BRISK_OK) lg_check_inputs_used(model, lg);
    *out = lg;
}

/* ---------------------------------------------------------------- building */

/* The inputs prediction reads, marked in used[n_inputs]: those of the layers the outputs depend
 * on (a layer that only feeds a loss, as a keypoint mask, is training's; an imported ONNX net
 * is built whole). -1 out of memory. */
static int predict_inputs(const brisk_layer_graph *lg, char *used) {
    char *need = malloc((size_t)lg->n_layers + 1);
    if (!need) return -1;
    memset(need, lg->onnx != NULL, (size_t)lg->n_layers);
    for (int o = 0; o < lg->n_outputs; o++) need[lg->outputs[o].index] = 1;
    for (int k = lg->n_layers - 1; k >= 0; k--) { /* inputs come before their layers in order[] */
        const lg_layer *l = &lg->layers[lg->order[k]];
        for (int j = 0; need[lg->order[k]] && j < l->n_in; j++)
            if (l->in[j].layer) need[l->in[j].index] = 1;
    }
    memset(used, 0, (size_t)lg->n_inputs);
    for (int k = 0; k < lg->n_layers; k++)
        for (int j = 0; need[k] && j < lg->layers[k].n_in; j++)
            if (!lg->layers[k].in[j].layer) used[lg->layers[k].in[j].index] = 1;
    free(need);
    return 0;
}

brisk_status nn_graph_fields(const brisk_model_spec *s, brisk_build_mode mode, brisk_model_io *io, brisk_error *err) {
    const brisk_layer_graph *lg = s->graph;
    if (!lg) return brisk_errorf(err, BRISK_ERR_INVALID, "graph model without layers");
    char used[BRISK_MAX_FIELDS];
    if (mode != BRISK_BUILD_TRAIN && predict_inputs(lg, used))
        return brisk_errorf(err, BRISK_ERR_NOMEM, "graph model: out of memory");
    for (int i = 0; i < lg->n_inputs; i++)
        if (mode == BRISK_BUILD_TRAIN || used[i]) nn_field(io, lg->inputs[i].name, lg->inputs[i].dtype, lg->inputs[i].sample);
    return BRISK_OK;
}

/* "[4, 16]" for the shapes of a layer's inputs, for its error */
static void input_shapes(const brisk_graph *g, const int *in, int n, char *buf, size_t cap) {
    buf[0] = 0;
    for (int k = 0; k < n; k++) {
        char s[96];
        if (in[k] >= 0) brisk_shape_str(&g->nodes[in[k]].shape, s, sizeof s);
        else snprintf(s, sizeof s, "?");
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s %s", k ? ", " : "", s,
                 in[k] >= 0 ? brisk_dtype_name(g->nodes[in[k]].dtype) : "");
    }
}

/* Builds the layers, then the weighted sum of the losses in training. node[]: each
 * layer's output; per[] (may be NULL) gets each layer's parameter count. */
int nn_graph_forward(const brisk_model_spec *s, brisk_graph *g, int64_t batch, const int *field_nodes, int train,
                     int *node, int64_t *per, int *loss, int *terms) {
    const brisk_layer_graph *lg = s->graph;
    int in_node[BRISK_MAX_FIELDS], f = 0;
    char used[BRISK_MAX_FIELDS];
    if (!train && predict_inputs(lg, used)) return brisk_graph_fail(g, BRISK_ERR_NOMEM, "graph model: out of memory");
    for (int i = 0; i < lg->n_inputs; i++) in_node[i] = train || used[i] ? field_nodes[f++] : -1;
    if (lg->onnx) {
        const char *names[BRISK_MAX_FIELDS];
        for (int i = 0; i < lg->n_inputs; i++) names[i] = lg->inputs[i].name;
        int before = g->n_params;
        if (brisk_onnx_net_build(lg->onnx, g, names, in_node, lg->n_inputs, node) < 0) return -1;
        for (int i = 0; per && i < lg->n_layers; i++) per[i] = 0;
        for (int p = before; per && lg->n_layers && p < g->n_params; p++) per[0] += g->params[p].buffer ? 0 : g->params[p].numel;
    }
    for (int k = 0; !lg->onnx && k < lg->n_layers; k++) {
        int i = lg->order[k];
        const lg_layer *l = &lg->layers[i];
        int in[LG_MAX_IN], missing = 0;
        for (int j = 0; j < l->n_in; j++) {
            in[j] = l->in[j].layer ? node[l->in[j].index] : in_node[l->in[j].index];
            missing |= in[j] < 0;
        }
        if (missing && !train) { /* it reads an input only training has (a loss's mask, say) */
            node[i] = -1;
            if (per) per[i] = 0;
            continue;
        }
        if (missing || g->err.code) /* an input that failed to build (out of memory): nothing to build on */
            return g->err.code ? -1 : brisk_graph_fail(g, BRISK_ERR_INTERNAL, "layer \"%s\": an input was not built", l->name);
        int params_before = g->n_params;
        lg_build b = {g, batch, l->name, in, l->n_in, train};
        node[i] = l->op->build(&b, &l->a);
        if (per) { /* trainable ones: buffers (running statistics) are state */
            per[i] = 0;
            for (int p = params_before; p < g->n_params; p++) per[i] += g->params[p].buffer ? 0 : g->params[p].numel;
        }
        if (node[i] < 0 || g->err.code) {
            char shapes[512];
            input_shapes(g, in, l->n_in, shapes, sizeof shapes);
            brisk_error e = g->err;
            brisk_error_prefix(&e, "layer \"%s\" (%s) given %s", l->name, l->op->name, shapes);
            g->err = e;
            return -1;
        }
    }
    *loss = -1;
    int term[BRISK_LOSS_LOG_WIDTH];
    for (int k = 0; train && k < lg->n_losses; k++) {
        const lg_loss *l = &lg->losses[k];
        int out = node[l->output.index], v;
        int target = l->target.layer ? node[l->target.index] : in_node[l->target.index];
        if (l->kind == LG_LOSS_CROSS_ENTROPY) {
            v = brisk_cross_entropy(g, out, target);
        } else if (l->kind != LG_LOSS_MSE) { /* the mean of pointwise terms, or sum(w l) / sum(w) */
            static const int kinds[LG_LOSS_COUNT] = {[LG_LOSS_L1] = BRISK_LOSS_L1, [LG_LOSS_HUBER] = BRISK_LOSS_HUBER,
                                                    [LG_LOSS_BCE] = BRISK_LOSS_BCE_LOGITS};
            v = brisk_pointwise_loss(g, kinds[l->kind], out, target, l->mask < 0 ? -1 : in_node[l->mask],
                                     (float)l->delta);
        } else if (l->mask < 0) {
            v = brisk_mse(g, out, target);
        } else { /* sum(w (p - t)^2) / sum(w): a mean over the elements the mask keeps */
            int d = brisk_sub(g, out, target), w = in_node[l->mask];
            uint32_t all = out >= 0 ? (1u << g->nodes[out].shape.ndim) - 1 : 0;
            int num = brisk_sum(g, brisk_mul(g, brisk_mul(g, d, d), w), all, 0);
            v = brisk_div(g, num, brisk_sum(g, brisk_expand(g, w, g->nodes[out].shape), all, 0));
        }
        if (v < 0 || g->err.code) {
            brisk_error e = g->err;
            brisk_error_prefix(&e, "loss %d (%s of \"%s\" against \"%s\")", k, loss_kinds[l->kind],
                               lg->layers[l->output.index].name, ref_name(lg, l->target));
            g->err = e;
            return -1;
        }
        term[k + 1] = brisk_reshape(g, v, brisk_shape1(1));
        if (l->weight != 1.0) v = brisk_scale(g, v, (float)l->weight, 0.0f);
        *loss = *loss < 0 ? v : brisk_add(g, *loss, v);
    }
    if (terms) *terms = -1;
    if (terms && train && lg->n_losses > 1) { /* logged, never differentiated: kept, not a root of the loss */
        term[0] = brisk_reshape(g, *loss, brisk_shape1(1));
        *terms = brisk_concat(g, term, lg->n_losses + 1, 0);
        if (*terms < 0) return -1;
        g->nodes[*terms].keep = 1;
    }
    return node[lg->outputs[0].index];
}

int nn_graph_n_layers(const brisk_model_spec *s) { return s->graph ? s->graph->n_layers : 0; }

brisk_task brisk_layer_graph_task(const brisk_layer_graph *lg) {
    return lg && lg->n_losses > 0 && lg->losses[0].kind == LG_LOSS_CROSS_ENTROPY ? BRISK_TASK_CLASSIFY : BRISK_TASK_REGRESS;
}

/* The task a graph model's metrics follow: classification when its first loss is a
 * cross-entropy (validation accuracy over that loss's output). */
brisk_task nn_graph_task(const brisk_model_spec *s, int *output_layer) {
    const brisk_layer_graph *lg = s->graph;
    *output_layer = lg->outputs[0].index;
    if (lg->n_losses > 0 && lg->losses[0].kind == LG_LOSS_CROSS_ENTROPY) {
        *output_layer = lg->losses[0].output.index;
        return BRISK_TASK_CLASSIFY;
    }
    return BRISK_TASK_REGRESS;
}

int nn_graph_loss_names(const brisk_model_spec *s, const char **names) {
    for (int k = 0; k < s->graph->n_losses; k++) names[k] = s->graph->losses[k].name;
    return s->graph->n_losses;
}

int nn_graph_target(const brisk_model_spec *s) {
    const brisk_layer_graph *lg = s->graph;
    if (!lg || lg->n_losses < 1) return -1;
    lg_ref r = lg->losses[0].target;
    for (int hops = 0; r.layer && hops <= lg->n_layers; hops++) r = lg->layers[r.index].in[0];
    return r.layer ? -1 : r.index; /* a training build's fields are the inputs, in order */
}

brisk_status brisk_layer_graph_check(brisk_model_spec *s, brisk_error *err) {
    if (s->type != BRISK_MODEL_GRAPH) return BRISK_OK;
    brisk_graph *g = brisk_graph_new();
    if (!g) return brisk_errorf(err, BRISK_ERR_NOMEM, "model: out of memory");
    brisk_model_io io;
    brisk_status st = brisk_model_build(s, 1, BRISK_BUILD_TRAIN, g, &io, err);
    if (!st) { /* what the data checks read: the classes of a classifier, a regressor's width */
        const brisk_shape *o = &g->nodes[io.output].shape;
        s->outputs = s->task == BRISK_TASK_CLASSIFY ? o->d[o->ndim - 1] : brisk_shape_numel(o);
        s->inputs = brisk_shape_numel(&io.fields[0].sample);
    }
    brisk_graph_free(g);
    return st ? brisk_error_prefix(err, "model") : BRISK_OK;
}

/* ---------------------------------------------------------------- the layer table */

brisk_status brisk_model_summary(const brisk_model_spec *s, char **out, brisk_error *err) {
    *out = NULL;
    brisk_graph *g = brisk_graph_new();
    brisk_strbuf t = {0};
    if (!g || !brisk_strbuf_reserve(&t, 1024)) {
        brisk_graph_free(g);
        brisk_strbuf_free(&t);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "summary: out of memory");
    }
    brisk_model_io io;
    brisk_status st = brisk_model_build(s, 1, BRISK_BUILD_TRAIN, g, &io, err);
    brisk_model_spec ps = *s; /* a preset family's table is its graph's */
    if (!st && nn_has_preset(s->type)) st = nn_preset_graph(s, &ps.graph, err);
    if (!st && ps.graph) {
        const brisk_layer_graph *lg = ps.graph;
        int *node = calloc((size_t)lg->n_layers, sizeof *node), field[BRISK_MAX_FIELDS], loss;
        int64_t *per = calloc((size_t)lg->n_layers, sizeof *per);
        brisk_graph *g2 = brisk_graph_new();
        if (!node || !per || !g2) st = brisk_errorf(err, BRISK_ERR_NOMEM, "summary: out of memory");
        for (int i = 0; !st && i < io.n_fields; i++) {
            int64_t d[BRISK_MAX_DIMS] = {1};
            for (int k = 0; k < io.fields[i].sample.ndim; k++) d[k + 1] = io.fields[i].sample.d[k];
            field[i] = brisk_input(g2, io.fields[i].name, io.fields[i].dtype, brisk_shape_make(io.fields[i].sample.ndim + 1, d));
        }
        if (!st && nn_graph_forward(&ps, g2, 1, field, 1, node, per, &loss, NULL) < 0) st = brisk_graph_error(g2, err);
        brisk_strbuf_printf(&t, "%-24s %-16s %-24s %12s\n", "layer", "op", "output (per sample)", "parameters");
        for (int i = 0; i < lg->n_inputs; i++) {
            char sh[96];
            brisk_shape_str(&lg->inputs[i].sample, sh, sizeof sh);
            brisk_strbuf_printf(&t, "%-24s %-16s %-24s %12s\n", lg->inputs[i].name, "input", sh, "");
        }
        int64_t total = 0;
        for (int k = 0; !st && k < lg->n_layers; k++) {
            int i = lg->order[k];
            char sh[96];
            brisk_shape full = g2->nodes[node[i]].shape, sample = full;
            sample.ndim = full.ndim - 1;
            for (int d = 0; d < sample.ndim; d++) sample.d[d] = full.d[d + 1];
            brisk_shape_str(&sample, sh, sizeof sh);
            brisk_strbuf_printf(&t, "%-24s %-16s %-24s %12lld\n", lg->layers[i].name, lg->layers[i].op->name, sh, (long long)per[i]);
            total += per[i];
        }
        for (int k = 0; !st && k < lg->n_losses; k++)
            brisk_strbuf_printf(&t, "loss %-19d %-16s %s vs %s, weight %g\n", k, loss_kinds[lg->losses[k].kind],
                lg->layers[lg->losses[k].output.index].name, ref_name(lg, lg->losses[k].target), lg->losses[k].weight);
        if (!st) brisk_strbuf_printf(&t, "total: %lld parameters in %d layers\n", (long long)total, lg->n_layers);
        free(node), free(per);
        brisk_graph_free(g2);
    } else if (!st) {
        brisk_strbuf_printf(&t, "%s: %lld parameters\n", brisk_model_type_name(s->type), (long long)brisk_model_param_count(s));
    }
    brisk_graph_free(g);
    if (ps.graph != s->graph) brisk_layer_graph_unref(ps.graph);
    if (!st && t.oom) st = brisk_errorf(err, BRISK_ERR_NOMEM, "summary: out of memory");
    if (st) brisk_strbuf_free(&t);
    else *out = t.s;
    return st;
}
