#!/usr/bin/env bash
# examples/resnet.json end to end on `brisk synth images` PNG files (briefly): training with
# augmentation, an exact resume (the same losses as an uninterrupted run), episodic batches
# (data.episodes) resumed exactly, training from an .npz image array, `brisk predict` on
# a folder of images (CSV with file names and .npy, in pixels), PyTorch's ResNet18Keypoints
# (bench/reference/models.py) loading the checkpoint and predicting the same keypoints (when
# /usr/bin/python3 has torch), and the model keys' bad values as one clear error each.
#   resnet.sh BRISK_BINARY WORKDIR SOURCE_DIR
set -eu
brisk=$1 work=$2 src=$3
py=/usr/bin/python3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$brisk" synth images data --samples 24 --seed 3 >/dev/null
small="--batch-size 8 --quiet --set data.images.workers=2"
losses() { grep -o '"train_loss": [0-9.e-]*' "$1/metrics.jsonl"; }
"$brisk" train "$src/examples/resnet.json" $small --epochs 2 --out full
"$brisk" info full/last.safetensors | grep -q "blocks.7.b2.running_var *F32 *\[512\]"
"$brisk" train "$src/examples/resnet.json" $small --epochs 1 --out part
"$brisk" train "$src/examples/resnet.json" $small --epochs 2 --out part --resume part/last.safetensors
[ "$(losses full)" = "$(losses part)" ] || { echo "resumed losses differ"; losses full; losses part; exit 1; }
[ "$(losses full | wc -l)" = 2 ] || { echo "expected 2 epochs of losses"; exit 1; }
# episodic batches (2 support + 2 query samples of one category), resumed exactly
ep="--set data.episodes.support=2 --set data.episodes.query=2 --batch-size 4"
"$brisk" train "$src/examples/resnet.json" --set data.images.workers=2 $ep --epochs 2 --out ep_full > ep.txt
grep -q "episodes  each batch 2 support + 2 query samples of one of 3 categories" ep.txt
"$brisk" train "$src/examples/resnet.json" $small $ep --epochs 1 --out ep_part
"$brisk" train "$src/examples/resnet.json" $small $ep --epochs 2 --out ep_part --resume ep_part/last.safetensors
[ "$(losses ep_full)" = "$(losses ep_part)" ] || { echo "episodic: resumed losses differ"; losses ep_full; losses ep_part; exit 1; }
# predict on a folder: its PNG and JPEG files, sorted; other files ignored
mkdir pred && cp data/img_00000[0-4].png pred/ && echo "not an image" > pred/notes.txt
"$brisk" predict full/last.safetensors --input pred --output kp.csv | grep -q "5 images -> kp.csv \[5, 4, 2\]"
head -1 kp.csv | grep -qx "file,x0,y0,x1,y1,x2,y2,x3,y3"
[ "$(sed -n 2p kp.csv | cut -d, -f1)" = img_000000.png ] && [ "$(wc -l < kp.csv)" = 6 ]
"$brisk" predict full/last.safetensors --input pred --output kp.npy >/dev/null
if "$py" -c "import torch, numpy" 2>/dev/null; then
  PYTHONPATH="$src/bench/reference" "$py" - <<'P'
import json, struct, zlib, numpy as np, torch, models
def load(path):  # safetensors: u64 header length, JSON header, then the tensors' bytes
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head, base = json.loads(raw[8:8 + n]), 8 + n
    return {k: np.frombuffer(raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]], np.float32).reshape(v["shape"])
            for k, v in head.items() if k != "__metadata__" and v["dtype"] == "F32"}
def png(path):  # 8-bit RGB, non-interlaced, as brisk synth images writes them
    raw = open(path, "rb").read()
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(raw):
        n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        if kind == b"IHDR":
            w, h = struct.unpack(">II", raw[pos + 8:pos + 16])
        if kind == b"IDAT":
            idat += raw[pos + 8:pos + 8 + n]
        pos += 12 + n
    data, out, prev = zlib.decompress(idat), np.zeros((h, w * 3), np.int32), np.zeros(w * 3, np.int32)
    for y in range(h):
        f, row = data[y * (w * 3 + 1)], np.frombuffer(data[y * (w * 3 + 1) + 1:(y + 1) * (w * 3 + 1)], np.uint8).astype(np.int32)
        cur = np.zeros(w * 3, np.int32)
        for i in range(w * 3):
            a = cur[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            p = a + b - c
            pr = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
            cur[i] = (row[i] + [0, a, b, (a + b) // 2, pr][f]) & 255
        out[y], prev = cur, cur
    return out.reshape(h, w, 3)
t = load("full/last.safetensors")
model = models.ResNet18Keypoints(outputs=8)
missing, unexpected = model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in t.items()
                                             if not k.startswith("optim.")}, strict=False)
assert not unexpected and all(m.endswith("num_batches_tracked") for m in missing), (missing, unexpected)
model.eval()
x = np.stack([png(f"pred/img_00000{i}.png") for i in range(5)]).astype(np.float32)
x = torch.from_numpy(((x / 255 - 0.5) / 0.25).transpose(0, 3, 1, 2).copy())
with torch.no_grad():
    kp = model.head(model.blocks(model.stem(x)).mean(dim=(2, 3))).numpy().reshape(5, 4, 2) * 64
err = np.abs(kp - np.load("kp.npy")).max()
print(f"PyTorch on the brisk checkpoint vs brisk predict: max abs difference {err:.2e} pixels")
assert err < 1e-3, err
P
else
  echo "(PyTorch missing: the PyTorch load check is skipped)"
fi
# the same model from an image array (.npz: images u8 [N, H, W, 3], category, keypoints [N, K, 3])
if "$py" -c "import numpy" 2>/dev/null; then
  "$py" - <<'P'
import numpy as np
r = np.random.default_rng(0)
kp = np.concatenate([r.uniform(0, 64, (12, 4, 2)), np.full((12, 4, 1), 2.0)], axis=2).astype(np.float32)
np.savez("arr.npz", images=r.integers(0, 256, (12, 64, 64, 3), dtype=np.uint8),
         category=np.arange(12, dtype=np.int32) % 2, keypoints=kp)
P
  "$brisk" train "$src/examples/resnet.json" --batch-size 4 --max-steps 2 --set data.images.labels=arr.npz --out arr |
    grep -q "data      arr.npz: 12 images of 12 listed, as 64 x 64; 4 keypoints, 2 categories"
fi
# bad values: one line naming the key or the file, exit 1 (2 for a --set value)
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
usage "model.depth" train "$src/examples/resnet.json" --set model.depth=20
usage "model.keypoints" train "$src/examples/resnet.json" --set model.keypoints=0
usage "model.size" train "$src/examples/resnet.json" --set 'model.size=[64]'
usage "model.activation" train "$src/examples/resnet.json" --set model.activation=gelu
expect "field 'y' has samples of shape [4, 2], the model" train "$src/examples/resnet.json" --set model.keypoints=5
expect "field 'x' has samples of shape [3, 64, 64], the model (" train "$src/examples/resnet.json" --set 'model.size=[32,32]'
"$brisk" train "$src/examples/resnet.json" $small --set 'model.size=[64,64]' --max-steps 0 --out size64
expect "train.batch_size is 8, but an episode (data.episodes) is 2 support + 2 query" train "$src/examples/resnet.json" \
  $small --set data.episodes.support=2 --set data.episodes.query=2
usage "data.episodes.support" train "$src/examples/resnet.json" --set data.episodes.support=0
expect "data.episodes" train "$src/examples/resnet.json" --batch-size 24 --set data.episodes.support=12 \
  --set data.episodes.query=12
mkdir empty
expect "empty: no usable .png, .jpg or .jpeg file" predict full/last.safetensors --input empty --output k.csv
cp data/img_000001.png pred/broken.png && truncate -s 100 pred/broken.png
"$brisk" predict full/last.safetensors --input pred --output k.csv 2>&1 | grep -q "predict   skipped pred/broken.png: "
[ "$(wc -l < k.csv)" = 6 ]
expect "pred/broken.png" predict full/last.safetensors --input pred --output k.csv --on-error error
echo "1 passed, 0 failed"
