/* Replays every file under tests/fuzz/corpus/<target>/ through a fuzz target's entry
 * point, so seeds and saved crashers run in every ctest (and sanitizer) build, not only
 * in a clang fuzzing build. Used by the test_fuzz_corpus.c of each module. */
#ifndef BRISK_FUZZ_REPLAY_H
#define BRISK_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many files were fed to `one`; -1 when the corpus folder is missing. */
static int fuzz_replay(const char *target, int (*one)(const uint8_t *, size_t)) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", BRISK_SOURCE_DIR, target);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[1500];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        /* An exact-size copy, so a sanitizer build catches a read one past the end. */
        uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
        size_t got = buf ? fread(buf, 1, n > 0 ? (size_t)n : 0, f) : 0;
        fclose(f);
        if (!buf) continue;
        one(buf, got);
        free(buf);
        files++;
    }
    closedir(d);
    return files;
}

#endif
