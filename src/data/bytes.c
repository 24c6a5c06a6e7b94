/* data-internal: CRC-32 and atomic file writing (reading is in file_read.c). */
#include "data/bytes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if BRISK_HAVE_ZLIB
#include <zlib.h>
/* zlib's is several times faster than a byte loop, which matters for checkpoints: their
 * whole contents are checksummed on every write and every load. */
uint32_t brisk_crc32(uint32_t crc, const void *p, size_t n) {
    const Bytef *b = (const Bytef *)p;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, k);
        b += k;
        n -= k;
    }
    return crc;
}
#else
uint32_t brisk_crc32(uint32_t crc, const void *p, size_t n) {
    /* The table is rebuilt per call (256 steps) instead of held in a global, which keeps
     * the library free of mutable global state; it is noise next to a member's bytes. */
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    const uint8_t *b = (const uint8_t *)p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
#endif

int brisk_path_resolve(const char *path, char *out, size_t cap) {
    if ((size_t)snprintf(out, cap, "%s", path) >= cap) { errno = ENAMETOOLONG; return -1; }
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return 0; /* absent or not a link: this is it */
        if (hops == 40) { errno = ELOOP; return -1; }
        char link[4096];
        ssize_t k = readlink(out, link, sizeof link - 1);
        if (k < 0) return -1;
        link[k] = 0;
        if (link[0] == '/') {
            if ((size_t)snprintf(out, cap, "%s", link) >= cap) { errno = ENAMETOOLONG; return -1; }
            continue;
        }
        /* relative to the directory holding the link */
        char *slash = strrchr(out, '/');
        size_t dir = slash ? (size_t)(slash - out) + 1 : 0;
        if (dir + (size_t)k >= cap) { errno = ENAMETOOLONG; return -1; }
        memcpy(out + dir, link, (size_t)k + 1);
    }
}

int brisk_out_replaces(const char *output, const char *input) {
    struct stat a, b;
    if (!output || !input || strcmp(output, "-") == 0 || stat(output, &a) != 0 || !S_ISREG(a.st_mode)) return 0;
    return stat(input, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

brisk_status brisk_out_open(brisk_out *o, const char *path, brisk_error *err) {
    memset(o, 0, sizeof *o);
    o->path = path;
    if (!path || !path[0]) return brisk_errorf(err, BRISK_ERR_INVALID, "an empty output path");
    if (strcmp(path, "-") == 0) {
        o->fp = stdout;
        o->in_place = o->is_stdout = 1;
        return BRISK_OK;
    }
    if (brisk_path_resolve(path, o->target, sizeof o->target) != 0)
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot follow its symlinks: %s", path, strerror(errno));
    struct stat st;
    if (stat(o->target, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* A device or a pipe is written to, never replaced: renaming a file over /dev/null
         * would turn it into a regular file for every program on the machine. */
        if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
            return brisk_errorf(err, BRISK_ERR_IO, "%s: exists and is %s; expected a regular file, a character device or a "
                                "FIFO (or - for standard output)", path, S_ISDIR(st.st_mode) ? "a directory" : "a special file");
        int fd = open(o->target, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
        if (!(o->fp = fdopen(fd, "wb"))) {
            int e = errno;
            close(fd);
            return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot open for writing: %s", path, strerror(e));
        }
        o->in_place = 1;
        return BRISK_OK;
    }
    if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", o->target, (long)getpid()) >= sizeof o->tmp)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: path too long", path);
    o->fp = fopen(o->tmp, "wb");
    if (!o->fp) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create: %s", o->tmp, strerror(errno));
    /* A replaced file keeps its permissions. */
    if (stat(o->target, &st) == 0) (void)fchmod(fileno(o->fp), st.st_mode & 07777);
    return BRISK_OK;
}

void brisk_out_write(brisk_out *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    if (fwrite(p, 1, n, o->fp) != n) { o->failed = 1; o->err_no = errno; }
}

void brisk_out_write_le(brisk_out *o, const void *p, size_t count, int size) {
    if (brisk_host_is_le() || size == 1) { brisk_out_write(o, p, count * (size_t)size); return; }
    const uint8_t *b = (const uint8_t *)p;
    uint8_t tmp[4096];
    size_t per = sizeof tmp / (size_t)size;
    for (size_t i = 0; i < count; i += per) {
        size_t k = count - i < per ? count - i : per;
        for (size_t j = 0; j < k; j++)
            for (int c = 0; c < size; c++) tmp[j * size + c] = b[(i + j) * size + (size - 1 - c)];
        brisk_out_write(o, tmp, k * (size_t)size);
    }
}

brisk_status brisk_out_commit(brisk_out *o, brisk_error *err) {
    if (!o->failed && ferror(o->fp)) { o->failed = 1; o->err_no = errno ? errno : EIO; }
    if (!o->failed && fflush(o->fp) != 0) { o->failed = 1; o->err_no = errno; }
    if (!o->failed && !o->in_place && fsync(fileno(o->fp)) != 0 && errno != EINVAL) { o->failed = 1; o->err_no = errno; }
    if (!o->is_stdout && fclose(o->fp) != 0 && !o->failed) { o->failed = 1; o->err_no = errno; }
    o->fp = NULL;
    if (o->failed) {
        if (!o->in_place) remove(o->tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: write failed: %s", o->path, strerror(o->err_no));
    }
    if (o->in_place) return BRISK_OK;
    if (rename(o->tmp, o->target) != 0) {
        int e = errno;
        remove(o->tmp);
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot rename %s into place: %s", o->path, o->tmp,
                            strerror(e));
    }
    return brisk_fsync_parent_dir(o->target, err);
}

void brisk_out_abort(brisk_out *o) {
    if (o->fp && !o->is_stdout) fclose(o->fp);
    o->fp = NULL;
    if (!o->in_place) remove(o->tmp);
}

brisk_status brisk_fsync_parent_dir(const char *path, brisk_error *err) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return brisk_errorf(err, BRISK_ERR_NOMEM, "%s: out of memory", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    brisk_status s = BRISK_OK;
    if (fd < 0)
        s = brisk_errorf(err, BRISK_ERR_IO, "%s: written, but its directory cannot be opened to sync it: %s", path,
                         strerror(errno));
    else {
        if (fsync(fd) != 0 && errno != EINVAL)
            s = brisk_errorf(err, BRISK_ERR_IO, "%s: written, but syncing its directory failed: %s", path, strerror(errno));
        close(fd);
    }
    free(dir);
    return s;
}
