#!/usr/bin/env bash
# The user's path through the CLI: check, synth, train, info, resume, predict; outputs checked.
#   roundtrip.sh BRISK_BINARY WORKDIR SOURCE_DIR
set -eu
brisk=$1 work=$2 src=$3
rm -rf "$work" && mkdir -p "$work/data" && cd "$work"
"$brisk" check | grep -q "training runs on the"
"$brisk" --help | grep -q "predict"
for c in train predict info synth check; do "$brisk" $c --help | grep -q usage; done
"$brisk" synth tabular data/tabular.npz --samples 8192 | grep -q "wrote"
"$brisk" train "$src/examples/tabular.json" --epochs 1 --out run --quiet
"$brisk" info run/last.safetensors | tee info.txt | grep -q "net.0.weight *F32 *\[512, 64\]"
grep -q "^step *14$" info.txt   # 7373 train samples / 512 = 14 batches x 1 epoch
grep -q "optim.exp_avg_sq.net.9.bias" info.txt
"$brisk" train "$src/examples/tabular.json" --epochs 2 --out run --quiet --resume run/last.safetensors
"$brisk" info run/last.safetensors | grep -q "^step *28$"
test -s run/metrics.jsonl && test -s run/best.safetensors
/usr/bin/python3 -c 'import numpy as np; np.save("x.npy", np.random.randn(300, 64).astype(np.float64))'
"$brisk" predict run/best.safetensors --input x.npy --output y.npy
/usr/bin/python3 -c '
import numpy as np
y = np.load("y.npy"); assert y.shape == (300, 3) and y.dtype == np.float32, y.shape
assert np.allclose(y.sum(1), 1, atol=1e-5), "rows are probabilities"'
echo "1 passed, 0 failed"
