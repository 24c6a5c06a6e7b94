/* The weather dataset over NetCDF files: files written by ncgen (netcdf-bin, another tool
 * than brisk) read exactly (a decreasing latitude flipped, levels as channels, packed
 * shorts unpacked, statics, time features from the units), samples and their
 * normalisation, several files as one time axis (list, directory, glob), missing values
 * refused or masked, and one clear error naming file and variable for each bad input.
 * Without libnetcdf: the clear error instead. Without ncgen: skipped (77). */
#include "netcdf_test_util.h"

#include <sys/stat.h>

/* CDL of a 3 x 2 grid (lat 50, 49, 48: decreasing; lon 10, 11): a(time, lat, lon) =
 * 100 t + 10 row + col as the file stores it, b(time, level, lat, lon) packed shorts
 * (value = 0.5 raw + 100, raw = 10 level + 2 row + col + t), orog(lat, lon) = row * 2 + col. */
static const char *cdl(const char *name, int nt, int t0, const char *lats, const char *extra_a, int fill_at) {
    static char text[8192];
    char a[2048] = "", b[2048] = "", times[256] = "";
    for (int t = 0; t < nt; t++) {
        snprintf(times + strlen(times), sizeof times - strlen(times), "%s%d", t ? ", " : "", t0 + t);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 2; c++) {
                int i = (t * 3 + r) * 2 + c;
                if (i == fill_at) snprintf(a + strlen(a), sizeof a - strlen(a), "%s_", i ? ", " : "");
                else snprintf(a + strlen(a), sizeof a - strlen(a), "%s%d", i ? ", " : "", 100 * (t0 + t) + 10 * r + c);
            }
        for (int l = 0; l < 2; l++)
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 2; c++)
                    snprintf(b + strlen(b), sizeof b - strlen(b), "%s%d", t || l || r || c ? ", " : "",
                             10 * l + 2 * r + c + t0 + t);
    }
    snprintf(text, sizeof text,
             "netcdf %s {\ndimensions:\n time = %d ;\n level = 2 ;\n lat = 3 ;\n lon = 2 ;\n"
             "variables:\n double time(time) ;\n  time:units = \"hours since 2020-01-01 06:00:00\" ;\n"
             " double level(level) ;\n double lat(lat) ;\n double lon(lon) ;\n"
             " float a(time, lat, lon) ;\n  a:units = \"K\" ;\n  a:_FillValue = -999.f ;%s\n"
             " short b(time, level, lat, lon) ;\n  b:scale_factor = 0.5 ;\n  b:add_offset = 100. ;\n"
             " double orog(lat, lon) ;\n"
             "data:\n time = %s ;\n level = 850, 500 ;\n lat = %s ;\n lon = 10, 11 ;\n a = %s ;\n b = %s ;\n"
             " orog = 0, 1, 2, 3, 4, 5 ;\n}\n",
             name, nt, extra_a, times, lats, a, b);
    return text;
}

static const char *vars[] = {"a", "b"}, *statics[] = {"orog"};

static brisk_weather_spec spec_of(const char *const *paths, int n) {
    return (brisk_weather_spec){.paths = paths, .npaths = n, .variables = vars, .nvariables = 2, .statics = statics,
                                .nstatics = 1, .history = 2, .lead = 1, .validation_fraction = 0, .time_features = 1};
}

static void read_exact(void) {
    const char *p = path_of("one.nc");
    REQUIRE(ncgen(p, cdl("one", 4, 0, "50, 49, 48", "", -1)) == 0);
    const char *paths[] = {p};
    brisk_weather_spec s = spec_of(paths, 1);
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.ntimes == 4 && w.nlat == 3 && w.nlon == 2 && w.channels == 3 && w.nstatics == 1);
    CHECK(w.inputs == 3 * 2 + 1 + 2);
    CHECK(!strcmp(w.channel[0], "a") && !strcmp(w.channel[1], "b850") && !strcmp(w.channel[2], "b500"));
    CHECK(w.lat[0] == 48 && w.lat[2] == 50 && w.lon[1] == 11); /* ascending rows */
    float st[6 * 3];
    REQUIRE_OK(brisk_weather_state(&w, 2, st, &e), &e);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) {
            int fr = 2 - r, n = r * 2 + c; /* the file's row of brisk's row r */
            CHECK_NEAR(st[n * 3 + 0], 200 + 10 * fr + c, 0);
            for (int l = 0; l < 2; l++) CHECK_NEAR(st[n * 3 + 1 + l], 0.5 * (10 * l + 2 * fr + c + 2) + 100, 0);
        }
    /* normalisation: the channels over every time (no validation), statics over the grid */
    CHECK_NEAR(w.mean[0], 150 + 10 + 0.5, 1e-3);
    CHECK_NEAR(w.mean[3], 2.5, 1e-6);
    CHECK(w.nnorm == 2 * 3 + 1);
    CHECK_NEAR(w.mean[4], 100, 1e-3); /* the change of a over one hour */
    CHECK(w.std[4] == 1.0f);          /* constant: std 1 */
    /* a sample: x = a, b850, b500 at t-1 and t, orog, sin/cos of local solar hour; y the change */
    REQUIRE(w.ds.count == 2 && w.split.ntrain == 2 && w.split.nval == 0);
    float x[6 * 9], y[6 * 3];
    void *dst[2] = {x, y};
    REQUIRE_OK(w.ds.make(w.ds.make_user, 1, 0, 0, dst, &e), &e);
    int n = 1 * 2 + 1; /* row 1 (lat 49), col 1 (lon 11) */
    CHECK_NEAR(x[n * 9 + 0], (100 + 10 + 1 - w.mean[0]) / w.std[0], 1e-5);
    CHECK_NEAR(x[n * 9 + 3], (200 + 10 + 1 - w.mean[0]) / w.std[0], 1e-5);
    CHECK_NEAR(x[n * 9 + 6], (3 - w.mean[3]) / w.std[3], 1e-5);
    double hour = 6 + 2 + 11 / 15.0; /* time 2 of "hours since ... 06:00", lon 11 */
    CHECK_NEAR(x[n * 9 + 7], sin(2 * M_PI * hour / 24), 1e-5);
    CHECK_NEAR(x[n * 9 + 8], cos(2 * M_PI * hour / 24), 1e-5);
    CHECK_NEAR(y[n * 3 + 0], 0, 1e-5); /* a rises 100 every hour: its mean change */
    brisk_weather_free(&w);
}

static void several_files(void) {
    const char *p1 = path_of("multi/b.nc"), *p2 = path_of("multi/a.nc");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", path_of("multi"));
    REQUIRE(system(cmd) == 0);
    REQUIRE(ncgen(p1, cdl("b", 3, 0, "50, 49, 48", "", -1)) == 0);
    REQUIRE(ncgen(p2, cdl("a", 3, 3, "50, 49, 48", "", -1)) == 0); /* later times, earlier name */
    const char *dirp = path_of("multi"), *globp = path_of("multi/*.nc");
    const char *lists[3][2] = {{p2, p1}, {dirp, NULL}, {globp, NULL}};
    for (int k = 0; k < 3; k++) {
        brisk_weather_spec s = spec_of(lists[k], k == 0 ? 2 : 1);
        s.validation_fraction = 0.5;
        brisk_weather w;
        brisk_error e = {0};
        REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
        CHECK(w.ntimes == 6);
        for (int t = 0; t < 6; t++) CHECK(w.time[t] == t);
        float st[18];
        REQUIRE_OK(brisk_weather_state(&w, 4, st, &e), &e);
        CHECK_NEAR(st[0], 400 + 20, 0); /* row 0 = lat 48 = the file's row 2 */
        /* chronological: validation from time 3; the training sample (inputs 0, 1, target 2)
         * ends before it, the validation one (inputs 3, 4, target 5) starts at it */
        CHECK(w.split_time == 3 && w.split.ntrain == 1 && w.split.nval == 1 && w.split.train[0] == 0 && w.split.val[0] == 3);
        brisk_weather_free(&w);
    }
}

static void missing_values(void) {
    const char *p = path_of("fill.nc");
    REQUIRE(ncgen(p, cdl("fill", 4, 0, "50, 49, 48", "", 13)) == 0); /* time 2, file row 0, col 1 */
    const char *paths[] = {p};
    brisk_weather_spec s = spec_of(paths, 1);
    expect_error(&s, BRISK_ERR_NUMERIC, "fill.nc: variable 'a' is missing (fill value) at time index 2", "lat 50, lon 11");
    s.mask_missing = 1;
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.masked == 1);
    float st[18];
    REQUIRE_OK(brisk_weather_state(&w, 2, st, &e), &e);
    CHECK_NEAR(st[(2 * 2 + 1) * 3], w.mean[0], 0); /* brisk row 2 = lat 50 */
    brisk_weather_free(&w);
    /* NaN is missing too */
    const char *q = path_of("nan.nc");
    char text[8192];
    snprintf(text, sizeof text, "%s", cdl("nan", 4, 0, "50, 49, 48", "", -1));
    char *at = strstr(text, " a = 0, 1,");
    REQUIRE(at);
    memcpy(at, " a = NaN,  ", 11);
    REQUIRE(ncgen(q, text) == 0);
    paths[0] = q;
    s.mask_missing = 0;
    expect_error(&s, BRISK_ERR_NUMERIC, "nan.nc: variable 'a' is missing (NaN) at time index 0", NULL);
}

static void bad_inputs(void) {
    const char *txt = path_of("text.nc");
    FILE *f = fopen(txt, "w");
    REQUIRE(f);
    fputs("this is not netcdf\n", f);
    fclose(f);
    const char *paths[2] = {txt, NULL};
    brisk_weather_spec s = spec_of(paths, 1);
    expect_error(&s, BRISK_ERR_FORMAT, "text.nc: not a NetCDF file", NULL);
    const char *ok = path_of("ok.nc");
    REQUIRE(ncgen(ok, cdl("ok", 3, 0, "50, 49, 48", "", -1)) == 0);
    paths[0] = ok;
    const char *wrong[] = {"a", "zz"};
    s.variables = wrong;
    expect_error(&s, BRISK_ERR_INVALID, "ok.nc: no variable 'zz' (present: time, level, lat, lon, a, b, orog)", NULL);
    s = spec_of(paths, 2);
    const char *other = path_of("grid.nc");
    REQUIRE(ncgen(other, cdl("grid", 3, 3, "51, 50, 49", "", -1)) == 0);
    paths[1] = other;
    expect_error(&s, BRISK_ERR_INVALID, "grid.nc: variable 'lat' differs from", "ok.nc");
    const char *overlap = path_of("overlap.nc");
    REQUIRE(ncgen(overlap, cdl("overlap", 3, 2, "50, 49, 48", "", -1)) == 0);
    paths[1] = overlap;
    expect_error(&s, BRISK_ERR_INVALID, "overlap.nc: variable 'time' starts at 2020-01-01T08:00, not after the last time 2020-01-01T08:00", NULL);
    const char *back = path_of("back.nc");
    char text[8192];
    snprintf(text, sizeof text, "%s", cdl("back", 3, 0, "50, 49, 48", "", -1));
    char *at = strstr(text, "time = 0, 1, 2 ;");
    REQUIRE(at);
    memcpy(at, "time = 0, 2, 1 ;", 16);
    REQUIRE(ncgen(back, text) == 0);
    paths[0] = back;
    s.npaths = 1;
    expect_error(&s, BRISK_ERR_INVALID, "back.nc: variable 'time' is not increasing at index 2", NULL);
    paths[0] = path_of("none/*.nc");
    expect_error(&s, BRISK_ERR_IO, "no NetCDF files match", NULL);
    /* A variable named like the level dimension but over another one (time, 3 values for 2
     * levels) is not that dimension's coordinate: the channels are numbered. */
    const char *lev = path_of("level_time.nc");
    snprintf(text, sizeof text, "%s", cdl("level_time", 3, 0, "50, 49, 48", "", -1));
    REQUIRE((at = strstr(text, " double level(level) ;")));
    memcpy(at, " double level(time)  ;", 22);
    REQUIRE((at = strstr(text, "level = 850, 500 ;")));
    memcpy(at, "level = 8, 5, 2  ;", 18);
    REQUIRE(ncgen(lev, text) == 0);
    paths[0] = lev;
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(!strcmp(w.channel[1], "b_0") && !strcmp(w.channel[2], "b_1"));
    brisk_weather_free(&w);
    paths[0] = ok;
    s.history = 3;
    s.lead = 1;
    expect_error(&s, BRISK_ERR_INVALID, "ok.nc: 3 times cannot hold one sample of history 3 and lead 1", NULL);
}

/* A file of cdl()'s data opens, and reads time 3 as written. */
static void open_whole(const brisk_weather_spec *s) {
    brisk_weather w;
    brisk_error e = {0};
    REQUIRE_OK(brisk_weather_open(s, &w, &e), &e);
    float st[18];
    brisk_status rs = brisk_weather_state(&w, 3, st, &e);
    CHECKF(rs == BRISK_OK && st[0] == 300 + 20, "%s: %g", e.msg, (double)st[0]);
    brisk_weather_free(&w);
}

/* A classic-format file in memory (nc_open_mem), and its header checked before libnetcdf
 * reads it: a cut file and a name length beyond the bytes are refused. */
static void in_memory(void) {
    const char *p = path_of("classic.nc");
    char cmd[1400];
    REQUIRE(ncgen(p, cdl("classic", 4, 0, "50, 49, 48", "", -1)) == 0);
    snprintf(cmd, sizeof cmd, "ncgen -k classic -o '%s' '%s.cdl'", p, p);
    REQUIRE(system(cmd) == 0);
    FILE *f = fopen(p, "rb");
    REQUIRE(f);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    REQUIRE(n > 100 && n < sizeof buf && !memcmp(buf, "CDF\001", 4));
    const char *paths[] = {"mem.nc"};
    brisk_weather_spec s = spec_of(paths, 1);
    s.mem = buf, s.mem_len = n;
    open_whole(&s);
    s.mem_len = n - 8;
    char want[200];
    snprintf(want, sizeof want, "mem.nc: truncated: %zu of %zu bytes (the header's variables end at byte %zu)", n - 8, n, n);
    expect_error(&s, BRISK_ERR_FORMAT, want, NULL);
    s.mem_len = n;
    buf[3 * 4 + 4] = 0x7f; /* the first dimension name's length (after magic, numrecs, tag, count) */
    expect_error(&s, BRISK_ERR_FORMAT, "mem.nc: not a valid NetCDF file: a dimension name", NULL);
}

/* A copy of `from` cut to `size` bytes at `to`. */
static int cut_copy(const char *from, const char *to, long size) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    return system(cmd) == 0 && truncate(to, size) == 0 ? 0 : -1;
}

static long file_size(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 ? (long)sb.st_size : -1;
}

/* A classic file cut short (a copy or download stopped early) reads as zeros past its end
 * in libnetcdf, so brisk compares its size with what its header describes. Classic and
 * 64-bit-offset files with a fixed and a record time axis, cut in the last byte, in the
 * data and in the header; a lone byte record variable, whose records are not padded, is
 * whole at its exact size. A cut NetCDF-4 file is HDF5's to refuse, and is. */
static void truncated_files(void) {
    static const char *kinds[] = {"classic", "64-bit-offset"};
    char text[8192], want[1400];
    for (int k = 0; k < 2; k++)
        for (int rec = 0; rec < 2; rec++) {
            char name[64];
            snprintf(name, sizeof name, "cut_%d_%d", k, rec);
            snprintf(text, sizeof text, "%s", cdl(name, 4, 0, "50, 49, 48", "", -1));
            char *at = strstr(text, " time = 4 ;\n"), rest[8192];
            REQUIRE(at);
            snprintf(rest, sizeof rest, "%s", at + 11);
            if (rec) snprintf(at, sizeof text - (size_t)(at - text), " time = UNLIMITED ;%s", rest);
            char whole[700], cut[700];
            snprintf(whole, sizeof whole, "%s", path_of(name));
            snprintf(cut, sizeof cut, "%s.cut", whole);
            REQUIRE(ncgen_kind(whole, text, kinds[k]) == 0);
            long size = file_size(whole);
            const char *paths[] = {whole};
            brisk_weather_spec s = spec_of(paths, 1);
            open_whole(&s);
            paths[0] = cut;
            for (long drop = 1; drop <= 201; drop += 100) {
                REQUIRE(cut_copy(whole, cut, size - drop) == 0);
                snprintf(want, sizeof want, "%s: truncated: %ld of %ld bytes (the header's variables end at byte %ld)",
                         cut, size - drop, size, size);
                expect_error(&s, BRISK_ERR_FORMAT, want, NULL);
            }
            REQUIRE(cut_copy(whole, cut, 60) == 0);
            expect_error(&s, BRISK_ERR_FORMAT, "not a valid NetCDF file: the header ends early", NULL);
        }
    /* A header longer than the first piece read (a 100 KB global attribute), its file cut
     * in the data after it. */
    const char *big = path_of("big.nc"), *big_cut = path_of("big.cut.nc");
    snprintf(text, sizeof text, "%s", cdl("big", 4, 0, "50, 49, 48", "", -1));
    char *data_at = strstr(text, "data:"), *big_text = malloc(strlen(text) + 100100);
    REQUIRE(data_at && big_text);
    int head = (int)(data_at - text);
    snprintf(big_text, strlen(text) + 100100, "%.*s :history = \"%0100000d\" ;\n%s", head, text, 0, data_at);
    int rc = ncgen_kind(big, big_text, "classic");
    free(big_text);
    REQUIRE(rc == 0);
    const char *big_paths[] = {big};
    brisk_weather_spec bs = spec_of(big_paths, 1);
    open_whole(&bs);
    /* libnetcdf leaves this file longer than its data: the data end after orog, the last
     * variable (0, 1, ..., 5 as big-endian doubles) */
    static const unsigned char orog[48] = {0, 0, 0, 0, 0, 0, 0, 0, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0,
                                           0x40, 8, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0, 0, 0, 0, 0, 0, 0x40, 0x14, 0, 0, 0, 0, 0, 0};
    long size = file_size(big), end = -1;
    unsigned char *bytes = malloc((size_t)size);
    FILE *f = fopen(big, "rb");
    REQUIRE(bytes && f && fread(bytes, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    for (long i = 0; i + 48 <= size && end < 0; i++)
        if (!memcmp(bytes + i, orog, 48)) end = i + 48;
    free(bytes);
    REQUIRE(end > 100000 && end <= size);
    REQUIRE(cut_copy(big, big_cut, end) == 0);
    big_paths[0] = big_cut;
    open_whole(&bs);
    REQUIRE(cut_copy(big, big_cut, end - 1) == 0);
    snprintf(want, sizeof want, "truncated: %ld of %ld bytes", end - 1, end);
    expect_error(&bs, BRISK_ERR_FORMAT, want, NULL);
    const char *lone = path_of("lone.nc"), *cut = path_of("lone.cut.nc");
    REQUIRE(ncgen_kind(lone, "netcdf lone {\ndimensions:\n time = UNLIMITED ;\n x = 3 ;\nvariables:\n byte v(time, x) ;\n"
                       " short f(x) ;\ndata:\n v = 1, 2, 3, 4, 5, 6, 7, 8, 9 ;\n f = 1, 2, 3 ;\n}\n", "classic") == 0);
    size = file_size(lone);
    const char *paths[] = {lone};
    brisk_weather_spec s = spec_of(paths, 1);
    expect_error(&s, BRISK_ERR_INVALID, "lone.nc: ", "lat"); /* whole: refused for its missing grid */
    REQUIRE(cut_copy(lone, cut, size - 1) == 0);
    paths[0] = cut;
    snprintf(want, sizeof want, "truncated: %ld of %ld bytes", size - 1, size);
    expect_error(&s, BRISK_ERR_FORMAT, want, NULL);
    const char *nc4 = path_of("nc4.nc"), *cut4 = path_of("nc4.cut.nc");
    REQUIRE(ncgen(nc4, cdl("nc4", 4, 0, "50, 49, 48", "", -1)) == 0);
    paths[0] = cut4;
    for (int k = 1; k <= 2; k++) {
        REQUIRE(cut_copy(nc4, cut4, file_size(nc4) - (k == 1 ? 1 : file_size(nc4) / 2)) == 0);
        expect_error(&s, BRISK_ERR_FORMAT, "nc4.cut.nc: not a NetCDF file this build can read", NULL);
    }
}

static void synth_file(void) {
    const char *p = path_of("synth.nc");
    brisk_error e = {0};
    REQUIRE_OK(brisk_synth_weather(p, 48, 3, &e), &e);
    const char *paths[] = {p}, *v[] = {"t2m", "msl", "t", "z"}, *st[] = {"orography", "lsm"};
    brisk_weather_spec s = {.paths = paths, .npaths = 1, .variables = v, .nvariables = 4, .statics = st, .nstatics = 2,
                            .history = 2, .lead = 1, .validation_fraction = 0.25, .time_features = 1};
    brisk_weather w;
    REQUIRE_OK(brisk_weather_open(&s, &w, &e), &e);
    CHECK(w.ntimes == 48 && w.nlat == 16 && w.nlon == 16 && w.channels == 8 && w.inputs == 20);
    CHECK(w.lat[0] == 40 && w.lat[15] == 55 && !strcmp(w.channel[7], "z250"));
    CHECK(w.mean[0] > 270 && w.mean[0] < 300 && w.mean[1] > 100000 && w.mean[1] < 103000);
    CHECKF(w.persistence_mse > 0.05 && w.persistence_mse < 5, "%g", w.persistence_mse);
    brisk_weather_free(&w);
}

int main(void) {
    int rc = netcdf_tests_runnable();
    if (rc >= 0) return rc;
    t_case c[] = {T(read_exact),  T(several_files),   T(missing_values), T(bad_inputs),
                  T(in_memory), T(truncated_files), T(synth_file)};
    return t_run(c, (int)(sizeof c / sizeof c[0]));
}
