#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang under ASan + UBSan and runs
# each for a bounded time, starting from its seed corpus (tests/fuzz/corpus/<name>/) and its
# dictionary (tests/fuzz/<name>.dict) when there is one. New inputs the fuzzer finds go to
# BUILD/fuzz-work/<name>/corpus, never into the repository. Any finding (crash, sanitizer
# report, leak, timeout, out-of-memory) fails the run and leaves the input in
# BUILD/fuzz-work/<name>/artifacts/: once fixed, copy it into the seed corpus, where
# ctest replays it in every build (tests/*/test_fuzz_corpus.c, fuzz.<name>).
#
#   tools/fuzz.sh [BUILD_DIR]      FUZZ_SECONDS per target (default 60), JOBS for the build
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
secs=${FUZZ_SECONDS:-60}
# A fixed seed makes a run explore the same inputs in the same order every time, so CI
# cannot fail on a finding the developers' own runs of the same commit would not show;
# FUZZ_SEED=0 lets libFuzzer pick one (for long exploratory runs).
seed=${FUZZ_SEED:-1}
jobs=${JOBS:-2}
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DBRISK_FUZZ=ON -DBRISK_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $targets >"$build/fuzz-build.log" 2>&1 ||
  { tail -30 "$build/fuzz-build.log"; echo "fuzz: build failed"; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-14s %12s %8s %8s  %s\n' target executions exec/s corpus result
for t in $targets; do
  name=${t#fuzz_}
  work=$build/fuzz-work/$name
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  # a target of a format's family (onnx_import) shares the format's tokens (onnx.dict)
  [ ${#dict[@]} -eq 0 ] && [ -f "tests/fuzz/${name%%_*}.dict" ] && dict=(-dict="tests/fuzz/${name%%_*}.dict")
  "$build/tests/fuzz/$t" -max_total_time="$secs" -seed="$seed" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "${dict[@]}" "$work/corpus" "tests/fuzz/corpus/$name" >"$work/log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  units=$(find "$work/corpus" "tests/fuzz/corpus/$name" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    result="FINDING (exit $rc): $(ls "$work/artifacts" | head -3 | tr '\n' ' ')"
    failed=1
    grep -E "ERROR|SUMMARY|runtime error|Assertion" "$work/log" | head -5
  fi
  printf '%-14s %12s %8s %8s  %s\n' "$name" "${runs:-?}" "${rate:-?}" "$units" "$result"
done
[ $failed -eq 0 ] || echo "fuzz: findings above; inputs in $build/fuzz-work/*/artifacts, logs in $build/fuzz-work/*/log"
exit $failed
