#!/usr/bin/env python3
"""Two configs trained by `brisk train` side by side on this machine: A and B alternate for
--rounds rounds (so that a change in the load falls on both), each run --steps steps after
--warmup, and each run's median compute ms/step is read from its metrics.jsonl; prints each
round, then the median over rounds of each side and the ratio B / A. For the graph configs of
the built-in families (examples/tabular_graph.json against examples/tabular.json: the same
network and batch, the claim is the same ms/step). Run it from the folder the configs' data
paths are relative to.

  /usr/bin/python3 bench/train_side_by_side.py BRISK A.json B.json [--steps 30] [--warmup 5]
      [--rounds 5] [--set KEY=VALUE ...]   (--set: given to both runs, as brisk train's)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

def median_compute_ms(brisk, cfg, out, steps, warmup, extra=(), cwd=None):
    """brisk train of cfg into out for warmup + steps steps; the median compute ms of the steps
    after the warm-up, from its metrics.jsonl (bench/onnx_vs_builtin.py uses it too)."""
    cmd = [brisk, "train", cfg, "--out", out, "--overwrite", "--quiet", "--max-steps", str(steps + warmup),
           "--log-every", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if r.returncode:
        sys.exit(f"{cfg}: brisk train exited {r.returncode}: {r.stderr[-2000:]}")
    ms = [rec["compute_ms"] for rec in map(json.loads, open(os.path.join(out, "metrics.jsonl")))
          if "compute_ms" in rec and rec.get("step", 0) > warmup]
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("brisk")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="side-by-side-")
    extra = [x for s in a.set for x in ("--set", s)]
    ta, tb = [], []
    for r in range(a.rounds):
        ta.append(median_compute_ms(a.brisk, a.a, os.path.join(work, "a"), a.steps, a.warmup, extra))
        tb.append(median_compute_ms(a.brisk, a.b, os.path.join(work, "b"), a.steps, a.warmup, extra))
        print(json.dumps({"round": r + 1, "a_ms": round(ta[-1], 3), "b_ms": round(tb[-1], 3)}), flush=True)
    ma, mb = statistics.median(ta), statistics.median(tb)
    print(f"A {os.path.basename(a.a)} {ma:.3f} ms/step, B {os.path.basename(a.b)} {mb:.3f} ms/step (compute, medians of "
          f"{a.rounds} rounds of {a.steps} steps); B / A {mb / ma:.3f}")


if __name__ == "__main__":
    main()
