#!/usr/bin/env python3
"""PyTorch beside brisk_bench, step by step: times training steps of a workload of
../shared/workloads/torch_ref.py and prints one JSON line with the median, mean, p95 and
worst step time and, with --epoch-steps N, the time of each block of N steps (an "epoch").

Without shape options the model, data and optimizer are torch_ref.py's own (imported from it,
so they cannot drift). The shape options (--width, --seq, --batch, --heads, --ffn) build the
same architectures at other sizes for bench/shape_sweep.py, as brisk_bench does: --width is the
LSTM's hidden size, the Transformer's d_model, or every hidden layer of the tabular MLP.

  torch_timed.py --workload lstm --threads 1 --steps 50 [--epoch-steps 10] [--width 64 ...]
"""
import argparse, json, os, statistics, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--workload", required=True, choices=("diffusion", "tabular", "lstm", "transformer"))
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--epoch-steps", type=int, default=0)
for k in ("width", "seq", "batch", "heads", "ffn"):
    ap.add_argument("--" + k, type=int, default=0)
ap.add_argument("--torch-ref", default=os.environ.get("TORCH_REF", ""))
a = ap.parse_args()

here = os.path.dirname(os.path.abspath(__file__))
ref = a.torch_ref or next((p for p in (os.path.join(here, "../../shared/workloads/torch_ref.py"),
                                        os.path.join(here, "../../../shared/workloads/torch_ref.py"))
                           if os.path.exists(p)), None)
if not ref:
    sys.exit("torch_timed.py: torch_ref.py not found; set TORCH_REF")
sys.path.insert(0, os.path.dirname(os.path.abspath(ref)))
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_ref as R  # noqa: E402

torch.set_num_threads(a.threads)
torch.manual_seed(0)
reshaped = any((a.width, a.seq, a.batch, a.heads, a.ffn))


class MLP(nn.Module):  # torch_ref.Tabular at another width
    def __init__(self, w):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, w), nn.ReLU(), nn.Dropout(0.1), nn.Linear(w, w), nn.ReLU(),
                                 nn.Dropout(0.1), nn.Linear(w, w), nn.ReLU(), nn.Dropout(0.1), nn.Linear(w, 3))

    def loss(self, x, y):
        return F.cross_entropy(self.net(x), y)


class LSTM(nn.Module):  # torch_ref.LSTMClassifier at another width
    def __init__(self, w):
        super().__init__()
        self.lstm = nn.LSTM(32, w, num_layers=2, batch_first=True)
        self.head = nn.Linear(w, 3)

    def loss(self, x, y):
        out, _ = self.lstm(x)
        return F.cross_entropy(self.head(out[:, -1]), y)


class Transformer(nn.Module):  # torch_ref.TransformerClassifier with heads and FFN as options
    def __init__(self, d, seq, heads, ffn):
        super().__init__()
        self.proj = nn.Linear(32, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 3)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 3)

    def loss(self, x, y):
        h = self.enc(self.proj(x) + self.pos)
        return F.cross_entropy(self.head(self.norm(h.mean(dim=1))), y)


if not reshaped:
    model, batch, data = R.build(a.workload, False, torch.device("cpu"))
else:
    g = torch.Generator().manual_seed(0)
    w = a.width or {"tabular": 512, "lstm": 128, "transformer": 128}.get(a.workload, 0)
    seq = a.seq or 60
    batch = a.batch or {"tabular": 512, "lstm": 256, "transformer": 256}.get(a.workload, 16)
    if a.workload == "tabular":
        model, shape = MLP(w), (64,)
    elif a.workload == "lstm":
        model, shape = LSTM(w), (seq, 32)
    elif a.workload == "transformer":
        model, shape = Transformer(w, seq, a.heads or 4, a.ffn or 4 * w), (seq, 32)
    else:
        sys.exit("torch_timed.py: shape options are for tabular, lstm and transformer")
    data = [(torch.randn(batch, *shape, generator=g), torch.randint(0, 3, (batch,), generator=g)) for _ in range(8)]
model.train()
opt, _ = R.make_optimizer(model, 1e-3, torch.device("cpu"))


def step(inputs):
    opt.zero_grad(set_to_none=True)
    loss = model.loss(*inputs)
    loss.backward()
    opt.step()
    return loss


for i in range(a.warmup):
    step(data[i % len(data)])
times = []
for i in range(a.steps):
    t = time.perf_counter()
    step(data[i % len(data)])
    times.append(time.perf_counter() - t)
s = sorted(times)
out = dict(workload=a.workload, impl="torch", threads=torch.get_num_threads(), batch=batch,
           width=a.width, seq=a.seq, heads=a.heads, ffn=a.ffn,
           ms_per_step_median=round(statistics.median(times) * 1e3, 4),
           ms_per_step_mean=round(sum(times) / len(times) * 1e3, 4),
           ms_per_step_p95=round(s[max(0, (len(s) * 95 + 99) // 100 - 1)] * 1e3, 4),
           ms_per_step_max=round(s[-1] * 1e3, 4))
if a.epoch_steps > 0:
    n = a.epoch_steps
    out["epoch_s"] = [round(sum(times[k:k + n]), 5) for k in range(0, len(times) - n + 1, n)]
print(json.dumps(out))
