/* Learning-rate schedules: a linear warm-up followed by constant, linear or cosine decay. */
#include "brisk/optim.h"

#include <math.h>

void brisk_optim_spec_default(brisk_optim_spec *s) {
    *s = (brisk_optim_spec){.kind = BRISK_OPTIM_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
                            .eps = 1e-8f, .weight_decay = 0.01f, .momentum = 0.0f, .decay_all = 1,
                            .schedule = BRISK_SCHED_CONSTANT, .min_lr_ratio = 0.0f};
}

const char *brisk_sched_name(brisk_sched_kind k) {
    switch (k) {
    case BRISK_SCHED_CONSTANT: return "constant";
    case BRISK_SCHED_LINEAR: return "linear";
    case BRISK_SCHED_COSINE: return "cosine";
    }
    return "?";
}

float brisk_schedule_lr(const brisk_optim_spec *s, int64_t step, int64_t total) {
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return s->lr * (float)(step + 1) / (float)s->warmup_steps;
    if (s->schedule == BRISK_SCHED_CONSTANT) return s->lr;
    int64_t span = total - s->warmup_steps;
    double frac = span > 0 ? (double)(step - s->warmup_steps) / (double)span : 1.0;
    if (frac > 1.0) frac = 1.0;
    if (frac < 0.0) frac = 0.0;
    double lo = s->lr * s->min_lr_ratio, shape = s->schedule == BRISK_SCHED_LINEAR
                                                     ? 1.0 - frac
                                                     : 0.5 * (1.0 + cos(M_PI * frac));
    return (float)(lo + (s->lr - lo) * shape);
}
