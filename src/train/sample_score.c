/* The end of a diffusion run: samples of its validation fields, drawn as `brisk sample`
 * draws them, scored against the truth and against the coarse blocks upsampled (a model can
 * learn to denoise and still sample worse than the trivial downscaling). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/infer_internal.h"
#include "train/trainer_internal.h"

#define SCORE_ROWS 1024 /* validation rows a diffusion run's summary samples, at most */

brisk_status brisk_sample_score_validation(brisk_trainer *t, double *rmse, double *baseline, int64_t *rows,
                                           brisk_error *err) {
    *rmse = *baseline = NAN, *rows = 0;
    const brisk_model_spec *m = &t->cfg.model;
    const brisk_dataset *ds = t->val_data.count > 0 ? &t->val_data : &t->data;
    const int64_t *idx = t->val_data.count > 0 ? NULL : t->split.val;
    int64_t n = t->val_data.count > 0 ? t->val_data.count : t->split.nval;
    const brisk_tensor *c = brisk_dataset_get(ds, "coarse"), *f = brisk_dataset_get(ds, "fine");
    if (m->type != BRISK_MODEL_DIFFUSION || n == 0 || !c || !f) return BRISK_OK;
    if (n > SCORE_ROWS) n = SCORE_ROWS; /* a bound on the minutes it may take on a CPU */
    const int64_t C = m->coarse, F = m->fine;
    float *coarse = malloc(sizeof(float) * (size_t)(n * (C + 3 * F)));
    if (!coarse) return brisk_errorf(err, BRISK_ERR_NOMEM, "validation samples: out of memory");
    float *truth = coarse + n * C, *guess = truth + n * F, *out = guess + n * F;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = idx ? idx[i] : i;
        memcpy(coarse + i * C, (const float *)c->data + r * C, sizeof(float) * (size_t)C);
        memcpy(truth + i * F, (const float *)f->data + r * F, sizeof(float) * (size_t)F);
    }
    brisk_upsample_blocks(coarse, n, C, F, guess);
    brisk_inference *inf = NULL;
    const brisk_sample_params p = {BRISK_SAMPLER_DDPM, 0, 0.0f};
    brisk_status st = brisk_inference_create(m, t->cfg.speed.threads, &inf, err);
    if (!st) st = brisk_inference_from_trainer(inf, t, err);
    if (!st) st = brisk_inference_sample(inf, &p, n, coarse, C, guess, F, out, F, t->cfg.train.seed, err);
    if (!st) *rmse = brisk_sample_rmse(out, truth, n * F), *baseline = brisk_sample_rmse(guess, truth, n * F), *rows = n;
    brisk_inference_free(inf);
    free(coarse);
    return st;
}
