/* NPZ: brisk's writer against its reader and NumPy, NumPy's savez and savez_compressed
 * (ZIP64 local extents), member lookup, and hostile archives: every prefix, every
 * corrupted byte, bad CRCs, absurd sizes and offsets. */
#include "brisk/data.h"
#include "data/bytes.h"
#include "data_test_util.h"
#include "test.h"

#include <sys/resource.h>
#include <sys/wait.h>

static int has(const brisk_error *e, const char *s) {
    if (strstr(e->msg, s)) return 1;
    fprintf(stderr, "  message was: %s\n  expected it to contain: %s\n", e->msg, s);
    return 0;
}

static uint32_t le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* Writes a two-member archive: w f32 [3, 4] = i/2, lab i32 [3] = {2, 0, 1}. */
static brisk_status write_pair(const char *path, brisk_error *err) {
    brisk_tensor t[2];
    float w[12];
    int32_t lab[3] = {2, 0, 1};
    for (int i = 0; i < 12; i++) w[i] = (float)i / 2;
    t[0] = (brisk_tensor){BRISK_F32, brisk_shape2(3, 4), w};
    t[1] = (brisk_tensor){BRISK_I32, brisk_shape1(3), lab};
    const char *names[2] = {"w", "lab"};
    return brisk_npz_write(path, 2, names, t, err);
}

static void test_roundtrip(void) {
    brisk_error err;
    char p[1200];
    REQUIRE_OK(write_pair(tpath(p, sizeof p, "pair.npz"), &err), &err);
    brisk_npz z;
    REQUIRE_OK(brisk_npz_read(p, &z, &err), &err);
    CHECK(z.count == 2 && strcmp(z.members[0].name, "w") == 0 && strcmp(z.members[1].name, "lab") == 0);
    const brisk_npy_array *w = brisk_npz_find(&z, "w"), *lab = brisk_npz_find(&z, "lab");
    REQUIRE(w && lab && !brisk_npz_find(&z, "nope"));
    CHECK(w->shape.ndim == 2 && w->shape.d[1] == 4 && ((float *)w->data)[11] == 5.5f);
    CHECK(lab->dtype.kind == 'i' && lab->dtype.size == 4 && ((int32_t *)lab->data)[0] == 2);
    brisk_npz_free(&z);

    brisk_npy_array a;
    REQUIRE_OK(brisk_npz_read_one(p, "lab", &a, &err), &err);
    CHECK(a.shape.d[0] == 3 && ((int32_t *)a.data)[2] == 1);
    brisk_npy_free(&a);
    CHECK(brisk_npz_read_one(p, "labels", &a, &err) == BRISK_ERR_INVALID);
    CHECK(has(&err, "pair.npz: no member 'labels' (members: w, lab)"));

    /* Deterministic bytes: the same arrays give the same file. */
    char q[1200];
    REQUIRE_OK(write_pair(tpath(q, sizeof q, "pair2.npz"), &err), &err);
    size_t n1, n2;
    uint8_t *b1 = read_file(p, &n1), *b2 = read_file(q, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);

    /* Empty archive, duplicate names, unwritable dtype. */
    REQUIRE_OK(brisk_npz_write(tpath(p, sizeof p, "empty.npz"), 0, NULL, NULL, &err), &err);
    REQUIRE_OK(brisk_npz_read(p, &z, &err), &err);
    CHECK(z.count == 0);
    brisk_npz_free(&z);
    float x = 1;
    brisk_tensor t[2] = {{BRISK_F32, brisk_shape1(1), &x}, {BRISK_F32, brisk_shape1(1), &x}};
    const char *dup[2] = {"a", "a"};
    CHECK(brisk_npz_write(p, 2, dup, t, &err) == BRISK_ERR_INVALID && has(&err, "member 'a' given twice"));
    t[1].dtype = BRISK_BF16;
    const char *two[2] = {"a", "b"};
    CHECK(brisk_npz_write(p, 2, two, t, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "member 'b'"));

    if (!have_numpy()) return;
    tpath(p, sizeof p, "pair.npz");
    CHECK(run_python("import numpy as np\n"
                     "z = np.load('pair.npz'); assert z.files == ['w', 'lab']\n"
                     "assert z['w'].dtype == np.float32 and (z['w'].ravel() == np.arange(12) / 2).all()\n"
                     "assert z['lab'].dtype == np.int32 and list(z['lab']) == [2, 0, 1]\n"
                     "assert np.load('empty.npz').files == []\n") == 0);
}

static void test_numpy_archives(void) {
    brisk_error err;
    char p[1200];
    brisk_npz z;
    /* Committed fixtures: stored and deflated. */
    const char *fx[2] = {"stored.npz", "compressed.npz"};
    int zlib = 1;
    for (int k = 0; k < 2; k++) {
        brisk_status st = brisk_npz_read(fixture(p, sizeof p, fx[k]), &z, &err);
        if (st && k == 1 && strstr(err.msg, "built without zlib")) {
            printf("SKIP: brisk built without zlib; deflated members give: %s\n", err.msg);
            zlib = 0;
            continue;
        }
        REQUIRE_OK(st, &err);
        const brisk_npy_array *x = brisk_npz_find(&z, "x"), *y = brisk_npz_find(&z, "y");
        REQUIRE(x && y);
        CHECK(x->shape.d[0] == 4 && ((float *)x->data)[11] == 11.0f);
        CHECK(y->dtype.size == 8 && ((int64_t *)y->data)[2] == 2);
        brisk_npz_free(&z);
    }
    if (!have_numpy()) return;
    REQUIRE(run_python(
        "import numpy as np, zipfile\n"
        "rng = np.random.default_rng(5)\n"
        "big = rng.standard_normal((300, 257)).astype('<f4')\n"
        "arrs = dict(big=big, lab=np.arange(300) % 3, half=np.linspace(-1, 1, 9, dtype='>f2'),\n"
        "            flag=np.array([True, False]), scalar=np.float64(7), zeros=np.zeros((2000, 100), '<f8'))\n"
        "np.savez('np_stored.npz', **arrs)\n"
        "np.savez_compressed('np_deflated.npz', **arrs)\n"
        "np.savez('np_positional.npz', np.ones(3), np.zeros(2))\n"
        "with zipfile.ZipFile('np_stored.npz') as f:\n"
        "    assert all(i.compress_type == zipfile.ZIP_STORED for i in f.infolist())\n"
        "big.tofile('big.raw')\n") == 0);
    size_t rawn;
    uint8_t *raw = read_file(tpath(p, sizeof p, "big.raw"), &rawn);
    REQUIRE(raw && rawn == 300 * 257 * 4);
    const char *names[2] = {"np_stored.npz", "np_deflated.npz"};
    for (int k = 0; k < 1 + zlib; k++) {
        REQUIRE_OK(brisk_npz_read(tpath(p, sizeof p, names[k]), &z, &err), &err);
        CHECK(z.count == 6);
        const brisk_npy_array *big = brisk_npz_find(&z, "big"), *lab = brisk_npz_find(&z, "lab"),
                              *half = brisk_npz_find(&z, "half"), *scalar = brisk_npz_find(&z, "scalar"),
                              *zeros = brisk_npz_find(&z, "zeros");
        REQUIRE(big && lab && half && scalar && zeros);
        CHECK(big->shape.d[0] == 300 && big->shape.d[1] == 257 && memcmp(big->data, raw, rawn) == 0);
        CHECK(lab->dtype.size == 8 && ((int64_t *)lab->data)[299] == 2);
        brisk_tensor t;
        REQUIRE_OK(brisk_npy_to_tensor(half, BRISK_F32, "half", &t, &err), &err);
        CHECK(((float *)t.data)[0] == -1.0f && ((float *)t.data)[4] == 0.0f && ((float *)t.data)[8] == 1.0f);
        brisk_tensor_free(&t);
        CHECK(scalar->shape.ndim == 0 && ((double *)scalar->data)[0] == 7.0);
        CHECK(zeros->nbytes == 1600000);
        brisk_npz_free(&z);
        brisk_npy_array a;
        REQUIRE_OK(brisk_npz_read_one(p, "zeros", &a, &err), &err);
        CHECK(a.shape.d[0] == 2000);
        brisk_npy_free(&a);
    }
    free(raw);
    REQUIRE_OK(brisk_npz_read(tpath(p, sizeof p, "np_positional.npz"), &z, &err), &err);
    CHECK(z.count == 2 && brisk_npz_find(&z, "arr_0") && brisk_npz_find(&z, "arr_1"));
    brisk_npz_free(&z);
}

/* Offsets of the first central directory entry and the end record of a brisk archive. */
static void locate(const uint8_t *b, size_t n, size_t *cd, size_t *eocd) {
    *eocd = n - 22;
    *cd = le32(b + *eocd + 16);
}

static void test_hostile(void) {
    brisk_error err;
    char p[1200];
    REQUIRE_OK(write_pair(tpath(p, sizeof p, "h.npz"), &err), &err);
    size_t n;
    uint8_t *good = read_file(p, &n), *b = malloc(n);
    REQUIRE(good && b);
    brisk_npz z;
    /* Every prefix is an error, never a crash or a read outside the buffer. */
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *exact = malloc(cut ? cut : 1); /* exact size, so ASan sees any overread */
        memcpy(exact, good, cut);
        CHECKF(brisk_npz_parse(exact, cut, "h.npz", &z, &err) != BRISK_OK, "prefix %zu", cut);
        free(exact);
    }
    CHECK(brisk_npz_parse(good, 100, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "no end of central directory"));
    /* Every byte corrupted: an error or a (possibly different) valid parse, never a crash. */
    int errors = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(b, good, n);
        b[i] ^= 0xA5;
        if (brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_OK) brisk_npz_free(&z);
        else errors++;
    }
    CHECK(errors > (int)n / 2);

    size_t cd, eocd;
    locate(good, n, &cd, &eocd);
    /* Bad CRC: a flipped data byte in the first member. */
    memcpy(b, good, n);
    b[30 + 5 + 128 + 3] ^= 1;
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "h.npz: member 'w': CRC-32 mismatch"));
    /* Absurd sizes in the central directory. */
    memcpy(b, good, n);
    put32(b + cd + 20, 0xFFFFFFF0u);
    put32(b + cd + 24, 0xFFFFFFF0u);
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "run past the end"));
    memcpy(b, good, n);
    put32(b + cd + 20, 0xFFFFFFFFu); /* saturated, but no ZIP64 extra field */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "ZIP64"));
    memcpy(b, good, n);
    put32(b + cd + 24, 7); /* stored with csize != usize */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "stored member"));
    memcpy(b, good, n);
    put32(b + cd + 42, 0x7FFFFFF0u); /* local header offset outside the file */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "no local header"));
    memcpy(b, good, n);
    b[cd + 10] = 99; /* compression method */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "compression method 99"));
    memcpy(b, good, n);
    b[cd + 8] |= 1; /* encrypted */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_UNSUPPORTED && has(&err, "encrypted"));
    /* The end record: entry count, directory size and offset. */
    memcpy(b, good, n);
    b[eocd + 10] = 0xF0;
    b[eocd + 8] = 0xF0;
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "entries cannot fit"));
    memcpy(b, good, n);
    put32(b + eocd + 16, 0xFFFFFF00u);
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "outside"));
    memcpy(b, good, n);
    put32(b + eocd + 16, 0xFFFFFFFFu); /* ZIP64 demanded but no locator */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "ZIP64 locator"));
    memcpy(b, good, n);
    b[eocd + 4] = 1; /* multi-volume */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_UNSUPPORTED);
    /* A member that is not a .npy: the error names archive and member. */
    memcpy(b, good, n);
    memcpy(b + 30 + 5, "\x93NXMPY", 6);
    put32(b + cd + 16, brisk_crc32(0, b + 35, le32(good + cd + 24))); /* a CRC that matches */
    CHECK(brisk_npz_parse(b, n, "h.npz", &z, &err) == BRISK_ERR_FORMAT && has(&err, "h.npz:w: not a .npy file"));
    free(b);
    free(good);

    /* Deflate lies: a size no deflate stream could reach, and a truncated stream. */
    if (!have_numpy()) return;
    REQUIRE(run_python("import numpy as np\nnp.savez_compressed('d.npz', a=np.zeros(10000, '<f4'))\n") == 0);
    good = read_file(tpath(p, sizeof p, "d.npz"), &n);
    REQUIRE(good);
    b = malloc(n);
    locate(good, n, &cd, &eocd);
    cd = le32(good + eocd + 16);
    memcpy(b, good, n);
    put32(b + cd + 24, 0x7FFFFFF0u);
    brisk_status st = brisk_npz_parse(b, n, "d.npz", &z, &err);
    CHECK(st == BRISK_ERR_FORMAT || st == BRISK_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "impossible for deflate") || strstr(err.msg, "without zlib"));
    memcpy(b, good, n);
    put32(b + cd + 24, 40000 + 64); /* claims more than it inflates to */
    CHECK(brisk_npz_parse(b, n, "d.npz", &z, &err) != BRISK_OK);
    memcpy(b, good, n);
    put32(b + cd + 24, 1000); /* claims less */
    CHECK(brisk_npz_parse(b, n, "d.npz", &z, &err) != BRISK_OK);
    for (size_t i = 0; i < n; i++) {
        memcpy(b, good, n);
        b[i] ^= 0x5A;
        if (brisk_npz_parse(b, n, "d.npz", &z, &err) == BRISK_OK) brisk_npz_free(&z);
    }
    free(b);
    free(good);
}

static void put(uint8_t *p, uint64_t v, int k) { for (int i = 0; i < k; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* Rewrites a brisk archive the way a writer of huge archives would: every central entry's
 * sizes and offset saturated with a ZIP64 extra field, and a ZIP64 end record + locator. */
static size_t zip64ify(const uint8_t *g, size_t n, uint8_t *o) {
    size_t eocd = n - 22, cd = le32(g + eocd + 16), cnt = g[eocd + 10] | g[eocd + 11] << 8, k = cd, at = cd;
    memcpy(o, g, cd);
    for (size_t e = 0; e < cnt; e++) {
        size_t nl = g[k + 28] | g[k + 29] << 8;
        memcpy(o + at, g + k, 46);
        put(o + at + 20, 0xFFFFFFFFu, 4);
        put(o + at + 24, 0xFFFFFFFFu, 4);
        put(o + at + 42, 0xFFFFFFFFu, 4);
        put(o + at + 30, 4 + 24 + 8, 2);
        memcpy(o + at + 46, g + k + 46, nl);
        uint8_t *x = o + at + 46 + nl;
        put(x, 0x5455, 2); /* an unrelated extra field first, to be skipped */
        put(x + 2, 4, 2);
        put(x + 4, 0, 4);
        put(x + 8, 1, 2);
        put(x + 10, 24, 2);
        put(x + 12, le32(g + k + 24), 8);
        put(x + 20, le32(g + k + 20), 8);
        put(x + 28, le32(g + k + 42), 8);
        at += 46 + nl + 36;
        k += 46 + nl;
    }
    size_t cdsize = at - cd, e64 = at;
    put(o + at, 0x06064b50u, 4);
    put(o + at + 4, 44, 8);
    put(o + at + 12, 45, 2);
    put(o + at + 14, 45, 2);
    put(o + at + 16, 0, 8);
    put(o + at + 24, cnt, 8);
    put(o + at + 32, cnt, 8);
    put(o + at + 40, cdsize, 8);
    put(o + at + 48, cd, 8);
    at += 56;
    put(o + at, 0x07064b50u, 4);
    put(o + at + 4, 0, 4);
    put(o + at + 8, e64, 8);
    put(o + at + 16, 1, 4);
    at += 20;
    memset(o + at, 0, 22);
    put(o + at, 0x06054b50u, 4);
    put(o + at + 8, 0xFFFF, 2);
    put(o + at + 10, 0xFFFF, 2);
    put(o + at + 12, 0xFFFFFFFFu, 4);
    put(o + at + 16, 0xFFFFFFFFu, 4);
    return at + 22;
}

static void test_zip64_directory(void) {
    brisk_error err;
    char p[1200];
    REQUIRE_OK(write_pair(tpath(p, sizeof p, "z.npz"), &err), &err);
    size_t n;
    uint8_t *g = read_file(p, &n), *o = malloc(n + 512);
    REQUIRE(g && o);
    size_t m = zip64ify(g, n, o);
    brisk_npz z;
    REQUIRE_OK(brisk_npz_parse(o, m, "z64.npz", &z, &err), &err);
    CHECK(z.count == 2 && brisk_npz_find(&z, "lab") && ((int32_t *)brisk_npz_find(&z, "lab")->data)[0] == 2);
    brisk_npz_free(&z);
    for (size_t cut = 0; cut < m; cut++) CHECKF(brisk_npz_parse(o, cut, "z64.npz", &z, &err) != BRISK_OK, "%zu", cut);
    for (size_t i = 0; i < m; i++) {
        uint8_t *b = malloc(m);
        memcpy(b, o, m);
        b[i] ^= 0xFF;
        if (brisk_npz_parse(b, m, "z64.npz", &z, &err) == BRISK_OK) brisk_npz_free(&z);
        free(b);
    }
    if (have_numpy()) {
        REQUIRE(write_file(tpath(p, sizeof p, "z64.npz"), o, m) == 0);
        CHECK(run_python("import numpy as np\nz = np.load('z64.npz'); assert list(z['lab']) == [2, 0, 1]\n") == 0);
    }
    free(g);
    free(o);
}

/* A deflated member is inflated straight into its array: loading 64 MiB of deflated zeros
 * raises the peak resident size by about 64 MiB, not twice that (measured in a child, where
 * the peak starts fresh). Peeking reads only the header. Duplicate names are refused: NumPy
 * reads the last, brisk used to read the first. */
static long peak_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void test_inflate_in_place(void) {
    brisk_error err;
    char p[1200];
    if (!have_numpy()) return;
    REQUIRE(run_python("import numpy as np, zipfile, warnings\n"
                       "np.savez_compressed('zeros.npz', x=np.zeros((1 << 18, 64), np.float32))\n"
                       "warnings.simplefilter('ignore')\n"
                       "with zipfile.ZipFile('dup.npz', 'w') as z:\n"
                       "    for v in (1, 2):\n"
                       "        b = __import__('io').BytesIO(); np.save(b, np.full(3, v)); z.writestr('x.npy', b.getvalue())\n"
                       "with zipfile.ZipFile('dup2.npz', 'w') as z:\n"
                       "    for n in ('y', 'y.npy'):\n"
                       "        b = __import__('io').BytesIO(); np.save(b, np.zeros(2)); z.writestr(n, b.getvalue())\n") == 0);
    tpath(p, sizeof p, "zeros.npz");
    brisk_npy_array a;
    REQUIRE_OK(brisk_npz_peek(p, "x", &a, &err), &err);
    CHECK(a.data == NULL && a.shape.ndim == 2 && a.shape.d[0] == 1 << 18 && a.nbytes == (size_t)64 << 20);
    int fd[2];
    REQUIRE(pipe(fd) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        long before = peak_kib(), grown = -1;
        brisk_npy_array b;
        if (brisk_npz_read_one(p, "x", &b, &err) == BRISK_OK && b.nbytes == (size_t)64 << 20) {
            volatile uint8_t sum = 0;
            for (size_t i = 0; i < b.nbytes; i += 4096) sum |= ((uint8_t *)b.data)[i];
            grown = sum ? -2 : peak_kib() - before;
        }
        if (write(fd[1], &grown, sizeof grown) != sizeof grown) _exit(1);
        _exit(0);
    }
    long grown = -1;
    close(fd[1]);
    CHECK(read(fd[0], &grown, sizeof grown) == sizeof grown);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    CHECKF(grown > 60 * 1024 && grown < 80 * 1024, "peak grew by %ld KiB loading a 64 MiB deflated member", grown);
    CHECK(brisk_npz_read_one(tpath(p, sizeof p, "dup.npz"), "x", &a, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "dup.npz: member 'x' appears twice"));
    brisk_npz z;
    CHECK(brisk_npz_read(p, &z, &err) == BRISK_ERR_FORMAT && has(&err, "appears twice"));
    CHECK(brisk_npz_read_one(tpath(p, sizeof p, "dup2.npz"), "y", &a, &err) == BRISK_ERR_FORMAT);
    CHECK(has(&err, "member 'y' appears twice"));
}

TEST_MAIN(T(test_roundtrip), T(test_numpy_archives), T(test_hostile), T(test_zip64_directory), T(test_inflate_in_place))
