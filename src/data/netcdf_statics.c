/* The static fields of a weather dataset (orography, land-sea mask), read once. ERA5 keeps
 * them in an invariants file of its own (often global while the data are regional), so a
 * static comes from spec->static_file when that holds it, else from the first data file:
 * (lat, lon) or the first index of (time, lat, lon), at the data's grid points found by
 * their coordinates. A name that is also a predicted variable (ERA5's z: the surface
 * geopotential there, geopotential on pressure levels in the data) is said which is which
 * (w->statics_note); a level field asked for as a static is refused with the key that
 * points to the invariants file. A static must be complete: a missing value is refused,
 * naming the point. */
#include "data/netcdf_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if BRISK_HAVE_NETCDF
#include <netcdf.h>

/* An open file of statics and where each data grid point is in it. */
typedef struct static_file {
    const char *path;
    int ncid, lat_dim, lon_dim, flip;
    int64_t nlat, nlon;
    int64_t *row, *col; /* [w->nlat], [w->nlon]: the file's row / column of each data row / column */
} static_file;

/* "name(dim, dim, ...)" of variable v, for messages and the note. */
static void describe(int ncid, int v, const char *name, char *out, size_t cap) {
    int nd = 0, dims[NC_MAX_VAR_DIMS];
    snprintf(out, cap, "%s(", name);
    if (nc_inq_varndims(ncid, v, &nd) || nd > NC_MAX_VAR_DIMS || nc_inq_vardimid(ncid, v, dims)) nd = 0;
    for (int d = 0; d < nd; d++) {
        char dn[NC_MAX_NAME + 1] = "?";
        nc_inq_dimname(ncid, dims[d], dn);
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", d ? ", " : "", dn);
    }
    snprintf(out + strlen(out), cap - strlen(out), ")");
}

/* The index in c[n] of value x (to 1e-4 degrees; modulo 360 for longitudes), or -1. */
static int64_t index_of(const double *c, int64_t n, double x, int lon) {
    for (int64_t i = 0; i < n; i++)
        if (lon ? fabs(remainder(c[i] - x, 360.0)) <= 1e-4 : fabs(c[i] - x) <= 1e-4) return i;
    return -1;
}

/* Opens spec->static_file and places the data's grid in its own. */
static brisk_status open_static(const brisk_weather_spec *spec, const brisk_weather *w, static_file *sf, brisk_error *err) {
    const brisk_weather_source *s = w->src;
    double *lat = NULL, *lon = NULL;
    char latn[NC_NAME_LEN], lonn[NC_NAME_LEN];
    int vlat, vlon, rc;
    brisk_status st = netcdf_classic_check_file(sf->path, err);
    if (st) return st;
    if ((rc = nc_open(sf->path, NC_NOWRITE, &sf->ncid))) {
        sf->ncid = -1;
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s (data.netcdf.static_file): not a NetCDF file this build can read "
                            "(%s)", sf->path, nc_strerror(rc));
    }
    if ((st = netcdf_find_axis(sf->path, sf->ncid, NC_AXIS_LAT, spec->lat_name, latn, &vlat, &sf->lat_dim, err)) ||
        (st = netcdf_find_axis(sf->path, sf->ncid, NC_AXIS_LON, spec->lon_name, lonn, &vlon, &sf->lon_dim, err)) ||
        (st = netcdf_read_coord(sf->path, sf->ncid, vlat, latn, &lat, &sf->nlat, err)) ||
        (st = netcdf_read_coord(sf->path, sf->ncid, vlon, lonn, &lon, &sf->nlon, err)))
        goto out;
    if (sf->nlat * sf->nlon > (INT64_C(1) << 28)) {
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: a %lld x %lld grid of statics is too large (over 2^28 points)",
                          sf->path, (long long)sf->nlat, (long long)sf->nlon);
        goto out;
    }
    sf->row = malloc((size_t)w->nlat * sizeof(int64_t));
    sf->col = malloc((size_t)w->nlon * sizeof(int64_t));
    if (!sf->row || !sf->col) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", sf->path); goto out; }
    for (int64_t r = 0; r < w->nlat && !st; r++)
        if ((sf->row[r] = index_of(lat, sf->nlat, w->lat[r], 0)) < 0)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s (data.netcdf.static_file): '%s' has no %s %g of the data's grid "
                              "(it runs from %g to %g): the statics must cover the data's grid points", sf->path, latn,
                              s->lat_name, w->lat[r], lat[0], lat[sf->nlat - 1]);
    for (int64_t c = 0; c < w->nlon && !st; c++)
        if ((sf->col[c] = index_of(lon, sf->nlon, w->lon[c], 1)) < 0)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s (data.netcdf.static_file): '%s' has no %s %g of the data's grid "
                              "(it runs from %g to %g): the statics must cover the data's grid points", sf->path, lonn,
                              s->lon_name, w->lon[c], lon[0], lon[sf->nlon - 1]);
out:
    free(lat);
    free(lon);
    return st;
}

/* (lat, lon) or (one leading dimension, lat, lon) of file (ncid, lat_dim, lon_dim); a
 * level field (time, level, lat, lon) is named as one. */
static brisk_status check_shape(const brisk_weather_source *s, const char *path, int ncid, int lat_dim, int lon_dim,
                                const char *name, int v, int from_data, brisk_error *err) {
    int nd = 0, dims[NC_MAX_VAR_DIMS];
    char d[200];
    nc_inq_varndims(ncid, v, &nd);
    describe(ncid, v, name, d, sizeof d);
    if (nd >= 2 && nd <= NC_MAX_VAR_DIMS && !nc_inq_vardimid(ncid, v, dims) && dims[nd - 2] == lat_dim &&
        dims[nd - 1] == lon_dim && nd <= 3)
        return BRISK_OK;
    if (nd == 4)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: static '%s' is a level field, %s; a static is a surface field "
                            "(%s, %s) or its first time%s", path, name, d, s->lat_name, s->lon_name,
                            from_data ? ": ERA5 keeps surface fields such as the geopotential z (orography) in its "
                            "invariants file; give that file as data.netcdf.static_file" : "");
    return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: static variable '%s' is %s: expected (%s, %s) or (time, %s, %s)", path,
                        name, d, s->lat_name, s->lon_name, s->lat_name, s->lon_name);
}

/* One static into out[(r * nlon + c) * S] in raw units, refusing a missing value. */
static brisk_status read_one(const brisk_weather *w, const char *path, int ncid, int v, const char *name, int64_t fnlat,
                             int64_t fnlon, int flip, const int64_t *row, const int64_t *col, float *buf, float *out,
                             int64_t S, brisk_error *err) {
    const brisk_weather_source *s = w->src;
    int nd = 0, rc;
    nc_inq_varndims(ncid, v, &nd);
    size_t start[3] = {0}, count[3] = {1, (size_t)fnlat, (size_t)fnlon};
    if (nd == 2) count[0] = (size_t)fnlat, count[1] = (size_t)fnlon;
    if ((rc = nc_get_vara_float(ncid, v, start, count, buf))) return netcdf_fail(path, name, rc, err);
    double scale, offset, fill, missing;
    netcdf_value_atts(ncid, v, &scale, &offset, &fill, &missing);
    for (int64_t r = 0; r < w->nlat; r++)
        for (int64_t c = 0; c < w->nlon; c++) {
            int64_t fr = row ? row[r] : flip ? w->nlat - 1 - r : r, fc = col ? col[c] : c;
            float x = buf[fr * fnlon + fc];
            if (!isfinite(x) || x == (float)fill || x == (float)missing)
                return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: static variable '%s' is missing (NaN or fill value) at "
                                    "%s %g, %s %g: a static field must be complete", path, name, s->lat_name, w->lat[r],
                                    s->lon_name, w->lon[c]);
            out[(r * w->nlon + c) * S] = (float)(x * scale + offset);
        }
    return BRISK_OK;
}

/* The note for a static read from `path` whose name is also a predicted variable. */
static void note_shared(brisk_weather *w, const char *name, const char *path, const char *desc) {
    const brisk_weather_source *s = w->src;
    for (int i = 0; i < s->nfields - w->nstatics; i++) {
        if (strcmp(s->fields[i].name, name)) continue;
        size_t len = strlen(w->statics_note);
        snprintf(w->statics_note + len, sizeof w->statics_note - len, "%s'%s' is two fields: the static is %s's %s, the "
                 "variable the data files' %s%s", len ? "; " : "", name, path, desc, name,
                 s->fields[i].level_dim[0] ? " on levels" : " over time");
    }
}

brisk_status netcdf_statics_read(brisk_weather_source *s, const brisk_weather_spec *spec, brisk_weather *w,
                                 float **statics, brisk_error *err) {
    int64_t G = w->grid, S = spec->nstatics;
    const nc_file *f = &s->files[0];
    static_file sf = {.path = spec->static_file, .ncid = -1};
    float *buf = NULL;
    *statics = malloc((size_t)(G * S) * sizeof(float));
    brisk_status st = !*statics ? brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory") : BRISK_OK;
    netcdf_lock();
    if (!st && sf.path && sf.path[0]) st = open_static(spec, w, &sf, err);
    int64_t most = sf.ncid >= 0 && sf.nlat * sf.nlon > G ? sf.nlat * sf.nlon : G;
    if (!st && !(buf = malloc((size_t)most * sizeof(float)))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    snprintf(s->static_path, sizeof s->static_path, "%s", sf.ncid >= 0 ? sf.path : f->path);
    for (int j = 0; !st && j < S; j++) {
        const char *name = s->fields[spec->nvariables + j].name;
        int v;
        char desc[200];
        if (sf.ncid >= 0 && nc_inq_varid(sf.ncid, name, &v) == NC_NOERR) { /* the invariants file first */
            describe(sf.ncid, v, name, desc, sizeof desc);
            if (!(st = check_shape(s, sf.path, sf.ncid, sf.lat_dim, sf.lon_dim, name, v, 0, err)))
                st = read_one(w, sf.path, sf.ncid, v, name, sf.nlat, sf.nlon, 0, sf.row, sf.col, buf, *statics + j, S, err);
            note_shared(w, name, sf.path, desc);
            continue;
        }
        if (nc_inq_varid(f->ncid, name, &v) != NC_NOERR) {
            char present[600], also[700] = "";
            netcdf_list_vars(f->ncid, present, sizeof present);
            if (sf.ncid >= 0) {
                char in_static[600];
                netcdf_list_vars(sf.ncid, in_static, sizeof in_static);
                snprintf(also, sizeof also, "; nor in %s of data.netcdf.static_file (present: %s)", sf.path, in_static);
            }
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no variable '%s' (present: %s)%s", f->path, name, present, also);
            break;
        }
        describe(f->ncid, v, name, desc, sizeof desc);
        if (!(st = check_shape(s, f->path, f->ncid, f->lat_dim, f->lon_dim, name, v, 1, err)))
            st = read_one(w, f->path, f->ncid, v, name, w->nlat, w->nlon, f->lat_flip, NULL, NULL, buf, *statics + j, S, err);
        note_shared(w, name, f->path, desc);
    }
    if (sf.ncid >= 0) nc_close(sf.ncid);
    netcdf_unlock();
    free(sf.row);
    free(sf.col);
    free(buf);
    return st;
}

#endif
