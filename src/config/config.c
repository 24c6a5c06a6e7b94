/* The run configuration: JSON (with comments) -> brisk_config, strictly. Every
 * section is read with typed getters, so a bad value or an unknown key is an error
 * naming the file and the key path. */
#include <ctype.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/json.h"
#include "brisk/train.h"
#include "brisk/dist.h"
#include "config/config_internal.h"

static const char *const overlap_modes[] = {"auto", "on", "off", NULL}; /* brisk_overlap_mode */
static const char *const optimizers[] = {"sgd", "adamw", NULL};
static const char *const schedules[] = {"constant", "linear", "cosine", NULL};
static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
static const char *const precisions[] = {"auto", "fp32", "tf32", "bf16", "fp16", NULL};

const char *brisk_precision_name(brisk_precision p) {
    return (unsigned)p < sizeof precisions / sizeof precisions[0] - 1 ? precisions[p] : "?";
}

int brisk_parse_bytes(const char *s, int64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return -1;
    while (*end == ' ') end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; break;
    case 'M': mul = 1024.0 * 1024.0; break;
    case 'G': mul = 1024.0 * 1024.0 * 1024.0; break;
    case 'T': mul = 1024.0 * 1024.0 * 1024.0 * 1024.0; break;
    default: return -1;
    }
    if (*end) {
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
    }
    if (*end || v * mul > 9.0e18) return -1;
    *out = (int64_t)(v * mul);
    return 0;
}
static const char *const conv_layouts[] = {"auto", "nchw", "nhwc", NULL}; /* brisk_conv_layout's order */
static const char *const cpu_gemms[] = {"auto", "own", "blas", "fixed", NULL}; /* brisk_cpu_gemm_mode's order */
static const char *const when_full[] = {"drop_oldest", "reject", NULL};

static void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

/* A path key: an error when it does not fit, never a silently shorter path. */
static void copy_path(brisk_json_reader *r, const char *key, char *dst, size_t n, const char *src) {
    if (src && strlen(src) >= n) brisk_json_fail(r, key, "longer than %zu bytes (%zu)", n - 1, strlen(src));
    copy_str(dst, n, src);
}

static const char *const target_kinds[] = {"classes", "value", "change", NULL};
static const char *const change_kinds[] = {"relative", "difference", "log", NULL};

/* data.windows: {"features": [...], "length", "stride", "horizon", "normalize",
 *                "target": {"column", "kind", "change", "thresholds"}} */
static void read_windows(brisk_json_reader *data, brisk_windows_config *w) {
    brisk_json_reader r, t;
    bool present, b;
    int v;
    brisk_json_object_opt(data, "windows", &r, &present);
    if (!present || !r.obj) return;
    w->enabled = 1;
    const char **names = NULL;
    size_t n = 0;
    if (brisk_json_strings(&r, "features", true, &names, &n) == BRISK_OK) {
        if (n < 1 || n > BRISK_MAX_FEATURES) brisk_json_fail(&r, "features", "expected 1 to %d column names, got %zu", BRISK_MAX_FEATURES, n);
        for (size_t i = 0; i < n && i < BRISK_MAX_FEATURES; i++) {
            if (strlen(names[i]) >= BRISK_COLUMN_MAX) brisk_json_fail(&r, "features", "column name '%.40s...' longer than %d bytes", names[i], BRISK_COLUMN_MAX - 1);
            copy_str(w->features[i], sizeof w->features[i], names[i]);
        }
        w->nfeatures = (int)(n < BRISK_MAX_FEATURES ? n : BRISK_MAX_FEATURES);
    }
    free(names);
    brisk_json_int64(&r, "length", 1, 1 << 24, &w->length);
    brisk_json_int64_or(&r, "stride", 1, 1, 1 << 24, &w->stride);
    brisk_json_int64_or(&r, "horizon", 1, 1, 1 << 24, &w->horizon);
    brisk_json_bool_or(&r, "normalize", true, &b), w->normalize = b;
    brisk_json_object(&r, "target", &t);
    const char *col;
    brisk_json_string(&t, "column", &col);
    if (col && strlen(col) >= BRISK_COLUMN_MAX) brisk_json_fail(&t, "column", "longer than %d bytes", BRISK_COLUMN_MAX - 1);
    copy_str(w->target, sizeof w->target, col);
    brisk_json_enum_or(&t, "kind", target_kinds, BRISK_TARGET_CLASSES, &v), w->kind = (brisk_target_kind)v;
    brisk_json_enum_or(&t, "change", change_kinds, BRISK_CHANGE_RELATIVE, &v), w->change = (brisk_change_kind)v;
    brisk_json_bool_or(&t, "normalize", true, &b), w->normalize_target = b && w->kind != BRISK_TARGET_CLASSES;
    double *th = NULL;
    size_t nt = 0;
    if (brisk_json_numbers(&t, "thresholds", w->kind == BRISK_TARGET_CLASSES, BRISK_ANY, &th, &nt) == BRISK_OK) {
        if (w->kind == BRISK_TARGET_CLASSES && (nt < 1 || nt > BRISK_MAX_THRESHOLDS))
            brisk_json_fail(&t, "thresholds", "expected 1 to %d ascending numbers, got %zu", BRISK_MAX_THRESHOLDS, nt);
        for (size_t i = 0; i < nt && i < BRISK_MAX_THRESHOLDS; i++) {
            if (i && !(th[i] > th[i - 1])) brisk_json_fail(&t, "thresholds", "expected ascending numbers, got %g then %g", th[i - 1], th[i]);
            w->thresholds[i] = th[i];
        }
        w->nthresholds = (int)(nt < BRISK_MAX_THRESHOLDS ? nt : BRISK_MAX_THRESHOLDS);
    }
    free(th);
}

static const char *const missing_kinds[] = {"refuse", "mask", NULL};

static void read_names(brisk_json_reader *r, const char *key, bool required, int max, char (*dst)[BRISK_COLUMN_MAX],
                       int *n) {
    const char **names = NULL;
    size_t k = 0;
    if (brisk_json_strings(r, key, required, &names, &k) == BRISK_OK) {
        if ((required && k < 1) || k > (size_t)max) brisk_json_fail(r, key, "expected %d to %d names, got %zu", required, max, k);
        for (size_t i = 0; i < k && i < (size_t)max; i++) {
            if (strlen(names[i]) >= BRISK_COLUMN_MAX - 8) brisk_json_fail(r, key, "name '%.40s...' longer than %d bytes", names[i], BRISK_COLUMN_MAX - 9);
            copy_str(dst[i], BRISK_COLUMN_MAX, names[i]);
        }
        *n = (int)(k < (size_t)max ? k : (size_t)max);
    }
    free(names);
}

/* data.netcdf: {"files", "variables", "static", "static_file", "history", "lead", "time_features", "missing",
 *               "coordinates": {"time", "level", "lat", "lon"}} */
static void read_netcdf(brisk_json_reader *data, brisk_netcdf_config *nc) {
    brisk_json_reader r;
    bool present, b;
    int v;
    brisk_json_object_opt(data, "netcdf", &r, &present);
    if (!present || !r.obj) return;
    nc->enabled = 1;
    const char **files = NULL;
    size_t k = 0;
    if (brisk_json_strings(&r, "files", false, &files, &k) == BRISK_OK && files) {
        if (k < 1 || k > BRISK_NETCDF_MAX_FILES) brisk_json_fail(&r, "files", "expected 1 to %d paths, got %zu", BRISK_NETCDF_MAX_FILES, k);
        for (size_t i = 0; i < k && i < BRISK_NETCDF_MAX_FILES; i++) copy_path(&r, "files", nc->files[i], BRISK_PATH_MAX, files[i]);
        nc->nfiles = (int)(k < BRISK_NETCDF_MAX_FILES ? k : BRISK_NETCDF_MAX_FILES);
    }
    free(files);
    read_names(&r, "variables", true, BRISK_WEATHER_MAX_VARS, nc->variables, &nc->nvariables);
    read_names(&r, "static", false, BRISK_NETCDF_MAX_STATICS, nc->statics, &nc->nstatics);
    const char *sfile = "";
    brisk_json_string_or(&r, "static_file", "", &sfile);
    copy_path(&r, "static_file", nc->static_file, sizeof nc->static_file, sfile);
    if (nc->static_file[0] && !nc->nstatics)
        brisk_json_fail(&r, "static_file", "names a file of static fields, but data.netcdf.static lists none");
    brisk_json_int_or(&r, "history", 2, 1, 64, &nc->history);
    brisk_json_int_or(&r, "lead", 1, 1, 1 << 20, &nc->lead);
    brisk_json_bool_or(&r, "time_features", true, &b), nc->time_features = b;
    brisk_json_enum_or(&r, "missing", missing_kinds, 0, &v), nc->mask_missing = v == 1;
    brisk_json_reader c;
    brisk_json_object_opt(&r, "coordinates", &c, NULL);
    const struct { const char *key; char *dst; } axes[] = {
        {"time", nc->coord_time}, {"level", nc->coord_level}, {"lat", nc->coord_lat}, {"lon", nc->coord_lon}};
    for (int a = 0; a < 4; a++) {
        const char *name = "";
        brisk_json_string_or(&c, axes[a].key, "", &name);
        if (strlen(name) >= sizeof nc->coord_time) brisk_json_fail(&c, axes[a].key, "longer than %zu bytes", sizeof nc->coord_time - 1);
        else copy_str(axes[a].dst, sizeof nc->coord_time, name);
    }
}

void brisk_weather_spec_of(const brisk_data_spec *d, const char **paths, const char **names, brisk_weather_spec *out) {
    const brisk_netcdf_config *nc = &d->netcdf;
    memset(out, 0, sizeof *out);
    int np = 0;
    if (nc->nfiles)
        for (int i = 0; i < nc->nfiles; i++) paths[np++] = nc->files[i];
    else paths[np++] = d->train;
    for (int i = 0; i < nc->nvariables; i++) names[i] = nc->variables[i];
    for (int i = 0; i < nc->nstatics; i++) names[nc->nvariables + i] = nc->statics[i];
    *out = (brisk_weather_spec){.paths = paths, .npaths = np, .variables = names, .nvariables = nc->nvariables,
                                .statics = names + nc->nvariables, .nstatics = nc->nstatics, .history = nc->history,
                                .lead = nc->lead, .validation_fraction = d->validation_fraction,
                                .mask_missing = nc->mask_missing, .time_features = nc->time_features,
                                .time_name = nc->coord_time, .level_name = nc->coord_level, .lat_name = nc->coord_lat,
                                .lon_name = nc->coord_lon, .static_file = nc->static_file};
}

static const char *const on_error_kinds[] = {"error", "skip", NULL};
static const char *const orientation_kinds[] = {"exif", "raw", NULL};
static const char *const fit_kinds[] = {"stretch", "pad", NULL};

/* data.images: {"labels", "size", "resize", "fit", "orientation", "mean", "std", "gray_to_rgb",
 *               "on_error", "verify", "max_pixels", "workers",
 *               "augment": {"flip", "flip_pairs", "crop"}} */
static void read_images(brisk_json_reader *data, brisk_images_config *im) {
    brisk_json_reader r, a;
    bool present, b;
    int v;
    brisk_json_object_opt(data, "images", &r, &present);
    if (!present || !r.obj) return;
    im->enabled = 1;
    const char *s;
    brisk_json_string(&r, "labels", &s);
    if (s && strlen(s) >= sizeof im->labels) brisk_json_fail(&r, "labels", "a path longer than %zu bytes", sizeof im->labels - 1);
    copy_str(im->labels, sizeof im->labels, s);
    double *d = NULL;
    size_t n = 0;
    if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r.obj, "size"))) {
        brisk_json_int(&r, "size", 1, 16384, &v);
        im->width = im->height = v;
    } else if (brisk_json_numbers(&r, "size", true, BRISK_IN(1, 16384), &d, &n) == BRISK_OK) {
        if (n != 1 && n != 2) brisk_json_fail(&r, "size", "expected [width, height] or one number, got %zu numbers", n);
        else if (d[0] != floor(d[0]) || d[n - 1] != floor(d[n - 1])) brisk_json_fail(&r, "size", "expected whole pixels");
        else im->width = (int)d[0], im->height = (int)d[n - 1];
    }
    free(d);
    const char *keys[2] = {"mean", "std"};
    float *dst[2] = {im->mean, im->std};
    for (int k = 0; k < 2; k++) {
        for (int c = 0; c < 3; c++) dst[k][c] = (float)k;
        d = NULL, n = 0;
        if (brisk_json_numbers(&r, keys[k], false, k ? BRISK_GT(0) : BRISK_IN(-1e6, 1e6), &d, &n) == BRISK_OK && n) {
            if (n != 3) brisk_json_fail(&r, keys[k], "expected 3 numbers (R, G, B), got %zu", n);
            else for (int c = 0; c < 3; c++) dst[k][c] = (float)d[c];
        }
        free(d);
    }
    brisk_json_bool_or(&r, "resize", false, &b), im->resize = b;
    brisk_json_enum_or(&r, "fit", fit_kinds, 0, &v), im->pad = v == 1;
    if (im->pad && !im->resize)
        brisk_json_fail(&r, "fit", "\"pad\" fits images of other sizes into data.images.size; set data.images.resize "
                        "true as well (without it every image must have that size already)");
    brisk_json_enum_or(&r, "orientation", orientation_kinds, 0, &v), im->raw_orientation = v == 1;
    brisk_json_bool_or(&r, "gray_to_rgb", false, &b), im->gray_to_rgb = b;
    brisk_json_enum_or(&r, "on_error", on_error_kinds, 0, &v), im->skip_bad = v == 1;
    brisk_json_bool_or(&r, "verify", false, &b), im->verify = b;
    brisk_json_int64_or(&r, "max_pixels", BRISK_IMAGE_MAX_PIXELS_DEFAULT, 1, INT64_C(1) << 32, &im->max_pixels);
    brisk_json_int_or(&r, "workers", 0, 0, 256, &im->workers);
    brisk_json_object_opt(&r, "augment", &a, NULL);
    double x;
    brisk_json_number_or(&a, "flip", 0.0, BRISK_IN(0.0, 1.0), &x), im->flip = (float)x;
    brisk_json_number_or(&a, "crop", 1.0, BRISK_IN_LO_OPEN(0.0, 1.0), &x), im->crop = (float)x;
    d = NULL, n = 0;
    if (brisk_json_numbers(&a, "flip_pairs", false, BRISK_IN(0, BRISK_MAX_KEYPOINTS - 1), &d, &n) == BRISK_OK && n) {
        if (n % 2 || n / 2 > BRISK_MAX_KEYPOINTS)
            brisk_json_fail(&a, "flip_pairs", "expected up to %d keypoint index pairs, flattened [a0, b0, a1, b1, ...], "
                            "got %zu numbers", BRISK_MAX_KEYPOINTS, n);
        else
            for (size_t i = 0; i < n; i++) im->flip_pairs[i / 2][i % 2] = (int)d[i];
        im->nflip_pairs = n % 2 ? 0 : (int)(n / 2);
    }
    free(d);
}

void brisk_images_spec_of(const brisk_data_spec *d, uint64_t seed, brisk_image_spec *out) {
    const brisk_images_config *im = &d->images;
    memset(out, 0, sizeof *out);
    out->labels = im->labels;
    out->width = im->width;
    out->height = im->height;
    out->resize = im->resize;
    memcpy(out->mean, im->mean, sizeof out->mean);
    memcpy(out->std, im->std, sizeof out->std);
    out->decode.gray_to_rgb = im->gray_to_rgb;
    out->decode.max_pixels = im->max_pixels;
    out->decode.raw_orientation = im->raw_orientation;
    out->pad = im->pad;
    out->skip_bad = im->skip_bad;
    out->verify = im->verify;
    out->flip = im->flip;
    out->crop = im->crop;
    memcpy(out->flip_pairs, im->flip_pairs, sizeof out->flip_pairs);
    out->nflip_pairs = im->nflip_pairs;
    out->seed = seed;
}

void brisk_windows_spec_of(const brisk_data_spec *d, const char **names, brisk_window_spec *out) {
    const brisk_windows_config *w = &d->windows;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < w->nfeatures; i++) names[i] = w->features[i];
    out->features = names;
    out->nfeatures = w->nfeatures;
    out->target = w->target;
    out->kind = w->kind;
    out->change = w->change;
    memcpy(out->thresholds, w->thresholds, sizeof out->thresholds);
    out->nthresholds = w->nthresholds;
    out->length = w->length;
    out->stride = w->stride;
    out->horizon = w->horizon;
    out->validation_fraction = d->validation_fraction;
    out->normalize = w->normalize;
}

/* One data.normalize value: true, false, "auto", "standard" (true) or "none" (false). */
static brisk_norm_mode norm_mode(brisk_json_reader *r, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->obj, key);
    static const char *const words[] = {"auto", "standard", "none", NULL}; /* brisk_norm_mode's order */
    int m = BRISK_NORM_AUTO;
    if (cJSON_IsBool(v)) {
        bool b;
        brisk_json_bool(r, key, &b);
        return b ? BRISK_NORM_ON : BRISK_NORM_OFF;
    }
    if (cJSON_IsString(v)) brisk_json_enum_or(r, key, words, BRISK_NORM_AUTO, &m);
    else brisk_json_fail(r, key, "expected true, false, \"auto\", \"standard\" or \"none\"");
    return (brisk_norm_mode)m;
}

/* data.normalize: one value for inputs and targets, or {"inputs": .., "targets": ..}. */
static void read_normalize(brisk_json_reader *r, brisk_data_spec *d) {
    d->normalize_inputs = d->normalize_targets = BRISK_NORM_AUTO;
    if (!r->obj || !brisk_json_has(r, "normalize")) return;
    d->normalize_given = 1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->obj, "normalize");
    if (!cJSON_IsObject(v)) {
        d->normalize_inputs = d->normalize_targets = norm_mode(r, "normalize");
        return;
    }
    brisk_json_reader n;
    brisk_json_object_opt(r, "normalize", &n, NULL);
    d->normalize_inputs = brisk_json_has(&n, "inputs") ? norm_mode(&n, "inputs") : BRISK_NORM_AUTO;
    d->normalize_targets = brisk_json_has(&n, "targets") ? norm_mode(&n, "targets") : BRISK_NORM_AUTO;
}

static void read_data(brisk_json_reader *root, brisk_data_spec *d) {
    brisk_json_reader r, f;
    memset(d, 0, sizeof *d);
    /* Optional: a program using the library API pushes its data instead of naming a file
     * (brisk_trainer_create asks for data.train). */
    brisk_json_object_opt(root, "data", &r, NULL);
    const char *s;
    brisk_json_string_or(&r, "train", "", &s);
    copy_path(&r, "train", d->train, sizeof d->train, s);
    brisk_json_string_or(&r, "validation", "", &s);
    copy_path(&r, "validation", d->validation, sizeof d->validation, s);
    double vf;
    /* a validation file replaces the split: all of data.train trains */
    if (d->validation[0] && brisk_json_has(&r, "validation_fraction"))
        brisk_json_fail(&r, "validation_fraction", "give data.validation (a file) or data.validation_fraction, not both");
    brisk_json_number_or(&r, "validation_fraction", d->validation[0] ? 0.0 : 0.1, BRISK_IN(0.0, 0.9), &vf);
    d->validation_fraction = (float)vf;
    bool sh;
    brisk_json_bool_or(&r, "shuffle", true, &sh);
    d->shuffle = sh;
    brisk_json_bool_or(&r, "shard_files", false, &sh);
    d->shard_files = sh;
    /* The API's sample buffer: how many samples it holds, and what a push does when full. */
    brisk_json_reader buf;
    int v;
    brisk_json_object_opt(&r, "buffer", &buf, NULL);
    brisk_json_int64_or(&buf, "capacity", 4096, 1, INT64_C(1) << 40, &d->buffer_capacity);
    brisk_json_enum_or(&buf, "when_full", when_full, 0, &v);
    d->buffer_reject = v == 1;
    read_normalize(&r, d);
    read_windows(&r, &d->windows);
    read_images(&r, &d->images);
    read_netcdf(&r, &d->netcdf);
    brisk_json_reader ep;
    bool present;
    brisk_json_object_opt(&r, "episodes", &ep, &present);
    if (present && ep.obj) {
        brisk_json_int(&ep, "support", 1, 1 << 16, &d->episode_support);
        brisk_json_int_or(&ep, "query", 1, 0, 1 << 16, &d->episode_query);
        if (!d->images.enabled)
            brisk_json_fail(&r, "episodes", "episodes draw from the categories of data.images.labels; give data.images");
    }
    brisk_json_object_opt(&r, "fields", &f, &present);
    if (d->images.enabled && (d->windows.enabled || (present && f.obj) || d->train[0]))
        brisk_json_fail(&r, "images", "images make their fields (x, y, visible, category) from data.images.labels; "
                        "give data.images alone, without data.train, data.fields or data.windows");
    if (d->windows.enabled && present && f.obj)
        brisk_json_fail(&r, "fields", "windows make the fields x and y themselves; give data.windows or data.fields, not both");
    if (d->netcdf.enabled && (d->windows.enabled || d->images.enabled || (present && f.obj)))
        brisk_json_fail(&r, "netcdf", "NetCDF data make the fields x and y themselves; give data.netcdf without data.fields, "
                        "data.windows or data.images");
    if (d->netcdf.enabled && d->validation[0])
        brisk_json_fail(&r, "validation", "NetCDF data validate on the last data.validation_fraction of their time axis "
                        "(chronologically); a separate validation file is not supported");
    if (d->netcdf.enabled && d->netcdf.nfiles && d->train[0])
        brisk_json_fail(&r, "netcdf", "give the files as data.train (one file, directory or glob) or data.netcdf.files, not both");
    if (!present || !f.obj) return;
    /* "fields": {"x": "features", "y": "label"} for npz members, or
     *           {"x": ["open", "close"], "y": "label"} for CSV columns, where
     *           "f0:f63" is every column from f0 through f63 in the header's order */
    for (const cJSON *c = f.obj->child; c; c = c->next) {
        if (d->n_fields == BRISK_MAX_FIELDS) {
            brisk_json_fail(&f, c->string, "at most %d fields", BRISK_MAX_FIELDS);
            return;
        }
        int i = d->n_fields++;
        copy_str(d->field_names[i], sizeof d->field_names[i], c->string);
        const char **cols = NULL;
        size_t n = 0;
        if (cJSON_IsString(c)) {
            brisk_json_string(&f, c->string, &s);
            cols = &s;
            n = 1;
        } else if (brisk_json_strings(&f, c->string, true, &cols, &n) == BRISK_OK && n == 0) {
            brisk_json_fail(&f, c->string, "expected a member name or a list of column names, got []");
        }
        /* NUL-separated into one buffer: any number of columns, ranges ("f0:f63") for wide ones */
        size_t used = 0;
        for (size_t k = 0; k < n && cols[k]; k++) {
            size_t len = strlen(cols[k]) + 1;
            if (len == 1) brisk_json_fail(&f, c->string, "column %zu: an empty name", k);
            if (used + len > sizeof d->field_sources[i]) {
                brisk_json_fail(&f, c->string, "%zu column names take more than %zu bytes; give a range \"first:last\"",
                                n, sizeof d->field_sources[i] - 1);
                break;
            }
            memcpy(d->field_sources[i] + used, cols[k], len);
            used += len;
            d->field_n_sources[i]++;
        }
        if (cols != &s) free(cols);
    }
}

void brisk_data_field_sources(const brisk_data_spec *d, int j, const char **out) {
    const char *p = d->field_sources[j];
    for (int k = 0; k < d->field_n_sources[j]; k++, p += strlen(p) + 1) out[k] = p;
}

static void read_optim(brisk_json_reader *root, brisk_optim_spec *o) {
    brisk_json_reader r, s;
    int v;
    double x;
    bool b;
    brisk_optim_spec_default(o);
    brisk_json_object_opt(root, "optim", &r, NULL);
    brisk_json_enum_or(&r, "type", optimizers, BRISK_OPTIM_ADAMW, &v);
    o->kind = (brisk_optim_kind)v;
    brisk_json_number_or(&r, "lr", 1e-3, BRISK_GT(0), &x), o->lr = (float)x;
    double *betas = NULL;
    size_t nb = 0;
    if (brisk_json_numbers(&r, "betas", false, BRISK_IN(0.0, 0.999999), &betas, &nb) == BRISK_OK && nb) {
        if (nb != 2) brisk_json_fail(&r, "betas", "expected 2 numbers, got %zu", nb);
        else o->beta1 = (float)betas[0], o->beta2 = (float)betas[1];
    }
    free(betas);
    brisk_json_number_or(&r, "eps", 1e-8, BRISK_GT(0), &x), o->eps = (float)x;
    brisk_json_number_or(&r, "weight_decay", o->kind == BRISK_OPTIM_ADAMW ? 0.01 : 0.0, BRISK_GE(0), &x);
    o->weight_decay = (float)x;
    brisk_json_number_or(&r, "momentum", 0.0, BRISK_IN(0.0, 0.999999), &x), o->momentum = (float)x;
    brisk_json_bool_or(&r, "nesterov", false, &b), o->nesterov = b;
    brisk_json_bool_or(&r, "decay_biases", true, &b), o->decay_all = b;
    brisk_json_number_or(&r, "clip_norm", 0.0, BRISK_GE(0), &x), o->clip_norm = (float)x;
    brisk_json_object_opt(&r, "schedule", &s, NULL);
    brisk_json_enum_or(&s, "type", schedules, BRISK_SCHED_CONSTANT, &v);
    o->schedule = (brisk_sched_kind)v;
    brisk_json_int64_or(&s, "warmup_steps", 0, 0, INT64_C(1) << 40, &o->warmup_steps);
    brisk_json_number_or(&s, "min_lr_ratio", 0.0, BRISK_IN(0.0, 1.0), &x), o->min_lr_ratio = (float)x;
}

/* An integer, or "auto": the largest batch the memory fits (src/train/memory.c). */
static void read_batch_size(brisk_json_reader *r, brisk_train_spec *t) {
    const cJSON *v = r->obj ? cJSON_GetObjectItemCaseSensitive(r->obj, "batch_size") : NULL;
    const char *s;
    if (cJSON_IsString(v)) {
        t->batch_size = 0;
        if (brisk_json_string(r, "batch_size", &s) == BRISK_OK && strcmp(s, "auto") != 0)
            brisk_json_fail(r, "batch_size", "expected an integer in [1, 16777216] or \"auto\", got \"%.40s\"", s);
        else t->batch_auto = 1;
    } else {
        brisk_json_int64_or(r, "batch_size", 32, 1, 1 << 24, &t->batch_size);
    }
}

static void read_train(brisk_json_reader *root, const char *name, brisk_train_spec *t) {
    brisk_json_reader r;
    memset(t, 0, sizeof *t);
    brisk_json_object_opt(root, "train", &r, NULL);
    read_batch_size(&r, t);
    brisk_json_int_or(&r, "epochs", 1, 1, 1 << 24, &t->epochs);
    /* -1, the default, as in PyTorch Lightning and Hugging Face's Trainer: the epochs decide */
    brisk_json_int64_or(&r, "max_steps", -1, -1, INT64_C(1) << 40, &t->max_steps);
    int64_t seed;
    brisk_json_int64_or(&r, "seed", 0, 0, INT64_C(1) << 53, &seed);
    t->seed = (uint64_t)seed;
    brisk_json_int_or(&r, "accumulate", 1, 1, 1 << 16, &t->accumulate);
    brisk_json_int64_or(&r, "checkpoint_every", 0, 0, INT64_C(1) << 40, &t->checkpoint_every);
    brisk_json_int_or(&r, "checkpoint_epochs", 1, 0, 1 << 24, &t->checkpoint_epochs);
    brisk_json_int_or(&r, "log_every", 50, 1, 1 << 30, &t->log_every);
    char def[BRISK_PATH_MAX];
    snprintf(def, sizeof def, "runs/%s", name);
    const char *s;
    brisk_json_string_or(&r, "out_dir", def, &s);
    copy_path(&r, "out_dir", t->out_dir, sizeof t->out_dir, s);
    brisk_json_int_or(&r, "keep_checkpoints", 3, 0, 1 << 20, &t->keep_checkpoints);
    brisk_json_number_or(&r, "checkpoint_minutes", 30.0, BRISK_GE(0), &t->checkpoint_minutes);
    brisk_json_int64_or(&r, "skip_nan_steps", 0, 0, INT64_C(1) << 40, &t->skip_nan_steps);
    brisk_json_number_or(&r, "max_skipped_fraction", 0.05, BRISK_IN(0.0, 1.0), &t->max_skipped_fraction);
}

/* Bytes, as a number or a string with a unit: 536870912, "512MiB", "16G". */
static void read_memory_limit(brisk_json_reader *r, brisk_speed_spec *sp) {
    const cJSON *v = r->obj ? cJSON_GetObjectItemCaseSensitive(r->obj, "memory_limit") : NULL;
    const char *s;
    if (cJSON_IsString(v)) {
        if (brisk_json_string(r, "memory_limit", &s) == BRISK_OK && brisk_parse_bytes(s, &sp->memory_limit) != 0)
            brisk_json_fail(r, "memory_limit", "expected bytes, as a number or with a unit (\"512MiB\", \"16G\"), got \"%.40s\"", s);
    } else {
        brisk_json_int64_or(r, "memory_limit", 0, 0, INT64_C(1) << 62, &sp->memory_limit);
    }
}

static void read_speed(brisk_json_reader *root, brisk_speed_spec *sp) {
    brisk_json_reader r;
    int v;
    memset(sp, 0, sizeof *sp);
    brisk_json_object_opt(root, "speed", &r, NULL);
    brisk_json_enum_or(&r, "device", devices, BRISK_DEVICE_AUTO, &v), sp->device = (brisk_device_kind)v;
    brisk_json_enum_or(&r, "precision", precisions, BRISK_PREC_AUTO, &v), sp->precision = (brisk_precision)v;
    brisk_json_int_or(&r, "prefetch", 4, 0, 1024, &sp->prefetch);
    brisk_json_int_or(&r, "threads", 0, 0, 4096, &sp->threads);
    bool b;
    brisk_json_bool_or(&r, "cuda_graph", true, &b), sp->cuda_graph = b;
    brisk_json_bool_or(&r, "tf32", true, &b), sp->tf32 = b;
    brisk_json_bool_or(&r, "autotune", true, &b), sp->autotune = b;
    brisk_json_bool_or(&r, "fuse", true, &b), sp->fuse = b;
    brisk_json_bool_or(&r, "deterministic", false, &b), sp->deterministic = b;
    brisk_json_enum_or(&r, "conv_layout", conv_layouts, 0, &v), sp->conv_layout = v;
    brisk_json_enum_or(&r, "cpu_gemm", cpu_gemms, 0, &v), sp->cpu_gemm = v;
    const char *s;
    brisk_json_string_or(&r, "autotune_cache", "", &s);
    copy_path(&r, "autotune_cache", sp->autotune_cache, sizeof sp->autotune_cache, s);
    read_memory_limit(&r, sp);
}

static void read_dist(brisk_json_reader *root, brisk_dist_spec *d) {
    brisk_json_reader r;
    memset(d, 0, sizeof *d);
    brisk_json_object_opt(root, "dist", &r, NULL);
    brisk_json_number_or(&r, "bucket_mb", (double)BRISK_DIST_BUCKET_BYTES_DEFAULT / 1048576.0, BRISK_IN(1e-3, 4096.0),
                         &d->bucket_mb);
    brisk_json_number_or(&r, "timeout_s", BRISK_DIST_TIMEOUT_DEFAULT, BRISK_IN(0.1, 1e7), &d->timeout_s);
    bool b;
    brisk_json_bool_or(&r, "shard_optimizer", false, &b), d->shard_optimizer = b;
    int v = BRISK_OVERLAP_AUTO;
    brisk_json_enum_or(&r, "overlap", overlap_modes, BRISK_OVERLAP_AUTO, &v), d->overlap = (brisk_overlap_mode)v;
}

static void read_log(brisk_json_reader *root, brisk_log_spec *l) {
    brisk_json_reader r;
    memset(l, 0, sizeof *l);
    brisk_json_object_opt(root, "log", &r, NULL);
    bool b;
    brisk_json_bool_or(&r, "tensorboard", true, &b), l->tensorboard = b;
    brisk_json_int64_or(&r, "histogram_every", 0, 0, INT64_C(1) << 40, &l->histogram_every);
}

static const char *const session_resumes[] = {"refuse", "auto", "overwrite", NULL};

static void read_session(brisk_json_reader *root, brisk_session_spec *s) {
    brisk_json_reader r;
    bool present = false, b;
    int v;
    memset(s, 0, sizeof *s);
    brisk_json_object_opt(root, "session", &r, &present);
    s->present = present;
    brisk_json_bool_or(&r, "stop_signals", false, &b), s->stop_signals = b;
    brisk_json_int64_or(&r, "mpi_comm", -1, -1, INT32_MAX, &s->mpi_comm);
    brisk_json_enum_or(&r, "resume", session_resumes, BRISK_SESSION_REFUSE, &v), s->resume = (brisk_session_resume)v;
}

static void stem(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, n, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = 0;
}

static brisk_status from_doc(brisk_json *doc, const char *label, const char *const *overrides,
                             int n_overrides, brisk_config *cfg, brisk_error *err) {
    brisk_status st = BRISK_OK;
    for (int i = 0; i < n_overrides && !st; i++) st = brisk_json_override(doc, overrides[i], err);
    if (st) return st;
    brisk_json_reader root = brisk_json_root(doc);
    copy_str(cfg->path, sizeof cfg->path, label);
    stem(label, cfg->name, sizeof cfg->name);
    brisk_config_read_models(&root, cfg);
    read_data(&root, &cfg->data);
    brisk_config_resnet_size_default(&cfg->model, &cfg->data);
    for (int i = 0; i < cfg->n_models; i++) brisk_config_resnet_size_default(&cfg->models[i], &cfg->data);
    read_optim(&root, &cfg->optim);
    read_train(&root, cfg->name, &cfg->train);
    read_speed(&root, &cfg->speed);
    read_dist(&root, &cfg->dist);
    read_log(&root, &cfg->log);
    read_session(&root, &cfg->session);
    if ((st = brisk_json_finish(doc, err))) return st;
    /* a graph model's shapes, inferred now: a mistake is a config error, not a failed run */
    for (int i = 0; i < (cfg->n_models ? cfg->n_models : 1) && !st; i++)
        st = brisk_layer_graph_check(cfg->n_models ? &cfg->models[i] : &cfg->model, err);
    if (cfg->n_models) cfg->model = cfg->models[0];
    if (st) return brisk_error_prefix(err, "%s", label);
    cJSON_DeleteItemFromObjectCaseSensitive(brisk_json_tree(doc), "session");
    return brisk_json_dump(doc, &cfg->json, err);
}

brisk_status brisk_config_load(const char *path, const char *const *overrides, int n_overrides,
                               brisk_config *cfg, brisk_error *err) {
    memset(cfg, 0, sizeof *cfg);
    brisk_json *doc = NULL;
    brisk_status st = brisk_json_load(path, &doc, err);
    if (!st) st = from_doc(doc, path, overrides, n_overrides, cfg, err);
    brisk_json_free(doc);
    /* A relative data path is taken from the working directory, else beside the config. */
    char *paths[3 + BRISK_NETCDF_MAX_FILES] = {cfg->data.train, cfg->data.validation, cfg->data.netcdf.static_file};
    for (int i = 0; i < cfg->data.netcdf.nfiles; i++) paths[3 + i] = cfg->data.netcdf.files[i];
    for (int i = 0; i < 3 + cfg->data.netcdf.nfiles && !st; i++) {
        char *p = paths[i];
        const char *slash = strrchr(path, '/');
        if (p[0] && p[0] != '/' && access(p, F_OK) != 0 && slash) {
            char alt[BRISK_PATH_MAX];
            snprintf(alt, sizeof alt, "%.*s/%s", (int)(slash - path), path, p);
            if (access(alt, F_OK) == 0) copy_str(p, BRISK_PATH_MAX, alt);
        }
    }
    char *img = cfg->data.images.labels; /* the same for data.images.labels */
    if (!st && img[0] && img[0] != '/' && access(img, F_OK) != 0) {
        const char *slash = strrchr(path, '/');
        if (slash) {
            char alt[BRISK_PATH_MAX];
            snprintf(alt, sizeof alt, "%.*s/%s", (int)(slash - path), path, img);
            if (access(alt, F_OK) == 0) copy_str(img, sizeof cfg->data.images.labels, alt);
        }
    }
    if (st) brisk_config_free(cfg);
    return st;
}

brisk_status brisk_config_parse(const char *json, const char *label, const char *const *overrides,
                                int n_overrides, brisk_config *cfg, brisk_error *err) {
    memset(cfg, 0, sizeof *cfg);
    brisk_json *doc = NULL;
    brisk_status st = brisk_json_parse(json, strlen(json), label, &doc, err);
    if (!st) st = from_doc(doc, label, overrides, n_overrides, cfg, err);
    brisk_json_free(doc);
    if (st) brisk_config_free(cfg);
    return st;
}

void brisk_config_free(brisk_config *cfg) {
    free(cfg->json);
    cfg->json = NULL;
    /* cfg->model is models[0] in a pipeline: one reference each */
    for (int i = 0; i < cfg->n_models; i++) brisk_layer_graph_unref(cfg->models[i].graph), cfg->models[i].graph = NULL;
    if (!cfg->n_models) brisk_layer_graph_unref(cfg->model.graph);
    cfg->model.graph = NULL;
}

brisk_status brisk_config_walk(const char *json, const char *label, brisk_json_recorder fn, void *user,
                               brisk_error *err) {
    brisk_config *cfg = calloc(1, sizeof *cfg);
    brisk_json *doc = NULL;
    brisk_status st = cfg ? brisk_json_parse(json, strlen(json), label, &doc, err)
                          : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    if (!st) {
        brisk_json_record(doc, fn, user);
        st = from_doc(doc, label, NULL, 0, cfg, err);
    }
    brisk_json_free(doc);
    if (cfg) brisk_config_free(cfg);
    free(cfg);
    return st;
}
