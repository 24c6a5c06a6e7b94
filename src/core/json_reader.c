/* json readers: typed getters over one object of a config, with the sticky first
 * error, key paths in messages, and the record of asked-for keys that makes unknown
 * (misspelt) keys an error. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_internal.h"

/* ---------------------------------------------------------------- bookkeeping */

static brisk_status fail_nomem(brisk_json *doc) {
    if (!doc->status) doc->status = brisk_errorf(&doc->err, BRISK_ERR_NOMEM, "%s: out of memory", doc->name);
    return doc->status;
}

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int asked(const brisk_json *doc, const cJSON *obj, const char *key) {
    for (size_t i = 0; i < doc->n_asked; i++)
        if (doc->asked[i].obj == obj && strcmp(doc->asked[i].key, key) == 0) return 1;
    return 0;
}

static void mark(brisk_json_reader *r, const char *key) {
    brisk_json *doc = r->doc;
    if (!r->obj || asked(doc, r->obj, key)) return;
    char *k = strdup(key);
    if (!k || grow((void **)&doc->asked, &doc->cap_asked, doc->n_asked, sizeof *doc->asked)) {
        free(k);
        fail_nomem(doc);
        return;
    }
    doc->asked[doc->n_asked++] = (json_asked){r->obj, k};
}

/* Remembers an object a reader was opened on, once, for brisk_json_finish. */
static void opened(brisk_json_reader *r) {
    brisk_json *doc = r->doc;
    if (!r->obj) return;
    for (size_t i = 0; i < doc->n_opened; i++)
        if (doc->opened[i].obj == r->obj) return;
    char *p = strdup(r->path);
    if (!p || grow((void **)&doc->opened, &doc->cap_opened, doc->n_opened, sizeof *doc->opened)) {
        free(p);
        fail_nomem(doc);
        return;
    }
    doc->opened[doc->n_opened++] = (json_opened){r->obj, p};
}

static void key_path(const brisk_json_reader *r, const char *key, char *buf, size_t cap) {
    if (!key) snprintf(buf, cap, "%s", r->path);
    else snprintf(buf, cap, "%s%s%s", r->path, r->path[0] ? "." : "", key);
}

static brisk_status vfail(brisk_json_reader *r, const char *key, const char *fmt, va_list ap) {
    brisk_json *doc = r->doc;
    if (doc->status) return doc->status;
    char path[BRISK_JSON_PATH_MAX], what[768];
    key_path(r, key, path, sizeof path);
    vsnprintf(what, sizeof what, fmt, ap);
    doc->status = brisk_errorf(&doc->err, BRISK_ERR_INVALID, "%s: %s%s%s", doc->name, path,
                               path[0] ? ": " : "", what);
    return doc->status;
}

brisk_status brisk_json_fail(brisk_json_reader *r, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    brisk_status s = vfail(r, key, fmt, ap);
    va_end(ap);
    return s;
}

/* The offending value as the user wrote it, shortened: got "fast", got [1, 2, ...]. */
static void describe(const cJSON *v, char *buf, size_t cap) {
    if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) { snprintf(buf, cap, "a number out of range"); return; }
    char *s = cJSON_PrintUnformatted(v);
    if (!s) { snprintf(buf, cap, "%s", brisk_json_kind(v)); return; }
    size_t n = strlen(s);
    if (n > 48) {
        n = 40;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* not inside a UTF-8 character */
        snprintf(buf, cap, "%.*s...", (int)n, s);
    } else {
        snprintf(buf, cap, "%s", s);
    }
    cJSON_free(s);
}

/* Looks `key` up: NULL when the reader's object is absent or lacks it. */
static const cJSON *lookup(brisk_json_reader *r, const char *key) {
    mark(r, key);
    return r->obj ? cJSON_GetObjectItemCaseSensitive(r->obj, key) : NULL;
}

static int absent(const cJSON *v) { return !v || cJSON_IsNull(v); }

static brisk_status missing(brisk_json_reader *r, const char *key, const char *expected) {
    return brisk_json_fail(r, key, "missing, expected %s", expected);
}

static brisk_status wrong(brisk_json_reader *r, const char *key, const char *expected, const cJSON *v) {
    char got[64];
    describe(v, got, sizeof got);
    return brisk_json_fail(r, key, "expected %s, got %s", expected, got);
}

static brisk_status check_reader(brisk_json_reader *r) {
    if (!r || !r->doc) return BRISK_ERR_INTERNAL;
    return r->doc->status;
}

void brisk_json_record(brisk_json *doc, brisk_json_recorder fn, void *user) {
    doc->recorder = fn;
    doc->recorder_user = user;
}

static void note(brisk_json_reader *r, const char *key, const char *type, const char *accepts, const char *def) {
    if (!r->doc->recorder || r->doc->status) return;
    char path[BRISK_JSON_PATH_MAX];
    key_path(r, key, path, sizeof path);
    brisk_json_key_info k = {path, type, accepts ? accepts : "", def};
    r->doc->recorder(r->doc->recorder_user, &k);
}

/* The text of a default for the reference ("0.001", "true", "\"adamw\""). */
static const char *num_text(double x, char *buf, size_t cap) {
    snprintf(buf, cap, "%.9g", x);
    return buf;
}

/* ---------------------------------------------------------------- numbers */

static void range_text(brisk_json_range g, const char *noun, char *buf, size_t cap) {
    int lo = isfinite(g.lo), hi = isfinite(g.hi);
    if (lo && hi)
        snprintf(buf, cap, "%s in %c%g, %g%c", noun, g.lo_open ? '(' : '[', g.lo, g.hi, g.hi_open ? ')' : ']');
    else if (lo) snprintf(buf, cap, "%s %s %g", noun, g.lo_open ? ">" : ">=", g.lo);
    else if (hi) snprintf(buf, cap, "%s %s %g", noun, g.hi_open ? "<" : "<=", g.hi);
    else snprintf(buf, cap, "%s", noun);
}

static int in_range(double x, brisk_json_range g) {
    if (!isfinite(x)) return 0;
    if (g.lo_open ? !(x > g.lo) : !(x >= g.lo)) return 0;
    if (g.hi_open ? !(x < g.hi) : !(x <= g.hi)) return 0;
    return 1;
}

/* Checks one value (an object member or array element) as a number in range. */
static brisk_status number_value(brisk_json_reader *r, const char *key, const cJSON *v,
                                 brisk_json_range g, double *out) {
    char exp[96];
    range_text(g, "a number", exp, sizeof exp);
    if (!cJSON_IsNumber(v) || !in_range(v->valuedouble, g)) return wrong(r, key, exp, v);
    *out = v->valuedouble;
    return BRISK_OK;
}

static void note_number(brisk_json_reader *r, const char *key, brisk_json_range g, const char *def) {
    if (!r->doc->recorder) return;
    char rt[96];
    range_text(g, "", rt, sizeof rt);
    note(r, key, "number", rt[0] == ' ' ? rt + 1 : rt, def);
}

brisk_status brisk_json_number(brisk_json_reader *r, const char *key, brisk_json_range g, double *out) {
    *out = 0;
    brisk_status s = check_reader(r);
    if (s) return s;
    note_number(r, key, g, NULL);
    const cJSON *v = lookup(r, key);
    if (absent(v)) {
        char exp[96];
        range_text(g, "a number", exp, sizeof exp);
        return v ? wrong(r, key, exp, v) : missing(r, key, exp);
    }
    s = number_value(r, key, v, g, out);
    if (s) *out = 0;
    return s;
}

brisk_status brisk_json_number_or(brisk_json_reader *r, const char *key, double def,
                                  brisk_json_range g, double *out) {
    *out = def;
    brisk_status s = check_reader(r);
    if (s) return s;
    char dt[32];
    note_number(r, key, g, num_text(def, dt, sizeof dt));
    const cJSON *v = lookup(r, key);
    if (absent(v)) return BRISK_OK;
    s = number_value(r, key, v, g, out);
    if (s) *out = def;
    return s;
}

/* Integers travel as doubles: integral and within [lo, hi] (both exact in a double
 * up to 2^53, which bounds every range callers give). */
static brisk_status int_value(brisk_json_reader *r, const char *key, const cJSON *v, int64_t lo,
                              int64_t hi, int64_t dmin, int64_t dmax, int64_t *out) {
    char exp[96];
    if (lo > dmin && hi < dmax) snprintf(exp, sizeof exp, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    else if (lo > dmin) snprintf(exp, sizeof exp, "an integer >= %lld", (long long)lo);
    else if (hi < dmax) snprintf(exp, sizeof exp, "an integer <= %lld", (long long)hi);
    else snprintf(exp, sizeof exp, "an integer");
    if (!v) return missing(r, key, exp);
    if (!cJSON_IsNumber(v)) return wrong(r, key, exp, v);
    double x = v->valuedouble;
    const double lim = 9007199254740992.0; /* 2^53 */
    if (!isfinite(x) || x != floor(x) || x > lim || x < -lim || x < (double)lo || x > (double)hi)
        return wrong(r, key, exp, v);
    *out = (int64_t)x;
    return BRISK_OK;
}

static brisk_status get_int(brisk_json_reader *r, const char *key, int required, int64_t def,
                            int64_t lo, int64_t hi, int64_t dmin, int64_t dmax, int64_t *out) {
    *out = required ? 0 : def;
    brisk_status s = check_reader(r);
    if (s) return s;
    if (r->doc->recorder) {
        char acc[96] = "", dt[32];
        if (lo > dmin && hi < dmax) snprintf(acc, sizeof acc, "[%lld, %lld]", (long long)lo, (long long)hi);
        else if (lo > dmin) snprintf(acc, sizeof acc, ">= %lld", (long long)lo);
        else if (hi < dmax) snprintf(acc, sizeof acc, "<= %lld", (long long)hi);
        snprintf(dt, sizeof dt, "%lld", (long long)def);
        note(r, key, "integer", acc, required ? NULL : dt);
    }
    const cJSON *v = lookup(r, key);
    if (absent(v) && !required) return BRISK_OK;
    int64_t x = 0;
    s = int_value(r, key, v, lo, hi, dmin, dmax, &x);
    if (!s) *out = x;
    return s;
}

brisk_status brisk_json_int(brisk_json_reader *r, const char *key, int lo, int hi, int *out) {
    int64_t x;
    brisk_status s = get_int(r, key, 1, 0, lo, hi, INT_MIN, INT_MAX, &x);
    *out = (int)x;
    return s;
}
brisk_status brisk_json_int_or(brisk_json_reader *r, const char *key, int def, int lo, int hi, int *out) {
    int64_t x;
    brisk_status s = get_int(r, key, 0, def, lo, hi, INT_MIN, INT_MAX, &x);
    *out = (int)x;
    return s;
}
brisk_status brisk_json_int64(brisk_json_reader *r, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    return get_int(r, key, 1, 0, lo, hi, INT64_MIN, INT64_MAX, out);
}
brisk_status brisk_json_int64_or(brisk_json_reader *r, const char *key, int64_t def, int64_t lo,
                                 int64_t hi, int64_t *out) {
    return get_int(r, key, 0, def, lo, hi, INT64_MIN, INT64_MAX, out);
}

/* ---------------------------------------------------------------- bools, strings, enums */

static brisk_status get_bool(brisk_json_reader *r, const char *key, int required, bool def, bool *out) {
    *out = required ? false : def;
    brisk_status s = check_reader(r);
    if (s) return s;
    note(r, key, "bool", "true, false", required ? NULL : def ? "true" : "false");
    const cJSON *v = lookup(r, key);
    if (absent(v) && !required) return BRISK_OK;
    if (!v) return missing(r, key, "true or false");
    if (!cJSON_IsBool(v)) return wrong(r, key, "true or false", v);
    *out = cJSON_IsTrue(v);
    return BRISK_OK;
}
brisk_status brisk_json_bool(brisk_json_reader *r, const char *key, bool *out) {
    return get_bool(r, key, 1, false, out);
}
brisk_status brisk_json_bool_or(brisk_json_reader *r, const char *key, bool def, bool *out) {
    return get_bool(r, key, 0, def, out);
}

static brisk_status get_string(brisk_json_reader *r, const char *key, int required, const char *def,
                               const char **out) {
    *out = required ? NULL : def;
    brisk_status s = check_reader(r);
    if (s) return s;
    if (r->doc->recorder) {
        char dt[BRISK_JSON_PATH_MAX + 8];
        snprintf(dt, sizeof dt, "\"%s\"", def ? def : "");
        note(r, key, "string", "", required ? NULL : dt);
    }
    const cJSON *v = lookup(r, key);
    if (absent(v) && !required) return BRISK_OK;
    if (!v) return missing(r, key, "a string");
    if (!cJSON_IsString(v)) return wrong(r, key, "a string", v);
    *out = v->valuestring;
    return BRISK_OK;
}
brisk_status brisk_json_string(brisk_json_reader *r, const char *key, const char **out) {
    return get_string(r, key, 1, NULL, out);
}
brisk_status brisk_json_string_or(brisk_json_reader *r, const char *key, const char *def, const char **out) {
    return get_string(r, key, 0, def, out);
}

static brisk_status get_enum(brisk_json_reader *r, const char *key, const char *const *choices,
                             int required, int def, int *out) {
    *out = required ? 0 : def;
    brisk_status s = check_reader(r);
    if (s) return s;
    if (r->doc->recorder) {
        char acc[600], dt[80];
        size_t k = 0;
        acc[0] = 0;
        for (int i = 0; choices[i] && k < sizeof acc; i++)
            k += (size_t)snprintf(acc + k, sizeof acc - k, "%s\"%s\"", i ? ", " : "", choices[i]);
        snprintf(dt, sizeof dt, "\"%s\"", required ? "" : choices[def]);
        note(r, key, "enum", acc, required ? NULL : dt);
    }
    const cJSON *v = lookup(r, key);
    if (absent(v) && !required) return BRISK_OK;
    if (cJSON_IsString(v))
        for (int i = 0; choices[i]; i++)
            if (strcmp(v->valuestring, choices[i]) == 0) { *out = i; return BRISK_OK; }
    char exp[600];
    size_t k = (size_t)snprintf(exp, sizeof exp, "one of");
    for (int i = 0; choices[i] && k < sizeof exp; i++)
        k += (size_t)snprintf(exp + k, sizeof exp - k, "%s \"%s\"", i ? "," : "", choices[i]);
    return v ? wrong(r, key, exp, v) : missing(r, key, exp);
}
brisk_status brisk_json_enum(brisk_json_reader *r, const char *key, const char *const *choices, int *out) {
    return get_enum(r, key, choices, 1, 0, out);
}
brisk_status brisk_json_enum_or(brisk_json_reader *r, const char *key, const char *const *choices, int def,
                                int *out) {
    return get_enum(r, key, choices, 0, def, out);
}

/* ---------------------------------------------------------------- arrays */

/* The array at `key` (NULL with OK when absent and optional), checked to be one. */
static brisk_status get_array(brisk_json_reader *r, const char *key, int required, const char *exp, const char *type,
                              const char *accepts, const cJSON **arr, size_t *n) {
    *arr = NULL;
    *n = 0;
    brisk_status s = check_reader(r);
    if (s) return s;
    note(r, key, type, accepts, required ? NULL : "[]");
    const cJSON *v = lookup(r, key);
    if (absent(v) && !required) return BRISK_OK;
    if (!v) return missing(r, key, exp);
    if (!cJSON_IsArray(v)) return wrong(r, key, exp, v);
    *arr = v;
    for (const cJSON *c = v->child; c; c = c->next) (*n)++;
    return BRISK_OK;
}

static void elem_key(const char *key, size_t i, char *buf, size_t cap) {
    snprintf(buf, cap, "%s[%zu]", key, i);
}

brisk_status brisk_json_numbers(brisk_json_reader *r, const char *key, bool required,
                                brisk_json_range g, double **out, size_t *n) {
    *out = NULL;
    char rt[96], exp[128], ek[BRISK_JSON_PATH_MAX];
    range_text(g, "numbers", rt, sizeof rt);
    snprintf(exp, sizeof exp, "an array of %s", rt);
    const cJSON *a;
    size_t len;
    brisk_status s = get_array(r, key, required, exp, "numbers", rt[7] == ' ' ? rt + 8 : "", &a, &len);
    if (s || !len) { *n = 0; return s; }
    double *v = malloc(len * sizeof *v);
    if (!v) { *n = 0; return fail_nomem(r->doc); }
    size_t i = 0;
    for (const cJSON *c = a->child; c; c = c->next, i++) {
        elem_key(key, i, ek, sizeof ek);
        if ((s = number_value(r, ek, c, g, &v[i]))) { free(v); *n = 0; return s; }
    }
    *out = v;
    *n = len;
    return BRISK_OK;
}

brisk_status brisk_json_ints(brisk_json_reader *r, const char *key, bool required, int lo, int hi,
                             int **out, size_t *n) {
    *out = NULL;
    char ek[BRISK_JSON_PATH_MAX];
    const cJSON *a;
    size_t len;
    char exp[96];
    snprintf(exp, sizeof exp, "an array of integers in [%d, %d]", lo, hi);
    brisk_status s = get_array(r, key, required, exp, "integers", exp + 21, &a, &len);
    if (s || !len) { *n = 0; return s; }
    int *v = malloc(len * sizeof *v);
    if (!v) { *n = 0; return fail_nomem(r->doc); }
    size_t i = 0;
    for (const cJSON *c = a->child; c; c = c->next, i++) {
        int64_t x = 0;
        elem_key(key, i, ek, sizeof ek);
        if ((s = int_value(r, ek, c, lo, hi, INT_MIN, INT_MAX, &x))) { free(v); *n = 0; return s; }
        v[i] = (int)x;
    }
    *out = v;
    *n = len;
    return BRISK_OK;
}

brisk_status brisk_json_strings(brisk_json_reader *r, const char *key, bool required,
                                const char ***out, size_t *n) {
    *out = NULL;
    char ek[BRISK_JSON_PATH_MAX];
    const cJSON *a;
    size_t len;
    brisk_status s = get_array(r, key, required, "an array of strings", "strings", "", &a, &len);
    if (s || !len) { *n = 0; return s; }
    const char **v = malloc(len * sizeof *v);
    if (!v) { *n = 0; return fail_nomem(r->doc); }
    size_t i = 0;
    for (const cJSON *c = a->child; c; c = c->next, i++) {
        if (!cJSON_IsString(c)) {
            elem_key(key, i, ek, sizeof ek);
            free(v);
            *n = 0;
            return wrong(r, ek, "a string", c);
        }
        v[i] = c->valuestring;
    }
    *out = v;
    *n = len;
    return BRISK_OK;
}

/* ---------------------------------------------------------------- objects */

static void sub_reader(brisk_json_reader *r, const char *subpath, const cJSON *obj, brisk_json_reader *sub) {
    sub->doc = r->doc;
    sub->obj = obj;
    snprintf(sub->path, sizeof sub->path, "%s%s%s", r->path, r->path[0] ? "." : "", subpath);
    opened(sub);
}

brisk_json_reader brisk_json_root(brisk_json *doc) {
    brisk_json_reader r = {doc, NULL, ""};
    if (cJSON_IsObject(doc->root)) {
        r.obj = doc->root;
        opened(&r);
    } else if (!doc->status) {
        doc->status = brisk_errorf(&doc->err, BRISK_ERR_INVALID, "%s: expected a JSON object at the top level, got %s",
                                   doc->name, brisk_json_kind(doc->root));
    }
    return r;
}

static brisk_status get_object(brisk_json_reader *r, const char *key, int required, brisk_json_reader *sub,
                               bool *present) {
    brisk_json_reader self = *r; /* r may alias sub */
    sub->doc = self.doc;
    sub->obj = NULL;
    key_path(&self, key, sub->path, sizeof sub->path);
    if (present) *present = false;
    brisk_status s = check_reader(&self);
    if (s) return s;
    const cJSON *v = lookup(&self, key);
    if (absent(v) && !required) return BRISK_OK;
    if (!v) return missing(&self, key, "an object");
    if (!cJSON_IsObject(v)) return wrong(&self, key, "an object", v);
    sub_reader(&self, key, v, sub);
    if (present) *present = true;
    return self.doc->status;
}

brisk_status brisk_json_object(brisk_json_reader *r, const char *key, brisk_json_reader *sub) {
    return get_object(r, key, 1, sub, NULL);
}
brisk_status brisk_json_object_opt(brisk_json_reader *r, const char *key, brisk_json_reader *sub, bool *present) {
    return get_object(r, key, 0, sub, present);
}

brisk_status brisk_json_array_len(brisk_json_reader *r, const char *key, bool required, size_t *n) {
    const cJSON *a;
    return get_array(r, key, required, "an array", "objects", "", &a, n);
}

brisk_status brisk_json_object_at(brisk_json_reader *r, const char *key, size_t i, brisk_json_reader *sub) {
    brisk_json_reader self = *r;
    char ek[BRISK_JSON_PATH_MAX];
    elem_key(key, i, ek, sizeof ek);
    sub->doc = self.doc;
    sub->obj = NULL;
    key_path(&self, ek, sub->path, sizeof sub->path);
    brisk_status s = check_reader(&self);
    if (s) return s;
    const cJSON *a = lookup(&self, key);
    if (!cJSON_IsArray(a)) return a ? wrong(&self, key, "an array of objects", a) : missing(&self, key, "an array of objects");
    const cJSON *v = a->child;
    for (size_t k = 0; v && k < i; k++) v = v->next;
    if (!v) return brisk_json_fail(&self, key, "has no element %zu", i);
    if (!cJSON_IsObject(v)) return wrong(&self, ek, "an object", v);
    sub_reader(&self, ek, v, sub);
    return self.doc->status;
}

bool brisk_json_has(brisk_json_reader *r, const char *key) {
    if (!r || !r->doc) return false;
    return !absent(lookup(r, key));
}

void brisk_json_ignore(brisk_json_reader *r, ...) {
    va_list ap;
    va_start(ap, r);
    for (const char *k; (k = va_arg(ap, const char *));) mark(r, k);
    va_end(ap);
}

/* ---------------------------------------------------------------- unknown keys */

/* Edit distance (insertions, deletions, substitutions, adjacent swaps), for "did you mean";
 * keys longer than 63 characters are no one's typo of a config key. */
static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

static brisk_status unknown_in(brisk_json *doc, const cJSON *obj, const char *path) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        const char *key = c->string ? c->string : "";
        if (asked(doc, obj, key)) continue;
        char known[640];
        size_t k = 0, shown = 0;
        known[0] = 0;
        for (size_t i = 0; i < doc->n_asked; i++) {
            if (doc->asked[i].obj != obj) continue;
            if (k + strlen(doc->asked[i].key) + 8 > sizeof known) {
                snprintf(known + k, sizeof known - k, ", ...");
                break;
            }
            k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", shown++ ? ", " : "", doc->asked[i].key);
        }
        /* the closest known key, when it is a plausible typo (at most a third of it differs) */
        const char *near = NULL;
        int best = 99;
        for (size_t i = 0; i < doc->n_asked; i++) {
            if (doc->asked[i].obj != obj) continue;
            int dist = edit_distance(key, doc->asked[i].key);
            if (dist < best) best = dist, near = doc->asked[i].key;
        }
        char mean[96] = "";
        if (near && best > 0 && 3 * best <= (int)strlen(near)) snprintf(mean, sizeof mean, "did you mean \"%.60s\"? ", near);
        doc->status = brisk_errorf(&doc->err, BRISK_ERR_INVALID, "%s: %s%sunknown key \"%.200s\" (%sknown: %s); fix or "
                                   "remove it (every key: brisk config --reference, docs/config.md)",
                                   doc->name, path, path[0] ? ": " : "", key, mean, shown ? known : "none");
        return doc->status;
    }
    return BRISK_OK;
}

brisk_status brisk_json_unknown_keys(brisk_json_reader *r) {
    brisk_status s = check_reader(r);
    if (s || !r->obj) return s;
    return unknown_in(r->doc, r->obj, r->path);
}

brisk_status brisk_json_finish(brisk_json *doc, brisk_error *err) {
    for (size_t i = 0; i < doc->n_opened && !doc->status; i++)
        unknown_in(doc, doc->opened[i].obj, doc->opened[i].path);
    return brisk_json_status(doc, err);
}

brisk_status brisk_json_status(const brisk_json *doc, brisk_error *err) {
    if (doc->status && err) *err = doc->err;
    return doc->status;
}
