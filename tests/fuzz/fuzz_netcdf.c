/* libFuzzer target: the weather reader over one NetCDF file in memory (nc_open_mem, then
 * brisk's checks of coordinates, time, fields, missing values and the samples). Only the
 * classic formats (CDF-1, -2, -5: netCDF's own parser) are passed on: NetCDF-4 files are
 * HDF5, whose parser is a large third-party library brisk cannot fix, and whose known
 * crashes on corrupt files would only fail this run. Without libnetcdf: the clear error. */
#include "brisk/data.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4 || memcmp(data, "CDF", 3) != 0 || (data[3] != 1 && data[3] != 2 && data[3] != 5)) return 0;
    static const char *const vars[] = {"a", "b"}, *const statics[] = {"orog"}, *const paths[] = {"fuzz.nc"};
    brisk_weather_spec s = {.paths = paths, .npaths = 1, .variables = vars, .nvariables = 2, .statics = statics,
                            .nstatics = 1, .history = 2, .lead = 1, .validation_fraction = 0.25,
                            .mask_missing = data[size - 1] & 1, .time_features = 1, .mem = data, .mem_len = size};
    brisk_weather w;
    brisk_error err;
    if (brisk_weather_open(&s, &w, &err) != BRISK_OK) return 0;
    if (w.grid * (int64_t)w.inputs <= (1 << 20) && w.ds.count > 0) {
        float *x = malloc((size_t)(w.grid * w.inputs) * sizeof(float)), *y = malloc((size_t)(w.grid * w.channels) * sizeof(float));
        void *dst[2] = {x, y};
        if (x && y) w.ds.make(w.ds.make_user, w.ds.count - 1, 0, 0, dst, &err);
        free(x);
        free(y);
    }
    brisk_weather_free(&w);
    return 0;
}
