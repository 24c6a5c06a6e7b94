#!/usr/bin/env bash
# Where an output goes: a regular file is replaced atomically, through a symlink its target (the
# link stays), a character device or FIFO is written in place and never replaced, "-" is
# standard output, a directory is refused, and folders that do not exist yet are made (as
# mkdir -p would) by every command that writes a file. Devices are reached only through paths inside
# WORKDIR (a symlink, or a node made there), so a regression replaces that path, never /dev.
#   outputs.sh BRISK_BINARY WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$brisk" synth tabular tab.npz --samples 256 >/dev/null || { echo "synth failed"; exit 1; }
cat > good.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [8], "outputs": 3},
 "data": {"train": "tab.npz", "validation_fraction": 0.25}, "train": {"batch_size": 64, "epochs": 1, "out_dir": "run"}}
J
"$brisk" train good.json --quiet >/dev/null || { echo "a good run failed"; exit 1; }
ck=run/last.safetensors
/usr/bin/python3 -c 'import numpy as np; np.save("x.npy", np.zeros((4, 64), np.float32))' || exit 1
"$brisk" predict $ck --input x.npy --output ref.npy >/dev/null || { echo "predict failed"; exit 1; }

# a symlink: its target is replaced, the link stays a link
echo old > target.npy && ln -s target.npy link.npy
"$brisk" predict $ck --input x.npy --output link.npy >/dev/null && [ -L link.npy ] && cmp -s target.npy ref.npy &&
  ok symlink || bad symlink
# a dangling symlink: the file it names is created
ln -s made.npy dangling.npy
"$brisk" predict $ck --input x.npy --output dangling.npy >/dev/null && [ -L dangling.npy ] && cmp -s made.npy ref.npy &&
  ok dangling-symlink || bad dangling-symlink
# a replaced file keeps its permissions
echo old > mode.npy && chmod 600 mode.npy
"$brisk" predict $ck --input x.npy --output mode.npy >/dev/null && [ "$(stat -c %a mode.npy)" = 600 ] &&
  ok keeps-mode || bad keeps-mode
# a FIFO is written in place
mkfifo fifo
cat fifo > from_fifo & reader=$!
"$brisk" predict $ck --input x.npy --output fifo >/dev/null; rc=$?
wait $reader
[ $rc -eq 0 ] && [ -p fifo ] && cmp -s from_fifo ref.npy && ok fifo || bad "fifo (exit $rc)"
# /dev/null through a symlink here: written, the link and the device untouched
ln -s /dev/null devnull
"$brisk" predict $ck --input x.npy --output devnull >/dev/null && [ -L devnull ] && [ -c /dev/null ] &&
  ok dev-null || bad dev-null
# /dev/full through a symlink here: the write error is reported
ln -s /dev/full devfull
expect dev-full 'devfull: write failed: No space left on device' -- "$brisk" predict $ck --input x.npy --output devfull
[ -L devfull ] && [ -c /dev/full ] && ok dev-full-kept || bad dev-full-kept
# a character device node made here (root only): written in place, still a device after
if mknod nullnode c 1 3 2>/dev/null; then
  "$brisk" predict $ck --input x.npy --output nullnode >/dev/null && [ -c nullnode ] && ok device-node || bad device-node
  "$brisk" synth tabular nullnode --samples 8 >/dev/null && [ -c nullnode ] && ok synth-device-node || bad synth-device-node
else
  echo "skip device-node (mknod needs root)"
fi
# "-": the array on standard output, messages on stderr
"$brisk" predict $ck --input x.npy --output - > stdout.npy 2>/dev/null && cmp -s stdout.npy ref.npy &&
  ok stdout || bad stdout
# a directory is refused, not replaced
mkdir adir.npy
expect directory "adir.npy: exists and is a directory" -- "$brisk" predict $ck --input x.npy --output adir.npy
[ -d adir.npy ] && ok directory-kept || bad directory-kept
# no temporary files left behind
ls | grep -q '\.tmp\.' && bad "temporary files left: $(ls | grep '\.tmp\.')" || ok no-temporaries

# predict reads .npy, .npz and .csv in the shapes train takes, and writes by the output's extension
/usr/bin/python3 - <<'P' || exit 1
import numpy as np
x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
np.save("x5.npy", x); np.save("x51.npy", x[:, :, None]); np.savez("x5.npz", x=x); np.savez("one.npz", feats=x)
with open("x5.csv", "w") as f:
    f.write(",".join(f"c{i}" for i in range(64)) + "\n")
    for r in x: f.write(",".join(f"{v:.9g}" for v in r) + "\n")
P
"$brisk" predict $ck --input x5.npy --output p.npy >/dev/null &&
for inp in x51.npy x5.npz one.npz x5.csv; do
  "$brisk" predict $ck --input $inp --output "p_$inp.npy" >/dev/null && cmp -s p.npy "p_$inp.npy" && ok "predict-input-$inp" || bad "predict-input-$inp"
done
"$brisk" predict $ck --input x5.npy --output p.csv >/dev/null && /usr/bin/python3 -c '
import numpy as np
c = np.loadtxt("p.csv", delimiter=",", skiprows=1); assert open("p.csv").readline().strip() == "p0,p1,p2"
assert np.array_equal(c.astype(np.float32), np.load("p.npy"))' && ok predict-csv-output || bad predict-csv-output
expect predict-bad-extension 'p.txt: expected an output ending in .npy or .csv' -- "$brisk" predict $ck --input x5.npy --output p.txt
expect predict-no-bracket 'x5.txt: expected an .npy, .npz or .csv of samples \[N, 64\]$' -- "$brisk" predict $ck --input x5.txt --output p.npy

# an output in folders that do not exist yet: made, for every command that writes a file (brisk
# sample: sample.sh; brisk rollout: weather.sh); never an error naming a temporary file
made() { # made NAME FILE -- command...: the command succeeds and FILE is there
  local name=$1 file=$2; shift 3
  local out
  if out=$("$@" 2>&1) && [ -s "$file" ]; then ok "$name"; else bad "$name: $out"; fi
}
made folders-predict new/predict/p.npy -- "$brisk" predict $ck --input x.npy --output new/predict/p.npy
cmp -s new/predict/p.npy ref.npy && ok folders-predict-same || bad folders-predict-same
made folders-synth-tabular new/synth/t/t.npz -- "$brisk" synth tabular new/synth/t/t.npz --samples 16
made folders-synth-diffusion new/synth/d/d.npz -- "$brisk" synth diffusion new/synth/d/d.npz --samples 16
made folders-synth-series new/synth/s/s.csv -- "$brisk" synth series new/synth/s/s.csv --samples 64
# images and weather need libpng and libnetcdf: a build without them says so
out=$("$brisk" synth images new/synth/i/set --samples 2 2>&1)
case "$out" in *"built without"*) echo "skip folders-synth-images: $out" ;;
  *) [ -s new/synth/i/set/labels.csv ] && ok folders-synth-images || bad "folders-synth-images: $out" ;; esac
out=$("$brisk" synth weather new/synth/w/w.nc --samples 8 2>&1)
case "$out" in *"built without"*) echo "skip folders-synth-weather: $out" ;;
  *) [ -s new/synth/w/w.nc ] && ok folders-synth-weather || bad "folders-synth-weather: $out" ;; esac
made folders-export new/export/m.onnx -- "$brisk" export $ck --onnx new/export/m.onnx
made folders-report new/report/r.html -- "$brisk" report run --output new/report/r.html
made folders-profile new/profile/p.json -- "$brisk" profile good.json --steps 2 --warmup 0 --json-out new/profile/p.json
made folders-bench new/bench/b.html -- "$brisk" bench good.json --steps 20 --rounds 1 --report new/bench/b.html
made folders-train-out new/train/run/last.safetensors -- "$brisk" train good.json --quiet --out new/train/run
[ -z "$(find new -name '*.tmp*')" ] && ok folders-no-temporaries || bad "folders-no-temporaries: $(find new -name '*.tmp*')"
# a file where a folder should be: the error names the output and that folder
echo file > afile
expect folders-file-in-way 'afile/sub/p.npy: cannot create its folder afile/sub: afile exists and is not a folder' -- \
  "$brisk" predict $ck --input x.npy --output afile/sub/p.npy
expect folders-file-in-way-synth 'afile/t.npz: cannot create its folder afile: afile exists and is not a folder' -- \
  "$brisk" synth tabular afile/t.npz --samples 8
expect folders-images-in-file 'afile/img_000000.png: cannot create it: afile is not a folder|built without' -- \
  "$brisk" synth images afile --samples 2
out=$("$brisk" predict $ck --input x.npy --output afile/p.npy 2>&1)
case "$out" in *.tmp*) bad "folders-no-temporary-named: $out" ;; *) ok folders-no-temporary-named ;; esac

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
