/* safetensors writer: validates the entries, lays them out contiguously (the
 * reference reader insists), and writes PATH.tmp.<pid> -> fsync -> rename -> fsync
 * of the directory, so PATH always holds a whole file, old or new. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/safetensors.h"
#include "data/bytes.h"
#include "data/safetensors_internal.h"

/* ---------------------------------------------------------------- header text */

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_put(strbuf *b, const char *p, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) { b->oom = 1; return; }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal; names are validated UTF-8, so only quotes, backslashes and
 * control bytes need escaping. */
static void sb_json_string(strbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; sb_put(b, e, 2); }
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_put(b, p, 1);
    }
    sb_put(b, "\"", 1);
}

/* ---------------------------------------------------------------- validation */

typedef struct { size_t idx; const char *name; size_t esize; } order_ref;

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const order_ref *)a)->name, ((const order_ref *)b)->name);
}
/* Larger elements first so every tensor starts aligned to its element size; the
 * caller's order otherwise (the index makes qsort stable). */
static int cmp_by_layout(const void *a, const void *b) {
    const order_ref *x = a, *y = b;
    if (x->esize != y->esize) return x->esize > y->esize ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static brisk_status check_text(const char *path, const char *what, const char *s, brisk_error *err) {
    char p[96];
    if (!s) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s is NULL", path, what);
    if (brisk_utf8_bad(s, strlen(s)) != (size_t)-1)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: %s '%s' is not valid UTF-8", path, what,
                            brisk_st_printable(s, p, sizeof p));
    return BRISK_OK;
}

static brisk_status check_entries(const char *path, const brisk_st_entry *e, size_t n, const brisk_st_meta *meta,
                                  size_t n_meta, order_ref *refs, uint64_t *sizes, brisk_error *err) {
    char nm[96];
    for (size_t i = 0; i < n; i++) {
        brisk_status s = check_text(path, "tensor name", e[i].name, err);
        if (s) return s;
        brisk_st_printable(e[i].name, nm, sizeof nm);
        if (!e[i].name[0] || strcmp(e[i].name, "__metadata__") == 0)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: tensor name '%s' is reserved or empty", path, nm);
        if ((unsigned)e[i].dtype >= BRISK_DTYPE_COUNT)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: tensor '%s': invalid dtype %d", path, nm, (int)e[i].dtype);
        if (e[i].shape.ndim < 0 || e[i].shape.ndim > BRISK_MAX_DIMS)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: tensor '%s': invalid rank %d", path, nm, e[i].shape.ndim);
        uint64_t bytes = brisk_dtype_size(e[i].dtype);
        for (int d = 0; d < e[i].shape.ndim; d++) {
            if (e[i].shape.d[d] < 0)
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: tensor '%s': negative dimension", path, nm);
            if (__builtin_mul_overflow(bytes, (uint64_t)e[i].shape.d[d], &bytes) || bytes > ((uint64_t)1 << 53))
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: tensor '%s': too large", path, nm);
        }
        if (bytes && !e[i].data)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: tensor '%s': no data", path, nm);
        sizes[i] = bytes;
        refs[i] = (order_ref){i, e[i].name, brisk_dtype_size(e[i].dtype)};
    }
    qsort(refs, n, sizeof *refs, cmp_by_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(refs[i - 1].name, refs[i].name) == 0)
            return brisk_errorf(err, BRISK_ERR_INVALID, "%s: duplicate tensor name '%s'", path,
                                brisk_st_printable(refs[i].name, nm, sizeof nm));
    for (size_t i = 0; i < n_meta; i++) {
        brisk_status s = check_text(path, "metadata key", meta[i].key, err);
        if (!s) s = check_text(path, "metadata value", meta[i].value, err);
        if (s) return s;
        for (size_t k = 0; k < i; k++)
            if (strcmp(meta[k].key, meta[i].key) == 0)
                return brisk_errorf(err, BRISK_ERR_INVALID, "%s: duplicate metadata key '%s'", path,
                                    brisk_st_printable(meta[i].key, nm, sizeof nm));
    }
    qsort(refs, n, sizeof *refs, cmp_by_layout);
    return BRISK_OK;
}

/* ---------------------------------------------------------------- the file */

static brisk_status io_fail(const char *path, const char *what, int e, brisk_error *err) {
    return brisk_errorf(err, BRISK_ERR_IO, "%s: %s: %s", path, what, strerror(e));
}

static brisk_status write_file(const char *path, const char *tmp, const strbuf *hdr, const brisk_st_entry *e,
                               const order_ref *order, const uint64_t *sizes, size_t n, brisk_error *err) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        char what[64 + 4096];
        snprintf(what, sizeof what, "cannot create %s", tmp);
        return io_fail(path, what, errno, err);
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int en = errno;
        close(fd);
        unlink(tmp);
        return io_fail(path, "cannot open a stream", en, err);
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr->len >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hdr->s, 1, hdr->len, f) == hdr->len;
    for (size_t i = 0; ok && i < n; i++) {
        size_t k = order[i].idx;
        if (sizes[k]) ok = fwrite(e[k].data, 1, (size_t)sizes[k], f) == (size_t)sizes[k];
    }
    int en = errno;
    const char *what = "write failed";
    if (ok && fflush(f) != 0) { ok = 0; en = errno; }
    if (ok && fsync(fileno(f)) != 0) { ok = 0; en = errno; what = "fsync failed"; }
    if (fclose(f) != 0 && ok) { ok = 0; en = errno; }
    if (!ok) {
        unlink(tmp);
        return io_fail(path, what, en ? en : EIO, err);
    }
    if (rename(tmp, path) != 0) {
        en = errno;
        unlink(tmp);
        return io_fail(path, "cannot rename the temporary file over it", en, err);
    }
    return brisk_fsync_parent_dir(path, err);
}

brisk_status brisk_safetensors_write(const char *path, const brisk_st_entry *entries, size_t n,
                                     const brisk_st_meta *meta, size_t n_meta, brisk_error *err) {
    if (!path || !path[0]) return brisk_errorf(err, BRISK_ERR_INVALID, "safetensors: empty output path");
    if (n && !entries) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no entries", path);
    if (n_meta && !meta) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: no metadata", path);
    order_ref *order = malloc((n ? n : 1) * sizeof *order);
    uint64_t *sizes = malloc((n ? n : 1) * sizeof *sizes);
    strbuf hdr = {0};
    char *tmp = NULL;
    brisk_status s = BRISK_OK;
    if (!order || !sizes) { s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); goto out; }
    if ((s = check_entries(path, entries, n, meta, n_meta, order, sizes, err))) goto out;

    sb_put(&hdr, "{", 1);
    if (n_meta) {
        sb_put(&hdr, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < n_meta; i++) {
            if (i) sb_put(&hdr, ",", 1);
            sb_json_string(&hdr, meta[i].key);
            sb_put(&hdr, ":", 1);
            sb_json_string(&hdr, meta[i].value);
        }
        sb_put(&hdr, "}", 1);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const brisk_st_entry *e = &entries[order[i].idx];
        if (i || n_meta) sb_put(&hdr, ",", 1);
        sb_json_string(&hdr, e->name);
        sb_printf(&hdr, ":{\"dtype\":\"%s\",\"shape\":[", brisk_dtype_st_name(e->dtype));
        for (int d = 0; d < e->shape.ndim; d++) sb_printf(&hdr, d ? ",%lld" : "%lld", (long long)e->shape.d[d]);
        uint64_t end = off + sizes[order[i].idx];
        sb_printf(&hdr, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)end);
        off = end;
    }
    sb_put(&hdr, "}", 1);
    /* Spaces up to a multiple of 8 put the data buffer 8-aligned in the file. */
    while (!hdr.oom && hdr.len % 8) sb_put(&hdr, " ", 1);
    if (hdr.oom) { s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory for the header", path); goto out; }
    if (hdr.len > BRISK_ST_MAX_HEADER) {
        s = brisk_errorf(err, BRISK_ERR_INVALID, "%s: header of %zu bytes exceeds the %u-byte limit", path,
                         hdr.len, BRISK_ST_MAX_HEADER);
        goto out;
    }
    /* Through a symlink its target is replaced (the link stays); anything but a regular
     * file is refused rather than replaced. */
    char target[4096];
    struct stat tst;
    if (brisk_path_resolve(path, target, sizeof target) != 0) {
        s = io_fail(path, "cannot follow its symlinks", errno, err);
        goto out;
    }
    if (stat(target, &tst) == 0 && !S_ISREG(tst.st_mode)) {
        s = brisk_errorf(err, BRISK_ERR_IO, "%s: exists and is not a regular file; refusing to replace it", path);
        goto out;
    }
    size_t tlen = strlen(target) + 32;
    tmp = malloc(tlen);
    if (!tmp) { s = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path); goto out; }
    snprintf(tmp, tlen, "%s.tmp.%ld", target, (long)getpid());
    if (!(s = brisk_out_folder_check(path, target, err))) s = write_file(target, tmp, &hdr, entries, order, sizes, n, err);
out:
    free(order);
    free(sizes);
    free(hdr.s);
    free(tmp);
    return s;
}
