/* Proof, in sanitizer builds, that the sanitizers are on and report: each mode commits
 * the one error its sanitizer must catch. ctest passes the test only when the report
 * appears (sanitizer_canary.cmake), so a build or an environment that quietly turned
 * ASan, UBSan or LeakSanitizer off (ASAN_OPTIONS=detect_leaks=0, say) fails CI.
 *   sanitizer_canary leak|overflow|undefined */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "leak") == 0) {
        void *volatile lost = malloc(4096);
        memset(lost, 1, 4096);
        lost = NULL;
        return 0;
    }
    if (strcmp(mode, "overflow") == 0) {
        char *volatile p = malloc(16);
        volatile int i = 16;
        p[i] = 1;
        free(p);
        return 0;
    }
    if (strcmp(mode, "undefined") == 0) {
        volatile int x = INT_MAX;
        printf("%d\n", x + 1);
        return 0;
    }
    fprintf(stderr, "usage: sanitizer_canary leak|overflow|undefined\n");
    return 2;
}
