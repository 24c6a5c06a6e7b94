#!/usr/bin/env python3
"""The gradient error a ReLU network shows in reduced precision with no bug at all: the
bound behind tests/backend/test_cuda_grad.c's tolerance for its ReLU models.

Emulates the CUDA backend's 16-bit (and TF32) path for the test's "mlp relu + dropout"
model (48 -> 64 -> 40 -> 5, ReLU and dropout 0.2 after each hidden layer, cross entropy,
batch 32, torch.nn.Linear's init, inputs in [-2, 2)): every GEMM operand, forward and
backward, rounded to `bits` significant bits (bf16 8, fp16 and TF32 11; no range limits,
as fp16's loss scale keeps the gradients in range), sums exact then rounded to f32,
everything else f32. The reference is the same model in float64 with the same weights,
batch and dropout masks. Prints the relative error norm of each parameter's gradient over
many draws, and the same run with the reference's ReLU masks forced.

What it shows: a pre-activation within the operand rounding of 0 can take the other sign
(probability ~ u per unit for unit roundoff u: 2.6 of this model's 3328 ReLU units on
average in bf16, 0.33 with 11 bits), and a flipped unit passes or stops its whole
backward contribution, so the gradients behind a ReLU err by ~ sqrt(flipped fraction)
instead of ~ u: a median of 0.05 for bf16, with the masks forced 0.004 (what smooth
activations show).

    python3 tools/gpu/relu_lowp_error.py [--draws 20000] [--bits 8 11]
"""
import argparse

import numpy as np

WIDTHS = (48, 64, 40, 5)
BATCH, DROPOUT = 32, 0.2


def rnd(t, bits):
    """t with `bits` significant bits, round to nearest even (None: unchanged)"""
    if bits is None:
        return t
    m, e = np.frexp(t)
    return np.ldexp(np.rint(m * 2.0 ** bits) / 2.0 ** bits, e)


def f32(t):
    return t.astype(np.float32).astype(np.float64)


def draw(seed):
    r = np.random.default_rng(seed)
    ws, bs = [], []
    for i in range(len(WIDTHS) - 1):
        bound = 1 / np.sqrt(WIDTHS[i])
        ws.append(f32(r.uniform(-bound, bound, (WIDTHS[i + 1], WIDTHS[i]))))
        bs.append(f32(r.uniform(-bound, bound, WIDTHS[i + 1])))
    x = f32(r.uniform(-2, 2, (BATCH, WIDTHS[0])))
    y = r.integers(0, WIDTHS[-1], BATCH)
    keep = [(r.random((BATCH, WIDTHS[i + 1])) >= DROPOUT) / (1 - DROPOUT) for i in range(len(WIDTHS) - 2)]
    return ws, bs, x, y, keep


def grads(d, bits, masks_in=None):
    ws, bs, x, y, keep = d
    h, saved, masks, L = x, [], [], len(ws)
    for i in range(L):
        z = f32(f32(rnd(h, bits) @ rnd(ws[i], bits).T) + bs[i])
        saved.append(h)
        if i == L - 1:
            h = z
            break
        m = (z > 0).astype(np.float64) if masks_in is None else masks_in[i]
        masks.append(m)
        h = f32(z * m * keep[i])
    p = np.exp(h - h.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[np.arange(BATCH), y] -= 1
    dz, out = f32(p / BATCH), {}
    for i in reversed(range(L)):
        name = "net.%d" % (3 * i)  # brisk's names: linear, activation, dropout per layer
        out[name + ".weight"] = f32(rnd(dz, bits).T @ rnd(saved[i], bits))
        out[name + ".bias"] = f32(dz.sum(0))
        if i:
            dz = f32(f32(rnd(dz, bits) @ rnd(ws[i], bits)) * keep[i - 1]) * masks[i - 1]
    return out, masks


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=20000)
    ap.add_argument("--bits", type=int, nargs="+", default=[8, 11])
    a = ap.parse_args()
    for bits in a.bits:
        per, worst, forced = {}, [], []
        for s in range(a.draws):
            d = draw(s)
            ref, masks = grads(d, None)
            got, _ = grads(d, bits)
            errs = {k: rel(got[k], ref[k]) for k in ref}
            for k, e in errs.items():
                per.setdefault(k, []).append(e)
            worst.append(max(errs.values()))
            if s < 1000:
                fg, _ = grads(d, bits, masks)
                forced.append(max(rel(fg[k], ref[k]) for k in ref))
        print("%d significant bits, %d draws: relative error of the gradient" % (bits, a.draws))
        for k in sorted(per) + ["worst of all"]:
            v = np.sort(np.array(per.get(k, worst)))
            q = lambda f: v[min(len(v) - 1, int(f * len(v)))]
            print("  %-13s median %.4f  p99 %.4f  p99.9 %.4f  max %.4f  over 0.05: %5.2f%%  over 0.1: %6.3f%%" %
                  (k, q(.5), q(.99), q(.999), v[-1], 100 * np.mean(v > 0.05), 100 * np.mean(v > 0.1)))
        print("  the reference's ReLU masks forced (%d draws): worst median %.4f  max %.4f" %
              (len(forced), np.median(forced), max(forced)))


if __name__ == "__main__":
    main()
