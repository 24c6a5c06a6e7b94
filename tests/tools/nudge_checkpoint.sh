#!/usr/bin/env bash
# tools/gpu/nudge_checkpoint.py and compare_losses.py --baseline, the agree stage's measure of
# a model's own spread: a nudge of 0 resumes bit for bit as the untouched checkpoint does, a
# nudge moves the losses, the baseline widens the bound only by that spread, and a damaged
# checkpoint exits 2. With numpy and without it (the tool takes either path).
#   nudge_checkpoint.sh BRISK_BINARY WORKDIR SOURCE_DIR
set -u
. "$(dirname "$0")/expect_tool.sh" nudge_checkpoint "$@"
"$brisk" synth tabular data/tabular.npz --samples 2048 >/dev/null || exit 1
run() { local out=$1; shift; "$brisk" train "$src/examples/tabular.json" --device cpu --max-steps 6 --log-every 1 \
          --threads 2 --checkpoint-epochs 0 --quiet --out "$out" "$@" >/dev/null || exit 1; }
"$brisk" train "$src/examples/tabular.json" --device cpu --max-steps 0 --quiet --out init >/dev/null || exit 1
expect 0 '^PASS [0-9]+ tensors .* moved by 0 ' init/last.safetensors zero.safetensors --rel 0
expect 0 '^PASS [0-9]+ tensors .* moved by 1e-07 ' init/last.safetensors n7.safetensors
expect 0 '^PASS [0-9]+ tensors .* moved by 0.001 ' init/last.safetensors n3.safetensors --rel 1e-3
# the standard library's path gives a checkpoint brisk accepts too
$py -c "import runpy, sys; sys.modules['numpy'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')" \
  "$src/tools/gpu/nudge_checkpoint.py" init/last.safetensors n3std.safetensors --rel 1e-3 >/dev/null || fails=$((fails + 1))
run plain
run zero --resume zero.safetensors
run n3 --resume n3.safetensors
run n3std --resume n3std.safetensors
losses="$py $src/tools/gpu/compare_losses.py"
check() { # WANT PATTERN ARGS...: compare_losses.py's verdict
  local want=$1 pat=$2 got rc; shift 2
  got=$($losses "$@" 2>/dev/null); rc=$?
  if [ $rc = "$want" ] && echo "$got" | grep -qE -- "$pat"; then echo "ok   compare_losses $*: $got"
  else echo "FAIL: compare_losses $* -> exit $rc, '$got'"; fails=$((fails + 1)); fi
}
check 0 '^PASS 6 steps bit-identical' plain zero --exact
check 1 '^FAIL max rel diff' plain n3 --rtol 1e-9
check 1 '^FAIL max rel diff' plain n3std --rtol 1e-9
# a run within 4x the model's own spread passes; the spread of a run against itself is 0
check 0 "^PASS 6 steps, max rel diff .*the model's own spread" plain n3std --rtol 1e-9 --baseline n3
check 1 "^FAIL max rel diff .*the model's own spread 0 " plain n3 --rtol 1e-9 --baseline plain
check 2 '^FAIL --baseline needs --rtol' plain n3 --exact --baseline n3
check 2 '^FAIL --baseline needs --rtol and a finite --spread-factor' plain n3 --rtol 1e-9 --baseline n3 --spread-factor -1
check 2 '^FAIL nothing: no such file or directory' plain n3 --rtol 1e-9 --baseline nothing
printf 'damaged' | dd of=n3.safetensors bs=1 seek=200 conv=notrunc 2>/dev/null
expect 2 '^FAIL .*not a brisk checkpoint' n3.safetensors x.safetensors
expect 2 '^FAIL .*not a brisk checkpoint' nothing.safetensors x.safetensors
[ $fails = 0 ] && echo "nudge_checkpoint: all passed" || { echo "nudge_checkpoint: $fails failed"; exit 1; }
