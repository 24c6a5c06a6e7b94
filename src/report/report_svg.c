/* SVG charts for the HTML reports: fixed pixel sizes, round ticks, lines broken at
 * non-finite values, stacked areas and bars. Everything drawn is text appended to a
 * brisk_html buffer; every label from outside (titles, names) is escaped. */
#include "report/report_svg.h"

#include "data/bytes.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MARGIN_LEFT = 70, MARGIN_RIGHT = 24, MARGIN_TOP = 34, MARGIN_BOTTOM = 42, MAX_TICKS = 12 };
enum { BAR_ROW = 28, BAR_TOP = 40, BAR_VALUE = 130 };
static const double DOT_R = 4.5; /* brisk_chart_dots' radius, in pixels */

void brisk_html_free(brisk_html *b) { brisk_strbuf_free(b); }

void brisk_html_printf(brisk_html *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    brisk_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void brisk_html_escape(brisk_html *b, const char *text) {
    for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p; p++) {
        const char *ent = NULL;
        switch (*p) {
        case '&': ent = "&amp;"; break;
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&#39;"; break;
        default: break;
        }
        if (ent) {
            brisk_html_printf(b, "%s", ent);
        } else if (*p >= 0x20 || *p == '\n' || *p == '\t') {
            if (brisk_strbuf_reserve(b, 1)) b->s[b->len++] = (char)*p, b->s[b->len] = 0;
        }
    }
}

/* "1.5e-04" -> "1.5e-4", "2e+05" -> "2e5": tick labels stay narrow. */
static void short_exponent(char *s) {
    char *e = strchr(s, 'e');
    if (!e) return;
    char *d = e + 1, *src = e + 1;
    if (*src == '+') src++;
    else if (*src == '-') *d++ = *src++;
    while (*src == '0' && src[1]) src++;
    memmove(d, src, strlen(src) + 1);
}

void brisk_svg_format(double v, char *buf, size_t n) {
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, n, isnan(v) ? "-" : v > 0 ? "inf" : "-inf");
    else if (a == 0) snprintf(buf, n, "0");
    else if (a >= 1e12) snprintf(buf, n, "%.3g", v);
    else if (a >= 1e9) snprintf(buf, n, "%.3gG", v / 1e9);
    else if (a >= 1e6) snprintf(buf, n, "%.3gM", v / 1e6);
    else if (a >= 1e4) snprintf(buf, n, "%.3gk", v / 1e3);
    else if (a < 1e-3) snprintf(buf, n, "%.2e", v);
    else snprintf(buf, n, "%.4g", v);
    short_exponent(buf);
}

int brisk_svg_range(const double *v, int n, double *lo, double *hi) {
    int k = 0;
    *lo = INFINITY, *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        if (v[i] < *lo) *lo = v[i];
        if (v[i] > *hi) *hi = v[i];
        k++;
    }
    if (k == 0) {
        *lo = 0, *hi = 1;
    } else if (*hi - *lo <= 1e-12 * fabs(*hi)) {
        double pad = *hi != 0 ? 0.1 * fabs(*hi) : 1;
        *lo -= pad, *hi += pad;
    }
    return k;
}

int brisk_svg_ticks(double *lo, double *hi, int max, double *ticks) {
    if (max < 2) max = 2;
    if (!(*hi > *lo) || !isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (!isfinite(*hi - *lo)) *lo = fmax(*lo, -1e307), *hi = fmin(*hi, 1e307); /* a span past DBL_MAX */
    static const double nice[] = {1, 2, 5, 10};
    double mag = pow(10, floor(log10((*hi - *lo) / (max - 1))));
    for (int e = 0;; e++) {
        double step = nice[e % 4] * mag * pow(10, e / 4);
        double a = floor(*lo / step) * step, z = ceil(*hi / step) * step;
        int count = (int)llround((z - a) / step) + 1;
        if (count <= max || e > 40) {
            if (count > max) count = max;
            for (int i = 0; i < count; i++) {
                ticks[i] = a + step * i;
                if (fabs(ticks[i]) < 1e-9 * step) ticks[i] = 0; /* not "-1.4e-17" */
            }
            *lo = a, *hi = z;
            return count;
        }
    }
}

/* Tick labels with as many decimals as the tick step needs, all alike: 0.00095 0.001 0.00105
 * reads as 9.5e-04 1.0e-03 1.05e-03 otherwise. */
static void tick_label(double v, double step, double top, char *buf, size_t n) {
    if (v == 0) {
        snprintf(buf, n, "0");
    } else if (top >= 1e4) {
        brisk_svg_format(v, buf, n);
    } else if (top < 1e-2) {
        int d = (int)floor(log10(top)) - (int)floor(log10(step) + 1e-9);
        snprintf(buf, n, "%.*e", d < 0 ? 0 : d > 3 ? 3 : d, v);
        short_exponent(buf);
    } else {
        int d = (int)ceil(-log10(step) - 1e-9);
        snprintf(buf, n, "%.*f", d < 0 ? 0 : d > 6 ? 6 : d, v);
    }
}

void brisk_chart_pad_x(double *x0, double *x1, int width) {
    const double pad = DOT_R + 2, pw = width - MARGIN_LEFT - MARGIN_RIGHT; /* the dot and its white ring */
    double d = (*x1 - *x0) * pad / (pw - 2 * pad);
    if (pw > 4 * pad && *x1 > *x0 && isfinite(d) && isfinite(*x0 - d) && isfinite(*x1 + d)) *x0 -= d, *x1 += d;
}

double brisk_chart_x(const brisk_chart *c, double x) { return c->px + (x - c->x0) / (c->x1 - c->x0) * c->pw; }

double brisk_chart_y(const brisk_chart *c, double y) { return c->py + c->ph - (y - c->y0) / (c->y1 - c->y0) * c->ph; }

void brisk_chart_begin(brisk_html *b, brisk_chart *c, const char *id, const char *colour, int width, int height,
                       const char *title, const char *xlabel, const char *ylabel, double x0, double x1, double y0,
                       double y1) {
    double xt[MAX_TICKS], yt[MAX_TICKS], t0 = x0, t1 = x1;
    /* x stays the data's own range (steps end where the run ended), its ticks those inside it */
    int nx = brisk_svg_ticks(&t0, &t1, width / 110 < MAX_TICKS ? width / 110 : MAX_TICKS, xt), kept = 0;
    /* a span past DBL_MAX (steps of -1e308 and 1e308) would put every point at inf / inf;
     * x1 - x0 is not finite either where x0 or x1 is not */
    if (!(x1 > x0) || !isfinite(x1 - x0)) x0 = t0, x1 = t1;
    double xstep = nx > 1 ? xt[1] - xt[0] : 1;
    for (int i = 0; i < nx; i++)
        if (xt[i] >= x0 - 1e-9 * (x1 - x0) && xt[i] <= x1 + 1e-9 * (x1 - x0) && (xstep >= 1 || xt[i] == floor(xt[i])))
            xt[kept++] = xt[i];
    nx = kept;
    int ny = brisk_svg_ticks(&y0, &y1, height / 45 < MAX_TICKS ? height / 45 : MAX_TICKS, yt);
    *c = (brisk_chart){.width = width, .height = height, .title_len = title ? (int)strlen(title) : 0,
                       .px = MARGIN_LEFT, .py = MARGIN_TOP,
                       .pw = width - MARGIN_LEFT - MARGIN_RIGHT, .ph = height - MARGIN_TOP - MARGIN_BOTTOM,
                       .x0 = x0, .x1 = x1, .y0 = y0, .y1 = y1};
    brisk_html_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" id=\"",
                      width, height, width, height);
    brisk_html_escape(b, id);
    brisk_html_printf(b, "\" data-colour=\"");
    brisk_html_escape(b, colour);
    brisk_html_printf(b, "\">\n<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n<text class=\"title\" x=\"%g\" y=\"20\">",
                      width, height, c->px);
    brisk_html_escape(b, title);
    brisk_html_printf(b, "</text>\n");
    char lab[32];
    double ystep = ny > 1 ? yt[1] - yt[0] : 1, ytop = fmax(fabs(y0), fabs(y1));
    for (int i = 0; i < ny; i++) {
        double y = brisk_chart_y(c, yt[i]);
        tick_label(yt[i], ystep, ytop, lab, sizeof lab);
        brisk_html_printf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                          "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                          c->px, c->px + c->pw, y, y, c->px - 6, y + 4, lab);
    }
    for (int i = 0; i < nx; i++) {
        double x = brisk_chart_x(c, xt[i]);
        tick_label(xt[i], xstep < 1 ? 1 : xstep, fmax(fabs(x0), fabs(x1)), lab, sizeof lab);
        brisk_html_printf(b, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                          "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                          x, x, c->py, c->py + c->ph, x, c->py + c->ph + 16, lab);
    }
    brisk_html_printf(b, "<rect class=\"frame\" x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\"/>\n", c->px, c->py, c->pw,
                      c->ph);
    brisk_html_printf(b, "<text class=\"axis\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", c->px + c->pw / 2,
                      height - 6);
    brisk_html_escape(b, xlabel);
    brisk_html_printf(b, "</text>\n<text class=\"axis\" transform=\"translate(13 %.1f) rotate(-90)\" "
                      "text-anchor=\"middle\">", c->py + c->ph / 2);
    brisk_html_escape(b, ylabel);
    brisk_html_printf(b, "</text>\n");
}

/* A point inside the plot area: values beyond the domain (a loss spike) are clamped to its edge. */
static void point(const brisk_chart *c, double x, double y, double *X, double *Y) {
    *X = brisk_chart_x(c, x);
    *Y = brisk_chart_y(c, y);
    if (*Y < c->py) *Y = c->py;
    if (*Y > c->py + c->ph) *Y = c->py + c->ph;
}

/* The points of one unbroken line. Many points per pixel column (a long run logged every
 * step) keep, per column, the first, lowest, highest and last, in order: the page stays
 * small and every spike still shows. */
static void polyline_points(brisk_html *b, const brisk_chart *c, const double *x, const double *y, int n) {
    double X, Y;
    int dense = n > 2 * (int)c->pw;
    for (int k = 0; k < n;) {
        point(c, x[k], y[k], &X, &Y);
        if (!dense) {
            brisk_html_printf(b, "%s%.1f,%.1f", k ? " " : "", X, Y);
            k++;
            continue;
        }
        long col = lround(X);
        int lo = k, hi = k, last = k;
        double ylo = Y, yhi = Y;
        for (last = k + 1; last < n; last++) {
            double X2, Y2;
            point(c, x[last], y[last], &X2, &Y2);
            if (lround(X2) != col) break;
            if (Y2 < ylo) ylo = Y2, lo = last;
            if (Y2 > yhi) yhi = Y2, hi = last;
        }
        last--; /* the column's last point */
        int keep[4] = {k, lo < hi ? lo : hi, lo < hi ? hi : lo, last}, prev = -1;
        for (int q = 0; q < 4; q++) {
            if (keep[q] == prev) continue;
            prev = keep[q];
            point(c, x[prev], y[prev], &X, &Y);
            brisk_html_printf(b, "%s%.1f,%.1f", k || q ? " " : "", X, Y);
        }
        k = last + 1;
    }
}

int brisk_chart_line(brisk_html *b, const brisk_chart *c, const double *x, const double *y, int n, const char *colour) {
    int drawn = 0;
    for (int i = 0; i < n;) {
        while (i < n && !(isfinite(x[i]) && isfinite(y[i]))) i++;
        int j = i;
        while (j < n && isfinite(x[j]) && isfinite(y[j])) j++;
        if (j == i) break;
        double X, Y;
        if (j - i == 1) {
            point(c, x[i], y[i], &X, &Y);
            brisk_html_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", X, Y, colour);
        } else {
            brisk_html_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\" "
                              "points=\"", colour);
            polyline_points(b, c, x + i, y + i, j - i);
            brisk_html_printf(b, "\"/>\n");
        }
        drawn += j - i;
        i = j;
    }
    return drawn;
}

int brisk_chart_dots(brisk_html *b, const brisk_chart *c, const double *x, const double *y, int n,
                     const char *colour) {
    int drawn = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        double X, Y;
        point(c, x[i], y[i], &X, &Y);
        brisk_html_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"%s\" stroke=\"#fff\"/>\n", X, Y, DOT_R,
                          colour);
        drawn++;
    }
    return drawn;
}

static double finite_or_zero(double v) { return isfinite(v) && v > 0 ? v : 0; }

/* More points than pixel columns: the means of runs of g points, then the stack of those. */
static void stack_reduced(brisk_html *b, const brisk_chart *c, const double *x, const double *const *layers, int k,
                          int n, const char *const *colours) {
    int g = (n + (int)c->pw - 1) / (int)c->pw, m = (n + g - 1) / g;
    double *buf = calloc((size_t)m * (size_t)(k + 1), sizeof *buf);
    const double *rl[8];
    if (!buf || k > 8) {
        free(buf);
        b->oom = 1;
        return;
    }
    for (int l = 0; l <= k; l++) {
        const double *src = l == 0 ? x : layers[l - 1];
        double *dst = buf + (size_t)l * (size_t)m;
        for (int i = 0; i < n; i++) dst[i / g] += (l == 0 ? src[i] : finite_or_zero(src[i])) / g;
        if (n % g) /* the last, shorter run: its own mean */
            dst[m - 1] = dst[m - 1] * g / (n % g);
        if (l > 0) rl[l - 1] = dst;
    }
    brisk_chart_stack(b, c, buf, rl, k, m, colours);
    free(buf);
}

void brisk_chart_stack(brisk_html *b, const brisk_chart *c, const double *x, const double *const *layers, int k, int n,
                       const char *const *colours) {
    if (n < 1) return;
    if (n > 2 * (int)c->pw) {
        stack_reduced(b, c, x, layers, k, n, colours);
        return;
    }
    double *below = calloc((size_t)n, sizeof *below);
    if (!below) {
        b->oom = 1;
        return;
    }
    for (int l = 0; l < k; l++) {
        double X, Y;
        brisk_html_printf(b, "<polygon fill=\"%s\" fill-opacity=\"0.85\" stroke=\"%s\" points=\"", colours[l], colours[l]);
        /* one step only: a band as wide as a few pixels, centred on it */
        double half = n == 1 ? 0.02 * (c->x1 - c->x0) : 0;
        for (int i = 0; i < n; i++) {
            double top = below[i] + finite_or_zero(layers[l][i]);
            point(c, x[i] - half, top, &X, &Y);
            brisk_html_printf(b, "%.1f,%.1f ", X, Y);
            if (n == 1) point(c, x[i] + half, top, &X, &Y), brisk_html_printf(b, "%.1f,%.1f ", X, Y);
        }
        for (int i = n - 1; i >= 0; i--) {
            if (n == 1) point(c, x[i] + half, below[i], &X, &Y), brisk_html_printf(b, "%.1f,%.1f ", X, Y);
            point(c, x[i] - half, below[i], &X, &Y);
            brisk_html_printf(b, "%.1f,%.1f ", X, Y);
        }
        brisk_html_printf(b, "\"/>\n");
        for (int i = 0; i < n; i++) below[i] += finite_or_zero(layers[l][i]);
    }
    free(below);
}

void brisk_chart_note(brisk_html *b, const brisk_chart *c, const char *text) {
    brisk_html_printf(b, "<text class=\"note\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", c->px + c->pw / 2,
                      c->py + c->ph / 2);
    brisk_html_escape(b, text);
    brisk_html_printf(b, "</text>\n");
}

void brisk_chart_legend(brisk_html *b, const brisk_chart *c, const char *const *names, const char *const *colours,
                        int k) {
    /* about 7.4 pixels per character of the legend's 12px text, 8.5 of the 15px bold title */
    double need = 0, widest = 0, title_end = c->px + 8.5 * (double)c->title_len + 16;
    for (int i = 0; i < k; i++) {
        double w = 24 + 7.4 * (double)strlen(names[i]);
        need += w, widest = w > widest ? w : widest;
    }
    if (c->px + c->pw - need >= title_end) { /* one row right of the title, right to left */
        double x = c->px + c->pw;
        for (int i = k - 1; i >= 0; i--) {
            x -= 24 + 7.4 * (double)strlen(names[i]);
            brisk_html_printf(b, "<rect x=\"%.1f\" y=\"10\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                              "<text class=\"legend\" x=\"%.1f\" y=\"21\">", x, colours[i], x + 16);
            brisk_html_escape(b, names[i]);
            brisk_html_printf(b, "</text>\n");
        }
        return;
    }
    /* too wide (many or long names): a column in the plot's top right corner, on white */
    double x = c->px + c->pw - widest - 8, y = c->py + 6;
    brisk_html_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#fff\" "
                      "fill-opacity=\"0.85\" stroke=\"#ddd\"/>\n", x - 6, y - 4, widest + 10, 18 * k + 6);
    for (int i = 0; i < k; i++, y += 18) {
        brisk_html_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                          "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">", x, y, colours[i], x + 16, y + 11);
        brisk_html_escape(b, names[i]);
        brisk_html_printf(b, "</text>\n");
    }
}

void brisk_chart_end(brisk_html *b) { brisk_html_printf(b, "</svg>\n"); }

int brisk_bars_height(int n) { return BAR_TOP + BAR_ROW * (n > 0 ? n : 1) + 12; }

void brisk_bars(brisk_html *b, const char *id, const char *colour, int width, const char *title, const char *unit,
                const char *const *labels, const double *values, int n, const char *missing) {
    int height = brisk_bars_height(n);
    int label_w = width * 2 / 5 > 300 ? 300 : width * 2 / 5; /* the row names' column */
    double top = 0, span = width - label_w - BAR_VALUE;
    for (int i = 0; i < n; i++)
        if (isfinite(values[i]) && values[i] > top) top = values[i];
    brisk_html_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" id=\"",
                      width, height, width, height);
    brisk_html_escape(b, id);
    brisk_html_printf(b, "\" data-colour=\"");
    brisk_html_escape(b, colour);
    brisk_html_printf(b, "\">\n<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n<text class=\"title\" x=\"8\" y=\"20\">",
                      width, height);
    brisk_html_escape(b, title);
    brisk_html_printf(b, "</text>\n");
    if (n == 0) {
        brisk_html_printf(b, "<text class=\"note\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">no rows</text>\n", width / 2,
                          BAR_TOP + 18);
    }
    for (int i = 0; i < n; i++) {
        double y = BAR_TOP + BAR_ROW * i;
        brisk_html_printf(b, "<text class=\"tick\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", label_w - 8, y + 18);
        brisk_html_escape(b, labels[i]);
        brisk_html_printf(b, "</text>\n");
        char v[32];
        if (!isfinite(values[i])) {
            brisk_html_printf(b, "<text class=\"note\" x=\"%d\" y=\"%.1f\">", label_w + 4, y + 18);
            brisk_html_escape(b, missing);
            brisk_html_printf(b, "</text>\n");
            continue;
        }
        double w = top > 0 && values[i] > 0 ? values[i] / top * span : 0;
        if (w < 1 && values[i] > 0) w = 1;
        brisk_svg_format(values[i], v, sizeof v);
        brisk_html_printf(b, "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
                          "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\">%s ", label_w, y + 4, w, BAR_ROW - 8, colour,
                          label_w + w + 6, y + 18, v);
        brisk_html_escape(b, unit);
        brisk_html_printf(b, "</text>\n");
    }
    brisk_html_printf(b, "<line class=\"axisline\" x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/>\n</svg>\n", label_w,
                      label_w, BAR_TOP - 4, height - 8);
}

/* One style sheet for the three reports: system fonts, no external resources. */
static const char style[] =
    "body{margin:20px;font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
    "color:#222;background:#f4f5f7}\n"
    ".page{position:relative;width:1160px}\n"
    ".head{overflow:hidden}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}\n"
    ".path{color:#555;font-family:monospace;margin-bottom:10px;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis}\n"
    ".stats{display:grid;gap:8px}\n"
    ".stat{background:#fff;border:1px solid #dde;border-radius:6px;padding:5px 10px;box-sizing:border-box;"
    "min-width:0;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}\n"
    ".stat b{display:block;font-size:16px}.stat span{color:#667;font-size:12px}\n"
    ".chart{position:absolute;background:#fff;border:1px solid #dde;border-radius:6px;overflow:hidden}\n"
    ".chart svg{display:block}\n"
    "svg text{font-family:system-ui,'DejaVu Sans',sans-serif;fill:#333}\n"
    "svg .title{font-size:15px;font-weight:600}svg .tick{font-size:12px;fill:#555}"
    "svg .axis{font-size:12px;fill:#555}svg .legend{font-size:12px}svg .note{font-size:14px;fill:#999}\n"
    "svg .grid{stroke:#ececec}svg .frame{fill:none;stroke:#bbb}svg .axisline{stroke:#bbb}\n"
    "table{border-collapse:collapse;background:#fff;width:1160px;border:1px solid #dde}\n"
    "th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #eee;vertical-align:top}"
    "th{background:#f0f1f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".on,.off,.info{display:inline-block;border-radius:4px;padding:0 7px;font-size:12px;font-weight:600}"
    ".on{background:#d7f3dd;color:#17652b}.off{background:#fbe3d6;color:#8a3b10}.info{background:#e6e9f2;color:#445}\n"
    ".notes{color:#555}\n";

void brisk_html_page_begin(brisk_html *b, const char *title) {
    brisk_html_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    brisk_html_escape(b, title);
    brisk_html_printf(b, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", style);
}

void brisk_html_page_end(brisk_html *b) { brisk_html_printf(b, "</body>\n</html>\n"); }

enum { BODY_MARGIN = 20, BOX_BORDER = 1 }; /* as the style sheet sets them */

void brisk_html_box_begin(brisk_html *b, int left, int top, int w, int h) {
    brisk_html_printf(b, "<div class=\"chart\" style=\"left:%dpx;top:%dpx;width:%dpx;height:%dpx\" "
                      "data-box=\"%d,%d,%d,%d\">\n", left, top, w, h, BODY_MARGIN + left + BOX_BORDER,
                      BODY_MARGIN + top + BOX_BORDER, w, h);
}

void brisk_html_box_end(brisk_html *b) { brisk_html_printf(b, "</div>\n"); }

brisk_status brisk_html_write(const brisk_html *b, const char *path, brisk_error *err) {
    if (b->oom) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory while building the report", path);
    brisk_out o;
    brisk_status st = brisk_out_open(&o, path, err);
    if (st) return st;
    brisk_out_write(&o, b->s ? b->s : "", b->len);
    return brisk_out_commit(&o, err);
}
