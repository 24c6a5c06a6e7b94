"""brisk: fast neural-network training in C, from Python.

    summary, ckpt = brisk.train("examples/tabular.json")      # a whole run, with a progress bar
    weights = brisk.load(ckpt)                                  # {"net.0.weight": tensor, ...}
    summary = brisk.from_torch(module, x, config)               # a torch module trained through ONNX
    module.load_state_dict(brisk.load(summary["out_dir"]))
    with brisk.Session({"model": {...}}) as s:                 # online training from NumPy
        s.push(x, y); s.train_epochs(1); p = s.predict(x)

Errors raise brisk.BriskError carrying brisk's message. The library is libbrisk.so, beside
this package after `pip install ./python`, or the one BRISK_LIBRARY names.
"""
from ._lib import BriskError
from .checkpoint import load, metadata
from .session import Session
from .torch_bridge import from_torch
from .train import train

__all__ = ["BriskError", "Session", "from_torch", "load", "metadata", "train"]
__version__ = "0.1.0"
