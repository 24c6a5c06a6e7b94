#!/usr/bin/env bash
# A graph model's config trained by brisk (build/bench/brisk_bench --config) and by PyTorch
# (bench/graph_timed.py: the module bench/reference/graph.py builds from the same config) on the
# CPU, side by side in one invocation: the same batch, thread count and step count, the two
# alternating for --repeat rounds so that a change in the machine's load falls on both. Prints
# each JSON line, then the median over the rounds of each side's median ms/step and the ratio.
#   bench/graph_vs_torch.sh CONFIG.json [--threads N] [--steps N] [--repeat R] [--batch B]
# (defaults: 2 threads, 30 steps after 5 warm-up steps, 3 rounds, the config's train.batch_size)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
cfg=$1
shift
threads=2 steps=30 repeat=3 batch=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift ;;
    --steps) steps=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --batch) batch=(--batch "$2"); shift ;;
    *) echo "graph_vs_torch.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
py=${PYTHON:-/usr/bin/python3}
[ -x build/bench/brisk_bench ] || { echo "graph_vs_torch.sh: build/bench/brisk_bench is not built" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq "$repeat"); do
  OMP_NUM_THREADS=$threads "$py" bench/graph_timed.py --config "$cfg" --threads "$threads" --steps "$steps" \
    ${batch[@]+"${batch[@]}"} | tail -1 | tee -a "$log"
  OMP_NUM_THREADS=$threads build/bench/brisk_bench --config "$cfg" --threads "$threads" --steps "$steps" \
    ${batch[@]+"${batch[@]}"} | tee -a "$log"
done
"$py" - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
t = [r["ms_per_step_median"] for r in rows if r["impl"] == "torch"]
b = [r["ms_per_step_median"] for r in rows if r["impl"] == "brisk"]
mt, mb = statistics.median(t), statistics.median(b)
print(f"\n{rows[0]['workload']}: batch {rows[0]['batch']}, {rows[0]['threads']} threads, {len(t)} rounds")
print(f"  PyTorch {rows[0].get('torch', '')} eager  {mt:9.2f} ms/step (rounds: {', '.join(f'{x:.1f}' for x in t)})")
print(f"  brisk                {mb:9.2f} ms/step (rounds: {', '.join(f'{x:.1f}' for x in b)})")
print(f"  PyTorch / brisk      {mt / mb:9.2f}x")
PY
