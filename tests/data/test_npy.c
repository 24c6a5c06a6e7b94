/* NPY: round trips, committed fixtures, files NumPy writes at test time for every dtype
 * and byte order, conversion rules, and an error (never a crash) for each malformed case. */
#include "brisk/data.h"
#include "data_test_util.h"
#include "test.h"

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static void test_roundtrip_f32_i32(void) {
    brisk_error err;
    char p[1200];
    brisk_tensor t, back;
    REQUIRE_OK(brisk_tensor_alloc(&t, BRISK_F32, brisk_shape3(2, 3, 4), &err), &err);
    for (int i = 0; i < 24; i++) ((float *)t.data)[i] = (float)i * 0.25f - 3.0f;
    REQUIRE_OK(brisk_npy_write(tpath(p, sizeof p, "rt.npy"), &t, &err), &err);
    REQUIRE_OK(brisk_npy_load(p, BRISK_F32, &back, &err), &err);
    CHECK(brisk_shape_equal(&t.shape, &back.shape));
    CHECK(memcmp(t.data, back.data, 96) == 0);
    brisk_tensor_free(&back);
    /* The encoded image is the file's bytes, with a 64-byte aligned data start. */
    void *buf;
    size_t len, flen;
    REQUIRE_OK(brisk_npy_encode(&t, &buf, &len, &err), &err);
    uint8_t *file = read_file(p, &flen);
    CHECK(file && flen == len && memcmp(buf, file, len) == 0);
    CHECK((len - 96) % 64 == 0);
    free(file);
    free(buf);
    brisk_tensor_free(&t);

    int64_t dims[1] = {5};
    REQUIRE_OK(brisk_tensor_alloc(&t, BRISK_I32, brisk_shape_make(1, dims), &err), &err);
    for (int i = 0; i < 5; i++) ((int32_t *)t.data)[i] = -1000000 * i;
    REQUIRE_OK(brisk_npy_write(tpath(p, sizeof p, "rt_i.npy"), &t, &err), &err);
    REQUIRE_OK(brisk_npy_load(p, BRISK_I32, &back, &err), &err);
    CHECK(back.shape.ndim == 1 && back.shape.d[0] == 5 && memcmp(t.data, back.data, 20) == 0);
    brisk_tensor_free(&back);
    CHECK(brisk_npy_load(p, BRISK_F32, &back, &err) == BRISK_OK && ((float *)back.data)[4] == -4e6f);
    brisk_tensor_free(&back);
    brisk_tensor_free(&t);

    /* Scalars and empty arrays too. */
    REQUIRE_OK(brisk_tensor_alloc(&t, BRISK_F32, brisk_shape_make(0, NULL), &err), &err);
    *(float *)t.data = 42.0f;
    REQUIRE_OK(brisk_npy_write(tpath(p, sizeof p, "scalar.npy"), &t, &err), &err);
    REQUIRE_OK(brisk_npy_load(p, BRISK_F32, &back, &err), &err);
    CHECK(back.shape.ndim == 0 && *(float *)back.data == 42.0f);
    brisk_tensor_free(&back);
    brisk_tensor_free(&t);
    REQUIRE_OK(brisk_tensor_alloc(&t, BRISK_F32, brisk_shape2(0, 3), &err), &err);
    REQUIRE_OK(brisk_npy_write(tpath(p, sizeof p, "empty.npy"), &t, &err), &err);
    REQUIRE_OK(brisk_npy_load(p, BRISK_F32, &back, &err), &err);
    CHECK(back.shape.ndim == 2 && back.shape.d[0] == 0 && back.shape.d[1] == 3);
    brisk_tensor_free(&back);
    brisk_tensor_free(&t);

    if (!have_numpy()) return;
    /* NumPy reads what brisk writes. */
    CHECK(run_python("import numpy as np\n"
                     "a = np.load('rt.npy'); assert a.dtype == np.float32 and a.shape == (2, 3, 4)\n"
                     "assert (a.ravel() == np.arange(24) * 0.25 - 3).all()\n"
                     "b = np.load('rt_i.npy'); assert b.dtype == np.int32 and list(b) == [0, -1000000, -2000000, "
                     "-3000000, -4000000]\n"
                     "assert np.load('scalar.npy').shape == () and np.load('empty.npy').shape == (0, 3)\n") == 0);
}

static void test_fixtures(void) {
    brisk_error err;
    char p[1200];
    brisk_npy_array a;
    brisk_tensor t;
    REQUIRE_OK(brisk_npy_read(fixture(p, sizeof p, "f4_2x3.npy"), &a, &err), &err);
    CHECK(a.dtype.kind == 'f' && a.dtype.size == 4 && a.shape.ndim == 2 && a.shape.d[1] == 3);
    CHECK(((float *)a.data)[5] == 1.5f);
    brisk_npy_free(&a);

    REQUIRE_OK(brisk_npy_read(fixture(p, sizeof p, "i2_be.npy"), &a, &err), &err);
    CHECK(strcmp(a.dtype.descr, ">i2") == 0);
    CHECK(((int16_t *)a.data)[2] == 300 && ((int16_t *)a.data)[3] == -32768);
    REQUIRE_OK(brisk_npy_to_tensor(&a, BRISK_I32, "i2_be", &t, &err), &err);
    CHECK(((int32_t *)t.data)[1] == -2 && ((int32_t *)t.data)[3] == -32768);
    brisk_tensor_free(&t);
    brisk_npy_free(&a);

    REQUIRE_OK(brisk_npy_load(fixture(p, sizeof p, "b1.npy"), BRISK_I32, &t, &err), &err);
    CHECK(((int32_t *)t.data)[0] == 1 && ((int32_t *)t.data)[1] == 0 && ((int32_t *)t.data)[2] == 1);
    brisk_tensor_free(&t);
    REQUIRE_OK(brisk_npy_load(fixture(p, sizeof p, "u1_v2.npy"), BRISK_F32, &t, &err), &err);
    CHECK(((float *)t.data)[2] == 255.0f);
    brisk_tensor_free(&t);
    REQUIRE_OK(brisk_npy_load(fixture(p, sizeof p, "f8_v3.npy"), BRISK_F32, &t, &err), &err);
    CHECK(t.shape.ndim == 3 && t.shape.d[1] == 1 && ((float *)t.data)[3] == 0.75f);
    brisk_tensor_free(&t);
    REQUIRE_OK(brisk_npy_load(fixture(p, sizeof p, "hand_header.npy"), BRISK_I32, &t, &err), &err);
    CHECK(t.shape.ndim == 1 && t.shape.d[0] == 3 && ((int32_t *)t.data)[1] == -8);
    brisk_tensor_free(&t);

    CHECK(brisk_npy_read(fixture(p, sizeof p, "fortran.npy"), &a, &err) == BRISK_ERR_UNSUPPORTED);
    CHECK(has(&err, "fortran.npy: array is in Fortran order; expected C order"));
    CHECK(brisk_npy_read(fixture(p, sizeof p, "no_descr.npy"), &a, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "no_descr.npy: header: expected 'descr' key"));
    CHECK(brisk_npy_read(fixture(p, sizeof p, "missing.npy"), &a, &err) == BRISK_ERR_IO);
    CHECK(has(&err, "missing.npy: cannot open"));
}

/* Every dtype NumPy writes, in both byte orders, read and converted. */
static void test_numpy_all_dtypes(void) {
    if (!have_numpy()) return;
    static const char *descrs[] = {"|b1", "|i1", "|u1", "<i2", ">i2", "<u2", ">u2", "<i4", ">i4", "<u4", ">u4",
                                   "<i8", ">i8", "<u8", ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8"};
    enum { ND = sizeof descrs / sizeof descrs[0] };
    REQUIRE(run_python(
        "import numpy as np\n"
        "for d in ['|b1','|i1','|u1','<i2','>i2','<u2','>u2','<i4','>i4','<u4','>u4','<i8','>i8','<u8','>u8',"
        "'<f2','>f2','<f4','>f4','<f8','>f8']:\n"
        "    k = np.dtype(d).kind\n"
        "    v = [0,1,0,1,1,0] if k == 'b' else [0,1,2,3,100,127] if k in 'iu' else [0,1.5,-2.25,3,100.5,-0.125]\n"
        "    a = np.array(v, dtype=d).reshape(2, 3)\n"
        "    assert a.dtype.str[0] in '<>|' and (a.dtype.str == d or d[0] == '|')\n"
        "    np.save('np_' + d.replace('<','le').replace('>','be').replace('|','na') + '.npy', a)\n"
        "for ver in [(1,0),(2,0),(3,0)]:\n"
        "    with open('ver%d.npy' % ver[0], 'wb') as f:\n"
        "        np.lib.format.write_array(f, np.arange(720, dtype='>f4').reshape(1,2,3,4,5,6), version=ver)\n"
        "np.save('np_fortran.npy', np.asfortranarray(np.ones((3, 2))))\n"
        "np.save('np_i8_big.npy', np.array([5, 2**40], dtype='<i8'))\n"
        "np.save('np_u8_huge.npy', np.array([2**63 + 5], dtype='>u8'))\n"
        "np.save('np_i8_neg.npy', np.array([-2**31, 2**31 - 1, -2**31 - 1], dtype='<i8'))\n"
        "np.save('np_c8.npy', np.zeros(2, dtype='<c8'))\n"
        "np.save('np_str.npy', np.array(['ab', 'c']))\n"
        "np.save('np_struct.npy', np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')]))\n"
        "np.save('np_scalar.npy', np.float64(2.5))\n") == 0);
    brisk_error err;
    char p[1200], fn[64];
    for (int k = 0; k < ND; k++) {
        char d[8];
        snprintf(d, sizeof d, "%s", descrs[k]);
        snprintf(fn, sizeof fn, "np_%s%s.npy", d[0] == '<' ? "le" : d[0] == '>' ? "be" : "na", d + 1);
        brisk_npy_array a;
        REQUIRE_OK(brisk_npy_read(tpath(p, sizeof p, fn), &a, &err), &err);
        CHECKF(a.dtype.kind == d[1] && a.dtype.size == d[2] - '0' && a.shape.ndim == 2 && a.shape.d[1] == 3, "%s", d);
        brisk_tensor f, i;
        REQUIRE_OK(brisk_npy_to_tensor(&a, BRISK_F32, fn, &f, &err), &err);
        const float *v = (const float *)f.data;
        if (d[1] == 'b') CHECKF(v[0] == 0 && v[1] == 1 && v[4] == 1 && v[5] == 0, "%s", d);
        else if (d[1] == 'f') CHECKF(v[1] == 1.5f && v[2] == -2.25f && v[4] == 100.5f && v[5] == -0.125f, "%s", d);
        else CHECKF(v[2] == 2 && v[4] == 100 && v[5] == 127, "%s", d);
        brisk_tensor_free(&f);
        brisk_status st = brisk_npy_to_tensor(&a, BRISK_I32, fn, &i, &err);
        if (d[1] == 'f') CHECKF(st == BRISK_ERR_SHAPE && has(&err, "expected an integer array for i32"), "%s", d);
        else CHECKF(st == BRISK_OK && ((int32_t *)i.data)[5] == (d[1] == 'b' ? 0 : 127), "%s", d);
        if (st == BRISK_OK) brisk_tensor_free(&i);
        brisk_npy_free(&a);
    }
    for (int v = 1; v <= 3; v++) {
        snprintf(fn, sizeof fn, "ver%d.npy", v);
        brisk_tensor t;
        REQUIRE_OK(brisk_npy_load(tpath(p, sizeof p, fn), BRISK_F32, &t, &err), &err);
        CHECKF(t.shape.ndim == 6 && t.shape.d[5] == 6 && ((float *)t.data)[719] == 719.0f, "version %d", v);
        brisk_tensor_free(&t);
    }
    brisk_npy_array a;
    brisk_tensor t;
    CHECK(brisk_npy_read(tpath(p, sizeof p, "np_fortran.npy"), &a, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "Fortran"));
    CHECK(brisk_npy_load(tpath(p, sizeof p, "np_i8_big.npy"), BRISK_I32, &t, &err) == BRISK_ERR_SHAPE);
    CHECK(has(&err, "element 1 (value 1099511627776) of the int64 array does not fit i32"));
    CHECK(brisk_npy_load(tpath(p, sizeof p, "np_u8_huge.npy"), BRISK_I32, &t, &err) == BRISK_ERR_SHAPE);
    CHECK(has(&err, "(value 9223372036854775813)"));
    CHECK(brisk_npy_load(tpath(p, sizeof p, "np_i8_neg.npy"), BRISK_I32, &t, &err) == BRISK_ERR_SHAPE);
    CHECK(has(&err, "element 2 (value -2147483649)"));
    CHECK(brisk_npy_read(tpath(p, sizeof p, "np_c8.npy"), &a, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "'<c8'"));
    CHECK(brisk_npy_read(tpath(p, sizeof p, "np_str.npy"), &a, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "'<U2'"));
    CHECK(brisk_npy_read(tpath(p, sizeof p, "np_struct.npy"), &a, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "structured"));
    REQUIRE_OK(brisk_npy_load(tpath(p, sizeof p, "np_scalar.npy"), BRISK_F32, &t, &err), &err);
    CHECK(t.shape.ndim == 0 && *(float *)t.data == 2.5f);
    brisk_tensor_free(&t);
}

/* A valid image with its header dict replaced by `dict` (data bytes follow). */
static size_t make_npy(uint8_t *buf, int major, const char *dict, size_t data_bytes) {
    size_t dl = strlen(dict), off = major == 1 ? 10 : 12;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    if (major == 1) { buf[8] = (uint8_t)dl; buf[9] = (uint8_t)(dl >> 8); }
    else { buf[8] = (uint8_t)dl; buf[9] = (uint8_t)(dl >> 8); buf[10] = 0; buf[11] = 0; }
    memcpy(buf + off, dict, dl);
    memset(buf + off + dl, 0x3c, data_bytes);
    return off + dl + data_bytes;
}

static void test_malformed(void) {
    brisk_error err;
    brisk_npy_array a;
    uint8_t buf[4096];
    static const struct { const char *dict; size_t data; brisk_status want; const char *msg; } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", 16, BRISK_OK, ""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4096,), }\n", 1000, BRISK_ERR_FORMAT,
         "x.npy: truncated: header says shape [4096] = 4096 float32 values (16384 bytes), file has 1000 bytes of data"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", 20, BRISK_ERR_FORMAT, "size mismatch"},
        {"{'fortran_order': False, 'shape': (4,), }\n", 16, BRISK_ERR_FORMAT, "x.npy: header: expected 'descr' key"},
        {"{'descr': '<f4', 'shape': (4,), }\n", 16, BRISK_ERR_FORMAT, "expected 'fortran_order' key"},
        {"{'descr': '<f4', 'fortran_order': False}\n", 16, BRISK_ERR_FORMAT, "expected 'shape' key"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", 16, BRISK_ERR_FORMAT,
         "repeated key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", 16, BRISK_ERR_FORMAT, "key 'extra'"},
        {"{'descr': <f4, 'fortran_order': False, 'shape': (4,)}", 16, BRISK_ERR_FORMAT, "a quoted dtype string"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,)}", 16, BRISK_ERR_FORMAT, "True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [4]}", 16, BRISK_ERR_FORMAT, "'(' to open the shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, -1)}", 16, BRISK_ERR_FORMAT, "a dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4 4)}", 16, BRISK_ERR_FORMAT, "',' or ')'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)", 16, BRISK_ERR_FORMAT, "',' or '}'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} junk", 16, BRISK_ERR_FORMAT, "only padding"},
        {"'descr': '<f4'", 16, BRISK_ERR_FORMAT, "'{' opening the header dict"},
        {"{'descr': '<f4", 16, BRISK_ERR_FORMAT, "a closing quote"},
        {"{'descr': '<f3', 'fortran_order': False, 'shape': (4,)}", 12, BRISK_ERR_UNSUPPORTED, "unsupported dtype '<f3'"},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1)}", 4, BRISK_ERR_UNSUPPORTED,
         "more than 6 dimensions"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}", 8,
         BRISK_ERR_FORMAT, "truncated"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", 8, BRISK_ERR_FORMAT,
         "too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5)}", 0, BRISK_OK, ""},
    };
    for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t n = make_npy(buf, 1, cases[k].dict, cases[k].data);
        memset(&err, 0, sizeof err);
        brisk_status st = brisk_npy_parse(buf, n, "x.npy", &a, &err);
        CHECKF(st == cases[k].want, "case %u: %s -> %s (%s)", k, cases[k].dict, brisk_status_name(st), err.msg);
        if (st == BRISK_OK) brisk_npy_free(&a);
        else CHECKF(has(&err, cases[k].msg), "case %u", k);
    }
    /* Magic, version and header length. */
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", 16);
    CHECK(brisk_npy_parse("PK\3\4", 4, "x.npy", &a, &err) == BRISK_ERR_FORMAT && has(&err, "x.npy: not a .npy file"));
    CHECK(brisk_npy_parse(buf, 7, "x.npy", &a, &err) == BRISK_ERR_FORMAT && has(&err, "no format version"));
    buf[6] = 4;
    CHECK(brisk_npy_parse(buf, n, "x.npy", &a, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "version 4.0"));
    buf[6] = 1;
    buf[8] = 0xff;
    buf[9] = 0x7f;
    CHECK(brisk_npy_parse(buf, n, "x.npy", &a, &err) == BRISK_ERR_FORMAT && has(&err, "header length says 32767"));
    n = make_npy(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", 16);
    REQUIRE_OK(brisk_npy_parse(buf, n, "x.npy", &a, &err), &err);
    brisk_npy_free(&a);
    buf[11] = 0x80; /* a 2 GiB header length in a small file */
    CHECK(brisk_npy_parse(buf, n, "x.npy", &a, &err) == BRISK_ERR_FORMAT);
    /* Every prefix of a valid file is an error, not a crash. */
    n = make_npy(buf, 1, "{'descr': '>i8', 'fortran_order': False, 'shape': (3, 2), }\n", 48);
    for (size_t cut = 0; cut < n; cut++) {
        CHECKF(brisk_npy_parse(buf, cut, "x.npy", &a, &err) != BRISK_OK, "prefix %zu", cut);
    }
    REQUIRE_OK(brisk_npy_parse(buf, n, "x.npy", &a, &err), &err);
    brisk_npy_free(&a);
    /* Writer refuses what it cannot write. */
    brisk_tensor t = {BRISK_F16, brisk_shape1(2), buf};
    CHECK(brisk_npy_write(T_ABSENT "/x.npy", &t, &err) == BRISK_ERR_UNSUPPORTED);
    t.dtype = BRISK_F32;
    CHECK(brisk_npy_write(T_ABSENT "/x.npy", &t, &err) == BRISK_ERR_IO && has(&err, "cannot create"));
}

TEST_MAIN(T(test_roundtrip_f32_i32), T(test_fixtures), T(test_numpy_all_dtypes), T(test_malformed))
