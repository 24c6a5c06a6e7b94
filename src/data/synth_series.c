/* The synthetic "series": a price with multi-timeframe features, for the sequence
 * examples. Log returns follow
 *   r_t = a m_{t-1} - b (log p_{t-1} - ema20_{t-1}) + s_t eps_t
 * with m a slow AR(1) trend (phi 0.98, unit variance), a pull back to a 20-step moving
 * average, and a volatility s_t = s0 exp(v_t) (1 + 0.3 sin(2 pi t / 96)) whose log v_t is
 * its own slow AR(1) regime with an intraday cycle. The trend and the pull are what a
 * model can learn: with a = s0, b = 0.1 the change over the next 5 steps binned at
 * +-0.5 s0 sqrt(5) (about 36/28/36% down/flat/up) is predicted ~45% right by a linear
 * model on the return features (chance ~36%), more by models that see the window.
 *
 * Columns, each a row's view of the past only: close (100 p_t); ret_k = log p_t -
 * log p_{t-k} for k = 1 .. 128; dev_k = log p_t - EMA_k(log p) and vol_k =
 * sqrt(EMA_k(r^2)) for k = 4 .. 512; volume (rising with |r| and the regime), volume_dev,
 * the hour and day cycles as sin/cos, spread (noisy volatility) and a pure noise column.
 * 1024 rows of burn-in are simulated first so the averages have settled. Random numbers
 * come from Philox with counter {row lo, row hi, stream, 0}: the series is a pure
 * function of the seed (and a longer series starts with the shorter one). */
#include "data/synth_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { SCALES = 8, BURN_IN = 1024, DAY = 96, WEEK = 672 };
enum { S_SERIES = 101 };
#define S0 0.001
#define NCOLS (1 + 3 * SCALES + 8)

static const char *const extra_names[8] = {"volume", "volume_dev", "hour_sin", "hour_cos",
                                           "day_sin", "day_cos", "spread", "noise"};

int brisk_synth_series_columns(char names[][16]) {
    int c = 0;
    snprintf(names[c++], 16, "close");
    for (int k = 0; k < SCALES; k++) snprintf(names[c++], 16, "ret_%d", 1 << k);
    for (int k = 0; k < SCALES; k++) snprintf(names[c++], 16, "dev_%d", 4 << k);
    for (int k = 0; k < SCALES; k++) snprintf(names[c++], 16, "vol_%d", 4 << k);
    for (int k = 0; k < 8; k++) snprintf(names[c++], 16, "%s", extra_names[k]);
    return c;
}

typedef struct series_state {
    double m, v, lp, ema20, ema[SCALES], var[SCALES], lvol_ema;
    double hist[256]; /* log p of the last rows, a ring (lags up to 128) */
} series_state;

/* Advances one row; writes its columns into out (NULL during burn-in). */
static void step(series_state *s, uint64_t seed, int64_t t, float *out) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint64_t row = (uint64_t)(t + BURN_IN);
    const uint32_t ctr[4] = {(uint32_t)row, (uint32_t)(row >> 32), S_SERIES, 0};
    const uint32_t ctr2[4] = {(uint32_t)row, (uint32_t)(row >> 32), S_SERIES + 1, 0};
    float z[8];
    brisk_philox_normal4(ctr, key, z);
    brisk_philox_normal4(ctr2, key, z + 4);
    const double phi = 0.98, vphi = 0.995;
    double cyc = 1.0 + 0.3 * sin(2 * M_PI * (double)t / DAY);
    double sd = S0 * exp(s->v) * cyc;
    double r = S0 * s->m - 0.1 * (s->lp - s->ema20) + sd * z[0];
    s->m = phi * s->m + sqrt(1 - phi * phi) * z[1];
    s->v = vphi * s->v + 0.3 * sqrt(1 - vphi * vphi) * z[2];
    s->lp += r;
    s->ema20 += (s->lp - s->ema20) / 20.0;
    for (int k = 0; k < SCALES; k++) {
        double n = (double)(4 << k);
        s->ema[k] += (s->lp - s->ema[k]) / n;
        s->var[k] += (r * r - s->var[k]) / n;
    }
    double lvol = 0.5 * s->v + 40.0 * fabs(r) / (S0 * 100.0) + 0.2 * z[3];
    s->lvol_ema += (lvol - s->lvol_ema) / 32.0;
    int64_t at = (t + BURN_IN) % 256;
    s->hist[at] = s->lp;
    if (!out) return;
    int c = 0;
    out[c++] = (float)(100.0 * exp(s->lp));
    for (int k = 0; k < SCALES; k++) out[c++] = (float)(s->lp - s->hist[(at - (1 << k) + 256) % 256]);
    for (int k = 0; k < SCALES; k++) out[c++] = (float)(s->lp - s->ema[k]);
    for (int k = 0; k < SCALES; k++) out[c++] = (float)sqrt(s->var[k]);
    out[c++] = (float)exp(lvol);
    out[c++] = (float)(lvol - s->lvol_ema);
    out[c++] = (float)sin(2 * M_PI * (double)t / DAY);
    out[c++] = (float)cos(2 * M_PI * (double)t / DAY);
    out[c++] = (float)sin(2 * M_PI * (double)t / WEEK);
    out[c++] = (float)cos(2 * M_PI * (double)t / WEEK);
    out[c++] = (float)(sd * (1.0 + 0.2 * fabs(z[4])));
    out[c++] = z[5];
}

brisk_status brisk_synth_series(int64_t n, uint64_t seed, brisk_dataset *ds, brisk_error *err) {
    char names[NCOLS][16];
    brisk_synth_series_columns(names);
    brisk_tensor cols[NCOLS];
    memset(cols, 0, sizeof cols);
    brisk_status st = BRISK_OK;
    for (int c = 0; c < NCOLS && !st; c++) st = brisk_tensor_alloc(&cols[c], BRISK_F32, brisk_shape1(n), err);
    series_state s;
    memset(&s, 0, sizeof s);
    float row[NCOLS];
    for (int64_t t = -BURN_IN; !st && t < n; t++) {
        step(&s, seed, t, t >= 0 ? row : NULL);
        for (int c = 0; t >= 0 && c < NCOLS; c++) ((float *)cols[c].data)[t] = row[c];
    }
    for (int c = 0; c < NCOLS; c++) {
        if (!st) st = brisk_dataset_add(ds, names[c], &cols[c], err);
        else brisk_tensor_free(&cols[c]);
    }
    return st;
}
