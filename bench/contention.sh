#!/usr/bin/env bash
# CPU speed under load: each workload idle, beside a single-threaded busy loop pinned to one
# CPU, and beside a 2-thread job (two unpinned busy threads, as a NumPy or PyTorch job would
# be), brisk (brisk_bench, default thread count) and PyTorch (bench/torch_timed.py on
# bench/reference/models.py) under the same load, one after the other in each case. Prints per
# case the median and worst step time, the median and worst "epoch" (a block of EPOCH_STEPS
# steps), the epoch's ratio to the idle one, and PyTorch / brisk.
#
#   bench/contention.sh [--epochs N] [--quick] [workload ...]   (default: diffusion tabular lstm transformer)
#
# Environment: EPOCH_STEPS_<workload> (diffusion 240 as in examples/diffusion.json, tabular 60,
# lstm 15, transformer 8), TORCH_THREADS (1: Debian's PyTorch default, fastest for these sizes),
# BRISK_THREADS (0: brisk's default), BUSY2_CMD (the 2-thread job; default two shell loops),
# PYTHON (/usr/bin/python3). --quick: 2 epochs of 10 steps, to check the script works.
# Targets (issue 16): pinned loop, diffusion and tabular epochs <= 2.5x idle, worst <= 1.5x
# median; 2 busy threads <= 3x idle, worst <= 1.5x median; PyTorch / brisk under load >= idle.
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=10 quick=0 list=()
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift ;;
    --quick) quick=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) list+=("$1") ;;
  esac
  shift
done
[ ${#list[@]} -gt 0 ] || list=(diffusion tabular lstm transformer)
py=${PYTHON:-/usr/bin/python3}
bb=build/bench/brisk_bench
[ -x "$bb" ] || { echo "contention.sh: build first (cmake --build build)" >&2; exit 2; }
ncpu=$(nproc)
last=$(( $(taskset -pc $$ | sed 's/.*: //; s/,.*//; s/.*-//') ))
busy_pids=()
stop_busy() { for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; busy_pids=(); }
trap stop_busy EXIT INT TERM
start_busy() {
  case "$1" in
    idle) ;;
    pinned1) taskset -c "$last" sh -c 'while :; do :; done' & busy_pids+=($!) ;;
    busy2)
      if [ -n "${BUSY2_CMD:-}" ]; then sh -c "$BUSY2_CMD" & busy_pids+=($!)
      else for _ in 1 2; do sh -c 'while :; do :; done' & busy_pids+=($!); done; fi ;;
  esac
  sleep 0.2
}
steps_for() {
  local v="EPOCH_STEPS_$1"
  if [ $quick = 1 ]; then echo 10; return; fi
  case "$1" in diffusion) echo "${!v:-240}" ;; tabular) echo "${!v:-60}" ;; lstm) echo "${!v:-15}" ;; *) echo "${!v:-8}" ;; esac
}
[ $quick = 1 ] && epochs=2
log=$(mktemp)
echo "contention: $ncpu CPUs, busy loop pinned to CPU $last, $epochs epochs per run; load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for w in "${list[@]}"; do
  n=$(steps_for "$w")
  for case in idle pinned1 busy2; do
    start_busy "$case"
    "$bb" --workload "$w" --steps $((n * epochs)) --epoch-steps "$n" --threads "${BRISK_THREADS:-0}" \
      | sed "s/^{/{\"case\": \"$case\", /" | tee -a "$log" >&2
    "$py" bench/torch_timed.py --workload "$w" --steps $((n * epochs)) --epoch-steps "$n" --threads "${TORCH_THREADS:-1}" \
      | sed "s/^{/{\"case\": \"$case\", /" | tee -a "$log" >&2
    stop_busy
  done
done
"$py" - "$log" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def get(w, c, impl):
    return next((r for r in rows if r["workload"] == w and r["case"] == c and r["impl"] == impl), None)
print(f"{'workload':<12}{'case':<9}{'impl':<6}{'step med':>10}{'step max':>10}{'epoch med':>11}{'epoch max':>11}"
      f"{'x idle':>8}{'max/med':>9}{'torch/brisk':>12}{'alone':>7}")
for w in dict.fromkeys(r["workload"] for r in rows):
    idle = {}
    for c in ("idle", "pinned1", "busy2"):
        for impl in ("brisk", "torch"):
            r = get(w, c, impl)
            if not r: continue
            ep = r.get("epoch_s") or [0]
            em, ex = statistics.median(ep), max(ep)
            if c == "idle": idle[impl] = em
            ratio = em / idle[impl] if idle.get(impl) else float("nan")
            other = get(w, c, "torch")
            tb = (statistics.median(other["epoch_s"]) / em) if impl == "brisk" and other and em else None
            print(f"{w:<12}{c:<9}{impl:<6}{r['ms_per_step_median']:>8.3f}ms{r['ms_per_step_max']:>8.2f}ms"
                  f"{em:>10.3f}s{ex:>10.3f}s{ratio:>7.2f}x{ex / em if em else 0:>8.2f}x"
                  + (f"{tb:>11.2f}x" if tb else "")
                  + (f"{100 * r['pool_alone']:>6.0f}%" if r.get("pool_alone", -1) >= 0 else ""))
print("(x idle: median epoch over the idle one; max/med: worst epoch over the median; "
      "torch/brisk: PyTorch's median epoch over brisk's, same load; alone: brisk's parallel jobs its pool "
      "ran on the calling thread alone, throttled because workers were descheduled)")
PY
rm -f "$log"
