/* What `brisk predict` feeds a model: samples [N, ...sample shape] from an .npy, from the
 * .npz member or .csv columns the model was trained on (data.fields.x, else "x"; an .npz
 * with one member gives that one), in any shape train also takes (an mlp's [64] as
 * [N, 64, 1]; one input as [N]); or, for a model trained on windows, the series itself (a
 * .csv or .npz with the feature columns by name, or an .npy [rows, features] in the
 * config's order), cut into every window of seq_len rows (window k ends at row
 * k + seq_len - 1). Raw values in both cases: the normalisation stored in the checkpoint
 * is applied here, as in training. A meshgnn's samples [N, grid nodes, inputs] come
 * normalised, as brisk rollout builds them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "infer/predict_internal.h"
#include "run/checkpoint_file.h"

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The series [rows, F] -> all windows [rows - L + 1, L, F]. */
static brisk_status windows_of(brisk_tensor *series, int64_t L, const char *input, brisk_tensor *x, brisk_error *err) {
    int64_t rows = series->shape.d[0], F = series->shape.d[1], N = rows - L + 1;
    if (N < 1)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %lld rows, fewer than one window of %lld", input, (long long)rows,
                            (long long)L);
    brisk_status st = brisk_tensor_alloc(x, BRISK_F32, brisk_shape3(N, L, F), err);
    for (int64_t k = 0; !st && k < N; k++)
        memcpy((float *)x->data + k * L * F, (const float *)series->data + k * F, sizeof(float) * (size_t)(L * F));
    return st;
}

/* Non-windowed .npz / .csv input: the source data.fields gives x, as in training (a model
 * trained from an .npz reads every column of a .csv). */
static brisk_status samples_load(const brisk_config *cfg, const char *input, brisk_tensor *raw, brisk_error *err) {
    const brisk_data_spec *d = &cfg->data;
    int j = 0;
    while (j < d->n_fields && strcmp(d->field_names[j], "x") != 0) j++;
    int n = j < d->n_fields ? d->field_n_sources[j] : 1;
    const char **cols = malloc((size_t)n * sizeof *cols);
    if (!cols) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    if (j < d->n_fields) brisk_data_field_sources(d, j, cols);
    else cols[0] = "x";
    brisk_status st;
    if (ends_with(input, ".csv") && j == d->n_fields) { /* trained from an .npz: every column, in order */
        st = brisk_csv_read(input, NULL, 0, BRISK_F32, raw, err);
    } else if (ends_with(input, ".csv")) {
        brisk_field_spec spec = {"x", BRISK_F32, NULL, cols, n};
        brisk_dataset ds;
        if (!(st = brisk_dataset_load_csv(&ds, input, &spec, 1, err))) {
            *raw = ds.fields[0].tensor;
            ds.fields[0].tensor.data = NULL;
            brisk_dataset_free(&ds);
        }
    } else {
        brisk_npz z;
        brisk_npy_array a;
        const brisk_npy_array *m = NULL;
        memset(&a, 0, sizeof a);
        if (!(st = brisk_npz_read(input, &z, err))) {
            m = brisk_npz_find(&z, cols[0]);
            if (!m && z.count == 1) m = &z.members[0].array;
            if (!m) st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no member '%s' (the model's x) and more than one member",
                                      input, cols[0]);
            char what[1200];
            snprintf(what, sizeof what, "%s: member '%s'", input, m == &z.members[0].array ? z.members[0].name : cols[0]);
            if (!st) st = brisk_npy_to_tensor(m, BRISK_F32, what, raw, err);
            brisk_npz_free(&z);
        }
    }
    free(cols);
    return st;
}

brisk_status brisk_predict_input(const brisk_config *cfg, const char *checkpoint, const char *input,
                                 const brisk_shape *sample, brisk_tensor *x, brisk_error *err) {
    memset(x, 0, sizeof *x);
    const brisk_windows_config *wc = &cfg->data.windows;
    float *mean = NULL, *std = NULL;
    int nn = 0;
    brisk_status st = brisk_checkpoint_normalization(checkpoint, &mean, &std, &nn, err);
    if (st) return st;
    /* a meshgnn's is of its fields, which brisk_weather_input turns into the normalised
     * inputs predict takes */
    if (cfg->model.type == BRISK_MODEL_MESHGNN) nn = 0;
    /* Without it raw data would reach a model trained on normalised windows. */
    if (wc->enabled && wc->normalize && nn == 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: trained on normalised windows (data.windows.normalize) but holds "
                            "no 'normalization' metadata; damaged or not written by brisk", checkpoint);
    brisk_tensor raw = {0};
    char want[96];
    brisk_shape_str(sample, want, sizeof want);
    int64_t per = brisk_shape_numel(sample), F = sample->ndim ? sample->d[sample->ndim - 1] : 1;
    int npz = ends_with(input, ".npz"), csv = ends_with(input, ".csv");
    if (ends_with(input, ".npy")) st = brisk_npy_load(input, BRISK_F32, &raw, err);
    else if (wc->enabled) {
        const char *names[BRISK_MAX_FEATURES];
        for (int i = 0; i < wc->nfeatures; i++) names[i] = wc->features[i];
        st = brisk_columns_load(input, names, wc->nfeatures, &raw, err);
    } else if (npz || csv) st = samples_load(cfg, input, &raw, err);
    else st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: expected an .npy, .npz or .csv of samples [N, %s", input, want + 1);
    int series = !st && wc->enabled && sample->ndim == 2 && raw.shape.ndim == 2 && raw.shape.d[1] == F;
    int samples = !st && raw.shape.ndim == sample->ndim + 1 &&
                  memcmp(raw.shape.d + 1, sample->d, sizeof(int64_t) * (size_t)sample->ndim) == 0;
    /* As in training (setup.c bind_data): a flat sample [K] also takes rows of K values in
     * another shape ([N, K, 1]; [N] for K = 1). */
    if (!st && !series && !samples && sample->ndim == 1 && raw.shape.ndim >= 1 && raw.shape.ndim != 2 &&
        brisk_shape_numel(&raw.shape) == raw.shape.d[0] * per) {
        raw.shape = brisk_shape2(raw.shape.d[0], per);
        samples = 1;
    }
    if (!st && !series && !samples) {
        char got[96];
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: expected an array of shape [N, %s (the model's inputs)%s, got %s", input,
                          want + 1, wc->enabled ? " or a series [rows, features]" : "",
                          brisk_shape_str(&raw.shape, got, sizeof got));
    }
    const float *v = raw.data;
    for (int64_t i = 0; !st && i < brisk_shape_numel(&raw.shape); i++)
        if (!isfinite(v[i]))
            st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: row %lld, column %lld: %s is not a finite number", input,
                              (long long)(i / (series ? F : per)), (long long)(i % (series ? F : per)),
                              isnan(v[i]) ? "NaN" : "inf");
    if (!st && nn && nn != F)
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: normalisation for %d features, the model takes %lld", checkpoint,
                          nn, (long long)F);
    if (!st && nn) brisk_normalize_rows(raw.data, brisk_shape_numel(&raw.shape) / F, (int)F, mean, std);
    if (!st && series) {
        st = windows_of(&raw, sample->d[0], input, x, err);
        brisk_tensor_free(&raw);
    } else if (!st) {
        *x = raw;
    } else {
        brisk_tensor_free(&raw);
    }
    free(mean);
    free(std);
    return st;
}
