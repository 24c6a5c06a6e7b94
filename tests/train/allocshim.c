/* An LD_PRELOAD library that makes one allocation site of the brisk executable fail,
 * to prove that running out of memory anywhere in brisk's own code is an error message
 * and never a crash.
 *
 * Sites are the return addresses of malloc, calloc, realloc and posix_memalign calls
 * made from the main executable (libbrisk.a is linked into it; libc, OpenMP, OpenBLAS
 * and cJSON are left alone), numbered in the order they are first reached:
 *
 *   BRISK_ALLOC_FAIL_SITE=N   the first call from the N-th site returns NULL (ENOMEM);
 *                             later calls from it succeed. Unset or 0: count only.
 *   BRISK_ALLOC_COUNT=FILE    at exit, the number of distinct sites reached is written
 *   BRISK_ALLOC_TRACE=1       the failing site's offset in the executable goes to stderr
 *
 * It allocates through glibc's __libc_* entry points, so it cannot be combined with the
 * sanitizers' allocators (the test skips sanitized builds). */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define MAX_SITES 8192

static uintptr_t exe_lo, exe_hi, exe_base;
static int ready, fail_site;
static void *sites[MAX_SITES];
static int n_sites;
static atomic_flag lock = ATOMIC_FLAG_INIT;

static int find_exe(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size, (void)data;
    /* The first object is the main program. */
    exe_base = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            exe_lo = info->dlpi_addr + ph->p_vaddr;
            exe_hi = exe_lo + ph->p_memsz;
        }
    }
    return 1;
}

__attribute__((constructor)) static void init(void) {
    dl_iterate_phdr(find_exe, NULL);
    const char *s = getenv("BRISK_ALLOC_FAIL_SITE");
    fail_site = s ? atoi(s) : 0;
    ready = 1;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("BRISK_ALLOC_COUNT");
    if (!path) return;
    ready = 0;
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%d\n", n_sites), fclose(f);
}

/* Whether the allocation called from `ret` fails. */
static int fails(void *ret) {
    uintptr_t r = (uintptr_t)ret;
    if (!ready || r < exe_lo || r >= exe_hi) return 0;
    while (atomic_flag_test_and_set(&lock)) {}
    int i = 0, fail = 0;
    while (i < n_sites && sites[i] != ret) i++;
    if (i == n_sites && n_sites < MAX_SITES) {
        sites[n_sites++] = ret;
        fail = n_sites == fail_site;
    }
    atomic_flag_clear(&lock);
    if (fail) {
        errno = ENOMEM;
        /* For finding the site: addr2line -f -e brisk <offset> */
        if (getenv("BRISK_ALLOC_TRACE")) fprintf(stderr, "allocshim: failing site %d at offset 0x%lx\n", fail_site,
                                                 (unsigned long)(r - exe_base));
    }
    return fail;
}

void *malloc(size_t n) { return fails(__builtin_return_address(0)) ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return fails(__builtin_return_address(0)) ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return fails(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n); }
int posix_memalign(void **out, size_t align, size_t n) {
    if (fails(__builtin_return_address(0))) return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
