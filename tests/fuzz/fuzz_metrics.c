/* libFuzzer target: a run directory's metrics.jsonl read back (report_log.c) and, when it
 * parses, the run report's page rendered from it (report_run.c) into memory: any line,
 * number or missing field gives an error or a page, never a crash, NaN or out-of-range
 * drawing, and text from the file never becomes markup. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_log.h"
#include "report/report_svg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A drawing attribute holding "nan" or "inf" (a coordinate of NaN draws nothing). Only the
 * numeric attributes are looked at: text from the file may well say "nan". */
static int bad_number(const char *page) {
    static const char *const attrs[] = {" x=\"", " y=\"", " cx=\"", " cy=\"", " width=\"", " height=\"",
                                        " points=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\""};
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++)
        for (const char *p = page; (p = strstr(p, attrs[a]));) {
            p += strlen(attrs[a]);
            const char *q = strchr(p, '"');
            if (!q) return 1;
            for (const char *c = p; c < q; c++)
                if (*c == 'n' || *c == 'N') return 1;
            p = q;
        }
    return 0;
}

/* A tag the renderer does not write: text from the file (a damaged line is quoted) reached
 * the page unescaped. */
static int foreign_tag(const char *page) {
    static const char *const tags[] = {"!DOCTYPE", "html", "head", "meta", "title", "style", "body", "h1", "h2",
                                       "p", "div", "span", "b", "table", "tr", "th", "td", "svg", "text",
                                       "line", "rect", "polygon", "polyline", "circle"};
    for (const char *p = page; (p = strchr(p, '<')); p++) {
        const char *n = p + 1 + (p[1] == '/');
        size_t len = strspn(n, "!ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789");
        int known = 0;
        for (size_t t = 0; t < sizeof tags / sizeof tags[0] && !known; t++)
            known = strlen(tags[t]) == len && strncmp(tags[t], n, len) == 0;
        if (!known) return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_log r;
    brisk_error err;
    if (brisk_run_log_parse((const char *)data, size, "fuzz/metrics.jsonl", &r, &err) == BRISK_OK) {
        brisk_html b = {0};
        brisk_report_run_render(&b, "fuzz", &r);
        if (b.s && (bad_number(b.s) || foreign_tag(b.s))) abort();
        brisk_html_free(&b);
    }
    brisk_run_log_free(&r);
    return 0;
}
