#!/usr/bin/env python3
"""CDL text of a small reanalysis-like file, for ncgen to write (the NetCDF comes from
another tool than brisk). Layouts as archives have them:
  --layout cds      valid_time (int64 seconds since 1970), pressure_level, latitude, longitude,
                    number and expver (the 2024+ CDS layout)
  --layout classic  time (hours since --epoch), level, lat, lon
Fields: t2m(time, lat, lon) and z(time, level, lat, lon) at 850 and 500 hPa, smooth patterns
moving east; --invariants writes ERA5's invariants file instead: z (surface geopotential) and
lsm over (time of length 1, lat, lon). --lon FIRST:STEP:N (e.g. 350:1:24 wraps at 0),
--lat FIRST:STEP:N (a negative step runs north to south), --hole T:ROW:COL leaves t2m missing
there (repeatable)."""
import argparse
import math

p = argparse.ArgumentParser()
p.add_argument("name")
p.add_argument("--layout", default="cds", choices=["cds", "classic"])
p.add_argument("--times", type=int, default=48)
p.add_argument("--first-hour", type=int, default=0, help="hours after 2024-01-01T00 of the first time")
p.add_argument("--epoch", default="1900-01-01 00:00:00", help="classic: the units' epoch")
p.add_argument("--lat", default="55:-1:8")
p.add_argument("--lon", default="0:1:8")
p.add_argument("--hole", action="append", default=[])
p.add_argument("--expver5-from", type=int, default=-1, help="cds: times from this index are ERA5T (expver 0005)")
p.add_argument("--invariants", action="store_true")
a = p.parse_args()


def axis(spec):
    first, step, n = spec.split(":")
    return [float(first) + float(step) * i for i in range(int(n))]


lat, lon = axis(a.lat), axis(a.lon)
wrapped = [x % 360 for x in lon]
cds = a.layout == "cds"
T, LEV, LAT, LON = ("valid_time", "pressure_level", "latitude", "longitude") if cds else ("time", "level", "lat", "lon")
nt = 1 if a.invariants else a.times
# 2024-01-01T00 is 1704067200 s after 1970, 1086960 h after 1900-01-01 and 210384 h after 2000-01-01
epoch_h = {"1900-01-01 00:00:00": 1086960, "1900-01-01 00:00:00.0": 1086960, "2000-01-01": 210384,
           "2024-01-01": 0}[a.epoch]
hours = [a.first_hour + k for k in range(nt)]
times = [1704067200 + 3600 * h for h in hours] if cds else [epoch_h + h for h in hours]
holes = {tuple(int(v) for v in h.split(":")) for h in a.hole}


def pattern(k, r, c, shift=0.0):
    x, y = wrapped[c] / 360.0 * 24 + shift, (lat[r] - 30) / 30.0
    return math.sin(2 * math.pi * (x - 0.02 * k)) * math.cos(math.pi * y)


lines = [f"netcdf {a.name} {{", "dimensions:", f" {T} = {nt} ;"]
if not a.invariants:
    lines.append(f" {LEV} = 2 ;")
lines += [f" {LAT} = {len(lat)} ;", f" {LON} = {len(lon)} ;", "variables:"]
if cds:
    lines += [" int64 number ;", f" int64 {T}({T}) ;", f'  {T}:units = "seconds since 1970-01-01" ;',
              f'  {T}:calendar = "proleptic_gregorian" ;']
else:
    lines += [f" double {T}({T}) ;", f'  {T}:units = "hours since {a.epoch}" ;']
lines += [f" double {LAT}({LAT}) ;", f'  {LAT}:units = "degrees_north" ;', f" double {LON}({LON}) ;",
          f'  {LON}:units = "degrees_east" ;']
if not a.invariants:
    lines += [f" double {LEV}({LEV}) ;", f'  {LEV}:units = "hPa" ;']
if cds and not a.invariants:
    lines += [f" string expver({T}) ;"]
grid = [(r, c) for r in range(len(lat)) for c in range(len(lon))]
if a.invariants:
    lines += [f" float z({T}, {LAT}, {LON}) ;", '  z:units = "m**2 s**-2" ;',
              '  z:long_name = "Geopotential" ;', f" float lsm({T}, {LAT}, {LON}) ;", '  lsm:units = "(0 - 1)" ;']
else:
    lines += [f" float t2m({T}, {LAT}, {LON}) ;", '  t2m:units = "K" ;', "  t2m:_FillValue = -9999.f ;",
              f" float z({T}, {LEV}, {LAT}, {LON}) ;", '  z:units = "m**2 s**-2" ;']
if not a.invariants:
    lines.append(f'  :history = "written by ncgen from weather_cdl.py" ;')
lines += ["data:"]
if cds:
    lines.append(" number = 0 ;")
lines.append(f" {T} = {', '.join(str(t) for t in times)} ;")
lines.append(f" {LAT} = {', '.join(f'{v:g}' for v in lat)} ;")
lines.append(f" {LON} = {', '.join(f'{v - 360 if v >= 360 else v:g}' for v in lon)} ;")  # as archives wrap them
if a.invariants:
    lines.append(" z = " + ", ".join(f"{9.81 * (300 + 200 * math.sin(r + c)):.3f}" for r, c in grid) + " ;")
    lines.append(" lsm = " + ", ".join("1" if wrapped[c] < 4 or wrapped[c] > 300 else "0" for r, c in grid) + " ;")
else:
    lines.append(f" {LEV} = 850, 500 ;")
    if cds:
        ev = ['"0005"' if 0 <= a.expver5_from <= k else '"0001"' for k in range(nt)]
        lines.append(" expver = " + ", ".join(ev) + " ;")
    t2m = []
    for k in range(nt):
        for r, c in grid:
            t2m.append("_" if (k, r, c) in holes else f"{280 + 8 * pattern(k, r, c) + 0.1 * ((k * 7 + r * 3 + c) % 5):.4f}")
    lines.append(" t2m = " + ", ".join(t2m) + " ;")
    z = []
    for k in range(nt):
        for lev, base in ((0, 14000), (1, 55000)):
            for r, c in grid:
                z.append(f"{base + 600 * pattern(k, r, c, 0.1):.3f}")
    lines.append(" z = " + ", ".join(z) + " ;")
lines.append("}")
print("\n".join(lines))
