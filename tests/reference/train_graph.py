#!/usr/bin/env python3
"""A graph example trained by `brisk train` and by PyTorch from the same weights, step by step.

The example's model is kept and its data replaced by random arrays of its inputs' shapes (N, 32
unless given, samples in an .npz; integer inputs, class labels and indices, in {0, 1}); dropout is set to 0.
brisk writes its step-0 checkpoint (train.max_steps 0), then trains 50 full-batch steps (no
shuffle, no validation split, no normalisation, SGD at a constant learning rate that keeps the
loss far from 0, where a nearly zero loss has a large relative rounding error; fp32 on the CPU) with
the loss of every step in metrics.jsonl. The module bench/reference/graph.py builds from the
same config loads that checkpoint and takes the same 50 steps with torch.optim.SGD (momentum
0.9; AdamW's division by the root of tiny second moments turns fp32 rounding into whole
updates, so a trajectory comparison of 50 steps measures rounding, not the model), in fp32 and
in fp64. Each step's loss must agree with PyTorch's to 1e-5 relative, or, where PyTorch's own
fp32 trajectory is further than that from its fp64 one (BatchNorm's batch sums), within twice
that distance.
  train_graph.py BRISK CONFIG.json WORKDIR [LR [N]]
Exit 77 (skip) when PyTorch or NumPy is unavailable."""
import json
import os
import shutil
import struct
import subprocess
import sys

STEPS, N, LR = 50, 32, 0.01


# BRISK_TEST_DEVICE=cuda (tools/gpu-session.sh, stage torchref; tests/onnx/train_onnx.py takes
# these too): brisk trains on the GPU in fp32 without TF32 and is held to 1e-4 (cuBLAS's and
# cuDNN's sums run in other orders); PyTorch's trajectories stay on the CPU.
DEVICE = os.environ.get("BRISK_TEST_DEVICE", "cpu")
SPEED = {"device": DEVICE, "precision": "fp32", **({"tf32": False} if DEVICE == "cuda" else {})}
TOL = 1e-4 if DEVICE == "cuda" else 1e-5

def judge(losses, t32, t64, more32=()):
    """brisk's losses (by step, from 1) against PyTorch's fp32 and fp64 trajectories: the worst
    relative difference to fp32 and its step, PyTorch's own fp32 from fp64, brisk from fp64, and
    the bound: TOL, unless fp32 itself is not that exact on this trajectory (BatchNorm's batch
    sums): then brisk must be as close to the fp64 losses as PyTorch's fp32 is, within a factor 2.
    more32, more fp32 trajectories of the same steps summed in other orders (the batch's samples
    permuted), show more of fp32's spread: the furthest from fp64 sets it."""
    worst = worst32 = worst64 = 0.0
    at = 0
    for s in range(1, len(t32) + 1):
        e = abs(losses[s] - t32[s - 1]) / max(abs(t32[s - 1]), 1e-30)
        e64 = abs(losses[s] - t64[s - 1]) / abs(t64[s - 1])
        e32 = max(abs(t[s - 1] - t64[s - 1]) / abs(t64[s - 1]) for t in [t32, *more32])
        if os.environ.get("TRAIN_GRAPH_VERBOSE"):
            print(s, losses[s], t32[s - 1], t64[s - 1], e, e64, e32)
        if e > worst:
            worst, at = e, s
        worst32, worst64 = max(worst32, e32), max(worst64, e64)
    return worst, at, worst32, worst64, max(TOL, 2 * worst32)


def other_orders(n, np):
    """The batch's samples reversed and in two shuffled orders: fp32 trajectories over them are
    the same sums rounded in other orders, fp32's own spread for judge's more32."""
    return [np.arange(n)[::-1].copy()] + [np.random.default_rng(s).permutation(n) for s in (1, 2)]


def read_safetensors(path, np):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        blob = f.read()
    types = {"F32": np.float32, "I32": np.int32, "I64": np.int64}
    out = {}
    for k, v in head.items():
        if k == "__metadata__" or v["dtype"] not in types:
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(blob[a:b], dtype=types[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def main():
    brisk, cfg_path, work = sys.argv[1], sys.argv[2], sys.argv[3]
    global LR, N
    if len(sys.argv) > 4:
        LR = float(sys.argv[4])
    if len(sys.argv) > 5:
        N = int(sys.argv[5])
    import reference_env
    env = reference_env.load()
    if env is None:
        return 77
    np, torch = env
    import graph
    spec = graph.read_config(cfg_path)["model"]
    for L in spec["layers"]:
        if L["op"] == "dropout":
            L["p"] = 0.0
        elif "dropout" in L:
            L["dropout"] = 0.0
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(11)
    data = {}
    for i in spec["inputs"]:
        shape = [N] + list(i["shape"])
        if i.get("dtype", "f32") == "i32":
            data[i["name"]] = rng.integers(0, 2, size=shape).astype(np.int32)
        else:
            data[i["name"]] = rng.random(shape, dtype=np.float32)
    np.savez(os.path.join(work, "data.npz"), **data)

    def config(steps, out):
        return {"model": spec,
                "data": {"train": os.path.join(work, "data.npz"), "fields": {k: k for k in data},
                         "validation_fraction": 0, "shuffle": False},
                "train": {"batch_size": N, "max_steps": steps, "log_every": 1, "seed": 3,
                          "out_dir": os.path.join(work, out)},
                "optim": {"type": "sgd", "lr": LR, "momentum": 0.9, "schedule": {"type": "constant"}},
                "speed": SPEED}

    for steps, out in ((0, "init"), (STEPS, "run")):
        path = os.path.join(work, out + ".json")
        with open(path, "w") as f:
            json.dump(config(steps, out), f)
        r = subprocess.run([brisk, "train", path], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL: brisk train {path} exited {r.returncode}:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
            return 1
    p0 = read_safetensors(os.path.join(work, "init", "step-00000000.safetensors"), np)
    losses = {}
    with open(os.path.join(work, "run", "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if "loss" in rec and "step" in rec and rec.get("loss") is not None:
                losses[rec["step"]] = rec["loss"]
    if sorted(losses) != list(range(1, STEPS + 1)):
        print(f"FAIL: metrics.jsonl has the losses of steps {sorted(losses)[:5]}..., expected 1..{STEPS}")
        return 1

    def trajectory(dtype, order=None):
        """The losses of STEPS steps of the torch module from brisk's step-0 weights (order: the
        batch's samples in that order, the same sums in another order)."""
        model = graph.GraphModel(spec, {i["name"]: list(i["shape"]) for i in spec["inputs"]}).to(dtype)
        named = model.named()
        missing = sorted(set(named) - set(p0))
        if missing:
            raise SystemExit(f"FAIL: the step-0 checkpoint lacks {missing}")
        with torch.no_grad():
            for k, t in named.items():
                t.copy_(torch.from_numpy(p0[k]).reshape(t.shape).to(t.dtype))
        model.train()
        params = [t for t in named.values() if isinstance(t, torch.nn.Parameter)]
        opt = torch.optim.SGD(params, lr=LR, momentum=0.9)
        ins = {k: torch.from_numpy(v if order is None else v[order]) for k, v in data.items()}
        ins = {k: v.to(dtype) if v.dtype == torch.float32 else v for k, v in ins.items()}
        out = []
        for s in range(STEPS):
            opt.zero_grad(set_to_none=True)
            loss = model.loss(model(ins))
            loss.backward()
            opt.step()
            out.append(float(loss))
        return out

    t32, t64 = trajectory(torch.float32), trajectory(torch.float64)
    # fp32's own rounding on this trajectory, seen four times: the batch as given, reversed and
    # in two shuffled orders (the same sums, rounded in other orders)
    orders = other_orders(len(next(iter(data.values()))), np)
    worst, at, worst32, worst64, bound = judge(losses, t32, t64, [trajectory(torch.float32, o) for o in orders])
    name = os.path.basename(cfg_path)
    print(f"{name}: {STEPS} full-batch steps from brisk's step-0 checkpoint, losses {losses[1]:.6f} .. "
          f"{losses[STEPS]:.6f}; worst relative difference to PyTorch {worst:.2e} (step {at}); "
          f"from PyTorch in fp64 {worst64:.2e}, PyTorch's own fp32 from its fp64 {worst32:.2e}")
    if worst > bound or worst64 > bound:
        print(f"FAIL: a step's loss differs by more than {bound:.2e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
