#!/bin/sh
# Runs one test and, when it passes, removes what it wrote: a whole suite then needs the disk of
# its largest test, not of all of them (a ResNet-18 checkpoint with its Adam moments is 134 MB,
# and a test of resume writes several). A failed or skipped test keeps its files for a look;
# BRISK_KEEP_TEST_OUTPUT=1 keeps them always.
#   clean_on_pass.sh PATH COMMAND [ARG...]
out=$1
shift
"$@"
rc=$?
if [ "$rc" -eq 0 ] && [ -z "${BRISK_KEEP_TEST_OUTPUT:-}" ]; then rm -rf "$out"; fi
exit "$rc"
