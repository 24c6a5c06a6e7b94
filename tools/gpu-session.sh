#!/usr/bin/env bash
# Everything a GPU session needs in one call, inside one device command (10 minutes): build
# for sm_90, `brisk check`, the CUDA tests, the CPU suite, `brisk bench` on the diffusion,
# tabular and GEMM-bound configs, PyTorch's torch_ref.py on the same workloads, and a
# compact summary printed last. Full logs go to $OUT (the device tool brings them back)
# or ./gpu-logs.
#
#   tools/gpu-session.sh [all|build|test|bench|torch] [--deadline SECONDS]
#
# Before the call, on the development machine (the device image may lack cJSON, and
# ../shared does not travel):
#   ../shared/tools/pack-debs libcjson-dev libcjson1          # -> .deps/ (git-ignored)
#   mkdir -p .gpu && cp ../shared/workloads/torch_ref.py .gpu/ && echo /.gpu/ >> .git/info/exclude
# then: run(command="tools/gpu-session.sh all", carry=[".deps", ".gpu"], timeout_s=600).
# Phases stop starting when the deadline (default 540 s after start) is near; the torch
# compile modes run last and only with time to spare (a second call with `torch` runs them
# into the same build).
set -u
cd "$(dirname "$0")/.."
root=$PWD
phase=${1:-all}
deadline=540
[ "${2:-}" = "--deadline" ] && deadline=${3:-540}
start=$(date +%s)
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
build=build-gpu
summary=$out/summary.txt
: >"$summary"
case $phase in all|bench) rm -f "$out/bench.txt" ;; esac
case $phase in all|torch) rm -f "$out/torch.jsonl" "$out/torch.err" ;; esac
left() { echo $((deadline - ($(date +%s) - start))); }
# a timeout that leaves $1 seconds of the deadline for what follows (at least 10 s)
tmo() { local t=$(($(left) - $1)); [ $t -lt 10 ] && t=10; echo $t; }
note() { echo "$*" | tee -a "$summary"; }
jobs=$(nproc)

if [ -d .deps/usr ]; then
  export CMAKE_PREFIX_PATH=$root/.deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$root/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export BRISK_CACHE_DIR=$root/$build/cache

do_build() {
  local t0=$(date +%s)
  if cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.log" 2>&1 &&
     timeout "$(tmo 30)" cmake --build $build -j"$jobs" >>"$out/build.log" 2>&1; then
    note "build     ok in $(($(date +%s) - t0)) s ($(grep -m1 'brisk: CUDA' "$out/build.log" | sed 's/-- brisk: //'))"
  else
    note "build     FAILED (tail of $out/build.log):"; tail -25 "$out/build.log" | tee -a "$summary"; exit 1
  fi
}

do_test() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$out/check.txt" 2>&1
  timeout 120 $build/brisk check >>"$out/check.txt" 2>&1
  note "check     exit $?"
  grep -E '^(cuda|gpu|precision|rates|smoke) ' "$out/check.txt" | sed 's/^/          /' | tee -a "$summary"
  (cd $build && timeout "$(tmo 200)" ctest -R cuda --output-on-failure -j1 >"$out/ctest-cuda.log" 2>&1)
  note "cuda      $(grep -E 'tests passed|tests failed' "$out/ctest-cuda.log" | tail -1), $(grep -c '(Skipped)' "$out/ctest-cuda.log") skipped"
  grep -E '^(FAIL|ok  ) |CHECK failed|REQUIRE failed|relative error|differs' "$out/ctest-cuda.log" | grep -v '^ok' | head -30 |
    sed 's/^/          /' | tee -a "$summary"
  if [ "$(left)" -gt 150 ]; then
    (cd $build && timeout "$(tmo 120)" ctest -E cuda -j"$jobs" --output-on-failure >"$out/ctest-cpu.log" 2>&1)
    note "cpu suite $(grep -E 'tests passed|tests failed' "$out/ctest-cpu.log" | tail -1)"
    grep -E '^\s+[0-9]+ - .*\((Failed|Timeout)' "$out/ctest-cpu.log" | head -10 | sed 's/^/          /' | tee -a "$summary"
  fi
}

do_bench() {
  mkdir -p data
  [ -f data/diffusion.npz ] || $build/brisk synth diffusion data/diffusion.npz >/dev/null
  [ -f data/tabular.npz ] || $build/brisk synth tabular data/tabular.npz >/dev/null
  for c in examples/diffusion.json:300 examples/tabular.json:200 bench/gemm_bound.json:40; do
    [ "$(left)" -gt 90 ] || { note "bench     ${c%%:*}: skipped (deadline)"; continue; }
    local name=$(basename "${c%%:*}" .json)
    timeout "$(tmo 60)" $build/brisk bench "${c%%:*}" --steps "${c##*:}" --json >"$out/bench-one.txt" 2>&1
    note "bench     $name (exit $?)"
    grep -v '^{' "$out/bench-one.txt" | tail -n +2 | sed 's/^/          /' | tee -a "$summary"
    cat "$out/bench-one.txt" >>"$out/bench.txt"
  done
  rm -f "$out/bench-one.txt"
}

torch_ref() {
  for f in ${TORCH_REF:-} shared/workloads/torch_ref.py ../shared/workloads/torch_ref.py .gpu/torch_ref.py; do
    [ -f "$f" ] && { echo "$f"; return; }
  done
}

do_torch() {
  local ref=$(torch_ref) modes=${1:-"eager amp compile amp-compile"}
  [ -n "$ref" ] || { note "torch     torch_ref.py not found (copy it to .gpu/ and carry .gpu)"; return; }
  for m in $modes; do
    for w in diffusion tabular; do
      local need=60
      case $m in *compile*) need=200 ;; esac
      [ "$(left)" -gt $need ] || { echo "{\"workload\": \"$w\", \"mode\": \"$m\", \"error\": \"skipped: deadline\"}" >>"$out/torch.jsonl"; continue; }
      PYTHONUNBUFFERED=1 timeout "$(tmo 20)" python3 "$ref" --workload $w --mode $m --device cuda --steps 200 \
        2>>"$out/torch.err" | tail -1 >>"$out/torch.jsonl" ||
        echo "{\"workload\": \"$w\", \"mode\": \"$m\", \"error\": \"failed or timed out\"}" >>"$out/torch.jsonl"
    done
  done
}

summarize() {
  python3 - "$out" <<'PY' | tee -a "$summary"
import json, os, re, sys
out = sys.argv[1]
def jl(path):
    rows = []
    if os.path.exists(path):
        for l in open(path):
            l = l.strip()
            if l.startswith("{"):
                try: rows.append(json.loads(l))
                except ValueError: pass
    return rows
torch = [r for r in jl(f"{out}/torch.jsonl") if "ms_per_step_median" in r]
bench = {}
for r in jl(f"{out}/bench.txt"):
    bench.setdefault(os.path.basename(r.get("config", "")).replace(".json", ""), []).append(r)
print("ratios    (PyTorch ms/step / brisk all-on ms/step; targets: diffusion >= 5x best and >= 20x eager fp32, tabular >= 2x best)")
for w in ("diffusion", "tabular"):
    b = [r for r in bench.get(w, []) if r.get("row") == 5]
    t = {r["mode"]: r["ms_per_step_median"] for r in torch if r.get("workload") == w}
    if not b or not t:
        print(f"          {w}: incomplete (brisk rows {len(bench.get(w, []))}, torch modes {sorted(t)})"); continue
    ms = b[0]["ms_per_step_median"]; best = min(t.values()); bm = min(t, key=t.get)
    eager = t.get("eager")
    print(f"          {w}: brisk {ms:.4f} ms; torch best {best:.4f} ms ({bm}) -> {best / ms:.2f}x"
          + (f"; torch eager {eager:.4f} ms -> {eager / ms:.2f}x" if eager else ""))
rate = None
if os.path.exists(f"{out}/check.txt"):
    m = re.search(r"bf16 GEMM ([0-9.]+) TFLOP/s", open(f"{out}/check.txt").read())
    rate = float(m.group(1)) if m else None
g = [r for r in bench.get("gemm_bound", []) if r.get("row") == 5]
if g and rate:
    B, dims = 8192, [64, 8192, 8192, 8192, 3]
    flops = 6.0 * B * sum(a * b for a, b in zip(dims, dims[1:]))
    tf = flops / (g[0]["ms_per_step_median"] * 1e-3) / 1e12
    print(f"gemm step {tf:.0f} TFLOP/s = {100 * tf / rate:.0f}% of the measured bf16 GEMM rate {rate:.0f} (target >= 60%)")
else:
    print("gemm step incomplete")
PY
}

case $phase in
  build) do_build ;;
  test) do_build; do_test ;;
  bench) do_build; do_bench ;;
  torch) do_torch; summarize ;;
  all) do_build; do_test; do_bench; do_torch "eager amp"; do_torch "compile amp-compile"; summarize ;;
  *) echo "usage: tools/gpu-session.sh [all|build|test|bench|torch] [--deadline SECONDS]" >&2; exit 2 ;;
esac
echo
echo "================ summary ($(( $(date +%s) - start )) s; logs in $out)"
cat "$summary"
