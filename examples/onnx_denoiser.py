#!/usr/bin/env python3
"""A PyTorch denoiser for the online examples (examples/fortran/online.F90 MODEL.onnx): an MLP
from a column's coarse field (7 block means, input "coarse") to its fine field (256 values,
output "fine_hat"), exported in training mode as brisk imports it (docs/onnx.md). The session
then trains it online on the simulation's samples, the target "fine" the clean field.

  onnx_denoiser.py OUT.onnx
Exit 77 (skip) when PyTorch is unavailable."""
import sys


def main():
    try:
        import torch
    except ImportError as e:
        print("SKIP: %s" % e)
        return 77
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(7, 256), nn.SiLU(), nn.Linear(256, 256), nn.SiLU(), nn.Linear(256, 256))
    torch.onnx.export(net, torch.randn(2, 7), sys.argv[1], opset_version=17, input_names=["coarse"],
                      output_names=["fine_hat"], dynamic_axes={"coarse": {0: "N"}, "fine_hat": {0: "N"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
