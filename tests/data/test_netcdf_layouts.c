/* NetCDF files as archives lay them out, written by ncgen (another tool than brisk): the
 * 2024+ CDS names (valid_time in int64 seconds since 1970, pressure_level, latitude,
 * longitude, number, expver), coordinate names from the config and the error naming the
 * key to set, time units compared as instants (another spelling, epoch or unit of the same
 * axis), ERA5's old expver dimension merged, longitudes that pass 0 degrees, and statics
 * from ERA5's separate invariants file. Without ncgen: skipped (77). */
#include "netcdf_test_util.h"

/* A CDS-style file of a 3 x 2 grid (latitude 50, 49.75, 49.5 descending; longitude 10,
 * 10.25), 3 hours from 2024-01-01T00 as seconds since 1970: t2m = 200 + 10 t + row + 0.5
 * col, t(pressure_level 850, 500) = 250 + 10 level + t. */
static const char *cds_cdl(const char *name, const char *time_name, const char *extra) {
    static char text[8192];
    char t2m[512] = "", t[512] = "";
    for (int k = 0; k < 3; k++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 2; c++) {
                snprintf(t2m + strlen(t2m), sizeof t2m - strlen(t2m), "%s%g", k || r || c ? ", " : "",
                         200 + 10.0 * k + r + 0.5 * c);
            }
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 2; l++)
            for (int i = 0; i < 6; i++)
                snprintf(t + strlen(t), sizeof t - strlen(t), "%s%d", k || l || i ? ", " : "", 250 + 10 * l + k);
    snprintf(text, sizeof text,
             "netcdf %s {\ndimensions:\n %s = 3 ;\n pressure_level = 2 ;\n latitude = 3 ;\n longitude = 2 ;\n"
             "variables:\n int64 number ;\n int64 %s(%s) ;\n  %s:units = \"seconds since 1970-01-01\" ;\n"
             "  %s:calendar = \"proleptic_gregorian\" ;\n double pressure_level(pressure_level) ;\n"
             "  pressure_level:units = \"hPa\" ;\n double latitude(latitude) ;\n double longitude(longitude) ;\n"
             " string expver(%s) ;\n float t2m(%s, latitude, longitude) ;\n float t(%s, pressure_level, latitude, "
             "longitude) ;\n%s"
             "data:\n number = 0 ;\n %s = 1704067200, 1704070800, 1704074400 ;\n pressure_level = 850, 500 ;\n"
             " latitude = 50, 49.75, 49.5 ;\n longitude = 10, 10.25 ;\n expver = \"0001\", \"0001\", \"0005\" ;\n"
             " t2m = %s ;\n t = %s ;\n}\n",
             name, time_name, time_name, time_name, time_name, time_name, time_name, time_name, time_name, extra,
             time_name, t2m, t);
    return text;
}

static const char *cds_vars[] = {"t2m", "t"};

static brisk_weather_spec cds_spec(const char *const *paths) {
    return (brisk_weather_spec){.paths = paths, .npaths = 1, .variables = cds_vars, .nvariables = 2, .history = 1,
                                .lead = 1, .time_features = 1};
}

/* The current CDS layout reads as it is: names recognised, int64 seconds as hours of day,
 * descending latitude, one channel per pressure level. */
static void cds_layout(void) {
    const char *p = path_of("cds.nc");
    REQUIRE(ncgen(p, cds_cdl("cds", "valid_time", "")) == 0);
    const char *paths[] = {p};
    brisk_weather_spec s = cds_spec(paths);
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.ntimes == 3 && w.nlat == 3 && w.nlon == 2 && w.channels == 3);
    CHECK(!strcmp(w.channel[0], "t2m") && !strcmp(w.channel[1], "t850") && !strcmp(w.channel[2], "t500"));
    CHECK(w.lat[0] == 49.5 && w.lat[2] == 50);
    CHECK(w.epoch_s == 0 && fabs(w.hours_per_unit - 1.0 / 3600) < 1e-15);
    CHECK(w.era5t_times == 1 && w.era5t_first == 2); /* expver "0005": ERA5T */
    char date[48];
    brisk_weather_date(&w, w.time[1], date, sizeof date);
    CHECKF(!strcmp(date, "2024-01-01T01:00"), "%s", date);
    float st[6 * 3];
    REQUIRE_OK(brisk_weather_state(&w, 2, st, &e), &e);
    /* brisk row 0 is latitude 49.5, the file's row 2 */
    CHECK_NEAR(st[(0 * 2 + 1) * 3 + 0], 200 + 20 + 2 + 0.5, 0);
    CHECK_NEAR(st[(2 * 2 + 0) * 3 + 2], 250 + 10 + 2, 0);
    /* time features: the local solar hour of 02:00 UTC at longitude 10.25 */
    float x[6 * 5], y[6 * 3];
    void *dst[2] = {x, y};
    REQUIRE_OK(w.ds.make(w.ds.make_user, 1, 0, 0, dst, &e), &e);
    double hour = 1 + 10.25 / 15;
    CHECK_NEAR(x[1 * 5 + 3], sin(2 * M_PI * hour / 24), 1e-5);
    brisk_weather_free(&w);
}

/* Coordinates named in the spec (data.netcdf.coordinates); unknown names get the error
 * saying which key to set; two recognised candidates are not guessed between. */
static void coordinate_names(void) {
    const char *p = path_of("date.nc");
    REQUIRE(ncgen(p, cds_cdl("date", "date", "")) == 0);
    const char *paths[] = {p};
    brisk_weather_spec s = cds_spec(paths);
    expect_error(&s, BRISK_ERR_INVALID, "date.nc: no time coordinate (looked for 'time', 'valid_time'; present: number, "
                 "date,", "set data.netcdf.coordinates.time to its name");
    s.time_name = "date";
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.ntimes == 3 && w.time[2] == 1704074400);
    brisk_weather_free(&w);
    s.time_name = "when";
    expect_error(&s, BRISK_ERR_INVALID, "date.nc: no variable 'when', the time coordinate of "
                 "data.netcdf.coordinates.time", NULL);
    s.time_name = NULL;
    paths[0] = path_of("both.nc");
    /* a second time axis beside valid_time */
    char text[8192];
    snprintf(text, sizeof text, "%s", cds_cdl("both", "valid_time", ""));
    char *at = strstr(text, "variables:");
    REQUIRE(at);
    char rest[8192];
    snprintf(rest, sizeof rest, "%s", at);
    snprintf(at, sizeof text - (size_t)(at - text), " time = 3 ;\n%s", rest);
    REQUIRE((at = strstr(text, " string expver")));
    snprintf(rest, sizeof rest, "%s", at);
    snprintf(at, sizeof text - (size_t)(at - text), " double time(time) ;\n%s", rest);
    REQUIRE(ncgen(paths[0], text) == 0);
    expect_error(&s, BRISK_ERR_INVALID, "both.nc: 'time' and 'valid_time' could both be the time coordinate: set "
                 "data.netcdf.coordinates.time", NULL);
    s.time_name = "valid_time";
    s.level_name = "plev";
    expect_error(&s, BRISK_ERR_SHAPE, "both.nc: variable 't' has levels over 'pressure_level', not 'plev' "
                 "(data.netcdf.coordinates.level)", NULL);
    s.level_name = "pressure_level";
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(!strcmp(w.channel[2], "t500"));
    brisk_weather_free(&w);
}

/* A copy of test_netcdf's layout with its own time units and times. */
static const char *timed_cdl(const char *name, const char *units, const char *times, int base) {
    static char text[4096];
    char a[1024] = "";
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 4; i++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%d", t || i ? ", " : "", 100 * (base + t) + i);
    snprintf(text, sizeof text,
             "netcdf %s {\ndimensions:\n time = 3 ;\n lat = 2 ;\n lon = 2 ;\nvariables:\n double time(time) ;\n"
             "  time:units = \"%s\" ;\n double lat(lat) ;\n double lon(lon) ;\n float a(time, lat, lon) ;\n"
             "data:\n time = %s ;\n lat = 40, 41 ;\n lon = 0, 1 ;\n a = %s ;\n}\n", name, units, times, a);
    return text;
}

/* Files whose units spell the same epoch differently, or use another epoch and unit, are
 * one time axis in the first file's units; units that are not instants must be equal. */
static void time_instants(void) {
    const char *p1 = path_of("t1.nc"), *p2 = path_of("t2.nc"), *p3 = path_of("t3.nc"), *p4 = path_of("t4.nc");
    REQUIRE(ncgen(p1, timed_cdl("t1", "hours since 1900-01-01 00:00:00", "0, 1, 2", 0)) == 0);
    REQUIRE(ncgen(p2, timed_cdl("t2", "hours since 1900-01-01 00:00:00.0", "3, 4, 5", 3)) == 0);
    REQUIRE(ncgen(p3, timed_cdl("t3", "minutes since 1900-01-01T03:00:00Z", "180, 240, 300", 6)) == 0);
    REQUIRE(ncgen(p4, timed_cdl("t4", "days since 1899-12-31", "1.375, 1.41666666666666667, 1.45833333333333333", 9)) == 0);
    const char *paths[] = {p3, p1, p4, p2}, *v[] = {"a"};
    brisk_weather_spec s = {.paths = paths, .npaths = 4, .variables = v, .nvariables = 1, .history = 1, .lead = 1};
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    REQUIRE(w.ntimes == 12);
    /* ordered by instant, in the units of the first file given (t3: minutes since 03:00) */
    for (int t = 0; t < 12; t++) CHECK_NEAR(w.time[t], (t - 3) * 60.0, 1e-6);
    float st[4];
    REQUIRE_OK(brisk_weather_state(&w, 10, st, &e), &e);
    CHECK(st[3] == 1003); /* t4's second time */
    char date[48];
    brisk_weather_date(&w, w.time[10], date, sizeof date);
    CHECKF(!strcmp(date, "1900-01-01T10:00"), "%s", date);
    brisk_weather_free(&w);
    const char *p5 = path_of("t5.nc");
    REQUIRE(ncgen(p5, timed_cdl("t5", "hours after the start", "20, 21, 22", 0)) == 0);
    paths[1] = p5;
    s.npaths = 2;
    expect_error(&s, BRISK_ERR_INVALID, "t5.nc: variable 'time' has units \"hours after the start\" but", "expected the "
                 "same, or both \"UNIT since DATE\"");
}

/* ERA5's old layout for a download mixing final and preliminary (ERA5T) days: an expver
 * dimension after time, each value in one of its versions. */
static void expver_dimension(void) {
    const char *p = path_of("expver.nc");
    REQUIRE(ncgen(p, "netcdf expver {\ndimensions:\n time = 2 ;\n expver = 2 ;\n latitude = 2 ;\n longitude = 2 ;\n"
                     "variables:\n int time(time) ;\n  time:units = \"hours since 1900-01-01 00:00:00.0\" ;\n"
                     " int expver(expver) ;\n float latitude(latitude) ;\n float longitude(longitude) ;\n"
                     " short t2m(time, expver, latitude, longitude) ;\n  t2m:scale_factor = 0.5 ;\n"
                     "  t2m:add_offset = 250. ;\n  t2m:_FillValue = -32767s ;\n"
                     "data:\n time = 1090000, 1090001 ;\n expver = 1, 5 ;\n latitude = 10, 9 ;\n longitude = 0, 1 ;\n"
                     " t2m = 1, 2, 3, 4, _, _, _, _, _, 6, _, _, 5, 7, 7, _ ;\n}\n") == 0);
    const char *paths[] = {p}, *v[] = {"t2m"};
    brisk_weather_spec s = {.paths = paths, .npaths = 1, .variables = v, .nvariables = 1, .history = 1, .lead = 1,
                            .mask_missing = 1};
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.channels == 1 && !strcmp(w.channel[0], "t2m")); /* not a level: no t2m1, t2m5 */
    CHECK(w.masked == 1); /* the point in neither version */
    float st[4];
    REQUIRE_OK(brisk_weather_state(&w, 0, st, &e), &e);
    /* rows flipped (latitude 9 first); time 0 all from expver 1 */
    CHECK(st[0] == 251.5f && st[1] == 252 && st[2] == 250.5f && st[3] == 251);
    /* time 1: 5 and 7 from ERA5T, 6 from ERA5, the last point the training mean (252) */
    REQUIRE_OK(brisk_weather_state(&w, 1, st, &e), &e);
    CHECK(st[0] == 253.5f && st[1] == w.mean[0] && w.mean[0] == 252 && st[2] == 252.5f && st[3] == 253);
    brisk_weather_free(&w);
}

/* Longitudes as a regional download across the prime meridian has them (350 ... 359, 0 ...
 * 5) are one increasing axis (350 ... 365); a file storing the same points as -10 ... 5 is
 * the same grid; the local solar hour follows the longitude. */
static void wrapped_longitudes(void) {
    const char *p1 = path_of("wrap1.nc"), *p2 = path_of("wrap2.nc");
    char lons[2][200] = {"", ""}, text[4096];
    for (int c = 0; c < 16; c++) {
        snprintf(lons[0] + strlen(lons[0]), 200 - strlen(lons[0]), "%s%d", c ? ", " : "", (350 + c) % 360);
        snprintf(lons[1] + strlen(lons[1]), 200 - strlen(lons[1]), "%s%d", c ? ", " : "", c - 10);
    }
    for (int k = 0; k < 2; k++) {
        char a[2048] = "";
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < 16; c++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%d", t || c ? ", " : "", 100 * (t + 2 * k) + c);
        snprintf(text, sizeof text, "netcdf wrap {\ndimensions:\n time = 2 ;\n lat = 1 ;\n lon = 16 ;\nvariables:\n"
                 " double time(time) ;\n  time:units = \"hours since 2024-01-01\" ;\n double lat(lat) ;\n"
                 " double lon(lon) ;\n float a(time, lat, lon) ;\ndata:\n time = %d, %d ;\n lat = 50 ;\n lon = %s ;\n"
                 " a = %s ;\n}\n", 2 * k, 2 * k + 1, lons[k], a);
        REQUIRE(ncgen(k ? p2 : p1, text) == 0);
    }
    const char *paths[] = {p1, p2}, *v[] = {"a"};
    brisk_weather_spec s = {.paths = paths, .npaths = 2, .variables = v, .nvariables = 1, .history = 1, .lead = 1,
                            .time_features = 1};
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.nlon == 16 && w.lon[0] == 350 && w.lon[10] == 360 && w.lon[15] == 365 && w.lon_turns == 1);
    float st[16];
    REQUIRE_OK(brisk_weather_state(&w, 3, st, &e), &e);
    CHECK(st[0] == 300 && st[12] == 312);
    float x[16 * 3], y[16];
    void *dst[2] = {x, y};
    REQUIRE_OK(w.ds.make(w.ds.make_user, 0, 0, 0, dst, &e), &e);
    CHECK_NEAR(x[12 * 3 + 1], sin(2 * M_PI * (0 + 362.0 / 15) / 24), 1e-5); /* lon 2 E at 00 UTC */
    brisk_weather_free(&w);
}

/* ERA5's invariants in a file of their own, larger than the data's region and on the same
 * 0.25 degree lattice: statics read at the data's points; a level field asked for as a
 * static names the key for that file; a file that misses a data point is refused. */
static void invariants_file(void) {
    const char *data = path_of("inv_data.nc"), *inv = path_of("inv.nc"), *small = path_of("inv_small.nc");
    REQUIRE(ncgen(data, cds_cdl("inv_data", "valid_time", " float z(valid_time, pressure_level, latitude, longitude) ;\n")) == 0);
    char z[512] = "", lsm[512] = "", text[4096];
    for (int r = 0; r < 7; r++)
        for (int c = 0; c < 5; c++) {
            snprintf(z + strlen(z), sizeof z - strlen(z), "%s%d", r || c ? ", " : "", 1000 * r + c);
            snprintf(lsm + strlen(lsm), sizeof lsm - strlen(lsm), "%s%d", r || c ? ", " : "", (r + c) % 2);
        }
    snprintf(text, sizeof text, "netcdf inv {\ndimensions:\n valid_time = 1 ;\n latitude = 7 ;\n longitude = 5 ;\n"
             "variables:\n int64 valid_time(valid_time) ;\n  valid_time:units = \"seconds since 1970-01-01\" ;\n"
             " double latitude(latitude) ;\n double longitude(longitude) ;\n float z(valid_time, latitude, longitude) ;\n"
             "  z:long_name = \"Geopotential\" ;\n float lsm(valid_time, latitude, longitude) ;\n"
             "data:\n valid_time = 0 ;\n latitude = 50.5, 50.25, 50, 49.75, 49.5, 49.25, 49 ;\n"
             " longitude = 9.5, 9.75, 10, 10.25, 10.5 ;\n z = %s ;\n lsm = %s ;\n}\n", z, lsm);
    REQUIRE(ncgen(inv, text) == 0);
    char *at = strstr(text, "50.5, 50.25, 50, 49.75,");
    REQUIRE(at);
    memcpy(at, "49.5, 49.25, 49, 48.75,", 23);
    REQUIRE(ncgen(small, text) == 0);
    const char *paths[] = {data}, *st_names[] = {"z", "lsm"};
    brisk_weather_spec s = cds_spec(paths);
    s.statics = st_names, s.nstatics = 2;
    expect_error(&s, BRISK_ERR_SHAPE, "inv_data.nc: static 'z' is a level field, z(valid_time, pressure_level, latitude, "
                 "longitude)", "give that file as data.netcdf.static_file");
    s.static_file = inv;
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    /* brisk rows ascend: latitude 49.5 (the file's row 4), 49.75 (3), 50 (2); longitude 10 (2), 10.25 (3) */
    REQUIRE(w.inputs == 3 + 2 + 2);
    float x[6 * 7], y[6 * 3];
    void *dst[2] = {x, y};
    REQUIRE_OK(w.ds.make(w.ds.make_user, 0, 0, 0, dst, &e), &e);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) {
            int n = r * 2 + c, fr = 4 - r, fc = 2 + c;
            CHECK_NEAR(x[n * 7 + 3] * w.std[3] + w.mean[3], 1000 * fr + fc, 1e-2);
            CHECK_NEAR(x[n * 7 + 4] * w.std[4] + w.mean[4], (fr + fc) % 2, 1e-5);
        }
    CHECK(w.statics_note[0] == 0); /* z is no variable here */
    brisk_weather_free(&w);
    s.static_file = small;
    expect_error(&s, BRISK_ERR_INVALID, "inv_small.nc (data.netcdf.static_file): 'latitude' has no latitude 49.75 of the "
                 "data's grid (it runs from 49.5 to 49)", NULL);
    const char *missing_names[] = {"z", "orography"};
    s.static_file = inv, s.statics = missing_names;
    expect_error(&s, BRISK_ERR_INVALID, "no variable 'orography' (present:", "nor in");
}

int main(void) {
    int rc = netcdf_tests_runnable();
    if (rc >= 0) return rc;
    t_case c[] = {T(cds_layout), T(coordinate_names), T(time_instants), T(expver_dimension),
                  T(wrapped_longitudes), T(invariants_file)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
