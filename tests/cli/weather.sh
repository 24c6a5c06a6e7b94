#!/usr/bin/env bash
# NetCDF weather data end to end (seconds): brisk synth weather, a tiny meshgnn trained on it
# (grid from the file, validation loss below persistence's), brisk rollout (table, JSON lines
# and a NetCDF forecast with the input's coordinates and attributes), an exact resume, and
# bad configs and files as one clear error naming the file and the variable or key.
#   weather.sh BRISK_BINARY WORKDIR
set -eu
brisk=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$brisk" synth --help | grep -q "weather"
"$brisk" synth weather w.nc --samples 160 --seed 4 | grep -q "wrote w.nc: 160 hourly steps"
cat > g.json <<'JSON'
{
  "model": {"type": "meshgnn", "inputs": 20, "outputs": 8, "mesh": [8, 8], "latent": 16, "layers": 1},
  "data":  {"train": "w.nc", "validation_fraction": 0.2,
            "netcdf": {"variables": ["t2m", "msl", "t", "z"], "static": ["orography", "lsm"]}},
  "optim": {"lr": 3e-3},
  "train": {"batch_size": 8, "epochs": 2, "seed": 1},
  "speed": {"device": "cpu", "prefetch": 2}
}
JSON
"$brisk" train g.json --out run >log.txt 2>&1 || { cat log.txt; exit 1; }
grep -q "w.nc: 160 times of a 16 x 16 grid, 8 channels, 2 statics" log.txt
pers=$(sed -n 's/.*persistence (a zero change) scores \([0-9.]*\).*/\1/p' log.txt)
best=$(sed -n 's/.*best val loss *\([0-9.]*\).*/\1/p' log.txt)
awk -v b="$best" -v p="$pers" 'BEGIN { exit !(b < p) }' || { echo "validation loss $best not below persistence $pers"; exit 1; }
# resume: the same losses as the uninterrupted run
losses() { grep -o '"train_loss": [0-9.e-]*' "$1/metrics.jsonl"; }
"$brisk" train g.json --out part --quiet --epochs 1
"$brisk" train g.json --out part --quiet --resume part/last.safetensors
[ "$(losses run)" = "$(losses part)" ] || { echo "resumed losses differ"; losses run; losses part; exit 1; }
"$brisk" rollout --help | grep -q "autoregressively"
"$brisk" rollout run/best.safetensors --data w.nc --steps 3 --output fc.nc --jsonl fc.jsonl >table.txt
grep -q "RMSE of the forecast" table.txt && grep -q "RMSE of persistence" table.txt
[ "$(wc -l < fc.jsonl)" = 24 ] && grep -q '"lead": 3, "hours": 3, "init_time": "2021-01-06T09:00", "valid_time": "2021-01-06T12:00", "variable": "z250"' fc.jsonl
"$brisk" rollout run/best.safetensors --data w.nc --steps 2 --jsonl - --quiet | grep -c '"rmse"' | grep -qx 16
# outputs in folders that do not exist yet: made
"$brisk" rollout run/best.safetensors --data w.nc --steps 2 --output new/nc/fc.nc --jsonl new/scores/fc.jsonl --quiet
[ -s new/nc/fc.nc ] && [ -s new/scores/fc.jsonl ]
if command -v ncdump >/dev/null; then
  ncdump -h fc.nc | grep -q 'float t(time, level, lat, lon)'
  ncdump -h fc.nc | grep -q 'time:units = "hours since 2021-01-01 00:00:00"'
  ncdump -h fc.nc | grep -q 't2m:units = "K"'
  ncdump -v lat fc.nc | grep -q 'lat = 55, 54,'
fi
expect() { # expect 'message part' brisk args...
  local want=$1; shift
  set +e; out=$("$brisk" "$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$want" <<<"$out" || { echo "expected an error with '$want', got $rc: $out"; exit 1; }
}
echo "not netcdf" > bad.nc
expect "bad.nc: not a NetCDF file" train g.json --set data.train=bad.nc
expect "w.nc: no variable 'q' (present: time, level, lat, lon, t2m, msl, t, z, orography, lsm)" train g.json --set 'data.netcdf.variables=["t2m","q"]'
expect "w.nc: variables 'lat' and 'lon': the grid (16 x 16) is smaller than the mesh of model.mesh (32 x 32)" train g.json --set 'model.mesh=[32,32]'
expect "train: --set model.grid=[16,16]: model.grid: data.netcdf takes the grid from the files' latitude and longitude; remove model.grid" train g.json --set 'model.grid=[16,16]'
expect "model.inputs 21 and model.outputs 8, but" train g.json --set model.inputs=21
expect "data.netcdf.history" train g.json --set data.netcdf.history=0
expect "data.netcdf.missing" train g.json --set data.netcdf.missing=ignore
expect "data.netcdf.variables" train g.json --set 'data.netcdf.variables=[]'
expect "data.validation" train g.json --set data.validation=w.nc
expect "no NetCDF files match" train g.json --set 'data.train=nothing/*.nc'
expect "a rollout of 500 steps" rollout run/best.safetensors --data w.nc --steps 500
expect "--data is required" rollout run/best.safetensors --steps 2
# two files of the same hours are not one time axis
"$brisk" synth weather w2.nc --samples 40 >/dev/null
expect "variable 'time' starts at 2021-01-01T00:00, not after the last time 2021-01-07T15:00" train g.json --set data.train= \
  --set 'data.netcdf.files=["w.nc","w2.nc"]'
echo ok
