/* `brisk predict` on a folder of images: the PNG/JPEG files in it (sorted by name) decoded,
 * resized and normalised exactly as the checkpoint's data.images made validation samples,
 * one batch at a time (predict.c asks for each), so that memory holds one batch of pixels
 * whatever the folder's size; keypoint predictions are written back in pixels of each
 * image. A file that cannot be read (at the header check, or when its pixels are decoded)
 * is skipped with a line naming it, unless the caller wants the first to be an error. */
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "infer/predict_internal.h"
#include "run/checkpoint_file.h"

/* Images' input a batch at most: a batch's pixels and the graph's activations grow with it. */
#define IMAGE_BATCH_BYTES ((int64_t)32 << 20)

static void skipped(brisk_predict_images *pi, const char *msg) {
    pi->skipped++;
    brisk_log(pi->log, BRISK_LOG_WARN, "predict   skipped %s", msg);
}

brisk_status brisk_predict_images_open(const brisk_config *cfg, const char *checkpoint, const char *dir,
                                       const brisk_shape *sample, int strict, const brisk_logger *log,
                                       brisk_predict_images *pi, brisk_error *err) {
    memset(pi, 0, sizeof *pi);
    pi->log = log;
    pi->strict = strict;
    if (!cfg->data.images.enabled)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: a folder of images, but %s was not trained on images "
                            "(data.images); give an .npy, .npz or .csv of samples", dir, checkpoint);
    brisk_image_spec spec;
    brisk_images_spec_of(&cfg->data, cfg->train.seed, &spec);
    spec.labels = dir;
    spec.skip_bad = !strict;
    spec.no_replace = 1;  /* a file that fails gets no row, not another file's */
    spec.nflip_pairs = 0; /* no labels, no augmentation */
    brisk_status st = brisk_image_dataset_load(&pi->ds, &spec, NULL, err);
    if (st) return st;
    for (int64_t i = 0; i < brisk_image_dataset_skips(&pi->ds); i++)
        skipped(pi, brisk_image_dataset_skip(&pi->ds, i, NULL, NULL));
    pi->per = brisk_shape_numel(&pi->ds.fields[0].tensor.shape) / (pi->ds.count ? pi->ds.count : 1);
    if (pi->per != brisk_shape_numel(sample)) {
        char a[64];
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: images make samples of %lld values; the model takes %s", dir,
                          (long long)pi->per, brisk_shape_str(sample, a, sizeof a));
    } else if (!(pi->kept = malloc((size_t)pi->ds.count * sizeof *pi->kept))) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", dir);
    }
    if (st) brisk_predict_images_close(pi);
    return st;
}

int64_t brisk_predict_images_batch_size(const brisk_predict_images *pi, int64_t most) {
    int64_t b = IMAGE_BATCH_BYTES / (pi->per * (int64_t)sizeof(float));
    return b < 1 ? 1 : b < most ? b : most;
}

brisk_status brisk_predict_images_batch(brisk_predict_images *pi, int64_t first, int64_t n, float *buf, int64_t *got,
                                        brisk_error *err) {
    *got = 0;
    for (int64_t i = first; i < first + n; i++) {
        void *dst[BRISK_MAX_FIELDS] = {buf + *got * pi->per};
        brisk_error e = {0};
        brisk_status st = pi->ds.make(pi->ds.make_user, i, 0, 0, dst, &e);
        if (st && (pi->strict || st == BRISK_ERR_NOMEM)) {
            *err = e;
            return st;
        }
        if (st) {
            skipped(pi, e.msg);
            continue;
        }
        pi->kept[pi->nkept++] = i;
        ++*got;
    }
    return BRISK_OK;
}

void brisk_predict_images_close(brisk_predict_images *pi) {
    brisk_dataset_free(&pi->ds);
    free(pi->kept);
    pi->kept = NULL;
}

brisk_status brisk_predict_images_output(const brisk_config *cfg, const brisk_predict_images *pi, const brisk_tensor *y,
                                         const char *out, int to_csv, brisk_error *err) {
    const brisk_model_spec *m = &cfg->model;
    int64_t N = y->shape.d[0], C = y->shape.d[1];
    if (m->type != BRISK_MODEL_RESNET) /* outputs that are not keypoints: as they are */
        return to_csv ? brisk_csv_write(out, y, m->task == BRISK_TASK_CLASSIFY ? "p" : "y", err)
                      : brisk_npy_write(out, y, err);
    /* The model regresses fractions of the sample's width and height; each image's own
     * size maps them back to its pixels (they differ when data.images.resize). */
    brisk_tensor px = {0};
    const char **files = malloc((size_t)(N ? N : 1) * sizeof *files);
    brisk_status st = files ? brisk_tensor_alloc(&px, BRISK_F32, brisk_shape3(N, C / 2, 2), err)
                            : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; !st && r < N; r++) {
        files[r] = brisk_image_dataset_path(&pi->ds, pi->kept[r]);
        st = brisk_image_dataset_to_pixels(&pi->ds, pi->kept[r], (int)(C / 2), (const float *)y->data + r * C,
                                           (float *)px.data + r * C, err);
    }
    if (!st) st = to_csv ? brisk_keypoints_csv_write(out, files, N, (int)(C / 2), px.data, err) : brisk_npy_write(out, &px, err);
    free(files);
    brisk_tensor_free(&px);
    return st;
}
