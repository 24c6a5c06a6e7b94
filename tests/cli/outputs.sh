#!/usr/bin/env bash
# Where an output goes: a regular file is replaced atomically, through a symlink its target (the
# link stays), a character device or FIFO is written in place and never replaced, "-" is
# standard output, a directory is refused. Devices are reached only through paths inside
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

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
