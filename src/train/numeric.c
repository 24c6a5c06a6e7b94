/* Numeric faults during training. A NaN or infinite loss in fp32 means the run has
 * diverged (or met data the load-time checks could not see): by default it stops with
 * the step, the newest good checkpoint and what to try; train.skip_nan_steps = K lets it
 * drop up to K such steps instead (no update: the gradients of a non-finite loss never
 * reach the weights) and go on, counting them across resumes.
 *
 * With fp16 the dynamic loss scaler skips updates whose gradients overflowed; the
 * backend reports how many through brisk_trainer_add_scaler_skips, and a run whose skips
 * exceed train.max_skipped_fraction of its steps is told so, once. The first
 * SCALER_GRACE skips are the scaler settling on its scale (it starts high and halves on
 * each overflow) and are not held against the run. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "train/trainer_internal.h"

#define SCALER_GRACE 16

static void where_to_restart(const brisk_trainer *t, char *out, size_t n) {
    if (t->last_ckpt[0])
        snprintf(out, n, "the last good checkpoint is %s (step %" PRId64 ")", t->last_ckpt, t->last_ckpt_step);
    else
        snprintf(out, n, "no checkpoint was written yet (train.checkpoint_every sets how often)");
}

brisk_status brisk_numeric_bad_loss(brisk_trainer *t, double loss, brisk_error *err) {
    const int64_t allowed = t->cfg.train.skip_nan_steps;
    const char *what = isnan(loss) ? "NaN" : "infinite";
    const long long step = (long long)t->step + 1;
    if (t->nan_skipped < allowed) {
        t->nan_skipped++;
        brisk_log(&t->log, BRISK_LOG_WARN, "step %lld: the training loss is %s: step skipped without an update "
                  "(%" PRId64 " of %" PRId64 " allowed by train.skip_nan_steps)", step, what, t->nan_skipped, allowed);
        return BRISK_OK;
    }
    char restart[BRISK_PATH_MAX + 160], skipped[128] = "";
    where_to_restart(t, restart, sizeof restart);
    if (allowed > 0)
        snprintf(skipped, sizeof skipped, " after %" PRId64 " skipped steps (train.skip_nan_steps allows %" PRId64 ")",
                 t->nan_skipped, allowed);
    return brisk_errorf(err, BRISK_ERR_NUMERIC,
                        "step %lld: the training loss is %s%s; %s; try a lower optim.lr, set optim.clip_norm, "
                        "or check the data (train.skip_nan_steps skips such steps instead of stopping)",
                        step, what, skipped, restart);
}

void brisk_trainer_add_scaler_skips(brisk_trainer *t, int64_t skipped) {
    if (skipped > 0) t->scaler_skipped += skipped;
}

void brisk_numeric_check_scaler(brisk_trainer *t, int64_t steps) {
    double frac = t->cfg.train.max_skipped_fraction;
    if (t->scaler_warned || steps <= 0 || t->scaler_skipped <= SCALER_GRACE) return;
    if ((double)(t->scaler_skipped - SCALER_GRACE) <= frac * (double)steps) return;
    t->scaler_warned = 1;
    brisk_log(&t->log, BRISK_LOG_WARN,
              "the fp16 loss scaler skipped %" PRId64 " of %" PRId64 " steps of this run (%.1f%%), more than "
              "train.max_skipped_fraction (%.1f%%): gradients overflow fp16 often; try bf16, a lower optim.lr or "
              "optim.clip_norm", t->scaler_skipped, steps, 100.0 * (double)t->scaler_skipped / (double)steps, 100.0 * frac);
}
