/* A trainer's parameters and normalisation handed to an inference (a session predicting or
 * sampling with the model it is training; a diffusion run scoring its samples). */
#include <stdlib.h>

#include "infer/infer_internal.h"
#include "train/trainer_internal.h"

brisk_status brisk_inference_from_trainer(brisk_inference *inf, const brisk_trainer *t, brisk_error *err) {
    const brisk_graph *src = t->g;
    float *host = malloc(sizeof(float) * (size_t)(src->n_param_floats + 1));
    if (!host) return brisk_errorf(err, BRISK_ERR_NOMEM, "inference: out of memory");
    brisk_status st = t->ex->be->download(t->ex->be, host, t->ex->params, (size_t)src->n_param_floats * sizeof(float), err);
    const brisk_norm_stats norm = {t->norm_mean, t->norm_std, t->norm_n}, tnorm = {t->tnorm_mean, t->tnorm_std, t->tnorm_n};
    if (!st) st = brisk_inference_set_params(inf, src, host, &norm, &tnorm, err);
    free(host);
    return st;
}
