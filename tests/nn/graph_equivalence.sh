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
# mlp, lstm and resnet are presets of the graph form: `brisk info --graph` prints the graph a
# config's family builds, and that graph, given as the model, trains as the family does (a
# ResNet-50 without visibility, a bidirectional LSTM regressor pooling by the mean, and a
# windowed regression MLP with tanh-GELU: variants the examples lack)
preset() { # preset NAME CONFIG
  local n=$1 cfg=$2 graph
  "$brisk" train "$cfg" --out "run-$n" --quiet >"$n.log" 2>&1 || { cat "$n.log"; bad "$n trains"; return; }
  graph=$("$brisk" info "$cfg" --graph) && grep -q '"type": "graph"' <<<"$graph" ||
    { bad "$n: brisk info --graph"; return; }
  "$brisk" train "$cfg" --out "run-$n-graph" --quiet --set "model=$graph" >"$n-graph.log" 2>&1 ||
    { cat "$n-graph.log"; bad "$n as a graph trains"; return; }
  [ -n "$(losses "run-$n")" ] && [ "$(losses "run-$n")" = "$(losses "run-$n-graph")" ] &&
    "$wdiff" "run-$n/last.safetensors" "run-$n-graph/last.safetensors" 0 >/dev/null &&
    ok "$n: brisk info --graph trains as the family, bit for bit" || bad "$n: the printed graph differs from the family"
}
cat > r50.json <<'J'
{"model": {"type": "resnet", "depth": 50, "keypoints": 4, "visibility": false},
 "data": {"images": {"labels": "data/labels.csv", "size": [32, 32], "resize": true}},
 "train": {"batch_size": 4, "max_steps": 2, "log_every": 1, "seed": 1}, "speed": {"device": "cpu"}}
J
preset resnet50 r50.json
cat > seq.json <<'J'
{"model": {"type": "mlp", "seq_len": 4, "inputs": 3, "hidden": [16, 8], "outputs": 2, "activation": "gelu_tanh",
           "task": "regress", "dropout": 0.2},
 "data": {"train": "data/seq.npz", "fields": {"x": "x", "y": "y"}}, "optim": {"type": "adamw", "lr": 1e-3},
 "train": {"batch_size": 32, "epochs": 1, "seed": 3, "log_every": 1}, "speed": {"device": "cpu"}}
J
"$brisk" synth series data/series.csv --samples 2000 >/dev/null
cat > lstm.json <<'J'
{"model": {"type": "lstm", "inputs": 3, "seq_len": 12, "hidden": 16, "layers": 2, "outputs": 1, "task": "regress",
           "pool": "mean", "bidirectional": true, "dropout": 0.3},
 "data": {"train": "data/series.csv", "windows": {"features": ["ret_1", "ret_4", "vol_16"], "length": 12, "horizon": 3,
          "target": {"column": "close", "kind": "change", "change": "relative"}}},
 "optim": {"type": "adamw", "lr": 1e-3}, "train": {"batch_size": 64, "max_steps": 4, "log_every": 1, "seed": 5},
 "speed": {"device": "cpu"}}
J
preset lstm_bidirectional_mean lstm.json
if /usr/bin/python3 -c "import numpy as np; r = np.random.default_rng(0); np.savez('data/seq.npz', \
    x=r.standard_normal((256, 4, 3)).astype('f4'), y=r.standard_normal((256, 2)).astype('f4'))" 2>/dev/null; then
  preset mlp_windows seq.json
else
  echo "skip mlp_windows: no NumPy for /usr/bin/python3"
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
