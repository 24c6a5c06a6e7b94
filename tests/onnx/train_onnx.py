#!/usr/bin/env python3
"""Imported ONNX models trained by `brisk train` and by PyTorch from the same weights.

Each module is exported by torch.onnx.export in training mode (BatchNorm kept, initializers
named as the state_dict), brisk's step-0 checkpoint must hold exactly the state_dict's float
entries with the module's values, and 50 full-batch SGD steps (momentum 0.9, fp32 on the CPU)
must give PyTorch's losses step by step to 1e-5 relative (or, where PyTorch's fp32 trajectory
is itself further than that from its fp64 one, within twice that distance). The modules of a
group live in cases_GROUP.py (cases(torch): a list of Case); the group "basic" also checks two
bad models: one of unsupported ops (one error naming each) and one whose input shape is not known;
a group's refused(torch) lists modules that brisk must refuse with a given error.
  train_onnx.py BRISK WORKDIR [GROUP]   (GROUP: basic by default)
Exit 77 (skip) when PyTorch or NumPy is unavailable."""
import json
import os
import shutil
import subprocess
import sys

# the harness's settings and its judgement of a trajectory are train_graph.py's
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from train_graph import SPEED, STEPS, judge, other_orders  # noqa: E402
from train_graph import read_safetensors as read_all  # noqa: E402

N, LR = 32, 0.01


def read_safetensors(path, np):
    """The checkpoint's float tensors but the optimizer's state."""
    return {k: v for k, v in read_all(path, np).items() if v.dtype == np.float32 and not k.startswith("optim.")}


def brisk_train(brisk, path):
    r = subprocess.run([brisk, "train", path], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def run_case(brisk, work, np, torch, case):
    name, module, sample = case.name, case.module, case.sample
    N, LR = case.n, case.lr
    d = os.path.join(work, name)
    os.makedirs(d)
    torch.manual_seed(0)
    rng = np.random.default_rng(5)
    if case.vocab:  # integer ids (an embedding's input)
        x0 = torch.randint(0, case.vocab, [2] + sample)
        x = rng.integers(0, case.vocab, size=[N] + sample).astype(np.int32)
    else:
        x0 = torch.randn([2] + sample)
        x = rng.standard_normal([N] + sample).astype(np.float32)
    torch.onnx.export(module, x0, os.path.join(d, "net.onnx"), opset_version=case.opset, input_names=["x"],
                      output_names=["out"], dynamic_axes={"x": {0: "N"}, "out": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    if case.classes:
        y = rng.integers(0, case.classes, size=[N]).astype(np.int32)
        target = {"name": "y", "shape": [], "dtype": "i32"}
    else:
        y = rng.standard_normal([N] + case.target).astype(np.float32)
        target = {"name": "y", "shape": case.target}
    data = {"x": x, "y": y}
    np.savez(os.path.join(d, "data.npz"), **data)
    x_in = {"name": "x", "shape": sample}
    if case.vocab:
        x_in["dtype"] = "i32"
    loss = "cross_entropy" if case.classes else "mse"

    def config(steps, out):
        return {"model": {"type": "onnx", "file": "net.onnx",
                          "inputs": [x_in, target],
                          "losses": [{"output": "out", "target": "y", "type": loss}]},
                "data": {"train": "data.npz", "fields": {"x": "x", "y": "y"}, "validation_fraction": 0,
                         "shuffle": False},
                "train": {"batch_size": N, "max_steps": steps, "log_every": 1, "seed": 3, "out_dir": os.path.join(d, out)},
                "optim": {"type": "sgd", "lr": LR, "momentum": 0.9, "schedule": {"type": "constant"}},
                "speed": SPEED}

    for steps, out in ((0, "init"), (STEPS, "run")):
        path = os.path.join(d, out + ".json")
        with open(path, "w") as f:
            json.dump(config(steps, out), f)
        rc, log = brisk_train(brisk, path)
        if rc != 0:
            print(f"FAIL: {name}: brisk train {path} exited {rc}:\n{log[-3000:]}")
            return 1
    p0 = read_safetensors(os.path.join(d, "init", "step-00000000.safetensors"), np)
    sd = {k: v for k, v in module.state_dict().items() if v.dtype == torch.float32}
    if sorted(p0) != sorted(sd):
        print(f"FAIL: {name}: checkpoint names {sorted(p0)} differ from the state_dict's {sorted(sd)}")
        return 1
    for k, v in sd.items():
        if not np.array_equal(p0[k].reshape(v.shape), v.numpy()):
            print(f"FAIL: {name}: checkpoint '{k}' is not the exported value")
            return 1
    losses = {}
    with open(os.path.join(d, "run", "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("loss") is not None and "step" in rec:
                losses[rec["step"]] = rec["loss"]
    if sorted(losses) != list(range(1, STEPS + 1)):
        print(f"FAIL: {name}: metrics.jsonl has the losses of steps {sorted(losses)[:5]}..")
        return 1
    start = {k: v.clone() for k, v in module.state_dict().items()}

    def trajectory(dtype, order=None):
        module.load_state_dict(start)
        m = module.to(dtype)
        m.train()
        opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=0.9)
        x = torch.from_numpy(data["x"] if order is None else data["x"][order])
        x = x.long() if case.vocab else x.to(dtype)
        y = torch.from_numpy(data["y"] if order is None else data["y"][order])
        y = y.long() if case.classes else y.to(dtype)
        lossf = torch.nn.functional.cross_entropy if case.classes else torch.nn.functional.mse_loss
        out = []
        for _ in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = lossf(m(x), y)
            loss.backward()
            opt.step()
            out.append(float(loss))
        return out

    t32, t64 = trajectory(torch.float32), trajectory(torch.float64)
    # fp32's own spread on this trajectory, as train_graph.py sees it. A trajectory through
    # ReLUs and BatchNorm is chaotic: ResNet-18's fp32 run was 3.7e-5 from fp64 in one run and
    # 1.2e-3 in another (PyTorch's threads), and brisk, whose sums run in its own orders, 1.5e-3.
    more32 = [trajectory(torch.float32, o) for o in other_orders(len(data["x"]), np)]
    worst, _, worst32, worst64, bound = judge(losses, t32, t64, more32)
    print(f"{name}: step-0 checkpoint = state_dict ({len(sd)} tensors); {STEPS} steps, losses {losses[1]:.6f} .. "
          f"{losses[STEPS]:.6f}; worst relative difference to PyTorch fp32 {worst:.2e}, to fp64 {worst64:.2e} "
          f"(PyTorch fp32 from fp64 {worst32:.2e}; bound {bound:.1e})")
    if worst > bound or worst64 > bound:
        print(f"FAIL: {name}: a step's loss differs by more than {bound:.2e}")
        return 1
    return 0


def bad_models(brisk, work, torch):
    nn = torch.nn
    d = os.path.join(work, "bad")
    os.makedirs(d)

    class Odd(nn.Module):
        def forward(self, x):
            return torch.floor(torch.sin(x)).cumsum(1)

    torch.onnx.export(Odd(), torch.randn(2, 3), os.path.join(d, "odd.onnx"), opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}})

    class Many(nn.Module):  # more op types than brisk lists in one error (16): it says so
        def forward(self, x):
            F = nn.functional
            for f in (torch.sin, torch.cos, torch.tan, torch.asin, torch.acos, torch.atan, F.selu, F.celu,
                      F.hardsigmoid, F.hardswish, F.elu, F.softplus, torch.floor, torch.ceil, torch.round,
                      torch.sign, lambda v: v.cumsum(1), torch.isnan):
                x = f(x)
            return x.float()

    torch.onnx.export(Many(), torch.randn(2, 3), os.path.join(d, "many.onnx"), opset_version=14, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}})

    class Lin(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    torch.onnx.export(Lin(), torch.randn(2, 3), os.path.join(d, "dyn.onnx"), opset_version=13, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N", 1: "F"}})
    return sum(expect_error(brisk, d, model, want) for model, want in (
        ("odd", ["Sin", "Floor", "CumSum", "opset 13"]), ("dyn", ["input 'x'", "[N, F]", "shape"]),
        ("many", ["of more than 16 op types", "Sin (1 node", "and nodes of other types"])))


def expect_error(brisk, d, model, want):
    """brisk train of d/model.onnx fails with one error holding each of `want`."""
    path = os.path.join(d, model + ".json")
    with open(path, "w") as f:
        json.dump({"model": {"type": "onnx", "file": model + ".onnx",
                             "losses": [{"output": "y", "target": "x", "type": "mse"}]},
                   "data": {"train": "none.npz"}}, f)
    rc, log = brisk_train(brisk, path)
    missing = [w for w in want if w not in log]
    if rc == 0 or missing or "Segmentation" in log:
        print(f"FAIL: bad model {model}: exit {rc}, the error lacks {missing}:\n{log[-2000:]}")
        return 1
    print(f"bad model {model}: {log.strip().splitlines()[-1][:300]}")
    return 0


def refused(brisk, work, torch, bad):
    """A group's modules that brisk must refuse, each (name, module, sample shape, words its
    error must hold), exported as the trained ones are."""
    d = os.path.join(work, "refused")
    os.makedirs(d)
    fails = 0
    for name, module, sample, want in bad:
        torch.onnx.export(module, torch.randn([2] + sample), os.path.join(d, name + ".onnx"), opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        fails += expect_error(brisk, d, name, want)
    return fails


def eval_export(brisk, work, np, torch):
    """A module exported for inference (eval mode, torch's default constant folding) trains,
    with one warning saying what that export did (BatchNorm folded into the convolution under
    a made-up name, Dropout gone) and how to export for training."""
    nn = torch.nn
    d = os.path.join(work, "eval")
    os.makedirs(d)
    net = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.2), nn.Flatten(),
                        nn.Linear(64, 3)).eval()
    torch.onnx.export(net, torch.randn(2, 2, 4, 4), os.path.join(d, "net.onnx"), opset_version=17, input_names=["x"],
                      output_names=["out"], dynamic_axes={"x": {0: "N"}})
    rng = np.random.default_rng(1)
    np.savez(os.path.join(d, "data.npz"), x=rng.standard_normal([16, 2, 4, 4]).astype(np.float32),
             y=rng.integers(0, 3, size=[16]).astype(np.int32))
    path = os.path.join(d, "eval.json")
    with open(path, "w") as f:
        json.dump({"model": {"type": "onnx", "file": "net.onnx",
                             "inputs": [{"name": "x", "shape": [2, 4, 4]}, {"name": "y", "shape": [], "dtype": "i32"}],
                             "losses": [{"output": "out", "target": "y", "type": "cross_entropy"}]},
                   "data": {"train": "data.npz", "fields": {"x": "x", "y": "y"}},
                   "train": {"batch_size": 8, "max_steps": 2, "out_dir": os.path.join(d, "run")}, "speed": SPEED}, f)
    rc, log = brisk_train(brisk, path)
    want = ["warning", "exported for inference", "onnx::Conv", "BatchNorm is folded", "TrainingMode.TRAINING"]
    missing = [w for w in want if w not in log]
    if rc != 0 or missing:
        print(f"FAIL: an eval-mode export: exit {rc}, the log lacks {missing}:\n{log[-2000:]}")
        return 1
    print("eval-mode export: trains, and says: " + next(l for l in log.splitlines() if "exported for inference" in l)[:200])
    return 0


class Case:
    """One module: its input x per sample (`sample`; integer ids below `vocab` when vocab is
    set, else floats) and its target: a class of `classes` (cross-entropy) or, with classes 0,
    floats of shape `target` (mean squared error). n samples, one full batch, and SGD at lr
    (defaults: N and LR above)."""

    def __init__(self, name, module, sample, classes=0, target=None, vocab=0, opset=17, n=N, lr=LR):
        self.name, self.module, self.sample, self.classes = name, module, sample, classes
        self.target, self.vocab, self.opset, self.n, self.lr = target or [], vocab, opset, n, lr


def main():
    brisk, work = sys.argv[1], sys.argv[2]
    group = sys.argv[3] if len(sys.argv) > 3 else "basic"
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.manual_seed(0)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    group_module = __import__("cases_" + group)
    cases = group_module.cases(torch, Case)
    if not cases and not hasattr(group_module, "refused"):
        return 77  # the group needs what this machine lacks (cases() said what)
    fails = sum(run_case(brisk, work, np, torch, c) for c in cases)
    if hasattr(group_module, "refused"):
        fails += refused(brisk, work, torch, group_module.refused(torch))
    if group == "basic":
        fails += bad_models(brisk, work, torch) + eval_export(brisk, work, np, torch)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
