/* What changed between two effective configs (the one a checkpoint records and the one
 * a run resumes with), as "model.hidden: [64] -> [128]" items. Resume uses it to refuse
 * a checkpoint of another model shape with the reason spelled out, and to list the
 * settings a resumed run changed. Effective configs hold what the user wrote (defaults
 * are not filled in), so a key written out with its default value on one side only
 * shows as "absent -> value". */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

typedef struct diff_out {
    char *buf;
    size_t cap, len;
    int count, shown;
    const char *skip; /* a top-level section left out */
} diff_out;

#define DIFF_SHOWN_MAX 8

static void value_text(const cJSON *v, char *out, size_t n) {
    if (!v) { snprintf(out, n, "absent"); return; }
    char *s = cJSON_PrintUnformatted(v);
    if (!s) { snprintf(out, n, "?"); return; }
    if (strlen(s) > 48) snprintf(out, n, "%.45s...", s);
    else snprintf(out, n, "%s", s);
    free(s);
}

static void add(diff_out *o, const char *path, const cJSON *a, const cJSON *b) {
    o->count++;
    if (o->shown == DIFF_SHOWN_MAX) {
        if (o->len + 6 < o->cap) o->len += (size_t)snprintf(o->buf + o->len, o->cap - o->len, "; ...");
        o->shown++;
        return;
    }
    if (o->shown > DIFF_SHOWN_MAX) return;
    char x[64], y[64];
    value_text(a, x, sizeof x);
    value_text(b, y, sizeof y);
    if (o->len < o->cap)
        o->len += (size_t)snprintf(o->buf + o->len, o->cap - o->len, "%s%s: %s -> %s", o->shown ? "; " : "", path, x, y);
    if (o->len > o->cap) o->len = o->cap;
    o->shown++;
}

/* Objects are compared key by key; anything else (numbers, strings, arrays) as a whole. */
static void walk(diff_out *o, const char *path, const cJSON *a, const cJSON *b) {
    if (!a && !b) return;
    if (a && b && cJSON_IsObject(a) && cJSON_IsObject(b)) {
        char sub[256];
        for (const cJSON *c = a->child; c; c = c->next) {
            if (!path[0] && o->skip && strcmp(c->string, o->skip) == 0) continue;
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", c->string);
            walk(o, sub, c, cJSON_GetObjectItemCaseSensitive(b, c->string));
        }
        for (const cJSON *c = b->child; c; c = c->next) {
            if (cJSON_GetObjectItemCaseSensitive(a, c->string)) continue;
            if (!path[0] && o->skip && strcmp(c->string, o->skip) == 0) continue;
            snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", c->string);
            walk(o, sub, NULL, c);
        }
        return;
    }
    if (!a || !b || !cJSON_Compare(a, b, 1)) add(o, path, a, b);
}

int brisk_config_diff(const char *a_json, const char *b_json, const char *only, const char *skip, char *out,
                      size_t cap) {
    if (cap) out[0] = 0;
    cJSON *a = cJSON_Parse(a_json ? a_json : "{}"), *b = cJSON_Parse(b_json ? b_json : "{}");
    diff_out o = {out, cap, 0, 0, 0, skip};
    if (!a || !b) {
        if (cap) snprintf(out, cap, "a config does not parse");
        cJSON_Delete(a), cJSON_Delete(b);
        return 1;
    }
    if (only) walk(&o, only, cJSON_GetObjectItemCaseSensitive(a, only), cJSON_GetObjectItemCaseSensitive(b, only));
    else walk(&o, "", a, b);
    cJSON_Delete(a), cJSON_Delete(b);
    return o.count;
}
