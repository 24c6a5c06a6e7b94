#!/usr/bin/env bash
# A graph model's config trained by brisk (build/bench/brisk_bench --config) and by PyTorch
# (bench/graph_timed.py: the module bench/reference/graph.py builds from the same config) on the
# CPU, side by side in one invocation: the same batch, thread count and step count, the two
# alternating for --repeat rounds so that a change in the machine's load falls on both. Prints
# each JSON line, then the median over the rounds of each side's median ms/step and the ratio.
# PyTorch may run at other thread counts (--torch-threads "1 2": each in every round): its best
# median is the one compared (on 2 shared cores PyTorch's own threads spin, and 1 is its best).
#   bench/graph_vs_torch.sh CONFIG.json [--threads N] [--torch-threads "N ..."] [--steps N] [--repeat R] [--batch B]
# (defaults: 2 threads for both, 30 steps after 5 warm-up steps, 3 rounds, the config's train.batch_size)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
cfg=$1
shift
threads=2 torch_threads="" steps=30 repeat=3 batch=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift ;;
    --torch-threads) torch_threads=$2; shift ;;
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
  for tt in ${torch_threads:-$threads}; do
    OMP_NUM_THREADS=$tt "$py" bench/graph_timed.py --config "$cfg" --threads "$tt" --steps "$steps" \
      ${batch[@]+"${batch[@]}"} | tail -1 | tee -a "$log"
  done
  OMP_NUM_THREADS=$threads build/bench/brisk_bench --config "$cfg" --threads "$threads" --steps "$steps" \
    ${batch[@]+"${batch[@]}"} | tee -a "$log"
done
"$py" - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
torch_rows = [r for r in rows if r["impl"] == "torch"]
b = [r["ms_per_step_median"] for r in rows if r["impl"] == "brisk"]
mb = statistics.median(b)
best = None
print(f"\n{rows[0]['workload']}: batch {rows[0]['batch']}, {len(b)} rounds")
for tt in sorted({r["threads"] for r in torch_rows}):
    t = [r["ms_per_step_median"] for r in torch_rows if r["threads"] == tt]
    mt = statistics.median(t)
    best = mt if best is None else min(best, mt)
    print(f"  PyTorch {rows[0].get('torch', '')} eager, {tt} threads {mt:9.2f} ms/step "
          f"(rounds: {', '.join(f'{x:.1f}' for x in t)})")
print(f"  brisk, {b and [r for r in rows if r['impl'] == 'brisk'][0]['threads']} threads {mb:9.2f} ms/step "
      f"(rounds: {', '.join(f'{x:.1f}' for x in b)})")
print(f"  PyTorch at its best / brisk {best / mb:9.2f}x")
PY
