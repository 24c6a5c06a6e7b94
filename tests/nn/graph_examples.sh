#!/usr/bin/env bash
# The graph-model examples a user copies from (a CNN classifier, two heads with two losses, a
# 1-D CNN over series windows, a GRU regressor over them, a U-Net downscaler) print their layer table and train a few steps from the data
# `brisk synth` writes; each loss of a model with several is logged on its own, in the log
# and in metrics.jsonl, and the loss is their weighted sum.
#   graph_examples.sh BRISK WORKDIR
set -u
brisk=$1 work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/cli/expect.sh"
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
"$brisk" synth images data >/dev/null && "$brisk" synth series data/series.csv --samples 3000 >/dev/null &&
  "$brisk" synth diffusion data/diffusion.npz --samples 512 >/dev/null ||
  { echo "FAIL synth"; exit 1; }
for ex in cnn_classifier two_heads cnn1d gru_regressor unet_downscaler; do
  "$brisk" info "$src/examples/$ex.json" >"$ex.info" 2>&1 && grep -q "^total: [0-9]* parameters in [0-9]* layers" "$ex.info" &&
    ok "$ex: brisk info prints the layer table" || { cat "$ex.info"; bad "$ex info"; }
  "$brisk" train "$src/examples/$ex.json" --out "run-$ex" --set train.max_steps=6 --set train.log_every=2 \
    --threads 2 >"$ex.log" 2>&1 && [ "$(grep -c '"step"' "run-$ex/metrics.jsonl")" -ge 3 ] &&
    ok "$ex trains" || { tail -20 "$ex.log"; bad "$ex trains"; }
done
# two_heads: loss = classes + 10 corners, at every progress line
grep -E '^epoch 1  step [0-9]+/[0-9]+  loss [0-9.]+ \(classes [0-9.]+, corners [0-9.]+\)' two_heads.log >terms.txt
[ -s terms.txt ] && ok "two_heads: each loss on the progress lines" || { cat two_heads.log; bad "terms in the log"; }
awk '{ for (i = 1; i <= NF; i++) { if ($i == "loss") l = $(i + 1); if ($i == "(classes") c = $(i + 1);
       if ($i == "corners") k = $(i + 1) } sub(/,/, "", c); sub(/\)/, "", k);
       d = l - (c + 10 * k); if (d < 0) d = -d; if (d > 2e-5 * l + 1e-5) bad = 1 } END { exit bad }' terms.txt &&
  ok "two_heads: the loss is classes + 10 corners" || { cat terms.txt; bad "weighted sum"; }
grep '"step"' run-two_heads/metrics.jsonl | grep -q '"loss/classes": [0-9.e-]*, "loss/corners": [0-9.e-]*' &&
  ok "two_heads: metrics.jsonl has loss/classes and loss/corners" || { cat run-two_heads/metrics.jsonl; bad "metrics terms"; }
# NPY/NPZ arrays of any rank feed the graph's named inputs (data.fields maps array names):
# images [N, 2, 6, 6] with labels, and sequences [N, 10, 3] with a float target [N, 2]
/usr/bin/python3 - <<'PY' || { echo "FAIL numpy"; exit 1; }
import numpy as np
r = np.random.default_rng(0)
img = r.standard_normal((64, 2, 6, 6)).astype(np.float32)
np.savez("data/img.npz", pixels=img, label=(img[:, 0].mean(axis=(1, 2)) > 0).astype(np.int32))
seq = r.standard_normal((64, 10, 3)).astype(np.float32)
np.savez("data/seq.npz", series=seq, next=seq[:, -2:, 0].copy())
PY
cat >img.json <<'J'
{"model": {"type": "graph", "inputs": [{"name": "im", "shape": [2, 6, 6]}, {"name": "c", "shape": [], "dtype": "i32"}],
  "layers": [{"name": "conv", "op": "conv2d", "inputs": ["im"], "out": 4, "kernel": 3},
             {"name": "gap", "op": "global_avgpool", "inputs": ["conv"]},
             {"name": "head", "op": "linear", "inputs": ["gap"], "out": 2}],
  "outputs": ["head"], "losses": [{"output": "head", "target": "c", "type": "cross_entropy"}]},
 "data": {"train": "data/img.npz", "fields": {"im": "pixels", "c": "label"}},
 "train": {"batch_size": 16, "epochs": 1, "out_dir": ""}}
J
cat >seq.json <<'J'
{"model": {"type": "graph", "inputs": [{"name": "s", "shape": [10, 3]}, {"name": "t", "shape": [2]}],
  "layers": [{"name": "rnn", "op": "lstm", "inputs": ["s"], "hidden": 8},
             {"name": "last", "op": "slice", "inputs": ["rnn"], "dim": 1, "start": 9, "length": 1},
             {"name": "flat", "op": "flatten", "inputs": ["last"]},
             {"name": "head", "op": "linear", "inputs": ["flat"], "out": 2}],
  "outputs": ["head"], "losses": [{"output": "head", "target": "t", "type": "mse"}]},
 "data": {"train": "data/seq.npz", "fields": {"s": "series", "t": "next"}},
 "train": {"batch_size": 16, "epochs": 1, "out_dir": ""}}
J
for c in img seq; do
  "$brisk" train $c.json >$c.log 2>&1 && grep -q "epoch 1 done" $c.log && ok "$c.json: NPZ arrays feed the graph's inputs" ||
    { tail -5 $c.log; bad "$c.json trains"; }
done
sed 's/"shape": \[2, 6, 6\]/"shape": [2, 6, 5]/' img.json >bad.json
"$brisk" train bad.json >bad.log 2>&1
[ $? -ne 0 ] && grep -q "field 'im' has samples of shape \[2, 6, 6\], the model .* expects \[2, 6, 5\]; set the input's model.inputs\[\].shape" bad.log &&
  ok "a wrong input shape: one error naming the field and both shapes" || { cat bad.log; bad "shape error"; }
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
