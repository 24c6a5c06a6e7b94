#!/usr/bin/env python3
"""Renders the GPU suite's one-glance summary from its results folder (tools/gpu-session.sh).

  summary.py WORK

WORK holds results.tsv (one line per check: unix time, stage, check, PASS/FAIL/SKIP, key
number; a check run again replaces its earlier line; the UTC column tells an earlier call's
results from this one's), timings.tsv (each stage's duration), env.txt (what machine and code), and
when the bench stage ran, bench.jsonl (brisk bench --json) and torch.jsonl (bench/reference/timed.py),
from which the PyTorch/brisk ratios are computed. Standard library only.
"""
import json
import os
import re
import sys
import time


def read_results(work):
    latest = {}  # (stage, check) -> row; insertion order = first run order
    path = os.path.join(work, "results.tsv")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8", errors="replace"):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            t, stage, check, status, detail = parts
            key = (stage, check)
            latest.pop(key, None)  # a rerun moves the check to where it ran last
            latest[key] = (int(t), stage, check, status, detail)
    return list(latest.values())


def jsonl(path):
    rows = []
    if os.path.exists(path):
        for line in open(path, encoding="utf-8", errors="replace"):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def ratios(work):
    """Lines: brisk bench's last row per config set against PyTorch's modes (bench/reference/timed.py)."""
    bench, torch = {}, {}
    for r in jsonl(os.path.join(work, "bench.jsonl")):
        name = os.path.basename(r.get("config", "")).replace(".json", "")
        rows = bench.setdefault(name, {})
        rows[r.get("row", 0)] = r  # the last measurement of each row wins
    for r in jsonl(os.path.join(work, "torch.jsonl")):
        if "ms_per_step_median" in r:
            torch.setdefault(r.get("workload"), {})[r.get("mode")] = r["ms_per_step_median"]
    # bench/<w>_workload.json is bench/WORKLOADS.md's workload <w> where examples/<w>.json is not
    for name in [n for n in bench if n.endswith("_workload")]:
        bench[name[: -len("_workload")]] = bench.pop(name)
    lines = []
    for w in sorted(set(bench) & set(torch)):
        last = bench[w][max(bench[w])]
        ms = last["ms_per_step_median"]
        t = torch[w]
        modes = ", ".join(f"{m} {t[m]:.4g} ms ({t[m] / ms:.2f}x)" for m in ("eager", "amp", "compile", "amp-compile")
                          if m in t)
        best = min(t, key=t.get)
        host = last.get("host_ms_per_step_median")  # null (None) where the host's clock timed the steps
        issue = f" (the host's time per step {host:.4g} ms, its waits included)" \
            if isinstance(host, (int, float)) else ""
        lines.append(f"{w}: brisk {last.get('name', 'row %d' % last.get('row', 0))} {ms:.4g} ms/step on "
                     f"{last.get('device', '?')}{issue}; torch {modes}; vs torch best ({best}) {t[best] / ms:.2f}x")
    for w in sorted(set(bench) - set(torch)):
        lines.append(f"{w}: no PyTorch timing" + ("" if w.startswith("gemm") else " (torch stage not run?)"))
    # the GEMM-bound step against the bf16 rate `brisk check` measured (bench/gemm_bound.json's shape)
    check = os.path.join(work, "logs", "check.txt")
    m = re.search(r"bf16 GEMM ([0-9.]+) TFLOP/s", open(check).read()) if os.path.exists(check) else None
    g = bench.get("gemm_bound", {})
    if m and 5 in g:
        if "gflops" in g[5]:  # brisk's own count of the step's products (brisk_node_flops)
            tf = g[5]["gflops"] / 1e3
        else:  # an older bench line: the hand count (6 flops per multiply-add of every layer)
            batch, dims = 8192, [64, 8192, 8192, 8192, 3]
            flops = 6.0 * batch * sum(a * b for a, b in zip(dims, dims[1:]))
            tf = flops / (g[5]["ms_per_step_median"] * 1e-3) / 1e12
        # above the GEMM rate itself cannot be: a step time that is not the device's (the host's clock)
        bad = " - IMPOSSIBLE: the step times are not the device's" if tf > float(m.group(1)) else ""
        lines.append(f"gemm_bound: {tf:.0f} TFLOP/s = {100 * tf / float(m.group(1)):.0f}% of the measured bf16 "
                     f"GEMM rate {float(m.group(1)):.0f} TFLOP/s{bad}")
    return lines


def main(argv):
    if len(argv) != 1:
        print("usage: summary.py WORK", file=sys.stderr)
        return 2
    work = argv[0]
    out = []
    env = os.path.join(work, "env.txt")
    if os.path.exists(env):
        out += [l.rstrip("\n") for l in open(env, encoding="utf-8", errors="replace") if l.strip()]
    times = os.path.join(work, "timings.tsv")
    if os.path.exists(times):
        stages = []
        for line in open(times, encoding="utf-8", errors="replace"):
            parts = line.split("\t")
            if len(parts) == 3:
                when = time.strftime("%H:%M", time.gmtime(int(parts[0])))
                stages.append(f"{parts[1]} {int(parts[2])} s (ended {when})")
        out.append("stage times: " + ", ".join(stages))
    rows = read_results(work)
    width = max([len(r[2]) for r in rows] + [20])
    out.append("")
    out.append(f"{'RESULT':<7}{'UTC':<7}{'STAGE':<10}{'CHECK':<{width + 2}}KEY NUMBER")
    for t, stage, check, status, detail in rows:
        when = time.strftime("%H:%M", time.gmtime(t))
        if len(detail) > 240:  # the whole text stays in results.tsv
            detail = detail[:237] + "..."
        out.append(f"{status:<7}{when:<7}{stage:<10}{check:<{width + 2}}{detail}")
    counts = {s: sum(1 for r in rows if r[3] == s) for s in ("PASS", "FAIL", "SKIP")}
    out.append("")
    out.append(f"TOTAL  {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP"
               + ("" if rows else " (no check has run yet)"))
    r = ratios(work)
    if r:
        out.append("")
        out.append("RATIOS (PyTorch ms/step / brisk ms/step, same machine; > 1 means brisk is faster)")
        out += [f"       {l}" for l in r]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
