"""Checks a headless-Chromium screenshot of a brisk HTML report: every chart rendered.

  check_report_png.py REPORT.html SCREENSHOT.png [--min N] [--blank ID ...]

The report places each chart in a fixed-size box and names it in the HTML:
  <div class="chart" ... data-box="x,y,w,h"> <svg ... id="ID" data-colour="#rrggbb">
The check decodes the PNG (zlib and the PNG row filters by hand, with NumPy; no imaging
library) and, inside each box, counts the pixels close to the chart's colour: at least N
(default 150) must be there, and the box must hold the chart's white background (the page
around it is grey), so a box that is off the page or drawn elsewhere fails. --blank ID
expects the chart ID to show no series at all (fewer than 5 such pixels), e.g. the loss of
a run whose every loss was NaN.
"""
import argparse
import re
import struct
import sys
import zlib

import numpy as np


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG file")
    pos, idat, head = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = head
    channels = {2: 3, 6: 4, 0: 1, 4: 2}.get(ctype)
    if depth != 8 or channels is None or interlace:
        raise SystemExit(f"{path}: PNG of depth {depth}, colour type {ctype}, interlace {interlace}: not handled")
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(h, 1 + w * channels)
    out = np.zeros((h, w * channels), np.uint8)
    prev = np.zeros(w * channels, np.int32)
    bpp = channels
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) & 255
        elif f == 2:  # Up
            cur = (line + prev) & 255
        else:  # Average, Paeth: sequential along the row
            cur = line.copy()
            lst, pv = cur.tolist(), prev.tolist()
            for i in range(len(lst)):
                a = lst[i - bpp] if i >= bpp else 0
                b = pv[i]
                if f == 3:
                    lst[i] = (lst[i] + ((a + b) >> 1)) & 255
                else:
                    c = pv[i - bpp] if i >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    lst[i] = (lst[i] + pred) & 255
            cur = np.array(lst, np.int32)
        out[y] = cur
        prev = cur
    img = out.reshape(h, w, channels)
    if channels < 3:
        img = np.repeat(img[:, :, :1], 3, axis=2)
    return img[:, :, :3]


def charts(html):
    """[(id, colour, (x, y, w, h))] in the order of the page."""
    found = []
    for m in re.finditer(r'data-box="(\d+),(\d+),(\d+),(\d+)"[^>]*>\s*<svg[^>]*?id="([^"]*)" data-colour="#([0-9a-fA-F]{6})"',
                         html):
        box = tuple(int(v) for v in m.group(1, 2, 3, 4))
        colour = tuple(int(m.group(6)[i:i + 2], 16) for i in (0, 2, 4))
        found.append((m.group(5), colour, box))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("html")
    ap.add_argument("png")
    ap.add_argument("--min", type=int, default=150)
    ap.add_argument("--blank", action="append", default=[])
    a = ap.parse_args()
    html = open(a.html, encoding="utf-8").read()
    found = charts(html)
    if not found:
        print(f"FAIL {a.html}: no chart boxes (data-box) in the page")
        return 1
    img = read_png(a.png)
    H, W, _ = img.shape
    failed = 0
    for cid, colour, (x, y, w, h) in found:
        if x + w > W or y + h > H:
            print(f"FAIL {cid}: box {x},{y} {w}x{h} outside the {W}x{H} screenshot")
            failed += 1
            continue
        region = img[y:y + h, x:x + w].astype(np.int32)
        near = (np.abs(region - np.array(colour)).max(axis=2) <= 40).sum()
        white = (region.min(axis=2) >= 250).mean()
        blank = cid in a.blank
        ok = white >= 0.3 and (near < 5 if blank else near >= a.min)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {cid}: {near} pixels of #{bytes(colour).hex()} in {w}x{h} at {x},{y}, "
              f"{100 * white:.0f}% background{' (expected blank)' if blank else ''}")
    missing = set(a.blank) - {c[0] for c in found}
    for cid in missing:
        print(f"FAIL {cid}: no such chart")
    failed += len(missing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
