/* The weather dataset over NetCDF files (data.h, brisk_weather_*): one pass at open
 * checks every time step for missing values and fits the normalisation on the training
 * range; samples are then read on demand in the loader's thread. */
#include "data/netcdf_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *brisk_weather_first_file(const brisk_weather *w) {
#if BRISK_HAVE_NETCDF
    return w->src && w->src->nfiles ? w->src->files[0].path : "";
#else
    (void)w;
    return "";
#endif
}

void brisk_weather_coord_names(const brisk_weather *w, const char **time, const char **lat, const char **lon) {
#if BRISK_HAVE_NETCDF
    if (w->src) {
        *time = w->src->time_name, *lat = w->src->lat_name, *lon = w->src->lon_name;
        return;
    }
#endif
    (void)w;
    *time = "time", *lat = "lat", *lon = "lon";
}

brisk_status brisk_weather_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                brisk_error *err) {
    if (t < 0 || t >= w->ntimes)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: time index %lld outside [0, %lld)", brisk_weather_first_file(w),
                            (long long)t, (long long)w->ntimes);
    *missing = 0;
    return netcdf_source_read(w, t, dst, missing, first, err);
}

/* Masks (with the channel's mean) or refuses missing values. */
brisk_status brisk_weather_state(brisk_weather *w, int64_t t, float *dst, brisk_error *err) {
    int64_t missing = 0;
    char first[256];
    brisk_status st = brisk_weather_read(w, t, dst, &missing, first, err);
    if (st || !missing) return st;
    if (!w->mask_missing)
        return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s (%lld missing values at this time; data.netcdf.missing \"mask\" "
                            "fills them with the training mean)", first, (long long)missing);
    for (int64_t i = 0; i < w->grid * w->channels; i++)
        if (isnan(dst[i])) dst[i] = w->mean[i % w->channels];
    return BRISK_OK;
}

static void time_features(const brisk_weather *w, int64_t t, int64_t node, float *out) {
    double utc = w->base_hour + w->time[t] * w->hours_per_unit;
    double local = utc + w->lon[node % w->nlon] / 15.0, a = 2 * M_PI * fmod(local, 24.0) / 24.0;
    out[0] = (float)sin(a);
    out[1] = (float)cos(a);
}

void brisk_weather_input(const brisk_weather *w, const float *const *states, int64_t t, float *x) {
    int64_t C = w->channels, S = w->nstatics;
    for (int64_t n = 0; n < w->grid; n++) {
        float *o = x + n * w->inputs;
        for (int h = 0; h < w->history; h++)
            for (int64_t c = 0; c < C; c++) *o++ = (states[h][n * C + c] - w->mean[c]) / w->std[c];
        for (int64_t s = 0; s < S; s++) *o++ = w->statics_norm[n * S + s];
        if (w->inputs > w->history * C + S) time_features(w, t, n, o);
    }
}

static brisk_status make_sample(void *user, int64_t index, uint64_t epoch, int augment, void *const *dst,
                                brisk_error *err) {
    (void)epoch, (void)augment;
    brisk_weather *w = user;
    int64_t t = index + w->history - 1, G = w->grid, C = w->channels;
    float *buf = malloc((size_t)((w->history + 1) * G * C) * sizeof(float));
    const float *states[64];
    if (!buf) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", w->ds.source);
    brisk_status st = BRISK_OK;
    for (int h = 0; h < w->history && !st; h++) {
        states[h] = buf + h * G * C;
        st = brisk_weather_state(w, t - w->history + 1 + h, buf + h * G * C, err);
    }
    float *next = buf + w->history * G * C;
    if (!st) st = brisk_weather_state(w, t + w->lead, next, err);
    if (!st) {
        brisk_weather_input(w, states, t, dst[0]);
        const float *now = states[w->history - 1], *dm = w->mean + C + w->nstatics, *ds = w->std + C + w->nstatics;
        float *y = dst[1];
        for (int64_t i = 0; i < G * C; i++) y[i] = (next[i] - now[i] - dm[i % C]) / ds[i % C];
    }
    free(buf);
    return st;
}

typedef struct moments {
    double *sum, *sq;
    int64_t *n;
} moments;

/* mean and std (a constant channel gets std 1) from sums; n 0 keeps mean 0, std 1. */
static void finish(const moments *m, int64_t k, float *mean, float *std) {
    for (int64_t c = 0; c < k; c++) {
        double n = (double)m->n[c], mu = n ? m->sum[c] / n : 0, var = n ? m->sq[c] / n - mu * mu : 0;
        mean[c] = (float)mu;
        std[c] = var > 1e-12 * (mu * mu + 1e-30) && var > 0 ? (float)sqrt(var) : 1.0f;
    }
}

/* The pass over every time: missing values (when fitting, refused now rather than
 * mid-training; with a given normalisation, as rollout's, counted: the windows that need
 * one are refused as they are read), the training range's moments of the channels and of
 * their change over `lead`, and the validation samples' mean squared normalised change
 * (persistence's loss). */
static brisk_status scan(brisk_weather *w, const float *statics, int fit, brisk_error *err) {
    int64_t G = w->grid, C = w->channels, S = w->nstatics, L = w->lead, s = w->split_time;
    float *ring = malloc((size_t)((L + 1) * G * C) * sizeof(float));
    double *acc = calloc((size_t)(6 * C), sizeof(double));
    int64_t *cnt = calloc((size_t)(3 * C), sizeof(int64_t));
    if (!ring || !acc || !cnt) {
        free(ring), free(acc), free(cnt);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", w->ds.source);
    }
    moments mc = {acc, acc + C, cnt}, md = {acc + 2 * C, acc + 3 * C, cnt + C}, mv = {acc + 4 * C, acc + 5 * C, cnt + 2 * C};
    brisk_status st = BRISK_OK;
    char first[256];
    for (int64_t t = 0; t < w->ntimes && !st; t++) {
        float *cur = ring + (t % (L + 1)) * G * C;
        int64_t missing = 0;
        if ((st = netcdf_source_read(w, t, cur, &missing, first, err))) break;
        if (missing && !w->mask_missing && fit) {
            st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s (%lld missing values at this time; data.netcdf.missing \"mask\" "
                              "fills them with the training mean)", first, (long long)missing);
            break;
        }
        w->missing += missing;
        if (w->mask_missing) w->masked += missing;
        const float *old = t >= L ? ring + ((t - L) % (L + 1)) * G * C : NULL;
        int in_val = old && t - L - w->history + 1 >= s;
        for (int64_t i = 0; i < G * C; i++) {
            int64_t c = i % C;
            if (t < s && !isnan(cur[i])) mc.sum[c] += cur[i], mc.sq[c] += (double)cur[i] * cur[i], mc.n[c]++;
            if (!old || isnan(cur[i]) || isnan(old[i])) continue;
            double d = (double)cur[i] - old[i];
            if (t < s) md.sum[c] += d, md.sq[c] += d * d, md.n[c]++;
            if (in_val) mv.sum[c] += d, mv.sq[c] += d * d, mv.n[c]++;
        }
    }
    if (!st && fit) {
        finish(&mc, C, w->mean, w->std);
        finish(&md, C, w->mean + C + S, w->std + C + S);
        moments ms = {acc, acc + C, cnt}; /* the statics' moments over the grid */
        memset(acc, 0, 2 * (size_t)C * sizeof(double));
        memset(cnt, 0, (size_t)C * sizeof(int64_t));
        for (int64_t i = 0; i < G * S; i++) ms.sum[i % S] += statics[i], ms.sq[i % S] += (double)statics[i] * statics[i], ms.n[i % S]++;
        finish(&ms, S, w->mean + C, w->std + C);
    }
    double e = 0, n = 0;
    for (int64_t c = 0; !st && c < C; c++) {
        double dm = w->mean[C + S + c], ds = w->std[C + S + c];
        e += (mv.sq[c] - 2 * dm * mv.sum[c] + dm * dm * (double)mv.n[c]) / (ds * ds);
        n += (double)mv.n[c];
    }
    w->persistence_mse = n > 0 ? e / n : NAN;
    free(ring), free(acc), free(cnt);
    return st;
}

brisk_status brisk_weather_open(const brisk_weather_spec *spec, brisk_weather *w, brisk_error *err) {
    memset(w, 0, sizeof *w);
    const char *p0 = spec->npaths ? spec->paths[0] : "(no file)";
    snprintf(w->ds.source, sizeof w->ds.source, "%s", p0);
    if (spec->history < 1 || spec->history > 64 || spec->lead < 1 || spec->lead > 1 << 20 ||
        !(spec->validation_fraction >= 0 && spec->validation_fraction < 1) || spec->nvariables < 1 ||
        spec->nvariables > BRISK_WEATHER_MAX_VARS || spec->nstatics < 0 || spec->nstatics > BRISK_WEATHER_MAX_VARS)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: history %d (expected 1 to 64), lead %d (expected >= 1), "
                            "validation fraction %g (expected [0, 1)), %d variables (expected 1 to %d), %d statics",
                            p0, spec->history, spec->lead, spec->validation_fraction, spec->nvariables,
                            BRISK_WEATHER_MAX_VARS, spec->nstatics);
    w->history = spec->history, w->lead = spec->lead, w->mask_missing = spec->mask_missing;
    float *statics = NULL;
    brisk_status st = netcdf_source_open(spec, w, &statics, err);
    w->ds.make_user = w, w->ds.make = make_sample;
    if (st) goto fail;
    snprintf(w->ds.source, sizeof w->ds.source, "%s", brisk_weather_first_file(w));
    int64_t C = w->channels, S = w->nstatics, G = w->grid;
    /* a sample's and the scan's buffers hold (history + 1) and (lead + 1) states */
    const int64_t cap = INT64_C(1) << 30;
    if (G > cap / C / (w->history + 1) || G > cap / C / (w->lead + 1) || G * (w->history * C + S + 2) > cap) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: a %lld x %lld grid of %lld channels with history %d and lead %d is "
                          "too large (buffers of over 2^30 values)", w->ds.source, (long long)w->nlat, (long long)w->nlon,
                          (long long)C, w->history, w->lead);
        goto fail;
    }
    w->inputs = (int)(w->history * C + S + (spec->time_features ? 2 : 0));
    int64_t count = w->ntimes - w->history + 1 - w->lead;
    if (count < 1) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld times cannot hold one sample of history %d and lead %d",
                          w->ds.source, (long long)w->ntimes, w->history, w->lead);
        goto fail;
    }
    w->nnorm = (int)(2 * C + S);
    w->mean = malloc((size_t)w->nnorm * sizeof(float));
    w->std = malloc((size_t)w->nnorm * sizeof(float));
    w->statics_norm = malloc((size_t)(G * (S ? S : 1)) * sizeof(float));
    if (!w->mean || !w->std || !w->statics_norm) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto fail; }
    if (spec->mean && spec->nnorm != w->nnorm) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: the normalisation given has %d entries, but %d channels and %d statics "
                          "need %d (2 x channels + statics): another data layout than the one trained on",
                          w->ds.source, spec->nnorm, (int)C, (int)S, w->nnorm);
        goto fail;
    }
    if (spec->mean) {
        memcpy(w->mean, spec->mean, (size_t)w->nnorm * sizeof(float));
        memcpy(w->std, spec->std, (size_t)w->nnorm * sizeof(float));
    }
    w->split_time = w->ntimes - (int64_t)llround((double)w->ntimes * spec->validation_fraction);
    if ((st = scan(w, statics, !spec->mean, err))) goto fail;
    for (int64_t i = 0; i < G * S; i++) w->statics_norm[i] = (statics[i] - w->mean[C + i % S]) / w->std[C + i % S];
    /* the chronological split */
    int64_t ntr = 0, nval = 0, s = w->split_time;
    for (int64_t k = 0; k < count; k++) {
        int64_t t = k + w->history - 1;
        ntr += t + w->lead < s;
        nval += t - w->history + 1 >= s;
    }
    w->split.train = malloc((size_t)(ntr ? ntr : 1) * sizeof(int64_t));
    w->split.val = malloc((size_t)(nval ? nval : 1) * sizeof(int64_t));
    w->ds.fields = calloc(2, sizeof *w->ds.fields);
    if (!w->split.train || !w->split.val || !w->ds.fields) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory"); goto fail; }
    for (int64_t k = 0; k < count; k++) {
        int64_t t = k + w->history - 1;
        if (t + w->lead < s) w->split.train[w->split.ntrain++] = k;
        if (t - w->history + 1 >= s) w->split.val[w->split.nval++] = k;
    }
    w->ds.nfields = 2;
    w->ds.count = count;
    snprintf(w->ds.fields[0].name, BRISK_FIELD_NAME_MAX, "x");
    w->ds.fields[0].tensor = (brisk_tensor){.dtype = BRISK_F32, .shape = brisk_shape3(count, G, w->inputs)};
    snprintf(w->ds.fields[1].name, BRISK_FIELD_NAME_MAX, "y");
    w->ds.fields[1].tensor = (brisk_tensor){.dtype = BRISK_F32, .shape = brisk_shape3(count, G, C)};
    free(statics);
    return BRISK_OK;
fail:
    free(statics);
    brisk_weather_free(w);
    return st;
}

void brisk_weather_free(brisk_weather *w) {
    if (!w) return;
    brisk_dataset_free(&w->ds);
    brisk_split_free(&w->split);
    netcdf_source_free(w->src);
    free(w->channel);
    free(w->lat);
    free(w->lon);
    free(w->time);
    free(w->mean);
    free(w->std);
    free(w->statics_norm);
    memset(w, 0, sizeof *w);
}
