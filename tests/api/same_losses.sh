#!/usr/bin/env bash
# Training through the API and through `brisk train` on the same data, config and seed gives
# the same losses, step by step, bit for bit (metrics.jsonl prints them with 9 digits): the same
# split, the same shuffles, the same noise, the same schedule.
#   same_losses.sh BRISK API_TRAIN_TOOL WORKDIR
set -eu
brisk=$1 tool=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$brisk" synth diffusion d.npz --samples 1000 --seed 3 >/dev/null
cat > base.json <<'J'
{"model": {"type": "diffusion", "hidden": [64, 64], "noise": {"steps": 20}},
 "data": {"train": "d.npz", "validation_fraction": 0.2, "fields": {"coarse": "coarse", "fine": "fine"}},
 "optim": {"lr": 2e-3, "schedule": {"type": "cosine", "warmup_steps": 10}},
 "train": {"batch_size": 16, "epochs": 3, "seed": 5, "log_every": 1, "out_dir": "OUT"},
 "speed": {"threads": 2, "prefetch": 2}}
J
sed 's/"OUT"/"cli"/' base.json > cli.json
sed 's/"OUT"/"api"/' base.json > api.json
"$brisk" train cli.json --quiet >/dev/null
"$tool" api.json d.npz coarse fine
# step lines without their timings; epoch lines whole; the run-start and run-end records (times) left out
strip() { grep -v '"event":"run_' "$1/metrics.jsonl" | sed -E 's/, "ms_per_step".*\}/}/'; }
strip cli > cli.txt
strip api > api.txt
n=$(grep -c '"loss"' cli.txt)
if [ "$n" -ne 150 ]; then echo "FAIL: expected 150 step lines (3 epochs of 50 batches), got $n"; exit 1; fi
if ! diff cli.txt api.txt > diff.txt; then
  echo "FAIL: the API's losses differ from the CLI's:"; head -20 diff.txt; exit 1
fi
echo "ok: $n steps and $(grep -c train_loss cli.txt) epochs identical; last: $(grep '"loss"' api.txt | tail -1)"
