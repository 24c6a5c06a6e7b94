#!/usr/bin/env python3
"""Writes a copy of a brisk checkpoint whose weights are moved by about one rounding unit.

  nudge_checkpoint.py SRC DST [--rel R] [--seed S]

Every float tensor of SRC except the optimizer's state (optim.*) and the buffers (batch
norm's running_*) is multiplied by 1 + R z, z drawn from N(0, 1) per element (R default 1e-7,
about one float32 rounding unit), and DST gets the checkpoint's checksum again, so that
`brisk train --resume DST` continues from it. A run resumed from SRC's step-0 checkpoint and
one resumed from DST measure the model's own spread: how far its losses move when nothing but
rounding does (compare_losses.py --baseline). Prints one line; exits 0, or 2 on bad input.
Uses numpy where it can, else only the standard library (slower).
"""
import argparse
import json
import random
import struct
import sys
import zlib

try:
    import numpy as np
except ImportError:  # the standard library's path
    np = None


def nudged(data, rel, rng):
    if np is not None:
        x = np.frombuffer(data, dtype="<f4").astype(np.float64)
        z = np.random.default_rng(rng.getrandbits(32)).standard_normal(x.size)
        return (x * (1.0 + rel * z)).astype("<f4").tobytes()
    n = len(data) // 4
    x = struct.unpack(f"<{n}f", data)
    return struct.pack(f"<{n}f", *(v * (1.0 + rel * rng.gauss(0.0, 1.0)) for v in x))


def checksum(header, body):
    """brisk's checkpoint CRC (src/run/checkpoint_verify.c): metadata then tensors, sorted."""
    meta, crc = header["__metadata__"], 0
    for k in sorted(meta):
        if k != "checksum":
            crc = zlib.crc32(k.encode() + b"\0" + str(meta[k]).encode() + b"\0", crc)
    dtypes = {"F32": 0, "I32": 1, "F16": 2, "BF16": 3, "U8": 4}
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        a, b = t["data_offsets"]
        hdr = bytes([dtypes[t["dtype"]], len(t["shape"])]) + b"".join(int(d).to_bytes(8, "little") for d in t["shape"])
        crc = zlib.crc32(name.encode() + b"\0" + hdr + body[a:b], crc)
    return "crc32:%08x" % crc


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--rel", type=float, default=1e-7)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        raw = open(args.src, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        old = header["__metadata__"]["checksum"]
        body = bytearray(raw[8 + n:])
        if checksum(header, body) != old:
            raise ValueError("its checksum does not match its contents")
    except (OSError, ValueError, KeyError, struct.error) as e:
        print(f"FAIL {args.src}: not a brisk checkpoint ({e})")
        return 2
    rng, count = random.Random(args.seed), 0
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        if t["dtype"] != "F32" or name.startswith("optim.") or ".running_" in name:
            continue
        a, b = t["data_offsets"]
        body[a:b] = nudged(bytes(body[a:b]), args.rel, rng)
        count += 1
    text = raw[8:8 + n].decode()
    new = checksum(header, body)
    with open(args.dst, "wb") as f:  # same length: the checksum text keeps its width
        f.write(raw[:8] + text.replace(old, new).encode() + bytes(body))
    print(f"PASS {count} tensors of {args.src} moved by {args.rel:g} x N(0, 1): {args.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
