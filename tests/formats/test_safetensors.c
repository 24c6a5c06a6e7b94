/* safetensors: round trip of every dtype, hostile headers (each an error, never a
 * crash), atomic writes that leave no temporary file and keep the old file when a
 * write fails. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include "brisk/safetensors.h"
#include "test.h"

/* REQUIRE_OK tests its error pointer for NULL; passed through a call, &e does not
 * trip GCC's -Waddress. */
static brisk_error *errp(brisk_error *e) { return e; }

#define CHECK_MSG(got, want) CHECKF(strcmp((got), (want)) == 0, "\n  got:  %s\n  want: %s", (got), (want))

static char dir[64];

static void make_dir(void) {
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "/tmp/brisk_st_XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); exit(1); }
}

/* Names of the files in dir, comma-separated, sorted. */
static void list_dir(char *out, size_t cap) {
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.')
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? "," : "", ents[i]->d_name);
        free(ents[i]);
    }
    free(ents);
}

static void clean_dir(void) {
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    char p[256];
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.') { snprintf(p, sizeof p, "%s/%s", dir, ents[i]->d_name); unlink(p); }
        free(ents[i]);
    }
    free(ents);
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static void test_round_trip(void) {
    make_dir();
    float f32[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 65504};
    int32_t i32[4] = {0, -1, INT32_MAX, INT32_MIN};
    uint16_t f16[3], bf16[4];
    uint8_t u8[5] = {0, 1, 127, 128, 255};
    float scalar = 42;
    for (int i = 0; i < 3; i++) f16[i] = brisk_f32_to_f16(0.5f * (float)i - 1);
    for (int i = 0; i < 4; i++) bf16[i] = brisk_f32_to_bf16(3.0f * (float)i);
    brisk_st_entry e[] = {
        {"u8", BRISK_U8, brisk_shape1(5), u8},
        {"net.0.weight", BRISK_F32, brisk_shape2(2, 3), f32},
        {"half", BRISK_F16, brisk_shape1(3), f16},
        {"idx", BRISK_I32, brisk_shape1(4), i32},
        {"b16", BRISK_BF16, brisk_shape2(2, 2), bf16},
        {"scalar", BRISK_F32, brisk_shape_make(0, NULL), &scalar},
        {"empty", BRISK_F32, brisk_shape2(0, 3), NULL},
    };
    brisk_st_meta meta[] = {{"format", "pt"}, {"config", "{\"lr\": 3e-4, \"q\": \"\\\"\"}\n\ttab"}};
    char path[128];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    brisk_error err;
    REQUIRE_OK(brisk_safetensors_write(path, e, 7, meta, 2, &err), errp(&err));
    char names[512];
    list_dir(names, sizeof names);
    CHECK_MSG(names, "rt.safetensors");

    brisk_safetensors *st;
    REQUIRE_OK(brisk_safetensors_open(path, &st, &err), errp(&err));
    CHECK(strcmp(brisk_safetensors_name(st), path) == 0);
    REQUIRE(brisk_safetensors_count(st) == 7);
    /* File order: 4-byte elements in the caller's order, then 2-byte, then 1-byte;
     * the empty tensor sits where its offset puts it. */
    const char *order[] = {"net.0.weight", "idx", "scalar", "empty", "half", "b16", "u8"};
    for (size_t i = 0; i < 7; i++) {
        const brisk_st_tensor *t = brisk_safetensors_at(st, i);
        CHECKF(strcmp(t->name, order[i]) == 0, "%zu: %s", i, t->name);
        CHECKF(t->begin % brisk_dtype_size(t->dtype) == 0, "%s misaligned", t->name);
    }
    CHECK(brisk_safetensors_at(st, 7) == NULL);
    for (size_t i = 0; i < 7; i++) {
        const brisk_st_tensor *t = brisk_safetensors_find(st, e[i].name);
        REQUIRE(t);
        CHECK(t->dtype == e[i].dtype && brisk_shape_equal(&t->shape, &e[i].shape));
        size_t bytes = (size_t)brisk_shape_numel(&e[i].shape) * brisk_dtype_size(e[i].dtype);
        CHECK(t->nbytes == bytes && (bytes == 0 || memcmp(t->data, e[i].data, bytes) == 0));
    }
    CHECK(brisk_safetensors_find(st, "nope") == NULL);
    CHECK(brisk_safetensors_meta_count(st) == 2);
    CHECK(strcmp(brisk_safetensors_meta(st, "config"), meta[1].value) == 0);
    CHECK(brisk_safetensors_meta(st, "missing") == NULL);
    const char *k, *v;
    brisk_safetensors_meta_at(st, 0, &k, &v);
    CHECK(strcmp(k, "format") == 0 && strcmp(v, "pt") == 0);

    float back[6];
    REQUIRE_OK(brisk_safetensors_read(st, "net.0.weight", BRISK_F32, brisk_shape2(2, 3), back, &err), errp(&err));
    CHECK(memcmp(back, f32, sizeof back) == 0);
    CHECK(brisk_safetensors_read(st, "net.0.weight", BRISK_F32, brisk_shape2(3, 2), back, &err) == BRISK_ERR_SHAPE);
    char want[256];
    snprintf(want, sizeof want, "%s: tensor 'net.0.weight': file has [2, 3] F32, expected [3, 2] F32", path);
    CHECK_MSG(err.msg, want);
    CHECK(brisk_safetensors_read(st, "x.bias", BRISK_F32, brisk_shape1(2), back, &err) == BRISK_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: no tensor 'x.bias'", path);
    CHECK_MSG(err.msg, want);
    brisk_tensor t;
    REQUIRE_OK(brisk_safetensors_load(st, "b16", &t, &err), errp(&err));
    CHECK(t.dtype == BRISK_BF16 && t.shape.ndim == 2 && brisk_bf16_to_f32(((uint16_t *)t.data)[3]) == 9.0f);
    brisk_tensor_free(&t);
    brisk_safetensors_free(st);

    /* The header is padded to a multiple of 8 and starts with '{'. */
    size_t len;
    unsigned char *raw = read_all(path, &len);
    REQUIRE(raw);
    uint64_t hn = 0;
    for (int i = 7; i >= 0; i--) hn = hn << 8 | raw[i];
    CHECK(hn % 8 == 0 && raw[8] == '{');
    free(raw);

    /* Overwriting an existing file goes through the same rename. */
    REQUIRE_OK(brisk_safetensors_write(path, e + 1, 1, NULL, 0, &err), errp(&err));
    REQUIRE_OK(brisk_safetensors_open(path, &st, &err), errp(&err));
    CHECK(brisk_safetensors_count(st) == 1 && brisk_safetensors_meta_count(st) == 0);
    brisk_safetensors_free(st);
    list_dir(names, sizeof names);
    CHECK_MSG(names, "rt.safetensors");
    clean_dir();
}

/* The reference implementation's own serialisation of one tensor, byte for byte. */
static void test_reference_bytes(void) {
    make_dir();
    float v[6] = {0, 1, 2, 3, 4, 5};
    brisk_st_entry e = {"attn0", BRISK_F32, brisk_shape4(1, 1, 2, 3), v};
    char path[128];
    snprintf(path, sizeof path, "%s/ref.safetensors", dir);
    brisk_error err;
    REQUIRE_OK(brisk_safetensors_write(path, &e, 1, NULL, 0, &err), errp(&err));
    size_t len;
    unsigned char *raw = read_all(path, &len);
    REQUIRE(raw);
    const char *hdr = "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       ";
    CHECK(len == 8 + 72 + 24 && raw[0] == 72 && memcmp(raw + 8, hdr, 72) == 0 && memcmp(raw + 80, v, 24) == 0);
    free(raw);
    clean_dir();
}

/* A file image: 8-byte length, header, then `data` zero bytes. */
static unsigned char *image(const char *header, size_t data, size_t *len) {
    size_t hn = strlen(header);
    *len = 8 + hn + data;
    unsigned char *b = calloc(1, *len);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    memcpy(b + 8, header, hn);
    return b;
}

static brisk_status parse_msg(const char *header, size_t data, char *msg) {
    size_t len;
    unsigned char *b = image(header, data, &len);
    brisk_safetensors *st = NULL;
    brisk_error err = {0};
    brisk_status s = brisk_safetensors_parse(b, len, "x.safetensors", &st, &err);
    snprintf(msg, 1024, "%s", s ? err.msg : "");
    brisk_safetensors_free(st);
    free(b);
    return s;
}

static void test_malformed(void) {
    char msg[1024];
    struct { const char *header; size_t data; brisk_status code; const char *msg; } cases[] = {
        {"{\"a\":", 0, BRISK_ERR_FORMAT, "x.safetensors: header is not valid JSON (error at byte 13)"},
        {"[]", 0, BRISK_ERR_FORMAT, "x.safetensors: header must be a JSON object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'a': data_offsets [0, 8] run past the end of the data buffer (4 bytes)"},
        {"{\"net.0.weight\":{\"dtype\":\"F32\",\"shape\":[256,295],\"data_offsets\":[0,100]}}", 100,
         BRISK_ERR_FORMAT, "x.safetensors: tensor 'net.0.weight': data_offsets [0, 100] hold 100 bytes, "
         "shape [256, 295] F32 needs 302080"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, BRISK_ERR_FORMAT,
         "x.safetensors: tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
        {"{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8, BRISK_ERR_FORMAT,
         "x.safetensors: tensors 'a' [0, 8] and 'b' [3, 5] overlap"},
        {"{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, BRISK_ERR_UNSUPPORTED,
         "x.safetensors: tensor 'w': unsupported dtype 'F64' (brisk reads F32, I32, F16, BF16, U8)"},
        {"{\"w\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, BRISK_ERR_UNSUPPORTED,
         "x.safetensors: tensor 'w': unsupported dtype 'I64' (brisk reads F32, I32, F16, BF16, U8)"},
        {"{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': dtype must be a string"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': shape must be an array of non-negative integers"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': shape must be an array of non-negative integers"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, BRISK_ERR_UNSUPPORTED,
         "x.safetensors: tensor 'w': 7 dimensions; brisk supports at most 6"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[9007199254740992,9007199254740992],\"data_offsets\":[0,1]}}", 1,
         BRISK_ERR_FORMAT, "x.safetensors: tensor 'w': shape [9007199254740992, 9007199254740992] F32 is too large"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,0]}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': data_offsets must be [begin, end] with 0 <= begin <= end"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 2, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': data_offsets must be [begin, end] with 0 <= begin <= end"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': data_offsets must be [begin, end] with 0 <= begin <= end"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, BRISK_ERR_FORMAT, "x.safetensors: tensor 'w': missing data_offsets"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': unexpected key 'x'"},
        {"{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': duplicate key 'dtype'"},
        {"{\"w\":[1]}", 0, BRISK_ERR_FORMAT,
         "x.safetensors: tensor 'w': expected an object with dtype, shape and data_offsets"},
        {"{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, BRISK_ERR_FORMAT,
         "x.safetensors: duplicate tensor name 'w'"},
        {"{\"__metadata__\":{\"a\":1}}", 0, BRISK_ERR_FORMAT, "x.safetensors: __metadata__ 'a': value must be a string"},
        {"{\"__metadata__\":[]}", 0, BRISK_ERR_FORMAT, "x.safetensors: __metadata__ must be an object of strings"},
        {"{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0, BRISK_ERR_FORMAT, "x.safetensors: __metadata__: duplicate key 'a'"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, BRISK_ERR_FORMAT, "x.safetensors: two __metadata__ entries"},
        {"{\"w\xff\":{}}", 0, BRISK_ERR_FORMAT, "x.safetensors: header is not valid UTF-8 (byte 11)"},
        {"{\"w\xed\xa0\x80\":{}}", 0, BRISK_ERR_FORMAT, "x.safetensors: header is not valid UTF-8 (byte 11)"},
        {"{\"w\\n\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", 0, BRISK_ERR_UNSUPPORTED,
         "x.safetensors: tensor 'w?': unsupported dtype 'X' (brisk reads F32, I32, F16, BF16, U8)"},
        /* Valid: empty header, gaps, trailing bytes, metadata null, empty tensors anywhere. */
        {"{}", 0, BRISK_OK, ""},
        {"{\"__metadata__\":null,\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
         "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[5,5]}}  ", 9, BRISK_OK, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        brisk_status s = parse_msg(cases[i].header, cases[i].data, msg);
        CHECKF(s == cases[i].code, "case %zu: %s -> %s", i, brisk_status_name(s), msg);
        CHECK_MSG(msg, cases[i].msg);
    }

    /* Header lengths that do not fit. */
    unsigned char b[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    brisk_safetensors *st;
    brisk_error err;
    CHECK(brisk_safetensors_parse(b, sizeof b, NULL, &st, &err) == BRISK_ERR_FORMAT && st == NULL);
    CHECK_MSG(err.msg, "<memory>: header length 18446744073709551615 exceeds the 100000000-byte limit "
                       "(not a safetensors file?)");
    b[0] = 9; memset(b + 1, 0, 7);
    CHECK(brisk_safetensors_parse(b, 16, "f", &st, &err) == BRISK_ERR_FORMAT);
    CHECK_MSG(err.msg, "f: header length 9 runs past the end of the file (16 bytes)");
    CHECK(brisk_safetensors_parse(b, 7, "f", &st, &err) == BRISK_ERR_FORMAT);
    CHECK_MSG(err.msg, "f: 7 bytes is too short for a safetensors file");
    b[0] = 2; b[8] = '{'; b[9] = 0;
    CHECK(brisk_safetensors_parse(b, 10, "f", &st, &err) == BRISK_ERR_FORMAT);
    CHECK_MSG(err.msg, "f: header contains a NUL byte");

    /* Every truncation of a valid file is an error. */
    make_dir();
    float v[3] = {1, 2, 3};
    uint8_t u[3] = {4, 5, 6};
    brisk_st_entry e[] = {{"v", BRISK_F32, brisk_shape1(3), v}, {"u", BRISK_U8, brisk_shape1(3), u}};
    brisk_st_meta m = {"k", "v"};
    char path[128];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    REQUIRE_OK(brisk_safetensors_write(path, e, 2, &m, 1, &err), errp(&err));
    size_t len;
    unsigned char *raw = read_all(path, &len);
    REQUIRE(raw);
    int failures = 0;
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *c = malloc(cut ? cut : 1);
        memcpy(c, raw, cut);
        if (brisk_safetensors_parse(c, cut, "t", &st, &err) == BRISK_OK) { failures++; brisk_safetensors_free(st); }
        free(c);
    }
    CHECKF(failures == 0, "%d truncations parsed", failures);
    free(raw);
    clean_dir();
}

static void test_write_errors(void) {
    make_dir();
    float v[4] = {1, 2, 3, 4};
    brisk_error err;
    brisk_st_entry bad[] = {{"a", BRISK_F32, brisk_shape1(4), v}, {"a", BRISK_F32, brisk_shape1(4), v}};
    char path[128], names[512], want[512];
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    CHECK(brisk_safetensors_write(path, bad, 2, NULL, 0, &err) == BRISK_ERR_INVALID);
    snprintf(want, sizeof want, "%s: duplicate tensor name 'a'", path);
    CHECK_MSG(err.msg, want);
    bad[1].name = "__metadata__";
    CHECK(brisk_safetensors_write(path, bad, 2, NULL, 0, &err) == BRISK_ERR_INVALID);
    bad[1].name = "b";
    bad[1].data = NULL;
    CHECK(brisk_safetensors_write(path, bad, 2, NULL, 0, &err) == BRISK_ERR_INVALID);
    bad[1].data = v;
    bad[1].name = "bad\xff";
    CHECK(brisk_safetensors_write(path, bad, 2, NULL, 0, &err) == BRISK_ERR_INVALID);
    brisk_st_meta dup[] = {{"k", "1"}, {"k", "2"}};
    CHECK(brisk_safetensors_write(path, bad, 1, dup, 2, &err) == BRISK_ERR_INVALID);
    list_dir(names, sizeof names);
    CHECK_MSG(names, "");

    /* A directory that does not exist: named, and not made. */
    snprintf(path, sizeof path, "%s/missing/w.safetensors", dir);
    CHECK(brisk_safetensors_write(path, bad, 1, NULL, 0, &err) == BRISK_ERR_IO);
    snprintf(want, sizeof want, "%s: cannot create it: the folder %s/missing does not exist", path, dir);
    CHECK_MSG(err.msg, want);

    /* A write that runs out of room (a file size limit, as on a full disk) keeps the
     * previous file intact and removes the temporary one. */
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    REQUIRE_OK(brisk_safetensors_write(path, bad, 1, NULL, 0, &err), errp(&err));
    static float big[16384];
    brisk_st_entry large = {"big", BRISK_F32, brisk_shape1(16384), big};
    struct rlimit old, lim;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    brisk_status s = brisk_safetensors_write(path, &large, 1, NULL, 0, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    CHECK(s == BRISK_ERR_IO);
    snprintf(want, sizeof want, "%s: write failed: File too large", path);
    CHECK_MSG(err.msg, want);
    list_dir(names, sizeof names);
    CHECK_MSG(names, "w.safetensors");
    brisk_safetensors *st;
    REQUIRE_OK(brisk_safetensors_open(path, &st, &err), errp(&err));
    CHECK(brisk_safetensors_count(st) == 1 && brisk_safetensors_find(st, "a") != NULL);
    brisk_safetensors_free(st);

    /* Reading: a missing file and a directory. */
    CHECK(brisk_safetensors_open(T_ABSENT ".safetensors", &st, &err) == BRISK_ERR_IO);
    CHECK_MSG(err.msg, T_ABSENT ".safetensors: cannot open: No such file or directory; check the path (a relative one starts from the current directory; in a config, from the directory the command runs in)");
    CHECK(brisk_safetensors_open(dir, &st, &err) == BRISK_ERR_IO);
    clean_dir();
}

static void cleanup(void) {
    if (dir[0]) { clean_dir(); rmdir(dir); }
}

static void test_cleanup(void) { cleanup(); CHECK(access(dir, F_OK) != 0); }

TEST_MAIN(T(test_round_trip), T(test_reference_bytes), T(test_malformed), T(test_write_errors), T(test_cleanup))
