#!/usr/bin/env bash
# Nothing lost by being general: a graph model (examples/cnn1d.json, a 1-D CNN over windows of
# a series) gets what a built-in family gets, each checked here on the CPU: exact resume (3 + 3
# steps = 6 steps, every tensor of the checkpoint bit for bit), gradient accumulation (2 x 64 =
# 1 x 128 to 1e-5), data parallel (2 ranks x 64 = 1 process x 128 to 1e-5, when an mpirun is
# given), brisk bench and brisk profile, predict, ONNX export, TensorBoard events and the HTML
# report. The CUDA-graph step and mixed precision need a GPU: tools/gpu-session.sh (agree, bench).
#   graph_general.sh BRISK WEIGHTS_DIFF WORKDIR SRC [MPIRUN...]
set -u
brisk=$1 wdiff=$2 work=$3 src=$4
shift 4
mpirun=("$@")
py=${PYTHON:-python3}
. "$src/tests/cli/expect.sh"
export BRISK_CPU_GEMM=fixed # the same GEMM kernel for batches 64 and 128 (see tests/dist/train_mpi.sh)
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
"$brisk" synth series data/series.csv --samples 1500 >/dev/null || { echo "FAIL synth"; exit 1; }
cfg=$src/examples/cnn1d.json
run() { "$brisk" train "$cfg" --device cpu --threads 1 --log-every 1 --quiet --set data.shuffle=false "$@"; }
losses() { grep '"step"' "$1/metrics.jsonl" | grep -o '"loss": [^,]*'; }

run --max-steps 6 --batch-size 128 --out full >full.log 2>&1 &&
  run --max-steps 3 --batch-size 128 --out part >part.log 2>&1 &&
  run --max-steps 6 --batch-size 128 --out part --resume auto >resume.log 2>&1 ||
  { tail -n 5 full.log part.log resume.log; bad "runs for resume"; }
"$wdiff" full/last.safetensors part/last.safetensors 0 >wdiff.log 2>&1 &&
  ok "resume: 3 + 3 steps = 6 steps, bit for bit" || { cat wdiff.log; bad "resume"; }
[ "$(losses full | tail -3)" = "$(losses part | tail -3)" ] && ok "resume: the last 3 losses equal" ||
  bad "resume losses"

run --max-steps 6 --batch-size 64 --set train.accumulate=2 --out accum >accum.log 2>&1 &&
  "$wdiff" full/last.safetensors accum/last.safetensors 1e-5 >wdiff-accum.log 2>&1 &&
  ok "accumulation: 2 x 64 = 1 x 128 within 1e-5" || { tail -n 5 accum.log wdiff-accum.log; bad "accumulation"; }

if [ ${#mpirun[@]} -gt 0 ]; then
  "${mpirun[@]}" "$brisk" train "$cfg" --device cpu --threads 1 --log-every 1 --quiet --set data.shuffle=false \
    --max-steps 6 --batch-size 64 --out ranks >ranks.log 2>&1 &&
    "$wdiff" full/last.safetensors ranks/last.safetensors 1e-5 >wdiff-ranks.log 2>&1 &&
    ok "data parallel: 2 ranks x 64 = 1 process x 128 within 1e-5" || { tail -n 8 ranks.log wdiff-ranks.log; bad "ranks"; }
else
  echo "skip data parallel: no mpirun given"
fi

"$brisk" bench "$cfg" --steps 20 --rounds 1 --report bench.html >bench.log 2>&1 && grep -q "ms/step" bench.log &&
  ok "brisk bench: $(grep -c 'thread' bench.log) rows" || { tail -n 5 bench.log; bad "bench"; }
"$brisk" profile "$cfg" --steps 3 --warmup 1 >profile.log 2>&1 && grep -q "per op type" profile.log &&
  grep -q "^conv2d " profile.log && ok "brisk profile: per op type, conv2d timed" || { tail -n 5 profile.log; bad "profile"; }
"$brisk" predict full/last.safetensors --input data/series.csv --output pred.csv >predict.log 2>&1 && [ -s pred.csv ] &&
  ok "predict: $(($(wc -l <pred.csv) - 1)) rows" || { tail -n 3 predict.log; bad "predict"; }
"$brisk" export full/last.safetensors --onnx m.onnx >export.log 2>&1 && [ -s m.onnx ] &&
  ok "export --onnx" || { tail -n 3 export.log; bad "export"; }
ls full/events.out.tfevents.* >/dev/null 2>&1 && ok "TensorBoard events written" || bad "events"
[ -s full/report.html ] && ok "report.html written" || bad "report"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
