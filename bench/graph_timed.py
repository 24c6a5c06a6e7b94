#!/usr/bin/env python3
"""PyTorch beside `brisk_bench --config CONFIG.json`, step by step: a graph model's config built
as the PyTorch module bench/reference/graph.py makes of it (the module tests/reference/
check_graph.py holds brisk's gradients against), trained with AdamW (the config's lr and weight
decay) at the config's batch on synthetic batches resident in memory (8 of them, standard normal
floats, labels below the class count), after warm-up steps; prints one JSON line with the keys
brisk_bench prints (ms_per_step_median, ...). CPU only.

  /usr/bin/python3 bench/graph_timed.py --config examples/gru_regressor.json --threads 2 --steps 30
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import torch  # noqa: E402

import graph  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--config", required=True)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--batch", type=int, default=0, help="instead of the config's train.batch_size")
a = ap.parse_args()

torch.set_num_threads(a.threads)
torch.manual_seed(0)
cfg = graph.read_config(a.config)
spec = cfg["model"]
shapes = {i["name"]: list(i["shape"]) for i in spec["inputs"]}
model = graph.GraphModel(spec, shapes)
model.train()
batch = a.batch or cfg.get("train", {}).get("batch_size", 32)
opt_cfg = cfg.get("optim", {})
opt = torch.optim.AdamW(model.parameters(), lr=opt_cfg.get("lr", 1e-3), weight_decay=opt_cfg.get("weight_decay", 0.01))
# labels below the class count of the output a cross entropy reads (its last dim)
classes = {ls["target"]: model.shapes[ls["output"]][-1] for ls in spec["losses"] if ls["type"] == "cross_entropy"}
g = torch.Generator().manual_seed(0)


def sample(i):
    if i.get("dtype") == "i32":
        return torch.randint(0, classes.get(i["name"], 3), [batch] + list(i["shape"]), generator=g)
    return torch.randn([batch] + list(i["shape"]), generator=g)


data = [{i["name"]: sample(i) for i in spec["inputs"]} for _ in range(8)]


def step(inputs):
    opt.zero_grad(set_to_none=True)
    loss = model.loss(model(inputs))
    loss.backward()
    opt.step()
    return loss


for k in range(a.warmup):
    step(data[k % len(data)])
times = []
for k in range(a.steps):
    t = time.perf_counter()
    step(data[k % len(data)])
    times.append(time.perf_counter() - t)
s = sorted(times)
print(json.dumps(dict(workload=os.path.basename(a.config), impl="torch", torch=torch.__version__,
                      threads=torch.get_num_threads(), batch=batch,
                      params=sum(p.numel() for p in model.parameters()),
                      ms_per_step_median=round(statistics.median(times) * 1e3, 4),
                      ms_per_step_min=round(s[0] * 1e3, 4),
                      ms_per_step_mean=round(sum(times) / len(times) * 1e3, 4),
                      ms_per_step_p95=round(s[max(0, (len(s) * 95 + 99) // 100 - 1)] * 1e3, 4))))
