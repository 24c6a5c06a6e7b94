/* data-internal: the NetCDF file set under a weather dataset (netcdf_source.c), for the
 * dataset (netcdf_dataset.c) and the forecast writer (netcdf_write.c). Every netCDF call
 * goes through netcdf_lock(): the library keeps global state and is not thread-safe. */
#ifndef BRISK_DATA_NETCDF_INTERNAL_H
#define BRISK_DATA_NETCDF_INTERNAL_H

#include "brisk/data.h"

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
    int *varid;               /* [nfields] */
    double *scale, *offset, *fill, *missing; /* [nfields]; missing NAN when none */
} nc_file;

struct brisk_weather_source {
    int nfiles;
    nc_file *files;
    int nfields;
    nc_field *fields;
    int lat_flip;             /* the file's latitudes decrease: rows are read reversed */
    char lat_name[32], lon_name[32], time_units[128];
};

void netcdf_lock(void);
void netcdf_unlock(void);

/* Opens the files of spec->paths, checks coordinates, time and fields; fills w's sizes,
 * coordinates, channels and (statics NULL-terminated read into *statics [grid, S], raw). */
brisk_status netcdf_source_open(const brisk_weather_spec *spec, brisk_weather *w, float **statics, brisk_error *err);
/* The raw state at global time t into dst [grid, C]; a missing value becomes NaN and is
 * counted in *missing (the first one's description into first[256] when non-NULL). */
brisk_status netcdf_source_read(brisk_weather *w, int64_t t, float *dst, int64_t *missing, char *first,
                                 brisk_error *err);
void netcdf_source_free(brisk_weather_source *s);
/* netcdf_classic.c: refuses a classic-format buffer or file whose header counts exceed it,
 * or that is shorter than the data its header describes ("truncated: N of M bytes").
 * Other formats pass: libnetcdf (HDF5) checks them. */
brisk_status netcdf_classic_check(const void *buf, size_t len, const char *name, brisk_error *err);
brisk_status netcdf_classic_check_file(const char *path, brisk_error *err);

#endif
