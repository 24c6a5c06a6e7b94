/* What `brisk predict`, `brisk rollout` and the ONNX export share: the model a checkpoint
 * was trained as, and predict's inputs and outputs. */
#ifndef BRISK_INFER_PREDICT_INTERNAL_H
#define BRISK_INFER_PREDICT_INTERNAL_H

#include "brisk/data.h"
#include "brisk/train.h"

/* rollout.c: a meshgnn trained on data.netcdf has the graph of its data's grid: cfg->model
 * fitted to the files the checkpoint trained on (paths as in its config); no-op for others. */
brisk_status brisk_meshgnn_fit_checkpoint(const char *ckpt, brisk_config *cfg, brisk_error *err);
/* rollout.c: a meshgnn's output on data.netcdf (the normalised change over the lead) in the fields' units
 * is y * std[c] + mean[c] per channel c: the change's normalisation in the checkpoint's
 * (channels, statics, changes), copied into mean and std (channels floats each). */
brisk_status brisk_meshgnn_change_units(const char *ckpt, int64_t channels, float *mean, float *std, brisk_error *err);
/* predict_input.c: the samples `brisk predict` runs, [N, ...sample], from its input file. */
brisk_status brisk_predict_input(const brisk_config *cfg, const char *checkpoint, const char *input,
                                 const brisk_shape *sample, brisk_tensor *x, brisk_error *err);
/* predict_images.c: the images of a folder, decoded a batch at a time as the checkpoint's
 * data.images made validation samples. open reads the headers (ds: the files that passed;
 * each one that did not is logged as skipped unless strict, which makes it an error);
 * batch writes images [first, first + n) that decode into buf, *got of them, and logs each
 * that does not; kept lists the ones written, in order. output writes y [nkept, outputs] to
 * out: a resnet's keypoints in pixels of each image (.csv with the file names, or .npy
 * [N, K, 2]). */
typedef struct brisk_predict_images {
    brisk_dataset ds;
    int64_t per;              /* floats of one sample */
    int64_t *kept, nkept, skipped;
    int strict;
    const brisk_logger *log;
} brisk_predict_images;
brisk_status brisk_predict_images_open(const brisk_config *cfg, const char *checkpoint, const char *dir,
                                       const brisk_shape *sample, int strict, const brisk_logger *log,
                                       brisk_predict_images *pi, brisk_error *err);
/* The batch to decode at once: at most `most`, fewer for large images (32 MiB of input). */
int64_t brisk_predict_images_batch_size(const brisk_predict_images *pi, int64_t most);
brisk_status brisk_predict_images_batch(brisk_predict_images *pi, int64_t first, int64_t n, float *buf, int64_t *got,
                                        brisk_error *err);
brisk_status brisk_predict_images_output(const brisk_config *cfg, const brisk_predict_images *pi, const brisk_tensor *y,
                                         const char *out, int to_csv, brisk_error *err);
void brisk_predict_images_close(brisk_predict_images *pi);
/* predict.c: each row of x [rows, c] replaced by its softmax. */
void brisk_softmax_rows(float *x, int64_t rows, int64_t c);

#endif
