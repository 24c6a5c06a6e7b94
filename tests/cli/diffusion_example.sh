#!/usr/bin/env bash
# The diffusion flow of the README's make run and docs/models.md on the shipped example (examples/diffusion.json, 2 of its 10
# epochs): the run's summary and run_end score samples of the validation fields against the
# coarse block values and the samples beat them; `brisk sample` on fields the run did not see
# (an .npz as brisk synth writes it) starts from the coarse blocks by default, exactly as
# --guess blocks, and its ensemble mean beats them too; --guess none is pure noise.
#   diffusion_example.sh BRISK WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
example=$(cd "$(dirname "$0")/../../examples" && pwd)/diffusion.json
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth diffusion d.npz >/dev/null && "$brisk" synth diffusion held.npz --samples 256 --seed 1 >/dev/null ||
  { echo "synth failed"; exit 1; }
"$brisk" train "$example" --set data.train=d.npz --epochs 2 --out run --quiet > train.out 2>&1 ||
  { cat train.out; echo "training failed"; exit 1; }
# "samples  RMSE A to the validation fields (...); the coarse block values' B"
line=$(grep -E '^  samples +RMSE' train.out)
read -r a b < <(printf '%s' "$line" | sed -E "s/.*RMSE ([0-9.]+) .* values' ([0-9.]+).*/\1 \2/")
awk -v a="${a:-9}" -v b="${b:-0}" 'BEGIN { exit !(a < b) }' && ok "summary: samples $a beat the coarse blocks $b" ||
  bad "summary: samples against the coarse blocks: '$line'"
end=$(grep '"event":"run_end"' run/metrics.jsonl | tail -1)
sr=$(printf '%s' "$end" | sed -nE 's/.*"sample_rmse":([0-9.]+),"sample_baseline_rmse":([0-9.]+).*/\1 \2/p')
read -r ea eb <<< "$sr"
awk -v a="${a:-9}" -v b="${b:-0}" -v ea="${ea:-9}" -v eb="${eb:-0}" \
  'BEGIN { exit !(ea < eb && (ea - a) ^ 2 < 1e-8 && (eb - b) ^ 2 < 1e-8) }' && ok "run_end: sample_rmse $ea, sample_baseline_rmse $eb" ||
  bad "run_end sample_rmse: $end"
# the README's command, on held-out fields
out=$("$brisk" sample run/last.safetensors --coarse held.npz --output ens.npy --members 4 --truth held.npz 2>&1)
m=$(printf '%s' "$out" | sed -nE 's/.*ensemble mean ([0-9.]+);.*/\1/p')
base=$(printf '%s' "$out" | sed -nE 's/.*baseline \(coarse block values\) ([0-9.]+).*/\1/p')
awk -v m="${m:-9}" -v b="${base:-0}" 'BEGIN { exit !(m < b) }' && ok "sample: ensemble mean $m beats the coarse blocks $base" ||
  bad "sample: ensemble mean against the coarse blocks: $out"
# the default start is the coarse blocks; none is pure noise
"$brisk" sample run/last.safetensors --coarse held.npz --output default.npy --quiet &&
  "$brisk" sample run/last.safetensors --coarse held.npz --output blocks.npy --guess blocks --quiet &&
  "$brisk" sample run/last.safetensors --coarse held.npz --output none.npy --guess none --quiet &&
  cmp -s default.npy blocks.npy && ! cmp -s default.npy none.npy && ok "default start: the coarse blocks" ||
  bad "default start: default.npy, blocks.npy and none.npy"
out=$("$brisk" sample run/last.safetensors --coarse held.npz --output none.npy --guess none 2>&1)
printf '%s' "$out" | grep -q 'from pure noise' && ok "guess none: pure noise" || bad "guess none: $out"
help=$("$brisk" sample --help 2>&1)
printf '%s' "$help" | grep -q 'the coarse block values (default)' && printf '%s' "$help" | grep -q 'none: pure' &&
  ! printf '%s' "$help" | grep -q 'default: pure noise' && ok "help: the default start" || bad "help: $help"
"$brisk" synth tabular t.npz --samples 16 >/dev/null
expect npz-member "t.npz.*coarse" -- "$brisk" sample run/last.safetensors --coarse t.npz --output o.npy
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
