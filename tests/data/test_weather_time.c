/* CF time units as instants (weather_time.c): spellings of one epoch agree, offsets and
 * units convert, what is not "UNIT since DATE" is refused, and instants print as dates
 * (leap years, before 1970, rounding to the next day). No libnetcdf needed. */
#include "brisk/data.h"
#include "test.h"

static double epoch_of(const char *units, double *unit_s) {
    double e = NAN, u = 0;
    if (brisk_time_units_parse(units, &u, &e)) return NAN;
    if (unit_s) *unit_s = u;
    return e;
}

static void parse_units(void) {
    double u;
    CHECK(epoch_of("hours since 1970-01-01 00:00:00", &u) == 0 && u == 3600);
    CHECK(epoch_of("hours since 1900-01-01 00:00:00", NULL) == epoch_of("hours since 1900-01-01 00:00:00.0", NULL));
    CHECK(epoch_of("hours since 1900-01-01", NULL) == -2208988800.0);
    CHECK(epoch_of("seconds since 1970-01-01", &u) == 0 && u == 1);
    CHECK(epoch_of("days since 2000-01-01T12:00:00Z", &u) == 946728000.0 && u == 86400);
    CHECK(epoch_of("minutes since 2000-1-1 6", &u) == 946706400.0 && u == 60);
    CHECK(epoch_of("hours since 2000-01-01 00:00:00 +02:00", NULL) == 946684800.0 - 7200);
    CHECK(epoch_of("Hours Since 2000-01-01 UTC", NULL) == 946684800.0);
    CHECK(epoch_of("hours since 2024-02-29 23:59:59.5", NULL) == 1709251199.5);
    const char *bad[] = {"hours after 2000-01-01", "fortnights since 2000-01-01", "hours since 2000-13-01", "hours since",
                         "hours since 2000-01-01 00:00:00 next day", "", NULL};
    for (int i = 0; bad[i]; i++) CHECKF(isnan(epoch_of(bad[i], NULL)), "'%s' parsed", bad[i]);
}

static void format_dates(void) {
    char s[48];
    brisk_time_format(0, s, sizeof s);
    CHECKF(!strcmp(s, "1970-01-01T00:00"), "%s", s);
    brisk_time_format(1709251199.5, s, sizeof s); /* rounds to midnight: the next day */
    CHECKF(!strcmp(s, "2024-03-01T00:00"), "%s", s);
    brisk_time_format(-2208988800.0 + 3600 * 30 + 7, s, sizeof s);
    CHECKF(!strcmp(s, "1900-01-02T06:00:07"), "%s", s);
    brisk_time_format(951782400, s, sizeof s); /* 2000 is a leap year */
    CHECKF(!strcmp(s, "2000-02-29T00:00"), "%s", s);
    brisk_weather w = {.epoch_s = NAN, .hours_per_unit = 1};
    brisk_weather_date(&w, 12.5, s, sizeof s); /* units that are no date: the number */
    CHECKF(!strcmp(s, "12.5"), "%s", s);
    w.epoch_s = 946684800, w.hours_per_unit = 24;
    brisk_weather_date(&w, 1.5, s, sizeof s);
    CHECKF(!strcmp(s, "2000-01-02T12:00"), "%s", s);
}

TEST_MAIN(T(parse_units), T(format_dates))
