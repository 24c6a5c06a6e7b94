#!/usr/bin/env python3
"""PyTorch beside brisk_bench, step by step: times training steps of a workload of
bench/WORKLOADS.md and prints one JSON line with the median, mean, p95 and worst step time
and, with --epoch-steps N, the time of each block of N steps (an "epoch").

Without shape options the model, data and optimizer are bench/reference/'s own (imported from
there, so they cannot drift from bench/reference/timed.py). The shape options (--width, --seq,
--batch, --heads, --ffn) build the same architectures at other sizes for bench/shape_sweep.py,
as brisk_bench does: --width is the LSTM's hidden size, the Transformer's d_model, or every
hidden layer of the tabular MLP.

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
a = ap.parse_args()

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import torch  # noqa: E402

import models  # noqa: E402
import workloads  # noqa: E402

torch.set_num_threads(a.threads)
torch.manual_seed(0)
reshaped = any((a.width, a.seq, a.batch, a.heads, a.ffn))
if not reshaped:
    model, batch, data = workloads.build(a.workload, False, torch.device("cpu"))
else:
    g = torch.Generator().manual_seed(0)
    w = a.width or {"tabular": 512, "lstm": 128, "transformer": 128}.get(a.workload, 0)
    seq = a.seq or 60
    batch = a.batch or {"tabular": 512, "lstm": 256, "transformer": 256}.get(a.workload, 16)
    if a.workload == "tabular":
        model, shape = models.Tabular(hidden=(w, w, w)), (64,)
    elif a.workload == "lstm":
        model, shape = models.LSTMClassifier(hidden=w), (seq, 32)
    elif a.workload == "transformer":
        model, shape = models.TransformerClassifier(w, seq, heads=a.heads or 4, ffn=a.ffn or 4 * w), (seq, 32)
    else:
        sys.exit("torch_timed.py: shape options are for tabular, lstm and transformer")
    data = [(torch.randn(batch, *shape, generator=g), torch.randint(0, 3, (batch,), generator=g)) for _ in range(8)]
model.train()
opt, _ = workloads.make_optimizer(model, 1e-3, torch.device("cpu"))


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
