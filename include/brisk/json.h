/* json: config files (JSON with // and block comments), strict typed reading with
 * errors that name the file and the key path, --set overrides, and a compact
 * serialisation that checkpoints store.
 *
 * Reading a config:
 *
 *     brisk_json *doc;
 *     if ((s = brisk_json_load("examples/tabular.json", &doc, err))) return s;
 *     for (i = 0; i < n_sets; i++)                      // --set a.b=v, before reading
 *         if ((s = brisk_json_override(doc, sets[i], err))) goto out;
 *     brisk_json_reader root = brisk_json_root(doc), optim;
 *     brisk_json_object(&root, "optim", &optim);
 *     brisk_json_number_or(&optim, "lr", 1e-3, BRISK_GT(0), &cfg->lr);
 *     brisk_json_enum(&optim, "type", optimizers, &cfg->optim);
 *     s = brisk_json_finish(doc, err);   // first getter error, else any unknown key
 *
 * Errors are sticky: the first failing getter records its message in the document
 * and every later getter returns that status without reading, so a caller may check
 * each call or only the final brisk_json_finish. Every getter always writes its
 * output (the default, or zero/NULL on error), so values are never uninitialised.
 *
 * Messages read "examples/tabular.json: optim.lr: expected a number > 0, got \"fast\""
 * and "examples/tabular.json: model: unknown key \"hiden\" (known: type, hidden, ...)".
 *
 * A document holds no global state of brisk's and is not shared between threads
 * while in use. (cJSON itself records its last parse error in a global that brisk
 * never reads; parsing on two threads at once races on that write.) */
#ifndef BRISK_JSON_H
#define BRISK_JSON_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/core.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON; /* <cjson/cJSON.h>, for callers that walk the tree themselves */

/* A parsed document: the tree, its name (file path) for messages, the sticky error,
 * and which keys readers asked for. */
typedef struct brisk_json brisk_json;

/* ---------------------------------------------------------------- documents */

/* Reads and parses a config file. Comments are blanked out first (newlines kept, so
 * a syntax error is reported at the right "line L, column C"). Duplicate keys in an
 * object are an error. The top-level value may be anything; readers need an object. */
brisk_status brisk_json_load(const char *path, brisk_json **out, brisk_error *err);
/* The same from memory; `name` stands for the file in messages ("<string>" if NULL).
 * `text` need not be NUL-terminated; a NUL byte inside it is an error. */
brisk_status brisk_json_parse(const char *text, size_t len, const char *name, brisk_json **out,
                              brisk_error *err);
void brisk_json_free(brisk_json *doc);

const char *brisk_json_name(const brisk_json *doc);
/* The tree itself (owned by doc). Edits through it bypass key tracking. */
struct cJSON *brisk_json_tree(brisk_json *doc);

/* The document as compact JSON (no comments, no whitespace), malloc'd into *out;
 * release with free(). brisk_json_parse reads it back. */
brisk_status brisk_json_dump(const brisk_json *doc, char **out, brisk_error *err);

/* ---------------------------------------------------------------- overrides
 * Applied to the tree before reading. A path is dot-separated keys, each optionally
 * followed by array indices: "model.layers[1].width". Missing objects along the path
 * are created; a path through a non-object (or an index past an array's end) is an
 * error. Overrides replace values; they do not touch the sticky error. */

/* "a.b.c=value": the value is taken as JSON when it parses as JSON (3e-4, true,
 * [64, 64], "quoted", null), otherwise as a bare string (adamw, runs/x). */
brisk_status brisk_json_override(brisk_json *doc, const char *assignment, brisk_error *err);
/* Typed setters for CLI flags (--lr 3e-4, --batch-size 1024). Numbers must be finite;
 * integers must fit a double exactly (|v| <= 2^53). */
brisk_status brisk_json_set_number(brisk_json *doc, const char *path, double v, brisk_error *err);
brisk_status brisk_json_set_int(brisk_json *doc, const char *path, int64_t v, brisk_error *err);
brisk_status brisk_json_set_bool(brisk_json *doc, const char *path, bool v, brisk_error *err);
brisk_status brisk_json_set_string(brisk_json *doc, const char *path, const char *v,
                                   brisk_error *err);

/* ---------------------------------------------------------------- readers
 * A reader is a small value over one object of a document: the object and its key
 * path for messages. Copy it freely; it lives as long as the document. A reader over
 * an absent optional object reads as an empty object (every _or getter gives its
 * default). */
#define BRISK_JSON_PATH_MAX 160

typedef struct brisk_json_reader {
    brisk_json *doc;
    const struct cJSON *obj; /* NULL: an absent optional object */
    char path[BRISK_JSON_PATH_MAX]; /* "model.noise", "" at the top */
} brisk_json_reader;

/* A reader over the top-level object (a sticky error if the top is not an object). */
brisk_json_reader brisk_json_root(brisk_json *doc);

/* Accepted range of a number or integer; ends may be open. */
typedef struct brisk_json_range {
    double lo, hi;
    bool lo_open, hi_open;
} brisk_json_range;
#define BRISK_ANY ((brisk_json_range){-INFINITY, INFINITY, false, false})
#define BRISK_GT(x) ((brisk_json_range){(x), INFINITY, true, false})
#define BRISK_GE(x) ((brisk_json_range){(x), INFINITY, false, false})
#define BRISK_IN(a, b) ((brisk_json_range){(a), (b), false, false})  /* [a, b] */
#define BRISK_IN_LO_OPEN(a, b) ((brisk_json_range){(a), (b), true, false}) /* (a, b] */

/* Getters. The plain form requires the key; the _or form gives `def` when the key is
 * absent or null (the default is not range-checked). All return BRISK_OK or the
 * sticky status (BRISK_ERR_INVALID for a bad value). Asking for a key marks it known
 * for brisk_json_unknown_keys, present or not. */
brisk_status brisk_json_number(brisk_json_reader *r, const char *key, brisk_json_range range,
                               double *out);
brisk_status brisk_json_number_or(brisk_json_reader *r, const char *key, double def,
                                  brisk_json_range range, double *out);
/* Integers: the JSON number must be integral and within [lo, hi]. */
brisk_status brisk_json_int(brisk_json_reader *r, const char *key, int lo, int hi, int *out);
brisk_status brisk_json_int_or(brisk_json_reader *r, const char *key, int def, int lo, int hi,
                               int *out);
brisk_status brisk_json_int64(brisk_json_reader *r, const char *key, int64_t lo, int64_t hi,
                              int64_t *out);
brisk_status brisk_json_int64_or(brisk_json_reader *r, const char *key, int64_t def, int64_t lo,
                                 int64_t hi, int64_t *out);
brisk_status brisk_json_bool(brisk_json_reader *r, const char *key, bool *out);
brisk_status brisk_json_bool_or(brisk_json_reader *r, const char *key, bool def, bool *out);
/* Strings point into the document: valid until it is freed or overridden. */
brisk_status brisk_json_string(brisk_json_reader *r, const char *key, const char **out);
brisk_status brisk_json_string_or(brisk_json_reader *r, const char *key, const char *def,
                                  const char **out);
/* One of `choices` (NULL-terminated); *out is its index. The error lists the choices. */
brisk_status brisk_json_enum(brisk_json_reader *r, const char *key, const char *const *choices,
                             int *out);
brisk_status brisk_json_enum_or(brisk_json_reader *r, const char *key, const char *const *choices,
                                int def, int *out);

/* Arrays, malloc'd into *out (release with free(); NULL when empty or absent), length
 * in *n. `required` false: an absent or null key gives n = 0. Every element is checked
 * ("model.widths[2]: expected an integer in [1, 4096], got 0"). Strings point into the
 * document; only the pointer array is malloc'd. */
brisk_status brisk_json_numbers(brisk_json_reader *r, const char *key, bool required,
                                brisk_json_range range, double **out, size_t *n);
brisk_status brisk_json_ints(brisk_json_reader *r, const char *key, bool required, int lo, int hi,
                             int **out, size_t *n);
brisk_status brisk_json_strings(brisk_json_reader *r, const char *key, bool required,
                                const char ***out, size_t *n);

/* A sub-object. brisk_json_object requires it; brisk_json_object_opt gives an empty
 * reader when absent or null, and sets *present (may be NULL). */
brisk_status brisk_json_object(brisk_json_reader *r, const char *key, brisk_json_reader *sub);
brisk_status brisk_json_object_opt(brisk_json_reader *r, const char *key, brisk_json_reader *sub,
                                   bool *present);
/* An array of objects ("layers": [{...}, {...}]): its length (0 when absent and not
 * required), then a reader per element, path "layers[i]". */
brisk_status brisk_json_array_len(brisk_json_reader *r, const char *key, bool required, size_t *n);
brisk_status brisk_json_object_at(brisk_json_reader *r, const char *key, size_t i,
                                  brisk_json_reader *sub);

/* Whether the key is present and not null. Marks it known. */
bool brisk_json_has(brisk_json_reader *r, const char *key);
/* Marks keys as known without reading them (sections another module reads, or keys
 * that only matter for some model types). NULL-terminated varargs. */
void brisk_json_ignore(brisk_json_reader *r, ...);

/* Unknown keys of this reader's object: any key no getter asked for is a sticky error
 * "FILE: model: unknown key \"hiden\" (known: type, hidden, ...)". */
brisk_status brisk_json_unknown_keys(brisk_json_reader *r);
/* The end of reading: the sticky error if any, else unknown keys in every object a
 * reader was opened on (in the order they were opened). Copies the message to err. */
brisk_status brisk_json_finish(brisk_json *doc, brisk_error *err);
/* The sticky status so far, copying its message to err (when non-NULL) if set. */
brisk_status brisk_json_status(const brisk_json *doc, brisk_error *err);
/* Records a caller's own error about a key in the sticky slot, with the usual
 * "FILE: path.key: " prefix (key may be NULL for the object itself). For checks that
 * involve several keys ("model.heads must divide model.hidden"). */
brisk_status brisk_json_fail(brisk_json_reader *r, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------- reference
 * A recorder is told of every key a getter asks for, as it asks: what a config reader
 * accepts, from the reader itself (brisk config --reference is generated this way, so it
 * cannot drift from the parser). Strings are valid only during the call. */
typedef struct brisk_json_key_info {
    const char *path;    /* "optim.lr", "models[0].name" */
    const char *type;    /* "number", "integer", "bool", "string", "enum", "numbers", "integers", "strings" */
    const char *accepts; /* "> 0", "[1, 16777216]", "\"sgd\", \"adamw\"", "" for anything of the type */
    const char *def;     /* the default as JSON; NULL when the key is required */
} brisk_json_key_info;
typedef void (*brisk_json_recorder)(void *user, const brisk_json_key_info *key);
void brisk_json_record(brisk_json *doc, brisk_json_recorder fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
