#!/usr/bin/env bash
# brisk sample end to end: an ensemble from a trained checkpoint scored against the truth, and
# bad inputs giving one clear error line and a non-zero exit, never a crash.
#   sample.sh BRISK WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth diffusion d.npz --samples 640 >/dev/null || { echo "synth failed"; exit 1; }
cat > d.json <<'J'
{"model": {"type": "diffusion", "hidden": [64], "noise": {"steps": 10}},
 "data": {"train": "d.npz", "validation_fraction": 0}, "train": {"batch_size": 32, "epochs": 1, "out_dir": "run"}}
J
"$brisk" train d.json --quiet >/dev/null || { echo "training failed"; exit 1; }
# The cases that need .npy inputs are written with NumPy and skipped without it.
out=$("$brisk" sample run/last.safetensors --coarse missing.npy --output o.npy 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'missing.npy' && { pass=$((pass + 1)); echo "ok   missing-coarse"; } ||
  { fail=$((fail + 1)); echo "FAIL missing-coarse (exit $rc): $out"; }
if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  /usr/bin/python3 - <<'P'
import numpy as np
z = np.load("d.npz")
np.save("c.npy", z["coarse"][:100]); np.save("f.npy", z["fine"][:100])
np.save("wide.npy", np.zeros((4, 8), np.float32))
P
  out=$("$brisk" sample run/last.safetensors --coarse c.npy --output ens.npy --members 3 --truth f.npy --method ddim --steps 5 --eta 0.5 --seed 9)
  rc=$?
  size=$(stat -c %s ens.npy 2>/dev/null || echo 0)
  # a version 1.0 .npy header is 128 bytes here, then 3 x 100 x 256 float32
  if [ $rc -eq 0 ] && [ "$size" -eq $((128 + 3 * 100 * 256 * 4)) ] && printf '%s' "$out" | grep -qE 'spread [0-9.]+; baseline'; then
    pass=$((pass + 1)); echo "ok   ensemble: $(printf '%s' "$out" | tail -1)"
  else
    fail=$((fail + 1)); echo "FAIL ensemble (exit $rc, $size bytes): $out"
  fi
  /usr/bin/python3 -c 'import numpy as np, sys; a = np.load("ens.npy"); sys.exit(0 if a.shape == (3, 100, 256) and np.isfinite(a).all() else 1)' &&
    { pass=$((pass + 1)); echo "ok   ensemble-shape"; } || { fail=$((fail + 1)); echo "FAIL ensemble-shape"; }
  out=$("$brisk" sample run/last.safetensors --coarse c.npy --output g.npy --guess blocks --truth f.npy --method ddim --steps 5)
  printf '%s' "$out" | grep -q 'from noise around blocks' && { pass=$((pass + 1)); echo "ok   guess-blocks"; } ||
    { fail=$((fail + 1)); echo "FAIL guess-blocks: $out"; }
  out=$("$brisk" sample run/last.safetensors --coarse c.npy --output new/ens/e.npy --method ddim --steps 2 2>&1) &&
    [ -s new/ens/e.npy ] && ok output-folders-made || bad "output-folders-made: $out"
  expect guess-shape 'wide.npy' -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --guess wide.npy
  expect wrong-width 'wide.npy: expected an array of shape \[N, 7\]' -- "$brisk" sample run/last.safetensors --coarse wide.npy --output o.npy
  expect truth-rows 'c.npy' -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --truth c.npy
  expect ddpm-steps 'ddpm sampling takes all 10' -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --steps 4
  expect bad-eta 'eta' -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --method ddim --eta 2
fi
expect usage 'sample: --coarse is required \(see brisk sample --help\)' -- "$brisk" sample run/last.safetensors
expect bad-method "--method 'euler'" -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --method euler
expect bad-members "--members 'x'" -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --members x
expect zero-members '--members .0.: expected a whole number from 1' -- "$brisk" sample run/last.safetensors --coarse c.npy --output o.npy --members 0
expect unknown-flag "unknown option '--frob'" -- "$brisk" sample run/last.safetensors --frob 1
expect missing-ckpt 'nope.safetensors' -- "$brisk" sample nope.safetensors --coarse c.npy --output o.npy
"$brisk" synth tabular t.npz --samples 256 >/dev/null
cat > t.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [8], "outputs": 3}, "data": {"train": "t.npz"},
 "train": {"batch_size": 64, "epochs": 1, "out_dir": "mlp"}}
J
"$brisk" train t.json --quiet >/dev/null
expect mlp-ckpt 'mlp checkpoint' -- "$brisk" sample mlp/last.safetensors --coarse c.npy --output o.npy
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
