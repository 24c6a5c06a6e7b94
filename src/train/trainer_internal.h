/* The trainer's state, shared by the files of src/train/: the training loop (loop.c), its setup
 * (setup*.c, device.c, memory.c), one step (step.c), validation (eval.c), data parallel
 * (dist*.c), the run directory as the trainer writes it (checkpoint.c, rotation.c, rundir.c)
 * and what a run measures and reports of itself (optimizations.c, profile.c, numeric.c). */
#ifndef BRISK_TRAINER_INTERNAL_H
#define BRISK_TRAINER_INTERNAL_H

#include <stdio.h>

#include "brisk/data.h"
#include "brisk/dist.h"
#include "brisk/safetensors.h"
#include "brisk/train.h"
#include "config/config_internal.h"
#include "report/metrics_file.h"
#include "report/tboard.h"
#include "run/checkpoint_file.h"

#define BRISK_OVERLAP_TRIAL 16 /* timed steps per mode (dist.overlap auto, CPU) */


struct brisk_trainer {
    brisk_config cfg;
    brisk_logger log;
    brisk_dataset data;
    brisk_split split;
    brisk_episodes episodes;   /* data.episodes over the training split (k = 0: off) */
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
    int64_t decode_bytes;    /* image datasets: what the loaders' decoding threads allocate at most */
    int64_t schedule_steps; /* the learning-rate schedule's length when runs go past the configured
                               one (brisk_trainer_run_more); 0: total_steps */
    double best_val;           /* the best validation loss of the run, over all its resumed parts */
    brisk_best_at best_at;     /* where it was reached */
    /* history of this process */
    float *losses;
    int64_t n_losses, cap_losses;
    float *terms;            /* a model of several losses: io.n_loss_terms per step, with losses */
    int64_t cap_terms;
    brisk_metrics_file *metrics; /* metrics.jsonl (rank 0); NULL: none */
    brisk_tboard *tboard;      /* the TensorBoard event file (log.tensorboard; rank 0); NULL: none */
    char active_report[3072];  /* the start-of-run report of what is on and why anything is off */
    float *host_params; /* staging for checkpoints */
    /* step.c: how each step runs (eagerly, or replayed from a captured program) */
    int graph;               /* capture the step once warmed up, then replay it */
    int programs_ready;
    int prog_step, prog_update; /* accumulate 1: prog_step is the whole step; else the micro-step */
    int64_t eager_steps;     /* steps run eagerly by this process (the first is the warm-up) */
    int64_t loss_first;      /* step whose loss is the first not read yet (device loss log) */
    int loss_pending;        /* steps whose losses wait in the device loss log */
    int dev_clock;           /* the backend times steps itself (step_mark, step_times) */
    struct brisk_profiler *prof; /* brisk profile times this run's steps and nodes (profile.c) */
    double *dev_ms;          /* this run's device step times (ms), read with the losses */
    int64_t n_dev_ms, cap_dev_ms;
    double micro_loss;       /* CPU path: losses of this step's micro-batches, summed */
    double micro_terms[BRISK_LOSS_LOG_WIDTH - 1]; /* ... and their loss terms */
    brisk_step_state cur;    /* the micro-batch being run */
    double copy_s;           /* time spent handing batches to the device */
    char graph_off[96];      /* why there is no CUDA graph, for the report */
    char device_note[640];   /* why a GPU run fell back to the CPU at setup ("": it did not) */
    double util_sum;         /* device utilisation samples at progress lines */
    int util_n;
    /* reliability: the run directory's lock (runlock.c), checkpoints written (rotation.c),
     * numeric faults (numeric.c) */
    int lock_fd;               /* -1: not locked */
    int run_dir_ready;         /* created, locked and cleaned of stale temporary files */
    int64_t last_saved_step;   /* step of the newest checkpoint this process wrote, -1: none */
    char last_ckpt[BRISK_PATH_MAX + 64]; /* the newest intact checkpoint known (written or resumed from) */
    int64_t last_ckpt_step;
    double last_save_time;     /* brisk_now() of the last checkpoint, or of the run's start */
    double checkpoint_s, validation_s; /* seconds spent writing checkpoints and validating, ever */
    int64_t checkpoints_written;
    int64_t nan_skipped;       /* steps skipped for a non-finite loss, over all resumed runs */
    int64_t scaler_skipped;    /* loss-scaler skips reported by the backend in this run */
    int scaler_warned;
    /* windowed data: the per-feature normalisation fitted on the training rows, kept in
     * checkpoints so that predict applies it again (norm_n 0: none); data.netcdf: the
     * channels', the statics' and the change's (brisk_weather.mean), for rollout */
    float *norm_mean, *norm_std;
    int norm_n;
    brisk_weather *weather; /* data.netcdf: the files the dataset reads from (weather.c) */
    /* a regression target learnt as (y - mean) / std (data.windows.target.normalize: one pair
     * for the window's target; data.normalize: one per channel of y), fitted on the training
     * split (normalize.c); kept in checkpoints so that predict maps back (tnorm_n 0: none) */
    float *tnorm_mean, *tnorm_std;
    int tnorm_n;
    /* eval.c: validation's last, smaller batch, run by a view of ex planned for its rows */
    brisk_graph *tail_g;
    brisk_plan tail_plan;
    brisk_exec *tail_ex;
    brisk_model_io tail_io;
    int64_t tail_rows;
    brisk_dataset val_data;    /* data.validation: the validation file; count 0: a split of data */
    int64_t skips_noted[2];    /* data_skips.c: image files left out of data and val_data, logged so far */
    int loader_failed;         /* a loader (training or validation) failed mid-run: a checkpoint before the error */
    /* progress in samples (setup.c): training samples the optimizer steps consumed, over all
     * resumed runs, so that a run resumed at another batch size keeps its epochs and schedule */
    int64_t samples;
    int64_t sched_shift;       /* schedule position minus step (0 unless the batch size changed) */
    int length_set;            /* total_steps fixed: by the first data, then by each resume */
    /* rotation.c: the run directory's previous run is continued (a resume was asked for);
     * else it must be empty of one or train.overwrite set */
    int run_claimed;
    int from_files;            /* made from a config's data files (brisk train), not a program's data */
    char run_id[20];           /* this run's identity: drawn at its start, a resumed checkpoint's after
                                  (rundir.c tells a directory's own run from another's by it) */
    int no_files_told;         /* train.out_dir "": said once */
    const char *run_choices;   /* how the driving program continues or replaces a previous run (NULL: the CLI's flags) */
    brisk_trainer_control control; /* set by a program driving the trainer (control.c) */
    /* data parallel (dist.c): the process group (NULL: one process), gradient buckets, and
     * what the ranks agreed on at the last step */
    brisk_dist *dist;
    int world, rank;           /* 1 and 0 without a group */
    int own_data;              /* each rank trains on samples of its own (a session's pushes) */
    int data_shards;           /* ranks sharing one dataset's global batch: world, or 1 (own data) */
    int data_sharded;          /* data.shard_files ran: data holds this rank's rows only */
    int64_t shard_lo, shard_file_rows; /* data.train's first row here and its row count */
    int64_t shard_bytes;       /* bytes this rank's training rows hold */
    FILE *dump;                /* BRISK_DEBUG_SAMPLES (sample_dump.c): this rank's file, */
    int64_t *dump_order, dump_epoch; /* and the order of the epoch last dumped */
    int shard;                 /* ZeRO-1: this rank updates floats [shard_off, shard_off + shard_n) */
    int64_t shard_off, shard_n;
    int64_t *shard_bounds;     /* ZeRO-1 on a device: every rank's shard, world + 1 offsets */
    int shard_norm;            /* ZeRO-1 on a device: each step sums the shards' gradient norm */
    brisk_dist_bucket *buckets;
    int64_t n_buckets;
    brisk_dist_overlap *overlap; /* dist.overlap on the CPU: the communication thread */
    int grads_averaged;        /* this step's gradients were averaged during backward */
    double overlap_comm_s, overlap_hidden_s; /* summed over overlap_steps: first bucket started
                                   to last done, and the part of it before backward ended */
    int64_t overlap_steps;
    /* dist.overlap auto on the CPU: the first steps after a warm-up alternate overlapped and
     * after-backward (the same bits), and the ranks keep the faster by their mean median */
    int overlap_now;           /* this step's buckets go to the communication thread */
    int trial, trial_step, trial_n[2]; /* trial: 1 while timing; trial_step from -3 (warm-up) */
    double trial_t0, trial_ms[2][BRISK_OVERLAP_TRIAL];
    int device_overlap;        /* dist.overlap on a device: buckets issued on its NCCL stream */
    brisk_dist_bucket *overlap_buckets; /* device: the buckets in the order backward completes them */
    int overlap_told;          /* device: buckets issued so far in this backward */
    brisk_error overlap_err;   /* device: the first failure issuing one (the hook cannot return it) */
    int agreed_stop;           /* a stop signal reached some rank: every rank stops at this step */
    int step_abandoned;        /* the signal (or BRISK_STOP_REQUESTED) that abandoned the step in
                                  progress before its update (step.c); 0: none */
    int agreed_due;            /* rank 0's clock says a timed checkpoint is due */
    int resumed_world;         /* world size of the checkpoint resumed from (0: none recorded) */
    int resumed_sharded;       /* it was written with data.shard_files on several ranks: its
                                  position counts in each rank's own rows */
    float *moments_host;       /* ZeRO-1, rank 0: all ranks' m then v (2 x parameters), gathered
                                  before each checkpoint (brisk_dist_gather_moments) */
    float *ckpt_stage;         /* the host copy of parameters and moments (3 x parameters + 1) a
                                  checkpoint is written from, held from the end of the first step
                                  (brisk_checkpoint_reserve): a checkpoint then never fails for
                                  memory after hours of work */
};

/* dist.c: the data-parallel parts of a step (all no-ops in one process). */
/* The global batch: train.batch_size on each of the ranks. */
int64_t brisk_trainer_global_batch(const brisk_trainer *t);
/* Gradients averaged over the ranks (ZeRO-1: this rank's shard only), then the update
 * (ZeRO-1: of the shard, then the parameters gathered). */
brisk_status brisk_dist_step_update(brisk_trainer *t, float lr, int accumulate, brisk_error *err);
/* ZeRO-1 on a device: the gradients reduce-scattered, this rank's shard updated and the
 * parameters all-gathered, all issued on the device's stream (capturable); with
 * t->shard_norm, the shard's gradient sum of squares summed over the ranks before the update. */
brisk_status brisk_dist_device_shard_update(brisk_trainer *t, const brisk_optim_args *a, brisk_error *err);
/* ZeRO-1 on a device, at set_dist (the executor prepared): refuses what the backend cannot
 * shard and sets t->shard_norm. Any precision. */
brisk_status brisk_dist_device_shard_check(brisk_trainer *t, brisk_error *err);
/* What makes a ZeRO-1 step need the whole gradient's norm on every rank ("optim.clip_norm",
 * "train.skip_nan_steps", "the fp16 loss scaler"), or NULL: nothing. */
const char *brisk_dist_shard_norm_need(float clip_norm, int skip_nonfinite, int loss_scaler);
/* The step's loss averaged over the ranks, with the ranks' agreement on stopping and on a
 * timed checkpoint (one small collective per step). */
brisk_status brisk_dist_agree(brisk_trainer *t, float *loss, brisk_error *err);
/* dist.overlap (CPU): before micro-batch `micro`'s run, the gradient hook armed on the last
 * one and the step's all-reduce begun; finish waits for it (before any other collective)
 * and returns its error. failed: the run failed; only the buckets started are waited for. */
void brisk_dist_overlap_begin_step(brisk_trainer *t, int micro);
brisk_status brisk_dist_overlap_finish(brisk_trainer *t, int failed, brisk_error *err);
/* A step cut short before its last micro-batch (a stop): the collectives that micro-batch's
 * backward would have started (dist.overlap), started on whatever the gradients hold, since
 * the other ranks may be running theirs; the agreement after them abandons the step on every
 * rank, so what was summed is never applied. */
void brisk_dist_overlap_stand_in(brisk_trainer *t);
/* dist.overlap on a device: arm before the step's backward is issued (accumulate 1), and
 * the error of any bucket's issue after it. */
void brisk_dist_device_arm(brisk_trainer *t, int armed);
brisk_status brisk_dist_device_check(brisk_trainer *t, brisk_error *err);
/* Device backends: the gradients averaged over the ranks by the backend itself (NCCL), on
 * its stream before the update (captured into the step's program with it). */
brisk_status brisk_dist_device_reduce(brisk_trainer *t, brisk_error *err);
/* ZeRO-1: every rank's shard of the moments gathered into rank 0's moments_host, before a
 * checkpoint (on every rank: a collective). */
brisk_status brisk_dist_gather_moments(brisk_trainer *t, brisk_error *err);
/* After a collective failed (a rank died or hangs), or a loader mid-run, on rank 0: the
 * checkpoint of the last completed step when rank 0 holds all of it (not sharded), and err's
 * message extended with the checkpoint a restart resumes from. */
void brisk_dist_last_checkpoint(brisk_trainer *t, brisk_error *err);

/* dist_check.c: the ranks agree before any step (one error on every rank naming the first
 * key that differs, two ranks and their values), at set_dist on the resolved config, the data
 * (unless each rank trains on its own) and the parameter layout; at each run's start on the
 * position (step, epoch, place in the order, samples seen; a session's ranks: the step). */
brisk_status brisk_dist_check_setup(brisk_trainer *t, brisk_error *err);
brisk_status brisk_dist_check_position(brisk_trainer *t, brisk_error *err);

/* eval.c: validation over every sample of the validation split or file (full batches,
 * then the last, smaller one through a graph planned for its size, built by prepare
 * when the validation size changes). */
/* sample_dump.c: BRISK_DEBUG_SAMPLES, the file rows of every batch trained on (tests) */
brisk_status brisk_sample_dump(brisk_trainer *t, const brisk_batch *b, brisk_error *err);
void brisk_sample_dump_close(brisk_trainer *t);
brisk_status brisk_validate(brisk_trainer *t, brisk_val_metrics *m, brisk_error *err);
brisk_status brisk_eval_prepare(brisk_trainer *t, brisk_error *err);
void brisk_eval_free(brisk_trainer *t);
int64_t brisk_trainer_val_count(const brisk_trainer *t);

/* setup.c: total_steps (and the schedule's position) from train.max_steps, or from
 * train.epochs and where the trainer stands, at the current batch size. */
void brisk_trainer_plan_length(brisk_trainer *t);

/* step.c: one optimizer step over `accumulate` micro-batches. micro() runs (or, when the
 * whole step is one program, stages) a micro-batch; update() applies the optimizer; the
 * batch may be released when micro() returns. Losses reach t->losses through flush()
 * (at once on the CPU; every N steps from a device's loss log), which fails on a
 * non-finite loss naming its step. */
brisk_status brisk_step_setup(brisk_trainer *t, brisk_error *err);
/* Threads decoding an image dataset per loader (data.images.workers, or automatic); 0 for
 * other datasets (loop.c). */
int brisk_loader_workers(const brisk_config *c);
/* Marks the start of a step on the device (its end is marked by update()), when the backend
 * times steps itself; flush() then reads the step times into t->dev_ms with the losses. */
brisk_status brisk_step_begin(brisk_trainer *t, brisk_error *err);
brisk_status brisk_step_micro(brisk_trainer *t, const brisk_batch *b, int micro, brisk_error *err);
/* On the CPU (the host runs each step itself) update() first agrees with the other ranks;
 * a stop asked for on any of them (brisk_trainer_stop_asked) abandons the step there, before
 * the gradients are averaged or applied: it sets t->step_abandoned and applies nothing. */
brisk_status brisk_step_update(brisk_trainer *t, float lr, brisk_error *err);
/* Whether a stop can cut the step in progress short (between micro-batches, before the
 * update): the host runs the step itself (CPU) and no profile times it. On a device the step
 * is issued as a whole and runs to its end. */
int brisk_step_cuttable(const brisk_trainer *t);
brisk_status brisk_step_flush(brisk_trainer *t, brisk_error *err);
/* profile.c: around each step of a profiled run (t->prof set): after brisk_step_begin and
 * after brisk_step_update. */
brisk_status brisk_profile_step_begin(brisk_trainer *t, brisk_error *err);
/* After a run: records one whole step as a device program, never run, and writes the kernels
 * it launches (-1: not a device that captures, or it cannot count them). */
brisk_status brisk_step_capture_kernels(brisk_trainer *t, int *kernels, int *program, brisk_error *err);
brisk_status brisk_profile_step_end(brisk_trainer *t, brisk_error *err);
/* terms: io.n_loss_terms values (NULL: NaN each, a step skipped before they were read) */
brisk_status brisk_trainer_push_loss(brisk_trainer *t, float loss, const float *terms, brisk_error *err);

/* device.c: the backend (speed.device), chosen before the model is built; then, with the
 * graph and plan, whether it has a kernel for every node. Under speed.device auto a backend
 * that lacks one is replaced by the CPU (*be destroyed and recreated) and note says why
 * (also logged: the run report); otherwise it is an error naming the op and the reason. */
brisk_status brisk_device_pick(brisk_trainer *t, brisk_error *err);
brisk_status brisk_device_check_graph(const brisk_config *cfg, const brisk_logger *log, brisk_backend **be,
                                      const brisk_graph *g, const brisk_plan *plan, char *note, size_t note_size,
                                      brisk_error *err);


/* checkpoint.c */
brisk_status brisk_checkpoint_save(brisk_trainer *t, const char *path, brisk_error *err);
brisk_status brisk_checkpoint_load(brisk_trainer *t, const char *path, brisk_error *err);
/* weather.c: data.netcdf into t (dataset, split, normalisation, the model's grid). */
brisk_status brisk_trainer_load_netcdf(brisk_trainer *t, brisk_error *err);
/* Holds t->ckpt_stage from now on; an error saying what is missing when it cannot be had. */
brisk_status brisk_checkpoint_reserve(brisk_trainer *t, brisk_error *err);
/* setup_images.c: data.images (and data.validation, another labels file of the same kind)
 * into t->data (and t->val_data), what loading found logged. */
brisk_status brisk_trainer_load_images(brisk_trainer *t, brisk_error *err);
/* data_skips.c: logs and records (metrics.jsonl "data_skipped") the image files left out
 * since the last call; the summary's count of them, in sum and its line. */
void brisk_trainer_note_skips(brisk_trainer *t);
void brisk_trainer_skips_summary(brisk_trainer *t, brisk_run_summary *sum);

/* rotation.c: the run directory and its checkpoints */
/* Creates train.out_dir, takes its lock and removes temporary files of dead writers; once. */
brisk_status brisk_trainer_open_run_dir(brisk_trainer *t, brisk_error *err);
/* Writes the checkpoint of the current step: step-N (when train.keep_checkpoints > 0) and
 * last, then prunes numbered ones beyond the newest keep_checkpoints. No-op when this
 * process already wrote this step. */
brisk_status brisk_rotation_save(brisk_trainer *t, brisk_error *err);
/* Whether a checkpoint is due after the step just done: train.checkpoint_every steps, or
 * train.checkpoint_minutes since the last one (or since the run started). */
int brisk_rotation_due(brisk_trainer *t, int epoch_ended);
/* Writes best.safetensors (the best validation loss so far). */
brisk_status brisk_rotation_save_best(brisk_trainer *t, brisk_error *err);
/* The newest intact checkpoint (last, best or step-N, by the step recorded inside) in dir;
 * *found 0 when there is none at all; an error when every one there is damaged. */
brisk_status brisk_checkpoint_find_latest(const char *dir, const brisk_logger *log, char *path, size_t cap,
                                          int64_t *step, int *found, brisk_error *err);

/* rundir.c: on opening the run directory, refuses a new run where a previous one left
 * checkpoints or metrics, unless a resume claimed it (t->run_claimed) or train.overwrite
 * removes them; a continued run adopts best.safetensors' loss as the bar to beat. */
brisk_status brisk_run_dir_claim(brisk_trainer *t, brisk_error *err);
/* Takes a checkpoint's best validation loss (and where it was reached) when it is lower than
 * the trainer's, and its best accuracy when higher. */
void brisk_trainer_adopt_best(brisk_trainer *t, const brisk_ckpt_state *cs);
/* A fresh run id: 16 hex digits from the system's entropy. */
void brisk_run_id_draw(char out[20]);
/* Refuses a run directory that is no place for one: the root or the home directory. */
brisk_status brisk_run_dir_check_place(const brisk_trainer *t, brisk_error *err);
/* Appends the run-start record to metrics.jsonl, with the optimizations on and off. */
void brisk_run_dir_mark_start(brisk_trainer *t);
/* Appends the run-end record: the summary's time split, speed and memory (the report's source). */
void brisk_run_dir_mark_end(brisk_trainer *t, const brisk_run_summary *sum);
/* optimizations.c: [{"name", "state" (on, off, info), "detail"}] for the run report; NULL
 * when out of memory. The caller deletes it. */
struct cJSON *brisk_trainer_optimizations(const brisk_trainer *t);

/* control.c: a stop asked of this process: the pending stop signal (signals.c), else the
 * driving program's request (control.stop_requested: BRISK_STOP_REQUESTED), else 0. */
int brisk_trainer_stop_asked(const brisk_trainer *t);



/* numeric.c: a non-finite loss at the current step: BRISK_OK when it may be skipped
 * (train.skip_nan_steps), else the error that stops the run. */
brisk_status brisk_numeric_bad_loss(brisk_trainer *t, double loss, brisk_error *err);
/* Warns, once, when loss-scaler skips exceed train.max_skipped_fraction of `steps`. */
void brisk_numeric_check_scaler(brisk_trainer *t, int64_t steps);

/* memory.c */
/* Plans a training graph as every run of cfg does (setup, and memory.c's fitting): with one
 * micro-batch a step the gradients are written straight into the gradient arena. */
brisk_status brisk_train_plan(const brisk_config *cfg, brisk_graph *g, brisk_plan *plan, brisk_error *err);
/* Bytes this process may still use, and where that figure came from. */
int64_t brisk_memory_available(const brisk_config *cfg, char *source, size_t n);
/* Refuses, before allocating, a plan that does not fit, naming the largest batch that does. */
brisk_status brisk_memory_fit(brisk_trainer *t, brisk_error *err);
/* What g's convolutions add to a GPU run's memory beyond its plan: cuDNN's workspace bound
 * and the staging of operands converted to cuDNN's layout or type; 0 without them. */
int64_t brisk_memory_conv_reserve(const brisk_graph *g);
/* Before loading: a data set of `bytes` (brisk_dataset_estimate) must fit what is available. */
brisk_status brisk_memory_check_data(const brisk_config *cfg, const char *path, int64_t bytes, brisk_error *err);
/* eval.c: the bytes validation's last, smaller batch adds (its graph's activation arena,
 * inputs and constants at nval % batch rows; 0 when the batch divides nval). */
int64_t brisk_eval_tail_bytes(const brisk_config *cfg, int64_t nval, int64_t batch);
/* train.batch_size "auto": the largest batch up to max_batch that fits. */
brisk_status brisk_memory_auto_batch(brisk_trainer *t, int64_t max_batch, brisk_error *err);
/* normalize.c: data.normalize on a table's x and y (regression), fitted on the training split
 * once it is made (t->norm_*, t->tnorm_*); a no-op for data of other kinds unless the key was
 * given, which is then an error. */
brisk_status brisk_table_normalize(brisk_trainer *t, brisk_error *err);
/* normalize.c: field `name` of the training and validation data standardised per channel (ch:
 * its last axis) with the training split's mean and deviation, which go to *mean and *std
 * (malloc'd, ch values each); a no-op (NULL) when the data have no such f32 field. */
brisk_status brisk_field_standardize(brisk_trainer *t, const char *name, int64_t ch, float **mean, float **std,
                                     brisk_error *err);
/* normalize.c: a program-fed trainer (a session) takes the standardisation of the mlp
 * checkpoint it resumes from, for the samples it is given and the predictions it makes. */
brisk_status brisk_normalization_adopt(brisk_trainer *t, const char *checkpoint, brisk_error *err);
/* normalize.c: the trainer's standardisation applied to its data as given (raw units). */
void brisk_normalization_apply(const brisk_trainer *t);
/* Value i of a regression output or target (rows of t->tnorm_n channels, or any with one)
 * back in the target's units. */
static inline float brisk_target_units(const brisk_trainer *t, float v, int64_t i) {
    if (t->tnorm_n == 0) return v;
    int64_t c = t->tnorm_n == 1 ? 0 : i % t->tnorm_n;
    return v * t->tnorm_std[c] + t->tnorm_mean[c];
}

/* sample_score.c: a diffusion model's samples of the validation fields (one per row, at most 1024
 * rows, DDPM from the coarse block values as `brisk sample` starts) scored against them:
 * their RMSE and the coarse block values' (NaN, rows 0: not a diffusion model, or no split). */
brisk_status brisk_sample_score_validation(brisk_trainer *t, double *rmse, double *baseline, int64_t *rows,
                                           brisk_error *err);

#endif
