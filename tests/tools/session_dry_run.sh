#!/usr/bin/env bash
# tools/gpu-session.sh without a GPU (--cpu): the agreement stage end to end on one example
# (every comparison passes: both sides train on the CPU), the CUDA-only steps as SKIP lines,
# example discovery, --continue, the deadline guard, and the summary and log bundle under $OUT.
#   session_dry_run.sh BUILD_DIR WORKDIR SOURCE_DIR      (BUILD_DIR holds the brisk binary)
set -u
build=$1 work=$2 src=$3
command -v "${PYTHON:-python3}" >/dev/null || { echo "SKIP: no ${PYTHON:-python3}"; exit 77; }
rm -rf "$work" && mkdir -p "$work/out" || exit 1
export OUT=$work/out
suite() { "$src/tools/gpu-session.sh" --cpu --no-build --build-dir "$build" --work "$work/w" "$@" >>"$work/log" 2>&1; }
fails=0
check() { if grep -qE -- "$2" "$OUT/summary.txt"; then echo "ok   $1"; else echo "FAIL: $1: no /$2/ in the summary"; fails=$((fails + 1)); fi; }

suite --only '^tabular$' --steps 3 test agree bench sanitize; rc=$?
[ $rc = 0 ] || { echo "FAIL: the dry run exited $rc"; tail -30 "$work/log"; exit 1; }
for c in "fp32, epilogues refused, vs CPU \(<= 1e-3\)" "fp32 vs CPU \(<= 1e-3\)" "tf32 vs CPU \(<= 1e-3\)" "bf16 vs CPU \(<= 3e-2\)" "CUDA graph == eager" "deterministic twice"; do
  check "agree: $c" "^PASS .* agree +tabular $c.* +\(--cpu: both on the CPU\) 3 steps"
done
for n in "1e-7 \(fp32\)" "4.88e-4 \(tf32\)" "3.91e-3 \(bf16\)"; do
  check "agree: the model's own spread, $n" "^PASS .* agree +tabular CPU from weights moved by $n vs CPU \(the model's own spread\) +measured: 3 steps"
done
check "agree: tf32 against its own spread" "^PASS .* agree +tabular tf32 vs CPU .*the model's own spread"
check "agree: the run report" "^PASS .* agree +tabular report.html \(bf16 run\) +[0-9]+ optimizations on"
check "agree: step-1 gradients" "^PASS .* agree +tabular gradients after step 1 \(fp32\) vs CPU .*\(--cpu: both on the CPU\) relative L2 error 0 "
check "the CUDA tests are listed, not run" "^SKIP .* test +CUDA tests \(ctest -R cuda\) +--cpu: [0-9]+ tests found"
check "the epilogue switch is named" "^SKIP .*CUDA tests, BRISK_CUDA_REFUSE_EPILOGUES="
check "sanitizers skip" "^SKIP .* sanitize +memcheck, tabular"
check "brisk bench ran" "^PASS .* bench +brisk bench tabular +[0-9]+ rows"
check "no failure" "TOTAL +[0-9]+ PASS, 0 FAIL"
check "stage times" "^stage times: test [0-9]+ s .*agree [0-9]+ s"
tar tzf "$OUT/logs.tar.gz" | grep -q 'runs/tabular-cpu/metrics.jsonl' && echo "ok   logs.tar.gz holds the runs" ||
  { echo "FAIL: logs.tar.gz lacks runs/tabular-cpu/metrics.jsonl"; fails=$((fails + 1)); }

# stage profile: brisk profile of the example, fp32 only on the CPU, one line with the top op type
suite --only '^tabular$' profile
check "profile: a line" "^PASS .* profile +brisk profile tabular fp32 +top [a-z_()+ ]+ [0-9]+% of [0-9.]+ ms; [0-9]+ node runs"

# stage torchref: the wiring end to end, brisk on the CPU (Debian's PyTorch when there is one)
if /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  PYTHON=/usr/bin/python3 suite --only '^tabular_graph$|^onnx-basic$' torchref
  check "torchref: a graph example" "^PASS .* torchref +tabular_graph: 50 steps on the GPU against PyTorch +worst relative difference to PyTorch [0-9.e-]+ \(--cpu: brisk on the CPU\)"
  check "torchref: an ONNX group" "^PASS .* torchref +ONNX imports, group basic: 50 steps .*worst relative difference to PyTorch fp32 [0-9.e-]+ \(--cpu"
else
  echo "skip torchref: no PyTorch in /usr/bin/python3"
fi

# every example is found (sanitize lists each as a SKIP without a GPU)
suite sanitize
for f in "$src"/examples/*.json; do check "found $(basename "$f")" "sanitize +memcheck, $(basename "$f" .json) "; done

# --continue: the agreement runs are not repeated
suite --only '^tabular$' --steps 3 --continue agree
grep -A3 '^== agree' "$work/log" | tail -3 | grep -q 'tabular on cpu' &&
  { echo "FAIL: --continue ran tabular again"; fails=$((fails + 1)); } || echo "ok   --continue skips what is done"

# a deadline already past: nothing starts, and each check says so instead of passing
suite --only '^tabular$' --steps 3 --deadline 1 agree
check "deadline: SKIP, not PASS" "^SKIP .* agree +tabular fp32 vs CPU .*deadline"
[ $fails = 0 ] && echo "session_dry_run: all passed" || { echo "session_dry_run: $fails failed"; tail -40 "$work/log"; exit 1; }
