#!/usr/bin/env python3
"""Off the benchmark's shapes: brisk against PyTorch's faster of 1 and 2 threads on the LSTM, the
Transformer and the MLP (tabular) at other widths (32-512), sequence lengths (30-240) and batches
(16-1024), one dimension at a time around each workload's own shape, plus the small Transformer of
issue 16 (width 64, 4 heads, FFN 128, batch 64, T 60). Prints a table and, per model, the worst ratio
of the sweep beside the workload's own, and per shape the step's model FLOPs, brisk's share of the
machine's FMA peak, the floor (the FLOPs at the peak) and the step time a 3x ratio would need.

  bench/shape_sweep.py [--steps N] [--quick] [--models lstm,transformer,tabular] [--brisk PATH]

brisk: build/bench/brisk_bench at 2 threads (BRISK_THREADS to change); PyTorch: bench/torch_timed.py
(bench/reference/models.py's architectures, shapes as options) at 1 and 2 threads. Medians of N timed steps
after 3 warm-up steps. --quick: a handful of shapes per model, the workload's own and the extremes
(widths 32 and 512, sequence 30 and 240, batch 16 and 1024 for the LSTM and the MLP, and the small
Transformer), at 5 timed steps after 2 warm-up steps: a before/after check in minutes, not the
full sweep. --brisk: another brisk_bench binary (to set two builds side by side).
"""
import argparse, json, os, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=None, help="timed steps (20; 5 with --quick)")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--models", default="lstm,transformer,tabular")
ap.add_argument("--brisk", default=None, help="brisk_bench binary (default: build/bench/brisk_bench)")
a = ap.parse_args()
py = os.environ.get("PYTHON", "/usr/bin/python3")
bb = a.brisk or os.path.join(root, "build/bench/brisk_bench")
threads = os.environ.get("BRISK_THREADS", "2")

base = {"lstm": dict(width=128, seq=60, batch=256), "transformer": dict(width=128, seq=60, batch=256),
        "tabular": dict(width=512, batch=512)}
sweep = {"width": [32, 64, 128, 256, 512], "seq": [30, 60, 120, 240], "batch": [16, 64, 256, 1024]}
# --quick: the extremes only; the Transformer's batch stays at its own (1024 x T 60 is minutes a step)
quick = {"width": [32, 512], "seq": [30, 240], "batch": [16, 1024]}
quick_dims = {"lstm": ("width", "seq", "batch"), "transformer": ("width", "seq"), "tabular": ("width", "batch")}


def shapes(model):
    out = [dict(base[model])]
    for dim, values in (quick if a.quick else sweep).items():
        if dim not in base[model] or (a.quick and dim not in quick_dims[model]):
            continue
        for v in values:
            s = dict(base[model], **{dim: v})
            if s not in out:
                out.append(s)
    if model == "transformer":
        out.append(dict(width=64, seq=60, batch=64, heads=4, ffn=128))
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    line = [l for l in r.stdout.splitlines() if l.startswith("{")]
    if r.returncode or not line:
        sys.exit(f"shape_sweep: {' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    return json.loads(line[-1])


steps = a.steps or (5 if a.quick else 20)
warm = "2" if a.quick else "3"
# The machine's FMA peak at brisk's thread count (bench_cpu_kernels fraction: threads x 2 FMA
# units x 8 floats x 2 flops x the clock a dependent FMA chain shows under load), so that each
# shape's products (brisk's model FLOPs, src/ops/flops.c) give brisk's share of the peak and
# the floor no implementation can beat: FLOPs / peak.
kern = os.path.join(os.path.dirname(bb), "bench_cpu_kernels")
peak = None
if os.path.exists(kern):
    r = subprocess.run([kern, "fraction", threads], capture_output=True, text=True)
    for l in r.stdout.splitlines():
        if l.startswith("FMA peak ="):
            peak = float(l.split("=")[-1].split()[0])
            print(l)
print(f"{'model':<12}{'width':>6}{'seq':>5}{'batch':>6}{'extra':>14}{'brisk ms':>11}{'torch1':>11}{'torch2':>11}{'ratio':>8}"
      f"{'GFLOP':>9}{'GFLOP/s':>9}{'%peak':>7}{'floor ms':>10}{'3x needs':>10}")
worst = {}
for model in a.models.split(","):
    for s in shapes(model):
        opts = []
        for k in ("width", "seq", "batch", "heads", "ffn"):
            if k in s:
                opts += [f"--{k}", str(s[k])]
        if model == "transformer" and "ffn" not in s:
            opts += ["--ffn", str(4 * s["width"])]
        b = run([bb, "--workload", model, "--steps", str(steps), "--warmup", warm, "--threads", threads] + opts)
        t = [run([py, os.path.join(here, "torch_timed.py"), "--workload", model, "--steps", str(steps), "--warmup",
                  warm, "--threads", str(n)] + opts) for n in (1, 2)]
        tm = min(x["ms_per_step_median"] for x in t)
        ratio = tm / b["ms_per_step_median"]
        extra = f"h{s['heads']} ffn{s['ffn']}" if "heads" in s else ""
        print(f"{model:<12}{s.get('width', 0):>6}{s.get('seq', 0):>5}{s['batch']:>6}{extra:>14}"
              f" {b['ms_per_step_median']:>10.3f} {t[0]['ms_per_step_median']:>10.3f} {t[1]['ms_per_step_median']:>10.3f}"
              f"{ratio:>7.2f}x{b['gflop_per_step']:>9.3f}{b['gflops_median']:>9.1f}"
              + (f"{100 * b['gflops_median'] / peak:>6.0f}%{1e3 * b['gflop_per_step'] / peak:>10.3f}" if peak else f"{'':>17}")
              + f"{tm / 3:>10.3f}", flush=True)
        own = s == base[model]
        w = worst.setdefault(model, {"own": None, "worst": None})
        if own:
            w["own"] = ratio
        if w["worst"] is None or ratio < w["worst"][0]:
            w["worst"] = (ratio, s)
print()
for model, w in worst.items():
    r, s = w["worst"]
    print(f"{model:<12} workload's shape {w['own']:.2f}x; worst of the sweep {r:.2f}x at {s}")
print("(ratio: PyTorch's faster of 1 and 2 threads / brisk, median ms/step; issue 16's target: >= 3x for LSTM "
      "and Transformer at every shape. GFLOP: the step's products; %peak: brisk's median step against the FMA "
      "peak; floor: the step at the peak; 3x needs: the step time a 3x ratio asks for, below the floor where it "
      "cannot be met)")
