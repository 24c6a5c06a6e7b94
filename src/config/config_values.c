/* Every key of an effective config with the value a run uses: what the config wrote, else
 * the reader's default, as compact JSON. Two configs that differ only in writing a default
 * out give the same values, which the effective JSON alone does not (config_diff.c compares
 * what was written, for resume). Data-parallel ranks compare these (dist_check.c). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* A node of the config's tree: an object member or an element of an array of objects
 * (interior), or a value the reader takes whole (a leaf: a number, a string, a list). */
typedef struct tree_node {
    char *path;
    const cJSON *v;
    int leaf, done;
} tree_node;

typedef struct values_walk {
    tree_node *n;
    int count, cap, oom;
    brisk_config_value_fn fn;
    void *user;
} values_walk;

static tree_node *add_node(values_walk *w, const char *path, const cJSON *v, int leaf) {
    if (w->oom) return NULL;
    if (w->count == w->cap) {
        int cap = w->cap ? 2 * w->cap : 128;
        tree_node *p = realloc(w->n, sizeof *p * (size_t)cap);
        if (!p) return (w->oom = 1, NULL);
        w->n = p, w->cap = cap;
    }
    char *s = strdup(path);
    if (!s) return (w->oom = 1, NULL);
    w->n[w->count] = (tree_node){s, v, leaf, 0};
    return &w->n[w->count++];
}

/* Paths as the reader spells them: "model.hidden", "model.layers[1].width". */
static void flatten(values_walk *w, const char *path, const cJSON *v) {
    int objects = cJSON_IsArray(v) && v->child && cJSON_IsObject(v->child);
    if (!cJSON_IsObject(v) && !objects) {
        add_node(w, path, v, 1);
        return;
    }
    if (path[0]) add_node(w, path, v, 0);
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char sub[1024];
        if (objects) snprintf(sub, sizeof sub, "%s[%d]", path, i);
        else snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", c->string);
        flatten(w, sub, c);
    }
}

static void emit(values_walk *w, const char *path, const cJSON *v) {
    char *text = cJSON_PrintUnformatted(v);
    if (!text) {
        w->oom = 1;
        return;
    }
    w->fn(w->user, path, text);
    free(text);
}

/* A default as cJSON prints it ("%.9g" 0.001 and a written 1e-3 both "0.001") */
static void emit_default(values_walk *w, const char *path, const char *def) {
    cJSON *v = cJSON_Parse(def);
    if (v) emit(w, path, v);
    else w->fn(w->user, path, def);
    cJSON_Delete(v);
}

static void on_key(void *user, const brisk_json_key_info *k) {
    values_walk *w = user;
    for (int i = 0; i < w->count; i++) {
        tree_node *n = &w->n[i];
        if (strcmp(n->path, k->path) != 0) continue;
        if (n->done) return;
        n->done = 1;
        if (n->leaf && !cJSON_IsNull(n->v)) emit(w, n->path, n->v);
        else if (n->leaf && k->def) emit_default(w, n->path, k->def); /* null reads as absent */
        return;
    }
    /* absent: the default, once */
    tree_node *n = add_node(w, k->path, NULL, 1);
    if (n) n->done = 1;
    if (n && k->def) emit_default(w, k->path, k->def);
}

brisk_status brisk_config_values(const char *json, const char *label, brisk_config_value_fn fn, void *user,
                                 brisk_error *err) {
    cJSON *tree = cJSON_Parse(json ? json : "{}");
    if (!tree) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the effective config does not parse", label);
    values_walk w = {NULL, 0, 0, 0, fn, user};
    flatten(&w, "", tree);
    /* in the order the reader asks, then what it never asks for (sections others read) */
    brisk_status st = w.oom ? BRISK_ERR_NOMEM : brisk_config_walk(json, label, on_key, &w, err);
    for (int i = 0; !st && i < w.count; i++)
        if (w.n[i].leaf && !w.n[i].done) emit(&w, w.n[i].path, w.n[i].v);
    if (!st && w.oom) st = BRISK_ERR_NOMEM;
    if (st == BRISK_ERR_NOMEM) brisk_errorf(err, st, "out of memory listing the config's values");
    for (int i = 0; i < w.count; i++) free(w.n[i].path);
    free(w.n);
    cJSON_Delete(tree);
    return st;
}
