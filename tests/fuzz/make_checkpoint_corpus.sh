#!/usr/bin/env bash
# Regenerates the seed corpus of fuzz_checkpoint (tests/fuzz/corpus/checkpoint/): real
# checkpoints of tiny models (an AdamW MLP, an SGD-momentum regressor, a diffusion
# denoiser), a few hundred bytes to a few KB each, so the fuzzer mutates the real thing.
#   tests/fuzz/make_checkpoint_corpus.sh BRISK_BINARY
set -euo pipefail
brisk=$(realpath "$1")
out=$(cd "$(dirname "$0")" && pwd)/corpus/checkpoint
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
/usr/bin/python3 - <<'P'
import numpy as np
r = np.random.default_rng(0)
np.savez("mlp.npz", x=r.standard_normal((16, 4)).astype(np.float32), y=r.integers(0, 2, 16).astype(np.int32))
np.savez("reg.npz", x=r.standard_normal((16, 3)).astype(np.float32), y=r.standard_normal((16, 2)).astype(np.float32))
np.savez("diff.npz", coarse=r.standard_normal((16, 2)).astype(np.float32), fine=r.standard_normal((16, 4)).astype(np.float32))
P
common='"train": {"batch_size": 4, "max_steps": 3, "keep_checkpoints": 0, "out_dir": "run"}, "speed": {"threads": 1}'
echo "{\"model\": {\"type\": \"mlp\", \"inputs\": 4, \"hidden\": [3], \"outputs\": 2}, \"data\": {\"train\": \"mlp.npz\"}, $common}" > mlp.json
echo "{\"model\": {\"type\": \"mlp\", \"inputs\": 3, \"outputs\": 2, \"task\": \"regress\"}, \"data\": {\"train\": \"reg.npz\", \"validation_fraction\": 0}, \"optim\": {\"type\": \"sgd\", \"momentum\": 0.9}, $common}" > reg.json
echo "{\"model\": {\"type\": \"diffusion\", \"fine\": 4, \"coarse\": 2, \"time_embedding\": 2, \"hidden\": [3], \"noise\": {\"steps\": 4}}, \"data\": {\"train\": \"diff.npz\"}, $common}" > diff.json
mkdir -p "$out"
for m in mlp reg diff; do
  rm -rf run
  "$brisk" train $m.json --quiet
  cp run/last.safetensors "$out/$m.safetensors"
done
ls -l "$out"
