/* json internals shared by json.c (documents, overrides) and json_reader.c (typed
 * getters, key tracking). Not a public header. */
#ifndef BRISK_JSON_INTERNAL_H
#define BRISK_JSON_INTERNAL_H

#include <cjson/cJSON.h>

#include "brisk/json.h"

/* A key a getter asked for on one object: known for unknown-key detection. */
typedef struct json_asked {
    const cJSON *obj;
    char *key;
} json_asked;

/* An object a reader was opened on: brisk_json_finish checks its keys. */
typedef struct json_opened {
    const cJSON *obj;
    char *path;
} json_opened;

struct brisk_json {
    cJSON *root;
    char *name;
    brisk_status status; /* sticky: the first reading error */
    brisk_error err;
    json_asked *asked;
    size_t n_asked, cap_asked;
    json_opened *opened;
    size_t n_opened, cap_opened;
    brisk_json_recorder recorder; /* brisk_json_record: told of every key a getter asks for */
    void *recorder_user;
};

/* "a number", "a string", ... for messages. */
const char *brisk_json_kind(const cJSON *v);

#endif
