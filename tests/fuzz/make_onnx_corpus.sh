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
