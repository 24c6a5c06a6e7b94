/* ONNX export of a checkpoint's inference graph (`brisk export CKPT --onnx FILE`), written
 * with core/protowire: ModelProto, opset 17 (IR version 8), fp32 compute.
 *
 * The model is not re-described here: its PREDICT graph is built from the config inside the
 * checkpoint and walked node by node, each brisk op becoming its ONNX equivalent (fused ops
 * as short ONNX subgraphs: ATTENTION as MatMul/Softmax, LSTM and GRU as ONNX's LSTM and GRU
 * with the gates reordered). The graph is built twice, for batches 2 and 3: the dimensions that differ are
 * the batch's, so the ONNX model takes any batch (dim "N") and its Reshapes say -1 there.
 * What `brisk predict` does around the graph is in the model too: the input normalisation of
 * windowed data, softmax for a classifier, the target's units for a regression, a meshgnn's
 * change in the fields' units. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bytes.h"
#include "export/export_onnx.h"
#include "infer/predict_internal.h"
#include "run/checkpoint_file.h"

static void value_info(ox *o, int field, const char *name, int type, const brisk_shape *s2, const brisk_shape *s3) {
    brisk_pb vi = {0}, tp = {0}, tt = {0}, sh = {0};
    for (int i = 0; i < s2->ndim; i++) {
        brisk_pb d = {0};
        if (s2->d[i] != s3->d[i]) brisk_pb_string(&d, 2, "N");
        else brisk_pb_int(&d, 1, s2->d[i]);
        brisk_pb_message(&sh, 1, &d);
        brisk_pb_free(&d);
    }
    brisk_pb_int(&tt, 1, type);
    brisk_pb_message(&tt, 2, &sh);
    brisk_pb_message(&tp, 1, &tt);
    brisk_pb_string(&vi, 1, name);
    brisk_pb_message(&vi, 2, &tp);
    brisk_pb_message(&o->graph, (uint32_t)field, &vi);
    o->graph.oom |= vi.oom | tp.oom | tt.oom | sh.oom;
    brisk_pb_free(&vi), brisk_pb_free(&tp), brisk_pb_free(&tt), brisk_pb_free(&sh);
}

/* Marks what the output needs, then emits it in graph order (topological). */
static brisk_status walk(ox *o, const brisk_model_io *io, const brisk_onnx_post *p) {
    const brisk_graph *g = o->g;
    if (g->n_nodes != o->g3->n_nodes)
        return brisk_errorf(o->err, BRISK_ERR_UNSUPPORTED, "export: the model's graph depends on the batch size");
    uint8_t *need = calloc((size_t)g->n_nodes, 1);
    if (!need) return brisk_errorf(o->err, BRISK_ERR_NOMEM, "export: out of memory");
    need[io->output] = 1;
    for (int i = g->n_nodes - 1; i >= 0; i--)
        for (int k = 0; need[i] && k < g->nodes[i].n_in; k++)
            if (g->nodes[i].in[k] >= 0) need[g->nodes[i].in[k]] = 1;
    brisk_status st = BRISK_OK;
    for (int f = 0; f < io->n_fields && !st; f++) { /* inputs: the model's, in brisk's order */
        const brisk_input_info *in = &g->inputs[io->input_node[f]];
        int id = in->node, type = in->dtype == BRISK_I32 ? T_INT32 : T_FLOAT;
        value_info(o, 11, in->name, type, &g->nodes[id].shape, &o->g3->nodes[id].shape);
        snprintf(o->name[id], sizeof o->name[id], "%s", in->name);
        if (f == 0 && p->n) { /* windowed data: brisk predict normalises the raw features */
            char mn[BRISK_NAME_MAX + 8], sd[BRISK_NAME_MAX + 8], tmp[BRISK_NAME_MAX + 8];
            NODE(o, "Sub", fresh(o, tmp), NULL, in->name, const_f32(o, mn, p->mean, p->n));
            NODE(o, "Div", fresh(o, o->name[id]), NULL, tmp, const_f32(o, sd, p->std, p->n));
        }
    }
    for (int i = 0; i < g->n_nodes && !st; i++)
        if (need[i] && g->nodes[i].op != BRISK_OP_INPUT) st = brisk_onnx_emit(o, i);
    free(need);
    if (st) return st;
    char c[2][BRISK_NAME_MAX + 8], t[BRISK_NAME_MAX + 8];
    const char *y = o->name[io->output];
    attrs a = {0};
    if (p->softmax) {
        attr_int(&a, "axis", -1);
        NODE(o, "Softmax", "output", &a, y);
    } else if (p->nc) {
        NODE(o, "Mul", fresh(o, t), NULL, y, const_f32(o, c[0], p->cstd, p->nc));
        NODE(o, "Add", "output", NULL, t, const_f32(o, c[1], p->cmean, p->nc));
    } else if (p->tstd != 1.0f || p->tmean != 0.0f) {
        NODE(o, "Mul", fresh(o, t), NULL, y, scalar(o, c[0], p->tstd));
        NODE(o, "Add", "output", NULL, t, scalar(o, c[1], p->tmean));
    } else {
        NODE(o, "Identity", "output", NULL, y);
    }
    value_info(o, 12, "output", T_FLOAT, &g->nodes[io->output].shape, &o->g3->nodes[io->output].shape);
    return BRISK_OK;
}

brisk_status brisk_onnx_write(const brisk_graph *g, const brisk_graph *g3, const float *params, const brisk_model_io *io,
                              const brisk_onnx_post *post, int fp16, const char *name, const char *path, size_t *bytes,
                              brisk_error *err) {
    ox o = {g, g3, params, fp16, {0}, 0, NULL, err, ""};
    brisk_pb model = {0}, opset = {0};
    brisk_status st = BRISK_OK;
    if (!(o.name = calloc((size_t)g->n_nodes, sizeof *o.name))) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    if ((st = walk(&o, io, post))) goto out;
    brisk_pb_int(&model, 1, ONNX_IR_VERSION);
    brisk_pb_string(&model, 2, "brisk");
    brisk_pb_string(&model, 3, BRISK_VERSION);
    brisk_pb_string(&model, 6, fp16 ? "brisk inference graph; fp16 weights, fp32 compute" : "brisk inference graph, fp32");
    brisk_pb_string(&o.graph, 2, name);
    brisk_pb_message(&model, 7, &o.graph);
    brisk_pb_string(&opset, 1, "");
    brisk_pb_int(&opset, 2, ONNX_OPSET);
    brisk_pb_message(&model, 8, &opset);
    if (model.oom || o.graph.oom || opset.oom) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "export: out of memory"); goto out; }
    brisk_out w; /* atomically, as every output: temporary file, fsync, rename */
    if ((st = brisk_out_open(&w, path, err))) goto out;
    brisk_out_write(&w, model.p, model.n);
    if ((st = brisk_out_commit(&w, err))) goto out;
    if (bytes) *bytes = model.n;
out:
    brisk_pb_free(&model);
    brisk_pb_free(&opset);
    brisk_pb_free(&o.graph);
    free(o.name);
    return st;
}

brisk_status brisk_export_onnx(const char *checkpoint, const char *onnx_path, int fp16, const brisk_logger *log,
                               brisk_error *err) {
    if (brisk_out_replaces(onnx_path, checkpoint))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: this is the checkpoint: writing the ONNX model would replace "
                            "it; write it to another file", onnx_path);
    brisk_config cfg;
    brisk_status st = brisk_checkpoint_config(checkpoint, &cfg, err);
    if (st) return st;
    const brisk_model_spec *m = &cfg.model;
    brisk_graph *g = brisk_graph_new(), *g3 = brisk_graph_new();
    brisk_backend *be = brisk_backend_cpu_new(1);
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_model_io io, io3;
    float *params = NULL, *mean = NULL, *std = NULL, *units = NULL, *tmean = NULL, *tstd = NULL;
    if (!g || !g3 || !be) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = brisk_meshgnn_fit_checkpoint(checkpoint, &cfg, err)) ||
        (st = brisk_model_build(m, 2, BRISK_BUILD_PREDICT, g, &io, err)) ||
        (st = brisk_model_build(m, 3, BRISK_BUILD_PREDICT, g3, &io3, err)) || (st = brisk_plan_build(g, &plan, err)) ||
        (st = brisk_exec_create(g, &plan, be, &ex, err)) || (st = brisk_checkpoint_load_params(checkpoint, ex, err)))
        goto out;
    if (!(params = malloc(sizeof(float) * (size_t)(g->n_param_floats + 1)))) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = be->download(be, params, ex->params, sizeof(float) * (size_t)g->n_param_floats, err))) goto out;
    int nn = 0;
    /* a meshgnn's normalisation is its data's (brisk_weather), not of one input row: its
     * inputs are the normalised fields, as brisk rollout feeds them */
    if (io.n_fields == 1 && m->type != BRISK_MODEL_MESHGNN &&
        (st = brisk_checkpoint_normalization(checkpoint, &mean, &std, &nn, err)))
        goto out;
    int tn = 0;
    if (m->task == BRISK_TASK_REGRESS && m->type != BRISK_MODEL_DIFFUSION &&
        (st = brisk_checkpoint_target_normalization(checkpoint, &tmean, &tstd, &tn, err)))
        goto out;
    /* a window's one target: a scalar pair; a table's per output: along the output's last axis */
    brisk_onnx_post p = {m->type != BRISK_MODEL_DIFFUSION && m->task == BRISK_TASK_CLASSIFY, tn == 1 ? tmean[0] : 0.0f,
                         tn == 1 ? tstd[0] : 1.0f, mean, std, nn, tn > 1 ? tmean : NULL, tn > 1 ? tstd : NULL,
                         tn > 1 ? tn : 0};
    if (m->type == BRISK_MODEL_MESHGNN && cfg.data.netcdf.enabled) { /* as predict: the change in the fields' units */
        if (!(units = malloc(sizeof(float) * (size_t)(2 * m->outputs)))) {
            st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((st = brisk_meshgnn_change_units(checkpoint, m->outputs, units, units + m->outputs, err))) goto out;
        p.cmean = units, p.cstd = units + m->outputs, p.nc = (int)m->outputs;
    }
    const char *name = m->type == BRISK_MODEL_DIFFUSION ? "diffusion_denoiser" : brisk_model_type_name(m->type);
    size_t bytes = 0;
    if ((st = brisk_onnx_write(g, g3, params, &io, &p, fp16, name, onnx_path, &bytes, err))) goto out;
    brisk_log(log, BRISK_LOG_INFO, "export    %s -> %s (ONNX opset %d, %s, %zu bytes)", checkpoint, onnx_path, ONNX_OPSET,
              fp16 ? "fp16 weights" : "fp32", bytes);
out:
    free(params);
    free(units);
    free(tmean);
    free(tstd);
    free(mean);
    free(std);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    brisk_graph_free(g);
    brisk_graph_free(g3);
    if (be) be->destroy(be);
    brisk_config_free(&cfg);
    return st;
}
