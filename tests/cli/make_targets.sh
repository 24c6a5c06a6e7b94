#!/usr/bin/env bash
# The Makefile's targets build what they run: `make run` (the README's first command) the brisk
# command alone, not the test suite's programs, CUDA kernels and Fortran examples; `make test`
# and `make build` everything. Read from make's dry run (-n: nothing is built or installed).
#   make_targets.sh SOURCE_DIR
set -u
. "$(dirname "$0")/expect.sh"
src=$1
command -v make >/dev/null || { echo "skipped: no make"; exit 77; }
dry() { make -s -n -C "$src" "$@" BUILD=build-dry JOBS=2 2>&1; }
everything='cmake --build build-dry -j2$' # no --target: every target
run=$(dry run)
printf '%s\n' "$run" | grep -q -- 'cmake --build build-dry -j2 --target brisk_cli$' &&
  ! printf '%s\n' "$run" | grep -q -- "$everything" && ok run-builds-brisk-only || bad "run-builds-brisk-only: $run"
printf '%s\n' "$run" | grep -q 'build-dry/brisk train examples/diffusion.json' && ok run-trains || bad "run-trains: $run"
out=$(dry test)
printf '%s\n' "$out" | grep -q -- "$everything" && ok test-builds-everything || bad "test-builds-everything: $out"
out=$(dry build)
printf '%s\n' "$out" | grep -q -- "$everything" && ok build-builds-everything || bad "build-builds-everything: $out"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
