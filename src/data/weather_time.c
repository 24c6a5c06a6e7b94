/* CF time units as instants: "UNIT since DATE[ TIME][ ZONE]" parsed into seconds per unit
 * and the reference instant (seconds since 1970-01-01 UTC, proleptic Gregorian), so that
 * "hours since 1900-01-01 00:00:00" and "hours since 1900-01-01 00:00:00.0" are one axis
 * and files with different epochs are put on the first one's. Times are printed as dates
 * from the same numbers. No libnetcdf here: a forecast's table prints dates in any build. */
#include "brisk/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's
 * days_from_civil: exact for any year, no table). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400, doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static const struct { const char *name; double seconds; } units[] = {
    {"seconds", 1}, {"second", 1}, {"secs", 1}, {"sec", 1}, {"s", 1},
    {"minutes", 60}, {"minute", 60}, {"mins", 60}, {"min", 60},
    {"hours", 3600}, {"hour", 3600}, {"hrs", 3600}, {"hr", 3600}, {"h", 3600},
    {"days", 86400}, {"day", 86400}, {"d", 86400},
};

int brisk_time_units_parse(const char *text, double *unit_s, double *epoch_s) {
    char unit[32], since[8];
    int n = 0;
    if (!text || sscanf(text, " %31s %7s %n", unit, since, &n) != 2 || strcasecmp(since, "since")) return -1;
    *unit_s = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(unit, units[i].name)) *unit_s = units[i].seconds;
    if (*unit_s == 0) return -1;
    const char *p = text + n;
    long long y;
    int mo, d, used = 0, h = 0, mi = 0;
    double s = 0;
    if (sscanf(p, "%lld-%d-%d%n", &y, &mo, &d, &used) != 3 || mo < 1 || mo > 12 || d < 1 || d > 31) return -1;
    p += used;
    if (*p == 'T' || *p == ' ') { /* a time of day: hh[:mm[:ss[.f]]] */
        const char *q = p + 1;
        while (*q == ' ') q++;
        int k = sscanf(q, "%d%n", &h, &used);
        if (k == 1) {
            q += used;
            if (*q == ':' && sscanf(q + 1, "%d%n", &mi, &used) == 1) {
                q += 1 + used;
                if (*q == ':' && sscanf(q + 1, "%lf%n", &s, &used) == 1) q += 1 + used;
            }
            p = q;
        }
    }
    if (h < 0 || h > 24 || mi < 0 || mi > 59 || !(s >= 0 && s < 61)) return -1;
    while (*p == ' ') p++;
    double zone = 0; /* the reference's offset from UTC, in seconds */
    if (*p == 'Z' || !strncasecmp(p, "UTC", 3) || !strncasecmp(p, "GMT", 3)) p += *p == 'Z' ? 1 : 3;
    if (*p == '+' || *p == '-') {
        int zh = 0, zm = 0, sign = *p == '-' ? -1 : 1;
        const char *q = p + 1;
        if (sscanf(q, "%2d%n", &zh, &used) != 1) return -1;
        q += used;
        if (*q == ':') q++;
        if (sscanf(q, "%2d%n", &zm, &used) == 1) q += used;
        zone = sign * (zh * 3600.0 + zm * 60.0);
        p = q;
    }
    while (*p == ' ') p++;
    if (*p) return -1;
    *epoch_s = (double)days_from_civil(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 + s - zone;
    return 0;
}

void brisk_time_format(double instant_s, char *out, size_t cap) {
    if (!isfinite(instant_s) || fabs(instant_s) > 1e15) {
        snprintf(out, cap, "%g", instant_s);
        return;
    }
    double whole = floor(instant_s / 86400.0);
    double sec = instant_s - whole * 86400.0;
    int64_t y;
    int m, d;
    civil_from_days((int64_t)whole, &y, &m, &d);
    long long si = llround(sec);
    if (si >= 86400) { /* rounded up to midnight: the next day */
        civil_from_days((int64_t)whole + 1, &y, &m, &d);
        si -= 86400;
    }
    int hh = (int)(si / 3600), mm = (int)(si / 60 % 60), ss = (int)(si % 60);
    if (ss) snprintf(out, cap, "%04lld-%02d-%02dT%02d:%02d:%02d", (long long)y, m, d, hh, mm, ss);
    else snprintf(out, cap, "%04lld-%02d-%02dT%02d:%02d", (long long)y, m, d, hh, mm);
}

void brisk_weather_date(const brisk_weather *w, double value, char *out, size_t cap) {
    if (isfinite(w->epoch_s) && w->hours_per_unit > 0) brisk_time_format(w->epoch_s + value * w->hours_per_unit * 3600.0, out, cap);
    else snprintf(out, cap, "%g", value);
}
