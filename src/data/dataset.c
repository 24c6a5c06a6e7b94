/* Datasets of named arrays: loading fields from an NPZ (one member each) or a CSV (a list
 * of columns each), converting to the dtype the model wants, and the checks every field
 * passes: dim 0 is the sample count and agrees across fields, F32 data is finite. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/csv_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void brisk_dataset_free(brisk_dataset *ds) {
    if (!ds) return;
    if (ds->make_free) ds->make_free(ds->make_user);
    for (int i = 0; i < ds->nfields; i++) brisk_tensor_free(&ds->fields[i].tensor);
    free(ds->fields);
    memset(ds, 0, sizeof *ds);
}

const brisk_tensor *brisk_dataset_get(const brisk_dataset *ds, const char *name) {
    for (int i = 0; i < ds->nfields; i++)
        if (strcmp(ds->fields[i].name, name) == 0) return &ds->fields[i].tensor;
    return NULL;
}

brisk_shape brisk_dataset_sample_shape(const brisk_dataset *ds, int f) {
    const brisk_dataset_field *fd = &ds->fields[f];
    brisk_shape s = brisk_shape_make(fd->tensor.shape.ndim - 1, fd->tensor.shape.d + 1);
    if (fd->window > 0) s = brisk_shape_make(fd->tensor.shape.ndim, fd->tensor.shape.d), s.d[0] = fd->window;
    return s;
}

/* The flat index of the first NaN or inf, or -1. */
static int64_t first_nonfinite(const brisk_tensor *t) {
    if (t->dtype != BRISK_F32 || !t->data) return -1; /* no data: a field made on demand */
    const float *v = (const float *)t->data;
    int64_t n = brisk_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return i;
    return -1;
}

static brisk_status nonfinite_error(const brisk_dataset *ds, const char *name, const brisk_tensor *t, int64_t i,
                                    const char *extra, brisk_error *err) {
    int64_t per = t->shape.d[0] ? brisk_shape_numel(&t->shape) / t->shape.d[0] : 1;
    float v = ((const float *)t->data)[i];
    return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: field '%s': %s at row %lld (sample index), column %lld (flat "
                        "feature index)%s; expected finite numbers", ds->source, name, isnan(v) ? "NaN" : "inf",
                        (long long)(i / per), (long long)(i % per), extra ? extra : "");
}

/* Appends a field after the structural checks (not the NaN check: callers word that
 * error with what they know of the source). Takes t's data, also on failure. */
static brisk_status append_field(brisk_dataset *ds, const char *name, brisk_tensor *t, brisk_error *err) {
    brisk_status st = BRISK_OK;
    char sb[160];
    if (strlen(name) >= BRISK_FIELD_NAME_MAX)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: field name '%.80s' longer than %d bytes", ds->source, name,
                          BRISK_FIELD_NAME_MAX - 1);
    else if (brisk_dataset_get(ds, name))
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: field '%s' defined twice", ds->source, name);
    else if (t->dtype != BRISK_F32 && t->dtype != BRISK_I32)
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: field '%s' is %s; expected f32 or i32", ds->source, name,
                          brisk_dtype_name(t->dtype));
    else if (t->shape.ndim < 1)
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: field '%s' is a scalar; expected dim 0 to count samples",
                          ds->source, name);
    else if (ds->nfields > 0 && t->shape.d[0] != ds->count)
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: field '%s' has %lld samples (shape %s) but field '%s' has %lld; "
                          "expected the same count in every field", ds->source, name, (long long)t->shape.d[0],
                          brisk_shape_str(&t->shape, sb, sizeof sb), ds->fields[0].name, (long long)ds->count);
    if (!st) {
        brisk_dataset_field *f = realloc(ds->fields, (size_t)(ds->nfields + 1) * sizeof *f);
        if (!f) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", ds->source);
        else {
            ds->fields = f;
            memset(&f[ds->nfields], 0, sizeof *f);
            snprintf(f[ds->nfields].name, sizeof f[ds->nfields].name, "%s", name);
            f[ds->nfields].tensor = *t;
            if (ds->nfields++ == 0) ds->count = t->shape.d[0];
            t->data = NULL;
            return BRISK_OK;
        }
    }
    brisk_tensor_free(t);
    return st;
}

brisk_status brisk_dataset_add(brisk_dataset *ds, const char *name, brisk_tensor *t, brisk_error *err) {
    if (!ds->source[0]) snprintf(ds->source, sizeof ds->source, "(memory)");
    int64_t bad = first_nonfinite(t);
    if (bad >= 0) {
        brisk_status st = nonfinite_error(ds, name, t, bad, NULL, err);
        brisk_tensor_free(t);
        return st;
    }
    return append_field(ds, name, t, err);
}

brisk_status brisk_dataset_add_windows(brisk_dataset *ds, const char *name, brisk_tensor *t, int64_t window,
                                       int64_t stride, brisk_error *err) {
    brisk_status st = BRISK_OK;
    int64_t rows = t->shape.ndim >= 1 ? t->shape.d[0] : 0;
    if (ds->nfields == 0 || window < 1 || stride < 1 || rows < (ds->count - 1) * stride + window)
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: field '%s': %lld rows cannot hold %lld windows of %lld rows, "
                          "%lld apart", ds->source, name, (long long)rows, (long long)ds->count, (long long)window,
                          (long long)stride);
    int64_t bad = st ? -1 : first_nonfinite(t);
    if (bad >= 0) st = nonfinite_error(ds, name, t, bad, NULL, err);
    if (st) {
        brisk_tensor_free(t);
        return st;
    }
    /* append_field's count check reads dim 0 as the sample count: present it as such */
    int64_t keep = t->shape.d[0];
    t->shape.d[0] = ds->count;
    st = append_field(ds, name, t, err);
    if (!st) {
        brisk_dataset_field *f = &ds->fields[ds->nfields - 1];
        f->tensor.shape.d[0] = keep;
        f->window = window;
        f->stride = stride;
    }
    return st;
}

static brisk_status check_specs(const char *path, const brisk_field_spec *specs, int nspecs, brisk_error *err) {
    if (nspecs <= 0) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no fields requested", path);
    for (int i = 0; i < nspecs; i++) {
        if (!specs[i].name || !specs[i].name[0])
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: field %d has no name", path, i);
        if (specs[i].dtype != BRISK_F32 && specs[i].dtype != BRISK_I32)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: field '%s': dtype %s; expected f32 or i32", path,
                                specs[i].name, brisk_dtype_name(specs[i].dtype));
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- NPZ */

brisk_status brisk_dataset_load_npz(brisk_dataset *ds, const char *path, const brisk_field_spec *specs, int nspecs,
                                    brisk_error *err) {
    return brisk_dataset_load_npz_rows(ds, path, specs, nspecs, -1, -1, NULL, err);
}

/* lo < 0: the whole file */
brisk_status brisk_dataset_load_npz_rows(brisk_dataset *ds, const char *path, const brisk_field_spec *specs,
                                         int nspecs, int64_t lo, int64_t hi, int64_t *file_rows, brisk_error *err) {
    memset(ds, 0, sizeof *ds);
    if (file_rows) *file_rows = 0;
    snprintf(ds->source, sizeof ds->source, "%s", path);
    brisk_status st = check_specs(path, specs, nspecs, err);
    for (int i = 0; i < nspecs && !st; i++) {
        const char *member = specs[i].member ? specs[i].member : specs[i].name;
        brisk_npy_array a;
        if (file_rows && i == 0) { /* the file's count, from the first member's header */
            if ((st = brisk_npz_peek(path, member, &a, err))) {
                brisk_error_prefix(err, "field '%s'", specs[i].name);
                break;
            }
            *file_rows = a.shape.ndim ? a.shape.d[0] : 1;
            brisk_npy_free(&a);
        }
        if ((st = lo < 0 ? brisk_npz_read_one(path, member, &a, err) : brisk_npz_read_rows(path, member, lo, hi, &a, err))) {
            brisk_error_prefix(err, "field '%s'", specs[i].name);
            break;
        }
        brisk_tensor t;
        int same = (specs[i].dtype == BRISK_F32 && a.dtype.kind == 'f' && a.dtype.size == 4) ||
                   (specs[i].dtype == BRISK_I32 && a.dtype.kind == 'i' && a.dtype.size == 4);
        if (same) { /* already what the model wants: adopt the buffer, no copy */
            t.dtype = specs[i].dtype;
            t.shape = a.shape;
            t.data = a.data;
            a.data = NULL;
        } else if (specs[i].dtype == BRISK_I32 && a.dtype.kind == 'f') {
            char sb[64];
            st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: field '%s' (member '%s') holds %s values %s, but the model "
                              "takes class labels (integers) there: a regression target? set model.task to \"regress\" "
                              "(and model.outputs to its width)", path, specs[i].name, member,
                              a.dtype.size == 8 ? "float64" : a.dtype.size == 2 ? "float16" : "float32",
                              brisk_shape_str(&a.shape, sb, sizeof sb));
        } else {
            char what[600];
            snprintf(what, sizeof what, "%s: field '%s' (member '%s')", path, specs[i].name, member);
            st = brisk_npy_to_tensor(&a, specs[i].dtype, what, &t, err);
        }
        brisk_npy_free(&a);
        if (st) break;
        int64_t bad = first_nonfinite(&t);
        if (bad >= 0) {
            st = nonfinite_error(ds, specs[i].name, &t, bad, NULL, err);
            brisk_tensor_free(&t);
            break;
        }
        st = append_field(ds, specs[i].name, &t, err);
    }
    if (st) brisk_dataset_free(ds);
    return st;
}

/* ---------------------------------------------------------------- CSV */

brisk_status brisk_dataset_load_csv(brisk_dataset *ds, const char *path, const brisk_field_spec *specs, int nspecs,
                                    brisk_error *err) {
    return brisk_dataset_load_csv_rows(ds, path, specs, nspecs, 0, INT64_MAX, NULL, err);
}

brisk_status brisk_dataset_load_csv_rows(brisk_dataset *ds, const char *path, const brisk_field_spec *specs,
                                         int nspecs, int64_t lo, int64_t hi, int64_t *file_rows, brisk_error *err) {
    memset(ds, 0, sizeof *ds);
    snprintf(ds->source, sizeof ds->source, "%s", path);
    brisk_status st = check_specs(path, specs, nspecs, err);
    if (st) return st;
    for (int i = 0; i < nspecs; i++)
        if (specs[i].ncolumns <= 0 || !specs[i].columns)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: field '%s': no CSV columns given", path, specs[i].name);
    brisk_file f;
    if ((st = brisk_file_load(path, &f, err))) return st;
    /* Column ranges ("f0:f63") are expanded against the header first. */
    char **header = NULL;
    int nh = 0;
    const char ***fcols = calloc((size_t)nspecs, sizeof *fcols);
    int *fn = calloc((size_t)nspecs, sizeof *fn);
    if (!fcols || !fn) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    if (!st) st = brisk_csv_header(f.data, f.len, path, &header, &nh, err);
    int64_t total = 0;
    for (int i = 0; i < nspecs && !st; i++) {
        st = brisk_csv_expand_columns(header, nh, path, specs[i].columns, specs[i].ncolumns, &fcols[i], &fn[i], err);
        if (st) brisk_error_prefix(err, "field '%s'", specs[i].name);
        total += fn[i];
    }
    /* One pass over the file for all fields: the union of their columns. */
    const char **cols = NULL;
    int *integral = NULL, *pos = NULL, ncols = 0;
    if (!st && (!(cols = malloc((size_t)total * sizeof *cols)) || !(integral = calloc((size_t)total, sizeof *integral)) ||
                !(pos = malloc((size_t)total * sizeof *pos))))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0, k = 0; i < nspecs && !st; i++)
        for (int c = 0; c < fn[i]; c++, k++) {
            int j = 0;
            while (j < ncols && strcmp(cols[j], fcols[i][c]) != 0) j++;
            if (j == ncols) cols[ncols++] = fcols[i][c];
            if (specs[i].dtype == BRISK_I32) integral[j] = 1;
            pos[k] = j;
        }
    brisk_csv_table tab;
    memset(&tab, 0, sizeof tab);
    if (!st) st = brisk_csv_table_parse_rows(f.data, f.len, path, cols, ncols, integral, 0, lo, hi, &tab, err);
    if (!st && file_rows) *file_rows = tab.file_rows;
    brisk_file_release(&f);
    for (int i = 0, k = 0; i < nspecs && !st; k += fn[i], i++) {
        int nc = fn[i];
        brisk_shape shape = (specs[i].dtype == BRISK_I32 && nc == 1) ? brisk_shape1(tab.rows) : brisk_shape2(tab.rows, nc);
        brisk_tensor t;
        if ((st = brisk_tensor_alloc(&t, specs[i].dtype, shape, err))) break;
        for (int64_t r = 0; r < tab.rows; r++)
            for (int c = 0; c < nc; c++) {
                double v = tab.v[r * tab.ncols + pos[k + c]];
                if (t.dtype == BRISK_F32) ((float *)t.data)[r * nc + c] = (float)v;
                else ((int32_t *)t.data)[r * nc + c] = (int32_t)v;
            }
        int64_t bad = first_nonfinite(&t);
        if (bad >= 0) {
            char extra[256];
            snprintf(extra, sizeof extra, " = CSV column '%.100s', line %lld", fcols[i][bad % nc],
                     (long long)tab.lines[bad / nc]);
            st = nonfinite_error(ds, specs[i].name, &t, bad, extra, err);
            brisk_tensor_free(&t);
            break;
        }
        st = append_field(ds, specs[i].name, &t, err);
    }
    brisk_csv_table_free(&tab);
    for (int i = 0; fcols && i < nspecs; i++) free(fcols[i]);
    free(fcols);
    free(fn);
    free(header);
    free(cols);
    free(integral);
    free(pos);
    if (st) brisk_dataset_free(ds);
    return st;
}

/* ---------------------------------------------------------------- size, before loading */

brisk_status brisk_dataset_estimate(const char *path, const brisk_field_spec *specs, int nspecs, int csv, int64_t *bytes,
                                    brisk_error *err) {
    *bytes = 0;
    brisk_status st = check_specs(path, specs, nspecs, err);
    if (st) return st;
    int64_t kept = 0, peak = 0;
    if (!csv) {
        for (int i = 0; i < nspecs && !st; i++) {
            brisk_npy_array a;
            if ((st = brisk_npz_peek(path, specs[i].member ? specs[i].member : specs[i].name, &a, err))) {
                brisk_error_prefix(err, "field '%s'", specs[i].name);
                break;
            }
            int64_t numel = a.dtype.size ? (int64_t)(a.nbytes / (size_t)a.dtype.size) : 0;
            int same = a.dtype.size == 4 && (a.dtype.kind == 'f' || a.dtype.kind == 'i');
            int64_t now = kept + numel * 4 + (same ? 0 : (int64_t)a.nbytes); /* a conversion holds both */
            peak = now > peak ? now : peak;
            kept += numel * 4;
        }
        *bytes = peak;
        return st;
    }
    /* CSV: the file's text and the table of selected columns parsed from it as doubles
     * (one per row and column, and a line number per row); then, the text released, the
     * table and the fields made from it. */
    brisk_file f;
    if ((st = brisk_file_load(path, &f, err))) return st;
    int64_t rows = 0;
    for (const uint8_t *p = f.data, *end = f.data + f.len; p < end; p++) {
        p = memchr(p, '\n', (size_t)(end - p));
        if (!p) break;
        rows++;
    }
    rows++;
    char **header = NULL;
    int nh = 0;
    int64_t cols = 0;
    if (!(st = brisk_csv_header(f.data, f.len, path, &header, &nh, err)))
        for (int i = 0; i < nspecs && !st; i++) {
            const char **sel = NULL;
            int n = 0;
            if (!(st = brisk_csv_expand_columns(header, nh, path, specs[i].columns, specs[i].ncolumns, &sel, &n, err)))
                cols += n;
            free(sel);
        }
    free(header);
    int64_t fields = rows * cols * 4, text = (int64_t)f.len;
    brisk_file_release(&f);
    *bytes = rows * (cols * 8 + 8) + (text > fields ? text : fields);
    return st;
}
