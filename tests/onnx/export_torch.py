#!/usr/bin/env python3
"""Exports small PyTorch modules with torch.onnx.export for brisk's ONNX reader tests
(tests/onnx/test_onnx_torch.c), and beside each NAME.onnx the module's state_dict: NAME.keys
(one key per line, in order) and NAME.<key>.npy per tensor (float32).

  export_torch.py OUT_DIR
Exit 77 (skip) when PyTorch or NumPy is unavailable."""
import os
import sys


def models(torch):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class CNN(nn.Module):
        """Conv, pooling, and a reshape by the run-time batch size: Shape, Gather, Constant and
        Concat nodes, whose constants are tensor attributes."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.head = nn.Linear(16, 5)

        def forward(self, x):
            y = self.pool(torch.relu(self.conv(x)))
            return self.head(y.reshape(x.shape[0], -1))

    # name, module, example input, opset
    return [("mlp", MLP(), torch.randn(2, 6), 13), ("cnn", CNN(), torch.randn(2, 2, 4, 4), 17)]


def main():
    try:
        import numpy as np
        import torch
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, m, x, opset in models(torch):
        m.eval()
        torch.onnx.export(m, x, os.path.join(out, name + ".onnx"), opset_version=opset, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        sd = m.state_dict()
        with open(os.path.join(out, name + ".keys"), "w") as f:
            f.write("".join(k + "\n" for k in sd))
        for k, v in sd.items():
            np.save(os.path.join(out, f"{name}.{k}.npy"), v.detach().numpy().astype(np.float32))
    print(f"exported with torch {torch.__version__} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
