/* What a program driving a trainer (the library API) controls beyond the config: a stop
 * request polled by the step loop, when checkpoints are written, and when the run
 * directory is locked. */
#include "train/trainer_internal.h"

void brisk_trainer_set_control(brisk_trainer *t, const brisk_trainer_control *c) { t->control = *c; }

int brisk_trainer_stop_asked(const brisk_trainer *t) {
    int sig = brisk_signal_pending();
    if (!sig && t->control.stop_requested) sig = t->control.stop_requested(t->control.user);
    return sig;
}

brisk_status brisk_trainer_lock_run_dir(brisk_trainer *t, int overwrite, const char *choices, brisk_error *err) {
    t->cfg.train.overwrite = overwrite;
    t->run_choices = choices;
    return t->cfg.train.out_dir[0] ? brisk_trainer_open_run_dir(t, err) : BRISK_OK;
}

brisk_status brisk_trainer_checkpoint(brisk_trainer *t, brisk_error *err) {
    if (!t->cfg.train.out_dir[0]) return BRISK_OK;
    brisk_status st = brisk_step_flush(t, err);
    return st ? st : brisk_rotation_save(t, err);
}

const char *brisk_trainer_last_checkpoint(const brisk_trainer *t) { return t->last_ckpt; }
