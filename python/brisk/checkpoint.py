"""brisk.load: a checkpoint's tensors as NumPy arrays under their PyTorch names.

A brisk checkpoint is a safetensors file (an 8-byte little-endian header length, a JSON
header of name -> dtype, shape, byte offsets, then the data); this reads that format, nothing
of brisk's. Model tensors are named as PyTorch names the same modules (net.0.weight,
lstm.weight_ih_l0, ...), so `model.load_state_dict({k: torch.from_numpy(v) ...})` takes them
(README.md, "Python"); the optimizer's moments ("optim.*") come only with optimizer=True.
"""
import json
import os
import struct

import numpy as np

from ._lib import BriskError

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64,
           "U8": np.uint8, "I8": np.int8, "I16": np.int16, "BOOL": np.bool_}


def _bad(path, why):
    return BriskError(3, "%s: %s; expected a safetensors checkpoint written by brisk" % (path, why))


def _read(path):
    """(header dict, data bytes) of a safetensors file, refused clearly when it is not one."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise BriskError(2, "%s: %s" % (path, e.strerror)) from None
    if len(raw) < 8:
        raise _bad(path, "%d bytes, shorter than the 8-byte header length" % len(raw))
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise _bad(path, "a header of %d bytes in a file of %d" % (n, len(raw)))
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise _bad(path, "its header is not JSON (%s)" % e) from None
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    return header, memoryview(raw)[8 + n:]


def metadata(path):
    """The checkpoint's metadata: config, step, epoch, and for windowed data "normalization"
    ({"mean": [...], "std": [...]}, applied to raw features before the model), JSON values
    parsed."""
    header, _ = _read(path)
    out = {}
    for k, v in header.get("__metadata__", {}).items():
        try:
            out[k] = json.loads(v)
        except (TypeError, ValueError):
            out[k] = v
    return out


def load(path, optimizer=False):
    """dict name -> numpy array of the checkpoint's parameters and buffers (BatchNorm
    statistics); with optimizer=True also the AdamW moments (optim.exp_avg.<name>, ...)."""
    path = os.fspath(path)
    header, data = _read(path)
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or (name.startswith("optim.") and not optimizer):
            continue
        if not isinstance(t, dict) or "data_offsets" not in t:
            raise _bad(path, "tensor %s has no data_offsets" % name)
        lo, hi = t["data_offsets"]
        if not 0 <= lo <= hi <= len(data):
            raise _bad(path, "tensor %s lies outside the file" % name)
        if t.get("dtype") == "BF16":
            bits = np.frombuffer(data[lo:hi], dtype=np.uint16).astype(np.uint32) << 16
            out[name] = bits.view(np.float32).reshape(t["shape"])
            continue
        dt = _DTYPES.get(t.get("dtype"))
        if dt is None:
            raise _bad(path, "tensor %s has dtype %r" % (name, t.get("dtype")))
        try:
            out[name] = np.frombuffer(data[lo:hi], dtype=dt).reshape(t["shape"]).copy()
        except ValueError:
            raise _bad(path, "tensor %s: %d bytes for shape %s" % (name, hi - lo, t.get("shape"))) from None
    return out
