/* data: array readers and writers (NPY, NPZ, CSV), datasets of named arrays, the seeded
 * split and per-epoch sampler, the prefetching batch loader, and the synthetic example
 * data. Every reader parses from a memory buffer (what the fuzzers drive) and from a
 * path; every error names the file, the field and what was expected. */
#ifndef BRISK_DATA_H
#define BRISK_DATA_H

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- NPY
 * NumPy's .npy format, versions 1.0, 2.0 and 3.0, C order, rank <= BRISK_MAX_DIMS,
 * numeric dtypes only: |b1, i1/u1, i2/u2, i4/u4, i8/u8, f2, f4, f8, each with byte
 * order '<', '>', '|' or '='. */
typedef struct brisk_npy_dtype {
    char kind;        /* 'b' bool, 'i' signed int, 'u' unsigned int, 'f' IEEE float */
    int size;         /* bytes per element: 1, 2, 4 or 8 */
    char descr[8];    /* as the file spelled it, e.g. ">i4"; for messages */
} brisk_npy_dtype;

/* An array as the file holds it, except that `data` is always in host byte order
 * (big-endian files are swapped on read) and bools are 0 or 1. */
typedef struct brisk_npy_array {
    brisk_npy_dtype dtype;
    brisk_shape shape;
    void *data;       /* numel * dtype.size bytes, malloc'd; brisk_npy_free releases it */
    size_t nbytes;
} brisk_npy_array;

/* Parses a whole .npy image. `name` (a path, or "x.npz:member") prefixes every error.
 * The data are copied out of `buf`. */
brisk_status brisk_npy_parse(const void *buf, size_t len, const char *name, brisk_npy_array *out,
                             brisk_error *err);
brisk_status brisk_npy_read(const char *path, brisk_npy_array *out, brisk_error *err);
void brisk_npy_free(brisk_npy_array *a);

/* Converts to a brisk tensor of dtype BRISK_F32 (from any dtype; f8 rounds to f32,
 * wide integers may round) or BRISK_I32 (from bool and integer dtypes only; every value
 * must fit in i32, else the error names the element). `name` prefixes errors. */
brisk_status brisk_npy_to_tensor(const brisk_npy_array *a, brisk_dtype want, const char *name,
                                 brisk_tensor *out, brisk_error *err);
/* brisk_npy_read + brisk_npy_to_tensor. */
brisk_status brisk_npy_load(const char *path, brisk_dtype want, brisk_tensor *out, brisk_error *err);

/* Makes the folders that are to hold the file `path` and do not exist yet, as mkdir -p does of
 * its folder ("-" and a bare name: nothing); an error names path and the folder. The library's
 * writers never make folders (an output into a missing one is an error naming it); the brisk
 * command calls this for every output it writes. */
brisk_status brisk_make_parent_folders(const char *path, brisk_error *err);

/* Writes an F32 or I32 tensor as a little-endian version 1.0 .npy (via a temporary file
 * renamed into place). brisk_npy_encode produces the same bytes in a malloc'd buffer. */
brisk_status brisk_npy_write(const char *path, const brisk_tensor *t, brisk_error *err);
brisk_status brisk_npy_encode(const brisk_tensor *t, void **buf, size_t *len, brisk_error *err);

/* ---------------------------------------------------------------- NPZ
 * A zip of .npy members (np.savez, np.savez_compressed): stored or deflated (deflate
 * needs zlib at build time), ZIP64 extents understood, CRC-32 verified. Member names
 * are given without the ".npy" suffix. */
typedef struct brisk_npz_member {
    char *name;
    brisk_npy_array array;
} brisk_npz_member;

typedef struct brisk_npz {
    int count;
    brisk_npz_member *members;
} brisk_npz;

brisk_status brisk_npz_parse(const void *buf, size_t len, const char *name, brisk_npz *out,
                             brisk_error *err);
brisk_status brisk_npz_read(const char *path, brisk_npz *out, brisk_error *err);
/* Reads only the member `member`; the error for a missing one lists those present. */
brisk_status brisk_npz_read_one(const char *path, const char *member, brisk_npy_array *out,
                                brisk_error *err);
/* A member's dtype and shape (nbytes set, data NULL) without reading its data: a deflated
 * member is inflated only as far as its .npy header. */
brisk_status brisk_npz_peek(const char *path, const char *member, brisk_npy_array *out, brisk_error *err);
/* Rows [lo, hi) of the member's leading dimension only (clamped to it; a data-parallel
 * rank's shard): of a stored member only those bytes are read from the file (its CRC,
 * which covers the whole member, is then not checked); a deflated one is inflated in
 * pieces, the rows outside dropped as they come (its CRC checked). */
brisk_status brisk_npz_read_rows(const char *path, const char *member, int64_t lo, int64_t hi, brisk_npy_array *out,
                                 brisk_error *err);
const brisk_npy_array *brisk_npz_find(const brisk_npz *z, const char *member);
void brisk_npz_free(brisk_npz *z);

/* Writes an uncompressed .npz of `count` F32/I32 tensors named names[i], with a fixed
 * timestamp (same arrays, same bytes). The archive must stay below 4 GiB: the writer does
 * not emit ZIP64 (the reader does read it). */
brisk_status brisk_npz_write(const char *path, int count, const char *const *names,
                             const brisk_tensor *tensors, brisk_error *err);

/* ---------------------------------------------------------------- CSV
 * Comma-separated text with a header row: RFC 4180 quoting ("" inside quotes), LF or
 * CRLF line ends, a UTF-8 byte-order mark, blank lines and spaces around fields are
 * tolerated. Numbers are what strtod reads (ints, decimals, exponents, nan, inf); an
 * I32 result also needs integral values in i32's range. Errors read
 * "t.csv: line 17, column 'price': expected a number, got 'abc'".
 *
 * Selects `ncolumns` columns by header name (columns == NULL: all, in file order) into
 * a [rows, ncolumns] tensor of dtype BRISK_F32 or BRISK_I32. NaN and inf are returned
 * as read; the dataset loader rejects them. */
brisk_status brisk_csv_parse(const void *buf, size_t len, const char *name,
                             const char *const *columns, int ncolumns, brisk_dtype dtype,
                             brisk_tensor *out, brisk_error *err);
brisk_status brisk_csv_read(const char *path, const char *const *columns, int ncolumns,
                            brisk_dtype dtype, brisk_tensor *out, brisk_error *err);
/* Writes f32 [rows] or [rows, columns] as CSV: a header PREFIX0, PREFIX1, ... then the
 * values with 9 significant digits (exact for f32). Output paths as brisk_npy_write. */
brisk_status brisk_csv_write(const char *path, const brisk_tensor *t, const char *prefix, brisk_error *err);

/* ---------------------------------------------------------------- datasets
 * N named fields, each a C-contiguous host tensor whose dim 0 is the sample count. All
 * fields have the same sample count; F32 fields hold no NaN or inf (checked at load). */
#define BRISK_FIELD_NAME_MAX 64

typedef struct brisk_dataset_field {
    char name[BRISK_FIELD_NAME_MAX];
    brisk_tensor tensor;
    /* A windowed field (time series) when window > 0: tensor is a series [rows, F...] and
     * sample k is rows [k stride, k stride + window), a view into it, so overlapping
     * windows cost no memory; its samples are [window, F...]. Set by brisk_windows_load. */
    int64_t window, stride;
} brisk_dataset_field;

/* Writes sample `index` of every field into dst[f] (the sample's bytes, in the field's
 * dtype and sample shape). augment 0: the plain sample (validation, prediction); else
 * `epoch` keys the augmentation's randomness with the index, so a sample is the same
 * whichever thread makes it. Called from several loader threads at once. */
typedef brisk_status (*brisk_sample_fn)(void *user, int64_t index, uint64_t epoch, int augment, void *const *dst,
                                        brisk_error *err);

typedef struct brisk_dataset {
    int nfields;
    brisk_dataset_field *fields;
    int64_t count;            /* samples */
    char source[256];         /* the file it came from, for messages */
    /* Samples made on demand (images decoded in the loader's threads): when `make` is set
     * the loader calls it for every sample of a batch instead of copying the fields' data,
     * which is NULL (tensor.shape still says [count, sample...]). brisk_dataset_free calls
     * make_free(make_user). */
    brisk_sample_fn make;
    void *make_user;
    void (*make_free)(void *user);
} brisk_dataset;

/* What the model wants of one field. */
typedef struct brisk_field_spec {
    const char *name;         /* the field's name in the model */
    brisk_dtype dtype;        /* BRISK_F32, or BRISK_I32 (class labels) */
    const char *member;       /* NPZ: the member to read; NULL means `name` */
    const char *const *columns; /* CSV: the columns, in order; "FIRST:LAST" is every column from
                                   FIRST through LAST in the header's order */
    int ncolumns;             /* CSV: entries in columns; a field is [rows, columns selected],
                                 except that an I32 field of one column is [rows] (labels) */
} brisk_field_spec;

brisk_status brisk_dataset_load_npz(brisk_dataset *ds, const char *path,
                                    const brisk_field_spec *specs, int nspecs, brisk_error *err);
brisk_status brisk_dataset_load_csv(brisk_dataset *ds, const char *path,
                                    const brisk_field_spec *specs, int nspecs, brisk_error *err);
/* Samples [lo, hi) of the file only (clamped; rank r of N: brisk_dist_shard's range), held
 * and parsed alone: NPZ members read as brisk_npz_read_rows does, CSV rows outside split
 * (to find where rows end) but neither converted nor kept. file_rows: the file's samples. */
brisk_status brisk_dataset_load_npz_rows(brisk_dataset *ds, const char *path, const brisk_field_spec *specs,
                                         int nspecs, int64_t lo, int64_t hi, int64_t *file_rows, brisk_error *err);
brisk_status brisk_dataset_load_csv_rows(brisk_dataset *ds, const char *path, const brisk_field_spec *specs,
                                         int nspecs, int64_t lo, int64_t hi, int64_t *file_rows, brisk_error *err);
/* The most memory loading these fields will hold at once, in bytes, read from the file's
 * headers without loading it (an NPZ member's .npy header; a CSV's header and line count),
 * so a data set too large for the memory is refused before it is read. */
brisk_status brisk_dataset_estimate(const char *path, const brisk_field_spec *specs, int nspecs, int csv,
                                    int64_t *bytes, brisk_error *err);
/* Adds a field built in memory; the dataset takes ownership of t->data (also when it
 * fails, it frees it). Runs the same count and NaN checks as the loaders. */
brisk_status brisk_dataset_add(brisk_dataset *ds, const char *name, brisk_tensor *t, brisk_error *err);
/* Adds a windowed field over series t [rows, F...] (see brisk_dataset_field): sample k
 * is rows [k stride, k stride + window). The dataset must already count its samples
 * (another field added first), and the series must hold them all. Takes t's data as
 * brisk_dataset_add does, with the same NaN check. */
brisk_status brisk_dataset_add_windows(brisk_dataset *ds, const char *name, brisk_tensor *t, int64_t window,
                                       int64_t stride, brisk_error *err);
/* The field called `name`, or NULL. */
const brisk_tensor *brisk_dataset_get(const brisk_dataset *ds, const char *name);
/* The shape of one sample of field f: the tensor's shape without dim 0, or [window, F...]
 * for a windowed field. */
brisk_shape brisk_dataset_sample_shape(const brisk_dataset *ds, int f);
void brisk_dataset_free(brisk_dataset *ds);

/* ---------------------------------------------------------------- split and sampler
 * Both are pure functions of their arguments: a Fisher-Yates permutation driven by
 * Philox with key = seed, so resuming needs no RNG state. */

/* The permutation of 0..n-1 for (seed, stream, epoch): Philox key = seed, counter =
 * {block lo, block hi, stream, epoch mod 2^32}, draw t taking 64 bits of block t/2. The
 * split and the sampler use their own fixed streams. */
brisk_status brisk_permutation(int64_t n, uint64_t seed, uint32_t stream, uint64_t epoch,
                               int64_t *out, brisk_error *err);

/* Splits 0..n-1: a permutation from the seed; the first n - round(n * validation_fraction)
 * entries are train, the rest validation (train keeps at least one sample).
 * validation_fraction must lie in [0, 1). brisk_split_free releases the arrays. */
typedef struct brisk_split {
    int64_t *train, ntrain;
    int64_t *val, nval;
} brisk_split;
brisk_status brisk_split_make(int64_t n, double validation_fraction, uint64_t seed,
                              brisk_split *out, brisk_error *err);
void brisk_split_free(brisk_split *s);

/* The sample order of `epoch`: subset[perm[k]] (subset NULL: the identity 0..n-1) where
 * perm is the permutation for (seed, epoch), or subset itself when shuffle is 0. */
brisk_status brisk_sampler_order(const int64_t *subset, int64_t n, uint64_t seed, uint64_t epoch,
                                 int shuffle, int64_t *out, brisk_error *err);

/* ---------------------------------------------------------------- windowed time series
 * Samples are windows over a table of numeric columns (CSV by header name; NPZ with one
 * 1-D member per column; NPY [rows, C] with columns named "0" .. "C-1"): window k covers
 * rows a = k stride .. a + length - 1 of the feature columns, and its target sits at row
 * r = a + length - 1 + horizon of the target column, as
 *   VALUE    its value there (regression, y f32 [1]);
 *   CHANGE   the change from the window's last row e = a + length - 1 to r: relative
 *            (v_r - v_e) / |v_e|, difference v_r - v_e or log(v_r / v_e) (regression);
 *   CLASSES  that change binned by ascending thresholds t_1 < .. < t_n: class c when
 *            t_c < change <= t_{c+1} (t_0 = -inf, t_{n+1} = inf), so n thresholds give
 *            n + 1 classes (y i32; e.g. [-0.001, 0.001]: down, flat, up).
 * Split, chronological: the validation part is the last round(rows * validation_fraction)
 * rows, from row s on. Training windows are those whose target row is before s;
 * validation windows start at s or later; windows in between are used by neither, so no
 * validation window overlaps a training window's rows or target. Normalisation (each
 * feature to zero mean, unit standard deviation; a constant feature gets std 1) is fitted
 * on rows before s only, and applied to the whole series. */
typedef enum { BRISK_TARGET_CLASSES = 0, BRISK_TARGET_VALUE, BRISK_TARGET_CHANGE } brisk_target_kind;
typedef enum { BRISK_CHANGE_RELATIVE = 0, BRISK_CHANGE_DIFFERENCE, BRISK_CHANGE_LOG } brisk_change_kind;
#define BRISK_MAX_THRESHOLDS 15

typedef struct brisk_window_spec {
    const char *const *features;
    int nfeatures;
    const char *target;             /* the target column (may also be a feature) */
    brisk_target_kind kind;
    brisk_change_kind change;
    double thresholds[BRISK_MAX_THRESHOLDS];
    int nthresholds;
    int64_t length, stride, horizon; /* horizon >= 1: the target lies after the window */
    double validation_fraction;     /* in [0, 1) */
    int normalize;
} brisk_window_spec;

typedef struct brisk_windows {
    brisk_dataset ds;     /* "y" (targets) and "x" (windowed [length, nfeatures] view of the series) */
    brisk_split split;    /* window indices: training, then validation, both in time order */
    int64_t rows, split_row;
    int nfeatures;
    float *mean, *std;    /* [nfeatures] fitted on the training rows; NULL when not normalised */
} brisk_windows;

/* Reads the columns from a .csv, .npz or .npy file and makes the windows. */
brisk_status brisk_windows_load(const char *path, const brisk_window_spec *spec, brisk_windows *out,
                                brisk_error *err);
/* The same from a table [rows, ncols] f32 whose columns are called names[]; `source`
 * names it in messages. The table is copied. */
brisk_status brisk_windows_from_table(const brisk_tensor *table, const char *const *names, int ncols,
                                      const char *source, const brisk_window_spec *spec, brisk_windows *out,
                                      brisk_error *err);
/* Reads the named columns of a .csv, .npz or .npy file into a [rows, n] f32 table. */
brisk_status brisk_columns_load(const char *path, const char *const *names, int n, brisk_tensor *out,
                                brisk_error *err);
/* x [rows, F] <- (x - mean) / std per column. */
void brisk_normalize_rows(float *x, int64_t rows, int nfeatures, const float *mean, const float *std);
/* The statistics brisk_normalize_rows applies, fitted: mean and deviation of each of F
 * channels (the last axis: value j of a sample is channel j % F) over the samples rows[0..n)
 * of x (NULL: samples 0..n-1), `per` values a sample (a multiple of F), summed in double; a
 * constant channel gets deviation 1 (it is only centred). What data.windows.normalize,
 * data.windows.target.normalize and data.normalize fit on their training rows. */
void brisk_normalize_fit(const float *x, int64_t per, int F, const int64_t *rows, int64_t n, float *mean, float *std);
void brisk_windows_free(brisk_windows *w);

/* ---------------------------------------------------------------- loader
 * Fills batches of a dataset: one contiguous batch-major buffer per field, in the
 * field's dtype. With prefetch > 0 a loader thread fills a ring of `prefetch` slots
 * while the caller trains; with prefetch 0 next() fills in the caller's thread.
 * Batches run across epoch boundaries; an epoch's last incomplete batch is dropped. */
typedef struct brisk_host_allocator {
    /* Batch memory; the CUDA backend passes pinned-memory functions here. NULL: 64-byte
     * aligned malloc/free. */
    void *(*alloc)(void *user, size_t bytes);
    void (*free)(void *user, void *ptr, size_t bytes);
    void *user;
} brisk_host_allocator;

typedef struct brisk_batch {
    int nfields;
    const brisk_tensor *fields; /* [nfields], in the dataset's field order; shape [batch, ...] */
    int64_t epoch, position;    /* where the batch starts: its first sample's index in the
                                   epoch's order */
    int64_t next_epoch, next_position; /* where the following batch starts: what a checkpoint
                                          written after this batch records, to resume */
    double wait_s;              /* time next() spent waiting for this batch */
    int slot;                   /* the ring slot, for release */
} brisk_batch;

/* Called in the loader thread after a batch is gathered (augmentation, scaling);
 * an error it returns is reported by next(). */
typedef brisk_status (*brisk_batch_fn)(void *user, brisk_batch *b, brisk_error *err);

typedef struct brisk_loader_config {
    const brisk_dataset *dataset; /* must outlive the loader; read only */
    const int64_t *indices;       /* the samples to draw from (copied); NULL: all */
    int64_t nindices;
    int64_t batch_size;
    uint64_t seed;
    int shuffle;
    int64_t start_epoch, start_position; /* resume point (a batch's next_epoch/next_position) */
    int prefetch;                 /* ring slots filled ahead; 0: synchronous */
    brisk_host_allocator allocator;
    brisk_batch_fn transform;     /* optional */
    void *transform_user;
    /* Episodic batches: batch b of epoch e is episode e * batches_per_epoch + b of the seed,
     * its K support samples then its Q query samples (batch_size must be K + Q); an epoch
     * has as many batches as the subset's samples fill. NULL: the sampler's order. */
    const struct brisk_episodes *episodes;
    /* Datasets that make their samples (dataset.make): */
    int workers;                  /* threads making a batch's samples; 0 or 1: the filling thread alone */
    int plain;                    /* 1: no augmentation (validation) */
    /* Data parallel (dist): the global batch of batch_size * shard_count consecutive samples
     * of the epoch's order (the same on every rank) is split, rank shard_rank taking slice
     * shard_rank; positions count samples of the global order. 0 or 1: unsharded. */
    int shard_rank, shard_count;
} brisk_loader_config;

typedef struct brisk_loader brisk_loader;

brisk_status brisk_loader_create(brisk_loader **out, const brisk_loader_config *cfg, brisk_error *err);
/* The next batch; blocks until it is ready. Up to max(prefetch, 1) batches may be held
 * unreleased at once. */
brisk_status brisk_loader_next(brisk_loader *l, brisk_batch *b, brisk_error *err);
/* Hands a batch's slot back for refilling; its buffers must not be used after. */
void brisk_loader_release(brisk_loader *l, brisk_batch *b);
/* Stops and joins the loader thread (also mid-epoch) and frees the ring. */
void brisk_loader_destroy(brisk_loader *l);
int64_t brisk_loader_batches_per_epoch(const brisk_loader *l);
/* Total time callers of next() waited for data. */
double brisk_loader_wait_seconds(const brisk_loader *l);

/* ---------------------------------------------------------------- images
 * PNG (libpng) and JPEG (libjpeg-turbo), each an optional build dependency: without one,
 * reading that format is an error naming the file. Decoded to 8-bit interleaved RGB
 * [height, width, 3] (or 1 channel when asked to keep grayscale). Conversions, all lossless
 * or exactly defined: palette PNGs expand to RGB; PNG alpha is composited onto black;
 * grayscale (PNG gray, gray+alpha; JPEG gray) becomes 3 equal channels only with
 * gray_to_rgb (else an error saying so); 16-bit PNGs and CMYK/YCCK JPEGs are refused
 * (brisk would have to guess a scaling or a colour profile). A corrupt or truncated file
 * (libjpeg's "premature end of data" warnings included) is an error, never a crash, and
 * images of more than max_pixels are refused before any pixel memory is allocated.
 * A JPEG's EXIF Orientation tag (APP1) or a PNG's (eXIf chunk) is applied, as viewers and
 * labelling tools do: pixels, width and height are those of the image as displayed (a
 * phone's portrait photo stored landscape with orientation 6 comes out portrait), unless
 * raw_orientation. */
#define BRISK_IMAGE_MAX_PIXELS_DEFAULT ((int64_t)1 << 26) /* 8192 x 8192 */

typedef struct brisk_image {
    int width, height, channels; /* channels: 3, or 1 for kept grayscale */
    uint8_t *data;               /* [height, width, channels], malloc'd */
} brisk_image;

typedef struct brisk_image_options {
    int gray_to_rgb;             /* 1: grayscale replicated to RGB; 0: refused */
    int keep_gray;               /* 1: grayscale returned as 1 channel (overrides gray_to_rgb) */
    int64_t max_pixels;          /* 0: BRISK_IMAGE_MAX_PIXELS_DEFAULT */
    int raw_orientation;         /* 1: pixels as stored; 0: turned by the EXIF orientation tag */
} brisk_image_options;

typedef enum { BRISK_IMAGE_PNG = 1, BRISK_IMAGE_JPEG = 2 } brisk_image_format;

/* The format from the file's first bytes; 0 when neither. */
int brisk_image_sniff(const void *buf, size_t len);
/* Width, height and what the file holds, from its header only (no pixel memory). Applies
 * the same refusals as decoding (format built in, 16-bit, CMYK, gray without gray_to_rgb,
 * max_pixels). `name` prefixes errors. opt NULL: defaults. */
brisk_status brisk_image_info(const void *buf, size_t len, const char *name, const brisk_image_options *opt,
                              int *width, int *height, brisk_error *err);
brisk_status brisk_image_decode(const void *buf, size_t len, const char *name, const brisk_image_options *opt,
                                brisk_image *out, brisk_error *err);
brisk_status brisk_image_read(const char *path, const brisk_image_options *opt, brisk_image *out, brisk_error *err);
void brisk_image_free(brisk_image *im);
/* Writes 8-bit RGB (channels 3) or gray (1) pixels [height, width, channels] as a PNG, via
 * a temporary file renamed into place. Needs libpng. */
brisk_status brisk_png_write(const char *path, const uint8_t *pixels, int width, int height, int channels,
                             brisk_error *err);

/* ---------------------------------------------------------------- image datasets
 * Samples are images: PNG/JPEG files listed in a labels CSV (paths relative to the CSV's
 * folder), or an image array (.npy u8 [N, H, W, 3] or [N, H, W]; or .npz with member
 * "images" so shaped, and optional "category" [N] and "keypoints" [N, K, 3] members).
 * Decoding and augmentation run in the loader's threads (dataset.make), never in the step.
 *
 * Labels CSV: a header `file[,category][,x0,y0,v0,x1,y1,v1,...]`, one row per image:
 * its path, its category (an integer >= 0; what the episodic sampler draws from) and K
 * keypoints in pixels of the file's image as displayed (EXIF orientation applied unless
 * decode.raw_orientation; origin at its top-left corner, x right, y down,
 * so pixel (i, j) spans [i, i+1) x [j, j+1)), each with a flag v: 0 not labelled, 1 or 2
 * labelled (COCO's occluded / visible). Plain commas only (no quoted fields). A labels file
 * ending in .json holds the same: {"images": [{"file": "a.png", "category": 1, "keypoints":
 * [x0, y0, v0, ...]}, ...]} (category and keypoints for every image or none).
 *
 * Fields of a sample, for an output of width x height:
 *   "x"        f32 [3, height, width]: channels first, (pixel / 255 - mean[c]) / std[c];
 *   "y"        f32 [K, 2]: keypoints as fractions of the output's width and height, 0 for
 *              those not labelled or cropped away (when the labels have keypoints);
 *   "visible"  f32 [K]: 1 for a keypoint in the loss, else 0 (with "y");
 *   "category" i32 (one per sample; when the labels have categories).
 * Augmentation (training samples only; Philox keyed by (seed, epoch, sample), so the
 * same whatever the thread count): a random crop keeping a fraction in [crop, 1] of each
 * side, resized back (bilinear, PyTorch's align_corners=False); a horizontal flip with
 * probability `flip`, which swaps the keypoints of each flip pair (left/right eye...).
 * Without augmentation an image of the output size is copied exactly. */
#define BRISK_MAX_KEYPOINTS 64

typedef struct brisk_image_spec {
    const char *labels;       /* the labels .csv, or an image array .npy / .npz */
    int width, height;        /* of the samples */
    int resize;               /* 1: images of any size, resized; 0: a different size is an error */
    int pad;                  /* with resize: the aspect ratio kept, the sample's rest filled with
                                 the mean colour (0 after normalisation): a letterbox, keypoints
                                 mapped alike (brisk_image_dataset_to_pixels maps them back) */
    float mean[3], std[3];    /* normalisation; std all 0: mean 0, std 1 (values in [0, 1]) */
    brisk_image_options decode;
    int skip_bad;             /* 1: files missing, unreadable, unsupported or of the wrong size are
                                 left out and counted in the report; a file whose pixels fail to
                                 decode later (a truncated file's header is intact) is recorded
                                 once (brisk_image_dataset_skip) and replaced, in every batch, by
                                 the next sample of the list that decodes (of the same category
                                 when there are categories): a batch keeps its size, and the
                                 same batches come for any thread count. 0: the first is an error */
    int no_replace;           /* with skip_bad: such a sample is an error of make instead (its
                                 caller skips it: brisk predict) */
    int verify;               /* 1: decode every image at load, which also finds corrupt pixel
                                 data; 0: read headers only (corrupt pixels stop training later) */
    float flip;               /* probability of a horizontal flip, in [0, 1] */
    int flip_pairs[BRISK_MAX_KEYPOINTS][2];
    int nflip_pairs;
    float crop;               /* in (0, 1]; 1 or 0: no crop */
    uint64_t seed;
} brisk_image_spec;

typedef struct brisk_image_report {
    int64_t listed, kept;
    int64_t missing, corrupt, unsupported, wrong_size; /* left out (skip_bad), by reason */
    int keypoints, categories;                       /* K, and the number of distinct categories */
    int64_t largest_pixels;                          /* of the images kept (width x height): what one
                                                        decode allocates, for the memory plan */
    char first_skipped[600];                         /* the first file left out and why (every one:
                                                        brisk_image_dataset_skip) */
    int64_t duplicates;                              /* rows naming a file an earlier row names with
                                                        the same labels: dropped */
    char first_duplicate[600];
    int64_t keypoints_labelled, keypoints_outside;   /* labelled (v > 0) keypoints, and those outside
                                                        their image (not labelled in the samples) */
    char first_outside[600];
} brisk_image_report;

/* Also refused: labels naming one file (by device and inode) twice with different labels,
 * and keypoints outside their image when they are most of the labelled ones (fewer are
 * counted in the report, and treated as not labelled); a file named twice with the same
 * labels is kept once and counted. */
brisk_status brisk_image_dataset_load(brisk_dataset *ds, const brisk_image_spec *spec, brisk_image_report *report,
                                      brisk_error *err);
/* The files an image dataset left out: at load (skip_bad), and samples whose pixels failed
 * to decode later (see skip_bad). Their count, and entry i: "FILE: why", *sample the
 * sample's index (-1: left out at load) and *file the file. Safe while the loader's threads
 * make samples; the strings live as long as the dataset. NULL / 0 for other datasets. */
int64_t brisk_image_dataset_skips(const brisk_dataset *ds);
const char *brisk_image_dataset_skip(const brisk_dataset *ds, int64_t i, int64_t *sample, const char **file);
/* labels may also name a folder: its .png/.jpg/.jpeg files (any case), sorted by name, as
 * samples with the field "x" only (what `brisk predict` reads). The file of sample i of an
 * image dataset read from files (NULL otherwise, or for i out of range). */
const char *brisk_image_dataset_path(const brisk_dataset *ds, int64_t i);
/* How many images of b are also in a (the same file: device and inode), the first of
 * them into first; 0 when either is not an image dataset read from files. */
int64_t brisk_image_dataset_shared(const brisk_dataset *a, const brisk_dataset *b, char *first, size_t n);
/* The width and height of sample i's image as decoded (the displayed frame); an error for
 * other datasets or i out of range. */
brisk_status brisk_image_dataset_size(const brisk_dataset *ds, int64_t i, int *width, int *height, brisk_error *err);
/* Keypoints of sample i as fractions of the sample's width and height (frac [k, 2], what a
 * model regresses) in pixels of its image (px [k, 2]): the inverse of the sample's resize
 * (and letterbox), without augmentation. An error for other datasets or i out of range. */
brisk_status brisk_image_dataset_to_pixels(const brisk_dataset *ds, int64_t i, int k, const float *frac, float *px,
                                           brisk_error *err);
/* Predicted keypoints as CSV: a header `file,x0,y0,x1,y1,...`, then per row the image's file
 * name (without its folder) and xy[r, 2k] in pixels. A name with a comma or a line break is
 * an error (the labels format has no quoting). Written atomically, as brisk_csv_write. */
brisk_status brisk_keypoints_csv_write(const char *path, const char *const *files, int64_t rows, int k, const float *xy,
                                       brisk_error *err);

/* ---------------------------------------------------------------- episodic sampling
 * Few-shot episodes: a category drawn uniformly among those with at least K + Q samples,
 * then K support and Q query samples of it, all distinct. Episode e of a seed is a pure
 * function of (seed, e) (Philox), so resuming needs no state. */
typedef struct brisk_episodes {
    int k, q;
    int ncat;                 /* eligible categories */
    int32_t *cat;             /* [ncat] their labels */
    int64_t *start, *members; /* members[start[c] .. start[c+1]) are category cat[c]'s samples */
} brisk_episodes;

/* Over the samples subset[0 .. n) (NULL: 0 .. n-1) of a dataset whose sample i has
 * category[i]. */
brisk_status brisk_episodes_init(brisk_episodes *e, const int32_t *category, const int64_t *subset, int64_t n, int k,
                                 int q, brisk_error *err);
/* support [k], query [q] sample indices; *category its label. */
void brisk_episodes_draw(const brisk_episodes *e, uint64_t seed, uint64_t episode, int64_t *support, int64_t *query,
                         int32_t *category);
void brisk_episodes_free(brisk_episodes *e);

/* ---------------------------------------------------------------- synthetic data
 * Writes an example dataset of n samples as an uncompressed .npz, from the seed:
 *   "diffusion": fine f32 [n, 256] (a smooth field interpolated from 7 coarse values plus
 *                small-scale waves whose amplitude and frequency depend on them, plus
 *                noise) and coarse f32 [n, 7] (block means of fine);
 *   "tabular":   x f32 [n, 64] standard normal and y i32 [n] in {0, 1, 2}: the argmax of
 *                a fixed random tanh network of x (the same for every seed), with 5% of
 *                labels replaced by a different class at random;
 *   "series":    a price series with 32 multi-timeframe feature columns (close, ret_1 ..
 *                ret_128, dev_4 .. dev_512, vol_4 .. vol_512, volume, volume_dev, hour_sin,
 *                hour_cos, day_sin, day_cos, spread, noise), each [n]; its future moves are
 *                partly predictable from the past (synth_series.c).
 * Sample i depends only on (seed, i) (for "series", rows are generated in order, and a
 * longer series starts with the shorter one). A path ending in .csv is written as CSV
 * (datasets of one-value fields only), any other as .npz. */
brisk_status brisk_synth_write(const char *kind, const char *path, int64_t n, uint64_t seed,
                               brisk_error *err);
/* Writes DIR/img_NNNNNN.png (n 64 x 64 RGB images: a filled quadrilateral, category 0
 * rectangle, 1 and 2 trapezoids, on a noisy gradient) and DIR/labels.csv with each one's
 * category and its 4 corners as keypoints (top-left, top-right, bottom-right, bottom-left;
 * flip pairs 0-1, 2-3), some occluded (v 1) or unlabelled (v 0). Needs libpng. */
brisk_status brisk_synth_images(const char *dir, int64_t n, uint64_t seed, brisk_error *err);
/* The same data in memory, as a dataset. */
brisk_status brisk_synth_make(const char *kind, int64_t n, uint64_t seed, brisk_dataset *ds,
                              brisk_error *err);

/* ---------------------------------------------------------------- weather (NetCDF)
 * A forecasting dataset over NetCDF files (netcdf*.c; needs libnetcdf at build time,
 * else every call fails naming the file). The files hold CF-style coordinate variables
 * time (with "units" like "hours since 2020-01-01 00:00:00"), lat and lon (1-D, regular,
 * the same in every file; latitudes either way, longitudes increasing and unwrapped where
 * they pass 360 or 180) and, for 3-D fields, a level axis; their names are the spec's or
 * the common ones (valid_time, latitude, pressure_level, ...). A field is (time, lat, lon)
 * or (time, level, lat, lon), each level one channel ("t850" is field t at its level 850),
 * either with ERA5's old expver dimension after time (each value from the first version
 * that has it: ERA5, then ERA5T); a static field is (lat, lon) or its first time. Several
 * files are one time axis, ordered by their first time, strictly increasing throughout;
 * their times are converted to the first file's units as instants (another epoch or unit
 * is the same axis). Values equal to _FillValue / missing_value, NaN or inf are missing: refused
 * (the error names file, variable, time and grid point) or, with mask_missing, replaced by
 * the channel's training mean (counted in `masked`); with a given normalisation (rollout)
 * they are only counted at open, and refused when a time that holds one is read.
 * scale_factor / add_offset apply. An expver variable over time (the 2024+ CDS layout)
 * counts the times that are ERA5T, preliminary data ECMWF may still revise.
 *
 * Sample k is time t = k + history - 1: x [grid, inputs] = the C channels at t-history+1
 * .. t (oldest first), then the S statics, then (time_features) sin and cos of the local
 * solar hour 2 pi (utc + lon / 15) / 24; y [grid, C] = (state(t + lead) - state(t)) /
 * the change's std. Every value is normalised per channel: (v - mean) / std fitted on the
 * training time range. Split, chronological: times from s = ntimes - round(ntimes *
 * validation_fraction) on are validation; training samples have t + lead < s, validation
 * samples t - history + 1 >= s. Samples are read on demand in the loader's thread
 * (netCDF is not thread-safe: one lock serialises its calls); each variable's chunk cache
 * holds the chunks of history + lead + 1 time steps. */
#define BRISK_WEATHER_MAX_VARS 64
#define BRISK_WEATHER_MAX_CHANNELS 1024

typedef struct brisk_weather_spec {
    const char *const *paths;      /* files, directories (their *.nc) or glob patterns */
    int npaths;
    const char *const *variables;  /* the predicted fields */
    int nvariables;
    const char *const *statics;    /* fields read once */
    int nstatics;
    int history, lead;             /* >= 1 */
    double validation_fraction;    /* [0, 1) */
    int mask_missing, time_features;
    /* The normalisation to use instead of fitting one (rollout: the checkpoint's), as
     * brisk_weather's mean/std; NULL: fitted on the training range. */
    const float *mean, *std;
    int nnorm;
    /* One file's bytes instead of the paths (nc_open_mem; paths[0] names it in messages;
     * the fuzz target's entry). They must outlive the weather. */
    const void *mem;
    size_t mem_len;
    /* The coordinate variables (data.netcdf.coordinates); NULL or "": the first found of
     * time, valid_time / level, pressure_level, isobaricInhPa, plev, lev / lat, latitude /
     * lon, longitude (a dimension coordinate before another 1-D variable). */
    const char *time_name, *level_name, *lat_name, *lon_name;
    /* A file of statics (data.netcdf.static_file; ERA5's invariants, perhaps global while the
     * data are regional): a static it holds is read from it at the data's grid points (found
     * by coordinate, modulo 360 in longitude), the others from the first data file. NULL or
     * "": all from the first data file. */
    const char *static_file;
} brisk_weather_spec;

typedef struct brisk_weather_source brisk_weather_source;

typedef struct brisk_weather {
    /* x [count, grid, inputs], y [count, grid, C], made on demand from this struct (its
     * make_user): the dataset may be moved out, the weather must outlive it */
    brisk_dataset ds;
    brisk_split split;     /* sample indices: training then validation, both in time order */
    int64_t ntimes, nlat, nlon, grid, split_time, masked;
    int64_t missing;        /* missing values found over all times (masked or not) */
    int64_t era5t_times, era5t_first; /* times an expver variable marks ERA5T (0005), the first one's index; 0, -1 */
    int channels, nstatics, inputs, history, lead;
    char (*channel)[BRISK_FIELD_NAME_MAX];   /* [channels] "t2m", "t850", ... */
    double *lat, *lon, *time;                /* the coordinates; time in the file's units */
    double hours_per_unit, base_hour;        /* the time unit in hours; the hour of day at time 0 */
    double epoch_s;         /* time 0 as seconds since 1970-01-01 UTC; NAN: not a Gregorian "UNIT since DATE" */
    int lon_turns;          /* times the file's longitudes passed 360 (or 180) and were unwrapped */
    char statics_note[512]; /* which field a name means where a static and a variable share it; "" */
    int mask_missing;
    /* [2 C + S]: the channels, then the statics, then the channels' change over `lead` */
    float *mean, *std;
    int nnorm;
    float *statics_norm;    /* [grid, S] normalised */
    double persistence_mse; /* the validation samples' mean y^2: a zero change's loss */
    brisk_weather_source *src;
} brisk_weather;

brisk_status brisk_weather_open(const brisk_weather_spec *spec, brisk_weather *out, brisk_error *err);
/* The raw state at time index t with missing values left NaN: dst [grid, C]; *missing
 * counts them, the first described in first[256] (NULL: not described). */
brisk_status brisk_weather_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                brisk_error *err);
/* The raw (unnormalised, missing values masked or refused) state at time index t:
 * dst [grid, C]. Safe from several threads. */
brisk_status brisk_weather_state(brisk_weather *w, int64_t t, float *dst, brisk_error *err);
/* x [grid, inputs] at time t from the raw states of t - history + 1 .. t (oldest first). */
void brisk_weather_input(const brisk_weather *w, const float *const *states, int64_t t, float *x);
void brisk_weather_free(brisk_weather *w);
/* The file the whole dataset's coordinates and attributes came from (the first). */
const char *brisk_weather_first_file(const brisk_weather *w);
/* The names of the time, latitude and longitude coordinates in that file. */
void brisk_weather_coord_names(const brisk_weather *w, const char **time, const char **lat, const char **lon);

/* What makes a forecast file CF-complete beside its values. */
typedef struct brisk_forecast_info {
    double init;            /* forecast_reference_time, in w's time units */
    const double *lead_h;   /* [n] forecast_period: hours after init */
    const char *history;    /* the line appended to the input's history attribute (with a UTC timestamp) */
    const char *checkpoint; /* the model that made it */
} brisk_forecast_info;
/* Writes a forecast as NetCDF-4 beside the coordinates and attributes of w's first file:
 * the fields (their levels regrouped), over `n` times valid at times[] (w's units),
 * values [n, grid, C]; a scalar forecast_reference_time, forecast_period(time) in hours
 * (each field's "coordinates" names both), the input's history with info->history
 * appended, and every source (data files, static file, checkpoint) named. */
brisk_status brisk_weather_write(const brisk_weather *w, const char *path, int64_t n, const double *times,
                                 const float *values, const brisk_forecast_info *info, brisk_error *err);
/* CF time units "UNIT since YYYY-MM-DD[ hh[:mm[:ss[.f]]]][ Z|UTC|+hh:mm]" (UNIT seconds,
 * minutes, hours or days): seconds per unit and the epoch as seconds since 1970-01-01 UTC
 * (proleptic Gregorian). 0, or -1 when the text is not such units. */
int brisk_time_units_parse(const char *units, double *unit_s, double *epoch_s);
/* An instant (seconds since 1970-01-01 UTC) as "YYYY-MM-DDThh:mm[:ss]". */
void brisk_time_format(double instant_s, char *out, size_t cap);
/* A value of w's time axis as a date, or as the number when its units are not a date. */
void brisk_weather_date(const brisk_weather *w, double value, char *out, size_t cap);
/* Writes the synthetic regional weather data set (synth_weather.c) of `times` hourly steps. */
brisk_status brisk_synth_weather(const char *path, int64_t times, uint64_t seed, brisk_error *err);
/* Whether this build reads NetCDF. */
int brisk_netcdf_available(void);

#ifdef __cplusplus
}
#endif
#endif
