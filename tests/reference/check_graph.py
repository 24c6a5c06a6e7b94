#!/usr/bin/env python3
"""Replays ref_dump's run of a graph model (ref_dump graph CONFIG.json DUMP.npz) with the
PyTorch module bench/reference/graph.py builds from the same config, on identical weights
and batches: outputs, losses, each step's whole gradient and (AdamW runs) the final parameters
to 1e-5 relative, each gradient tensor to 1e-4 (a bias gradient that is a nearly cancelling
sum has large relative rounding in any fp32 sum), fp32 on the CPU with dropout off. A model with BatchNorm runs 10 batches in
training mode on fixed weights (see ref_dump.c): gradients and running statistics to 1e-4
(sums of a small batch that nearly cancel; PyTorch's own fp32 and fp64 differ at 1e-5 there).
  check_graph.py CONFIG.json DUMP.npz [--winograd]
--winograd: brisk ran 1-D convolutions by Winograd F(4, r) (its default on the CPU). Outputs,
losses and gradients are held as above; the final parameters to 1e-4: a weight whose gradient
is exactly zero in a direct sum (a kernel tap that reads only padding where the output
gradient is nonzero, a channel whose ReLU is dead but at the edges) gets rounding noise of
~1e-9 by Winograd's transforms, and AdamW's division by the root of its second moment
(eps 1e-8) turns that into steps of ~0.1 lr that PyTorch's direct sum never takes (the 1-D
CNN: 27 of 20480 elements of conv2.weight, one output channel's last two taps, 6.6e-5 apart
after 20 steps).
Exit 77 (skip) when PyTorch or NumPy is unavailable."""
import os
import sys


def main():
    cfg_path, dump = sys.argv[1], sys.argv[2]
    winograd = "--winograd" in sys.argv[3:]
    import reference_env
    env = reference_env.load()
    if env is None:
        return 77
    np, torch = env
    import graph
    d = np.load(dump)
    spec = graph.read_config(cfg_path)["model"]
    model = graph.GraphModel(spec, {i["name"]: list(i["shape"]) for i in spec["inputs"]})
    named = model.named()
    p0 = {k[3:]: d[k] for k in d.files if k.startswith("p0.")}
    if set(p0) != set(named):
        print(f"FAIL: parameter names differ: brisk only {sorted(set(p0) - set(named))}, "
              f"PyTorch only {sorted(set(named) - set(p0))}")
        return 1
    with torch.no_grad():
        for k, t in named.items():
            if tuple(t.shape) != p0[k].shape:
                print(f"FAIL: {k}: brisk {p0[k].shape}, PyTorch {tuple(t.shape)}")
                return 1
            t.copy_(torch.from_numpy(p0[k]))
    fixed = any(L["op"] == "batchnorm" for L in spec["layers"])
    model.train() if fixed else model.eval()
    params = {k: t for k, t in named.items() if isinstance(t, torch.nn.Parameter)}
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)

    def rel(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))

    first_ce = next((l["output"] for l in spec["losses"] if l["type"] == "cross_entropy"), spec["outputs"][0])
    worst = {"output": 0.0, "loss": 0.0, "grad": 0.0, "grad tensor": 0.0, "final": 0.0}
    worst_at = (0, "")
    steps = len(d["losses"])
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        ins = {i["name"]: torch.from_numpy(d[f"batch{s}.{i['name']}"]) for i in spec["inputs"]}
        v = model(ins)
        loss = model.loss(v)
        worst["output"] = max(worst["output"], rel(d[f"out{s}"], v[first_ce].detach().numpy()))
        loss.backward()
        worst["loss"] = max(worst["loss"], abs(float(loss) - float(d["losses"][s])) / abs(float(loss)))
        num = den = 0.0
        for name, p in params.items():
            mine, theirs = d[f"grad{s}.{name}"].astype(np.float64), p.grad.numpy().astype(np.float64)
            num, den = num + float(np.sum((mine - theirs) ** 2)), den + float(np.sum(theirs ** 2))
            e = rel(mine, theirs)
            if e > worst["grad tensor"]:
                worst["grad tensor"], worst_at = e, (s, name)
        worst["grad"] = max(worst["grad"], (num / max(den, 1e-300)) ** 0.5)
        if not fixed:
            opt.step()
    for name, t in named.items():
        worst["final"] = max(worst["final"], rel(d[f"final.{name}"], t.detach().numpy()))
    what = "batches in training mode, fixed weights" if fixed else "AdamW steps"
    print(f"{os.path.basename(cfg_path)}: {steps} {what}, torch {torch.__version__}: max relative error outputs "
          f"{worst['output']:.2e}, loss {worst['loss']:.2e}, gradients {worst['grad']:.2e} (one tensor "
          f"{worst['grad tensor']:.2e}: step {worst_at[0]}, {worst_at[1]}), final parameters"
          f"{' and running statistics' if fixed else ''} {worst['final']:.2e}")
    tol = 1e-4 if fixed else 1e-5
    # a tensor's own error may reach 1e-4: a bias whose gradient is a sum that nearly cancels
    # (the output layer's, once the model fits the mean) has large relative rounding in any fp32 sum
    bad = {k: x for k, x in worst.items()
           if not x <= (1e-4 if k == "grad tensor" or (k == "final" and winograd) else tol)}
    if bad:
        print(f"FAIL: above {tol:g}: {bad}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
