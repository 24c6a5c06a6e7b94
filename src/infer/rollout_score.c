/* The scores of `brisk rollout`, as forecasters compute them: per lead time and channel,
 * RMSE (plain and latitude-weighted by cos(lat)), the latitude-weighted bias (forecast
 * minus truth) and the anomaly correlation (ACC, latitude-weighted, uncentred as
 * WeatherBench 2 has it) against a climatology from the training years: the mean of each
 * grid point, channel and hour of day over the checkpoint's training times. Each start
 * time gives one value per metric; the table and JSON lines give their mean and spread
 * (standard deviation) over the start times. A truth value that is missing is left out
 * of every metric, forecast and persistence alike, and counted. */
#include "infer/rollout_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEG (3.14159265358979323846 / 180.0)

static const char *const metric_key[ROLLOUT_METRICS] = {"rmse", "rmse_weighted", "bias", "acc", "persistence_rmse",
                                                        "persistence_rmse_weighted"};

brisk_status rollout_scores_init(rollout_scores *sc, const brisk_weather *w, int64_t steps, brisk_error *err) {
    memset(sc, 0, sizeof *sc);
    sc->steps = steps, sc->C = w->channels;
    size_t n = (size_t)(steps * w->channels);
    sc->wlat = malloc((size_t)w->nlat * sizeof(double));
    sc->sum = calloc(3 * ROLLOUT_METRICS * n, sizeof(double));
    sc->skipped = calloc(n, sizeof(int64_t));
    if (!sc->wlat || !sc->sum || !sc->skipped) return brisk_errorf(err, BRISK_ERR_NOMEM, "rollout: out of memory");
    sc->sq = sc->sum + ROLLOUT_METRICS * n, sc->count = sc->sum + 2 * ROLLOUT_METRICS * n;
    double mean = 0;
    for (int64_t r = 0; r < w->nlat; r++) mean += sc->wlat[r] = fmax(0.0, cos(w->lat[r] * DEG));
    mean /= (double)w->nlat;
    for (int64_t r = 0; r < w->nlat; r++) sc->wlat[r] = mean > 0 ? sc->wlat[r] / mean : 1.0;
    return BRISK_OK;
}

void rollout_scores_free(rollout_scores *sc) {
    free(sc->wlat);
    free(sc->sum);
    free(sc->skipped);
    free(sc->clim);
    memset(sc, 0, sizeof *sc);
}

/* The hour-of-day slot of time index t (0 when the units are not a date). */
static int slot_of(const brisk_weather *w, int64_t t, int slots) {
    if (slots == 1 || !(w->hours_per_unit > 0)) return 0;
    double h = fmod(w->base_hour + w->time[t] * w->hours_per_unit, 24.0);
    if (h < 0) h += 24;
    return (int)floor(h + 1e-6) % 24;
}

brisk_status rollout_climatology(rollout_scores *sc, brisk_weather *train, brisk_error *err) {
    int64_t G = train->grid, C = train->channels, T = train->split_time;
    int slots = train->hours_per_unit > 0 && 24 * G * C <= (INT64_C(1) << 26) ? 24 : 1;
    double *sum = calloc((size_t)((slots + 1) * G * C), sizeof(double));
    int32_t *n = calloc((size_t)((slots + 1) * G * C), sizeof(int32_t));
    float *state = malloc((size_t)(G * C) * sizeof(float));
    sc->clim = malloc((size_t)((slots + 1) * G * C) * sizeof(float));
    brisk_status st = !sum || !n || !state || !sc->clim ? brisk_errorf(err, BRISK_ERR_NOMEM, "rollout: out of memory") : BRISK_OK;
    for (int64_t t = 0; t < T && !st; t++) { /* the training times */
        int64_t missing;
        if ((st = brisk_weather_read(train, t, state, &missing, NULL, err))) break;
        int64_t base = (int64_t)slot_of(train, t, slots) * G * C, all = (int64_t)slots * G * C;
        for (int64_t i = 0; i < G * C; i++)
            if (!isnan(state[i])) sum[base + i] += state[i], n[base + i]++, sum[all + i] += state[i], n[all + i]++;
    }
    /* an hour of day the training times lack takes the mean of all of them */
    for (int64_t i = 0; !st && i < (slots + 1) * G * C; i++) {
        int64_t all = (int64_t)slots * G * C + i % (G * C);
        sc->clim[i] = n[i] ? (float)(sum[i] / n[i]) : n[all] ? (float)(sum[all] / n[all]) : NAN;
    }
    if (!st) sc->slots = slots, sc->clim_times = T;
    else free(sc->clim), sc->clim = NULL;
    free(sum);
    free(n);
    free(state);
    return st;
}

void rollout_scores_add(rollout_scores *sc, const brisk_weather *w, int64_t k, int64_t t, const float *f, const float *o,
                        const float *p) {
    int64_t C = w->channels, nlon = w->nlon;
    const float *cl = sc->clim ? sc->clim + (int64_t)slot_of(w, t, sc->slots) * w->grid * C : NULL;
    for (int64_t c = 0; c < C; c++) {
        double se = 0, pse = 0, wse = 0, wpse = 0, wb = 0, wsum = 0, sfo = 0, sff = 0, soo = 0;
        int64_t n = 0, skipped = 0;
        for (int64_t i = 0; i < w->grid; i++) {
            double truth = o[i * C + c];
            if (isnan(truth)) { skipped++; continue; }
            double wr = sc->wlat[i / nlon], e = f[i * C + c] - truth, pe = p[i * C + c] - truth;
            se += e * e, pse += pe * pe, n++;
            wse += wr * e * e, wpse += wr * pe * pe, wb += wr * e, wsum += wr;
            if (cl && !isnan(cl[i * C + c])) {
                double fa = f[i * C + c] - cl[i * C + c], oa = truth - cl[i * C + c];
                sfo += wr * fa * oa, sff += wr * fa * fa, soo += wr * oa * oa;
            }
        }
        size_t at = (size_t)(k * C + c), N = (size_t)(sc->steps * C);
        sc->skipped[at] += skipped;
        if (!n) continue; /* no truth at all: this start says nothing here */
        double m[ROLLOUT_METRICS] = {sqrt(se / n), wsum > 0 ? sqrt(wse / wsum) : NAN, wsum > 0 ? wb / wsum : NAN,
                                     cl && sff > 0 && soo > 0 ? sfo / sqrt(sff * soo) : NAN, sqrt(pse / n),
                                     wsum > 0 ? sqrt(wpse / wsum) : NAN};
        for (int j = 0; j < ROLLOUT_METRICS; j++)
            if (!isnan(m[j])) sc->sum[j * N + at] += m[j], sc->sq[j * N + at] += m[j] * m[j], sc->count[j * N + at] += 1;
    }
}

/* Mean and spread (sample standard deviation, 0 for one start) of metric j at (k, c). */
static void stats(const rollout_scores *sc, int j, int64_t k, int64_t c, double *mean, double *spread, double *n) {
    size_t at = (size_t)(j * sc->steps * sc->C + k * sc->C + c);
    *n = sc->count[at];
    *mean = *n ? sc->sum[at] / *n : NAN;
    *spread = *n > 1 ? sqrt(fmax(0.0, (sc->sq[at] - sc->sum[at] * sc->sum[at] / *n) / (*n - 1))) : 0;
}

static const char *const titles[ROLLOUT_METRICS] = {
    "RMSE of the forecast (the fields' units)",
    "latitude-weighted RMSE of the forecast (weights cos latitude)",
    "bias of the forecast (forecast - truth, latitude-weighted)",
    "ACC of the forecast (anomalies from the training years' climatology by hour of day, latitude-weighted)",
    "RMSE of persistence (the initial state kept)",
    "latitude-weighted RMSE of persistence",
};

void rollout_scores_print(const rollout_scores *sc, const brisk_weather *w, FILE *out, double step_h, int64_t starts) {
    for (int j = 0; j < ROLLOUT_METRICS; j++) {
        if (j == ROLLOUT_ACC && !sc->clim) continue;
        if (starts > 1) fprintf(out, "%s: mean +-spread over %lld start times\n", titles[j], (long long)starts);
        else fprintf(out, "%s\n", titles[j]);
        int width = starts > 1 ? 20 : 11;
        fprintf(out, "%8s", "lead_h");
        for (int c = 0; c < w->channels; c++) fprintf(out, " %*s", width, w->channel[c]);
        fprintf(out, "\n");
        for (int64_t k = 0; k < sc->steps; k++) {
            fprintf(out, "%8.4g", (double)(k + 1) * step_h);
            for (int c = 0; c < w->channels; c++) {
                double m, s, n;
                char cell[48];
                stats(sc, j, k, c, &m, &s, &n);
                if (!n) snprintf(cell, sizeof cell, "-");
                else if (starts > 1) snprintf(cell, sizeof cell, "%.5g +-%.2g", m, s);
                else snprintf(cell, sizeof cell, "%.5g", m);
                fprintf(out, " %*s", width, cell);
            }
            fprintf(out, "\n");
        }
    }
}

static void put_number(FILE *f, const char *key, double v) {
    if (isfinite(v)) fprintf(f, ", \"%s\": %.9g", key, v);
    else fprintf(f, ", \"%s\": null", key);
}

void rollout_scores_jsonl(const rollout_scores *sc, const brisk_weather *w, FILE *f, double step_h, int64_t starts,
                          const char *init, const char *const *valid) {
    for (int64_t k = 0; k < sc->steps; k++)
        for (int c = 0; c < w->channels; c++) {
            fprintf(f, "{\"lead\": %lld, \"hours\": %.6g", (long long)(k + 1), (double)(k + 1) * step_h);
            if (init) fprintf(f, ", \"init_time\": \"%s\", \"valid_time\": \"%s\"", init, valid[k]);
            fprintf(f, ", \"variable\": \"%s\", \"starts\": %lld", w->channel[c], (long long)starts);
            for (int j = 0; j < ROLLOUT_METRICS; j++) {
                if (j == ROLLOUT_ACC && !sc->clim) continue;
                double m, s, n;
                char key[64];
                stats(sc, j, k, c, &m, &s, &n);
                put_number(f, metric_key[j], m);
                snprintf(key, sizeof key, "%s_spread", metric_key[j]);
                if (starts > 1) put_number(f, key, s);
            }
            fprintf(f, ", \"missing\": %lld}\n", (long long)sc->skipped[k * w->channels + c]);
        }
}

int64_t rollout_scores_skipped(const rollout_scores *sc) {
    int64_t n = 0;
    for (int64_t i = 0; i < sc->steps * sc->C; i++) n += sc->skipped[i];
    return n;
}
