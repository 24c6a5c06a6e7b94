/* Image datasets (data.h): the labels and file list (or an image array) are held in
 * memory; pixels are decoded, cropped, flipped, resized and normalised per sample in the
 * loader's threads through dataset.make. At load every file's header is read (or, with
 * verify, every image decoded) so a missing, unreadable or wrongly sized file is reported
 * (or left out and counted) before training starts. */
#include "data/bytes.h"
#include "data/image_internal.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int ends_with(const char *s, const char *suf);

static void source_free(void *user) {
    brisk_image_source *s = (brisk_image_source *)user;
    if (!s) return;
    for (int64_t i = 0; s->paths && i < s->n; i++) free(s->paths[i]);
    for (int64_t i = 0; i < s->nskips; i++) free(s->skips[i].msg), free(s->skips[i].file);
    free(s->paths);
    free(s->wh);
    free(s->file_id);
    free(s->bad);
    free(s->skips);
    free(s->array);
    free(s->kp);
    free(s->category);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---------------------------------------------------------------- loading */

static brisk_status check_spec(const brisk_image_spec *sp, brisk_error *err) {
    const char *n = sp->labels ? sp->labels : "(images)";
    if (!sp->labels || !sp->labels[0]) return brisk_errorf(err, BRISK_ERR_INVALID, "images: no labels file given");
    if (sp->width < 1 || sp->height < 1 || sp->width > 16384 || sp->height > 16384)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: sample size %d x %d; expected 1 to 16384 a side", n, sp->width,
                            sp->height);
    for (int c = 0; c < 3; c++)
        if (!(sp->std[c] > 0) || !isfinite(sp->mean[c]))
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: std[%d] = %g; expected > 0 (and a finite mean)", n, c,
                                (double)sp->std[c]);
    if (!(sp->flip >= 0 && sp->flip <= 1))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: flip probability %g; expected 0 to 1", n, (double)sp->flip);
    if (!(sp->crop >= 0 && sp->crop <= 1))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: crop %g; expected a fraction in (0, 1]", n, (double)sp->crop);
    if (sp->nflip_pairs < 0 || sp->nflip_pairs > BRISK_MAX_KEYPOINTS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d flip pairs; expected 0 to %d", n, sp->nflip_pairs,
                            BRISK_MAX_KEYPOINTS);
    return BRISK_OK;
}

/* A file left out at load: counted by reason in the report, and listed in the dataset. */
static brisk_status count_skip(brisk_image_source *s, brisk_image_report *r, const char *file, brisk_status st,
                               const brisk_error *e, brisk_error *err) {
    if (st == BRISK_ERR_IO) r->missing++;
    else if (st == BRISK_ERR_UNSUPPORTED) r->unsupported++;
    else if (st == BRISK_ERR_SHAPE) r->wrong_size++;
    else r->corrupt++;
    if (!r->first_skipped[0]) snprintf(r->first_skipped, sizeof r->first_skipped, "%s", e->msg);
    return brisk_image_skip_add(s, -1, file, e->msg) ? brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", s->spec.labels)
                                               : BRISK_OK;
}

/* Header (or, with verify, full) check of one file: its size as decoded into wh. */
static brisk_status check_file(const brisk_image_source *s, const char *path, int32_t wh[2], brisk_error *err) {
    const brisk_image_spec *sp = &s->spec;
    brisk_file f;
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    int w = 0, h = 0;
    if (sp->verify) {
        brisk_image im;
        if (!(st = brisk_image_decode(f.data, f.len, path, &sp->decode, &im, err))) w = im.width, h = im.height;
        brisk_image_free(&im);
    } else {
        st = brisk_image_info(f.data, f.len, path, &sp->decode, &w, &h, err);
    }
    brisk_file_release(&f);
    wh[0] = w, wh[1] = h;
    if (!st && !sp->resize && (w != sp->width || h != sp->height))
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: image of %d x %d pixels; expected %d x %d (data.images.size), or "
                          "set resize", path, w, h, sp->width, sp->height);
    return st;
}

/* The device and inode of each row's file (0, 0 when it cannot be found: reported later). */
static void file_ids(char *const *full, int64_t rows, uint64_t *ids) {
    for (int64_t r = 0; r < rows; r++) {
        struct stat sb;
        int ok = stat(full[r], &sb) == 0;
        ids[2 * r] = ok ? (uint64_t)sb.st_dev : 0;
        ids[2 * r + 1] = ok ? (uint64_t)sb.st_ino : 0;
    }
}

static brisk_status load_csv(brisk_image_source *s, brisk_image_report *rep, brisk_error *err) {
    const char *path = s->spec.labels;
    brisk_file f;
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    brisk_image_labels L;
    st = ends_with(path, ".json") ? brisk_image_labels_parse_json((const char *)f.data, f.len, path, &L, err)
                                  : brisk_image_labels_parse((const char *)f.data, f.len, path, &L, err);
    brisk_file_release(&f);
    if (st) return st;
    rep->listed = L.rows;
    s->k = L.k;
    s->has_category = L.has_category;
    size_t rows = (size_t)L.rows;
    s->paths = calloc(rows, sizeof *s->paths);
    s->wh = malloc(rows * 2 * sizeof *s->wh);
    s->file_id = malloc(rows * 2 * sizeof *s->file_id);
    s->kp = malloc(rows * (size_t)(L.k ? L.k : 1) * 3 * sizeof *s->kp);
    s->category = malloc(rows * sizeof *s->category);
    char **full = calloc(rows, sizeof *full);
    uint64_t *ids = malloc(rows * 2 * sizeof *ids);
    uint8_t *dup = malloc(rows);
    if (!s->paths || !s->wh || !s->file_id || !s->kp || !s->category || !full || !ids || !dup)
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path) : 0;
    for (int64_t r = 0; r < L.rows && !st; r++) {
        const char *file = L.files[r];
        size_t need = (size_t)dirlen + strlen(file) + 2;
        if (!(full[r] = malloc(need))) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); break; }
        if (file[0] == '/' || !slash) snprintf(full[r], need, "%s", file);
        else snprintf(full[r], need, "%.*s/%s", dirlen, path, file);
    }
    if (!st) file_ids(full, L.rows, ids);
    if (!st) st = brisk_image_find_duplicates(&L, ids, path, dup, rep, err);
    for (int64_t r = 0; r < L.rows && !st; r++) {
        if (dup[r]) continue;
        brisk_error e;
        e.msg[0] = 0;
        int64_t i = s->n;
        brisk_status fst = check_file(s, full[r], s->wh + 2 * i, &e);
        if (fst) {
            if (!s->spec.skip_bad) {
                *err = e;
                st = brisk_error_prefix(err, "%s: %s%lld%s names an image that cannot be used (data.images.on_error "
                                        "\"skip\" leaves such samples out)", path, L.json ? "images[" : "line ",
                                        (long long)L.lines[r], L.json ? "]" : "");
                break;
            }
            st = count_skip(s, rep, full[r], fst, &e, err);
            continue;
        }
        s->n++;
        s->paths[i] = full[r];
        full[r] = NULL;
        s->file_id[2 * i] = ids[2 * r], s->file_id[2 * i + 1] = ids[2 * r + 1];
        int64_t pixels = (int64_t)s->wh[2 * i] * s->wh[2 * i + 1];
        if (pixels > rep->largest_pixels) rep->largest_pixels = pixels;
        memcpy(s->kp + (size_t)i * s->k * 3, L.kp + (size_t)r * L.k * 3, (size_t)L.k * 3 * sizeof(float));
        if (L.has_category) s->category[i] = L.category[r];
    }
    for (size_t r = 0; full && r < rows; r++) free(full[r]);
    free(full);
    free(ids);
    free(dup);
    brisk_image_labels_free(&L);
    if (!st && s->n == 0)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: none of its %lld images can be used (first: %s)", path,
                          (long long)rep->listed, rep->first_skipped);
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int is_image_name(const char *n) {
    size_t l = strlen(n);
    return (l > 4 && (strcasecmp(n + l - 4, ".png") == 0 || strcasecmp(n + l - 4, ".jpg") == 0)) ||
           (l > 5 && strcasecmp(n + l - 5, ".jpeg") == 0);
}

/* A folder: its .png/.jpg/.jpeg files (any case; not its subfolders) in byte order of their
 * names, without labels: what `brisk predict` runs a model on. */
static brisk_status load_dir(brisk_image_source *s, brisk_image_report *rep, brisk_error *err) {
    const char *dir = s->spec.labels;
    DIR *d = opendir(dir);
    if (!d) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open the folder", dir);
    char **names = NULL;
    int64_t n = 0, cap = 0;
    brisk_status st = BRISK_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        if (!is_image_name(e->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **t = realloc(names, (size_t)cap * sizeof *names);
            if (!t) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", dir); break; }
            names = t;
        }
        size_t need = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(need))) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", dir); break; }
        snprintf(names[n++], need, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!st && n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    rep->listed = n;
    size_t slots = (size_t)(n ? n : 1);
    if (!st && (!(s->paths = calloc(slots, sizeof *s->paths)) || !(s->wh = malloc(2 * slots * sizeof *s->wh))))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", dir);
    for (int64_t i = 0; !st && i < n; i++) {
        struct stat sb;
        if (stat(names[i], &sb) == 0 && S_ISDIR(sb.st_mode)) continue; /* a folder named x.png */
        brisk_error e = {0};
        brisk_status fst = check_file(s, names[i], s->wh + 2 * s->n, &e);
        if (fst && !s->spec.skip_bad) {
            *err = e;
            st = fst;
        } else if (fst) {
            st = count_skip(s, rep, names[i], fst, &e, err);
        } else {
            int64_t pixels = (int64_t)s->wh[2 * s->n] * s->wh[2 * s->n + 1];
            if (pixels > rep->largest_pixels) rep->largest_pixels = pixels;
            s->paths[s->n++] = names[i];
            names[i] = NULL;
        }
    }
    for (int64_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (!st && s->n == 0)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no usable .png, .jpg or .jpeg file in the folder%s%s%s", dir,
                          rep->first_skipped[0] ? " (first left out: " : "", rep->first_skipped,
                          rep->first_skipped[0] ? ")" : "");
    return st;
}

const char *brisk_image_dataset_path(const brisk_dataset *ds, int64_t i) {
    const brisk_image_source *s = brisk_image_source_of(ds);
    return s && s->paths && i >= 0 && i < s->n ? s->paths[i] : NULL;
}

/* An image array: .npy of images, or .npz with "images" and optional "category", "keypoints". */
static brisk_status load_array(brisk_image_source *s, brisk_image_report *rep, brisk_error *err) {
    const char *path = s->spec.labels;
    size_t len = strlen(path);
    brisk_npz z = {0};
    brisk_npy_array one;
    const brisk_npy_array *img;
    brisk_status st;
    int npz = len > 4 && strcmp(path + len - 4, ".npz") == 0;
    if (npz) {
        if ((st = brisk_npz_read(path, &z, err))) return st;
        if (!(img = brisk_npz_find(&z, "images"))) {
            brisk_npz_free(&z);
            return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no member 'images'; expected images u8 [N, H, W, 3] and "
                                "optional 'category' [N] and 'keypoints' [N, K, 3]", path);
        }
    } else {
        if ((st = brisk_npy_read(path, &one, err))) return st;
        img = &one;
    }
    const brisk_shape *sh = &img->shape;
    char sb[96];
    int gray = sh->ndim == 3 || (sh->ndim == 4 && sh->d[3] == 1);
    if (img->dtype.kind != 'u' || img->dtype.size != 1 || sh->ndim < 3 || sh->ndim > 4 ||
        (sh->ndim == 4 && sh->d[3] != 3 && sh->d[3] != 1) || sh->d[0] < 1)
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: images are %s %s; expected u8 [N, H, W, 3] (or [N, H, W] gray)",
                          path, img->dtype.descr, brisk_shape_str(sh, sb, sizeof sb));
    else if (gray && !s->spec.decode.gray_to_rgb)
        st = brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: grayscale images %s; expected RGB (set gray_to_rgb to "
                          "replicate them)", path, brisk_shape_str(sh, sb, sizeof sb));
    else if (sh->d[1] > 65535 || sh->d[2] > 65535 || (!s->spec.resize && (sh->d[1] != s->spec.height ||
                                                                            sh->d[2] != s->spec.width)))
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: images of %lld x %lld pixels; expected %d x %d (or set resize)",
                          path, (long long)sh->d[2], (long long)sh->d[1], s->spec.width, s->spec.height);
    if (!st) {
        s->n = rep->listed = sh->d[0]; /* largest_pixels stays 0: nothing is decoded */
        s->ah = (int)sh->d[1], s->aw = (int)sh->d[2], s->ac = gray ? 1 : 3;
        s->array = img->data;
        ((brisk_npy_array *)img)->data = NULL; /* adopted */
    }
    const brisk_npy_array *cat = npz ? brisk_npz_find(&z, "category") : NULL;
    const brisk_npy_array *kp = npz ? brisk_npz_find(&z, "keypoints") : NULL;
    if (!st && cat) {
        brisk_tensor t;
        if (!(st = brisk_npy_to_tensor(cat, BRISK_I32, path, &t, err))) {
            if (t.shape.ndim != 1 || t.shape.d[0] != s->n)
                st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: member 'category' is %s; expected [%lld]", path,
                                  brisk_shape_str(&t.shape, sb, sizeof sb), (long long)s->n);
            for (int64_t i = 0; !st && i < s->n; i++)
                if (((int32_t *)t.data)[i] < 0)
                    st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: category[%lld] = %d; expected >= 0", path, (long long)i,
                                      ((int32_t *)t.data)[i]);
            if (!st) s->category = t.data, s->has_category = 1;
            else brisk_tensor_free(&t);
        }
    }
    if (!st && kp) {
        brisk_tensor t;
        if (!(st = brisk_npy_to_tensor(kp, BRISK_F32, path, &t, err))) {
            if (t.shape.ndim != 3 || t.shape.d[0] != s->n || t.shape.d[2] != 3 || t.shape.d[1] < 1 ||
                t.shape.d[1] > BRISK_MAX_KEYPOINTS)
                st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: member 'keypoints' is %s; expected [%lld, K, 3] (x, y, v) "
                                  "with K <= %d", path, brisk_shape_str(&t.shape, sb, sizeof sb), (long long)s->n,
                                  BRISK_MAX_KEYPOINTS);
            for (int64_t i = 0; !st && i < s->n * t.shape.d[1] * 3; i++)
                if (!isfinite(((float *)t.data)[i]))
                    st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: keypoints hold a NaN or inf at sample %lld", path,
                                      (long long)(i / (t.shape.d[1] * 3)));
            if (!st) s->kp = t.data, s->k = (int)t.shape.d[1];
            else brisk_tensor_free(&t);
        }
    }
    if (npz) brisk_npz_free(&z);
    else brisk_npy_free(&one);
    return st;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

brisk_status brisk_image_dataset_load(brisk_dataset *ds, const brisk_image_spec *spec, brisk_image_report *rep,
                                      brisk_error *err) {
    memset(ds, 0, sizeof *ds);
    brisk_image_report dummy;
    if (!rep) rep = &dummy;
    memset(rep, 0, sizeof *rep);
    brisk_image_spec sp = *spec;
    if (sp.std[0] == 0 && sp.std[1] == 0 && sp.std[2] == 0)
        for (int c = 0; c < 3; c++) sp.mean[c] = 0, sp.std[c] = 1;
    brisk_status st = check_spec(&sp, err);
    if (st) return st;
    brisk_image_source *s = calloc(1, sizeof *s);
    if (!s) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", spec->labels);
    pthread_mutex_init(&s->mu, NULL);
    s->spec = sp;
    snprintf(ds->source, sizeof ds->source, "%s", spec->labels);
    int array = ends_with(spec->labels, ".npy") || ends_with(spec->labels, ".npz");
    struct stat sb;
    int dir = stat(spec->labels, &sb) == 0 && S_ISDIR(sb.st_mode);
    st = dir ? load_dir(s, rep, err) : array ? load_array(s, rep, err) : load_csv(s, rep, err);
    if (!st) st = brisk_image_check_keypoints(s, rep, err);
    if (!st && !(s->bad = calloc((size_t)s->n, 1))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", spec->labels);
    for (int p = 0; !st && p < spec->nflip_pairs; p++)
        for (int a = 0; a < 2; a++)
            if (spec->flip_pairs[p][a] < 0 || spec->flip_pairs[p][a] >= s->k)
                st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: flip pair %d names keypoint %d; the labels have %d", spec->labels,
                                  p, spec->flip_pairs[p][a], s->k);
    if (st) {
        source_free(s);
        return st;
    }
    rep->kept = s->n;
    rep->keypoints = s->k;
    /* Fields: made on demand (no data) except the categories, which are only copied. */
    brisk_tensor t = {BRISK_F32, brisk_shape4(s->n, 3, spec->height, spec->width), NULL};
    s->f_x = s->f_y = s->f_vis = s->f_cat = -1;
    st = brisk_dataset_add(ds, "x", &t, err);
    s->f_x = 0;
    if (!st && s->k > 0) {
        t = (brisk_tensor){BRISK_F32, brisk_shape3(s->n, s->k, 2), NULL};
        if (!(st = brisk_dataset_add(ds, "y", &t, err))) s->f_y = ds->nfields - 1;
        t = (brisk_tensor){BRISK_F32, brisk_shape2(s->n, s->k), NULL};
        if (!st && !(st = brisk_dataset_add(ds, "visible", &t, err))) s->f_vis = ds->nfields - 1;
    }
    if (!st && s->has_category) {
        if (!(st = brisk_tensor_alloc(&t, BRISK_I32, brisk_shape1(s->n), err))) {
            memcpy(t.data, s->category, (size_t)s->n * sizeof(int32_t));
            if (!(st = brisk_dataset_add(ds, "category", &t, err))) s->f_cat = ds->nfields - 1;
        }
        int32_t *sorted = st ? NULL : malloc((size_t)s->n * sizeof *sorted);
        if (sorted) {
            memcpy(sorted, s->category, (size_t)s->n * sizeof *sorted);
            qsort(sorted, (size_t)s->n, sizeof *sorted, cmp_i32);
            for (int64_t i = 0; i < s->n; i++) rep->categories += i == 0 || sorted[i] != sorted[i - 1];
            free(sorted);
        }
    }
    if (st) {
        source_free(s);
        brisk_dataset_free(ds);
        return st;
    }
    ds->make = brisk_image_make;
    ds->make_user = s;
    ds->make_free = source_free;
    return BRISK_OK;
}
