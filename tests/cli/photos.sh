#!/usr/bin/env bash
# Image data as users have it, written by another tool (Pillow, Debian's python3-pil, which
# tools/install-deps.sh --test installs): each CASE one ctest (cli.photos.CASE).
#   exif  a phone's portrait JPEG stored landscape with EXIF Orientation 6 trains at its
#         displayed size, with keypoints labelled on the displayed picture;
#         data.images.orientation "raw" reads the stored frame; a bad value names the key
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
# An MLP over the flattened image regressing K keypoints: small and quick on 2 cores.
config() { # config W H K [extra data.images keys]
  cat > run.json <<JSON
{"model": {"type": "mlp", "inputs": $(($1 * $2 * 3)), "hidden": [16], "outputs": $((2 * $3)), "task": "regress"},
 "data": {"images": {"labels": "data/labels.csv", "size": [$1, $2], "workers": 2 ${4:-}}, "validation_fraction": 0.25},
 "train": {"batch_size": 4, "epochs": 1, "seed": 1}, "speed": {"device": "cpu"}}
JSON
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
  config 48 32 1 ', "orientation": "raw"'
  "$brisk" train run.json --out raw --quiet
  expect "data.images.orientation" train run.json --set data.images.orientation=sideways
  ;;
*) echo "unknown case $case"; exit 2 ;;
esac
echo "1 passed, 0 failed"
