#!/usr/bin/env bash
# Side-by-side benchmark: brisk (build/bench/brisk_bench) vs PyTorch (bench/reference/timed.py)
# on the same workload of bench/WORKLOADS.md and machine, in one invocation. Prints each JSON
# line, then a table of medians and ratios (PyTorch's faster of --threads 1 and 2 divided by
# brisk's ms/step at 2 threads).
#   bench/run.sh [--steps N] [--repeat R] [--small] [workload ...]     (default: diffusion tabular lstm transformer)
# --small: bench/WORKLOADS.md's small sizes (resnet at 3x64x64, batch 4; meshgnn 16x16 grid), passed to both sides;
# a workload named NAME-small runs NAME small alone (meshgnn-small).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=50 repeat=2 list=() small=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --small) small=(--small) ;;
    *) list+=("$1") ;;
  esac
  shift
done
[ ${#list[@]} -gt 0 ] || list=(diffusion tabular lstm transformer)
ref=bench/reference/timed.py
py=${PYTHON:-/usr/bin/python3}
[ -x build/bench/brisk_bench ] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null; }
log=$(mktemp)
for w in "${list[@]}"; do
  args=(--workload "$w")
  [ "${w%-small}" = "$w" ] || args=(--workload "${w%-small}" --small)
  for r in $(seq "$repeat"); do
    for th in 1 2; do
      OMP_NUM_THREADS=$th "$py" "$ref" "${args[@]}" ${small[@]+"${small[@]}"} --mode eager --device cpu --steps "$steps" --threads "$th" 2>/dev/null \
        | tail -1 | sed "s/^{/{\"impl\": \"torch\", \"rep\": $r, \"name\": \"$w\", /" | tee -a "$log"
    done
    OMP_NUM_THREADS=2 build/bench/brisk_bench "${args[@]}" ${small[@]+"${small[@]}"} --steps "$steps" --threads 2 \
      | sed "s/^{/{\"rep\": $r, \"name\": \"$w\", /" | tee -a "$log"
  done
done
"$py" - "$log" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
print()
print(f"{'workload':<12}{'torch 1 thr':>13}{'torch 2 thr':>13}{'brisk 2 thr':>13}{'speedup':>9}")
for w in dict.fromkeys(r["name"] for r in rows):
    t1 = [r["ms_per_step_median"] for r in rows if r["name"] == w and r["impl"] == "torch" and r["threads"] == 1]
    t2 = [r["ms_per_step_median"] for r in rows if r["name"] == w and r["impl"] == "torch" and r["threads"] == 2]
    b = [r["ms_per_step_median"] for r in rows if r["name"] == w and r["impl"] == "brisk"]
    if not (t1 and t2 and b):
        print(f"{w:<12} incomplete"); continue
    m1, m2, mb = statistics.median(t1), statistics.median(t2), statistics.median(b)
    print(f"{w:<12}{m1:>11.3f}ms{m2:>11.3f}ms{mb:>11.3f}ms{min(m1, m2) / mb:>8.2f}x")
print("(ms/step medians over the repeats of each run's median; speedup = faster torch / brisk)")
PY
rm -f "$log"
