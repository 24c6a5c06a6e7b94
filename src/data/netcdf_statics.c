/* The static fields of a weather dataset (orography, land-sea mask), read once: (lat, lon)
 * or the first time of (time, lat, lon), from the first data file. A static must be
 * complete: a missing value is refused, naming the point. */
#include "data/netcdf_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if BRISK_HAVE_NETCDF
#include <netcdf.h>

/* (lat, lon), or (time, lat, lon) of which the first time is read. */
static brisk_status check_shape(const brisk_weather_source *s, const nc_file *f, const char *name, int v,
                                brisk_error *err) {
    int nd = 0, dims[NC_MAX_VAR_DIMS];
    nc_inq_varndims(f->ncid, v, &nd);
    if (nd < 2 || nd > 3 || nc_inq_vardimid(f->ncid, v, dims) || dims[nd - 2] != f->lat_dim || dims[nd - 1] != f->lon_dim ||
        (nd == 3 && dims[0] != f->time_dim))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: static variable '%s': expected (%s, %s) or (%s, %s, %s)", f->path,
                            name, s->lat_name, s->lon_name, s->time_name, s->lat_name, s->lon_name);
    return BRISK_OK;
}

brisk_status netcdf_statics_read(brisk_weather_source *s, const brisk_weather_spec *spec, brisk_weather *w,
                                 float **statics, brisk_error *err) {
    int64_t G = w->grid, S = spec->nstatics;
    *statics = malloc((size_t)(G * S) * sizeof(float));
    float *buf = malloc((size_t)G * sizeof(float));
    brisk_status st = !*statics || !buf ? brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory") : BRISK_OK;
    const nc_file *f = &s->files[0];
    snprintf(s->static_path, sizeof s->static_path, "%s", f->path);
    netcdf_lock();
    for (int j = 0; !st && j < S; j++) {
        const char *name = s->fields[spec->nvariables + j].name;
        int v, nd = 0, rc;
        if ((st = netcdf_find_var(f->path, f->ncid, name, &v, err)) || (st = check_shape(s, f, name, v, err))) break;
        double scale, offset, fill, missing;
        netcdf_value_atts(f->ncid, v, &scale, &offset, &fill, &missing);
        nc_inq_varndims(f->ncid, v, &nd);
        size_t start[3] = {0}, count[3] = {1, (size_t)w->nlat, (size_t)w->nlon};
        if (nd == 2) count[0] = (size_t)w->nlat, count[1] = (size_t)w->nlon;
        if ((rc = nc_get_vara_float(f->ncid, v, start, count, buf))) {
            st = netcdf_fail(f->path, name, rc, err);
            break;
        }
        for (int64_t r = 0; r < w->nlat && !st; r++)
            for (int64_t c = 0; c < w->nlon; c++) {
                float x = buf[(f->lat_flip ? w->nlat - 1 - r : r) * w->nlon + c];
                if (!isfinite(x) || x == (float)fill || x == (float)missing) {
                    st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: static variable '%s' is missing (NaN or fill value) "
                                      "at %s %g, %s %g: a static field must be complete", f->path, name, s->lat_name,
                                      w->lat[r], s->lon_name, w->lon[c]);
                    break;
                }
                (*statics)[(r * w->nlon + c) * S + j] = (float)(x * scale + offset);
            }
    }
    netcdf_unlock();
    free(buf);
    return st;
}

#endif
