/* NetCDF weather data in the trainer (data.netcdf): the dataset, its chronological split
 * and normalisation (kept in checkpoints), and the model's grid taken from the file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/trainer_internal.h"

brisk_status brisk_trainer_load_netcdf(brisk_trainer *t, brisk_error *err) {
    const char *paths[BRISK_NETCDF_MAX_FILES], *names[BRISK_WEATHER_MAX_VARS + BRISK_NETCDF_MAX_STATICS];
    brisk_weather_spec spec;
    brisk_weather_spec_of(&t->cfg.data, paths, names, &spec);
    brisk_weather *w = calloc(1, sizeof *w);
    if (!w) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    brisk_status st = brisk_weather_open(&spec, w, err);
    if (st) {
        free(w);
        return st;
    }
    t->weather = w; /* the dataset reads through it: it lives as long as the trainer */
    if ((st = brisk_weather_fit_model(&t->cfg.model, w, t->cfg.path, err)) ||
        (st = brisk_model_fields(&t->cfg.model, BRISK_BUILD_TRAIN, &t->io, err))) /* at the file's grid */
        return st;
    if (w->split.ntrain < 1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no training samples: %lld times, history %d, lead %d, validation "
                            "from time index %lld", w->ds.source, (long long)w->ntimes, w->history, w->lead,
                            (long long)w->split_time);
    t->norm_mean = malloc((size_t)w->nnorm * sizeof(float));
    t->norm_std = malloc((size_t)w->nnorm * sizeof(float));
    if (!t->norm_mean || !t->norm_std) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    memcpy(t->norm_mean, w->mean, (size_t)w->nnorm * sizeof(float));
    memcpy(t->norm_std, w->std, (size_t)w->nnorm * sizeof(float));
    t->norm_n = w->nnorm;
    t->data = w->ds;
    memset(&w->ds.fields, 0, sizeof w->ds.fields);
    w->ds.nfields = 0, w->ds.make_user = NULL, w->ds.make = NULL;
    t->split = w->split;
    memset(&w->split, 0, sizeof w->split);
    char first[48], last[48], split[48] = "the end";
    brisk_weather_date(w, w->time[0], first, sizeof first);
    brisk_weather_date(w, w->time[w->ntimes - 1], last, sizeof last);
    if (w->split_time < w->ntimes) brisk_weather_date(w, w->time[w->split_time], split, sizeof split);
    brisk_log(&t->log, BRISK_LOG_INFO, "data      %s: %lld times of a %lld x %lld grid, %d channels, %d statics, %s to %s; "
              "history %d, lead %d: %lld train / %lld validation samples (validation from %s, time index %lld, "
              "chronological)", t->data.source, (long long)w->ntimes, (long long)w->nlat, (long long)w->nlon, w->channels,
              w->nstatics, first, last, w->history, w->lead, (long long)t->split.ntrain, (long long)t->split.nval, split,
              (long long)w->split_time);
    brisk_weather_describe(w, &t->log);
    if (w->masked)
        brisk_log(&t->log, BRISK_LOG_WARN, "data      %lld missing values masked (data.netcdf.missing \"mask\"): filled with "
                  "their channel's training mean", (long long)w->masked);
    if (t->split.nval)
        brisk_log(&t->log, BRISK_LOG_INFO, "data      persistence (a zero change) scores %.6f on the validation samples: "
                  "a validation loss below it beats persistence", w->persistence_mse);
    return BRISK_OK;
}
