/* Inference from a checkpoint: the model is rebuilt from the config stored inside it,
 * so a checkpoint is all `brisk predict` needs, on any device (inputs: predict_input.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/bytes.h"
#include "config/config_internal.h"
#include "infer/predict_internal.h"
#include "run/checkpoint_file.h"

#define PREDICT_BATCH 256

void brisk_softmax_rows(float *x, int64_t rows, int64_t c) {
    for (int64_t r = 0; r < rows; r++) {
        float *p = x + r * c, mx = p[0], s = 0;
        for (int64_t j = 1; j < c; j++) mx = p[j] > mx ? p[j] : mx;
        for (int64_t j = 0; j < c; j++) s += (p[j] = expf(p[j] - mx));
        for (int64_t j = 0; j < c; j++) p[j] /= s;
    }
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A device or FIFO (/dev/stdout, a named pipe) takes .npy whatever its name. */
static int is_device(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
}

brisk_status brisk_predict_file(const char *checkpoint, const char *input_npy, const char *output_npy,
                                const brisk_logger *log, brisk_error *err) {
    return brisk_predict_file_with(checkpoint, input_npy, output_npy, NULL, log, err);
}

brisk_status brisk_predict_file_with(const char *checkpoint, const char *input_npy, const char *output_npy,
                                     const brisk_predict_options *opt, const brisk_logger *log, brisk_error *err) {
    brisk_config cfg;
    brisk_status st = brisk_checkpoint_config(checkpoint, &cfg, err);
    if (st) return st;
    const brisk_model_spec *m = &cfg.model;
    brisk_tensor x = {0}, y = {0};
    brisk_predict_images images = {0}; /* input from a folder of images, read a batch at a time */
    brisk_graph *g = NULL;
    brisk_plan plan = {0};
    brisk_exec *ex = NULL;
    brisk_backend *be = NULL;
    float *buf = NULL, *units = NULL, *tmean = NULL, *tstd = NULL;
    int tn = 0;
    int to_csv = ends_with(output_npy, ".csv");
    if (!to_csv && !ends_with(output_npy, ".npy") && strcmp(output_npy, "-") != 0 && !is_device(output_npy)) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: expected an output ending in .npy or .csv (the format is taken "
                          "from it), or - for .npy on standard output", output_npy);
        goto out;
    }
    /* the output is written to a temporary file and renamed over its name: the input gone */
    if (brisk_out_replaces(output_npy, input_npy)) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: this is the input %s: writing the predictions would replace it; "
                          "write them to another file", output_npy, input_npy);
        goto out;
    }
    if (m->type == BRISK_MODEL_DIFFUSION) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: predict takes one input array, and a diffusion model needs "
                          "coarse fields, x_t and t: it makes fine fields by sampling (brisk sample)", checkpoint);
        goto out;
    }
    brisk_model_io io;
    if ((st = brisk_meshgnn_fit_checkpoint(checkpoint, &cfg, err)) ||
        (st = brisk_model_fields(m, BRISK_BUILD_PREDICT, &io, err)))
        goto out;
    if (io.n_fields != 1) {
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: this model also takes a padding mask; predict reads only x",
                          checkpoint);
        goto out;
    }
    struct stat sb;
    int folder = stat(input_npy, &sb) == 0 && S_ISDIR(sb.st_mode);
    if ((st = folder ? brisk_predict_images_open(&cfg, checkpoint, input_npy, &io.fields[0].sample,
                                                 opt && opt->strict_images, log, &images, err)
                     : brisk_predict_input(&cfg, checkpoint, input_npy, &io.fields[0].sample, &x, err)))
        goto out;
    const float *xv = x.data;
    int64_t per = brisk_shape_numel(&io.fields[0].sample);
    int64_t N = folder ? images.ds.count : x.shape.d[0], C = m->outputs;
    int64_t most = folder ? brisk_predict_images_batch_size(&images, PREDICT_BATCH) : PREDICT_BATCH;
    int64_t B = N < most ? (N > 0 ? N : 1) : most;
    g = brisk_graph_new();
    be = brisk_backend_cpu_new(cfg.speed.threads);
    if (!g || !be) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = brisk_model_build(m, B, BRISK_BUILD_PREDICT, g, &io, err)) || (st = brisk_plan_build(g, &plan, err)) ||
        (st = brisk_exec_create(g, &plan, be, &ex, err)) || (st = brisk_checkpoint_load_params(checkpoint, ex, err)))
        goto out;
    C = brisk_shape_numel(&g->nodes[io.output].shape) / B; /* a meshgnn's: grid nodes x outputs */
    if ((st = brisk_tensor_alloc(&y, BRISK_F32, brisk_shape2(N, C), err))) goto out;
    buf = calloc((size_t)(B * (per > C ? per : C)), sizeof(float));
    if (!buf) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto out; }
    ex->step.training = 0;
    int64_t rows = 0; /* rows of y filled: all N, less the images skipped */
    for (int64_t r = 0; r < N; r += B) {
        int64_t n = N - r < B ? N - r : B;
        /* The graph has a fixed batch: a short chunk is zero-padded and only its rows kept. */
        memset(buf, 0, sizeof(float) * (size_t)(B * per));
        if (!folder) memcpy(buf, xv + r * per, sizeof(float) * (size_t)(n * per));
        else if ((st = brisk_predict_images_batch(&images, r, n, buf, &n, err))) goto out;
        if (n == 0) continue;
        if ((st = brisk_exec_set_input(ex, io.input_node[0], buf, err)) ||
            (st = brisk_exec_run(ex, BRISK_RUN_PREDICT, err)) || (st = brisk_exec_read(ex, io.output, buf, err)))
            goto out;
        memcpy((float *)y.data + rows * C, buf, sizeof(float) * (size_t)(n * C));
        rows += n;
    }
    if (folder && rows == 0) {
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: none of its %lld images could be read (each named above); nothing "
                          "written", input_npy, (long long)(N + brisk_image_dataset_skips(&images.ds)));
        goto out;
    }
    N = rows;
    y.shape.d[0] = N;
    if (m->task == BRISK_TASK_CLASSIFY) brisk_softmax_rows(y.data, N, C);
    /* a regression target learnt normalised: outputs back in its units */
    if (m->task == BRISK_TASK_REGRESS &&
        (st = brisk_checkpoint_target_normalization(checkpoint, &tmean, &tstd, &tn, err)))
        goto out;
    if (tn > 1 && tn != C) {
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: target_normalization for %d outputs, the model has %lld",
                          checkpoint, tn, (long long)C);
        goto out;
    }
    for (int64_t i = 0; tn && i < N * C; i++) {
        int64_t c = tn == 1 ? 0 : i % C;
        ((float *)y.data)[i] = ((float *)y.data)[i] * tstd[c] + tmean[c];
    }
    /* a meshgnn on NetCDF fields: the change over the lead in the fields' units, as rollout adds it */
    if (m->type == BRISK_MODEL_MESHGNN && cfg.data.netcdf.enabled) {
        int64_t K = m->outputs;
        if (!(units = malloc(sizeof(float) * (size_t)(2 * K)))) {
            st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((st = brisk_meshgnn_change_units(checkpoint, K, units, units + K, err))) goto out;
        for (int64_t i = 0; i < N * C; i++) ((float *)y.data)[i] = ((float *)y.data)[i] * units[K + i % K] + units[i % K];
    }
    /* The input was checked finite: a NaN or inf here comes from the weights. */
    int64_t bad = 0;
    for (int64_t i = 0; i < N * C; i++) bad += !isfinite(((const float *)y.data)[i]);
    if (bad) {
        st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: %lld of the %lld predicted values are NaN or inf although the input "
                          "is finite: the checkpoint's weights are not usable (NaN or overflowing); nothing written",
                          checkpoint, (long long)bad, (long long)(N * C));
        goto out;
    }
    if (folder) {
        if ((st = brisk_predict_images_output(&cfg, &images, &y, output_npy, to_csv, err))) goto out;
    } else {
        if (m->type == BRISK_MODEL_MESHGNN && !to_csv) y.shape = brisk_shape3(N, C / m->outputs, m->outputs);
        if ((st = to_csv ? brisk_csv_write(output_npy, &y, m->task == BRISK_TASK_CLASSIFY ? "p" : "y", err)
                         : brisk_npy_write(output_npy, &y, err)))
            goto out;
    }
    if (m->type == BRISK_MODEL_MESHGNN)
        brisk_log(log, BRISK_LOG_INFO, "predict   %lld samples -> %s [%lld, %lld, %lld] (%s)", (long long)N, output_npy,
                  (long long)N, (long long)(C / m->outputs), (long long)m->outputs,
                  cfg.data.netcdf.enabled ? "the change of each channel over the lead, in the fields' units"
                                          : "outputs per grid node");
    else if (m->type == BRISK_MODEL_RESNET)
        brisk_log(log, BRISK_LOG_INFO, "predict   %lld %s -> %s [%lld, %lld, 2] (keypoints, %s)", (long long)N,
                  folder ? "images" : "rows", output_npy, (long long)N, (long long)C / 2,
                  folder ? "in pixels of each image" : "as fractions of the width and height");
    else
        brisk_log(log, BRISK_LOG_INFO, "predict   %lld rows -> %s [%lld, %lld] (%s)", (long long)N, output_npy, (long long)N,
                  (long long)C, m->task == BRISK_TASK_CLASSIFY ? "class probabilities" : "regression outputs");
    if (folder && images.skipped)
        brisk_log(log, BRISK_LOG_WARN, "predict   %lld of the folder's %lld images skipped (each named above): they have "
                  "no row in %s", (long long)images.skipped, (long long)(N + images.skipped), output_npy);
out:
    free(buf);
    free(units);
    free(tmean);
    free(tstd);
    brisk_tensor_free(&x);
    brisk_tensor_free(&y);
    brisk_predict_images_close(&images);
    if (ex) brisk_exec_free(ex);
    brisk_plan_free(&plan);
    if (g) brisk_graph_free(g);
    if (be) be->destroy(be);
    brisk_config_free(&cfg);
    return st;
}
