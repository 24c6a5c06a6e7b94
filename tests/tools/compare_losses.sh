#!/usr/bin/env bash
# tools/gpu/compare_losses.py, which the GPU suite's agreement and bit-equality checks rest on:
# two CPU runs of one config are bit-identical, a run with another seed fails 1e-3, and crafted
# logs take every branch (tolerance edges, null and NaN losses, missing or repeated steps,
# pipeline folders, bad arguments).
#   compare_losses.sh BRISK_BINARY WORKDIR SOURCE_DIR
set -u
. "$(dirname "$0")/expect_tool.sh" compare_losses "$@"

"$brisk" synth tabular data/tabular.npz --samples 8192 >/dev/null || exit 1
for run in a b; do
  "$brisk" train "$src/examples/tabular.json" --device cpu --max-steps 20 --log-every 1 --out $run --quiet || exit 1
done
"$brisk" train "$src/examples/tabular.json" --device cpu --max-steps 20 --log-every 1 --out seed1 --seed 1 --quiet || exit 1
expect 0 '^PASS 20 steps bit-identical$' a b --exact --steps 20
expect 0 '^PASS 20 steps, max rel diff 0 ' a/metrics.jsonl b/metrics.jsonl --rtol 1e-3 --steps 20
expect 1 '^FAIL max rel diff .* > 0.001' a seed1 --rtol 1e-3
expect 1 '^FAIL step 1 differs' a seed1 --exact
expect 1 '^FAIL 20 common steps .* need 100' a b --exact --steps 100

# crafted logs: step lines (loss) and an epoch line (train_loss, ignored)
log() { mkdir -p "$(dirname "$1")"; shift_to=$1; shift; : >"$shift_to"; local s=1
  for l in "$@"; do echo "{\"step\": $s, \"epoch\": 0, \"loss\": $l, \"lr\": 0.001}" >>"$shift_to"; s=$((s + 1)); done
  echo '{"epoch": 1, "step": 3, "train_loss": 9.9, "val_loss": null}' >>"$shift_to"; }
log ref/metrics.jsonl 1.00000000 0.500000000 0.250000000
log near/metrics.jsonl 1.00000000 0.500249988 0.250000000     # 5e-4 relative at step 2
log far/metrics.jsonl 1.00000000 0.501000000 0.250000000      # 2e-3 relative at step 2
log nullref/metrics.jsonl 1.00000000 null 0.250000000
log nullrun/metrics.jsonl 1.00000000 null 0.250000000
log nan/metrics.jsonl 1.00000000 NaN 0.250000000
log short/metrics.jsonl 1.00000000 0.500000000
expect 0 '^PASS 3 steps, max rel diff 0.0005 at step 2$' ref near --rtol 1e-3 --steps 3
expect 1 '^FAIL step 2 differs: 0.500000000 vs 0.500249988' ref near --exact
expect 1 '^FAIL max rel diff 0.002 at step 2 > 0.001' ref far --rtol 1e-3
expect 0 '^PASS .*max rel diff 0.002 at step 2' ref far --rtol 3e-2 --label bf16
# a spread-widened bound: step 2 over its bound while step 3's larger difference is within its own
log spread/metrics.jsonl 1.00000000 0.500000000 0.300000000   # 0 at step 2, 0.2 at step 3
log wide/metrics.jsonl 1.00000000 0.501000000 0.400000000     # 2e-3 at step 2, 0.6 at step 3
expect 1 '^FAIL step 2: rel diff 0.002 > 0.001 \(the model.s own spread 0 by then\); the largest, 0.6 at step 3, is within 0.8' ref wide --rtol 1e-3 --baseline spread
expect 0 '^PASS' ref spread --rtol 1e-3 --baseline spread
expect 0 '^PASS 3 steps bit-identical' nullref nullrun --exact
expect 0 '^PASS' nullref nullrun --rtol 1e-3
expect 1 '^FAIL' ref nullrun --rtol 1e-3
expect 1 '^FAIL .*step 2' ref nan --rtol 1e-3
expect 1 '^FAIL .*step 3 is logged by one run only' ref short --rtol 1e-3
# a pipeline: one metrics.jsonl per model, paired by folder
mkdir -p pipe1 pipe2 pipe3
for m in lstm mlp; do log pipe1/$m/metrics.jsonl 1.0 0.5 0.25; log pipe2/$m/metrics.jsonl 1.0 0.5 0.25; done
log pipe3/lstm/metrics.jsonl 1.0 0.5 0.25
expect 0 '^PASS 2 runs \(lstm, mlp\), each 3 steps bit-identical' pipe1 pipe2 --exact --steps 3
expect 1 '^FAIL pipe3 has no mlp/metrics.jsonl' pipe1 pipe3 --exact
log pipe2/mlp/metrics.jsonl 1.0 0.6 0.25
expect 1 '^FAIL mlp: step 2 differs' pipe1 pipe2 --exact
# bad input: never a pass
cp ref/metrics.jsonl dup.jsonl && head -1 ref/metrics.jsonl >>dup.jsonl
expect 2 'step 1 logged twice' ref dup.jsonl --exact
echo '{"step": 1, "loss": ' >broken.jsonl
expect 2 'not JSON' ref/metrics.jsonl broken.jsonl --exact
mkdir -p empty
expect 2 'no metrics.jsonl' ref empty --exact
expect 2 'no such file' ref missing --exact
expect 2 'rtol must be' ref near --rtol -1
expect 2 'steps must be' ref near --rtol 1e-3 --steps 0
[ $fails = 0 ] && echo "compare_losses: all passed" || { echo "compare_losses: $fails failed"; exit 1; }
