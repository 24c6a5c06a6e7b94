/* A forecast as NetCDF-4 (brisk_weather_write): the input's grid, levels and time axis
 * with their attributes, the fields with theirs (unpacked: float32, no scale_factor), so
 * that xarray and ncview open it like the input; CF's forecast coordinates (a scalar
 * forecast_reference_time, forecast_period over time), the input's history with the
 * rollout's line appended, and every file it came from named. Written to PATH.tmp, then
 * renamed. */
#include "data/bytes.h"
#include "data/netcdf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if BRISK_HAVE_NETCDF
#include <netcdf.h>

/* Copies the attributes of (in, iv) to (out, ov), except those that describe packing or
 * storage of the input. */
static int copy_atts(int in, int iv, int out, int ov) {
    int n = 0, rc = nc_inq_varnatts(in, iv, &n);
    for (int a = 0; a < n && !rc; a++) {
        char name[NC_MAX_NAME + 1];
        if ((rc = nc_inq_attname(in, iv, a, name))) break;
        if (!strcmp(name, "_FillValue") || !strcmp(name, "scale_factor") || !strcmp(name, "add_offset") ||
            !strcmp(name, "missing_value") || !strcmp(name, "valid_range") || !strcmp(name, "_NCProperties"))
            continue;
        rc = nc_copy_att(in, iv, name, out, ov);
    }
    return rc;
}

/* A 1-D coordinate (dimension and variable of the same name) with the input's attributes. */
static int coord(int in, int out, const char *name, size_t len, const double *v, int *dim) {
    int iv, ov, rc = nc_def_dim(out, name, len, dim);
    if (!rc) rc = nc_def_var(out, name, NC_DOUBLE, 1, dim, &ov);
    if (!rc && nc_inq_varid(in, name, &iv) == NC_NOERR) rc = copy_atts(in, iv, out, ov);
    if (!rc) rc = nc_enddef(out);
    if (!rc) rc = nc_put_var_double(out, ov, v);
    if (!rc) rc = nc_redef(out);
    return rc;
}

static int put_text(int nc, int v, const char *name, const char *text) {
    return nc_put_att_text(nc, v, name, strlen(text), text);
}

/* history (the input's, then a line "TIMESTAMP: info->history"), source_files (every data
 * file), static_file (a separate file of statics), checkpoint, and Conventions where the
 * input has none. */
static int provenance(int in, int out, const brisk_weather_source *s, const brisk_forecast_info *info) {
    size_t old = 0, cap = 0;
    nc_type type = NC_NAT;
    if (nc_inq_att(in, NC_GLOBAL, "history", &type, &old) || type != NC_CHAR) old = 0;
    for (int i = 0; i < s->nfiles; i++) cap += strlen(s->files[i].path) + 2;
    cap += old + strlen(info->history) + 64;
    char *text = malloc(cap), stamp[32];
    if (!text) return NC_ENOMEM;
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    int rc = old ? nc_get_att_text(in, NC_GLOBAL, "history", text) : NC_NOERR;
    while (old && (text[old - 1] == '\n' || text[old - 1] == 0)) old--;
    snprintf(text + old, cap - old, "%s%s: %s", old ? "\n" : "", stamp, info->history);
    if (!rc) rc = put_text(out, NC_GLOBAL, "history", text);
    text[0] = 0;
    for (int i = 0; i < s->nfiles; i++) snprintf(text + strlen(text), cap - strlen(text), "%s%s", i ? ", " : "", s->files[i].path);
    if (!rc) rc = put_text(out, NC_GLOBAL, "source_files", text);
    if (!rc && s->static_path[0] && strcmp(s->static_path, s->files[0].path))
        rc = put_text(out, NC_GLOBAL, "static_file", s->static_path);
    if (!rc && info->checkpoint) rc = put_text(out, NC_GLOBAL, "checkpoint", info->checkpoint);
    if (!rc && nc_inq_att(in, NC_GLOBAL, "Conventions", &type, &old) != NC_NOERR) rc = put_text(out, NC_GLOBAL, "Conventions", "CF-1.8");
    free(text);
    return rc;
}

/* The scalar forecast_reference_time (the time axis's units and calendar) and
 * forecast_period(time) in hours. */
static int forecast_coords(int in, int out, const brisk_weather_source *s, int dtime, size_t n,
                           const brisk_forecast_info *info) {
    int iv, vref, vlead, rc = nc_def_var(out, "forecast_reference_time", NC_DOUBLE, 0, NULL, &vref);
    static const char *const time_atts[] = {"units", "calendar", NULL};
    for (int a = 0; time_atts[a] && !rc; a++)
        if (nc_inq_varid(in, s->time_name, &iv) == NC_NOERR && nc_inq_att(in, iv, time_atts[a], NULL, NULL) == NC_NOERR)
            rc = nc_copy_att(in, iv, time_atts[a], out, vref);
    if (!rc) rc = put_text(out, vref, "standard_name", "forecast_reference_time");
    if (!rc) rc = put_text(out, vref, "long_name", "the time the forecast starts from (its initial state)");
    if (!rc) rc = nc_def_var(out, "forecast_period", NC_DOUBLE, 1, &dtime, &vlead);
    if (!rc) rc = put_text(out, vlead, "standard_name", "forecast_period");
    if (!rc) rc = put_text(out, vlead, "long_name", "lead time");
    if (!rc) rc = put_text(out, vlead, "units", "hours");
    if (!rc) rc = nc_enddef(out);
    if (!rc) rc = nc_put_var_double(out, vref, &info->init);
    if (!rc) rc = nc_put_vara_double(out, vlead, (size_t[]){0}, &n, info->lead_h);
    if (!rc) rc = nc_redef(out);
    return rc;
}

brisk_status brisk_weather_write(const brisk_weather *w, const char *path, int64_t n, const double *times,
                                 const float *values, const brisk_forecast_info *info, brisk_error *err) {
    const brisk_weather_source *s = w->src;
    int in = s->files[0].ncid, out = -1, rc, dlat, dlon, dtime;
    brisk_status there = brisk_out_folder_check(path, path, err);
    if (there) return there;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int64_t G = w->grid, C = w->channels;
    double *lat = malloc((size_t)w->nlat * sizeof(double));
    float *buf = malloc((size_t)(G * C) * sizeof(float)); /* one field's levels at one time */
    if (!lat || !buf) {
        free(lat), free(buf);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int64_t i = 0; i < w->nlat; i++) lat[i] = w->lat[s->lat_flip ? w->nlat - 1 - i : i];
    netcdf_lock();
    rc = nc_create(tmp, NC_NETCDF4 | NC_CLOBBER, &out);
    if (!rc) rc = copy_atts(in, NC_GLOBAL, out, NC_GLOBAL);
    if (!rc) rc = provenance(in, out, s, info);
    if (!rc) rc = coord(in, out, s->time_name, (size_t)n, times, &dtime);
    if (!rc) rc = forecast_coords(in, out, s, dtime, (size_t)n, info);
    if (!rc) rc = coord(in, out, s->lat_name, (size_t)w->nlat, lat, &dlat);
    if (!rc) rc = coord(in, out, s->lon_name, (size_t)w->nlon, s->lon_file, &dlon); /* as the input wraps them */
    int nvars = s->nfields - w->nstatics;
    int *ov = calloc((size_t)nvars, sizeof(int));
    if (!ov) rc = NC_ENOMEM;
    for (int i = 0; i < nvars && !rc; i++) {
        const nc_field *fd = &s->fields[i];
        int dims[4] = {dtime, dlat, dlon}, nd = 3;
        if (fd->level_dim[0]) {
            int ld;
            if (nc_inq_dimid(out, fd->level_dim, &ld) != NC_NOERR) {
                double *lv = malloc((size_t)fd->nlev * sizeof(double));
                if (!lv) { rc = NC_ENOMEM; break; }
                for (int k = 0; k < fd->nlev; k++) lv[k] = fd->levels ? fd->levels[k] : k;
                rc = coord(in, out, fd->level_dim, (size_t)fd->nlev, lv, &ld);
                free(lv);
            }
            dims[0] = dtime, dims[1] = ld, dims[2] = dlat, dims[3] = dlon, nd = 4;
        }
        if (!rc) rc = nc_def_var(out, fd->name, NC_FLOAT, nd, dims, &ov[i]);
        if (!rc) rc = copy_atts(in, s->files[0].varid[i], out, ov[i]);
        if (!rc) rc = put_text(out, ov[i], "coordinates", "forecast_reference_time forecast_period");
    }
    if (!rc) rc = nc_enddef(out);
    for (int i = 0; i < nvars && !rc; i++) {
        const nc_field *fd = &s->fields[i];
        for (int64_t t = 0; t < n && !rc; t++) {
            const float *v = values + t * G * C;
            for (int k = 0; k < fd->nlev; k++)
                for (int64_t r = 0; r < w->nlat; r++)
                    for (int64_t c = 0; c < w->nlon; c++)
                        buf[((int64_t)k * w->nlat + (s->lat_flip ? w->nlat - 1 - r : r)) * w->nlon + c] =
                            v[(r * w->nlon + c) * C + fd->channel0 + k];
            size_t start[4] = {(size_t)t, 0, 0, 0}, count[4] = {1, (size_t)fd->nlev, (size_t)w->nlat, (size_t)w->nlon};
            if (!fd->level_dim[0]) count[1] = (size_t)w->nlat, count[2] = (size_t)w->nlon;
            rc = nc_put_vara_float(out, ov[i], start, count, buf);
        }
    }
    free(ov);
    if (out >= 0) {
        int rc2 = nc_close(out);
        if (!rc) rc = rc2;
    }
    netcdf_unlock();
    free(lat);
    free(buf);
    if (rc) {
        remove(tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot write the forecast: %s", path, nc_strerror(rc));
    }
    if (rename(tmp, path)) {
        remove(tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot rename %s into place", path, tmp);
    }
    return BRISK_OK;
}

#else

brisk_status brisk_weather_write(const brisk_weather *w, const char *path, int64_t n, const double *times,
                                 const float *values, const brisk_forecast_info *info, brisk_error *err) {
    (void)w, (void)n, (void)times, (void)values, (void)info;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: this brisk was built without NetCDF support (install "
                        "libnetcdf-dev and rebuild)", path);
}

#endif
