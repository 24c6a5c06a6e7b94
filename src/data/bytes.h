/* data-internal: a bounds-checked little-endian byte reader, CRC-32, and whole-file
 * load/store shared by the NPY, NPZ and CSV readers and writers. Not public API. */
#ifndef BRISK_DATA_BYTES_H
#define BRISK_DATA_BYTES_H

#include "brisk/core.h"

#include <stdio.h>

/* A cursor over untrusted bytes. A read past the end returns zeros and sets `bad`, so a
 * parser reads a whole record and checks once, and can never step outside [p, p+n). */
typedef struct brisk_rd {
    const uint8_t *p;
    size_t n, pos;
    int bad;
} brisk_rd;

static inline brisk_rd brisk_rd_make(const void *p, size_t n) {
    brisk_rd r = {(const uint8_t *)p, n, 0, 0};
    return r;
}
/* 1 when k more bytes exist at the cursor. */
static inline int brisk_rd_has(const brisk_rd *r, size_t k) { return !r->bad && k <= r->n - r->pos; }
/* Moves the cursor to an absolute offset; out of range sets bad. */
static inline void brisk_rd_seek(brisk_rd *r, uint64_t off) {
    if (off > r->n) r->bad = 1;
    else r->pos = (size_t)off;
}
static inline void brisk_rd_skip(brisk_rd *r, uint64_t k) {
    if (r->bad || k > r->n - r->pos) r->bad = 1;
    else r->pos += (size_t)k;
}
/* Returns a pointer to the next k bytes and advances, or NULL (and sets bad). */
static inline const uint8_t *brisk_rd_bytes(brisk_rd *r, uint64_t k) {
    if (r->bad || k > r->n - r->pos) { r->bad = 1; return NULL; }
    const uint8_t *q = r->p + r->pos;
    r->pos += (size_t)k;
    return q;
}
static inline uint64_t brisk_rd_le(brisk_rd *r, int k) {
    const uint8_t *q = brisk_rd_bytes(r, (uint64_t)k);
    uint64_t v = 0;
    if (q)
        for (int i = k - 1; i >= 0; i--) v = (v << 8) | q[i];
    return v;
}
static inline uint16_t brisk_rd_u16(brisk_rd *r) { return (uint16_t)brisk_rd_le(r, 2); }
static inline uint32_t brisk_rd_u32(brisk_rd *r) { return (uint32_t)brisk_rd_le(r, 4); }
static inline uint64_t brisk_rd_u64(brisk_rd *r) { return brisk_rd_le(r, 8); }

/* Little-endian stores for writers. */
static inline void brisk_put_le(uint8_t *p, uint64_t v, int k) {
    for (int i = 0; i < k; i++) { p[i] = (uint8_t)v; v >>= 8; }
}

static inline int brisk_host_is_le(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* CRC-32 (IEEE 802.3, as zip uses), continuing from `crc` (start with 0). */
uint32_t brisk_crc32(uint32_t crc, const void *p, size_t n);

/* A file being read. Files are read, never mapped: another program cutting a mapped file
 * (np.savez over it, truncate) kills the process with SIGBUS, and a library must not take
 * the host's signals. Size and modification time at open are kept, so that a file cut,
 * grown or rewritten while brisk reads it is an error, never a crash or a mix of two
 * versions. */
typedef struct brisk_rfile {
    int fd;
    const char *path;
    uint64_t len;             /* the size at open: every read lies within it */
    int64_t mtime_s, mtime_ns;
} brisk_rfile;
brisk_status brisk_rfile_open(brisk_rfile *f, const char *path, brisk_error *err);
/* Exactly n bytes at off into dst. A range past len is a format error (a truncated file:
 * callers bound their offsets by len first); a short read is the file changing. */
brisk_status brisk_rfile_read(brisk_rfile *f, uint64_t off, void *dst, size_t n, brisk_error *err);
/* Closes f and returns st, unless the file changed since it was opened: then
 * "PATH: changed while being read (size N bytes at open, M now)", BRISK_ERR_IO, in place
 * of whatever st said (a parse error in bytes of two versions means nothing). */
brisk_status brisk_rfile_close(brisk_rfile *f, brisk_status st, brisk_error *err);

/* Bytes to parse: a buffer, or a file read piece by piece, so that one parser serves
 * both and a file's arrays are read straight into their own memory. */
typedef struct brisk_src {
    const uint8_t *mem;       /* NULL: file */
    brisk_rfile *file;
    uint64_t len;
    const char *name;
} brisk_src;
static inline brisk_src brisk_src_mem(const void *p, size_t n, const char *name) {
    brisk_src s = {(const uint8_t *)p, NULL, n, name};
    return s;
}
static inline brisk_src brisk_src_file(brisk_rfile *f) {
    brisk_src s = {NULL, f, f->len, f->path};
    return s;
}
/* As brisk_rfile_read, for either kind. */
brisk_status brisk_src_read(const brisk_src *s, uint64_t off, void *dst, size_t n, brisk_error *err);

/* A whole file in memory (malloc'd), read as brisk_rfile says. */
typedef struct brisk_file {
    const uint8_t *data;
    size_t len;
    void *mem;   /* what to free */
} brisk_file;
brisk_status brisk_file_load(const char *path, brisk_file *f, brisk_error *err);
void brisk_file_release(brisk_file *f);

/* An output file. A regular file (or a name not yet taken) is written to
 * "<target>.tmp.<pid>", fsynced and renamed into place, so a reader never sees half a file;
 * a symlink is followed and its target replaced (the link stays). A character device
 * (/dev/null) or a FIFO is written in place, never replaced; "-" is standard output.
 * Anything else (a directory, a block device, a socket) is refused. Write errors are
 * sticky and reported by commit. */
typedef struct brisk_out {
    FILE *fp;
    const char *path;   /* as the caller named it, for messages */
    char target[4096];  /* the file replaced: path with its symlinks resolved */
    char tmp[4200];     /* "" when writing in place */
    int in_place, is_stdout;
    int failed;
    int err_no;
} brisk_out;
/* Resolves the symlinks of `path` (also a dangling one: the file it names is created) into
 * out; the last component need not exist. Returns 0, or -1 with errno (ELOOP, ENAMETOOLONG). */
int brisk_path_resolve(const char *path, char *out, size_t cap);
brisk_status brisk_out_open(brisk_out *o, const char *path, brisk_error *err);
void brisk_out_write(brisk_out *o, const void *p, size_t n);
/* Writes n bytes of p little-endian element by element (size 1, 2, 4 or 8). */
void brisk_out_write_le(brisk_out *o, const void *p, size_t count, int size);
brisk_status brisk_out_commit(brisk_out *o, brisk_error *err);
/* 1 when writing `output` would replace the regular file `input`: the same file by any name
 * (a symlink, a hard link, ./x). "-", devices and FIFOs are written in place, never replaced. */
int brisk_out_replaces(const char *output, const char *input);
void brisk_out_abort(brisk_out *o);

/* Creates folder `dir` and the folders above it that are missing, as mkdir -p does; an error
 * names the first that cannot be made (a run directory: rotation.c). */
brisk_status brisk_mkdirs(const char *dir, brisk_error *err);
/* The folder that is to hold output `target` is there: else an error naming `name` (the path
 * as the caller gave it) and that folder, "x/y.npy: cannot create it: the folder x does not
 * exist" (or "... a exists and is not a folder"). The writers check it before they make their
 * temporary file, so that no message names that file; they never make folders themselves (the
 * brisk command does, brisk_make_parent_folders). */
brisk_status brisk_out_folder_check(const char *name, const char *target, brisk_error *err);

/* Makes a rename into `path`'s directory durable by fsyncing the directory. Filesystems
 * that cannot sync a directory say EINVAL; there is nothing more to do on them. */
brisk_status brisk_fsync_parent_dir(const char *path, brisk_error *err);

#endif
