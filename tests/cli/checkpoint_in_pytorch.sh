#!/usr/bin/env bash
# Other tools can load what brisk writes: the Python `safetensors` package reads a brisk
# checkpoint, the PyTorch Tabular of bench/reference/models.py loads it with load_state_dict,
# and its predictions equal `brisk predict`'s on the same rows. Exit 77 (skip) without PyTorch
# or safetensors.
#   checkpoint_in_pytorch.sh BRISK_BINARY WORKDIR PYDEPS SOURCE_DIR
set -eu
brisk=$1 work=$2 pydeps=$3 src=$4
py=/usr/bin/python3
PYTHONPATH="$pydeps" "$py" -c "import torch, safetensors.numpy" 2>/dev/null || { echo "SKIP: needs python3-torch and safetensors in $pydeps"; exit 77; }
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$brisk" synth tabular tab.npz --samples 4096 >/dev/null
cat > tab.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [512, 256, 128], "outputs": 3, "dropout": 0.1},
 "data": {"train": "tab.npz"}, "train": {"batch_size": 256, "epochs": 2, "out_dir": "run"}}
J
"$brisk" train tab.json --quiet
"$py" -c 'import numpy as np; np.save("x.npy", np.random.default_rng(0).standard_normal((100, 64)).astype(np.float32))'
"$brisk" predict run/last.safetensors --input x.npy --output y.npy >/dev/null
PYTHONPATH="$pydeps:$src/bench/reference" "$py" - <<'P'
import numpy as np, torch, safetensors.numpy, models
t = safetensors.numpy.load_file("run/last.safetensors")
model = models.Tabular()
params = {k: torch.from_numpy(v) for k, v in t.items() if not k.startswith("optim.")}
model.load_state_dict(params, strict=True)
model.eval()
with torch.no_grad():
    p = torch.softmax(model.net(torch.from_numpy(np.load("x.npy"))), dim=1).numpy()
y = np.load("y.npy")
err = np.abs(p - y).max()
print(f"PyTorch vs brisk predict on a brisk checkpoint: max abs difference {err:.2e}")
assert err < 1e-5, err
assert set(k[len("optim.exp_avg."):] for k in t if k.startswith("optim.exp_avg.")) == set(params)
print("1 passed, 0 failed")
P
