#!/usr/bin/env bash
# brisk profile on the CPU: the table prints, its rows (every node, the batch coming in, the loss
# and update) sum to the timed step and to within 20 % of the plain eager step, the JSON parses
# and carries the same numbers, the CPU backend says which nodes it fused, and bad arguments get
# one clear error.
#   profile.sh BRISK_BINARY WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular tab.npz --samples 1024 >/dev/null || { echo "synth failed"; exit 1; }
cat > p.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [512, 512], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.25}, "train": {"batch_size": 128, "epochs": 1, "out_dir": "run"}}
J
"$brisk" profile p.json --device cpu --threads 1 --steps 3 --warmup 1 --top 4 > out.txt 2> err.txt
rc=$?
[ $rc -eq 0 ] && grep -q '^per op type' out.txt && grep -qE '^matmul +[0-9.]+ +[0-9.]+ +[0-9.]+%' out.txt &&
  grep -q '^top 4 nodes' out.txt && grep -q '^step  *timed' out.txt && grep -q '^node runs' out.txt &&
  ok table || bad "table (exit $rc): $(cat out.txt err.txt)"
[ ! -e run ] && ok no-run-dir || bad "no-run-dir: profile wrote run/"

# the timing check is retried (up to 3 runs): on a loaded machine a run's steps may vary by more
timing=0
for try in 1 2 3; do
"$brisk" profile p.json --device cpu --threads 1 --steps 25 --warmup 3 --top 3 --json --json-out copy.json > out.json 2> err.txt
rc=$?
/usr/bin/python3 - out.json <<'P' && { timing=1; break; }
import json, sys
j = json.load(open(sys.argv[1]))
rows = sum(o["ms_per_step"] for o in j["ops"])
assert abs(rows - j["rows_ms"]) < 1e-6 * max(rows, 1), (rows, j["rows_ms"])
assert j["steps"] == 25 and j["device"] == "cpu" and j["clock"] == "host clock", j
assert len(j["top_nodes"]) == 3 and j["top_nodes"][0]["ms_per_step"] >= j["top_nodes"][1]["ms_per_step"]
ops = {o["op"]: o for o in j["ops"]}
assert ops["matmul"]["calls_per_step"] == 8, ops["matmul"]  # 3 forward; 2 per layer backward, 1 for the first
assert "(batch in)" in ops and "(loss + update)" in ops
plain, timed = j["step_ms_plain"], j["step_ms_timed"]
print("rows %.4f ms, timed step %.4f ms, plain step %.4f ms" % (rows, timed, plain))
assert abs(rows / plain - 1) < 0.20, "the rows sum to %.4f ms, the plain eager step is %.4f ms" % (rows, plain)
assert abs(rows / timed - 1) < 0.01, (rows, timed)  # the same steps, their intervals on one clock
assert j["kernel_nodes"] == -1 and j["launch_floor_ms"] is None and j["replayed_step_ms"] is None
assert json.load(open("copy.json"))["ops"][0]["op"] == j["ops"][0]["op"]
P
echo "   (try $try: the timing check failed; $(uptime | sed 's/.*load/load/'))"
done
[ $timing = 1 ] && [ $rc = 0 ] && grep -q '"steps_kept"' out.json && ok json-sums || bad "json-sums (exit $rc): $(cat out.json err.txt)"

# two micro-batches a step: every node runs twice, the gaps are counted per micro-batch
"$brisk" profile p.json --device cpu --threads 1 --accumulate 2 --steps 3 --warmup 1 --json > acc.json 2> err.txt &&
/usr/bin/python3 - acc.json <<'P' && ok accumulate || bad "accumulate: $(cat acc.json err.txt)"
import json, sys
j = json.load(open(sys.argv[1]))
ops = {o["op"]: o for o in j["ops"]}
assert j["accumulate"] == 2 and ops["matmul"]["calls_per_step"] == 16 and j["node_runs_per_step"] == 2 * 26, j
assert ops["(batch in)"]["calls_per_step"] == 2, ops
# the products, worked out by hand: per micro-batch the forward 128 x (64 x 512 + 512 x 512 +
# 512 x 3) multiply-adds, as many for the weight gradients, and the input gradients of the last two
# layers; 2 flops each, 2 micro-batches
fwd = 128 * (64 * 512 + 512 * 512 + 512 * 3)
want = 2 * 2 * (2 * fwd + 128 * (512 * 512 + 512 * 3)) * 1e-9
assert abs(ops["matmul"]["gflop_per_step"] - want) < 1e-9 * want, (ops["matmul"], want)
assert all(o["gflop_per_step"] == 0 for o in j["ops"] if o["op"] != "matmul"), j["ops"]
assert abs(j["rows_ms"] / j["step_ms_timed"] - 1) < 0.01, j
P

# the backend's note on how it ran a node: the CPU's fused GEMM + bias + ReLU
"$brisk" profile p.json --device cpu --threads 1 --steps 2 --warmup 1 --top 100 > notes.txt 2>&1 &&
  grep -qE '^ +[0-9]+ matmul .*fused pass: GEMM \+ bias \+ ReLU' notes.txt &&
  grep -qE '^ +[0-9]+ relu .*computed by a fused neighbour' notes.txt && ok notes || bad "notes: $(cat notes.txt)"

# a pipeline: one of its models, by name (its own config, as brisk train runs it)
cat > pipe.json <<'J'
{"models": [{"name": "wide", "type": "mlp", "inputs": 64, "hidden": [256], "outputs": 3},
            {"name": "deep", "type": "mlp", "inputs": 64, "hidden": [32, 32, 32], "outputs": 3}],
 "data": {"train": "tab.npz", "validation_fraction": 0.25}, "train": {"batch_size": 64, "epochs": 1, "out_dir": "pipe"}}
J
"$brisk" profile pipe.json --model deep --device cpu --steps 2 --warmup 1 --json > pipe.out 2>&1 &&
  /usr/bin/python3 -c 'import json,sys; j=json.load(open("pipe.out")); m=[o for o in j["ops"] if o["op"]=="matmul"][0]; assert m["calls_per_step"]==11, m' &&
  [ ! -e pipe ] && ok pipeline-model || bad "pipeline-model: $(cat pipe.out)"
expect pipeline-needs-model "pipe.json is a pipeline; name one of its models with --model: wide, deep$" -- \
  "$brisk" profile pipe.json --device cpu
expect pipeline-unknown-model "with --model: wide, deep \(not 'shallow'\)" -- "$brisk" profile pipe.json --model shallow
expect model-not-pipeline 'p.json has one model' -- "$brisk" profile p.json --model wide

expect no-config 'profile: a config file is required' -- "$brisk" profile
expect bad-steps "profile: --steps" -- "$brisk" profile p.json --steps 0
expect bad-override 'speed.device' -- "$brisk" profile p.json --device tpu
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
