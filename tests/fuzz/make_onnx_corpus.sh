#!/usr/bin/env bash
# Regenerates the seed corpus of fuzz_onnx (tests/fuzz/corpus/onnx/): the small models
# tests/onnx/export_torch.py exports with torch.onnx.export (an MLP at opset 13, a CNN with a
# run-time reshape at opset 17; 1-2 KB each), and damaged copies of them (cut short, a length
# byte changed, a tensor's data_type changed), so the fuzzer starts from the real thing and
# from the errors next to it. test_onnx_read.c reads the two models field by field.
#   tests/fuzz/make_onnx_corpus.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/corpus/onnx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$here/../onnx/export_torch.py" "$work"
mkdir -p "$out"
cp "$work/mlp.onnx" "$out/mlp_opset13.onnx"
cp "$work/cnn.onnx" "$out/cnn_opset17.onnx"
/usr/bin/python3 - "$out" <<'P'
import sys
out = sys.argv[1]
mlp = open(f"{out}/mlp_opset13.onnx", "rb").read()
cnn = open(f"{out}/cnn_opset17.onnx", "rb").read()
open(f"{out}/mlp_cut.onnx", "wb").write(mlp[: len(mlp) * 3 // 5])
# the graph's length (ModelProto field 7, tag 0x3a) one larger than the bytes that follow
i = mlp.index(b"\x3a")
damaged = bytearray(mlp)
damaged[i + 1] += 1
open(f"{out}/mlp_graph_len.onnx", "wb").write(bytes(damaged))
# the first initializer's data_type (TensorProto field 2, tag 0x10) float -> string
i = cnn.index(b"\x10\x01\x42")
open(f"{out}/cnn_string_dtype.onnx", "wb").write(cnn[:i] + b"\x10\x08" + cnn[i + 2 :])
P
ls -l "$out"
# fuzz_onnx_import's seeds (corpus/onnx_import/): the two models above and one of each kind the
# importer builds (tests/onnx/cases_*.py: slices and splits, LSTM, GRU, a U-Net with
# transposed convolutions and resizing, a 1-D CNN, attention), exported as the tests do.
imp=$here/corpus/onnx_import
mkdir -p "$imp"
cp "$out/mlp_opset13.onnx" "$out/cnn_opset17.onnx" "$imp/"
/usr/bin/python3 - "$here/../onnx" "$imp" <<'P'
import os, sys
sys.path.insert(0, sys.argv[1])
import torch
from train_onnx import Case
torch.manual_seed(0)
for group in ("basic", "recurrent", "vision", "transformer"):
    try:
        cases = __import__("cases_" + group).cases(torch, Case)
    except ImportError:
        continue
    for c in cases:
        x = torch.randint(0, c.vocab, [2] + c.sample) if c.vocab else torch.randn([2] + c.sample)
        path = os.path.join(sys.argv[2], f"{group}_{c.name}.onnx")
        torch.onnx.export(c.module, x, path, opset_version=c.opset, input_names=["x"], output_names=["out"],
                          dynamic_axes={"x": {0: "N"}, "out": {0: "N"}}, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
P
ls -l "$imp"
