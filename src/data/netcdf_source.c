/* The NetCDF files of a weather dataset: which files (a list, directories, globs), their
 * shared grid and time axis, the fields by name, and reading one time step of every
 * field. Checks name the file and the variable: a file that is not NetCDF, a missing
 * variable (with those present), grids that differ between files, a time axis that does
 * not increase, fields of the wrong shape. Each file is read in its own orientation
 * (latitudes either way) and time units (converted to the first file's as instants). */
#include "data/netcdf_internal.h"

#include <dirent.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static pthread_mutex_t nc_mu = PTHREAD_MUTEX_INITIALIZER;
void netcdf_lock(void) { pthread_mutex_lock(&nc_mu); }
void netcdf_unlock(void) { pthread_mutex_unlock(&nc_mu); }


#if BRISK_HAVE_NETCDF
#include <netcdf.h>
#include <netcdf_mem.h>

int brisk_netcdf_available(void) { return 1; }

/* ---------------------------------------------------------------- the list of files */

typedef struct path_list {
    char **p;
    int n, cap;
} path_list;

static int list_add(path_list *l, const char *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char **p = realloc(l->p, (size_t)cap * sizeof *p);
        if (!p) return -1;
        l->p = p, l->cap = cap;
    }
    return (l->p[l->n] = strdup(s)) ? (l->n++, 0) : -1;
}

static void list_free(path_list *l) {
    for (int i = 0; i < l->n; i++) free(l->p[i]);
    free(l->p);
}

/* A directory gives its *.nc files, a pattern its matches (both sorted), else the path. */
static brisk_status expand(const char *path, path_list *l, brisk_error *err) {
    struct stat st;
    char pat[1100];
    int is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir && !strpbrk(path, "*?[")) {
        if (list_add(l, path)) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
        return BRISK_OK;
    }
    snprintf(pat, sizeof pat, is_dir ? "%s/*.nc" : "%s", path);
    glob_t g;
    int rc = glob(pat, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0) globfree(&g);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: no NetCDF files match%s", path, is_dir ? " (looked for *.nc in it)" : "");
    }
    if (rc) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot list the files it names", path);
    brisk_status s = BRISK_OK;
    for (size_t i = 0; i < g.gl_pathc && !s; i++)
        if (list_add(l, g.gl_pathv[i])) s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    globfree(&g);
    return s;
}

/* ---------------------------------------------------------------- coordinates */
/* ---------------------------------------------------------------- fields */

static double att_or(int ncid, int v, const char *att, double def) {
    double x;
    size_t len;
    if (nc_inq_attlen(ncid, v, att, &len) || len != 1 || nc_get_att_double(ncid, v, att, &x)) return def;
    return x;
}

static int dim_named(int ncid, int dim, const char *name) {
    char d[NC_MAX_NAME + 1];
    return nc_inq_dimname(ncid, dim, d) == NC_NOERR && strcmp(d, name) == 0;
}

/* The field's shape in one file: (time, lat, lon) or (time, level, lat, lon), either with
 * ERA5's old `expver` dimension after time. Sets the level count and dimension on first
 * sight. */
static brisk_status check_field(const brisk_weather_source *s, nc_file *f, int i, nc_field *fd, brisk_error *err) {
    int v = f->varid[i], nd, dims[NC_MAX_VAR_DIMS];
    nc_inq_varndims(f->ncid, v, &nd);
    if (nd > NC_MAX_VAR_DIMS || nd < 2 || nc_inq_vardimid(f->ncid, v, dims) || dims[nd - 2] != f->lat_dim ||
        dims[nd - 1] != f->lon_dim)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s': expected its last two dimensions to be %s and %s",
                            f->path, fd->name, s->lat_name, s->lon_name);
    int lead = nd - 2; /* dimensions before (lat, lon) */
    f->nexp[i] = 1;
    int k = 1; /* the dimension after time, and after expver when there is one */
    if (lead >= 2 && dims[0] == f->time_dim && dim_named(f->ncid, dims[1], "expver")) {
        size_t len = 0;
        nc_inq_dimlen(f->ncid, dims[1], &len);
        if (len < 1 || len > 16)
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s': an expver dimension of %zu (expected ERA5's "
                                "1 to 16 experiment versions)", f->path, fd->name, len);
        f->nexp[i] = (int)len, k = 2;
    }
    if (lead < k || lead > k + 1 || dims[0] != f->time_dim)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s': expected (%s, %s, %s) or (%s, level, %s, %s)",
                            f->path, fd->name, s->time_name, s->lat_name, s->lon_name, s->time_name, s->lat_name,
                            s->lon_name);
    int nlev = 1;
    char lname[NC_MAX_NAME + 1] = "";
    if (lead == k + 1) {
        size_t len;
        nc_inq_dimlen(f->ncid, dims[k], &len);
        nc_inq_dimname(f->ncid, dims[k], lname);
        nlev = (int)(len <= BRISK_WEATHER_MAX_CHANNELS ? len : BRISK_WEATHER_MAX_CHANNELS + 1);
        int lv, ld;
        if (s->level_name[0] && strcmp(lname, s->level_name) &&
            !(nc_inq_varid(f->ncid, s->level_name, &lv) == NC_NOERR && nc_inq_varndims(f->ncid, lv, &ld) == NC_NOERR &&
              ld == 1 && nc_inq_vardimid(f->ncid, lv, &ld) == NC_NOERR && ld == dims[k]))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s' has levels over '%s', not '%s' "
                                "(data.netcdf.coordinates.level)", f->path, fd->name, lname, s->level_name);
    }
    if (fd->nlev == 0) {
        fd->nlev = nlev;
        snprintf(fd->level_dim, sizeof fd->level_dim, "%s", lname);
        /* only a 1-D variable over the level dimension is its coordinate: one of the same
         * name over another dimension would overrun the nlev values (found by fuzz_netcdf) */
        if (lead == k + 1 && nlev <= BRISK_WEATHER_MAX_CHANNELS)
            netcdf_level_coord(f->ncid, dims[k], s->level_name, nlev, &fd->levels);
    } else if (fd->nlev != nlev || strcmp(fd->level_dim, lname) != 0) {
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s' has %d levels of '%s', but %s has %d of '%s'",
                            f->path, fd->name, nlev, lname, s->files[0].path, fd->nlev, fd->level_dim);
    }
    return BRISK_OK;
}

void netcdf_value_atts(int ncid, int v, double *scale, double *offset, double *fill, double *missing) {
    nc_type type = NC_FLOAT;
    nc_inq_vartype(ncid, v, &type);
    double def = type == NC_DOUBLE ? NC_FILL_DOUBLE : type == NC_SHORT ? NC_FILL_SHORT : type == NC_INT ? NC_FILL_INT
                 : type == NC_BYTE ? NC_FILL_BYTE : NC_FILL_FLOAT;
    *fill = att_or(ncid, v, "_FillValue", def);
    *missing = att_or(ncid, v, "missing_value", NAN);
    *scale = att_or(ncid, v, "scale_factor", 1.0);
    *offset = att_or(ncid, v, "add_offset", 0.0);
}

/* netCDF's default chunk cache is a few MiB shared badly across variables: give each
 * variable room for the chunks one sample touches (history + lead + 1 time steps of
 * every level over the whole grid). */
static void size_cache(const nc_file *f, int v, int64_t steps) {
    int nd, storage, dims[NC_MAX_VAR_DIMS];
    size_t chunk[NC_MAX_VAR_DIMS], len;
    if (nc_inq_varndims(f->ncid, v, &nd) || nd > NC_MAX_VAR_DIMS || nc_inq_var_chunking(f->ncid, v, &storage, chunk) ||
        storage != NC_CHUNKED || nc_inq_vardimid(f->ncid, v, dims))
        return;
    double count = 1, bytes = 4;
    for (int d = 0; d < nd; d++) {
        nc_inq_dimlen(f->ncid, dims[d], &len);
        size_t c = chunk[d] ? chunk[d] : 1;
        size_t want = d == 0 ? (size_t)steps : len; /* steps on the time axis, all of the others */
        count *= (double)((want + c - 1) / c + (d == 0));
        bytes *= (double)c;
    }
    double total = count * bytes;
    if (total > 512.0 * 1048576) total = 512.0 * 1048576;
    size_t slots = (size_t)(count * 4) | 1;
    nc_set_var_chunk_cache(f->ncid, v, (size_t)total, slots < 1009 ? 1009 : slots, 0.75f);
}

/* ---------------------------------------------------------------- opening */


static void reverse(double *v, int64_t n) {
    for (int64_t i = 0; i < n / 2; i++) {
        double x = v[i];
        v[i] = v[n - 1 - i], v[n - 1 - i] = x;
    }
}

static brisk_status open_file(brisk_weather_source *s, nc_file *f, const brisk_weather_spec *spec, brisk_weather *w,
                              double **time, int64_t *nt, brisk_error *err) {
    f->ncid = -1;
    brisk_status cs = spec->mem ? netcdf_classic_check(spec->mem, spec->mem_len, f->path, err)
                                : netcdf_classic_check_file(f->path, err);
    if (cs) return cs;
    int rc = spec->mem ? nc_open_mem(f->path, NC_NOWRITE, spec->mem_len, (void *)spec->mem, &f->ncid)
                       : nc_open(f->path, NC_NOWRITE, &f->ncid);
    if (rc) {
        f->ncid = -1;
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: not a NetCDF file this build can read (%s)", f->path,
                            nc_strerror(rc));
    }
    double *lat = NULL, *lon = NULL;
    int64_t nlat, nlon;
    char latn[NC_NAME_LEN], lonn[NC_NAME_LEN], timen[NC_NAME_LEN], units[128], cal[64];
    int vlat, vlon, vtime;
    brisk_status st;
    if ((st = netcdf_find_axis(f->path, f->ncid, NC_AXIS_LAT, spec->lat_name, latn, &vlat, &f->lat_dim, err)) ||
        (st = netcdf_find_axis(f->path, f->ncid, NC_AXIS_LON, spec->lon_name, lonn, &vlon, &f->lon_dim, err)) ||
        (st = netcdf_find_axis(f->path, f->ncid, NC_AXIS_TIME, spec->time_name, timen, &vtime, &f->time_dim, err)) ||
        (st = netcdf_read_coord(f->path, f->ncid, vlat, latn, &lat, &nlat, err)) ||
        (st = netcdf_read_coord(f->path, f->ncid, vlon, lonn, &lon, &nlon, err)) ||
        (st = netcdf_read_coord(f->path, f->ncid, vtime, timen, time, nt, err)) ||
        (st = netcdf_check_regular(f->path, latn, lat, nlat, 0, err)))
        goto out;
    f->lat_flip = nlat > 1 && lat[1] < lat[0];
    if (f->lat_flip) reverse(lat, nlat); /* rows south to north */
    if (f == s->files && !(s->lon_file = malloc((size_t)nlon * sizeof(double)))) {
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", f->path);
        goto out;
    }
    if (f == s->files) memcpy(s->lon_file, lon, (size_t)nlon * sizeof(double));
    int turns = netcdf_unwrap_lon(lon, nlon);
    if ((st = netcdf_check_regular(f->path, lonn, lon, nlon, 1, err))) goto out;
    f->era5t = netcdf_era5t_times(f->ncid, f->time_dim, *nt, &f->era5t_first);
    netcdf_att_text(f->ncid, vtime, "units", units, sizeof units);
    netcdf_att_text(f->ncid, vtime, "calendar", cal, sizeof cal);
    if (f == s->files) { /* the first file sets the grid and the time axis's units */
        snprintf(s->lat_name, sizeof s->lat_name, "%s", latn);
        snprintf(s->lon_name, sizeof s->lon_name, "%s", lonn);
        snprintf(s->time_name, sizeof s->time_name, "%s", timen);
        snprintf(s->time_units, sizeof s->time_units, "%s", units);
        if (nlat * nlon > (INT64_C(1) << 28)) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variables '%s' and '%s': a %lld x %lld grid is too large (over "
                              "2^28 points)", f->path, latn, lonn, (long long)nlat, (long long)nlon);
            goto out;
        }
        s->lat_flip = f->lat_flip;
        w->nlat = nlat, w->nlon = nlon, w->grid = nlat * nlon, w->lon_turns = turns;
        w->lat = lat, w->lon = lon, lat = lon = NULL;
        double unit_s, epoch_s;
        w->hours_per_unit = 0, w->epoch_s = NAN;
        if (!brisk_time_units_parse(units, &unit_s, &epoch_s)) {
            w->hours_per_unit = unit_s / 3600;
            w->base_hour = fmod(fmod(epoch_s, 86400) + 86400, 86400) / 3600;
            if (netcdf_gregorian(cal)) w->epoch_s = epoch_s;
        }
    } else {
        const char *bad = NULL;
        int64_t at = 0;
        if (nlat != w->nlat) bad = latn;
        else if (nlon != w->nlon) bad = lonn;
        for (int64_t i = 0; !bad && i < nlat; i++)
            if (fabs(lat[i] - w->lat[i]) > 1e-6) bad = latn, at = f->lat_flip ? nlat - 1 - i : i;
        for (int64_t i = 0; !bad && i < nlon; i++)
            if (!netcdf_same_lon(lon[i], w->lon[i])) bad = lonn, at = i;
        if (bad) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' differs from %s's (%lld x %lld grid; first "
                              "difference at index %lld): every file must have the same grid", f->path, bad,
                              s->files[0].path, (long long)w->nlat, (long long)w->nlon, (long long)at);
            goto out;
        }
        if ((st = netcdf_same_time_axis(s, f, w, units, cal, *time, *nt, err))) goto out;
    }
    for (int64_t i = 1; i < *nt; i++)
        if (!((*time)[i] > (*time)[i - 1])) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' is not increasing at index %lld (%g after %g)",
                              f->path, timen, (long long)i, (*time)[i], (*time)[i - 1]);
            goto out;
        }
out:
    free(lat);
    free(lon);
    return st;
}

static int by_first_time(const void *a, const void *b) {
    double x = **(double *const *)a, y = **(double *const *)b;
    return x < y ? -1 : x > y;
}

/* Looks up every field in file f and checks its shape there. */
static brisk_status file_fields(brisk_weather_source *s, nc_file *f, const brisk_weather_spec *spec, brisk_error *err) {
    int n = s->nfields;
    f->varid = calloc((size_t)n, sizeof(int));
    f->nexp = calloc((size_t)n, sizeof(int));
    f->scale = calloc((size_t)n * 4, sizeof(double));
    if (!f->varid || !f->nexp || !f->scale) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", f->path);
    f->offset = f->scale + n, f->fill = f->scale + 2 * n, f->missing = f->scale + 3 * n;
    for (int i = 0; i < spec->nvariables; i++) { /* the statics: netcdf_statics_read */
        brisk_status st = netcdf_find_var(f->path, f->ncid, s->fields[i].name, &f->varid[i], err);
        if (!st) st = check_field(s, f, i, &s->fields[i], err);
        if (st) return st;
        netcdf_value_atts(f->ncid, f->varid[i], &f->scale[i], &f->offset[i], &f->fill[i], &f->missing[i]);
        size_cache(f, f->varid[i], spec->history + spec->lead + 1);
    }
    return BRISK_OK;
}

brisk_status netcdf_source_open(const brisk_weather_spec *spec, brisk_weather *w, float **statics, brisk_error *err) {
    brisk_weather_source *s = calloc(1, sizeof *s);
    if (!s) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    w->src = s;
    w->epoch_s = NAN;
    path_list l = {0};
    brisk_status st = BRISK_OK;
    const char *names[] = {spec->time_name, spec->level_name, spec->lat_name, spec->lon_name};
    for (int a = 0; a < NC_AXES && !st; a++)
        if (names[a] && strlen(names[a]) >= NC_NAME_LEN)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "data.netcdf.coordinates.%s: '%.40s...' is longer than %d bytes",
                              netcdf_axis_key[a], names[a], NC_NAME_LEN - 1);
    if (!st && spec->level_name) snprintf(s->level_name, sizeof s->level_name, "%s", spec->level_name);
    if (!st && spec->mem && spec->npaths == 1 && list_add(&l, spec->paths[0]))
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < spec->npaths && !st && !spec->mem; i++) st = expand(spec->paths[i], &l, err);
    if (!st && l.n == 0) st = brisk_errorf(err, BRISK_ERR_INVALID, "no NetCDF files given");
    double **times = st ? NULL : calloc((size_t)l.n, sizeof *times);
    int64_t *nts = st ? NULL : calloc((size_t)l.n, sizeof *nts);
    s->files = st ? NULL : calloc((size_t)l.n, sizeof *s->files);
    s->nfields = spec->nvariables + spec->nstatics;
    s->fields = calloc((size_t)(s->nfields ? s->nfields : 1), sizeof *s->fields);
    if (!st && (!times || !nts || !s->files || !s->fields)) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->nfields && !st; i++) {
        const char *n = i < spec->nvariables ? spec->variables[i] : spec->statics[i - spec->nvariables];
        if (strlen(n) >= BRISK_FIELD_NAME_MAX - 8)
            st = brisk_errorf(err, BRISK_ERR_INVALID, "variable name '%.40s...' is too long", n);
        else snprintf(s->fields[i].name, sizeof s->fields[i].name, "%s", n);
    }
    netcdf_lock();
    for (int i = 0; i < l.n && !st; i++) {
        snprintf(s->files[i].path, sizeof s->files[i].path, "%s", l.p[i]);
        s->files[i].ncid = -1;
        s->nfiles = i + 1;
        st = open_file(s, &s->files[i], spec, w, &times[i], &nts[i], err);
    }
    /* one time axis: files in order of their first time, strictly increasing across them */
    if (!st && s->nfiles > 1) {
        struct { double *t; int64_t n; nc_file f; } *ord = malloc((size_t)s->nfiles * sizeof *ord);
        if (!ord) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < s->nfiles; i++) ord[i].t = times[i], ord[i].n = nts[i], ord[i].f = s->files[i];
        if (!st) qsort(ord, (size_t)s->nfiles, sizeof *ord, by_first_time);
        for (int i = 0; !st && i < s->nfiles; i++) times[i] = ord[i].t, nts[i] = ord[i].n, s->files[i] = ord[i].f;
        free(ord);
        for (int i = 1; !st && i < s->nfiles; i++)
            if (!(times[i][0] > times[i - 1][nts[i - 1] - 1])) {
                char a[48], b[48];
                brisk_weather_date(w, times[i][0], a, sizeof a);
                brisk_weather_date(w, times[i - 1][nts[i - 1] - 1], b, sizeof b);
                st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' starts at %s, not after the last time %s of "
                                  "%s: the files' times must increase and not overlap", s->files[i].path, s->time_name,
                                  a, b, s->files[i - 1].path);
            }
    }
    int64_t total = 0;
    for (int i = 0; !st && i < s->nfiles; i++) s->files[i].t0 = total, s->files[i].nt = nts[i], total += nts[i];
    if (!st && !(w->time = malloc((size_t)total * sizeof(double)))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < s->nfiles; i++) memcpy(w->time + s->files[i].t0, times[i], (size_t)nts[i] * sizeof(double));
    w->ntimes = total;
    w->era5t_first = -1;
    for (int i = 0; !st && i < s->nfiles; i++) {
        if (s->files[i].era5t && w->era5t_first < 0) w->era5t_first = s->files[i].t0 + s->files[i].era5t_first;
        w->era5t_times += s->files[i].era5t;
    }
    for (int i = 0; !st && i < s->nfiles; i++) st = file_fields(s, &s->files[i], spec, err);
    if (!st && !(w->hours_per_unit > 0) && spec->time_features)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' has units \"%s\"; time features need \"UNIT since "
                          "YYYY-MM-DD hh:mm:ss\" with UNIT seconds, minutes, hours or days", s->files[0].path,
                          s->time_name, s->time_units);
    netcdf_unlock();
    /* channels: a 2-D field is one, a 3-D field one per level */
    int C = 0;
    for (int i = 0; !st && i < spec->nvariables; i++) s->fields[i].channel0 = C, C += s->fields[i].nlev;
    if (!st && (C > BRISK_WEATHER_MAX_CHANNELS || C < 1))
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: %d channels (expected 1 to %d)", s->files[0].path, C,
                          BRISK_WEATHER_MAX_CHANNELS);
    if (!st && !(w->channel = calloc((size_t)C, sizeof *w->channel))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < spec->nvariables; i++)
        for (int k = 0; k < s->fields[i].nlev; k++) {
            char *c = w->channel[s->fields[i].channel0 + k];
            if (s->fields[i].nlev == 1 && !s->fields[i].level_dim[0]) snprintf(c, BRISK_FIELD_NAME_MAX, "%s", s->fields[i].name);
            else if (s->fields[i].levels) snprintf(c, BRISK_FIELD_NAME_MAX, "%s%g", s->fields[i].name, s->fields[i].levels[k]);
            else snprintf(c, BRISK_FIELD_NAME_MAX, "%s_%d", s->fields[i].name, k);
        }
    w->channels = C;
    w->nstatics = spec->nstatics;
    if (!st && spec->nstatics) st = netcdf_statics_read(s, spec, w, statics, err);
    if (times)
        for (int i = 0; i < l.n; i++) free(times[i]);
    free(times);
    free(nts);
    list_free(&l);
    return st;
}

/* The first of a point's experiment versions (ERA5's old layout: expver 1, then ERA5T's 5)
 * that holds a value; the first version's value when none does. */
static float first_version(const float *v, int64_t stride, int nexp, float fill, float miss) {
    for (int e = 0; e < nexp; e++) {
        float x = v[e * stride];
        if (isfinite(x) && x != fill && x != miss) return x;
    }
    return v[0];
}

brisk_status netcdf_source_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                 brisk_error *err) {
    brisk_weather_source *s = w->src;
    int fi = 0;
    while (fi + 1 < s->nfiles && t >= s->files[fi + 1].t0) fi++;
    const nc_file *f = &s->files[fi];
    int64_t G = w->grid, C = w->channels;
    int64_t most = 1;
    for (int i = 0; i < s->nfields - w->nstatics; i++)
        if ((int64_t)s->fields[i].nlev * f->nexp[i] > most) most = (int64_t)s->fields[i].nlev * f->nexp[i];
    float *buf = malloc((size_t)(G * most) * sizeof(float));
    if (!buf) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", f->path);
    brisk_status st = BRISK_OK;
    for (int i = 0; i < s->nfields - w->nstatics && !st; i++) {
        const nc_field *fd = &s->fields[i];
        int nexp = f->nexp[i], nd = 1;
        size_t start[5] = {(size_t)(t - f->t0), 0, 0, 0, 0}, count[5] = {1};
        if (nexp > 1) count[nd++] = (size_t)nexp;
        if (fd->level_dim[0]) count[nd++] = (size_t)fd->nlev;
        count[nd++] = (size_t)w->nlat, count[nd++] = (size_t)w->nlon;
        netcdf_lock();
        int rc = nc_get_vara_float(f->ncid, f->varid[i], start, count, buf);
        netcdf_unlock();
        if (rc) {
            st = brisk_errorf(err, BRISK_ERR_IO, "%s: variable '%s' at time index %lld: %s", f->path, fd->name,
                              (long long)(t - f->t0), nc_strerror(rc));
            break;
        }
        float fill = (float)f->fill[i], miss = (float)f->missing[i];
        int64_t stride = (int64_t)fd->nlev * G; /* between experiment versions */
        for (int k = 0; k < fd->nlev; k++)
            for (int64_t r = 0; r < w->nlat; r++) {
                const float *row = buf + ((int64_t)k * w->nlat + (f->lat_flip ? w->nlat - 1 - r : r)) * w->nlon;
                for (int64_t c = 0; c < w->nlon; c++) {
                    float v = nexp > 1 ? first_version(row + c, stride, nexp, fill, miss) : row[c];
                    float *o = &dst[(r * w->nlon + c) * C + fd->channel0 + k];
                    if (!isfinite(v) || v == fill || v == miss) {
                        if (first && (*missing)++ == 0) {
                            char date[48];
                            brisk_weather_date(w, w->time[t], date, sizeof date);
                            snprintf(first, 256, "%s: variable '%s' is missing (%s) at time index %lld (%s), level "
                                     "index %d, %s %g, %s %g", f->path, fd->name, isnan(v) ? "NaN" : isinf(v) ? "inf" :
                                     "fill value", (long long)(t - f->t0), date, k, s->lat_name, w->lat[r],
                                     s->lon_name, w->lon[c]);
                        } else if (!first) (*missing)++;
                        *o = NAN;
                    } else {
                        *o = (float)(v * f->scale[i] + f->offset[i]);
                    }
                }
            }
    }
    free(buf);
    return st;
}

void netcdf_source_free(brisk_weather_source *s) {
    if (!s) return;
    netcdf_lock();
    for (int i = 0; i < s->nfiles; i++) {
        if (s->files[i].ncid >= 0) nc_close(s->files[i].ncid);
        free(s->files[i].varid);
        free(s->files[i].nexp);
        free(s->files[i].scale);
    }
    netcdf_unlock();
    for (int i = 0; i < s->nfields; i++) free(s->fields[i].levels);
    free(s->lon_file);
    free(s->files);
    free(s->fields);
    free(s);
}

#else /* no libnetcdf */

int brisk_netcdf_available(void) { return 0; }

brisk_status netcdf_source_open(const brisk_weather_spec *spec, brisk_weather *w, float **statics, brisk_error *err) {
    (void)w, (void)statics;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: this brisk was built without NetCDF support (install "
                        "libnetcdf-dev and rebuild)", spec->npaths ? spec->paths[0] : "(no file)");
}

brisk_status netcdf_source_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                brisk_error *err) {
    (void)w, (void)t, (void)dst, (void)missing, (void)first;
    return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "this brisk was built without NetCDF support");
}

void netcdf_source_free(brisk_weather_source *s) { (void)s; }

#endif
