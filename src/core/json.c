/* json documents: loading config files (comments blanked, syntax errors located by
 * line and column), duplicate-key rejection, --set overrides and compact dumps.
 * The typed getters live in json_reader.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_internal.h"
#include "core/error_hint.h"

/* A config larger than this is the wrong file (a dataset): refused before it is parsed, as
 * its tree would take some 30 times its size. The largest real configs are a few KiB. */
#define JSON_MAX_FILE (1u << 20)

const char *brisk_json_kind(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsBool(v)) return "a bool";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an unknown value";
}

/* ---------------------------------------------------------------- comments */

/* Blanks // and block comments in place with spaces, keeping newlines so byte
 * offsets, lines and columns of everything else stay where they were. Returns the
 * offset of an unterminated block comment's start, or -1. */
static long strip_comments(char *s, size_t n) {
    enum { NORMAL, STRING, LINE, BLOCK } st = NORMAL;
    size_t block_start = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        switch (st) {
        case NORMAL:
            if (c == '"') st = STRING;
            else if (c == '/' && i + 1 < n && s[i + 1] == '/') { st = LINE; s[i] = s[i + 1] = ' '; i++; }
            else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
                st = BLOCK; block_start = i; s[i] = s[i + 1] = ' '; i++;
            }
            break;
        case STRING:
            if (c == '\\') i++; /* the escaped character cannot end the string */
            else if (c == '"' || c == '\n') st = NORMAL;
            break;
        case LINE:
            if (c == '\n') st = NORMAL; else s[i] = ' ';
            break;
        case BLOCK:
            if (c == '*' && i + 1 < n && s[i + 1] == '/') { st = NORMAL; s[i] = s[i + 1] = ' '; i++; }
            else if (c != '\n') s[i] = ' ';
            break;
        }
    }
    return st == BLOCK ? (long)block_start : -1;
}

/* The offset of a \u0000 escape inside a string, or -1. cJSON decodes it into a NUL byte
 * that silently ends the C string (a key or value cut short), so it is refused instead. */
static long nul_escape(const char *s, size_t n) {
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_string) { in_string = s[i] == '"'; continue; }
        if (s[i] == '"') in_string = 0;
        else if (s[i] == '\\') {
            if (i + 5 < n && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0) return (long)i;
            i++;
        }
    }
    return -1;
}

/* JSON numbers are -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; cJSON hands any run of
 * number characters to strtod, which also takes 0001, +1, .5, 1. and 0x10 (as 0, then fails
 * on the x), so a config would mean something other JSON readers refuse. Returns the offset
 * of the first number token outside strings that breaks the grammar (its length in *len and
 * why in *why), or -1. Comments are already blanked. */
static long bad_number(const char *s, size_t n, size_t *len, const char **why) {
    int in_string = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = 0;
            continue;
        }
        if (c == '"') { in_string = 1; continue; }
        if (isalpha((unsigned char)c)) { /* a literal (true, null) or a stray word: cJSON judges it */
            while (i + 1 < n && isalnum((unsigned char)s[i + 1])) i++;
            continue;
        }
        if (!(c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'))) continue;
        size_t a = i, b = i; /* the token: every character a number or a word could continue with */
        while (b < n && (isalnum((unsigned char)s[b]) || s[b] == '.' || s[b] == '+' || s[b] == '-')) b++;
        size_t k = a;
        *why = NULL;
        if (s[k] == '-') k++;
        if (k < b && s[k] == '0' && k + 1 < b && isdigit((unsigned char)s[k + 1])) *why = "a leading zero";
        else if (k < b && s[k] == '0' && k + 1 < b && (s[k + 1] == 'x' || s[k + 1] == 'X')) *why = "hexadecimal";
        else if (s[a] == '+') *why = "a leading '+'";
        else if (k < b && s[k] == '.') *why = "no digit before the '.'";
        if (!*why) {
            int ok = k < b && isdigit((unsigned char)s[k]);
            if (ok && s[k] == '0') k++;
            else while (k < b && isdigit((unsigned char)s[k])) k++;
            if (ok && k < b && s[k] == '.') {
                size_t d = ++k;
                while (k < b && isdigit((unsigned char)s[k])) k++;
                if (k == d) *why = "no digit after the '.'";
            }
            if (ok && !*why && k < b && (s[k] == 'e' || s[k] == 'E')) {
                if (++k < b && (s[k] == '+' || s[k] == '-')) k++;
                size_t d = k;
                while (k < b && isdigit((unsigned char)s[k])) k++;
                if (k == d) *why = "no digits in the exponent";
            }
            if (!*why && (!ok || k != b)) *why = "not a number";
        }
        if (*why) {
            *len = b - a;
            return (long)a;
        }
        i = b - 1;
    }
    return -1;
}

/* ---------------------------------------------------------------- error location */

/* 1-based line and column of byte `off`; columns count UTF-8 characters. */
static void line_col(const char *s, size_t off, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') { l++; c = 1; }
        else if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    }
    *line = l;
    *col = c;
}

/* Up to ~20 bytes from `off` to the end of its line, cut on a character boundary,
 * with control bytes shown as '?', for "near '...'". */
static void snippet(const char *s, size_t n, size_t off, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = off; i < n && s[i] != '\n' && s[i] != '\r' && k + 1 < cap && i - off < 20; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    while (k > 0 && ((unsigned char)out[k - 1] & 0xC0) == 0x80) k--; /* partial char */
    if (k > 0 && ((unsigned char)out[k - 1] & 0xC0) == 0xC0) k--;
    out[k] = 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* cJSON's error pointer often sits past the offending token (at the end of input
 * or on following whitespace); the last non-blank byte before it is what a reader
 * should look at. */
static brisk_status syntax_error(const char *name, const char *orig, const char *stripped,
                                 size_t n, size_t off, brisk_error *err) {
    if (off > n) off = n;
    while (off > 0 && (off == n || is_space(stripped[off]))) off--;
    if (off == 0 && (n == 0 || is_space(stripped[0])))
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: no JSON value (empty or only comments)", name);
    int line, col;
    line_col(orig, off, &line, &col);
    char near[64];
    snippet(orig, n, off, near, sizeof near);
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %d, column %d: invalid JSON near '%s'",
                        name, line, col, near);
}

/* ---------------------------------------------------------------- duplicate keys */

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void append_path(char *buf, size_t cap, const char *base, const char *key) {
    snprintf(buf, cap, "%s%s%s", base, base[0] ? "." : "", key);
}

static brisk_status not_utf8(const char *name, const char *path, const char *what, const char *s, size_t at,
                             brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s%s%s is not valid UTF-8 (byte 0x%02x at offset %zu); JSON text "
                        "must be UTF-8", name, path, path[0] ? ": " : "", what, (unsigned char)s[at], at);
}

/* cJSON keeps both of {"a": 1, "a": 2} and lookups see the first; in a config that
 * silently ignores a value, so it is an error. Every key and string must be UTF-8 too:
 * checkpoints store the config, and a file other tools cannot read would be found only
 * when the first one is written. */
static brisk_status check_duplicates(const cJSON *v, const char *path, const char *name,
                                     brisk_error *err) {
    char sub[BRISK_JSON_PATH_MAX];
    if (cJSON_IsString(v) && v->valuestring) {
        size_t bad = brisk_utf8_bad(v->valuestring, strlen(v->valuestring));
        if (bad != (size_t)-1) return not_utf8(name, path, "the string", v->valuestring, bad, err);
    }
    if (cJSON_IsObject(v))
        for (const cJSON *c = v->child; c; c = c->next) {
            size_t bad = c->string ? brisk_utf8_bad(c->string, strlen(c->string)) : (size_t)-1;
            if (bad != (size_t)-1) return not_utf8(name, path, "a key", c->string, bad, err);
        }
    if (cJSON_IsArray(v)) {
        size_t i = 0;
        for (const cJSON *c = v->child; c; c = c->next, i++) {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
            brisk_status s = check_duplicates(c, sub, name, err);
            if (s) return s;
        }
        return BRISK_OK;
    }
    if (!cJSON_IsObject(v)) return BRISK_OK;
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next) n++;
    if (n > 1) {
        const char **keys = malloc(n * sizeof *keys);
        if (!keys) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory checking keys", name);
        size_t k = 0;
        for (const cJSON *c = v->child; c; c = c->next) keys[k++] = c->string ? c->string : "";
        qsort(keys, n, sizeof *keys, cmp_str_ptr);
        for (size_t i = 1; i < n; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0) {
                brisk_status s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %s%sduplicate key \"%s\"", name,
                                              path, path[0] ? ": " : "", keys[i]);
                free(keys);
                return s;
            }
        free(keys);
    }
    for (const cJSON *c = v->child; c; c = c->next) {
        append_path(sub, sizeof sub, path, c->string ? c->string : "");
        brisk_status s = check_duplicates(c, sub, name, err);
        if (s) return s;
    }
    return BRISK_OK;
}

/* ---------------------------------------------------------------- documents */

brisk_status brisk_json_parse(const char *text, size_t len, const char *name, brisk_json **out,
                              brisk_error *err) {
    *out = NULL;
    if (!name) name = "<string>";
    if (!text && len) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no text", name);
    if (len > JSON_MAX_FILE)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: %zu bytes, larger than the %u MiB a config may have", name, len,
                            JSON_MAX_FILE >> 20);
    const char *nul = len ? memchr(text, 0, len) : NULL;
    if (nul) {
        int line, col;
        line_col(text, (size_t)(nul - text), &line, &col);
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %d, column %d: NUL byte in JSON text",
                            name, line, col);
    }
    char *buf = malloc(len + 1);
    if (!buf) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory (%zu bytes)", name, len);
    if (len) memcpy(buf, text, len);
    buf[len] = 0;
    /* A UTF-8 byte order mark is legal in text files but not in JSON. */
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) buf[0] = buf[1] = buf[2] = ' ';
    long open = strip_comments(buf, len);
    if (open >= 0) {
        int line, col;
        line_col(text, (size_t)open, &line, &col);
        free(buf);
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %d, column %d: unterminated /* comment",
                            name, line, col);
    }
    long nul_at = nul_escape(buf, len);
    if (nul_at >= 0) {
        int line, col;
        line_col(text, (size_t)nul_at, &line, &col);
        free(buf);
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %d, column %d: \\u0000 in a string; keys and strings "
                            "cannot hold a NUL character", name, line, col);
    }
    size_t blen = 0;
    const char *why = NULL;
    long bad = bad_number(buf, len, &blen, &why);
    if (bad >= 0) {
        int line, col;
        line_col(text, (size_t)bad, &line, &col);
        brisk_status s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: line %d, column %d: '%.*s' is not a JSON number (%s); "
                                      "JSON numbers are decimal, as 10, -0.5 or 1e-3", name, line, col,
                                      blen > 40 ? 40 : (int)blen, buf + bad, why);
        free(buf);
        return s;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 1);
    if (!root) {
        size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
        brisk_status s = syntax_error(name, text, buf, len, off, err);
        free(buf);
        return s;
    }
    free(buf);
    brisk_status s = check_duplicates(root, "", name, err);
    if (s) { cJSON_Delete(root); return s; }
    brisk_json *doc = calloc(1, sizeof *doc);
    char *nm = strdup(name);
    if (!doc || !nm) {
        free(doc); free(nm); cJSON_Delete(root);
        return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", name);
    }
    doc->root = root;
    doc->name = nm;
    *out = doc;
    return BRISK_OK;
}

brisk_status brisk_json_load(const char *path, brisk_json **out, brisk_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open: %s%s", path, strerror(errno), brisk_open_hint(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    brisk_status s = BRISK_OK;
    for (;;) {
        if (len == cap) {
            if (cap > JSON_MAX_FILE) {
                s = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: larger than the %u MiB a config may have; not a config file?",
                                 path, JSON_MAX_FILE >> 20);
                break;
            }
            cap = cap ? cap * 2 : 4096;
            char *nb = realloc(buf, cap);
            if (!nb) { s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); break; }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) s = brisk_errorf(err, BRISK_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (!s) s = brisk_json_parse(buf, len, path, out, err);
    free(buf);
    return s;
}

void brisk_json_free(brisk_json *doc) {
    if (!doc) return;
    cJSON_Delete(doc->root);
    for (size_t i = 0; i < doc->n_asked; i++) free(doc->asked[i].key);
    for (size_t i = 0; i < doc->n_opened; i++) free(doc->opened[i].path);
    free(doc->asked);
    free(doc->opened);
    free(doc->name);
    free(doc);
}

const char *brisk_json_name(const brisk_json *doc) { return doc->name; }
struct cJSON *brisk_json_tree(brisk_json *doc) { return doc->root; }

brisk_status brisk_json_dump(const brisk_json *doc, char **out, brisk_error *err) {
    *out = NULL;
    char *s = cJSON_PrintUnformatted(doc->root);
    if (!s) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory serialising the config", doc->name);
    /* cJSON allocates through its hooks; callers release with free(). */
    *out = strdup(s);
    cJSON_free(s);
    if (!*out) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory serialising the config", doc->name);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- overrides */

/* Keys separated by dots, each optionally followed by [digits]. Returns the number
 * of levels (keys and indices), 0 for a malformed path. */
static int path_levels(const char *p, size_t n) {
    size_t i = 0;
    int levels = 0;
    for (;;) {
        size_t k = i;
        while (i < n && p[i] != '.' && p[i] != '[') i++;
        if (i == k) return 0;
        levels++;
        while (i < n && p[i] == '[') {
            size_t d = ++i;
            while (i < n && p[i] >= '0' && p[i] <= '9') i++;
            if (i == d || i - d > 9 || i >= n || p[i] != ']') return 0;
            i++;
            levels++;
        }
        if (i == n) return levels;
        if (p[i] != '.') return 0;
        i++;
    }
}

static int json_depth(const cJSON *v) {
    int d = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        int k = json_depth(c);
        if (k > d) d = k;
    }
    return d + 1;
}

/* Puts `val` (owned; freed on error) at `path` under doc's root. `what` names the
 * override in messages ("--set a.b=1"). */
static brisk_status set_path(brisk_json *doc, const char *path, size_t plen, cJSON *val,
                             const char *what, brisk_error *err) {
    if (!val) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what);
    if (doc->n_opened || doc->n_asked) {
        cJSON_Delete(val);
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: overrides must come before the config is read", what);
    }
    cJSON *cur = doc->root;
    size_t i = 0;
    char key[256], done[BRISK_JSON_PATH_MAX] = "";
    int levels = path_levels(path, plen);
    if (!levels) goto bad_path;
    /* Deeper than cJSON parses, the dump stored in a checkpoint would not load back. */
    if (levels + json_depth(val) > CJSON_NESTING_LIMIT) {
        cJSON_Delete(val);
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: nested more than %d levels deep", what, CJSON_NESTING_LIMIT);
    }
    while (i < plen) {
        size_t k = 0;
        while (i < plen && path[i] != '.' && path[i] != '[') {
            if (k + 1 >= sizeof key) goto bad_path;
            key[k++] = path[i++];
        }
        key[k] = 0;
        if (k == 0) goto bad_path;
        if (!cJSON_IsObject(cur)) {
            cJSON_Delete(val);
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s is %s, not an object", what,
                                done[0] ? done : "the top level", brisk_json_kind(cur));
        }
        size_t dl = strlen(done);
        snprintf(done + dl, sizeof done - dl, "%s%s", dl ? "." : "", key);
        int last = i == plen;
        cJSON *child = cJSON_GetObjectItemCaseSensitive(cur, key);
        if (last) {
            int ok = child ? cJSON_ReplaceItemInObjectCaseSensitive(cur, key, val)
                           : cJSON_AddItemToObject(cur, key, val);
            if (!ok) { cJSON_Delete(val); return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what); }
            return BRISK_OK;
        }
        if (!child && path[i] == '.') {
            child = cJSON_CreateObject();
            if (!child || !cJSON_AddItemToObject(cur, key, child)) {
                cJSON_Delete(child); cJSON_Delete(val);
                return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what);
            }
        }
        cur = child;
        while (i < plen && path[i] == '[') {
            char *endp;
            errno = 0;
            unsigned long long idx = strtoull(path + i + 1, &endp, 10);
            if (i + 1 >= plen || path[i + 1] < '0' || path[i + 1] > '9' || errno ||
                (size_t)(endp - path) >= plen || *endp != ']')
                goto bad_path;
            i = (size_t)(endp - path) + 1;
            if (!cJSON_IsArray(cur)) {
                cJSON_Delete(val);
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s is %s, not an array", what, done,
                                    cur ? brisk_json_kind(cur) : "missing");
            }
            int size = cJSON_GetArraySize(cur);
            if (idx >= (unsigned long long)size) {
                cJSON_Delete(val);
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: index %llu is past the end of %s (%d elements)",
                                    what, idx, done, size);
            }
            snprintf(done + strlen(done), sizeof done - strlen(done), "[%llu]", idx);
            if (i == plen) {
                if (!cJSON_ReplaceItemInArray(cur, (int)idx, val)) {
                    cJSON_Delete(val);
                    return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", what);
                }
                return BRISK_OK;
            }
            cur = cJSON_GetArrayItem(cur, (int)idx);
        }
        if (i < plen) {
            if (path[i] != '.') goto bad_path;
            i++;
            if (i == plen) goto bad_path;
        }
    }
bad_path:
    cJSON_Delete(val);
    return brisk_errorf(err, BRISK_ERR_INVALID,
                        "%s: bad key path (expected keys separated by dots, with optional [index])", what);
}

brisk_status brisk_json_override(brisk_json *doc, const char *assignment, brisk_error *err) {
    char what[300];
    snprintf(what, sizeof what, "--set %s", assignment);
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: expected KEY.PATH=VALUE", what);
    const char *text = eq + 1;
    const char *end = NULL;
    /* JSON when it parses (numbers, bools, arrays, quoted strings); a bare word
     * otherwise, so --set optim.type=adamw needs no quotes. */
    if (nul_escape(text, strlen(text)) >= 0)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: \\u0000 in a string; keys and strings cannot hold a NUL "
                            "character", what);
    size_t bad = brisk_utf8_bad(assignment, strlen(assignment));
    if (bad != (size_t)-1) return not_utf8(what, "", "the text", assignment, bad, err);
    /* a value no JSON reader would take as a number (0001, +1, 0x10) is a bare word, as "v1" is */
    size_t blen;
    const char *why;
    cJSON *val = *text && bad_number(text, strlen(text), &blen, &why) < 0 ? cJSON_ParseWithOpts(text, &end, 1) : NULL;
    /* The same rules as a config file, or the dump (which checkpoints store) would not
     * parse back: found by fuzz_json (tests/fuzz/corpus/json/override_duplicate_key). */
    brisk_status s = val ? check_duplicates(val, "", what, err) : BRISK_OK;
    if (s) {
        cJSON_Delete(val);
        return s;
    }
    if (!val) val = cJSON_CreateString(text);
    return set_path(doc, assignment, (size_t)(eq - assignment), val, what, err);
}

brisk_status brisk_json_set_number(brisk_json *doc, const char *path, double v, brisk_error *err) {
    if (!isfinite(v))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %g is not a finite number", path, v);
    return set_path(doc, path, strlen(path), cJSON_CreateNumber(v), path, err);
}

brisk_status brisk_json_set_int(brisk_json *doc, const char *path, int64_t v, brisk_error *err) {
    const int64_t lim = (int64_t)1 << 53; /* beyond this a double cannot hold every integer */
    if (v > lim || v < -lim)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %lld is too large for a JSON number", path, (long long)v);
    return set_path(doc, path, strlen(path), cJSON_CreateNumber((double)v), path, err);
}

brisk_status brisk_json_set_bool(brisk_json *doc, const char *path, bool v, brisk_error *err) {
    return set_path(doc, path, strlen(path), cJSON_CreateBool(v), path, err);
}

brisk_status brisk_json_set_string(brisk_json *doc, const char *path, const char *v, brisk_error *err) {
    size_t bad = v ? brisk_utf8_bad(v, strlen(v)) : (size_t)-1;
    if (bad != (size_t)-1) return not_utf8(brisk_json_name(doc), path, "the string", v, bad, err);
    return set_path(doc, path, strlen(path), cJSON_CreateString(v ? v : ""), path, err);
}
