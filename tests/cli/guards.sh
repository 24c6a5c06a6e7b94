#!/usr/bin/env bash
# What brisk refuses rather than do something the user did not mean (issue 37, item 20):
# an output path that is the input (predict, export) replaced the input; a CSV cell in
# hexadecimal and a JSON number with leading zeros were read as numbers; an unknown synth
# kind exited 1 naming three of the five kinds. Data written by NumPy and Python's csv module.
#   guards.sh BRISK_BINARY WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
py=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular tab.npz --samples 512 >/dev/null || { echo "synth failed"; exit 1; }
cat > good.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [16], "outputs": 3},
 "data": {"train": "tab.npz"}, "train": {"batch_size": 64, "epochs": 1, "out_dir": "run"}}
J
"$brisk" train good.json --quiet >/dev/null || { echo "a good run failed"; exit 1; }
$py -c 'import numpy as np; np.save("x.npy", np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32))' ||
  { echo "numpy failed"; exit 1; }

# predict --output naming the input: refused, the input untouched (by name, by a symlink)
sum=$(md5sum < x.npy)
expect predict-onto-input 'x.npy: this is the input x.npy: writing the predictions would replace it' -- \
  "$brisk" predict run/last.safetensors --input x.npy --output x.npy
ln -sf x.npy same.npy
expect predict-onto-input-link 'same.npy: this is the input x.npy' -- \
  "$brisk" predict run/last.safetensors --input x.npy --output same.npy
[ "$(md5sum < x.npy)" = "$sum" ] && ok input-kept || bad "input-kept: x.npy changed"
ckpt=$(md5sum < run/last.safetensors)
expect export-onto-checkpoint 'run/last.safetensors: this is the checkpoint: writing the ONNX model would replace it' -- \
  "$brisk" export run/last.safetensors --onnx run/last.safetensors
[ "$(md5sum < run/last.safetensors)" = "$ckpt" ] && ok checkpoint-kept || bad "checkpoint-kept: it changed"
out=$("$brisk" predict run/last.safetensors --input x.npy --output y.npy 2>&1) && [ -s y.npy ] && ok predict-elsewhere ||
  bad "predict-elsewhere: $out"

# a CSV cell is decimal: 0x10 is no number (strtod read it as 16)
$py - <<'P' || { echo "python csv failed"; exit 1; }
import csv
rows = [["a", "b", "y"], ["1", "2", "0"], ["0x10", "3", "1"]] + [[str(i), str(i + 1), str(i % 3)] for i in range(40)]
with open("hex.csv", "w", newline="") as f:
    csv.writer(f).writerows(rows)
P
expect csv-hex "hex.csv: line 3, column 'a': expected a number, got '0x10' \(cells are read as decimal numbers only\)" -- \
  "$brisk" train good.json --set data.train=hex.csv --set 'data.fields={"x": ["a", "b"], "y": "y"}' --set model.inputs=2 --out hexrun

# JSON numbers: no leading zeros (the config read [0016] as 16)
sed 's/"hidden": \[16\]/"hidden": [0016]/' good.json > zeros.json
expect json-leading-zero "zeros.json: line 1, column 52: '0016' is not a JSON number \(a leading zero\)" -- \
  "$brisk" train zeros.json --out zrun
expect set-leading-zero 'train.epochs: expected an integer in \[1, [0-9]+\], got "0001"' -- "$brisk" train good.json --set train.epochs=0001 --out zrun

# an unknown synth kind is a command-line error (exit 2) naming every kind
out=$("$brisk" synth bogus b.npz 2>&1); rc=$?
[ $rc -eq 2 ] && printf '%s' "$out" | grep -q "unknown kind 'bogus'; expected diffusion, tabular, series, images or weather" &&
  ok synth-unknown-kind || bad "synth-unknown-kind (exit $rc): $out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
