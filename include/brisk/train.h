/* train: the configuration of a run, the trainer loop, checkpoints, metrics and the
 * report. Independent of any particular model: it sees a model spec, the fields the
 * model asks for, and a graph. */
#ifndef BRISK_TRAIN_H
#define BRISK_TRAIN_H

#include "brisk/data.h"
#include "brisk/nn.h"
#include "brisk/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_PATH_MAX 1024
#define BRISK_MAX_MODELS 8

#define BRISK_MAX_FEATURES 256
#define BRISK_COLUMN_MAX 64

/* data.windows: samples are windows over the columns of a series (data.h). */
typedef struct brisk_windows_config {
    int enabled;
    char features[BRISK_MAX_FEATURES][BRISK_COLUMN_MAX];
    int nfeatures;
    char target[BRISK_COLUMN_MAX];
    brisk_target_kind kind;
    brisk_change_kind change;
    double thresholds[BRISK_MAX_THRESHOLDS];
    int nthresholds;
    int64_t length, stride, horizon;
    int normalize;
} brisk_windows_config;

typedef struct brisk_data_spec {
    char train[BRISK_PATH_MAX];         /* .npz or .csv (windows: also .npy) */
    char field_names[BRISK_MAX_FIELDS][32];            /* model field ("x") ... */
    char field_sources[BRISK_MAX_FIELDS][8][64];       /* ... from npz members or CSV columns */
    int field_n_sources[BRISK_MAX_FIELDS];
    int n_fields;
    float validation_fraction;
    int shuffle;
    brisk_windows_config windows;
} brisk_data_spec;

/* The window spec of a config (pointers into cfg; names[] must hold nfeatures entries). */
void brisk_windows_spec_of(const brisk_data_spec *d, const char **names, brisk_window_spec *out);

typedef enum { BRISK_DEVICE_AUTO = 0, BRISK_DEVICE_CPU, BRISK_DEVICE_CUDA } brisk_device_kind;
typedef enum {
    BRISK_PREC_AUTO = 0, BRISK_PREC_FP32, BRISK_PREC_TF32, BRISK_PREC_BF16, BRISK_PREC_FP16
} brisk_precision;

typedef struct brisk_train_spec {
    int64_t batch_size;
    int epochs;
    int64_t max_steps;        /* 0: epochs decide */
    uint64_t seed;
    int accumulate;           /* micro-batches per optimizer step */
    int64_t checkpoint_every; /* optimizer steps; 0: only at epoch ends and the end */
    int log_every;            /* optimizer steps between progress lines */
    char out_dir[BRISK_PATH_MAX];
} brisk_train_spec;

typedef struct brisk_speed_spec {
    brisk_device_kind device;
    brisk_precision precision;
    int prefetch;             /* batches prepared ahead by the loader thread; 0: none */
    int threads;              /* CPU threads; 0: all cores */
} brisk_speed_spec;

typedef struct brisk_config {
    char path[BRISK_PATH_MAX]; /* where it came from, for messages */
    char name[128];            /* run name: the config file's stem */
    brisk_model_spec model;    /* with "models": the first of them */
    /* "models": [{"name": .., "type": .., ...}, ...] instead of "model": a pipeline that trains
     * each in turn on the same data (brisk_pipeline_run); 0 for a single model */
    int n_models;
    char model_names[BRISK_MAX_MODELS][32];
    brisk_model_spec models[BRISK_MAX_MODELS];
    brisk_data_spec data;
    brisk_optim_spec optim;
    brisk_train_spec train;
    brisk_speed_spec speed;
    char *json;                /* the effective config (after overrides), compact; owned */
} brisk_config;

/* Loads a config file (JSON with comments), applies "a.b=value" overrides in order, and
 * validates every section; unknown keys are errors naming them. */
brisk_status brisk_config_load(const char *path, const char *const *overrides, int n_overrides,
                               brisk_config *cfg, brisk_error *err);
/* The same from a JSON string (checkpoints carry their config); label names it in errors. */
brisk_status brisk_config_parse(const char *json, const char *label, const char *const *overrides,
                                int n_overrides, brisk_config *cfg, brisk_error *err);
void brisk_config_free(brisk_config *cfg);

/* ---- validation metrics (metrics.c) */
#define BRISK_MAX_CLASSES 16

typedef struct brisk_val_metrics {
    double loss;               /* mean validation loss */
    int classes;               /* classification: the model's outputs; 0 for regression */
    double accuracy;           /* classification, else NaN */
    /* per class (classes <= BRISK_MAX_CLASSES): rows = true class, columns = predicted */
    int64_t confusion[BRISK_MAX_CLASSES][BRISK_MAX_CLASSES];
    double precision[BRISK_MAX_CLASSES], recall[BRISK_MAX_CLASSES]; /* NaN where undefined (0 / 0) */
    double mae, rmse;          /* regression, over every output value, else NaN */
    int64_t n;                 /* samples (classification) or values (regression) seen */
    double abs_sum, sq_sum;
} brisk_val_metrics;

void brisk_metrics_reset(brisk_val_metrics *m, int classes);
/* logits [rows, C] against labels [rows] (argmax; ties go to the lower class). */
void brisk_metrics_add_classes(brisk_val_metrics *m, const float *logits, const int32_t *labels, int64_t rows,
                               int64_t C);
void brisk_metrics_add_values(brisk_val_metrics *m, const float *pred, const float *target, int64_t n);
/* Accuracy, precision, recall, MAE and RMSE from what was added; loss as given. */
void brisk_metrics_finish(brisk_val_metrics *m, double loss);
/* The metrics as JSON members (", \"val_accuracy\": ..., \"val_confusion\": [[..]]") into buf. */
void brisk_metrics_json(const brisk_val_metrics *m, char *buf, size_t n);
/* The confusion matrix and per-class precision/recall as lines for a report. */
void brisk_metrics_log(const brisk_val_metrics *m, const brisk_logger *log);

/* ---- trainer */
typedef struct brisk_run_summary {
    int64_t steps;            /* optimizer steps done in total (including before a resume) */
    int epochs_done;
    double final_loss;        /* mean training loss over the last epoch (or logging window) */
    double best_val_loss;     /* NaN when there is no validation split */
    double best_val_accuracy; /* classification only, else NaN */
    double wall_s, data_wait_s, compute_s;
    double ms_per_step_median;
    double samples_per_s;
    size_t arena_bytes, total_bytes;
    int64_t params;
    brisk_val_metrics best;   /* the validation metrics of the epoch with the best loss */
    int best_epoch;           /* 0 when there was no validation */
} brisk_run_summary;

typedef struct brisk_trainer brisk_trainer;

brisk_status brisk_trainer_create(const brisk_config *cfg, const brisk_logger *log,
                                  brisk_trainer **out, brisk_error *err);
/* Loads parameters, optimizer moments and position from a checkpoint written by a run of the
 * same model; refuses one from another model, naming the first tensor that differs. */
brisk_status brisk_trainer_resume(brisk_trainer *t, const char *checkpoint, brisk_error *err);
brisk_status brisk_trainer_run(brisk_trainer *t, brisk_run_summary *summary, brisk_error *err);
/* The same, stopping after at most max_new_steps more optimizer steps (0: no limit), with
 * the learning-rate schedule of the whole run; writes last.safetensors where it stops. */
brisk_status brisk_trainer_run_steps(brisk_trainer *t, int64_t max_new_steps, brisk_run_summary *summary,
                                     brisk_error *err);
/* Writes a checkpoint of the current state (atomically: temp file, fsync, rename). */
brisk_status brisk_trainer_save(brisk_trainer *t, const char *path, brisk_error *err);
/* The per-step loss history of this process (for tests): count and pointer. */
const float *brisk_trainer_losses(const brisk_trainer *t, int64_t *n);
void brisk_trainer_free(brisk_trainer *t);

/* ---- pipelines: several models over the same data, one after another (pipeline.c) */
typedef struct brisk_pipeline_result {
    char name[32];
    brisk_model_type type;
    brisk_run_summary summary;
} brisk_pipeline_result;

/* The single-model config of pipeline entry i: its model, train.out_dir = <out_dir>/<name>. */
brisk_status brisk_pipeline_config(const brisk_config *cfg, int i, brisk_config *out, brisk_error *err);
/* Trains every model of cfg->models in turn (each trainer freed, with its memory, before
 * the next is built), filling results[0 .. cfg->n_models), then logs the comparison table. */
brisk_status brisk_pipeline_run(const brisk_config *cfg, const brisk_logger *log, brisk_pipeline_result *results,
                                brisk_error *err);
/* The table: model, parameters, best validation loss and accuracy (or MAE/RMSE), epochs,
 * wall time, samples/s, planned memory. */
void brisk_pipeline_report(const brisk_pipeline_result *results, int n, const brisk_logger *log);

/* ---- inference from a checkpoint (device-agnostic) */
brisk_status brisk_predict_file(const char *checkpoint, const char *input_npy, const char *output_npy,
                                const brisk_logger *log, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
