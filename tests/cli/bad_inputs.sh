#!/usr/bin/env bash
# Bad input never crashes brisk: each case must exit with status 1 or 2 (not a signal) and print
# one error line naming the file and what was expected.
#   bad_inputs.sh BRISK_BINARY WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular tab.npz --samples 1024 >/dev/null || { echo "synth failed"; exit 1; }
cat > good.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [32], "outputs": 3},
 "data": {"train": "tab.npz"}, "train": {"batch_size": 64, "epochs": 1, "out_dir": "run"}}
J
"$brisk" train good.json --quiet >/dev/null || { echo "a good run failed"; exit 1; }

# configs
echo '{"model": {"type": "mlp", "inputs": 64, "outputs": 3,}' > syntax.json
expect json-syntax 'syntax.json: line 1' -- "$brisk" train syntax.json
sed 's/"hidden"/"hiden"/' good.json > typo.json
expect unknown-key 'typo.json: model: unknown key "hiden" \(did you mean "hidden"\? known: .*\); fix or remove it' -- "$brisk" train typo.json
expect bad-value 'optim.lr: expected a number > 0' -- "$brisk" train good.json --lr fast
expect bad-flag "unknown option '--frobnicate'" -- "$brisk" train good.json --frobnicate
expect bad-set 'train.batch_size' -- "$brisk" train good.json --set train.batch_size=-3
expect missing-config 'nope.json: cannot open: No such file or directory; check the path' -- "$brisk" train nope.json
expect bucket-zero 'dist.bucket_mb: expected a number in \[0.001, 4096\], got 0' -- "$brisk" train good.json --bucket-mb 0
expect bucket-word 'dist.bucket_mb: expected a number' -- "$brisk" train good.json --bucket-mb lots
expect dist-timeout 'dist.timeout_s: expected a number in \[0.1, ' -- "$brisk" train good.json --dist-timeout -1
expect shard-bool 'dist.shard_optimizer: expected true or false, got 3' -- "$brisk" train good.json --set dist.shard_optimizer=3
expect conv-layout 'speed.conv_layout: expected one of "auto", "nchw", "nhwc", got "sideways"' -- "$brisk" train good.json --set speed.conv_layout=sideways
expect cpu-gemm 'speed.cpu_gemm: expected one of "auto", "own", "blas", "fixed", got "mkl"' -- "$brisk" train good.json --set speed.cpu_gemm=mkl
expect overlap-mode 'dist.overlap: expected one of "auto", "on", "off", got "maybe"' -- "$brisk" train good.json --set dist.overlap=maybe
expect shard-flag-value '--shard-optimizer takes no value' -- "$brisk" train good.json --shard-optimizer=yes
SLURM_PROCID=1 SLURM_NTASKS=2 expect slurm-no-mpi 'SLURM environment gives world size 2, but .*mpirun -np N' -- "$brisk" train good.json
RANK=0 WORLD_SIZE=2 expect torchrun-no-mpi 'torchrun environment gives world size 2' -- "$brisk" train good.json
RANK=3 WORLD_SIZE=2 expect torchrun-bad-rank 'RANK=3, WORLD_SIZE=2; expected 0 <= rank < size' -- "$brisk" train good.json
expect wrong-inputs "field 'x' has samples of shape \[64\], the model .* expects \[63\]; set the model's sizes" -- "$brisk" train good.json --set model.inputs=63
expect batch-too-big 'batch_size is 100000' -- "$brisk" train good.json --batch-size 100000
expect unknown-field 'data.fields: unknown field "z"' -- "$brisk" train good.json --set 'data.fields={"z": "x"}'
expect missing-member 'tab.npz' -- "$brisk" train good.json --set 'data.fields={"x": "features"}'

# the command line: one syntax and exit status 2 for every command
usage() { # usage NAME PATTERN -- command...: exit status exactly 2, the message matching
  local name=$1 pat=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 2 ] && printf '%s' "$out" | grep -qE -- "$pat"; then pass=$((pass + 1)); echo "ok   $name"
  else fail=$((fail + 1)); echo "FAIL $name (exit $rc): $out"; fi
}
for c in train predict info synth check bench sample; do
  usage "unknown-option-$c" "$c: unknown option '--frob'" -- "$brisk" $c --frob
done
usage info-names-flag "info: unknown option '--frob'" -- "$brisk" info run/last.safetensors --frob
usage info-graph-ckpt "info: --graph takes a config \(.json\), not 'run/last.safetensors'" -- \
  "$brisk" info run/last.safetensors --graph
usage info-graph-value "--graph takes no value" -- "$brisk" info good.json --graph=1
printf '{"model": {"type": "transformer", "inputs": 2, "seq_len": 4, "width": 8, "heads": 2, "outputs": 3}}\n' > tf.json
expect info-graph-family 'model type "transformer" has no graph form; mlp, lstm and resnet have one' -- \
  "$brisk" info tf.json --graph
usage predict-missing-value 'predict: --input: missing value' -- "$brisk" predict run/last.safetensors --input
usage train-missing-value 'train: --lr: missing value' -- "$brisk" train good.json --lr
usage switch-with-value "--quiet takes no value" -- "$brisk" train good.json --quiet=1
for n in -5 0 1e3 5abc ""; do
  usage "synth-samples[$n]" "--samples '$n': expected a whole number" -- "$brisk" synth tabular s.npz --samples "$n"
done
usage synth-samples-eq "--samples '1e3': expected a whole number" -- "$brisk" synth tabular s.npz --samples=1e3
usage sample-members "--members '0': expected a whole number from 1" -- "$brisk" sample run/last.safetensors --coarse c.npy --output f.npy --members 0
# a bad value of a flag that sets a config key, or of --set, is a bad command line too: exit 2,
# the flag named with the key it sets, what the key expects and the value given
usage flag-lr 'train: --lr: optim.lr: expected a number > 0, got "abc" \(see brisk train --help\)' -- "$brisk" train good.json --lr abc
usage flag-lr-negative 'train: --lr: optim.lr: expected a number > 0, got -1' -- "$brisk" train good.json --lr -1
usage flag-epochs 'train: --epochs: train.epochs: expected an integer in \[1, 16777216\], got 1.5' -- "$brisk" train good.json --epochs 1.5
usage flag-epochs-zero 'train: --epochs: train.epochs: expected an integer in \[1, 16777216\], got 0' -- "$brisk" train good.json --epochs 0
usage flag-batch-size 'train: --batch-size: train.batch_size: expected an integer in \[1, 16777216\] or "auto", got "x"' -- "$brisk" train good.json --batch-size x
usage flag-max-steps 'train: --max-steps: train.max_steps: expected an integer in \[-1, ' -- "$brisk" train good.json --max-steps -2
usage flag-threads 'train: --threads: speed.threads: expected an integer in \[0, 4096\], got "abc"' -- "$brisk" train good.json --threads abc
usage flag-seed-eq 'train: --seed: train.seed: expected an integer' -- "$brisk" train good.json --seed=x
usage flag-memory-limit 'train: --memory-limit: speed.memory_limit: expected bytes' -- "$brisk" train good.json --memory-limit 12Q
usage flag-device 'train: --device: speed.device: expected one of "auto", "cpu", "cuda", got "gpu"' -- "$brisk" train good.json --device gpu
usage flag-bucket 'train: --bucket-mb: dist.bucket_mb: expected a number in \[0.001, 4096\], got 0' -- "$brisk" train good.json --bucket-mb 0
usage set-value 'train: --set optim.lr=abc: optim.lr: expected a number > 0' -- "$brisk" train good.json --set optim.lr=abc
usage set-below 'train: --set model.hidden=\[8,0\]: model.hidden\[1\]: expected an integer' -- "$brisk" train good.json --set 'model.hidden=[8,0]'
usage set-unknown-key 'train: --set optim.lrr=1: optim: unknown key "lrr"' -- "$brisk" train good.json --set optim.lrr=1
usage set-no-value 'train: --set train.epochs: expected KEY.PATH=VALUE' -- "$brisk" train good.json --set train.epochs
usage set-last-wins 'train: --set optim.lr=x: optim.lr' -- "$brisk" train good.json --lr 0.1 --set optim.lr=x
usage flag-last-wins 'train: --lr: optim.lr: .*got "y"' -- "$brisk" train good.json --set optim.lr=x --lr y
usage profile-flag 'profile: --threads: speed.threads: expected an integer' -- "$brisk" profile good.json --threads x
# the config's own bad value is the config's error (exit 1, the file named), whatever the flags
sed 's/"epochs": 1/"epochs": 0/' good.json > zero_epochs.json
out=$("$brisk" train zero_epochs.json --lr 0.1 --set optim.lr=0.1 2>&1); rc=$?
[ $rc -eq 1 ] && printf '%s' "$out" | grep -q '^brisk: zero_epochs.json: train.epochs: expected an integer' &&
  { pass=$((pass + 1)); echo "ok   config-error-exit-1"; } || { fail=$((fail + 1)); echo "FAIL config-error-exit-1 (exit $rc): $out"; }
out=$("$brisk" train good.json --out=run_eq --max-steps=1 --quiet 2>&1) && [ -f run_eq/last.safetensors ] &&
  pass=$((pass + 1)) && echo "ok   flag=value" || { fail=$((fail + 1)); echo "FAIL flag=value: $out"; }
cp good.json ./-dash.json
out=$("$brisk" train --out run_dd --max-steps 1 --quiet -- -dash.json 2>&1) && [ -f run_dd/last.safetensors ] &&
  pass=$((pass + 1)) && echo "ok   double-dash" || { fail=$((fail + 1)); echo "FAIL double-dash: $out"; }

# data files
head -c 100 tab.npz > trunc.npz
expect truncated-npz 'trunc.npz' -- "$brisk" train good.json --set data.train=trunc.npz
printf 'not a zip at all' > garbage.npz
expect garbage-npz 'garbage.npz' -- "$brisk" train good.json --set data.train=garbage.npz
printf 'a,b\n1,2\n3,x\n' > bad.csv
expect csv-cell "bad.csv: line 3, column 'b'" -- "$brisk" train good.json --set data.train=bad.csv --set 'data.fields={"x": ["a", "b"], "y": "a"}' --set model.inputs=2
printf 'a,b,y\n1,2,0\n3,nan,1\n' > nan.csv
expect csv-nan "nan.csv: field 'x': NaN at row 1 .*CSV column 'b', line 3" -- "$brisk" train good.json --set data.train=nan.csv --set 'data.fields={"x": ["a", "b"], "y": "y"}' --set model.inputs=2 --batch-size 1
/usr/bin/python3 - <<'P' 2>/dev/null && expect nan-in-data 'nan.npz.*(NaN|nan)' -- "$brisk" train good.json --set data.train=nan.npz
import numpy as np
x = np.random.randn(1024, 64).astype(np.float32); x[5, 7] = np.nan
np.savez("nan.npz", x=x, y=np.zeros(1024, np.int32))
P
/usr/bin/python3 - <<'P' 2>/dev/null && expect count-mismatch 'count.npz' -- "$brisk" train good.json --set data.train=count.npz
import numpy as np
np.savez("count.npz", x=np.zeros((1024, 64), np.float32), y=np.zeros(1000, np.int32))
P
/usr/bin/python3 - <<'P' 2>/dev/null && expect label-range 'label|class|range' -- "$brisk" train good.json --set data.train=labels.npz --out run_labels
import numpy as np
np.savez("labels.npz", x=np.zeros((1024, 64), np.float32), y=np.full(1024, 7, np.int32))
P

# wide CSV fields: 64 features by a range, by a list, and a bad range
/usr/bin/python3 - <<'P' 2>/dev/null
import numpy as np
r = np.random.default_rng(0); x = r.standard_normal((256, 64)).astype(np.float32); y = (x[:, 0] > 0).astype(int)
with open("wide.csv", "w") as f:
    f.write(",".join(f"f{i}" for i in range(64)) + ",label\n")
    for row, lab in zip(x, y): f.write(",".join(f"{v:.6f}" for v in row) + f",{lab}\n")
P
if [ -f wide.csv ]; then
  out=$("$brisk" train good.json --set data.train=wide.csv --set 'data.fields={"x": "f0:f63", "y": "label"}' --out run_wide --quiet 2>&1) &&
    pass=$((pass + 1)) && echo "ok   csv-range-64" || { fail=$((fail + 1)); echo "FAIL csv-range-64: $out"; }
  list=$(/usr/bin/python3 -c 'print(",".join(f"\"f{i}\"" for i in range(64)))')
  out=$("$brisk" train good.json --set data.train=wide.csv --set "data.fields={\"x\": [$list], \"y\": \"label\"}" --out run_wide2 --quiet 2>&1) &&
    pass=$((pass + 1)) && echo "ok   csv-list-64" || { fail=$((fail + 1)); echo "FAIL csv-list-64: $out"; }
  expect csv-bad-range "wide.csv: column range 'f0:f64': no column 'f64' in the header" -- "$brisk" train good.json --set data.train=wide.csv --set 'data.fields={"x": "f0:f64", "y": "label"}'
fi
printf 'a,b,y\n1,2,0\n3,4\0009,1\n' > nulcell.csv
expect csv-nul-cell 'nulcell.csv: line 3, field 2: a NUL byte' -- "$brisk" train good.json --set data.train=nulcell.csv --set 'data.fields={"x": ["a", "b"], "y": "y"}' --set model.inputs=2

# a small deflated file whose data set exceeds the memory limit: refused before inflating
/usr/bin/python3 -c 'import numpy as np; np.savez_compressed("bomb.npz", x=np.zeros((1 << 20, 64), np.float32), y=np.zeros(1 << 20, np.int32))' 2>/dev/null &&
  expect data-over-limit 'bomb.npz: loading this data set needs 260.0 MiB, but 64.0 MiB are available \(speed.memory_limit\)' -- "$brisk" train good.json --set data.train=bomb.npz --memory-limit 64MiB
expect data-in-plan 'this run needs .* \(data 0.3, activations' -- "$brisk" train good.json --memory-limit 300KiB --batch-size 512 --out run_mem2

# labels and targets: checked at load with file, member and row; float labels suggest regression
/usr/bin/python3 - <<'P' 2>/dev/null
import numpy as np
x = np.zeros((1024, 64), np.float32)
y = np.zeros(1024, np.int32); y[700] = 3
np.savez("label3.npz", x=x, y=y)
np.savez("floaty.npz", x=x, y=np.random.rand(1024).astype(np.float32))
P
expect label-at-load "label3.npz: field 'y' \(npz member 'y'\), row 700: class label 3 is outside \[0, 3\)" -- "$brisk" train good.json --set data.train=label3.npz
expect float-labels 'floaty.npz: field .y. .* holds float32 values \[1024\].*set model.task to "regress"' -- "$brisk" train good.json --set data.train=floaty.npz
out=$("$brisk" train good.json --set data.train=floaty.npz --set model.task=regress --set model.outputs=1 --out run_reg1 --quiet 2>&1) &&
  pass=$((pass + 1)) && echo "ok   regression-1d-target" || { fail=$((fail + 1)); echo "FAIL regression-1d-target: $out"; }
expect out-dir-too-long 'train.out_dir: longer than 1023 bytes' -- "$brisk" train good.json --out "$(printf 'd%.0s' $(seq 1 1100))"

# text from files reaches the terminal escaped: no raw ESC from member names or metadata
/usr/bin/python3 -c 'import numpy as np; np.savez("esc.npz", **{"x\x1b]0;pwned\x07": np.zeros((4, 64), np.float32)})' 2>/dev/null &&
  { out=$("$brisk" train good.json --set data.train=esc.npz 2>&1); printf '%s' "$out" | grep -q $'\x1b' &&
    { fail=$((fail + 1)); echo "FAIL escapes-member: raw ESC printed"; } ||
    { printf '%s' "$out" | grep -qF 'x\x1b]0;pwned\x07' && pass=$((pass + 1)) && echo "ok   escapes-member" ||
      { fail=$((fail + 1)); echo "FAIL escapes-member: $out"; }; }; }
/usr/bin/python3 - <<'P' 2>/dev/null
import json, struct
h = json.dumps({"__metadata__": {"note\x1b[2J": "v\x1b[31mred"}, "w\x1b[1A": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
h += b" " * (-len(h) % 8)
open("esc.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0\0\0\0")
P
if [ -f esc.safetensors ]; then
  out=$("$brisk" info esc.safetensors 2>&1)
  if printf '%s' "$out" | grep -q $'\x1b'; then fail=$((fail + 1)); echo "FAIL escapes-info: raw ESC printed"
  elif printf '%s' "$out" | grep -qF 'w\x1b[1A' && printf '%s' "$out" | grep -qF 'v\x1b[31mred'; then pass=$((pass + 1)); echo "ok   escapes-info"
  else fail=$((fail + 1)); echo "FAIL escapes-info: $out"; fi
fi

# training faults
expect diverges 'training loss is (NaN|infinite); .*lower optim.lr' -- "$brisk" train good.json --lr 1e30 --set optim.type=sgd --out run_div
expect memory-limit 'this run needs .* MiB are available \(speed.memory_limit\); the largest train.batch_size that fits is [0-9]+' -- "$brisk" train good.json --memory-limit 600KiB --batch-size 512 --out run_mem
expect batch-size-word 'train.batch_size: expected an integer in \[1, 16777216\] or "auto"' -- "$brisk" train good.json --batch-size lots
out=$("$brisk" train good.json --batch-size auto --memory-limit 600KiB --out run_auto --max-steps 1 2>&1) &&
  printf '%s' "$out" | grep -q "batch     auto: [0-9]*, the largest that fits" && pass=$((pass + 1)) && echo "ok   batch-auto" ||
  { fail=$((fail + 1)); echo "FAIL batch-auto: $out"; }
out=$("$brisk" train good.json --resume auto --out run_fresh --max-steps 1 2>&1) && printf '%s' "$out" | grep -q "no checkpoint in run_fresh yet" &&
  pass=$((pass + 1)) && echo "ok   resume-auto-fresh" || { fail=$((fail + 1)); echo "FAIL resume-auto-fresh: $out"; }
# a run directory with a previous run: refused unless resumed or overwritten
expect previous-run 'run holds a previous run .*--resume auto.*--overwrite' -- "$brisk" train good.json
expect overwrite-and-resume '--overwrite starts a new run and --resume auto continues the run directory.s own' -- "$brisk" train good.json --overwrite --resume auto
"$brisk" train good.json --quiet --overwrite --max-steps 0 >/dev/null && test -f run/step-00000000.safetensors &&
  ! test -e run/best.safetensors && pass=$((pass + 1)) && echo "ok   overwrite-step0" ||
  { fail=$((fail + 1)); echo "FAIL overwrite-step0"; }
"$brisk" train good.json --quiet --overwrite >/dev/null || { echo "the overwriting run failed"; exit 1; }
expect max-steps-negative 'train.max_steps: expected an integer in \[-1, ' -- "$brisk" train good.json --max-steps -2 --out run_ms
# -1 is the default (the epochs decide): the flag takes it as the config does
out=$("$brisk" train good.json --max-steps -1 --out run_ms1 --quiet 2>&1) && printf '%s' "$out" | grep -q "(1 epoch" &&
  pass=$((pass + 1)) && echo "ok   max-steps-minus-one" || { fail=$((fail + 1)); echo "FAIL max-steps-minus-one: $out"; }
expect checkpoint-epochs 'train.checkpoint_epochs: expected an integer' -- "$brisk" train good.json --checkpoint-epochs -1 --out run_ce
expect checkpoint-epochs-word 'train.checkpoint_epochs' -- "$brisk" train good.json --checkpoint-epochs often --out run_ce
expect validation-file-missing 'nope.npz' -- "$brisk" train good.json --set data.validation=nope.npz --out run_vf
expect validation-both 'give data.validation .* or data.validation_fraction, not both' -- "$brisk" train good.json --set data.validation=tab.npz --set data.validation_fraction=0.2 --out run_vf
expect validation-kind 'data.validation .* must be a .npz file' -- "$brisk" train good.json --set data.validation=val.csv --out run_vf
expect validation-type 'data: key "validation": expected a string|data.validation' -- "$brisk" train good.json --set data.validation=3 --out run_vf

# windowed time series
printf 't,f,close\n' > ser.csv
for i in $(seq 0 39); do echo "$i,$((i % 7)),$((100 + i % 5))" >> ser.csv; done
cat > win.json <<'J'
{"model": {"type": "lstm", "inputs": 1, "seq_len": 8, "hidden": 4, "outputs": 3},
 "data": {"train": "ser.csv", "validation_fraction": 0.25,
          "windows": {"features": ["f"], "length": 8, "horizon": 2,
                      "target": {"column": "close", "thresholds": [-0.01, 0.01]}}},
 "train": {"batch_size": 4, "epochs": 1, "out_dir": "wrun"}}
J
"$brisk" train win.json --quiet >/dev/null || { echo "a good windowed run failed"; exit 1; }
expect window-too-long 'ser.csv: 40 rows; a window of 50 rows and a target 2 rows after it need at least 52' -- "$brisk" train win.json --set data.windows.length=50 --set model.seq_len=50
expect window-no-training 'training part' -- "$brisk" train win.json --set data.validation_fraction=0.9
expect unknown-feature "ser.csv: no column 'volume'" -- "$brisk" train win.json --set 'data.windows.features=["volume"]'
expect unknown-target "no column 'price'|no target column 'price'" -- "$brisk" train win.json --set data.windows.target.column=price
sed 's/^5,5,/5,x5,/' ser.csv > cell.csv
expect non-numeric-cell "cell.csv: line 7, column 'f': expected a number, got 'x5'" -- "$brisk" train win.json --set data.train=cell.csv
expect classes-vs-outputs 'thresholds: 2 thresholds make 3 classes, but model.outputs is 4' -- "$brisk" train win.json --set model.outputs=4
expect window-vs-model "field 'x' has samples of shape \[8, 1\], the model .* expects \[9, 1\]" -- "$brisk" train win.json --set model.seq_len=9
expect windows-and-fields 'data.windows or data.fields' -- "$brisk" train win.json --set 'data.fields={"x": "f"}'
expect thresholds-order 'ascending' -- "$brisk" train win.json --set 'data.windows.target.thresholds=[0.01, -0.01]'
expect heads-width 'model.heads: 3 heads do not divide width 8' -- "$brisk" train win.json --set 'model={"type": "transformer", "inputs": 1, "seq_len": 8, "width": 8, "heads": 3, "outputs": 3}'
/usr/bin/python3 -c 'import numpy as np; np.save("win7.npy", np.zeros((4, 7, 1), np.float32))' 2>/dev/null &&
  expect predict-window-shape 'win7.npy: expected an array of shape \[N, 8, 1\] .*or a series \[rows, features\], got \[4, 7, 1\]' -- "$brisk" predict wrun/last.safetensors --input win7.npy --output y.npy
expect target-normalize 'normalize' -- "$brisk" train win.json --set data.windows.target.normalize=1 --out wrun2
expect pipeline-resume 'resume a pipeline' -- "$brisk" train win.json --set 'models=[{"name": "a", "type": "lstm", "inputs": 1, "seq_len": 8, "hidden": 4, "outputs": 3}]' --set model=null --resume wrun/last.safetensors

# checkpoints
cp run/last.safetensors flipped.safetensors
printf '\x55' | dd of=flipped.safetensors bs=1 seek=$(( $(stat -c %s flipped.safetensors) - 9 )) conv=notrunc status=none
expect flipped-ckpt 'flipped.safetensors: checksum mismatch' -- "$brisk" info flipped.safetensors
expect resume-flipped 'flipped.safetensors: checksum mismatch' -- "$brisk" train good.json --resume flipped.safetensors
head -c 50 run/last.safetensors > trunc.safetensors
expect truncated-ckpt 'trunc.safetensors' -- "$brisk" info trunc.safetensors
expect resume-truncated 'trunc.safetensors' -- "$brisk" train good.json --resume trunc.safetensors
sed 's/"hidden": \[32\]/"hidden": [16]/' good.json > other.json
expect other-model 'another shape; changed since it was written: model.hidden: \[32\] -> \[16\] .*; resume with the model settings it was trained with' -- "$brisk" train other.json --resume run/last.safetensors
expect predict-missing 'nope.npy' -- "$brisk" predict run/last.safetensors --input nope.npy --output y.npy
/usr/bin/python3 -c 'import numpy as np; np.save("wide.npy", np.zeros((4, 65), np.float32))' 2>/dev/null &&
  expect predict-shape 'wide.npy: expected an array of shape \[N, 64\]' -- "$brisk" predict run/last.safetensors --input wide.npy --output y.npy
/usr/bin/python3 -c 'import numpy as np; np.save("fortran.npy", np.asfortranarray(np.zeros((4, 64), np.float32)))' 2>/dev/null &&
  expect fortran-order 'fortran.npy' -- "$brisk" predict run/last.safetensors --input fortran.npy --output y.npy

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
