/* CSV: a header row, then numeric records. One pass: a record reader (RFC 4180 quoting,
 * LF/CRLF/CR line ends, line numbers kept for messages) feeding a table of the selected
 * columns as doubles, which the public reader and the dataset loader turn into tensors. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data/csv_internal.h"

#include <ctype.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------- record reader */

/* Bounds on one record, so a malformed file (a 200 MB line, a million commas) is refused
 * with a line number before its record takes gigabytes. */
#define CSV_MAX_RECORD (64u << 20)  /* bytes of one record's fields */
#define CSV_MAX_FIELD (64u << 10)   /* bytes of one field */
#define CSV_MAX_FIELDS (1 << 20)    /* fields of the header; a data row may not have more than it */

typedef struct csv_reader {
    const char *s;
    size_t n, i;
    int64_t line;          /* current physical line, 1-based */
    const char *name;
    char *text;            /* the record's fields, each NUL-terminated */
    size_t tlen, tcap;
    size_t *start;         /* field offsets into text */
    int64_t *fline;        /* the line each field starts on */
    int nf, fcap;
    int max_fields;        /* 0 until the header is read: then its count */
} csv_reader;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Trims white space (a quoted field may hold line ends) in place; returns the start. */
static char *trim(char *s) {
    while (is_space(*s)) s++;
    size_t k = strlen(s);
    while (k && is_space(s[k - 1])) s[--k] = 0;
    return s;
}

/* Up to 40 bytes of a field for a one-line message: control bytes shown as '?'. */
static const char *shown(const char *s, char *buf, size_t cap) {
    size_t k = 0;
    for (; s[k] && k + 4 < cap && k < 40; k++) buf[k] = (unsigned char)s[k] < 32 ? '?' : s[k];
    if (s[k]) { memcpy(buf + k, "...", 3); k += 3; }
    buf[k] = 0;
    return buf;
}

enum { PUT_OK, PUT_NOMEM, PUT_NUL, PUT_LONG };

static int put_char(csv_reader *r, char c) {
    if (c == 0) return PUT_NUL;
    if (r->tlen >= CSV_MAX_RECORD || r->tlen - r->start[r->nf - 1] >= CSV_MAX_FIELD) return PUT_LONG;
    if (r->tlen == r->tcap) {
        size_t cap = r->tcap ? r->tcap * 2 : 256;
        char *t = realloc(r->text, cap);
        if (!t) return PUT_NOMEM;
        r->text = t;
        r->tcap = cap;
    }
    r->text[r->tlen++] = c;
    return PUT_OK;
}

/* The field terminator: always fits (the record and field bounds leave room for it). */
static int end_field(csv_reader *r) {
    if (r->tlen == r->tcap) {
        char *t = realloc(r->text, r->tcap + 1);
        if (!t) return PUT_NOMEM;
        r->text = t;
        r->tcap++;
    }
    r->text[r->tlen++] = 0;
    return PUT_OK;
}

static int begin_field(csv_reader *r) {
    if (r->nf >= (r->max_fields ? r->max_fields + 1 : CSV_MAX_FIELDS)) return PUT_LONG;
    if (r->nf == r->fcap) {
        int cap = r->fcap ? r->fcap * 2 : 16;
        size_t *s = realloc(r->start, (size_t)cap * sizeof *s);
        if (s) r->start = s;
        int64_t *l = realloc(r->fline, (size_t)cap * sizeof *l);
        if (l) r->fline = l;
        if (!s || !l) return PUT_NOMEM;
        r->fcap = cap;
    }
    r->start[r->nf] = r->tlen;
    r->fline[r->nf++] = r->line;
    return 0;
}

/* Consumes a line end at the cursor if there is one ("\n", "\r\n" or "\r"). */
static int eat_eol(csv_reader *r) {
    if (r->i < r->n && r->s[r->i] == '\r') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '\n') r->i++;
        r->line++;
        return 1;
    }
    if (r->i < r->n && r->s[r->i] == '\n') { r->i++; r->line++; return 1; }
    return 0;
}

/* Reads one record into r->text/r->start. Returns 1 for a record, 0 at the end of the
 * input, or an error status (negated) through *st. Blank lines are skipped. */
static int read_record(csv_reader *r, brisk_status *st, brisk_error *err) {
    *st = BRISK_OK;
    int rc = PUT_OK;
    for (;;) {
        if (r->i >= r->n) return 0;
        r->tlen = 0;
        r->nf = 0;
        int quoted_any = 0;
        for (;;) {
            if ((rc = begin_field(r))) goto bad;
            size_t j = r->i;
            while (j < r->n && (r->s[j] == ' ' || r->s[j] == '\t')) j++;
            if (j < r->n && r->s[j] == '"') {
                int64_t qline = r->line;
                quoted_any = 1;
                r->i = j + 1;
                for (;;) {
                    if (r->i >= r->n) {
                        *st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: unterminated quoted field", r->name,
                                           (long long)qline);
                        return 0;
                    }
                    char c = r->s[r->i++];
                    if (c == '"') {
                        if (r->i < r->n && r->s[r->i] == '"') r->i++;
                        else break;
                    }
                    if (c == '\n' || (c == '\r' && !(r->i < r->n && r->s[r->i] == '\n'))) r->line++;
                    if ((rc = put_char(r, c))) goto bad;
                }
                while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t')) r->i++;
                if (r->i < r->n && r->s[r->i] != ',' && r->s[r->i] != '\n' && r->s[r->i] != '\r') {
                    *st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: text after a closing quote", r->name,
                                       (long long)r->line);
                    return 0;
                }
            } else {
                while (r->i < r->n && r->s[r->i] != ',' && r->s[r->i] != '\n' && r->s[r->i] != '\r')
                    if ((rc = put_char(r, r->s[r->i++]))) goto bad;
            }
            if ((rc = end_field(r))) goto bad;
            if (r->i < r->n && r->s[r->i] == ',') { r->i++; continue; }
            eat_eol(r);
            break;
        }
        /* A line holding nothing (or only spaces) is not a record. */
        if (r->nf == 1 && !quoted_any && *trim(r->text + r->start[0]) == 0) continue;
        return 1;
    }
bad:
    if (rc == PUT_NUL)
        *st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld, field %d: a NUL byte; expected text", r->name,
                           (long long)r->line, r->nf);
    else if (rc == PUT_LONG && r->max_fields && r->nf > r->max_fields)
        *st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: more than the header's %d fields", r->name,
                           (long long)r->fline[0], r->max_fields);
    else if (rc == PUT_LONG)
        *st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: a record over the limits (%u MiB, %u KiB a field, %d "
                           "fields); not a CSV table?", r->name, (long long)r->fline[0], CSV_MAX_RECORD >> 20,
                           CSV_MAX_FIELD >> 10, CSV_MAX_FIELDS);
    else
        *st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory reading line %lld", r->name, (long long)r->line);
    return 0;
}

static const char *field(const csv_reader *r, int k) { return r->text + r->start[k]; }

/* ---------------------------------------------------------------- table */

void brisk_csv_table_free(brisk_csv_table *t) {
    free(t->v);
    free(t->lines);
    memset(t, 0, sizeof *t);
}

static brisk_status select_columns(csv_reader *r, const char *const *columns, int ncolumns, int *idx,
                                   brisk_error *err) {
    for (int c = 0; c < ncolumns; c++) {
        idx[c] = -1;
        for (int k = 0; k < r->nf; k++)
            if (strcmp(trim(r->text + r->start[k]), columns[c]) == 0) {
                if (idx[c] >= 0)
                    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: column '%s' appears twice in the header", r->name,
                                        columns[c]);
                idx[c] = k;
            }
        if (idx[c] < 0) {
            char avail[600], sb[48];
            size_t a = 0;
            avail[0] = 0;
            for (int k = 0; k < r->nf && a < sizeof avail - 8; k++) {
                int w = snprintf(avail + a, sizeof avail - a, "%s'%s'", k ? ", " : "", shown(field(r, k), sb, sizeof sb));
                if (w < 0) break;
                a += (size_t)w;
            }
            if (a >= sizeof avail - 8) snprintf(avail + sizeof avail - 8, 8, ", ...");
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no column '%.100s' in the header (available: %s)",
                                r->name, columns[c], avail);
        }
    }
    return BRISK_OK;
}

int brisk_csv_decimal(const char *s) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    /* NaN and inf pass, to be refused with the row and column by the finiteness check */
    if (!strcasecmp(p, "nan") || !strcasecmp(p, "inf") || !strcasecmp(p, "infinity")) return 1;
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++) digits++;
    if (!digits) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!isdigit((unsigned char)*p)) return 0;
        while (isdigit((unsigned char)*p)) p++;
    }
    return *p == 0;
}

static brisk_status parse_number(csv_reader *r, int k, const char *colname, int integral, double *out,
                                 brisk_error *err) {
    char *s = trim(r->text + r->start[k]);
    char *end = NULL;
    /* strtod also reads 0x10 as 16 (and hexadecimal floats): no spreadsheet writes a number so */
    double v = brisk_csv_decimal(s) ? strtod(s, &end) : 0.0;
    char sb[48];
    if (!end || end == s || *end) {
        char *other = NULL;
        if (*s) strtod(s, &other);
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld, column '%.100s': expected a number, got '%s'%s",
                            r->name, (long long)r->fline[k], colname, shown(s, sb, sizeof sb),
                            other && other != s && !*other ? " (cells are read as decimal numbers only)" : "");
    }
    if (integral && !(v == floor(v) && v >= -2147483648.0 && v <= 2147483647.0))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld, column '%.100s': expected an integer label (i32), "
                            "got '%s'%s", r->name, (long long)r->fline[k], colname, shown(s, sb, sizeof sb),
                            v == v && v != floor(v) ? " (a regression target? set model.task to \"regress\")" : "");
    *out = v;
    return BRISK_OK;
}

static brisk_status parse_table(csv_reader *r, const char *const *columns, int ncolumns, const int *integral,
                                int all_integral, int64_t lo, int64_t hi, brisk_csv_table *out, brisk_error *err) {
    brisk_status st;
    if (!read_record(r, &st, err))
        return st ? st : brisk_errorf(err, BRISK_ERR_FORMAT, "%s: empty file; expected a header row", r->name);
    int nheader = r->nf;
    r->max_fields = nheader;
    /* The header is overwritten by the next record: keep the selected names. */
    char **names = calloc((size_t)(ncolumns > 0 ? ncolumns : nheader), sizeof *names);
    int *idx = malloc((size_t)(ncolumns > 0 ? ncolumns : nheader) * sizeof *idx);
    if (!names || !idx) { free(names); free(idx); return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", r->name); }
    int nsel = columns ? ncolumns : nheader;
    if (columns) st = select_columns(r, columns, ncolumns, idx, err);
    else for (int k = 0; k < nheader; k++) idx[k] = k;
    for (int c = 0; c < nsel && !st; c++)
        if (!(names[c] = strdup(trim(r->text + r->start[idx[c]]))))
            st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", r->name);
    size_t cap = 0;
    while (!st) {
        if (!read_record(r, &st, err)) break;
        if (r->nf != nheader) {
            st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %lld: expected %d fields as in the header, got %d",
                              r->name, (long long)r->fline[0], nheader, r->nf);
            break;
        }
        /* a shard: the records outside it are split (to find where rows end) but not kept */
        if (out->file_rows++ < lo || out->file_rows > hi) continue;
        if ((size_t)out->rows == cap) {
            cap = cap ? cap * 2 : 1024;
            double *v = realloc(out->v, cap * (size_t)(nsel ? nsel : 1) * sizeof *v);
            if (v) out->v = v;
            int64_t *l = realloc(out->lines, cap * sizeof *l);
            if (l) out->lines = l;
            if (!v || !l) { st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory at line %lld", r->name,
                                              (long long)r->line); break; }
        }
        double *row = out->v + out->rows * nsel;
        for (int c = 0; c < nsel && !st; c++)
            st = parse_number(r, idx[c], names[c], all_integral || (integral && integral[c]), &row[c], err);
        out->lines[out->rows++] = r->fline[0];
    }
    if (!st && out->file_rows == 0) st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no data rows after the header", r->name);
    else if (!st && out->rows == 0)
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: no data rows in the rows [%lld, %lld) asked for; the file has %lld",
                          r->name, (long long)lo, (long long)hi, (long long)out->file_rows);
    out->ncols = nsel;
    for (int c = 0; c < nsel; c++) free(names[c]);
    free(names);
    free(idx);
    return st;
}

brisk_status brisk_csv_header(const void *buf, size_t len, const char *name, char ***names, int *n, brisk_error *err) {
    *names = NULL;
    *n = 0;
    csv_reader r;
    memset(&r, 0, sizeof r);
    r.s = (const char *)buf;
    r.n = len;
    r.line = 1;
    r.name = name;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) r.i = 3;
    brisk_status st;
    if (!read_record(&r, &st, err) && !st) st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: empty file; expected a header row", name);
    /* one block: the pointers, then the names they point at */
    char **v = st ? NULL : malloc((size_t)r.nf * sizeof *v + r.tlen);
    if (!st && !v) st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    if (!st) {
        char *text = (char *)(v + r.nf);
        memcpy(text, r.text, r.tlen);
        for (int k = 0; k < r.nf; k++) v[k] = trim(text + r.start[k]);
        *names = v;
        *n = r.nf;
    }
    free(r.text);
    free(r.start);
    free(r.fline);
    return st;
}

static int header_index(char *const *header, int nh, const char *col, size_t len) {
    for (int k = 0; k < nh; k++)
        if (strlen(header[k]) == len && memcmp(header[k], col, len) == 0) return k;
    return -1;
}

brisk_status brisk_csv_expand_columns(char *const *header, int nh, const char *name, const char *const *sel, int nsel,
                                      const char ***out, int *nout, brisk_error *err) {
    *out = NULL;
    *nout = 0;
    size_t total = 0;
    /* Two passes: count, then fill. A name the header has is taken as it is, even with a ':'. */
    for (int pass = 0; pass < 2; pass++) {
        int k = 0;
        for (int i = 0; i < nsel; i++) {
            const char *c = sel[i], *colon = strchr(c, ':');
            int a = -1, b = -1;
            if (header_index(header, nh, c, strlen(c)) < 0 && colon) {
                a = header_index(header, nh, c, (size_t)(colon - c));
                b = header_index(header, nh, colon + 1, strlen(colon + 1));
                brisk_status st = BRISK_OK;
                if (a < 0 || b < 0)
                    st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: column range '%.100s': no column '%.*s' in the header",
                                      name, c, a < 0 ? (int)(colon - c) : 100, a < 0 ? c : colon + 1);
                else if (a > b)
                    st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: column range '%.100s': '%.*s' comes after '%s' in the "
                                      "header (column %d > %d)", name, c, (int)(colon - c), c, colon + 1, a, b);
                if (st) {
                    free(*out);
                    *out = NULL;
                    return st;
                }
            }
            if (a < 0) {
                if (pass) (*out)[k] = c;
                k++;
                continue;
            }
            for (int j = a; j <= b; j++, k++)
                if (pass) (*out)[k] = header[j];
        }
        if (pass == 0) {
            total = (size_t)k;
            if (total > CSV_MAX_FIELDS)
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %zu columns selected, more than %d", name, total, CSV_MAX_FIELDS);
            if (!(*out = malloc((total ? total : 1) * sizeof **out)))
                return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
        }
    }
    *nout = (int)total;
    return BRISK_OK;
}

brisk_status brisk_csv_table_parse(const void *buf, size_t len, const char *name, const char *const *columns,
                                   int ncolumns, const int *integral, int all_integral, brisk_csv_table *out,
                                   brisk_error *err) {
    return brisk_csv_table_parse_rows(buf, len, name, columns, ncolumns, integral, all_integral, 0, INT64_MAX, out, err);
}

brisk_status brisk_csv_table_parse_rows(const void *buf, size_t len, const char *name, const char *const *columns,
                                        int ncolumns, const int *integral, int all_integral, int64_t lo, int64_t hi,
                                        brisk_csv_table *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (columns && ncolumns <= 0) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no columns selected", name);
    csv_reader r;
    memset(&r, 0, sizeof r);
    r.s = (const char *)buf;
    r.n = len;
    r.line = 1;
    r.name = name;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) r.i = 3;
    /* Numbers are read in the C locale whatever the program set (a decimal comma would
     * otherwise misread every value); uselocale is per thread. */
    locale_t c_loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c_loc ? uselocale(c_loc) : (locale_t)0;
    brisk_status st = parse_table(&r, columns, ncolumns, integral, all_integral, lo, hi, out, err);
    if (c_loc) { uselocale(old); freelocale(c_loc); }
    free(r.text);
    free(r.start);
    free(r.fline);
    if (st) brisk_csv_table_free(out);
    return st;
}

brisk_status brisk_csv_parse(const void *buf, size_t len, const char *name, const char *const *columns, int ncolumns,
                             brisk_dtype dtype, brisk_tensor *out, brisk_error *err) {
    memset(out, 0, sizeof *out);
    if (dtype != BRISK_F32 && dtype != BRISK_I32)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: CSV reads into f32 or i32, not %s", name, brisk_dtype_name(dtype));
    brisk_csv_table t;
    brisk_status st = brisk_csv_table_parse(buf, len, name, columns, ncolumns, NULL, dtype == BRISK_I32, &t, err);
    if (st) return st;
    st = brisk_tensor_alloc(out, dtype, brisk_shape2(t.rows, t.ncols), err);
    if (!st) {
        int64_t n = t.rows * t.ncols;
        if (dtype == BRISK_F32) for (int64_t i = 0; i < n; i++) ((float *)out->data)[i] = (float)t.v[i];
        else for (int64_t i = 0; i < n; i++) ((int32_t *)out->data)[i] = (int32_t)t.v[i];
    }
    brisk_csv_table_free(&t);
    return st;
}

brisk_status brisk_csv_read(const char *path, const char *const *columns, int ncolumns, brisk_dtype dtype,
                            brisk_tensor *out, brisk_error *err) {
    brisk_file f;
    memset(out, 0, sizeof *out);
    brisk_status st = brisk_file_load(path, &f, err);
    if (st) return st;
    st = brisk_csv_parse(f.data, f.len, path, columns, ncolumns, dtype, out, err);
    brisk_file_release(&f);
    return st;
}

brisk_status brisk_csv_write(const char *path, const brisk_tensor *t, const char *prefix, brisk_error *err) {
    if (t->dtype != BRISK_F32 || t->shape.ndim < 1 || t->shape.ndim > 2)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: CSV holds f32 [rows] or [rows, columns]", path);
    int64_t rows = t->shape.d[0], cols = t->shape.ndim == 2 ? t->shape.d[1] : 1;
    brisk_out o;
    brisk_status st = brisk_out_open(&o, path, err);
    if (st) return st;
    /* Numbers in the C locale, whatever the program set: a decimal comma would split fields. */
    locale_t c_loc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c_loc ? uselocale(c_loc) : (locale_t)0;
    for (int64_t c = 0; c < cols; c++) fprintf(o.fp, "%s%s%lld", c ? "," : "", prefix, (long long)c);
    fputc('\n', o.fp);
    const float *v = (const float *)t->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) fprintf(o.fp, "%.9g%c", (double)v[r * cols + c], c + 1 < cols ? ',' : '\n');
    if (c_loc) { uselocale(old); freelocale(c_loc); }
    return brisk_out_commit(&o, err);
}
