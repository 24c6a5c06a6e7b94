/* The trainer's state, shared by the files of src/train/. */
#ifndef BRISK_TRAINER_INTERNAL_H
#define BRISK_TRAINER_INTERNAL_H

#include <stdio.h>

#include "brisk/data.h"
#include "brisk/train.h"

struct brisk_trainer {
    brisk_config cfg;
    brisk_logger log;
    brisk_dataset data;
    brisk_split split;
    brisk_model_io io;
    int field_of_input[BRISK_MAX_FIELDS]; /* dataset field index feeding model field i */
    brisk_graph *g;
    brisk_plan plan;
    brisk_backend *be;
    brisk_exec *ex;
    brisk_optimizer opt;
    /* position: optimizer steps done, and where the next micro-batch starts */
    int64_t step;
    int64_t epoch, position;
    int64_t batches_per_epoch, total_steps;
    double best_val;
    /* history of this process */
    float *losses;
    int64_t n_losses, cap_losses;
    FILE *metrics;
    float *host_params; /* staging for checkpoints */
    /* windowed data: the per-feature normalisation fitted on the training rows, kept in
     * checkpoints so that predict applies it again (norm_n 0: none) */
    float *norm_mean, *norm_std;
    int norm_n;
};

/* checkpoint.c */
brisk_status brisk_checkpoint_save(brisk_trainer *t, const char *path, brisk_error *err);
brisk_status brisk_checkpoint_load(brisk_trainer *t, const char *path, brisk_error *err);
/* Loads only the parameters of a checkpoint into an executor built from its config. */
brisk_status brisk_checkpoint_load_params(const char *path, brisk_exec *ex, brisk_error *err);
/* The config a checkpoint carries (for predict and info); caller frees with brisk_config_free. */
brisk_status brisk_checkpoint_config(const char *path, brisk_config *cfg, brisk_error *err);
/* The normalisation a checkpoint of windowed data carries (metadata "normalization",
 * {"mean": [...], "std": [...]}); *n = 0 and NULL arrays when it has none. */
brisk_status brisk_checkpoint_normalization(const char *path, float **mean, float **std, int *n, brisk_error *err);
/* predict_input.c: the samples `brisk predict` runs, [N, ...sample], from its input file. */
brisk_status brisk_predict_input(const brisk_config *cfg, const char *checkpoint, const char *input,
                                 const brisk_shape *sample, brisk_tensor *x, brisk_error *err);
/* That metadata's text (malloc'd), or NULL when out of memory. */
char *brisk_normalization_json(const float *mean, const float *std, int n);

#endif
