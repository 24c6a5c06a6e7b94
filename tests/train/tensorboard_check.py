"""Reads a brisk run directory's event file with TensorBoard's own EventAccumulator and checks
it against metrics.jsonl: every number there (but step and epoch) is a scalar under its key at
its step, equal as a float32, and the event file holds no other scalar; the config and the
optimization report are text-plugin summaries; every parameter has histograms every
log.histogram_every steps, and the last one at the run's last step matches last.safetensors.
    usage: tensorboard_check.py RUN_DIR"""
import glob
import json
import os
import struct
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator as ea

run = sys.argv[1]
files = glob.glob(os.path.join(run, "events.out.tfevents.*"))
assert len(files) == 1, f"expected one event file in {run}, found {files}"
acc = ea.EventAccumulator(files[0], size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0})
acc.Reload()
tags = acc.Tags()

want = {}  # tag -> {step: float32}
cfg = None
for line in open(os.path.join(run, "metrics.jsonl")):
    r = json.loads(line)
    if "event" in r:
        continue
    for k, v in r.items():
        if k in ("step", "epoch") or isinstance(v, (bool, list)) or v is None:
            continue
        assert (r["step"] not in want.setdefault(k, {})), f"{k} twice at step {r['step']}"
        want[k][r["step"]] = np.float32(v)
assert {"loss", "lr", "ms_per_step", "data_ms", "samples_per_s", "copy_ms", "compute_ms", "mem_mib",
        "train_loss", "val_loss", "val_accuracy"} <= set(want), sorted(want)
assert set(tags["scalars"]) == set(want), (sorted(tags["scalars"]), sorted(want))
n = 0
for tag, by_step in want.items():
    got = {e.step: e.value for e in acc.Scalars(tag)}
    assert set(got) == set(by_step), (tag, sorted(got), sorted(by_step))
    for step, v in by_step.items():
        # the accumulator holds the float32 as a Python float: exact equality
        assert np.float32(got[step]) == v and float(got[step]) == float(v), (tag, step, got[step], v)
        n += 1

texts = {}
for tag in ("config", "optimization"):
    assert tag in tags["tensors"], (tag, tags["tensors"])
    assert acc.SummaryMetadata(tag).plugin_data.plugin_name == "text", tag
    (ev,) = acc.Tensors(tag)
    texts[tag] = ev.tensor_proto.string_val[0].decode()
config = json.loads(texts["config"])
assert config["model"]["type"] == "mlp" and config["log"]["histogram_every"] == 4, config
assert texts["optimization"].startswith("active"), texts["optimization"]

# histograms: every parameter every 4 steps; the last step's against the checkpoint
raw = open(os.path.join(run, "last.safetensors"), "rb").read()
hlen = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + hlen])
params = {k: v for k, v in header.items() if k != "__metadata__" and not k.startswith("optim.")}
last_step = int(header["__metadata__"]["step"])
hist_tags = sorted(t for t in tags["histograms"])
assert hist_tags == sorted("params/" + k for k in params), (hist_tags, sorted(params))
for name, info in params.items():
    events = acc.Histograms("params/" + name)
    steps = [e.step for e in events]
    assert steps == list(range(4, last_step + 1, 4)), (name, steps)
    h = events[-1].histogram_value
    a, b = info["data_offsets"]
    w = np.frombuffer(raw[8 + hlen + a:8 + hlen + b], dtype="<f4").astype(np.float64)
    assert h.num == w.size and sum(h.bucket) == w.size, (name, h.num, w.size)
    assert len(h.bucket) == len(h.bucket_limit) == 30, name
    if steps[-1] == last_step:
        assert h.min == w.min() and h.max == w.max(), (name, h.min, w.min(), h.max, w.max())
        assert abs(h.sum - w.sum()) <= 1e-9 * max(1.0, np.abs(w).sum()), (name, h.sum, w.sum())
print(f"tensorboard: {n} scalars in {len(want)} tags equal metrics.jsonl as float32; texts "
      f"{sorted(texts)}; histograms of {len(params)} parameters at steps 4..{steps[-1]}")
