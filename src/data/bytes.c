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

/* mkdir -p (make 1), or only look (make 0): 0 when every folder of `dir` is there (made), or
 * -1 with errno and the first that is not in `failed`. An existing folder is only looked at
 * (stat first), so one this process may not write into (a parent of the output's) is no
 * error; an existing file in the way is ENOTDIR. */
static int walk_dirs(const char *dir, int make, char *failed, size_t cap) {
    char buf[4096];
    if ((size_t)snprintf(buf, sizeof buf, "%s", dir) >= sizeof buf) {
        snprintf(failed, cap, "%s", dir);
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!buf[0]) return 0;
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        struct stat st;
        int bad = stat(buf, &st) == 0 ? (S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1))
                  : make             ? mkdir(buf, 0777) != 0 && errno != EEXIST
                                     : (errno = ENOENT, -1);
        if (bad) {
            int e = errno;
            snprintf(failed, cap, "%s", buf);
            errno = e;
            return -1;
        }
        if (!c) return 0;
        *p = c;
    }
}

/* Why folder `failed` on the way to `dir` is not there (errno): a file in its place, missing,
 * or errno's words. */
static void why_not(const char *dir, const char *failed, char *why, size_t cap) {
    int e = errno;
    if (e == ENOTDIR) snprintf(why, cap, "%s exists and is not a folder", failed);
    else if (e == ENOENT) snprintf(why, cap, "%s does not exist", failed);
    else if (strcmp(dir, failed) == 0) snprintf(why, cap, "%s", strerror(e));
    else snprintf(why, cap, "%s: %s", failed, strerror(e));
}

/* The folder of `path` into dir ("" for a bare name or a file in /): 0, or -1 when too long. */
static int folder_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    size_t n = slash && slash != path ? (size_t)(slash - path) : 0;
    if (n >= cap) return -1;
    memcpy(dir, path, n);
    dir[n] = 0;
    return 0;
}

brisk_status brisk_mkdirs(const char *dir, brisk_error *err) {
    char failed[4096], why[4200];
    if (walk_dirs(dir, 1, failed, sizeof failed) == 0) return BRISK_OK;
    why_not(dir, failed, why, sizeof why);
    return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create the folder: %s", dir, why);
}

brisk_status brisk_make_parent_folders(const char *path, brisk_error *err) {
    char dir[4096], failed[4096], why[4200];
    if (!path || strcmp(path, "-") == 0) return BRISK_OK;
    if (folder_of(path, dir, sizeof dir)) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: path too long", path);
    if (walk_dirs(dir, 1, failed, sizeof failed) == 0) return BRISK_OK;
    why_not(dir, failed, why, sizeof why);
    return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create its folder %s: %s", path, dir, why);
}

brisk_status brisk_out_folder_check(const char *name, const char *target, brisk_error *err) {
    char dir[4096], failed[4096];
    if (folder_of(target, dir, sizeof dir)) return brisk_errorf(err, BRISK_ERR_INVALID, "%s: path too long", name);
    if (walk_dirs(dir, 0, failed, sizeof failed) == 0) return BRISK_OK;
    if (errno == ENOTDIR) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create it: %s is not a folder", name, failed);
    if (errno == ENOENT)
        return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create it: the folder %s does not exist", name, dir);
    return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create it: the folder %s: %s", name, failed, strerror(errno));
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
    brisk_status there = brisk_out_folder_check(path, o->target, err);
    if (there) return there;
    o->fp = fopen(o->tmp, "wb");
    /* named by the path the caller gave: the temporary file is this writer's own business */
    if (!o->fp) return brisk_errorf(err, BRISK_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
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
