#!/usr/bin/env python3
"""An imported model against the same model built by brisk, side by side on this machine: the
tabular MLP (examples/tabular.json's mlp: 64 -> 512 -> 256 -> 128 -> 3, ReLU, dropout 0.1) and
the ResNet-18 (examples/resnet.json's body at 64x64, batch 32), each also written as a PyTorch
module (torchvision's resnet18 with an 8-output head for the ResNet), exported by
torch.onnx.export in training mode and trained as "model": {"type": "onnx"}. Both sides train
with `brisk train` on the same device and thread count, alternating for --rounds rounds so
that a change in the machine's load falls on both; each run's median compute ms/step (after
--warmup steps, from metrics.jsonl) is taken, and the median over rounds of each side and the
ratio imported / built-in are printed (1.00: as fast). The data pipelines differ (images
decoded from PNG for the built-in ResNet, an .npz for the import): compute time alone is
compared.

  /usr/bin/python3 bench/onnx_vs_builtin.py BRISK [--models mlp,resnet] [--steps 30]
      [--warmup 5] [--rounds 3] [--device cpu|cuda] [--threads N] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("brisk")
ap.add_argument("--models", default="mlp,resnet")
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--device", default="cpu")
ap.add_argument("--threads", type=int, default=0, help="speed.threads (0: brisk's default)")
ap.add_argument("--work", default="")
a = ap.parse_args()
import numpy as np  # noqa: E402
import torch  # noqa: E402

from train_side_by_side import median_compute_ms  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = a.work or tempfile.mkdtemp(prefix="onnx-vs-builtin-")
os.makedirs(work, exist_ok=True)
speed = {"device": a.device, "prefetch": 4, **({"threads": a.threads} if a.threads else {})}
optim = {"type": "adamw", "lr": 1e-3, "weight_decay": 0.01}


def run(cfg, name):
    """brisk train of cfg; the median compute ms of its steps after the warm-up."""
    cfg = dict(cfg, train=dict(cfg["train"], epochs=1000), speed=speed)
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return median_compute_ms(a.brisk, path, os.path.join(work, "runs", name), a.steps, a.warmup, cwd=work)


def export(module, x, name):
    path = os.path.join(work, name + ".onnx")
    torch.onnx.export(module, x, path, opset_version=17, input_names=["x"], output_names=["out"],
                      dynamic_axes={"x": {0: "N"}, "out": {0: "N"}}, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    return path


def pair_mlp():
    subprocess.run([a.brisk, "synth", "tabular", os.path.join(work, "tabular.npz")], check=True, capture_output=True)
    data = {"train": os.path.join(work, "tabular.npz"), "fields": {"x": "x", "y": "y"}, "validation_fraction": 0.1}
    train = {"batch_size": 512, "seed": 0}
    built = {"model": {"type": "mlp", "inputs": 64, "hidden": [512, 256, 128], "outputs": 3, "activation": "relu",
                       "dropout": 0.1, "task": "classify"}, "data": data, "optim": optim, "train": train}
    nn = torch.nn
    net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, 256), nn.ReLU(), nn.Dropout(0.1),
                        nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 3))
    imported = {"model": {"type": "onnx", "file": export(net, torch.randn(2, 64), "mlp"),
                          "inputs": [{"name": "x", "shape": [64]}, {"name": "y", "shape": [], "dtype": "i32"}],
                          "losses": [{"output": "out", "target": "y", "type": "cross_entropy"}]},
                "data": data, "optim": optim, "train": train}
    return built, imported


def pair_resnet():
    import torchvision
    subprocess.run([a.brisk, "synth", "images", os.path.join(work, "images")], check=True, capture_output=True)
    with open(os.path.join(root, "examples", "resnet.json")) as f:
        text = "\n".join(line.split("//")[0] for line in f)
    built = json.loads(text)
    built["data"]["images"]["labels"] = os.path.join(work, "images", "labels.csv")
    built["optim"], built["train"] = optim, {"batch_size": 32, "seed": 0}
    net = torchvision.models.resnet18(weights=None)
    net.fc = torch.nn.Linear(512, 8)
    rng = np.random.default_rng(0)
    npz = os.path.join(work, "images.npz")
    np.savez(npz, x=rng.standard_normal([512, 3, 64, 64]).astype(np.float32),
             y=rng.random([512, 8]).astype(np.float32))
    imported = {"model": {"type": "onnx", "file": export(net, torch.randn(2, 3, 64, 64), "resnet18"),
                          "inputs": [{"name": "x", "shape": [3, 64, 64]}, {"name": "y", "shape": [8]}],
                          "losses": [{"output": "out", "target": "y", "type": "mse"}]},
                "data": {"train": npz, "fields": {"x": "x", "y": "y"}, "validation_fraction": 0.2},
                "optim": optim, "train": {"batch_size": 32, "seed": 0}}
    return built, imported


for model in a.models.split(","):
    built, imported = {"mlp": pair_mlp, "resnet": pair_resnet}[model]()
    b, i = [], []
    for r in range(a.rounds):
        b.append(run(built, f"{model}-builtin"))
        i.append(run(imported, f"{model}-onnx"))
        print(json.dumps({"model": model, "round": r + 1, "builtin_ms": round(b[-1], 3), "onnx_ms": round(i[-1], 3)}),
              flush=True)
    mb, mi = statistics.median(b), statistics.median(i)
    print(f"{model}: built-in {mb:.3f} ms/step, imported {mi:.3f} ms/step (compute, medians of {a.rounds} rounds of "
          f"{a.steps} steps, {a.device}); imported / built-in {mi / mb:.3f}")
