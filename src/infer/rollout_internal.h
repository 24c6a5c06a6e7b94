/* infer-internal: the scores of a rollout (rollout_score.c) for the rollout itself
 * (rollout.c). */
#ifndef BRISK_INFER_ROLLOUT_INTERNAL_H
#define BRISK_INFER_ROLLOUT_INTERNAL_H

#include <stdio.h>

#include "config/config_internal.h"
#include "infer/predict_internal.h"
#include "run/checkpoint_file.h"

/* The metrics, in the order of the tables and of the JSON keys. */
enum { ROLLOUT_RMSE, ROLLOUT_RMSE_W, ROLLOUT_BIAS, ROLLOUT_ACC, ROLLOUT_PERS, ROLLOUT_PERS_W, ROLLOUT_METRICS };

typedef struct rollout_scores {
    int64_t steps;
    int C;
    double *wlat;            /* [nlat] cos(lat), mean 1 over the rows */
    /* [ROLLOUT_METRICS][steps][C] over the start times: sums, sums of squares, counts */
    double *sum, *sq, *count;
    int64_t *skipped;        /* [steps][C] missing truth values left out */
    float *clim;             /* [slots + 1][grid][C] the climatology (the last: all hours); NULL: no ACC */
    int slots;               /* hours of day told apart: 24, or 1 when the times are no dates */
    int64_t clim_times;      /* training times it is the mean of */
} rollout_scores;

brisk_status rollout_scores_init(rollout_scores *sc, const brisk_weather *w, int64_t steps, brisk_error *err);
void rollout_scores_free(rollout_scores *sc);
/* The climatology from the training times of `train` (its split). */
brisk_status rollout_climatology(rollout_scores *sc, brisk_weather *train, brisk_error *err);
/* One start's lead k (0-based) valid at time index t of w: forecast f, truth o (NaN where
 * missing) and persistence p, each [grid, C]. */
void rollout_scores_add(rollout_scores *sc, const brisk_weather *w, int64_t k, int64_t t, const float *f, const float *o,
                        const float *p);
/* The tables, one per metric (ACC only with a climatology). */
void rollout_scores_print(const rollout_scores *sc, const brisk_weather *w, FILE *out, double step_h, int64_t starts);
/* One JSON line per lead and channel; with one start (init not NULL) its init and valid
 * dates too. */
void rollout_scores_jsonl(const rollout_scores *sc, const brisk_weather *w, FILE *f, double step_h, int64_t starts,
                          const char *init, const char *const *valid);
/* Missing truth values left out, over every lead and channel. */
int64_t rollout_scores_skipped(const rollout_scores *sc);

#endif
