#!/usr/bin/env bash
# NetCDF as the archive delivers it, end to end through brisk train and rollout: files written
# by ncgen (netcdf-bin, another tool than brisk) from weather_cdl.py's CDL. The 2024+ CDS layout
# (valid_time, pressure_level, latitude, longitude) and files with other epochs as one time
# axis; the error that names data.netcdf.coordinates; statics from ERA5's invariants file;
# longitudes across 0 degrees and the sphere's domain from the file; rollout's scores (holes,
# several starts, latitude weights, ACC) against an independent computation, the forecast file.
#   weather_archive.sh BRISK_BINARY WORKDIR        (exit 77 without ncgen or python3)
set -eu
brisk=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v ncgen >/dev/null && command -v python3 >/dev/null || { echo "skipped: ncgen or python3 not found"; exit 77; }
rm -rf "$work" && mkdir -p "$work" && cd "$work"
cdl() { # cdl NAME.nc weather_cdl.py-options...: writes NAME.nc through ncgen
  local out=$1; shift
  python3 "$here/weather_cdl.py" "${out%.nc}" "$@" > "${out%.nc}.cdl" && ncgen -k nc4 -o "$out" "${out%.nc}.cdl"
}
expect() { # expect 'message part' brisk args...
  local want=$1; shift
  set +e; out=$("$brisk" "$@" 2>&1); rc=$?; set -e
  [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$want" <<<"$out" || { echo "expected an error with '$want', got $rc: $out"; exit 1; }
}
config() { # config FILE 'netcdf-members' [model-members]: a tiny meshgnn over an 8 x 8 grid
  cat > "$1" <<JSON
{
  "model": {"type": "meshgnn", "inputs": ${4:-6}, "outputs": 3, "mesh": [4, 4], "latent": 8, "layers": 1$3},
  "data":  {"validation_fraction": 0.25, "netcdf": {"variables": ["t2m", "z"], "history": 2, $2}},
  "train": {"batch_size": 4, "epochs": 1, "seed": 1},
  "speed": {"device": "cpu"}
}
JSON
}

# --- item 2: the 2024+ CDS layout, and two epochs in one time axis
cdl cds.nc --times 40
config cds.json '"files": ["cds.nc"], "time_features": false' ""
"$brisk" train cds.json --out run_cds --quiet
[ -s run_cds/last.safetensors ]
cdl old.nc --layout classic --times 24 --epoch "1900-01-01 00:00:00"
cdl new.nc --layout classic --times 24 --first-hour 24 --epoch "2000-01-01"
cdl same.nc --layout classic --times 24 --first-hour 48 --epoch "1900-01-01 00:00:00.0"
config mixed.json '"files": ["new.nc", "same.nc", "old.nc"], "time_features": true' "" 8
"$brisk" train mixed.json --out run_mixed >mixed.log 2>&1 || { cat mixed.log; exit 1; }
grep -q "72 times of a 8 x 8 grid, 3 channels, 0 statics, 2024-01-01T00:00 to 2024-01-03T23:00;" mixed.log
cdl date.nc --times 8
sed 's/valid_time/date/g' date.cdl > date2.cdl && ncgen -k nc4 -o date2.nc date2.cdl
config date.json '"files": ["date2.nc"], "time_features": false' ""
expect "date2.nc: no time coordinate (looked for 'time', 'valid_time'; present: number, date," train date.json
expect "set data.netcdf.coordinates.time to its name" train date.json
"$brisk" train date.json --set data.netcdf.coordinates.time=date --set data.validation_fraction=0 --out run_date --quiet
expect "data.netcdf.coordinates.lat" train date.json --set data.netcdf.coordinates.lat=7
# --- item 3: statics from ERA5's invariants file (larger than the region), z both a static
# (the surface geopotential) and a variable (on pressure levels)
cdl inv.nc --invariants --lat 60:-1:20 --lon=-20:1:40
config inv.json '"files": ["cds.nc"], "static": ["z", "lsm"], "static_file": "inv.nc", "time_features": false' "" 8
"$brisk" train inv.json --out run_inv >inv.log 2>&1 || { cat inv.log; exit 1; }
grep -qF "'z' is two fields: the static is inv.nc's z(valid_time, latitude, longitude), the variable the data files' z on levels" inv.log
expect "cds.nc: static 'z' is a level field, z(valid_time, pressure_level, latitude, longitude)" train inv.json --set data.netcdf.static_file=
expect "give that file as data.netcdf.static_file" train inv.json --set data.netcdf.static_file=
expect "names a file of static fields, but data.netcdf.static lists none" train inv.json --set 'data.netcdf.static=[]'
"$brisk" rollout run_inv/last.safetensors --data cds.nc --steps 2 --quiet >/dev/null

# --- item 4: longitudes across 0 degrees; the sphere's domain from the file (descending
# latitudes), a given one checked, model.grid refused
cdl wrap.nc --times 40 --lat 55:-1:8 --lon 356:1:8
sphere=', "metric": "sphere"'
config wrap.json '"files": ["wrap.nc"], "time_features": false' "$sphere"
"$brisk" train wrap.json --out run_wrap >wrap.log 2>&1 || { cat wrap.log; exit 1; }
grep -q "40 times of a 8 x 8 grid" wrap.log
"$brisk" train wrap.json --out run_wrap2 --quiet --set 'model.lat=[48,55]' --set 'model.lon=[356,363]'
"$brisk" train wrap.json --out run_wrap3 --quiet --set 'model.lat=[48,56]' --set 'model.lon=[-4,4]'
expect "model.lat [40, 55], but wrap.nc's 'latitude' runs from 48 to 55 (every 1 degrees): the mesh's domain comes from the file; remove model.lat or give [48, 55]" \
  train wrap.json --set 'model.lat=[40,55]'
expect "model.lon [0, 8], but wrap.nc's 'longitude' runs from 356 to 363 (every 1 degrees, unwrapped past 360)" \
  train wrap.json --set 'model.lon=[0,8]'
expect "model.grid: data.netcdf takes the grid from the files' latitude and longitude; remove model.grid" \
  train wrap.json --set 'model.grid=[8,8]'
expect "the grid (8 x 8) is smaller than the mesh of model.mesh (16 x 16)" train wrap.json --set 'model.mesh=[16,16]'
"$brisk" rollout run_wrap/last.safetensors --data wrap.nc --steps 2 --output wrap_fc.nc --quiet >/dev/null
ncdump -v longitude wrap_fc.nc | grep -q "longitude = 356, 357, 358, 359, 0, 1, 2, 3 ;"
# --- items 5 and 6: scoring. A hole in the truth (mask mode) is left out of both RMSEs and
# counted; every score equals an independent computation (weather_scores.py) from the CDL
# and the forecast file; the forecast file is CF-complete; refuse mode refuses only the starts
# that need the hole; another grid is refused; several starts give mean and spread.
cdl holes.nc --times 40 --hole 33:2:3 --expver5-from 35
config mask.json '"files": ["cds.nc"], "missing": "mask", "time_features": false' ""
"$brisk" train mask.json --out run_mask --quiet >/dev/null
"$brisk" rollout run_mask/last.safetensors --data holes.nc --steps 3 --output hfc.nc --jsonl h.jsonl >h.txt 2>&1 || { cat h.txt; exit 1; }
python3 "$here/weather_scores.py" holes.cdl hfc.nc h.jsonl 31 30
grep -q '"lead": 2, "hours": 2, "init_time": "2024-01-02T07:00", "valid_time": "2024-01-02T09:00", "variable": "t2m", "starts": 1,.*"missing": 1}' h.jsonl
grep -q "1 missing truth values left out of every score" h.txt
grep -q "rollout   3 steps from 2024-01-02T07:00 (time index 31) of holes.nc -> hfc.nc" h.txt
grep -q "data      5 of 40 times are ERA5T (expver 0005: preliminary data ECMWF may still revise), the first 2024-01-02T11:00" h.txt
grep -q "ACC of the forecast" h.txt
ncdump -h hfc.nc > hfc.txt
grep -q "double forecast_reference_time ;" hfc.txt && grep -q "double forecast_period(valid_time) ;" hfc.txt
grep -q 'forecast_period:standard_name = "forecast_period" ;' hfc.txt
grep -q 't2m:coordinates = "forecast_reference_time forecast_period" ;' hfc.txt
grep -q ':history = "written by ncgen from weather_cdl.py\\n20[0-9-]*T[0-9:]*Z: brisk rollout run_mask/last.safetensors --data holes.nc' hfc.txt
grep -q ':source_files = "holes.nc" ;' hfc.txt && grep -q ':checkpoint = "run_mask/last.safetensors" ;' hfc.txt
ncdump -v forecast_reference_time,forecast_period hfc.nc | grep -q "forecast_reference_time = 1704178800 ;"
"$brisk" rollout run_inv/last.safetensors --data cds.nc --steps 1 --output ifc.nc --quiet >/dev/null
ncdump -h ifc.nc | grep -q ':static_file = "inv.nc" ;'
# refuse mode: only the starts that need time 33 (as input or truth) are refused
"$brisk" rollout run_cds/last.safetensors --data holes.nc --steps 2 --starts 28:34 --jsonl r.jsonl >r.txt 2>&1 || { cat r.txt; exit 1; }
[ "$(grep -c 'refused: holes.nc: variable .t2m. is missing' r.txt)" = 4 ]
grep -q "start 2024-01-02T07:00 (time index 31) refused: holes.nc: variable 't2m' is missing (fill value) at time index 33" r.txt
grep -q '"starts": 3,' r.jsonl && grep -q "from each of 3 start times, 2024-01-02T04:00 to 2024-01-02T10:00 every 1 time steps" r.txt
"$brisk" rollout run_cds/last.safetensors --data holes.nc --steps 2 --start 29 --quiet >/dev/null
expect "holes.nc: variable 't2m' is missing (fill value) at time index 33" rollout run_cds/last.safetensors --data holes.nc --steps 2 --start 31
# several starts: mean and spread; --quiet keeps the tables
"$brisk" rollout run_cds/last.safetensors --data cds.nc --steps 2 --starts ::2 --jsonl m.jsonl --quiet >m.txt
grep -q "RMSE of the forecast (the fields' units): mean +-spread over 4 start times" m.txt
grep -q '"variable": "z500", "starts": 4, "rmse": [0-9.e-]*, "rmse_spread": [0-9.e-]*' m.jsonl
! grep -q "rollout   " m.txt
expect "wrap.nc: a 8 x 8 grid ('latitude' 48 to 55, 'longitude' 356 to 363), but run_cds/last.safetensors was trained on 8 x 8 (latitude 48 to 55, longitude 0 to 7)" \
  rollout run_cds/last.safetensors --data wrap.nc --steps 2
expect "hfc2.nc: a forecast file holds one start, and 4 are asked for" rollout run_cds/last.safetensors --data cds.nc --steps 2 --starts ::2 --output hfc2.nc
for bad in 5 a:b 1:2:0 1:2:3:4 ::; do
  set +e; "$brisk" rollout run_cds/last.safetensors --data cds.nc --steps 2 --starts "$bad" >/dev/null 2>bad.txt; rc=$?; set -e
  [ $rc = 2 ] && grep -q -- "--starts" bad.txt || { echo "--starts $bad: exit $rc"; cat bad.txt; exit 1; }
done
set +e; "$brisk" rollout run_cds/last.safetensors --data cds.nc --steps 2 --start 31 --starts ::2 2>bad.txt; rc=$?; set -e
[ $rc = 2 ] && grep -q "give one start time or a range" bad.txt
"$brisk" rollout --help | grep -q -- "--starts FIRST:LAST\[:EVERY\]"
echo ok
