/* The NetCDF files of a weather dataset: which files (a list, directories, globs), their
 * shared grid and time axis, the fields by name, and reading one time step of every
 * field. Checks name the file and the variable: a file that is not NetCDF, a missing
 * variable (with those present), grids that differ between files, a time axis that does
 * not increase, fields of the wrong shape. */
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

static brisk_status nc_fail(const char *path, const char *what, int rc, brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s: %s", path, what, nc_strerror(rc));
}

/* The variables of a file, "a, b, c", for the missing-variable error. */
static void list_vars(int ncid, char *out, size_t cap) {
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

static brisk_status find_var(const char *path, int ncid, const char *name, int *varid, brisk_error *err) {
    if (nc_inq_varid(ncid, name, varid) == NC_NOERR) return BRISK_OK;
    char present[600];
    list_vars(ncid, present, sizeof present);
    return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no variable '%s' (present: %s)", path, name, present);
}

/* A 1-D coordinate variable (the first of two spellings) into a malloc'd array. */
static brisk_status read_coord(const char *path, int ncid, const char *a, const char *b, char *name, double **out,
                               int64_t *n, brisk_error *err) {
    int v, nd, dim;
    if (nc_inq_varid(ncid, a, &v) == NC_NOERR) snprintf(name, 32, "%s", a);
    else if (b && nc_inq_varid(ncid, b, &v) == NC_NOERR) snprintf(name, 32, "%s", b);
    else {
        char present[600];
        list_vars(ncid, present, sizeof present);
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no coordinate variable '%s'%s%s (present: %s)", path, a,
                            b ? " or " : "", b ? b : "", present);
    }
    size_t len;
    int rc = nc_inq_varndims(ncid, v, &nd);
    if (rc || nd != 1) return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s': expected a 1-D coordinate", path, name);
    if ((rc = nc_inq_vardimid(ncid, v, &dim)) || (rc = nc_inq_dimlen(ncid, dim, &len))) return nc_fail(path, name, rc, err);
    if (len < 1 || len > (1u << 24))
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s' has %zu values (expected 1 to 2^24)", path, name, len);
    if (!(*out = malloc(len * sizeof **out))) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    if ((rc = nc_get_var_double(ncid, v, *out))) return nc_fail(path, name, rc, err);
    for (size_t i = 0; i < len; i++)
        if (!isfinite((*out)[i]))
            return brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: variable '%s': value %zu is not finite", path, name, i);
    *n = (int64_t)len;
    return BRISK_OK;
}

/* Equal spacing (the graph is built for a regular grid), strictly monotone. */
static brisk_status check_regular(const char *path, const char *name, const double *c, int64_t n, int increasing_only,
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

/* "UNIT since YYYY-MM-DD[ T]hh[:mm[:ss]]": hours per unit and the reference's hour of day. */
static int parse_units(const char *u, double *hours, double *base_hour) {
    char unit[32];
    int y, mo, d, h = 0, mi = 0;
    double s = 0;
    if (sscanf(u, "%31s since %d-%d-%d%*[ T]%d:%d:%lf", unit, &y, &mo, &d, &h, &mi, &s) < 4) return -1;
    if (!strncmp(unit, "second", 6) || !strcmp(unit, "s")) *hours = 1.0 / 3600;
    else if (!strncmp(unit, "minute", 6)) *hours = 1.0 / 60;
    else if (!strncmp(unit, "hour", 4) || !strcmp(unit, "h")) *hours = 1.0;
    else if (!strncmp(unit, "day", 3)) *hours = 24.0;
    else return -1;
    *base_hour = h + mi / 60.0 + s / 3600.0;
    return 0;
}

/* ---------------------------------------------------------------- fields */

static double att_or(int ncid, int v, const char *att, double def) {
    double x;
    size_t len;
    if (nc_inq_attlen(ncid, v, att, &len) || len != 1 || nc_get_att_double(ncid, v, att, &x)) return def;
    return x;
}

/* The field's shape in one file: (time, lat, lon) or (time, level, lat, lon); statics
 * (lat, lon) or with a leading time. Sets the level count and dimension on first sight. */
static brisk_status check_field(const brisk_weather_source *s, const nc_file *f, int i, int is_static, int time_dim,
                                int lat_dim, int lon_dim, nc_field *fd, brisk_error *err) {
    int v = f->varid[i], nd, dims[NC_MAX_VAR_DIMS];
    nc_inq_varndims(f->ncid, v, &nd);
    if (nd > NC_MAX_VAR_DIMS || nd < 2 || nc_inq_vardimid(f->ncid, v, dims) ||
        dims[nd - 2] != lat_dim || dims[nd - 1] != lon_dim)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s': expected its last two dimensions to be %s and %s",
                            f->path, fd->name, s->lat_name, s->lon_name);
    int lead = nd - 2; /* dimensions before (lat, lon) */
    if (is_static) {
        if (lead > 1 || (lead == 1 && dims[0] != time_dim))
            return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: static variable '%s': expected (%s, %s) or (time, %s, %s)",
                                f->path, fd->name, s->lat_name, s->lon_name, s->lat_name, s->lon_name);
        fd->nlev = 1;
        return BRISK_OK;
    }
    if (lead < 1 || lead > 2 || dims[0] != time_dim)
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s': expected (time, %s, %s) or (time, level, %s, %s)",
                            f->path, fd->name, s->lat_name, s->lon_name, s->lat_name, s->lon_name);
    int nlev = 1;
    char lname[NC_MAX_NAME + 1] = "";
    if (lead == 2) {
        size_t len;
        nc_inq_dimlen(f->ncid, dims[1], &len);
        nc_inq_dimname(f->ncid, dims[1], lname);
        nlev = (int)(len <= BRISK_WEATHER_MAX_CHANNELS ? len : BRISK_WEATHER_MAX_CHANNELS + 1);
    }
    if (fd->nlev == 0) {
        fd->nlev = nlev;
        snprintf(fd->level_dim, sizeof fd->level_dim, "%s", lname);
        /* Only a 1-D variable over the level dimension is its coordinate: one of the same name
         * over another dimension would overrun the nlev values (found by fuzz_netcdf). */
        int lv, lnd = 0, ldim = -1;
        if (lead == 2 && nlev <= BRISK_WEATHER_MAX_CHANNELS && nc_inq_varid(f->ncid, lname, &lv) == NC_NOERR &&
            nc_inq_varndims(f->ncid, lv, &lnd) == NC_NOERR && lnd == 1 && nc_inq_vardimid(f->ncid, lv, &ldim) == NC_NOERR &&
            ldim == dims[1] && (fd->levels = malloc((size_t)nlev * sizeof(double))) && nc_get_var_double(f->ncid, lv, fd->levels)) {
            free(fd->levels);
            fd->levels = NULL;
        }
    } else if (fd->nlev != nlev || strcmp(fd->level_dim, lname) != 0) {
        return brisk_errorf(err, BRISK_ERR_SHAPE, "%s: variable '%s' has %d levels of '%s', but %s has %d of '%s'",
                            f->path, fd->name, nlev, lname, s->files[0].path, fd->nlev, fd->level_dim);
    }
    return BRISK_OK;
}

/* Attributes that change what a value means: packing and the missing-value markers. */
static void field_atts(nc_file *f, int i) {
    int v = f->varid[i];
    nc_type type = NC_FLOAT;
    nc_inq_vartype(f->ncid, v, &type);
    double def = type == NC_DOUBLE ? NC_FILL_DOUBLE : type == NC_SHORT ? NC_FILL_SHORT : type == NC_INT ? NC_FILL_INT
                 : type == NC_BYTE ? NC_FILL_BYTE : NC_FILL_FLOAT;
    f->fill[i] = att_or(f->ncid, v, "_FillValue", def);
    f->missing[i] = att_or(f->ncid, v, "missing_value", NAN);
    f->scale[i] = att_or(f->ncid, v, "scale_factor", 1.0);
    f->offset[i] = att_or(f->ncid, v, "add_offset", 0.0);
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
    char latn[32], lonn[32], timen[32];
    brisk_status st;
    if ((st = read_coord(f->path, f->ncid, "lat", "latitude", latn, &lat, &nlat, err)) ||
        (st = read_coord(f->path, f->ncid, "lon", "longitude", lonn, &lon, &nlon, err)) ||
        (st = read_coord(f->path, f->ncid, "time", NULL, timen, time, nt, err)))
        goto out;
    if (f == s->files) { /* the first file sets the grid */
        snprintf(s->lat_name, sizeof s->lat_name, "%s", latn);
        snprintf(s->lon_name, sizeof s->lon_name, "%s", lonn);
        if ((st = check_regular(f->path, latn, lat, nlat, 0, err)) || (st = check_regular(f->path, lonn, lon, nlon, 1, err)))
            goto out;
        if (nlat * nlon > (INT64_C(1) << 28)) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variables '%s' and '%s': a %lld x %lld grid is too large (over "
                              "2^28 points)", f->path, latn, lonn, (long long)nlat, (long long)nlon);
            goto out;
        }
        s->lat_flip = nlat > 1 && lat[1] < lat[0];
        w->nlat = nlat, w->nlon = nlon, w->grid = nlat * nlon;
        w->lat = malloc((size_t)nlat * sizeof(double));
        w->lon = lon, lon = NULL;
        if (!w->lat) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", f->path); goto out; }
        for (int64_t i = 0; i < nlat; i++) w->lat[i] = lat[s->lat_flip ? nlat - 1 - i : i];
        size_t ul = 0;
        int tv;
        if (nc_inq_varid(f->ncid, "time", &tv) == NC_NOERR && nc_inq_attlen(f->ncid, tv, "units", &ul) == NC_NOERR &&
            ul < sizeof s->time_units)
            nc_get_att_text(f->ncid, tv, "units", s->time_units);
    } else {
        const char *bad = NULL;
        int64_t at = 0;
        if (nlat != w->nlat || strcmp(latn, s->lat_name)) bad = latn;
        else if (nlon != w->nlon || strcmp(lonn, s->lon_name)) bad = lonn;
        for (int64_t i = 0; !bad && i < nlat; i++)
            if (fabs(lat[i] - w->lat[s->lat_flip ? nlat - 1 - i : i]) > 1e-6) bad = latn, at = i;
        for (int64_t i = 0; !bad && i < nlon; i++)
            if (fabs(lon[i] - w->lon[i]) > 1e-6) bad = lonn, at = i;
        if (bad) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable '%s' differs from %s's (%lld x %lld grid; first "
                              "difference at index %lld): every file must have the same grid", f->path, bad,
                              s->files[0].path, (long long)w->nlat, (long long)w->nlon, (long long)at);
            goto out;
        }
        char units[128] = "";
        size_t ul = 0;
        int tv;
        if (nc_inq_varid(f->ncid, "time", &tv) == NC_NOERR && nc_inq_attlen(f->ncid, tv, "units", &ul) == NC_NOERR &&
            ul < sizeof units)
            nc_get_att_text(f->ncid, tv, "units", units);
        if (strcmp(units, s->time_units)) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable 'time' has units \"%s\" but %s's are \"%s\" (expected "
                              "the same in every file)", f->path, units, s->files[0].path, s->time_units);
            goto out;
        }
    }
    for (int64_t i = 1; i < *nt; i++)
        if (!((*time)[i] > (*time)[i - 1])) {
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable 'time' is not increasing at index %lld (%g after %g)",
                              f->path, (long long)i, (*time)[i], (*time)[i - 1]);
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
    int time_dim, lat_dim, lon_dim;
    if (nc_inq_dimid(f->ncid, "time", &time_dim) || nc_inq_dimid(f->ncid, s->lat_name, &lat_dim) ||
        nc_inq_dimid(f->ncid, s->lon_name, &lon_dim))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: expected dimensions time, %s and %s named like their coordinate "
                            "variables", f->path, s->lat_name, s->lon_name);
    int n = s->nfields;
    f->varid = calloc((size_t)n, sizeof(int));
    f->scale = calloc((size_t)n * 4, sizeof(double));
    if (!f->varid || !f->scale) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", f->path);
    f->offset = f->scale + n, f->fill = f->scale + 2 * n, f->missing = f->scale + 3 * n;
    int first = f == s->files;
    for (int i = 0; i < n; i++) {
        int is_static = i >= spec->nvariables;
        if (is_static && !first) continue; /* statics are read once, from the first file */
        brisk_status st = find_var(f->path, f->ncid, s->fields[i].name, &f->varid[i], err);
        if (!st) st = check_field(s, f, i, is_static, time_dim, lat_dim, lon_dim, &s->fields[i], err);
        if (st) return st;
        field_atts(f, i);
        if (!is_static) size_cache(f, f->varid[i], spec->history + spec->lead + 1);
    }
    return BRISK_OK;
}

brisk_status netcdf_source_open(const brisk_weather_spec *spec, brisk_weather *w, float **statics, brisk_error *err) {
    brisk_weather_source *s = calloc(1, sizeof *s);
    if (!s) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    w->src = s;
    path_list l = {0};
    brisk_status st = BRISK_OK;
    if (spec->mem && spec->npaths == 1 && list_add(&l, spec->paths[0])) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
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
            if (!(times[i][0] > times[i - 1][nts[i - 1] - 1]))
                st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable 'time' starts at %g, not after the last time %g of "
                                  "%s: the files' times must increase and not overlap", s->files[i].path, times[i][0],
                                  times[i - 1][nts[i - 1] - 1], s->files[i - 1].path);
    }
    int64_t total = 0;
    for (int i = 0; !st && i < s->nfiles; i++) s->files[i].t0 = total, s->files[i].nt = nts[i], total += nts[i];
    if (!st && !(w->time = malloc((size_t)total * sizeof(double)))) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < s->nfiles; i++) memcpy(w->time + s->files[i].t0, times[i], (size_t)nts[i] * sizeof(double));
    w->ntimes = total;
    for (int i = 0; !st && i < s->nfiles; i++) st = file_fields(s, &s->files[i], spec, err);
    w->hours_per_unit = 0;
    if (!st && parse_units(s->time_units, &w->hours_per_unit, &w->base_hour) && spec->time_features)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: variable 'time' has units \"%s\"; time features need \"UNIT since "
                          "YYYY-MM-DD hh:mm:ss\" with UNIT seconds, minutes, hours or days", s->files[0].path,
                          s->time_units);
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
            if (s->fields[i].nlev == 1) snprintf(c, BRISK_FIELD_NAME_MAX, "%s", s->fields[i].name);
            else if (s->fields[i].levels) snprintf(c, BRISK_FIELD_NAME_MAX, "%s%g", s->fields[i].name, s->fields[i].levels[k]);
            else snprintf(c, BRISK_FIELD_NAME_MAX, "%s_%d", s->fields[i].name, k);
        }
    w->channels = C;
    w->nstatics = spec->nstatics;
    /* the statics, once */
    if (!st && spec->nstatics) {
        *statics = malloc((size_t)(w->grid * spec->nstatics) * sizeof(float));
        float *buf = malloc((size_t)w->grid * sizeof(float));
        if (!*statics || !buf) st = brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory");
        const nc_file *f = &s->files[0];
        netcdf_lock();
        for (int j = 0; !st && j < spec->nstatics; j++) {
            int i = spec->nvariables + j, nd = 0, rc;
            nc_inq_varndims(f->ncid, f->varid[i], &nd);
            size_t start[3] = {0}, count[3] = {1, (size_t)w->nlat, (size_t)w->nlon};
            if (nd == 2) count[0] = (size_t)w->nlat, count[1] = (size_t)w->nlon;
            if ((rc = nc_get_vara_float(f->ncid, f->varid[i], start, count, buf))) {
                st = nc_fail(f->path, s->fields[i].name, rc, err);
                break;
            }
            for (int64_t r = 0; r < w->nlat && !st; r++)
                for (int64_t c = 0; c < w->nlon; c++) {
                    float v = buf[(s->lat_flip ? w->nlat - 1 - r : r) * w->nlon + c];
                    if (!isfinite(v) || v == (float)f->fill[i] || v == (float)f->missing[i]) {
                        st = brisk_errorf(err, BRISK_ERR_NUMERIC, "%s: static variable '%s' is missing (NaN or fill value) "
                                          "at %s %g, %s %g: a static field must be complete", f->path, s->fields[i].name,
                                          s->lat_name, w->lat[r], s->lon_name, w->lon[c]);
                        break;
                    }
                    (*statics)[(r * w->nlon + c) * spec->nstatics + j] = (float)(v * f->scale[i] + f->offset[i]);
                }
        }
        netcdf_unlock();
        free(buf);
    }
    if (times)
        for (int i = 0; i < l.n; i++) free(times[i]);
    free(times);
    free(nts);
    list_free(&l);
    return st;
}

brisk_status netcdf_source_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                 brisk_error *err) {
    brisk_weather_source *s = w->src;
    int fi = 0;
    while (fi + 1 < s->nfiles && t >= s->files[fi + 1].t0) fi++;
    const nc_file *f = &s->files[fi];
    int64_t G = w->grid, C = w->channels;
    int maxlev = 1;
    for (int i = 0; i < s->nfields - w->nstatics; i++) maxlev = s->fields[i].nlev > maxlev ? s->fields[i].nlev : maxlev;
    float *buf = malloc((size_t)(G * maxlev) * sizeof(float));
    if (!buf) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", f->path);
    brisk_status st = BRISK_OK;
    for (int i = 0; i < s->nfields - w->nstatics && !st; i++) {
        const nc_field *fd = &s->fields[i];
        size_t start[4] = {(size_t)(t - f->t0), 0, 0, 0}, count[4] = {1, (size_t)fd->nlev, (size_t)w->nlat, (size_t)w->nlon};
        if (fd->nlev == 1 && !fd->level_dim[0]) count[1] = (size_t)w->nlat, count[2] = (size_t)w->nlon;
        netcdf_lock();
        int rc = nc_get_vara_float(f->ncid, f->varid[i], start, count, buf);
        netcdf_unlock();
        if (rc) {
            st = brisk_errorf(err, BRISK_ERR_IO, "%s: variable '%s' at time index %lld: %s", f->path, fd->name,
                              (long long)(t - f->t0), nc_strerror(rc));
            break;
        }
        float fill = (float)f->fill[i], miss = (float)f->missing[i];
        for (int k = 0; k < fd->nlev; k++)
            for (int64_t r = 0; r < w->nlat; r++) {
                const float *row = buf + ((int64_t)k * w->nlat + (s->lat_flip ? w->nlat - 1 - r : r)) * w->nlon;
                for (int64_t c = 0; c < w->nlon; c++) {
                    float v = row[c];
                    float *o = &dst[(r * w->nlon + c) * C + fd->channel0 + k];
                    if (!isfinite(v) || v == fill || v == miss) {
                        if (first && (*missing)++ == 0)
                            snprintf(first, 256, "%s: variable '%s' is missing (%s) at time index %lld (time %g), level "
                                     "index %d, %s %g, %s %g", f->path, fd->name, isnan(v) ? "NaN" : isinf(v) ? "inf" :
                                     "fill value", (long long)(t - f->t0), w->time[t], k, s->lat_name, w->lat[r],
                                     s->lon_name, w->lon[c]);
                        else if (!first) (*missing)++;
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
        free(s->files[i].scale);
    }
    netcdf_unlock();
    for (int i = 0; i < s->nfields; i++) free(s->fields[i].levels);
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
