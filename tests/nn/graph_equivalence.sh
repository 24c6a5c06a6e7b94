#!/usr/bin/env bash
# One path, proved: examples/tabular_graph.json and examples/resnet_graph.json, the built-in
# mlp and resnet written as graphs of layers, train bit for bit as the built-ins (every
# step's loss as metrics.jsonl writes it, float32-exact, and every tensor of the last
# checkpoint: parameters, running statistics, AdamW moments).
#   graph_equivalence.sh BRISK WEIGHTS_DIFF WORKDIR
set -u
brisk=$1 wdiff=$2 work=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/cli/expect.sh"
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
"$brisk" synth tabular data/tabular.npz --samples 2048 >/dev/null && "$brisk" synth images data >/dev/null ||
  { echo "FAIL synth"; exit 1; }
losses() { grep '"step"' "$1/metrics.jsonl" | grep -o '"loss": [^,]*'; }
pair() { # pair BUILTIN GRAPH STEPS SETTINGS...
  local a=$1 b=$2 steps=$3
  shift 3
  for c in "$a" "$b"; do
    "$brisk" train "$src/examples/$c.json" --out "run-$c" --set train.max_steps="$steps" --set train.log_every=1 \
      --quiet "$@" >"$c.log" 2>&1 || { cat "$c.log"; bad "$c trains"; return; }
  done
  [ "$(losses "run-$a" | wc -l)" -eq "$steps" ] && [ "$(losses "run-$a")" = "$(losses "run-$b")" ] &&
    ok "$b: $steps losses equal to $a's, bit for bit" || { paste <(losses "run-$a") <(losses "run-$b"); bad "$b losses"; }
  "$wdiff" "run-$a/last.safetensors" "run-$b/last.safetensors" 0 && ok "$b: the checkpoint equals $a's" ||
    bad "$b checkpoint"
}
pair tabular tabular_graph 12 --set data.train=data/tabular.npz --set train.batch_size=128
pair resnet resnet_graph 2 --set train.batch_size=8
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
