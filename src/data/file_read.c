/* data-internal: reading input files (bytes.h, brisk_rfile): pread into the reader's own
 * memory, with a check that the file stayed as it was at open. A rewrite by another
 * program that keeps the size shows in the modification time; one within the same clock
 * tick as the file's previous write (a few ms) cannot be told apart by stat. */
#include "data/bytes.h"
#include "core/error_hint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

brisk_status brisk_rfile_open(brisk_rfile *f, const char *path, brisk_error *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = path;
    /* Non-blocking, so that a FIFO (or a device) is refused below instead of waiting in open
     * for a writer that never comes; a regular file reads the same either way. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open: %s%s", path, strerror(errno), brisk_open_hint(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: not a regular file (%s); brisk reads data from regular files",
                            path, S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder"
                                  : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "a socket or other special file");
    }
    f->fd = fd;
    f->len = (uint64_t)st.st_size;
    f->mtime_s = (int64_t)st.st_mtim.tv_sec;
    f->mtime_ns = (int64_t)st.st_mtim.tv_nsec;
    return BRISK_OK;
}

/* The "changed" error when the file is no longer what it was at open, else BRISK_OK. */
static brisk_status changed(const brisk_rfile *f, brisk_error *err) {
    struct stat st;
    if (fstat(f->fd, &st) != 0) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot stat: %s", f->path, strerror(errno));
    if ((uint64_t)st.st_size == f->len && (int64_t)st.st_mtim.tv_sec == f->mtime_s &&
        (int64_t)st.st_mtim.tv_nsec == f->mtime_ns)
        return BRISK_OK;
    return brisk_errorf(err, BRISK_ERR_IO, "%s: changed while being read (size %llu bytes at open, %llu now%s); another "
                        "program cut or rewrote it: read it again once it is complete", f->path,
                        (unsigned long long)f->len, (unsigned long long)st.st_size,
                        (uint64_t)st.st_size == f->len ? ", modified since" : "");
}

brisk_status brisk_rfile_read(brisk_rfile *f, uint64_t off, void *dst, size_t n, brisk_error *err) {
    if (off > f->len || n > f->len - off)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: %zu bytes at offset %llu run past the end of the "
                            "%llu-byte file", f->path, n, (unsigned long long)off, (unsigned long long)f->len);
    uint8_t *p = (uint8_t *)dst;
    while (n) {
        /* Linux moves at most 2 GiB per call */
        ssize_t k = pread(f->fd, p, n < ((size_t)1 << 30) ? n : (size_t)1 << 30, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return brisk_errorf(err, BRISK_ERR_IO, "%s: read failed at byte %llu: %s", f->path,
                                       (unsigned long long)off, strerror(errno));
        if (k == 0) { /* the end came early: the file was cut since open */
            brisk_status st = changed(f, err);
            return st ? st : brisk_errorf(err, BRISK_ERR_IO, "%s: read ended at byte %llu of %llu", f->path,
                                          (unsigned long long)off, (unsigned long long)f->len);
        }
        p += k;
        off += (uint64_t)k;
        n -= (size_t)k;
    }
    return BRISK_OK;
}

brisk_status brisk_rfile_close(brisk_rfile *f, brisk_status st, brisk_error *err) {
    if (f->fd < 0) return st;
    brisk_error e2 = {0};
    brisk_status c = changed(f, &e2);
    if (c) {
        if (err) *err = e2;
        st = c;
    }
    close(f->fd);
    f->fd = -1;
    return st;
}

brisk_status brisk_src_read(const brisk_src *s, uint64_t off, void *dst, size_t n, brisk_error *err) {
    if (s->file) return brisk_rfile_read(s->file, off, dst, n, err);
    if (off > s->len || n > s->len - off)
        return brisk_errorf(err, BRISK_ERR_FORMAT, "%s: truncated: %zu bytes at offset %llu run past the end of the "
                            "%llu bytes", s->name, n, (unsigned long long)off, (unsigned long long)s->len);
    if (n) memcpy(dst, s->mem + off, n);
    return BRISK_OK;
}

brisk_status brisk_file_load(const char *path, brisk_file *f, brisk_error *err) {
    memset(f, 0, sizeof *f);
    brisk_rfile r;
    brisk_status st = brisk_rfile_open(&r, path, err);
    if (st) return st;
    if (r.len > SIZE_MAX - 1) return brisk_rfile_close(&r, brisk_errorf(err, BRISK_ERR_NOMEM, "%s: too large", path), err);
    uint8_t *buf = malloc((size_t)r.len + 1);
    if (!buf)
        st = brisk_errorf(err, BRISK_ERR_NOMEM, "%s: cannot allocate %llu bytes to read it", path, (unsigned long long)r.len);
    if (!st) st = brisk_rfile_read(&r, 0, buf, (size_t)r.len, err);
    if ((st = brisk_rfile_close(&r, st, err))) {
        free(buf);
        return st;
    }
    f->data = buf;
    f->len = (size_t)r.len;
    f->mem = buf;
    return BRISK_OK;
}

void brisk_file_release(brisk_file *f) {
    free(f->mem);
    memset(f, 0, sizeof *f);
}
