#!/usr/bin/env bash
# Image data as users have it, written by another tool (Pillow, Debian's python3-pil, which
# tools/install-deps.sh --test installs): each CASE one ctest (cli.photos.CASE).
#   exif  a phone's portrait JPEG stored landscape with EXIF Orientation 6 trains at its
#         displayed size, with keypoints labelled on the displayed picture;
#         data.images.orientation "raw" reads the stored frame (where those labels fall
#         outside the picture: refused); a bad value names the key
#   labels  keypoints outside their image counted and named (most of them: refused); a file
#         listed twice dropped once (same labels) or refused (other labels); a FIFO in the
#         labels refused at once; every file left out by on_error "skip" named
#   decode  PNGs cut in their pixel data: without on_error "skip" the run stops naming one
#         and leaves a checkpoint; with it each is named once, replaced, counted in the
#         summary, metrics.jsonl and the report, with the same losses for any thread count
#   predict a folder with unreadable files: each named on its own line, the rest predicted;
#         --on-error error stops at the first; a bad --on-error value is a usage error
#   validation  data.validation with data.images (other Pillow images, of several sizes);
#         the keypoint error in pixels and PCK@0.05 of the epoch lines and metrics.jsonl
#         equal to the model's outputs mapped to pixels here, stretched and letterboxed
#         (data.images.fit "pad"); a file in both label files and bad fit values refused
#   photos.sh BRISK_BINARY WORKDIR CASE
# Exits 77 (skipped) without Pillow.
set -eu
brisk=$1 work=$2 case=$3
py=/usr/bin/python3
"$py" -c "import PIL, numpy" 2>/dev/null || { echo "Pillow (python3-pil) or NumPy missing: skipped"; exit 77; }
rm -rf "$work" && mkdir -p "$work" && cd "$work"
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
# An MLP over the flattened image regressing K keypoints: small and quick on 2 cores.
config() { # config W H K [extra data.images keys]
  cat > run.json <<JSON
{"model": {"type": "mlp", "inputs": $(($1 * $2 * 3)), "hidden": [16], "outputs": $((2 * $3)), "task": "regress"},
 "data": {"images": {"labels": "data/labels.csv", "size": [$1, $2], "workers": 2 ${4:-}}, "validation_fraction": 0.25},
 "train": {"batch_size": 4, "epochs": 1, "seed": 1}, "speed": {"device": "cpu"}}
JSON
}

# noise_pngs N SEED: data/p0.png ... 32 x 32 RGB noise from Pillow, one keypoint each
noise_pngs() {
  "$py" - "$1" "$2" <<'P'
import os, sys
import numpy as np
from PIL import Image
n, seed = int(sys.argv[1]), int(sys.argv[2])
os.makedirs("data", exist_ok=True)
rng = np.random.default_rng(seed)
rows = ["file,x0,y0,v0"]
for i in range(n):
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(f"data/p{i}.png")
    rows.append(f"p{i}.png,{3 + i},{20 - i},2")
open("data/labels.csv", "w").write("\n".join(rows) + "\n")
P
}

case $case in
exif)
  # 8 photos 48 wide, 32 high as stored, tagged "rotate 90 clockwise" (6): displayed 32 x 48.
  # A dot drawn where the labeller saw it, at displayed (5, 40), is labelled there.
  "$py" - <<'P'
import os
from PIL import Image
os.makedirs("data", exist_ok=True)
rows = ["file,x0,y0,v0"]
for i in range(8):
    up = Image.new("RGB", (32, 48), (40, 40 + 10 * i, 90))
    up.putpixel((5, 40), (255, 255, 255))
    stored = up.transpose(Image.Transpose.ROTATE_90)  # what a phone stores: 48 x 32
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(f"data/p{i}.jpg", exif=exif.tobytes(), quality=95)
    rows.append(f"p{i}.jpg,5.5,40.5,2")
open("data/labels.csv", "w").write("\n".join(rows) + "\n")
P
  config 32 48 1
  "$brisk" train run.json --out up | grep -q "data/labels.csv: 8 images of 8 listed, as 32 x 48"
  expect "data/p0.jpg: image of 48 x 32 pixels; expected 32 x 48" train run.json --out raw --set data.images.orientation=raw
  # the stored frame is 48 x 32: the labels, drawn on the displayed picture, fall outside it
  config 48 32 1 ', "orientation": "raw"'
  expect "8 of the 8 labelled keypoints lie outside their images" train run.json --out raw
  usage "data.images.orientation" train run.json --set data.images.orientation=sideways
  ;;
labels)
  # 8 Pillow PNGs of 32 x 32 with one keypoint each; labels.csv rewritten per check
  "$py" - <<'P'
import os
from PIL import Image
os.makedirs("data", exist_ok=True)
for i in range(8):
    Image.new("RGB", (32, 32), (30 * i, 80, 120)).save(f"data/p{i}.png")
P
  labels() { # labels 'x y' for p0..p7, then extra rows
    local xy=$1; shift
    { echo "file,x0,y0,v0"; i=0; for p in $xy; do echo "p$i.png,${p/:/,},2"; i=$((i + 1)); done; printf '%s\n' "$@"; } > data/labels.csv
  }
  config 32 32 1
  # keypoints outside the image: one of 8 is counted and named; most of them are refused
  # (before: all 8 outside trained with loss 0 and learnt nothing, without a word)
  labels "4:4 5:5 40:5 6:6 7:7 8:8 9:9 10:10"
  "$brisk" train run.json --out one_out 2>&1 | grep -qF "1 of the 8 labelled keypoints lie outside their images and count as not labelled; the first: data/p2.png: keypoint 0 at (40, 5), outside its 32 x 32 pixels"
  labels "0.1:0.2 0.3:0.2 0.5:0.5 0.9:0.1 0.2:0.2 0.4:0.4 0.6:0.6 0.8:0.8"
  "$brisk" train run.json --out fractions >/dev/null 2>&1 # within [0, 32): pixels near the corner, accepted
  labels "4:4 50:5 40:5 -1:6 7:70 8:8 90:9 10:100"
  expect "6 of the 8 labelled keypoints lie outside their images (the first: data/p1.png: keypoint 0 at (50, 5)" \
    train run.json --out most_out
  # the same file twice: with the same labels dropped once, with other labels refused
  labels "4:4 5:5 6:6 7:7 8:8 9:9 10:10 11:11" "./p3.png,7,7,2"
  "$brisk" train run.json --out dup > dup.txt 2>&1
  grep -qF "1 label rows of data/labels.csv repeat an earlier row's file and labels, and were dropped" dup.txt &&
    grep -qF "8 images of 9 listed" dup.txt || { cat dup.txt; exit 1; }
  labels "4:4 5:5 6:6 7:7 8:8 9:9 10:10 11:11" "p3.png,9,9,2"
  expect "line 5 and line 10 name the same image (p3.png, p3.png) with different labels" train run.json --out dup2
  # a FIFO named in the labels: refused at once (before: the loader waited in open() for ever)
  mkfifo data/pipe.png
  labels "4:4 5:5 6:6 7:7 8:8 9:9 10:10 11:11" "pipe.png,3,3,2"
  set +e; out=$(timeout 60 "$brisk" train run.json --out fifo 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] && grep -qF "data/pipe.png: not a regular file (a FIFO)" <<<"$out" || { echo "FIFO: exit $rc: $out"; exit 1; }
  rm data/pipe.png
  # every file left out is named, not only the first
  head -c 40 data/p6.png > data/cut6.png && head -c 40 data/p7.png > data/cut7.png
  labels "4:4 5:5 6:6 7:7 8:8 9:9 10:10 11:11" "cut6.png,3,3,2" "cut7.png,3,3,2"
  "$brisk" train run.json --out skip --set data.images.on_error=skip > skip.txt 2>&1
  grep -qF "left out 2 images" skip.txt && grep -qF "left out data/cut6.png: corrupt or truncated PNG" skip.txt &&
    grep -qF "left out data/cut7.png: corrupt or truncated PNG" skip.txt || { cat skip.txt; exit 1; }
  ;;
decode)
  # 14 Pillow PNGs of noise; two cut in their pixel data (headers intact: the check at load
  # passes them, and decoding fails only when a batch holds them)
  noise_pngs 14 5
  "$py" - <<'P'
for i in (4, 9):
    raw = open(f"data/p{i}.png", "rb").read()
    open(f"data/p{i}.png", "wb").write(raw[: len(raw) * 2 // 3])
P
  config 32 32 1
  # on_error "error": the run stops naming the file, and leaves a checkpoint of the steps done
  set +e; out=$("$brisk" train run.json --out stop --epochs 3 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] && grep -qE "data/p(4|9)\.png: corrupt or truncated PNG" <<<"$out" &&
    grep -qF 'data.images.on_error "skip" replaces such an image' <<<"$out" &&
    grep -qE "brisk wrote the checkpoint of step [0-9]+: stop/last\.safetensors" <<<"$out" &&
    test -s stop/last.safetensors || { echo "on_error error: exit $rc: $out"; ls stop; exit 1; }
  # on_error "skip": both named once, counted in the summary, metrics.jsonl and the report,
  # and the same batches for any number of decoding threads
  skip="--set data.images.on_error=skip --epochs 3"
  "$brisk" train run.json --out skip $skip > skip.txt 2>&1 || { cat skip.txt; exit 1; }
  for f in p4 p9; do
    [ "$(grep -c "image left out (found by step [0-9]*), replaced in its batches by the next one that decodes: data/$f.png: corrupt" skip.txt)" = 1 ] ||
      { echo "data/$f.png not named once"; cat skip.txt; exit 1; }
    grep -q "\"event\":\"data_skipped\".*\"when\":\"run\",\"file\":\"data/$f.png\"" skip/metrics.jsonl
    grep -qF "data/$f.png</td><td>at step" skip/report.html
  done
  grep -qF "images skipped    2: 0 unusable at load, 2 whose pixels failed to decode during the run" skip.txt
  grep -q '"images_replaced":2' skip/metrics.jsonl
  "$brisk" train run.json --out one $skip --set data.images.workers=1 > /dev/null 2>&1
  losses() { grep -o '"train_loss": [0-9.e-]*' "$1/metrics.jsonl"; }
  [ -n "$(losses skip)" ] && [ "$(losses skip)" = "$(losses one)" ] || { echo "losses depend on the workers"; exit 1; }
  ;;
predict)
  # a ResNet-18 on 32 x 32 Pillow images, then predict on a folder holding, besides good
  # photos of other sizes (resized as in training), a JPEG cut in its pixel data, a PNG
  # whose header is damaged, a FIFO and a text file named like images: each is named on
  # its own line and has no row, and the good ones all get theirs
  noise_pngs 8 7
  "$py" - <<'P'
import os
import numpy as np
from PIL import Image
os.makedirs("folder", exist_ok=True)
rng = np.random.default_rng(7)
for i, (w, h) in enumerate([(32, 32), (64, 48), (40, 80), (32, 32), (50, 50)]):
    picture = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    picture.save(f"folder/a{i}.png" if i in (1, 2) else f"folder/a{i}.jpg", quality=90)
    picture.save(f"a{i}.jpg", quality=90)
raw = open("a1.jpg", "rb").read()
open("folder/b_cut.jpg", "wb").write(raw[: len(raw) // 2])
raw = open("data/p0.png", "rb").read()
open("folder/c_header.png", "wb").write(raw[:16] + b"\0" * 9 + raw[25:])
open("folder/d_text.jpg", "w").write("not a picture\n")
P
  mkfifo folder/e_pipe.png
  cat > run.json <<'JSON'
{"model": {"type": "resnet", "depth": 18, "keypoints": 1},
 "data": {"images": {"labels": "data/labels.csv", "size": [32, 32], "resize": true, "workers": 2}, "validation_fraction": 0.25},
 "train": {"batch_size": 2, "epochs": 1, "seed": 1}, "speed": {"device": "cpu"}}
JSON
  "$brisk" train run.json --out net --quiet --max-steps 2 >/dev/null
  timeout 120 "$brisk" predict net/last.safetensors --input folder --output kp.csv > pred.txt 2>&1 || { cat pred.txt; exit 1; }
  for f in b_cut.jpg c_header.png d_text.jpg e_pipe.png; do
    [ "$(grep -c "predict   skipped folder/$f: " pred.txt)" = 1 ] || { echo "folder/$f not named once"; cat pred.txt; exit 1; }
  done
  grep -qF "predict   5 images -> kp.csv [5, 1, 2]" pred.txt && grep -qF "4 of the folder's 9 images skipped" pred.txt &&
    ! grep -qF "rows -> kp.csv" pred.txt || { cat pred.txt; exit 1; }
  [ "$(cut -d, -f1 kp.csv | tr '\n' ' ')" = "file a0.jpg a1.png a2.png a3.jpg a4.jpg " ] || { cat kp.csv; exit 1; }
  # each row in its own image's pixels: the model's fractions (predict on the samples as an
  # array, resized here as brisk resizes: bilinear, align_corners False) times the size of
  # a1 (64 x 48) and a2 (40 x 80)
  "$py" - <<'P'
import numpy as np
from PIL import Image
def taps(n_out, n_in):
    s = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
    a = np.floor(s).astype(int)
    return a, np.minimum(a + 1, n_in - 1), (s - a).astype(np.float32)
def resized(path):
    p = np.asarray(Image.open(path).convert("RGB"), np.float32)
    x0, x1, wx = taps(32, p.shape[1])
    y0, y1, wy = taps(32, p.shape[0])
    rows = p[y0] * (1 - wy)[:, None, None] + p[y1] * wy[:, None, None]
    out = rows[:, x0] * (1 - wx)[None, :, None] + rows[:, x1] * wx[None, :, None]
    return (out / 255).transpose(2, 0, 1)
np.save("x.npy", np.stack([resized("folder/a1.png"), resized("folder/a2.png")]).astype(np.float32))
P
  "$brisk" predict net/last.safetensors --input x.npy --output frac.npy >/dev/null
  "$py" - <<'P'
import numpy as np
frac = np.load("frac.npy").reshape(2, 2)
kp = np.genfromtxt("kp.csv", delimiter=",", skip_header=1, usecols=(1, 2))[1:3]
want = frac * np.array([[64, 48], [40, 80]])
assert np.allclose(kp, want, atol=2e-3), (kp, want)
P
  expect "folder/c_header.png: corrupt or truncated PNG" predict net/last.safetensors --input folder --output k2.csv --on-error error
  test ! -e k2.csv
  set +e; "$brisk" predict net/last.safetensors --input folder --output k3.csv --on-error maybe > bad.txt 2>&1; rc=$?; set -e
  [ $rc -eq 2 ] && grep -qF -- "--on-error 'maybe': expected skip or error" bad.txt || { echo "rc $rc"; cat bad.txt; exit 1; }
  ;;
validation)
  # data.validation with data.images: a second labels file of other Pillow images, of several
  # sizes (resized, stretched or letterboxed with data.images.fit "pad"); the epoch lines,
  # metrics.jsonl and the summary give the keypoint error in pixels of each image and
  # PCK@0.05, which must equal what brisk predict's pixels give against the labels
  "$py" - <<'P'
import os
import numpy as np
from PIL import Image
os.makedirs("data", exist_ok=True)
os.makedirs("valimgs", exist_ok=True)
rng = np.random.default_rng(11)
sizes = [(32, 32), (48, 32), (32, 64), (40, 40), (64, 48), (36, 30)]
for name, folder, n in (("labels", "data", 12), ("val", "valimgs", 6)):
    rows = ["file,x0,y0,v0,x1,y1,v1"]
    for i in range(n):
        w, h = sizes[i % len(sizes)]
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(f"{folder}/{name}{i}.png")
        kp = [rng.uniform(0, w), rng.uniform(0, h), 2, rng.uniform(0, w), rng.uniform(0, h), 1 + i % 2]
        prefix = "" if folder == "data" else "../valimgs/"
        rows.append(f"{prefix}{name}{i}.png," + ",".join(f"{v:.2f}" for v in kp))
    open(f"data/{name}.csv", "w").write("\n".join(rows) + "\n")
P
  config 32 32 2 ', "resize": true'
  sed -i 's|, "validation_fraction": 0.25|, "validation": "data/val.csv"|' run.json
  # pixels FIT RUN: the model's outputs on valimgs (fractions of the sample, in the folder's
  # order) mapped to each image's pixels here, independently of brisk: stretched, each side
  # scaled; padded, the image scaled by min(32 / w, 32 / h), rounded, centred
  cat > pixels.py <<'P'
import sys
import numpy as np
from PIL import Image
def pixels(fit, run):
    frac = np.load(f"{run}/frac.npy").reshape(6, 2, 2)
    out = {}
    for i in range(6):
        w, h = Image.open(f"valimgs/val{i}.png").size
        if fit == "pad":
            s = min(32 / w, 32 / h)
            bw, bh = round(w * s), round(h * s)
            ox, oy = (32 - bw) // 2, (32 - bh) // 2
            out[i] = (frac[i] * 32 - [ox, oy]) * [w / bw, h / bh], (w, h)
        else:
            out[i] = frac[i] * [w, h], (w, h)
    return out
P
  # near FIT RUN: labels near those pixels (moved 0.5 to 6 px, one not labelled), so that
  # PCK is neither 0 nor 1; the same training run again against them (its data and seed
  # unchanged) validates the same weights
  near() {
    "$brisk" predict "$2/last.safetensors" --input valimgs --output "$2/frac.npy" >/dev/null
    "$py" - "$1" "$2" <<'P'
import sys
import numpy as np
from pixels import pixels
fit, run = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(3)
rows = ["file,x0,y0,v0,x1,y1,v1"]
for i, (p, (w, h)) in pixels(fit, run).items():
    kp = []
    for k in range(2):
        d, a = [0.5, 1.0, 2.0, 3.0, 4.5, 6.0][(2 * i + k) % 6], rng.uniform(0, 2 * np.pi)
        x = min(max(p[k][0] + d * np.cos(a), 0), w - 0.01)
        y = min(max(p[k][1] + d * np.sin(a), 0), h - 0.01)
        kp += [x, y, 0 if (i, k) == (1, 1) else 2]
    rows.append(f"../valimgs/val{i}.png," + ",".join(f"{v:.4f}" for v in kp))
open(f"data/near_{fit}.csv", "w").write("\n".join(rows) + "\n")
P
  }
  check_metrics() { # check_metrics FIT RUN: the last epoch's keypoint metrics against the labels
    "$brisk" predict "$2/last.safetensors" --input valimgs --output "$2/frac.npy" >/dev/null
    "$py" - "$1" "$2" <<'P'
import csv, json, sys
import numpy as np
from pixels import pixels
fit, run = sys.argv[1], sys.argv[2]
epochs = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"val_px_error"' in l]
pred = pixels(fit, run)
dist, hits = [], 0
for i, r in enumerate(csv.DictReader(open(f"data/near_{fit}.csv"))):
    p, (w, h) = pred[i]
    for k in range(2):
        if float(r[f"v{k}"]) > 0:
            d = np.hypot(p[k][0] - float(r[f"x{k}"]), p[k][1] - float(r[f"y{k}"]))
            dist.append(d)
            hits += d <= 0.05 * max(w, h)
got, want = epochs[-1], (np.mean(dist), hits / len(dist))
assert len(epochs) == 3 and len(dist) == 11 and 0 < want[1] < 1, (len(epochs), dist, want)
assert abs(got["val_px_error"] - want[0]) < 1e-4 * want[0] and abs(got["val_pck"] - want[1]) < 1e-6, (got, want)
print(f"{fit}: keypoint error {got['val_px_error']:.5f} px (here {want[0]:.5f}), PCK@0.05 {got['val_pck']:.4f} (here {want[1]:.4f})")
P
  }
  for fit in stretch pad; do
    "$brisk" train run.json --out "$fit" --epochs 3 --set data.images.fit=$fit > "$fit.txt"
    grep -qF "data      validation data/val.csv: 6 images of 6 listed" "$fit.txt" &&
      grep -qF "12 train / 6 validation samples" "$fit.txt" &&
      grep -qE "epoch 3 done .*val MAE [0-9.e-]+ RMSE [0-9.e-]+ \(fractions of the image\)  keypoint error [0-9.e-]+ px  PCK@0.05 [0-9.]+" "$fit.txt" &&
      grep -qE "best val loss .*keypoint error [0-9.e-]+ px, PCK@0.05 [0-9.]+" "$fit.txt" || { cat "$fit.txt"; exit 1; }
    near $fit $fit
    "$brisk" train run.json --out "near_$fit" --epochs 3 --set data.images.fit=$fit --set "data.validation=data/near_$fit.csv" >/dev/null
    check_metrics $fit "near_$fit"
  done
  grep -qF "(resized, aspect ratio kept: padded)" pad.txt
  # an image in both files: refused
  cp data/val.csv data/leak.csv && echo "../data/labels3.png,1,1,2,2,2,2" >> data/leak.csv
  expect "data/leak.csv: 1 of its images are also in data/labels.csv (the first: data/../data/labels3.png)" \
    train run.json --out leak --set data.validation=data/leak.csv
  usage "data.images.fit" train run.json --set data.images.fit=squash
  usage "data.images.fit: \"pad\" fits images of other sizes" train run.json --set data.images.fit=pad --set data.images.resize=false
  ;;
*) echo "unknown case $case"; exit 2 ;;
esac
echo "1 passed, 0 failed"
