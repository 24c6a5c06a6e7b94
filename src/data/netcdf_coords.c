/* The coordinates of a NetCDF weather file: which variable is the time, level, latitude
 * and longitude axis (a name the config gives, else the names archives use: the 2024+
 * CDS layout says valid_time and pressure_level, older files time and level, GRIB
 * conversions isobaricInhPa), reading one, and the checks the grid needs (regular steps;
 * longitudes that cross 0 or 180 degrees unwrapped into one increasing run); the time
 * axis of later files put on the first one's units, and the times expver marks ERA5T. */
#include "data/netcdf_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if BRISK_HAVE_NETCDF
#include <netcdf.h>

const char *const netcdf_axis_key[NC_AXES] = {"time", "level", "lat", "lon"};

/* Tried in order when the config names no variable for the axis. */
static const char *const recognised[NC_AXES][6] = {
    {"time", "valid_time", NULL},
    {"level", "pressure_level", "isobaricInhPa", "plev", "lev", NULL},
    {"lat", "latitude", NULL},
    {"lon", "longitude", NULL},
};

brisk_status netcdf_fail(const char *path, const char *what, int rc, brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s: %s", path, what, nc_strerror(rc));
}

void netcdf_list_vars(int ncid, char *out, size_t cap) {
    int n = 0;
    out[0] = 0;
    nc_inq_nvars(ncid, &n);
    for (int v = 0; v < n; v++) {
        char name[NC_MAX_NAME + 1];
        if (nc_inq_varname(ncid, v, name)) continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", v ? ", " : "", name);
    }
    if (!out[0]) snprintf(out, cap, "none");
}

brisk_status netcdf_find_var(const char *path, int ncid, const char *name, int *varid, brisk_error *err) {
    if (nc_inq_varid(ncid, name, varid) == NC_NOERR) return BRISK_OK;
    char present[600];
    netcdf_list_vars(ncid, present, sizeof present);
    return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no variable '%s' (present: %s)", path, name, present);
}

/* 2: a dimension coordinate (1-D over the dimension of its own name); 1: another 1-D
 * variable; 0: not a coordinate. */
static int coord_kind(int ncid, int v, int *dim) {
    int nd = 0;
    char vname[NC_MAX_NAME + 1], dname[NC_MAX_NAME + 1];
    if (nc_inq_varndims(ncid, v, &nd) || nd != 1 || nc_inq_vardimid(ncid, v, dim) || nc_inq_varname(ncid, v, vname) ||
        nc_inq_dimname(ncid, *dim, dname))
        return 0;
    return strcmp(vname, dname) == 0 ? 2 : 1;
}

brisk_status netcdf_find_axis(const char *path, int ncid, int axis, const char *configured, char *name, int *varid,
                              int *dimid, brisk_error *err) {
    const char *key = netcdf_axis_key[axis];
    char present[600];
    if (configured && configured[0]) {
        if (nc_inq_varid(ncid, configured, varid) != NC_NOERR) {
            netcdf_list_vars(ncid, present, sizeof present);
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no variable '%s', the %s coordinate of "
                                "data.netcdf.coordinates.%s (present: %s)", path, configured, key, key, present);
        }
        if (!coord_kind(ncid, *varid, dimid))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s' (data.netcdf.coordinates.%s): expected a 1-D "
                                "coordinate", path, configured, key);
        snprintf(name, NC_NAME_LEN, "%s", configured);
        return BRISK_OK;
    }
    int best = 0, tie = -1, kind, dim, v;
    char looked[200] = "";
    for (int i = 0; recognised[axis][i]; i++) {
        const char *cand = recognised[axis][i];
        snprintf(looked + strlen(looked), sizeof looked - strlen(looked), "%s'%s'", i ? ", " : "", cand);
        if (nc_inq_varid(ncid, cand, &v) != NC_NOERR || (kind = coord_kind(ncid, v, &dim)) == 0) continue;
        if (kind > best) best = kind, tie = -1, *varid = v, *dimid = dim, snprintf(name, NC_NAME_LEN, "%s", cand);
        else if (kind == best) tie = i;
    }
    if (best && tie >= 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: '%s' and '%s' could both be the %s coordinate: set "
                            "data.netcdf.coordinates.%s to the one to use", path, name, recognised[axis][tie], key, key);
    if (best) return BRISK_OK;
    netcdf_list_vars(ncid, present, sizeof present);
    return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no %s coordinate (looked for %s; present: %s): set "
                        "data.netcdf.coordinates.%s to its name", path, key, looked, present, key);
}

void netcdf_level_coord(int ncid, int dimid, const char *configured, int nlev, double **levels) {
    char dname[NC_MAX_NAME + 1];
    int v, dim, found = 0;
    *levels = NULL;
    if (nc_inq_dimname(ncid, dimid, dname)) return;
    /* the dimension's own coordinate, else a level variable over it */
    const char *own[3] = {dname, configured && configured[0] ? configured : NULL, NULL};
    const char *const *cands = own[1] ? own : recognised[NC_AXIS_LEVEL];
    found = nc_inq_varid(ncid, dname, &v) == NC_NOERR && coord_kind(ncid, v, &dim) && dim == dimid;
    for (int i = 0; !found && cands[i]; i++)
        found = nc_inq_varid(ncid, cands[i], &v) == NC_NOERR && coord_kind(ncid, v, &dim) && dim == dimid;
    if (!found || !(*levels = malloc((size_t)nlev * sizeof(double)))) return;
    if (nc_get_var_double(ncid, v, *levels) != NC_NOERR) {
        free(*levels);
        *levels = NULL;
    }
}

brisk_status netcdf_read_coord(const char *path, int ncid, int v, const char *name, double **out, int64_t *n,
                               brisk_error *err) {
    int dim, rc;
    size_t len;
    *out = NULL;
    if ((rc = nc_inq_vardimid(ncid, v, &dim)) || (rc = nc_inq_dimlen(ncid, dim, &len))) return netcdf_fail(path, name, rc, err);
    if (len < 1 || len > (1u << 24))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s' has %zu values (expected 1 to 2^24)", path, name, len);
    if (!(*out = malloc(len * sizeof **out))) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    if ((rc = nc_get_var_double(ncid, v, *out))) return netcdf_fail(path, name, rc, err);
    for (size_t i = 0; i < len; i++)
        if (!isfinite((*out)[i]))
            return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: variable '%s': value %zu is not finite", path, name, i);
    *n = (int64_t)len;
    return BRISK_OK;
}

brisk_status netcdf_check_regular(const char *path, const char *name, const double *c, int64_t n, int increasing_only,
                                  brisk_error *err) {
    if (n < 2) return BRISK_OK;
    double d = c[1] - c[0];
    if (d == 0 || (increasing_only && d < 0))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' is not strictly %s at index 1 (%g then %g)", path,
                            name, increasing_only ? "increasing" : "monotone", c[0], c[1]);
    for (int64_t i = 1; i < n; i++)
        if (fabs((c[i] - c[i - 1]) - d) > 1e-3 * fabs(d))
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' is not a regular axis: step %g at index %lld, "
                                "%g at index 1 (expected equal steps)", path, name, c[i] - c[i - 1], (long long)i, d);
    return BRISK_OK;
}

int netcdf_unwrap_lon(double *lon, int64_t n) {
    int turns = 0;
    double shift = 0;
    for (int64_t i = 1; i < n; i++) {
        double v = lon[i] + shift;
        /* a jump of more than half the circle back, and less than the whole, is the axis
         * passing 360 (or 180); a larger one is left for the regularity check to refuse (a
         * loop of turns would not end on 1e300, found by fuzz_netcdf) */
        if (v < lon[i - 1] - 180 && v + 360 >= lon[i - 1] - 180) v += 360, shift += 360, turns++;
        lon[i] = v;
    }
    return turns;
}

/* A text attribute into out[cap] ("" when absent, not text, or too long). */
void netcdf_att_text(int ncid, int v, const char *name, char *out, size_t cap) {
    size_t len = 0;
    nc_type type;
    out[0] = 0;
    if (nc_inq_att(ncid, v, name, &type, &len) == NC_NOERR && type == NC_CHAR && len < cap &&
        nc_get_att_text(ncid, v, name, out) == NC_NOERR)
        out[len] = 0;
}

/* Calendars whose days and dates are the Gregorian's (CF 4.4.1; "none" and absent too). */
int netcdf_gregorian(const char *cal) {
    static const char *const ok[] = {"", "standard", "gregorian", "proleptic_gregorian", "none", NULL};
    for (int i = 0; ok[i]; i++)
        if (!strcmp(cal, ok[i])) return 1;
    return 0;
}

/* The file's times as the first file's: both units parsed as instants (a unit and an
 * epoch), else the same text. */
brisk_status netcdf_same_time_axis(const brisk_weather_source *s, const nc_file *f, const brisk_weather *w,
                                  const char *units, const char *cal, double *time, int64_t nt, brisk_error *err) {
    double unit_s, epoch_s;
    if (!strcmp(units, s->time_units)) return BRISK_OK;
    if (brisk_time_units_parse(units, &unit_s, &epoch_s) || !(w->hours_per_unit > 0) || !isfinite(w->epoch_s) ||
        !netcdf_gregorian(cal))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' has units \"%s\"%s%s but %s's are \"%s\": expected "
                            "the same, or both \"UNIT since DATE\" in the Gregorian calendar (converted to one epoch)",
                            f->path, s->time_name, units, cal[0] ? ", calendar " : "", cal, s->files[0].path,
                            s->time_units);
    double scale = unit_s / (w->hours_per_unit * 3600), shift = (epoch_s - w->epoch_s) / (w->hours_per_unit * 3600);
    for (int64_t i = 0; i < nt; i++) time[i] = time[i] * scale + shift;
    return BRISK_OK;
}

/* ERA5T's experiment version: 5, however spelled ("5", "0005"). */
static int is_era5t(const char *v) {
    while (*v == '0' || *v == ' ') v++;
    return v[0] == '5' && (v[1] == 0 || v[1] == ' ');
}

int64_t netcdf_era5t_times(int ncid, int time_dim, int64_t nt, int64_t *first) {
    int v, nd = 0, dims[2];
    nc_type type;
    int64_t n = 0;
    *first = -1;
    if (nc_inq_varid(ncid, "expver", &v) || nc_inq_varndims(ncid, v, &nd) || nd < 1 || nd > 2 ||
        nc_inq_vardimid(ncid, v, dims) || dims[0] != time_dim || nc_inq_vartype(ncid, v, &type))
        return 0;
    if (type == NC_STRING && nd == 1) {
        char **text = calloc((size_t)nt, sizeof *text);
        if (text && nc_get_var_string(ncid, v, text) == NC_NOERR) {
            for (int64_t t = 0; t < nt; t++)
                if (text[t] && is_era5t(text[t]) && n++ == 0) *first = t;
            nc_free_string((size_t)nt, text);
        }
        free(text);
    } else if (type == NC_CHAR && nd == 2) { /* (time, characters) */
        size_t len = 0;
        nc_inq_dimlen(ncid, dims[1], &len);
        char *text = len && len < 64 ? calloc((size_t)nt * len + 1, 1) : NULL, one[64];
        if (text && nc_get_var_text(ncid, v, text) == NC_NOERR)
            for (int64_t t = 0; t < nt; t++) {
                memcpy(one, text + t * (int64_t)len, len);
                one[len] = 0;
                if (is_era5t(one) && n++ == 0) *first = t;
            }
        free(text);
    } else if (nd == 1 && type != NC_CHAR) {
        int *num = malloc((size_t)nt * sizeof(int));
        if (num && nc_get_var_int(ncid, v, num) == NC_NOERR)
            for (int64_t t = 0; t < nt; t++)
                if (num[t] == 5 && n++ == 0) *first = t;
        free(num);
    }
    return n;
}

int netcdf_same_lon(double a, double b) { return fabs(remainder(a - b, 360.0)) <= 1e-6; }

#endif
