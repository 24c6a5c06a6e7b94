#!/usr/bin/env bash
# The model options beyond the two sequence workloads of bench/WORKLOADS.md, against PyTorch's
# own modules on a brisk checkpoint (predictions to 1e-5): a bidirectional 2-layer LSTM with
# mean pooling, and a post-LN causal Transformer with sinusoidal positions, tanh-GELU and
# last-step pooling.
# Exit 77 (skip) without PyTorch or safetensors.
#   sequence_variants.sh BRISK_BINARY WORKDIR PYDEPS
set -eu
brisk=$1 work=$2 pydeps=$3
py=/usr/bin/python3
PYTHONPATH="$pydeps" "$py" -c "import torch, safetensors.numpy" 2>/dev/null || { echo "SKIP: needs python3-torch and safetensors in $pydeps"; exit 77; }
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$brisk" synth series series.npz --samples 600 >/dev/null
data='"data": {"train": "series.npz", "validation_fraction": 0.2, "windows": {"features": ["ret_1", "ret_8", "dev_16", "vol_32", "hour_sin"], "length": 12, "horizon": 3, "target": {"column": "close", "thresholds": [-0.001, 0.001]}}}, "train": {"batch_size": 32, "max_steps": 4'
echo "{\"model\": {\"type\": \"lstm\", \"inputs\": 5, \"seq_len\": 12, \"hidden\": 8, \"layers\": 2, \"bidirectional\": true, \"dropout\": 0.2, \"pool\": \"mean\", \"outputs\": 3}, $data, \"out_dir\": \"bi\"}}" > bi.json
echo "{\"model\": {\"type\": \"transformer\", \"inputs\": 5, \"seq_len\": 12, \"width\": 8, \"heads\": 2, \"ffn\": 12, \"layers\": 2, \"norm\": \"post\", \"causal\": true, \"positions\": \"sinusoidal\", \"pool\": \"last\", \"activation\": \"gelu_tanh\", \"outputs\": 3}, $data, \"out_dir\": \"tp\"}}" > tp.json
"$brisk" train bi.json --quiet
"$brisk" train tp.json --quiet
"$py" -c "
import numpy as np
z = np.load('series.npz'); f = np.stack([z[n] for n in ['ret_1', 'ret_8', 'dev_16', 'vol_32', 'hour_sin']], 1).astype(np.float32)
np.save('w.npy', np.stack([f[k:k + 12] for k in range(0, 580, 7)]))"
"$brisk" predict bi/last.safetensors --input w.npy --output ybi.npy >/dev/null
"$brisk" predict tp/last.safetensors --input w.npy --output ytp.npy >/dev/null
PYTHONPATH="$pydeps" "$py" - <<'P'
import json, math, numpy as np, torch, torch.nn.functional as F, safetensors.numpy
from safetensors import safe_open

def load(path):
    t = {k: torch.from_numpy(v) for k, v in safetensors.numpy.load_file(path).items() if not k.startswith("optim.")}
    with safe_open(path, "np") as f:
        n = json.loads(f.metadata()["normalization"])
    x = (np.load("w.npy") - np.array(n["mean"], np.float32)) / np.array(n["std"], np.float32)
    return t, torch.from_numpy(x.astype(np.float32))

def sub(t, prefix):
    return {k[len(prefix):]: v for k, v in t.items() if k.startswith(prefix)}

t, x = load("bi/last.safetensors")
lstm, head = torch.nn.LSTM(5, 8, num_layers=2, batch_first=True, bidirectional=True, dropout=0.2), torch.nn.Linear(16, 3)
lstm.load_state_dict(sub(t, "lstm."), strict=True); head.load_state_dict(sub(t, "head."), strict=True)
lstm.eval()
with torch.no_grad():
    p = torch.softmax(head(lstm(x)[0].mean(1)), 1).numpy()
e1 = np.abs(p - np.load("ybi.npy")).max()

t, x = load("tp/last.safetensors")
layer = torch.nn.TransformerEncoderLayer(8, 2, 12, dropout=0.1, activation=lambda v: F.gelu(v, approximate="tanh"),
                                         batch_first=True, norm_first=False)
enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
proj, norm, head = torch.nn.Linear(5, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3)
for m, pre in ((enc, "enc."), (proj, "proj."), (norm, "norm."), (head, "head.")):
    m.load_state_dict(sub(t, pre), strict=True)
enc.eval()
T, d = 12, 8
pe = torch.tensor([[math.cos(p / 10000 ** ((i - i % 2) / d)) if i % 2 else math.sin(p / 10000 ** ((i - i % 2) / d))
                    for i in range(d)] for p in range(T)], dtype=torch.float32)
with torch.no_grad():
    h = enc(proj(x) + pe, mask=torch.triu(torch.full((T, T), float("-inf")), diagonal=1))
    p = torch.softmax(head(norm(h[:, -1])), 1).numpy()
e2 = np.abs(p - np.load("ytp.npy")).max()
print(f"bidirectional LSTM (mean pool): {e1:.2e}; post-LN causal transformer (sinusoidal, last): {e2:.2e} max abs difference")
assert e1 < 1e-5 and e2 < 1e-5
print("1 passed, 0 failed")
P
