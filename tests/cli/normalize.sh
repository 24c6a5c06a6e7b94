#!/usr/bin/env bash
# data.normalize on plain tables (issue 37, item 12). NumPy writes a regression table whose 8
# features are N(0, 1) times 1000 plus 5000 and whose 2 targets are in units of 50 and 2 around
# 300 and -7 (raw.npz), the same with unit-scale values (unit.npz), and Python's csv module
# writes raw.npz as a CSV. Trained with data.normalize false, the scaled table learns little;
# with the default (auto) brisk standardises x and y on the training split and its validation
# RMSE on held-out rows, from `brisk predict` on raw .npy and .csv inputs, comes within reach of
# the unit-scale table's; the checkpoint keeps the statistics; classification labels stay labels;
# keys that do not apply are refused.
#   normalize.sh BRISK WORKDIR
set -u
. "$(dirname "$0")/expect.sh"
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "skipped: no NumPy"; exit 77; }
/usr/bin/python3 - <<'P' || { echo "FAIL data"; exit 1; }
import csv
import numpy as np
def make(n, seed):
    r = np.random.default_rng(seed)
    z = r.standard_normal((n, 8)).astype(np.float32)
    y = np.stack([np.sin(z[:, 0]) + 0.5 * z[:, 1] * z[:, 2] + 0.3 * z[:, 3],
                  np.tanh(z[:, 4] - z[:, 5]) + 0.2 * z[:, 6] ** 2], 1) + 0.05 * r.standard_normal((n, 2))
    return z, y.astype(np.float32)
scale, shift = np.float32([50, 2]), np.float32([300, -7])
z, y = make(4000, 1)
zt, yt = make(1000, 2)
np.savez("unit.npz", x=z, y=y)
np.savez("raw.npz", x=z * 1000 + 5000, y=y * scale + shift)
np.save("unit_x.npy", zt); np.save("test_x.npy", zt * 1000 + 5000)
np.save("unit_y.npy", yt); np.save("test_y.npy", yt * scale + shift)
raw = np.load("raw.npz")
with open("raw.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["f%d" % i for i in range(8)] + ["t0", "t1"])
    for a, b in zip(raw["x"], raw["y"]):
        w.writerow([repr(float(v)) for v in a] + [repr(float(v)) for v in b])
with open("test_x.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["f%d" % i for i in range(8)])
    for a in np.load("test_x.npy"):
        w.writerow([repr(float(v)) for v in a])
P
cat > c.json <<'J'
{"model": {"type": "mlp", "inputs": 8, "hidden": [64, 64], "outputs": 2, "task": "regress"},
 "data": {"train": "raw.npz", "validation_fraction": 0.2},
 "train": {"batch_size": 64, "epochs": 12, "seed": 0, "out_dir": "run"}}
J
train() { # OUT [options...]
  local out=$1; shift
  "$brisk" train c.json --out "$out" "$@" > "$out.log" 2>&1 || { cat "$out.log"; bad "train $out"; }
}
train off --set data.normalize=false
train auto
train unit --set data.train=unit.npz
train csv --set data.train=raw.csv --set 'data.fields.x=["f0","f1","f2","f3","f4","f5","f6","f7"]' \
  --set 'data.fields.y=["t0","t1"]'
grep -q 'x (inputs) is far from unit scale (column [0-9] has mean 50[0-9][0-9] and deviation' off.log &&
  grep -q 'left as it is (data.normalize false)' off.log && ok "false: the warning" || bad "false: $(cat off.log)"
grep -q 'x (inputs) standardised per column' auto.log && grep -q 'y (targets) standardised per column' auto.log &&
  ok "auto: x and y standardised" || bad "auto: $(grep data auto.log)"
grep -q 'x (inputs) near unit scale on the training split: left as it is' unit.log && ok "auto: a unit-scale table left as it is" ||
  bad "auto on unit.npz: $(grep data unit.log)"
for r in off auto unit csv; do
  x=test_x.npy; [ $r = unit ] && x=unit_x.npy
  "$brisk" predict $r/last.safetensors --input $x --output p_$r.npy >/dev/null 2>&1 || bad "predict $r"
done
"$brisk" predict auto/last.safetensors --input test_x.csv --output p_csvin.npy >/dev/null 2>&1 || bad "predict from a CSV"
/usr/bin/python3 - <<'P' > check.out 2>&1
import json, struct
import numpy as np
yt, yu = np.load("test_y.npy"), np.load("unit_y.npy")
def rmse(p, y):  # per target, in its deviations
    return np.sqrt(((p - y) ** 2).mean(0)) / y.std(0)
r = {k: rmse(np.load("p_%s.npy" % k), yu if k == "unit" else yt) for k in ("off", "auto", "unit", "csv", "csvin")}
for k, v in r.items():
    print(k, " ".join("%.4f" % a for a in v))
ok = True
def check(name, cond):
    global ok
    print(("ok   " if cond else "FAIL ") + name)
    ok = ok and bool(cond)
check("auto beats false by 1.5x on every target", (r["auto"] * 1.5 < r["off"]).all())
check("auto within 1.5x of the unit-scale table", (r["auto"] < 1.5 * r["unit"]).all())
check("predictions in the targets' units", (abs(np.load("p_auto.npy").mean(0) - yt.mean(0)) < 0.2 * yt.std(0)).all())
check("a CSV input predicts as the .npy", np.allclose(np.load("p_csvin.npy"), np.load("p_auto.npy"), rtol=1e-6, atol=1e-4))
check("training from the CSV as from the .npz", np.allclose(np.load("p_csv.npy"), np.load("p_auto.npy"), rtol=1e-5, atol=1e-3))
def meta(path):
    b = open(path, "rb").read()
    return json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
m = meta("auto/last.safetensors")
xn, yn = json.loads(m["normalization"]), json.loads(m["target_normalization"])
raw = np.load("raw.npz")
check("the checkpoint keeps the statistics",
      len(xn["mean"]) == 8 and len(yn["std"]) == 2 and abs(xn["mean"][0] - raw["x"][:, 0].mean()) < 0.05 * 1000 and
      abs(yn["std"][0] - raw["y"][:, 0].std()) < 0.1 * 50)
check("no statistics without standardisation", "normalization" not in meta("off/last.safetensors") and
      "target_normalization" not in meta("unit/last.safetensors"))
raise SystemExit(0 if ok else 1)
P
rc=$?
cat check.out
pass=$((pass + $(grep -c '^ok ' check.out)))
[ $rc -eq 0 ] || fail=$((fail + 1))
# inputs only, and a classifier's labels stay labels
"$brisk" train c.json --out inonly --set 'data.normalize={"inputs": true, "targets": false}' > inonly.log 2>&1 &&
  /usr/bin/python3 -c '
import json, struct, sys
b = open("inonly/last.safetensors", "rb").read(); m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
sys.exit(0 if "normalization" in m and "target_normalization" not in m else 1)' && ok "inputs only" || bad "inputs only: $(cat inonly.log)"
"$brisk" synth tabular tab.npz --samples 2048 >/dev/null
/usr/bin/python3 -c '
import numpy as np
z = np.load("tab.npz"); np.savez("tab_raw.npz", x=z["x"] * 1000 + 5000, y=z["y"])'
cat > cls.json <<'J'
{"model": {"type": "mlp", "inputs": 64, "hidden": [32], "outputs": 3}, "data": {"train": "tab_raw.npz"},
 "train": {"batch_size": 64, "epochs": 3, "out_dir": "cls"}}
J
"$brisk" train cls.json > cls.log 2>&1 && grep -q 'x (inputs) standardised' cls.log && ! grep -q 'y (targets)' cls.log &&
  grep -qE 'best val accuracy 0\.([6-9]|5[5-9])' cls.log && ok "classifier: x standardised, labels kept" ||
  bad "classifier: $(grep -E 'data|best' cls.log)"
# where it does not apply
"$brisk" synth series s.csv --samples 400 >/dev/null
cat > w.json <<'J'
{"model": {"type": "lstm", "inputs": 2, "seq_len": 8, "hidden": 4, "outputs": 3},
 "data": {"train": "s.csv", "normalize": true, "windows": {"features": ["ret_1", "ret_8"], "length": 8, "horizon": 1,
          "target": {"column": "close", "thresholds": [-0.001, 0.001]}}}, "train": {"out_dir": ""}}
J
expect windows-refused 'data.normalize standardises a table.s columns .*not data.windows \(data.windows.normalize\): remove it' -- \
  "$brisk" train w.json
expect bad-value 'data.normalize' -- "$brisk" train c.json --out bad --set data.normalize=sometimes
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
