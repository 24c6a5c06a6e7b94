/* brisk_config_values (src/config/config_values.c): every key with the value a run uses. A
 * config that writes a default out and one that leaves it to the reader list the same values
 * (what data-parallel ranks compare); a written value replaces the default; keys no reader
 * asks for are still listed. */
#include "brisk/train.h"
#include "test.h"
#include "train/trainer_internal.h"

typedef struct listing {
    char text[65536];
    size_t len;
} listing;

static void collect(void *user, const char *key, const char *value) {
    listing *l = user;
    l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, "%s=%s\n", key, value);
}

static void list(const char *json, listing *l) {
    brisk_error err = {0};
    l->len = 0, l->text[0] = 0;
    brisk_status st = brisk_config_values(json, "test.json", collect, l, &err);
    CHECKF(st == BRISK_OK, "%s", err.msg);
}

#define MODEL "\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [8], \"outputs\": 2}"

static void test_defaults_fill_in(void) {
    static listing a, b, c;
    list("{" MODEL ", \"data\": {\"train\": \"x.npz\"}}", &a);
    list("{" MODEL ", \"data\": {\"train\": \"x.npz\"}, \"optim\": {\"lr\": 1e-3}, \"train\": {\"seed\": 0}}", &b);
    CHECKF(strcmp(a.text, b.text) == 0, "written defaults changed the values:\n%s\nvs\n%s", a.text, b.text);
    CHECKF(strstr(a.text, "optim.lr=0.001\n") && strstr(a.text, "train.seed=0\n") && strstr(a.text, "model.hidden=[8]\n") &&
               strstr(a.text, "data.train=\"x.npz\"\n") && strstr(a.text, "train.batch_size="),
           "%s", a.text);
    list("{" MODEL ", \"data\": {\"train\": \"x.npz\"}, \"optim\": {\"lr\": 0.002}, \"train\": {\"seed\": null}}", &c);
    CHECKF(strstr(c.text, "optim.lr=0.002\n") && strstr(c.text, "train.seed=0\n") && !strstr(c.text, "optim.lr=0.001"),
           "%s", c.text);
    /* a key at most once */
    const char *p = strstr(a.text, "optim.lr=");
    CHECK(p && !strstr(p + 1, "optim.lr="));
}

int main(void) {
    t_case cases[] = {T(test_defaults_fill_in)};
    return t_run(cases, 1);
}
