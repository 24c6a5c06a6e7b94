/* Windowed time-series datasets (data.h, "windowed time series"): named columns from
 * CSV/NPZ/NPY into a table, the chronological split, normalisation fitted on the
 * training rows, targets from the future of a column, and the dataset whose "x" field
 * views the normalised series (overlapping windows share memory). */
#include "brisk/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* NPZ: one 1-D member (or [rows, 1]) per column. */
static brisk_status npz_columns(const char *path, const char *const *names, int n, brisk_tensor *out,
                                brisk_error *err) {
    brisk_status st = BRISK_OK;
    memset(out, 0, sizeof *out);
    for (int c = 0; c < n && !st; c++) {
        brisk_npy_array a;
        brisk_tensor t = {0};
        char what[300];
        snprintf(what, sizeof what, "%s: column '%.100s'", path, names[c]);
        if ((st = brisk_npz_read_one(path, names[c], &a, err))) break;
        st = brisk_npy_to_tensor(&a, BRISK_F32, what, &t, err);
        brisk_npy_free(&a);
        if (st) break;
        int64_t rows = t.shape.ndim >= 1 ? t.shape.d[0] : 0;
        if (t.shape.ndim < 1 || t.shape.ndim > 2 || (t.shape.ndim == 2 && t.shape.d[1] != 1) ||
            (c > 0 && rows != out->shape.d[0])) {
            char sb[96];
            st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s is %s; expected one value per row%s", what,
                              brisk_shape_str(&t.shape, sb, sizeof sb), c ? " as the columns before it" : "");
        }
        if (!st && c == 0) st = brisk_tensor_alloc(out, BRISK_F32, brisk_shape2(rows, n), err);
        for (int64_t r = 0; !st && r < rows; r++) ((float *)out->data)[r * n + c] = ((const float *)t.data)[r];
        brisk_tensor_free(&t);
    }
    if (st) brisk_tensor_free(out);
    return st;
}

/* NPY [rows, C]: columns named by index. */
static brisk_status npy_columns(const char *path, const char *const *names, int n, brisk_tensor *out,
                                brisk_error *err) {
    brisk_tensor all = {0};
    memset(out, 0, sizeof *out);
    brisk_status st = brisk_npy_load(path, BRISK_F32, &all, err);
    if (st) return st;
    char sb[96];
    if (all.shape.ndim != 2) {
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: an array %s; expected [rows, columns]", path,
                          brisk_shape_str(&all.shape, sb, sizeof sb));
        brisk_tensor_free(&all);
        return st;
    }
    int64_t rows = all.shape.d[0], C = all.shape.d[1];
    int *idx = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!idx) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    for (int c = 0; c < n && !st; c++) {
        char *end;
        long v = strtol(names[c], &end, 10);
        if (end == names[c] || *end || v < 0 || v >= C)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no column '%.100s': an .npy's %lld columns are named "
                              "by index, \"0\" to \"%lld\"", path, names[c], (long long)C, (long long)C - 1);
        else idx[c] = (int)v;
    }
    if (!st) st = brisk_tensor_alloc(out, BRISK_F32, brisk_shape2(rows, n), err);
    for (int64_t r = 0; !st && r < rows; r++)
        for (int c = 0; c < n; c++) ((float *)out->data)[r * n + c] = ((const float *)all.data)[r * C + idx[c]];
    free(idx);
    brisk_tensor_free(&all);
    return st;
}

brisk_status brisk_columns_load(const char *path, const char *const *names, int n, brisk_tensor *out,
                                brisk_error *err) {
    if (ends_with(path, ".csv")) return brisk_csv_read(path, names, n, BRISK_F32, out, err);
    if (ends_with(path, ".npz")) return npz_columns(path, names, n, out, err);
    if (ends_with(path, ".npy")) return npy_columns(path, names, n, out, err);
    memset(out, 0, sizeof *out);
    return brisk_errorf(err, BRISK_ERR_INVALID, "%s: expected a .csv, .npz or .npy file of columns", path);
}

void brisk_normalize_rows(float *x, int64_t rows, int nfeatures, const float *mean, const float *std) {
    for (int64_t r = 0; r < rows; r++)
        for (int f = 0; f < nfeatures; f++) x[r * nfeatures + f] = (x[r * nfeatures + f] - mean[f]) / std[f];
}

void brisk_normalize_fit(const float *x, int64_t per, int F, const int64_t *rows, int64_t n, float *mean, float *std) {
    for (int f = 0; f < F; f++) {
        double sum = 0, sq = 0, count = (double)n * (double)(per / F);
        for (int64_t i = 0; i < n; i++) {
            const float *v = x + (rows ? rows[i] : i) * per;
            for (int64_t j = f; j < per; j += F) sum += v[j];
        }
        double mu = sum / count;
        for (int64_t i = 0; i < n; i++) {
            const float *v = x + (rows ? rows[i] : i) * per;
            for (int64_t j = f; j < per; j += F) sq += (v[j] - mu) * (v[j] - mu);
        }
        double sd = sqrt(sq / count);
        mean[f] = (float)mu;
        std[f] = sd > 1e-12 * (fabs(mu) + 1) ? (float)sd : 1.0f; /* a constant channel is only centred */
    }
}

void brisk_windows_free(brisk_windows *w) {
    if (!w) return;
    brisk_dataset_free(&w->ds);
    brisk_split_free(&w->split);
    free(w->mean);
    free(w->std);
    memset(w, 0, sizeof *w);
}

static int find_column(const char *const *names, int ncols, const char *name) {
    for (int c = 0; c < ncols; c++)
        if (strcmp(names[c], name) == 0) return c;
    return -1;
}

static const char *change_name(brisk_change_kind k) {
    return k == BRISK_CHANGE_RELATIVE ? "relative" : k == BRISK_CHANGE_LOG ? "log" : "difference";
}

/* The change from v_e to v_r; an error (naming the row) where it is undefined. */
static brisk_status change_of(const brisk_window_spec *sp, const char *source, int64_t e, double ve, double vr,
                              double *out, brisk_error *err) {
    if (sp->change == BRISK_CHANGE_DIFFERENCE) *out = vr - ve;
    else if (sp->change == BRISK_CHANGE_RELATIVE && ve != 0) *out = (vr - ve) / fabs(ve);
    else if (sp->change == BRISK_CHANGE_LOG && ve > 0 && vr > 0) *out = log(vr / ve);
    else
        return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: column '%s', row %lld: a %s change from %g to %g is "
                            "undefined (%s)", source, sp->target, (long long)e, change_name(sp->change), ve, vr,
                            sp->change == BRISK_CHANGE_LOG ? "log needs positive values" : "a zero start");
    return BRISK_OK;
}

static brisk_status check_spec(const brisk_window_spec *sp, const char *source, int64_t rows, brisk_error *err) {
    if (sp->nfeatures < 1 || !sp->features || !sp->target)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: windows need feature columns and a target column", source);
    if (sp->length < 1 || sp->stride < 1 || sp->horizon < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: window length %lld, stride %lld, horizon %lld (expected "
                            "length and stride >= 1, horizon >= 1: the target lies after the window)", source,
                            (long long)sp->length, (long long)sp->stride, (long long)sp->horizon);
    if (!(sp->validation_fraction >= 0 && sp->validation_fraction < 1))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: validation fraction %g (expected 0 <= f < 1)", source,
                            sp->validation_fraction);
    if (sp->kind == BRISK_TARGET_CLASSES) {
        if (sp->nthresholds < 1 || sp->nthresholds > BRISK_MAX_THRESHOLDS)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d class thresholds (expected 1 to %d)", source,
                                sp->nthresholds, BRISK_MAX_THRESHOLDS);
        for (int i = 1; i < sp->nthresholds; i++)
            if (!(sp->thresholds[i] > sp->thresholds[i - 1]))
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: class thresholds must ascend: %g then %g", source,
                                    sp->thresholds[i - 1], sp->thresholds[i]);
    }
    if (rows < sp->length + sp->horizon)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: %lld rows; a window of %lld rows and a target %lld rows "
                            "after it need at least %lld", source, (long long)rows, (long long)sp->length,
                            (long long)sp->horizon, (long long)(sp->length + sp->horizon));
    return BRISK_OK;
}

/* Training windows: target row before s. Validation windows: first row at s or later. */
static brisk_status make_split(const brisk_window_spec *sp, const char *source, int64_t rows, int64_t K,
                               brisk_windows *w, brisk_error *err) {
    int64_t s = rows - (int64_t)llround((double)rows * sp->validation_fraction);
    int64_t ntrain = s >= sp->length + sp->horizon ? (s - sp->length - sp->horizon) / sp->stride + 1 : 0;
    int64_t first_val = (s + sp->stride - 1) / sp->stride, nval = K > first_val ? K - first_val : 0;
    if (ntrain > K) ntrain = K;
    if (ntrain < 1)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: the training part (rows 0 to %lld) is shorter than a window "
                            "of %lld rows plus the horizon of %lld; lower the validation fraction or the window",
                            source, (long long)s - 1, (long long)sp->length, (long long)sp->horizon);
    w->split_row = s;
    w->split.train = malloc(sizeof(int64_t) * (size_t)ntrain);
    w->split.val = malloc(sizeof(int64_t) * (size_t)(nval ? nval : 1));
    if (!w->split.train || !w->split.val) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", source);
    for (int64_t k = 0; k < ntrain; k++) w->split.train[k] = k;
    for (int64_t k = 0; k < nval; k++) w->split.val[k] = first_val + k;
    w->split.ntrain = ntrain;
    w->split.nval = nval;
    return BRISK_OK;
}

/* Mean and std of each feature column over rows [0, s), then the series normalised. */
static brisk_status normalise(float *x, int64_t rows, int F, int64_t s, brisk_windows *w, const char *source,
                              brisk_error *err) {
    w->mean = malloc(sizeof(float) * (size_t)F);
    w->std = malloc(sizeof(float) * (size_t)F);
    if (!w->mean || !w->std) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", source);
    brisk_normalize_fit(x, F, F, NULL, s, w->mean, w->std);
    brisk_normalize_rows(x, rows, F, w->mean, w->std);
    return BRISK_OK;
}

brisk_status brisk_windows_from_table(const brisk_tensor *table, const char *const *names, int ncols,
                                      const char *source, const brisk_window_spec *sp, brisk_windows *w,
                                      brisk_error *err) {
    memset(w, 0, sizeof *w);
    if (table->dtype != BRISK_F32 || table->shape.ndim != 2 || table->shape.d[1] != ncols)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: expected a [rows, %d] f32 table", source, ncols);
    int64_t rows = table->shape.d[0];
    brisk_status st = check_spec(sp, source, rows, err);
    if (st) return st;
    const float *tab = table->data;
    int F = sp->nfeatures, tcol = find_column(names, ncols, sp->target);
    int *fcol = malloc(sizeof(int) * (size_t)F);
    if (!fcol) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", source);
    for (int f = 0; f < F && !st; f++)
        if ((fcol[f] = find_column(names, ncols, sp->features[f])) < 0)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no feature column '%.100s'", source, sp->features[f]);
    if (!st && tcol < 0) st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no target column '%.100s'", source, sp->target);
    for (int64_t i = 0; !st && i < rows * ncols; i++)
        if (!isfinite(tab[i]))
            st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: column '%.100s', row %lld: %s; expected finite numbers",
                              source, names[i % ncols], (long long)(i / ncols), isnan(tab[i]) ? "NaN" : "inf");
    w->rows = rows;
    w->nfeatures = F;
    int64_t K = (rows - sp->length - sp->horizon) / sp->stride + 1;
    snprintf(w->ds.source, sizeof w->ds.source, "%s", source);
    if (!st) st = make_split(sp, source, rows, K, w, err);
    brisk_tensor x = {0}, y = {0};
    int classes = sp->kind == BRISK_TARGET_CLASSES;
    if (!st) st = brisk_tensor_alloc(&y, classes ? BRISK_I32 : BRISK_F32, classes ? brisk_shape1(K) : brisk_shape2(K, 1), err);
    for (int64_t k = 0; !st && k < K; k++) {
        int64_t e = k * sp->stride + sp->length - 1, r = e + sp->horizon;
        double ve = tab[e * ncols + tcol], vr = tab[r * ncols + tcol], c = vr;
        if (sp->kind != BRISK_TARGET_VALUE && (st = change_of(sp, source, e, ve, vr, &c, err))) break;
        if (classes) {
            int cls = 0;
            while (cls < sp->nthresholds && c > sp->thresholds[cls]) cls++;
            ((int32_t *)y.data)[k] = cls;
        } else {
            ((float *)y.data)[k] = (float)c;
        }
    }
    if (!st) st = brisk_dataset_add(&w->ds, "y", &y, err);
    else brisk_tensor_free(&y);
    if (!st) st = brisk_tensor_alloc(&x, BRISK_F32, brisk_shape2(rows, F), err);
    for (int64_t r = 0; !st && r < rows; r++)
        for (int f = 0; f < F; f++) ((float *)x.data)[r * F + f] = tab[r * ncols + fcol[f]];
    if (!st && sp->normalize) st = normalise(x.data, rows, F, w->split_row, w, source, err);
    if (!st) st = brisk_dataset_add_windows(&w->ds, "x", &x, sp->length, sp->stride, err);
    else brisk_tensor_free(&x);
    free(fcol);
    if (st) brisk_windows_free(w);
    return st;
}

brisk_status brisk_windows_load(const char *path, const brisk_window_spec *sp, brisk_windows *w, brisk_error *err) {
    memset(w, 0, sizeof *w);
    /* the columns to read: the features, then the target unless it is one of them */
    int n = sp->nfeatures;
    const char **names = malloc(sizeof(char *) * (size_t)(n + 1));
    if (!names) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    for (int f = 0; f < n; f++) names[f] = sp->features[f];
    if (sp->target && find_column(names, n, sp->target) < 0) names[n++] = sp->target;
    brisk_tensor table = {0};
    brisk_status st = brisk_columns_load(path, names, n, &table, err);
    if (!st) st = brisk_windows_from_table(&table, names, n, path, sp, w, err);
    brisk_tensor_free(&table);
    free(names);
    return st;
}
