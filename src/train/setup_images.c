/* data.images: the training labels (and with data.validation a second labels file of the
 * same kind, for validation only) loaded as image datasets, whose samples are decoded and
 * augmented in the loader's threads (data.h), and what loading found said in the log:
 * files left out, rows dropped as repeats, keypoints outside their images. A file in both
 * the training and the validation labels is refused: validation would score an image the
 * model trained on. */
#include "train/trainer_internal.h"

static void log_report(brisk_trainer *t, const brisk_dataset *ds, const brisk_image_spec *spec,
                       const brisk_image_report *r) {
    brisk_log(&t->log, BRISK_LOG_INFO, "data      %s%s: %lld images of %lld listed, as %d x %d%s; %d keypoints, %d "
              "categories", ds == &t->val_data ? "validation " : "", spec->labels, (long long)r->kept,
              (long long)r->listed, spec->width, spec->height,
              spec->resize ? spec->pad ? " (resized, aspect ratio kept: padded)" : " (resized)" : "", r->keypoints,
              r->categories);
    int64_t left_out = r->missing + r->corrupt + r->unsupported + r->wrong_size;
    if (left_out) {
        brisk_log(&t->log, BRISK_LOG_WARN, "data      left out %lld images of %s (data.images.on_error \"skip\"): %lld "
                  "missing or unreadable, %lld corrupt, %lld unsupported, %lld of another size:", (long long)left_out,
                  spec->labels, (long long)r->missing, (long long)r->corrupt, (long long)r->unsupported,
                  (long long)r->wrong_size);
        for (int64_t i = 0; i < brisk_image_dataset_skips(ds); i++)
            brisk_log(&t->log, BRISK_LOG_WARN, "data      left out %s", brisk_image_dataset_skip(ds, i, NULL, NULL));
    }
    if (r->duplicates)
        brisk_log(&t->log, BRISK_LOG_WARN, "data      %lld label rows of %s repeat an earlier row's file and labels, and "
                  "were dropped (else a split could put the copies in both training and validation); the first: %s",
                  (long long)r->duplicates, spec->labels, r->first_duplicate);
    if (r->keypoints_outside)
        brisk_log(&t->log, BRISK_LOG_WARN, "data      %lld of the %lld labelled keypoints lie outside their images and "
                  "count as not labelled; the first: %s", (long long)r->keypoints_outside,
                  (long long)r->keypoints_labelled, r->first_outside);
}

brisk_status brisk_trainer_load_images(brisk_trainer *t, brisk_error *err) {
    const brisk_data_spec *d = &t->cfg.data;
    brisk_image_spec spec;
    brisk_images_spec_of(d, t->cfg.train.seed, &spec);
    brisk_image_report r, rv = {0};
    brisk_status st = brisk_image_dataset_load(&t->data, &spec, &r, err);
    if (st) return st;
    log_report(t, &t->data, &spec, &r);
    if (d->validation[0]) {
        spec.labels = d->validation;
        if ((st = brisk_image_dataset_load(&t->val_data, &spec, &rv, err)))
            return brisk_error_prefix(err, "data.validation");
        log_report(t, &t->val_data, &spec, &rv);
        char first[600];
        int64_t shared = brisk_image_dataset_shared(&t->data, &t->val_data, first, sizeof first);
        if (shared)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld of its images are also in %s (the first: %s); "
                                "validation would score images the model trained on: keep each image in one of the two",
                                d->validation, (long long)shared, d->images.labels, first);
    }
    /* Two loaders (training, validation), each worker holding one decoded image at a time
     * (its RGB pixels; libpng/libjpeg's own row buffers are small beside it). */
    int64_t largest = r.largest_pixels > rv.largest_pixels ? r.largest_pixels : rv.largest_pixels;
    t->decode_bytes = 2 * (int64_t)brisk_loader_workers(&t->cfg) * 3 * largest;
    return BRISK_OK;
}
