#!/usr/bin/env python3
"""Compares the gradients of two brisk runs after their first optimizer step, from their checkpoints.

  compare_grads.py REF RUN [--rtol X] [--top K] [--baseline BASE [--spread-factor F]]

REF and RUN are checkpoints (.safetensors) or run directories (their last.safetensors), written
after one AdamW step (`brisk train CONFIG --max-steps 1`). After one step AdamW's first moment is
(1 - beta1) times the gradient the update used (clipped, unscaled), so comparing the moments
compares the gradients. Prints one line, PASS or FAIL, and exits 0 (pass), 1 (fail) or 2
(unreadable input or bad arguments: also a FAIL line):

  relative L2 error over every tensor, ||run - ref|| / ||ref||  (must be <= --rtol, default 1e-4)
  the same after the best common scale s (run ~ s ref): near 0 with s != 1 means the whole
    gradient was scaled (clipping by another norm, a loss or normalisation factor), not bent
  elements of the other sign, and the K worst tensors by their own relative error

--baseline BASE: a run of REF's own code from weights moved by about one rounding unit
(nudge_checkpoint.py); RUN may then be F (default 4) times as far from REF as BASE is, where
that exceeds X: a chaotic model's gradients (the ResNet example's, through batch-norm ReLU masks
that flip) move by 2.4e-3 on that alone.

The GPU suite runs it per example on a CPU and a GPU run in fp32 (tools/gpu-session.sh, stage
agree): a step-1 gradient apart by more than rounding is a wrong op, before any trajectory
could amplify it. Uses numpy when it can import it, else the standard library (slower).
"""
import argparse
import json
import math
import os
import struct
import sys
from array import array

try:
    import numpy as np
except ImportError:  # CI's first python3 may lack it
    np = None


class InputError(Exception):
    pass


class Unfit(Exception):
    """Two gradients that cannot be compared: (exit status, the FAIL line)."""


def moments(path):
    """{parameter name: its first moment as floats} from a checkpoint or run directory."""
    if os.path.isdir(path):
        path = os.path.join(path, "last.safetensors")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    if len(raw) < 8:
        raise InputError(f"{path}: not a safetensors file (shorter than its header length)")
    n = struct.unpack("<Q", raw[:8])[0]
    try:
        head = json.loads(raw[8:8 + n])
    except ValueError:
        raise InputError(f"{path}: the safetensors header is not JSON")
    out, prefix = {}, "optim.exp_avg."
    for key, v in head.items():
        if not key.startswith(prefix) or not isinstance(v, dict):
            continue
        if v.get("dtype") != "F32":
            raise InputError(f"{path}: {key} is {v.get('dtype')}, expected F32")
        a, b = v["data_offsets"]
        buf = raw[8 + n + a: 8 + n + b]
        if len(buf) != b - a or (b - a) % 4:
            raise InputError(f"{path}: {key}'s data runs past the file")
        if np is not None:
            out[key[len(prefix):]] = np.frombuffer(buf, dtype="<f4").astype(np.float64)
        else:
            arr = array("f")
            arr.frombytes(buf)
            if sys.byteorder != "little":
                arr.byteswap()
            out[key[len(prefix):]] = arr
    if not out:
        raise InputError(f"{path}: no optim.exp_avg.* tensors (an AdamW checkpoint after its first step?)")
    return out


def sums(r, u):
    """(sum r*r, sum d*d, sum d*r, elements of another sign) with d = u - r, each summed as
    itself: u u - 2 u r + r r would cancel to noise where the runs agree to 1e-6."""
    if np is not None:
        d = u - r
        return (float(r @ r), float(d @ d), float(d @ r), int(np.count_nonzero((r > 0) & (u < 0) | (r < 0) & (u > 0))))
    rr = dd = dr = 0.0
    flips = 0
    for x, y in zip(r, u):
        d = y - x
        rr += x * x
        dd += d * d
        dr += d * x
        flips += (x > 0 and y < 0) or (x < 0 and y > 0)
    return rr, dd, dr, flips


def totals(ref, run):
    """(sum r r, sum d d, sum d r, flips, elements, [(relative error, name)]) over every tensor;
    Unfit where the two cannot be compared."""
    tot_rr = tot_dd = tot_dr = 0.0
    flips = elements = 0
    per = []
    for name in sorted(ref):
        r, u = ref[name], run[name]
        if len(r) != len(u):
            raise Unfit(2, f"FAIL {name}: {len(r)} elements against {len(u)}")
        rr, dd, dr, f = sums(r, u)
        if not all(math.isfinite(v) for v in (rr, dd, dr)):
            raise Unfit(1, f"FAIL {name}: not finite")
        tot_rr, tot_dd, tot_dr = tot_rr + rr, tot_dd + dd, tot_dr + dr
        flips, elements = flips + f, elements + len(r)
        per.append((math.sqrt(dd / rr) if rr > 0 else math.sqrt(dd), name))
    return tot_rr, tot_dd, tot_dr, flips, elements, per


def main(argv):
    ap = argparse.ArgumentParser(add_help=True)
    ap.add_argument("ref")
    ap.add_argument("run")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--baseline")
    ap.add_argument("--spread-factor", type=float, default=4.0)
    try:
        a = ap.parse_args(argv)
    except SystemExit:
        print("FAIL usage: compare_grads.py REF RUN [--rtol X] [--top K] [--baseline BASE [--spread-factor F]]")
        return 2
    try:
        ref, run = moments(a.ref), moments(a.run)
        base = moments(a.baseline) if a.baseline else None
    except InputError as e:
        print(f"FAIL {e}")
        return 2
    for other in (run, base) if base is not None else (run,):
        if set(ref) != set(other):
            only = sorted(set(ref) ^ set(other))[:3]
            print(f"FAIL the runs' parameters differ (e.g. {', '.join(only)})")
            return 2
    try:
        rtol, own = a.rtol, ""
        if base is not None:
            b_rr, b_dd = totals(ref, base)[:2]
            if b_rr > 0:
                spread = math.sqrt(b_dd / b_rr)
                rtol = max(rtol, a.spread_factor * spread)
                own = f" (the model's own spread {spread:.3g}: bound {rtol:.3g})"
        tot_rr, tot_dd, tot_dr, flips, elements, per = totals(ref, run)
    except Unfit as e:
        print(e.args[1])
        return e.args[0]
    if tot_rr <= 0:
        print("FAIL the reference's gradient is zero")
        return 1
    err = math.sqrt(tot_dd / tot_rr)
    s = 1.0 + tot_dr / tot_rr  # run ~ s ref, least squares; what is left of d after it: dd - dr^2 / rr
    shape_err = math.sqrt(max(tot_dd - tot_dr * tot_dr / tot_rr, 0.0) / (s * s * tot_rr)) if s else float("inf")
    per.sort(reverse=True)
    worst = ", ".join(f"{n} {e:.3g}" for e, n in per[:max(a.top, 0)])
    verdict = "PASS" if err <= rtol else "FAIL"
    print(f"{verdict} relative L2 error {err:.3g} over {len(per)} tensors (<= {a.rtol:g}); after the best scale "
          f"{s:.6g}: {shape_err:.3g}; {flips} of {elements} elements of the other sign; worst: {worst}{own}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
