#!/usr/bin/env python3
"""An independent computation of brisk rollout's scores for one start: the truth from the
CDL weather_cdl.py wrote (what ncgen made the data file from), the forecast from ncdump of
brisk's forecast file, the climatology from the training times (hour of day). Compares
each (lead, variable) with brisk's JSON lines: RMSE, latitude-weighted RMSE, bias, ACC,
persistence, and the count of missing truth values left out.
  weather_scores.py DATA.cdl FORECAST.nc SCORES.jsonl INIT_INDEX SPLIT_TIME"""
import json
import math
import re
import struct
import subprocess
import sys

cdl_path, fc_path, jsonl_path = sys.argv[1:4]
init, split = int(sys.argv[4]), int(sys.argv[5])


def arrays(text):
    """name -> list of floats (None for '_') of every 'name = v, v, ... ;' block."""
    out = {}
    for m in re.finditer(r"^\s*(\w+) =\s*([^;]*?);", text, re.M | re.S):
        vals = [v.strip() for v in m.group(2).replace("\n", " ").split(",")]
        try:
            out[m.group(1)] = [None if v == "_" else float(v.strip('"')) for v in vals if v]
        except ValueError:
            pass
    return out


def f32(v):
    return None if v is None else struct.unpack("f", struct.pack("f", v))[0]


cdl = open(cdl_path).read()
data = arrays(cdl.split("data:")[1])
data["t2m"], data["z"] = [f32(v) for v in data["t2m"]], [f32(v) for v in data["z"]]  # as the file stores them
lat = data.get("latitude") or data["lat"]
lon = data.get("longitude") or data["lon"]
times = data.get("valid_time") or data["time"]
hours = [(t - times[0]) / (3600 if "valid_time" in data else 1) for t in times]
G, T = len(lat) * len(lon), len(times)
dump = subprocess.run(["ncdump", "-p", "9,17", "-v", "t2m,z", fc_path], check=True, capture_output=True, text=True).stdout
fc = arrays(dump.split("data:")[1])
steps = len(fc["t2m"]) // G
# brisk's rows ascend in latitude; the file's descend here: compare in the file's order
w = [math.cos(math.radians(lat[r])) for r in range(len(lat)) for c in range(len(lon))]
mw = sum(math.cos(math.radians(x)) for x in lat) / len(lat)
w = [x / mw for x in w]


def field(arr, k, ch, nlev):
    """channel ch (0 for t2m, level index for z) of time k, [G]"""
    return arr[(k * nlev + ch) * G:(k * nlev + ch + 1) * G]


chans = [("t2m", 0, 1), ("z850", 0, 2), ("z500", 1, 2)]
src = {"t2m": "t2m", "z850": "z", "z500": "z"}
# the first hour of the file is 00 UTC: hour of day = hours % 24
clim = {}
for name, ch, nlev in chans:
    for h in range(24):
        idx = [k for k in range(split) if int(round(hours[k])) % 24 == h]
        allk = list(range(split))
        ks = idx or allk
        s = [0.0] * G
        n = [0] * G
        for k in ks:
            for i, v in enumerate(field(data[src[name]], k, ch, nlev)):
                if v is not None:
                    s[i] += v
                    n[i] += 1
        clim[name, h] = [s[i] / n[i] for i in range(G)]
want = {}
for name, ch, nlev in chans:
    p = field(data[src[name]], init, ch, nlev)
    for k in range(steps):
        t = init + k + 1
        o, f = field(data[src[name]], t, ch, nlev), field(fc[src[name]], k, ch, nlev)
        cl = clim[name, int(round(hours[t])) % 24]
        ok = [i for i in range(G) if o[i] is not None]
        se = sum((f[i] - o[i]) ** 2 for i in ok)
        ws = sum(w[i] for i in ok)
        fa = {i: f[i] - cl[i] for i in ok}
        oa = {i: o[i] - cl[i] for i in ok}
        want[k + 1, name] = {
            "rmse": math.sqrt(se / len(ok)),
            "rmse_weighted": math.sqrt(sum(w[i] * (f[i] - o[i]) ** 2 for i in ok) / ws),
            "bias": sum(w[i] * (f[i] - o[i]) for i in ok) / ws,
            "acc": sum(w[i] * fa[i] * oa[i] for i in ok) / math.sqrt(sum(w[i] * fa[i] ** 2 for i in ok) * sum(w[i] * oa[i] ** 2 for i in ok)),
            "persistence_rmse": math.sqrt(sum((p[i] - o[i]) ** 2 for i in ok) / len(ok)),
            "missing": G - len(ok),
        }
bad = 0
seen = 0
for line in open(jsonl_path):
    got = json.loads(line)
    ref = want[got["lead"], got["variable"]]
    seen += 1
    for key, v in ref.items():
        tol = 0 if key == "missing" else 2e-5 * max(1.0, abs(v)) if key != "acc" else 2e-5
        if abs(got[key] - v) > tol:
            print(f"lead {got['lead']} {got['variable']} {key}: brisk {got[key]!r}, independent {v!r}")
            bad += 1
if seen != len(want):
    print(f"{seen} JSON lines for {len(want)} (lead, variable) pairs")
    bad += 1
print("scores agree" if not bad else f"{bad} differ")
sys.exit(1 if bad else 0)
