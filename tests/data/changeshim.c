/* An LD_PRELOAD library that changes a data file while a brisk process reads it, at a
 * chosen point, as another program would (np.savez over it, truncate, a writer still
 * appending) — deterministically, where a real writer would race.
 *
 * Counted operations, in program order, on descriptors opened on a path containing
 * BRISK_CHANGE_FILE: read, pread, mmap, and every fstat but the first (the one that
 * sees the file as it was when opened). Before the N-th one the file is changed:
 *
 *   BRISK_CHANGE_AT=N        1-based; unset or 0: count only
 *   BRISK_CHANGE_HOW=cut     cut to half its size (truncate)
 *                   =rewrite rewritten in place, same size, its second half different
 *                   =grow    4096 bytes appended
 *   BRISK_CHANGE_COUNT=FILE  at exit, the number of counted operations is written there
 *
 * A reader that maps the file dies of SIGBUS after a cut, or reads the new bytes after a
 * rewrite; one that reads must say "changed while being read". Built without sanitizers
 * (sanitized binaries need ASAN_OPTIONS=verify_asan_link_order=0 to preload it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FD 4096

static atomic_long counter;
static atomic_int done;
static char *path_of_fd[MAX_FD];
static unsigned char stat_seen[MAX_FD];

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static int tracked(int fd) { return fd >= 0 && fd < MAX_FD && path_of_fd[fd]; }

static void change(const char *path) {
    REAL(open);
    REAL(pread);
    const char *how = getenv("BRISK_CHANGE_HOW");
    struct stat st;
    if (stat(path, &st) != 0) return;
    if (how && strcmp(how, "grow") == 0) {
        int fd = real_open(path, O_WRONLY | O_APPEND);
        static const char zeros[4096];
        if (fd >= 0) { if (write(fd, zeros, sizeof zeros) < 0) perror("changeshim"); close(fd); }
    } else if (how && strcmp(how, "rewrite") == 0) {
        size_t n = (size_t)st.st_size;
        unsigned char *b = malloc(n ? n : 1);
        int fd = real_open(path, O_RDONLY);
        if (!b || fd < 0 || real_pread(fd, b, n, 0) != (ssize_t)n) { free(b); if (fd >= 0) close(fd); return; }
        close(fd);
        for (size_t i = n / 2; i < n; i++) b[i] ^= 0xFF;
        fd = real_open(path, O_WRONLY | O_TRUNC);
        if (fd >= 0) { if (write(fd, b, n) != (ssize_t)n) perror("changeshim"); close(fd); }
        free(b);
    } else if (truncate(path, st.st_size / 2) != 0) {
        perror("changeshim");
    }
}

static void counted(int fd) {
    if (!tracked(fd)) return;
    long n = atomic_fetch_add(&counter, 1) + 1;
    const char *at = getenv("BRISK_CHANGE_AT");
    if (at && atol(at) == n && !atomic_exchange(&done, 1)) change(path_of_fd[fd]);
}

__attribute__((destructor)) static void write_count(void) {
    const char *path = getenv("BRISK_CHANGE_COUNT");
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "%ld\n", atomic_load(&counter));
    fclose(f);
}

static int opened(int fd, const char *path) {
    const char *want = getenv("BRISK_CHANGE_FILE");
    if (fd >= 0 && fd < MAX_FD) {
        free(path_of_fd[fd]);
        path_of_fd[fd] = want && *want && path && strstr(path, want) ? strdup(path) : NULL;
        stat_seen[fd] = 0;
    }
    return fd;
}

static mode_t mode_arg(int flags, va_list ap) { return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0; }

/* open, open64, openat, openat64: the same wrapper around each */
#define WRAP_OPEN(name, params, args)                                                                                  \
    int name params {                                                                                                  \
        REAL(name);                                                                                                    \
        va_list ap;                                                                                                    \
        va_start(ap, flags);                                                                                           \
        mode_t m = mode_arg(flags, ap);                                                                                \
        va_end(ap);                                                                                                    \
        return opened(real_##name args, path);                                                                         \
    }
WRAP_OPEN(open, (const char *path, int flags, ...), (path, flags, m))
WRAP_OPEN(open64, (const char *path, int flags, ...), (path, flags, m))
WRAP_OPEN(openat, (int dir, const char *path, int flags, ...), (dir, path, flags, m))
WRAP_OPEN(openat64, (int dir, const char *path, int flags, ...), (dir, path, flags, m))

int close(int fd) {
    REAL(close);
    if (fd >= 0 && fd < MAX_FD) { free(path_of_fd[fd]); path_of_fd[fd] = NULL; }
    return real_close(fd);
}

ssize_t read(int fd, void *buf, size_t n) {
    REAL(read);
    counted(fd);
    return real_read(fd, buf, n);
}
ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    REAL(pread);
    counted(fd);
    return real_pread(fd, buf, n, off);
}
ssize_t pread64(int fd, void *buf, size_t n, off64_t off) {
    REAL(pread64);
    counted(fd);
    return real_pread64(fd, buf, n, off);
}
void *mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off) {
    REAL(mmap);
    counted(fd);
    return real_mmap(addr, n, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t n, int prot, int flags, int fd, off64_t off) {
    REAL(mmap64);
    counted(fd);
    return real_mmap64(addr, n, prot, flags, fd, off);
}

/* The first fstat of a descriptor is the reader's look at the file as opened. */
static void stat_op(int fd) {
    if (!tracked(fd)) return;
    if (stat_seen[fd]) counted(fd);
    stat_seen[fd] = 1;
}
int fstat(int fd, struct stat *st) {
    REAL(fstat);
    stat_op(fd);
    return real_fstat(fd, st);
}
int fstat64(int fd, struct stat64 *st) {
    REAL(fstat64);
    stat_op(fd);
    return real_fstat64(fd, st);
}
