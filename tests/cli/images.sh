#!/usr/bin/env bash
# Image data end to end with a model that exists today (an MLP over the flattened image,
# regressing the 4 keypoints): brisk synth images, training with augmentation decoded in
# the loader's worker threads, an exact resume (same losses as an uninterrupted run, and
# the same with another worker count), and the config's bad values and bad files as one
# clear error each.
#   images.sh BRISK_BINARY WORKDIR
set -eu
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$brisk" synth images --help | grep -q "images"
"$brisk" synth images data --samples 96 --seed 2 | grep -q "wrote data: 96 PNG images"
test -s data/img_000095.png && test "$(wc -l < data/labels.csv)" = 97
cat > img.json <<'JSON'
{
  "model": {"type": "mlp", "inputs": 12288, "hidden": [32], "outputs": 8, "task": "regress"},
  "data": {"images": {"labels": "data/labels.csv", "size": [64, 64], "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25],
                      "augment": {"flip": 0.5, "flip_pairs": [0, 1, 2, 3], "crop": 0.8}, "workers": 3},
           "validation_fraction": 0.25},
  "optim": {"lr": 1e-3},
  "train": {"batch_size": 8, "epochs": 3, "seed": 1},
  "speed": {"device": "cpu", "prefetch": 2}
}
JSON
losses() { grep -o '"train_loss": [0-9.e-]*' "$1/metrics.jsonl"; }
"$brisk" train img.json --out full --quiet
"$brisk" train img.json --out part --quiet --epochs 2
"$brisk" train img.json --out part --quiet --resume part/last.safetensors
[ "$(losses full)" = "$(losses part)" ] || { echo "resumed losses differ"; losses full; losses part; exit 1; }
"$brisk" train img.json --out one --quiet --set data.images.workers=1
[ "$(losses full)" = "$(losses one)" ] || { echo "losses depend on the worker count"; exit 1; }
# bad values and bad files: one line naming the key or the file, exit 1 (2 for a --set value)
expect() { # expect 'message part' brisk args...
  local want=$1; shift
  set +e; out=$("$brisk" "$@" 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] && grep -qF -- "$want" <<<"$out" || { echo "expected exit 1 and '$want', got $rc: $out"; exit 1; }
}
usage() { # usage 'message part' brisk args...: a --set value its key refuses is a bad command line, exit 2
  local want=$1; shift
  set +e; out=$("$brisk" "$@" 2>&1); rc=$?; set -e
  [ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out" || { echo "expected exit 2 and '$want', got $rc: $out"; exit 1; }
}
usage "data.images.size" train img.json --set data.images.size=0
usage "data.images.std" train img.json --set 'data.images.std=[1,0,1]'
usage "data.images.augment.flip" train img.json --set data.images.augment.flip=2
usage "data.images.augment.crop" train img.json --set data.images.augment.crop=0
usage "data.images.on_error" train img.json --set data.images.on_error=ignore
usage "data.images.augment.flip_pairs" train img.json --set 'data.images.augment.flip_pairs=[0,1,2]'
expect "flip pair 0 names keypoint 7" train img.json --set 'data.images.augment.flip_pairs=[0,7]'
expect "give data.images alone" train img.json --set data.train=x.npz
expect "data/img_000000.png: image of 64 x 64 pixels; expected 32 x 32" train img.json --set 'data.images.size=32'
expect "MiB for image decoding" train img.json --memory-limit 1MiB
rm data/img_000005.png
expect "data/img_000005.png: cannot open" train img.json
"$brisk" train img.json --out skip --set data.images.on_error=skip --epochs 1 2>&1 | grep -q "left out 1 images"
echo "1 passed, 0 failed"
