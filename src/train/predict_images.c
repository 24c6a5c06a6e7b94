/* `brisk predict` on a folder of images: the PNG/JPEG files in it (sorted by name) decoded,
 * resized and normalised exactly as the checkpoint's data.images made validation samples,
 * and keypoint predictions written back in pixels of each image. */
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

brisk_status brisk_predict_images_input(const brisk_config *cfg, const char *checkpoint, const char *dir,
                                        const brisk_shape *sample, brisk_tensor *x, brisk_dataset *ds,
                                        brisk_error *err) {
    memset(x, 0, sizeof *x);
    memset(ds, 0, sizeof *ds);
    if (!cfg->data.images.enabled)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: a folder of images, but %s was not trained on images "
                            "(data.images); give an .npy, .npz or .csv of samples", dir, checkpoint);
    brisk_image_spec spec;
    brisk_images_spec_of(&cfg->data, cfg->train.seed, &spec);
    spec.labels = dir;
    spec.skip_bad = 0; /* every file named gets a row of the output, or an error */
    spec.nflip_pairs = 0; /* no labels, no augmentation */
    brisk_status st = brisk_image_dataset_load(ds, &spec, NULL, err);
    if (st) return st;
    int64_t per = brisk_shape_numel(&ds->fields[0].tensor.shape) / (ds->count ? ds->count : 1);
    if (per != brisk_shape_numel(sample)) {
        char a[64];
        st = brisk_errorf(err, BRISK_ERR_SHAPE, "%s: images make samples of %lld values; the model takes %s", dir,
                          (long long)per, brisk_shape_str(sample, a, sizeof a));
    }
    int64_t dims[BRISK_MAX_DIMS] = {ds->count};
    for (int i = 0; i < sample->ndim; i++) dims[i + 1] = sample->d[i];
    if (!st) st = brisk_tensor_alloc(x, BRISK_F32, brisk_shape_make(sample->ndim + 1, dims), err);
    for (int64_t i = 0; !st && i < ds->count; i++) {
        void *dst[BRISK_MAX_FIELDS] = {(float *)x->data + i * per};
        st = ds->make(ds->make_user, i, 0, 0, dst, err);
    }
    if (st) {
        brisk_tensor_free(x);
        brisk_dataset_free(ds);
    }
    return st;
}

brisk_status brisk_predict_images_output(const brisk_config *cfg, const brisk_dataset *ds, const brisk_tensor *y,
                                         const char *out, int to_csv, brisk_error *err) {
    const brisk_model_spec *m = &cfg->model;
    int64_t N = y->shape.d[0], C = y->shape.d[1];
    if (m->type != BRISK_MODEL_RESNET) /* outputs that are not keypoints: as they are */
        return to_csv ? brisk_csv_write(out, y, m->task == BRISK_TASK_CLASSIFY ? "p" : "y", err)
                      : brisk_npy_write(out, y, err);
    /* The model regresses fractions of the sample's width and height; each image's own
     * size maps them back to its pixels (they differ when data.images.resize). */
    brisk_tensor px = {0};
    const char **files = malloc((size_t)N * sizeof *files);
    brisk_status st = files ? brisk_tensor_alloc(&px, BRISK_F32, brisk_shape3(N, C / 2, 2), err)
                            : brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; !st && r < N; r++) {
        files[r] = brisk_image_dataset_path(ds, r);
        brisk_image_options opt = {.gray_to_rgb = cfg->data.images.gray_to_rgb, .max_pixels = cfg->data.images.max_pixels,
                                   .raw_orientation = cfg->data.images.raw_orientation};
        int w = cfg->data.images.width, h = cfg->data.images.height;
        if (cfg->data.images.resize) {
            brisk_image im;
            if ((st = brisk_image_read(files[r], &opt, &im, err))) break;
            w = im.width, h = im.height;
            brisk_image_free(&im);
        }
        for (int64_t j = 0; j < C; j++)
            ((float *)px.data)[r * C + j] = ((const float *)y->data)[r * C + j] * (float)(j % 2 ? h : w);
    }
    if (!st) st = to_csv ? brisk_keypoints_csv_write(out, files, N, (int)(C / 2), px.data, err) : brisk_npy_write(out, &px, err);
    free(files);
    brisk_tensor_free(&px);
    return st;
}
