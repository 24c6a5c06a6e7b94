#!/usr/bin/env bash
# The GPU suite: everything a GPU session checks, in stages that each fit one device call
# (10 minutes a call; no step starts that would end after --deadline, 540 s by default), and
# one summary a reader takes in at a glance: $OUT/summary.txt, a PASS/FAIL/SKIP line per check
# with its key number, then the PyTorch/brisk ratios. Full logs: $OUT/logs.tar.gz.
#
#   tools/gpu-session.sh [options] STAGE...
#
# Stages (run in the order given, under one deadline; each builds what it needs first):
#   build     configure + build build-gpu/ for sm_90, everything
#   test      `brisk check --require-gpu`; every CUDA test (ctest -R cuda, one at a time, among
#             them train.test_cuda_train's test_step_times_are_device_times: a GEMM-bound MLP
#             (CUDA graph, prefetch) whose median device ms/step x 30 is within 35 % of the
#             steps' wall time and below 2 PFLOP/s, i.e. step times are the device's (never run
#             yet); dist.test_cuda_dist_alone: world size 1 issues no collective and trains bit
#             for bit as without a group, printing both ms/step: the all-reduce overhead;
#             dist.test_cuda_dist_overlap: a one-rank NCCL communicator, buckets on NCCL's own
#             stream from the executor's gradient hook, eager and in a CUDA graph, gradients
#             bit for bit those of a plain backward (never run yet);
#             dist.test_cuda_zero1: ZeRO-1 with a one-rank NCCL communicator, reduce-scatter,
#             the shard's AdamW and the all-gather, eager and in a CUDA graph, in fp32, bf16
#             and fp16, parameters, moments, loss scaler and a forward's loss after the steps
#             bit for bit the plain update's; fp16 with an injected inf: the step skipped and
#             the scale halved; bf16 updated in two ranges of the arena (never run yet); the
#             convolution, pooling and batch norm tests and the GRU's (test_cuda_gru: cuDNN's GRU
#             against the CPU, never run yet) also on summary lines of their own, the
#             convolution once more per precision, with its worst error per graph layout and
#             cuDNN layout (test_cuda_conv writes them to $BRISK_CONV_SUMMARY)); the ResNet
#             example trained 16 steps with a CUDA graph, past its first validation; the
#             same again with every cuBLASLt epilogue refused (REFUSE_EPILOGUE below); then
#             the CPU tests when 4 minutes are left and cputest is not asked for too
#   cputest   every other test, pinned to the CPU (CUDA_VISIBLE_DEVICES=), all cores
#   sanitize  compute-sanitizer memcheck (leak check on) and racecheck over a short training
#             run of each example
#   agree     per example, 100 steps each, a loss per step: GPU fp32, tf32 and bf16 against
#             the CPU's fp32 losses (<= 1e-3 relative; bf16 <= 3e-2, or up to 4x the model's own
#             spread at that precision: the CPU from its initial weights moved by one rounding
#             unit of the precision's operands, 1e-7 for fp32, 2^-11 for tf32, 2^-8 for bf16,
#             nudge_checkpoint.py; the ResNet example's training parts from itself at fp32
#             rounding by step 3, the tabular MLP's at tf32 rounding by 3e-3); CUDA graph == eager bit
#             for bit (fp32, --deterministic); --deterministic bit-identical twice (bf16);
#             fp32 with every epilogue refused against the CPU too; the bf16 run's report.html
#             holds the GPU's optimization table (the page comes back in logs.tar.gz); and
#             per example the gradients after one fp32 step against the CPU's (<= 1e-4 relative
#             L2, tools/gpu/compare_grads.py: also the best common scale and what is left after it)
#   bench     `brisk bench` of every single-model example and bench/*.json, then PyTorch's
#             eager and amp of each workload that has an examples/<workload>.json, then its
#             compile modes while time is left (so that the ratios come from one call)
#   profile   `brisk profile` (eager, every node timed by events) of each example matching --only,
#             fp32, bf16 without autotune and bf16 (brisk bench's fp32, "+ mixed precision" and "all
#             on" rows; --cpu: fp32 only): logs/profile-EXAMPLE-*.txt (the
#             per-op and top-node tables) and .json, and a line each: the top op type and its
#             share, the kernels a step launches, and the step against the launch floor (an empty
#             CUDA graph of that many kernels replayed). For the open questions of the first GPU
#             runs: --only 'resnet|lstm' (never run on a GPU yet)
#   torch     bench/reference/timed.py in every mode (eager, amp, compile, amp-compile); builds nothing
#   torchref  the PyTorch-equivalence tests of your own models with brisk on the GPU (fp32, no
#             TF32; BRISK_TEST_DEVICE=cuda, bound 1e-4): every graph example's 50 steps against
#             PyTorch (tests/reference/train_graph.py, the examples and learning rates of
#             reference.train50_*) and every group of imported ONNX modules (tests/onnx/
#             train_onnx.py: every cases_GROUP.py)
#   all       every stage above, in that order (with --deadline 0 on a GPU machine of your own)
# The examples are examples/*.json as found (a config with "models" is a pipeline: one run
# per model); the workloads are bench/WORKLOADS.md's (bench/reference/workloads.py's WORKLOADS).
#
# Options:
#   --deadline S   seconds from the start after which no step starts (default 540; 0: none)
#   --only REGEX   only the examples / configs / workloads whose name matches (grep -E)
#   --steps N      steps of each agreement run (default 100)
#   --continue     skip the checks that already have a PASS or FAIL in the results folder
#                  (call a stage again after its deadline cut it short)
#   --fresh        forget the results of earlier calls first
#   --cpu          a dry run without a GPU: the GPU runs train on the CPU (so every comparison
#                  passes), CUDA-only steps report SKIP; the ctest tools.session_dry_run runs it
#   --build-dir D  (default build-gpu)   --no-build: use D as it is
#   --work D       the results folder, kept between calls while the machine is warm (gpu-logs)
#   --lean         for about 15 minutes of GPU time: the CUDA tests once (not again with
#                  the epilogues refused), no CPU tests inside stage test, no compile modes
#                  inside stage bench, and a CUDA test is stopped after 150 s instead of 300
#
# A GPU session (docs/dev/gpu-suite.md). Once, on a machine with apt, for a GPU machine without it:
#   tools/gpu/pack-debs.sh libcjson-dev libcjson1        # -> .deps/ (the GPU image lacks cJSON)
#   tools/gpu/pack-netcdf.sh                              # -> .gpu/netcdf.tar.xz (meshgnn)
# and copy .deps and .gpu with the working tree (git ignores both).
# Measured on the first GPU run (H200, 2026-11-27, one call of 544 s, the machine's start ~30 s):
# build from scratch 24 s; test (check + the 16 CUDA tests once) 31 s; bench 405 s (brisk bench
# of 6 configs 4 min, 3 of them for bench/gemm_bound.json; torch eager+amp of 6 workloads 3 min);
# agree 79 s for 2 examples. With 15 minutes of GPU time, the machine's starts and idle time
# included, plan two calls of at most 10 minutes each, .deps and .gpu copied with the tree:
#   tools/gpu-session.sh --lean --fresh --deadline 555 build test bench agree    (a 600 s limit)
#   then, after fixing here, with what is left (a fresh start costs ~30 s; none under 4 min):
#   BENCH_STEPS=100 TORCH_STEPS=100 tools/gpu-session.sh --lean --deadline D --only 'REGEX' build test bench
# Measured on the second (H200, 2026-11-27 night, two calls): build 23-31 s; test 38-49 s (17
# tests); profile of diffusion, lstm and resnet (3 precisions each) 13 s; agree of tabular,
# transformer, resnet and pipeline 100 s; sanitize: memcheck 1-10 s an example, racecheck 4 s for
# diffusion but over 287 s for lstm and over 53 s for resnet (cuDNN's kernels under racecheck):
# give racecheck of lstm, resnet and pipeline a call of their own, or leave them out.
# Measured on the third (H200, 2026-11-28, two calls of 430 and 290 s, ~55 s of start each):
# build 26 s; test 71 s; agree of resnet and meshgnn 59 s; bench of diffusion (100 steps) 25 s;
# memcheck 1 s an example; racecheck 8 s for tabular, over 134 s for transformer. racecheck
# reports hazards only inside cuBLASLt's own sm90 kernels (nvjet_*: meshgnn 57, transformer
# 432), none in brisk's (k_*); with --kernel-name kns=k_ the sanitizer itself fails on cuDNN's
# kernels ("failed to handle a hardware exception") for lstm, pipeline and resnet. initcheck
# of resnet: reads of uninitialized memory inside cuDNN's own nhwcToNchwKernel only. The
# image has no nsys. meshgnn needs NetCDF: tools/gpu/pack-netcdf.sh here first.
# Where the ResNet and LSTM steps' time goes (brisk profile, no nsys needed):
# tools/gpu-session.sh --lean --only 'resnet|lstm' build profile
# With 30 minutes of GPU time in calls of 10, the stages one call each: build test; agree; sanitize; bench;
# --continue cputest torch.
# A stage cut short by its deadline says SKIP (deadline) per check: call it again with
# --continue. The build and results folders survive only while the machine is warm (30 s
# after a call); on a cold one a stage rebuilds what it needs first (the brisk command alone:
# ~1 min, estimated) and its summary holds only that call's results: keep each summary.txt.
# A build also returns $OUT/brisk-cli.tar.gz (the command and the hash of its sources): copy
# it into .gpu/ after the first call, and the later calls' run stages use it on a cold
# machine instead of building, as long as src/, include/, cmake/ and CMakeLists.txt are unchanged.
set -u
# ---- what a GPU session may adjust ----
REFUSE_EPILOGUE="BRISK_CUDA_REFUSE_EPILOGUES=all"  # env assignment(s) that force every cuBLASLt epilogue fallback
CUDA_TESTS=cuda                                    # ctest -R: the tests about CUDA; the rest run CPU-pinned
RTOL_FP32=1e-3 RTOL_BF16=3e-2                      # agreement with the CPU: fp32/tf32, bf16
# the model's own spread per precision: its weights moved by one rounding unit of the operands
# (fp32 about 2^-23, tf32's 10-bit mantissa 2^-11, bf16's 7-bit 2^-8), as tag:relative size
NUDGES="fp32:1e-7 tf32:4.88e-4 bf16:3.91e-3"
SANITIZE_STEPS=3                                   # an eager warm-up step, the capture, a replay
BENCH_STEPS=${BENCH_STEPS:-200} BENCH_STEPS_HEAVY=${BENCH_STEPS_HEAVY:-40}  # examples; bench/*.json (6.6 TFLOP a step)
TORCH_STEPS=${TORCH_STEPS:-200}                    # (these three, and TORCH_MODES of stage bench, may come from the environment)
PROFILE_STEPS=${PROFILE_STEPS:-20}                 # timed steps of each brisk profile (as many plain ones run too)

cd "$(dirname "$0")/.."
root=$PWD
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2; exit 2; }
stages=() lean=0 fresh=0 deadline=540 only=. steps=100 resume=0 cpu=0 build=build-gpu nobuild=0 work=gpu-logs
while [ $# -gt 0 ]; do
  case $1 in
    --deadline) deadline=${2:?}; shift ;;
    --only) only=${2:?}; shift ;;
    --steps) steps=${2:?}; shift ;;
    --continue) resume=1 ;;
    --lean) lean=1 ;;
    --fresh) fresh=1 ;;
    --cpu) cpu=1 ;;
    --build-dir) build=${2:?}; shift ;;
    --no-build) nobuild=1 ;;
    --work) work=${2:?}; shift ;;
    build|test|cputest|sanitize|agree|bench|profile|torch|torchref) stages+=("$1") ;;
    all) stages+=(build test cputest sanitize agree bench profile torch torchref) ;;
    *) echo "gpu-session.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ ${#stages[@]} -gt 0 ] || usage
case "$deadline$steps" in *[!0-9]*) echo "gpu-session.sh: --deadline and --steps take whole numbers" >&2; exit 2 ;; esac
start=$(date +%s)
mkdir -p "$work/logs" "$work/runs" && work=$(cd "$work" && pwd)
[ $fresh = 1 ] && rm -rf "$work/results.tsv" "$work/timings.tsv" "$work/bench.jsonl" "$work/torch.jsonl" "$work/logs" "$work/runs" && mkdir -p "$work/logs" "$work/runs"
case $build in /*) ;; *) build=$root/$build ;; esac
brisk=$build/brisk
out=${OUT:-$work/out}
mkdir -p "$out"
jobs=$(nproc)
py=${PYTHON:-python3}
tools=$root/tools/gpu

left() { [ "$deadline" -eq 0 ] && echo 99999 || echo $((deadline - ($(date +%s) - start))); }
# a timeout that leaves RESERVE seconds of the deadline, at most CAP
tmo() { local t=$(($(left) - $1)); [ -n "${2:-}" ] && [ "$t" -gt "$2" ] && t=$2; [ $t -lt 5 ] && t=5; echo $t; }
render() { $py "$tools/summary.py" "$work" </dev/null >"$out/summary.txt" 2>"$work/logs/summary.err" || cp "$work/results.tsv" "$out/summary.txt"; }
# record STATUS STAGE CHECK DETAIL: one check's result (replaces an earlier one of the same check)
record() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$(date +%s)" "$2" "$3" "$1" "$(printf '%s' "$4" | tr '\t\n' '  ')" >>"$work/results.tsv"
  printf '%-5s %-9s %s: %s\n' "$1" "$2" "$3" "$4"
  render
}
# enough STAGE CHECK SECONDS: true when SECONDS are left, else records a SKIP
enough() { [ "$(left)" -ge "$3" ] && return 0; record SKIP "$1" "$2" "deadline: $(left) s left, needs ~$3 s (call the stage again with --continue)"; return 1; }
# done_before STAGE CHECK: with --continue, true when the check already has a PASS or FAIL
done_before() { [ $resume = 1 ] && [ -f "$work/results.tsv" ] && awk -F'\t' -v s="$1" -v c="$2" '$2 == s && $3 == c && ($4 == "PASS" || $4 == "FAIL") {f = 1} END {exit !f}' "$work/results.tsv"; }
lastline() { grep -v '^\s*$' "$1" 2>/dev/null | grep -v '^=========' | tail -1 | cut -c1-200; }
pack() { (cd "$work" && tar czf "$out/logs.tar.gz" --exclude='*.safetensors' --exclude=brisk.lock --exclude=data \
  --exclude=out --exclude=cache logs runs results.tsv env.txt $(ls timings.tsv bench.jsonl torch.jsonl 2>/dev/null)) 2>/dev/null; }
trap pack EXIT
note() { echo "== $* ($(($(date +%s) - start)) s)"; }

examples() { for f in "$root"/examples/*.json; do n=$(basename "$f" .json); echo "$n" | grep -qE -- "$only" && echo "$n"; done; }
is_pipeline() { grep -q '"models"' "$1"; }

# ---- the machine, the code, the libraries brisk loads at run time ----
if [ -d .deps/usr ]; then
  export CMAKE_PREFIX_PATH=$root/.deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=$root/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# NetCDF for meshgnn (tools/gpu/pack-netcdf.sh packed it here): only the libraries the image
# lacks are kept, and they come after every other path, so no library of the image is shadowed
if [ -s .gpu/netcdf.tar.xz ] && [ $cpu = 0 ] && [ ! -d "$root/.ncdeps/nc" ]; then
  mkdir -p "$root/.ncdeps" && tar -C "$root/.ncdeps" -xJf .gpu/netcdf.tar.xz &&
    sed -i "s|@PREFIX@|$root/.ncdeps/nc|" "$root/.ncdeps/nc/lib/pkgconfig/netcdf.pc"
  for f in "$root"/.ncdeps/nc/lib/*.so.*; do
    case $(basename "$f") in libnetcdf.so*) ;; *) ldconfig -p | grep -q " $(basename "$f") " && rm -f "$f" ;; esac
  done
fi
if [ -d "$root/.ncdeps/nc" ]; then
  export PKG_CONFIG_PATH=$root/.ncdeps/nc/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$root/.ncdeps/nc/lib
fi
export BRISK_CACHE_DIR=$work/cache   # the GEMM autotune cache, kept with the results
# cuDNN and NCCL are dlopen'ed by soname: on the image they may come only with PyTorch's wheels
libs=""
if [ $cpu = 0 ]; then
  for lib in cudnn nccl; do
    if ldconfig -p 2>/dev/null | grep -q "lib$lib\.so"; then libs+="libs  $lib: the system's"$'\n'; continue; fi
    d=$($py - "$lib" 2>/dev/null <<'PY'
import glob, site, sys
for p in site.getsitepackages():
    for d in glob.glob(f"{p}/nvidia/{sys.argv[1]}/lib"):
        print(d)
        sys.exit(0)
PY
)
    if [ -n "$d" ]; then
      export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      libs+="libs  $lib: $d (PyTorch's wheel)"$'\n'
    else libs+="libs  $lib: not found"$'\n'; fi
  done
fi
{
  echo "brisk GPU suite, $(date -u '+%Y-%m-%d %H:%M UTC'): stages ${stages[*]}$([ $cpu = 1 ] && echo ' (--cpu: a dry run without a GPU)')"
  if c=$(git rev-parse --short HEAD 2>/dev/null); then
    echo "code  $c$(git diff --quiet HEAD 2>/dev/null || echo ' + uncommitted changes')"
  else echo "code  (no git: a copy of the working tree)"; fi
  if [ $cpu = 0 ]; then
    echo "gpu   $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -1)"
    printf '%s' "$libs"
  fi
} >"$work/env.txt"
cat "$work/env.txt"

# The sources the brisk command is built from, as one hash: a carried binary is used only for these.
source_hash() { find CMakeLists.txt cmake src include -type f -print0 2>/dev/null | sort -z | xargs -0 sha1sum | sha1sum | cut -c1-40; }
# A build leaves the brisk command as $OUT/brisk-cli.tar.gz; carried back as .gpu/brisk-cli.tar.gz
# it spares a cold machine's run stages their build, if the sources are the same and it runs here.
export_cli() {
  mkdir -p "$work/cli" && cp "$brisk" "$work/cli/brisk" && source_hash >"$work/cli/source.sha1" &&
    tar czf "$out/brisk-cli.tar.gz" -C "$work/cli" brisk source.sha1
}
carried_cli() {
  local tgz=$root/.gpu/brisk-cli.tar.gz dir=$work/carried
  [ -f "$tgz" ] && [ ! -x "$brisk" ] || return 1
  rm -rf "$dir" && mkdir -p "$dir" && tar xzf "$tgz" -C "$dir" 2>/dev/null || return 1
  [ "$(cat "$dir/source.sha1" 2>/dev/null)" = "$(source_hash)" ] || { echo "   .gpu/brisk-cli.tar.gz: other sources, building"; return 1; }
  [ $cpu = 1 ] || "$dir/brisk" check --quick 2>/dev/null | grep -q '^cuda *backend built' || return 1
  brisk=$dir/brisk
  record PASS build "brisk, carried" "$brisk from .gpu/brisk-cli.tar.gz (built from the same sources)"
}

# ensure_build [cli]: build everything, or (cli) only the brisk command the run stages need
built=
ensure_build() {
  local what=${1:-all}
  [ "$built" = all ] || [ "$built" = "$what" ] && return 0
  built=$what
  if [ $nobuild = 1 ]; then
    [ -x "$brisk" ] && return 0
    record FAIL build "build" "--no-build, and $brisk is not there"; exit 1
  fi
  [ "$what" = cli ] && carried_cli && return 0
  brisk=$build/brisk
  local t0=$(date +%s) scratch=0 log=$work/logs/build-$what.log
  [ -f "$build/CMakeCache.txt" ] || scratch=1
  note "build ($what)"
  local target=(); [ "$what" = cli ] && target=(--target brisk_cli)
  if cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$log" 2>&1 &&
     timeout "$(tmo 30)" cmake --build "$build" -j"$jobs" "${target[@]}" >>"$log" 2>&1; then
    what="$(($(date +%s) - t0)) s, $([ $scratch = 1 ] && echo 'from scratch' || echo 'incremental')$([ "$what" = cli ] && echo ', brisk only'), $(grep -m1 -E 'brisk: (CUDA|no nvcc|BRISK_CUDA)' "$log" | sed 's/.*brisk: //')"
    if [ $cpu = 0 ] && ! "$brisk" check --quick | grep -q '^cuda *backend built'; then
      record FAIL build "cmake + build, sm_90" "$what: a CPU-only build (no nvcc found?)"; exit 1
    fi
    # on a stage other than build, only a build from scratch is news (the machine was cold)
    case " ${stages[*]} " in *" build "*) record PASS build "cmake + build, sm_90" "$what" ;;
      *) [ $scratch = 1 ] && record PASS build "cmake + build, sm_90" "$what (the build folder was gone: a cold machine)" ;; esac
    export_cli
  else
    record FAIL build "cmake + build, sm_90" "after $(($(date +%s) - t0)) s: $(grep -m1 -E 'error|Error' "$log" | cut -c1-200) (${log##*/})"
    exit 1
  fi
}

# data for a config: its data.train file, made by `brisk synth KIND` (KIND = the file's base name)
ensure_data() {
  local f=$(grep -o '"train": *"[^"]*"' "$1" | head -1 | sed 's/.*: *"//; s/"$//')
  local img=$(grep -o '"labels": *"[^"]*"' "$1" | head -1 | sed 's/.*: *"//; s/"$//')
  if [ -z "$f" ] && [ -n "$img" ]; then # data.images (examples/resnet.json): brisk synth images DIR
    [ -s "$work/$img" ] && return 0
    (cd "$work" && "$brisk" synth images "$(dirname "$img")") >>"$work/logs/synth.log" 2>&1
    return
  fi
  [ -n "$f" ] || return 0
  [ -s "$work/$f" ] && return 0
  local kind=$(basename "$f"); kind=${kind%.*}
  mkdir -p "$work/$(dirname "$f")"
  (cd "$work" && "$brisk" synth "$kind" "$f") >>"$work/logs/synth.log" 2>&1
}

# ctest_run STAGE CHECK LOG ENV... -- CTEST_ARGS...: one ctest pass, its counts recorded. A test
# that skips fails the check on a GPU machine (it did not find the GPU) unless skips_ok=1.
skips_ok=0
ctest_run() {
  local stage=$1 check=$2 log=$3 envs=() t0=$(date +%s); shift 3
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  (cd "$build" && env "${envs[@]}" timeout "$(tmo 15)" ctest --output-on-failure --timeout $([ $lean = 1 ] && echo 150 || echo 300) "$@") >"$log" 2>&1
  local rc=$? total passed skipped failed
  total=$(grep -cE 'Test +#[0-9]+: ' "$log")
  passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$log")
  skipped=$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "$log")
  failed=$(awk '/The following tests FAILED:/ {f = 1; next} f && /^[[:space:]]+[0-9]+ - / {sub(/^[[:space:]]+[0-9]+ - /, ""); printf "%s%s", n++ ? ", " : "", $0}' "$log")
  local what="$passed/$total passed, $skipped skipped, $(($(date +%s) - t0)) s"
  if [ $rc = 124 ] || [ $rc = 137 ]; then record FAIL $stage "$check" "stopped at the deadline: $what so far (${log##*/})"
  elif [ $rc != 0 ] || [ "$total" = 0 ]; then record FAIL $stage "$check" "$what; failed: ${failed:-exit $rc} (${log##*/})"
  elif [ "$skipped" != 0 ] && [ $skips_ok = 0 ]; then
    record FAIL $stage "$check" "$what: a test that skips on a GPU machine did not find the GPU ($(grep -E '\*\*\*Skipped' "$log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' '))"
  else record PASS $stage "$check" "$what"; fi
}

stage_test() {
  ensure_build
  note test
  if [ $cpu = 1 ]; then
    "$brisk" check >"$work/logs/check.txt" 2>&1 && record PASS test "brisk check" "(--cpu) $(grep '^device' "$work/logs/check.txt" | tr -s ' ')" ||
      record FAIL test "brisk check" "exit $? ($(lastline "$work/logs/check.txt"))"
  else
    timeout "$(tmo 15 240)" "$brisk" check --require-gpu >"$work/logs/check.txt" 2>&1
    local rc=$? rates smoke
    rates=$(grep -m1 '^rates' "$work/logs/check.txt" | sed 's/^rates *//; s/ (8192^3, random data)//')
    smoke=$(grep -m1 '^smoke' "$work/logs/check.txt" | sed 's/^smoke *//; s/one training step on the GPU/smoke/')
    if [ $rc = 0 ] && echo "$smoke" | grep -q 'ok$'; then record PASS test "brisk check --require-gpu" "$rates; $smoke"
    else record FAIL test "brisk check --require-gpu" "exit $rc: ${smoke:-$(lastline "$work/logs/check.txt")}"; fi
  fi
  local ncuda=$(cd "$build" && ctest -N -R "$CUDA_TESTS" | grep -c 'Test *#')
  local ncpu=$(cd "$build" && ctest -N -E "$CUDA_TESTS" | grep -c 'Test *#')
  if [ $cpu = 1 ]; then
    record SKIP test "CUDA tests (ctest -R $CUDA_TESTS)" "--cpu: $ncuda tests found, not run"
    record SKIP test "CUDA tests, $REFUSE_EPILOGUE" "--cpu: not run"
    return
  fi
  if ! done_before test "CUDA tests (ctest -R $CUDA_TESTS)" && enough test "CUDA tests (ctest -R $CUDA_TESTS)" 60; then
    rm -f "$work/logs/conv-summary.tsv"
    ctest_run test "CUDA tests (ctest -R $CUDA_TESTS)" "$work/logs/ctest-cuda.log" \
      BRISK_CONV_SUMMARY="$work/logs/conv-summary.tsv" -- -R "$CUDA_TESTS" -j1
    # the vision kernels (issue 12), issue 31's layer ops and its GRU on lines of their own: never run on a GPU before
    local t line
    for t in "test_cuda_conv:cuDNN convolution" "test_cuda_vision:pooling and batch norm" \
             "test_cuda_grad:whole training graphs, ResNet-18 at the example's size among them," \
             "test_cuda_layer_ops:issue 31's layer ops (math, losses, upsampling, transposed conv, group norm)" \
             "test_cuda_gru:issue 31's GRU (cuDNN CUDNN_GRU, r recomputed for d hh_n; ops, stacks, capture)"; do
      line=$(grep -E "Test +#[0-9]+: backend\.${t%%:*} " "$work/logs/ctest-cuda.log" | head -1 | tr -s ' ')
      case $line in
        *Passed*) record PASS test "${t#*:} vs CPU (${t%%:*})" "${line##* Passed }" ;;
        "") record FAIL test "${t#*:} vs CPU (${t%%:*})" "not in ctest-cuda.log" ;;
        *) record FAIL test "${t#*:} vs CPU (${t%%:*})" "$line (ctest-cuda.log)" ;;
      esac
    done
    # where an fp32 graph left the CPU's (test_cuda_grad's locate_divergence, which also
    # recomputes the first parting node by the CPU's kernel from the GPU's inputs)
    local where spread
    where=$(grep -E "nodes past 1e-5; the worst node" "$work/logs/ctest-cuda.log" | head -3 | tr -s ' ' | tr '\n' ';')
    [ -n "$where" ] && record FAIL test "fp32 graphs, node by node vs CPU" "$where (first nodes: ctest-cuda.log)"
    # the ResNet's gradients against the CPU's own spread (test_cuda_grad's cpu_spread: a
    # flipped batch-norm ReLU mask moves them by 1e-3 at fp32 rounding, 2026-11-28)
    spread=$(grep -m1 -E "fp32, fusion on: forward at most" "$work/logs/ctest-cuda.log" | sed 's/.*fusion on: //')
    if [ -n "$spread" ]; then
      if grep -qE "fp32, fusion on: gradients: relative error|fp32, fusion on: forward: node" "$work/logs/ctest-cuda.log"
      then record FAIL test "ResNet fp32 gradients vs the CPU's own spread" "$spread"
      else record PASS test "ResNet fp32 gradients vs the CPU's own spread" "$spread"; fi
    fi
    # NHWC and bf16/fp16 convolutions (issue 12, part 3): one line per precision, its worst
    # relative error per graph layout -> cuDNN layout; never run on a GPU before
    local prec rows detail
    for prec in fp32 tf32 bf16 fp16; do
      rows=$(awk -F'\t' -v p=$prec '$1 == p' "$work/logs/conv-summary.tsv" 2>/dev/null)
      if [ -z "$rows" ]; then
        record FAIL test "cuDNN convolution $prec, NCHW/NHWC vs CPU" "no line in conv-summary.tsv (test_cuda_conv did not get that far)"
        continue
      fi
      detail=$(printf '%s\n' "$rows" | awk -F'\t' '{printf "%s%s->%s %s", n++ ? ", " : "", $2, $3, $4; t = $5} END {printf " (tol %s)", t}')
      if printf '%s\n' "$rows" | awk -F'\t' '$6 != "ok" {bad = 1} END {exit bad}'; then
        record PASS test "cuDNN convolution $prec, NCHW/NHWC vs CPU" "$detail"
      else record FAIL test "cuDNN convolution $prec, NCHW/NHWC vs CPU" "$detail"; fi
    done
  fi
  test_resnet_graph
  [ $lean = 1 ] && { record SKIP test "CUDA tests, $REFUSE_EPILOGUE" "--lean: not run"; return; }
  if ! done_before test "CUDA tests, $REFUSE_EPILOGUE" && enough test "CUDA tests, $REFUSE_EPILOGUE" 60; then
    ctest_run test "CUDA tests, $REFUSE_EPILOGUE" "$work/logs/ctest-cuda-refused.log" $REFUSE_EPILOGUE -- -R "$CUDA_TESTS" -j1
  fi
  # the CPU tests too, unless this call runs stage cputest anyway or has too little time left
  case " ${stages[*]} " in *" cputest "*) return ;; esac
  if [ "$(left)" -gt 240 ]; then stage_cputest
  else record SKIP cputest "CPU tests (CUDA_VISIBLE_DEVICES=, $ncpu tests)" "no time left in this call: run stage cputest"; fi
}

# The ResNet example past its first validation (12 steps an epoch) with the step captured as a
# CUDA graph: validation's smaller last batch plans its convolutions after the capture, and
# may outgrow the shared cuDNN workspace and staging buffer the captured step replays with
# (freed, they made the first GPU run's ResNet bench fail with an illegal memory access). The
# detail counts the buffers kept for the capture ("... after a CUDA graph was captured").
test_resnet_graph() {
  local cfg=$root/examples/resnet.json check="ResNet example, CUDA graph across validation (16 steps)"
  local log=$work/logs/resnet-graph.log
  [ -f "$cfg" ] && echo resnet | grep -qE -- "$only" || return 0
  done_before test "$check" && return
  enough test "$check" 40 || return
  ensure_data "$cfg" || { record FAIL test "$check" "brisk synth failed (logs/synth.log)"; return; }
  rm -rf "$work/runs/resnet-graph"
  (cd "$work" && timeout "$(tmo 5 120)" "$brisk" train "$cfg" --device cuda --max-steps 16 --log-every 1 \
    --out runs/resnet-graph) >"$log" 2>&1
  local rc=$? kept
  kept=$(grep -c 'after a CUDA graph was captured' "$log")
  if [ $rc = 0 ] && grep -q 'epoch 1 done' "$log" && grep -q 'step 16/16' "$log"; then
    record PASS test "$check" "validation at step 12, 4 replays after it; $kept buffer(s) outgrown after the capture, kept"
  else record FAIL test "$check" "exit $rc: $(grep -m1 -iE 'illegal|error|failed' "$log" | cut -c1-160) (${log##*/})"; fi
}

stage_cputest() {
  ensure_build
  note cputest
  local n=$(cd "$build" && ctest -N -E "$CUDA_TESTS" | grep -c 'Test *#')
  local check="CPU tests (CUDA_VISIBLE_DEVICES=, $n tests)"
  if [ $cpu = 1 ]; then record SKIP cputest "$check" "--cpu: not run (the dry run is itself one of them)"; return; fi
  done_before cputest "$check" && return
  enough cputest "$check" 60 || return
  # skips are fine here: some CPU tests need Debian's python3-torch, which the image lacks
  skips_ok=1 ctest_run cputest "$check" "$work/logs/ctest-cpu.log" CUDA_VISIBLE_DEVICES= -- -E "$CUDA_TESTS" -j"$jobs"
}

stage_sanitize() {
  ensure_build cli
  note sanitize
  local cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer) ex tool
  for ex in $(examples); do
    local cfg=$root/examples/$ex.json
    ensure_data "$cfg"
    for tool in memcheck racecheck; do
      local check="$tool, $ex ($SANITIZE_STEPS steps)" log=$work/logs/sanitize-$tool-$ex.log t0=$(date +%s)
      [ $cpu = 1 ] && { record SKIP sanitize "$check" "--cpu: no GPU"; continue; }
      [ -x "$cs" ] || { record SKIP sanitize "$check" "compute-sanitizer not found"; continue; }
      done_before sanitize "$check" && continue
      enough sanitize "$check" 60 || continue
      local extra=(); [ $tool = memcheck ] && extra=(--leak-check full)
      rm -rf "$work/runs/sanitize-$ex"
      (cd "$work" && timeout "$(tmo 10 300)" "$cs" --tool $tool "${extra[@]}" --error-exitcode 86 --print-limit 30 \
        "$brisk" train "$cfg" --device cuda --max-steps $SANITIZE_STEPS --log-every 1 --out "runs/sanitize-$ex") >"$log" 2>&1
      local rc=$? errors leaks first took
      took="$(($(date +%s) - t0)) s"
      errors=$(grep -m1 'ERROR SUMMARY' "$log" | grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
      leaks=$(grep -c 'Leaked [0-9]* bytes' "$log")
      first=$(grep -m1 -E '^========= +(Invalid|Error|Race|Program hit|Uninitialized|Barrier|Malloc|Cuda API)' "$log" | sed 's/^========= *//' | cut -c1-160)
      head -c 2000000 "$log" >"$log.tmp" && mv "$log.tmp" "$log"
      if [ $rc = 124 ] || [ $rc = 137 ]; then record FAIL sanitize "$check" "timed out after $took (nothing reported before; ${log##*/})"
      elif [ $rc = 0 ] && [ "${errors:-0}" = 0 ]; then record PASS sanitize "$check" "0 errors, $took"
      elif [ -n "$errors" ]; then record FAIL sanitize "$check" "$errors errors ($leaks leaks); first: ${first:-see log} (${log##*/})"
      else record FAIL sanitize "$check" "exit $rc: $(lastline "$log") (${log##*/})"; fi
    done
  done
}

# train_run NAME CONFIG TIMEOUT ARGS...: $steps steps, a loss per step, into runs/NAME; status in
# runs/NAME.rc. TRAIN_ENV: environment assignments for the run.
train_run() {
  local name=$1 cfg=$2 t=$3; shift 3
  rm -rf "$work/runs/$name" "$work/runs/$name.rc"
  (cd "$work" && env ${TRAIN_ENV:-} timeout "$t" "$brisk" train "$cfg" --max-steps "$steps" --log-every 1 --out "runs/$name" "$@") \
    >"$work/logs/agree-$name.log" 2>&1
  echo $? >"$work/runs/$name.rc"
}

# the name of a precision's spread: its nudged checkpoint (NAME.safetensors in runs/EX-init)
# and the CPU run from it (runs/EX-cpu-NAME); fp32's keep their first names
spread_run() { [ "$1" = fp32 ] && echo nudged || echo "nudged-$1"; }

# compare CHECK REF RUN MODE: the comparison tool's verdict on two runs, recorded
compare() {
  local check=$1 a=$2 b=$3 mode=$4 rc_a rc_b r
  rc_a=$(cat "$work/runs/$a.rc" 2>/dev/null || echo none); rc_b=$(cat "$work/runs/$b.rc" 2>/dev/null || echo none)
  for r in "$a:$rc_a" "$b:$rc_b"; do
    case ${r#*:} in
      0) ;;
      124|137) record SKIP agree "$check" "run ${r%%:*} stopped at the deadline (call again with --continue)"; return ;;
      none) record SKIP agree "$check" "run ${r%%:*} was not started (deadline)"; return ;;
      *) record FAIL agree "$check" "run ${r%%:*} failed, exit ${r#*:}: $(lastline "$work/logs/agree-${r%%:*}.log")"; return ;;
    esac
  done
  r=$($py "$tools/compare_losses.py" "$work/runs/$a" "$work/runs/$b" $mode --steps "$steps" 2>&1 </dev/null | tail -1)
  case $r in PASS\ *|FAIL\ *) ;; *) r="FAIL compare_losses.py: $r" ;; esac
  record "${r%% *}" agree "$check" "$([ $cpu = 1 ] && echo '(--cpu: both on the CPU) ')${r#* }"
}

stage_agree() {
  ensure_build cli
  note agree
  local dev=cuda ex n list=() cth=$((jobs > 3 ? jobs - 2 : 1))
  [ $cpu = 1 ] && dev=cpu
  for ex in $(examples); do
    ensure_data "$root/examples/$ex.json" || { record FAIL agree "$ex: data" "brisk synth failed (logs/synth.log)"; continue; }
    list+=("$ex")
  done
  # the checks: (name, reference run, compared run, how, the precision whose own spread widens the bound)
  checks() {
    echo "fp32 vs CPU (<= $RTOL_FP32)|cpu|fp32|--rtol $RTOL_FP32|fp32"
    echo "fp32, epilogues refused, vs CPU (<= $RTOL_FP32)|cpu|refused|--rtol $RTOL_FP32|fp32"
    echo "tf32 vs CPU (<= $RTOL_FP32)|cpu|tf32|--rtol $RTOL_FP32|tf32"
    echo "bf16 vs CPU (<= $RTOL_BF16)|cpu|bf16|--rtol $RTOL_BF16|bf16"
    echo "CUDA graph == eager (fp32, deterministic)|fp32|eager|--exact|"
    echo "deterministic twice (bf16)|bf16|bf16-again|--exact|"
  }
  local todo=()
  for ex in "${list[@]}"; do
    local all_done=1
    while IFS='|' read -r name _ _ _ _; do done_before agree "$ex $name" || all_done=0; done < <(checks)
    [ $all_done = 1 ] && continue
    todo+=("$ex")
    rm -f "$work/runs/$ex-"*.rc  # a run this call does not reach must not pass with an earlier call's result
  done
  # The CPU references train in the background (all cores but two) while the GPU runs go.
  (
    for ex in "${todo[@]}"; do
      [ "$(left)" -gt 30 ] || break
      train_run "$ex-cpu" "$root/examples/$ex.json" "$(tmo 20)" --device cpu --precision fp32 --threads $cth
      # the model's own spread per precision: the CPU again from the same weights moved by one
      # rounding unit of that precision; a chaotic model (the ResNet) parts from itself so at
      # fp32 by step 3, and no order of summation can follow it further
      is_pipeline "$root/examples/$ex.json" || [ "$(left)" -lt 60 ] && continue
      (steps=0 && train_run "$ex-init" "$root/examples/$ex.json" "$(tmo 20 60)" --device cpu --precision fp32)
      [ "$(cat "$work/runs/$ex-init.rc")" = 0 ] || continue
      for n in $NUDGES; do
        [ "$(left)" -gt 45 ] || break
        local sr=$(spread_run ${n%%:*})
        $py "$tools/nudge_checkpoint.py" "$work/runs/$ex-init/last.safetensors" "$work/runs/$ex-init/$sr.safetensors" \
          --rel ${n#*:} >"$work/logs/agree-$ex-nudge-${n%%:*}.log" 2>&1 &&
          train_run "$ex-cpu-$sr" "$root/examples/$ex.json" "$(tmo 20)" --device cpu --precision fp32 \
            --threads $cth --resume "$work/runs/$ex-init/$sr.safetensors"
      done
    done
  ) &
  local bg=$!
  for ex in "${todo[@]}"; do
    local cfg=$root/examples/$ex.json need=60
    is_pipeline "$cfg" && need=150
    [ "$(left)" -gt $need ] || break
    echo "   $ex on $dev"
    train_run "$ex-fp32" "$cfg" "$(tmo 20 240)" --device $dev --precision fp32 --no-tf32 --deterministic
    train_run "$ex-eager" "$cfg" "$(tmo 20 240)" --device $dev --precision fp32 --no-tf32 --deterministic --no-graph
    TRAIN_ENV=$REFUSE_EPILOGUE train_run "$ex-refused" "$cfg" "$(tmo 20 240)" --device $dev --precision fp32 --no-tf32 --deterministic
    train_run "$ex-tf32" "$cfg" "$(tmo 20 240)" --device $dev --precision tf32
    train_run "$ex-bf16" "$cfg" "$(tmo 20 240)" --device $dev --precision bf16 --deterministic
    train_run "$ex-bf16-again" "$cfg" "$(tmo 20 240)" --device $dev --precision bf16 --deterministic
  done
  wait $bg
  for ex in "${todo[@]}"; do
    for n in $NUDGES; do
      local sr=$ex-cpu-$(spread_run ${n%%:*})
      [ "$(cat "$work/runs/$sr.rc" 2>/dev/null)" = 0 ] || continue
      # a measurement, not a verdict: a chaotic model parts from itself on any machine
      local r=$($py "$tools/compare_losses.py" "$work/runs/$ex-cpu" "$work/runs/$sr" --rtol $RTOL_FP32 \
        --steps "$steps" 2>&1 </dev/null | tail -1)
      record PASS agree "$ex CPU from weights moved by ${n#*:} (${n%%:*}) vs CPU (the model's own spread)" "measured: ${r#* }"
    done
    while IFS='|' read -r name a b how prec; do
      local sr=$ex-cpu-$(spread_run "$prec")
      [ -n "$prec" ] && [ "$(cat "$work/runs/$sr.rc" 2>/dev/null)" = 0 ] && how="$how --baseline $work/runs/$sr"
      compare "$ex $name" "$ex-$a" "$ex-$b" "$how"
    done < <(checks)
    report_check "$ex"
  done
  grads_check "${list[@]}"
}

# grads_check EXAMPLE...: the gradients after one fp32 step, GPU against CPU (compare_grads.py
# on AdamW's first moments): apart by more than rounding, an op is wrong before any trajectory
# could amplify it (the ResNet example's fp32 losses left the CPU's at step 2; 2026-11-27 night)
grads_check() {
  local ex dev=cuda cth=$((jobs > 3 ? jobs - 2 : 1)) check r
  [ $cpu = 1 ] && dev=cpu
  for ex in "$@"; do
    check="$ex gradients after step 1 (fp32) vs CPU (<= 1e-4)"
    is_pipeline "$root/examples/$ex.json" && continue
    done_before agree "$check" && continue
    enough agree "$check" 40 || return
    local steps=1 a # train_run's step count, for these two runs
    train_run "$ex-g1cpu" "$root/examples/$ex.json" "$(tmo 20 120)" --device cpu --threads $cth --precision fp32 --deterministic
    train_run "$ex-g1dev" "$root/examples/$ex.json" "$(tmo 20 120)" --device $dev --precision fp32 --no-tf32 --deterministic
    for a in g1cpu g1dev; do
      [ "$(cat "$work/runs/$ex-$a.rc")" = 0 ] && continue
      record FAIL agree "$check" "the 1-step run $ex-$a failed: $(lastline "$work/logs/agree-$ex-$a.log")"
      continue 2
    done
    # a chaotic model (the ResNet): within 4x of the CPU's own gradients from its weights
    # moved by 1e-7 (the agree runs' nudged checkpoint), where that is more than 1e-4
    local base=() nudged="$work/runs/$ex-init/$(spread_run fp32).safetensors"
    if [ -s "$nudged" ]; then
      train_run "$ex-g1nudged" "$root/examples/$ex.json" "$(tmo 20 120)" --device cpu --threads $cth --precision fp32 \
        --deterministic --resume "$nudged"
      [ "$(cat "$work/runs/$ex-g1nudged.rc")" = 0 ] && base=(--baseline "$work/runs/$ex-g1nudged")
    fi
    r=$($py "$tools/compare_grads.py" "$work/runs/$ex-g1cpu" "$work/runs/$ex-g1dev" --rtol 1e-4 "${base[@]}" 2>&1 \
      </dev/null | tail -1)
    case $r in
      PASS\ *|FAIL\ relative*) record "${r%% *}" agree "$check" "$([ $cpu = 1 ] && echo '(--cpu: both on the CPU) ')${r#* }" ;;
      *"no optim.exp_avg"*) record SKIP agree "$check" "not AdamW: no first moments to compare" ;;
      *) record FAIL agree "$check" "compare_grads.py: $r" ;;
    esac
  done
}

# report_check EXAMPLE: the bf16 run wrote its report.html (brisk report) with the optimization
# table the GPU backend describes (a pipeline: its comparison page); the page comes back in
# logs.tar.gz (runs/EXAMPLE-bf16/report.html) to be looked at or screenshot elsewhere
report_check() {
  local ex=$1 dir="$work/runs/$1-bf16" check="$1 report.html (bf16 run)" want='>CUDA graph<'
  [ "$(cat "$dir.rc" 2>/dev/null)" = 0 ] || return 0 # the comparisons above already say why
  [ $cpu = 1 ] && want='id="optimizations"'
  is_pipeline "$root/examples/$ex.json" && want='id="models"'
  if [ -s "$dir/report.html" ] && grep -q "$want" "$dir/report.html"; then
    record PASS agree "$check" "$(grep -o 'class="on">on' "$dir/report.html" | wc -l) optimizations on, $(grep -o 'class="off">off' "$dir/report.html" | wc -l) off (runs/$ex-bf16/report.html in logs.tar.gz)"
  else
    record FAIL agree "$check" "$([ -s "$dir/report.html" ] && echo "no $want in it" || echo "not written") ($(lastline "$work/logs/agree-$ex-bf16.log"))"
  fi
}

# torch_modes MODES...: bench/reference/timed.py for each workload brisk has a config for
torch_modes() {
  local ref=$root/bench/reference/timed.py dev=cuda w m
  [ $cpu = 1 ] && dev=cpu
  if ! ${TORCH_PYTHON:-$py} -c 'import torch' 2>/dev/null; then record SKIP torch "bench/reference/timed.py" "${TORCH_PYTHON:-$py} has no PyTorch"; return; fi
  for w in $(grep -m1 '^WORKLOADS' "$root/bench/reference/workloads.py" | grep -oE '"[a-z0-9_]+"' | tr -d '"'); do
    echo "$w" | grep -qE -- "$only" || continue
    if [ ! -f "$root/examples/$w.json" ]; then record SKIP torch "$w (all modes)" "brisk has no examples/$w.json"; continue; fi
    for m in "$@"; do
      # on the H200 an eager or amp run took 8-16 s with Python's start; compile, minutes
      local check="$w $m ($TORCH_STEPS steps)" need=25 line rc t0=$(date +%s) res=$work/logs/torch-$w-$m.txt
      case $m in *compile*) need=240 ;; esac
      done_before torch "$check" && continue
      enough torch "$check" $need || continue
      PYTHONUNBUFFERED=1 timeout "$(tmo 15 600)" ${TORCH_PYTHON:-$py} "$ref" --workload "$w" --mode "$m" --device $dev \
        --steps $TORCH_STEPS >"$res" 2>>"$work/logs/torch.err"
      rc=$?
      line=$(grep '^{' "$res" | tail -1)
      if [ $rc = 124 ] || [ $rc = 137 ]; then
        record SKIP torch "$check" "timed out after $(($(date +%s) - t0)) s (the call's deadline or 600 s)"
      elif echo "$line" | grep -q '"ms_per_step_median"'; then
        echo "$line" >>"$work/torch.jsonl"
        record PASS torch "$check" "$(echo "$line" | $py -c "import json,sys; r=json.load(sys.stdin); print('%s ms/step, warm-up %s s, %s' % (r['ms_per_step_median'], r.get('warmup_s'), r.get('gpu', r.get('device'))))")"
      elif echo "$line" | grep -q '"skipped"'; then
        record SKIP torch "$check" "$(echo "$line" | grep -oE '"skipped": "[^"]*"')"
      else
        record FAIL torch "$check" "failed or timed out (logs/torch.err: $(lastline "$work/logs/torch.err"))"
      fi
    done
  done
}

stage_bench() {
  ensure_build cli
  note bench
  local cfg name n
  for cfg in "$root"/examples/*.json "$root"/bench/*.json; do
    name=$(basename "$cfg" .json)
    echo "$name" | grep -qE -- "$only" || continue
    local check="brisk bench $name" s=$BENCH_STEPS
    case $cfg in */bench/*) s=$BENCH_STEPS_HEAVY ;; esac
    is_pipeline "$cfg" && { record SKIP bench "$check" "a pipeline: its models are benched through their own configs"; continue; }
    case $cfg in */bench/*) [ $cpu = 1 ] && { record SKIP bench "$check" "--cpu: sized for a GPU"; continue; } ;; esac
    [ $cpu = 1 ] && s=20
    done_before bench "$check" && continue
    enough bench "$check" 30 || continue
    ensure_data "$cfg"
    local log=$work/logs/bench-$name.txt
    (cd "$work" && timeout "$(tmo 15 300)" "$brisk" bench "$cfg" --steps $s --json) >"$log" 2>&1
    local rc=$?
    grep '^{' "$log" >>"$work/bench.jsonl"
    grep -v '^{' "$log" | sed 's/^/   /'  # the table, for the call's output
    n=$(grep -c '^{' "$log")
    local last=$(grep '^{' "$log" | tail -1 | $py -c "import json,sys; r=json.load(sys.stdin); print('%s: %.4g ms/step, %.2fx over the baseline, %.0f samples/s' % (r['name'], r['ms_per_step_median'], r['speedup'], r['samples_per_s']))" 2>/dev/null)
    if [ $rc = 0 ] && [ "$n" -gt 0 ]; then record PASS bench "$check" "$n rows, $s steps; $last"
    else record FAIL bench "$check" "exit $rc, $n rows; $(grep -m1 'failed:' "$log" | cut -c1-160)$(lastline "$log")"; fi
  done
  torch_modes ${TORCH_MODES:-eager amp}
  [ $lean = 1 ] || torch_modes compile amp-compile
}

# brisk profile of each example (not a pipeline): fp32 and bf16, one line each
stage_profile() {
  ensure_build cli
  note profile
  # variants, name:flags, as brisk bench's rows: fp32 = its fp32 rows (4.04 ms/step for ResNet on the
  # H200, replayed), bf16-noautotune = "+ mixed precision" (24.2 ms), bf16 = "all on" (9.6 ms)
  local dev=cuda variants="fp32:--precision=fp32,--no-tf32,--no-autotune,--no-fuse
    bf16-noautotune:--precision=bf16,--no-autotune,--no-fuse bf16:--precision=bf16"
  local n=$PROFILE_STEPS ex v
  [ $cpu = 1 ] && dev=cpu variants="fp32:--precision=fp32" n=3
  for ex in $(examples); do
    local cfg=$root/examples/$ex.json
    is_pipeline "$cfg" && { record SKIP profile "brisk profile $ex" "a pipeline: profile its models' own configs"; continue; }
    for v in $variants; do
      local prec=${v%%:*} flags check log
      IFS=, read -ra flags <<<"${v#*:}"
      check="brisk profile $ex $prec" log=$work/logs/profile-$ex-$prec
      done_before profile "$check" && continue
      enough profile "$check" 45 || continue
      ensure_data "$cfg" || { record FAIL profile "$check" "brisk synth failed (logs/synth.log)"; continue; }
      rm -f "$log.json"
      (cd "$work" && timeout "$(tmo 10 240)" "$brisk" profile "$cfg" --device $dev "${flags[@]}" --steps $n \
        --warmup 5 --top 20 --json-out "$log.json") >"$log.txt" 2>&1
      local rc=$? line
      sed 's/^/   /' "$log.txt"
      line=$($py - "$log.json" 2>/dev/null <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
top = r["ops"][0]
floor = r["launch_floor_ms"]
f = "launch floor %.4f ms, the step %.1fx it" % (floor, r["step_ms_plain"] / floor) if floor else "no launch floor"
rep = r.get("replayed_step_ms")
if rep and floor:
    f += "; its own graph replayed %.4f ms (%.1fx the floor)" % (rep, rep / floor)
print("top %s %.0f%% of %.4f ms; %d node runs, %s kernels a step; %s; the timed step %.4f ms (%+.0f%%)" % (
    top["op"], 100 * top["share"], r["step_ms_plain"], r["node_runs_per_step"],
    r["kernel_nodes"] if r["kernel_nodes"] >= 0 else "?", f, r["step_ms_timed"],
    100 * (r["step_ms_timed"] / r["step_ms_plain"] - 1)))
PY
)
      if [ $rc = 0 ] && [ -n "$line" ]; then record PASS profile "$check" "$line (logs/${log##*/}.txt)"
      elif [ $rc = 124 ] || [ $rc = 137 ]; then record FAIL profile "$check" "timed out (${log##*/}.txt)"
      else record FAIL profile "$check" "exit $rc: $(lastline "$log.txt")"; fi
    done
  done
}

# One PyTorch-equivalence script (train_graph.py or train_onnx.py) with brisk on the GPU.
torchref_run() {
  local check=$1 log=$2; shift 2
  done_before torchref "$check" && return
  enough torchref "$check" 60 || return
  if ! $py -c 'import torch, numpy' 2>/dev/null; then record SKIP torchref "$check" "$py has no PyTorch or NumPy"; return; fi
  local dev=cuda note=""
  [ $cpu = 1 ] && dev=cpu note=" (--cpu: brisk on the CPU)"
  BRISK_TEST_DEVICE=$dev timeout "$(tmo 10 400)" $py "$@" >"$log" 2>&1
  local rc=$?
  if [ $rc = 0 ]; then record PASS torchref "$check" "$(grep -E 'worst relative' "$log" | sed -E 's/.*(worst relative difference to PyTorch( fp32)? [0-9.e+-]+).*/\1/' | sort -t' ' -k6 -g | tail -1)$note (${log##*/})"
  elif [ $rc = 77 ]; then record SKIP torchref "$check" "$(lastline "$log")"
  else record FAIL torchref "$check" "exit $rc: $(grep -m1 FAIL "$log" | cut -c1-200) (${log##*/})"; fi
}

stage_torchref() {
  ensure_build cli
  note torchref
  local case ex lr n g
  # the examples and learning rates of reference.train50_* (tests/reference/reference.cmake)
  for case in $(sed -n 's/^foreach(case \(.*\)/\1/p; s/^ *\([a-z0-9_:. e-]*\))$/\1/p' \
                "$root/tests/reference/reference.cmake" | tr ' ' '\n' | grep ':'); do
    IFS=: read -r ex lr n <<<"$case"
    echo "$ex" | grep -qE -- "$only" || continue
    torchref_run "$ex: 50 steps on the GPU against PyTorch" "$work/logs/torchref-$ex.log" \
      "$root/tests/reference/train_graph.py" "$brisk" "$root/examples/$ex.json" "$work/runs/torchref-$ex" "$lr" "$n"
  done
  for g in $(cd "$root/tests/onnx" && ls cases_*.py | sed 's/^cases_//; s/\.py$//'); do
    echo "onnx-$g" | grep -qE -- "$only" || continue
    torchref_run "ONNX imports, group $g: 50 steps on the GPU against PyTorch" "$work/logs/torchref-onnx-$g.log" \
      "$root/tests/onnx/train_onnx.py" "$brisk" "$work/runs/torchref-onnx-$g" "$g"
  done
}

for s in "${stages[@]}"; do
  t_stage=$(date +%s)
  case $s in
    build) ensure_build ;;
    test) stage_test ;;
    cputest) stage_cputest ;;
    sanitize) stage_sanitize ;;
    agree) stage_agree ;;
    bench) stage_bench ;;
    profile) stage_profile ;;
    torch) note torch; torch_modes eager amp compile amp-compile ;;
    torchref) stage_torchref ;;
  esac
  printf '%s\t%s\t%s\n' "$(date +%s)" "$s" "$(($(date +%s) - t_stage))" >>"$work/timings.tsv"
  render
  pack
done
render
echo
echo "================ $out/summary.txt ($(($(date +%s) - start)) s)"
cat "$out/summary.txt"
grep -q "	FAIL	" "$work/results.tsv" 2>/dev/null && exit 1
exit 0
