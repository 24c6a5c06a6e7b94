/* Config JSON: comments, error locations, every getter's message, unknown keys,
 * overrides and the compact round trip. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <unistd.h>

#include "brisk/json.h"
#include "test.h"

/* REQUIRE_OK tests its error pointer for NULL; passed through a call, &e does not
 * trip GCC's -Waddress. */
static brisk_error *errp(brisk_error *e) { return e; }

static brisk_json *parse(const char *text) {
    brisk_error e = {0};
    brisk_json *doc = NULL;
    if (brisk_json_parse(text, strlen(text), "cfg.json", &doc, &e))
        fprintf(stderr, "unexpected parse error: %s\n", e.msg);
    return doc;
}

/* The parse error message for `text`, or "" when it parses. */
static const char *parse_error(const char *text, size_t len) {
    static brisk_error e;
    brisk_json *doc = NULL;
    memset(&e, 0, sizeof e);
    if (brisk_json_parse(text, len, "cfg.json", &doc, &e) == BRISK_OK) { brisk_json_free(doc); return ""; }
    return e.msg;
}

#define CHECK_MSG(got, want) CHECKF(strcmp((got), (want)) == 0, "\n  got:  %s\n  want: %s", (got), (want))

static void test_comments(void) {
    const char *text =
        "// leading comment\n"
        "{\n"
        "  \"url\": \"http://x/y\", // trailing\n"
        "  \"s\": \"a /* not */ b\", /* block\n"
        "     over lines */ \"q\": \"say \\\"// no\\\" ok\",\n"
        "  \"n\": 2 /* inline */ }\n"
        "// last line without newline";
    brisk_json *doc = parse(text);
    REQUIRE(doc);
    brisk_json_reader r = brisk_json_root(doc);
    const char *url, *s, *q;
    double n;
    brisk_json_string(&r, "url", &url);
    brisk_json_string(&r, "s", &s);
    brisk_json_string(&r, "q", &q);
    brisk_json_number(&r, "n", BRISK_ANY, &n);
    brisk_error e;
    CHECKF(brisk_json_finish(doc, &e) == BRISK_OK, "%s", e.msg);
    CHECK(strcmp(url, "http://x/y") == 0);
    CHECK(strcmp(s, "a /* not */ b") == 0);
    CHECK(strcmp(q, "say \"// no\" ok") == 0);
    CHECK(n == 2);
    brisk_json_free(doc);

    const char *open = "{\n  \"a\": 1 /* never closed\n}";
    CHECK_MSG(parse_error(open, strlen(open)), "cfg.json: line 2, column 10: unterminated /* comment");
    /* A comment that ends the file after a complete value is fine. */
    CHECK_MSG(parse_error("{} /* x */", 10), "");
    CHECK_MSG(parse_error("/* only */ // comments\n", 23), "cfg.json: no JSON value (empty or only comments)");
    CHECK_MSG(parse_error("", 0), "cfg.json: no JSON value (empty or only comments)");
}

static void test_syntax_errors(void) {
    const char *t1 = "{\n  \"a\": 1,\n  \"b\": tru\n}\n";
    CHECK_MSG(parse_error(t1, strlen(t1)), "cfg.json: line 3, column 8: invalid JSON near 'tru'");
    const char *t2 = "{\n  \"a\": 1\n  \"b\": 2\n}";
    CHECK_MSG(parse_error(t2, strlen(t2)), "cfg.json: line 3, column 3: invalid JSON near '\"b\": 2'");
    const char *t3 = "{\"a\": 1,}";
    CHECK_MSG(parse_error(t3, strlen(t3)), "cfg.json: line 1, column 9: invalid JSON near '}'");
    /* A missing closing brace is reported at the last thing present. */
    const char *t4 = "{\n  \"a\": [1, 2],\n";
    CHECK_MSG(parse_error(t4, strlen(t4)), "cfg.json: line 2, column 14: invalid JSON near ','");
    /* Columns count characters, not bytes; a comment before the error changes nothing. */
    const char *t5 = "{\"\xC3\xA9\": /* \xC3\xA9\xC3\xA9 */ x}";
    CHECK_MSG(parse_error(t5, strlen(t5)), "cfg.json: line 1, column 16: invalid JSON near 'x}'");
    const char t6[] = "{\"a\": 1}\0{";
    CHECK_MSG(parse_error(t6, sizeof t6 - 1), "cfg.json: line 1, column 9: NUL byte in JSON text");
    const char *t7 = "{\"a\": {\"b\": 1, \"b\": 2}}";
    CHECK_MSG(parse_error(t7, strlen(t7)), "cfg.json: a: duplicate key \"b\"");
    const char *t8 = "{\"a\": 1} {";
    CHECK_MSG(parse_error(t8, strlen(t8)), "cfg.json: line 1, column 10: invalid JSON near '{'");
}

static void test_load_file(void) {
    char path[] = "/tmp/brisk_json_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    const char *text = "{ // hi\n \"lr\": 0.5 }\n";
    REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    brisk_json *doc;
    brisk_error e;
    REQUIRE_OK(brisk_json_load(path, &doc, &e), errp(&e));
    CHECK(strcmp(brisk_json_name(doc), path) == 0);
    brisk_json_reader r = brisk_json_root(doc);
    double lr;
    CHECK(brisk_json_number(&r, "lr", BRISK_GT(0), &lr) == BRISK_OK && lr == 0.5);
    brisk_json_free(doc);
    unlink(path);
    CHECK(brisk_json_load(T_ABSENT "/x.json", &doc, &e) == BRISK_ERR_IO);
    CHECK_MSG(e.msg, T_ABSENT "/x.json: cannot open: No such file or directory; check the path (a relative one starts from the current directory; in a config, from the directory the command runs in)");
    CHECK(doc == NULL);
}

/* Runs one getter on a fresh document and returns its sticky message. */
#define GETTER_ERROR(json, call) do { \
    brisk_json *doc = parse(json); REQUIRE(doc); \
    brisk_json_reader root = brisk_json_root(doc), m; \
    brisk_json_object_opt(&root, "m", &m, NULL); \
    CHECK((call) == BRISK_ERR_INVALID); \
    brisk_error e = {0}; brisk_json_status(doc, &e); \
    snprintf(msg, sizeof msg, "%s", e.msg); brisk_json_free(doc); } while (0)

static void test_getter_errors(void) {
    char msg[1024];
    double d;
    int i;
    int64_t i64;
    bool b;
    const char *s;
    static const char *const kinds[] = {"mlp", "lstm", "transformer", NULL};

    GETTER_ERROR("{\"m\": {\"lr\": \"fast\"}}", brisk_json_number(&m, "lr", BRISK_GT(0), &d));
    CHECK_MSG(msg, "cfg.json: m.lr: expected a number > 0, got \"fast\"");
    CHECK(d == 0);
    GETTER_ERROR("{\"m\": {\"lr\": 0}}", brisk_json_number_or(&m, "lr", 1e-3, BRISK_GT(0), &d));
    CHECK_MSG(msg, "cfg.json: m.lr: expected a number > 0, got 0");
    CHECK(d == 1e-3);
    GETTER_ERROR("{\"m\": {}}", brisk_json_number(&m, "lr", BRISK_IN(0, 1), &d));
    CHECK_MSG(msg, "cfg.json: m.lr: missing, expected a number in [0, 1]");
    GETTER_ERROR("{\"m\": {\"p\": 0}}", brisk_json_number(&m, "p", BRISK_IN_LO_OPEN(0, 1), &d));
    CHECK_MSG(msg, "cfg.json: m.p: expected a number in (0, 1], got 0");
    GETTER_ERROR("{\"m\": {\"p\": 1e999}}", brisk_json_number(&m, "p", BRISK_ANY, &d));
    CHECK_MSG(msg, "cfg.json: m.p: expected a number, got a number out of range");
    GETTER_ERROR("{\"m\": {\"p\": null}}", brisk_json_number(&m, "p", BRISK_ANY, &d));
    CHECK_MSG(msg, "cfg.json: m.p: expected a number, got null");

    GETTER_ERROR("{\"m\": {\"hidden\": 2.5}}", brisk_json_int(&m, "hidden", 1, 65536, &i));
    CHECK_MSG(msg, "cfg.json: m.hidden: expected an integer in [1, 65536], got 2.5");
    GETTER_ERROR("{\"m\": {\"hidden\": 0}}", brisk_json_int_or(&m, "hidden", 7, 1, INT_MAX, &i));
    CHECK_MSG(msg, "cfg.json: m.hidden: expected an integer >= 1, got 0");
    CHECK(i == 7);
    GETTER_ERROR("{\"m\": {\"h\": 3000000000}}", brisk_json_int(&m, "h", INT_MIN, INT_MAX, &i));
    CHECK_MSG(msg, "cfg.json: m.h: expected an integer, got 3000000000");
    GETTER_ERROR("{\"m\": {\"h\": 1e300}}", brisk_json_int64(&m, "h", 0, INT64_MAX, &i64));
    CHECK_MSG(msg, "cfg.json: m.h: expected an integer >= 0, got 1e+300");
    GETTER_ERROR("{\"m\": {}}", brisk_json_int64(&m, "steps", INT64_MIN, 100, &i64));
    CHECK_MSG(msg, "cfg.json: m.steps: missing, expected an integer <= 100");

    GETTER_ERROR("{\"m\": {\"amp\": 1}}", brisk_json_bool(&m, "amp", &b));
    CHECK_MSG(msg, "cfg.json: m.amp: expected true or false, got 1");
    GETTER_ERROR("{\"m\": {\"amp\": \"yes\"}}", brisk_json_bool_or(&m, "amp", true, &b));
    CHECK_MSG(msg, "cfg.json: m.amp: expected true or false, got \"yes\"");
    CHECK(b == true);

    GETTER_ERROR("{\"m\": {\"out\": [1, 2]}}", brisk_json_string(&m, "out", &s));
    CHECK_MSG(msg, "cfg.json: m.out: expected a string, got [1,2]");
    CHECK(s == NULL);
    GETTER_ERROR("{\"m\": {\"out\": {\"a\": \"0123456789012345678901234567890123456789xyz\"}}}",
                 brisk_json_string_or(&m, "out", "d", &s));
    CHECK_MSG(msg, "cfg.json: m.out: expected a string, got {\"a\":\"0123456789012345678901234567890123...");

    /* Shortening never cuts a UTF-8 character in half. */
    GETTER_ERROR("{\"m\": {\"lr\": \"01234567890123456789012345678901234567\u00e9\u00e9\u00e9\u00e9\u00e9\"}}",
                 brisk_json_number(&m, "lr", BRISK_ANY, &d));
    CHECK_MSG(msg, "cfg.json: m.lr: expected a number, got \"01234567890123456789012345678901234567...");
    GETTER_ERROR("{\"m\": {\"type\": \"mlpp\"}}", brisk_json_enum(&m, "type", kinds, &i));
    CHECK_MSG(msg, "cfg.json: m.type: expected one of \"mlp\", \"lstm\", \"transformer\", got \"mlpp\"");
    GETTER_ERROR("{\"m\": {}}", brisk_json_enum(&m, "type", kinds, &i));
    CHECK_MSG(msg, "cfg.json: m.type: missing, expected one of \"mlp\", \"lstm\", \"transformer\"");

    double *nums;
    int *ints;
    const char **strs;
    size_t n;
    GETTER_ERROR("{\"m\": {\"w\": [1, 0, 3]}}", brisk_json_ints(&m, "w", true, 1, 4096, &ints, &n));
    CHECK_MSG(msg, "cfg.json: m.w[1]: expected an integer in [1, 4096], got 0");
    CHECK(ints == NULL && n == 0);
    GETTER_ERROR("{\"m\": {\"w\": 3}}", brisk_json_ints(&m, "w", false, 1, 4096, &ints, &n));
    CHECK_MSG(msg, "cfg.json: m.w: expected an array of integers in [1, 4096], got 3");
    GETTER_ERROR("{\"m\": {\"mean\": [0.5, \"x\"]}}", brisk_json_numbers(&m, "mean", true, BRISK_ANY, &nums, &n));
    CHECK_MSG(msg, "cfg.json: m.mean[1]: expected a number, got \"x\"");
    GETTER_ERROR("{\"m\": {}}", brisk_json_numbers(&m, "std", true, BRISK_GT(0), &nums, &n));
    CHECK_MSG(msg, "cfg.json: m.std: missing, expected an array of numbers > 0");
    GETTER_ERROR("{\"m\": {\"cols\": [\"a\", false]}}", brisk_json_strings(&m, "cols", true, &strs, &n));
    CHECK_MSG(msg, "cfg.json: m.cols[1]: expected a string, got false");

    brisk_json_reader sub;
    GETTER_ERROR("{\"m\": {\"noise\": [1]}}", brisk_json_object(&m, "noise", &sub));
    CHECK_MSG(msg, "cfg.json: m.noise: expected an object, got [1]");
    GETTER_ERROR("{}", brisk_json_object(&root, "model", &sub));
    CHECK_MSG(msg, "cfg.json: model: missing, expected an object");
    /* A required key inside an absent optional object names its full path. */
    GETTER_ERROR("{}", brisk_json_int(&m, "steps", 1, 100, &i));
    CHECK_MSG(msg, "cfg.json: m.steps: missing, expected an integer in [1, 100]");
    GETTER_ERROR("{\"m\": {\"layers\": [{}, 2]}}", brisk_json_object_at(&m, "layers", 1, &sub));
    CHECK_MSG(msg, "cfg.json: m.layers[1]: expected an object, got 2");
    GETTER_ERROR("{\"m\": {}}", brisk_json_fail(&m, "heads", "must divide m.hidden (%d)", 96));
    CHECK_MSG(msg, "cfg.json: m.heads: must divide m.hidden (96)");

    brisk_json *doc = parse("[1, 2]");
    REQUIRE(doc);
    brisk_json_reader root = brisk_json_root(doc);
    CHECK(brisk_json_int_or(&root, "x", 5, 0, 10, &i) == BRISK_ERR_INVALID && i == 5);
    brisk_error e;
    CHECK(brisk_json_finish(doc, &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "cfg.json: expected a JSON object at the top level, got an array");
    brisk_json_free(doc);
}

static void test_getters_ok(void) {
    brisk_json *doc = parse(
        "{\"model\": {\"type\": \"lstm\", \"hidden\": 128, \"dropout\": 0.1, \"bias\": false,\n"
        "  \"widths\": [64, 32], \"mean\": [0.5, -1], \"cols\": [\"a\", \"b\"], \"seed\": null,\n"
        "  \"layers\": [{\"w\": 1}, {\"w\": 2}], \"steps\": 9007199254740992}}");
    REQUIRE(doc);
    static const char *const kinds[] = {"mlp", "lstm", NULL};
    brisk_json_reader root = brisk_json_root(doc), m, noise, l1;
    int type, hidden, seed, *widths, w;
    double dropout, *mean, eta;
    bool bias, present = true;
    const char **cols, *name;
    size_t nw, nm, nc, nl;
    int64_t steps;
    brisk_json_object(&root, "model", &m);
    brisk_json_enum(&m, "type", kinds, &type);
    brisk_json_int(&m, "hidden", 1, 4096, &hidden);
    brisk_json_number_or(&m, "dropout", 0, BRISK_IN(0, 1), &dropout);
    brisk_json_bool_or(&m, "bias", true, &bias);
    brisk_json_ints(&m, "widths", true, 1, 4096, &widths, &nw);
    brisk_json_numbers(&m, "mean", true, BRISK_ANY, &mean, &nm);
    brisk_json_strings(&m, "cols", true, &cols, &nc);
    brisk_json_int_or(&m, "seed", 42, 0, INT_MAX, &seed); /* null reads as absent */
    brisk_json_string_or(&m, "name", "net", &name);
    brisk_json_int64(&m, "steps", 0, INT64_MAX, &steps);
    brisk_json_object_opt(&m, "noise", &noise, &present);
    brisk_json_number_or(&noise, "eta", 0.25, BRISK_ANY, &eta);
    brisk_json_array_len(&m, "layers", true, &nl);
    brisk_json_object_at(&m, "layers", 1, &l1);
    brisk_json_int(&l1, "w", 0, 10, &w);
    brisk_error e;
    CHECKF(brisk_json_finish(doc, &e) == BRISK_OK, "%s", e.msg);
    CHECK(type == 1 && hidden == 128 && dropout == 0.1 && !bias && seed == 42 && !present);
    CHECK(nw == 2 && widths[0] == 64 && widths[1] == 32);
    CHECK(nm == 2 && mean[1] == -1);
    CHECK(nc == 2 && strcmp(cols[1], "b") == 0);
    CHECK(strcmp(name, "net") == 0 && eta == 0.25 && nl == 2 && w == 2);
    CHECK(steps == 9007199254740992LL);
    CHECK(strcmp(l1.path, "model.layers[1]") == 0);
    free(widths);
    free(mean);
    free(cols);
    brisk_json_free(doc);
}

static void test_sticky_and_unknown(void) {
    brisk_json *doc = parse("{\"model\": {\"type\": \"mlp\", \"hiden\": 3, \"fine\": 1}, \"optim\": {\"lr\": -1}}");
    REQUIRE(doc);
    brisk_json_reader root = brisk_json_root(doc), m, o;
    int v;
    double lr;
    brisk_json_object(&root, "model", &m);
    brisk_json_ignore(&m, "type", "fine", "coarse", NULL);
    brisk_json_int_or(&m, "hidden", 64, 1, 100, &v);
    CHECK(brisk_json_unknown_keys(&m) == BRISK_ERR_INVALID);
    brisk_error e;
    brisk_json_status(doc, &e);
    CHECK_MSG(e.msg, "cfg.json: model: unknown key \"hiden\" (did you mean \"hidden\"? known: type, fine, coarse, hidden); fix or remove it (every key: brisk config --reference, docs/config.md)");
    /* The first error sticks: later getters report it and write their defaults. */
    brisk_json_object(&root, "optim", &o);
    CHECK(brisk_json_number_or(&o, "lr", 0.5, BRISK_GT(0), &lr) == BRISK_ERR_INVALID && lr == 0.5);
    CHECK(brisk_json_finish(doc, &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "cfg.json: model: unknown key \"hiden\" (did you mean \"hidden\"? known: type, fine, coarse, hidden); fix or remove it (every key: brisk config --reference, docs/config.md)");
    brisk_json_free(doc);

    /* finish checks every opened object, the top level included. */
    doc = parse("{\"model\": {\"type\": \"mlp\"}, \"optim\": {}, \"extra\": 1}");
    REQUIRE(doc);
    root = brisk_json_root(doc);
    const char *t;
    brisk_json_object(&root, "model", &m);
    brisk_json_string(&m, "type", &t);
    brisk_json_object_opt(&root, "optim", &o, NULL);
    CHECK(brisk_json_finish(doc, &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "cfg.json: unknown key \"extra\" (known: model, optim); fix or remove it (every key: brisk config --reference, docs/config.md)");
    brisk_json_free(doc);

    doc = parse("{\"a\": {\"x\": 1}}");
    REQUIRE(doc);
    root = brisk_json_root(doc);
    brisk_json_object(&root, "a", &m);
    CHECK(brisk_json_has(&m, "y") == false);
    CHECK(brisk_json_finish(doc, &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "cfg.json: a: unknown key \"x\" (known: y); fix or remove it (every key: brisk config --reference, docs/config.md)");
    brisk_json_free(doc);
}

static char *dump(brisk_json *doc) {
    char *s = NULL;
    brisk_error e;
    if (brisk_json_dump(doc, &s, &e)) fprintf(stderr, "%s\n", e.msg);
    return s;
}

static void test_overrides(void) {
    brisk_json *doc = parse("{\"optim\": {\"lr\": 0.1}, \"model\": {\"layers\": [{\"w\": 1}, {\"w\": 2}]}, \"n\": 5}");
    REQUIRE(doc);
    brisk_error e;
    REQUIRE_OK(brisk_json_override(doc, "optim.lr=3e-4", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "optim.type=adamw", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "optim.betas=[0.9, 0.95]", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "train.amp=true", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "train.out=\"runs/x=1\"", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "train.name=", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "a.b.c.d=null", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "model.layers[1].w=7", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "model.layers[0]={\"w\": 0}", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "data.path=/data/x.csv", &e), errp(&e));
    REQUIRE_OK(brisk_json_set_number(doc, "optim.wd", 0.01, &e), errp(&e));
    REQUIRE_OK(brisk_json_set_int(doc, "train.batch_size", 1024, &e), errp(&e));
    REQUIRE_OK(brisk_json_set_string(doc, "train.device", "cpu", &e), errp(&e));
    REQUIRE_OK(brisk_json_set_bool(doc, "train.graph", false, &e), errp(&e));
    char *s = dump(doc);
    REQUIRE(s);
    CHECK_MSG(s, "{\"optim\":{\"lr\":0.0003,\"type\":\"adamw\",\"betas\":[0.9,0.95],\"wd\":0.01},"
                 "\"model\":{\"layers\":[{\"w\":0},{\"w\":7}]},\"n\":5,"
                 "\"train\":{\"amp\":true,\"out\":\"runs/x=1\",\"name\":\"\",\"batch_size\":1024,"
                 "\"device\":\"cpu\",\"graph\":false},\"a\":{\"b\":{\"c\":{\"d\":null}}},"
                 "\"data\":{\"path\":\"/data/x.csv\"}}");
    free(s);

    CHECK(brisk_json_override(doc, "optim.lr.x=1", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set optim.lr.x=1: optim.lr is a number, not an object");
    CHECK(brisk_json_override(doc, "n.x.y=1", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set n.x.y=1: n is a number, not an object");
    CHECK(brisk_json_override(doc, "model.layers[2].w=1", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set model.layers[2].w=1: index 2 is past the end of model.layers (2 elements)");
    CHECK(brisk_json_override(doc, "optim[0]=1", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set optim[0]=1: optim is an object, not an array");
    CHECK(brisk_json_override(doc, "optim.lr", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set optim.lr: expected KEY.PATH=VALUE");
    const char *bad[] = {"=1", "a..b=1", ".a=1", "a.=1", "a[x]=1", "a[-1]=1", "a[1=2", "a[1]x=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(brisk_json_override(doc, bad[i], &e) == BRISK_ERR_INVALID, "%s", bad[i]);
        CHECKF(strstr(e.msg, "bad key path") != NULL, "%s -> %s", bad[i], e.msg);
    }
    /* Deeper than a dump could be parsed back (cJSON's nesting limit). */
    char deep[2100];
    for (int i = 0; i < 1000; i++) memcpy(deep + 2 * i, "a.", 2);
    memcpy(deep + 2000, "b=1", 4);
    CHECK(brisk_json_override(doc, deep, &e) == BRISK_ERR_INVALID);
    CHECK(strstr(e.msg, ": nested more than 1000 levels deep") != NULL);
    CHECK(brisk_json_set_number(doc, "x", NAN, &e) == BRISK_ERR_INVALID);
    CHECK(brisk_json_set_int(doc, "x", INT64_MAX, &e) == BRISK_ERR_INVALID);

    /* Overrides after reading would leave readers pointing at replaced values. */
    brisk_json_reader root = brisk_json_root(doc);
    CHECK(brisk_json_override(doc, "n=1", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set n=1: overrides must come before the config is read");
    (void)root;
    brisk_json_free(doc);

    /* Overrides on a document whose top level is not an object. */
    doc = parse("[1]");
    REQUIRE(doc);
    CHECK(brisk_json_override(doc, "a=1", &e) == BRISK_ERR_INVALID);
    CHECK_MSG(e.msg, "--set a=1: the top level is an array, not an object");
    brisk_json_free(doc);
}

static void test_round_trip(void) {
    const char *text = "/* cfg */ {\"lr\": 3e-4, \"big\": 123456789012345, \"x\": 0.1, \"tiny\": 1e-300,\n"
                       " \"s\": \"tab\\t\\u00e9\\\"q\", \"a\": [true, null, {}], \"neg\": -0.0}";
    brisk_json *doc = parse(text);
    REQUIRE(doc);
    char *s1 = dump(doc);
    REQUIRE(s1);
    brisk_json *doc2 = NULL;
    brisk_error e;
    REQUIRE_OK(brisk_json_parse(s1, strlen(s1), "checkpoint config", &doc2, &e), errp(&e));
    char *s2 = dump(doc2);
    CHECK(s2 && strcmp(s1, s2) == 0);
    brisk_json_reader r = brisk_json_root(doc2);
    double lr, x, tiny;
    int64_t big;
    const char *str;
    brisk_json_number(&r, "lr", BRISK_ANY, &lr);
    brisk_json_number(&r, "x", BRISK_ANY, &x);
    brisk_json_number(&r, "tiny", BRISK_ANY, &tiny);
    brisk_json_int64(&r, "big", 0, INT64_MAX, &big);
    brisk_json_string(&r, "s", &str);
    CHECK(brisk_json_status(doc2, &e) == BRISK_OK);
    CHECK(lr == 3e-4 && x == 0.1 && tiny == 1e-300 && big == 123456789012345LL);
    CHECK(strcmp(str, "tab\t\xC3\xA9\"q") == 0);
    free(s1);
    free(s2);
    brisk_json_free(doc);
    brisk_json_free(doc2);
}

/* Text a config cannot carry: bytes that are not UTF-8 (found by key path) and \u0000 (a NUL
 * that would cut a key or value short), in the file and in overrides; and a file too big to
 * be a config, refused before it is parsed. */
static void test_text_checks(void) {
    const char *bad_value = "{\"train\": {\"out_dir\": \"r\xE9un\"}}";
    CHECK_MSG(parse_error(bad_value, strlen(bad_value)),
              "cfg.json: train.out_dir: the string is not valid UTF-8 (byte 0xe9 at offset 1); JSON text must be UTF-8");
    const char *bad_key = "{\"model\": {\"\xFF\": 1}}";
    CHECK_MSG(parse_error(bad_key, strlen(bad_key)),
              "cfg.json: model: a key is not valid UTF-8 (byte 0xff at offset 0); JSON text must be UTF-8");
    const char *overlong = "{\"a\": [\"ok\", \"\xC0\xAF\"]}";
    CHECK_MSG(parse_error(overlong, strlen(overlong)),
              "cfg.json: a[1]: the string is not valid UTF-8 (byte 0xc0 at offset 0); JSON text must be UTF-8");
    const char *nul_value = "{\n \"data\": {\"train\": \"x\\u0000.npz\"}}";
    CHECK_MSG(parse_error(nul_value, strlen(nul_value)),
              "cfg.json: line 2, column 22: \\u0000 in a string; keys and strings cannot hold a NUL character");
    const char *nul_key = "{\"a\\u0000b\": 1}";
    CHECK(strstr(parse_error(nul_key, strlen(nul_key)), "\\u0000 in a string") != NULL);
    const char *escaped = "{\"s\": \"a\\\\u0000b\", \"t\": \"\\u00e9\"}"; /* a backslash, then text: fine */
    CHECK_MSG(parse_error(escaped, strlen(escaped)), "");
    brisk_json *doc = parse("{}");
    REQUIRE(doc);
    brisk_error e = {0};
    CHECK(brisk_json_override(doc, "train.out_dir=a\xE9", &e) == BRISK_ERR_FORMAT);
    CHECK(strstr(e.msg, "not valid UTF-8") != NULL);
    CHECK(brisk_json_override(doc, "train.out_dir=\"a\\u0000b\"", &e) == BRISK_ERR_INVALID);
    CHECK(strstr(e.msg, "cannot hold a NUL") != NULL);
    CHECK(brisk_json_set_string(doc, "train.out_dir", "\xC3", &e) == BRISK_ERR_FORMAT);
    brisk_json_free(doc);
    size_t big = (1u << 20) + 1;
    char *text = malloc(big);
    REQUIRE(text);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    CHECK(strstr(parse_error(text, big), "larger than the 1 MiB a config may have") != NULL);
    free(text);
}

/* Numbers as JSON writes them and no others: cJSON alone read [0001] as 1, +1 and .5 as
 * numbers and 0x10 as 0 followed by junk (issue 37). */
static void test_number_grammar(void) {
    const char *bad[][2] = {
        {"[0001]", "cfg.json: line 1, column 2: '0001' is not a JSON number (a leading zero); JSON numbers are "
                   "decimal, as 10, -0.5 or 1e-3"},
        {"{\"a\":\n  -01.5}", "cfg.json: line 2, column 3: '-01.5' is not a JSON number (a leading zero); JSON "
                              "numbers are decimal, as 10, -0.5 or 1e-3"},
        {"[0x10]", "cfg.json: line 1, column 2: '0x10' is not a JSON number (hexadecimal); JSON numbers are decimal, "
                   "as 10, -0.5 or 1e-3"},
        {"[+1]", "cfg.json: line 1, column 2: '+1' is not a JSON number (a leading '+'); JSON numbers are decimal, "
                 "as 10, -0.5 or 1e-3"},
        {"[.5]", "cfg.json: line 1, column 2: '.5' is not a JSON number (no digit before the '.'); JSON numbers are "
                 "decimal, as 10, -0.5 or 1e-3"},
        {"[1.]", "cfg.json: line 1, column 2: '1.' is not a JSON number (no digit after the '.'); JSON numbers are "
                 "decimal, as 10, -0.5 or 1e-3"},
        {"[1e]", "cfg.json: line 1, column 2: '1e' is not a JSON number (no digits in the exponent); JSON numbers "
                 "are decimal, as 10, -0.5 or 1e-3"},
        {"[12abc]", "cfg.json: line 1, column 2: '12abc' is not a JSON number (not a number); JSON numbers are "
                    "decimal, as 10, -0.5 or 1e-3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_MSG(parse_error(bad[i][0], strlen(bad[i][0])), bad[i][1]);
    /* JSON's own numbers, and digits inside strings, keys and comments, are fine */
    const char *good = "{\"n\": [0, -0, 10, -0.5, 1e-3, 2E+10, 0.25e2], \"0001\": \"0x10 +1 .5\"} // 0001";
    CHECK_MSG(parse_error(good, strlen(good)), "");
    /* --set: a value that is no JSON number is a word, as a bare name is, so the key's own
     * check names it (train.epochs=0001: expected a whole number, got "0001") */
    brisk_json *doc = parse("{}");
    REQUIRE(doc);
    brisk_error e = {0};
    REQUIRE_OK(brisk_json_override(doc, "a=0001", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "b=0x10", &e), errp(&e));
    REQUIRE_OK(brisk_json_override(doc, "c=12", &e), errp(&e));
    char *s = dump(doc);
    REQUIRE(s);
    CHECK_MSG(s, "{\"a\":\"0001\",\"b\":\"0x10\",\"c\":12}");
    free(s);
    brisk_json_free(doc);
}

TEST_MAIN(T(test_comments), T(test_syntax_errors), T(test_load_file), T(test_getter_errors),
          T(test_getters_ok), T(test_sticky_and_unknown), T(test_overrides), T(test_round_trip),
          T(test_text_checks), T(test_number_grammar))
