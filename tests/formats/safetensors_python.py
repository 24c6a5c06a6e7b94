"""The Python half of the safetensors interop test (safetensors_python.sh).

    check DIR   reads the files brisk wrote (DIR/brisk*.safetensors) with the
                reference `safetensors` package and compares every value;
    write DIR   writes DIR/py*.safetensors for brisk to read.

Values follow the formulas in safetensors_python_tool.c, exact in their dtype.
numpy has no bfloat16, so BF16 goes through the package's raw deserialize /
serialize_file with the bits held as uint16."""
import sys

import numpy as np
import safetensors
from safetensors.numpy import load_file, save_file

META = {"format": "pt", "brisk.config": '{"lr": 0.001, "name": "caf\u00e9"}'}


def expected():
    f = (np.arange(12, dtype=np.float32) * np.float32(0.25) - np.float32(1.5)).reshape(3, 4)
    return {
        "w.f32": f,
        "b.i32": np.arange(5, dtype=np.int32) * 100003 - 200000,
        "h.f16": (np.arange(6, dtype=np.float16) * np.float16(0.5) - np.float16(1)).reshape(2, 3),
        "m.u8": ((np.arange(8) * 37) % 256).astype(np.uint8).reshape(2, 2, 2),
        "s.f32": np.array(3.25, dtype=np.float32),
        "e.f32": np.zeros((0, 4), dtype=np.float32),
    }


def bf16_bits():
    f = np.arange(4, dtype=np.float32) * np.float32(0.5) - np.float32(1)
    return (f.view(np.uint32) >> 16).astype(np.uint16)  # exact values: truncation is rounding


def same(name, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        sys.exit(f"tensor {name!r}: got {got.dtype}{list(got.shape)} {got.ravel()[:8]}, "
                 f"want {want.dtype}{list(want.shape)} {want.ravel()[:8]}")


def check(d):
    got = load_file(f"{d}/brisk.safetensors")
    want = expected()
    if sorted(got) != sorted(want):
        sys.exit(f"brisk.safetensors: names {sorted(got)}, want {sorted(want)}")
    for k in want:
        same(k, got[k], want[k])
    with safetensors.safe_open(f"{d}/brisk.safetensors", framework="np") as fh:
        if fh.metadata() != META:
            sys.exit(f"brisk.safetensors: metadata {fh.metadata()}, want {META}")
    with open(f"{d}/brisk_bf16.safetensors", "rb") as fh:
        raw = dict(safetensors.deserialize(fh.read()))
    bf = raw["bf.bf16"]
    if bf["dtype"] != "BF16" or list(bf["shape"]) != [4]:
        sys.exit(f"bf.bf16: {bf['dtype']} {bf['shape']}")
    same("bf.bf16", np.frombuffer(bytes(bf["data"]), dtype=np.uint16), bf16_bits())
    same("w.f32 (bf16 file)", np.frombuffer(bytes(raw["w.f32"]["data"]), dtype=np.float32).reshape(3, 4),
         want["w.f32"])
    print("python read brisk's files: ok")


def write(d):
    save_file(expected(), f"{d}/py.safetensors", metadata=META)
    bits = bf16_bits()
    f = expected()["w.f32"]
    if hasattr(safetensors, "TensorSpec"):  # 0.6+: pointers into live arrays
        spec = {
            "bf.bf16": safetensors.TensorSpec(dtype="bfloat16", shape=[4], data_ptr=bits.ctypes.data,
                                              data_len=bits.nbytes),
            "w.f32": safetensors.TensorSpec(dtype="float32", shape=[3, 4], data_ptr=f.ctypes.data,
                                            data_len=f.nbytes),
        }
    else:  # older releases take the bytes themselves
        spec = {
            "bf.bf16": {"dtype": "bfloat16", "shape": [4], "data": bits.tobytes()},
            "w.f32": {"dtype": "float32", "shape": [3, 4], "data": f.tobytes()},
        }
    safetensors.serialize_file(spec, f"{d}/py_bf16.safetensors")
    print("python wrote its files: ok")


if __name__ == "__main__":
    {"check": check, "write": write}[sys.argv[1]](sys.argv[2])
