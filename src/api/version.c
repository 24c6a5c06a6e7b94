/* brisk_version: the linked library's own version (api.h's macros are the headers'). */
#include <stdio.h>

#include "brisk/api.h"

const char *brisk_version(int *major, int *minor, int *patch) {
    int a = 0, b = 0, c = 0;
    sscanf(BRISK_VERSION, "%d.%d.%d", &a, &b, &c);
    if (major) *major = a;
    if (minor) *minor = b;
    if (patch) *patch = c;
    return BRISK_VERSION;
}
