"""brisk.load: a checkpoint's tensors under their PyTorch names, as torch tensors (NumPy
arrays without torch), ready for `module.load_state_dict(brisk.load(path), strict=True)`.

A brisk checkpoint is a safetensors file (an 8-byte little-endian header length, a JSON
header of name -> dtype, shape, byte offsets, then the data); this reads that format, nothing
of brisk's. Model tensors are named as PyTorch names the same modules (net.0.weight,
lstm.weight_ih_l0, ...), so `model.load_state_dict({k: torch.from_numpy(v) ...})` takes them
(README.md, "Python"); the optimizer's moments ("optim.*") come only with optimizer=True.
What a torch state_dict holds and brisk does not keep is added: each BatchNorm's
num_batches_tracked (an ONNX export drops it: it is no tensor the graph reads).
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


def _checkpoint_in(path):
    """A run directory's checkpoint: last.safetensors (the newest, as `brisk predict DIR`
    would want), else its highest step-N; a file is itself."""
    if not os.path.isdir(path):
        return path
    last = os.path.join(path, "last.safetensors")
    if os.path.exists(last):
        return last
    steps = sorted(f for f in os.listdir(path) if f.startswith("step-") and f.endswith(".safetensors"))
    if not steps:
        raise BriskError(2, "%s: a directory without last.safetensors or step-N.safetensors; expected a brisk run "
                         "directory or a checkpoint file" % path)
    return os.path.join(path, steps[-1])


def _batches_seen(header):
    """The training batches the model's BatchNorm layers saw: steps times micro-batches a step
    (train.accumulate), each a forward in training mode, as torch counts num_batches_tracked."""
    meta = header.get("__metadata__", {})
    try:
        step = int(meta.get("step", 0))
        cfg = json.loads(meta.get("config", "{}"))
        acc = int((cfg.get("train") or {}).get("accumulate", 1) or 1) if isinstance(cfg, dict) else 1
    except (TypeError, ValueError):
        return 0
    return max(0, step) * max(1, acc)


def load(path, optimizer=False, numpy=False):
    """dict name -> tensor of a checkpoint's parameters and buffers (BatchNorm statistics), as
    a torch state_dict names them: torch tensors when torch is importable, else (or with
    numpy=True) NumPy arrays. path: a checkpoint (.safetensors) or a run directory (its
    last.safetensors, else its newest step-N). Each `<prefix>.running_mean` brings
    `<prefix>.num_batches_tracked` (int64 scalar: the training batches seen), which torch's
    BatchNorm has and the checkpoint does not, so `load_state_dict(..., strict=True)` takes it.
    With optimizer=True also the AdamW moments (optim.exp_avg.<name>, ...)."""
    path = _checkpoint_in(os.fspath(path))
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
    seen = _batches_seen(header)
    for name in list(out):
        if name.endswith(".running_mean") and not name.startswith("optim."):
            tracked = name[:-len("running_mean")] + "num_batches_tracked"
            out.setdefault(tracked, np.array(seen, dtype=np.int64))
    if numpy:
        return out
    try:
        import torch
    except ImportError:
        return out
    return {k: torch.from_numpy(v) for k, v in out.items()}
