/* The labels CSV of an image dataset: `file[,category][,x0,y0,v0,...]`. A small parser of
 * its own because the numeric CSV reader (csv.c) has no string columns; fields are split
 * at plain commas, with spaces around them, CRLF and a UTF-8 byte-order mark tolerated. */
#include "data/bytes.h"
#include "data/csv_internal.h"
#include "data/image_internal.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_COLS = 2 + 3 * BRISK_MAX_KEYPOINTS, FIELD_MAX = 1024 };

void brisk_image_labels_free(brisk_image_labels *l) {
    if (!l) return;
    for (int64_t i = 0; l->files && i < l->rows; i++) free(l->files[i]);
    free(l->files);
    free(l->lines);
    free(l->category);
    free(l->kp);
    memset(l, 0, sizeof *l);
}

/* Splits one line [p, end) into trimmed fields (pointers into out[] copies). */
static int split(const char *p, const char *end, char cols[][FIELD_MAX], int max, int *too_long) {
    int n = 0;
    *too_long = 0;
    for (;;) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        const char *e = c ? c : end;
        const char *a = p, *b = e;
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r')) b--;
        if (n == max) return max + 1;
        if ((size_t)(b - a) >= FIELD_MAX) *too_long = 1, b = a + FIELD_MAX - 1;
        memcpy(cols[n], a, (size_t)(b - a));
        cols[n][b - a] = 0;
        n++;
        if (!c) return n;
        p = c + 1;
    }
}

static int number(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = brisk_csv_decimal(s) ? strtod(s, &end) : NAN;
    return *s && isfinite(*v) && !*end && errno != ERANGE;
}

static brisk_status header(const char *name, char cols[][FIELD_MAX], int n, brisk_image_labels *l, brisk_error *err) {
    if (n < 1 || strcmp(cols[0], "file") != 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line 1: expected a header starting with 'file' (then "
                            "'category' and/or x0,y0,v0,x1,y1,v1,...), got '%.80s'", name, n ? cols[0] : "");
    int c = 1;
    if (c < n && strcmp(cols[c], "category") == 0) l->has_category = 1, c++;
    if ((n - c) % 3 != 0)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line 1: %d keypoint columns; expected triples x<i>,y<i>,v<i>",
                            name, n - c);
    l->k = (n - c) / 3;
    for (int i = 0; i < l->k; i++)
        for (int a = 0; a < 3; a++) {
            char want[16];
            snprintf(want, sizeof want, "%c%d", "xyv"[a], i);
            if (strcmp(cols[c + 3 * i + a], want) != 0)
                return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line 1: column %d is '%.40s'; expected '%s' (keypoint "
                                    "columns are x0,y0,v0,x1,y1,v1,... in order)", name, c + 3 * i + a + 1,
                                    cols[c + 3 * i + a], want);
        }
    return BRISK_OK;
}

brisk_status brisk_image_labels_parse(const char *buf, size_t len, const char *name, brisk_image_labels *l,
                                      brisk_error *err) {
    memset(l, 0, sizeof *l);
    const char *p = buf, *end = buf + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    char (*cols)[FIELD_MAX] = malloc(sizeof(char[MAX_COLS + 1][FIELD_MAX]));
    if (!cols) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    brisk_status st = BRISK_OK;
    int64_t line = 0, cap = 0;
    int ncols = -1;
    while (p < end && !st) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl : end;
        line++;
        const char *q = p;
        while (q < e && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q == e) { p = nl ? nl + 1 : end; continue; } /* blank line */
        if (memchr(p, 0, (size_t)(e - p))) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: a NUL byte; expected text", name, (long long)line);
            break;
        }
        int too_long, n = split(p, e, cols, MAX_COLS, &too_long);
        p = nl ? nl + 1 : end;
        if (n > MAX_COLS || too_long) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: %s", name, (long long)line,
                              too_long ? "a field longer than 1023 bytes" : "too many columns");
            break;
        }
        if (ncols < 0) {
            ncols = n;
            st = header(name, cols, n, l, err);
            continue;
        }
        if (n != ncols) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: %d fields; the header has %d", name, (long long)line,
                              n, ncols);
            break;
        }
        if (l->rows == cap) {
            int64_t nc = cap ? 2 * cap : 64;
            char **f = realloc(l->files, (size_t)nc * sizeof *f);
            if (f) l->files = f;
            int64_t *li = realloc(l->lines, (size_t)nc * sizeof *li);
            if (li) l->lines = li;
            int32_t *ca = realloc(l->category, (size_t)nc * sizeof *ca);
            if (ca) l->category = ca;
            float *kp = realloc(l->kp, (size_t)nc * (size_t)(l->k ? l->k : 1) * 3 * sizeof *kp);
            if (kp) l->kp = kp;
            if (!f || !li || !ca || !kp) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name); break; }
            cap = nc;
        }
        int64_t r = l->rows;
        if (!cols[0][0]) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld, column 'file': empty; expected a path", name,
                              (long long)line);
            break;
        }
        if (!(l->files[r] = strdup(cols[0]))) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name); break; }
        l->lines[r] = line;
        l->rows++;
        int c = 1;
        double v;
        if (l->has_category) {
            if (!number(cols[c], &v) || v != floor(v) || v < 0 || v > 2147483647.0) {
                st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld, column 'category': expected an integer >= 0, "
                                  "got '%.40s'", name, (long long)line, cols[c]);
                break;
            }
            l->category[r] = (int32_t)v;
            c++;
        }
        for (int i = 0; i < 3 * l->k && !st; i++, c++) {
            int isv = i % 3 == 2;
            if (!number(cols[c], &v) || (isv && v != 0 && v != 1 && v != 2))
                st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld, column '%c%d': expected %s, got '%.40s'", name,
                                  (long long)line, "xyv"[i % 3], i / 3, isv ? "0, 1 or 2" : "a finite number", cols[c]);
            else l->kp[r * 3 * l->k + i] = (float)v;
        }
    }
    free(cols);
    if (!st && ncols < 0) st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: empty; expected a header line", name);
    if (!st && l->rows == 0) st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: a header but no images", name);
    if (st) brisk_image_labels_free(l);
    return st;
}

brisk_status brisk_keypoints_csv_write(const char *path, const char *const *files, int64_t rows, int k, const float *xy,
                                       brisk_error *err) {
    for (int64_t r = 0; r < rows; r++) /* the labels format has no quoting */
        if (strpbrk(files[r], ",\r\n"))
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the image name '%s' holds a comma or a line break, which a "
                                "keypoints CSV cannot; write .npy instead", path, files[r]);
    brisk_out o;
    brisk_status st = brisk_out_open(&o, path, err);
    if (st) return st;
    /* Numbers in the C locale, whatever the program set: a decimal comma would split fields. */
    locale_t c_loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c_loc ? uselocale(c_loc) : (locale_t)0;
    fputs("file", o.fp);
    for (int j = 0; j < k; j++) fprintf(o.fp, ",x%d,y%d", j, j);
    fputc('\n', o.fp);
    for (int64_t r = 0; r < rows; r++) {
        const char *slash = strrchr(files[r], '/');
        fputs(slash ? slash + 1 : files[r], o.fp);
        for (int j = 0; j < 2 * k; j++) fprintf(o.fp, ",%.3f", (double)xy[r * 2 * k + j]);
        fputc('\n', o.fp);
    }
    if (c_loc) { uselocale(old); freelocale(c_loc); }
    return brisk_out_commit(&o, err);
}
