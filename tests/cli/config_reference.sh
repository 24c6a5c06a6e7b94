#!/usr/bin/env bash
# docs/config.md is `brisk config --reference`, generated from the config reader itself: this
# fails when they differ (a key added, removed, or its range or default changed without
# regenerating) or when the reader asks for a key src/config/config_doc.c does not describe.
# Regenerate with: build/brisk config --reference > docs/config.md
#   config_reference.sh BRISK_BINARY SOURCE_DIR
set -u
brisk=$1 src=$2
tmp=$(mktemp) && trap 'rm -f "$tmp"' EXIT
"$brisk" config --reference > "$tmp" || { echo "FAIL: brisk config --reference exited with $?"; exit 1; }
out=$(cat "$tmp")
fail=0
if printf '%s\n' "$out" | grep -q 'undocumented'; then
  echo "FAIL: keys without a meaning in src/config/config_doc.c:"; printf '%s\n' "$out" | grep 'undocumented'; fail=1
fi
if ! diff -u "$src/docs/config.md" "$tmp"; then
  echo "FAIL: docs/config.md differs from brisk config --reference (regenerate it)"; fail=1
fi
n=$(printf '%s\n' "$out" | grep -c '^| `')
[ "$n" -ge 70 ] || { echo "FAIL: only $n keys in the reference"; fail=1; }
grep -q 'docs/config.md' "$src/README.md" || { echo "FAIL: README.md does not link docs/config.md"; fail=1; }
[ $fail -eq 0 ] && echo "1 passed, 0 failed ($n keys)"
exit $fail
