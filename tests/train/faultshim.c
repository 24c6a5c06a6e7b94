/* An LD_PRELOAD library that injects faults into the file operations a brisk process
 * makes on checkpoint files, to prove that a crash or a full disk at any of them loses
 * nothing but the checkpoint being written.
 *
 * Counted operations, in program order: open/openat of a path containing ".safetensors"
 * or of a directory; fwrite, fflush, fclose on such a file; fsync, fdatasync, close of
 * such a descriptor; rename, link and unlink of such a path. The environment says what
 * happens at the N-th one:
 *
 *   BRISK_SHIM_AT=N        1-based; unset or 0: count only
 *   BRISK_SHIM_FAULT=kill  SIGKILL before the operation (an fwrite first writes half of
 *                          its bytes and flushes them, leaving a torn file behind)
 *                 =enospc  the operation fails with ENOSPC (an fwrite after writing half)
 *                 =eio     the same with EIO
 *   BRISK_SHIM_COUNT=FILE  at exit, the number of counted operations is written to FILE
 *
 * The process is never told: brisk sees a kernel that killed it or a disk that filled.
 * Built without sanitizers (it is preloaded into sanitized binaries too; they need
 * ASAN_OPTIONS=verify_asan_link_order=0 for that). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FD 4096

static atomic_long counter;
static unsigned char tracked[MAX_FD];

static int interesting(const char *path, int flags) {
    return path && (strstr(path, ".safetensors") || (flags & O_DIRECTORY));
}
static int is_tracked(int fd) { return fd >= 0 && fd < MAX_FD && tracked[fd]; }
static void track(int fd, int on) {
    if (fd >= 0 && fd < MAX_FD) tracked[fd] = (unsigned char)on;
}

/* 0: go ahead; else the errno to fail with. Does not return when the fault is a kill. */
static int fault_here(void) {
    long n = atomic_fetch_add(&counter, 1) + 1;
    const char *at = getenv("BRISK_SHIM_AT");
    if (!at || atol(at) != n) return 0;
    const char *kind = getenv("BRISK_SHIM_FAULT");
    if (!kind || strcmp(kind, "kill") == 0) {
        kill(getpid(), SIGKILL);
        for (;;) pause();
    }
    return strcmp(kind, "eio") == 0 ? EIO : ENOSPC;
}
/* For fwrite: whether this call is the one (without counting it twice). */
static int fault_is_next(void) {
    const char *at = getenv("BRISK_SHIM_AT");
    return at && atol(at) == atomic_load(&counter) + 1;
}

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

__attribute__((destructor)) static void write_count(void) {
    const char *path = getenv("BRISK_SHIM_COUNT");
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "%ld\n", atomic_load(&counter));
    fclose(f);
}

static int do_open(int (*real)(const char *, int, ...), const char *path, int flags, mode_t mode) {
    if (interesting(path, flags)) {
        int e = fault_here();
        if (e) { errno = e; return -1; }
    }
    int fd = real(path, flags, mode);
    if (fd >= 0) track(fd, interesting(path, flags));
    return fd;
}

int open(const char *path, int flags, ...) {
    REAL(open);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return do_open(real_open, path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    REAL(open64);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    return do_open(real_open64, path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    REAL(openat);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    if (interesting(path, flags)) {
        int e = fault_here();
        if (e) { errno = e; return -1; }
    }
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0) track(fd, interesting(path, flags));
    return fd;
}

size_t fwrite(const void *p, size_t size, size_t n, FILE *f) {
    REAL(fwrite);
    REAL(fflush);
    if (!is_tracked(fileno(f))) return real_fwrite(p, size, n, f);
    if (fault_is_next()) {
        /* Half of the bytes reach the file first: a torn write, as a crash or a full
         * disk in the middle of it would leave. */
        size_t done = real_fwrite(p, size, n / 2, f);
        real_fflush(f);
        int e = fault_here();
        errno = e;
        return done;
    }
    fault_here();
    return real_fwrite(p, size, n, f);
}

int fflush(FILE *f) {
    REAL(fflush);
    if (f && is_tracked(fileno(f))) {
        int e = fault_here();
        if (e) { errno = e; return EOF; }
    }
    return real_fflush(f);
}

int fclose(FILE *f) {
    REAL(fclose);
    int fd = f ? fileno(f) : -1;
    if (!is_tracked(fd)) return real_fclose(f);
    int e = fault_here();
    track(fd, 0);
    int r = real_fclose(f);
    if (e) { errno = e; return EOF; } /* closed, but the deferred write failed */
    return r;
}

int close(int fd) {
    REAL(close);
    if (!is_tracked(fd)) return real_close(fd);
    int e = fault_here();
    track(fd, 0);
    int r = real_close(fd);
    if (e) { errno = e; return -1; }
    return r;
}

int fsync(int fd) {
    REAL(fsync);
    if (is_tracked(fd)) {
        int e = fault_here();
        if (e) { errno = e; return -1; }
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    if (is_tracked(fd)) {
        int e = fault_here();
        if (e) { errno = e; return -1; }
    }
    return real_fdatasync(fd);
}

int rename(const char *a, const char *b) {
    REAL(rename);
    if (interesting(a, 0) || interesting(b, 0)) {
        int e = fault_here();
        if (e) { errno = e; return -1; }
    }
    return real_rename(a, b);
}

int link(const char *a, const char *b) {
    REAL(link);
    if (interesting(a, 0) || interesting(b, 0)) {
        int e = fault_here();
        if (e) { errno = e; return -1; }
    }
    return real_link(a, b);
}

int unlink(const char *path) {
    REAL(unlink);
    if (interesting(path, 0)) {
        int e = fault_here();
        if (e) { errno = e == ENOSPC ? EIO : e; return -1; }
    }
    return real_unlink(path);
}
