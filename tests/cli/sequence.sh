#!/usr/bin/env bash
# The sequence examples end to end: synth series, train examples/lstm.json and
# examples/transformer.json briefly, predict from the raw series and from windows (the same
# numbers), the PyTorch modules of bench/reference/models.py load the checkpoints and predict
# what brisk predicts, and examples/pipeline.json trains its three models and prints the comparison.
#   sequence.sh BRISK_BINARY WORKDIR SOURCE_DIR PYDEPS
set -eu
brisk=$1 work=$2 src=$3 pydeps=$4
py=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work/data" && cd "$work"
"$brisk" synth series data/series.csv --samples 1500 | grep -q "wrote"
small="--batch-size 16 --max-steps 2 --quiet --set data.validation_fraction=0.1"
"$brisk" train "$src/examples/lstm.json" $small --out lstm
"$brisk" info lstm/last.safetensors | grep -q "lstm.weight_hh_l1 *F32 *\[512, 128\]"
"$brisk" info lstm/last.safetensors | grep -q "^normalization"
"$brisk" train "$src/examples/transformer.json" $small --out transformer
"$brisk" predict lstm/last.safetensors --input data/series.csv --output y_series.npy | grep -q "1441 rows"
"$py" - <<'P'
import numpy as np
names = open("data/series.csv").readline().strip().split(",")
raw = np.genfromtxt("data/series.csv", delimiter=",", skip_header=1, dtype=np.float32)
feats = np.ascontiguousarray(raw[:, [names.index(n) for n in names if n != "close"]])
np.save("feats.npy", feats)                           # the series as [rows, features]
w = np.stack([feats[k:k + 60] for k in range(1400, 1441)])
np.save("windows.npy", w)                             # raw windows [N, 60, 32]
P
"$brisk" predict lstm/last.safetensors --input windows.npy --output y_windows.npy >/dev/null
"$brisk" predict lstm/last.safetensors --input feats.npy --output y_feats.npy >/dev/null
"$py" - <<'P'
import numpy as np
s, w, f = np.load("y_series.npy"), np.load("y_windows.npy"), np.load("y_feats.npy")
assert s.shape == (1441, 3) and np.allclose(s.sum(1), 1, atol=1e-5), s.shape
assert np.abs(s[1400:] - w).max() < 1e-6, np.abs(s[1400:] - w).max()
assert np.abs(s - f).max() < 1e-6
print("predict: series, feature array and windows agree")
P
if PYTHONPATH="$pydeps" "$py" -c "import torch, safetensors.numpy" 2>/dev/null; then
  for m in lstm transformer; do
    "$brisk" predict $m/last.safetensors --input windows.npy --output y_$m.npy >/dev/null
    M=$m PYTHONPATH="$pydeps:$src/bench/reference" "$py" - <<'P'
import json, os, numpy as np, torch, safetensors.numpy, models
from safetensors import safe_open
m = os.environ["M"]
path = f"{m}/last.safetensors"
t = safetensors.numpy.load_file(path)
with safe_open(path, "np") as f:
    norm = json.loads(f.metadata()["normalization"])
model = models.LSTMClassifier() if m == "lstm" else models.TransformerClassifier()
model.load_state_dict({k: torch.from_numpy(v) for k, v in t.items() if not k.startswith("optim.")}, strict=True)
model.eval()
x = (np.load("windows.npy") - np.array(norm["mean"], np.float32)) / np.array(norm["std"], np.float32)
with torch.no_grad():
    x = torch.from_numpy(x.astype(np.float32))
    if m == "lstm":
        out, _ = model.lstm(x); logits = model.head(out[:, -1])
    else:
        logits = model.head(model.norm(model.enc(model.proj(x) + model.pos).mean(dim=1)))
p = torch.softmax(logits, dim=1).numpy()
err = np.abs(p - np.load(f"y_{m}.npy")).max()
print(f"{m}: PyTorch on the brisk checkpoint vs brisk predict: max abs difference {err:.2e}")
assert err < 1e-5, err
P
  done
else
  echo "(PyTorch or safetensors missing: the PyTorch load check is skipped)"
fi
"$brisk" train "$src/examples/pipeline.json" $small --out pipe --set 'models[1].layers=1' > pipe.txt
grep -q "^comparison" pipe.txt
for m in lstm transformer mlp; do grep -qE "^  $m +$m " pipe.txt; test -s pipe/$m/last.safetensors; done
"$brisk" predict pipe/mlp/last.safetensors --input windows.npy --output y_mlp.npy | grep -q "41 rows"
echo "1 passed, 0 failed"
