/* The state of one call of brisk_trainer_run_steps, shared by the loop (loop.c) and its
 * end-of-run summary (loop_summary.c). */
#ifndef BRISK_TRAIN_LOOP_INTERNAL_H
#define BRISK_TRAIN_LOOP_INTERNAL_H

#include "report/progress.h"
#include "train/trainer_internal.h"

/* This run's validations: its own best, beside the trainer's best over all the run's parts. */
typedef struct run_val {
    int rounds;                /* validations this run made */
    int best_here;             /* the trainer's best was reached in this run */
    double loss, max_accuracy; /* this run's best (NaN: none) */
    brisk_val_metrics best;    /* at this run's best loss */
    int64_t best_epoch;
} run_val;

typedef struct run_state {
    int64_t max_new_steps, end; /* a program's run of some steps; the step this run ends after */
    int files;                  /* train.out_dir given: checkpoints, metrics.jsonl, events */
    int when_due;               /* control.checkpoint_when_due */
    int cuttable;               /* a stop may abandon a step in progress (brisk_step_cuttable) */
    brisk_log_level progress_level;
    brisk_loader *l;
    double *step_times; /* [n_timed] seconds of each step run */
    int64_t n_timed, epoch_steps;
    double t_start, last_epoch_loss, last_status;
    double ckpt_s0, val_s0; /* the trainer's totals at the start: this run's share of each */
    int64_t ckpt_n0;
    /* the run's and the progress window's time split; marks of the device's copy counter */
    brisk_time_split run, win;
    double run_copy_mark, win_copy_mark;
    int epochs_done, stop_sig, cut; /* cut: the stop abandoned a step in progress */
    int save_at_end;                /* the last step's checkpoint waits for the validation at the run's end */
    int64_t step_epoch, step_position; /* where the step in progress began */
    run_val rv;
    float lr;         /* the step just done: its learning rate */
    int epoch_ended;  /* and whether it ended an epoch */
} run_state;

/* Mean of the last n losses, leaving out steps skipped for a non-finite loss (numeric.c);
 * NaN when none of them is finite. */
double brisk_loop_tail_mean(const brisk_trainer *t, int64_t n);
/* The device's own copy time since *mark replaces the host's measure (which includes waiting
 * for a free staging buffer); without a device the host's stays. */
void brisk_loop_use_device_copy(brisk_trainer *t, brisk_time_split *s, double *mark);
/* On a device that times steps itself (step.c), the last n steps' time in seconds from its
 * clock, once flushed; -1 otherwise (the host's clock then stands). */
double brisk_loop_device_steps_s(const brisk_trainer *t, int64_t n_timed, int64_t n);
/* loop_summary.c: the run's summary into sum, logged, and the run-end record. */
void brisk_loop_summarize(brisk_trainer *t, run_state *rs, brisk_run_summary *sum, int64_t sampled);

#endif
