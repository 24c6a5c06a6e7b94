"""The six workloads of bench/WORKLOADS.md in PyTorch: each one's model, batch, synthetic data
and optimizer, for bench/reference/timed.py and bench/torch_timed.py.

The data is random and generated once from seed 0 (the timed step is the training step, not
reading or generating data), in eight batches that the timing loop cycles through. brisk's side
(bench/workload.c) does the same with its own generator; the two see data of the same shapes
and distribution, not the same numbers, which is all a speed comparison needs.
"""
import torch

import models

WORKLOADS = ("diffusion", "tabular", "lstm", "transformer", "resnet", "meshgnn")

# The image and graph workloads train at a lower learning rate (bench/WORKLOADS.md).
LR = {"resnet": 1e-4, "meshgnn": 1e-4}
# Gradient-norm clipping: part of the resnet workload's step, so it is timed too.
CLIP_NORM = {"resnet": 1.0}


def lr(name):
    return LR.get(name, 1e-3)


def build(name, small, device, n_batches=8):
    """Returns (model, batch size, list of input tuples resident on the device).
    small: the CPU sizes of bench/WORKLOADS.md (resnet and meshgnn only; the rest have one size)."""
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g)

    def labels(n, b):
        return torch.randint(0, 3, (n, b), generator=g)

    if name == "diffusion":
        b, model = 16, models.Denoiser()
        data = [(rnd(b, 7), rnd(b, 256)) for _ in range(n_batches)]
    elif name == "tabular":
        b, model = 512, models.Tabular()
        ys = labels(n_batches, b)
        data = [(rnd(b, 64), ys[i]) for i in range(n_batches)]
    elif name in ("lstm", "transformer"):
        b = 256
        model = models.LSTMClassifier() if name == "lstm" else models.TransformerClassifier()
        ys = labels(n_batches, b)
        data = [(rnd(b, 60, 32), ys[i]) for i in range(n_batches)]
    elif name == "resnet":
        b, hw = (4, 64) if small else (16, 256)
        model = models.ResNet18Keypoints()
        data = [(rnd(b, 3, hw, hw), rnd(b, 34)) for _ in range(n_batches)]
    elif name == "meshgnn":
        b = 8
        grid, mesh, latent, layers = (16, 8, 64, 4) if small else (64, 32, 256, 16)
        model = models.MeshGNN(grid, mesh, latent, layers)
        data = [(rnd(b, grid * grid, 20), rnd(b, grid * grid, 8)) for _ in range(n_batches)]
    else:
        raise SystemExit(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    model = model.to(device)
    data = [tuple(t.to(device) for t in batch) for batch in data]
    return model, b, data


def make_optimizer(model, lr, device):
    """AdamW as every workload uses it, in the fastest implementation the PyTorch at hand offers
    (fused on CUDA, else foreach, else the per-parameter loop), so that PyTorch is timed at its
    best. Returns (optimizer, which implementation)."""
    kwargs = dict(lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(model.parameters(), fused=True, **kwargs), "fused"
        except (TypeError, RuntimeError):
            pass
    try:
        return torch.optim.AdamW(model.parameters(), foreach=True, **kwargs), "foreach"
    except TypeError:
        return torch.optim.AdamW(model.parameters(), **kwargs), "for-loop"
