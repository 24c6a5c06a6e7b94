#!/usr/bin/env python3
"""PyTorch's side of bench/conv_layers.c: the same ResNet-18 conv shapes, forward, grad x
and grad w (torch.ops.aten.convolution_backward, one of them at a time), then the stem's
BatchNorm + ReLU and max pool, median of repeats.

  /usr/bin/python3 bench/conv_layers_torch.py [threads] [full]"""
import statistics, sys, time
import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 0
full = len(sys.argv) > 2 and sys.argv[2] == "full"
if threads:
    torch.set_num_threads(threads)
N, s0 = (16, 256) if full else (4, 64)
layers = [("stem 7x7/2     ", 3, 64, s0, 7, 2, 1), ("l1 3x3 64      ", 64, 64, s0 // 4, 3, 1, 4),
          ("l2 3x3/2 64>128", 64, 128, s0 // 4, 3, 2, 1), ("l2 3x3 128     ", 128, 128, s0 // 8, 3, 1, 3),
          ("l2 down 1x1/2  ", 64, 128, s0 // 4, 1, 2, 1), ("l3 3x3/2 >256  ", 128, 256, s0 // 8, 3, 2, 1),
          ("l3 3x3 256     ", 256, 256, s0 // 16, 3, 1, 3), ("l3 down 1x1/2  ", 128, 256, s0 // 8, 1, 2, 1),
          ("l4 3x3/2 >512  ", 256, 512, s0 // 16, 3, 2, 1), ("l4 3x3 512     ", 512, 512, s0 // 32, 3, 1, 3),
          ("l4 down 1x1/2  ", 256, 512, s0 // 16, 1, 2, 1)]
print(f"torch {torch.__version__} conv layers, batch {N}, input {s0}x{s0} (threads {torch.get_num_threads()})")
print("layer             fwd us  GF/s   dx us  GF/s   dw us  GF/s")
total = 0.0


def med(fn, inner):
    fn()
    s = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        s.append((time.perf_counter() - t0) / inner * 1e6)
    return statistics.median(s)


with torch.no_grad():
    for i, (what, cin, cout, hw, k, st, count) in enumerate(layers):
        x, w = torch.rand(N, cin, hw, hw) - 0.5, torch.rand(cout, cin, k, k) - 0.5
        y = torch.nn.functional.conv2d(x, w, stride=st, padding=k // 2)
        dy = torch.rand_like(y)
        flop = 2.0 * y.numel() * cin * k * k
        inner = 20 if flop < 2e7 else 3
        bw = lambda mask: torch.ops.aten.convolution_backward(dy, x, w, None, [st, st], [k // 2, k // 2], [1, 1],
                                                              False, [0, 0], 1, mask)
        us = [med(lambda: torch.nn.functional.conv2d(x, w, stride=st, padding=k // 2), inner),
              med(lambda: bw([True, False, False]), inner), med(lambda: bw([False, True, False]), inner)]
        print(f"{what} {us[0]:8.0f} {flop / us[0] * 1e-3:5.1f} {us[1]:7.0f} {flop / us[1] * 1e-3:5.1f} "
              f"{us[2]:7.0f} {flop / us[2] * 1e-3:5.1f}")
        total += count * (us[0] + (us[1] if i else 0) + us[2])
print(f"all convs of one step (fwd + dx + dw, by count): {total * 1e-3:.1f} ms")

# the stem's BatchNorm + ReLU (training) and 3x3/2 max pool, forward and backward
S = s0 // 2
bn = torch.nn.BatchNorm2d(64)
x = (torch.rand(N, 64, S, S) - 0.5).requires_grad_()
y = torch.relu(bn(x))
dy = torch.rand_like(y)
p = torch.nn.functional.max_pool2d(x, 3, 2, 1)
dp = torch.rand_like(p)
us = [med(lambda: torch.relu(bn(x)), 10), med(lambda: torch.autograd.grad(y, [x, bn.weight, bn.bias], dy, retain_graph=True), 10),
      med(lambda: torch.nn.functional.max_pool2d(x, 3, 2, 1), 10),
      med(lambda: torch.autograd.grad(p, x, dp, retain_graph=True), 10)]
print(f"[{N}, 64, {S}, {S}]: bn+relu fwd {us[0]:.0f} us, bn+relu backward (x, weight, bias) {us[1]:.0f} us, "
      f"maxpool fwd {us[2]:.0f} us, maxpool grad {us[3]:.0f} us")
