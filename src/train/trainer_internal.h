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
    /* step.c: how each step runs (eagerly, or replayed from a captured program) */
    int graph;               /* capture the step once warmed up, then replay it */
    int programs_ready;
    int prog_step, prog_update; /* accumulate 1: prog_step is the whole step; else the micro-step */
    int64_t eager_steps;     /* steps run eagerly by this process (the first is the warm-up) */
    int64_t loss_first;      /* step whose loss is the first not read yet (device loss log) */
    int loss_pending;        /* steps whose losses wait in the device loss log */
    double micro_loss;       /* CPU path: losses of this step's micro-batches, summed */
    brisk_step_state cur;    /* the micro-batch being run */
    double copy_s;           /* time spent handing batches to the device */
    char graph_off[96];      /* why there is no CUDA graph, for the report */
    double util_sum;         /* device utilisation samples at progress lines */
    int util_n;
};

/* step.c: one optimizer step over `accumulate` micro-batches. micro() runs (or, when the
 * whole step is one program, stages) a micro-batch; update() applies the optimizer; the
 * batch may be released when micro() returns. Losses reach t->losses through flush()
 * (at once on the CPU; every N steps from a device's loss log), which fails on a
 * non-finite loss naming its step. */
brisk_status brisk_step_setup(brisk_trainer *t, brisk_error *err);
brisk_status brisk_step_micro(brisk_trainer *t, const brisk_batch *b, int micro, brisk_error *err);
brisk_status brisk_step_update(brisk_trainer *t, float lr, brisk_error *err);
brisk_status brisk_step_flush(brisk_trainer *t, brisk_error *err);
brisk_status brisk_trainer_push_loss(brisk_trainer *t, float loss, brisk_error *err);

/* checkpoint.c */
brisk_status brisk_checkpoint_save(brisk_trainer *t, const char *path, brisk_error *err);
brisk_status brisk_checkpoint_load(brisk_trainer *t, const char *path, brisk_error *err);
/* Loads only the parameters of a checkpoint into an executor built from its config. */
brisk_status brisk_checkpoint_load_params(const char *path, brisk_exec *ex, brisk_error *err);
/* The config a checkpoint carries (for predict and info); caller frees with brisk_config_free. */
brisk_status brisk_checkpoint_config(const char *path, brisk_config *cfg, brisk_error *err);

#endif
