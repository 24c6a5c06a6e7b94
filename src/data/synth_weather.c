/* `brisk synth weather`: a small regional data set as a real NetCDF-4 file with CF
 * coordinates (brisk_synth_weather). A 16 x 16 grid at 1 degree (lat 55..40 N, stored
 * north to south as ERA5 does; lon 0..15 E), hourly, with
 *   psi1, psi2  two smooth patterns (a few Fourier modes of slowly varying amplitude),
 *               advected by a wind that turns slowly, periodic over the domain;
 *   t2m   283 K - 6.5 K/km x orography + 6 psi1 + a diurnal cycle peaking at 15h local
 *         solar time, 5 K over land, 1.5 K over sea;
 *   msl   101300 Pa + 900 psi2;
 *   t     (level 850, 500, 250 hPa) 275 / 255 / 222 K + psi1 shifted upwind, diurnal at 850;
 *   z     geopotential height 1450 / 5600 / 10400 m + 80 / 120 / 150 psi2;
 *   orography (a mountain and hills) and lsm (land west of 11 E) as static fields;
 * and a little Philox noise, so that the next hour is predictable from the last two (the
 * advection and the cycle) but not exactly, and persistence is a real baseline. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/netcdf_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if BRISK_HAVE_NETCDF
#include <netcdf.h>

enum { NLAT = 16, NLON = 16, NLEV = 3, MODES = 4 };
static const double levels[NLEV] = {850, 500, 250};

typedef struct mode {
    double kx, ky, phase, amp, period, phase2;
} mode;

/* The pattern at (x, y) in domain units [0, 1), shifted by the advection (X, Y). */
static double pattern(const mode *m, double x, double y, double X, double Y, double t) {
    double v = 0;
    for (int i = 0; i < MODES; i++) {
        double a = m[i].amp * (1 + 0.4 * sin(2 * M_PI * t / m[i].period + m[i].phase2));
        v += a * sin(2 * M_PI * (m[i].kx * (x - X) + m[i].ky * (y - Y)) + m[i].phase);
    }
    return v;
}

static void draw_modes(uint64_t seed, uint32_t stream, mode *m) {
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int i = 0; i < MODES; i++) {
        const uint32_t ctr[4] = {(uint32_t)i, 0, stream, 7};
        uint32_t r[4];
        brisk_philox4x32(ctr, key, r);
        m[i].kx = 1 + r[0] % 2, m[i].ky = (double)(r[1] % 3) - 1;
        m[i].phase = 2 * M_PI * (r[2] / 4294967296.0);
        m[i].phase2 = 2 * M_PI * (r[3] / 4294967296.0);
        m[i].amp = 1.0 / (1 + i);
        m[i].period = 120 + 60 * i;
    }
}

#define CHECK(call) do { if (!rc) rc = (call); } while (0)

static int def_var(int nc, const char *name, int nd, const int *dims, const char *units, const char *long_name,
                   const char *standard, int *v) {
    int rc = nc_def_var(nc, name, NC_FLOAT, nd, dims, v);
    float fill = NC_FILL_FLOAT;
    size_t chunk[4] = {1, NLEV, NLAT, NLON};
    if (nd == 3) chunk[1] = NLAT, chunk[2] = NLON;
    if (nd >= 3) CHECK(nc_def_var_chunking(nc, *v, NC_CHUNKED, chunk));
    if (nd >= 3) CHECK(nc_def_var_deflate(nc, *v, 1, 1, 1));
    CHECK(nc_def_var_fill(nc, *v, 0, &fill));
    CHECK(nc_put_att_text(nc, *v, "units", strlen(units), units));
    CHECK(nc_put_att_text(nc, *v, "long_name", strlen(long_name), long_name));
    if (standard) CHECK(nc_put_att_text(nc, *v, "standard_name", strlen(standard), standard));
    return rc;
}

static int def_coord(int nc, const char *name, size_t len, const char *units, const char *standard, const char *axis,
                     int *dim, int *v) {
    int rc = nc_def_dim(nc, name, len, dim);
    CHECK(nc_def_var(nc, name, NC_DOUBLE, 1, dim, v));
    CHECK(nc_put_att_text(nc, *v, "units", strlen(units), units));
    if (standard) CHECK(nc_put_att_text(nc, *v, "standard_name", strlen(standard), standard));
    CHECK(nc_put_att_text(nc, *v, "axis", strlen(axis), axis));
    return rc;
}

brisk_status brisk_synth_weather(const char *path, int64_t times, uint64_t seed, brisk_error *err) {
    if (times < 4 || times > 1000000)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld times (expected 4 to 1000000)", path, (long long)times);
    brisk_status there = brisk_out_folder_check(path, path, err);
    if (there) return there;
    mode m1[MODES], m2[MODES];
    draw_modes(seed, 1, m1);
    draw_modes(seed, 2, m2);
    double lat[NLAT], lon[NLON], orog[NLAT][NLON], lsm[NLAT][NLON];
    for (int r = 0; r < NLAT; r++) lat[r] = 55.0 - r; /* north to south */
    for (int c = 0; c < NLON; c++) lon[c] = c;
    for (int r = 0; r < NLAT; r++)
        for (int c = 0; c < NLON; c++) {
            double x = c / (double)NLON, y = (55.0 - lat[r]) / NLAT;
            orog[r][c] = 1800 * exp(-((x - 0.4) * (x - 0.4) + (y - 0.55) * (y - 0.55)) / 0.01) +
                         250 * (1 + sin(2 * M_PI * (2 * x + y))) * (x < 0.7);
            lsm[r][c] = lon[c] < 11.0;
        }
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int nc = -1, rc, dt = 0, dl = 0, dla = 0, dlo = 0, vt = 0, vl = 0, vla = 0, vlo = 0, v2t = 0, vmsl = 0, vta = 0, vz = 0,
        vor = 0, vls = 0;
    netcdf_lock();
    rc = nc_create(tmp, NC_NETCDF4 | NC_CLOBBER, &nc);
    const char *title = "brisk synthetic regional weather (advected smooth fields with a diurnal cycle)";
    CHECK(nc_put_att_text(nc, NC_GLOBAL, "Conventions", 6, "CF-1.8"));
    CHECK(nc_put_att_text(nc, NC_GLOBAL, "title", strlen(title), title));
    CHECK(nc_put_att_text(nc, NC_GLOBAL, "source", 20, "brisk synth weather"));
    CHECK(nc_put_att_ulonglong(nc, NC_GLOBAL, "seed", NC_UINT64, 1, (const unsigned long long *)&seed));
    CHECK(def_coord(nc, "time", (size_t)times, "hours since 2021-01-01 00:00:00", "time", "T", &dt, &vt));
    CHECK(nc_put_att_text(nc, vt, "calendar", 8, "standard"));
    CHECK(def_coord(nc, "level", NLEV, "hPa", "air_pressure", "Z", &dl, &vl));
    CHECK(nc_put_att_text(nc, vl, "positive", 4, "down"));
    CHECK(def_coord(nc, "lat", NLAT, "degrees_north", "latitude", "Y", &dla, &vla));
    CHECK(def_coord(nc, "lon", NLON, "degrees_east", "longitude", "X", &dlo, &vlo));
    int d3[3] = {dt, dla, dlo}, d4[4] = {dt, dl, dla, dlo}, d2[2] = {dla, dlo};
    CHECK(def_var(nc, "t2m", 3, d3, "K", "2 metre temperature", "air_temperature", &v2t));
    CHECK(def_var(nc, "msl", 3, d3, "Pa", "mean sea level pressure", "air_pressure_at_mean_sea_level", &vmsl));
    CHECK(def_var(nc, "t", 4, d4, "K", "temperature", "air_temperature", &vta));
    CHECK(def_var(nc, "z", 4, d4, "m", "geopotential height", "geopotential_height", &vz));
    CHECK(def_var(nc, "orography", 2, d2, "m", "surface altitude", "surface_altitude", &vor));
    CHECK(def_var(nc, "lsm", 2, d2, "1", "land-sea mask (1 land)", "land_binary_mask", &vls));
    CHECK(nc_enddef(nc));
    double lv[NLEV];
    memcpy(lv, levels, sizeof lv);
    CHECK(nc_put_var_double(nc, vl, lv));
    CHECK(nc_put_var_double(nc, vla, lat));
    CHECK(nc_put_var_double(nc, vlo, lon));
    float f2[NLAT * NLON], f4[NLEV * NLAT * NLON], f4b[NLEV * NLAT * NLON], fm[NLAT * NLON];
    for (int r = 0; r < NLAT; r++)
        for (int c = 0; c < NLON; c++) f2[r * NLON + c] = (float)orog[r][c], fm[r * NLON + c] = (float)lsm[r][c];
    CHECK(nc_put_var_float(nc, vor, f2));
    CHECK(nc_put_var_float(nc, vls, fm));
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    double X = 0, Y = 0;
    for (int64_t t = 0; t < times && !rc; t++) {
        double th = (double)t, tv = th;
        CHECK(nc_put_var1_double(nc, vt, (size_t[]){(size_t)t}, &tv));
        /* the wind (domain units per hour) turns slowly; the patterns move with it */
        double ang = 0.6 + 0.8 * sin(2 * M_PI * th / 200.0), speed = 0.025 * (1 + 0.3 * sin(2 * M_PI * th / 90.0));
        X += speed * cos(ang), Y += speed * sin(ang);
        float *t2 = f2, *ms = fm;
        for (int r = 0; r < NLAT; r++)
            for (int c = 0; c < NLON; c++) {
                double x = c / (double)NLON, y = r / (double)NLAT, local = fmod(th + lon[c] / 15.0, 24.0);
                double diurnal = sin(2 * M_PI * (local - 9.0) / 24.0);
                double p1 = pattern(m1, x, y, X, Y, th), p2 = pattern(m2, x, y, X, Y, th);
                double p1u = pattern(m1, x, y, X - 0.05, Y, th);
                const uint32_t ctr[4] = {(uint32_t)(r * NLON + c), (uint32_t)t, (uint32_t)(t >> 32), 11};
                float z[4];
                brisk_philox_normal4(ctr, key, z);
                int i = r * NLON + c;
                t2[i] = (float)(283 - 0.0065 * orog[r][c] + 6 * p1 + (lsm[r][c] ? 5.0 : 1.5) * diurnal + 0.15 * z[0]);
                ms[i] = (float)(101300 + 900 * p2 + 20 * z[1]);
                const double tb[NLEV] = {275, 255, 222}, ta[NLEV] = {5, 4, 3}, zb[NLEV] = {1450, 5600, 10400},
                             za[NLEV] = {80, 120, 150};
                for (int k = 0; k < NLEV; k++) {
                    f4[k * NLAT * NLON + i] = (float)(tb[k] + ta[k] * p1u + (k == 0 ? 1.0 * lsm[r][c] * diurnal : 0) +
                                                      0.1 * z[2]);
                    f4b[k * NLAT * NLON + i] = (float)(zb[k] + za[k] * p2 + 2 * z[3]);
                }
            }
        size_t s3[3] = {(size_t)t, 0, 0}, c3[3] = {1, NLAT, NLON}, s4[4] = {(size_t)t, 0, 0, 0}, c4[4] = {1, NLEV, NLAT, NLON};
        CHECK(nc_put_vara_float(nc, v2t, s3, c3, t2));
        CHECK(nc_put_vara_float(nc, vmsl, s3, c3, ms));
        CHECK(nc_put_vara_float(nc, vta, s4, c4, f4));
        CHECK(nc_put_vara_float(nc, vz, s4, c4, f4b));
    }
    if (nc >= 0) {
        int rc2 = nc_close(nc);
        if (!rc) rc = rc2;
    }
    netcdf_unlock();
    if (rc) {
        remove(tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot write: %s", path, nc_strerror(rc));
    }
    if (rename(tmp, path)) {
        remove(tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot rename %s into place", path, tmp);
    }
    return BRISK_OK;
}

#else

brisk_status brisk_synth_weather(const char *path, int64_t times, uint64_t seed, brisk_error *err) {
    (void)times, (void)seed;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: this brisk was built without NetCDF support (install "
                        "libnetcdf-dev and rebuild)", path);
}

#endif
