/* data-internal: the NetCDF file set under a weather dataset (netcdf_source.c), for the
 * dataset (netcdf_dataset.c) and the forecast writer (netcdf_write.c). Every netCDF call
 * goes through netcdf_lock(): the library keeps global state and is not thread-safe. */
#ifndef BRISK_DATA_NETCDF_INTERNAL_H
#define BRISK_DATA_NETCDF_INTERNAL_H

#include "brisk/data.h"

#define NC_NAME_LEN 64 /* coordinate names kept (longer ones are refused) */

typedef struct nc_field {
    char name[BRISK_FIELD_NAME_MAX];
    int nlev;                 /* 1 for a 2-D field */
    char level_dim[BRISK_FIELD_NAME_MAX]; /* "" for a 2-D field */
    double *levels;           /* [nlev] the level coordinate's values (NULL: indices) */
    int channel0;             /* its first channel */
} nc_field;

typedef struct nc_file {
    char path[1024];
    int ncid;
    int64_t t0, nt;           /* its times are global indices [t0, t0 + nt) */
    int lat_flip;             /* its latitudes decrease: rows are read reversed */
    int64_t era5t, era5t_first; /* its times marked ERA5T by expver, the first one's index (-1) */
    int time_dim, lat_dim, lon_dim; /* the coordinates' dimensions */
    int *varid;               /* [nfields] */
    int *nexp;                /* [nfields] ERA5's old layout: the length of an expver dimension after time (else 1) */
    double *scale, *offset, *fill, *missing; /* [nfields]; missing NAN when none */
} nc_file;

struct brisk_weather_source {
    int nfiles;
    nc_file *files;
    int nfields;
    nc_field *fields;
    int lat_flip;             /* the first file's latitudes decrease (the forecast is written so) */
    char time_name[NC_NAME_LEN], lat_name[NC_NAME_LEN], lon_name[NC_NAME_LEN], time_units[128];
    char level_name[NC_NAME_LEN]; /* data.netcdf.coordinates.level ("": any dimension) */
    char static_path[1024];   /* the file the statics came from */
    double *lon_file;         /* the first file's longitudes as it stores them (w->lon is unwrapped) */
};

/* netcdf_coords.c: the axes and their checks. */
enum { NC_AXIS_TIME, NC_AXIS_LEVEL, NC_AXIS_LAT, NC_AXIS_LON, NC_AXES };
extern const char *const netcdf_axis_key[NC_AXES]; /* "time", "level", "lat", "lon" */
brisk_status netcdf_fail(const char *path, const char *what, int rc, brisk_error *err);
/* The variables of a file, "a, b, c", for a missing-variable error. */
void netcdf_list_vars(int ncid, char *out, size_t cap);
brisk_status netcdf_find_var(const char *path, int ncid, const char *name, int *varid, brisk_error *err);
/* The coordinate variable of an axis: `configured` (data.netcdf.coordinates.KEY) when
 * given, else the recognised names, a dimension coordinate before another 1-D variable;
 * two equally good ones are refused. name [NC_NAME_LEN]. */
brisk_status netcdf_find_axis(const char *path, int ncid, int axis, const char *configured, char *name, int *varid,
                              int *dimid, brisk_error *err);
/* The values of a level dimension's coordinate (its own variable, else the configured or a
 * recognised level variable over it) into a malloc'd *levels [nlev]; NULL when none. */
void netcdf_level_coord(int ncid, int dimid, const char *configured, int nlev, double **levels);
/* A 1-D coordinate's values (finite, 1 to 2^24 of them) into a malloc'd array. */
brisk_status netcdf_read_coord(const char *path, int ncid, int v, const char *name, double **out, int64_t *n,
                               brisk_error *err);
/* Equal steps (the graph is built for a regular grid), strictly monotone. */
brisk_status netcdf_check_regular(const char *path, const char *name, const double *c, int64_t n, int increasing_only,
                                  brisk_error *err);
/* Longitudes that pass 360 (or 180) mid-axis (350 ... 359.5, 0 ... 15) made one increasing
 * run (350 ... 375); returns how many times it wrapped. */
int netcdf_unwrap_lon(double *lon, int64_t n);
/* The times (of nt) that an expver variable over the time dimension marks ERA5T, the
 * preliminary data (the 2024+ CDS layout: strings "0001" / "0005"; also numbers), and the
 * first one's index in *first (-1 when none). */
int64_t netcdf_era5t_times(int ncid, int time_dim, int64_t nt, int64_t *first);
/* A text attribute into out[cap] ("" when absent, not text, or too long). */
void netcdf_att_text(int ncid, int v, const char *name, char *out, size_t cap);
/* Calendars whose days and dates are the Gregorian's (CF 4.4.1; "none" and "" too). */
int netcdf_gregorian(const char *calendar);
/* File f's times (time[nt], in its `units`) as the first file's: both units parsed as
 * instants (a unit and an epoch) and converted, else the same text required. */
brisk_status netcdf_same_time_axis(const brisk_weather_source *s, const nc_file *f, const brisk_weather *w,
                                  const char *units, const char *cal, double *time, int64_t nt, brisk_error *err);
/* The same longitude, modulo 360 (to 1e-6 degrees). */
int netcdf_same_lon(double a, double b);

void netcdf_lock(void);
void netcdf_unlock(void);

/* Opens the files of spec->paths, checks coordinates, time and fields; fills w's sizes,
 * coordinates, channels and (statics NULL-terminated read into *statics [grid, S], raw). */
brisk_status netcdf_source_open(const brisk_weather_spec *spec, brisk_weather *w, float **statics, brisk_error *err);
/* The raw state at global time t into dst [grid, C]; a missing value becomes NaN and is
 * counted in *missing (the first one's description into first[256] when non-NULL). */
/* The packing and missing-value attributes of variable v (netCDF's default fill for its
 * type when it has no _FillValue; missing NAN when no missing_value). */
void netcdf_value_atts(int ncid, int v, double *scale, double *offset, double *fill, double *missing);
/* netcdf_statics.c: spec's statics into a malloc'd *statics [grid, S] (raw units). */
brisk_status netcdf_statics_read(brisk_weather_source *s, const brisk_weather_spec *spec, brisk_weather *w,
                                 float **statics, brisk_error *err);
brisk_status netcdf_source_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                 brisk_error *err);
void netcdf_source_free(brisk_weather_source *s);
/* netcdf_classic.c: refuses a classic-format buffer or file whose header counts exceed it,
 * or that is shorter than the data its header describes ("truncated: N of M bytes").
 * Other formats pass: libnetcdf (HDF5) checks them. */
brisk_status netcdf_classic_check(const void *buf, size_t len, const char *name, brisk_error *err);
brisk_status netcdf_classic_check_file(const char *path, brisk_error *err);

#endif
