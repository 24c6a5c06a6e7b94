#!/usr/bin/env python3
"""Checks brisk's CONV2D and BATCHNORM (vision_dump's .npz) against PyTorch on identical
data: torch.nn.functional.conv2d outputs and the gradients of sum(y * dy) for several
stride/padding/dilation/groups settings, max_pool2d and avg_pool2d likewise, and
torch.nn.BatchNorm2d + ReLU over 10 training
steps (outputs, gradients of x, weight and bias), its running statistics after them, and
one eval forward. PyTorch computes in float64 from brisk's f32 inputs; tolerance 1e-5
relative per tensor.

  vision_torch.py DUMP.npz
Exit 77 (skip) when PyTorch or NumPy is unavailable."""
import sys


def main():
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"SKIP: {e} (install python3-torch and python3-numpy)")
        return 77
    d = np.load(sys.argv[1])
    t = lambda k: torch.from_numpy(d[k]).double()
    worst, bad = {}, []

    def check(what, got, want, tol=1e-5):
        got, want = np.asarray(got, np.float64), want.detach().numpy()
        r = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
        worst[what.split(" ")[0]] = max(worst.get(what.split(" ")[0], 0.0), r)
        if not r <= tol:
            bad.append(f"{what}: relative error {r:.3g}")

    i = 0
    while f"conv{i}.x" in d.files:
        sh, sw, ph, pw, dh, dw, groups = (int(v) for v in d[f"conv{i}.cfg"])
        x = t(f"conv{i}.x").requires_grad_()
        w = t(f"conv{i}.w").requires_grad_()
        y = F.conv2d(x, w, stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)
        (y * t(f"conv{i}.dy")).sum().backward()
        cfg = f"stride {sh}x{sw} padding {ph}x{pw} dilation {dh}x{dw} groups {groups}"
        check(f"conv.y {cfg}", d[f"conv{i}.y"], y)
        check(f"conv.dx {cfg}", d[f"conv{i}.dx"], x.grad)
        check(f"conv.dw {cfg}", d[f"conv{i}.dw"], w.grad)
        i += 1
    if i == 0:
        bad.append("no conv cases in the dump")

    j = 0
    while f"pool{j}.x" in d.files:
        kind, k, st, pad = (int(v) for v in d[f"pool{j}.cfg"])
        x = t(f"pool{j}.x").requires_grad_()
        pool = F.max_pool2d if kind == 0 else F.avg_pool2d  # avg: count_include_pad, PyTorch's default
        y = pool(x, k, st, pad)
        (y * t(f"pool{j}.dy")).sum().backward()
        cfg = f"{'max' if kind == 0 else 'avg'} {k}/{st}/{pad}"
        check(f"pool.y {cfg}", d[f"pool{j}.y"], y)
        check(f"pool.dx {cfg}", d[f"pool{j}.dx"], x.grad)
        j += 1
    if j == 0:
        bad.append("no pool cases in the dump")

    C = d["bn.weight"].shape[0]
    bn = torch.nn.BatchNorm2d(C, eps=1e-5, momentum=0.1).double()
    with torch.no_grad():
        bn.weight.copy_(t("bn.weight"))
        bn.bias.copy_(t("bn.bias"))
    bn.train()
    s = 0
    while f"bn{s}.x" in d.files:
        bn.zero_grad()
        x = t(f"bn{s}.x").requires_grad_()
        y = torch.relu(bn(x))
        (y * t(f"bn{s}.dy")).sum().backward()
        check(f"bn.y step {s}", d[f"bn{s}.y"], y)
        check(f"bn.dx step {s}", d[f"bn{s}.dx"], x.grad)
        check(f"bn.dweight step {s}", d[f"bn{s}.dweight"], bn.weight.grad)
        check(f"bn.dbias step {s}", d[f"bn{s}.dbias"], bn.bias.grad)
        s += 1
    check("bn.running_mean", d["bn.running_mean"], bn.running_mean)
    check("bn.running_var", d["bn.running_var"], bn.running_var)
    bn.eval()
    with torch.no_grad():
        check("bn.eval_y", d["bn.eval_y"], torch.relu(bn(t("bn.eval_x"))))
    print(f"{i} conv settings, {j} pools, {s} BatchNorm2d steps; worst relative errors: " +
          ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
