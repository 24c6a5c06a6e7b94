/* Where brisk keeps what it measured once and reuses (the CPU's GEMM kernel per shape; on a
 * GPU the cuBLASLt algorithm and the cuDNN convolution algorithm per shape): BRISK_CACHE_DIR,
 * else $XDG_CACHE_HOME/brisk, else $HOME/.cache/brisk. BRISK_CACHE_DIR=- turns the caches off
 * (as speed.autotune_cache "-" does for one run). brisk creates its own folders below that
 * base, never the base itself: a library must not make a missing $HOME appear. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "brisk/core.h"

/* The base folder and what brisk adds below it; 0 when the caches are off or have no home. */
static int base(char *dir, size_t n, const char **below) {
    const char *env = getenv("BRISK_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && env[0]) {
        if (strcmp(env, "-") == 0) return 0;
        snprintf(dir, n, "%s", env), *below = "";
    } else if (xdg && xdg[0]) {
        snprintf(dir, n, "%s", xdg), *below = "/brisk";
    } else if (home && home[0]) {
        snprintf(dir, n, "%s", home), *below = "/.cache/brisk";
    } else {
        return 0;
    }
    return 1;
}

void brisk_cache_file(const char *name, char *out, size_t n) {
    char dir[1024];
    const char *below;
    out[0] = 0;
    if (base(dir, sizeof dir, &below)) snprintf(out, n, "%s%s/%s", dir, below, name);
}

/* mkdir of each folder of path from `from` on (an offset into path) */
static int mkdirs(const char *path, size_t from) {
    char buf[1200];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + (from ? from : 1); *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

int brisk_cache_prepare(const char *path) {
    char dir[1024];
    const char *below;
    struct stat sb;
    if (base(dir, sizeof dir, &below)) {
        size_t L = strlen(dir);
        if (strncmp(path, dir, L) == 0 && path[L] == '/') /* the cache's own file: the base must exist */
            return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? mkdirs(path, L) : -1;
    }
    return mkdirs(path, 0); /* a path the user named (speed.autotune_cache): theirs to have asked for */
}
