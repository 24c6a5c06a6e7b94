/* optim: SGD and AdamW as one fused pass over the parameter arena, learning-rate
 * schedules, clipping by global gradient norm, gradient accumulation. The host
 * computes the learning rate from the step number (no device read); the norm for
 * clipping stays in backend memory, so nothing here synchronises the host. */
#ifndef BRISK_OPTIM_H
#define BRISK_OPTIM_H

#include "brisk/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { BRISK_SCHED_CONSTANT = 0, BRISK_SCHED_LINEAR, BRISK_SCHED_COSINE } brisk_sched_kind;

typedef struct brisk_optim_spec {
    brisk_optim_kind kind;
    float lr, beta1, beta2, eps, weight_decay, momentum;
    int nesterov;
    int decay_all;          /* 1: decay every parameter (PyTorch's default); 0: weights only */
    float clip_norm;        /* 0: off */
    brisk_sched_kind schedule;
    int64_t warmup_steps;   /* linear warm-up from 0 to lr over these steps, for any schedule */
    float min_lr_ratio;     /* linear/cosine decay ends at lr * min_lr_ratio */
} brisk_optim_spec;

/* The defaults: AdamW, lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01. */
void brisk_optim_spec_default(brisk_optim_spec *s);
const char *brisk_sched_name(brisk_sched_kind k);

/* Learning rate for optimizer step `step` (0-based) of `total` steps. */
float brisk_schedule_lr(const brisk_optim_spec *s, int64_t step, int64_t total);

typedef struct brisk_optimizer {
    brisk_optim_spec spec;
    float *sumsq;           /* backend memory, one float */
    uint8_t *decay_mask;    /* backend memory, per parameter float; NULL when all decay */
    brisk_exec *ex;
    int skip_nonfinite;     /* passed on as brisk_optim_args.skip_nonfinite */
} brisk_optimizer;

brisk_status brisk_optimizer_create(brisk_optimizer *o, const brisk_optim_spec *spec, brisk_exec *ex,
                                    brisk_error *err);
void brisk_optimizer_free(brisk_optimizer *o);
/* The arguments brisk_optimizer_step passes to the backend for step t (a device backend
 * replaying a captured step is given them with set_values). */
brisk_optim_args brisk_optimizer_args(const brisk_optimizer *o, int64_t t, float lr, int accumulate);
/* Applies one update from the accumulated gradients. t is the 1-based optimizer step;
 * accumulate the number of micro-batches summed into the gradient arena. */
brisk_status brisk_optimizer_step(brisk_optimizer *o, int64_t t, float lr, int accumulate,
                                  brisk_error *err);
/* The update of parameter floats [off, off + n) only (ZeRO-1: this rank's shard); when
 * clipping, sumsq must already hold the squared norm of all the gradients. */
brisk_status brisk_optimizer_update_range(brisk_optimizer *o, int64_t t, float lr, int accumulate, int64_t off,
                                          int64_t n, brisk_error *err);

#ifdef __cplusplus
}
#endif
#endif
