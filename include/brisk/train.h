/* train: the configuration of a run, the trainer loop, checkpoints, metrics and the
 * report. Independent of any particular model: it sees a model spec, the fields the
 * model asks for, and a graph. */
#ifndef BRISK_TRAIN_H
#define BRISK_TRAIN_H

#include <stdio.h>

#include "brisk/data.h"
#include "brisk/nn.h"
#include "brisk/json.h"
#include "brisk/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_PATH_MAX 1024
#define BRISK_MAX_MODELS 8

#define BRISK_MAX_FEATURES 256
#define BRISK_COLUMN_MAX 64
#define BRISK_FIELD_SOURCES_BYTES 8192 /* a field's CSV column names; ranges make any count */

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
    int normalize_target;  /* target.normalize: a regression target learnt as (y - mean) / std of the
                              training windows; predict maps outputs back */
} brisk_windows_config;

/* data.images: an image dataset (data.h, brisk_image_dataset_load). */
typedef struct brisk_images_config {
    int enabled;
    char labels[BRISK_PATH_MAX];        /* labels .csv (files beside it), or an image array .npy/.npz */
    int width, height;                  /* data.images.size: [width, height] or one number */
    int resize, gray_to_rgb, skip_bad, verify;
    int raw_orientation;                /* data.images.orientation "raw": EXIF orientation ignored */
    int pad;                            /* data.images.fit "pad": resized keeping the aspect ratio */
    float mean[3], std[3];
    int64_t max_pixels;
    int workers;                        /* decoding threads per loader; 0: half of brisk's threads */
    float flip, crop;                   /* data.images.augment */
    int flip_pairs[BRISK_MAX_KEYPOINTS][2];
    int nflip_pairs;
} brisk_images_config;

/* data.netcdf: a weather dataset over NetCDF files (data.h, brisk_weather_open). */
#define BRISK_NETCDF_MAX_FILES 16
#define BRISK_NETCDF_MAX_STATICS 16
typedef struct brisk_netcdf_config {
    int enabled;
    char files[BRISK_NETCDF_MAX_FILES][BRISK_PATH_MAX]; /* data.netcdf.files, else data.train alone */
    int nfiles;
    char variables[BRISK_WEATHER_MAX_VARS][BRISK_COLUMN_MAX];
    int nvariables;
    char statics[BRISK_NETCDF_MAX_STATICS][BRISK_COLUMN_MAX];
    int nstatics;
    int history, lead, time_features, mask_missing;
    /* data.netcdf.coordinates.{time, level, lat, lon}: "" recognises the common names */
    char coord_time[64], coord_level[64], coord_lat[64], coord_lon[64];
    char static_file[BRISK_PATH_MAX];   /* data.netcdf.static_file: "" the statics are in the first data file */
} brisk_netcdf_config;

/* data.normalize for a plain table's inputs and regression targets (src/train/normalize.c). */
typedef enum { BRISK_NORM_AUTO = 0, BRISK_NORM_ON, BRISK_NORM_OFF } brisk_norm_mode;

typedef struct brisk_data_spec {
    char train[BRISK_PATH_MAX];         /* .npz or .csv (windows: also .npy); "" when the API supplies the data */
    char validation[BRISK_PATH_MAX];    /* a separate validation file like train's; "": a split of train
                                           (validation_fraction) */
    char field_names[BRISK_MAX_FIELDS][32];            /* model field ("x") ... */
    /* ... from an npz member or CSV columns: field_n_sources[i] names, NUL-separated, each a
     * column or a range "FIRST:LAST" (brisk_data_field_sources lists them) */
    char field_sources[BRISK_MAX_FIELDS][BRISK_FIELD_SOURCES_BYTES];
    int field_n_sources[BRISK_MAX_FIELDS];
    int n_fields;
    float validation_fraction;
    int shuffle;
    /* data.shard_files: with N ranks each loads only rows [r*(R/N), (r+1)*(R/N)) of data.train
     * (R its rows; the last R mod N dropped) and shuffles within them; validation likewise.
     * shard_rank/shard_world are not keys: the caller sets them from its process group before
     * brisk_trainer_create (brisk train does; world 0 or 1: the whole file). */
    int shard_files;
    int shard_rank, shard_world;
    int64_t buffer_capacity;            /* API sample buffer (data.buffer): samples held */
    int buffer_reject;                  /* 1: a push into a full buffer fails; 0: drops the oldest */
    brisk_windows_config windows;
    brisk_images_config images;
    /* data.episodes: each training batch one episode (brisk_episodes, data.h): a category,
     * then episode_support + episode_query distinct samples of it; 0 and 0: plain batches */
    int episode_support, episode_query;
    brisk_netcdf_config netcdf;
    /* data.normalize: x and y (regression) standardised per channel with the training split's
     * statistics; auto: when a channel is far from unit scale. given: the key was set. */
    brisk_norm_mode normalize_inputs, normalize_targets;
    int normalize_given;
} brisk_data_spec;

/* The sources of data.fields entry j, in order: out must hold d->field_n_sources[j]. */
void brisk_data_field_sources(const brisk_data_spec *d, int j, const char **out);
/* The image dataset spec of data.images (pointers into d), with the run's seed. */
void brisk_images_spec_of(const brisk_data_spec *d, uint64_t seed, brisk_image_spec *out);

/* The weather spec of a config (pointers into d; paths[] holds BRISK_NETCDF_MAX_FILES,
 * names[] BRISK_WEATHER_MAX_VARS + BRISK_NETCDF_MAX_STATICS). */
void brisk_weather_spec_of(const brisk_data_spec *d, const char **paths, const char **names,
                           brisk_weather_spec *out);

/* The window spec of a config (pointers into cfg; names[] must hold nfeatures entries). */
void brisk_windows_spec_of(const brisk_data_spec *d, const char **names, brisk_window_spec *out);

typedef enum { BRISK_DEVICE_AUTO = 0, BRISK_DEVICE_CPU, BRISK_DEVICE_CUDA } brisk_device_kind;
typedef enum {
    BRISK_PREC_AUTO = 0, BRISK_PREC_FP32, BRISK_PREC_TF32, BRISK_PREC_BF16, BRISK_PREC_FP16
} brisk_precision;

typedef struct brisk_train_spec {
    int64_t batch_size;
    int epochs;
    int64_t max_steps;        /* -1 (unset): epochs decide; 0: no step, the initial weights are written */
    uint64_t seed;
    int accumulate;           /* micro-batches per optimizer step */
    int64_t checkpoint_every; /* optimizer steps; 0: only at the end (and best.safetensors) */
    int checkpoint_epochs;    /* also a resumable checkpoint at every N-th epoch end; 0: off */
    int log_every;            /* optimizer steps between progress lines */
    char out_dir[BRISK_PATH_MAX];
    /* reliability (src/train/rotation.c, numeric.c, memory.c) */
    int batch_auto;           /* train.batch_size "auto": the largest batch the memory fits */
    int keep_checkpoints;     /* numbered step-NNNNNNNN.safetensors kept beside last; 0: none */
    double checkpoint_minutes; /* also checkpoint when this long has passed since the last one;
                                  0: off. Bounds the work a killed job loses. */
    int64_t skip_nan_steps;   /* steps with a NaN/inf loss skipped (no update) before the run stops */
    double max_skipped_fraction; /* loss-scaler skips above this fraction of steps are reported */
    /* Not a config key (the caller sets it: brisk train --overwrite): a new run may replace
     * a previous run's checkpoints and metrics in out_dir, which is otherwise refused. */
    int overwrite;
} brisk_train_spec;

typedef struct brisk_speed_spec {
    brisk_device_kind device;
    brisk_precision precision;
    int prefetch;             /* batches prepared ahead by the loader thread; 0: none */
    int threads;              /* CPU threads; 0: all cores */
    /* GPU only (the CPU ignores them): */
    int cuda_graph;           /* capture the whole step as a CUDA graph after one eager step */
    int tf32;                 /* fp32 GEMMs on TF32 tensor cores */
    int autotune;             /* time GEMM candidates per shape, cache the choice */
    int fuse;                 /* cuBLASLt epilogues (bias, ReLU/GELU and their gradients) */
    int deterministic;        /* bit-identical runs: no split-K, no timing-based choices */
    int conv_layout;          /* brisk_conv_layout (cuda.h): 0 auto, 1 nchw, 2 nhwc */
    int cpu_gemm;             /* CPU: brisk_cpu_gemm_mode (graph.h): 0 auto (timed per shape), own, blas, fixed */
    char autotune_cache[BRISK_PATH_MAX]; /* "" = default place, "-" = none */
    int64_t memory_limit;     /* bytes the run may use; 0: what the machine has available */
} brisk_speed_spec;

/* dist.overlap: the CPU gradient all-reduce while backward runs (a communication thread)
 * or after it; auto picks what bench/DIST_NOTES.md measured faster */
typedef enum { BRISK_OVERLAP_AUTO = 0, BRISK_OVERLAP_ON, BRISK_OVERLAP_OFF } brisk_overlap_mode;

/* Data parallel (dist.h): how a multi-rank run exchanges gradients; ignored by one process. */
typedef struct brisk_dist_spec {
    double bucket_mb;         /* gradient all-reduce bucket, MiB */
    double timeout_s;         /* a collective not done after this long names the missing rank */
    int shard_optimizer;      /* ZeRO-1: each rank updates its shard of the parameters */
    brisk_overlap_mode overlap;
} brisk_dist_spec;

/* What only a library session reads (include/brisk/api.h); `brisk train` refuses the section. */
typedef enum { BRISK_SESSION_REFUSE, BRISK_SESSION_AUTO, BRISK_SESSION_OVERWRITE } brisk_session_resume;
typedef struct brisk_session_spec {
    int present;                 /* the config has a "session" section */
    int stop_signals;            /* install brisk's SIGTERM/SIGINT/SIGUSR1 handlers at creation */
    int64_t mpi_comm;            /* the host's communicator as a Fortran handle; -1: none */
    brisk_session_resume resume; /* a previous run in train.out_dir: refuse, continue, replace */
} brisk_session_spec;

/* What a run records beside metrics.jsonl (src/report/tboard.c). */
typedef struct brisk_log_spec {
    int tensorboard;          /* write a TensorBoard event file into train.out_dir */
    int64_t histogram_every;  /* parameter histograms every N optimizer steps; 0: none */
} brisk_log_spec;

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
    brisk_dist_spec dist;
    brisk_log_spec log;
    brisk_session_spec session; /* not in json: it is about the host process, not the run */
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

/* The config reader run over `json` with a recorder (brisk/json.h) told of every key it
 * asks for: its type, accepted values and default, straight from the parser. */
brisk_status brisk_config_walk(const char *json, const char *label, brisk_json_recorder fn, void *user,
                               brisk_error *err);
/* The config reference as Markdown (malloc'd): every key of every section and model type,
 * from brisk_config_walk, with one line of meaning each (src/config/config_doc.c). Keys the
 * parser reads but the table does not describe are marked **undocumented**. */
brisk_status brisk_config_reference(char **markdown, brisk_error *err);

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
    /* keypoints of an image dataset (its y and visible), over the labelled ones: the mean
     * distance between prediction and label in pixels of each image, and PCK@0.05, the share
     * within 5% (BRISK_PCK_FRACTION) of the image's longer side; NaN for other data */
    double px_error, pck;
    int64_t kp_n, kp_hits;
    double kp_px_sum;
    /* a model of several losses: each term's mean (unweighted), in the model's order */
    int n_loss_terms;
    double loss_terms[16];
} brisk_val_metrics;
#define BRISK_PCK_FRACTION 0.05

void brisk_metrics_reset(brisk_val_metrics *m, int classes);
/* logits [rows, C] against labels [rows] (argmax; ties go to the lower class). */
void brisk_metrics_add_classes(brisk_val_metrics *m, const float *logits, const int32_t *labels, int64_t rows,
                               int64_t C);
void brisk_metrics_add_values(brisk_val_metrics *m, const float *pred, const float *target, int64_t n);
/* One labelled keypoint: its distance from the prediction in pixels, on an image whose
 * longer side is `side` pixels. */
void brisk_metrics_add_keypoint(brisk_val_metrics *m, double dist_px, double side);
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
    double best_val_loss;     /* the run's best over all its resumed parts (what best.safetensors
                                 holds); NaN when there is no validation split or none ran */
    double best_val_accuracy; /* classification only, else NaN; likewise over all parts */
    double run_best_val_loss, run_best_val_accuracy; /* this run's (or API call's) own; NaN: none */
    int best_before_run;      /* best_val_loss was reached before this run (it was resumed) */
    double sample_rmse;       /* diffusion: RMSE of one sample per validation row (at most 1024) to its
                                 fine field, started from the coarse blocks as brisk sample does */
    double sample_baseline_rmse; /* the coarse block values' RMSE on the same rows (NaN: not sampled) */
    double wall_s, data_wait_s, compute_s;
    double copy_s;            /* handing batches to the device (a device backend; 0 on the CPU) */
    double checkpoint_s;      /* writing this run's checkpoints (part of the time outside the steps) */
    double validation_s;      /* this run's validation passes (likewise) */
    int64_t checkpoints;      /* checkpoints this run wrote */
    double gpu_util;          /* mean device utilisation (%) at the progress lines; -1: none */
    int64_t steps_run;        /* optimizer steps of this run (or API call) */
    double ms_per_step_median, ms_per_step_mean, ms_per_step_p95, ms_per_step_max; /* this run's steps */
    double host_ms_per_step_median; /* steps timed by the device: the host's median time per step, its
                                       waits for the device (the batch copy) included, so near
                                       ms_per_step_median whichever side paces; NaN otherwise */
    double samples_per_s;     /* mean throughput over this run's steps: samples / their summed time */
    double gflop_per_step;    /* model FLOPs of one optimizer step on one device (brisk_node_flops:
                                 the products; recomputed segments counted again) */
    double gflops;            /* gflop_per_step at the mean throughput: what the device sustained */
    int load_unstable;        /* the step times' spread says the machine's load varied (see the summary) */
    size_t arena_bytes, total_bytes;
    int64_t params;
    int stopped_by_signal;    /* the signal (SIGTERM, SIGINT, SIGUSR1) that stopped the run early,
                                 after a checkpoint was written; 0 when it ran to the end */
    int64_t nan_skipped;      /* steps skipped for a NaN/inf loss (train.skip_nan_steps), all runs */
    int64_t scaler_skipped;   /* updates the fp16 loss scaler skipped in this run */
    char checkpoint[BRISK_PATH_MAX + 64]; /* the newest checkpoint written, "" if none */
    brisk_val_metrics best;   /* the validation metrics of the epoch with the best loss (before this
                                 run: loss, accuracy, MAE and RMSE only) */
    int best_epoch;           /* epochs completed at the best loss; 0 when there was no validation */
    size_t state_bytes;       /* parameters, gradients and the two optimizer moments */
    double device_mem_used;   /* bytes in use on the device at the end; NaN without a device */
    char step_clock[48];      /* what timed the steps (ms_per_step_*, samples_per_s): "device events
                                 (cuda)", the device's own clock, or "host clock" */
    int64_t images_left_out;  /* data.images.on_error "skip": image files unusable at load, */
    int64_t images_replaced;  /* and those whose pixels failed to decode during the run */
} brisk_run_summary;

/* The summary as one JSON object (release with cJSON_Delete), the key set of metrics.jsonl's
 * run_end line and of brisk_train_run's result: steps, steps_run, epochs, wall_s, data_wait_s,
 * copy_s, compute_s, checkpoint_s, validation_s, checkpoints, samples_per_s, ms_per_step_median, ms_per_step_p95,
 * gflop_per_step, gflops, final_loss,
 * best_val_loss, best_val_accuracy, best_val_px_error, best_val_pck, best_epoch, run_best_val_loss,
 * run_best_val_accuracy, best_before_run, sample_rmse, sample_baseline_rmse, params, arena_bytes, state_bytes,
 * total_bytes, device_mem_used, nan_skipped, images_left_out, images_replaced, stopped_by_signal (0, a signal
 * number, or -1 for a program's
 * stop request), checkpoint, step_clock and, when out_dir is not NULL, out_dir. Numbers not measured
 * (NaN) are null. NULL when out of memory. */
struct cJSON *brisk_run_summary_json(const brisk_run_summary *s, const char *out_dir);

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
/* A trainer over data built in memory (fields named as the model's, e.g. "coarse" and "fine",
 * or "x" and "y"); cfg->data.train is not read. Takes *data (also on failure). data NULL or
 * empty: no data yet; give it with brisk_trainer_set_dataset before running. */
brisk_status brisk_trainer_create_with_dataset(const brisk_config *cfg, const brisk_logger *log, brisk_dataset *data,
                                               brisk_trainer **out, brisk_error *err);
/* Replaces the training data (takes *data, also on failure) and redraws the split from the seed.
 * The run's length for the learning-rate schedule stays what the first data gave. */
brisk_status brisk_trainer_set_dataset(brisk_trainer *t, brisk_dataset *data, brisk_error *err);
/* Trains `steps` more optimizer steps, past the configured run if need be (the learning-rate
 * schedule keeps the configured length and holds its last value after it). epoch_start 1:
 * begin at the start of the next epoch when the last run stopped mid-epoch. Online training
 * calls this after each brisk_trainer_set_dataset. */
brisk_status brisk_trainer_run_more(brisk_trainer *t, int64_t steps, int epoch_start, brisk_run_summary *sum,
                                    brisk_error *err);
/* Steps per epoch over the current data (0: no data yet), and optimizer steps done. */
int64_t brisk_trainer_batches_per_epoch(const brisk_trainer *t);
int64_t brisk_trainer_steps_done(const brisk_trainer *t);
/* 1 once a run of this trainer has begun in train.out_dir: its start is in metrics.jsonl. A run
 * refused (a previous run there, the directory in use) or failed before its first step has
 * not, and has changed nothing of the directory's record; brisk train writes report.html only
 * after a run that began. */
int brisk_trainer_run_began(const brisk_trainer *t);
/* Writes a checkpoint of the current state (atomically: temp file, fsync, rename). */
brisk_status brisk_trainer_save(brisk_trainer *t, const char *path, brisk_error *err);
/* Checks that a file is an intact brisk checkpoint: it parses, its format is known and its
 * checksum matches; *step (may be NULL) gets the step it holds. A truncated or bit-flipped
 * file is an error that says so. */
brisk_status brisk_checkpoint_check(const char *path, int64_t *step, brisk_error *err);
/* Resumes from the newest valid checkpoint in the run directory (train.out_dir): last,
 * best or a numbered step-N file, by the step recorded inside, skipping (with a warning)
 * any that is truncated or fails its checksum. *resumed is 0 when the directory holds no
 * checkpoint yet (a fresh start); checkpoints that all fail to load are an error. Takes
 * the run directory's lock first. */
brisk_status brisk_trainer_resume_auto(brisk_trainer *t, int *resumed, brisk_error *err);
/* For backends with a dynamic loss scaler (fp16): adds updates the scaler skipped since
 * the last call. The trainer reports a run whose skips exceed train.max_skipped_fraction
 * of its steps. */
void brisk_trainer_add_scaler_skips(brisk_trainer *t, int64_t skipped);
/* The per-step loss history of this process (for tests): count and pointer. */
const float *brisk_trainer_losses(const brisk_trainer *t, int64_t *n);
void brisk_trainer_free(brisk_trainer *t);

/* ---- preemption (src/train/signals.c)
 * After brisk_signals_install, SIGTERM, SIGINT and SIGUSR1 (SLURM's warning signal) make
 * a running trainer finish its current step, write its checkpoint and return BRISK_OK with
 * summary.stopped_by_signal set. The handler only stores the signal number in one
 * process-wide sig_atomic_t (the library's only mutable global); it is installed with
 * SA_RESETHAND, so a second signal of the same kind acts as if brisk had not caught it
 * (default: terminate; checkpoint files are written atomically either way). Installing
 * clears a pending signal. Library users that handle these signals themselves do not call
 * this and may call brisk_signal_request instead. */
brisk_status brisk_signals_install(brisk_error *err);
/* Gives the program back the handlers it had before the first brisk_signals_install (and
 * leaves a pending signal pending); brisk_signals_installed says whether brisk's are in. */
void brisk_signals_restore(void);
int brisk_signals_installed(void);
/* The signal that asked for a stop, 0 if none. */
int brisk_signal_pending(void);
/* Forgets a pending signal (brisk's handlers, when reset by it, stay reset). */
void brisk_signal_clear(void);
/* Asks running trainers to stop as if signal `sig` had arrived (async-signal-safe). */
void brisk_signal_request(int sig);
/* "SIGTERM", "SIGINT", "SIGUSR1", "a stop request" (BRISK_STOP_REQUESTED) or "a signal". */
const char *brisk_signal_name(int sig);

/* The first characters of the run summary's log message (the last one a run logs but for
 * its continuation lines): a quiet front end shows the summary from it on. */
#define BRISK_SUMMARY_HEAD "\nsummary"

/* Where a run stands, for a progress bar (brisk_trainer_control.status). */
typedef struct brisk_progress {
    int64_t step, total_steps;   /* optimizer steps done, and in all */
    int64_t epoch, epochs;       /* the epoch in progress (from 1) and the run's last */
    double loss;                 /* mean loss of the last progress window; NaN: none yet */
    double samples_per_s;        /* over this run so far */
    double elapsed_s, eta_s;     /* since this run's start; to its end at that speed (-1: unknown) */
} brisk_progress;

/* ---- a trainer driven by a program (the library API, src/api): many brisk_trainer_run_more
 * calls make one long run, interleaved with the program's own work. */
#define BRISK_STOP_REQUESTED (-1) /* stopped_by_signal of a run stopped by a program's request */
typedef struct brisk_trainer_control {
    /* Polled before every optimizer step and, on the CPU, before each of its micro-batches
     * and before its update: nonzero stops the run as a stop signal does (the step in
     * progress abandoned where it stands, on a device run to its end; a checkpoint of the
     * last completed step); the value becomes stopped_by_signal. */
    int (*stop_requested)(void *user);
    void *user;
    /* 1: checkpoint only when one is due (train.checkpoint_every, train.checkpoint_minutes) or
     * the run is stopped, not at the end of every run; no best.safetensors, since each run
     * validates on another split of changing data. */
    int checkpoint_when_due;
    /* Called at every progress line (train.log_every steps and the last step) with the steps
     * done, the run's total and the mean loss since the last call (NaN: only skipped steps);
     * NULL: none. Bindings drive their own progress bars with it. */
    void (*progress)(void *user, int64_t step, int64_t total_steps, double loss);
    /* Called after steps, at most every 0.1 s and at the run's last step, with where the run
     * stands (brisk_progress); NULL: none. A program that sets it shows progress itself (a
     * live bar), so the trainer's progress lines go to the logger at BRISK_LOG_DEBUG. */
    void (*status)(void *user, const struct brisk_progress *p);
} brisk_trainer_control;
void brisk_trainer_set_control(brisk_trainer *t, const brisk_trainer_control *c);
/* Data parallel: the trainer runs as rank brisk_dist_rank(d) of brisk_dist_world(d) (dist.h;
 * NULL or world size 1: alone, no collective). Call before resuming and training; d must
 * outlive the trainer. Gradients are averaged over the ranks; rank 0 alone writes
 * train.out_dir. own_data 0: every rank holds the same dataset and takes its slice of each
 * global batch (train.batch_size per rank); 1: each rank trains on its own data (a
 * simulation's ranks, each pushing its own samples), train.checkpoint_epochs must be 0 (the
 * ranks' epochs differ) and every call must ask every rank for the same number of steps. */
struct brisk_dist;
brisk_status brisk_trainer_set_dist(brisk_trainer *t, struct brisk_dist *d, int own_data, brisk_error *err);
/* The gradient all-reduce's plan at `world` ranks, computed without a process group or any
 * collective (brisk train --dist-plan; the run summary states the same): the gradient arena,
 * its buckets at dist.bucket_mb (all-reduced one by one each step; their smallest and largest),
 * and the bytes a ring all-reduce sends (and receives) per rank a step: 2 (N-1)/N of the arena. */
typedef struct brisk_dist_plan_info {
    int world;
    int64_t grad_bytes, bucket_bytes, n_buckets, min_bucket_bytes, max_bucket_bytes, collectives_per_step;
    double ring_bytes_per_rank;
} brisk_dist_plan_info;
brisk_status brisk_trainer_dist_plan(const brisk_trainer *t, int world, brisk_dist_plan_info *out, brisk_error *err);
/* What a ring all-reduce of `bytes` sends per rank at `world` ranks (0 alone). */
double brisk_dist_ring_bytes(double bytes, int world);
/* Creates train.out_dir and takes its lock now instead of at the first run (a second trainer
 * on the directory is refused at once, naming the holder). A previous run there is refused,
 * as `brisk train` without --resume refuses it, with `choices` (how the driving program
 * continues or replaces it) in the message, or with overwrite removed; to continue one,
 * call brisk_trainer_resume_auto instead. */
brisk_status brisk_trainer_lock_run_dir(brisk_trainer *t, int overwrite, const char *choices, brisk_error *err);
/* Writes the run directory's checkpoint of the current step (last and step-N), unless this
 * process wrote it already; for a program that stops between runs. */
brisk_status brisk_trainer_checkpoint(brisk_trainer *t, brisk_error *err);
/* The newest checkpoint this trainer wrote or resumed from ("" if none). */
const char *brisk_trainer_last_checkpoint(const brisk_trainer *t);

/* ---- exit statuses of the brisk command (README, brisk train --help) */
#define BRISK_EXIT_OK 0
#define BRISK_EXIT_ERROR 1      /* any error: bad input, I/O, NaN loss, memory */
#define BRISK_EXIT_USAGE 2      /* bad command line */
#define BRISK_EXIT_PREEMPTED 75 /* stopped by a signal after writing a checkpoint (EX_TEMPFAIL):
                                   run the same command with --resume auto to continue */
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
/* The same with control (NULL: none) set on every model's trainer: its status callback draws a
 * live bar for each model's run in turn. */
brisk_status brisk_pipeline_run_control(const brisk_config *cfg, const brisk_logger *log,
                                        const brisk_trainer_control *control, brisk_pipeline_result *results,
                                        brisk_error *err);
/* The table: model, parameters, best validation loss and accuracy (or MAE/RMSE), epochs,
 * wall time, samples/s, planned memory. */
void brisk_pipeline_report(const brisk_pipeline_result *results, int n, const brisk_logger *log);

/* ---- HTML reports: one self-contained page (inline SVG, no script, no network) each
 * (report_run.c, report_bench.c, report_pipeline.c) */
/* A run directory's report from its metrics.jsonl: losses, learning rate, throughput, the
 * time split, memory and the optimizations that were on. out_path NULL: RUN_DIR/report.html.
 * The path written goes to written (when not NULL). A missing file, or one without a record,
 * is an error naming it and what to do; damaged lines are left out, with a warning through
 * log (may be NULL) and a note in the report. */
brisk_status brisk_report_run(const char *run_dir, const char *out_path, char *written, size_t written_size,
                              const brisk_logger *log, brisk_error *err);
/* One row of `brisk bench`'s ablation table; ms_per_step NaN: the row failed (why). */
typedef struct brisk_bench_row {
    const char *name;
    double ms_per_step, spread, p95_ms, samples_per_s, gpu_util, speedup;
    const char *why;
} brisk_bench_row;
/* The ablation table as a page: ms/step per configuration as bars, and the table. */
brisk_status brisk_report_bench(const char *out_path, const char *title, const brisk_bench_row *rows, int n,
                                brisk_error *err);
/* A pipeline's comparison page in <out_dir>/report.html: validation loss, throughput and
 * memory per model as bars, each model's own run report linked. */
brisk_status brisk_report_pipeline(const char *out_dir, const brisk_pipeline_result *results, int n,
                                   brisk_error *err);

/* ---- inference from a checkpoint (device-agnostic) */
brisk_status brisk_predict_file(const char *checkpoint, const char *input_npy, const char *output_npy,
                                const brisk_logger *log, brisk_error *err);
typedef struct brisk_predict_options {
    int strict_images;        /* input a folder of images: 1 stops at the first file that cannot be
                                 read; 0 (brisk_predict_file) skips each with a warning naming it */
} brisk_predict_options;
brisk_status brisk_predict_file_with(const char *checkpoint, const char *input_npy, const char *output_npy,
                                     const brisk_predict_options *opt, const brisk_logger *log, brisk_error *err);
/* Writes the checkpoint's inference graph as an ONNX model (opset 17; src/export/export_onnx.c):
 * inputs named as the model's fields with the batch dimension "N", one output "output" equal
 * to what brisk predict writes (probabilities for a classifier, the target's units for a
 * regression; a diffusion model's denoiser output: the noise, or x0 with noise.prediction
 * x0). fp16: weights stored as fp16 (half the file), cast to fp32 where read; the computation
 * stays fp32. "-" writes to standard output. */
brisk_status brisk_export_onnx(const char *checkpoint, const char *onnx_path, int fp16, const brisk_logger *log,
                               brisk_error *err);

/* An autoregressive forecast of a meshgnn trained on data.netcdf (rollout.c), from one or
 * many start times of `data`: time indices start, start + start_every, ... up to
 * start_last (start_every 0: `start` alone; start or start_last -1: the held-out range's
 * first start, the first time the checkpoint's chronological split held out, and its last
 * that leaves room for the steps). `steps` predictions of the change over the lead, each
 * fed back as the next input. Scores per channel and lead against the file's fields
 * (rollout_score.c: RMSE, latitude-weighted RMSE, bias, ACC against the training years'
 * climatology, and persistence's RMSEs; over several starts their mean and spread) go to
 * tables on standard output (standard error when JSON lines take standard output) and to
 * `jsonl` as JSON lines (NULL: none, "-": standard output). Missing truth values are left
 * out of every score and counted; with data.netcdf.missing "refuse", a start whose inputs
 * or truth hold one is refused (an error for one start, skipped and named for several).
 * Data on another grid than the checkpoint's is refused. The forecast of one start goes to
 * `output` as NetCDF-4 with the input's coordinates and attributes, CF's forecast
 * coordinates and `command` in its history (NULL: none). */
typedef struct brisk_rollout_spec {
    const char *checkpoint, *data;
    int64_t steps, start, start_last, start_every;
    const char *output, *jsonl;
    const char *command; /* the command line for the forecast's history; NULL: "brisk rollout" */
} brisk_rollout_spec;
brisk_status brisk_rollout(const brisk_rollout_spec *r, const brisk_logger *log, brisk_error *err);


/* ---- brisk profile: where a step's time goes, node by node (src/train/profile.c). The
 * trainer is built as brisk train builds it (no run directory, no CUDA graph), runs `warmup`
 * steps, then 2 * steps steps eagerly, alternating a plain step (its start and end marked)
 * and a timed one (every node of the forward and backward marked, and the work before the
 * first node and after the last: the batch coming in, the loss and the optimizer update).
 * On a device the marks are events on the compute stream read after a sync at each step's
 * end; on the CPU the host's clock. */
typedef struct brisk_profile_options {
    int steps;   /* timed steps (as many plain ones run besides), >= 1 */
    int warmup;  /* steps run first and not timed (the first GPU step autotunes), >= 0 */
    const char *model; /* a pipeline config ("models"): the model to profile, by name; else NULL */
} brisk_profile_options;
typedef struct brisk_profile_op {
    char op[48];           /* the op's name, or "(batch in)" / "(loss + update)" for the gaps */
    double calls_per_step, ms_per_step; /* means over the timed steps */
    double gflop_per_step; /* its products (brisk_node_flops); 0 for memory-bound ops */
} brisk_profile_op;
typedef struct brisk_profile_node {
    int id, calls_per_step;
    char op[48], shape[96], dtype[16];
    char note[192];        /* the backend's note on how it ran the node ("" if none) */
    double ms_per_step;
    double gflop_per_step; /* its products (brisk_node_flops) */
} brisk_profile_node;
typedef struct brisk_profile_result {
    char device[32];       /* "cpu" or "cuda" */
    char precision[16];    /* speed.precision */
    char clock[48];        /* what timed it: "device events (cuda)" or "host clock" */
    int steps, warmup, accumulate;
    int steps_kept;        /* timed steps within 1.5x of their median, which the tables average
                              (a longer one was descheduled: on a loaded machine it would
                              dominate the means) */
    int n_ops, n_nodes;    /* ops: by ms_per_step, descending; nodes: the same, every node run */
    brisk_profile_op *ops;
    brisk_profile_node *nodes;
    double marked_ms, plain_ms;  /* step time of the timed and of the plain steps: the mean of
                                    those within 1.5x of their median (as the tables) */
    int nodes_per_step;    /* node runs in a step (schedule length x accumulate) */
    int kernel_nodes;      /* kernels a step launches (the nodes of its CUDA graph); -1: unknown */
    double floor_ms;       /* replaying an empty CUDA graph of kernel_nodes kernels; NaN: none */
    double replay_ms;      /* the captured step's own CUDA graph replayed back to back, nothing
                              issued between: the device's time for a step's work; NaN: none */
} brisk_profile_result;
brisk_status brisk_profile_run(const brisk_config *cfg, const brisk_logger *log, const brisk_profile_options *o,
                               brisk_profile_result *out, brisk_error *err);
void brisk_profile_result_free(brisk_profile_result *r);
/* The result as text (per op type, the top `top` nodes, the step times) or one JSON object
 * (release with cJSON_Delete; NULL when out of memory). */
void brisk_profile_print(FILE *f, const char *config, const brisk_profile_result *r, int top);
struct cJSON *brisk_profile_json(const char *config, const brisk_profile_result *r, int top);

#ifdef __cplusplus
}
#endif
#endif
