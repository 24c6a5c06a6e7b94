#!/usr/bin/env bash
# The graph-model examples a user copies from (a CNN classifier, two heads with two losses, a
# 1-D CNN over series windows) print their layer table and train a few steps from the data
# `brisk synth` writes; each loss of a model with several is logged on its own, in the log
# and in metrics.jsonl, and the loss is their weighted sum.
#   graph_examples.sh BRISK WORKDIR
set -u
brisk=$1 work=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/cli/expect.sh"
rm -rf "$work" && mkdir -p "$work/data" && cd "$work" || exit 1
"$brisk" synth images data >/dev/null && "$brisk" synth series data/series.csv --samples 3000 >/dev/null ||
  { echo "FAIL synth"; exit 1; }
for ex in cnn_classifier two_heads cnn1d; do
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
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
