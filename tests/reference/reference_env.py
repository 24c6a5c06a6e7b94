"""What the PyTorch reference checks share: NumPy and PyTorch (one thread, so sums run in one
order) with bench/reference on sys.path, or None after saying why (the caller exits 77: skip)."""
import os
import sys


def load():
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"SKIP: {e} (install python3-torch and python3-numpy)")
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "reference"))
    torch.set_num_threads(1)
    return np, torch
